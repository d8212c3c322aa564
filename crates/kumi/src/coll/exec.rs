//! Runs a [`Schedule`] from kumi-core on the engine: round by round, all
//! receives posted, then all sends, then (once everything of the round has
//! completed) the reductions in schedule order.
//!
//! The run is a plain state machine polled with `&mut Engine`, so a blocking
//! collective polls it from `wait_until` and a nonblocking one is polled by the
//! engine's `progress` from inside any kumi call — the same code either way, and
//! nothing of it needs the calling thread's stack.

use crate::engine::{Engine, ReqId};
use crate::error::{Error, Result};
use kumi_core::coll::{Apply, Schedule};
use kumi_core::matching::{Envelope, Pattern};
use std::sync::Arc;

/// Bytes with the alignment of any primitive (16), for temporaries and the
/// buffers nonblocking collectives own.
#[derive(Debug, Default)]
pub(crate) struct AlignedBuf {
    words: Vec<u128>,
    len: usize,
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf {
            words: vec![0; len.div_ceil(16)],
            len,
        }
    }

    pub fn from_bytes(b: &[u8]) -> AlignedBuf {
        let mut a = AlignedBuf::zeroed(b.len());
        a.bytes_mut().copy_from_slice(b);
        a
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

/// What a nonblocking collective makes of its owned buffer once complete
/// (takes the rank's share of it, puts blocks in rank order...).
pub(crate) type Finish = Box<dyn FnOnce(AlignedBuf) -> AlignedBuf + Send>;

/// `inout = in ⊕ inout` over aligned bytes of whole elements.
pub(crate) type ByteOp = Arc<dyn Fn(&[u8], &mut [u8]) + Send + Sync>;

/// Where the run's messages go: the communicator's collective context, this
/// collective's tag, and the world rank of each communicator rank.
pub(crate) struct Wire {
    pub ctx: u32,
    pub tag: i32,
    pub me: u32,
    pub members: Arc<[u32]>,
}

pub(crate) struct Run {
    sched: Schedule,
    wire: Wire,
    round: usize,
    posted: bool,
    reqs: Vec<ReqId>,
    /// Receive buffers of the current round's reductions (by receive index).
    temps: Vec<Option<AlignedBuf>>,
    work: *mut u8,
    /// Byte offset of each block; block b is `offsets[b]..offsets[b + 1]`.
    offsets: Vec<usize>,
    op: Option<ByteOp>,
    /// Storage the run owns (nonblocking collectives); `work` points into it.
    pub owned: Option<AlignedBuf>,
    /// Applied to `owned` at completion, before `wait` returns it.
    pub finish: Option<Finish>,
}

impl Run {
    /// A run over `work` (which the caller keeps valid and otherwise untouched
    /// until the run completes), split into blocks at `offsets`.
    pub fn new(
        sched: Schedule,
        wire: Wire,
        work: *mut u8,
        offsets: Vec<usize>,
        op: Option<ByteOp>,
    ) -> Run {
        Run {
            sched,
            wire,
            round: 0,
            posted: false,
            reqs: Vec::new(),
            temps: Vec::new(),
            work,
            offsets,
            op,
            owned: None,
            finish: None,
        }
    }

    /// A run that owns its working buffer (for nonblocking collectives).
    pub fn owning(
        sched: Schedule,
        wire: Wire,
        mut buf: AlignedBuf,
        offsets: Vec<usize>,
        op: Option<ByteOp>,
    ) -> Run {
        // The heap block of `buf.words` does not move when `buf` is moved.
        let work = buf.bytes_mut().as_mut_ptr();
        let mut r = Run::new(sched, wire, work, offsets, op);
        r.owned = Some(buf);
        r
    }

    /// The owned buffer at completion, after `finish`.
    pub fn result(&mut self) -> Option<AlignedBuf> {
        let b = self.owned.take()?;
        Some(match self.finish.take() {
            Some(f) => f(b),
            None => b,
        })
    }

    fn range(&self, blocks: &std::ops::Range<usize>) -> Result<(usize, usize)> {
        match (self.offsets.get(blocks.start), self.offsets.get(blocks.end)) {
            (Some(&a), Some(&b)) if a <= b => Ok((a, b - a)),
            _ => Err(Error::Protocol(format!(
                "collective schedule names blocks {blocks:?} of {}",
                self.offsets.len().saturating_sub(1)
            ))),
        }
    }

    /// Advances as far as possible; `true` once every round is done.
    pub fn poll(&mut self, e: &mut Engine) -> Result<bool> {
        loop {
            let Some(round) = self.sched.rounds.get(self.round) else {
                return Ok(true);
            };
            if !self.posted {
                self.posted = true;
                self.temps.clear();
                for rv in &round.recvs {
                    let (off, len) = self.range(&rv.blocks)?;
                    let pat = Pattern {
                        ctx: self.wire.ctx,
                        src: Some(rv.peer as u32),
                        tag: Some(self.wire.tag),
                    };
                    let id = if rv.apply == Apply::Put {
                        self.temps.push(None);
                        // SAFETY: `off + len` is within the working buffer
                        // (offsets come from the buffer's own length).
                        e.post_recv(pat, unsafe { self.work.add(off) }, len)?
                    } else {
                        let mut t = AlignedBuf::zeroed(len);
                        let p = t.bytes_mut().as_mut_ptr();
                        self.temps.push(Some(t));
                        // The AlignedBuf's heap block stays put in `temps`.
                        e.post_recv(pat, p, len)?
                    };
                    self.reqs.push(id);
                }
                for s in &round.sends {
                    let (off, len) = self.range(&s.blocks)?;
                    let env = Envelope {
                        ctx: self.wire.ctx,
                        src: self.wire.me,
                        tag: self.wire.tag,
                    };
                    let peer = self.wire.members[s.peer];
                    // SAFETY: as above; the schedule never receives into blocks it
                    // sends in the same round (checked by the core's simulator).
                    let ptr = unsafe { self.work.add(off) };
                    if let Some(id) = e.start_send(env, peer, ptr, len, false)? {
                        self.reqs.push(id);
                    }
                }
            }
            if !self.reqs.iter().all(|&id| e.is_done(id)) {
                return Ok(false);
            }
            let mut first_err = None;
            for id in self.reqs.drain(..) {
                if let Err(x) = e.take_result(id) {
                    first_err.get_or_insert(x);
                }
            }
            if let Some(x) = first_err {
                return Err(x);
            }
            // A posting error above leaves earlier requests of the round in
            // flight; `abort` settles them.
            let round = &self.sched.rounds[self.round];
            for (rv, t) in round.recvs.iter().zip(self.temps.iter_mut()) {
                let Some(t) = t else { continue };
                let (off, len) = match (
                    self.offsets.get(rv.blocks.start),
                    self.offsets.get(rv.blocks.end),
                ) {
                    (Some(&a), Some(&b)) if b > a => (a, b - a),
                    _ => continue, // nothing to combine
                };
                let Some(op) = &self.op else {
                    return Err(Error::Protocol(
                        "a reduction step in a collective without an operation".into(),
                    ));
                };
                // SAFETY: `off + len` is within the working buffer, which the
                // run's owner keeps valid and no message is writing now (every
                // request of the round has completed).
                let w = unsafe { std::slice::from_raw_parts_mut(self.work.add(off), len) };
                let t = t.bytes_mut();
                if rv.apply == Apply::ReduceLeft {
                    op(t, w); // w = received ⊕ w
                } else {
                    op(w, t); // t = w ⊕ received
                    w.copy_from_slice(t);
                }
            }
            self.temps.clear();
            self.round += 1;
            self.posted = false;
        }
    }

    /// After an error: cancels receives still pending (so nothing writes into
    /// the buffer later) and lets go of pending sends.
    pub fn abort(&mut self, e: &mut Engine) {
        for id in self.reqs.drain(..) {
            if e.is_done(id) {
                let _ = e.take_result(id);
            } else if !e.cancel_recv(id) {
                e.detach(id);
            } else {
                let _ = e.take_result(id);
            }
        }
    }
}
