/* Concern: MPI-4 sessions. A session starts MPI before MPI_Init: its process
 * sets, a group of mpi://WORLD and communicators made from groups (two with
 * one tag, one of a subgroup), errors returned under the session's handler;
 * then MPI_Init joins, MPI_Finalize leaves the session running, and
 * MPI_Session_finalize ends it. */
#include "kt.h"

static int handled;
static void on_error(MPI_Session *s, int *code, ...) {
    (void)s;
    handled = *code;
}

int main(int argc, char **argv) {
    int flag, rc, cls;
    MPI_Initialized(&flag);
    if (flag) return 1;
    MPI_Session s;
    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    MPI_Initialized(&flag);
    CHECK(!flag);

    int np, world = 0, self = 0;
    OK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &np));
    CHECK(np >= 2);
    for (int i = 0; i < np; i++) {
        int len = 0;
        OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL));
        char *name = malloc(len);
        OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name));
        CHECK((int)strlen(name) + 1 == len);
        world |= strcmp(name, "mpi://WORLD") == 0;
        self |= strcmp(name, "mpi://SELF") == 0;
        free(name);
    }
    CHECK(world && self);
    MPI_Info pi;
    char v[MPI_MAX_INFO_VAL + 1];
    OK(MPI_Session_get_pset_info(s, "mpi://WORLD", &pi));
    OK(MPI_Info_get(pi, "mpi_size", MPI_MAX_INFO_VAL, v, &flag));
    CHECK(flag);
    int size = atoi(v);
    OK(MPI_Info_free(&pi));

    MPI_Group g, gs;
    OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g));
    OK(MPI_Group_from_session_pset(s, "mpi://SELF", &gs));
    int gn;
    OK(MPI_Group_size(gs, &gn));
    CHECK(gn == 1);
    MPI_Comm c, c2;
    OK(MPI_Comm_create_from_group(g, "org.kumi.test.world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    int r, n, sum;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    CHECK(n == size);
    OK(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == n * (n - 1) / 2);
    /* The same group and tag again: another communicator, not the same. */
    OK(MPI_Comm_create_from_group(g, "org.kumi.test.world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c2));
    int cmp;
    OK(MPI_Comm_compare(c, c2, &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    int a = r, b = -1, d = -1;
    OK(MPI_Sendrecv(&a, 1, MPI_INT, (r + 1) % n, 3, &b, 1, MPI_INT, (r + n - 1) % n, 3, c2, MPI_STATUS_IGNORE));
    OK(MPI_Sendrecv(&a, 1, MPI_INT, (r + 1) % n, 3, &d, 1, MPI_INT, (r + n - 1) % n, 3, c, MPI_STATUS_IGNORE));
    CHECK(b == (r + n - 1) % n && d == b);
    /* Even ranks only, under their own tag. */
    if (r % 2 == 0) {
        int *ev = malloc(sizeof(int) * n), k = 0;
        for (int i = 0; i < n; i += 2) ev[k++] = i;
        MPI_Group ge;
        MPI_Comm ce;
        OK(MPI_Group_incl(g, k, ev, &ge));
        OK(MPI_Comm_create_from_group(ge, "org.kumi.test.even", MPI_INFO_NULL, MPI_ERRORS_RETURN, &ce));
        int er, es;
        MPI_Comm_rank(ce, &er);
        MPI_Comm_size(ce, &es);
        CHECK(es == k && er == r / 2);
        OK(MPI_Barrier(ce));
        OK(MPI_Comm_free(&ce));
        OK(MPI_Group_free(&ge));
        free(ev);
    }
    /* An unknown process set is an error, returned under the session's
     * handler (MPICH 4.0 aborts the job instead). */
    if (kt_on_kumi()) {
        MPI_Group bad;
        rc = MPI_Group_from_session_pset(s, "mpi://nowhere", &bad);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_ARG);
    }

    /* An intercommunicator between the even and the odd ranks, from groups. */
    if (n > 1) {
        int ne = (n + 1) / 2, no = n / 2, *ev = malloc(sizeof(int) * n), *od = malloc(sizeof(int) * n);
        for (int i = 0; i < ne; i++) ev[i] = 2 * i;
        for (int i = 0; i < no; i++) od[i] = 2 * i + 1;
        MPI_Group ge, go;
        OK(MPI_Group_incl(g, ne, ev, &ge));
        OK(MPI_Group_incl(g, no, od, &go));
        MPI_Comm ic, merged;
        OK(MPI_Intercomm_create_from_groups(r % 2 ? go : ge, 0, r % 2 ? ge : go, 0, "org.kumi.test.inter",
                                            MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic));
        int rs, is_inter, ms;
        OK(MPI_Comm_test_inter(ic, &is_inter));
        OK(MPI_Comm_remote_size(ic, &rs));
        CHECK(is_inter && rs == (r % 2 ? ne : no));
        OK(MPI_Barrier(ic));
        OK(MPI_Intercomm_merge(ic, r % 2, &merged));
        OK(MPI_Comm_size(merged, &ms));
        CHECK(ms == n);
        OK(MPI_Comm_free(&merged));
        OK(MPI_Comm_free(&ic));
        OK(MPI_Group_free(&ge));
        OK(MPI_Group_free(&go));
        free(ev);
        free(od);
    }

    /* A handler of the program's own, called by MPI_Session_call_errhandler. */
    MPI_Errhandler eh, got;
    OK(MPI_Session_create_errhandler(on_error, &eh));
    OK(MPI_Session_set_errhandler(s, eh));
    OK(MPI_Session_get_errhandler(s, &got));
    CHECK(got == eh);
    OK(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
    CHECK(handled == MPI_ERR_OTHER);
    OK(MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN));
    OK(MPI_Errhandler_free(&eh));
    MPI_Info used;
    OK(MPI_Session_get_info(s, &used));
    OK(MPI_Info_free(&used));

    /* The world model besides the session. */
    OK(MPI_Init(&argc, &argv));
    MPI_Initialized(&flag);
    CHECK(flag);
    int wr;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    CHECK(wr == r);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    MPI_Finalized(&flag);
    CHECK(flag);
    /* The session still works after MPI_Finalize. */
    OK(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == n * (n - 1) / 2);
    OK(MPI_Comm_free(&c));
    OK(MPI_Comm_free(&c2));
    OK(MPI_Group_free(&g));
    OK(MPI_Group_free(&gs));
    OK(MPI_Session_finalize(&s));
    CHECK(s == MPI_SESSION_NULL);
    if (r == 0) printf("PASS session\n");
    return 0;
}
