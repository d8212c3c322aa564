/* A job that runs for a while in small steps: argv[1] steps (default 400),
 * each 10 ms of sleep then an MPI_Allreduce and a ring exchange, then a
 * check of every sum. For the tests of a job stopped and resumed as a whole
 * (Slurm's suspend, gang scheduling): it must finish with the right answer,
 * no rank declared lost and no deadlock reported. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long steps = argc > 1 ? atol(argv[1]) : 400, bad = 0;
    for (long i = 0; i < steps; i++) {
        usleep(10000);
        long v = rank + i, sum = 0;
        MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        bad += sum != (long)size * (size - 1) / 2 + (long)size * i;
        long out = rank * 1000 + i, in = -1;
        MPI_Sendrecv(&out, 1, MPI_LONG, (rank + 1) % size, 3, &in, 1, MPI_LONG,
                     (rank + size - 1) % size, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad += in != ((rank + size - 1) % size) * 1000 + i;
        if (rank == 0 && i % 100 == 0) {
            printf("step %ld\n", i);
            fflush(stdout);
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(bad ? "ticks FAILED: %ld wrong\n" : "ticks ok%.0ld\n", bad);
    MPI_Finalize();
    return bad != 0;
}
