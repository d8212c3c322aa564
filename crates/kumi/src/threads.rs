//! `MPI_THREAD_MULTIPLE`: many application threads call the runtime, one at
//! a time inside, and a thread that waits lets the others in.
//!
//! The runtime is single-threaded by construction (a [`crate::Comm`] is not
//! `Send`: its objects are counted without atomics, the engine has one owner
//! thread). A library above it that lets several threads call (the C
//! library, for `MPI_THREAD_MULTIPLE`) makes them take turns, each turn
//! ordered after the last by an Acquire/Release pair, so that to the runtime
//! they look like one thread. A turn cannot last a whole blocking call,
//! though: a thread waiting for a message another thread of its rank is
//! about to send would wait for ever. So that library registers a
//! *hand-over* here ([`set_hand_over`]), and every wait of a blocking call
//! calls it between two passes of the engine, with nothing of the engine
//! borrowed (the wait holds only the engine's lock guard, which it leaves for
//! the length of the call: see `progress::Guard::wait_until`). The hand-over
//! gives the turn to a waiting thread, if any, and takes it back.
//!
//! Without a hand-over (every job that does not ask for
//! `MPI_THREAD_MULTIPLE`), waits are the engine's own
//! (`engine::WaitPolicy`) and cost one load more per blocking call.
//!
//! While hand-overs are on, waits are not reported to the launcher as
//! blocked: a rank with one thread waiting may have another computing, and
//! the deadlock detector, which sees ranks and not threads, would take two
//! such ranks waiting for each other for a deadlock.

use std::sync::OnceLock;

/// Gives the turn away between two passes of a wait, and takes it back:
/// `idle` counts the passes in a row that moved nothing (0 after one that
/// did), for the hand-over's back-off.
pub type HandOver = fn(idle: u32);

static HAND_OVER: OnceLock<HandOver> = OnceLock::new();

/// Turns hand-overs on for the rest of the process (at `MPI_Init_thread`
/// with `MPI_THREAD_MULTIPLE`). A second call changes nothing.
pub fn set_hand_over(f: HandOver) {
    let _ = HAND_OVER.set(f);
}

/// The hand-over, when several threads may call.
#[inline(always)]
pub(crate) fn hand_over() -> Option<HandOver> {
    HAND_OVER.get().copied()
}

/// Whether several threads may call (see [`set_hand_over`]).
pub fn multiple() -> bool {
    hand_over().is_some()
}
