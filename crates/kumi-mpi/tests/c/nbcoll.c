/* Concern: nonblocking collectives (MPI_Ibarrier, MPI_Iallreduce) completed by
 * every wait/test function, mixed and overlapped with point-to-point. */
#include "kt.h"

static void my_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    MPI_Request q[6];
    MPI_Status st[6];
    int flag;

    /* Ibarrier cannot complete before every rank has started it: rank 0 starts
     * only after every other rank has seen its own barrier still pending. */
    MPI_Request b;
    if (r == 0) {
        for (int i = 1; i < n; i++) {
            int x;
            OK(MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &b));
        OK(MPI_Wait(&b, MPI_STATUS_IGNORE));
    } else {
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &b));
        OK(MPI_Test(&b, &flag, MPI_STATUS_IGNORE));
        CHECK(flag == 0 && b != MPI_REQUEST_NULL);
        OK(MPI_Send(&r, 1, MPI_INT, 0, 5, MPI_COMM_WORLD));
        flag = 0;
        while (!flag) OK(MPI_Test(&b, &flag, MPI_STATUS_IGNORE));
    }
    CHECK(b == MPI_REQUEST_NULL);

    /* Iallreduce on several types and operations, completed by MPI_Wait. */
    int isum = r + 1, iout = -1;
    OK(MPI_Iallreduce(&isum, &iout, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], &st[0]));
    CHECK(q[0] == MPI_REQUEST_NULL && iout == n * (n + 1) / 2);

    double dv[3] = {r * 1.5, -r, 2.0}, dmax[3];
    OK(MPI_Iallreduce(dv, dmax, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(dmax[0] == (n - 1) * 1.5 && dmax[1] == 0.0 && dmax[2] == 2.0);

    long long lv = 100 - r, lmin = 0;
    OK(MPI_Iallreduce(&lv, &lmin, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(lmin == 100 - (n - 1));

    unsigned ux = 1u << r, uor = 0;
    OK(MPI_Iallreduce(&ux, &uor, 1, MPI_UNSIGNED, MPI_BOR, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(uor == (1u << n) - 1);

    float fv = 2.0f, fprod = 0;
    OK(MPI_Iallreduce(&fv, &fprod, 1, MPI_FLOAT, MPI_PROD, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(fprod == (float)(1 << n));

    struct { int v, i; } loc = {r % 2 ? 7 : 3, r}, locmax;
    OK(MPI_Iallreduce(&loc, &locmax, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(locmax.v == (n > 1 ? 7 : 3) && locmax.i == (n > 1 ? 1 : 0));

    /* A user operation, and MPI_IN_PLACE on a long vector. */
    MPI_Op op;
    OK(MPI_Op_create(my_sum, 1, &op));
    int uin[2] = {r, 1}, uout[2];
    OK(MPI_Iallreduce(uin, uout, 2, MPI_INT, op, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(uout[0] == n * (n - 1) / 2 && uout[1] == n);
    OK(MPI_Op_free(&op));

    enum { LONG = 5000 };
    static double big[LONG];
    for (int i = 0; i < LONG; i++) big[i] = r + i;
    OK(MPI_Iallreduce(MPI_IN_PLACE, big, LONG, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    flag = 0;
    while (!flag) OK(MPI_Test(&q[0], &flag, &st[0]));
    CHECK(q[0] == MPI_REQUEST_NULL);
    for (int i = 0; i < LONG; i++) CHECK(big[i] == (double)n * (n - 1) / 2 + (double)n * i);

    /* Zero elements. */
    OK(MPI_Iallreduce(&isum, &iout, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));

    /* Overlapped with point-to-point: the collective is in flight while the
     * ring exchange runs; then Waitall over collective and p2p requests. */
    int ring_in = -1, ring_out = r, acc = r, acc_out = -1;
    OK(MPI_Iallreduce(&acc, &acc_out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Sendrecv(&ring_out, 1, MPI_INT, right, 1, &ring_in, 1, MPI_INT, left, 1,
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(ring_in == left);
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(acc_out == n * (n - 1) / 2);

    int a1 = r, a1o = -1, pin = -1;
    OK(MPI_Irecv(&pin, 1, MPI_INT, left, 2, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Iallreduce(&a1, &a1o, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Isend(&ring_out, 1, MPI_INT, right, 2, MPI_COMM_WORLD, &q[2]));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[3]));
    q[4] = MPI_REQUEST_NULL;
    OK(MPI_Waitall(5, q, st));
    for (int i = 0; i < 5; i++) CHECK(q[i] == MPI_REQUEST_NULL);
    CHECK(pin == left && st[0].MPI_SOURCE == left && st[0].MPI_TAG == 2);
    CHECK(a1o == n - 1);

    /* Two collectives in flight at once, completed in reverse order. */
    int c1 = 1, c1o = 0, c2 = r, c2o = 0;
    OK(MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Iallreduce(&c2, &c2o, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(c1o == n && c2o == 0);

    /* Waitany / Waitsome over a mix. */
    OK(MPI_Irecv(&pin, 1, MPI_INT, left, 3, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[2]));
    OK(MPI_Send(&ring_out, 1, MPI_INT, right, 3, MPI_COMM_WORLD));
    int done = 0, idx, cnt, ids[6];
    while (done < 3) {
        OK(MPI_Waitany(3, q, &idx, &st[0]));
        CHECK(idx >= 0 && idx < 3 && q[idx] == MPI_REQUEST_NULL);
        done++;
    }
    OK(MPI_Waitany(3, q, &idx, MPI_STATUS_IGNORE));
    CHECK(idx == MPI_UNDEFINED && pin == left && c1o == n);

    c1o = 0;
    OK(MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[1]));
    OK(MPI_Irecv(&pin, 1, MPI_INT, left, 4, MPI_COMM_WORLD, &q[2]));
    OK(MPI_Send(&ring_out, 1, MPI_INT, right, 4, MPI_COMM_WORLD));
    done = 0;
    while (done < 3) {
        OK(MPI_Waitsome(3, q, &cnt, ids, st));
        CHECK(cnt >= 1);
        for (int i = 0; i < cnt; i++) CHECK(q[ids[i]] == MPI_REQUEST_NULL);
        done += cnt;
    }
    OK(MPI_Waitsome(3, q, &cnt, ids, st));
    CHECK(cnt == MPI_UNDEFINED && c1o == n);

    /* Testall / Testany / Testsome loops. */
    c1o = 0;
    OK(MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[1]));
    flag = 0;
    while (!flag) OK(MPI_Testall(2, q, &flag, st));
    CHECK(q[0] == MPI_REQUEST_NULL && q[1] == MPI_REQUEST_NULL && c1o == n);

    c1o = 0;
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[0]));
    OK(MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[1]));
    done = 0;
    while (done < 2) {
        OK(MPI_Testany(2, q, &idx, &flag, MPI_STATUS_IGNORE));
        if (flag && idx != MPI_UNDEFINED) {
            CHECK(q[idx] == MPI_REQUEST_NULL);
            done++;
        }
    }
    CHECK(c1o == n);

    c1o = 0;
    OK(MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[1]));
    done = 0;
    while (done < 2) {
        OK(MPI_Testsome(2, q, &cnt, ids, MPI_STATUSES_IGNORE));
        CHECK(cnt != MPI_UNDEFINED);
        done += cnt;
    }
    CHECK(c1o == n);

    /* MPI_Request_get_status leaves the request to be completed by a wait. */
    c1o = 0;
    OK(MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    flag = 0;
    while (!flag) OK(MPI_Request_get_status(q[0], &flag, MPI_STATUS_IGNORE));
    CHECK(q[0] != MPI_REQUEST_NULL);
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(c1o == n);

    /* On a split communicator (even and odd ranks). */
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half));
    int hs, hsum = 0;
    MPI_Comm_size(half, &hs);
    OK(MPI_Iallreduce(&c1, &hsum, 1, MPI_INT, MPI_SUM, half, &q[0]));
    OK(MPI_Ibarrier(half, &q[1]));
    OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
    CHECK(hsum == hs);
    OK(MPI_Comm_free(&half));

    /* Large-count variant. */
    long long lc = 2, lco = 0;
    OK(MPI_Iallreduce_c(&lc, &lco, (MPI_Count)1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(lco == 2LL * n);

    /* Errors: a collective cannot be cancelled; bad arguments return the class. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[0]));
    int rc = MPI_Cancel(&q[0]), cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_REQUEST && q[0] != MPI_REQUEST_NULL);
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    rc = MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD, &q[0]);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OP);
    rc = MPI_Ibarrier(MPI_COMM_NULL, &q[0]);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COMM);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* A freed collective still completes everywhere; later ones are unaffected. */
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[0]));
    OK(MPI_Request_free(&q[0]));
    CHECK(q[0] == MPI_REQUEST_NULL);
    c1o = 0;
    OK(MPI_Iallreduce(&c1, &c1o, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    CHECK(c1o == n);
    OK(MPI_Barrier(MPI_COMM_WORLD));

    kt_pass("nbcoll");
    MPI_Finalize();
    return 0;
}
