/* Concern: Probe, Iprobe, matched probes (Mprobe/Mrecv, Improbe/Imrecv). */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    MPI_Status st;
    int count, flag;

    /* Probe learns the size, then the receive sizes its buffer. */
    int len = 5 + r;
    int *msg = malloc(len * sizeof(int));
    for (int i = 0; i < len; i++) msg[i] = r * 100 + i;
    MPI_Request sq;
    OK(MPI_Isend(msg, len, MPI_INT, right, 1, MPI_COMM_WORLD, &sq));
    OK(MPI_Probe(left, 1, MPI_COMM_WORLD, &st));
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 5 + left && st.MPI_SOURCE == left && st.MPI_TAG == 1);
    int *buf = malloc(count * sizeof(int));
    OK(MPI_Recv(buf, count, MPI_INT, left, 1, MPI_COMM_WORLD, &st));
    CHECK(buf[count - 1] == left * 100 + count - 1);
    OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));

    /* Iprobe: nothing there, then the message is. */
    OK(MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, &st));
    CHECK(flag == 0);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Isend(msg, 2, MPI_INT, right, 2, MPI_COMM_WORLD, &sq));
    flag = 0;
    while (!flag) OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 2);
    OK(MPI_Recv(buf, 2, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));

    /* Mprobe/Mrecv: the probed message is taken out of matching. */
    MPI_Message m;
    OK(MPI_Isend(msg, len, MPI_INT, right, 3, MPI_COMM_WORLD, &sq));
    OK(MPI_Mprobe(left, 3, MPI_COMM_WORLD, &m, &st));
    CHECK(m != MPI_MESSAGE_NULL);
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 5 + left);
    OK(MPI_Iprobe(left, 3, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 0);
    int *b2 = malloc(count * sizeof(int));
    OK(MPI_Mrecv(b2, count, MPI_INT, &m, &st));
    CHECK(m == MPI_MESSAGE_NULL && b2[0] == left * 100 && st.MPI_SOURCE == left);
    OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));

    /* Improbe/Imrecv, with a large (rendezvous) message. */
    int big = 100000;
    double *bd = malloc(big * sizeof(double)), *rd = malloc(big * sizeof(double));
    for (int i = 0; i < big; i++) bd[i] = r + i * 0.25;
    OK(MPI_Isend(bd, big, MPI_DOUBLE, right, 4, MPI_COMM_WORLD, &sq));
    flag = 0;
    while (!flag) OK(MPI_Improbe(MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &flag, &m, &st));
    OK(MPI_Get_elements(&st, MPI_DOUBLE, &count));
    CHECK(count == big);
    MPI_Request rq;
    OK(MPI_Imrecv(rd, big, MPI_DOUBLE, &m, &rq));
    OK(MPI_Wait(&rq, &st));
    CHECK(rd[big - 1] == left + (big - 1) * 0.25);
    OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));

    /* MPI_PROC_NULL. */
    OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st));
    CHECK(m == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL);
    OK(MPI_Mrecv(buf, 1, MPI_INT, &m, &st));
    OK(MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL);
    free(msg); free(buf); free(b2); free(bd); free(rd);
    kt_pass("probe");
    MPI_Finalize();
    return 0;
}
