/* Concern: the tools information interface (MPI_T), before, during and after
 * MPI: kumi exposes no variables, so the counts are zero and indices, names
 * and handles are refused with MPI_T's own codes; sessions work; the
 * interface counts its initializations. */
#include "kt.h"

static void queries(void) {
    int num, provided;
    CHECK(MPI_T_cvar_get_num(&num) == MPI_SUCCESS && num == 0);
    CHECK(MPI_T_pvar_get_num(&num) == MPI_SUCCESS && num == 0);
    CHECK(MPI_T_category_get_num(&num) == MPI_SUCCESS && num == 0);
    CHECK(MPI_T_category_changed(&num) == MPI_SUCCESS && num == 0);
    CHECK(MPI_T_cvar_get_index("kumi_eager_limit", &num) == MPI_T_ERR_INVALID_NAME);
    char name[64], desc[64];
    int nlen = 64, dlen = 64, verb, bind, scope;
    MPI_Datatype dt;
    MPI_T_enum en;
    CHECK(MPI_T_cvar_get_info(0, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope) ==
          MPI_T_ERR_INVALID_INDEX);
    MPI_T_pvar_session ses;
    CHECK(MPI_T_pvar_session_create(&ses) == MPI_SUCCESS && ses != MPI_T_PVAR_SESSION_NULL);
    MPI_T_pvar_handle h;
    int count;
    CHECK(MPI_T_pvar_handle_alloc(ses, 0, NULL, &h, &count) == MPI_T_ERR_INVALID_INDEX);
    CHECK(MPI_T_pvar_start(ses, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS);
    CHECK(MPI_T_pvar_stop(ses, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS);
    CHECK(MPI_T_pvar_start(ses, MPI_T_PVAR_HANDLE_NULL) == MPI_T_ERR_INVALID_HANDLE);
    CHECK(MPI_T_pvar_session_free(&ses) == MPI_SUCCESS && ses == MPI_T_PVAR_SESSION_NULL);
    CHECK(MPI_T_pvar_session_free(&ses) == MPI_T_ERR_INVALID_SESSION);
    (void)provided;
}

int main(int argc, char **argv) {
    int provided, num;
    /* Before MPI_Init, and before MPI_T_init_thread: refused. */
    if (MPI_T_cvar_get_num(&num) != MPI_T_ERR_NOT_INITIALIZED) {
        fprintf(stderr, "FAIL: MPI_T answered before MPI_T_init_thread\n");
        return 1;
    }
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS || provided != MPI_THREAD_SINGLE) {
        fprintf(stderr, "FAIL: MPI_T_init_thread before MPI_Init\n");
        return 1;
    }
    MPI_Init(&argc, &argv);
    queries();
    /* Nested initialization: a second init needs a second finalize. */
    CHECK(MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS && provided == MPI_THREAD_MULTIPLE);
    CHECK(MPI_T_finalize() == MPI_SUCCESS);
    CHECK(MPI_T_cvar_get_num(&num) == MPI_SUCCESS);
    CHECK(MPI_T_finalize() == MPI_SUCCESS);
    CHECK(MPI_T_cvar_get_num(&num) == MPI_T_ERR_NOT_INITIALIZED);
    CHECK(MPI_T_finalize() == MPI_T_ERR_NOT_INITIALIZED);
    CHECK(MPI_T_init_thread(7, &provided) == MPI_T_ERR_INVALID);
    kt_pass("tools");
    MPI_Finalize();
    /* After MPI_Finalize the interface still works. */
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 1;
    queries();
    return MPI_T_finalize() == MPI_SUCCESS ? 0 : 1;
}
