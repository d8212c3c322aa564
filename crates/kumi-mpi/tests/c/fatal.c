/* Concern: MPI_ERRORS_ARE_FATAL (the default) ends the job with a message
 * naming the function and the rank. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int x = 0, n = kt_size();
    if (kt_rank() == n - 1) MPI_Send(&x, 1, MPI_INT, n + 5, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("NOT REACHED\n");
    MPI_Finalize();
    return 0;
}
