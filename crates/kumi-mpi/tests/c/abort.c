/* Concern: MPI_Abort ends the whole job with its error code. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = kt_size();
    if (kt_rank() == n - 1) MPI_Abort(MPI_COMM_WORLD, 7);
    MPI_Barrier(MPI_COMM_WORLD);   /* the others wait here until stopped */
    printf("NOT REACHED\n");
    MPI_Finalize();
    return 0;
}
