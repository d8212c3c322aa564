/* Concern: communicators and groups: dup, idup, split, split_type, create,
 * free, compare, groups, names, predefined attributes and user keyvals. */
#include "kt.h"

static int deleted = 0, copied = 0;
static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)k; (void)extra;
    copied++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int k, void *v, void *extra) {
    (void)c; (void)k; (void)extra;
    deleted += *(int *)v;
    return MPI_SUCCESS;
}

/* MPI_Comm_idup does not wait for the other members: rank 0 starts one,
 * then receives a synchronous message that the last rank sends before it
 * starts its own (a blocking duplicate would wait forever here). Several
 * in flight on two communicators, completed in another order; attributes
 * copied; the duplicates work. */
static void idup_checks(void) {
    int r = kt_rank(), n = kt_size(), x = 7, k;
    MPI_Comm d[3], half;
    MPI_Request rq[3];
    OK(MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &k, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, k, (void *)&x));
    OK(MPI_Comm_split(MPI_COMM_WORLD, r % 2, -r, &half));
    if (r == 0) {
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &d[0], &rq[0]));
        if (n > 1) OK(MPI_Recv(&x, 1, MPI_INT, n - 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else if (r == n - 1) {
        OK(MPI_Ssend(&x, 1, MPI_INT, 0, 5, MPI_COMM_WORLD));
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &d[0], &rq[0]));
    } else {
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &d[0], &rq[0]));
    }
    OK(MPI_Comm_idup_with_info(half, MPI_INFO_NULL, &d[1], &rq[1]));
    /* An error handler set before the duplicate completes applies to it
     * (MPICH allows it; mpi4py does it on every Idup). */
    OK(MPI_Comm_set_errhandler(d[1], MPI_ERRORS_RETURN));
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &d[2], &rq[2]));
    if (r % 2) {
        int done = 0;
        while (!done) OK(MPI_Test(&rq[2], &done, MPI_STATUS_IGNORE));
        OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    } else {
        OK(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
    }
    int cmp, sum, flag, *got;
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(d[1], &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, d[0], &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    OK(MPI_Comm_compare(half, d[1], &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    OK(MPI_Comm_get_attr(d[2], k, &got, &flag));
    CHECK(flag && got == &x);
    for (int i = 0; i < 3; i++) {
        int one = 1, want;
        MPI_Comm_size(d[i], &want);
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d[i]));
        CHECK(sum == want);
    }
    /* Traffic on one duplicate does not match receives on another. */
    int a = r, b = -1, c = -1;
    OK(MPI_Sendrecv(&a, 1, MPI_INT, (r + 1) % n, 9, &b, 1, MPI_INT, (r + n - 1) % n, 9, d[0], MPI_STATUS_IGNORE));
    OK(MPI_Sendrecv(&a, 1, MPI_INT, (r + 1) % n, 9, &c, 1, MPI_INT, (r + n - 1) % n, 9, d[2], MPI_STATUS_IGNORE));
    CHECK(b == (r + n - 1) % n && c == b);
    for (int i = 0; i < 3; i++) OK(MPI_Comm_free(&d[i]));
    OK(MPI_Comm_free(&half));
    OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, k));
    OK(MPI_Comm_free_keyval(&k));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size(), x, res;

    /* dup: same ranks, separate matching context. */
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_rank(d, &x));
    CHECK(x == r);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, d, &res));
    CHECK(res == MPI_CONGRUENT);
    OK(MPI_Comm_compare(d, d, &res));
    CHECK(res == MPI_IDENT);
    if (n > 1) {
        int a = 1, b = 2, got;
        MPI_Request q;
        if (r == 0) {
            OK(MPI_Send(&a, 1, MPI_INT, 1, 0, MPI_COMM_WORLD));
            OK(MPI_Send(&b, 1, MPI_INT, 1, 0, d));
        } else if (r == 1) {
            /* The message on d cannot match a receive on the world. */
            OK(MPI_Irecv(&got, 1, MPI_INT, 0, 0, d, &q));
            OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
            CHECK(got == 2);
            OK(MPI_Recv(&got, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(got == 1);
        }
    }

    /* split into even and odd, ordered by descending rank. */
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, r % 2, -r, &half));
    int hs, hr;
    OK(MPI_Comm_size(half, &hs));
    OK(MPI_Comm_rank(half, &hr));
    CHECK(hs == (n + 1 - r % 2) / 2);
    CHECK(hr == (hs - 1) - r / 2);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, half, &res));
    CHECK(res == (n == 1 ? MPI_CONGRUENT : MPI_UNEQUAL));
    /* MPI_UNDEFINED takes no part. */
    MPI_Comm none;
    OK(MPI_Comm_split(MPI_COMM_WORLD, r == 0 ? MPI_UNDEFINED : 1, 0, &none));
    CHECK((r == 0) == (none == MPI_COMM_NULL));
    if (none != MPI_COMM_NULL) OK(MPI_Comm_free(&none));

    /* split_type SHARED: every rank of this host. */
    MPI_Comm node;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &node));
    OK(MPI_Comm_size(node, &x));
    CHECK(x >= 1 && x <= n);
    if (getenv("KT_ONE_HOST")) CHECK(x == n);
    int ones = 1, sum;
    OK(MPI_Allreduce(&ones, &sum, 1, MPI_INT, MPI_SUM, node));
    CHECK(sum == x);
    /* A split type this library does not know (another's own): no split. */
    MPI_Comm unknown;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, 12345, r, MPI_INFO_NULL, &unknown));
    CHECK(unknown == MPI_COMM_NULL);

    /* Groups. */
    MPI_Group wg, g1, g2, gu, gi, gd;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    OK(MPI_Group_size(wg, &x));
    CHECK(x == n);
    OK(MPI_Group_rank(wg, &x));
    CHECK(x == r);
    int evens[8], ne = 0;
    for (int i = 0; i < n; i += 2) evens[ne++] = i;
    OK(MPI_Group_incl(wg, ne, evens, &g1));
    OK(MPI_Group_excl(wg, ne, evens, &g2));
    OK(MPI_Group_size(g1, &x));
    CHECK(x == ne);
    OK(MPI_Group_size(g2, &x));
    CHECK(x == n - ne);
    OK(MPI_Group_union(g1, g2, &gu));
    OK(MPI_Group_size(gu, &x));
    CHECK(x == n);
    OK(MPI_Group_compare(gu, wg, &res));
    CHECK(res == (n <= 2 ? MPI_IDENT : MPI_SIMILAR));
    OK(MPI_Group_intersection(g1, wg, &gi));
    OK(MPI_Group_compare(gi, g1, &res));
    CHECK(res == MPI_IDENT);
    OK(MPI_Group_difference(wg, g1, &gd));
    OK(MPI_Group_compare(gd, g2, &res));
    CHECK(res == MPI_IDENT);
    OK(MPI_Group_rank(g1, &x));
    CHECK(x == (r % 2 == 0 ? r / 2 : MPI_UNDEFINED));
    int in[2] = {0, n - 1}, outr[2];
    OK(MPI_Group_translate_ranks(wg, 2, in, g1, outr));
    CHECK(outr[0] == 0);
    CHECK(outr[1] == ((n - 1) % 2 == 0 ? (n - 1) / 2 : MPI_UNDEFINED));

    /* Comm_create from the even group. */
    MPI_Comm ec;
    OK(MPI_Comm_create(MPI_COMM_WORLD, g1, &ec));
    CHECK((r % 2 == 0) == (ec != MPI_COMM_NULL));
    if (ec != MPI_COMM_NULL) {
        OK(MPI_Comm_rank(ec, &x));
        CHECK(x == r / 2);
        OK(MPI_Comm_free(&ec));
        CHECK(ec == MPI_COMM_NULL);
    }
    MPI_Group gs[6] = {wg, g1, g2, gu, gi, gd};
    for (int i = 0; i < 6; i++) OK(MPI_Group_free(&gs[i]));

    /* Names. */
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0);
    OK(MPI_Comm_set_name(d, "mine"));
    OK(MPI_Comm_get_name(d, name, &len));
    CHECK(strcmp(name, "mine") == 0 && len == 4);

    /* Predefined attributes. */
    int *v, flag;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *v >= 32767);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &v, &flag));
    CHECK(flag && *v == n);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &v, &flag));
    CHECK(flag && *v == MPI_PROC_NULL);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &v, &flag));
    CHECK(flag && *v == MPI_ANY_SOURCE);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag));
    CHECK(flag && (*v == 0 || *v == 1));

    /* User keyvals: copied on dup, deleted on free and on replacement. */
    int key, val1 = 1, val2 = 10;
    OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL));
    OK(MPI_Comm_set_attr(d, key, &val1));
    OK(MPI_Comm_get_attr(d, key, &v, &flag));
    CHECK(flag && v == &val1);
    MPI_Comm d2;
    OK(MPI_Comm_dup(d, &d2));
    CHECK(copied == 1);
    OK(MPI_Comm_get_attr(d2, key, &v, &flag));
    CHECK(flag && v == &val1);
    OK(MPI_Comm_set_attr(d2, key, &val2));   /* deletes val1's copy: +1 */
    CHECK(deleted == 1);
    OK(MPI_Comm_free(&d2));                  /* deletes val2: +10 */
    CHECK(deleted == 11);
    OK(MPI_Comm_delete_attr(d, key));        /* +1 */
    CHECK(deleted == 12);
    OK(MPI_Comm_get_attr(d, key, &v, &flag));
    CHECK(flag == 0);
    /* A null-copy keyval is not copied by dup. */
    int key2;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key2, NULL));
    OK(MPI_Comm_set_attr(d, key2, &val1));
    OK(MPI_Comm_dup(d, &d2));
    OK(MPI_Comm_get_attr(d2, key2, &v, &flag));
    CHECK(flag == 0);
    OK(MPI_Comm_free(&d2));
    OK(MPI_Comm_free_keyval(&key));
    OK(MPI_Comm_free_keyval(&key2));
    CHECK(key == MPI_KEYVAL_INVALID);

    int inter;
    OK(MPI_Comm_test_inter(d, &inter));
    CHECK(inter == 0);
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_free(&half));
    OK(MPI_Comm_free(&node));
    /* Rank ranges: (first, last, stride) triplets, strides either way. */
    {
    MPI_Group wg, ev, rest;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    /* Evens upward, then odds downward from the largest odd rank. */
    int last_odd = (n - 1) % 2 ? n - 1 : n - 2;
    int rg[2][3] = {{0, n - 1, 2}, {last_odd, 1, -2}};
    int nr = n > 1 ? 2 : 1, gs, gr;
    OK(MPI_Group_range_incl(wg, nr, rg, &ev));
    OK(MPI_Group_size(ev, &gs));
    CHECK(gs == n);
    OK(MPI_Group_rank(ev, &gr));
    CHECK(gr == (r % 2 == 0 ? r / 2 : (n + 1) / 2 + (last_odd - r) / 2));
    OK(MPI_Group_range_excl(wg, 1, rg, &rest));
    OK(MPI_Group_size(rest, &gs));
    CHECK(gs == n / 2);
    OK(MPI_Group_rank(rest, &gr));
    CHECK(gr == (r % 2 ? r / 2 : MPI_UNDEFINED));
    OK(MPI_Group_free(&ev));
    OK(MPI_Group_free(&rest));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int bad[1][3] = {{0, n - 1, 0}}, cls;
    int brc = MPI_Group_range_incl(wg, 1, bad, &ev);
    MPI_Error_class(brc, &cls);
    CHECK(cls == MPI_ERR_ARG);
    int out_of[1][3] = {{0, n, 1}};
    brc = MPI_Group_range_incl(wg, 1, out_of, &ev);
    MPI_Error_class(brc, &cls);
    CHECK(cls == MPI_ERR_RANK);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    OK(MPI_Group_free(&wg));
    }

    /* MPI_Comm_create_group: only the even ranks take part, listed in
     * reverse order, while the odd ones exchange messages among themselves
     * under the same tag. */
    {
        int ne = (n + 1) / 2, *ev = malloc(sizeof(int) * ne);
        CHECK(ev);
        for (int i = 0; i < ne; i++) ev[i] = 2 * (ne - 1 - i);
        MPI_Group wg, eg;
        OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        OK(MPI_Group_incl(wg, ne, ev, &eg));
        if (r % 2 == 0) {
            MPI_Comm cg;
            OK(MPI_Comm_create_group(MPI_COMM_WORLD, eg, 77, &cg));
            int cs, cr, sum;
            OK(MPI_Comm_size(cg, &cs));
            OK(MPI_Comm_rank(cg, &cr));
            CHECK(cs == ne && cr == ne - 1 - r / 2);
            OK(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, cg));
            CHECK(sum == ne * (ne - 1)); /* 0 + 2 + ... + 2(ne-1) */
            OK(MPI_Comm_free(&cg));
        } else {
            int no = n / 2, k = r / 2, tok = r, got = -1;
            OK(MPI_Sendrecv(&tok, 1, MPI_INT, 2 * ((k + 1) % no) + 1, 77, &got, 1, MPI_INT,
                            2 * ((k + no - 1) % no) + 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(got == 2 * ((k + no - 1) % no) + 1);
        }
        OK(MPI_Group_free(&eg));
        OK(MPI_Group_free(&wg));
        free(ev);
    }

    idup_checks();

    MPI_Comm self;
    OK(MPI_Comm_size(MPI_COMM_SELF, &x));
    CHECK(x == 1);
    OK(MPI_Comm_dup(MPI_COMM_SELF, &self));
    OK(MPI_Comm_rank(self, &x));
    CHECK(x == 0);
    OK(MPI_Comm_free(&self));
    /* MPI 4's hardware splits: guided by "mpi_shared_memory" is a split by
     * host; an unknown or missing resource type gives MPI_COMM_NULL; the
     * unguided split gives a host's group when that is smaller than the
     * whole (several hosts), naming the level in the info, else
     * MPI_COMM_NULL. */
    {
        MPI_Info hw;
        MPI_Comm g, sh;
        int gs, ss, hn, hf, whole;
        char val[64];
        OK(MPI_Info_create(&hw));
        OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, hw, &g));
        CHECK(g == MPI_COMM_NULL);
        OK(MPI_Info_set(hw, "mpi_hw_resource_type", "mpi_shared_memory"));
        OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, hw, &g));
        OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &sh));
        OK(MPI_Comm_size(g, &gs));
        OK(MPI_Comm_size(sh, &ss));
        CHECK(gs == ss);
        OK(MPI_Comm_free(&g));
        OK(MPI_Info_free(&hw));
        OK(MPI_Info_create(&hw));
        OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_UNGUIDED, r, hw, &g));
        whole = ss == n;
        if (whole) {
            CHECK(g == MPI_COMM_NULL);
        } else {
            OK(MPI_Comm_size(g, &gs));
            CHECK(g != MPI_COMM_NULL && gs == ss);
            OK(MPI_Info_get_valuelen(hw, "mpi_hw_resource_type", &hn, &hf));
            CHECK(hf);
            OK(MPI_Info_get_string(hw, "mpi_hw_resource_type", &(int){64}, val, &hf));
            CHECK(hf && strcmp(val, "mpi_shared_memory") == 0);
            OK(MPI_Comm_free(&g));
        }
        OK(MPI_Info_free(&hw));
        OK(MPI_Comm_free(&sh));
    }
    /* MPICH's MPIX_COMM_TYPE_NEIGHBORHOOD: the ranks that share the
     * directory named by "nbhd_common_dirname" (every rank here: the test
     * hosts share one file system); mismatched, missing or unknown hints
     * give MPI_COMM_NULL (regression: no hint of it was known). */
    {
        MPI_Info nb;
        MPI_Comm g;
        int gs, gr;
        OK(MPI_Info_create(&nb));
        OK(MPI_Info_set(nb, "nbhd_common_dirname", "."));
        OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_NEIGHBORHOOD, r, nb, &g));
        CHECK(g != MPI_COMM_NULL);
        OK(MPI_Comm_size(g, &gs));
        OK(MPI_Comm_rank(g, &gr));
        CHECK(gs == n && gr == r);
        OK(MPI_Comm_free(&g));
        OK(MPI_Info_set(nb, "nbhd_common_dirname", r == 0 ? "." : ".."));
        OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_NEIGHBORHOOD, 0, nb, &g));
        CHECK(n == 1 || g == MPI_COMM_NULL);
        if (g != MPI_COMM_NULL) OK(MPI_Comm_free(&g));
        OK(MPI_Info_delete(nb, "nbhd_common_dirname"));
        OK(MPI_Info_set(nb, "mpix_tooth_fairy", "enable"));
        OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_NEIGHBORHOOD, 0, nb, &g));
        CHECK(g == MPI_COMM_NULL);
        if (kt_on_kumi()) {
            /* A directory no rank has. */
            OK(MPI_Info_set(nb, "nbhd_common_dirname", "./no/such/directory"));
            OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_NEIGHBORHOOD, 0, nb, &g));
            CHECK(g == MPI_COMM_NULL);
        }
        OK(MPI_Info_free(&nb));
    }
    kt_pass("comm");
    MPI_Finalize();
    return 0;
}
