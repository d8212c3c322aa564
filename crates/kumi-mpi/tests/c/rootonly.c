/* Concern: arguments the standard reads on some ranks only. Regression: kumi
 * checked them everywhere, so programs passing the usual placeholders there
 * aborted. MPI_Intercomm_create with MPI_COMM_NULL and -1 as peer_comm and
 * remote_leader away from the local leaders; MPI_Gather(v) and MPI_Igather(v)
 * with a null receive buffer, MPI_DATATYPE_NULL, a garbage count and null
 * count arrays away from the root; MPI_Scatter(v) and MPI_Iscatter(v) likewise
 * for the send arguments; MPI_Reduce with a null receive buffer away from the
 * root. Every result is checked. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int root = n - 1;
    MPI_Request q;

    /* Intercommunicator: leaders are local rank 0 of each half. */
    if (n >= 2) {
        int color = r % 2;
        MPI_Comm half, ic;
        OK(MPI_Comm_split(MPI_COMM_WORLD, color, r, &half));
        int lr;
        MPI_Comm_rank(half, &lr);
        MPI_Comm peer = lr == 0 ? MPI_COMM_WORLD : MPI_COMM_NULL;
        int remote = lr == 0 ? (color ? 0 : 1) : -1;
        OK(MPI_Intercomm_create(half, 0, peer, remote, 5, &ic));
        int rs;
        OK(MPI_Comm_remote_size(ic, &rs));
        CHECK(rs == (color ? (n + 1) / 2 : n / 2));
        OK(MPI_Comm_free(&ic));
        OK(MPI_Comm_free(&half));
    }

    int *all = malloc(sizeof(int) * 2 * n), *cs = malloc(sizeof(int) * n), *ds = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) {
        cs[i] = 2;
        ds[i] = 2 * (n - 1 - i); /* reversed */
    }
    int mine[2] = {10 * r, 10 * r + 1}, got[2];
    int at_root = r == root;

    /* Gather family: receive arguments at the root only. */
    for (int v = 0; v < 4; v++) {
        memset(all, 0xff, sizeof(int) * 2 * n);
        int *rb = at_root ? all : NULL;
        MPI_Datatype rt = at_root ? MPI_INT : MPI_DATATYPE_NULL;
        int rc = at_root ? 2 : -7;
        const int *rcs = at_root ? cs : NULL, *rds = at_root ? ds : NULL;
        if (v == 0) OK(MPI_Gather(mine, 2, MPI_INT, rb, rc, rt, root, MPI_COMM_WORLD));
        if (v == 1) OK(MPI_Gatherv(mine, 2, MPI_INT, rb, rcs, rds, rt, root, MPI_COMM_WORLD));
        if (v == 2) {
            OK(MPI_Igather(mine, 2, MPI_INT, rb, rc, rt, root, MPI_COMM_WORLD, &q));
            OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        }
        if (v == 3) {
            OK(MPI_Igatherv(mine, 2, MPI_INT, rb, rcs, rds, rt, root, MPI_COMM_WORLD, &q));
            OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        }
        if (at_root)
            for (int i = 0; i < n; i++) {
                int at = (v % 2) ? ds[i] : 2 * i;
                CHECK(all[at] == 10 * i && all[at + 1] == 10 * i + 1);
            }
    }

    /* Scatter family: send arguments at the root only. */
    for (int i = 0; i < 2 * n; i++) all[i] = i;
    for (int v = 0; v < 4; v++) {
        got[0] = got[1] = -1;
        const int *sb = at_root ? all : NULL;
        MPI_Datatype stype = at_root ? MPI_INT : MPI_DATATYPE_NULL;
        int sc = at_root ? 2 : -7;
        const int *scs = at_root ? cs : NULL, *sds = at_root ? ds : NULL;
        if (v == 0) OK(MPI_Scatter(sb, sc, stype, got, 2, MPI_INT, root, MPI_COMM_WORLD));
        if (v == 1) OK(MPI_Scatterv(sb, scs, sds, stype, got, 2, MPI_INT, root, MPI_COMM_WORLD));
        if (v == 2) {
            OK(MPI_Iscatter(sb, sc, stype, got, 2, MPI_INT, root, MPI_COMM_WORLD, &q));
            OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        }
        if (v == 3) {
            OK(MPI_Iscatterv(sb, scs, sds, stype, got, 2, MPI_INT, root, MPI_COMM_WORLD, &q));
            OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        }
        int at = (v % 2) ? 2 * (n - 1 - r) : 2 * r;
        CHECK(got[0] == at && got[1] == at + 1);
    }

    /* The large-count forms likewise: away from the root, count arrays
     * of values no int holds are not read (kumi narrowed them before). */
    {
        MPI_Count *ccs = malloc(sizeof(MPI_Count) * n);
        MPI_Aint *cds = malloc(sizeof(MPI_Aint) * n);
        for (int i = 0; i < n; i++) {
            ccs[i] = at_root ? 2 : (MPI_Count)1 << 40;
            cds[i] = at_root ? ds[i] : (MPI_Aint)1 << 40;
        }
        memset(all, 0xff, sizeof(int) * 2 * n);
        OK(MPI_Gatherv_c(mine, 2, MPI_INT, at_root ? all : NULL, ccs, cds, MPI_INT, root, MPI_COMM_WORLD));
        if (at_root)
            for (int i = 0; i < n; i++) CHECK(all[ds[i]] == 10 * i && all[ds[i] + 1] == 10 * i + 1);
        got[0] = got[1] = -1;
        OK(MPI_Scatterv_c(all, ccs, cds, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD));
        CHECK(got[0] == 10 * r && got[1] == 10 * r + 1);
        free(ccs);
        free(cds);
    }

    /* MPI_Reduce: the receive buffer at the root only. */
    int sum[2] = {-1, -1};
    OK(MPI_Reduce(mine, at_root ? sum : NULL, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
    if (at_root) CHECK(sum[0] == 10 * n * (n - 1) / 2 && sum[1] == sum[0] + n);

    free(all);
    free(cs);
    free(ds);
    kt_pass("rootonly");
    MPI_Finalize();
    return 0;
}
