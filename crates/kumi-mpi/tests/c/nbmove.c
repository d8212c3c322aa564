/* Concern: nonblocking reduce and data movement (MPI_Ibcast, MPI_Ireduce,
 * MPI_Iallgather, MPI_Igather, MPI_Iscatter, MPI_Ialltoall): correct results at
 * every root, several in flight at once and completed in another order than
 * started, MPI_IN_PLACE, a derived datatype, and overlap with point-to-point. */
#include "kt.h"

#define N 3

static int val(int r, int i) { return r * 1000 + i; }

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

    free(all);
    free(mine);
    free(gat);
    free(a2a);
    kt_pass("nbmove");
    MPI_Finalize();
    return 0;
}
