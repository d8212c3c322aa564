/* Fixed-count kernels through the MPI C ABI: the twin of
 * crates/kumi/examples/probe.rs (same loops, same tags), for
 * scripts/count-instructions.sh and for A/B timing.
 *
 *   kumi cc -O2 probe.c -o probe && kumi run -n 2 ./probe pingpong|rate|barrier|allreduce|iallreduce|allreduce1m|allgather|iallgather|gather|gatherv|scatter|scatterv|bcast|reduce [count] [size]
 *
 * `size` (default 8, at most 1 MiB) is the message size of pingpong and
 * rate, the block per rank of the rooted collectives (root 0) and of the
 * allgathers (the nonblocking ones started and waited for at once), and the
 * bytes of bcast and of reduce (a sum of doubles, rounded down to whole
 * ones). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *kernel = argc > 1 ? argv[1] : "pingpong";
    long count = argc > 2 ? atol(argv[2]) : 20000;
    long size = argc > 3 ? atol(argv[3]) : 8;
    if (size < 0 || size > (1 << 20)) {
        fprintf(stderr, "probe: size %ld is out of range (0 to 1048576)\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (np < 2 && (!strcmp(kernel, "pingpong") || !strcmp(kernel, "rate"))) {
        fprintf(stderr, "probe pingpong|rate needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = calloc((size_t)size + 1, 1);
    /* The rooted collectives: the root's side of np blocks, the counts and
     * displacements of the v-forms. */
    char *all = calloc((size_t)size * (size_t)np + 1, 1);
    int *counts = malloc((size_t)np * sizeof *counts), *displs = malloc((size_t)np * sizeof *displs);
    for (int r = 0; r < np; r++) {
        counts[r] = (int)size;
        displs[r] = r * (int)size;
    }
    MPI_Request q[64];
    long per;
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    if (!strcmp(kernel, "pingpong")) {
        for (long i = 0; i < count; i++) {
            if (me == 0) {
                MPI_Send(buf, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (me == 1) {
                MPI_Recv(buf, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
            }
        }
        per = 2 * count;
    } else if (!strcmp(kernel, "rate")) {
        for (long i = 0; i < count; i++) {
            if (me == 0) {
                for (int k = 0; k < 64; k++) MPI_Isend(buf, (int)size, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &q[k]);
                MPI_Waitall(64, q, MPI_STATUSES_IGNORE);
                MPI_Recv(buf, 0, MPI_BYTE, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (me == 1) {
                for (int k = 0; k < 64; k++) MPI_Irecv(buf, (int)size, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &q[k]);
                MPI_Waitall(64, q, MPI_STATUSES_IGNORE);
                MPI_Send(buf, 0, MPI_BYTE, 0, 4, MPI_COMM_WORLD);
            }
        }
        per = 64 * count;
    } else if (!strcmp(kernel, "barrier")) {
        for (long i = 0; i < count; i++) MPI_Barrier(MPI_COMM_WORLD);
        per = count;
    } else if (!strcmp(kernel, "allreduce")) {
        double x = me, y = 0;
        for (long i = 0; i < count; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (y != (double)np * (np - 1) / 2) {
            fprintf(stderr, "probe: allreduce gave %g\n", y);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        per = count;
    } else if (!strcmp(kernel, "allreduce1m")) {
        /* In place, 1 MiB of doubles, as kumi bench coll does. */
        size_t n = 1 << 17;
        double *big = malloc(n * sizeof *big);
        for (size_t i = 0; i < n; i++) big[i] = 1.0;
        for (long i = 0; i < count; i++) MPI_Allreduce(MPI_IN_PLACE, big, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        free(big);
        per = count;
    } else if (!strcmp(kernel, "iallreduce")) {
        double x = me, y = 0;
        MPI_Request q;
        for (long i = 0; i < count; i++) {
            MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        }
        per = count;
    } else if (!strcmp(kernel, "allgather")) {
        for (long i = 0; i < count; i++) MPI_Allgather(buf, (int)size, MPI_BYTE, all, (int)size, MPI_BYTE, MPI_COMM_WORLD);
        per = count;
    } else if (!strcmp(kernel, "iallgather")) {
        MPI_Request q;
        for (long i = 0; i < count; i++) {
            MPI_Iallgather(buf, (int)size, MPI_BYTE, all, (int)size, MPI_BYTE, MPI_COMM_WORLD, &q);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        }
        per = count;
    } else if (!strcmp(kernel, "gather")) {
        for (long i = 0; i < count; i++) MPI_Gather(buf, (int)size, MPI_BYTE, all, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
        per = count;
    } else if (!strcmp(kernel, "gatherv")) {
        for (long i = 0; i < count; i++) MPI_Gatherv(buf, (int)size, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
        per = count;
    } else if (!strcmp(kernel, "scatter")) {
        for (long i = 0; i < count; i++) MPI_Scatter(all, (int)size, MPI_BYTE, buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
        per = count;
    } else if (!strcmp(kernel, "scatterv")) {
        for (long i = 0; i < count; i++) MPI_Scatterv(all, counts, displs, MPI_BYTE, buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
        per = count;
    } else if (!strcmp(kernel, "bcast")) {
        for (long i = 0; i < count; i++) MPI_Bcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
        per = count;
    } else if (!strcmp(kernel, "reduce")) {
        int n = (int)(size / (long)sizeof(double));
        double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
        for (long i = 0; i < count; i++) MPI_Reduce(x, y, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        free(x);
        free(y);
        per = count;
    } else {
        fprintf(stderr, "probe: unknown kernel \"%s\": pingpong, rate, barrier, allreduce, iallreduce, allreduce1m, allgather, iallgather, gather, gatherv, scatter, scatterv, bcast or reduce\n", kernel);
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }
    if (me == 0)
        printf("c %s: %.3f us per message (or call)\n", kernel, (MPI_Wtime() - t) * 1e6 / (double)per);
    free(buf);
    free(all);
    free(counts);
    free(displs);
    MPI_Finalize();
    return 0;
}
