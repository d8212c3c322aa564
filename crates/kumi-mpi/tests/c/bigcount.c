/* Concern: MPI 4's large counts beyond 2^31 - 1. Regression: the `_c`
 * functions refused any count above an int, and a status could not hold
 * 2^62 elements. A message of 2^31 + 100 bytes goes from rank 0 to rank 1
 * (MPI_Send_c / MPI_Irecv_c) and back by broadcast (MPI_Bcast_c); its
 * count reads back with MPI_Get_count_c; statuses hold 2^62 bytes.
 * Regression too: a count beyond an int of a strided type made a typemap of
 * 2^31 runs (32 GiB: the OOM killer), and the `_c` type constructors
 * refused counts beyond an int (`strided_types`); so did the reductions
 * (MPI_Allreduce_c in place), and the v-collectives' count arrays
 * (MPI_Gatherv_c, MPI_Scatterv_c), one-sided counts (MPI_Put_c) and pack
 * positions (MPI_Pack_c). */
#include "kt.h"
#include <stdint.h>

/* Datatypes of counts beyond an int, and a strided type of more runs than
 * a flat typemap holds, sent from rank 0 to rank 1. */
static void strided_types(int r, int n) {
    MPI_Datatype ch2, big, idx, hidx, mid;
    MPI_Count count = ((MPI_Count)1 << 31) + 100, size, lb, ext;
    OK(MPI_Type_create_resized(MPI_CHAR, 0, 2, &ch2));
    OK(MPI_Type_contiguous_c(count, ch2, &big));
    OK(MPI_Type_commit(&big));
    OK(MPI_Type_size_c(big, &size));
    CHECK(size == count);
    OK(MPI_Type_get_extent_c(big, &lb, &ext));
    CHECK(lb == 0 && ext == 2 * count);
    OK(MPI_Type_get_true_extent_c(big, &lb, &ext));
    CHECK(lb == 0 && ext == 2 * count - 1);
    MPI_Count ni, na, nl, nd, large[1];
    int comb, ints[1];
    MPI_Aint addrs[1];
    MPI_Datatype olds[1];
    OK(MPI_Type_get_envelope_c(big, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_CONTIGUOUS && ni == 0 && na == 0 && nl == 1 && nd == 1);
    OK(MPI_Type_get_contents_c(big, 0, 0, 1, 1, ints, addrs, large, olds));
    CHECK(large[0] == count);
    if (olds[0] != ch2) OK(MPI_Type_free(&olds[0]));
    OK(MPI_Type_free(&big));

    /* 7 GB in 256 blocks of ints, and 9 GB in uneven blocks of chars. */
    MPI_Count bytes = 2346319872LL * 3, blk = bytes / 256 / 4, displs[256];
    for (int i = 0; i < 256; i++) displs[i] = i * blk;
    OK(MPI_Type_create_indexed_block_c(256, blk, displs, MPI_INT, &idx));
    OK(MPI_Type_commit(&idx));
    OK(MPI_Type_size_c(idx, &size));
    OK(MPI_Type_get_true_extent_c(idx, &lb, &ext));
    CHECK(size == bytes && lb == 0 && ext == bytes);
    MPI_Count hb[4] = {0, 1, 2, 2346319872LL * 4 - 3}, hd[4] = {0, 0, 1, 3};
    OK(MPI_Type_create_hindexed_c(4, hb, hd, MPI_CHAR, &hidx));
    OK(MPI_Type_commit(&hidx));
    OK(MPI_Type_size_c(hidx, &size));
    OK(MPI_Type_get_true_extent_c(hidx, &lb, &ext));
    CHECK(size == 2346319872LL * 4 && lb == 0 && ext == size);
    OK(MPI_Type_free(&idx));
    OK(MPI_Type_free(&hidx));

    /* Every other byte of 3 x 100003 pairs, sent and received. */
    const int each = 100003, k = 3;
    OK(MPI_Type_contiguous(each, ch2, &mid));
    OK(MPI_Type_commit(&mid));
    if (n >= 2 && r < 2) {
        char *b = calloc(2 * (size_t)each * k, 1);
        CHECK(b != NULL);
        if (r == 0) {
            for (int i = 0; i < 2 * each * k; i++) b[i] = (char)(i % 2 ? 0x55 : i / 2 % 101);
            OK(MPI_Send(b, k, mid, 1, 6, MPI_COMM_WORLD));
        } else {
            MPI_Status st;
            OK(MPI_Recv(b, k, mid, 0, 6, MPI_COMM_WORLD, &st));
            int got;
            OK(MPI_Get_count(&st, mid, &got));
            CHECK(got == k);
            OK(MPI_Get_elements_x(&st, mid, &size));
            CHECK(size == (MPI_Count)each * k);
            for (int i = 0; i < 2 * each * k; i++) CHECK(b[i] == (char)(i % 2 ? 0 : i / 2 % 101));
        }
        free(b);
    }
    OK(MPI_Type_free(&mid));
    OK(MPI_Type_free(&ch2));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r = kt_rank(), n = kt_size();
    MPI_Status st;
    MPI_Count c;

    OK(MPI_Status_set_elements_x(&st, MPI_CHAR, (MPI_Count)1 << 62));
    OK(MPI_Get_elements_x(&st, MPI_CHAR, &c));
    CHECK(c == (MPI_Count)1 << 62);
    OK(MPI_Get_count_c(&st, MPI_CHAR, &c));
    CHECK(c == (MPI_Count)1 << 62);
    int small;
    OK(MPI_Get_count(&st, MPI_CHAR, &small));
    CHECK(small == MPI_UNDEFINED);
    OK(MPI_Status_set_elements_x(&st, MPI_INT, (MPI_Count)1 << 40));
    OK(MPI_Get_elements_x(&st, MPI_INT, &c));
    CHECK(c == (MPI_Count)1 << 40);

    strided_types(r, n);

    if (n >= 2 && r < 2) {
        MPI_Count big = ((MPI_Count)1 << 31) + 100;
        unsigned char *b = malloc(big);
        CHECK(b != NULL);
        if (r == 0) {
            for (MPI_Count i = 0; i < big; i += 4093) b[i] = (unsigned char)(i / 4093);
            b[big - 1] = 0xab;
            OK(MPI_Send_c(b, big, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
        } else {
            memset(b, 0, big);
            MPI_Request q;
            OK(MPI_Irecv_c(b, big, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &q));
            OK(MPI_Wait(&q, &st));
            OK(MPI_Get_count_c(&st, MPI_BYTE, &c));
            CHECK(c == big);
            for (MPI_Count i = 0; i < big - 1; i += 4093) CHECK(b[i] == (unsigned char)(i / 4093));
            CHECK(b[big - 1] == 0xab);
            b[big - 1] = 0xcd;
        }
        MPI_Comm two;
        OK(MPI_Comm_split(MPI_COMM_WORLD, 0, r, &two));
        OK(MPI_Bcast_c(b, big, MPI_BYTE, 1, two));
        CHECK(b[big - 1] == 0xcd && b[4093] == 1);
        /* A reduction of a count beyond an int, in place. */
        b[big - 1] = r == 0 ? 0x0c : 0xc0;
        b[0] = r == 0 ? 0x01 : 0x10;
        OK(MPI_Allreduce_c(MPI_IN_PLACE, b, big, MPI_BYTE, MPI_BOR, two));
        CHECK(b[big - 1] == 0xcc && b[0] == 0x11 && b[4093] == 1);
        /* Count arrays beyond an int: rank 0's whole buffer gathered at
         * rank 1 (in place there), then scattered back. */
        MPI_Count vc[2] = {big, 0};
        MPI_Aint vd[2] = {0, 0};
        b[big - 1] = r == 0 ? 0x5a : 0;
        b[4093] = r == 0 ? 1 : 0;
        if (r == 1)
            OK(MPI_Gatherv_c(MPI_IN_PLACE, 0, MPI_BYTE, b, vc, vd, MPI_BYTE, 1, two));
        else
            OK(MPI_Gatherv_c(b, big, MPI_BYTE, NULL, NULL, NULL, MPI_DATATYPE_NULL, 1, two));
        CHECK(b[big - 1] == 0x5a && b[4093] == 1);
        b[big - 1] = r == 1 ? 0xa5 : 0;
        if (r == 1)
            OK(MPI_Scatterv_c(b, vc, vd, MPI_BYTE, MPI_IN_PLACE, 0, MPI_BYTE, 1, two));
        else
            OK(MPI_Scatterv_c(NULL, NULL, NULL, MPI_DATATYPE_NULL, b, big, MPI_BYTE, 1, two));
        CHECK(b[big - 1] == 0xa5 && b[4093] == 1);
        /* One-sided, counts beyond an int: rank 0 puts its whole buffer
         * into rank 1's window. */
        MPI_Win w;
        OK(MPI_Win_create_c(b, big, 1, MPI_INFO_NULL, two, &w));
        OK(MPI_Win_fence(0, w));
        if (r == 0) {
            b[big - 1] = 0x77;
            b[4093] = 3;
            OK(MPI_Put_c(b, big, MPI_BYTE, 1, 0, big, MPI_BYTE, w));
        }
        OK(MPI_Win_fence(0, w));
        CHECK(b[big - 1] == 0x77 && b[4093] == 3 && b[2 * 4093] == 2);
        OK(MPI_Win_free(&w));
        /* Pack positions and sizes beyond an int. */
        MPI_Count pos = big - 100, psize;
        int ints[25], back[25];
        for (int i = 0; i < 25; i++) ints[i] = 7 * i + r;
        OK(MPI_Pack_size_c(big, MPI_BYTE, two, &psize));
        CHECK(psize == big);
        OK(MPI_Pack_c(ints, 25, MPI_INT, b, big, &pos, two));
        CHECK(pos == big);
        pos = big - 100;
        OK(MPI_Unpack_c(b, big, &pos, back, 25, MPI_INT, two));
        CHECK(pos == big && back[0] == r && back[24] == 7 * 24 + r);
        OK(MPI_Comm_free(&two));
        free(b);
    } else if (n >= 2) {
        MPI_Comm none;
        OK(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, r, &none));
    }
    kt_pass("bigcount");
    MPI_Finalize();
    return 0;
}
