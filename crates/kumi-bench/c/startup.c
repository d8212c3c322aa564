/* kumi bench startup: the program whose start-up is timed. argv[1] is the
 * moment the launcher was started (CLOCK_REALTIME, nanoseconds); rank 0
 * prints how long after it the first MPI_Barrier was passed. Nothing else,
 * so the exit time is the stack's start-up and shut-down alone. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0 && argc > 1) {
        long long t0 = atoll(argv[1]);
        long long t = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
        printf("barrier_s %.6f\n", (double)(t - t0) * 1e-9);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
