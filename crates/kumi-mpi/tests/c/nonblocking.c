/* Concern: nonblocking operations and the wait/test family, cancel, free. */
#include "kt.h"

static int *bo_keep; /* written by a freed receive until MPI_Finalize */

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    MPI_Request q[8];
    MPI_Status st[8];
    int in[4] = {-1, -1, -1, -1}, out[4] = {r, r + 1, r + 2, r + 3};

    /* Waitall over Irecv/Isend/Issend/Irsend. */
    OK(MPI_Irecv(&in[0], 1, MPI_INT, left, 0, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Irecv(&in[1], 1, MPI_INT, left, 1, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Irecv(&in[2], 1, MPI_INT, left, 2, MPI_COMM_WORLD, &q[2]));
    OK(MPI_Isend(&out[0], 1, MPI_INT, right, 0, MPI_COMM_WORLD, &q[3]));
    OK(MPI_Issend(&out[1], 1, MPI_INT, right, 1, MPI_COMM_WORLD, &q[4]));
    OK(MPI_Irsend(&out[2], 1, MPI_INT, right, 2, MPI_COMM_WORLD, &q[5]));
    OK(MPI_Waitall(6, q, st));
    for (int i = 0; i < 6; i++) CHECK(q[i] == MPI_REQUEST_NULL);
    CHECK(in[0] == left && in[1] == left + 1 && in[2] == left + 2);
    CHECK(st[1].MPI_SOURCE == left && st[1].MPI_TAG == 1);

    /* Wait, Test until done. */
    int flag = 0;
    OK(MPI_Irecv(&in[3], 1, MPI_INT, left, 3, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Isend(&out[3], 1, MPI_INT, right, 3, MPI_COMM_WORLD, &q[1]));
    while (!flag) OK(MPI_Test(&q[0], &flag, &st[0]));
    CHECK(q[0] == MPI_REQUEST_NULL && in[3] == left + 3 && st[0].MPI_TAG == 3);
    OK(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
    /* Wait and Test on a null request return at once. */
    OK(MPI_Wait(&q[1], &st[0]));
    OK(MPI_Test(&q[1], &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1);

    /* Waitany / Testany / Waitsome / Testsome. */
    int vals[3];
    for (int i = 0; i < 3; i++) OK(MPI_Irecv(&vals[i], 1, MPI_INT, left, 10 + i, MPI_COMM_WORLD, &q[i]));
    for (int i = 0; i < 3; i++) OK(MPI_Send(&out[i], 1, MPI_INT, right, 10 + i, MPI_COMM_WORLD));
    int idx, done = 0, count, ids[3];
    OK(MPI_Waitany(3, q, &idx, &st[0]));
    CHECK(idx >= 0 && idx < 3 && q[idx] == MPI_REQUEST_NULL && st[0].MPI_TAG == 10 + idx);
    done = 1;
    while (done < 3) {
        OK(MPI_Testany(3, q, &idx, &flag, MPI_STATUS_IGNORE));
        if (flag && idx != MPI_UNDEFINED) done++;
    }
    OK(MPI_Waitany(3, q, &idx, MPI_STATUS_IGNORE));
    CHECK(idx == MPI_UNDEFINED);
    for (int i = 0; i < 3; i++) CHECK(vals[i] == left + i);

    for (int i = 0; i < 3; i++) OK(MPI_Irecv(&vals[i], 1, MPI_INT, left, 20 + i, MPI_COMM_WORLD, &q[i]));
    for (int i = 0; i < 3; i++) OK(MPI_Send(&out[i], 1, MPI_INT, right, 20 + i, MPI_COMM_WORLD));
    done = 0;
    while (done < 3) {
        OK(MPI_Waitsome(3, q, &count, ids, st));
        CHECK(count >= 1 || count == MPI_UNDEFINED);
        if (count != MPI_UNDEFINED) done += count;
    }
    OK(MPI_Testsome(3, q, &count, ids, st));
    CHECK(count == MPI_UNDEFINED);
    for (int i = 0; i < 3; i++) CHECK(vals[i] == left + i);

    /* Testall: all or nothing. */
    OK(MPI_Irecv(&vals[0], 1, MPI_INT, left, 30, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Isend(&out[0], 1, MPI_INT, right, 30, MPI_COMM_WORLD, &q[1]));
    flag = 0;
    while (!flag) OK(MPI_Testall(2, q, &flag, MPI_STATUSES_IGNORE));
    CHECK(q[0] == MPI_REQUEST_NULL && vals[0] == left);

    /* Request_get_status does not free, and tells the request's status (a
     * receive through its handle alone, a persistent one, a vector one
     * through a staging buffer): the same as the wait after it. */
    OK(MPI_Irecv(&vals[0], 1, MPI_INT, left, 31, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Send(&out[1], 1, MPI_INT, right, 31, MPI_COMM_WORLD));
    flag = 0;
    while (!flag) OK(MPI_Request_get_status(q[0], &flag, &st[0]));
    CHECK(q[0] != MPI_REQUEST_NULL);
    int gc = -1;
    OK(MPI_Get_count(&st[0], MPI_INT, &gc));
    CHECK(st[0].MPI_SOURCE == left && st[0].MPI_TAG == 31 && gc == 1);
    OK(MPI_Wait(&q[0], &st[1]));
    CHECK(vals[0] == left + 1 && st[1].MPI_SOURCE == left && st[1].MPI_TAG == 31);
    {
        int pv[2] = {-1, -1}, po[2] = {r * 10, r * 10 + 1};
        MPI_Datatype strided;
        OK(MPI_Type_vector(2, 1, 2, MPI_INT, &strided));
        OK(MPI_Type_commit(&strided));
        int wide[4] = {-1, -1, -1, -1};
        OK(MPI_Recv_init(pv, 2, MPI_INT, left, 32, MPI_COMM_WORLD, &q[0]));
        OK(MPI_Start(&q[0]));
        OK(MPI_Irecv(wide, 1, strided, left, 33, MPI_COMM_WORLD, &q[1]));
        OK(MPI_Send(po, 2, MPI_INT, right, 32, MPI_COMM_WORLD));
        OK(MPI_Send(po, 2, MPI_INT, right, 33, MPI_COMM_WORLD));
        for (int k = 0; k < 2; k++) {
            flag = 0;
            while (!flag) OK(MPI_Request_get_status(q[k], &flag, &st[k]));
            OK(MPI_Get_count(&st[k], MPI_INT, &gc));
            CHECK(st[k].MPI_SOURCE == left && st[k].MPI_TAG == 32 + k && gc == 2);
        }
        OK(MPI_Waitall(2, q, st));
        CHECK(st[1].MPI_TAG == 33 && pv[0] == left * 10 && pv[1] == left * 10 + 1);
        CHECK(wide[0] == left * 10 && wide[2] == left * 10 + 1 && wide[1] == -1);
        OK(MPI_Request_free(&q[0]));
        OK(MPI_Type_free(&strided));
    }

    /* Cancel a receive nobody will match. */
    OK(MPI_Irecv(&vals[0], 1, MPI_INT, left, 999, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Cancel(&q[0]));
    OK(MPI_Wait(&q[0], &st[0]));
    OK(MPI_Test_cancelled(&st[0], &flag));
    CHECK(flag == 1);

    /* Request_free on a send in flight: it still arrives. */
    OK(MPI_Isend(&out[2], 1, MPI_INT, right, 40, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Request_free(&q[0]));
    CHECK(q[0] == MPI_REQUEST_NULL);
    OK(MPI_Recv(&vals[0], 1, MPI_INT, left, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(vals[0] == left + 2);

    /* Requests outlive their communicator (MPI_Comm_free lets pending
     * operations finish): receives posted on a duplicate that is freed
     * before they are waited for, one completed by MPI_Wait, one by
     * MPI_Waitany (which turns the library's compact requests into request
     * objects) and one let go with MPI_Request_free. */
    {
        MPI_Comm d;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        /* Static: the freed receive may land after this block. */
        static int freed = -1;
        int got[2] = {-1, -1}, idx = -1;
        MPI_Request rq[3];
        OK(MPI_Irecv(&got[0], 1, MPI_INT, left, 50, d, &rq[0]));
        OK(MPI_Irecv(&got[1], 1, MPI_INT, left, 51, d, &rq[1]));
        OK(MPI_Irecv(&freed, 1, MPI_INT, left, 52, d, &rq[2]));
        for (int t = 50; t < 53; t++) {
            int v = r * 100 + t;
            OK(MPI_Send(&v, 1, MPI_INT, right, t, d));
        }
        OK(MPI_Comm_free(&d));
        CHECK(d == MPI_COMM_NULL);
        OK(MPI_Wait(&rq[0], &st[0]));
        CHECK(rq[0] == MPI_REQUEST_NULL && got[0] == left * 100 + 50 && st[0].MPI_TAG == 50);
        OK(MPI_Waitany(1, &rq[1], &idx, &st[1]));
        CHECK(idx == 0 && rq[1] == MPI_REQUEST_NULL && got[1] == left * 100 + 51);
        CHECK(st[1].MPI_SOURCE == left);
        OK(MPI_Request_free(&rq[2]));
        CHECK(rq[2] == MPI_REQUEST_NULL);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    /* MPI_Isendrecv (MPI 4): done when both halves are; the status is the
     * receive's. Around a ring, each rank sends right and receives from the
     * left, with a large message too (past the eager limit). */
    {
        int me = kt_rank(), np = kt_size(), right = (me + 1) % np, left = (me + np - 1) % np;
        int out1 = me * 7, in1 = -1;
        MPI_Request sr;
        MPI_Status sst;
        OK(MPI_Isendrecv(&out1, 1, MPI_INT, right, 31, &in1, 1, MPI_INT, left, 31, MPI_COMM_WORLD, &sr));
        int seen = 0;
        while (!seen) OK(MPI_Request_get_status(sr, &seen, &sst));
        CHECK(sr != MPI_REQUEST_NULL && sst.MPI_SOURCE == left && sst.MPI_TAG == 31);
        OK(MPI_Wait(&sr, &sst));
        CHECK(sr == MPI_REQUEST_NULL && in1 == left * 7);
        CHECK(sst.MPI_SOURCE == left && sst.MPI_TAG == 31);
        int cnt;
        OK(MPI_Get_count(&sst, MPI_INT, &cnt));
        CHECK(cnt == 1);
        enum { BIG = 1 << 18 };
        int *bo = malloc(sizeof(int) * BIG), *bi = malloc(sizeof(int) * BIG);
        bo_keep = bo;
        CHECK(bo && bi);
        for (int i = 0; i < BIG; i++) bo[i] = me * 3 + i;
        OK(MPI_Isendrecv(bo, BIG, MPI_INT, right, 32, bi, BIG, MPI_INT, left, 32, MPI_COMM_WORLD, &sr));
        int flag = 0;
        while (!flag) OK(MPI_Test(&sr, &flag, MPI_STATUS_IGNORE));
        for (int i = 0; i < BIG; i += 4099) CHECK(bi[i] == left * 3 + i);
        /* Replace: the buffer goes right and is overwritten from the left. */
        for (int i = 0; i < BIG; i++) bo[i] = me * 5 + i;
        OK(MPI_Isendrecv_replace(bo, BIG, MPI_INT, right, 33, left, 33, MPI_COMM_WORLD, &sr));
        OK(MPI_Wait(&sr, &sst));
        for (int i = 0; i < BIG; i += 4099) CHECK(bo[i] == left * 5 + i);
        CHECK(sst.MPI_SOURCE == left);
        /* Freed while active: both halves finish on their own (the send from
         * a copy the library keeps); the buffer stays the program's to keep
         * alive, so it is kept until after a barrier and an exchange. */
        OK(MPI_Isendrecv_replace(bo, BIG, MPI_INT, right, 34, left, 34, MPI_COMM_WORLD, &sr));
        OK(MPI_Request_free(&sr));
        CHECK(sr == MPI_REQUEST_NULL);
        int t = me, tin = -1;
        OK(MPI_Sendrecv(&t, 1, MPI_INT, right, 35, &tin, 1, MPI_INT, left, 35, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(tin == left);
        OK(MPI_Barrier(MPI_COMM_WORLD));
        free(bi);
    }

    /* More receives in flight than a request handle can name by its
     * runtime request alone (65536): the rest go to the library's table,
     * and MPI_Waitall, MPI_Wait and MPI_Test take both kinds at once. */
    {
        enum { MANY = 70000 };
        MPI_Request *mq = malloc(MANY * sizeof *mq);
        int *mv = malloc(MANY * sizeof *mv);
        CHECK(mq != NULL && mv != NULL);
        for (int i = 0; i < MANY; i++) {
            mv[i] = -1;
            OK(MPI_Irecv(&mv[i], 1, MPI_INT, MPI_ANY_SOURCE, 40 + i % 2, MPI_COMM_SELF, &mq[i]));
        }
        for (int i = 0; i < MANY; i++) {
            int v = i * 7;
            OK(MPI_Send(&v, 1, MPI_INT, 0, 40 + i % 2, MPI_COMM_SELF));
        }
        /* Completion order matches posting order per tag: check a few of
         * each kind one by one, then the rest at once. */
        OK(MPI_Wait(&mq[MANY - 1], MPI_STATUS_IGNORE));
        int fl = 0;
        OK(MPI_Test(&mq[0], &fl, MPI_STATUS_IGNORE));
        CHECK(fl == 1 && mq[0] == MPI_REQUEST_NULL && mq[MANY - 1] == MPI_REQUEST_NULL);
        OK(MPI_Waitall(MANY, mq, MPI_STATUSES_IGNORE));
        for (int i = 0; i < MANY; i++) CHECK(mq[i] == MPI_REQUEST_NULL && mv[i] == i * 7);
        free(mq);
        free(mv);
    }

    kt_pass("nonblocking");
    MPI_Finalize();
    free(bo_keep);
    return 0;
}
