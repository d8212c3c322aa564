/* Regression (MPI conformance, cause 6): MPI's local query calls made from
 * inside a callback that another MPI call runs were refused ("MPI called
 * from inside a callback of another MPI call"): a reduction's function
 * asking the extent of the datatype it is given (during MPI_Wait, MPI_Test,
 * a blocking reduction, MPI_Reduce_local), and a generalized request's
 * query callback setting its status's element count. */
#include "kt.h"
#include <unistd.h>

#define COUNT 16

static int bad_queries = 0; /* queries inside the function that failed or lied */
static int op_calls = 0;
static MPI_Datatype wide; /* an int every 8 bytes: extent 8, size 4 */

/* Adds ints `stride` apart, the stride read from the datatype's extent. */
static void sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    MPI_Aint lb, extent;
    int size, isize;
    op_calls++;
    if (MPI_Type_get_extent(*dt, &lb, &extent) != MPI_SUCCESS ||
        MPI_Type_size(*dt, &size) != MPI_SUCCESS ||
        MPI_Type_size(MPI_INT, &isize) != MPI_SUCCESS) {
        bad_queries++;
        return;
    }
    if (isize != 4 || size != 4 || lb != 0 || (*dt == MPI_INT && extent != 4) ||
        (*dt == wide && extent != 8))
        bad_queries++;
    int stride = (int)(extent / (MPI_Aint)sizeof(int));
    for (int i = 0; i < *len; i++) ((int *)inout)[i * stride] += ((int *)in)[i * stride];
}

/* Fills a buffer of COUNT elements `stride` ints apart with rank + i. */
static void fill(int *b, int stride, int rank) {
    for (int i = 0; i < COUNT * stride; i++) b[i] = -1;
    for (int i = 0; i < COUNT; i++) b[i * stride] = rank + i;
}

/* Checks the sum over ranks: n * i + n (n - 1) / 2 at each element. */
static void check_sum(const int *b, int stride, int n) {
    for (int i = 0; i < COUNT; i++) CHECK(b[i * stride] == n * i + n * (n - 1) / 2);
}

static int query_fn(void *extra, MPI_Status *status) {
    int isize = 0;
    (void)extra;
    if (MPI_Type_size(MPI_INT, &isize) != MPI_SUCCESS || isize != 4) return MPI_ERR_OTHER;
    if (MPI_Status_set_elements(status, MPI_INT, 3) != MPI_SUCCESS) return MPI_ERR_OTHER;
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}
static int free_fn(void *extra) { (void)extra; return MPI_SUCCESS; }
static int cancel_fn(void *extra, int complete) { (void)extra; (void)complete; return MPI_SUCCESS; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = kt_rank(), n = kt_size();
    MPI_Op op;
    OK(MPI_Op_create(sum_fn, 1, &op));
    OK(MPI_Type_create_resized(MPI_INT, 0, 8, &wide));
    OK(MPI_Type_commit(&wide));
    int in[2 * COUNT], out[2 * COUNT];
    MPI_Request req;

    /* Completed by MPI_Wait, on a predefined type. */
    fill(in, 1, rank);
    OK(MPI_Iallreduce(in, out, COUNT, MPI_INT, op, MPI_COMM_WORLD, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    check_sum(out, 1, n);

    /* Completed by MPI_Test, on a derived type whose extent the function reads. */
    fill(in, 2, rank);
    fill(out, 2, 0);
    OK(MPI_Iallreduce(in, out, COUNT, wide, op, MPI_COMM_WORLD, &req));
    for (int done = 0; !done;) OK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    check_sum(out, 2, n);

    /* Left alone for a while: a library with a progress thread (kumi's)
     * may run the function there, where its queries must work too. */
    fill(in, 2, rank);
    fill(out, 2, 0);
    OK(MPI_Iallreduce(in, out, COUNT, wide, op, MPI_COMM_WORLD, &req));
    usleep(20000);
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    check_sum(out, 2, n);

    /* A rooted one completed by MPI_Waitall beside a point-to-point pair. */
    fill(in, 2, rank);
    fill(out, 2, 0);
    int token = rank, got = -1, right = (rank + 1) % n, left = (rank + n - 1) % n;
    MPI_Request reqs[3];
    MPI_Status sts[3];
    OK(MPI_Ireduce(in, out, COUNT, wide, op, n - 1, MPI_COMM_WORLD, &reqs[0]));
    OK(MPI_Irecv(&got, 1, MPI_INT, left, 7, MPI_COMM_WORLD, &reqs[1]));
    OK(MPI_Isend(&token, 1, MPI_INT, right, 7, MPI_COMM_WORLD, &reqs[2]));
    OK(MPI_Waitall(3, reqs, sts));
    if (rank == n - 1) check_sum(out, 2, n);
    CHECK(got == left);

    /* Blocking, and local. */
    fill(in, 2, rank);
    OK(MPI_Allreduce(in, out, COUNT, wide, op, MPI_COMM_WORLD));
    check_sum(out, 2, n);
    fill(in, 2, 1);
    fill(out, 2, 2);
    OK(MPI_Reduce_local(in, out, COUNT, wide, op));
    for (int i = 0; i < COUNT; i++) CHECK(out[2 * i] == 2 * i + 3);

    CHECK(op_calls > 0);
    CHECK(bad_queries == 0);

    /* A generalized request whose query callback sets its element count. */
    MPI_Status st;
    int elems = -1;
    OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, NULL, &req));
    OK(MPI_Grequest_complete(req));
    OK(MPI_Wait(&req, &st));
    OK(MPI_Get_count(&st, MPI_INT, &elems));
    CHECK(elems == 3);

    OK(MPI_Type_free(&wide));
    OK(MPI_Op_free(&op));
    kt_pass("callbacks");
    MPI_Finalize();
    return 0;
}
