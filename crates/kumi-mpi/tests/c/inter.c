/* Concern: intercommunicators. The world split into two groups (even and odd
 * ranks) joined by MPI_Intercomm_create: the queries (test_inter, sizes,
 * groups), point-to-point across with wildcards, MPI_Bcast from either side
 * (MPI_ROOT / MPI_PROC_NULL), MPI_Barrier, MPI_Ibarrier, MPI_Allreduce,
 * MPI_Comm_dup, MPI_Intercomm_merge in both orders, MPI_Comm_disconnect, and
 * a clear error for a collective kumi does not do on intercommunicators yet.
 * MPI_Comm_create with disjoint groups (MPI 2.2) makes the two halves as well.
 * Needs at least 2 ranks. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    if (n < 2) {
        kt_pass("inter");
        MPI_Finalize();
        return 0;
    }
    int color = r % 2;
    MPI_Comm half, ic;
    OK(MPI_Comm_split(MPI_COMM_WORLD, color, r, &half));
    int lr, ls;
    MPI_Comm_rank(half, &lr);
    MPI_Comm_size(half, &ls);
    int other = color ? (n + 1) / 2 : n / 2; /* the other group's size */
    /* Leaders: local rank 0 of each half; in the world, ranks 0 and 1. */
    OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? 0 : 1, 77, &ic));

    int flag, sz, rs, rk;
    OK(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag);
    OK(MPI_Comm_test_inter(half, &flag));
    CHECK(!flag);
    OK(MPI_Comm_size(ic, &sz));
    OK(MPI_Comm_rank(ic, &rk));
    OK(MPI_Comm_remote_size(ic, &rs));
    CHECK(sz == ls && rk == lr && rs == other);
    MPI_Group lg, rg, hg;
    OK(MPI_Comm_group(ic, &lg));
    OK(MPI_Comm_remote_group(ic, &rg));
    OK(MPI_Comm_group(half, &hg));
    int cmp, gsz;
    OK(MPI_Group_compare(lg, hg, &cmp));
    CHECK(cmp == MPI_IDENT);
    OK(MPI_Group_size(rg, &gsz));
    CHECK(gsz == other);
    /* Rank 0 of the remote group is world rank 1 (odd) or 0 (even). */
    int zero = 0, w;
    MPI_Group wg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    OK(MPI_Group_translate_ranks(rg, 1, &zero, wg, &w));
    CHECK(w == (color ? 0 : 1));
    MPI_Group_free(&lg), MPI_Group_free(&rg), MPI_Group_free(&hg), MPI_Group_free(&wg);

    /* Point-to-point across: local rank k sends to remote rank k % other
     * and everyone receives whatever arrives for it, from any source. */
    int to = lr % other, val = 1000 * color + lr;
    int expect = 0; /* how many remote ranks map onto my local rank */
    for (int k = 0; k < other; k++)
        if (k % ls == lr) expect++;
    MPI_Request q;
    OK(MPI_Isend(&val, 1, MPI_INT, to, 5, ic, &q));
    for (int i = 0; i < expect; i++) {
        int got;
        MPI_Status st;
        OK(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 5, ic, &st));
        CHECK(got == 1000 * (1 - color) + st.MPI_SOURCE && st.MPI_SOURCE % ls == lr);
    }
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));

    /* Broadcast from local rank 0 of the even group, then from the last
     * rank of the odd group. */
    int data[3] = {-1, -1, -1};
    int root = 0;
    if (color == 0) {
        if (lr == root) data[0] = 7, data[1] = 8, data[2] = 9;
        OK(MPI_Bcast(data, 3, MPI_INT, lr == root ? MPI_ROOT : MPI_PROC_NULL, ic));
        if (lr != root) CHECK(data[0] == -1);
    } else {
        OK(MPI_Bcast(data, 3, MPI_INT, root, ic));
        CHECK(data[0] == 7 && data[1] == 8 && data[2] == 9);
    }
    double dv[2] = {0, 0};
    int oroot = (n / 2) - 1; /* last odd local rank */
    if (color == 1) {
        if (lr == oroot) dv[0] = 1.5, dv[1] = -2.5;
        OK(MPI_Bcast(dv, 2, MPI_DOUBLE, lr == oroot ? MPI_ROOT : MPI_PROC_NULL, ic));
    } else {
        OK(MPI_Bcast(dv, 2, MPI_DOUBLE, oroot, ic));
        CHECK(dv[0] == 1.5 && dv[1] == -2.5);
    }
    OK(MPI_Barrier(ic));

    /* A duplicate works on its own context. */
    MPI_Comm ic2;
    OK(MPI_Comm_dup(ic, &ic2));
    OK(MPI_Comm_test_inter(ic2, &flag));
    CHECK(flag);
    if (lr == 0) {
        int a = 42 + color, b = -1;
        OK(MPI_Sendrecv(&a, 1, MPI_INT, 0, 1, &b, 1, MPI_INT, 0, 1, ic2, MPI_STATUS_IGNORE));
        CHECK(b == 42 + 1 - color);
    }

    /* Merge: the odd group low (first), then the even group low. */
    MPI_Comm m1, m2;
    OK(MPI_Intercomm_merge(ic, color == 0, &m1));
    int mr, ms;
    MPI_Comm_rank(m1, &mr);
    MPI_Comm_size(m1, &ms);
    CHECK(ms == n && mr == (color == 1 ? lr : n / 2 + lr));
    int sum = 0, one = r;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, m1));
    CHECK(sum == n * (n - 1) / 2);
    OK(MPI_Intercomm_merge(ic2, color == 1, &m2));
    MPI_Comm_rank(m2, &mr);
    CHECK(mr == (color == 0 ? lr : (n + 1) / 2 + lr));

    /* Allreduce across: each group gets the sum over the other group. */
    int osum = 0, want = 0;
    for (int q = 1 - color; q < n; q += 2) want += q;
    OK(MPI_Allreduce(&one, &osum, 1, MPI_INT, MPI_SUM, ic));
    CHECK(osum == want);
    MPI_Request br;
    OK(MPI_Ibarrier(ic, &br));
    OK(MPI_Wait(&br, MPI_STATUS_IGNORE));

    /* The nonblocking allreduce gives each group the other's sum too. */
    int isum = -1;
    MPI_Request iq;
    OK(MPI_Iallreduce(&one, &isum, 1, MPI_INT, MPI_SUM, ic, &iq));
    OK(MPI_Wait(&iq, MPI_STATUS_IGNORE));
    CHECK(isum == want);

    OK(MPI_Comm_free(&m1));
    OK(MPI_Comm_free(&m2));
    OK(MPI_Comm_free(&ic2));
    OK(MPI_Comm_disconnect(&ic));
    CHECK(ic == MPI_COMM_NULL);
    /* MPI_Comm_create with each half passing its own group (MPI 2.2). */
    MPI_Group world_g, mine_g;
    MPI_Comm_group(MPI_COMM_WORLD, &world_g);
    MPI_Comm_group(half, &mine_g);
    MPI_Comm again;
    OK(MPI_Comm_create(MPI_COMM_WORLD, mine_g, &again));
    OK(MPI_Comm_compare(again, half, &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    MPI_Group_free(&world_g), MPI_Group_free(&mine_g);
    OK(MPI_Comm_free(&again));
    OK(MPI_Comm_free(&half));
    kt_pass("inter");
    MPI_Finalize();
    return 0;
}
