/* Concern: one-sided communication on shared-memory windows. A window from
 * MPI_Win_allocate_shared (and one from MPI_Win_allocate) over the ranks of
 * a host: MPI_Win_shared_query and direct loads; puts and gets in fence
 * epochs (including a strided target datatype); accumulates from every rank
 * at once (sums and MPI_REPLACE), fetch-and-op as a ticket counter (every
 * rank a distinct ticket), compare-and-swap as a lock; passive-target
 * locks; general active-target synchronization (post/start/complete/wait);
 * request-based operations; attributes, name, group, error handler; a
 * window over each rank's own memory (MPI_Win_create); windows over every
 * rank of the job, whichever host it is on (MPI_Win_allocate and
 * MPI_Win_create): puts, strided gets, accumulates, fetch-and-op tickets,
 * compare-and-swap, a counter under exclusive locks, a transfer of many
 * frames; a dynamic window (attach, detach, addresses as displacements);
 * across hosts, a shared-memory window is refused. */
#include "kt.h"

#define N 16

static int win_deletes;

#define M 16
#define BIG 300000

/* A dynamic window over MPI_COMM_WORLD: regions attached, reached by
 * address. */
static void dynamic_window(void) {
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    MPI_Win w;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &w));
    int *flavor, fl;
    void *attr;
    OK(MPI_Win_get_attr(w, MPI_WIN_CREATE_FLAVOR, &flavor, &fl));
    CHECK(fl && *flavor == MPI_WIN_FLAVOR_DYNAMIC);
    OK(MPI_Win_get_attr(w, MPI_WIN_BASE, &attr, &fl));
    CHECK(fl && attr == MPI_BOTTOM);
    long *reg = malloc(4 * sizeof(long)), *late = malloc(2 * sizeof(long));
    for (int i = 0; i < 4; i++) reg[i] = -1;
    OK(MPI_Win_attach(w, reg, 4 * sizeof(long)));
    MPI_Aint mine, *addr = malloc(sizeof(MPI_Aint) * n);
    OK(MPI_Get_address(reg, &mine));
    OK(MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD));
    OK(MPI_Win_fence(0, w));
    long v = 10L * r;
    OK(MPI_Put(&v, 1, MPI_LONG, right, MPI_Aint_add(addr[right], sizeof(long)), 1, MPI_LONG, w));
    long one = 1;
    OK(MPI_Accumulate(&one, 1, MPI_LONG, 0, addr[0], 1, MPI_LONG, MPI_SUM, w));
    OK(MPI_Win_fence(0, w));
    CHECK(reg[1] == 10L * left);
    if (r == 0) CHECK(reg[0] == -1 + n);
    long got = -7;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, left, 0, w));
    OK(MPI_Get(&got, 1, MPI_LONG, left, MPI_Aint_add(addr[left], sizeof(long)), 1, MPI_LONG, w));
    OK(MPI_Win_unlock(left, w));
    CHECK(got == 10L * ((left + n - 1) % n));
    if (kt_on_kumi()) {
        /* Outside every attached region: refused by the target. Overlapping
         * regions and detaching what is not attached: refused here. */
        int rc, cls;
        OK(MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN));
        OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, w));
        rc = MPI_Get(&got, 1, MPI_LONG, right, MPI_Aint_add(addr[right], 4 * sizeof(long)), 1, MPI_LONG, w);
        CHECK(rc != MPI_SUCCESS);
        OK(MPI_Win_unlock(right, w));
        rc = MPI_Win_attach(w, reg + 2, sizeof(long));
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RMA_ATTACH);
        rc = MPI_Win_detach(w, late);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RMA_ATTACH);
    }
    /* A second region, attached late, reached once everyone knows it. */
    OK(MPI_Win_attach(w, late, 2 * sizeof(long)));
    late[0] = 100 + r;
    OK(MPI_Get_address(late, &mine));
    OK(MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD));
    OK(MPI_Win_fence(0, w));
    OK(MPI_Get(&got, 1, MPI_LONG, right, addr[right], 1, MPI_LONG, w));
    OK(MPI_Win_fence(0, w));
    CHECK(got == 100 + right);
    OK(MPI_Win_detach(w, late));
    /* Regression: one buffer attached as two adjacent regions holds an
     * access across the seam (it was refused as outside every region). */
    long *two = malloc(8 * sizeof(long)), put[4] = {1, 2, 3, 4 + r};
    for (int i = 0; i < 8; i++) two[i] = -1;
    OK(MPI_Win_attach(w, two, 4 * sizeof(long)));
    OK(MPI_Win_attach(w, two + 4, 4 * sizeof(long)));
    OK(MPI_Get_address(two, &mine));
    OK(MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD));
    OK(MPI_Win_fence(0, w));
    OK(MPI_Put(put, 4, MPI_LONG, right, MPI_Aint_add(addr[right], 2 * sizeof(long)), 4, MPI_LONG, w));
    OK(MPI_Win_fence(0, w));
    CHECK(two[1] == -1 && two[2] == 1 && two[3] == 2 && two[4] == 3 && two[5] == 4 + left && two[6] == -1);
    OK(MPI_Win_detach(w, two + 4));
    OK(MPI_Win_detach(w, two));
    OK(MPI_Win_detach(w, reg));
    /* Exclusive locks on every rank, then the free at once (regression: an
     * unlock went unanswered and could reach its target after the free,
     * which refused it as a request for no window). */
    for (int t = 0; t < n; t++) {
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w));
        OK(MPI_Win_unlock(t, w));
    }
    OK(MPI_Win_free(&w));
    free(reg);
    free(late);
    free(two);
    free(addr);
}

/* Windows over MPI_COMM_WORLD: on one host or across several. */
static void world_windows(void) {
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    long *mine;
    MPI_Win w;
    OK(MPI_Win_allocate(M * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mine, &w));
    for (int i = 0; i < M; i++) mine[i] = -1;
    OK(MPI_Win_fence(0, w));

    /* Puts into the right neighbour's first half. */
    long v[M / 2];
    for (int i = 0; i < M / 2; i++) v[i] = 1000L * r + i;
    OK(MPI_Put(v, M / 2, MPI_LONG, right, 0, M / 2, MPI_LONG, w));
    OK(MPI_Win_fence(0, w));
    for (int i = 0; i < M / 2; i++) CHECK(mine[i] == 1000L * left + i);

    /* A strided get of the left neighbour's first half. */
    MPI_Datatype every2;
    OK(MPI_Type_vector(M / 4, 1, 2, MPI_LONG, &every2));
    OK(MPI_Type_commit(&every2));
    long g[M / 4];
    OK(MPI_Get(g, M / 4, MPI_LONG, left, 0, 1, every2, w));
    OK(MPI_Win_fence(0, w));
    int ll = (left + n - 1) % n;
    for (int i = 0; i < M / 4; i++) CHECK(g[i] == 1000L * ll + 2 * i);
    OK(MPI_Type_free(&every2));

    /* Every rank adds 1..M/4 into rank 0's second half at once. */
    long add[M / 4];
    for (int i = 0; i < M / 4; i++) add[i] = i + 1;
    OK(MPI_Accumulate(add, M / 4, MPI_LONG, 0, M / 2, M / 4, MPI_LONG, MPI_SUM, w));
    OK(MPI_Win_fence(0, w));
    if (r == 0)
        for (int i = 0; i < M / 4; i++) CHECK(mine[M / 2 + i] == -1 + (long)n * (i + 1));

    /* Accumulates on derived types of one basic type: every rank adds into
     * every other long of that half (a vector at the target, contiguous at
     * the origin), and a zero-count one of the vector does nothing. */
    {
        MPI_Datatype ev;
        OK(MPI_Type_vector(M / 8, 1, 2, MPI_LONG, &ev));
        OK(MPI_Type_commit(&ev));
        long more[M / 8];
        for (int i = 0; i < M / 8; i++) more[i] = 100;
        OK(MPI_Win_fence(0, w)); /* rank 0 has read the half above */
        OK(MPI_Accumulate(more, M / 8, MPI_LONG, 0, M / 2, 1, ev, MPI_SUM, w));
        OK(MPI_Accumulate(more, 0, ev, 0, M / 2, 0, ev, MPI_SUM, w));
        OK(MPI_Win_fence(0, w));
        if (r == 0)
            for (int i = 0; i < M / 4; i++)
                CHECK(mine[M / 2 + i] == -1 + (long)n * (i + 1) + (i % 2 == 0 ? 100L * n : 0));
        OK(MPI_Type_free(&ev));
    }

    /* Tickets from a counter on the last rank: all distinct. */
    long one = 1, tk = -7;
    OK(MPI_Win_lock_all(0, w));
    OK(MPI_Fetch_and_op(&one, &tk, MPI_LONG, n - 1, M - 1, MPI_SUM, w));
    /* Compare-and-swap: exactly one rank replaces the -1 on rank 0. */
    long me_l = r, old = -7, minus1 = -1;
    OK(MPI_Compare_and_swap(&me_l, &minus1, &old, MPI_LONG, 0, M - 3, w));
    OK(MPI_Win_unlock_all(w));
    long *tks = malloc(sizeof(long) * n);
    OK(MPI_Allgather(&tk, 1, MPI_LONG, tks, 1, MPI_LONG, MPI_COMM_WORLD));
    for (long want = -1; want < n - 1; want++) {
        int seen = 0;
        for (int i = 0; i < n; i++) seen += tks[i] == want;
        CHECK(seen == 1);
    }
    free(tks);
    int won = old == -1, winners;
    OK(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(winners == 1);

    /* A counter that only exclusive locks keep right (get, then put). */
    const int K = 20;
    for (int k = 0; k < K; k++) {
        long x;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w));
        OK(MPI_Get(&x, 1, MPI_LONG, 0, M - 2, 1, MPI_LONG, w));
        OK(MPI_Win_flush(0, w));
        x++;
        OK(MPI_Put(&x, 1, MPI_LONG, 0, M - 2, 1, MPI_LONG, w));
        OK(MPI_Win_unlock(0, w));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    long total = 0, cas = -7;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w));
    OK(MPI_Get(&total, 1, MPI_LONG, 0, M - 2, 1, MPI_LONG, w));
    OK(MPI_Get(&cas, 1, MPI_LONG, 0, M - 3, 1, MPI_LONG, w));
    OK(MPI_Win_unlock(0, w));
    CHECK(total == -1 + (long)n * K);
    CHECK(cas >= 0 && cas < n && (cas == r) == won);
    OK(MPI_Win_free(&w));

    /* A window over each rank's own memory, and a put of many frames. */
    unsigned char *own = malloc(BIG), *src = malloc(BIG);
    memset(own, 0, BIG);
    for (int i = 0; i < BIG; i++) src[i] = (unsigned char)(i * 7 + r);
    OK(MPI_Win_create(own, BIG, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w));
    OK(MPI_Win_fence(0, w));
    OK(MPI_Put(src, BIG, MPI_BYTE, right, 0, BIG, MPI_BYTE, w));
    OK(MPI_Win_fence(0, w));
    for (int i = 0; i < BIG; i++) CHECK(own[i] == (unsigned char)(i * 7 + left));
    /* And its get back, from the neighbour on the other side. */
    memset(src, 0, BIG);
    OK(MPI_Get(src, BIG, MPI_BYTE, left, 0, BIG, MPI_BYTE, w));
    OK(MPI_Win_fence(0, w));
    for (int i = 0; i < BIG; i++) CHECK(src[i] == (unsigned char)(i * 7 + ll));
    /* A strided target of many small pieces (more than the kernel takes in
     * one single-copy call) on another process's memory: put, accumulate,
     * get. */
    {
        MPI_Datatype strided;
        int *iown = (int *)own, *vals = malloc(15000 * sizeof(int)),
            *back = malloc(15000 * sizeof(int));
        OK(MPI_Type_vector(5000, 3, 4, MPI_INT, &strided));
        OK(MPI_Type_commit(&strided));
        for (int i = 0; i < 15000; i++) vals[i] = i + r;
        memset(own, 0, BIG);
        OK(MPI_Win_fence(0, w));
        OK(MPI_Put(vals, 15000, MPI_INT, right, 0, 1, strided, w));
        OK(MPI_Win_fence(0, w));
        OK(MPI_Accumulate(vals, 15000, MPI_INT, right, 0, 1, strided, MPI_SUM, w));
        OK(MPI_Win_fence(0, w));
        int bad = 0;
        for (int k = 0; k < 5000; k++) {
            for (int j = 0; j < 3; j++) bad += iown[4 * k + j] != 2 * (3 * k + j + left);
            bad += iown[4 * k + 3] != 0;
        }
        CHECK(bad == 0);
        OK(MPI_Get(back, 15000, MPI_INT, left, 0, 1, strided, w));
        OK(MPI_Win_fence(0, w));
        for (int i = 0; i < 15000; i++) bad += back[i] != 2 * (i + ll);
        CHECK(bad == 0);
        OK(MPI_Type_free(&strided));
        free(vals);
        free(back);
    }
    OK(MPI_Win_free(&w));
    free(own);
    free(src);
}

static int win_attr_deleted(MPI_Win w, int k, void *v, void *extra) {
    (void)w, (void)k, (void)v, (void)extra;
    win_deletes++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm host;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
    int r, n;
    MPI_Comm_rank(host, &r);
    MPI_Comm_size(host, &n);
    int right = (r + 1) % n, left = (r + n - 1) % n;

    /* ---- a shared window of N ints per rank ---- */
    int *mine;
    MPI_Win w;
    OK(MPI_Win_allocate_shared(N * sizeof(int), sizeof(int), MPI_INFO_NULL, host, &mine, &w));
    for (int i = 0; i < N; i++) mine[i] = -1;
    OK(MPI_Win_fence(0, w));
    /* Neighbours' parts are plain memory here. */
    MPI_Aint sz;
    int du;
    int *lp;
    OK(MPI_Win_shared_query(w, left, &sz, &du, &lp));
    CHECK(sz == N * (MPI_Aint)sizeof(int) && du == (int)sizeof(int));
    int *p0;
    OK(MPI_Win_shared_query(w, 0, &sz, &du, &p0));
    CHECK(p0 + (size_t)N * left == lp); /* contiguous, in rank order */

    /* Put my rank into the first half of my right neighbour's part. */
    int v[N / 2];
    for (int i = 0; i < N / 2; i++) v[i] = 100 * r + i;
    OK(MPI_Put(v, N / 2, MPI_INT, right, 0, N / 2, MPI_INT, w));
    OK(MPI_Win_fence(0, w));
    for (int i = 0; i < N / 2; i++) CHECK(mine[i] == 100 * left + i);
    CHECK(lp[0] == 100 * ((left + n - 1) % n)); /* a direct load */
    /* Get every other int of the left neighbour's first half (a strided
     * target type), into contiguous memory. */
    MPI_Datatype every2;
    OK(MPI_Type_vector(N / 4, 1, 2, MPI_INT, &every2));
    OK(MPI_Type_commit(&every2));
    int g[N / 4];
    OK(MPI_Get(g, N / 4, MPI_INT, left, 0, 1, every2, w));
    OK(MPI_Win_fence(0, w));
    int ll = (left + n - 1) % n;
    for (int i = 0; i < N / 4; i++) CHECK(g[i] == 100 * ll + 2 * i);

    /* Accumulate: every rank adds (rank+1) into element N-1 of rank 0, and
     * replaces element N-2 of rank 0 (some rank's value wins whole). */
    int one = r + 1, rep = 7000 + r;
    OK(MPI_Accumulate(&one, 1, MPI_INT, 0, N - 1, 1, MPI_INT, MPI_SUM, w));
    OK(MPI_Accumulate(&rep, 1, MPI_INT, 0, N - 2, 1, MPI_INT, MPI_REPLACE, w));
    OK(MPI_Win_fence(0, w));
    if (r == 0) {
        CHECK(mine[N - 1] == -1 + n * (n + 1) / 2);
        CHECK(mine[N - 2] >= 7000 && mine[N - 2] < 7000 + n);
    }

    /* Passive target from here: counters start at 0, then the fence epochs end. */
    if (r == 0) mine[N - 3] = mine[N - 4] = mine[N - 5] = mine[N - 6] = 0;
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, w));

    /* Fetch-and-op under lock_all: tickets 0..n*K-1, each exactly once. */
    OK(MPI_Win_lock_all(0, w));
    enum { K = 50 };
    int tickets[K], inc = 1;
    for (int k = 0; k < K; k++) OK(MPI_Fetch_and_op(&inc, &tickets[k], MPI_INT, 0, N - 3, MPI_SUM, w));
    OK(MPI_Win_unlock_all(w));
    int *all = malloc(sizeof(int) * n * K), *seen = calloc(n * K, sizeof(int));
    CHECK(all && seen);
    OK(MPI_Allgather(tickets, K, MPI_INT, all, K, MPI_INT, host));
    for (int i = 0; i < n * K; i++) {
        CHECK(all[i] >= 0 && all[i] < n * K);
        seen[all[i]]++;
    }
    for (int i = 0; i < n * K; i++) CHECK(seen[i] == 1);
    free(all), free(seen);

    /* Compare-and-swap as a lock word around a read-modify-write. */
    OK(MPI_Win_lock_all(0, w));
    for (int k = 0; k < 20; k++) {
        int want = 1, zero = 0, got = 1, x, prev;
        while (got != 0) {
            OK(MPI_Compare_and_swap(&want, &zero, &got, MPI_INT, 0, N - 4, w));
            OK(MPI_Win_flush(0, w));
        }
        OK(MPI_Get(&x, 1, MPI_INT, 0, N - 5, 1, MPI_INT, w));
        OK(MPI_Win_flush(0, w));
        x++;
        OK(MPI_Put(&x, 1, MPI_INT, 0, N - 5, 1, MPI_INT, w));
        OK(MPI_Win_flush(0, w));
        OK(MPI_Fetch_and_op(&zero, &prev, MPI_INT, 0, N - 4, MPI_REPLACE, w));
        OK(MPI_Win_flush(0, w));
        CHECK(prev == 1);
    }
    OK(MPI_Win_unlock_all(w));
    /* An exclusive MPI lock around the same kind of update. */
    for (int k = 0; k < 20; k++) {
        int x;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w));
        OK(MPI_Get(&x, 1, MPI_INT, 0, N - 6, 1, MPI_INT, w));
        OK(MPI_Win_flush(0, w));
        x++;
        OK(MPI_Put(&x, 1, MPI_INT, 0, N - 6, 1, MPI_INT, w));
        OK(MPI_Win_unlock(0, w));
    }
    OK(MPI_Barrier(host));
    if (r == 0) {
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w));
        OK(MPI_Win_sync(w));
        CHECK(mine[N - 5] == 20 * n && mine[N - 6] == 20 * n);
        OK(MPI_Win_unlock(0, w));
    }
    OK(MPI_Barrier(host));

    /* Post/start/complete/wait: each rank exposes to its left neighbour and
     * accesses its right one. */
    MPI_Group hg, lg, rg;
    MPI_Comm_group(host, &hg);
    OK(MPI_Group_incl(hg, 1, &left, &lg));
    OK(MPI_Group_incl(hg, 1, &right, &rg));
    OK(MPI_Win_post(lg, 0, w));
    OK(MPI_Win_start(rg, 0, w));
    int tag = 5000 + r;
    MPI_Request q;
    OK(MPI_Rput(&tag, 1, MPI_INT, right, 1, 1, MPI_INT, w, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    OK(MPI_Win_complete(w));
    int flag = 0;
    while (!flag) OK(MPI_Win_test(w, &flag));
    CHECK(mine[1] == 5000 + left);
    MPI_Group_free(&hg), MPI_Group_free(&lg), MPI_Group_free(&rg);

    /* Attributes, name, group. */
    void *attr;
    int fl;
    OK(MPI_Win_get_attr(w, MPI_WIN_BASE, &attr, &fl));
    CHECK(fl && attr == (void *)mine);
    MPI_Aint *asz;
    OK(MPI_Win_get_attr(w, MPI_WIN_SIZE, &asz, &fl));
    CHECK(fl && *asz == N * (MPI_Aint)sizeof(int));
    int *flavor, *model;
    OK(MPI_Win_get_attr(w, MPI_WIN_CREATE_FLAVOR, &flavor, &fl));
    CHECK(*flavor == MPI_WIN_FLAVOR_SHARED);
    OK(MPI_Win_get_attr(w, MPI_WIN_MODEL, &model, &fl));
    CHECK(*model == MPI_WIN_UNIFIED);
    /* A program's own attribute, deleted (callback) when the window goes. */
    int wkv;
    OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_attr_deleted, &wkv, NULL));
    static int payload;
    OK(MPI_Win_set_attr(w, wkv, &payload));
    void *got_attr;
    OK(MPI_Win_get_attr(w, wkv, &got_attr, &fl));
    CHECK(fl && got_attr == &payload);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Win_set_name(w, "ring"));
    OK(MPI_Win_get_name(w, name, &len));
    CHECK(strcmp(name, "ring") == 0 && len == 4);
    MPI_Group wg, hg2;
    int cmp;
    OK(MPI_Win_get_group(w, &wg));
    MPI_Comm_group(host, &hg2);
    OK(MPI_Group_compare(wg, hg2, &cmp));
    CHECK(cmp == MPI_IDENT);
    MPI_Group_free(&wg), MPI_Group_free(&hg2);

    /* Errors go to the window's handler: fatal by default, returned here. */
    MPI_Errhandler eh;
    OK(MPI_Win_get_errhandler(w, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    OK(MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN));
    int rc = MPI_Put(v, N, MPI_INT, right, N - 1, N, MPI_INT, w); /* past the end */
    int cls;
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS);
    rc = MPI_Win_unlock(right, w); /* no lock held */
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC);
    OK(MPI_Win_free(&w));
    CHECK(w == MPI_WIN_NULL && win_deletes == 1);
    OK(MPI_Win_free_keyval(&wkv));
    OK(MPI_Type_free(&every2));

    /* ---- MPI_Win_allocate: the same operations ---- */
    double *d;
    OK(MPI_Win_allocate(4 * sizeof(double), sizeof(double), MPI_INFO_NULL, host, &d, &w));
    d[0] = d[1] = d[2] = d[3] = 0;
    OK(MPI_Win_fence(0, w));
    double x = 0.5 * (r + 1);
    OK(MPI_Accumulate(&x, 1, MPI_DOUBLE, 0, 3, 1, MPI_DOUBLE, MPI_SUM, w));
    double before;
    OK(MPI_Get_accumulate(&x, 1, MPI_DOUBLE, &before, 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, MPI_MAX, w));
    OK(MPI_Win_fence(0, w));
    if (r == 0) CHECK(d[3] == 0.25 * n * (n + 1));
    CHECK(d[0] == 0.5 * (left + 1));
    OK(MPI_Win_get_attr(w, MPI_WIN_CREATE_FLAVOR, &flavor, &fl));
    CHECK(*flavor == MPI_WIN_FLAVOR_ALLOCATE);
    OK(MPI_Win_free(&w));
    /* ---- MPI_Win_create over each rank's own array (cross-memory attach) ---- */
    long own[8];
    for (int i = 0; i < 8; i++) own[i] = -1;
    OK(MPI_Win_create(own, sizeof own, sizeof(long), MPI_INFO_NULL, host, &w));
    OK(MPI_Win_fence(0, w));
    long lv[2] = {10L * r, 10L * r + 1};
    OK(MPI_Put(lv, 2, MPI_LONG, right, 2, 2, MPI_LONG, w));
    long ladd = r + 1;
    OK(MPI_Accumulate(&ladd, 1, MPI_LONG, 0, 7, 1, MPI_LONG, MPI_SUM, w));
    OK(MPI_Win_fence(0, w));
    CHECK(own[2] == 10L * left && own[3] == 10L * left + 1 && own[0] == -1);
    if (r == 0) CHECK(own[7] == -1 + (long)n * (n + 1) / 2);
    long back2[2];
    OK(MPI_Get(back2, 2, MPI_LONG, left, 2, 2, MPI_LONG, w));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, w));
    CHECK(back2[0] == 10L * ll);
    long tk, lone = 1;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w));
    OK(MPI_Fetch_and_op(&lone, &tk, MPI_LONG, 0, 6, MPI_SUM, w));
    OK(MPI_Win_unlock(0, w));
    OK(MPI_Barrier(host));
    if (r == 0) CHECK(own[6] == -1 + n);
    OK(MPI_Win_get_attr(w, MPI_WIN_BASE, &attr, &fl));
    CHECK(attr == (void *)own);
    OK(MPI_Win_get_attr(w, MPI_WIN_CREATE_FLAVOR, &flavor, &fl));
    CHECK(*flavor == MPI_WIN_FLAVOR_CREATE);
    OK(MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN));
    rc = MPI_Win_shared_query(w, 0, &sz, &du, &lp);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_FLAVOR);
    OK(MPI_Win_free(&w));

    world_windows();
    dynamic_window();

    /* Accesses to MPI_PROC_NULL do nothing (and fetch nothing). */
    {
        int *wb, v = 5, old = -3;
        MPI_Win pw;
        OK(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &wb, &pw));
        *wb = 42;
        OK(MPI_Win_fence(0, pw));
        OK(MPI_Put(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, pw));
        OK(MPI_Get(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, pw));
        OK(MPI_Accumulate(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, MPI_SUM, pw));
        OK(MPI_Fetch_and_op(&v, &old, MPI_INT, MPI_PROC_NULL, 0, MPI_SUM, pw));
        OK(MPI_Compare_and_swap(&v, &v, &old, MPI_INT, MPI_PROC_NULL, 0, pw));
        OK(MPI_Win_fence(0, pw));
        CHECK(*wb == 42 && v == 5 && old == -3);
        OK(MPI_Win_free(&pw));
    }

    /* Across hosts there is no shared memory: refused, on every rank. */
    int wn;
    MPI_Comm_size(MPI_COMM_WORLD, &wn);
    if (n < wn && kt_on_kumi()) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        void *b;
        MPI_Win bad;
        rc = MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &b, &bad);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RMA_SHARED);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    /* MPI_PROC_NULL is a target like any other: a lock on it, and its
     * unlock, do nothing (regression: refused as a bad rank). And an origin
     * at MPI_BOTTOM with absolute addresses (regression: refused as a NULL
     * buffer). */
    {
        int wr, ws, mem[4] = {0, 0, 0, 0}, val = 40, got = -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &wr);
        MPI_Comm_size(MPI_COMM_WORLD, &ws);
        MPI_Win pn;
        OK(MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &pn));
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, MPI_PROC_NULL, 0, pn));
        OK(MPI_Put(&val, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, pn));
        OK(MPI_Fetch_and_op(&val, &got, MPI_INT, MPI_PROC_NULL, 0, MPI_SUM, pn));
        OK(MPI_Win_unlock(MPI_PROC_NULL, pn));
        CHECK(got == -1);
        MPI_Aint at;
        MPI_Datatype abs;
        int one = 1;
        val = 40 + wr;
        OK(MPI_Get_address(&val, &at));
        OK(MPI_Type_create_hindexed(1, &one, &at, MPI_INT, &abs));
        OK(MPI_Type_commit(&abs));
        int to = (wr + 1) % ws;
        OK(MPI_Win_lock(MPI_LOCK_SHARED, to, 0, pn));
        OK(MPI_Put(MPI_BOTTOM, 1, abs, to, 1, 1, MPI_INT, pn));
        OK(MPI_Win_unlock(to, pn));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Win_lock(MPI_LOCK_SHARED, wr, 0, pn));
        CHECK(mem[1] == 40 + (wr + ws - 1) % ws);
        OK(MPI_Win_unlock(wr, pn));
        val = -5;
        OK(MPI_Win_lock(MPI_LOCK_SHARED, to, 0, pn));
        OK(MPI_Get(MPI_BOTTOM, 1, abs, to, 1, 1, MPI_INT, pn));
        OK(MPI_Win_unlock(to, pn));
        CHECK(val == 40 + wr);
        OK(MPI_Type_free(&abs));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Win_free(&pn));
    }
    OK(MPI_Comm_free(&host));
    kt_pass("win");
    MPI_Finalize();
    return 0;
}
