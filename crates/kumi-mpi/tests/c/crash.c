/* Rank 1 fails outside any MPI call, as argv[1] says: `segv` (a null
 * pointer write), `exit` (exit(3) without MPI_Finalize) or `kill` (SIGKILL
 * to itself). The other ranks wait in a barrier for it and must be ended by
 * whoever supervises the job; none may print that it passed. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *how = argc > 1 ? argv[1] : "segv";
    if (rank == 1) {
        if (!strcmp(how, "segv")) {
            volatile int *p = NULL;
            *p = 1;
        } else if (!strcmp(how, "exit")) {
            exit(3);
        } else if (!strcmp(how, "kill")) {
            raise(SIGKILL);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d passed the barrier\n", rank);
    MPI_Finalize();
    return 0;
}
