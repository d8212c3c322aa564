/* A program that ends as the NAS Parallel Benchmarks do (their closing block:
 * Class, Mop/s total, Verification), for the tests of `kumi bench apps`. It
 * does real work and checks it: an MPI_Alltoallv of uneven blocks, every
 * element checked, and it calls itself verified only with two ranks or more
 * (an MPICH build that ran on the wrong library starts as singletons).
 *   -DFAIL_CHECK  prints "Verification = UNSUCCESSFUL" whatever happened;
 *   -DHANG        never ends (for the runner's time limit), and rank 0
 *                 leaves a process of its own behind in a session of its
 *                 own, as MPICH's hydra does with its proxies: out of reach
 *                 of the launcher's process group, which the runner must
 *                 end all the same. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifdef HANG
    if (rank == 0 && fork() == 0) {
        setsid();
        for (;;)
            pause();
    }
    for (;;)
        pause();
#endif
    int *scount = malloc(size * sizeof(int)), *sdispl = malloc(size * sizeof(int));
    int *rcount = malloc(size * sizeof(int)), *rdispl = malloc(size * sizeof(int));
    int stotal = 0, rtotal = 0;
    for (int j = 0; j < size; j++) {
        scount[j] = 1000 * (rank + 1) + j; /* what rank sends to j */
        rcount[j] = 1000 * (j + 1) + rank; /* what j sends to rank */
        sdispl[j] = stotal;
        rdispl[j] = rtotal;
        stotal += scount[j];
        rtotal += rcount[j];
    }
    int *sbuf = malloc(stotal * sizeof(int)), *rbuf = malloc(rtotal * sizeof(int));
    for (int j = 0; j < size; j++)
        for (int k = 0; k < scount[j]; k++)
            sbuf[sdispl[j] + k] = rank * 1000003 + j * 1009 + k;
    int ok = 1, reps = 50;
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) {
        MPI_Alltoallv(sbuf, scount, sdispl, MPI_INT, rbuf, rcount, rdispl, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < size; i++)
            for (int k = 0; k < rcount[i]; k++)
                ok &= rbuf[rdispl[i] + k] == i * 1000003 + rank * 1009 + k;
    }
    double t = MPI_Wtime() - t0;
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
#ifdef FAIL_CHECK
    all = 0;
#endif
    if (rank == 0) {
        printf("\n NPB-like Benchmark Completed.\n");
        printf(" Class           =                        S\n");
        printf(" Total processes =             %12d\n", size);
        printf(" Mop/s total     =             %12.2f\n", reps * (double)rtotal * size / t / 1e6);
        printf(" Verification    =             %12s\n", all && size >= 2 ? "SUCCESSFUL" : "UNSUCCESSFUL");
    }
    free(sbuf); free(rbuf); free(scount); free(sdispl); free(rcount); free(rdispl);
    MPI_Finalize();
    return 0;
}
