/* Concern: MPI_THREAD_MULTIPLE. Several threads of every rank call MPI at
 * once, and every message is checked:
 * - point-to-point between ranks, thread t of a rank with thread t of its
 *   neighbours on tag t (blocking sendrecv, blocking send and receive in an
 *   order that cannot deadlock, nonblocking with MPI_Waitall, a message of a
 *   megabyte), matching kept per thread by the tags;
 * - within one rank: a thread blocked in MPI_Recv (and in MPI_Ssend of a
 *   megabyte) from its own rank until another thread of that rank sends, 50
 *   ms later, and in MPI_Wait and MPI_Waitany likewise: a library that
 *   keeps one thread inside MPI for the whole of a blocking call deadlocks
 *   here;
 * - probes: MPI_Probe + MPI_Recv and MPI_Mprobe + MPI_Mrecv per thread tag
 *   with MPI_ANY_SOURCE;
 * - collectives at once on a communicator per thread (MPI_Comm_dup made
 *   by each thread concurrently, then allreduce, bcast, barrier,
 *   allgather, alltoall, iallreduce, and MPI_Comm_split), on which every
 *   rank's thread t meets its peers;
 * - MPI_Query_thread, MPI_Is_thread_main.
 * THREADS and ITERS can be given as arguments. */
#include "kt.h"
#include <pthread.h>
#include <unistd.h>

#define MAXT 16
static int T = 4, ITERS = 200;
static MPI_Comm tcomm[MAXT];
static int done_ok[MAXT];
static pthread_barrier_t gate;

static int val(int rank, int t, int i) { return rank * 1000000 + t * 10000 + i; }

static void p2p(int t, int r, int n) {
    int right = (r + 1) % n, left = (r + n - 1) % n;
    for (int i = 0; i < ITERS; i++) {
        int out = val(r, t, i), in = -1;
        MPI_Status st;
        OK(MPI_Sendrecv(&out, 1, MPI_INT, right, t, &in, 1, MPI_INT, left, t, MPI_COMM_WORLD, &st));
        CHECK(in == val(left, t, i) && st.MPI_SOURCE == left && st.MPI_TAG == t);
        /* Blocking send and receive, even ranks first (odd ring sizes: rank
         * 0 sends to 1 while n-1 sends to 0, which 0 receives after). */
        if (n > 1) {
            if (r % 2 == 0) {
                OK(MPI_Send(&out, 1, MPI_INT, right, t, MPI_COMM_WORLD));
                OK(MPI_Recv(&in, 1, MPI_INT, left, t, MPI_COMM_WORLD, &st));
            } else {
                OK(MPI_Recv(&in, 1, MPI_INT, left, t, MPI_COMM_WORLD, &st));
                OK(MPI_Send(&out, 1, MPI_INT, right, t, MPI_COMM_WORLD));
            }
            CHECK(in == val(left, t, i));
        }
        MPI_Request rq[2];
        int a = -1;
        OK(MPI_Irecv(&a, 1, MPI_INT, right, t + MAXT, MPI_COMM_WORLD, &rq[0]));
        OK(MPI_Isend(&out, 1, MPI_INT, left, t + MAXT, MPI_COMM_WORLD, &rq[1]));
        OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        CHECK(a == val(right, t, i));
    }
    /* A megabyte each way: the rendezvous under threads. */
    int m = 1 << 18;
    int *big = malloc(sizeof(int) * m), *got = malloc(sizeof(int) * m);
    for (int k = 0; k < m; k++) big[k] = val(r, t, k % 9999);
    OK(MPI_Sendrecv(big, m, MPI_INT, right, t, got, m, MPI_INT, left, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int k = 0; k < m; k++) CHECK(got[k] == val(left, t, k % 9999));
    free(big);
    free(got);
}

/* Threads 2k and 2k+1 of a rank: the even one blocks in MPI_Recv (then in
 * MPI_Recv of a megabyte) for what the odd one sends to its own rank after
 * 50 ms (the megabyte with MPI_Ssend, which waits for that receive). */
static void self_pair(int t, int r) {
    int tag = 2 * MAXT + t / 2, m = 1 << 18;
    int *big = malloc(sizeof(int) * m);
    if (t % 2 == 0 && t + 1 < T) {
        int x = -1;
        MPI_Status st;
        OK(MPI_Recv(&x, 1, MPI_INT, r, tag, MPI_COMM_WORLD, &st));
        CHECK(x == val(r, t + 1, 7) && st.MPI_SOURCE == r);
        OK(MPI_Recv(big, m, MPI_INT, r, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int k = 0; k < m; k++) CHECK(big[k] == k);
        /* MPI_Wait, then MPI_Waitany, on what the partner sends later. */
        MPI_Request rq[2];
        int y[2] = {-1, -1}, idx = -1;
        OK(MPI_Irecv(&y[0], 1, MPI_INT, r, tag, MPI_COMM_WORLD, &rq[0]));
        OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        CHECK(y[0] == 1);
        OK(MPI_Irecv(&y[1], 1, MPI_INT, r, tag, MPI_COMM_WORLD, &rq[1]));
        OK(MPI_Waitany(1, &rq[1], &idx, MPI_STATUS_IGNORE));
        CHECK(idx == 0 && y[1] == 2);
    } else if (t % 2 == 1) {
        usleep(50000);
        int x = val(r, t, 7);
        OK(MPI_Send(&x, 1, MPI_INT, r, tag, MPI_COMM_WORLD));
        for (int k = 0; k < m; k++) big[k] = k;
        OK(MPI_Ssend(big, m, MPI_INT, r, tag, MPI_COMM_WORLD));
        for (int y = 1; y <= 2; y++) {
            usleep(20000);
            OK(MPI_Send(&y, 1, MPI_INT, r, tag, MPI_COMM_WORLD));
        }
    }
    free(big);
}

/* Each thread receives one message from every rank's same thread, first
 * by probing, then by a matched probe. */
static void probes(int t, int r, int n) {
    for (int round = 0; round < 2; round++) {
        int tag = 3 * MAXT + 2 * t + round;
        MPI_Request *rq = malloc(sizeof(MPI_Request) * n);
        int out = val(r, t, round);
        for (int d = 0; d < n; d++) OK(MPI_Isend(&out, 1, MPI_INT, d, tag, MPI_COMM_WORLD, &rq[d]));
        int seen = 0;
        for (int k = 0; k < n; k++) {
            MPI_Status st;
            int x = -1;
            if (round == 0) {
                OK(MPI_Probe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
                OK(MPI_Recv(&x, 1, MPI_INT, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            } else {
                MPI_Message msg;
                OK(MPI_Mprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &msg, &st));
                OK(MPI_Mrecv(&x, 1, MPI_INT, &msg, MPI_STATUS_IGNORE));
            }
            CHECK(x == val(st.MPI_SOURCE, t, round));
            CHECK(!(seen & (1 << st.MPI_SOURCE)));
            seen |= 1 << st.MPI_SOURCE;
        }
        OK(MPI_Waitall(n, rq, MPI_STATUSES_IGNORE));
        free(rq);
    }
}

static void collectives(int t, int r, int n) {
    MPI_Comm c;
    OK(MPI_Comm_dup(tcomm[t], &c));
    for (int i = 0; i < ITERS / 10 + 1; i++) {
        int x = val(r, t, i), sum = 0, want = 0;
        for (int k = 0; k < n; k++) want += val(k, t, i);
        OK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK(sum == want);
        int b = r == i % n ? val(r, t, i) : -1;
        OK(MPI_Bcast(&b, 1, MPI_INT, i % n, c));
        CHECK(b == val(i % n, t, i));
        OK(MPI_Barrier(c));
        int all[64], a2a_out[64], a2a_in[64];
        OK(MPI_Allgather(&x, 1, MPI_INT, all, 1, MPI_INT, c));
        for (int k = 0; k < n; k++) CHECK(all[k] == val(k, t, i));
        for (int k = 0; k < n; k++) a2a_out[k] = val(r, t, k);
        OK(MPI_Alltoall(a2a_out, 1, MPI_INT, a2a_in, 1, MPI_INT, c));
        for (int k = 0; k < n; k++) CHECK(a2a_in[k] == val(k, t, r));
        MPI_Request rq;
        sum = 0;
        OK(MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, c, &rq));
        OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK(sum == want);
    }
    MPI_Comm half;
    OK(MPI_Comm_split(c, r % 2, -r, &half));
    int hs, hr;
    OK(MPI_Comm_size(half, &hs));
    OK(MPI_Comm_rank(half, &hr));
    CHECK(hs == (r % 2 == 0 ? (n + 1) / 2 : n / 2));
    int top = -1, mine = r;
    OK(MPI_Allreduce(&mine, &top, 1, MPI_INT, MPI_MAX, half));
    CHECK(hr == (top - r) / 2);
    OK(MPI_Comm_free(&half));
    OK(MPI_Comm_free(&c));
}

static void *worker(void *arg) {
    int t = (int)(long)arg, r = kt_rank(), n = kt_size(), main_flag = 1;
    OK(MPI_Is_thread_main(&main_flag));
    CHECK(!main_flag);
    pthread_barrier_wait(&gate);
    p2p(t, r, n);
    self_pair(t, r);
    probes(t, r, n);
    collectives(t, r, n);
    done_ok[t] = 1;
    return NULL;
}

int main(int argc, char **argv) {
    int provided, q;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Query_thread(&q));
    CHECK(q == MPI_THREAD_MULTIPLE);
    if (argc > 1) T = atoi(argv[1]);
    if (argc > 2) ITERS = atoi(argv[2]);
    CHECK(T >= 1 && T <= MAXT && kt_size() <= 30);
    for (int t = 0; t < T; t++) OK(MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[t]));
    pthread_t th[MAXT];
    pthread_barrier_init(&gate, NULL, T);
    for (int t = 0; t < T; t++) CHECK(pthread_create(&th[t], NULL, worker, (void *)(long)t) == 0);
    for (int t = 0; t < T; t++) CHECK(pthread_join(th[t], NULL) == 0);
    for (int t = 0; t < T; t++) CHECK(done_ok[t]);
    for (int t = 0; t < T; t++) OK(MPI_Comm_free(&tcomm[t]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    kt_pass("multiple");
    MPI_Finalize();
    return 0;
}
