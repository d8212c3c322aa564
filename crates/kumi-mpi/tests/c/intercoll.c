/* Concern: collectives and constructors on intercommunicators (MPI 4.1
 * section 6.2.2 and each collective's intercommunicator clause).
 * Regression: kumi refused every collective on an intercommunicator but
 * barrier, bcast and allreduce, and MPI_Comm_split / MPI_Comm_create /
 * MPI_Comm_idup on one.
 * Each intercommunicator below (halves, one against the rest, splits of an
 * intercommunicator by color and by host, MPI_Comm_create dropping each
 * group's rank 0, a dup, nonblocking dups) runs every data mover, blocking
 * and nonblocking, with uneven and zero counts and gaps, and the reductions,
 * blocking and nonblocking (one schedule across: MPI_Iallreduce,
 * MPI_Ireduce, MPI_Ireduce_scatter(_block)),
 * with ints and MAXLOC pairs; every element is checked against what the
 * other group sent. */
#include "kt.h"

static int g_left, g_lr, g_ln, g_rn; /* my group, local rank, sizes */

/* The value remote rank j of group g puts at index k. */
static int val(int g, int j, int k) { return (g + 1) * 1000 + j * 37 + k; }

static void gather_like(MPI_Comm ic) {
    int me = g_left, other = !g_left, rn = g_rn;
    int *rbuf = malloc(sizeof(int) * (rn * 8 + 8));
    int sbuf[64];

    /* Allgather: one int from every remote rank. */
    sbuf[0] = val(me, g_lr, 0);
    OK(MPI_Allgather(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, ic));
    for (int j = 0; j < rn; j++) CHECK(rbuf[j] == val(other, j, 0));

    /* Allgatherv: remote rank j sends j % 3 ints (zero counts), gaps of 1. */
    int *cnt = malloc(sizeof(int) * rn), *dis = malloc(sizeof(int) * rn);
    int off = 0;
    for (int j = 0; j < rn; j++) { cnt[j] = j % 3; dis[j] = off; off += cnt[j] + 1; }
    for (int k = 0; k < g_lr % 3; k++) sbuf[k] = val(me, g_lr, k);
    for (int i = 0; i < off; i++) rbuf[i] = -7;
    OK(MPI_Allgatherv(sbuf, g_lr % 3, MPI_INT, rbuf, cnt, dis, MPI_INT, ic));
    for (int j = 0; j < rn; j++) {
        for (int k = 0; k < cnt[j]; k++) CHECK(rbuf[dis[j] + k] == val(other, j, k));
        CHECK(rbuf[dis[j] + cnt[j]] == -7);
    }

    /* Alltoall: block j for remote rank j. */
    for (int j = 0; j < rn; j++) sbuf[j] = val(me, g_lr, j);
    OK(MPI_Alltoall(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, ic));
    for (int j = 0; j < rn; j++) CHECK(rbuf[j] == val(other, j, g_lr));

    /* Alltoallv: (i + j) % 3 ints from i to j, at strided places. */
    int *sc = malloc(sizeof(int) * rn), *sd = malloc(sizeof(int) * rn);
    int *rc = malloc(sizeof(int) * rn), *rd = malloc(sizeof(int) * rn);
    for (int j = 0; j < rn; j++) {
        sc[j] = (g_lr + j) % 3; sd[j] = 3 * (rn - 1 - j);
        rc[j] = (j + g_lr) % 3; rd[j] = 4 * j;
        for (int k = 0; k < sc[j]; k++) sbuf[sd[j] + k] = val(me, g_lr, 100 * j + k);
    }
    for (int i = 0; i < 4 * rn; i++) rbuf[i] = -7;
    OK(MPI_Alltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, ic));
    for (int j = 0; j < rn; j++)
        for (int k = 0; k < 4; k++)
            CHECK(rbuf[4 * j + k] == (k < rc[j] ? val(other, j, 100 * g_lr + k) : -7));

    /* Alltoallw: the same with byte displacements and a type per rank. */
    MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * rn);
    int *sdb = malloc(sizeof(int) * rn), *rdb = malloc(sizeof(int) * rn);
    for (int j = 0; j < rn; j++) { ty[j] = MPI_INT; sdb[j] = sd[j] * 4; rdb[j] = rd[j] * 4; }
    for (int i = 0; i < 4 * rn; i++) rbuf[i] = -7;
    OK(MPI_Alltoallw(sbuf, sc, sdb, ty, rbuf, rc, rdb, ty, ic));
    for (int j = 0; j < rn; j++)
        for (int k = 0; k < 4; k++)
            CHECK(rbuf[4 * j + k] == (k < rc[j] ? val(other, j, 100 * g_lr + k) : -7));

    /* Rooted: the root is rank 0 of each group in turn. */
    for (int rg = 0; rg < 2; rg++) {
        int root = (me == rg) ? (g_lr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        int at_root = root == MPI_ROOT, leaf = me != rg;

        for (int i = 0; i < rn + 1; i++) rbuf[i] = -7;
        sbuf[0] = val(me, g_lr, 5);
        OK(MPI_Gather(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, root, ic));
        if (at_root) for (int j = 0; j < rn; j++) CHECK(rbuf[j] == val(other, j, 5));
        if (!at_root) CHECK(rbuf[0] == -7);

        for (int k = 0; k < g_lr % 3; k++) sbuf[k] = val(me, g_lr, k);
        for (int i = 0; i < off; i++) rbuf[i] = -7;
        OK(MPI_Gatherv(sbuf, g_lr % 3, MPI_INT, rbuf, cnt, dis, MPI_INT, root, ic));
        if (at_root)
            for (int j = 0; j < rn; j++)
                for (int k = 0; k < cnt[j]; k++) CHECK(rbuf[dis[j] + k] == val(other, j, k));

        /* Scatter: the root's block j goes to remote rank j. */
        for (int j = 0; j < rn; j++) sbuf[j] = val(me, 0, 50 + j);
        rbuf[0] = -7;
        OK(MPI_Scatter(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, root, ic));
        if (leaf) CHECK(rbuf[0] == val(other, 0, 50 + g_lr));
        else CHECK(rbuf[0] == -7);

        /* Scatterv: remote rank j gets j % 3 ints from the root's gapped buffer. */
        for (int j = 0; j < rn; j++)
            for (int k = 0; k < cnt[j]; k++) sbuf[dis[j] + k] = val(me, 0, 10 * j + k);
        for (int k = 0; k < 3; k++) rbuf[k] = -7;
        OK(MPI_Scatterv(sbuf, cnt, dis, MPI_INT, rbuf, g_lr % 3, MPI_INT, root, ic));
        if (leaf)
            for (int k = 0; k < 3; k++)
                CHECK(rbuf[k] == (k < g_lr % 3 ? val(other, 0, 10 * g_lr + k) : -7));

        /* Bcast from the root. */
        int b[3] = {-7, -7, -7};
        if (at_root) { b[0] = 11; b[1] = 12; b[2] = 13 + rg; }
        OK(MPI_Bcast(b, 3, MPI_INT, root, ic));
        if (leaf || at_root) CHECK(b[0] == 11 && b[1] == 12 && b[2] == 13 + rg);
        else CHECK(b[0] == -7);

        /* Reduce of the other group's ints, and of a strided derived type. */
        int x = val(me, g_lr, 1), sum = -7;
        OK(MPI_Reduce(&x, &sum, 1, MPI_INT, MPI_SUM, root, ic));
        if (at_root) {
            int want = 0;
            for (int j = 0; j < rn; j++) want += val(other, j, 1);
            CHECK(sum == want);
        } else CHECK(sum == -7);
        /* MAXLOC on pairs: the largest value of the other group, and where. */
        int pr[2] = {(g_lr * 7) % 5, g_lr}, pm[2] = {-7, -7};
        OK(MPI_Reduce(pr, pm, 1, MPI_2INT, MPI_MAXLOC, root, ic));
        if (at_root) {
            int best = -1, where = -1;
            for (int j = 0; j < rn; j++)
                if ((j * 7) % 5 > best) { best = (j * 7) % 5; where = j; }
            CHECK(pm[0] == best && pm[1] == where);
        }
    }

    /* Allreduce: each group gets the other's sum. */
    int x = val(me, g_lr, 2), s = 0, want = 0;
    for (int j = 0; j < rn; j++) want += val(other, j, 2);
    OK(MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, ic));
    CHECK(s == want);

    /* Reduce_scatter_block: totals agree when each group takes the other's
     * size per rank; element k of the other group's sum. */
    int total = g_ln * g_rn;
    int *tv = malloc(sizeof(int) * (total + 1)), *tr = malloc(sizeof(int) * (total + 1));
    for (int k = 0; k < total; k++) tv[k] = val(me, g_lr, k);
    OK(MPI_Reduce_scatter_block(tv, tr, g_rn, MPI_INT, MPI_SUM, ic));
    for (int t = 0; t < g_rn; t++) {
        int k = g_lr * g_rn + t, w = 0;
        for (int j = 0; j < rn; j++) w += val(other, j, k);
        CHECK(tr[t] == w);
    }
    /* Reduce_scatter: the same total, unevenly (rank 0 one less, the last
     * one more). */
    int *rcs = malloc(sizeof(int) * g_ln), *at = malloc(sizeof(int) * g_ln);
    for (int i = 0, a = 0; i < g_ln; i++) {
        rcs[i] = g_rn + (g_ln > 1 ? (i == 0 ? -1 : i == g_ln - 1 ? 1 : 0) : 0);
        at[i] = a; a += rcs[i];
    }
    OK(MPI_Reduce_scatter(tv, tr, rcs, MPI_INT, MPI_SUM, ic));
    for (int t = 0; t < rcs[g_lr]; t++) {
        int k = at[g_lr] + t, w = 0;
        for (int j = 0; j < rn; j++) w += val(other, j, k);
        CHECK(tr[t] == w);
    }

    /* Nonblocking: several in flight at once, completed together. */
    int ag[64], a2a[64], s2[64], one = val(me, g_lr, 9);
    for (int j = 0; j < rn; j++) s2[j] = val(me, g_lr, 200 + j);
    int root = me == 0 ? (g_lr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    int gat[64], bc = me == 0 ? 77 : -7;
    MPI_Request q[4];
    OK(MPI_Iallgather(&one, 1, MPI_INT, ag, 1, MPI_INT, ic, &q[0]));
    OK(MPI_Ialltoall(s2, 1, MPI_INT, a2a, 1, MPI_INT, ic, &q[1]));
    OK(MPI_Igather(&one, 1, MPI_INT, gat, 1, MPI_INT, root, ic, &q[2]));
    OK(MPI_Ibcast(&bc, 1, MPI_INT, root, ic, &q[3]));
    OK(MPI_Waitall(4, q, MPI_STATUSES_IGNORE));
    for (int j = 0; j < rn; j++) {
        CHECK(ag[j] == val(other, j, 9));
        CHECK(a2a[j] == val(other, j, 200 + g_lr));
    }
    if (root == MPI_ROOT) for (int j = 0; j < rn; j++) CHECK(gat[j] == val(other, j, 9));
    if (me == 1) CHECK(bc == 77);

    /* The nonblocking reductions, all in flight at once: allreduce (ints,
     * and MAXLOC pairs), reduce to a root of each group in turn, and both
     * reduce-scatters; every result the other group's. */
    MPI_Request rq[6];
    int ia = -7, ir = -7, ip[2] = {(g_lr * 7) % 5, g_lr}, im[2] = {-7, -7};
    int *ib = malloc(sizeof(int) * (total + 1)), *iv = malloc(sizeof(int) * (total + 1));
    OK(MPI_Iallreduce(&x, &ia, 1, MPI_INT, MPI_SUM, ic, &rq[0]));
    OK(MPI_Iallreduce(ip, im, 1, MPI_2INT, MPI_MAXLOC, ic, &rq[1]));
    int iroot = me == 0 ? (g_lr == g_ln - 1 ? MPI_ROOT : MPI_PROC_NULL) : g_rn - 1;
    OK(MPI_Ireduce(&x, &ir, 1, MPI_INT, MPI_SUM, iroot, ic, &rq[2]));
    OK(MPI_Ireduce_scatter_block(tv, ib, g_rn, MPI_INT, MPI_SUM, ic, &rq[3]));
    OK(MPI_Ireduce_scatter(tv, iv, rcs, MPI_INT, MPI_SUM, ic, &rq[4]));
    OK(MPI_Ibarrier(ic, &rq[5]));
    OK(MPI_Waitall(6, rq, MPI_STATUSES_IGNORE));
    CHECK(ia == want);
    {
        int best = -1, where = -1;
        for (int j = 0; j < rn; j++)
            if ((j * 7) % 5 > best) { best = (j * 7) % 5; where = j; }
        CHECK(im[0] == best && im[1] == where);
    }
    if (iroot == MPI_ROOT) CHECK(ir == want);
    else CHECK(ir == -7);
    for (int t = 0; t < g_rn; t++) {
        int k = g_lr * g_rn + t, w = 0;
        for (int j = 0; j < rn; j++) w += val(other, j, k);
        CHECK(ib[t] == w);
    }
    for (int t = 0; t < rcs[g_lr]; t++) {
        int k = at[g_lr] + t, w = 0;
        for (int j = 0; j < rn; j++) w += val(other, j, k);
        CHECK(iv[t] == w);
    }
    free(ib); free(iv);

    /* MPI_IN_PLACE is no intercommunicator argument: an error. */
    if (kt_on_kumi()) {
        MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
        int cls, rc2 = MPI_Allgather(MPI_IN_PLACE, 1, MPI_INT, rbuf, 1, MPI_INT, ic);
        MPI_Error_class(rc2, &cls);
        CHECK(cls == MPI_ERR_BUFFER);
        MPI_Comm_set_errhandler(ic, MPI_ERRORS_ARE_FATAL);
    }
    free(rbuf); free(cnt); free(dis); free(sc); free(sd); free(rc); free(rd);
    free(ty); free(sdb); free(rdb); free(tv); free(tr); free(rcs); free(at);
}

/* Checks `ic` (this rank in the left group or not) and runs everything. */
static void check(MPI_Comm ic, int left) {
    int flag;
    OK(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag);
    g_left = left;
    OK(MPI_Comm_rank(ic, &g_lr));
    OK(MPI_Comm_size(ic, &g_ln));
    OK(MPI_Comm_remote_size(ic, &g_rn));
    /* Remote rank j is the process whose local rank is j. */
    int *got = malloc(sizeof(int) * g_rn);
    OK(MPI_Allgather(&g_lr, 1, MPI_INT, got, 1, MPI_INT, ic));
    for (int j = 0; j < g_rn; j++) CHECK(got[j] == j);
    free(got);
    gather_like(ic);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    if (n < 2) {
        kt_pass("intercoll");
        MPI_Finalize();
        return 0;
    }
    /* The world's first `cut` ranks against the rest. */
    for (int cut = 1; cut <= n / 2; cut += (n > 4 ? n / 2 - 1 : 1)) {
        int left = r < cut;
        MPI_Comm half, ic;
        OK(MPI_Comm_split(MPI_COMM_WORLD, left, r, &half));
        OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, left ? cut : 0, 7, &ic));
        check(ic, left);

        /* A dup of it, and a nonblocking one (two at once, completed in
         * the other order). */
        MPI_Comm d, d1, d2;
        OK(MPI_Comm_dup(ic, &d));
        check(d, left);
        OK(MPI_Comm_free(&d));
        MPI_Request dq[2];
        OK(MPI_Comm_idup(ic, &d1, &dq[0]));
        OK(MPI_Comm_idup(ic, &d2, &dq[1]));
        OK(MPI_Wait(&dq[1], MPI_STATUS_IGNORE));
        OK(MPI_Wait(&dq[0], MPI_STATUS_IGNORE));
        check(d2, left);
        check(d1, left);
        OK(MPI_Comm_free(&d1));
        OK(MPI_Comm_free(&d2));

        /* Split by parity of the local rank, reversed by key: the ranks of
         * one parity on each side (none when a side has no such rank). */
        int lr, ln, rn;
        MPI_Comm_rank(ic, &lr);
        MPI_Comm_size(ic, &ln);
        MPI_Comm_remote_size(ic, &rn);
        MPI_Comm sp;
        OK(MPI_Comm_split(ic, lr % 2, -lr, &sp));
        int mine = (ln - lr % 2 + 1) / 2, theirs = (rn - lr % 2 + 1) / 2;
        if (theirs == 0) {
            CHECK(sp == MPI_COMM_NULL);
        } else {
            int sr, ss, srs;
            MPI_Comm_rank(sp, &sr);
            MPI_Comm_size(sp, &ss);
            MPI_Comm_remote_size(sp, &srs);
            CHECK(ss == mine && srs == theirs);
            CHECK(sr == mine - 1 - lr / 2);
            check(sp, left);
            OK(MPI_Comm_free(&sp));
        }
        /* MPI_UNDEFINED everywhere on the right: nobody gets one. */
        OK(MPI_Comm_split(ic, left ? 0 : MPI_UNDEFINED, 0, &sp));
        CHECK(sp == MPI_COMM_NULL);

        /* Split by host: on one host, the same two groups. */
        OK(MPI_Comm_split_type(ic, MPI_COMM_TYPE_SHARED, lr, MPI_INFO_NULL, &sp));
        if (getenv("KT_ONE_HOST")) {
            int hs, hrs;
            MPI_Comm_size(sp, &hs);
            MPI_Comm_remote_size(sp, &hrs);
            CHECK(hs == ln && hrs == rn);
        }
        if (sp != MPI_COMM_NULL) {
            check(sp, left);
            OK(MPI_Comm_free(&sp));
        }
        OK(MPI_Comm_split_type(ic, MPI_UNDEFINED, 0, MPI_INFO_NULL, &sp));
        CHECK(sp == MPI_COMM_NULL);

        /* MPI_Comm_create without each group's rank 0. */
        MPI_Group g, g1;
        int zero = 0;
        OK(MPI_Comm_group(ic, &g));
        OK(MPI_Group_excl(g, 1, &zero, &g1));
        MPI_Comm cr;
        OK(MPI_Comm_create(ic, g1, &cr));
        if (ln == 1 || rn == 1 || lr == 0) {
            CHECK(cr == MPI_COMM_NULL);
        } else {
            int cs, crs;
            MPI_Comm_size(cr, &cs);
            MPI_Comm_remote_size(cr, &crs);
            CHECK(cs == ln - 1 && crs == rn - 1);
            check(cr, left);
            OK(MPI_Comm_free(&cr));
        }
        OK(MPI_Group_free(&g));
        OK(MPI_Group_free(&g1));
        OK(MPI_Comm_free(&ic));
        OK(MPI_Comm_free(&half));
    }
    kt_pass("intercoll");
    MPI_Finalize();
    return 0;
}
