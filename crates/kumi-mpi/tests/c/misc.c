/* Concern: the smaller pieces: memory, addresses, status setters, type names
 * and _x queries, deprecated attribute calls, MPI_COMM_DUP_FN, and the MPI-4
 * large-count (_c) variants. */
#include "kt.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    int flag, x;

    double *mem;
    OK(MPI_Alloc_mem(64 * sizeof(double), MPI_INFO_NULL, &mem));
    mem[63] = 1.0;
    OK(MPI_Free_mem(mem));
    MPI_Aint a0, a1;
    int arr[4];
    OK(MPI_Get_address(&arr[0], &a0));
    OK(MPI_Get_address(&arr[3], &a1));
    CHECK(MPI_Aint_diff(a1, a0) == 12 && MPI_Aint_add(a0, 12) == a1);
    OK(MPI_Pcontrol(1));

    /* Status setters and the _x queries. */
    MPI_Status st;
    OK(MPI_Status_set_elements(&st, MPI_DOUBLE, 5));
    OK(MPI_Get_count(&st, MPI_DOUBLE, &x));
    CHECK(x == 5);
    MPI_Count big;
    OK(MPI_Get_elements_x(&st, MPI_DOUBLE, &big));
    CHECK(big == 5);
    OK(MPI_Status_set_cancelled(&st, 1));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1);

    MPI_Datatype hb;
    MPI_Aint disp[2] = {0, 16};
    OK(MPI_Type_create_hindexed_block(2, 2, disp, MPI_INT, &hb));
    OK(MPI_Type_set_name(hb, "two pairs"));
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Type_get_name(hb, name, &len));
    CHECK(strcmp(name, "two pairs") == 0);
    MPI_Count sz, lb, ext;
    OK(MPI_Type_size_x(hb, &sz));
    CHECK(sz == 16);
    OK(MPI_Type_get_extent_x(hb, &lb, &ext));
    CHECK(lb == 0 && ext == 24);
    OK(MPI_Type_get_true_extent_x(hb, &lb, &ext));
    CHECK(ext == 24);
    OK(MPI_Type_free(&hb));

    /* Deprecated attribute calls and MPI_COMM_DUP_FN. */
    int key, val = 42, *got;
    OK(MPI_Keyval_create(MPI_COMM_DUP_FN, MPI_NULL_DELETE_FN, &key, NULL));
    OK(MPI_Attr_put(MPI_COMM_WORLD, key, &val));
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Attr_get(d, key, &got, &flag));
    CHECK(flag && got == &val);
    OK(MPI_Attr_delete(MPI_COMM_WORLD, key));
    OK(MPI_Comm_free(&d));
    OK(MPI_Keyval_free(&key));
    OK(MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    /* Large-count variants. */
    long out[3] = {r, r, r}, in[3];
    MPI_Request q;
    OK(MPI_Irecv_c(in, 3, MPI_LONG, left, 0, MPI_COMM_WORLD, &q));
    OK(MPI_Send_c(out, 3, MPI_LONG, right, 0, MPI_COMM_WORLD));
    OK(MPI_Wait(&q, &st));
    MPI_Count c;
    OK(MPI_Get_count_c(&st, MPI_LONG, &c));
    CHECK(c == 3 && in[2] == left);
    OK(MPI_Get_elements_c(&st, MPI_LONG, &c));
    CHECK(c == 3);
    OK(MPI_Isend_c(out, 1, MPI_LONG, right, 1, MPI_COMM_WORLD, &q));
    OK(MPI_Recv_c(in, 1, MPI_LONG, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    long b = r == 0 ? 77 : 0, s;
    OK(MPI_Bcast_c(&b, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    CHECK(b == 77);
    OK(MPI_Allreduce_c(&out[0], &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(s == (long)n * (n - 1) / 2);
    MPI_Count *cnts = malloc(n * sizeof(MPI_Count));
    MPI_Aint *dsp = malloc(n * sizeof(MPI_Aint));
    for (int i = 0; i < n; i++) { cnts[i] = 1; dsp[i] = n - 1 - i; }
    long *all = malloc(n * sizeof(long));
    OK(MPI_Gatherv_c(&out[0], 1, MPI_LONG, all, cnts, dsp, MPI_LONG, 0, MPI_COMM_WORLD));
    if (r == 0) for (int i = 0; i < n; i++) CHECK(all[n - 1 - i] == i);
    OK(MPI_Type_size_c(MPI_LONG, &c));
    CHECK(c == 8);
    OK(MPI_Type_get_extent_c(MPI_LONG, &lb, &ext));
    CHECK(ext == 8);
    /* A negative count is refused (counts beyond an int: bigcount.c). */
    int rc = MPI_Allreduce_c(out, &s, -1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD), cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT);
    /* So is a negative entry of an alltoallv's counts (on every rank, so
     * none waits for a block), before anything moves. */
    {
        int *vc = malloc(n * sizeof(int)), *vd = malloc(n * sizeof(int));
        for (int i = 0; i < n; i++) { vc[i] = i == 0 ? -1 : 1; vd[i] = i; }
        long *vs = malloc(n * sizeof(long)), *vr = malloc(n * sizeof(long));
        rc = MPI_Alltoallv(vs, vc, vd, MPI_LONG, vr, vc, vd, MPI_LONG, MPI_COMM_WORLD);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_COUNT);
        free(vc); free(vd); free(vs); free(vr);
    }
    free(cnts); free(dsp); free(all);
    /* MPI_Status_set_elements_x: a count past 2^31 elements. */
    {
        MPI_Status sx;
        MPI_Count cx;
        OK(MPI_Status_set_elements_x(&sx, MPI_CHAR, (MPI_Count)3 << 31));
        OK(MPI_Get_elements_x(&sx, MPI_CHAR, &cx));
        CHECK(cx == (MPI_Count)3 << 31);
    }
    kt_pass("misc");
    MPI_Finalize();
    return 0;
}
