/* Concern: the lifetimes of error handlers, keyvals and attributes (MPI 4.1
 * sections 7.7 and 9.3). Regression: an error handler freed while set on a
 * communicator stopped working (the job aborted as if MPI_ERRORS_ARE_FATAL
 * were set); a keyval freed while attributes used it was refused; delete
 * callbacks on MPI_COMM_SELF did not run first in MPI_Finalize, in reverse
 * order of setting; a copy callback's error did not fail MPI_Comm_dup (nor
 * MPI_Type_dup); an attribute whose delete callback failed was removed
 * anyway; a keyval freed again by a delete callback and then the program
 * was refused. */
#include "kt.h"

static int handled;
static void on_error(MPI_Comm *c, int *code, ...) {
    (void)c;
    (void)code;
    handled++;
}

static int deleted[8], ndeleted, order[8];
static int del_count(MPI_Comm c, int key, void *val, void *extra) {
    (void)c;
    (void)key;
    (void)extra;
    deleted[(int)(size_t)val]++;
    return MPI_SUCCESS;
}
static int copy_fail(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag) {
    (void)c;
    (void)key;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

/* Fails unless `refuse` is 0. */
static int refuse = 1;
static int del_refuse(MPI_Comm c, int key, void *val, void *extra) {
    (void)c;
    (void)key;
    (void)val;
    (void)extra;
    return refuse ? MPI_ERR_OTHER : MPI_SUCCESS;
}

/* Frees its own keyval (a copy of the handle), as some libraries do. */
static int del_free_key(MPI_Comm c, int key, void *val, void *extra) {
    (void)c;
    (void)val;
    (void)extra;
    return MPI_Comm_free_keyval(&key);
}

/* Finalize's first act: SELF's attributes deleted, last set first. */
static int self_checked;
static int del_self_last(MPI_Comm c, int key, void *val, void *extra) {
    (void)c;
    (void)key;
    (void)extra;
    int fin;
    MPI_Finalized(&fin);
    CHECK(!fin);
    order[ndeleted++] = (int)(size_t)val;
    if (ndeleted == 3) {
        CHECK(order[0] == 3 && order[1] == 2 && order[2] == 1);
        self_checked = 1;
    }
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);

    /* An error handler freed while set stays in force until the
     * communicator goes. */
    MPI_Comm d;
    MPI_Errhandler eh, got;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_create_errhandler(on_error, &eh));
    OK(MPI_Comm_set_errhandler(d, eh));
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL);
    int x = 0;
    int rc = MPI_Send(&x, -1, MPI_INT, 0, 0, d);
    CHECK(rc != MPI_SUCCESS && handled == 1);
    OK(MPI_Comm_get_errhandler(d, &got));
    rc = MPI_Send(&x, -1, MPI_INT, 0, 0, d);
    CHECK(rc != MPI_SUCCESS && handled == 2);
    OK(MPI_Errhandler_free(&got));
    /* A dup inherits it. */
    MPI_Comm d2;
    OK(MPI_Comm_dup(d, &d2));
    OK(MPI_Comm_free(&d));
    rc = MPI_Send(&x, -1, MPI_INT, 0, 0, d2);
    CHECK(rc != MPI_SUCCESS && handled == 3);
    OK(MPI_Comm_free(&d2));

    /* A keyval freed while an attribute uses it: the attribute stays, is
     * copied and deleted as before; the key is no longer valid for new
     * attributes. */
    int key;
    OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, del_count, &key, NULL));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_set_attr(d, key, (void *)(size_t)1));
    int k2 = key;
    OK(MPI_Comm_free_keyval(&k2));
    CHECK(k2 == MPI_KEYVAL_INVALID);
    void *v;
    int flag;
    OK(MPI_Comm_get_attr(d, key, &v, &flag));
    CHECK(flag && v == (void *)(size_t)1);
    OK(MPI_Comm_dup(d, &d2));
    OK(MPI_Comm_get_attr(d2, key, &v, &flag));
    CHECK(flag && v == (void *)(size_t)1);
    OK(MPI_Comm_free(&d));
    CHECK(deleted[1] == 1);
    OK(MPI_Comm_free(&d2));
    CHECK(deleted[1] == 2);

    /* A copy callback's error fails the dup, and nothing is left. */
    int kf;
    OK(MPI_Comm_create_keyval(copy_fail, MPI_COMM_NULL_DELETE_FN, &kf, NULL));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_set_attr(d, kf, (void *)(size_t)5));
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    d2 = MPI_COMM_WORLD;
    rc = MPI_Comm_dup(d, &d2);
    CHECK(rc != MPI_SUCCESS);
    CHECK(d2 == MPI_COMM_NULL);
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_free_keyval(&kf));

    /* A delete callback's error fails the call and the attribute stays
     * (replacing, deleting, freeing the communicator); a datatype's copy
     * callback's error fails MPI_Type_dup, which leaves nothing. */
    int kr;
    OK(MPI_Comm_create_keyval((MPI_Comm_copy_attr_function *)copy_fail, del_refuse, &kr, NULL));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    OK(MPI_Comm_set_attr(d, kr, (void *)(size_t)6));
    CHECK(MPI_Comm_set_attr(d, kr, (void *)(size_t)7) != MPI_SUCCESS);
    CHECK(MPI_Comm_delete_attr(d, kr) != MPI_SUCCESS);
    OK(MPI_Comm_get_attr(d, kr, &v, &flag));
    CHECK(flag && v == (void *)(size_t)6);
    CHECK(MPI_Comm_free(&d) != MPI_SUCCESS && d != MPI_COMM_NULL);
    OK(MPI_Comm_get_attr(d, kr, &v, &flag));
    CHECK(flag && v == (void *)(size_t)6);
    refuse = 0;
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_free_keyval(&kr));
    int tk;
    MPI_Datatype t, t2 = MPI_INT;
    OK(MPI_Type_create_keyval((MPI_Type_copy_attr_function *)copy_fail, MPI_TYPE_NULL_DELETE_FN, &tk, NULL));
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    OK(MPI_Type_set_attr(t, tk, (void *)(size_t)8));
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Type_dup(t, &t2) != MPI_SUCCESS && t2 == MPI_DATATYPE_NULL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    OK(MPI_Type_free(&t));
    OK(MPI_Type_free_keyval(&tk));

    /* A keyval freed by its own delete callback, then by the program,
     * while another attribute still uses it: both frees succeed. */
    int kk, kk2;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_free_key, &kk, NULL));
    kk2 = kk;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d2));
    OK(MPI_Comm_set_attr(d, kk, NULL));
    OK(MPI_Comm_set_attr(d2, kk, NULL));
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_free_keyval(&kk2));
    OK(MPI_Comm_get_attr(d2, kk, &v, &flag));
    CHECK(flag);
    OK(MPI_Comm_free(&d2));

    /* Attributes on a window outlive their freed keyval too. */
    int wk, buf[4];
    MPI_Win w;
    OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, (MPI_Win_delete_attr_function *)del_count, &wk, NULL));
    OK(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w));
    OK(MPI_Win_set_attr(w, wk, (void *)(size_t)2));
    int wk2 = wk;
    OK(MPI_Win_free_keyval(&wk2));
    OK(MPI_Win_get_attr(w, wk, &v, &flag));
    CHECK(flag && v == (void *)(size_t)2);
    OK(MPI_Win_free(&w));
    CHECK(deleted[2] == 1);

    /* SELF's delete callbacks run at the start of MPI_Finalize, the last
     * set first. */
    ndeleted = 0;
    for (size_t i = 1; i <= 3; i++) {
        int k;
        OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_self_last, &k, NULL));
        OK(MPI_Comm_set_attr(MPI_COMM_SELF, k, (void *)i));
    }
    kt_pass("lifetimes");
    MPI_Finalize();
    if (!self_checked) {
        fprintf(stderr, "FAIL: MPI_COMM_SELF's delete callbacks did not run in reverse order in MPI_Finalize\n");
        return 1;
    }
    return 0;
}
