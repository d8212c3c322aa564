/* Concern: collectives, including MPI_IN_PLACE, v-variants, derived types and
 * user-defined operations. */
#include "kt.h"

static void absmax(void *in, void *inout, int *len, MPI_Datatype *t) {
    /* A user operation may ask MPI about its datatype: the library must not
     * hold its state through the reduction that calls it (a call made then
     * fails with MPI_ERR_INTERN, "called from inside a callback"). */
    int size = 0;
    if (MPI_Type_size(*t, &size) != MPI_SUCCESS || size != (int)sizeof(int)) {
        fprintf(stderr, "absmax: MPI_Type_size in the operation gave %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 9);
    }
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        int x = abs(a[i]) > abs(b[i]) ? a[i] : b[i];
        b[i] = x;
    }
}

/* Non-commutative: keeps the left operand's first element, sums the second. */
struct pair { int first; int sum; };
static void leftsum(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    struct pair *a = in, *b = inout;
    for (int i = 0; i < *len; i++) { b[i].first = a[i].first; b[i].sum += a[i].sum; }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Bcast, from the last rank, of ints and of a vector type. */
    int b[4] = {r, r, r, r};
    if (r == n - 1) for (int i = 0; i < 4; i++) b[i] = 40 + i;
    OK(MPI_Bcast(b, 4, MPI_INT, n - 1, MPI_COMM_WORLD));
    CHECK(b[0] == 40 && b[3] == 43);
    int m[3][2] = {{r, -1}, {r, -1}, {r, -1}};
    if (r == 0) for (int i = 0; i < 3; i++) m[i][0] = 7 * i;
    MPI_Datatype col;
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &col));
    OK(MPI_Type_commit(&col));
    OK(MPI_Bcast(m, 1, col, 0, MPI_COMM_WORLD));
    CHECK(m[2][0] == 14 && m[2][1] == -1);

    /* Reduce / Allreduce on several types, in place too. */
    double d = r + 0.5, dsum = 0;
    OK(MPI_Reduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    if (r == 0) CHECK(dsum == n * (n - 1) / 2.0 + 0.5 * n);
    long lmax;
    long lv = 100 - r;
    OK(MPI_Allreduce(&lv, &lmax, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD));
    CHECK(lmax == 100 - (n - 1));
    int v[3] = {r, 1, 1 << r};
    OK(MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(v[0] == n * (n - 1) / 2 && v[1] == n && v[2] == (1 << n) - 1);
    unsigned bits = 1u << r, bor;
    OK(MPI_Allreduce(&bits, &bor, 1, MPI_UNSIGNED, MPI_BOR, MPI_COMM_WORLD));
    CHECK(bor == (1u << n) - 1);
    float f = (float)r, fmax;
    OK(MPI_Allreduce(&f, &fmax, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD));
    CHECK(fmax == n - 1);
    int red = r + 1;
    OK(MPI_Reduce(r == 0 ? MPI_IN_PLACE : &red, r == 0 ? &red : NULL, 1, MPI_INT, MPI_PROD, 0,
                  MPI_COMM_WORLD));
    if (r == 0) {
        int fact = 1;
        for (int i = 1; i <= n; i++) fact *= i;
        CHECK(red == fact);
    }
    /* MAXLOC on MPI_2INT. */
    int pr[2] = {(r * 7) % 5, r}, best[2];
    OK(MPI_Allreduce(pr, best, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
    int want = -1, wi = -1;
    for (int i = 0; i < n; i++) if ((i * 7) % 5 > want) { want = (i * 7) % 5; wi = i; }
    CHECK(best[0] == want && best[1] == wi);

    /* User operations: commutative on ints, non-commutative on a struct type. */
    MPI_Op op, op2;
    OK(MPI_Op_create(absmax, 1, &op));
    int sv = (r % 2 ? -1 : 1) * r, am;
    OK(MPI_Allreduce(&sv, &am, 1, MPI_INT, op, MPI_COMM_WORLD));
    CHECK(abs(am) == n - 1);
    int commute;
    OK(MPI_Op_commutative(op, &commute));
    CHECK(commute == 1);
    OK(MPI_Op_commutative(MPI_REPLACE, &commute));
    OK(MPI_Op_commutative(MPI_NO_OP, &commute));
    MPI_Datatype pt;
    OK(MPI_Type_contiguous(2, MPI_INT, &pt));
    OK(MPI_Type_commit(&pt));
    OK(MPI_Op_create(leftsum, 0, &op2));
    struct pair pv = {r + 10, r}, pres;
    OK(MPI_Allreduce(&pv, &pres, 1, pt, op2, MPI_COMM_WORLD));
    CHECK(pres.first == 10 && pres.sum == n * (n - 1) / 2);
    OK(MPI_Op_free(&op));
    OK(MPI_Op_free(&op2));
    CHECK(op == MPI_OP_NULL);

    /* Scan / Exscan. */
    int s = r + 1, sc, ex = -7;
    OK(MPI_Scan(&s, &sc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sc == (r + 1) * (r + 2) / 2);
    OK(MPI_Exscan(&s, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (r > 0) CHECK(ex == r * (r + 1) / 2);

    /* Long scans (beyond the eager size), out of place and in place, and
     * with the non-commutative leftsum: every prefix keeps rank 0's first
     * field. Rank 0's exscan buffer is left alone. */
    {
        enum { L = 40009 };
        struct pair *a = malloc(L * sizeof *a), *b = malloc(L * sizeof *b);
        MPI_Datatype pt;
        OK(MPI_Type_contiguous(2, MPI_INT, &pt));
        OK(MPI_Type_commit(&pt));
        MPI_Op lo;
        OK(MPI_Op_create(leftsum, 0, &lo));
        for (int k = 0; k < L; k++) {
            a[k] = (struct pair){r * 100 + k % 7, r + k % 5};
            b[k] = (struct pair){-7, -7};
        }
        OK(MPI_Scan(a, b, L, pt, lo, MPI_COMM_WORLD));
        int bad = 0;
        for (int k = 0; k < L; k++)
            bad += b[k].first != k % 7 || b[k].sum != r * (r + 1) / 2 + (r + 1) * (k % 5);
        CHECK(bad == 0);
        for (int k = 0; k < L; k++) b[k] = (struct pair){-7, -7};
        OK(MPI_Exscan(a, b, L, pt, lo, MPI_COMM_WORLD));
        for (int k = 0; k < L; k++)
            bad += r == 0 ? b[k].first != -7 || b[k].sum != -7
                          : b[k].first != k % 7 || b[k].sum != r * (r - 1) / 2 + r * (k % 5);
        CHECK(bad == 0);
        int *x = malloc(L * sizeof(int));
        for (int k = 0; k < L; k++) x[k] = r + k;
        OK(MPI_Exscan(MPI_IN_PLACE, x, L, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int k = 0; k < L; k++) bad += x[k] != (r == 0 ? k : r * (r - 1) / 2 + r * k);
        CHECK(bad == 0);
        for (int k = 0; k < L; k++) x[k] = r + k;
        OK(MPI_Scan(MPI_IN_PLACE, x, L, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int k = 0; k < L; k++) bad += x[k] != r * (r + 1) / 2 + (r + 1) * k;
        CHECK(bad == 0);
        OK(MPI_Op_free(&lo));
        OK(MPI_Type_free(&pt));
        free(a); free(b); free(x);
    }

    /* Gather / Scatter (and in place at the root). */
    int *all = malloc(n * 2 * sizeof(int));
    int two[2] = {r, -r};
    OK(MPI_Gather(two, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD));
    if (r == 0) for (int i = 0; i < n; i++) CHECK(all[2 * i] == i && all[2 * i + 1] == -i);
    if (r == 0) for (int i = 0; i < 2 * n; i++) all[i] = 3 * i;
    int got[2];
    OK(MPI_Scatter(all, 2, MPI_INT, got, 2, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(got[0] == 6 * r && got[1] == 6 * r + 3);
    OK(MPI_Scatter(all, 2, MPI_INT, r == 0 ? MPI_IN_PLACE : got, 2, MPI_INT, 0, MPI_COMM_WORLD));
    if (r == 0) {
        all[0] = 99; all[1] = 98;
    }
    OK(MPI_Gather(r == 0 ? MPI_IN_PLACE : two, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD));
    if (r == 0) CHECK(all[0] == 99 && (n < 2 || all[2] == 1));

    /* Gatherv / Scatterv with displacements (reversed blocks, gaps). */
    int *cnt = malloc(n * sizeof(int)), *dsp = malloc(n * sizeof(int));
    int tot = 0;
    for (int i = 0; i < n; i++) cnt[i] = i + 1;
    for (int i = n - 1; i >= 0; i--) { dsp[i] = tot; tot += cnt[i] + 1; }
    int *vbuf = calloc(tot, sizeof(int));
    int *mine = malloc((r + 1) * sizeof(int));
    for (int i = 0; i <= r; i++) mine[i] = 100 * r + i;
    OK(MPI_Gatherv(mine, r + 1, MPI_INT, vbuf, cnt, dsp, MPI_INT, n - 1, MPI_COMM_WORLD));
    if (r == n - 1)
        for (int i = 0; i < n; i++) CHECK(vbuf[dsp[i]] == 100 * i && vbuf[dsp[i] + i] == 100 * i + i);
    int *back = malloc((r + 1) * sizeof(int));
    OK(MPI_Scatterv(vbuf, cnt, dsp, MPI_INT, back, r + 1, MPI_INT, n - 1, MPI_COMM_WORLD));
    CHECK(back[r] == 100 * r + r);

    /* Allgather (in place too) and Allgatherv. */
    int *ag = malloc(n * sizeof(int));
    int me = r * r;
    OK(MPI_Allgather(&me, 1, MPI_INT, ag, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(ag[i] == i * i);
    for (int i = 0; i < n; i++) ag[i] = (i == r) ? -r : 0;
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(ag[i] == -i);
    memset(vbuf, 0, tot * sizeof(int));
    OK(MPI_Allgatherv(mine, r + 1, MPI_INT, vbuf, cnt, dsp, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(vbuf[dsp[i] + i] == 100 * i + i);
    /* Displacements may be negative (measured from a buffer address past
     * the blocks). Regression: they were refused as negative counts. */
    int *neg = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) neg[i] = dsp[i] - tot;
    memset(vbuf, 0, tot * sizeof(int));
    OK(MPI_Allgatherv(mine, r + 1, MPI_INT, vbuf + tot, cnt, neg, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(vbuf[dsp[i] + i] == 100 * i + i);
    free(neg);

    /* Alltoall / Alltoallv. */
    int *sa = malloc(n * sizeof(int)), *ra = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) sa[i] = 1000 * r + i;
    OK(MPI_Alltoall(sa, 1, MPI_INT, ra, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(ra[i] == 1000 * i + r);
    int *sc2 = malloc(n * sizeof(int)), *sd2 = malloc(n * sizeof(int));
    int *rc2 = malloc(n * sizeof(int)), *rd2 = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) { sc2[i] = 1; sd2[i] = n - 1 - i; rc2[i] = 1; rd2[i] = i; }
    OK(MPI_Alltoallv(sa, sc2, sd2, MPI_INT, ra, rc2, rd2, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(ra[i] == 1000 * i + (n - 1 - r));

    /* Alltoallv of large, uneven blocks (rendezvous and split copies), each
       buffer laid out in reverse rank order. */
    {
        int *bc = malloc(n * sizeof(int)), *bd = malloc(n * sizeof(int));
        int *cc = malloc(n * sizeof(int)), *cd = malloc(n * sizeof(int));
        int st = 0, rt = 0;
        for (int j = n - 1; j >= 0; j--) {
            bc[j] = 30000 + 1000 * r + 10 * j; bd[j] = st; st += bc[j];
            cc[j] = 30000 + 1000 * j + 10 * r; cd[j] = rt; rt += cc[j];
        }
        int *bs = malloc(st * sizeof(int)), *br = malloc(rt * sizeof(int));
        for (int j = 0; j < n; j++)
            for (int k = 0; k < bc[j]; k++) bs[bd[j] + k] = r * 1000003 + j * 1009 + k;
        OK(MPI_Alltoallv(bs, bc, bd, MPI_INT, br, cc, cd, MPI_INT, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++)
            for (int k = 0; k < cc[i]; k += 997)
                CHECK(br[cd[i] + k] == i * 1000003 + r * 1009 + k);
        for (int i = 0; i < n; i++) CHECK(br[cd[i] + cc[i] - 1] == i * 1000003 + r * 1009 + cc[i] - 1);
        free(bc); free(bd); free(cc); free(cd); free(bs); free(br);
    }

    /* Gatherv and Scatterv of large, uneven blocks laid out in reverse, at
       the last rank as root, then in place. */
    {
        int root = n - 1, *gc = malloc(n * sizeof(int)), *gd = malloc(n * sizeof(int)), tot = 0;
        for (int i = n - 1; i >= 0; i--) { gc[i] = 20000 + 3000 * i; gd[i] = tot; tot += gc[i]; }
        int *mine = malloc(gc[r] * sizeof(int)), *all = malloc(tot * sizeof(int));
        for (int k = 0; k < gc[r]; k++) mine[k] = r * 1000003 + k;
        OK(MPI_Gatherv(mine, gc[r], MPI_INT, all, gc, gd, MPI_INT, root, MPI_COMM_WORLD));
        if (r == root)
            for (int i = 0; i < n; i++) {
                CHECK(all[gd[i]] == i * 1000003 && all[gd[i] + gc[i] - 1] == i * 1000003 + gc[i] - 1);
            }
        if (r == root)
            for (int i = 0; i < tot; i++) all[i] = -all[i];
        for (int k = 0; k < gc[r]; k++) mine[k] = 0;
        OK(MPI_Scatterv(all, gc, gd, MPI_INT, mine, gc[r], MPI_INT, root, MPI_COMM_WORLD));
        CHECK(mine[0] == -(r * 1000003) && mine[gc[r] - 1] == -(r * 1000003 + gc[r] - 1));
        if (r == root) {
            OK(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, gc, gd, MPI_INT, root, MPI_COMM_WORLD));
            CHECK(all[gd[root]] == -(root * 1000003));
            OK(MPI_Scatterv(all, gc, gd, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
            CHECK(all[gd[root]] == -(root * 1000003));
        } else {
            OK(MPI_Gatherv(mine, gc[r], MPI_INT, NULL, NULL, NULL, MPI_INT, root, MPI_COMM_WORLD));
            OK(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, mine, gc[r], MPI_INT, root, MPI_COMM_WORLD));
        }
        if (r == root) CHECK(all[gd[0]] == -0 && all[gd[0] + 1] == -1);
        free(gc); free(gd); free(mine); free(all);
    }

    /* Gatherv and Scatterv whose blocks take every path at once inside one
       host: a few bytes (the collective area's control line), kilobytes (its
       payload), more than a payload (messages) and none, one element of gap
       after each block, the root in place. */
    for (int root = 0; root < n; root += (n > 2 ? n - 1 : 1)) {
        int sizes[4] = {2, 3000, 40000, 0};
        int *gc = malloc(n * sizeof(int)), *gd = malloc(n * sizeof(int)), tot = 0;
        for (int i = 0; i < n; i++) { gc[i] = sizes[(i + root) % 4]; gd[i] = tot; tot += gc[i] + 1; }
        int *mine = malloc((gc[r] + 1) * sizeof(int)), *all = malloc(tot * sizeof(int));
        for (int k = 0; k < gc[r]; k++) mine[k] = r * 1000003 + k;
        for (int i = 0; i < tot; i++) all[i] = -7;
        if (r == root) memcpy(all + gd[r], mine, gc[r] * sizeof(int));
        OK(MPI_Gatherv(r == root ? MPI_IN_PLACE : mine, gc[r], MPI_INT, all, gc, gd, MPI_INT, root, MPI_COMM_WORLD));
        if (r == root)
            for (int i = 0; i < n; i++) {
                for (int k = 0; k < gc[i]; k++) CHECK(all[gd[i] + k] == i * 1000003 + k);
                CHECK(all[gd[i] + gc[i]] == -7);
            }
        if (r == root)
            for (int i = 0; i < n; i++)
                for (int k = 0; k < gc[i]; k++) all[gd[i] + k] = ~all[gd[i] + k];
        for (int k = 0; k <= gc[r]; k++) mine[k] = -9;
        OK(MPI_Scatterv(all, gc, gd, MPI_INT, r == root ? MPI_IN_PLACE : mine, gc[r], MPI_INT, root, MPI_COMM_WORLD));
        if (r != root) {
            for (int k = 0; k < gc[r]; k++) CHECK(mine[k] == ~(r * 1000003 + k));
            CHECK(mine[gc[r]] == -9);
        }
        free(gc); free(gd); free(mine); free(all);
    }

    /* Allgatherv of large, uneven blocks laid out in reverse, then in place. */
    {
        int *ac = malloc(n * sizeof(int)), *ad = malloc(n * sizeof(int)), tot = 0;
        for (int i = n - 1; i >= 0; i--) { ac[i] = 25000 + 2000 * i; ad[i] = tot; tot += ac[i]; }
        int *mine = malloc(ac[r] * sizeof(int)), *all = malloc(tot * sizeof(int));
        for (int k = 0; k < ac[r]; k++) mine[k] = r * 1000003 + k;
        OK(MPI_Allgatherv(mine, ac[r], MPI_INT, all, ac, ad, MPI_INT, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++)
            CHECK(all[ad[i]] == i * 1000003 && all[ad[i] + ac[i] - 1] == i * 1000003 + ac[i] - 1);
        for (int i = 0; i < tot; i++) all[i] = 0;
        for (int k = 0; k < ac[r]; k++) all[ad[r] + k] = -(r * 1000003 + k);
        OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, ac, ad, MPI_INT, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++)
            CHECK(all[ad[i] + 7] == -(i * 1000003 + 7) && all[ad[i] + ac[i] - 1] == -(i * 1000003 + ac[i] - 1));
        free(ac); free(ad); free(mine); free(all);
    }

    /* Reduce_scatter_block / Reduce_scatter. */
    int *rs = malloc(2 * n * sizeof(int)), rsb[2];
    for (int i = 0; i < 2 * n; i++) rs[i] = i;
    OK(MPI_Reduce_scatter_block(rs, rsb, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(rsb[0] == 2 * r * n && rsb[1] == (2 * r + 1) * n);
    int *rcs = malloc(n * sizeof(int)), base = 0;
    for (int i = 0; i < n; i++) rcs[i] = i == 0 ? 2 * n - (n - 1) : 1;
    for (int i = 0; i < r; i++) base += rcs[i];
    int rout[2 * 8];
    OK(MPI_Reduce_scatter(rs, rout, rcs, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(rout[0] == base * n);

    /* Reduce_scatter of long, uneven blocks straight from the program's
       buffers (inside one host by single copy out of the others'), a sum and
       a maximum, then in place. */
    {
        int *lc = malloc(n * sizeof(int)), tot = 0, at = 0;
        for (int i = 0; i < n; i++) { lc[i] = 40000 + 1000 * (i % 3); tot += lc[i]; }
        for (int i = 0; i < r; i++) at += lc[i];
        int *in = malloc(tot * sizeof(int)), *out = malloc(lc[r] * sizeof(int));
        for (int k = 0; k < tot; k++) in[k] = (r + 1) * (k % 1000);
        OK(MPI_Reduce_scatter(in, out, lc, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int k = 0; k < lc[r]; k++) CHECK(out[k] == n * (n + 1) / 2 * ((at + k) % 1000));
        OK(MPI_Reduce_scatter(in, out, lc, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        for (int k = 0; k < lc[r]; k++) CHECK(out[k] == n * ((at + k) % 1000));
        OK(MPI_Reduce_scatter(MPI_IN_PLACE, in, lc, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int k = 0; k < lc[r]; k++) CHECK(in[k] == n * (n + 1) / 2 * ((at + k) % 1000));
        free(lc); free(in); free(out);
    }

    /* On a split communicator. */
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half));
    int hs, one = 1;
    OK(MPI_Allreduce(&one, &hs, 1, MPI_INT, MPI_SUM, half));
    CHECK(hs == (n + 1 - r % 2) / 2);
    OK(MPI_Comm_free(&half));

    /* MPI_Alltoallw: a type per peer, byte displacements. To rank j: two
     * ints as 2 x MPI_INT when j is even, as 1 x "pair" when odd; from rank i
     * the other way round (the signatures match: two ints either way). */
    {
        MPI_Datatype two;
        OK(MPI_Type_contiguous(2, MPI_INT, &two));
        OK(MPI_Type_commit(&two));
        int *wsc = malloc(sizeof(int) * n), *wsd = malloc(sizeof(int) * n), *wrc = malloc(sizeof(int) * n);
        int *wrd = malloc(sizeof(int) * n);
        MPI_Datatype *wst = malloc(sizeof(MPI_Datatype) * n), *wrt = malloc(sizeof(MPI_Datatype) * n);
        int *wout = malloc(sizeof(int) * 4 * n), *win = malloc(sizeof(int) * 4 * n);
        CHECK(wsc && wsd && wrc && wrd && wst && wrt && wout && win);
        for (int j = 0; j < n; j++) {
            wsc[j] = j % 2 ? 1 : 2;
            wst[j] = j % 2 ? two : MPI_INT;
            wsd[j] = 16 * j; /* bytes: 4 ints per peer, 2 used */
            wrc[j] = j % 2 ? 2 : 1;
            wrt[j] = j % 2 ? MPI_INT : two;
            wrd[j] = 16 * (n - 1 - j); /* reversed placement */
            wout[4 * j] = r * 100 + j;
            wout[4 * j + 1] = -r;
        }
        for (int i = 0; i < 4 * n; i++) win[i] = -7;
        OK(MPI_Alltoallw(wout, wsc, wsd, wst, win, wrc, wrd, wrt, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            int *b = win + 4 * (n - 1 - i);
            CHECK(b[0] == i * 100 + r && b[1] == -i && b[2] == -7);
        }
        /* Again with a strided send type (every other int of four) to every
         * peer, received as 2 x MPI_INT: the packed way. */
        MPI_Datatype every2;
        OK(MPI_Type_vector(2, 1, 2, MPI_INT, &every2));
        OK(MPI_Type_commit(&every2));
        for (int j = 0; j < n; j++) {
            wsc[j] = 1;
            wst[j] = every2;
            wrc[j] = 2;
            wrt[j] = MPI_INT;
            wout[4 * j] = r * 100 + j;
            wout[4 * j + 1] = -9; /* skipped by the stride */
            wout[4 * j + 2] = -r;
        }
        for (int i = 0; i < 4 * n; i++) win[i] = -7;
        OK(MPI_Alltoallw(wout, wsc, wsd, wst, win, wrc, wrd, wrt, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            int *b = win + 4 * (n - 1 - i);
            CHECK(b[0] == i * 100 + r && b[1] == -i && b[2] == -7);
        }
        OK(MPI_Type_free(&every2));
        free(wsc); free(wsd); free(wrc); free(wrd); free(wst); free(wrt); free(wout); free(win);
        OK(MPI_Type_free(&two));
    }

    /* MPI_Reduce_local: inout = in op inout, no communication; with a
     * built-in and a non-commutative user operation (in is the left operand). */
    int lin[3] = {1, -7, 3}, linout[3] = {10, 20, -30};
    OK(MPI_Reduce_local(lin, linout, 3, MPI_INT, MPI_SUM));
    CHECK(linout[0] == 11 && linout[1] == 13 && linout[2] == -27);
    OK(MPI_Reduce_local(lin, linout, 3, MPI_INT, MPI_MIN));
    CHECK(linout[0] == 1 && linout[1] == -7 && linout[2] == -27);
    MPI_Op lsop;
    OK(MPI_Op_create(leftsum, 0, &lsop));
    struct pair pin = {5, 1}, pio = {9, 2};
    OK(MPI_Reduce_local(&pin, &pio, 1, pt, lsop));
    CHECK(pio.first == 5 && pio.sum == 3);
    OK(MPI_Op_free(&lsop));

    /* Long reduces (beyond the collective area: single copy inside a host),
     * at the last rank, from separate buffers and in place; the others'
     * buffers unchanged. */
    {
        const int nl = 1 << 17; /* 1 MiB of doubles */
        double *ls = malloc(sizeof(double) * nl), *lr = malloc(sizeof(double) * nl);
        CHECK(ls && lr);
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < nl; i++) ls[i] = lr[i] = r + (i % 5);
            int root = n - 1, here = r == root;
            if (k == 0) OK(MPI_Reduce(ls, here ? lr : NULL, nl, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD));
            else OK(MPI_Reduce(here ? MPI_IN_PLACE : ls, here ? ls : NULL, nl, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD));
            double *res = k == 0 ? lr : ls;
            for (int i = 0; i < nl; i += 1009)
                if (here) CHECK(res[i] == (double)n * (n - 1) / 2 + (double)n * (i % 5));
                else CHECK(ls[i] == r + (i % 5));
        }
        free(ls);
        free(lr);
    }

    /* Layouts that differ between ranks: the root gathers (in place) and
     * scatters with a contiguous type, the others with a strided one of
     * the same signature, blocking and nonblocking. Regression: the two
     * layouts took different algorithms (linear over segments at the root,
     * a binomial tree of packed bytes elsewhere), which deadlocked wherever
     * the collective area was not used (KUMI_COLL_SHM=off, several hosts).
     */
    {
        MPI_Datatype vec;
        OK(MPI_Type_vector(6, 1, 3, MPI_DOUBLE, &vec));
        OK(MPI_Type_commit(&vec));
        double strided[18], *flat = malloc(sizeof(double) * 6 * n);
        CHECK(flat != NULL);
        for (int root = 0; root < n; root++) {
            for (int k = 0; k < 2; k++) {
                for (int i = 0; i < 18; i++) strided[i] = i % 3 ? -1 : 10 * r + i / 3;
                for (int i = 0; i < 6 * n; i++) flat[i] = i / 6 == r ? 10 * r + i % 6 : -2;
                MPI_Request q = MPI_REQUEST_NULL;
                if (r == root && k == 0)
                    OK(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, flat, 6, MPI_DOUBLE, root, MPI_COMM_WORLD));
                else if (r == root)
                    OK(MPI_Igather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, flat, 6, MPI_DOUBLE, root, MPI_COMM_WORLD, &q));
                else if (k == 0)
                    OK(MPI_Gather(strided, 1, vec, NULL, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
                else
                    OK(MPI_Igather(strided, 1, vec, NULL, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD, &q));
                OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
                if (r == root)
                    for (int i = 0; i < 6 * n; i++) CHECK(flat[i] == 10 * (i / 6) + i % 6);
                /* And back: block i to rank i, negated. */
                for (int i = 0; i < 6 * n; i++) flat[i] = -flat[i];
                for (int i = 0; i < 18; i++) strided[i] = -1;
                if (r == root && k == 0)
                    OK(MPI_Scatter(flat, 6, MPI_DOUBLE, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
                else if (r == root)
                    OK(MPI_Iscatter(flat, 6, MPI_DOUBLE, strided, 1, vec, root, MPI_COMM_WORLD, &q));
                else if (k == 0)
                    OK(MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, strided, 1, vec, root, MPI_COMM_WORLD));
                else
                    OK(MPI_Iscatter(NULL, 0, MPI_DATATYPE_NULL, strided, 1, vec, root, MPI_COMM_WORLD, &q));
                OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
                if (r != root || k == 1)
                    for (int i = 0; i < 18; i++) CHECK(strided[i] == (i % 3 ? -1 : -(10 * r + i / 3)));
            }
        }
        free(flat);
        OK(MPI_Type_free(&vec));
    }

    MPI_Type_free(&col);
    MPI_Type_free(&pt);
    free(all); free(cnt); free(dsp); free(vbuf); free(mine); free(back); free(ag);
    free(sa); free(ra); free(sc2); free(sd2); free(rc2); free(rd2); free(rs); free(rcs);
    kt_pass("coll");
    MPI_Finalize();
    return 0;
}
