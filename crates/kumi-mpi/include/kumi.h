/* kumi.h: kumi's own services for C programs linked with kumi's libmpi:
 * checkpoint and restart, and distributed shared memory (below the
 * checkpoint calls). A program may use them with MPI or without it.
 *
 * Checkpoint and restart (see the README, "Checkpoint and restart"): the
 * program registers what its state is, then takes checkpoints at consistent
 * points of its choosing; `kumi run --checkpoint-dir DIR --max-restarts N`
 * restarts a failed job from the newest complete one by itself.
 *
 *     double u[N]; long step = 0;
 *     kumi_ckpt_register(u, sizeof u);
 *     kumi_ckpt_register(&step, sizeof step);
 *     int restarted;
 *     kumi_ckpt_restore(&restarted);        // state read back if restarting
 *     for (; step < STEPS; step++) {
 *         ... compute, communicate ...
 *         int due;
 *         kumi_ckpt_due(&due);
 *         if (due) kumi_ckpt_save();
 *     }
 *
 * kumi_ckpt_due, kumi_ckpt_save and kumi_ckpt_restore are collective over
 * MPI_COMM_WORLD and return the same result on every rank; registered state
 * must stay where it is, and callbacks must not call MPI. Errors are reported through
 * MPI_COMM_WORLD's error handler (fatal by default) with a sentence naming
 * the file and the cause; with MPI_ERRORS_RETURN they return MPI_ERR_OTHER.
 * A checkpoint is complete only when every rank's part is on disk (flushed,
 * checksummed) and its manifest is committed; until then the previous
 * complete checkpoint stays.
 */
#ifndef KUMI_H
#define KUMI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A part of a checkpoint being written or read, for callbacks. */
typedef struct kumi_ckpt_stream kumi_ckpt_stream;

/* Adds `bytes` bytes at `base` to this rank's state (saved and restored in
 * the order of registration). */
int kumi_ckpt_register(void *base, size_t bytes);

/* Adds structured state: `write` puts it into the part with
 * kumi_ckpt_write, `read` takes it back with kumi_ckpt_read, in the same
 * order; each returns 0 on success, anything else fails the checkpoint or
 * the restore. Called in order of registration, among the regions. */
int kumi_ckpt_register_io(int (*write)(kumi_ckpt_stream *s, void *arg),
                          int (*read)(kumi_ckpt_stream *s, void *arg), void *arg);
int kumi_ckpt_write(kumi_ckpt_stream *s, const void *data, size_t bytes);
int kumi_ckpt_read(kumi_ckpt_stream *s, void *data, size_t bytes);

/* *flag = 1 when a checkpoint is due (`kumi run --checkpoint-every`, by
 * rank 0's clock); 0 when not, or when the job does not checkpoint. */
int kumi_ckpt_due(int *flag);

/* Takes a checkpoint of every rank's registered state. Without a checkpoint
 * directory (the job was not run with --checkpoint-dir) it does nothing, so
 * a program runs unchanged either way. */
int kumi_ckpt_save(void);

/* *flag = 1 when this run resumes a checkpoint (kumi_ckpt_restore will
 * read one back); not collective. */
int kumi_ckpt_restarting(int *flag);

/* When restarting, reads every rank's registered state back from the newest
 * checkpoint whose every part verifies, and sets *restored = 1 (else 0 and
 * nothing is read). `restored` may be NULL. */
int kumi_ckpt_restore(int *restored);

/* The epoch of the last checkpoint saved or restored by this run, 0 if none. */
int kumi_ckpt_epoch(long long *epoch);

/* ------------------------------------------------------------------------
 * Distributed shared memory (see the README, "Distributed shared memory").
 *
 * A program without MPI calls kumi_init first and kumi_finalize last, and
 * passes KUMI_WORLD where a communicator is asked for; with MPI, any
 * intra-communicator (an MPI_Comm) may be passed. Allocations and frees are
 * collective over their communicator. Every call returns 0 (MPI_SUCCESS)
 * or, under MPI_ERRORS_RETURN, an MPI error class; errors go through
 * MPI_COMM_WORLD's error handler (fatal by default, with a sentence naming
 * the call and what was wrong: an index outside the array names the array
 * and the range).
 *
 * Memory model: release consistency. Writes made before an unlock or a
 * barrier are visible to a rank after its next lock of that lock, or after
 * the same barrier.
 */

#define KUMI_WORLD 0x44000000 /* MPI_COMM_WORLD */

int kumi_init(int *argc, char ***argv); /* MPI_Init, unless MPI runs */
int kumi_finalize(void);                /* MPI_Finalize, if kumi_init began it */
int kumi_rank(int *rank);               /* in the world */
int kumi_size(int *size);

/* DSE's global arrays: elements dealt to the ranks, read and written by
 * global index from any rank. Elements on this host are plain memory every
 * rank of the host maps; others are reached through their owner's engine,
 * which serves them while the owner computes. */
typedef struct kumi_array_s *kumi_array;
enum kumi_type { KUMI_INT32 = 1, KUMI_UINT32, KUMI_INT64, KUMI_UINT64, KUMI_FLOAT, KUMI_DOUBLE };
enum kumi_dist {
    KUMI_BLOCK = 1, /* consecutive blocks, as even as they can be */
    KUMI_CYCLIC,    /* blocks of `block` elements dealt round-robin */
    KUMI_OWNED      /* this rank holds `len` elements; the array is the sum */
};
enum kumi_op {
    KUMI_OP_SUM = 1, KUMI_OP_PROD, KUMI_OP_MIN, KUMI_OP_MAX, KUMI_OP_BAND,
    KUMI_OP_BOR, KUMI_OP_BXOR, KUMI_OP_REPLACE, KUMI_OP_NO_OP
};
/* `len` elements of `type` (enum kumi_type), one lock per rank. */
int kumi_array_alloc(int comm, size_t len, int type, int dist, size_t block, kumi_array *a);
int kumi_array_free(kumi_array *a); /* after a barrier; *a becomes NULL */
int kumi_array_len(kumi_array a, size_t *len);
/* Elements [start, start + count) into `out` / from `data`. A write returns
 * at once and is complete at the next fence, unlock or barrier;
 * kumi_array_write_sync returns once the owners hold it (DSE's writeS). */
int kumi_array_read(kumi_array a, size_t start, size_t count, void *out);
int kumi_array_write(kumi_array a, size_t start, size_t count, const void *data);
int kumi_array_write_sync(kumi_array a, size_t start, size_t count, const void *data);
/* Atomic at the owner: element = *value op element; *old (if not NULL)
 * gets the element as it was. */
int kumi_array_fetch_op(kumi_array a, size_t i, int op, const void *value, void *old);
/* Element becomes *desired if it equals *expected; *old gets what it was. */
int kumi_array_cas(kumi_array a, size_t i, const void *expected, const void *desired, void *old);
int kumi_array_fence(kumi_array a);   /* this rank's writes complete */
int kumi_array_barrier(kumi_array a); /* every rank's writes complete; all wait */
/* Global locks (FIFO; not recursive); a cycle of waits is reported by
 * kumi run as a deadlock naming the locks and their holders. */
int kumi_array_lock(kumi_array a, unsigned lock);
int kumi_array_unlock(kumi_array a, unsigned lock);
/* This rank's part as memory, and the global index of its element `local`. */
int kumi_array_local(kumi_array a, void **base, size_t *count);
int kumi_array_global(kumi_array a, size_t local, size_t *global);

/* SCASH's page-shared segments: `bytes` bytes (zero at first) that every
 * rank maps at *base and uses with plain loads and stores; pages come from
 * their home rank on first touch and are made coherent at locks and
 * barriers. Touch a segment only from the thread that made it, and not
 * inside an MPI or kumi call (pass a copy). */
typedef struct kumi_shared_s *kumi_shared;
int kumi_shared_alloc(int comm, size_t bytes, kumi_shared *s, void **base);
int kumi_shared_free(kumi_shared *s); /* after a barrier; *s becomes NULL */
int kumi_shared_lock(kumi_shared s, unsigned lock); /* one lock per rank */
int kumi_shared_unlock(kumi_shared s, unsigned lock);
int kumi_shared_barrier(kumi_shared s);

/* DSE's task queue: one FIFO of items of `item_bytes` bytes, pushed and
 * popped anywhere. A pop says this rank has no work of its own left; when
 * every rank waits in one with nothing queued, every pop returns *got = 0:
 * the work is over (and pushes fail from then on). */
typedef struct kumi_tasks_s *kumi_tasks;
int kumi_tasks_create(int comm, size_t item_bytes, kumi_tasks *q);
int kumi_tasks_push(kumi_tasks q, const void *item);
int kumi_tasks_pop(kumi_tasks q, void *item, int *got);
int kumi_tasks_free(kumi_tasks *q); /* after a barrier; *q becomes NULL */

#ifdef __cplusplus
}
#endif

#endif /* KUMI_H */
