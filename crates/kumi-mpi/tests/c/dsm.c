/* Distributed shared memory from C through kumi.h alone (no MPI call):
 * global arrays of three distributions (every rank writes its share, reads
 * all back), fetch-and-add tickets, a compare-and-swap counter and a
 * histogram under a lock; a page-shared segment used with plain loads and
 * stores (each rank fills its block, a barrier, everyone sums all; then
 * increments under a lock); a tree of tasks through the task queue.
 * `dsm error` reads past an array's end, which must stop the job naming
 * the call and the range. Prints "dsm.c: passed on N ranks" on rank 0. */
#include <kumi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define CHECK(c)                                                             \
    do {                                                                     \
        if (!(c)) {                                                          \
            fprintf(stderr, "dsm.c: rank %d: check failed at line %d: %s\n", \
                    rank, __LINE__, #c);                                     \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static int64_t value(size_t i) { return (int64_t)i * 1000 + 7; }

static void arrays(int dist, size_t block) {
    size_t len = 7 * (size_t)size + 3;
    kumi_array a;
    if (dist == KUMI_OWNED) {
        len = 2 * (size_t)rank; /* this rank's share; the array is the sum */
    }
    CHECK(kumi_array_alloc(KUMI_WORLD, len, KUMI_INT64, dist, block, &a) == 0);
    CHECK(kumi_array_len(a, &len) == 0);
    /* Own part through its pointer, the rest by writes. */
    void *base;
    size_t local;
    CHECK(kumi_array_local(a, &base, &local) == 0);
    for (size_t j = 0; j < local; j++) {
        size_t g;
        CHECK(kumi_array_global(a, j, &g) == 0);
        ((int64_t *)base)[j] = value(g);
    }
    for (size_t i = (size_t)rank; i < len; i += (size_t)size) {
        int64_t v = value(i);
        CHECK(kumi_array_write(a, i, 1, &v) == 0); /* same value: no conflict */
    }
    CHECK(kumi_array_barrier(a) == 0);
    int64_t *all = malloc(len * sizeof *all + 1);
    CHECK(kumi_array_read(a, 0, len, all) == 0);
    for (size_t i = 0; i < len; i++) CHECK(all[i] == value(i));
    free(all);
    CHECK(kumi_array_free(&a) == 0 && a == NULL);
}

static void atomics(void) {
    enum { M = 30 };
    kumi_array t;
    CHECK(kumi_array_alloc(KUMI_WORLD, 3, KUMI_UINT64, KUMI_CYCLIC, 1, &t) == 0);
    uint64_t one = 1;
    for (int k = 0; k < M; k++) {
        uint64_t old;
        CHECK(kumi_array_fetch_op(t, 0, KUMI_OP_SUM, &one, &old) == 0);
        CHECK(old < (uint64_t)size * M);
        uint64_t cur;
        CHECK(kumi_array_read(t, 1, 1, &cur) == 0);
        for (;;) {
            uint64_t next = cur + 1, was;
            CHECK(kumi_array_cas(t, 1, &cur, &next, &was) == 0);
            if (was == cur) break;
            cur = was;
        }
        CHECK(kumi_array_lock(t, 0) == 0);
        uint64_t h;
        CHECK(kumi_array_read(t, 2, 1, &h) == 0);
        h++;
        CHECK(kumi_array_write(t, 2, 1, &h) == 0);
        CHECK(kumi_array_unlock(t, 0) == 0);
    }
    CHECK(kumi_array_barrier(t) == 0);
    uint64_t end[3];
    CHECK(kumi_array_read(t, 0, 3, end) == 0);
    for (int i = 0; i < 3; i++) CHECK(end[i] == (uint64_t)size * M);
    CHECK(kumi_array_free(&t) == 0);
}

static void shared(void) {
    enum { N = 10000 };
    kumi_shared s;
    void *base;
    CHECK(kumi_shared_alloc(KUMI_WORLD, (N + 1) * sizeof(double), &s, &base) == 0);
    double *x = base;
    size_t lo = (size_t)rank * N / size, hi = (size_t)(rank + 1) * N / size;
    for (size_t i = lo; i < hi; i++) x[i] = (double)i;
    CHECK(kumi_shared_barrier(s) == 0);
    double sum = 0;
    for (size_t i = 0; i < N; i++) sum += x[i];
    CHECK(sum == (double)N * (N - 1) / 2);
    CHECK(kumi_shared_barrier(s) == 0);
    /* A counter after the values, under a lock. */
    for (int k = 0; k < 20; k++) {
        CHECK(kumi_shared_lock(s, 0) == 0);
        x[N] += 1;
        CHECK(kumi_shared_unlock(s, 0) == 0);
    }
    CHECK(kumi_shared_barrier(s) == 0);
    CHECK(x[N] == 20.0 * size);
    CHECK(kumi_shared_free(&s) == 0 && s == NULL);
}

static void tasks(void) {
    kumi_tasks q;
    CHECK(kumi_tasks_create(KUMI_WORLD, 2 * sizeof(uint32_t), &q) == 0);
    uint32_t item[2] = {0, 1}; /* depth, id */
    long ran = 0;
    if (rank == 0) CHECK(kumi_tasks_push(q, item) == 0);
    int got;
    for (;;) {
        CHECK(kumi_tasks_pop(q, item, &got) == 0);
        if (!got) break;
        ran++;
        if (item[0] < 6) {
            for (uint32_t k = 0; k < 2 + item[1] % 2; k++) {
                uint32_t child[2] = {item[0] + 1, item[1] * 3 + k};
                CHECK(kumi_tasks_push(q, child) == 0);
            }
        }
    }
    /* The same tree, counted serially: depth d holds the ids made from the
     * ids of depth d - 1. */
    long want = 0;
    uint32_t *ids = malloc(sizeof *ids), n = 1;
    ids[0] = 1;
    for (uint32_t d = 0; d <= 6; d++) {
        want += n;
        if (d == 6) break;
        uint32_t *next = malloc(3 * n * sizeof *next), m = 0;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t k = 0; k < 2 + ids[i] % 2; k++) next[m++] = ids[i] * 3 + k;
        free(ids);
        ids = next;
        n = m;
    }
    free(ids);
    /* Everyone's count, through an array. */
    kumi_array c;
    CHECK(kumi_array_alloc(KUMI_WORLD, 1, KUMI_INT64, KUMI_BLOCK, 0, &c) == 0);
    int64_t mine = ran, old;
    CHECK(kumi_array_fetch_op(c, 0, KUMI_OP_SUM, &mine, &old) == 0);
    CHECK(kumi_array_barrier(c) == 0);
    int64_t total;
    CHECK(kumi_array_read(c, 0, 1, &total) == 0);
    CHECK(total == want);
    CHECK(kumi_array_free(&c) == 0);
    CHECK(kumi_tasks_free(&q) == 0);
}

int main(int argc, char **argv) {
    CHECK(kumi_init(&argc, &argv) == 0);
    CHECK(kumi_rank(&rank) == 0 && kumi_size(&size) == 0);
    if (argc > 1 && strcmp(argv[1], "error") == 0) {
        kumi_array a;
        CHECK(kumi_array_alloc(KUMI_WORLD, 10, KUMI_DOUBLE, KUMI_BLOCK, 0, &a) == 0);
        double out[4];
        kumi_array_read(a, 8, 4, out); /* fatal: past the end */
        fprintf(stderr, "dsm.c: a read past the end returned\n");
        return 1;
    }
    arrays(KUMI_BLOCK, 0);
    arrays(KUMI_CYCLIC, 1);
    arrays(KUMI_CYCLIC, 3);
    arrays(KUMI_OWNED, 0);
    atomics();
    shared();
    tasks();
    if (rank == 0) printf("dsm.c: passed on %d ranks\n", size);
    CHECK(kumi_finalize() == 0);
    return 0;
}
