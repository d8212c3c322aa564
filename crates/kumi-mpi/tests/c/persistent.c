/* Concern: persistent requests (Send_init, Ssend_init, Rsend_init, Recv_init,
 * Start, Startall), including MPI_PROC_NULL. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    int out[3], in[3];
    MPI_Request q[6];
    MPI_Status st[6];
    OK(MPI_Recv_init(&in[0], 1, MPI_INT, left, 0, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Recv_init(&in[1], 1, MPI_INT, left, 1, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Recv_init(&in[2], 1, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &q[2]));
    OK(MPI_Send_init(&out[0], 1, MPI_INT, right, 0, MPI_COMM_WORLD, &q[3]));
    OK(MPI_Ssend_init(&out[1], 1, MPI_INT, right, 1, MPI_COMM_WORLD, &q[4]));
    OK(MPI_Rsend_init(&out[2], 1, MPI_INT, right, 2, MPI_COMM_WORLD, &q[5]));
    for (int it = 0; it < 20; it++) {
        for (int i = 0; i < 3; i++) out[i] = it * 10 + i + r;
        OK(MPI_Startall(3, q));          /* receives first */
        OK(MPI_Start(&q[3]));
        OK(MPI_Start(&q[4]));
        OK(MPI_Start(&q[5]));
        OK(MPI_Waitall(6, q, st));
        for (int i = 0; i < 6; i++) CHECK(q[i] != MPI_REQUEST_NULL);  /* inactive, not freed */
        for (int i = 0; i < 3; i++) CHECK(in[i] == it * 10 + i + left);
        CHECK(st[2].MPI_SOURCE == left);
    }
    for (int i = 0; i < 6; i++) OK(MPI_Request_free(&q[i]));

    /* Persistent operations with MPI_PROC_NULL complete at every start. */
    OK(MPI_Send_init(&out[0], 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Recv_init(&in[0], 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &q[1]));
    for (int it = 0; it < 3; it++) {
        OK(MPI_Startall(2, q));
        OK(MPI_Waitall(2, q, st));
        CHECK(st[1].MPI_SOURCE == MPI_PROC_NULL);
    }
    OK(MPI_Request_free(&q[0]));
    OK(MPI_Request_free(&q[1]));
    kt_pass("persistent");
    MPI_Finalize();
    return 0;
}
