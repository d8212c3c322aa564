/* Concern: persistent collectives (MPI 4: MPI_Allreduce_init, MPI_Bcast_init,
 * ...): created once, started many times with MPI_Start/MPI_Startall, the
 * buffers read at each start; an inactive request completes at once and
 * stays; starting an active one is an error; MPI_Request_free. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();

    /* Allreduce_init: three starts, new data each time. */
    int x, sum = -1;
    MPI_Request ar;
    OK(MPI_Allreduce_init(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &ar));
    CHECK(ar != MPI_REQUEST_NULL);
    for (int it = 0; it < 3; it++) {
        x = r + it;
        OK(MPI_Start(&ar));
        OK(MPI_Wait(&ar, MPI_STATUS_IGNORE));
        CHECK(ar != MPI_REQUEST_NULL); /* persistent: the handle stays */
        CHECK(sum == n * (n - 1) / 2 + n * it);
    }
    /* Inactive: a wait returns at once. */
    OK(MPI_Wait(&ar, MPI_STATUS_IGNORE));
    CHECK(ar != MPI_REQUEST_NULL);

    /* Bcast_init, Barrier_init and Allgather_init started together, completed
     * by MPI_Testall. */
    int root = 1 % n, b[3], *all = malloc(sizeof(int) * n);
    CHECK(all);
    MPI_Request q[3];
    OK(MPI_Bcast_init(b, 3, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]));
    OK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]));
    int mine;
    OK(MPI_Allgather_init(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &q[2]));
    for (int it = 0; it < 2; it++) {
        for (int i = 0; i < 3; i++) b[i] = r == root ? 100 * it + i : -1;
        mine = r * 10 + it;
        OK(MPI_Startall(3, q));
        int flag = 0;
        while (!flag) OK(MPI_Testall(3, q, &flag, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 3; i++) CHECK(b[i] == 100 * it + i && q[i] != MPI_REQUEST_NULL);
        for (int i = 0; i < n; i++) CHECK(all[i] == i * 10 + it);
    }

    /* Scan_init, Reduce_scatter_block_init and Alltoall_init. */
    int sv = r + 1, so = 0, rsin[2 * 64], rsout[2], ain[64], aout[64];
    CHECK(n <= 64);
    for (int i = 0; i < 2 * n; i++) rsin[i] = i;
    for (int i = 0; i < n; i++) aout[i] = r * 100 + i;
    MPI_Request p3[3];
    OK(MPI_Scan_init(&sv, &so, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p3[0]));
    OK(MPI_Reduce_scatter_block_init(rsin, rsout, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p3[1]));
    OK(MPI_Alltoall_init(aout, 1, MPI_INT, ain, 1, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &p3[2]));
    OK(MPI_Startall(3, p3));
    OK(MPI_Waitall(3, p3, MPI_STATUSES_IGNORE));
    CHECK(so == (r + 1) * (r + 2) / 2);
    CHECK(rsout[0] == n * 2 * r && rsout[1] == n * (2 * r + 1));
    for (int i = 0; i < n; i++) CHECK(ain[i] == i * 100 + r);

    /* A neighbourhood exchange on a periodic ring. */
    MPI_Comm ring;
    int dims[1] = {n}, per[1] = {1};
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, per, 0, &ring));
    int src, dst, nout[2] = {r * 10, r * 10 + 1}, nin[2] = {-1, -1};
    OK(MPI_Cart_shift(ring, 0, 1, &src, &dst));
    MPI_Request nr;
    OK(MPI_Neighbor_alltoall_init(nout, 1, MPI_INT, nin, 1, MPI_INT, ring, MPI_INFO_NULL, &nr));
    OK(MPI_Start(&nr));
    OK(MPI_Wait(&nr, MPI_STATUS_IGNORE));
    CHECK(nin[0] == src * 10 + 1 && nin[1] == dst * 10);
    OK(MPI_Request_free(&nr));
    CHECK(nr == MPI_REQUEST_NULL);
    OK(MPI_Comm_free(&ring));

    /* Errors: starting an active request; a bad root surfaces at the start. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    x = 1;
    OK(MPI_Start(&ar));
    int cls, rc = MPI_Start(&ar);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_REQUEST);
    OK(MPI_Wait(&ar, MPI_STATUS_IGNORE));
    CHECK(sum == n);
    MPI_Request bad;
    OK(MPI_Bcast_init(b, 1, MPI_INT, n, MPI_COMM_WORLD, MPI_INFO_NULL, &bad));
    rc = MPI_Start(&bad);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ROOT);
    OK(MPI_Request_free(&bad));
    rc = MPI_Barrier_init(MPI_COMM_WORLD, 0x5c00beef, &bad);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_INFO);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* The count and displacement arrays are read at creation: the program
     * may reuse them at once (mpi4py frees its copies; MPICH reads them
     * then too). */
    {
        int *cnt = malloc(n * sizeof *cnt), *dsp = malloc(n * sizeof *dsp);
        int *gv = malloc(n * sizeof *gv), me = 10 + kt_rank();
        for (int i = 0; i < n; i++) { cnt[i] = 1; dsp[i] = n - 1 - i; }
        MPI_Request gr;
        OK(MPI_Allgatherv_init(&me, 1, MPI_INT, gv, cnt, dsp, MPI_INT, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &gr));
        for (int i = 0; i < n; i++) { cnt[i] = -77; dsp[i] = 1 << 30; }
        free(cnt);
        free(dsp);
        for (int rep = 0; rep < 2; rep++) {
            OK(MPI_Start(&gr));
            OK(MPI_Wait(&gr, MPI_STATUS_IGNORE));
            for (int i = 0; i < n; i++) CHECK(gv[n - 1 - i] == 10 + i);
        }
        OK(MPI_Request_free(&gr));
        free(gv);
    }
    for (int i = 0; i < 3; i++) {
        OK(MPI_Request_free(&q[i]));
        OK(MPI_Request_free(&p3[i]));
    }
    OK(MPI_Request_free(&ar));
    free(all);
    kt_pass("pcoll");
    MPI_Finalize();
    return 0;
}
