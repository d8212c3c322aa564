/* C programs that deadlock on purpose, through kumi's MPI ABI: `deadlock MODE`.
 * kumi must find each deadlock, name the ranks and the MPI calls as written here
 * with their line in this file, and end the job with exit code 86.
 * The line of each blocking call is asserted by the test driver
 * (crates/kumi-tests/tests/mpi_deadlock.rs): keep the `LINE` comments in sync.
 * - recv2:       ranks 0 and 1 each MPI_Recv from the other first (tag 7);
 * - barrier:     every rank but the last enters MPI_Barrier, the last waits in
 *                MPI_Recv from rank 0 (tag 7);
 * - bcastreduce: rank 0 enters MPI_Reduce to root 0, the others MPI_Bcast from
 *                root 0: mismatched collectives;
 * - wildcard:    rank 0 does MPI_Recv(MPI_ANY_SOURCE, tag 5); the others send it
 *                tag 6 (arrives, never matches) and enter MPI_Barrier;
 * - sendsend:    ranks 0 and 1 each MPI_Send 1 MiB (rendezvous) to the other;
 * - irecvwait:   ranks 0 and 1 each MPI_Irecv from the other (tag 7) and
 *                MPI_Wait for it: the request handle alone must tell kumi
 *                the peer and the tag;
 * - waitall:     the same with two receives (tags 7 and 8) and MPI_Waitall;
 * - partial:     ranks 0 and 1 as in waitall while rank 2 computes (sleeps
 *                outside MPI): the cycle alone proves the deadlock;
 * - partialtyped: the same with a derived datatype (requests of the library's
 *                table, not packed in their handles). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char big[1 << 20];

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *mode = argc > 1 ? argv[1] : "";
    int b[2] = {0, 0};
    if (!strcmp(mode, "recv2")) {
        MPI_Recv(b, 2, MPI_INT, 1 - me, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* LINE 38 */
    } else if (!strcmp(mode, "barrier")) {
        if (me == n - 1)
            MPI_Recv(b, 2, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* LINE 41 */
        else
            MPI_Barrier(MPI_COMM_WORLD); /* LINE 43 */
    } else if (!strcmp(mode, "bcastreduce")) {
        double v[4] = {1, 1, 1, 1}, out[4];
        if (me == 0)
            MPI_Reduce(v, out, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); /* LINE 47 */
        else
            MPI_Bcast(v, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* LINE 49 */
    } else if (!strcmp(mode, "wildcard")) {
        if (me == 0) {
            MPI_Recv(b, 2, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* LINE 52 */
        } else {
            MPI_Send(b, 2, MPI_INT, 0, 6, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD); /* LINE 55 */
        }
    } else if (!strcmp(mode, "sendsend")) {
        memset(big, me, sizeof big);
        MPI_Send(big, sizeof big, MPI_BYTE, 1 - me, 7, MPI_COMM_WORLD); /* LINE 59 */
    } else if (!strcmp(mode, "irecvwait")) {
        MPI_Request r;
        MPI_Irecv(b, 2, MPI_INT, 1 - me, 7, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE); /* LINE 63 */
    } else if (!strcmp(mode, "waitall")) {
        MPI_Request r[2];
        MPI_Irecv(b, 1, MPI_INT, 1 - me, 7, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(b + 1, 1, MPI_INT, 1 - me, 8, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE); /* LINE 68 */
    } else if (!strcmp(mode, "partial") || !strcmp(mode, "partialtyped")) {
        MPI_Datatype t = MPI_INT;
        if (!strcmp(mode, "partialtyped")) {
            MPI_Type_contiguous(1, MPI_INT, &t);
            MPI_Type_commit(&t);
        }
        if (me < 2) {
            MPI_Request r[2];
            MPI_Irecv(b, 1, t, 1 - me, 7, MPI_COMM_WORLD, &r[0]);
            MPI_Irecv(b + 1, 1, t, 1 - me, 8, MPI_COMM_WORLD, &r[1]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE); /* LINE 79 */
        } else {
            sleep(60);
        }
    } else {
        fprintf(stderr, "deadlock: unknown mode '%s'\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    printf("rank %d passed the deadlock: should not happen\n", me);
    MPI_Finalize();
    return 0;
}
