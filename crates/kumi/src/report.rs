//! What a rank reports about itself: its counters (statistics, the monitor,
//! the deadlock detector's message counts) and what it is blocked in. A leaf:
//! the engine fills them, the supervision (`watch`) sends them.

use kumi_core::call::Call;
use std::panic::Location;

/// What a rank is blocked in, for reports: the call, its communicator, peer
/// and tag, and where in the user's program it was made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitInfo {
    pub call: Call,
    /// Point-to-point context id of the communicator (`u32::MAX`: none).
    pub ctx: u32,
    /// Peer's rank in that communicator, `ANY_SOURCE` (-1), or -2 for none.
    pub peer: i32,
    /// Tag, `ANY_TAG` (-1), or -2 for none.
    pub tag: i32,
    /// The user's call site (`#[track_caller]`).
    pub at: &'static Location<'static>,
    /// World rank of the one rank whose message the wait is for (`u32::MAX`:
    /// none, any, or not known): ranks bound to cores publish it when they
    /// wait ([`Engine::wait_until_with_mates`]).
    pub world: u32,
}

impl WaitInfo {
    /// A wait with no communicator, peer or tag (wait on a request, finalize).
    #[track_caller]
    pub fn plain(call: Call) -> WaitInfo {
        WaitInfo {
            call,
            ctx: u32::MAX,
            peer: -2,
            tag: -2,
            at: Location::caller(),
            world: u32::MAX,
        }
    }
}

/// Per-rank counters, for statistics and the monitor.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Messages sent (eager and rendezvous), counting sends to self.
    pub msgs_sent: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Messages received (matched).
    pub msgs_recv: u64,
    /// Payload bytes received.
    pub bytes_recv: u64,
    /// Progress passes that moved something on the progress thread, while
    /// the application computed.
    pub async_passes: u64,
    /// Frames of any kind that arrived (data chunks and replies included):
    /// a wait during which they keep coming is moving, not stuck.
    pub frames_in: u64,
    /// Rounds of nonblocking collectives through the shared-memory area
    /// completed here (each needs every member it reads from): like
    /// `frames_in`, a wait during which they keep coming is moving, though
    /// no message counter changes.
    pub area_rounds: u64,
    /// Chunks of long messages this rank pushed into a transport: like
    /// `frames_in`, a wait during which they keep going is moving (a
    /// sender whose ring is full waits for its receiver to drain it).
    pub chunks_out: u64,
    /// Per world peer: messages and bytes sent to it (counted when the send
    /// starts) and arrived from it (counted when the first frame of the message
    /// arrives, matched or not); the internal messages of collectives apart.
    /// The deadlock detector compares the two ends.
    pub peers: Vec<kumi_core::deadlock::PeerCount>,
}
