/* kumi.h: kumi's own services for C programs linked with kumi's libmpi.
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

#ifdef __cplusplus
}
#endif

#endif /* KUMI_H */
