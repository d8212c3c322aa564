/* Concern: parallel files (MPI-IO). Open and create (exclusive, errors for a
 * missing file and bad modes), explicit offsets, views with a derived file
 * type and a derived memory type, individual and shared file pointers, ordered
 * access in rank order, seeks, nonblocking and split collective accesses,
 * sizes, atomicity, queries (amode, group, view, info), the file error handler
 * (MPI_ERRORS_RETURN by default, a user handler), access checks (read-only,
 * write-only, sequential), delete on close, the large-count variants.
 * Files go to $TMPDIR (or /tmp), named by rank 0 and removed at the end. */
#include "kt.h"
#include <unistd.h>

#define N 6 /* ints per rank in the explicit-offset part */
#define B 3 /* ints per block in the strided view */
#define K 4 /* blocks per rank */
#define M 5 /* shared-pointer records per rank */

static int handler_calls, handler_code;
static MPI_File handler_file;

static void on_error(MPI_File *f, int *code, ...) {
    handler_calls++;
    handler_code = *code;
    handler_file = *f;
}

/* The standard's way to make other ranks' writes visible: sync, barrier, sync. */
static void sync_all(MPI_File fh) {
    OK(MPI_File_sync(fh));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_File_sync(fh));
}

static int cls(int rc) {
    int c;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    char path[512], other[560];
    if (r == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/kumi-io-test.%d", dir && *dir ? dir : "/tmp", (int)getpid());
    }
    OK(MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD));
    snprintf(other, sizeof other, "%s.seq", path);
    MPI_File fh;
    MPI_Status st;
    int cnt;

    /* Errors of MPI_File_open go to MPI_FILE_NULL's handler: MPI_ERRORS_RETURN. */
    MPI_Errhandler eh;
    OK(MPI_File_get_errhandler(MPI_FILE_NULL, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(cls(rc) == MPI_ERR_NO_SUCH_FILE);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    CHECK(cls(rc) == MPI_ERR_AMODE);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    CHECK(cls(rc) == MPI_ERR_AMODE);
    rc = MPI_File_delete(path, MPI_INFO_NULL);
    CHECK(cls(rc) == MPI_ERR_NO_SUCH_FILE);

    /* Exclusive creation: once, then MPI_ERR_FILE_EXISTS on every rank. */
    int amode = MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR;
    OK(MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh));
    CHECK(fh != MPI_FILE_NULL);
    int got_amode;
    OK(MPI_File_get_amode(fh, &got_amode));
    CHECK(got_amode == amode);
    OK(MPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL);
    rc = MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh);
    CHECK(cls(rc) == MPI_ERR_FILE_EXISTS);

    OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    /* Fortran handles. */
    MPI_Fint ff = MPI_File_c2f(fh);
    CHECK(ff != 0 && MPI_File_f2c(ff) == fh && MPI_File_f2c(0) == MPI_FILE_NULL);
    /* Queries. */
    MPI_Group fg, wg;
    int cmp;
    OK(MPI_File_get_group(fh, &fg));
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    OK(MPI_Group_compare(fg, wg, &cmp));
    CHECK(cmp == MPI_IDENT);
    MPI_Group_free(&fg);
    MPI_Group_free(&wg);
    MPI_Info info;
    OK(MPI_File_get_info(fh, &info));
    OK(MPI_Info_free(&info));
    int flag = 1;
    OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 0);
    OK(MPI_File_set_atomicity(fh, 1));
    OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 1);

    /* Explicit offsets (bytes, in the default view): rank r's N ints at r*N. */
    int mine[N], all[N * 64];
    CHECK(n <= 64);
    for (int i = 0; i < N; i++) mine[i] = r * 100 + i;
    OK(MPI_File_write_at_all(fh, (MPI_Offset)r * N * 4, mine, N, MPI_INT, &st));
    OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == N);
    sync_all(fh);
    MPI_Offset size;
    OK(MPI_File_get_size(fh, &size));
    CHECK(size == (MPI_Offset)n * N * 4);
    OK(MPI_File_read_at(fh, 0, all, n * N, MPI_INT, &st));
    OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == n * N);
    for (int i = 0; i < n * N; i++) CHECK(all[i] == (i / N) * 100 + i % N);
    /* A read past the end returns what is there. */
    OK(MPI_File_read_at(fh, size - 8, all, 10, MPI_INT, &st));
    OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 2);
    /* Large-count forms. */
    MPI_Count big;
    OK(MPI_File_read_at_c(fh, 0, all, (MPI_Count)N, MPI_INT, &st));
    OK(MPI_Get_count_c(&st, MPI_INT, &big));
    CHECK(big == N && all[N - 1] == N - 1);
    OK(MPI_File_set_atomicity(fh, 0));

    /* A strided view: rank r owns block r of every tile of n blocks of B ints,
     * after a header of 16 bytes. */
    MPI_Datatype blk, ft;
    OK(MPI_Type_contiguous(B, MPI_INT, &blk));
    OK(MPI_Type_create_resized(blk, 0, (MPI_Aint)n * B * 4, &ft));
    OK(MPI_Type_commit(&ft));
    MPI_Offset disp = 16 + (MPI_Offset)r * B * 4;
    OK(MPI_File_set_view(fh, disp, MPI_INT, ft, "native", MPI_INFO_NULL));
    int vals[K * B];
    for (int i = 0; i < K * B; i++) vals[i] = r * 1000 + i;
    /* Half through the individual pointer, half through a strided memory type:
     * every other int of a buffer of 2*B*K/2. */
    OK(MPI_File_write_all(fh, vals, K * B / 2, MPI_INT, &st));
    MPI_Offset pos;
    OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == K * B / 2);
    int spread[K * B];
    for (int i = 0; i < K * B / 2; i++) spread[2 * i] = vals[K * B / 2 + i], spread[2 * i + 1] = -1;
    MPI_Datatype every_other;
    OK(MPI_Type_vector(K * B / 2, 1, 2, MPI_INT, &every_other));
    OK(MPI_Type_commit(&every_other));
    OK(MPI_File_write(fh, spread, 1, every_other, &st));
    OK(MPI_Get_count(&st, every_other, &cnt));
    CHECK(cnt == 1);
    OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == K * B);
    MPI_Offset byte;
    OK(MPI_File_get_byte_offset(fh, B, &byte));
    CHECK(byte == disp + (MPI_Offset)n * B * 4);
    /* The view as set; the file type comes back as a new handle. */
    MPI_Offset vd;
    MPI_Datatype ve, vf;
    char rep[MPI_MAX_DATAREP_STRING];
    OK(MPI_File_get_view(fh, &vd, &ve, &vf, rep));
    CHECK(vd == disp && ve == MPI_INT && strcmp(rep, "native") == 0);
    MPI_Aint lb, ext;
    OK(MPI_Type_get_extent(vf, &lb, &ext));
    CHECK(ext == (MPI_Aint)n * B * 4);
    OK(MPI_Type_free(&vf));
    OK(MPI_File_get_type_extent(fh, ft, &ext));
    CHECK(ext == (MPI_Aint)n * B * 4);
    /* Read back through the view into the strided memory type. */
    OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    int back[K * B];
    OK(MPI_File_read(fh, back, K * B / 2, MPI_INT, &st));
    for (int i = 0; i < K * B / 2; i++) CHECK(back[i] == vals[i]);
    for (int i = 0; i < K * B; i++) spread[i] = -7;
    OK(MPI_File_read_all(fh, spread, 1, every_other, &st));
    for (int i = 0; i < K * B / 2; i++) CHECK(spread[2 * i] == vals[K * B / 2 + i] && spread[2 * i + 1] == -7);
    /* Seeks: from the end (the view's last element), relative, and refused. */
    sync_all(fh);
    OK(MPI_File_seek(fh, -1, MPI_SEEK_END));
    OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == K * B - 1);
    OK(MPI_File_read(fh, back, 1, MPI_INT, &st));
    CHECK(back[0] == vals[K * B - 1]);
    OK(MPI_File_seek(fh, -2, MPI_SEEK_CUR));
    OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == K * B - 2);
    rc = MPI_File_seek(fh, -100, MPI_SEEK_CUR);
    CHECK(cls(rc) == MPI_ERR_ARG);
    /* The whole file through the byte view: the tiles interleave the ranks. */
    OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    int *tiles = malloc(sizeof(int) * n * K * B);
    CHECK(tiles);
    OK(MPI_File_read_at(fh, 16, tiles, n * K * B, MPI_INT, &st));
    for (int t = 0; t < K; t++)
        for (int q = 0; q < n; q++)
            for (int i = 0; i < B; i++) CHECK(tiles[(t * n + q) * B + i] == q * 1000 + t * B + i);
    free(tiles);

    /* Nonblocking and split collective accesses. */
    /* (After the tiles, which other ranks may still be reading.) */
    MPI_Offset slot = 16 + (MPI_Offset)n * K * B * 4 + 4 * (MPI_Offset)r;
    MPI_Request req;
    int one = 4242 + r, rd = 0;
    OK(MPI_File_iwrite_at(fh, slot, &one, 1, MPI_INT, &req));
    OK(MPI_Wait(&req, &st));
    OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 1);
    OK(MPI_File_iread_at(fh, slot, &rd, 1, MPI_INT, &req));
    int done = 0;
    while (!done) OK(MPI_Test(&req, &done, &st));
    CHECK(rd == one);
    OK(MPI_File_write_at_all_begin(fh, slot, &one, 1, MPI_INT));
    /* A second split collective on the file is erroneous; kumi says so (and
     * leaves the first one alone). */
    if (kt_on_kumi()) {
        rc = MPI_File_read_all_begin(fh, &rd, 1, MPI_INT);
        CHECK(cls(rc) == MPI_ERR_OTHER);
    }
    OK(MPI_File_write_at_all_end(fh, &one, &st));
    OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 1);
    if (kt_on_kumi()) {
        rc = MPI_File_read_at_all_end(fh, &rd, &st);
        CHECK(cls(rc) == MPI_ERR_OTHER);
    }

    /* The file's error handler: MPI_ERRORS_RETURN by default (seen above), a
     * handler of the program's when set, called with the file. */
    MPI_Errhandler mine_eh;
    OK(MPI_File_create_errhandler(on_error, &mine_eh));
    OK(MPI_File_set_errhandler(fh, mine_eh));
    rc = MPI_File_read_at(fh, -4, &rd, 1, MPI_INT, &st);
    CHECK(cls(rc) == MPI_ERR_ARG && handler_calls == 1 && handler_code == rc && handler_file == fh);
    OK(MPI_File_call_errhandler(fh, MPI_ERR_IO));
    CHECK(handler_calls == 2 && cls(handler_code) == MPI_ERR_IO);
    OK(MPI_File_get_errhandler(fh, &eh));
    CHECK(eh == mine_eh);
    OK(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
    OK(MPI_Errhandler_free(&mine_eh));
    rc = MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "no-such-representation", MPI_INFO_NULL);
    CHECK(cls(rc) == MPI_ERR_UNSUPPORTED_DATAREP);

    /* Sizes. */
    OK(MPI_File_set_size(fh, 10));
    OK(MPI_File_get_size(fh, &size));
    CHECK(size == 10);
    OK(MPI_File_preallocate(fh, 4096));
    OK(MPI_File_get_size(fh, &size));
    CHECK(size == 4096);
    OK(MPI_File_set_size(fh, 0));

    /* The shared file pointer: M records per rank land exactly once each. */
    OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    for (int k = 0; k < M; k++) {
        int rec[2] = {r, k};
        OK(MPI_File_write_shared(fh, rec, 2, MPI_INT, &st));
    }
    sync_all(fh);
    OK(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == (MPI_Offset)n * M * 8);
    int *recs = malloc(sizeof(int) * 2 * n * M), *seen = calloc(n * M, sizeof(int));
    CHECK(recs && seen);
    OK(MPI_File_read_at(fh, 0, recs, 2 * n * M, MPI_INT, &st));
    for (int i = 0; i < n * M; i++) {
        int q = recs[2 * i], k = recs[2 * i + 1];
        CHECK(q >= 0 && q < n && k >= 0 && k < M);
        seen[q * M + k]++;
    }
    for (int i = 0; i < n * M; i++) CHECK(seen[i] == 1);
    /* Every rank reads one record through the shared pointer after a seek. */
    OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int rec[2];
    OK(MPI_File_read_shared(fh, rec, 2, MPI_INT, &st));
    CHECK(rec[0] >= 0 && rec[0] < n);
    free(recs);
    free(seen);

    /* Ordered: rank r writes r+1 copies of r, in rank order after the pointer. */
    OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_END));
    MPI_Offset start;
    OK(MPI_File_get_position_shared(fh, &start));
    int part[64];
    for (int i = 0; i <= r; i++) part[i] = r;
    OK(MPI_File_write_ordered(fh, part, r + 1, MPI_INT, &st));
    sync_all(fh);
    int tri = n * (n + 1) / 2;
    int *seq = malloc(sizeof(int) * tri);
    CHECK(seq);
    OK(MPI_File_read_at(fh, start, seq, tri, MPI_INT, &st));
    for (int q = 0, i = 0; q < n; q++)
        for (int j = 0; j <= q; j++, i++) CHECK(seq[i] == q);
    OK(MPI_File_seek_shared(fh, start, MPI_SEEK_SET));
    for (int i = 0; i <= r; i++) part[i] = -1;
    OK(MPI_File_read_ordered_begin(fh, part, r + 1, MPI_INT));
    OK(MPI_File_read_ordered_end(fh, part, &st));
    for (int i = 0; i <= r; i++) CHECK(part[i] == r);
    free(seq);
    OK(MPI_File_close(&fh));

    /* Access checks. */
    OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    rc = MPI_File_write_at(fh, 0, &one, 1, MPI_INT, &st);
    CHECK(cls(rc) == MPI_ERR_READ_ONLY);
    rc = MPI_File_set_size(fh, 0);
    CHECK(cls(rc) == MPI_ERR_READ_ONLY);
    OK(MPI_File_close(&fh));
    OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_APPEND, MPI_INFO_NULL, &fh));
    OK(MPI_File_get_size(fh, &size));
    OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == size && size > 0);
    rc = MPI_File_read_at(fh, 0, &rd, 1, MPI_INT, &st);
    CHECK(cls(rc) == MPI_ERR_ACCESS);
    OK(MPI_File_close(&fh));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (r == 0) OK(MPI_File_delete(path, MPI_INFO_NULL));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(access(path, F_OK) != 0);

    /* Sequential access, deleted on close: only the shared pointer. */
    OK(MPI_File_open(MPI_COMM_WORLD, other,
                     MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL | MPI_MODE_DELETE_ON_CLOSE,
                     MPI_INFO_NULL, &fh));
    rc = MPI_File_write_at(fh, 0, &one, 1, MPI_INT, &st);
    CHECK(cls(rc) == MPI_ERR_UNSUPPORTED_OPERATION);
    OK(MPI_File_write_ordered(fh, &one, 1, MPI_INT, &st));
    OK(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    OK(MPI_File_get_view(fh, &vd, &ve, &vf, rep));
    CHECK(vd == (MPI_Offset)n * 4);
    OK(MPI_File_close(&fh));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(access(other, F_OK) != 0);

    /* File types with a negative or decreasing displacement are refused
     * with MPI_ERR_IO (ROMIO's class; regression: MPI_ERR_ARG); one with
     * overlapping parts too where the file may be written, and accepted
     * where it is only read (MPI forbids overlaps for writing only;
     * regression: refused either way), where reads see the overlap. */
    OK(MPI_File_open(MPI_COMM_WORLD, other, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    if (r == 0) {
        int seq[4] = {10, 11, 12, 13};
        OK(MPI_File_write_at(fh, 0, seq, 4, MPI_INT, &st));
    }
    int bl[2] = {1, 1}, dsp2[2] = {2, 0};
    MPI_Datatype badft, overft;
    OK(MPI_Type_indexed(2, bl, dsp2, MPI_INT, &badft));
    OK(MPI_Type_commit(&badft));
    rc = MPI_File_set_view(fh, 0, MPI_INT, badft, "native", MPI_INFO_NULL);
    CHECK(cls(rc) == MPI_ERR_IO);
    OK(MPI_Type_free(&badft));
    bl[0] = 3;
    dsp2[0] = 0;
    dsp2[1] = 1;
    OK(MPI_Type_indexed(2, bl, dsp2, MPI_INT, &overft));
    OK(MPI_Type_commit(&overft));
    rc = MPI_File_set_view(fh, 0, MPI_INT, overft, "native", MPI_INFO_NULL);
    CHECK(cls(rc) == MPI_ERR_IO);
    OK(MPI_File_close(&fh));
    OK(MPI_File_open(MPI_COMM_WORLD, other, MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    OK(MPI_File_set_view(fh, 0, MPI_INT, overft, "native", MPI_INFO_NULL));
    int four[4] = {0, 0, 0, 0};
    OK(MPI_File_read_at(fh, 0, four, 4, MPI_INT, &st));
    CHECK(four[0] == 10 && four[1] == 11 && four[2] == 12 && four[3] == 11);
    OK(MPI_Type_free(&overft));
    OK(MPI_File_close(&fh));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* external32 views (MPICH suite io/external32_derived_dtype; the
     * representation was refused): the file holds big-endian data, reads
     * through the view convert it back, a strided memory type included. */
    OK(MPI_File_open(MPI_COMM_WORLD, other,
                     MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                     &fh));
    {
        int vals[6] = {0x01020304 + r, 0, -2 - r, 0, 77 * r, 0}, back[3] = {0, 0, 0};
        char rep[MPI_MAX_DATAREP_STRING + 1];
        unsigned char raw[4];
        MPI_Offset vd;
        MPI_Datatype ve, vf, every2;
        OK(MPI_Type_vector(3, 1, 2, MPI_INT, &every2));
        OK(MPI_Type_commit(&every2));
        OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL));
        OK(MPI_File_get_view(fh, &vd, &ve, &vf, rep));
        CHECK(strcmp(rep, "external32") == 0);
        OK(MPI_File_write_at_all(fh, 3 * r, vals, 1, every2, &st));
        OK(MPI_File_read_at_all(fh, 3 * r, back, 3, MPI_INT, &st));
        CHECK(back[0] == vals[0] && back[1] == vals[2] && back[2] == vals[4]);
        /* The bytes themselves, through a native view: big endian. */
        OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
        OK(MPI_File_read_at_all(fh, 12 * r, raw, 4, MPI_BYTE, &st));
        CHECK(raw[0] == 1 && raw[1] == 2 && raw[2] == 3 && raw[3] == 4 + r);
        /* A type whose external32 size is not the native one. */
        if (kt_on_kumi()) {
            rc = MPI_File_set_view(fh, 0, MPI_LONG, MPI_LONG, "external32", MPI_INFO_NULL);
            CHECK(cls(rc) == MPI_ERR_CONVERSION);
        }
        OK(MPI_Type_free(&every2));
    }
    OK(MPI_File_close(&fh));

    /* A handle that is no file. */
    MPI_File bogus = MPI_FILE_NULL;
    rc = MPI_File_get_size(bogus, &size);
    CHECK(cls(rc) == MPI_ERR_FILE);

    OK(MPI_Type_free(&every_other));
    OK(MPI_Type_free(&ft));
    OK(MPI_Type_free(&blk));
    kt_pass("io");
    MPI_Finalize();
    return 0;
}
