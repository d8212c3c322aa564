/* Built-in reductions on every kind of predefined type the standard defines
 * them on, beyond the plain C numbers (coll.c): the value-index pairs with
 * MPI_MINLOC/MPI_MAXLOC (ties go to the smaller index), C's complex types
 * with MPI_SUM/MPI_PROD, long double (computed in long double: a sum that a
 * double would round is exact), and the Fortran-named types used from C;
 * through MPI_Allreduce, MPI_Reduce, MPI_Scan, MPI_Exscan, MPI_Iallreduce
 * and MPI_Reduce_local, and the same types in one-sided accumulates
 * (MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op); and derived
 * types with the program's operations, of any extent, padded or with gaps
 * (whose bytes in the receive buffer stay as they were). A combination the
 * standard does not define (MPI_MAX on a complex type, MPI_SUM on a pair or
 * on a derived type) is an MPI_ERR_OP error. */
#include "kt.h"
#include <complex.h>
#include <stdbool.h>
#include <stddef.h>

struct dbl_int { double v; int i; };
struct flt_int { float v; int i; };
struct lng_int { long v; int i; };
struct sht_int { short v; int i; };
struct ldb_int { long double v; int i; };

/* The value rank `r` contributes to element `k` of a pair reduction: ties
 * between ranks on purpose (mod 3). */
static int pv(int r, int k) { return ((r + k) * 7) % 3 - k; }

/* MPI's MINLOC/MAXLOC over ranks 0..n-1 of pv(., k): the best value, and the
 * smallest rank holding it. */
static void best(int n, int k, int max, int *v, int *at) {
    *v = pv(0, k);
    *at = 0;
    for (int q = 1; q < n; q++) {
        int x = pv(q, k);
        if (max ? x > *v : x < *v) { *v = x; *at = q; }
    }
}

#define K 3

/* Allreduce, reduce to the last rank, and inclusive scan of one pair type,
 * checked element by element against `best`. */
#define CHECK_PAIRS(T, DT)                                                        \
    do {                                                                          \
        for (int max = 0; max < 2; max++) {                                       \
            MPI_Op op = max ? MPI_MAXLOC : MPI_MINLOC;                            \
            T in[K], out[K];                                                      \
            for (int k = 0; k < K; k++) { in[k].v = pv(r, k); in[k].i = r; }      \
            OK(MPI_Allreduce(in, out, K, DT, op, MPI_COMM_WORLD));                \
            for (int k = 0; k < K; k++) {                                         \
                int v, at; best(n, k, max, &v, &at);                              \
                CHECK(out[k].v == v && out[k].i == at);                           \
            }                                                                     \
            OK(MPI_Reduce(in, out, K, DT, op, n - 1, MPI_COMM_WORLD));            \
            if (r == n - 1)                                                       \
                for (int k = 0; k < K; k++) {                                     \
                    int v, at; best(n, k, max, &v, &at);                          \
                    CHECK(out[k].v == v && out[k].i == at);                       \
                }                                                                 \
            OK(MPI_Scan(in, out, K, DT, op, MPI_COMM_WORLD));                     \
            for (int k = 0; k < K; k++) {                                         \
                int v, at; best(r + 1, k, max, &v, &at);                          \
                CHECK(out[k].v == v && out[k].i == at);                           \
            }                                                                     \
        }                                                                         \
    } while (0)

/* Sum and product of (r+1) + (r%2) i over all ranks, computed serially:
 * Gaussian integers small enough to be exact in every precision, so any
 * order of combination gives the same bits. */
#define CHECK_COMPLEX(T, DT)                                                      \
    do {                                                                          \
        T z = (T)(r + 1) + (T)(r % 2) * I, s, p, ws = 0, wp = 1;                  \
        for (int q = 0; q < n; q++) {                                             \
            T x = (T)(q + 1) + (T)(q % 2) * I;                                    \
            ws += x;                                                              \
            wp *= x;                                                              \
        }                                                                         \
        OK(MPI_Allreduce(&z, &s, 1, DT, MPI_SUM, MPI_COMM_WORLD));                \
        CHECK(s == ws);                                                           \
        OK(MPI_Allreduce(&z, &p, 1, DT, MPI_PROD, MPI_COMM_WORLD));               \
        CHECK(p == wp);                                                           \
        T e = 0, wx = 0;                                                          \
        for (int q = 0; q < r; q++) wx += (T)(q + 1) + (T)(q % 2) * I;            \
        OK(MPI_Exscan(&z, &e, 1, DT, MPI_SUM, MPI_COMM_WORLD));                   \
        if (r > 0) CHECK(e == wx);                                                \
        OK(MPI_Reduce(r == 0 ? MPI_IN_PLACE : &z, r == 0 ? &z : NULL, 1, DT,      \
                      MPI_PROD, 0, MPI_COMM_WORLD));                              \
        if (r == 0) CHECK(z == wp);                                               \
    } while (0)

/* The program's operations: the larger value (smaller index on ties) of
 * a padded struct; a sum of 6-double blocks (48 bytes); 3x3 matrix
 * products in rank order (72 bytes, not commutative); a sum over a type
 * with gaps, touching only its data. */
static void vi_max(void *in, void *inout, int *len, MPI_Datatype *dt) {
    struct dbl_int *a = in, *b = inout;
    (void)dt;
    for (int k = 0; k < *len; k++)
        if (a[k].v > b[k].v || (a[k].v == b[k].v && a[k].i < b[k].i)) b[k] = a[k];
}
static void six_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    double *a = in, *b = inout;
    (void)dt;
    for (int k = 0; k < 6 * *len; k++) b[k] += a[k];
}
static void mat3(void *in, void *inout, int *len, MPI_Datatype *dt) {
    double *a = in, *b = inout;
    (void)dt;
    for (int k = 0; k < *len; k++, a += 9, b += 9) {
        double c[9];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                c[3 * i + j] = a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j];
        memcpy(b, c, sizeof c);
    }
}
static void gap_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    double *a = in, *b = inout;
    (void)dt;
    /* vector(2, 1, 2, MPI_DOUBLE): doubles 0 and 2 of every 3. */
    for (int k = 0; k < *len; k++) {
        b[3 * k] += a[3 * k];
        b[3 * k + 2] += a[3 * k + 2];
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();

    CHECK_PAIRS(struct dbl_int, MPI_DOUBLE_INT);
    CHECK_PAIRS(struct flt_int, MPI_FLOAT_INT);
    CHECK_PAIRS(struct lng_int, MPI_LONG_INT);
    CHECK_PAIRS(struct sht_int, MPI_SHORT_INT);
    CHECK_PAIRS(struct ldb_int, MPI_LONG_DOUBLE_INT);

    /* A nonblocking MAXLOC, and MPI_Reduce_local (in ⊕ inout). */
    struct dbl_int a = {(double)(r % 2), r}, b;
    MPI_Request req;
    OK(MPI_Iallreduce(&a, &b, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(b.v == (n > 1 ? 1.0 : 0.0) && b.i == (n > 1 ? 1 : 0));
    struct dbl_int x[2] = {{2.0, 7}, {-1.0, 3}}, y[2] = {{2.0, 4}, {-5.0, 9}};
    OK(MPI_Reduce_local(x, y, 2, MPI_DOUBLE_INT, MPI_MINLOC));
    CHECK(y[0].v == 2.0 && y[0].i == 4 && y[1].v == -5.0 && y[1].i == 9);

    CHECK_COMPLEX(float _Complex, MPI_C_FLOAT_COMPLEX);
    CHECK_COMPLEX(double _Complex, MPI_C_DOUBLE_COMPLEX);
    CHECK_COMPLEX(long double _Complex, MPI_C_LONG_DOUBLE_COMPLEX);
    CHECK_COMPLEX(float _Complex, MPI_COMPLEX);
    CHECK_COMPLEX(double _Complex, MPI_DOUBLE_COMPLEX);
    CHECK_COMPLEX(double _Complex, MPI_CXX_DOUBLE_COMPLEX);

    /* Long double, in long double: 2^60 + (n - 1) needs 61 significant bits
     * (a double has 53). */
    long double big = r == 0 ? 1152921504606846976.0L : 1.0L, sum, mx, mn, pr;
    OK(MPI_Allreduce(&big, &sum, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum - 1152921504606846976.0L == (long double)(n - 1));
    long double mine = (long double)r / 3.0L;
    OK(MPI_Allreduce(&mine, &mx, 1, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK(mx == (long double)(n - 1) / 3.0L);
    OK(MPI_Allreduce(&mine, &mn, 1, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    CHECK(mn == 0.0L);
    long double f = r + 1, fact = 1;
    for (int q = 1; q <= n; q++) fact *= q;
    OK(MPI_Allreduce(&f, &pr, 1, MPI_LONG_DOUBLE, MPI_PROD, MPI_COMM_WORLD));
    CHECK(pr == fact);

    /* Fortran-named types from C, by their sizes. */
    int fi = r + 1, fs, lg = r != 1, land, lor;
    OK(MPI_Allreduce(&fi, &fs, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD));
    CHECK(fs == n * (n + 1) / 2);
    OK(MPI_Allreduce(&lg, &land, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD));
    OK(MPI_Allreduce(&lg, &lor, 1, MPI_LOGICAL, MPI_LOR, MPI_COMM_WORLD));
    CHECK(land == (n < 2) && lor == 1);
    signed char i1 = (signed char)(r + 1), i1m;
    OK(MPI_Allreduce(&i1, &i1m, 1, MPI_INTEGER1, MPI_MAX, MPI_COMM_WORLD));
    CHECK(i1m == n);
    short i2 = (short)-r, i2m;
    OK(MPI_Allreduce(&i2, &i2m, 1, MPI_INTEGER2, MPI_MIN, MPI_COMM_WORLD));
    CHECK(i2m == -(n - 1));
    bool bl = r == n - 1, bo;
    OK(MPI_Allreduce(&bl, &bo, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD));
    CHECK(bo);

    /* One-sided: every rank accumulates into rank 0's window. */
    struct acc {
        struct dbl_int best[K];
        double _Complex z;
        long double ld;
        int count;
        struct sht_int low;
    } *wb;
    MPI_Win win;
    OK(MPI_Win_allocate(sizeof *wb, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wb, &win));
    memset(wb, 0, sizeof *wb);
    for (int k = 0; k < K; k++) { wb->best[k].v = -1e9; wb->best[k].i = -1; }
    wb->low.v = 32767;
    wb->low.i = -1;
    OK(MPI_Win_fence(0, win));
    struct dbl_int mine2[K];
    for (int k = 0; k < K; k++) { mine2[k].v = pv(r, k); mine2[k].i = r; }
    OK(MPI_Accumulate(mine2, K, MPI_DOUBLE_INT, 0, 0, K, MPI_DOUBLE_INT, MPI_MAXLOC, win));
    double _Complex zc = (double)(r + 1) + 1.0 * I;
    OK(MPI_Accumulate(&zc, 1, MPI_C_DOUBLE_COMPLEX, 0, offsetof(struct acc, z), 1,
                      MPI_C_DOUBLE_COMPLEX, MPI_SUM, win));
    OK(MPI_Accumulate(&big, 1, MPI_LONG_DOUBLE, 0, offsetof(struct acc, ld), 1,
                      MPI_LONG_DOUBLE, MPI_SUM, win));
    OK(MPI_Win_fence(0, win));
    if (r == 0) {
        for (int k = 0; k < K; k++) {
            int v, at; best(n, k, 1, &v, &at);
            CHECK(wb->best[k].v == v && wb->best[k].i == at);
        }
        CHECK(wb->z == (double)(n * (n + 1) / 2) + (double)n * I);
        CHECK(wb->ld - 1152921504606846976.0L == (long double)(n - 1));
    }
    OK(MPI_Win_fence(0, win));
    /* Fetch-and-op on a Fortran INTEGER, then a MINLOC with the old value
     * fetched, in a passive epoch: each rank's own ticket, and the low
     * value seen before its own was combined. */
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    int one = 1, ticket;
    OK(MPI_Fetch_and_op(&one, &ticket, MPI_INTEGER, 0, offsetof(struct acc, count), MPI_SUM,
                        win));
    struct sht_int low = {(short)(100 - r), r}, before;
    OK(MPI_Get_accumulate(&low, 1, MPI_SHORT_INT, &before, 1, MPI_SHORT_INT, 0,
                          offsetof(struct acc, low), 1, MPI_SHORT_INT, MPI_MINLOC, win));
    OK(MPI_Win_unlock(0, win));
    CHECK(ticket >= 0 && ticket < n);
    CHECK(before.v >= 100 - (n - 1) && (before.v == 32767) == (before.i == -1));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (r == 0) {
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK(wb->count == n && wb->low.v == 100 - (n - 1) && wb->low.i == n - 1);
        OK(MPI_Win_unlock(0, win));
    }
    /* Every ticket once: their sum is 0 + 1 + ... + n-1. */
    int tickets;
    OK(MPI_Allreduce(&ticket, &tickets, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(tickets == n * (n - 1) / 2);
    OK(MPI_Win_free(&win));

    /* Accumulates on a type derived from a padded pair (MPICH suite
     * rma/acc_pairtype; they were refused): MAXLOC of long double-int pairs
     * from a contiguous origin into every other pair of rank 0's window,
     * then the pairs fetched back (MPI_NO_OP) into a strided result. */
    {
        struct ldi { long double v; int i; } *tw, src[3], res[6];
        MPI_Win lw;
        MPI_Datatype every2;
        OK(MPI_Type_vector(3, 1, 2, MPI_LONG_DOUBLE_INT, &every2));
        OK(MPI_Type_commit(&every2));
        OK(MPI_Win_allocate(6 * sizeof *tw, sizeof *tw, MPI_INFO_NULL, MPI_COMM_WORLD, &tw, &lw));
        for (int k = 0; k < 6; k++) { tw[k].v = -1e9L; tw[k].i = -1; }
        OK(MPI_Win_fence(0, lw));
        for (int k = 0; k < 3; k++) { src[k].v = pv(r, k); src[k].i = r; }
        OK(MPI_Accumulate(src, 3, MPI_LONG_DOUBLE_INT, 0, 0, 1, every2, MPI_MAXLOC, lw));
        OK(MPI_Win_fence(0, lw));
        for (int k = 0; k < 6; k++) { res[k].v = 5; res[k].i = 5; }
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, lw));
        OK(MPI_Get_accumulate(NULL, 0, MPI_LONG_DOUBLE_INT, res, 1, every2, 0, 0, 1, every2,
                              MPI_NO_OP, lw));
        OK(MPI_Win_unlock(0, lw));
        for (int k = 0; k < 3; k++) {
            int v, at; best(n, k, 1, &v, &at);
            CHECK(res[2 * k].v == v && res[2 * k].i == at);
            CHECK(res[2 * k + 1].v == 5 && res[2 * k + 1].i == 5);
            if (r == 0) CHECK(tw[2 * k + 1].v == -1e9L && tw[2 * k + 1].i == -1);
        }
        OK(MPI_Win_fence(0, lw));
        OK(MPI_Win_free(&lw));
        OK(MPI_Type_free(&every2));
    }

    MPI_Datatype six, mat, gap, vit;
    /* The program's operation on a padded struct (extent 16, 12 bytes of
     * data), five elements, through Allreduce, Scan, Iallreduce and
     * Reduce_scatter_block. */
    int vbl[2] = {1, 1};
    MPI_Aint vdp[2] = {offsetof(struct dbl_int, v), offsetof(struct dbl_int, i)};
    MPI_Datatype vty[2] = {MPI_DOUBLE, MPI_INT};
    OK(MPI_Type_create_struct(2, vbl, vdp, vty, &vit));
    OK(MPI_Type_commit(&vit));
    MPI_Op vop, sop, mop, gop;
    OK(MPI_Op_create(vi_max, 1, &vop));
    struct dbl_int vs[5], vr[5];
    for (int k = 0; k < 5; k++) { vs[k].v = pv(r, k); vs[k].i = r; }
    OK(MPI_Allreduce(vs, vr, 5, vit, vop, MPI_COMM_WORLD));
    for (int k = 0; k < 5; k++) {
        int v, at; best(n, k, 1, &v, &at);
        CHECK(vr[k].v == v && vr[k].i == at);
    }
    OK(MPI_Scan(vs, vr, 5, vit, vop, MPI_COMM_WORLD));
    for (int k = 0; k < 5; k++) {
        int v, at; best(r + 1, k, 1, &v, &at);
        CHECK(vr[k].v == v && vr[k].i == at);
    }
    OK(MPI_Iallreduce(vs, vr, 5, vit, vop, MPI_COMM_WORLD, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    { int v, at; best(n, 4, 1, &v, &at); CHECK(vr[4].v == v && vr[4].i == at); }
    struct dbl_int *bs = malloc(2 * n * sizeof *bs), br[2];
    for (int k = 0; k < 2 * n; k++) { bs[k].v = pv(r, k); bs[k].i = r; }
    OK(MPI_Reduce_scatter_block(bs, br, 2, vit, vop, MPI_COMM_WORLD));
    for (int k = 0; k < 2; k++) {
        int v, at; best(n, 2 * r + k, 1, &v, &at);
        CHECK(br[k].v == v && br[k].i == at);
    }
    free(bs);

    /* 48-byte elements, enough of them for the long algorithms. */
    enum { NB = 1000 };
    OK(MPI_Type_contiguous(6, MPI_DOUBLE, &six));
    OK(MPI_Type_commit(&six));
    OK(MPI_Op_create(six_sum, 1, &sop));
    double *bx = malloc(NB * 6 * sizeof *bx), *by = malloc(NB * 6 * sizeof *by);
    for (int k = 0; k < NB * 6; k++) bx[k] = r + k % 7;
    OK(MPI_Allreduce(bx, by, NB, six, sop, MPI_COMM_WORLD));
    for (int k = 0; k < NB * 6; k++) CHECK(by[k] == n * (n - 1) / 2 + n * (k % 7));
    OK(MPI_Allreduce(MPI_IN_PLACE, bx, NB, six, sop, MPI_COMM_WORLD));
    CHECK(bx[6 * NB - 1] == by[6 * NB - 1]);
    free(bx);
    free(by);

    /* Not commutative, 72 bytes: each rank's matrix is upper triangular
     * with ones on the diagonal (small integers: the product is exact),
     * combined in rank order; checked against the serial product. */
    OK(MPI_Type_contiguous(9, MPI_DOUBLE, &mat));
    OK(MPI_Type_commit(&mat));
    OK(MPI_Op_create(mat3, 0, &mop));
    double mm[9] = {1, r + 1, r % 3, 0, 1, 2 - r, 0, 0, 1}, mp[9], want[9];
    int dummy = 1;
    for (int q = 0; q < n; q++) {
        double m2[9] = {1, q + 1, q % 3, 0, 1, 2 - q, 0, 0, 1};
        if (q == 0) {
            memcpy(want, m2, sizeof want);
        } else {
            mat3(want, m2, &dummy, &mat); /* m2 = want x m2: in before inout */
            memcpy(want, m2, sizeof want);
        }
    }
    OK(MPI_Allreduce(mm, mp, 1, mat, mop, MPI_COMM_WORLD));
    for (int k = 0; k < 9; k++) CHECK(mp[k] == want[k]);

    /* Gaps: vector(2, 1, 2) of doubles, extent 24 with 8 bytes of the
     * program's between; three elements; the gaps of the result stay. */
    OK(MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &gap));
    OK(MPI_Type_commit(&gap));
    OK(MPI_Op_create(gap_sum, 1, &gop));
    double gs[9], gr[9];
    for (int k = 0; k < 9; k++) { gs[k] = r * 10 + k; gr[k] = 555; }
    OK(MPI_Allreduce(gs, gr, 3, gap, gop, MPI_COMM_WORLD));
    for (int k = 0; k < 9; k++)
        CHECK(gr[k] == (k % 3 == 1 ? 555 : (double)(10 * n * (n - 1) / 2 + n * k)));
    for (int k = 0; k < 9; k++) gr[k] = k % 3 == 1 ? 555 : 1;
    OK(MPI_Reduce_local(gs, gr, 3, gap, gop));
    for (int k = 0; k < 9; k++) CHECK(gr[k] == (k % 3 == 1 ? 555 : r * 10 + k + 1));
    OK(MPI_Op_free(&vop));
    OK(MPI_Op_free(&sop));
    OK(MPI_Op_free(&mop));
    OK(MPI_Op_free(&gop));
    MPI_Datatype frees[4] = {six, mat, gap, vit};
    for (int k = 0; k < 4; k++) OK(MPI_Type_free(&frees[k]));

    /* What the standard does not define is an error of class MPI_ERR_OP. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    double _Complex c = 1.0, cm;
    int rc = MPI_Allreduce(&c, &cm, 1, MPI_C_DOUBLE_COMPLEX, MPI_MAX, MPI_COMM_WORLD), cls;
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OP);
    rc = MPI_Allreduce(&a, &b, 1, MPI_DOUBLE_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OP);
    rc = MPI_Allreduce(&big, &sum, 1, MPI_LONG_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OP);
    MPI_Datatype col;
    OK(MPI_Type_vector(2, 1, 3, MPI_DOUBLE, &col));
    OK(MPI_Type_commit(&col));
    double cv[4] = {1, 2, 3, 4}, cw[4];
    rc = MPI_Allreduce(cv, cw, 1, col, MPI_SUM, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OP);
    OK(MPI_Type_free(&col));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* Still in step after the refusals. */
    OK(MPI_Allreduce(&fi, &fs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(fs == n * (n + 1) / 2);
    kt_pass("redtypes");
    MPI_Finalize();
    return 0;
}
