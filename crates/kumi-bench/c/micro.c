/* The C twin of kumi's micro-benchmarks, in standard MPI only, so the same code
 * can be built against MPICH, Open MPI or kumi's own libmpi and compared.
 *
 *   micro pingpong|bw|rate|ring|coll [max_size] [reps] [rep_ms]
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
 * coll: the collectives of kumi-bench's coll.rs on all ranks -- barrier,
 * allreduce (sum, in place) of 8 B and 1 MiB of doubles, bcast of 1 MiB from
 * rank 0, alltoall of 4 KiB per pair -- with coll.rs's method: a barrier, then
 * `iters` calls timed, the slowest rank's mean per call (max over ranks);
 * calibrated by growing `iters` 4x until a run takes a tenth of a repetition;
 * the median (upper median, as coll.rs) of `reps` repetitions. Each record
 * carries an "op" field; each operation's result is checked once first. */
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

enum { C_BARRIER, C_ALLREDUCE8, C_ALLREDUCE1M, C_BCAST1M, C_ALLTOALL4K, C_COUNT };
static const char *coll_op[C_COUNT] = {"barrier", "allreduce", "allreduce", "bcast", "alltoall"};
static const size_t coll_size[C_COUNT] = {0, 8, 1u << 20, 1u << 20, 4096};
static double *c_a8, *c_big;
static unsigned char *c_bc, *c_send, *c_recv;

static void coll_call(int op) {
    switch (op) {
    case C_BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    case C_ALLREDUCE8: MPI_Allreduce(MPI_IN_PLACE, c_a8, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case C_ALLREDUCE1M: MPI_Allreduce(MPI_IN_PLACE, c_big, 1 << 17, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case C_BCAST1M: MPI_Bcast(c_bc, 1 << 20, MPI_BYTE, 0, MPI_COMM_WORLD); break;
    default: MPI_Alltoall(c_send, 4096, MPI_BYTE, c_recv, 4096, MPI_BYTE, MPI_COMM_WORLD); break;
    }
}

/* The slowest rank's mean time per call over `iters` calls. */
static double coll_time(int op, long iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (long i = 0; i < iters; i++) coll_call(op);
    double mine = (MPI_Wtime() - t) / (double)iters, worst;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static void coll_fail(const char *what, size_t at) {
    fprintf(stderr, "micro coll: rank %d: wrong %s result at element %zu\n", rank, what, at);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* Each operation's result, once, with values that tell ranks apart. */
static void coll_check(void) {
    size_t n = (size_t)1 << 17;
    double want = (double)np * (np - 1) / 2;
    c_a8[0] = rank + 1;
    coll_call(C_ALLREDUCE8);
    if (c_a8[0] != want + np) coll_fail("allreduce 8 B", 0);
    for (size_t i = 0; i < n; i++) c_big[i] = rank + (double)(i % 7);
    coll_call(C_ALLREDUCE1M);
    for (size_t i = 0; i < n; i++)
        if (c_big[i] != want + (double)np * (double)(i % 7)) coll_fail("allreduce 1 MiB", i);
    if (rank == 0) pattern(c_bc, 1 << 20, 11);
    else memset(c_bc, 0, 1 << 20);
    coll_call(C_BCAST1M);
    verify(c_bc, 1 << 20, 11, "coll bcast");
    for (int d = 0; d < np; d++) pattern(c_send + (size_t)d * 4096, 4096, (unsigned char)(rank * 31 + d));
    coll_call(C_ALLTOALL4K);
    for (int s = 0; s < np; s++) verify(c_recv + (size_t)s * 4096, 4096, (unsigned char)(s * 31 + rank), "coll alltoall");
    /* The timed runs then start from kumi-bench's values. */
    c_a8[0] = 1.0;
    for (size_t i = 0; i < n; i++) c_big[i] = 1.0;
    memset(c_bc, 7, 1 << 20);
    memset(c_send, 3, (size_t)4096 * np);
}

static void coll(int reps, double seconds, double *times) {
    c_a8 = malloc(sizeof(double));
    c_big = malloc(sizeof(double) << 17);
    c_bc = malloc(1 << 20);
    c_send = malloc((size_t)4096 * np);
    c_recv = malloc((size_t)4096 * np);
    if (!c_a8 || !c_big || !c_bc || !c_send || !c_recv) {
        fprintf(stderr, "micro coll: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    coll_check();
    for (int op = 0; op < C_COUNT; op++) {
        long iters = 1;
        for (;;) {
            double t = coll_time(op, iters) * (double)iters;
            if (t > seconds / 10 || iters >= (1L << 20)) {
                double per = t / (double)iters;
                double next = seconds / (per > 1e-9 ? per : 1e-9);
                iters = next < 1 ? 1 : next > (double)(1L << 22) ? (1L << 22) : (long)next;
                break;
            }
            iters *= 4;
        }
        for (int r = 0; r < reps; r++) times[r] = coll_time(op, iters);
        qsort(times, reps, sizeof *times, cmp);
        if (rank == 0) {
            printf("{\"bench\": \"coll\", \"np\": %d, \"size\": %zu, \"metric\": \"latency_us\", \"value\": %.6f, \"op\": \"%s\"}\n",
                   np, coll_size[op], times[reps / 2] * 1e6, coll_op[op]);
            fflush(stdout);
        }
    }
    free(c_a8);
    free(c_big);
    free(c_bc);
    free(c_send);
    free(c_recv);
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
        coll(reps, seconds, t);
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
