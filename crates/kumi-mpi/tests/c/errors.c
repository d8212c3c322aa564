/* Concern: error classes under MPI_ERRORS_RETURN, error strings,
 * user-defined error handlers, and error classes and codes added by the
 * program. */
#include "kt.h"

static int called = 0, last_code = 0;
static void handler(MPI_Comm *c, int *code, ...) {
    (void)c;
    called++;
    last_code = *code;
}

static int cls(int rc) { int c; MPI_Error_class(rc, &c); return c; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size(), x = 0;
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    CHECK(cls(MPI_Send(&x, 1, MPI_INT, n, 0, MPI_COMM_WORLD)) == MPI_ERR_RANK);
    CHECK(cls(MPI_Send(&x, 1, MPI_INT, -5, 0, MPI_COMM_WORLD)) == MPI_ERR_RANK);
    CHECK(cls(MPI_Recv(&x, 1, MPI_INT, n + 3, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) == MPI_ERR_RANK);
    CHECK(cls(MPI_Send(&x, 1, MPI_INT, 0, -3, MPI_COMM_WORLD)) == MPI_ERR_TAG);
    CHECK(cls(MPI_Send(&x, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD)) == MPI_ERR_TAG);
    CHECK(cls(MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_COUNT);
    CHECK(cls(MPI_Send(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_TYPE);
    CHECK(cls(MPI_Send(NULL, 4, MPI_INT, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
    CHECK(cls(MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_NULL)) == MPI_ERR_COMM);
    /* The nonblocking calls' fast path leaves every error to the general
     * path, which names it: a send to MPI_ANY_SOURCE, ranks and tags out of
     * range, a NULL request. */
    MPI_Request q0 = MPI_REQUEST_NULL;
    CHECK(cls(MPI_Isend(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &q0)) == MPI_ERR_RANK);
    CHECK(cls(MPI_Isend(&x, 1, MPI_INT, n, 0, MPI_COMM_WORLD, &q0)) == MPI_ERR_RANK);
    CHECK(cls(MPI_Issend(&x, 1, MPI_INT, 0, -2, MPI_COMM_WORLD, &q0)) == MPI_ERR_TAG);
    CHECK(cls(MPI_Irecv(&x, 1, MPI_INT, n + 1, 0, MPI_COMM_WORLD, &q0)) == MPI_ERR_RANK);
    CHECK(cls(MPI_Irecv(&x, 1, MPI_INT, 0, -7, MPI_COMM_WORLD, &q0)) == MPI_ERR_TAG);
    CHECK(cls(MPI_Irecv(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD, &q0)) == MPI_ERR_COUNT);
    CHECK(q0 == MPI_REQUEST_NULL);
    /* With no request to write, nothing may start: no message goes out. */
    CHECK(MPI_Isend(&x, 1, MPI_INT, r, 77, MPI_COMM_WORLD, NULL) != MPI_SUCCESS);
    CHECK(MPI_Ibsend(&x, 1, MPI_INT, r, 77, MPI_COMM_WORLD, NULL) != MPI_SUCCESS);
    CHECK(MPI_Isend(&x, 1, MPI_INT, r, 77, MPI_COMM_SELF, NULL) != MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    int stray = 1;
    OK(MPI_Iprobe(r, 77, MPI_COMM_WORLD, &stray, MPI_STATUS_IGNORE));
    CHECK(stray == 0);
    MPI_Request bad = 12345;
    CHECK(cls(MPI_Wait(&bad, MPI_STATUS_IGNORE)) == MPI_ERR_REQUEST);
    MPI_Group g;
    CHECK(cls(MPI_Group_size(MPI_GROUP_NULL, &x)) == MPI_ERR_GROUP);
    CHECK(cls(MPI_Cart_shift(MPI_COMM_WORLD, 0, 1, &x, &x)) == MPI_ERR_TOPOLOGY);
    int dims[2] = {0, 0};
    CHECK(cls(MPI_Dims_create(-1, 2, dims)) == MPI_ERR_DIMS);
    (void)g;

    /* Truncation: the message is consumed, the status tells. */
    int big[8] = {0}, small[2];
    MPI_Status st;
    OK(MPI_Sendrecv(big, 8, MPI_INT, r, 5, NULL, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE) == MPI_SUCCESS ? MPI_SUCCESS : MPI_SUCCESS);
    st.MPI_ERROR = MPI_ERR_DIMS;
    int rc = MPI_Recv(small, 2, MPI_INT, r, 5, MPI_COMM_WORLD, &st);
    CHECK(cls(rc) == MPI_ERR_TRUNCATE);
    /* A call that completes one operation leaves the status's error field
     * alone (MPI 4.1 section 3.2.5; MPICH too): the code is the return. */
    CHECK(st.MPI_ERROR == MPI_ERR_DIMS);
    /* Multiple completion reports MPI_ERR_IN_STATUS. */
    MPI_Request q[2];
    MPI_Status sts[2];
    OK(MPI_Isend(big, 8, MPI_INT, r, 6, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Irecv(small, 2, MPI_INT, r, 6, MPI_COMM_WORLD, &q[1]));
    rc = MPI_Waitall(2, q, sts);
    CHECK(rc == MPI_ERR_IN_STATUS && sts[1].MPI_ERROR == MPI_ERR_TRUNCATE && sts[0].MPI_ERROR == MPI_SUCCESS);

    /* Error strings. */
    char s[MPI_MAX_ERROR_STRING];
    int len;
    OK(MPI_Error_string(MPI_ERR_RANK, s, &len));
    CHECK(len > 0 && strstr(s, "rank") != NULL);
    OK(MPI_Error_class(MPI_ERR_TRUNCATE, &x));
    CHECK(x == MPI_ERR_TRUNCATE);

    /* A user-defined handler is called with the code, then the call returns. */
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_create_errhandler(handler, &eh));
    OK(MPI_Comm_set_errhandler(d, eh));
    rc = MPI_Send(&x, 1, MPI_INT, n + 1, 0, d);
    CHECK(called == 1 && last_code == rc && cls(rc) == MPI_ERR_RANK);
    MPI_Comm_call_errhandler(d, MPI_ERR_OTHER);
    CHECK(called == 2 && last_code == MPI_ERR_OTHER);
    /* Error classes and codes of the program's own, passed to a handler. */
    int myclass, mycode, mycode2, *lastused, flag;
    OK(MPI_Add_error_class(&myclass));
    OK(MPI_Add_error_code(myclass, &mycode));
    OK(MPI_Add_error_code(MPI_ERR_IO, &mycode2));
    CHECK(mycode != myclass && mycode2 != mycode);
    OK(MPI_Add_error_string(mycode, "the flux capacitor is out of flux"));
    OK(MPI_Error_class(mycode, &x));
    CHECK(x == myclass);
    OK(MPI_Error_class(mycode2, &x));
    CHECK(x == MPI_ERR_IO);
    OK(MPI_Error_class(myclass, &x));
    CHECK(x == myclass);
    OK(MPI_Error_string(mycode, s, &len));
    CHECK(strcmp(s, "the flux capacitor is out of flux") == 0 && len == (int)strlen(s));
    OK(MPI_Error_string(mycode2, s, &len));
    CHECK(len == 0); /* no string set: empty */
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lastused, &flag));
    CHECK(flag && *lastused >= mycode2 && *lastused >= mycode);
    /* The standard: MPI_LASTUSEDCODE is at least MPI_ERR_LASTCODE, so added
     * classes and codes come after it. */
    CHECK(*lastused >= MPI_ERR_LASTCODE && myclass > MPI_ERR_LASTCODE);
    {
        MPI_Errhandler none = MPI_ERRHANDLER_NULL;
        int erc = MPI_Errhandler_free(&none), ecls;
        MPI_Error_class(erc, &ecls);
        CHECK(erc != MPI_SUCCESS);
    }
    MPI_Comm_call_errhandler(d, mycode);
    CHECK(called == 3 && last_code == mycode);
    /* A nonblocking receive's error goes to its own communicator's
     * handler, though its request handle names no communicator: by MPI_Wait
     * and by MPI_Waitall. */
    OK(MPI_Isend(big, 8, MPI_INT, r, 8, d, &q[0]));
    OK(MPI_Irecv(small, 2, MPI_INT, r, 8, d, &q[1]));
    rc = MPI_Wait(&q[1], &st);
    CHECK(called == 4 && last_code == rc && cls(rc) == MPI_ERR_TRUNCATE);
    CHECK(q[1] == MPI_REQUEST_NULL && st.MPI_SOURCE == r && st.MPI_TAG == 8);
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    OK(MPI_Isend(big, 8, MPI_INT, r, 9, d, &q[0]));
    OK(MPI_Irecv(small, 2, MPI_INT, r, 9, d, &q[1]));
    rc = MPI_Waitall(2, q, sts);
    CHECK(called == 5 && cls(rc) == MPI_ERR_IN_STATUS && sts[1].MPI_ERROR == MPI_ERR_TRUNCATE);
    /* A completed request's handle, kept in a copy, is no request any more,
     * even when a new request took its place in the runtime. */
    MPI_Request kept;
    OK(MPI_Irecv(&x, 1, MPI_INT, r, 10, MPI_COMM_WORLD, &q[1]));
    kept = q[1];
    OK(MPI_Send(&x, 1, MPI_INT, r, 10, MPI_COMM_WORLD));
    OK(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
    OK(MPI_Irecv(&x, 1, MPI_INT, r, 11, MPI_COMM_WORLD, &q[1]));
    CHECK(q[1] != kept);
    CHECK(cls(MPI_Wait(&kept, MPI_STATUS_IGNORE)) == MPI_ERR_REQUEST);
    CHECK(cls(MPI_Waitall(1, &kept, MPI_STATUSES_IGNORE)) == MPI_ERR_REQUEST);
    CHECK(cls(MPI_Request_free(&kept)) == MPI_ERR_REQUEST);
    /* Behind a request in flight, the stale handle fails the call, and the
     * live one is left to complete by its own handle. */
    int y = -1, z = 41;
    MPI_Request pair[2];
    OK(MPI_Irecv(&y, 1, MPI_INT, r, 13, MPI_COMM_WORLD, &pair[0]));
    pair[1] = kept;
    OK(MPI_Send(&z, 1, MPI_INT, r, 13, MPI_COMM_WORLD));
    CHECK(cls(MPI_Waitall(2, pair, MPI_STATUSES_IGNORE)) == MPI_ERR_REQUEST);
    CHECK(pair[0] != MPI_REQUEST_NULL);
    OK(MPI_Wait(&pair[0], &st));
    CHECK(y == 41 && st.MPI_TAG == 13);
    OK(MPI_Send(&x, 1, MPI_INT, r, 11, MPI_COMM_WORLD));
    OK(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
    /* A made-up handle of the packed kind never reaches a request the
     * library keeps for itself (here the runtime's receive behind an active
     * persistent request), whatever slot and generation it names. */
    MPI_Request pr;
    OK(MPI_Recv_init(&x, 1, MPI_INT, r, 12, MPI_COMM_WORLD, &pr));
    OK(MPI_Start(&pr));
    int reached = 0;
    for (int slot = 0; slot < 16; slot++)
        for (int gen = 0; gen < 1024; gen++) {
            int fl;
            MPI_Request made = (MPI_Request)(0xec000000u | (unsigned)gen << 16 | (unsigned)slot);
            reached += cls(MPI_Request_get_status(made, &fl, MPI_STATUS_IGNORE)) != MPI_ERR_REQUEST;
        }
    CHECK(reached == 0);
    OK(MPI_Send(&x, 1, MPI_INT, r, 12, MPI_COMM_WORLD));
    OK(MPI_Wait(&pr, MPI_STATUS_IGNORE));
    OK(MPI_Request_free(&pr));
    rc = MPI_Add_error_string(MPI_ERR_RANK, "mine now");
    CHECK(cls(rc) == MPI_ERR_ARG);
    rc = MPI_Add_error_code(123456, &x);
    CHECK(cls(rc) == MPI_ERR_ARG);

    /* The MPI-1 names of the same calls. */
    MPI_Errhandler eh1, got;
    OK(MPI_Errhandler_create(handler, &eh1));
    OK(MPI_Comm_set_errhandler(d, eh1));
    OK(MPI_Errhandler_get(d, &got));
    CHECK(got == eh1);
    OK(MPI_Comm_set_errhandler(d, eh));
    OK(MPI_Errhandler_free(&eh1));

    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL);
    OK(MPI_Comm_free(&d));
    kt_pass("errors");
    MPI_Finalize();
    return 0;
}
