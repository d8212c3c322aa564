/* Concern: the init/finalize family and environment queries. */
#include "kt.h"

int main(int argc, char **argv) {
    int flag = -1, provided = -1, v, sv, len;
    OK(MPI_Initialized(&flag));
    CHECK(flag == 0);
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    /* What was granted, said honestly; kumi gives MPI_THREAD_MULTIPLE
     * (multiple.c). */
    CHECK(provided >= MPI_THREAD_FUNNELED && provided <= MPI_THREAD_MULTIPLE);
    if (kt_on_kumi()) CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Query_thread(&v));
    CHECK(v == provided);
    OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1);
    OK(MPI_Initialized(&flag));
    CHECK(flag == 1);
    OK(MPI_Finalized(&flag));
    CHECK(flag == 0);
    OK(MPI_Get_version(&v, &sv));
    CHECK(v == 4 && sv == 0);
    char name[MPI_MAX_PROCESSOR_NAME];
    OK(MPI_Get_processor_name(name, &len));
    CHECK(len > 0 && (int)strlen(name) == len);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    OK(MPI_Get_library_version(lib, &len));
    CHECK(len > 0);
    if (kt_rank() == 0) printf("LIB %s\n", lib);
    double t0 = MPI_Wtime(), t1 = MPI_Wtime();
    CHECK(t1 >= t0);
    CHECK(MPI_Wtick() > 0 && MPI_Wtick() < 1e-3);
    int n = kt_size(), r = kt_rank();
    CHECK(r >= 0 && r < n);
    kt_pass("init");
    OK(MPI_Finalize());
    OK(MPI_Finalized(&flag));
    CHECK(flag == 1);
    return 0;
}
