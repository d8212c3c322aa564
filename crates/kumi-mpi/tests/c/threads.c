/* Concern: thread levels. MPI_Init_thread asking for MPI_THREAD_SERIALIZED
 * gets it: a second thread makes the MPI calls (a ring exchange and a
 * collective) while the main thread waits, then the main thread again;
 * MPI_Query_thread and MPI_Is_thread_main answer. With the argument
 * "overlap", rank 0's second thread calls MPI while its main thread is
 * inside MPI_Recv, which must end the job naming the rule (the test driver
 * checks the message). The other arguments make the calls the library must
 * refuse, each ending the job with its reason: "funneled", a second thread's
 * call under MPI_THREAD_FUNNELED (MPI_Init); "early", a send before
 * MPI_Init; "late", a send after MPI_Finalize. */
#include "kt.h"
#include <pthread.h>
#include <unistd.h>

static int worker_ok;

static void *worker(void *arg) {
    (void)arg;
    int r = kt_rank(), n = kt_size(), main_flag = 1;
    OK(MPI_Is_thread_main(&main_flag));
    CHECK(!main_flag);
    int got = -1;
    OK(MPI_Sendrecv(&r, 1, MPI_INT, (r + 1) % n, 4, &got, 1, MPI_INT, (r + n - 1) % n, 4,
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(got == (r + n - 1) % n);
    int sum = 0;
    OK(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == n * (n - 1) / 2);
    worker_ok = 1;
    return NULL;
}

static void *intruder(void *arg) {
    (void)arg;
    usleep(100000); /* rank 0's main thread is inside MPI_Recv by now */
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    printf("NOT REACHED\n");
    return NULL;
}

static void *outsider(void *arg) {
    (void)arg;
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    printf("NOT REACHED\n");
    return NULL;
}

/* The refused calls (see the top); returns only if `mode` is none of them. */
static void refused(const char *mode, int argc, char **argv) {
    int x = 1;
    if (strcmp(mode, "early") == 0) {
        MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        printf("NOT REACHED\n");
        exit(0);
    }
    if (strcmp(mode, "funneled") == 0 || strcmp(mode, "late") == 0) {
        OK(MPI_Init(&argc, &argv));
        int r = kt_rank();
        if (mode[0] == 'f') {
            if (r == 0) {
                pthread_t t;
                CHECK(pthread_create(&t, NULL, outsider, NULL) == 0);
                pthread_join(t, NULL);
            }
            OK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_Finalize();
            exit(0);
        }
        MPI_Finalize();
        MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        printf("NOT REACHED\n");
        exit(0);
    }
}

int main(int argc, char **argv) {
    int provided, q, main_flag;
    if (argc > 1) refused(argv[1], argc, argv);
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided));
    CHECK(provided == MPI_THREAD_SERIALIZED);
    OK(MPI_Query_thread(&q));
    CHECK(q == MPI_THREAD_SERIALIZED);
    OK(MPI_Is_thread_main(&main_flag));
    CHECK(main_flag);
    int r = kt_rank(), n = kt_size();
    if (argc > 1 && strcmp(argv[1], "overlap") == 0) {
        if (n > 1 && r == 0) {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, intruder, NULL) == 0);
            int x;
            MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            pthread_join(t, NULL);
        } else if (r == 1) {
            sleep(2);
            MPI_Send(&r, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
        MPI_Finalize();
        return 0;
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(worker_ok);
    /* The main thread carries on after the worker. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    kt_pass("threads");
    MPI_Finalize();
    return 0;
}
