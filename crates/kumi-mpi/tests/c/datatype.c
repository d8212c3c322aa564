/* Concern: datatypes: basic sizes, constructors, extents, derived types in
 * point-to-point, pack/unpack. */
#include "kt.h"
#include <stdint.h>

static int size_of(MPI_Datatype t) { int s; OK(MPI_Type_size(t, &s)); return s; }

struct particle { double pos[3]; int id; char tag; };

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    MPI_Aint lb, ext;

    CHECK(size_of(MPI_CHAR) == 1 && size_of(MPI_SHORT) == 2 && size_of(MPI_INT) == 4);
    CHECK(size_of(MPI_LONG) == sizeof(long) && size_of(MPI_LONG_LONG) == 8);
    CHECK(size_of(MPI_FLOAT) == 4 && size_of(MPI_DOUBLE) == 8);
    CHECK(size_of(MPI_LONG_DOUBLE) == sizeof(long double));
    CHECK(size_of(MPI_UNSIGNED_CHAR) == 1 && size_of(MPI_UNSIGNED) == 4);
    CHECK(size_of(MPI_INT8_T) == 1 && size_of(MPI_UINT16_T) == 2 && size_of(MPI_INT64_T) == 8);
    CHECK(size_of(MPI_C_BOOL) == 1 && size_of(MPI_AINT) == 8 && size_of(MPI_BYTE) == 1);
    CHECK(size_of(MPI_C_DOUBLE_COMPLEX) == 16 && size_of(MPI_2INT) == 8);
    CHECK(size_of(MPI_INTEGER) == 4 && size_of(MPI_DOUBLE_PRECISION) == 8 && size_of(MPI_REAL) == 4);
    CHECK(size_of(MPI_DOUBLE_INT) == 12);
    OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &ext));
    CHECK(lb == 0 && ext == 16);

    /* vector: a column of a 4x5 int matrix. */
    MPI_Datatype col, cont, hv, idx, hidx, st, rs, sub, dup, blk;
    OK(MPI_Type_vector(4, 1, 5, MPI_INT, &col));
    OK(MPI_Type_commit(&col));
    CHECK(size_of(col) == 16);
    OK(MPI_Type_get_extent(col, &lb, &ext));
    CHECK(lb == 0 && ext == (3 * 5 + 1) * 4);
    int m[4][5], colv[4];
    for (int i = 0; i < 4; i++) for (int j = 0; j < 5; j++) m[i][j] = 10 * i + j + 100 * r;
    /* Send column 2 as a vector, receive it contiguous. */
    OK(MPI_Sendrecv(&m[0][2], 1, col, right, 0, colv, 4, MPI_INT, left, 0, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    for (int i = 0; i < 4; i++) CHECK(colv[i] == 10 * i + 2 + 100 * left);
    /* Send contiguous, receive into column 4 (unpack on arrival). */
    int row[4] = {1 + r, 2 + r, 3 + r, 4 + r};
    MPI_Request q;
    OK(MPI_Irecv(&m[0][4], 1, col, left, 1, MPI_COMM_WORLD, &q));
    OK(MPI_Send(row, 4, MPI_INT, right, 1, MPI_COMM_WORLD));
    MPI_Status status;
    OK(MPI_Wait(&q, &status));
    for (int i = 0; i < 4; i++) CHECK(m[i][4] == i + 1 + left && m[i][3] == 10 * i + 3 + 100 * r);
    int cnt;
    OK(MPI_Get_count(&status, col, &cnt));
    CHECK(cnt == 1);
    OK(MPI_Get_elements(&status, col, &cnt));
    CHECK(cnt == 4);
    /* A part of a mixed type: its whole basic elements count. */
    {
        MPI_Datatype idx;
        int bl[2] = {1, 1};
        MPI_Aint dd[2] = {0, 8};
        MPI_Datatype tt[2] = {MPI_INT, MPI_DOUBLE};
        OK(MPI_Type_create_struct(2, bl, dd, tt, &idx));
        OK(MPI_Type_commit(&idx));
        char bytes[28] = {0}, into[64];
        MPI_Request rq;
        OK(MPI_Irecv(into, 4, idx, 0, 9, MPI_COMM_SELF, &rq));
        OK(MPI_Send(bytes, 28, MPI_BYTE, 0, 9, MPI_COMM_SELF));
        OK(MPI_Wait(&rq, &status));
        OK(MPI_Get_count(&status, idx, &cnt));
        CHECK(cnt == MPI_UNDEFINED);
        OK(MPI_Get_elements(&status, idx, &cnt));
        CHECK(cnt == 5);
        OK(MPI_Type_free(&idx));
    }

    OK(MPI_Type_contiguous(3, MPI_DOUBLE, &cont));
    CHECK(size_of(cont) == 24);
    OK(MPI_Type_create_hvector(2, 1, 40, cont, &hv));
    OK(MPI_Type_get_extent(hv, &lb, &ext));
    CHECK(size_of(hv) == 48 && ext == 64);
    int bl[3] = {2, 1, 3}, di[3] = {0, 4, 8};
    OK(MPI_Type_indexed(3, bl, di, MPI_INT, &idx));
    CHECK(size_of(idx) == 24);
    OK(MPI_Type_get_extent(idx, &lb, &ext));
    CHECK(ext == 44);
    MPI_Aint hd[3] = {0, 16, 32};
    OK(MPI_Type_create_hindexed(3, bl, hd, MPI_INT, &hidx));
    OK(MPI_Type_get_true_extent(hidx, &lb, &ext));
    CHECK(lb == 0 && ext == 44);
    OK(MPI_Type_create_indexed_block(3, 2, di, MPI_INT, &blk));
    CHECK(size_of(blk) == 24);

    /* struct, with a resized extent matching the C struct. */
    struct particle p[3], q3[3];
    int sbl[3] = {3, 1, 1};
    MPI_Aint sd[3], base;
    MPI_Datatype sty[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR};
    MPI_Get_address(&p[0], &base);
    MPI_Get_address(&p[0].pos, &sd[0]);
    MPI_Get_address(&p[0].id, &sd[1]);
    MPI_Get_address(&p[0].tag, &sd[2]);
    for (int i = 0; i < 3; i++) sd[i] = MPI_Aint_diff(sd[i], base);
    OK(MPI_Type_create_struct(3, sbl, sd, sty, &st));
    CHECK(size_of(st) == 29);
    OK(MPI_Type_create_resized(st, 0, sizeof(struct particle), &rs));
    OK(MPI_Type_commit(&rs));
    OK(MPI_Type_get_extent(rs, &lb, &ext));
    CHECK(ext == sizeof(struct particle));
    for (int i = 0; i < 3; i++) {
        p[i].pos[0] = r; p[i].pos[1] = i; p[i].pos[2] = -1.5;
        p[i].id = 1000 * r + i; p[i].tag = 'a' + i;
    }
    memset(q3, 0, sizeof q3);
    OK(MPI_Sendrecv(p, 3, rs, right, 2, q3, 3, rs, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int i = 0; i < 3; i++)
        CHECK(q3[i].pos[0] == left && q3[i].pos[1] == i && q3[i].id == 1000 * left + i &&
              q3[i].tag == 'a' + i);

    /* Without the resize, the struct's extent is already C's sizeof: MPI
     * rounds a structure's extent up to its parts' largest alignment, so
     * an array of structures sent as count elements lands where C put
     * them (an extent of 29 would shift every element after the first). */
    OK(MPI_Type_commit(&st));
    OK(MPI_Type_get_extent(st, &lb, &ext));
    CHECK(lb == 0 && ext == sizeof(struct particle));
    memset(q3, 0, sizeof q3);
    OK(MPI_Sendrecv(p, 3, st, right, 9, q3, 3, st, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int i = 0; i < 3; i++)
        CHECK(q3[i].pos[0] == left && q3[i].pos[2] == -1.5 && q3[i].id == 1000 * left + i &&
              q3[i].tag == 'a' + i);
    {
        /* The C layouts of a few more structures, by alignment of the
         * largest part: {char; short} 4, {int; char} 8, {char c[3]} 3,
         * {long double; char} 32, {double _Complex; char} 24 (8-aligned),
         * and an int at 4 and a double at 8: lb 4, extent 16. */
        struct { MPI_Datatype a, b; MPI_Aint da, db; int n; MPI_Aint lb, ext; } cs[] = {
            {MPI_CHAR, MPI_SHORT, 0, 2, 2, 0, 4},
            {MPI_INT, MPI_CHAR, 0, 4, 2, 0, 8},
            {MPI_CHAR, MPI_CHAR, 0, 1, 2, 0, 2},
            {MPI_LONG_DOUBLE, MPI_CHAR, 0, 16, 2, 0, 32},
            {MPI_C_DOUBLE_COMPLEX, MPI_CHAR, 0, 16, 2, 0, 24},
            {MPI_INT, MPI_DOUBLE, 4, 8, 2, 4, 16},
            {MPI_DOUBLE_INT, MPI_CHAR, 0, 16, 2, 0, 24},
        };
        for (unsigned k = 0; k < sizeof cs / sizeof cs[0]; k++) {
            int bl2[2] = {1, 1};
            MPI_Aint d2[2] = {cs[k].da, cs[k].db};
            MPI_Datatype t2[2] = {cs[k].a, cs[k].b}, s2;
            OK(MPI_Type_create_struct(cs[k].n, bl2, d2, t2, &s2));
            OK(MPI_Type_get_extent(s2, &lb, &ext));
            CHECK(lb == cs[k].lb && ext == cs[k].ext);
            OK(MPI_Type_free(&s2));
        }
    }

    /* Many datatypes alive at once keep their own handles: the 257th
     * handle used to be the first's again (type_collision_after_256). */
    {
        enum { NT = 600 };
        MPI_Datatype *many = malloc(NT * sizeof *many);
        for (int i = 0; i < NT; i++) OK(MPI_Type_contiguous(i + 1, MPI_CHAR, &many[i]));
        for (int i = 0; i < NT; i++) {
            int sz;
            OK(MPI_Type_size(many[i], &sz));
            CHECK(sz == i + 1);
            for (int j = 0; j < i; j += 97) CHECK(many[j] != many[i]);
        }
        for (int i = 0; i < NT; i++) OK(MPI_Type_free(&many[i]));
        free(many);
    }

    /* Predefined types are named as the standard spells them. */
    {
        char nm[MPI_MAX_OBJECT_NAME];
        int nl;
        OK(MPI_Type_get_name(MPI_DOUBLE, nm, &nl));
        CHECK(strcmp(nm, "MPI_DOUBLE") == 0 && nl == 10);
        OK(MPI_Type_get_name(MPI_DOUBLE_INT, nm, &nl));
        CHECK(strcmp(nm, "MPI_DOUBLE_INT") == 0);
        OK(MPI_Type_get_name(MPI_INT, nm, &nl));
        CHECK(strcmp(nm, "MPI_INT") == 0 && nl == 7);
        /* One handle with two names: MPICH's choice. */
        OK(MPI_Type_get_name(MPI_C_FLOAT_COMPLEX, nm, &nl));
        CHECK(strcmp(nm, "MPI_C_COMPLEX") == 0);
        OK(MPI_Type_get_name(MPI_DATATYPE_NULL, nm, &nl));
        CHECK(strcmp(nm, "MPI_DATATYPE_NULL") == 0);
    }

    /* subarray: the 2x3 interior block of a 4x5 array. */
    int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 1};
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub));
    OK(MPI_Type_commit(&sub));
    CHECK(size_of(sub) == 24);
    OK(MPI_Type_get_extent(sub, &lb, &ext));
    CHECK(ext == 80);
    int blockv[6];
    OK(MPI_Sendrecv(m, 1, sub, right, 3, blockv, 6, MPI_INT, left, 3, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    CHECK(blockv[0] == 11 + 100 * left && blockv[5] == 23 + 100 * left);

    OK(MPI_Type_dup(col, &dup));
    CHECK(size_of(dup) == 16);

    /* Pack / Unpack. */
    char packbuf[256];
    int pos = 0, psize;
    OK(MPI_Pack_size(1, col, MPI_COMM_WORLD, &psize));
    CHECK(psize >= 16);
    OK(MPI_Pack(&m[0][1], 1, col, packbuf, sizeof packbuf, &pos, MPI_COMM_WORLD));
    double dd = 2.5;
    OK(MPI_Pack(&dd, 1, MPI_DOUBLE, packbuf, sizeof packbuf, &pos, MPI_COMM_WORLD));
    CHECK(pos == 24);
    int outv[4];
    double od;
    pos = 0;
    OK(MPI_Unpack(packbuf, 24, &pos, outv, 4, MPI_INT, MPI_COMM_WORLD));
    OK(MPI_Unpack(packbuf, 24, &pos, &od, 1, MPI_DOUBLE, MPI_COMM_WORLD));
    CHECK(outv[0] == 1 + 100 * r && outv[3] == 31 + 100 * r && od == 2.5);
    /* Packed data travels as MPI_PACKED. */
    char rpack[256];
    MPI_Status ps;
    OK(MPI_Sendrecv(packbuf, 24, MPI_PACKED, right, 4, rpack, 256, MPI_PACKED, left, 4,
                    MPI_COMM_WORLD, &ps));
    OK(MPI_Get_count(&ps, MPI_PACKED, &cnt));
    CHECK(cnt == 24);

    MPI_Datatype all[11] = {col, cont, hv, idx, hidx, st, rs, sub, dup, blk, MPI_DATATYPE_NULL};
    for (int i = 0; i < 10; i++) {
        OK(MPI_Type_free(&all[i]));
        CHECK(all[i] == MPI_DATATYPE_NULL);
    }
    /* Decoding: MPI_Type_get_envelope / MPI_Type_get_contents give back the
     * constructor and its arguments; a derived argument comes back as a new
     * handle that the program frees. */
    {
        int ni, na, nd, comb;
        OK(MPI_Type_get_envelope(MPI_DOUBLE, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_NAMED && ni == 0 && na == 0 && nd == 0);
        MPI_Datatype vec, st, rs;
        OK(MPI_Type_vector(3, 2, 5, MPI_INT, &vec));
        OK(MPI_Type_get_envelope(vec, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nd == 1);
        int iv[8];
        MPI_Aint av[4];
        MPI_Datatype tv[4];
        OK(MPI_Type_get_contents(vec, 8, 4, 4, iv, av, tv));
        CHECK(iv[0] == 3 && iv[1] == 2 && iv[2] == 5 && tv[0] == MPI_INT);
        int bl[2] = {1, 2};
        MPI_Aint dp[2] = {0, 16};
        MPI_Datatype ty[2] = {MPI_CHAR, vec};
        OK(MPI_Type_create_struct(2, bl, dp, ty, &st));
        OK(MPI_Type_get_envelope(st, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_STRUCT && ni == 3 && na == 2 && nd == 2);
        OK(MPI_Type_get_contents(st, 8, 4, 4, iv, av, tv));
        CHECK(iv[0] == 2 && iv[1] == 1 && iv[2] == 2 && av[0] == 0 && av[1] == 16);
        CHECK(tv[0] == MPI_CHAR); /* tv[1]: a vector like vec, to be freed */
        int sz1, sz2;
        OK(MPI_Type_size(tv[1], &sz1));
        OK(MPI_Type_size(vec, &sz2));
        CHECK(sz1 == sz2);
        OK(MPI_Type_get_envelope(tv[1], &ni, &na, &nd, &comb)); /* decodes further */
        CHECK(comb == MPI_COMBINER_VECTOR && ni == 3);
        OK(MPI_Type_free(&tv[1]));
        OK(MPI_Type_create_resized(st, -4, 64, &rs));
        OK(MPI_Type_get_envelope(rs, &ni, &na, &nd, &comb));
        CHECK(comb == MPI_COMBINER_RESIZED && ni == 0 && na == 2 && nd == 1);
        OK(MPI_Type_get_contents(rs, 0, 2, 1, NULL, av, tv));
        CHECK(av[0] == -4 && av[1] == 64);
        OK(MPI_Type_free(&tv[0]));
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int cls, crc = MPI_Type_get_contents(st, 1, 1, 1, iv, av, tv); /* arrays too short */
        MPI_Error_class(crc, &cls);
        CHECK(cls == MPI_ERR_ARG);
        crc = MPI_Type_get_contents(MPI_INT, 0, 0, 0, iv, av, tv);
        MPI_Error_class(crc, &cls);
        CHECK(cls == MPI_ERR_TYPE);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        OK(MPI_Type_free(&rs));
        OK(MPI_Type_free(&st));
        OK(MPI_Type_free(&vec));
    }

    /* MPI_Type_match_size: the sized Fortran-named types. */
    {
        MPI_Datatype m;
        int sz;
        OK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &m));
        CHECK(m == MPI_REAL8);
        OK(MPI_Type_size(m, &sz));
        CHECK(sz == 8);
        OK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &m));
        CHECK(m == MPI_INTEGER4);
        OK(MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &m));
        OK(MPI_Type_size(m, &sz));
        CHECK(sz == 16 && m == MPI_COMPLEX16);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int cls, mrc = MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 3, &m);
        MPI_Error_class(mrc, &cls);
        CHECK(cls == MPI_ERR_ARG);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }

    /* MPI-1's bound markers (MPICH suite datatype/lbub_oldapi,
     * struct_no_real_types): MPI_LB/MPI_UB in a struct set the bounds at
     * their displacements, even below each other (negative extent), and
     * derived types repeat them. They were taken as data of size 0. */
    {
        int bl[3] = {1, 4, 1};
        MPI_Aint d[3] = {6, 0, -3}, lb, ext, tlb, text;
        MPI_Datatype ty[3] = {MPI_LB, MPI_BYTE, MPI_UB}, neg, three, lbonly;
        OK(MPI_Type_create_struct(3, bl, d, ty, &neg));
        OK(MPI_Type_get_extent(neg, &lb, &ext));
        CHECK(lb == 6 && ext == -9);
        CHECK(size_of(neg) == 4);
        /* { (LB,6),4*(BYTE,0),(UB,-3),(LB,-3),4*(BYTE,-9),(UB,-12),... } */
        OK(MPI_Type_contiguous(3, neg, &three));
        OK(MPI_Type_get_extent(three, &lb, &ext));
        OK(MPI_Type_get_true_extent(three, &tlb, &text));
        CHECK(lb == -12 && ext == 9);
        CHECK(tlb == -18 && text == 22);
        /* Only a lower bound: the upper one is the data's. */
        MPI_Datatype lbt = MPI_LB;
        MPI_Aint ten = 10;
        int one = 1;
        OK(MPI_Type_create_struct(1, &one, &ten, &lbt, &lbonly));
        OK(MPI_Type_get_extent(lbonly, &lb, &ext));
        CHECK(lb == 10 && ext == -10);
        OK(MPI_Type_free(&lbonly));
        OK(MPI_Type_free(&three));
        OK(MPI_Type_free(&neg));
    }

    kt_pass("datatype");
    MPI_Finalize();
    return 0;
}
