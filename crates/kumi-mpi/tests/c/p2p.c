/* Concern: blocking point-to-point: send modes, wildcards, statuses, counts,
 * MPI_PROC_NULL, large (rendezvous) messages, sendrecv. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    MPI_Status st;
    int x = 0;

    /* Ring with each send mode; the even/odd order avoids Ssend deadlock. */
    for (int mode = 0; mode < 3 && n > 1; mode++) {
        int out = 100 * mode + r, in = -1;
        if (r % 2 == 0) {
            if (mode == 0) OK(MPI_Send(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
            if (mode == 1) OK(MPI_Ssend(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
            if (mode == 2) OK(MPI_Rsend(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
            OK(MPI_Recv(&in, 1, MPI_INT, left, mode, MPI_COMM_WORLD, &st));
        } else {
            OK(MPI_Recv(&in, 1, MPI_INT, left, mode, MPI_COMM_WORLD, &st));
            if (mode == 0) OK(MPI_Send(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
            if (mode == 1) OK(MPI_Ssend(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
            if (mode == 2) OK(MPI_Rsend(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
        }
        CHECK(in == 100 * mode + left);
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == mode);
        OK(MPI_Get_count(&st, MPI_INT, &x));
        CHECK(x == 1);
    }

    /* Wildcards: rank 0 hears from everyone, in any order. */
    if (r == 0) {
        int seen = 0;
        for (int i = 1; i < n; i++) {
            double d[3];
            OK(MPI_Recv(d, 3, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_TAG == 7 + st.MPI_SOURCE);
            CHECK(d[2] == st.MPI_SOURCE * 0.5);
            OK(MPI_Get_count(&st, MPI_DOUBLE, &x));
            CHECK(x == 3);
            OK(MPI_Get_count(&st, MPI_INT, &x));
            CHECK(x == 6);
            seen |= 1 << st.MPI_SOURCE;
        }
        CHECK(seen == ((1 << n) - 2));
    } else {
        double d[3] = {0, 0, r * 0.5};
        OK(MPI_Send(d, 3, MPI_DOUBLE, 0, 7 + r, MPI_COMM_WORLD));
    }

    /* Nothing else may be in flight while rank 0 receives with wildcards. */
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* MPI_PROC_NULL: completes at once with the standard's status. */
    OK(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    OK(MPI_Get_count(&st, MPI_INT, &x));
    CHECK(x == 0);

    /* A message larger than the eager limit, around the ring. */
    int big = 1 << 18;
    int *a = malloc(big * sizeof(int)), *b = malloc(big * sizeof(int));
    for (int i = 0; i < big; i++) a[i] = i ^ r;
    OK(MPI_Sendrecv(a, big, MPI_INT, right, 3, b, big, MPI_INT, left, 3, MPI_COMM_WORLD, &st));
    for (int i = 0; i < big; i += 997) CHECK(b[i] == (i ^ left));
    OK(MPI_Get_count(&st, MPI_INT, &x));
    CHECK(x == big);

    /* Sendrecv_replace around the ring. */
    int v[4] = {r, r, r, r};
    OK(MPI_Sendrecv_replace(v, 4, MPI_INT, right, 4, left, 4, MPI_COMM_WORLD, &st));
    CHECK(v[0] == left && v[3] == left && st.MPI_SOURCE == left);

    /* Zero-byte message and MPI_STATUS_IGNORE. */
    OK(MPI_Sendrecv(NULL, 0, MPI_INT, right, 5, NULL, 0, MPI_INT, left, 5, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    free(a);
    free(b);
    kt_pass("p2p");
    MPI_Finalize();
    return 0;
}
