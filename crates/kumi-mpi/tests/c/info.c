/* Concern: info objects. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Info info, dup;
    int flag, n, len;
    char v[64], k[MPI_MAX_INFO_KEY + 1];
    OK(MPI_Info_create(&info));
    OK(MPI_Info_get_nkeys(info, &n));
    CHECK(n == 0);
    OK(MPI_Info_set(info, "alpha", "1"));
    OK(MPI_Info_set(info, "beta", "two"));
    OK(MPI_Info_set(info, "alpha", "one"));
    OK(MPI_Info_get_nkeys(info, &n));
    CHECK(n == 2);
    OK(MPI_Info_get(info, "alpha", 63, v, &flag));
    CHECK(flag && strcmp(v, "one") == 0);
    OK(MPI_Info_get_valuelen(info, "beta", &len, &flag));
    CHECK(flag && len == 3);
    int buflen = sizeof v;
    OK(MPI_Info_get_string(info, "beta", &buflen, v, &flag));
    CHECK(flag && strcmp(v, "two") == 0 && buflen == 4);
    OK(MPI_Info_get(info, "gamma", 63, v, &flag));
    CHECK(!flag);
    OK(MPI_Info_get_nthkey(info, 1, k));
    CHECK(strcmp(k, "beta") == 0);
    OK(MPI_Info_dup(info, &dup));
    OK(MPI_Info_delete(info, "alpha"));
    OK(MPI_Info_get_nkeys(info, &n));
    CHECK(n == 1);
    OK(MPI_Info_get_nkeys(dup, &n));
    CHECK(n == 2);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Info_delete(info, "alpha"), c;
    MPI_Error_class(rc, &c);
    CHECK(c == MPI_ERR_INFO_NOKEY);
    /* Communicator hints: accepted, ignored, so none is reported as used. */
    MPI_Comm hinted;
    OK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &hinted));
    int hs, one = 1;
    OK(MPI_Allreduce(&one, &hs, 1, MPI_INT, MPI_SUM, hinted));
    CHECK(hs == kt_size());
    OK(MPI_Comm_set_info(hinted, dup));
    MPI_Info used;
    OK(MPI_Comm_get_info(hinted, &used));
    OK(MPI_Info_get_nkeys(used, &n));
    CHECK(n == 0);
    OK(MPI_Info_free(&used));
    OK(MPI_Comm_free(&hinted));
    rc = MPI_Comm_set_info(MPI_COMM_WORLD, 12345);
    MPI_Error_class(rc, &c);
    CHECK(c == MPI_ERR_INFO);
    OK(MPI_Info_free(&info));
    OK(MPI_Info_free(&dup));
    CHECK(info == MPI_INFO_NULL);
    kt_pass("info");
    MPI_Finalize();
    return 0;
}
