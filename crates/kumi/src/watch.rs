//! Supervision hooks: what a rank tells its launcher about long waits.
//!
//! The engine calls [`Watch::waiting`] from its wait loop once the wait has gone
//! on for more than a few microseconds (never on the fast path), and
//! [`Watch::wait_ended`] when any wait ends. This module decides when a wait is
//! long enough to report and what to send; reporting costs nothing until then.

use crate::engine::{Counters, WaitInfo};
use std::time::Instant;

/// Per-rank supervision state.
#[derive(Debug, Default)]
pub(crate) struct Watch {}

impl Watch {
    /// A watch that reports nothing (singletons, tests).
    pub fn disabled() -> Watch {
        Watch {}
    }

    /// The rank has waited in `info` since `start`; `now` is the current time.
    #[inline]
    pub fn waiting(&mut self, info: &WaitInfo, start: Instant, now: Instant, counters: &Counters) {
        let _ = (info, start, now, counters);
    }

    /// The current wait ended.
    #[inline]
    pub fn wait_ended(&mut self) {}
}
