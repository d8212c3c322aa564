/* What a rank was started with, one line per rank: for the tests of the
 * launchers' options (mpirun/mpiexec, MPMD). Prints its rank, the job size,
 * MPI_APPNUM, the program name, $ROLE, its working directory, how many cores
 * it may run on, kumi's name for its host, and a sum over MPI_COMM_WORLD after a barrier
 * (so every rank of every program took part in two collectives). */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, flag = 0, *appnum = NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
    char cwd[512] = "?";
    if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "?");
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
    /* kumi's name for the host (test hosts are namespaces of one machine,
     * which share their node name). */
    const char *host = getenv("KUMI_HOST");
    const char *role = getenv("ROLE");
    const char *name = strrchr(argv[0], '/');
    int sum = rank;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank=%d size=%d app=%d prog=%s role=%s cwd=%s cores=%d host=%s sum=%d\n", rank, size,
           flag ? *appnum : -1, name ? name + 1 : argv[0], role ? role : "-", cwd, cores,
           host ? host : "-", sum);
    MPI_Finalize();
    return 0;
}
