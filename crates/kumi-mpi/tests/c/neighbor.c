/* Concern: neighbourhood collectives (MPI_Neighbor_allgather(v),
 * MPI_Neighbor_alltoall(v) and their nonblocking forms) on distributed graph
 * topologies (MPI_Dist_graph_create_adjacent and its queries, repeated edges
 * paired in order) and on Cartesian topologies: the neighbour order (per dimension, source side then dest
 * side), MPI_PROC_NULL edges left untouched, and periodic dimensions of 1 or 2
 * where one rank is a neighbour on both sides (np 1, 2 and 4). There MPI-4.1
 * (section 8.6, example 8.10; an erratum to MPI-3.1) wants block s of the
 * sender in block s^1 of the receiver, in every dimension; Debian's MPICH 4.0
 * gets the nonblocking v-variant wrong in that case (MPICH pull request 5777
 * fixed it later), and it pairs repeated graph edges in reverse (fixed by
 * MPICH pull request 7945), so this program fails on MPICH 4.0 itself. */
#include "kt.h"

#define MAXK 4 /* 2 dimensions: 4 neighbours */

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = kt_size();
    int dims[2] = {0, 0}, periods[2] = {1, 0}; /* periodic rows, open columns */
    OK(MPI_Dims_create(n, 2, dims));
    MPI_Comm grid;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid));
    int r;
    OK(MPI_Comm_rank(grid, &r));
    int nb[MAXK];
    for (int d = 0; d < 2; d++) OK(MPI_Cart_shift(grid, d, 1, &nb[2 * d], &nb[2 * d + 1]));

    /* Allgather: one int from each neighbour. */
    int got[MAXK];
    for (int i = 0; i < MAXK; i++) got[i] = -1;
    int mine = 1000 + r;
    OK(MPI_Neighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, grid));
    for (int i = 0; i < MAXK; i++) CHECK(got[i] == (nb[i] == MPI_PROC_NULL ? -1 : 1000 + nb[i]));

    /* Alltoall: block j to neighbour j. A source-side neighbour (slot 2d) sent
     * us its dest-side block (2d + 1), and the reverse. */
    int out[MAXK * 2], in[MAXK * 2];
    for (int j = 0; j < MAXK * 2; j++) {
        out[j] = r * 100 + j;
        in[j] = -1;
    }
    OK(MPI_Neighbor_alltoall(out, 2, MPI_INT, in, 2, MPI_INT, grid));
    for (int i = 0; i < MAXK; i++) {
        int from_block = i % 2 == 0 ? i + 1 : i - 1;
        for (int k = 0; k < 2; k++)
            CHECK(in[2 * i + k] == (nb[i] == MPI_PROC_NULL ? -1 : nb[i] * 100 + 2 * from_block + k));
    }

    /* The v-variants: i + 1 ints from neighbour i, at displacements with gaps;
     * to neighbour j we send j + 1 ints... but each side must agree: neighbour
     * i of ours sends us as many as its block for us, which is the slot we are
     * for it (i ^ 1), so counts follow the slot we receive into: i ^ 1 + 1. */
    int rc[MAXK], rd[MAXK], sc[MAXK], sd[MAXK], vin[32], vout[32], span = 0;
    for (int i = 0; i < MAXK; i++) {
        rc[i] = (i ^ 1) + 1;
        rd[i] = span;
        span += rc[i] + 1;
        sc[i] = i + 1;
        sd[i] = 8 * i;
    }
    for (int i = 0; i < 32; i++) {
        vin[i] = -1;
        vout[i] = r * 100 + i;
    }
    MPI_Request q[3];
    OK(MPI_Ineighbor_alltoallv(vout, sc, sd, MPI_INT, vin, rc, rd, MPI_INT, grid, &q[0]));
    int agv[32];
    for (int i = 0; i < 32; i++) agv[i] = -1;
    int one[3] = {r, r + 1, r + 2}, ac[MAXK], ad[MAXK];
    for (int i = 0; i < MAXK; i++) {
        ac[i] = 3;
        ad[i] = 4 * (MAXK - 1 - i); /* reversed placement */
    }
    OK(MPI_Ineighbor_allgatherv(one, 3, MPI_INT, agv, ac, ad, MPI_INT, grid, &q[1]));
    int ig[MAXK];
    for (int i = 0; i < MAXK; i++) ig[i] = -1;
    OK(MPI_Ineighbor_allgather(&mine, 1, MPI_INT, ig, 1, MPI_INT, grid, &q[2]));
    OK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
    for (int i = 0; i < MAXK; i++) {
        int from_block = i ^ 1;
        for (int k = 0; k < rc[i]; k++)
            CHECK(vin[rd[i] + k] == (nb[i] == MPI_PROC_NULL ? -1 : nb[i] * 100 + 8 * from_block + k));
        CHECK(vin[rd[i] + rc[i]] == -1); /* the gaps stay */
        for (int k = 0; k < 3; k++)
            CHECK(agv[ad[i] + k] == (nb[i] == MPI_PROC_NULL ? -1 : nb[i] + k));
        CHECK(ig[i] == (nb[i] == MPI_PROC_NULL ? -1 : 1000 + nb[i]));
    }

    /* Nonblocking alltoall with a derived type: pairs of ints, one pair per
     * neighbour, through MPI_Test. */
    MPI_Datatype pair;
    OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    OK(MPI_Type_commit(&pair));
    for (int j = 0; j < MAXK * 2; j++) in[j] = -1;
    MPI_Request q1;
    OK(MPI_Ineighbor_alltoall(out, 1, pair, in, 1, pair, grid, &q1));
    int flag = 0;
    while (!flag) OK(MPI_Test(&q1, &flag, MPI_STATUS_IGNORE));
    for (int i = 0; i < MAXK; i++) {
        int from_block = i % 2 == 0 ? i + 1 : i - 1;
        CHECK(in[2 * i] == (nb[i] == MPI_PROC_NULL ? -1 : nb[i] * 100 + 2 * from_block));
    }
    OK(MPI_Type_free(&pair));

    /* A receive type with gaps (an int every other int): packed on the way,
     * the gaps untouched. */
    {
        MPI_Datatype gapped;
        OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &gapped));
        OK(MPI_Type_commit(&gapped));
        int two[2] = {r * 7, r * 7 + 1}, gin[MAXK * 4];
        for (int j = 0; j < MAXK * 4; j++) gin[j] = -1;
        OK(MPI_Neighbor_allgather(two, 2, MPI_INT, gin, 2, gapped, grid));
        for (int i = 0; i < MAXK; i++) {
            int *b = &gin[4 * i];
            int none = nb[i] == MPI_PROC_NULL;
            CHECK(b[0] == (none ? -1 : nb[i] * 7) && b[2] == (none ? -1 : nb[i] * 7 + 1));
            CHECK(b[1] == -1 && b[3] == -1);
        }
        OK(MPI_Type_free(&gapped));
    }

    /* Long blocks (beyond the eager size, so by rendezvous), an alltoall and
     * an allgather in flight together, every element checked. */
    {
        enum { N = 40009 };
        int *lo = malloc(sizeof(int) * N * MAXK), *li = malloc(sizeof(int) * N * MAXK);
        int *la = malloc(sizeof(int) * N * MAXK), *lm = malloc(sizeof(int) * N);
        for (int j = 0; j < N * MAXK; j++) {
            lo[j] = r * 1000003 + j;
            li[j] = la[j] = -1;
        }
        for (int k = 0; k < N; k++) lm[k] = r * 31 + k;
        MPI_Request lq[2];
        OK(MPI_Ineighbor_alltoall(lo, N, MPI_INT, li, N, MPI_INT, grid, &lq[0]));
        OK(MPI_Ineighbor_allgather(lm, N, MPI_INT, la, N, MPI_INT, grid, &lq[1]));
        OK(MPI_Waitall(2, lq, MPI_STATUSES_IGNORE));
        int bad = 0;
        for (int i = 0; i < MAXK; i++) {
            int from_block = i % 2 == 0 ? i + 1 : i - 1, none = nb[i] == MPI_PROC_NULL;
            for (int k = 0; k < N; k++) {
                bad += li[i * N + k] != (none ? -1 : nb[i] * 1000003 + from_block * N + k);
                bad += la[i * N + k] != (none ? -1 : nb[i] * 31 + k);
            }
        }
        CHECK(bad == 0);
        free(lo); free(li); free(la); free(lm);
    }

    /* Blocking, blocks too long for the collective area (dimension 0)
     * beside short ones (dimension 1): one call moves some through the area
     * and the rest as messages. */
    {
        enum { N = 40009 };
        int bsc[MAXK], bsd[MAXK], so = 0;
        for (int i = 0; i < MAXK; i++) {
            bsc[i] = i < 2 ? N : 3; /* as long as the block it lands in (i ^ 1) */
            bsd[i] = so;
            so += bsc[i];
        }
        int *vo = malloc(sizeof(int) * so), *vi = malloc(sizeof(int) * so);
        for (int j = 0; j < so; j++) {
            vo[j] = r * 1000003 + j;
            vi[j] = -1;
        }
        OK(MPI_Neighbor_alltoallv(vo, bsc, bsd, MPI_INT, vi, bsc, bsd, MPI_INT, grid));
        int bad = 0;
        for (int i = 0; i < MAXK; i++) {
            int fb = i % 2 == 0 ? i + 1 : i - 1, none = nb[i] == MPI_PROC_NULL;
            for (int k = 0; k < bsc[i]; k++)
                bad += vi[bsd[i] + k] != (none ? -1 : nb[i] * 1000003 + bsd[fb] + k);
        }
        CHECK(bad == 0);
        free(vo); free(vi);
    }

    /* MPI_Neighbor_alltoallw and its nonblocking form: int blocks as in the
     * alltoall above, with MPI_Aint byte displacements and a type per
     * neighbour (two ints, as 2 x MPI_INT or 1 x pair). */
    {
        MPI_Datatype two;
        OK(MPI_Type_contiguous(2, MPI_INT, &two));
        OK(MPI_Type_commit(&two));
        int wc[MAXK], wrc[MAXK];
        MPI_Aint wd[MAXK], wrd[MAXK];
        MPI_Datatype wt[MAXK], wrt[MAXK];
        for (int i = 0; i < MAXK; i++) {
            wc[i] = i % 2 ? 1 : 2;
            wt[i] = i % 2 ? two : MPI_INT;
            wd[i] = (MPI_Aint)(2 * i * sizeof(int));
            wrc[i] = 1;
            wrt[i] = two;
            wrd[i] = (MPI_Aint)(2 * i * sizeof(int));
        }
        for (int round = 0; round < 2; round++) {
            for (int j = 0; j < MAXK * 2; j++) in[j] = -1;
            if (round == 0) {
                OK(MPI_Neighbor_alltoallw(out, wc, wd, wt, in, wrc, wrd, wrt, grid));
            } else {
                MPI_Request wq;
                OK(MPI_Ineighbor_alltoallw(out, wc, wd, wt, in, wrc, wrd, wrt, grid, &wq));
                OK(MPI_Wait(&wq, MPI_STATUS_IGNORE));
            }
            for (int i = 0; i < MAXK; i++) {
                int from_block = i % 2 == 0 ? i + 1 : i - 1;
                for (int k = 0; k < 2; k++)
                    CHECK(in[2 * i + k] == (nb[i] == MPI_PROC_NULL ? -1 : nb[i] * 100 + 2 * from_block + k));
            }
        }
        OK(MPI_Type_free(&two));
    }

    /* A 1-d periodic ring of every rank: with 1 or 2 ranks the same rank is
     * both neighbours, and the blocks still go to the right side. */
    MPI_Comm ring;
    int rdims[1] = {n}, rper[1] = {1};
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, rdims, rper, 0, &ring));
    int rr, rsrc, rdst, rout[2], rin[2] = {-1, -1};
    OK(MPI_Comm_rank(ring, &rr));
    OK(MPI_Cart_shift(ring, 0, 1, &rsrc, &rdst));
    rout[0] = rr * 10;     /* to the source side */
    rout[1] = rr * 10 + 1; /* to the dest side */
    OK(MPI_Neighbor_alltoall(rout, 1, MPI_INT, rin, 1, MPI_INT, ring));
    CHECK(rin[0] == rsrc * 10 + 1 && rin[1] == rdst * 10);
    OK(MPI_Comm_free(&ring));

    /* A distributed graph: rank r sends to r+1 and, twice, to r+2 (mod n),
     * weighted; it receives from r-1 once and from r-2 twice, in that order.
     * The k-th edge from a rank to another pairs with the k-th edge into the
     * other from it. */
    {
        int wr = kt_rank();
        int src[3] = {(wr + n - 1) % n, (wr + n - 2) % n, (wr + n - 2) % n};
        int dst[3] = {(wr + 1) % n, (wr + 2) % n, (wr + 2) % n};
        int sw[3] = {1, 2, 3}, dw[3] = {4, 5, 6};
        MPI_Comm g;
        OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 3, src, sw, 3, dst, dw, MPI_INFO_NULL, 0, &g));
        int st, indeg, outdeg, weighted;
        OK(MPI_Topo_test(g, &st));
        CHECK(st == MPI_DIST_GRAPH);
        OK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
        CHECK(indeg == 3 && outdeg == 3 && weighted);
        int qs[3], qsw[3], qd[3], qdw[3];
        OK(MPI_Dist_graph_neighbors(g, 3, qs, qsw, 3, qd, qdw));
        for (int i = 0; i < 3; i++) CHECK(qs[i] == src[i] && qsw[i] == sw[i] && qd[i] == dst[i] && qdw[i] == dw[i]);
        /* Block j to destination j; the two edges to r+2 carry blocks 1 and 2,
         * which arrive in receive slots 1 and 2 (from r-2) in that order. */
        int go[3] = {wr * 10, wr * 10 + 1, wr * 10 + 2}, gi[3] = {-1, -1, -1};
        OK(MPI_Neighbor_alltoall(go, 1, MPI_INT, gi, 1, MPI_INT, g));
        CHECK(gi[0] == src[0] * 10 && gi[1] == src[1] * 10 + 1 && gi[2] == src[2] * 10 + 2);
        int ga[3] = {-1, -1, -1};
        MPI_Request gq;
        OK(MPI_Ineighbor_allgather(&wr, 1, MPI_INT, ga, 1, MPI_INT, g, &gq));
        OK(MPI_Wait(&gq, MPI_STATUS_IGNORE));
        for (int i = 0; i < 3; i++) CHECK(ga[i] == src[i]);
        /* A duplicate keeps the topology. */
        MPI_Comm g2;
        OK(MPI_Comm_dup(g, &g2));
        OK(MPI_Dist_graph_neighbors_count(g2, &indeg, &outdeg, &weighted));
        CHECK(indeg == 3 && outdeg == 3);
        OK(MPI_Comm_free(&g2));
        OK(MPI_Comm_free(&g));
        /* Unweighted, and a rank with no edges at all (every rank but 0 here):
         * MPI_WEIGHTS_EMPTY is allowed there. */
        int none_in = wr == 0 ? 0 : 1, none_out = wr == 0 ? 0 : 1;
        int s1[1] = {wr}, d1[1] = {wr};
        OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, none_in, s1, wr == 0 ? MPI_WEIGHTS_EMPTY : MPI_UNWEIGHTED,
                                          none_out, d1, wr == 0 ? MPI_WEIGHTS_EMPTY : MPI_UNWEIGHTED,
                                          MPI_INFO_NULL, 0, &g));
        OK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
        CHECK(indeg == none_in && outdeg == none_out);
        int self_in = -1, self_out = wr + 500;
        OK(MPI_Neighbor_allgather(&self_out, 1, MPI_INT, &self_in, 1, MPI_INT, g));
        CHECK(self_in == (wr == 0 ? -1 : wr + 500));
        OK(MPI_Comm_free(&g));
        /* MPI_Dist_graph_create: each rank names an edge of another, here
         * (r + 1) -> r with weight r; rank q then has the out-edge q -> q - 1
         * (weight q - 1, given by rank q - 1) and the in-edge q + 1 -> q
         * (weight q, given by itself). */
        {
            int es[1] = {(wr + 1) % n}, ed[1] = {wr}, edeg[1] = {1}, ew[1] = {wr};
            MPI_Comm gg;
            OK(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, es, edeg, ed, ew, MPI_INFO_NULL, 0, &gg));
            OK(MPI_Dist_graph_neighbors_count(gg, &indeg, &outdeg, &weighted));
            CHECK(indeg == 1 && outdeg == 1 && weighted);
            int gs1, gsw1, gd1, gdw1;
            OK(MPI_Dist_graph_neighbors(gg, 1, &gs1, &gsw1, 1, &gd1, &gdw1));
            CHECK(gs1 == (wr + 1) % n && gsw1 == wr && gd1 == (wr + n - 1) % n && gdw1 == (wr + n - 1) % n);
            int from = -1, mine2 = wr * 3;
            OK(MPI_Neighbor_allgather(&mine2, 1, MPI_INT, &from, 1, MPI_INT, gg));
            CHECK(from == ((wr + 1) % n) * 3);
            OK(MPI_Comm_free(&gg));
        }
        /* A neighbour outside the communicator. */
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        int badn[1] = {n}, cls;
        int brc = MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, badn, MPI_UNWEIGHTED, 0, badn,
                                                 MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g);
        MPI_Error_class(brc, &cls);
        CHECK(cls == MPI_ERR_RANK);
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }

    /* No topology: an error of class MPI_ERR_TOPOLOGY. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int cls, rc2 = MPI_Neighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Error_class(rc2, &cls);
    CHECK(cls == MPI_ERR_TOPOLOGY);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    OK(MPI_Comm_free(&grid));
    kt_pass("neighbor");
    MPI_Finalize();
    return 0;
}
