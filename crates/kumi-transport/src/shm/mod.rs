//! The shared-memory transport: S-3000's one-way FIFO paths between the ranks of
//! one host. (Skeleton: bodies are being written; see the helper's notes.)

mod ring;
mod segment;

pub use segment::{RankBlock, Segment, SegmentInfo, ShmConfig};

use crate::{Sink, Transport};
use kumi_core::header::Header;
use std::io;
use std::time::Duration;

/// The shared-memory transport of one rank.
pub struct ShmTransport {
    _priv: (),
}

impl ShmTransport {
    /// The transport of local rank `me` over `segment`; `globals[i]` is the global
    /// rank of local rank `i`.
    pub fn new(segment: Segment, me: usize, globals: Vec<u32>) -> io::Result<ShmTransport> {
        let _ = (segment, me, globals);
        todo!()
    }

    /// The segment, for the rank's own block (call state, counters).
    pub fn segment(&self) -> &Segment {
        todo!()
    }
}

impl Transport for ShmTransport {
    fn name(&self) -> &'static str {
        "shm"
    }
    fn max_payload(&self) -> usize {
        todo!()
    }
    fn try_send(&mut self, peer: u32, header: &Header, payload: &[u8]) -> io::Result<bool> {
        let _ = (peer, header, payload);
        todo!()
    }
    fn poll(&mut self, sink: &mut Sink<'_>) -> io::Result<usize> {
        let _ = sink;
        todo!()
    }
    fn prepare_sleep(&mut self) -> bool {
        todo!()
    }
    fn sleep(&mut self, timeout: Duration) {
        let _ = timeout;
        todo!()
    }
    fn cancel_sleep(&mut self) {
        todo!()
    }
}
