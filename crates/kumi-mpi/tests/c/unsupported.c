/* Concern: a function kumi does not implement fails, naming itself. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (kt_rank() == 0) {
        /* Under MPI_ERRORS_RETURN the call returns an error (and says why)... */
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        char port[MPI_MAX_PORT_NAME];
        int rc = MPI_Open_port(MPI_INFO_NULL, port);
        CHECK(rc != MPI_SUCCESS);
        printf("RETURNED %d\n", rc);
        fflush(stdout);
        /* ...and under the default handler it ends the job. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        MPI_Comm child;
        MPI_Comm_spawn("x", NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child, NULL);
        printf("NOT REACHED\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
