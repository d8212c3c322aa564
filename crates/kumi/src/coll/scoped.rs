//! Nonblocking collectives on borrowed buffers.
//!
//! The owned forms ([`Comm::iallgather`]...) take a vector and give one
//! back, which costs an allocation and a copy of every result (and, for
//! blocks of a megabyte, the kernel's zeroing of fresh pages on every call).
//! These take slices of the program's own memory, as MPI does, and move the
//! data straight between them. What makes that sound is the same
//! [`crate::scope`] as for point-to-point requests on borrowed buffers: a
//! collective can only be started inside one, on buffers borrowed for the
//! whole scope, and the scope does not end before every collective started
//! in it has completed, waited for or not (a request dropped or leaked with
//! `mem::forget` included). So no collective writes into a buffer after its
//! borrow ends.

use super::{byte_segments, equal_segments, CollRequest, Comm, Op};
use crate::error::{Error, Result};
use crate::request::{CollList, Scope};
use bytemuck::Pod;

/// A nonblocking collective on borrowed buffers, in flight. Dropping it
/// leaves it to its [`Scope`], which waits for it at its end.
#[must_use = "a nonblocking collective must be waited on (or its scope waits)"]
pub struct ScopedRequest<'a> {
    /// Its scope's list, where it stays until waited for.
    started: &'a CollList,
    slot: usize,
}

impl ScopedRequest<'_> {
    /// Makes progress once; `true` when the collective has completed.
    pub fn test(&mut self) -> Result<bool> {
        let mut v = self.started.borrow_mut();
        match v.get_mut(self.slot).and_then(Option::as_mut) {
            Some(r) => r.test(),
            None => Ok(true),
        }
    }

    /// Blocks until the collective completes; its results are then in the
    /// receive buffers (readable once the scope ends, which holds their
    /// borrow).
    #[track_caller]
    pub fn wait(self) -> Result<()> {
        let r = self
            .started
            .borrow_mut()
            .get_mut(self.slot)
            .and_then(Option::take);
        match r {
            Some(r) => r.wait().map(drop),
            None => Ok(()),
        }
    }
}

/// Keeps `r` in `s` until it is waited for or the scope ends.
fn keep<'a>(s: &'a Scope<'_>, r: CollRequest<u8>) -> ScopedRequest<'a> {
    let started = s.colls();
    let mut v = started.borrow_mut();
    v.push(Some(r));
    ScopedRequest {
        started,
        slot: v.len() - 1,
    }
}

/// Bytes of a slice, as a segment.
fn seg<T: Pod>(b: &[T]) -> (*const u8, usize) {
    (b.as_ptr().cast(), std::mem::size_of_val(b))
}

/// `b` split into `p` segments of `n` bytes each.
fn split<T: Pod>(b: &[T], p: usize, n: usize) -> Vec<(*const u8, usize)> {
    let base = b.as_ptr().cast::<u8>();
    (0..p).map(|j| (base.wrapping_add(j * n), n)).collect()
}

/// `b` split into `p` writable segments of `n` bytes each.
fn split_mut<T: Pod>(b: &mut [T], p: usize, n: usize) -> Vec<(*mut u8, usize)> {
    let base = b.as_mut_ptr().cast::<u8>();
    (0..p).map(|j| (base.wrapping_add(j * n), n)).collect()
}

/// `b` split into writable segments of `counts[j]` elements each, one
/// after the other.
pub(super) fn segments_mut<T: Pod>(b: &mut [T], counts: &[usize]) -> Vec<(*mut u8, usize)> {
    let elem = std::mem::size_of::<T>();
    byte_segments(
        b.as_mut_ptr().cast::<u8>(),
        counts,
        elem,
        <*mut u8>::wrapping_add,
    )
}

/// `b` split into segments of `counts[j]` elements each.
pub(super) fn segments<T: Pod>(b: &[T], counts: &[usize]) -> Vec<(*const u8, usize)> {
    let elem = std::mem::size_of::<T>();
    byte_segments(
        b.as_ptr().cast::<u8>(),
        counts,
        elem,
        <*const u8>::wrapping_add,
    )
}

/// Checks that argument `what` holds the sum of `counts` elements.
pub(super) fn sum_of(what: &'static str, len: usize, counts: &[usize]) -> Result<()> {
    let sum: usize = counts.iter().sum();
    if len == sum {
        return Ok(());
    }
    Err(Error::invalid(
        what,
        len as i64,
        format!("the sum of the counts, {sum} elements"),
    ))
}

/// Checks that argument `what` holds as many elements as `send`.
fn as_long(what: &'static str, len: usize, send: usize) -> Result<()> {
    if len == send {
        return Ok(());
    }
    let want = format!("the length of send, {send} elements");
    Err(Error::invalid(what, len as i64, want))
}

/// Checks that argument `what` holds `size() * other` elements (`other`:
/// the other argument's name and length).
fn size_times(what: &'static str, len: usize, p: usize, other: (&str, usize)) -> Result<()> {
    if len == p * other.1 {
        return Ok(());
    }
    let want = format!("size() * {}.len() = {} elements", other.0, p * other.1);
    Err(Error::invalid(what, len as i64, want))
}

impl Comm {
    /// Starts an allgather into `recv` (every rank's `send` in rank order,
    /// `size() * send.len()` elements), on the buffers themselves
    /// ([`crate::scope`]).
    #[track_caller]
    pub fn iallgather_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
    ) -> Result<ScopedRequest<'a>> {
        let p = self.size();
        size_times("recv", recv.len(), p, ("send", send.len()))?;
        let segs = equal_segments(
            recv.as_mut_ptr().cast::<u8>(),
            p,
            size_of_val(send),
            <*mut u8>::wrapping_add,
        );
        // SAFETY: as in `iallgatherv_into`: the segments split `recv`.
        let r = unsafe { self.iallgatherv_segments(seg(send), segs) }?;
        Ok(keep(s, r))
    }

    /// Starts an alltoall: block j of `send` (`send.len() / size()`
    /// elements) goes to rank j, block i of `recv` comes from rank i
    /// ([`crate::scope`]).
    #[track_caller]
    pub fn ialltoall_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
    ) -> Result<ScopedRequest<'a>> {
        let p = self.size();
        if !send.len().is_multiple_of(p) || recv.len() != send.len() {
            let want = format!("a multiple of size() = {p}, with recv of the same length");
            return Err(Error::invalid("send", send.len() as i64, want));
        }
        let n = std::mem::size_of_val(send) / p;
        let (sends, recvs) = (split(send, p, n), split_mut(recv, p, n));
        // SAFETY: as in `iallgatherv_into`; `send`'s blocks are only read.
        let r = unsafe { self.ialltoall_segments(&sends, &recvs) }?;
        Ok(keep(s, r))
    }

    /// Starts a broadcast of the root's `buf` into every rank's `buf` (the
    /// same length everywhere; [`crate::scope`]).
    #[track_caller]
    pub fn ibcast_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        buf: &'s mut [T],
        root: usize,
    ) -> Result<ScopedRequest<'a>> {
        let n = std::mem::size_of_val(buf);
        // SAFETY: `buf` is borrowed exclusively for the scope.
        let r = unsafe { self.ibcast_segment((buf.as_mut_ptr().cast(), n), root) }?;
        Ok(keep(s, r))
    }

    /// Starts a gather of every rank's `send` (the same length everywhere)
    /// into the root's `recv`, in rank order; `recv` is not touched
    /// elsewhere (pass an empty slice; [`crate::scope`]).
    #[track_caller]
    pub fn igather_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        root: usize,
    ) -> Result<ScopedRequest<'a>> {
        self.check_root(root)?;
        let p = self.size();
        let segs = if self.rank() == root {
            size_times("recv", recv.len(), p, ("send", send.len()))?;
            equal_segments(
                recv.as_mut_ptr().cast::<u8>(),
                p,
                size_of_val(send),
                <*mut u8>::wrapping_add,
            )
        } else {
            Vec::new()
        };
        // SAFETY: as in `iallgatherv_into`.
        let r = unsafe { self.igatherv_segments(seg(send), &segs, root) }?;
        Ok(keep(s, r))
    }

    /// Starts a scatter of the root's `send` (`size()` blocks of
    /// `recv.len()` elements) into every rank's `recv`; `send` is not read
    /// elsewhere (pass an empty slice; [`crate::scope`]).
    #[track_caller]
    pub fn iscatter_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        root: usize,
    ) -> Result<ScopedRequest<'a>> {
        self.check_root(root)?;
        let p = self.size();
        let n = size_of_val(recv);
        let sends = if self.rank() == root {
            size_times("send", send.len(), p, ("recv", recv.len()))?;
            equal_segments(send.as_ptr().cast::<u8>(), p, n, <*const u8>::wrapping_add)
        } else {
            Vec::new()
        };
        // SAFETY: as in `iallgatherv_into`.
        let r = unsafe { self.iscatter_segments(&sends, (recv.as_mut_ptr().cast(), n), root) }?;
        Ok(keep(s, r))
    }

    /// Starts an allgatherv into `recv`: rank j's `counts[j]` elements one
    /// after the other (this rank's `send` holds `counts[rank()]`;
    /// [`crate::scope`]).
    #[track_caller]
    pub fn iallgatherv_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        counts: &[usize],
    ) -> Result<ScopedRequest<'a>> {
        self.check_own_count(counts, send.len())?;
        sum_of("recv", recv.len(), counts)?;
        let segs = segments_mut(recv, counts);
        // SAFETY: `send` and `recv` are borrowed (shared and exclusive) for
        // the scope, which outlives the collective; the segments split
        // `recv`, so they overlap nothing.
        let r = unsafe { self.iallgatherv_segments(seg(send), segs) }?;
        Ok(keep(s, r))
    }

    /// Starts an alltoallv: `send_counts[j]` elements of `send` (one block
    /// after the other) to rank j, `recv_counts[i]` from rank i into `recv`
    /// ([`crate::scope`]).
    #[track_caller]
    pub fn ialltoallv_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        send_counts: &[usize],
        recv: &'s mut [T],
        recv_counts: &[usize],
    ) -> Result<ScopedRequest<'a>> {
        self.check_counts(send_counts)?;
        self.check_counts(recv_counts)?;
        sum_of("send", send.len(), send_counts)?;
        sum_of("recv", recv.len(), recv_counts)?;
        let (sends, recvs) = (segments(send, send_counts), segments_mut(recv, recv_counts));
        // SAFETY: as in `iallgatherv_into`; the runtime checks that this
        // rank's own two blocks are as long.
        let r = unsafe { self.ialltoallv_segments(&sends, &recvs) }?;
        Ok(keep(s, r))
    }

    /// Starts a gatherv into the root's `recv`: rank j's `counts[j]`
    /// elements one after the other (`counts` and `recv` are read at the
    /// root only; elsewhere pass empty ones; [`crate::scope`]).
    #[track_caller]
    pub fn igatherv_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        counts: &[usize],
        root: usize,
    ) -> Result<ScopedRequest<'a>> {
        self.check_root(root)?;
        let segs = if self.rank() == root {
            self.check_own_count(counts, send.len())?;
            sum_of("recv", recv.len(), counts)?;
            segments_mut(recv, counts)
        } else {
            Vec::new()
        };
        // SAFETY: as in `iallgatherv_into`.
        let r = unsafe { self.igatherv_segments(seg(send), &segs, root) }?;
        Ok(keep(s, r))
    }

    /// Starts a scatterv of the root's `send` (`counts[j]` elements for
    /// rank j, one block after the other) into every rank's `recv` (`send`
    /// and `counts` are read at the root only; [`crate::scope`]).
    #[track_caller]
    pub fn iscatterv_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        counts: &[usize],
        recv: &'s mut [T],
        root: usize,
    ) -> Result<ScopedRequest<'a>> {
        self.check_root(root)?;
        let sends = if self.rank() == root {
            self.check_counts(counts)?;
            let mine = counts[root];
            if recv.len() != mine {
                let want = format!("counts[{root}] = {mine} elements");
                return Err(Error::invalid("recv", recv.len() as i64, want));
            }
            sum_of("send", send.len(), counts)?;
            segments(send, counts)
        } else {
            Vec::new()
        };
        let n = std::mem::size_of_val(recv);
        // SAFETY: as in `iallgatherv_into`.
        let r = unsafe { self.iscatterv_segments(&sends, (recv.as_mut_ptr().cast(), n), root) }?;
        Ok(keep(s, r))
    }

    /// Starts a neighbourhood exchange ([`Comm::ineighbor_exchange`]: block
    /// `b` of `send`, in blocks of `send_counts`, to `peer` for each
    /// `(peer, b)` of `sends`; block `b` of `recv`, in blocks of
    /// `recv_counts`, from `peer` for each `(peer, b)` of `recvs`) on the
    /// program's own buffers ([`crate::scope`]). Blocks no receive names
    /// are left as they were. Each block received must be as long as the
    /// one sent: inside one host a receiver that finds other lengths fails
    /// the request ([`Comm::ineighbor_exchange_segments`]).
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn ineighbor_exchange_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        send_counts: &[usize],
        sends: &[(usize, usize)],
        recv: &'s mut [T],
        recv_counts: &[usize],
        recvs: &[(usize, usize)],
    ) -> Result<ScopedRequest<'a>> {
        sum_of("send", send.len(), send_counts)?;
        sum_of("recv", recv.len(), recv_counts)?;
        let (sb, rb) = super::neighbor::segments_of(
            (send.as_ptr().cast(), send_counts),
            (recv.as_mut_ptr().cast(), recv_counts),
            std::mem::size_of::<T>(),
        );
        // SAFETY: as in `iallgatherv_into`; the segments split `send` and
        // `recv`.
        let r = unsafe { self.ineighbor_exchange_segments(&sb, sends, &rb, recvs) }?;
        Ok(keep(s, r))
    }

    /// Starts an allreduce of every rank's `send` into `recv` (as long) on
    /// the buffers themselves ([`crate::scope`]).
    #[track_caller]
    pub fn iallreduce_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        op: &Op<T>,
    ) -> Result<ScopedRequest<'a>> {
        as_long("recv", recv.len(), send.len())?;
        super::copy_slice(recv, send);
        // SAFETY: `recv` is borrowed exclusively for the scope, which
        // outlives the collective.
        let r = unsafe { self.iallreduce_raw(recv.as_mut_ptr(), recv.len(), op) }?;
        Ok(keep(s, r))
    }

    /// Starts a reduce-scatter: `recv` (`counts[rank()]` elements) gets
    /// this rank's block of the combination of every rank's `send` (the sum
    /// of `counts`) ([`crate::scope`]).
    #[track_caller]
    pub fn ireduce_scatter_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        counts: &[usize],
        op: &Op<T>,
    ) -> Result<ScopedRequest<'a>> {
        self.check_own_count(counts, recv.len())?;
        sum_of("send", send.len(), counts)?;
        // SAFETY: `send` and `recv` are borrowed for the scope, which
        // outlives the collective; their lengths are checked above.
        let r = unsafe { self.ireduce_scatter_raw(send.as_ptr(), recv.as_mut_ptr(), counts, op) }?;
        Ok(keep(s, r))
    }

    /// Starts an inclusive scan of `send` into `recv` (as long): rank i
    /// gets `send(0) ⊕ ... ⊕ send(i)` ([`crate::scope`]).
    #[track_caller]
    pub fn iscan_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        op: &Op<T>,
    ) -> Result<ScopedRequest<'a>> {
        self.iscan_either(s, send, recv, op, false)
    }

    /// Starts an exclusive scan of `send` into `recv` (as long): rank i > 0
    /// gets `send(0) ⊕ ... ⊕ send(i-1)`, rank 0's `recv` is left as it was
    /// ([`crate::scope`]).
    #[track_caller]
    pub fn iexscan_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        op: &Op<T>,
    ) -> Result<ScopedRequest<'a>> {
        self.iscan_either(s, send, recv, op, true)
    }

    /// Starts a reduction of every rank's `send` into the root's `recv`
    /// (as long; not touched elsewhere: pass an empty slice;
    /// [`crate::scope`]).
    #[track_caller]
    pub fn ireduce_into<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        op: &Op<T>,
        root: usize,
    ) -> Result<ScopedRequest<'a>> {
        self.check_root(root)?;
        if self.rank() == root {
            as_long("recv", recv.len(), send.len())?;
        }
        // SAFETY: `send` and `recv` are borrowed (shared and exclusive) for
        // the scope, which outlives the collective; at the root as long as
        // each other.
        let r =
            unsafe { self.ireduce_raw(send.as_ptr(), recv.as_mut_ptr(), send.len(), op, root) }?;
        Ok(keep(s, r))
    }

    fn iscan_either<'a, 's, T: Pod>(
        &self,
        s: &'a Scope<'s>,
        send: &'s [T],
        recv: &'s mut [T],
        op: &Op<T>,
        exclusive: bool,
    ) -> Result<ScopedRequest<'a>> {
        as_long("recv", recv.len(), send.len())?;
        // SAFETY: `send` and `recv` are borrowed (shared and exclusive) for
        // the scope, which outlives the collective; as long as each other.
        let r =
            unsafe { self.iscan_raw(send.as_ptr(), recv.as_mut_ptr(), send.len(), op, exclusive) }?;
        Ok(keep(s, r))
    }
}
