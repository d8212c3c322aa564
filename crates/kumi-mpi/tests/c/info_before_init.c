/* Concern: the calls MPI 4 allows before MPI_Init and after MPI_Finalize
 * (MPI 4.1, section 11.2.1). Regression: kumi kept info objects in the
 * state MPI_Init makes, so MPI_Info_create before MPI_Init ended the
 * program ("MPI is not initialized"). An info made before MPI_Init is used
 * during the run (as a communicator hint) and after MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kt.h's CHECK aborts through MPI; before MPI_Init and after MPI_Finalize
 * only exit is possible. */
#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);          \
            exit(99);                                                              \
        }                                                                          \
    } while (0)
#define OK(rc) CHECK((rc) == MPI_SUCCESS)

int main(int argc, char **argv) {
    int flag, len, n, version, subversion, done;
    char v[MPI_MAX_INFO_VAL + 1], k[MPI_MAX_INFO_KEY + 1];
    MPI_Info info, dup, env;

    OK(MPI_Initialized(&flag));
    CHECK(!flag);
    OK(MPI_Get_version(&version, &subversion));
    CHECK(version >= 4);
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "color", "blue"));
    OK(MPI_Info_set(info, "size", "7"));
    OK(MPI_Info_delete(info, "size"));
    OK(MPI_Info_get_nkeys(info, &n));
    CHECK(n == 1);
    OK(MPI_Info_get_nthkey(info, 0, k));
    CHECK(strcmp(k, "color") == 0);
    len = sizeof v;
    OK(MPI_Info_get_string(info, "color", &len, v, &flag));
    CHECK(flag && strcmp(v, "blue") == 0 && len == 5);
    OK(MPI_Info_get_valuelen(info, "color", &len, &flag));
    CHECK(flag && len == 4);
    OK(MPI_Info_dup(info, &dup));
    OK(MPI_Info_create_env(argc, argv, &env));
    len = sizeof v;
    OK(MPI_Info_get_string(env, "maxprocs", &len, v, &flag));
    CHECK(flag && atoi(v) >= 1);

    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(atoi(v) == size);
    /* The same object serves as a hint while MPI runs. */
    MPI_Comm c;
    OK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, dup, &c));
    OK(MPI_Comm_free(&c));
    OK(MPI_Info_set(info, "phase", "running"));
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Finalize();

    OK(MPI_Finalized(&done));
    CHECK(done);
    len = sizeof v;
    OK(MPI_Info_get_string(info, "phase", &len, v, &flag));
    CHECK(flag && strcmp(v, "running") == 0);
    OK(MPI_Info_free(&info));
    OK(MPI_Info_free(&dup));
    OK(MPI_Info_free(&env));
    CHECK(info == MPI_INFO_NULL);
    if (rank == 0) printf("PASS info_before_init\n");
    return 0;
}
