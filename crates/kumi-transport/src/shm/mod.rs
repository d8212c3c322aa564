//! The shared-memory transport: S-3000's one-way FIFO paths between the ranks of
//! one host.
//!
//! - [`segment`](Segment): one mapping per job per host: a header, one
//!   [`RankBlock`] per local rank (doorbell, sleep flag, progress bell, call
//!   state, owner), and one ring per ordered pair of local ranks.
//! - `senders`: which local ranks have ever sent to a rank, so that its polls
//!   visit only those rings (model-checked with the sleep protocol).
//! - `ring`: the single-producer/single-consumer byte ring; its module doc argues
//!   for in-band stamps, the cached tail and batched tail publication.
//! - [`coll_area`]: the collective areas of the segment, where the ranks of one
//!   host combine barriers, reductions and broadcasts through shared memory.
//! - [`wordlock`]: reader-writer and mutex locks that are single words of a
//!   mapping, for one-sided windows (model-checked).
//! - [`ShmTransport`]: the [`Transport`](crate::Transport) of one rank: it
//!   produces into rings `[me][j]` and consumes rings `[j][me]`, and sleeps on
//!   its doorbell when the runtime asks it to.
//!
//! Under `--cfg loom` only the ring, the sender sets and the area protocol (over heaps of
//! atomics) are compiled: mapped
//! memory and futexes are not something the model checker can run.

#[cfg_attr(loom, allow(dead_code))]
pub mod coll_area;
mod ring;
#[cfg(not(loom))]
mod segment;
#[cfg_attr(loom, allow(dead_code))]
mod senders;
#[cfg(not(loom))]
mod transport;
pub mod wordlock;

pub use ring::{max_payload, RECORD_ALIGN, RECORD_OVERHEAD, RING_CONTROL_BYTES};
#[cfg(not(loom))]
pub use segment::{
    named_path_prefix, owner_alive, process_start_time, RankBlock, Segment, SegmentInfo, ShmConfig,
    AWAITS_NOTHING, AWAITS_OTHER, DEFAULT_RING, HEADER_PAGE, JOB_MAX, MAGIC, MAX_LOCAL_SIZE,
    MAX_RING, MIN_RING, RANK_BLOCK_BYTES, STATE_ATTACHED, STATE_EMPTY, STATE_FINALIZED, VERSION,
};
#[cfg(not(loom))]
pub use transport::ShmTransport;
