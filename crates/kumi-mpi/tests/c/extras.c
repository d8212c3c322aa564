/* Concern: the MPI-1 graph topology, distributed-array datatypes, datatype
 * attributes, the MPI-1 MPI_Type_lb/ub, Fortran statuses, and the
 * large-count (_c) forms of the constructors, pack, user operations,
 * MPI_Alltoallw, the neighbourhood collectives and the persistent
 * collectives. */
#include "kt.h"

static int copies, deletes;

/* A generalized request's callbacks: the query reports 3 ints, the free and
 * cancel callbacks count their calls. */
static int g_frees, g_cancels;
static int g_query(void *extra, MPI_Status *st) {
    OK(MPI_Status_set_elements(st, MPI_INT, 3));
    OK(MPI_Status_set_cancelled(st, 0));
    st->MPI_SOURCE = *(int *)extra;
    st->MPI_TAG = 9;
    return MPI_SUCCESS;
}
static int g_free(void *extra) {
    (void)extra;
    g_frees++;
    return MPI_SUCCESS;
}
static int g_cancel(void *extra, int complete) {
    (void)extra, (void)complete;
    g_cancels++;
    return MPI_SUCCESS;
}

static int copy_attr(MPI_Datatype t, int k, void *extra, void *in, void *out, int *flag) {
    (void)t, (void)k, (void)extra;
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_attr(MPI_Datatype t, int k, void *v, void *extra) {
    (void)t, (void)k, (void)v, (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

/* 2x2 integer matrices, row-major, multiplied in order: not commutative. */
static void matmul_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *t) {
    (void)t;
    long *a = in, *b = inout;
    for (MPI_Count k = 0; k < *len; k += 4, a += 4, b += 4) {
        long r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                     a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, r, sizeof r);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int left = (r + n - 1) % n, right = (r + 1) % n;

    /* ---- MPI-1 graph: a ring over the first max(n-1, 1) ranks. ---- */
    int nodes = n > 1 ? n - 1 : 1;
    int *index = malloc(sizeof(int) * nodes), *edges = malloc(sizeof(int) * 2 * nodes);
    CHECK(index && edges);
    for (int i = 0; i < nodes; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + nodes - 1) % nodes;
        edges[2 * i + 1] = (i + 1) % nodes;
    }
    MPI_Comm g;
    OK(MPI_Graph_create(MPI_COMM_WORLD, nodes, index, edges, 0, &g));
    int newrank;
    OK(MPI_Graph_map(MPI_COMM_WORLD, nodes, index, edges, &newrank));
    if (r >= nodes) {
        CHECK(g == MPI_COMM_NULL && newrank == MPI_UNDEFINED);
    } else {
        CHECK(newrank == r);
        int topo, nn, ne, cnt, nb[2], gi[64], ge[128];
        OK(MPI_Topo_test(g, &topo));
        CHECK(topo == MPI_GRAPH);
        OK(MPI_Graphdims_get(g, &nn, &ne));
        CHECK(nn == nodes && ne == 2 * nodes);
        OK(MPI_Graph_get(g, 64, 128, gi, ge));
        for (int i = 0; i < nodes; i++) CHECK(gi[i] == index[i] && ge[2 * i + 1] == edges[2 * i + 1]);
        OK(MPI_Graph_neighbors_count(g, r, &cnt));
        CHECK(cnt == 2);
        OK(MPI_Graph_neighbors(g, r, 2, nb));
        CHECK(nb[0] == (r + nodes - 1) % nodes && nb[1] == (r + 1) % nodes);
        int rc;
        MPI_Comm_set_errhandler(g, MPI_ERRORS_RETURN);
        rc = MPI_Graph_neighbors_count(g, nodes, &cnt);
        CHECK(rc != MPI_SUCCESS);
        /* A neighbourhood collective on it, in its large-count form. */
        int got[2] = {-1, -1};
        OK(MPI_Neighbor_allgather_c(&r, 1, MPI_INT, got, 1, MPI_INT, g));
        CHECK(got[0] == nb[0] && got[1] == nb[1]);
        MPI_Count rc2[2] = {1, 1};
        MPI_Aint dsp[2] = {1, 0};
        OK(MPI_Neighbor_allgatherv_c(&r, 1, MPI_INT, got, rc2, dsp, MPI_INT, g));
        CHECK(got[1] == nb[0] && got[0] == nb[1]);
        OK(MPI_Comm_free(&g));
    }
    free(index);
    free(edges);

    /* ---- darray: a 5x7 array over a 2-D grid (rows block, columns
     * cyclic by 2); every element belongs to exactly one rank. ---- */
    int dims[2] = {0, 0};
    OK(MPI_Dims_create(n, 2, dims));
    int gs[2] = {5, 7}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int darg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2};
    int owner[35];
    for (int i = 0; i < 35; i++) owner[i] = -1;
    for (int q = 0; q < n; q++) {
        MPI_Datatype da;
        OK(MPI_Type_create_darray(n, q, 2, gs, dist, darg, dims, MPI_ORDER_C, MPI_INT, &da));
        OK(MPI_Type_commit(&da));
        MPI_Aint lb, ext;
        OK(MPI_Type_get_extent(da, &lb, &ext));
        CHECK(lb == 0 && ext == 35 * 4);
        int all[35], sz;
        for (int i = 0; i < 35; i++) all[i] = i;
        OK(MPI_Type_size(da, &sz));
        int mine[35], pos = 0;
        OK(MPI_Pack(all, 1, da, mine, sizeof mine, &pos, MPI_COMM_SELF));
        int b = (5 + dims[0] - 1) / dims[0], c0 = q / dims[1], c1 = q % dims[1];
        for (int i = 0; i < sz / 4; i++) {
            int e = mine[i], row = e / 7, col = e % 7;
            CHECK(owner[e] == -1); /* nobody else has it */
            owner[e] = q;
            CHECK(row >= c0 * b && row < (c0 + 1) * b && (col / 2) % dims[1] == c1);
            CHECK(i == 0 || mine[i - 1] < e); /* in the array's order */
        }
        int ni, na, nd, comb;
        OK(MPI_Type_get_envelope(da, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_DARRAY && ni == 4 + 4 * 2 && nd == 1);
        OK(MPI_Type_free(&da));
    }
    for (int i = 0; i < 35; i++) CHECK(owner[i] >= 0);

    /* ---- datatype attributes: set, get, copied by MPI_Type_dup through the
     * copy callback, deleted on free. ---- */
    int kv, flag;
    void *v;
    MPI_Datatype t, t2;
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    OK(MPI_Type_create_keyval(copy_attr, delete_attr, &kv, NULL));
    static char base[4];
    OK(MPI_Type_set_attr(t, kv, base));
    OK(MPI_Type_get_attr(t, kv, &v, &flag));
    CHECK(flag && v == base);
    OK(MPI_Type_dup(t, &t2));
    CHECK(copies == 1);
    OK(MPI_Type_get_attr(t2, kv, &v, &flag));
    CHECK(flag && v == base + 1);
    OK(MPI_Type_delete_attr(t, kv));
    CHECK(deletes == 1);
    OK(MPI_Type_get_attr(t, kv, &v, &flag));
    CHECK(!flag);
    OK(MPI_Type_free(&t2));
    CHECK(deletes == 2);
    OK(MPI_Type_free(&t));
    OK(MPI_Type_free_keyval(&kv));
    CHECK(kv == MPI_KEYVAL_INVALID);

    /* ---- MPI-1 bounds, Fortran statuses. ---- */
    MPI_Datatype rz;
    OK(MPI_Type_create_resized(MPI_INT, -4, 16, &rz));
    MPI_Aint lo, hi;
    OK(MPI_Type_lb(rz, &lo));
    OK(MPI_Type_ub(rz, &hi));
    CHECK(lo == -4 && hi == 12);
    OK(MPI_Type_free(&rz));
    MPI_Status cs, back;
    MPI_Fint fs[MPI_F_STATUS_SIZE];
    int x = r, y = -1;
    OK(MPI_Sendrecv(&x, 1, MPI_INT, right, 3, &y, 1, MPI_INT, left, 3, MPI_COMM_WORLD, &cs));
    OK(MPI_Status_c2f(&cs, fs));
    OK(MPI_Status_f2c(fs, &back));
    int cnt;
    OK(MPI_Get_count(&back, MPI_INT, &cnt));
    CHECK(back.MPI_SOURCE == left && back.MPI_TAG == 3 && cnt == 1 && y == left);
    /* Fortran's ignore sentinels are objects of their own (mpif.h's common
     * blocks), distinct from each other and from C's. */
    CHECK(MPI_F_STATUS_IGNORE != NULL && MPI_F_STATUSES_IGNORE != NULL);
    CHECK((void *)MPI_F_STATUS_IGNORE != (void *)MPI_F_STATUSES_IGNORE);
    CHECK((void *)MPI_F_STATUS_IGNORE != (void *)MPI_STATUS_IGNORE);

    /* ---- large-count constructors and their envelopes. ---- */
    MPI_Datatype vc, ic, sc, sa;
    OK(MPI_Type_vector_c(3, 1, 2, MPI_INT, &vc));
    MPI_Count bl[2] = {1, 2}, dp[2] = {0, 3};
    OK(MPI_Type_indexed_c(2, bl, dp, MPI_INT, &ic));
    MPI_Count sbl[2] = {1, 1}, sdp[2] = {0, 8};
    MPI_Datatype sty[2] = {MPI_DOUBLE, MPI_INT};
    OK(MPI_Type_create_struct_c(2, sbl, sdp, sty, &sc));
    MPI_Count sz[2] = {4, 4}, ssz[2] = {2, 2}, st0[2] = {1, 1};
    OK(MPI_Type_create_subarray_c(2, sz, ssz, st0, MPI_ORDER_C, MPI_INT, &sa));
    OK(MPI_Type_commit(&sa));
    int s1, s2, s3, s4;
    MPI_Type_size(vc, &s1), MPI_Type_size(ic, &s2), MPI_Type_size(sc, &s3), MPI_Type_size(sa, &s4);
    CHECK(s1 == 12 && s2 == 12 && s3 == 12 && s4 == 16);
    MPI_Count ni, na, nl, nd;
    int comb;
    /* MPI-4: a type made by a _c constructor keeps its counts as large counts. */
    OK(MPI_Type_get_envelope_c(ic, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_INDEXED && ni == 0 && na == 0 && nl == 5 && nd == 1);
    int ints[1];
    MPI_Aint adds[1];
    MPI_Count lcs[5];
    MPI_Datatype tys[1];
    OK(MPI_Type_get_contents_c(ic, 0, 0, 5, 1, ints, adds, lcs, tys));
    CHECK(lcs[0] == 2 && lcs[2] == 2 && lcs[4] == 3 && tys[0] == MPI_INT);
    OK(MPI_Type_get_envelope_c(sa, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_SUBARRAY && ni == 2 && nl == 6);
    /* Pack and unpack with MPI_Count positions. */
    int grid[16], round[16];
    for (int i = 0; i < 16; i++) grid[i] = i, round[i] = -1;
    char pk[64];
    MPI_Count pos = 0;
    OK(MPI_Pack_c(grid, 1, sa, pk, sizeof pk, &pos, MPI_COMM_WORLD));
    CHECK(pos == 16);
    pos = 0;
    OK(MPI_Unpack_c(pk, sizeof pk, &pos, round, 1, sa, MPI_COMM_WORLD));
    CHECK(pos == 16 && round[5] == 5 && round[10] == 10 && round[0] == -1);
    MPI_Type_free(&vc), MPI_Type_free(&ic), MPI_Type_free(&sc), MPI_Type_free(&sa);

    /* ---- a large-count user operation, not commutative: rank order. ---- */
    MPI_Op op;
    OK(MPI_Op_create_c(matmul_c, 0, &op));
    long m[4] = {1, r, 0, 1}, prod[4];
    OK(MPI_Allreduce(m, prod, 4, MPI_LONG, op, MPI_COMM_WORLD));
    CHECK(prod[0] == 1 && prod[1] == (long)n * (n - 1) / 2 && prod[2] == 0 && prod[3] == 1);
    long io[4] = {1, 5, 0, 1};
    OK(MPI_Reduce_local_c(m, io, 4, MPI_LONG, op));
    CHECK(io[1] == 5 + r);
    OK(MPI_Op_free(&op));

    /* ---- large-count all-to-all with types per peer. ---- */
    int *sb = malloc(sizeof(int) * n), *rb = malloc(sizeof(int) * n);
    MPI_Count *cts = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *dsp = malloc(sizeof(MPI_Aint) * n);
    MPI_Datatype *tps = malloc(sizeof(MPI_Datatype) * n);
    CHECK(sb && rb && cts && dsp && tps);
    for (int i = 0; i < n; i++) sb[i] = r * 100 + i, rb[i] = -1, cts[i] = 1, dsp[i] = 4 * i, tps[i] = MPI_INT;
    OK(MPI_Alltoallw_c(sb, cts, dsp, tps, rb, cts, dsp, tps, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(rb[i] == i * 100 + r);

    /* ---- persistent large-count collectives, started twice. ---- */
    int bc = r == 0 ? 42 : -1;
    MPI_Request pr[2];
    OK(MPI_Bcast_init_c(&bc, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &pr[0]));
    MPI_Aint gd[64];
    MPI_Count gc[64];
    CHECK(n <= 64);
    for (int i = 0; i < n; i++) gc[i] = 1, gd[i] = n - 1 - i;
    int gx = r, *gall = malloc(sizeof(int) * n);
    OK(MPI_Allgatherv_init_c(&gx, 1, MPI_INT, gall, gc, gd, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &pr[1]));
    for (int round2 = 0; round2 < 2; round2++) {
        for (int i = 0; i < n; i++) gall[i] = -1;
        OK(MPI_Startall(2, pr));
        OK(MPI_Waitall(2, pr, MPI_STATUSES_IGNORE));
        CHECK(bc == 42);
        for (int i = 0; i < n; i++) CHECK(gall[n - 1 - i] == i);
    }
    OK(MPI_Request_free(&pr[0]));
    OK(MPI_Request_free(&pr[1]));
    free(sb), free(rb), free(cts), free(dsp), free(tps), free(gall);

    /* ---- Fortran 90 parameterized types, the parent, the start info. ---- */
    MPI_Datatype f90;
    int tsz;
    OK(MPI_Type_create_f90_real(10, MPI_UNDEFINED, &f90));
    MPI_Type_size(f90, &tsz);
    CHECK(tsz == 8);
    OK(MPI_Type_create_f90_complex(5, 30, &f90));
    MPI_Type_size(f90, &tsz);
    CHECK(tsz == 8);
    OK(MPI_Type_create_f90_integer(9, &f90));
    MPI_Type_size(f90, &tsz);
    CHECK(tsz == 4);
    {
        /* Their own handles (combiner F90_*, the arguments as given, no
         * datatypes), the same one for the same arguments, predefined (not
         * freeable), and usable in communication and reductions. */
        MPI_Datatype fr, fr2, fc, fi;
        int ni, na, nd, comb, iv[2] = {0, 0};
        MPI_Aint av[1];
        MPI_Datatype dv[1];
        OK(MPI_Type_create_f90_real(7, MPI_UNDEFINED, &fr));
        OK(MPI_Type_create_f90_real(7, MPI_UNDEFINED, &fr2));
        CHECK(fr == fr2 && fr != MPI_DOUBLE);
        OK(MPI_Type_get_envelope(fr, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_F90_REAL && ni == 2 && na == 0 && nd == 0);
        OK(MPI_Type_get_contents(fr, 2, 0, 0, iv, av, dv));
        CHECK(iv[0] == 7 && iv[1] == MPI_UNDEFINED);
        OK(MPI_Type_create_f90_complex(MPI_UNDEFINED, 30, &fc));
        OK(MPI_Type_get_envelope(fc, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_F90_COMPLEX && ni == 2 && nd == 0);
        OK(MPI_Type_get_contents(fc, 2, 0, 0, iv, av, dv));
        CHECK(iv[0] == MPI_UNDEFINED && iv[1] == 30);
        OK(MPI_Type_create_f90_integer(4, &fi));
        OK(MPI_Type_get_envelope(fi, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_F90_INTEGER && ni == 1 && nd == 0);
        OK(MPI_Type_get_contents(fi, 1, 0, 0, iv, av, dv));
        CHECK(iv[0] == 4);
        MPI_Type_size(fi, &tsz);
        CHECK(tsz == 2);
        if (kt_on_kumi()) { /* erroneous; MPICH lets it pass, kumi says so */
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
            MPI_Datatype victim = fr;
            CHECK(MPI_Type_free(&victim) != MPI_SUCCESS);
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        }
        double dsum[2] = {r + 0.5, 2.0 * r}, dout[2];
        OK(MPI_Allreduce(dsum, dout, 2, fr, MPI_SUM, MPI_COMM_WORLD));
        CHECK(dout[0] == n * (n - 1) / 2.0 + 0.5 * n && dout[1] == (double)n * (n - 1));
        short ssum = (short)(r + 1), sout = 0;
        OK(MPI_Reduce(&ssum, &sout, 1, fi, MPI_MAX, 0, MPI_COMM_WORLD));
        if (r == 0) CHECK(sout == n);
        float cx[2] = {1.0f, (float)r}, cy[2];
        OK(MPI_Sendrecv(cx, 1, fc, right, 3, cy, 1, fc, left, 3, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
        CHECK(cy[0] == 1.0f && cy[1] == (float)left);
    }
    MPI_Comm parent;
    OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL);
    MPI_Info env;
    OK(MPI_Info_create_env(argc, argv, &env));
    char val[64];
    int envflag;
    OK(MPI_Info_get(env, "maxprocs", sizeof val - 1, val, &envflag));
    if (kt_on_kumi()) CHECK(envflag && atoi(val) == n); /* what is there is up to the library */
    OK(MPI_Info_free(&env));

    /* ---- generalized requests: completed by the program, then waited for;
     * tested before completion; freed without a wait. ---- */
    MPI_Request gr;
    int who = 1234, gflag;
    OK(MPI_Grequest_start(g_query, g_free, g_cancel, &who, &gr));
    OK(MPI_Test(&gr, &gflag, MPI_STATUS_IGNORE));
    CHECK(!gflag);
    OK(MPI_Cancel(&gr));
    CHECK(g_cancels == 1);
    OK(MPI_Grequest_complete(gr));
    MPI_Status gst;
    /* MPI_Request_get_status asks the query callback, and frees nothing. */
    OK(MPI_Request_get_status(gr, &gflag, &gst));
    CHECK(gflag && gst.MPI_SOURCE == 1234 && gst.MPI_TAG == 9 && g_frees == 0);
    gst.MPI_SOURCE = -1;
    OK(MPI_Wait(&gr, &gst));
    int gcount;
    OK(MPI_Get_count(&gst, MPI_INT, &gcount));
    CHECK(gr == MPI_REQUEST_NULL && gcount == 3 && gst.MPI_SOURCE == 1234 && gst.MPI_TAG == 9 && g_frees == 1);
    OK(MPI_Grequest_start(g_query, g_free, g_cancel, &who, &gr));
    OK(MPI_Grequest_complete(gr));
    OK(MPI_Request_free(&gr));
    CHECK(g_frees == 2);

    /* ---- partitioned communication: 4 partitions of 2 ints to the right,
     * marked ready in three ways over two starts. ---- */
    int psend[8], precv[8];
    MPI_Request pq[2];
    OK(MPI_Psend_init(psend, 4, 2, MPI_INT, right, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &pq[0]));
    OK(MPI_Precv_init(precv, 4, 2, MPI_INT, left, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &pq[1]));
    for (int round2 = 0; round2 < 2; round2++) {
        for (int i = 0; i < 8; i++) psend[i] = r * 100 + round2 * 10 + i, precv[i] = -1;
        OK(MPI_Startall(2, pq));
        int pflag = 1;
        OK(MPI_Test(&pq[0], &pflag, MPI_STATUS_IGNORE));
        CHECK(!pflag); /* nothing is ready yet */
        if (round2 == 0) {
            for (int i = 3; i >= 0; i--) OK(MPI_Pready(i, pq[0]));
        } else {
            int two[2] = {3, 0};
            OK(MPI_Pready_range(1, 2, pq[0]));
            OK(MPI_Pready_list(2, two, pq[0]));
        }
        int arrived = 0;
        while (!arrived) OK(MPI_Parrived(pq[1], 2, &arrived));
        MPI_Status pst[2];
        OK(MPI_Waitall(2, pq, pst));
        OK(MPI_Get_count(&pst[1], MPI_INT, &cnt));
        CHECK(cnt == 8);
        for (int i = 0; i < 8; i++) CHECK(precv[i] == left * 100 + round2 * 10 + i);
    }
    OK(MPI_Request_free(&pq[0]));
    OK(MPI_Request_free(&pq[1]));

    /* ---- external32: big-endian bytes, a strided type, a round trip. ---- */
    int ex[4] = {0x01020304, -2, 7, 0x0a0b0c0d};
    double exd = 1.0;
    unsigned char xb[64];
    MPI_Aint xpos = 0, xsize;
    MPI_Datatype ev;
    OK(MPI_Type_vector(2, 1, 3, MPI_INT, &ev)); /* ex[0] and ex[3] */
    OK(MPI_Type_commit(&ev));
    OK(MPI_Pack_external_size("external32", 1, ev, &xsize));
    CHECK(xsize == 8);
    OK(MPI_Pack_external("external32", ex, 1, ev, xb, sizeof xb, &xpos));
    OK(MPI_Pack_external("external32", &exd, 1, MPI_DOUBLE, xb, sizeof xb, &xpos));
    CHECK(xpos == 16);
    CHECK(xb[0] == 1 && xb[1] == 2 && xb[2] == 3 && xb[3] == 4 && xb[4] == 0x0a && xb[7] == 0x0d);
    CHECK(xb[8] == 0x3f && xb[9] == 0xf0 && xb[15] == 0); /* 1.0 as big-endian IEEE */
    int exback[4] = {0, 0, 0, 0};
    double exdback = 0;
    xpos = 0;
    OK(MPI_Unpack_external("external32", xb, sizeof xb, &xpos, exback, 1, ev));
    OK(MPI_Unpack_external("external32", xb, sizeof xb, &xpos, &exdback, 1, MPI_DOUBLE));
    CHECK(exback[0] == ex[0] && exback[3] == ex[3] && exback[1] == 0 && exdback == 1.0);
    OK(MPI_Type_free(&ev));
    if (kt_on_kumi()) { /* the standard names external32 only; MPICH takes more */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int xrc = MPI_Pack_external("native", ex, 1, MPI_INT, xb, sizeof xb, &xpos);
        CHECK(xrc != MPI_SUCCESS);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    {
        /* Types whose external32 size is not the native one: long (4
         * bytes there), long double (IEEE binary128 there), and a complex
         * number (each half swapped). */
        long lv[3] = {-5, 7, 0x01020304}, lback[3] = {0, 0, 0};
        long double ld = -1.5L, ldback = 0;
        float cf[2] = {1.0f, -2.0f}, cfback[2] = {0, 0};
        OK(MPI_Pack_external_size("external32", 3, MPI_LONG, &xsize));
        CHECK(xsize == 12);
        OK(MPI_Pack_external_size("external32", 1, MPI_LONG_DOUBLE, &xsize));
        CHECK(xsize == 16);
        xpos = 0;
        OK(MPI_Pack_external("external32", lv, 3, MPI_LONG, xb, sizeof xb, &xpos));
        CHECK(xpos == 12);
        CHECK(xb[0] == 0xff && xb[3] == 0xfb && xb[7] == 7 && xb[8] == 1 && xb[11] == 4);
        OK(MPI_Pack_external("external32", &ld, 1, MPI_LONG_DOUBLE, xb, sizeof xb, &xpos));
        CHECK(xpos == 28);
        /* -1.5: sign, exponent 0x3fff, fraction .1 */
        CHECK(xb[12] == 0xbf && xb[13] == 0xff && xb[14] == 0x80 && xb[15] == 0 && xb[27] == 0);
        OK(MPI_Pack_external("external32", cf, 1, MPI_C_FLOAT_COMPLEX, xb, sizeof xb, &xpos));
        CHECK(xpos == 36 && xb[28] == 0x3f && xb[29] == 0x80 && xb[32] == 0xc0);
        xpos = 0;
        OK(MPI_Unpack_external("external32", xb, sizeof xb, &xpos, lback, 3, MPI_LONG));
        OK(MPI_Unpack_external("external32", xb, sizeof xb, &xpos, &ldback, 1, MPI_LONG_DOUBLE));
        OK(MPI_Unpack_external("external32", xb, sizeof xb, &xpos, cfback, 1,
                               MPI_C_FLOAT_COMPLEX));
        CHECK(lback[0] == -5 && lback[1] == 7 && lback[2] == 0x01020304);
        CHECK(ldback == -1.5L && cfback[0] == 1.0f && cfback[1] == -2.0f);
        if (kt_on_kumi()) { /* a long beyond 4 bytes is refused, not cut */
            long huge = 1L << 40;
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
            xpos = 0;
            int xrc = MPI_Pack_external("external32", &huge, 1, MPI_LONG, xb, sizeof xb, &xpos);
            int xclass = 0;
            MPI_Error_class(xrc, &xclass);
            CHECK(xclass == MPI_ERR_CONVERSION && xpos == 0);
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        }
    }

    /* ---- buffered sends: the detached size as an MPI_Count. ---- */
    static char bbuf[4096];
    OK(MPI_Buffer_attach(bbuf, sizeof bbuf));
    void *bp;
    MPI_Count bsz;
    OK(MPI_Buffer_detach_c(&bp, &bsz));
    CHECK(bp == bbuf && bsz == (MPI_Count)sizeof bbuf);

    kt_pass("extras");
    MPI_Finalize();
    return 0;
}
