/* The C twin of kumi's micro-benchmarks, in standard MPI only, so the same code
 * can be built against MPICH, Open MPI or kumi's own libmpi and compared.
 *
 *   micro pingpong|bw|rate|ring|coll [max_size] [reps] [rep_ms] [ops [leave-out-wrong]]
 *
 * Prints, on rank 0, one JSON object per line in kumi bench's format:
 *   {"bench": "...", "np": N, "size": BYTES, "metric": "...", "value": X}
 * Method (identical to kumi-bench's Rust kernels): each figure is the median of
 * `reps` timed repetitions, each about `rep_ms` long after a calibration run; the
 * payload of each size is verified once. bw/rate: windows of 64 MPI_Isend from
 * one buffer and one MPI_Waitall on the sender, 64 MPI_Irecv posted before one
 * MPI_Waitall on the receiver, each window acknowledged by a zero-byte message
 * (as OSU's osu_bw and osu_mbw_mr do). The receives share one buffer here, as
 * in OSU; the Rust kernel, whose borrows forbid that, gives each its own slot
 * (and for messages over 1 MiB waits for them in groups that fit 64 MiB). ring: an 8-byte token passed around
 * all ranks; the figure is the time per hop.
 * coll: every collective of kumi-bench's coll.rs (`ops`, comma-separated, or
 * "all") at every power of two from 8 B to max_size, on all ranks, with
 * coll.rs's method: a barrier, then `iters` calls timed, the slowest rank's
 * mean per call (max over ranks); calibrated by growing `iters` 4x until a run
 * takes a tenth of a repetition; the median (upper median, as coll.rs) of
 * `reps` repetitions. Each record carries an "op" field; each operation's
 * result at each size is checked once first: a wrong one aborts the job, or
 * with "leave-out-wrong" (a reference stack's known bug should not cost the
 * other operations' figures) leaves the operation's larger sizes out, saying
 * so on stderr. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

static int rank, np, participants = 2;

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void pattern(unsigned char *b, size_t n, unsigned char seed) {
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 31 + seed);
}

static void verify(const unsigned char *b, size_t n, unsigned char seed, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(i * 31 + seed)) {
            fprintf(stderr, "micro: %s: wrong byte at offset %zu of %zu\n", what, i, n);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
}

typedef double (*kernel)(unsigned char *buf, size_t size, long iters);

static double run_pingpong(unsigned char *buf, size_t size, long iters) {
    double t = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t;
}

static double run_stream(unsigned char *buf, size_t size, long iters) {
    MPI_Request req[WINDOW];
    double t = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        for (int w = 0; w < WINDOW; w++) {
            if (rank == 0)
                MPI_Isend(buf, (int)size, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &req[w]);
            else
                MPI_Irecv(buf, (int)size, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        if (rank == 0)
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(NULL, 0, MPI_BYTE, 0, 4, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - t;
}

static double run_ring(unsigned char *buf, size_t size, long iters) {
    int next = (rank + 1) % np, prev = (rank + np - 1) % np;
    double t = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, (int)size, MPI_BYTE, next, 5, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)size, MPI_BYTE, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)size, MPI_BYTE, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)size, MPI_BYTE, next, 5, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t;
}

/* Same calibration as kumi-bench: grow by 4x until a run takes a tenth of the
 * target, then scale; rank 0 decides and tells rank 1. */
static long calibrate(kernel k, unsigned char *buf, size_t size, double seconds) {
    long iters = 1;
    for (;;) {
        double t = k(buf, size, iters);
        long decision[2];
        if (rank == 0) {
            int done = t > seconds / 10 || iters >= (1L << 24);
            double next = done ? seconds / (t > 1e-9 ? t : 1e-9) * iters : iters * 4.0;
            if (next < 1) next = 1;
            if (next > 1e8) next = 1e8;
            decision[0] = done;
            decision[1] = (long)next;
            for (int r = 1; r < participants; r++)
                MPI_Send(decision, 2, MPI_LONG, r, 901, MPI_COMM_WORLD);
        } else {
            MPI_Recv(decision, 2, MPI_LONG, 0, 901, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        if (decision[0]) return decision[1];
        iters = decision[1];
    }
}

/* ---- coll ---------------------------------------------------------------- */

/* The operations, in kumi-bench's coll.rs's order and names. Sizes are bytes
 * per rank: the whole buffer of bcast and of the reductions (doubles, summed),
 * each rank's block of the gathers and scatters, each pair's block of the
 * all-to-alls, each neighbour's block on a periodic ring (a 1-D Cartesian
 * communicator); the v and w forms with the same counts as the plain ones. */
enum {
    C_BARRIER, C_BCAST, C_REDUCE, C_ALLREDUCE, C_REDUCE_SCATTER_BLOCK, C_REDUCE_SCATTER,
    C_SCAN, C_EXSCAN, C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV, C_ALLGATHER, C_ALLGATHERV,
    C_ALLTOALL, C_ALLTOALLV, C_ALLTOALLW, C_NEIGHBOR_ALLGATHER, C_NEIGHBOR_ALLTOALL,
    C_IBARRIER, C_IBCAST, C_IREDUCE, C_IALLREDUCE, C_IGATHER, C_ISCATTER, C_IALLGATHER,
    C_IALLTOALL, C_IREDUCE_SCATTER_BLOCK, C_IREDUCE_SCATTER, C_ISCAN, C_IEXSCAN, C_IGATHERV,
    C_ISCATTERV, C_IALLGATHERV, C_IALLTOALLV, C_IALLTOALLW, C_INEIGHBOR_ALLGATHER,
    C_INEIGHBOR_ALLTOALL, C_COUNT
};
static const char *coll_op[C_COUNT] = {
    "barrier", "bcast", "reduce", "allreduce", "reduce_scatter_block", "reduce_scatter",
    "scan", "exscan", "gather", "gatherv", "scatter", "scatterv", "allgather", "allgatherv",
    "alltoall", "alltoallv", "alltoallw", "neighbor_allgather", "neighbor_alltoall",
    "ibarrier", "ibcast", "ireduce", "iallreduce", "igather", "iscatter", "iallgather",
    "ialltoall", "ireduce_scatter_block", "ireduce_scatter", "iscan", "iexscan", "igatherv",
    "iscatterv", "iallgatherv", "ialltoallv", "ialltoallw", "ineighbor_allgather",
    "ineighbor_alltoall"};
static unsigned char *c_s, *c_r;
static int *c_counts, *c_displs;
static MPI_Datatype *c_types;
static MPI_Comm c_ring;

static void coll_call(int op, size_t size) {
    MPI_Comm w = MPI_COMM_WORLD;
    int b = (int)size, n = (int)(size < 8 ? 1 : size / 8);
    double *sd = (double *)c_s, *rd = (double *)c_r;
    MPI_Request q = MPI_REQUEST_NULL;
    for (int i = 0; i < np; i++) {
        c_counts[i] = b;
        c_displs[i] = i * b;
    }
    switch (op) {
    case C_BARRIER: MPI_Barrier(w); break;
    case C_BCAST: MPI_Bcast(c_r, b, MPI_BYTE, 0, w); break;
    case C_REDUCE: MPI_Reduce(sd, rd, n, MPI_DOUBLE, MPI_SUM, 0, w); break;
    case C_ALLREDUCE: MPI_Allreduce(sd, rd, n, MPI_DOUBLE, MPI_SUM, w); break;
    case C_REDUCE_SCATTER_BLOCK: MPI_Reduce_scatter_block(sd, rd, n, MPI_DOUBLE, MPI_SUM, w); break;
    case C_REDUCE_SCATTER:
        for (int i = 0; i < np; i++) c_counts[i] = n;
        MPI_Reduce_scatter(sd, rd, c_counts, MPI_DOUBLE, MPI_SUM, w);
        break;
    case C_SCAN: MPI_Scan(sd, rd, n, MPI_DOUBLE, MPI_SUM, w); break;
    case C_EXSCAN: MPI_Exscan(sd, rd, n, MPI_DOUBLE, MPI_SUM, w); break;
    case C_GATHER: MPI_Gather(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, 0, w); break;
    case C_GATHERV: MPI_Gatherv(c_s, b, MPI_BYTE, c_r, c_counts, c_displs, MPI_BYTE, 0, w); break;
    case C_SCATTER: MPI_Scatter(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, 0, w); break;
    case C_SCATTERV: MPI_Scatterv(c_s, c_counts, c_displs, MPI_BYTE, c_r, b, MPI_BYTE, 0, w); break;
    case C_ALLGATHER: MPI_Allgather(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, w); break;
    case C_ALLGATHERV: MPI_Allgatherv(c_s, b, MPI_BYTE, c_r, c_counts, c_displs, MPI_BYTE, w); break;
    case C_ALLTOALL: MPI_Alltoall(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, w); break;
    case C_ALLTOALLV:
        MPI_Alltoallv(c_s, c_counts, c_displs, MPI_BYTE, c_r, c_counts, c_displs, MPI_BYTE, w);
        break;
    case C_ALLTOALLW:
        MPI_Alltoallw(c_s, c_counts, c_displs, c_types, c_r, c_counts, c_displs, c_types, w);
        break;
    case C_NEIGHBOR_ALLGATHER: MPI_Neighbor_allgather(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, c_ring); break;
    case C_NEIGHBOR_ALLTOALL: MPI_Neighbor_alltoall(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, c_ring); break;
    case C_IBARRIER: MPI_Ibarrier(w, &q); break;
    case C_IBCAST: MPI_Ibcast(c_r, b, MPI_BYTE, 0, w, &q); break;
    case C_IREDUCE: MPI_Ireduce(sd, rd, n, MPI_DOUBLE, MPI_SUM, 0, w, &q); break;
    case C_IALLREDUCE: MPI_Iallreduce(sd, rd, n, MPI_DOUBLE, MPI_SUM, w, &q); break;
    case C_IGATHER: MPI_Igather(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, 0, w, &q); break;
    case C_ISCATTER: MPI_Iscatter(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, 0, w, &q); break;
    case C_IALLGATHER: MPI_Iallgather(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, w, &q); break;
    case C_IALLTOALL: MPI_Ialltoall(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, w, &q); break;
    case C_IREDUCE_SCATTER_BLOCK: MPI_Ireduce_scatter_block(sd, rd, n, MPI_DOUBLE, MPI_SUM, w, &q); break;
    case C_IREDUCE_SCATTER:
        for (int i = 0; i < np; i++) c_counts[i] = n;
        MPI_Ireduce_scatter(sd, rd, c_counts, MPI_DOUBLE, MPI_SUM, w, &q);
        break;
    case C_ISCAN: MPI_Iscan(sd, rd, n, MPI_DOUBLE, MPI_SUM, w, &q); break;
    case C_IEXSCAN: MPI_Iexscan(sd, rd, n, MPI_DOUBLE, MPI_SUM, w, &q); break;
    case C_IGATHERV: MPI_Igatherv(c_s, b, MPI_BYTE, c_r, c_counts, c_displs, MPI_BYTE, 0, w, &q); break;
    case C_ISCATTERV: MPI_Iscatterv(c_s, c_counts, c_displs, MPI_BYTE, c_r, b, MPI_BYTE, 0, w, &q); break;
    case C_IALLGATHERV: MPI_Iallgatherv(c_s, b, MPI_BYTE, c_r, c_counts, c_displs, MPI_BYTE, w, &q); break;
    case C_IALLTOALLV:
        MPI_Ialltoallv(c_s, c_counts, c_displs, MPI_BYTE, c_r, c_counts, c_displs, MPI_BYTE, w, &q);
        break;
    case C_IALLTOALLW:
        MPI_Ialltoallw(c_s, c_counts, c_displs, c_types, c_r, c_counts, c_displs, c_types, w, &q);
        break;
    case C_INEIGHBOR_ALLGATHER: MPI_Ineighbor_allgather(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, c_ring, &q); break;
    default: MPI_Ineighbor_alltoall(c_s, b, MPI_BYTE, c_r, b, MPI_BYTE, c_ring, &q); break;
    }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* The slowest rank's mean time per call over `iters` calls. */
static double coll_time(int op, size_t size, long iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (long i = 0; i < iters; i++) coll_call(op, size);
    double mine = (MPI_Wtime() - t) / (double)iters, worst;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

/* Says where this rank found `op`'s result wrong; 1, for coll_check to count. */
static int coll_wrong(int op, size_t size, size_t at) {
    fprintf(stderr, "micro coll: rank %d: wrong %s result at %zu (size %zu)\n", rank, coll_op[op], at, size);
    return 1;
}

/* The byte rank `from` sends in its block `j` (see coll_check). */
static unsigned char block_byte(int from, int j) { return (unsigned char)(from * 16 + j + 1); }

/* One call of `op` at `size` on values that tell ranks apart, checked at the
 * first and last element of each block: each rank's send block j holds
 * block_byte(rank, j); reductions sum rank + 1. Whether any rank found its
 * result wrong (every rank gets the same answer). */
static int coll_check(int op, size_t size) {
    size_t n = size < 8 ? 1 : size / 8;
    int reduction = op == C_REDUCE || op == C_ALLREDUCE || op == C_REDUCE_SCATTER_BLOCK ||
                    op == C_REDUCE_SCATTER || op == C_SCAN || op == C_EXSCAN || op == C_IREDUCE ||
                    op == C_IALLREDUCE || op == C_IREDUCE_SCATTER_BLOCK || op == C_IREDUCE_SCATTER ||
                    op == C_ISCAN || op == C_IEXSCAN;
    if (reduction) {
        for (size_t i = 0; i < n * np; i++) ((double *)c_s)[i] = rank + 1;
    } else {
        for (int j = 0; j < np; j++) memset(c_s + (size_t)j * size, block_byte(rank, j), size);
    }
    memset(c_r, 0, size * np);
    if (op == C_BCAST || op == C_IBCAST) memset(c_r, rank == 0 ? block_byte(0, 0) : 0, size);
    coll_call(op, size);
    double *rd = (double *)c_r, tri = (double)np * (np + 1) / 2;
    int left = (rank + np - 1) % np, right = (rank + 1) % np, wrong = 0;
    for (int j = 0; j < np; j++) {
        size_t first = (size_t)j * size, last = first + size - 1;
        int want = -1;
        double dwant = -1;
        switch (op) {
        case C_BCAST: case C_IBCAST: if (j == 0) want = block_byte(0, 0); break;
        case C_GATHER: case C_GATHERV: case C_IGATHER: case C_IGATHERV:
            if (rank == 0) want = block_byte(j, 0);
            break;
        case C_ALLGATHER: case C_ALLGATHERV: case C_IALLGATHER: case C_IALLGATHERV: want = block_byte(j, 0); break;
        case C_SCATTER: case C_SCATTERV: case C_ISCATTER: case C_ISCATTERV:
            if (j == 0) want = block_byte(0, rank);
            break;
        case C_ALLTOALL: case C_ALLTOALLV: case C_ALLTOALLW: case C_IALLTOALL: case C_IALLTOALLV:
        case C_IALLTOALLW:
            want = block_byte(j, rank);
            break;
        case C_NEIGHBOR_ALLGATHER: case C_INEIGHBOR_ALLGATHER: if (j < 2) want = block_byte(j ? right : left, 0); break;
        case C_NEIGHBOR_ALLTOALL: case C_INEIGHBOR_ALLTOALL:
            if (j < 2) want = j ? block_byte(right, 0) : block_byte(left, 1);
            break;
        case C_REDUCE: case C_IREDUCE: if (j == 0 && rank == 0) dwant = tri; break;
        case C_ALLREDUCE: case C_IALLREDUCE: case C_REDUCE_SCATTER_BLOCK: case C_REDUCE_SCATTER:
        case C_IREDUCE_SCATTER_BLOCK: case C_IREDUCE_SCATTER:
            if (j == 0) dwant = tri;
            break;
        case C_SCAN: case C_ISCAN: if (j == 0) dwant = (double)(rank + 1) * (rank + 2) / 2; break;
        case C_EXSCAN: case C_IEXSCAN: if (j == 0 && rank > 0) dwant = (double)rank * (rank + 1) / 2; break;
        default: break;
        }
        if (want >= 0 && (c_r[first] != want || c_r[last] != want)) wrong |= coll_wrong(op, size, first);
        if (dwant >= 0 && (rd[0] != dwant || rd[n - 1] != dwant)) wrong |= coll_wrong(op, size, 0);
    }
    int any;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

/* Whether `op` is in the comma-separated list `only` ("all": every one). */
static int coll_selected(const char *only, int op) {
    if (!strcmp(only, "all")) return 1;
    size_t len = strlen(coll_op[op]);
    for (const char *p = only; (p = strstr(p, coll_op[op])) != NULL; p += len)
        if ((p == only || p[-1] == ',') && (p[len] == ',' || p[len] == 0)) return 1;
    return 0;
}

static void coll(size_t max_size, int reps, double seconds, const char *only, int leave_out_wrong,
                 double *times) {
    size_t bytes = (max_size < 8 ? 8 : max_size) * (size_t)np;
    c_s = malloc(bytes);
    c_r = malloc(bytes);
    c_counts = malloc(sizeof(int) * np);
    c_displs = malloc(sizeof(int) * np);
    c_types = malloc(sizeof(MPI_Datatype) * np);
    if (!c_s || !c_r || !c_counts || !c_displs || !c_types) {
        fprintf(stderr, "micro coll: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < np; i++) c_types[i] = MPI_BYTE;
    int dims[1] = {np}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &c_ring);
    for (int op = 0; op < C_COUNT; op++) {
        if (!coll_selected(only, op)) continue;
        int sizeless = op == C_BARRIER || op == C_IBARRIER;
        for (size_t size = sizeless ? 0 : 8; size <= (sizeless ? 0 : max_size); size = size ? size * 2 : 8) {
            if (!sizeless && coll_check(op, size)) {
                if (!leave_out_wrong) MPI_Abort(MPI_COMM_WORLD, 3);
                if (rank == 0) fprintf(stderr, "micro coll: %s left out from %zu bytes: wrong result\n", coll_op[op], size);
                break;
            }
            long iters = 1;
            for (;;) {
                double t = coll_time(op, size, iters) * (double)iters;
                if (t > seconds / 10 || iters >= (1L << 20)) {
                    double per = t / (double)iters;
                    double next = seconds / (per > 1e-9 ? per : 1e-9);
                    iters = next < 1 ? 1 : next > (double)(1L << 22) ? (1L << 22) : (long)next;
                    break;
                }
                iters *= 4;
            }
            for (int r = 0; r < reps; r++) times[r] = coll_time(op, size, iters);
            qsort(times, reps, sizeof *times, cmp);
            if (rank == 0) {
                printf("{\"bench\": \"coll\", \"np\": %d, \"size\": %zu, \"metric\": \"latency_us\", \"value\": %.6f, \"op\": \"%s\"}\n",
                       np, size, times[reps / 2] * 1e6, coll_op[op]);
                fflush(stdout);
            }
            if (sizeless) break;
        }
    }
    MPI_Comm_free(&c_ring);
    free(c_s);
    free(c_r);
    free(c_counts);
    free(c_displs);
    free(c_types);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 2 || np < 2) {
        if (rank == 0) fprintf(stderr, "usage: micro pingpong|bw|rate|ring|coll [max_size] [reps] [rep_ms] (np >= 2)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *bench = argv[1];
    size_t max_size = argc > 2 ? strtoull(argv[2], NULL, 10) : (4u << 20);
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    double seconds = (argc > 4 ? atof(argv[4]) : 60) / 1000.0;
    if (reps < 1) reps = 1;
    if (!strcmp(bench, "coll")) {
        double *t = malloc(sizeof(double) * reps);
        coll(max_size, reps, seconds, argc > 5 ? argv[5] : "all",
             argc > 6 && !strcmp(argv[6], "leave-out-wrong"), t);
        free(t);
        MPI_Finalize();
        return 0;
    }
    int is_pp = !strcmp(bench, "pingpong"), is_rate = !strcmp(bench, "rate");
    int is_ring = !strcmp(bench, "ring");
    if (is_ring) participants = np;
    if (!is_pp && !is_rate && !is_ring && strcmp(bench, "bw")) {
        if (rank == 0) fprintf(stderr, "micro: unknown benchmark %s\n", bench);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned char *buf = malloc(max_size > 8 ? max_size : 8);
    double *times = malloc(sizeof(double) * reps);
    size_t sizes[64];
    int nsizes = 0;
    if (is_rate || is_ring) {
        sizes[nsizes++] = 8;
    } else {
        sizes[nsizes++] = 0;
        for (size_t s = 1; s <= max_size; s *= 2) sizes[nsizes++] = s;
    }
    for (int i = 0; i < nsizes; i++) {
        size_t size = sizes[i];
        if (rank < participants) {
            kernel k = is_ring ? run_ring : is_pp ? run_pingpong : run_stream;
            /* correctness, once per size */
            if (is_ring) {
                /* the ring itself checks nothing: pass a counter around once */
                long tok = 0;
                if (rank == 0) {
                    MPI_Send(&tok, 1, MPI_LONG, 1, 6, MPI_COMM_WORLD);
                    MPI_Recv(&tok, 1, MPI_LONG, np - 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    if (tok != np - 1) {
                        fprintf(stderr, "micro: ring token %ld, expected %d\n", tok, np - 1);
                        MPI_Abort(MPI_COMM_WORLD, 3);
                    }
                } else {
                    MPI_Recv(&tok, 1, MPI_LONG, rank - 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    tok++;
                    MPI_Send(&tok, 1, MPI_LONG, (rank + 1) % np, 6, MPI_COMM_WORLD);
                }
            } else if (rank == 0) {
                pattern(buf, size, 7);
                MPI_Send(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            } else {
                MPI_Recv(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                verify(buf, size, 7, bench);
            }
            long iters = calibrate(k, buf, size, seconds);
            for (int r = 0; r < reps; r++) {
                double t = k(buf, size, iters);
                times[r] = is_pp ? t / (2.0 * iters) : is_ring ? t / ((double)iters * np) : t;
            }
            if (rank == 0) {
                double m = median(times, reps);
                if (is_pp)
                    printf("{\"bench\": \"pingpong\", \"np\": %d, \"size\": %zu, \"metric\": \"latency_us\", \"value\": %.6f}\n", np, size, m * 1e6);
                else if (is_ring)
                    printf("{\"bench\": \"ring\", \"np\": %d, \"size\": %zu, \"metric\": \"latency_us\", \"value\": %.6f}\n", np, size, m * 1e6);
                else if (is_rate)
                    printf("{\"bench\": \"rate\", \"np\": %d, \"size\": %zu, \"metric\": \"msg_rate_Mps\", \"value\": %.6f}\n", np, size, iters * (double)WINDOW / m / 1e6);
                else
                    printf("{\"bench\": \"bw\", \"np\": %d, \"size\": %zu, \"metric\": \"bandwidth_MBps\", \"value\": %.6f}\n", np, size, iters * (double)WINDOW * size / m / 1e6);
                fflush(stdout);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(times);
    free(buf);
    MPI_Finalize();
    return 0;
}
