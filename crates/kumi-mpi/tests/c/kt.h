/* Shared by kumi's C MPI tests: a check that aborts the job naming the line. */
#ifndef KT_H
#define KT_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);          \
            MPI_Abort(MPI_COMM_WORLD, 99);                                         \
        }                                                                          \
    } while (0)

#define OK(rc) CHECK((rc) == MPI_SUCCESS)

static inline int kt_rank(void) { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
static inline int kt_size(void) { int n; MPI_Comm_size(MPI_COMM_WORLD, &n); return n; }

/* Whether the library is kumi's: for checks of what the standard leaves to
 * the implementation, or of what kumi refuses that other libraries do. */
static inline int kt_on_kumi(void) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(v, &len);
    return strstr(v, "kumi") != NULL;
}

/* Printed by rank 0 at the end; the test driver looks for it. */
static inline void kt_pass(const char *name) {
    if (kt_rank() == 0) printf("PASS %s\n", name);
    fflush(stdout);
}
#endif
