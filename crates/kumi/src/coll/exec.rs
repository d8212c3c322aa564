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
        let n = len.div_ceil(16);
        if let Some(mut words) = spare::take(n) {
            words.clear();
            words.resize(n, 0);
            return AlignedBuf { words, len };
        }
        AlignedBuf {
            words: vec![0; n],
            len,
        }
    }

    /// `len` bytes whose contents do not matter (the caller overwrites
    /// them all): a kept buffer is not cleared first. Its bytes are those
    /// of an earlier use, never uninitialized memory.
    pub fn scratch(len: usize) -> AlignedBuf {
        let n = len.div_ceil(16);
        if let Some(mut words) = spare::take(n) {
            words.truncate(n);
            words.resize(n, 0);
            return AlignedBuf { words, len };
        }
        AlignedBuf::zeroed(len)
    }

    /// A copy of `v`'s bytes.
    pub fn of<T: bytemuck::Pod>(v: &[T]) -> AlignedBuf {
        AlignedBuf::from_bytes(bytemuck::cast_slice(v))
    }

    pub fn from_bytes(b: &[u8]) -> AlignedBuf {
        let mut a = AlignedBuf::zeroed(b.len());
        a.bytes_mut().copy_from_slice(b);
        a
    }

    /// The first byte, as a `T` (aligned for any primitive).
    pub fn as_ptr<T>(&self) -> *const T {
        self.words.as_ptr().cast()
    }

    /// The first byte, writable, as a `T` (aligned for any primitive).
    pub fn as_mut_ptr<T>(&mut self) -> *mut T {
        self.words.as_mut_ptr().cast()
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        spare::give(std::mem::take(&mut self.words));
    }
}

/// Large buffers kept after use, per thread, for the next of about their
/// size. glibc hands a freed block of a megabyte back to the kernel, so a
/// fresh one costs a page fault per page on first touch; zeroing a kept one
/// is a memset. (Measured: docs/BENCHMARKS.md, session 39.)
mod spare {
    use std::cell::RefCell;

    /// Smallest buffer kept, in 16-byte words (64 KiB).
    const MIN: usize = 4096;
    /// Words kept in all, per thread (64 MiB): a long collective holds
    /// three or four buffers of its size at once (an owned copy, a work
    /// copy, receive temporaries), all of which must fit for an 8 MiB one
    /// (measured: docs/BENCHMARKS.md, session 49).
    const MOST: usize = 1 << 22;

    thread_local! {
        static KEPT: RefCell<Vec<Vec<u128>>> = const { RefCell::new(Vec::new()) };
    }

    /// A kept buffer of room for `n` words but not more than twice that.
    pub(super) fn take(n: usize) -> Option<Vec<u128>> {
        if n < MIN {
            return None;
        }
        KEPT.try_with(|k| {
            let mut k = k.borrow_mut();
            let i = k
                .iter()
                .position(|w| w.capacity() >= n && w.capacity() <= 2 * n)?;
            Some(k.swap_remove(i))
        })
        .ok()
        .flatten()
    }

    /// Keeps `w` if it is large and there is room; else frees it.
    pub(super) fn give(w: Vec<u128>) {
        let c = w.capacity();
        if !(MIN..=MOST).contains(&c) {
            return;
        }
        // During the thread's teardown the store is gone: `w` is freed.
        let _ = KEPT.try_with(|k| {
            let mut k = k.borrow_mut();
            let held: usize = k.iter().map(Vec::capacity).sum();
            if held + c <= MOST {
                k.push(w);
            }
        });
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

/// Where a run's blocks are.
pub(crate) enum Blocks {
    /// One buffer: block b is bytes `offsets[b]..offsets[b + 1]` of `base`.
    Split { base: *mut u8, offsets: Vec<usize> },
    /// Each block where it lies, `(start, bytes)`: a collective that moves
    /// data straight between the caller's buffers (a range of several
    /// blocks must then be one span of memory).
    Each(Vec<(*mut u8, usize)>),
}

impl Blocks {
    /// The memory of blocks `r`: start and length.
    fn span(&self, r: &std::ops::Range<usize>) -> Result<(*mut u8, usize)> {
        let bad =
            |n: usize| Error::Protocol(format!("collective schedule names blocks {r:?} of {n}"));
        match self {
            Blocks::Split { base, offsets } => match (offsets.get(r.start), offsets.get(r.end)) {
                // `wrapping_add`: the pointer is only used for messages
                // within the buffer (the offsets come from its length).
                (Some(&a), Some(&b)) if a <= b => Ok((base.wrapping_add(a), b - a)),
                _ => Err(bad(offsets.len().saturating_sub(1))),
            },
            Blocks::Each(v) => {
                let blocks = v.get(r.clone()).ok_or_else(|| bad(v.len()))?;
                let Some(&(start, _)) = blocks.first() else {
                    return Ok((std::ptr::null_mut(), 0));
                };
                let mut len = 0usize;
                for &(p, n) in blocks {
                    if p as usize != start as usize + len {
                        return Err(Error::Protocol(format!(
                            "collective schedule names blocks {r:?}, which are not one span"
                        )));
                    }
                    len += n;
                }
                Ok((start, len))
            }
        }
    }
}

pub(crate) struct Run {
    sched: Schedule,
    wire: Wire,
    round: usize,
    posted: bool,
    reqs: Vec<ReqId>,
    /// Receive buffers of the current round's reductions (by receive index).
    temps: Vec<Option<AlignedBuf>>,
    blocks: Blocks,
    op: Option<ByteOp>,
    /// Storage the run owns (nonblocking collectives); `blocks` point into it.
    pub owned: Option<AlignedBuf>,
    /// Applied to `owned` at completion, before `wait` returns it.
    pub finish: Option<Finish>,
    /// Sends longer than this go by rendezvous whatever the eager limit
    /// ([`Engine::start_send_upto`]).
    pub eager_max: usize,
}

impl Run {
    /// A run over `blocks` (which the caller keeps valid and otherwise
    /// untouched until the run completes; blocks it only sends from are
    /// only read).
    pub fn new(sched: Schedule, wire: Wire, blocks: Blocks, op: Option<ByteOp>) -> Run {
        Run {
            sched,
            wire,
            round: 0,
            posted: false,
            reqs: Vec::new(),
            temps: Vec::new(),
            blocks,
            op,
            owned: None,
            finish: None,
            eager_max: usize::MAX,
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
        let base = buf.bytes_mut().as_mut_ptr();
        let mut r = Run::new(sched, wire, Blocks::Split { base, offsets }, op);
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
                    let (ptr, len) = self.blocks.span(&rv.blocks)?;
                    let pat = Pattern {
                        ctx: self.wire.ctx,
                        src: Some(rv.peer as u32),
                        tag: Some(self.wire.tag),
                    };
                    let id = if rv.apply == Apply::Put {
                        self.temps.push(None);
                        // `ptr..ptr + len` is the blocks' memory, which the
                        // run's owner keeps valid for it.
                        e.post_recv(pat, ptr, len)?
                    } else {
                        // Filled by the message whole (checked below).
                        let mut t = AlignedBuf::scratch(len);
                        let p = t.bytes_mut().as_mut_ptr();
                        self.temps.push(Some(t));
                        // The AlignedBuf's heap block stays put in `temps`.
                        e.post_recv(pat, p, len)?
                    };
                    self.reqs.push(id);
                }
                for s in &round.sends {
                    let (ptr, len) = self.blocks.span(&s.blocks)?;
                    let env = Envelope {
                        ctx: self.wire.ctx,
                        src: self.wire.me,
                        tag: self.wire.tag,
                    };
                    let peer = self.wire.members[s.peer];
                    // As above; the schedule never receives into blocks it
                    // sends in the same round (checked by the core's simulator).
                    if let Some(id) =
                        e.start_send_upto(env, peer, ptr, len, false, self.eager_max)?
                    {
                        self.reqs.push(id);
                    }
                }
            }
            if !self.reqs.iter().all(|&id| e.is_done(id)) {
                return Ok(false);
            }
            let mut first_err = None;
            for (i, id) in self.reqs.drain(..).enumerate() {
                match (e.take_result(id), self.temps.get(i)) {
                    (Err(x), _) => {
                        first_err.get_or_insert(x);
                    }
                    // A reduction's receive (the first requests are the
                    // round's receives, in order): the message must fill its
                    // buffer, or the fold would read an earlier use's bytes.
                    (Ok(st), Some(Some(t))) if st.bytes != t.bytes().len() => {
                        first_err.get_or_insert(Error::Protocol(format!(
                            "a collective's message of {} bytes where {} were expected \
                             (the ranks' counts differ)",
                            st.bytes,
                            t.bytes().len()
                        )));
                    }
                    _ => {}
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
                let (ptr, len) = match self.blocks.span(&rv.blocks) {
                    Ok((p, n)) if n > 0 => (p, n),
                    _ => continue, // nothing to combine
                };
                let Some(op) = &self.op else {
                    return Err(Error::Protocol(
                        "a reduction step in a collective without an operation".into(),
                    ));
                };
                // SAFETY: `ptr..ptr + len` is the blocks' memory, which the
                // run's owner keeps valid and no message is writing now (every
                // request of the round has completed).
                let w = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
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
