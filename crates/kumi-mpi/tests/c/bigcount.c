/* Concern: MPI 4's large counts beyond 2^31 - 1. Regression: the `_c`
 * functions refused any count above an int, and a status could not hold
 * 2^62 elements. A message of 2^31 + 100 bytes goes from rank 0 to rank 1
 * (MPI_Send_c / MPI_Irecv_c) and back by broadcast (MPI_Bcast_c); its
 * count reads back with MPI_Get_count_c; statuses hold 2^62 bytes. */
#include "kt.h"
#include <stdint.h>

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
