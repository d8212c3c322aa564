/* A 1-D Jacobi solver that checkpoints with kumi.h, for the checkpoint and
 * restart tests: its result must be bit for bit that of an uninterrupted
 * run however often its ranks are killed and the job restarted.
 *
 *   jacobi_ckpt N STEPS EVERY [SLEEP_US]
 * N points per rank; STEPS sweeps; a checkpoint every EVERY sweeps (0: when
 * kumi says one is due); SLEEP_US microseconds of pretend work per sweep.
 * With JACOBI_PIDS=DIR set, each rank writes its pid to DIR/pid-<rank> at
 * start (for a test to kill it). Prints one line from rank 0:
 *   result steps=S sum=... bits=<xor of every value's bits> restored=E
 */
#include <mpi.h>
#include <kumi.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct progress {
    long step;
    long checkpoints;
};

static int write_progress(kumi_ckpt_stream *s, void *arg) {
    return kumi_ckpt_write(s, arg, sizeof(struct progress));
}

static int read_progress(kumi_ckpt_stream *s, void *arg) {
    return kumi_ckpt_read(s, arg, sizeof(struct progress));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: jacobi_ckpt N STEPS EVERY [SLEEP_US]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long n = atol(argv[1]), steps = atol(argv[2]), every = atol(argv[3]);
    long sleep_us = argc > 4 ? atol(argv[4]) : 0;
    const char *pids = getenv("JACOBI_PIDS");
    if (pids) {
        char path[4096];
        snprintf(path, sizeof path, "%s/pid-%d", pids, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    /* u[0] and u[n+1] are halos; the global ends are held at 1 and 0. */
    double *u = calloc(n + 2, sizeof *u), *v = calloc(n + 2, sizeof *v);
    for (long i = 1; i <= n; i++)
        u[i] = (double)((rank * n + i) % 7) / 7.0;
    struct progress p = {0, 0};
    kumi_ckpt_register(u + 1, n * sizeof *u);
    kumi_ckpt_register_io(write_progress, read_progress, &p);
    int restored = 0;
    kumi_ckpt_restore(&restored);
    long long epoch = 0;
    kumi_ckpt_epoch(&epoch);
    if (restored && rank == 0)
        fprintf(stderr, "jacobi: restored checkpoint %lld at step %ld\n", epoch, p.step);
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    while (p.step < steps) {
        u[0] = 1.0;
        u[n + 1] = 0.0;
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[n + 1], 1, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank == 0) u[0] = 1.0;
        if (rank == size - 1) u[n + 1] = 0.0;
        for (long i = 1; i <= n; i++)
            v[i] = 0.5 * (u[i - 1] + u[i + 1]);
        memcpy(u + 1, v + 1, n * sizeof *u);
        if (sleep_us) usleep(sleep_us);
        p.step++;
        int due = 0;
        if (every > 0)
            due = p.step % every == 0;
        else
            kumi_ckpt_due(&due);
        if (due && p.step < steps) {
            p.checkpoints++;
            kumi_ckpt_save();
        }
    }
    double local = 0, sum = 0;
    uint64_t bits = 0, all = 0;
    for (long i = 1; i <= n; i++) {
        uint64_t b;
        memcpy(&b, &u[i], sizeof b);
        bits ^= b * (uint64_t)(rank * n + i + 1);
        local += u[i];
    }
    MPI_Reduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bits, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("result steps=%ld sum=%.17g bits=%016" PRIx64 "\n", p.step, sum, all);
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}
