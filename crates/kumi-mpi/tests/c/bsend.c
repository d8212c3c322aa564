/* Concern: buffered sends: Buffer_attach, Bsend, Ibsend, Bsend_init,
 * Buffer_detach, and MPI_ERR_BUFFER when the buffer is too small. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    int size = 4 * (1000 * sizeof(double) + MPI_BSEND_OVERHEAD);
    void *pool = malloc(size);
    OK(MPI_Buffer_attach(pool, size));
    double a[1000], b[1000];
    for (int i = 0; i < 1000; i++) a[i] = r + i;
    /* Buffered: returns before the receiver posts anything. */
    OK(MPI_Bsend(a, 1000, MPI_DOUBLE, right, 0, MPI_COMM_WORLD));
    for (int i = 0; i < 1000; i++) a[i] = -1;   /* the copy was taken */
    MPI_Request q;
    OK(MPI_Ibsend(a, 10, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    OK(MPI_Recv(b, 1000, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(b[0] == left && b[999] == left + 999);
    OK(MPI_Recv(b, 10, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(b[0] == -1);

    OK(MPI_Bsend_init(a, 5, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &q));
    for (int it = 0; it < 3; it++) {
        a[0] = it;
        OK(MPI_Start(&q));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        OK(MPI_Recv(b, 5, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(b[0] == it);
    }
    OK(MPI_Request_free(&q));

    /* More than the buffer holds: MPI_ERR_BUFFER. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    double *huge = calloc(100000, sizeof(double));
    int rc = MPI_Bsend(huge, 100000, MPI_DOUBLE, right, 3, MPI_COMM_WORLD);
    int cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER);

    void *back;
    int bsize;
    OK(MPI_Buffer_detach(&back, &bsize));
    CHECK(back == pool && bsize == size);
    MPI_Barrier(MPI_COMM_WORLD);
    free(pool);
    free(huge);
    kt_pass("bsend");
    MPI_Finalize();
    return 0;
}
