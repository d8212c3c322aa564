/* Concern: nonblocking reduce and data movement (MPI_Ibcast, MPI_Ireduce,
 * MPI_Iallgather, MPI_Igather, MPI_Iscatter, MPI_Ialltoall, their v-variants,
 * MPI_Iscan, MPI_Iexscan, MPI_Ireduce_scatter(_block)): correct results at
 * every root, several in flight at once and completed in another order than
 * started, MPI_IN_PLACE, a derived datatype, overlap with point-to-point,
 * and long messages (which go straight between the program's buffers). */
#include "kt.h"

#define N 3

static int val(int r, int i) { return r * 1000 + i; }

/* inout = in (the lower ranks' part): not commutative, so a scan's every
 * prefix is rank 0's part only when the order is kept. */
static void keep_left(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    memcpy(inout, in, sizeof(int) * (size_t)*len);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int roots[3] = {0, n / 2, n - 1};
    int *all = malloc(sizeof(int) * N * n), *mine = malloc(sizeof(int) * N * n);
    int *gat = malloc(sizeof(int) * N * n), *a2a = malloc(sizeof(int) * N * n);
    CHECK(all && mine && gat && a2a);

    for (int k = 0; k < 3; k++) {
        int root = roots[k];
        MPI_Request q[6];
        int bc[N], red[N], sc[N];
        for (int i = 0; i < N; i++) {
            bc[i] = r == root ? val(root, i) : -1;
            mine[i] = val(r, i);
            red[i] = -1;
            sc[i] = -1;
        }
        for (int i = 0; i < N * n; i++) {
            all[i] = -1;
            gat[i] = -1;
            a2a[i] = val(r, i); /* block j (N ints) goes to rank j */
        }
        int *scsrc = malloc(sizeof(int) * N * n);
        for (int i = 0; i < N * n; i++) scsrc[i] = r == root ? val(i / N, i % N) + 7 : -5;
        int *a2a_in = malloc(sizeof(int) * N * n);

        OK(MPI_Ibcast(bc, N, MPI_INT, root, MPI_COMM_WORLD, &q[0]));
        OK(MPI_Ireduce(mine, red, N, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, &q[1]));
        OK(MPI_Iallgather(mine, N, MPI_INT, all, N, MPI_INT, MPI_COMM_WORLD, &q[2]));
        OK(MPI_Igather(mine, N, MPI_INT, gat, N, MPI_INT, root, MPI_COMM_WORLD, &q[3]));
        OK(MPI_Iscatter(scsrc, N, MPI_INT, sc, N, MPI_INT, root, MPI_COMM_WORLD, &q[4]));
        OK(MPI_Ialltoall(a2a, N, MPI_INT, a2a_in, N, MPI_INT, MPI_COMM_WORLD, &q[5]));
        /* Point-to-point meanwhile: a ring exchange. */
        int tok = r, got = -1;
        OK(MPI_Sendrecv(&tok, 1, MPI_INT, (r + 1) % n, 9, &got, 1, MPI_INT, (r + n - 1) % n, 9,
                        MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == (r + n - 1) % n);
        /* Completed in reverse order, the last through MPI_Waitall. */
        for (int j = 5; j >= 2; j--) OK(MPI_Wait(&q[j], MPI_STATUS_IGNORE));
        OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        for (int j = 0; j < 6; j++) CHECK(q[j] == MPI_REQUEST_NULL);

        for (int i = 0; i < N; i++) {
            CHECK(bc[i] == val(root, i));
            CHECK(sc[i] == val(r, i) + 7);
            if (r == root) {
                int s = 0;
                for (int q2 = 0; q2 < n; q2++) s += val(q2, i);
                CHECK(red[i] == s);
            } else {
                CHECK(red[i] == -1); /* untouched off the root */
            }
        }
        for (int i = 0; i < N * n; i++) {
            CHECK(all[i] == val(i / N, i % N));
            CHECK(gat[i] == (r == root ? val(i / N, i % N) : -1));
            /* Block j came from rank j: its block r. */
            CHECK(a2a_in[i] == val(i / N, r * N + i % N));
        }
        free(scsrc);
        free(a2a_in);
    }

    /* MPI_IN_PLACE: allgather, gather and reduce at the root, scatter at the root,
     * alltoall. */
    MPI_Request q;
    for (int i = 0; i < N * n; i++) all[i] = i / N == r ? val(r, i % N) : -1;
    OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, N, MPI_INT, MPI_COMM_WORLD, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (int i = 0; i < N * n; i++) CHECK(all[i] == val(i / N, i % N));

    int root = n - 1;
    for (int i = 0; i < N * n; i++) gat[i] = i / N == r ? val(r, i % N) : -1;
    for (int i = 0; i < N; i++) mine[i] = val(r, i);
    if (r == root)
        OK(MPI_Igather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gat, N, MPI_INT, root, MPI_COMM_WORLD, &q));
    else
        OK(MPI_Igather(mine, N, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (r == root)
        for (int i = 0; i < N * n; i++) CHECK(gat[i] == val(i / N, i % N));

    double d = r + 1.0, dsum = r == root ? r + 1.0 : -1.0;
    if (r == root)
        OK(MPI_Ireduce(MPI_IN_PLACE, &dsum, 1, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD, &q));
    else
        OK(MPI_Ireduce(&d, NULL, 1, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (r == root) CHECK(dsum == n * (n + 1) / 2.0);

    for (int i = 0; i < N * n; i++) all[i] = r == 0 ? val(i / N, i % N) : -1;
    int sc[N] = {-1, -1, -1};
    if (r == 0)
        OK(MPI_Iscatter(all, N, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD, &q));
    else
        OK(MPI_Iscatter(NULL, 0, MPI_DATATYPE_NULL, sc, N, MPI_INT, 0, MPI_COMM_WORLD, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (r == 0)
        for (int i = 0; i < N; i++) CHECK(all[i] == val(0, i)); /* root's block stays */
    else
        for (int i = 0; i < N; i++) CHECK(sc[i] == val(r, i));

    for (int i = 0; i < N * n; i++) a2a[i] = val(r, i);
    OK(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a2a, N, MPI_INT, MPI_COMM_WORLD, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (int i = 0; i < N * n; i++) CHECK(a2a[i] == val(i / N, r * N + i % N));

    /* The v-variants with uneven counts (rank i: i % 3 ints, some zero) placed
     * at displacements with a gap of one int between ranks, plus scans and
     * reduce-scatters, all in flight at once. */
    {
        int *cnt = malloc(sizeof(int) * n), *dsp = malloc(sizeof(int) * n);
        int *scnt = malloc(sizeof(int) * n), *sdsp = malloc(sizeof(int) * n);
        int *rcnt = malloc(sizeof(int) * n), *rdsp = malloc(sizeof(int) * n);
        CHECK(cnt && dsp && scnt && sdsp && rcnt && rdsp);
        int span = 0;
        for (int i = 0; i < n; i++) {
            cnt[i] = i % 3;
            dsp[i] = span;
            span += cnt[i] + 1;
        }
        int stot = 0, rtot = 0;
        for (int j = 0; j < n; j++) {
            scnt[j] = (r + j) % 3; /* to rank j */
            sdsp[j] = stot;
            stot += scnt[j];
            rcnt[j] = (j + r) % 3; /* from rank j */
            rdsp[j] = rtot;
            rtot += rcnt[j];
        }
        int root = n / 2, gv[3 * 17 + 17], agv[3 * 17 + 17], sv[3] = {-1, -1, -1};
        int svsrc[3 * 17 + 17], a2s[3 * 17], a2r[3 * 17];
        CHECK(n <= 17);
        for (int i = 0; i < span; i++) gv[i] = agv[i] = -1;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < cnt[i]; k++) svsrc[dsp[i] + k] = r == root ? val(i, k) + 3 : -5;
        for (int j = 0; j < n; j++)
            for (int k = 0; k < scnt[j]; k++) a2s[sdsp[j] + k] = val(r, j * 10 + k);
        for (int i = 0; i < rtot; i++) a2r[i] = -1;
        int mine_v[2] = {val(r, 0), val(r, 1)};
        int sc1[2] = {r + 1, 2}, sc1o[2] = {-1, -1}, ex1o[2] = {-1, -1};
        int rsb_in[2 * 17], rsb_out[2] = {-1, -1}, rs_in[3 * 17], rs_out[3] = {-1, -1, -1};
        for (int i = 0; i < 2 * n; i++) rsb_in[i] = r + i;
        int rs_tot = 0;
        for (int i = 0; i < n; i++) rs_tot += cnt[i];
        for (int i = 0; i < rs_tot; i++) rs_in[i] = r * i;
        MPI_Request q[8];
        OK(MPI_Igatherv(mine_v, cnt[r], MPI_INT, gv, cnt, dsp, MPI_INT, root, MPI_COMM_WORLD, &q[0]));
        OK(MPI_Iscatterv(svsrc, cnt, dsp, MPI_INT, sv, cnt[r], MPI_INT, root, MPI_COMM_WORLD, &q[1]));
        OK(MPI_Iallgatherv(mine_v, cnt[r], MPI_INT, agv, cnt, dsp, MPI_INT, MPI_COMM_WORLD, &q[2]));
        OK(MPI_Ialltoallv(a2s, scnt, sdsp, MPI_INT, a2r, rcnt, rdsp, MPI_INT, MPI_COMM_WORLD, &q[3]));
        OK(MPI_Iscan(sc1, sc1o, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[4]));
        OK(MPI_Iexscan(sc1, ex1o, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[5]));
        OK(MPI_Ireduce_scatter_block(rsb_in, rsb_out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[6]));
        OK(MPI_Ireduce_scatter(rs_in, rs_out, cnt, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &q[7]));
        OK(MPI_Waitall(8, q, MPI_STATUSES_IGNORE));
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < cnt[i]; k++) {
                CHECK(agv[dsp[i] + k] == val(i, k));
                CHECK(gv[dsp[i] + k] == (r == root ? val(i, k) : -1));
            }
            CHECK(agv[dsp[i] + cnt[i]] == -1); /* the gaps stay */
        }
        for (int k = 0; k < 3; k++) CHECK(sv[k] == (k < cnt[r] ? val(r, k) + 3 : -1));
        for (int j = 0; j < n; j++)
            for (int k = 0; k < rcnt[j]; k++) CHECK(a2r[rdsp[j] + k] == val(j, r * 10 + k));
        CHECK(sc1o[0] == (r + 1) * (r + 2) / 2 && sc1o[1] == 2 * (r + 1));
        if (r > 0) CHECK(ex1o[0] == r * (r + 1) / 2 && ex1o[1] == 2 * r);
        else CHECK(ex1o[0] == -1 && ex1o[1] == -1); /* rank 0: left alone */
        for (int k = 0; k < 2; k++) CHECK(rsb_out[k] == n * (n - 1) / 2 + n * (2 * r + k));
        int off = 0;
        for (int i = 0; i < r; i++) off += cnt[i];
        for (int k = 0; k < 3; k++) CHECK(rs_out[k] == (k < cnt[r] ? (n - 1) * (off + k) : -1));
        free(cnt); free(dsp); free(scnt); free(sdsp); free(rcnt); free(rdsp);
    }

    /* Scans in place, and a non-commutative operation's order. */
    {
        int is[2] = {r + 1, 7 * r}, ie[2] = {r + 1, 7 * r};
        int ls[2] = {r + 10, r + 20}, lso[2] = {-1, -1}, leo[2] = {-1, -1};
        MPI_Op left;
        OK(MPI_Op_create(keep_left, 0, &left));
        MPI_Request q[4];
        OK(MPI_Iscan(MPI_IN_PLACE, is, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
        OK(MPI_Iexscan(MPI_IN_PLACE, ie, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[1]));
        OK(MPI_Iscan(ls, lso, 2, MPI_INT, left, MPI_COMM_WORLD, &q[2]));
        OK(MPI_Iexscan(ls, leo, 2, MPI_INT, left, MPI_COMM_WORLD, &q[3]));
        OK(MPI_Waitall(4, q, MPI_STATUSES_IGNORE));
        CHECK(is[0] == (r + 1) * (r + 2) / 2 && is[1] == 7 * r * (r + 1) / 2);
        /* (rank 0's exclusive result in place is undefined in MPI) */
        if (r > 0) CHECK(ie[0] == r * (r + 1) / 2 && ie[1] == 7 * (r - 1) * r / 2);
        CHECK(lso[0] == 10 && lso[1] == 20);
        if (r > 0) CHECK(leo[0] == 10 && leo[1] == 20);
        else CHECK(leo[0] == -1 && leo[1] == -1);
        OK(MPI_Op_free(&left));
    }

    /* A derived type: every other int of 2N, broadcast from rank 0, completed
     * by MPI_Test. */
    MPI_Datatype every2;
    OK(MPI_Type_vector(N, 1, 2, MPI_INT, &every2));
    OK(MPI_Type_commit(&every2));
    int v[2 * N];
    for (int i = 0; i < 2 * N; i++) v[i] = r == 0 ? 100 + i : -1;
    OK(MPI_Ibcast(v, 1, every2, 0, MPI_COMM_WORLD, &q));
    int flag = 0;
    while (!flag) OK(MPI_Test(&q, &flag, MPI_STATUS_IGNORE));
    for (int i = 0; i < 2 * N; i++) CHECK(v[i] == (i % 2 == 0 || r == 0 ? 100 + i : -1));
    OK(MPI_Type_free(&every2));

    /* MPI_Ialltoallw, in place: one int per peer, types per peer all
     * MPI_INT, byte displacements. */
    {
        int *ic = malloc(sizeof(int) * n), *id = malloc(sizeof(int) * n), *buf = malloc(sizeof(int) * n);
        MPI_Datatype *it = malloc(sizeof(MPI_Datatype) * n);
        CHECK(ic && id && buf && it);
        for (int j = 0; j < n; j++) {
            ic[j] = 1;
            id[j] = (int)sizeof(int) * j;
            it[j] = MPI_INT;
            buf[j] = r * 1000 + j; /* for rank j */
        }
        OK(MPI_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, buf, ic, id, it, MPI_COMM_WORLD, &q));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++) CHECK(buf[i] == i * 1000 + r);
        free(ic); free(id); free(buf); free(it);
    }

    /* Large-count forms (MPI 4), which take MPI_Count and MPI_Aint arrays. */
    {
        MPI_Count cc[17], one = 1;
        MPI_Aint dd[17];
        int got[17], x = r * 3;
        CHECK(n <= 17);
        for (int i = 0; i < n; i++) {
            cc[i] = 1;
            dd[i] = n - 1 - i; /* reversed placement */
            got[i] = -1;
        }
        OK(MPI_Iallgatherv_c(&x, one, MPI_INT, got, cc, dd, MPI_INT, MPI_COMM_WORLD, &q));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++) CHECK(got[n - 1 - i] == i * 3);
        int b = r == n - 1 ? 42 : 0;
        OK(MPI_Ibcast_c(&b, one, MPI_INT, n - 1, MPI_COMM_WORLD, &q));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK(b == 42);
    }

    /* Errors under MPI_ERRORS_RETURN: a bad root, a NULL request. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int cls, rc = MPI_Ibcast(v, 1, MPI_INT, n, MPI_COMM_WORLD, &q);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ROOT);
    rc = MPI_Iallgather(mine, N, MPI_INT, all, N, MPI_INT, MPI_COMM_WORLD, NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Long messages, which go straight between the program's buffers: an
     * uneven all-to-all-v laid out in reverse, a 1 MiB broadcast from the
     * last rank and an allgather of 64 KiB blocks, all three in flight at
     * once and completed in reverse order. */
    {
        const int big = 1 << 16; /* ints */
        int *bsrc = malloc(sizeof(int) * big * n), *bdst = malloc(sizeof(int) * big * n);
        int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n);
        int *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
        int *bc = malloc(sizeof(int) * (1 << 18)), *ag = malloc(sizeof(int) * big * n);
        int *agm = malloc(sizeof(int) * big);
        CHECK(bsrc && bdst && sc && sd && rc && rd && bc && ag && agm);
        /* Rank r sends (r + d) % 3 + 1 thousand ints to d; blocks in reverse. */
        int off = 0;
        for (int d = n - 1; d >= 0; d--) {
            sc[d] = ((r + d) % 3 + 1) * 1000;
            sd[d] = off;
            off += sc[d];
        }
        for (int d = 0; d < n; d++)
            for (int i = 0; i < sc[d]; i++) bsrc[sd[d] + i] = r * 1000000 + d * 10000 + i % 9973;
        off = 0;
        for (int s = n - 1; s >= 0; s--) {
            rc[s] = ((s + r) % 3 + 1) * 1000;
            rd[s] = off;
            off += rc[s];
        }
        memset(bdst, 0xff, sizeof(int) * big * n);
        for (int i = 0; i < (1 << 18); i++) bc[i] = r == n - 1 ? i * 7 + 3 : -1;
        for (int i = 0; i < big; i++) agm[i] = r * 31 + i;
        MPI_Request q3[3];
        OK(MPI_Ialltoallv(bsrc, sc, sd, MPI_INT, bdst, rc, rd, MPI_INT, MPI_COMM_WORLD, &q3[0]));
        OK(MPI_Ibcast(bc, 1 << 18, MPI_INT, n - 1, MPI_COMM_WORLD, &q3[1]));
        OK(MPI_Iallgather(agm, big, MPI_INT, ag, big, MPI_INT, MPI_COMM_WORLD, &q3[2]));
        for (int k = 2; k >= 0; k--) OK(MPI_Wait(&q3[k], MPI_STATUS_IGNORE));
        for (int s = 0; s < n; s++)
            for (int i = 0; i < rc[s]; i += 97) CHECK(bdst[rd[s] + i] == s * 1000000 + r * 10000 + i % 9973);
        for (int i = 0; i < (1 << 18); i += 101) CHECK(bc[i] == i * 7 + 3);
        for (int s = 0; s < n; s++) CHECK(ag[s * big] == s * 31 && ag[s * big + big - 1] == s * 31 + big - 1);
        /* Long blocks that take several rounds through a host's collective
         * area: an alltoall of 50021 ints a block and an uneven allgatherv
         * of (r + 1) * 40009 ints, both started before either is waited
         * for, every element checked. */
        const int a2 = 50021;
        int *xs = malloc(sizeof(int) * a2 * n), *xr = malloc(sizeof(int) * a2 * n);
        int *vc = malloc(sizeof(int) * n), *vd = malloc(sizeof(int) * n);
        int vtotal = 0;
        for (int s = 0; s < n; s++) {
            vc[s] = (s + 1) * 40009;
            vd[s] = vtotal;
            vtotal += vc[s];
        }
        int *vs = malloc(sizeof(int) * vc[r]), *vr = malloc(sizeof(int) * vtotal);
        CHECK(xs && xr && vc && vd && vs && vr);
        for (int i = 0; i < a2 * n; i++) xs[i] = r * 7000003 + i;
        for (int i = 0; i < vc[r]; i++) vs[i] = r * 5000011 + i;
        memset(xr, 0xff, sizeof(int) * a2 * n);
        memset(vr, 0xff, sizeof(int) * vtotal);
        MPI_Request q4[2];
        OK(MPI_Ialltoall(xs, a2, MPI_INT, xr, a2, MPI_INT, MPI_COMM_WORLD, &q4[0]));
        OK(MPI_Iallgatherv(vs, vc[r], MPI_INT, vr, vc, vd, MPI_INT, MPI_COMM_WORLD, &q4[1]));
        OK(MPI_Waitall(2, q4, MPI_STATUSES_IGNORE));
        for (int s = 0; s < n; s++)
            for (int i = 0; i < a2; i++) CHECK(xr[s * a2 + i] == s * 7000003 + r * a2 + i);
        for (int s = 0; s < n; s++)
            for (int i = 0; i < vc[s]; i++) CHECK(vr[vd[s] + i] == s * 5000011 + i);
        /* An alltoallv mixing blocks that fit a member's share of a host's
         * collective area with longer ones (which go by messages) and empty
         * ones: rank r sends 40009 ints to d where (r + d) % 3 == 0, 3 where
         * it is 1, none where it is 2; in flight beside a second alltoallv
         * of the same shape, every element checked. */
        int *mc = malloc(sizeof(int) * n), *md = malloc(sizeof(int) * n);
        int *nc = malloc(sizeof(int) * n), *nd = malloc(sizeof(int) * n);
        CHECK(mc && md && nc && nd);
        int mt = 0, nt = 0;
        for (int d = 0; d < n; d++) {
            int k = (r + d) % 3;
            mc[d] = k == 0 ? 40009 : k == 1 ? 3 : 0; /* to d, and from d */
            md[d] = mt;
            mt += mc[d];
            nd[d] = nt;
            nc[d] = mc[d];
            nt += nc[d] + 1; /* a gap of one int after each block received */
        }
        int *ms = malloc(sizeof(int) * (mt + 1)), *mr[2];
        CHECK(ms);
        for (int i = 0; i < mt; i++) ms[i] = r * 3000017 + i;
        MPI_Request q5[2];
        for (int k = 0; k < 2; k++) {
            mr[k] = malloc(sizeof(int) * (nt + 1));
            CHECK(mr[k]);
            memset(mr[k], 0xff, sizeof(int) * (nt + 1));
            OK(MPI_Ialltoallv(ms, mc, md, MPI_INT, mr[k], nc, nd, MPI_INT, MPI_COMM_WORLD, &q5[k]));
        }
        OK(MPI_Waitall(2, q5, MPI_STATUSES_IGNORE));
        for (int k = 0; k < 2; k++) {
            for (int s = 0; s < n; s++) {
                /* Rank s's block for r starts where its blocks for 0..r-1 end. */
                int from = 0;
                for (int d = 0; d < r; d++) {
                    int j = (s + d) % 3;
                    from += j == 0 ? 40009 : j == 1 ? 3 : 0;
                }
                for (int i = 0; i < nc[s]; i++) CHECK(mr[k][nd[s] + i] == s * 3000017 + from + i);
                CHECK(mr[k][nd[s] + nc[s]] == -1);
            }
            free(mr[k]);
        }
        /* A gatherv to rank n - 1 and a scatterv from rank 0 of blocks of
         * 40009 ints (beyond a collective area's half: messages), r + 1 ints
         * and none (rank r: by r % 3), a gap of one int after each block at
         * the root, both in flight at once, every element checked. */
        int gr = n - 1, *gc = malloc(sizeof(int) * n), *gd = malloc(sizeof(int) * n), gt = 0;
        CHECK(gc && gd);
        for (int s = 0; s < n; s++) {
            gc[s] = s % 3 == 0 ? 40009 : s % 3 == 1 ? s + 1 : 0;
            gd[s] = gt;
            gt += gc[s] + 1;
        }
        int *gs = malloc(sizeof(int) * (gc[r] + 1)), *ga = malloc(sizeof(int) * (gt + 1));
        int *ss = malloc(sizeof(int) * (gt + 1)), *sr = malloc(sizeof(int) * (gc[r] + 1));
        CHECK(gs && ga && ss && sr);
        for (int i = 0; i < gc[r]; i++) gs[i] = r * 4000037 + i;
        for (int i = 0; i < gt; i++) ga[i] = -1, ss[i] = i * 3 + 1;
        for (int i = 0; i <= gc[r]; i++) sr[i] = -1;
        MPI_Request q6[2];
        OK(MPI_Igatherv(gs, gc[r], MPI_INT, ga, gc, gd, MPI_INT, gr, MPI_COMM_WORLD, &q6[0]));
        OK(MPI_Iscatterv(ss, gc, gd, MPI_INT, sr, gc[r], MPI_INT, 0, MPI_COMM_WORLD, &q6[1]));
        OK(MPI_Waitall(2, q6, MPI_STATUSES_IGNORE));
        if (r == gr)
            for (int s = 0; s < n; s++) {
                for (int i = 0; i < gc[s]; i++) CHECK(ga[gd[s] + i] == s * 4000037 + i);
                CHECK(ga[gd[s] + gc[s]] == -1);
            }
        else
            CHECK(ga[0] == -1);
        for (int i = 0; i < gc[r]; i++) CHECK(sr[i] == (gd[r] + i) * 3 + 1);
        CHECK(sr[gc[r]] == -1);
        free(gc); free(gd); free(gs); free(ga); free(ss); free(sr);
        free(ms);
        free(mc);
        free(md);
        free(nc);
        free(nd);
        free(xs);
        free(xr);
        free(vc);
        free(vd);
        free(vs);
        free(vr);
        free(bsrc);
        free(bdst);
        free(sc);
        free(sd);
        free(rc);
        free(rd);
        free(bc);
        free(ag);
        free(agm);
    }

    free(all);
    free(mine);
    free(gat);
    free(a2a);
    kt_pass("nbmove");
    MPI_Finalize();
    return 0;
}
