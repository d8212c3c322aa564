/* Concern: Cartesian topologies, with a halo exchange as stencil codes do. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size(), x;
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    OK(MPI_Dims_create(n, 2, dims));
    CHECK(dims[0] * dims[1] == n && dims[0] >= dims[1]);
    /* As close to each other as possible (a greedy split gave 12x6). */
    int d72[2] = {0, 0}, d72_3[3] = {0, 0, 0};
    OK(MPI_Dims_create(72, 2, d72));
    CHECK(d72[0] == 9 && d72[1] == 8);
    OK(MPI_Dims_create(72, 3, d72_3));
    CHECK(d72_3[0] == 6 && d72_3[1] == 4 && d72_3[2] == 3);
    int d3[3] = {0, 2, 0};
    if (n % 2 == 0) {
        OK(MPI_Dims_create(n, 3, d3));
        CHECK(d3[1] == 2 && d3[0] * d3[1] * d3[2] == n);
    }
    MPI_Comm cart;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &cart));
    OK(MPI_Topo_test(cart, &x));
    CHECK(x == MPI_CART);
    OK(MPI_Topo_test(MPI_COMM_WORLD, &x));
    CHECK(x == MPI_UNDEFINED);
    OK(MPI_Cartdim_get(cart, &x));
    CHECK(x == 2);
    int me, coords[2], c2[2], gd[2], gp[2];
    OK(MPI_Comm_rank(cart, &me));
    OK(MPI_Cart_coords(cart, me, 2, coords));
    CHECK(coords[0] * dims[1] + coords[1] == me);   /* row-major */
    OK(MPI_Cart_rank(cart, coords, &x));
    CHECK(x == me);
    OK(MPI_Cart_get(cart, 2, gd, gp, c2));
    CHECK(gd[0] == dims[0] && gp[0] == 1 && gp[1] == 0 && c2[1] == coords[1]);
    /* Periodic in dim 0: wraps. Not periodic in dim 1: MPI_PROC_NULL at edges. */
    int up, down, west, east;
    OK(MPI_Cart_shift(cart, 0, 1, &up, &down));
    int want[2] = {(coords[0] + 1) % dims[0], coords[1]};
    OK(MPI_Cart_rank(cart, want, &x));
    CHECK(down == x);
    OK(MPI_Cart_shift(cart, 1, 1, &west, &east));
    CHECK((coords[1] == 0) == (west == MPI_PROC_NULL));
    CHECK((coords[1] == dims[1] - 1) == (east == MPI_PROC_NULL));

    /* Halo exchange: send my rank both ways along each dimension. */
    int from_up = -9, from_down = -9, from_west = -9, from_east = -9;
    OK(MPI_Sendrecv(&me, 1, MPI_INT, down, 0, &from_up, 1, MPI_INT, up, 0, cart, MPI_STATUS_IGNORE));
    OK(MPI_Sendrecv(&me, 1, MPI_INT, up, 1, &from_down, 1, MPI_INT, down, 1, cart, MPI_STATUS_IGNORE));
    OK(MPI_Sendrecv(&me, 1, MPI_INT, east, 2, &from_west, 1, MPI_INT, west, 2, cart, MPI_STATUS_IGNORE));
    OK(MPI_Sendrecv(&me, 1, MPI_INT, west, 3, &from_east, 1, MPI_INT, east, 3, cart, MPI_STATUS_IGNORE));
    CHECK(from_up == up && from_down == down);
    CHECK(from_west == (west == MPI_PROC_NULL ? -9 : west));
    CHECK(from_east == (east == MPI_PROC_NULL ? -9 : east));

    /* Cart_sub: rows. */
    int remain[2] = {0, 1};
    MPI_Comm rowc;
    OK(MPI_Cart_sub(cart, remain, &rowc));
    OK(MPI_Comm_size(rowc, &x));
    CHECK(x == dims[1]);
    OK(MPI_Comm_rank(rowc, &x));
    CHECK(x == coords[1]);
    OK(MPI_Cartdim_get(rowc, &x));
    CHECK(x == 1);
    OK(MPI_Comm_free(&rowc));
    OK(MPI_Comm_free(&cart));
    (void)r;
    /* MPI_Cart_map: no reordering, so the first prod(dims) ranks keep theirs. */
    {
        int md[2] = {1, 1}, mp[2] = {0, 0}, nr, me = kt_rank();
        OK(MPI_Cart_map(MPI_COMM_WORLD, 2, md, mp, &nr));
        CHECK(nr == (me == 0 ? 0 : MPI_UNDEFINED));
        md[0] = kt_size();
        OK(MPI_Cart_map(MPI_COMM_WORLD, 2, md, mp, &nr));
        CHECK(nr == me);
    }
    kt_pass("cart");
    MPI_Finalize();
    return 0;
}
