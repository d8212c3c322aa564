/* Concern: neighbourhood collectives (MPI_Neighbor_allgather(v),
 * MPI_Neighbor_alltoall(v) and their nonblocking forms) on Cartesian
 * topologies: the neighbour order (per dimension, source side then dest
 * side), MPI_PROC_NULL edges left untouched, and periodic dimensions of 1 or 2
 * where one rank is a neighbour on both sides (np 1, 2 and 4). There MPI-4.1
 * (section 8.6, example 8.10; an erratum to MPI-3.1) wants block s of the
 * sender in block s^1 of the receiver, in every dimension; Debian's MPICH 4.0
 * gets the nonblocking v-variant wrong in that case (MPICH pull request 5777
 * fixed it later), so this program fails there at np 1, 2 and 4. */
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
