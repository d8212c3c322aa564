//! Nonblocking operations: requests, scopes, and the wait/test family.
//!
//! A nonblocking receive lets the engine write into the user's buffer later, so
//! the buffer must outlive the operation even if the user forgets the request
//! (`std::mem::forget` is safe Rust). kumi guarantees that the way rsmpi does: a
//! nonblocking call takes a [`Scope`], every buffer is borrowed for the scope's
//! whole life, and the scope waits for every request still in flight before it
//! returns. Waiting on a request consumes it; dropping one detaches it (the scope
//! still waits for it).

use crate::engine::{ReqId, WaitInfo};
use crate::error::Result;
use crate::progress::EngineRef;
use kumi_core::call::Call;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

/// What a completed receive (or probe) tells about its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Sender's rank in the communicator (`-1` for a send's status).
    pub source: i32,
    /// The message's tag (`-1` for a send's status).
    pub tag: i32,
    /// Size of the message in bytes.
    pub bytes: usize,
    /// The receive was cancelled before it matched.
    pub cancelled: bool,
}

impl Status {
    pub(crate) const fn empty() -> Status {
        Status {
            source: -1,
            tag: -1,
            bytes: 0,
            cancelled: false,
        }
    }

    /// Number of whole elements of `T` in the message.
    pub fn count<T>(&self) -> usize {
        self.bytes / std::mem::size_of::<T>().max(1)
    }
}

/// The region in which nonblocking operations may borrow buffers. See
/// [`scope`].
pub struct Scope<'s> {
    pending: RefCell<Vec<(EngineRef, ReqId)>>,
    /// Collectives on borrowed buffers ([`crate::ScopedRequest`]), each
    /// until waited for.
    colls: CollList,
    // Invariant in 's, so that buffers borrowed for 's cannot be shortened.
    _invariant: PhantomData<Cell<&'s mut ()>>,
}

/// Runs `f` with a scope for nonblocking operations; before returning, waits for
/// every request started in the scope that is still in flight.
///
/// ```no_run
/// let universe = kumi::init().unwrap();
/// let world = universe.world();
/// let (me, n) = (world.rank(), world.size());
/// let out = [me as u64; 4];
/// let mut inbox = [0u64; 4];
/// kumi::scope(|s| {
///     let r = world.irecv(s, &mut inbox, ((me + n - 1) % n) as i32, 0).unwrap();
///     let w = world.isend(s, &out, ((me + 1) % n) as i32, 0).unwrap();
///     kumi::wait_all(vec![r, w]).unwrap();
/// });
/// ```
pub fn scope<'s, R>(f: impl FnOnce(&Scope<'s>) -> R) -> R {
    let s = Scope {
        pending: RefCell::new(Vec::new()),
        colls: RefCell::new(smallvec::SmallVec::new()),
        _invariant: PhantomData,
    };
    f(&s)
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        for (engine, id) in self.pending.get_mut().drain(..) {
            let mut e = engine.borrow_mut();
            if let Err(err) = e.wait_until(WaitInfo::plain(Call::Wait), |e| e.is_done(id)) {
                eprintln!("kumi: a request left open at the end of its scope failed: {err}");
            }
            let _ = e.take_result(id);
        }
        for r in self.colls.get_mut().drain(..).flatten() {
            if let Err(err) = r.wait() {
                eprintln!("kumi: a collective left open at the end of its scope failed: {err}");
            }
        }
    }
}

impl<'s> Scope<'s> {
    pub(crate) fn register(&self, engine: &EngineRef, id: ReqId) -> Request<'_> {
        self.pending.borrow_mut().push((engine.clone(), id));
        Request {
            live: Some(Box::new(Live {
                engine: engine.clone(),
                id,
                scope_list: &self.pending,
            })),
        }
    }

    /// The scope's collectives on borrowed buffers.
    pub(crate) fn colls(&self) -> &CollList {
        &self.colls
    }

    /// A request that completed when it started (no engine handle kept: an
    /// eager send costs no reference count and no allocation).
    pub(crate) fn completed(&self) -> Request<'_> {
        Request { live: None }
    }
}

type PendingList = RefCell<Vec<(EngineRef, ReqId)>>;

/// A scope's collectives on borrowed buffers (`None` once waited for); a
/// few inline, so that a scope around one collective allocates nothing.
pub(crate) type CollList = RefCell<smallvec::SmallVec<[Option<crate::CollRequest<u8>>; 4]>>;

/// A nonblocking operation in flight. Wait on it with [`Request::wait`], poll it
/// with [`Request::test`], or use [`wait_all`], [`wait_any`], [`test_all`].
#[must_use = "a request must be waited on (dropping it leaves the wait to the end of the scope)"]
pub struct Request<'a> {
    /// `None`: completed at start (an eager send the transport took at
    /// once), or waited on already.
    ///
    /// Boxed, so that a request is one word. A request of several words
    /// was built by the callee (or in a temporary) in 8-byte stores and
    /// moved by the caller (`reqs.push(comm.isend(..)?)`) in 16-byte loads;
    /// a load over two stores cannot take its value from the store buffer,
    /// so it waited until they reached the cache, in order, behind the
    /// message's stores into the ring, whose lines the receiver holds: every
    /// message of a stream paid the ring's line transfers in full
    /// (docs/BENCHMARKS.md, session 17). One word is stored and loaded whole.
    live: Option<Box<Live<'a>>>,
}

/// A request that did not complete when it started.
struct Live<'a> {
    engine: EngineRef,
    id: ReqId,
    scope_list: &'a PendingList,
}

impl Live<'_> {
    fn forget_in_scope(&self) {
        let mut list = self.scope_list.borrow_mut();
        if let Some(i) = list.iter().rposition(|(_, r)| *r == self.id) {
            list.swap_remove(i);
        }
    }
}

impl Request<'_> {
    /// Blocks until the operation completes.
    #[track_caller]
    pub fn wait(mut self) -> Result<Status> {
        let Some(l) = self.live.take() else {
            return Ok(Status::empty());
        };
        l.forget_in_scope();
        let r = l
            .engine
            .borrow_mut()
            .wait(WaitInfo::plain(Call::Wait), l.id);
        r
    }

    /// Whether the operation has completed, in the engine's view now.
    fn done_in(&self, e: &mut crate::engine::Engine) -> bool {
        self.live.as_ref().is_none_or(|l| e.is_done(l.id))
    }

    /// Makes progress once; `true` if the operation has completed (then
    /// [`Request::wait`] returns at once).
    pub fn test(&mut self) -> Result<bool> {
        let Some(l) = &self.live else { return Ok(true) };
        let mut e = l.engine.borrow_mut();
        if e.is_done(l.id) {
            return Ok(true);
        }
        e.progress()?;
        Ok(e.is_done(l.id))
    }

    /// Cancels a receive that has not matched yet. Returns `true` if it was
    /// cancelled; its status then says `cancelled`. Sends cannot be cancelled.
    pub fn cancel(&mut self) -> bool {
        match &self.live {
            Some(l) => l.engine.borrow_mut().cancel_recv(l.id),
            None => false,
        }
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if let Some(l) = &self.live {
            // The scope still waits for it; the engine frees it when it completes.
            if let Some(mut e) = l.engine.try_borrow_mut() {
                if e.is_done(l.id) {
                    let _ = e.take_result(l.id);
                    drop(e);
                    l.forget_in_scope();
                } else {
                    e.detach(l.id);
                }
            }
        }
    }
}

/// The engine of the first request still in flight among `reqs`.
fn engine_of(reqs: &[Request<'_>]) -> Option<EngineRef> {
    reqs.iter()
        .find_map(|r| r.live.as_ref().map(|l| l.engine.clone()))
}

/// Waits for every request; returns their statuses in order. The first error
/// is returned after all have completed.
#[track_caller]
pub fn wait_all(reqs: Vec<Request<'_>>) -> Result<Vec<Status>> {
    let mut out = Vec::with_capacity(reqs.len());
    let mut first_err = None;
    for r in reqs {
        match r.wait() {
            Ok(s) => out.push(s),
            Err(e) => {
                out.push(Status::empty());
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Waits until one request completes, removes it from `reqs` and returns its
/// index (before removal) and status. `reqs` must not be empty.
#[track_caller]
pub fn wait_any(reqs: &mut Vec<Request<'_>>) -> Result<(usize, Status)> {
    assert!(!reqs.is_empty(), "wait_any on an empty list of requests");
    let Some(engine) = engine_of(reqs) else {
        // Every one completed when it started.
        let r = reqs.remove(0);
        return r.wait().map(|s| (0, s));
    };
    let mut found = None;
    engine
        .borrow_mut()
        .wait_until(WaitInfo::plain(Call::Wait), |e| {
            found = reqs.iter().position(|r| r.done_in(e));
            found.is_some()
        })?;
    let i = found.expect("wait_until returns only when found");
    let r = reqs.remove(i);
    r.wait().map(|s| (i, s))
}

/// Makes progress once; `true` if every request has completed.
pub fn test_all(reqs: &mut [Request<'_>]) -> Result<bool> {
    let Some(engine) = engine_of(reqs) else {
        return Ok(true);
    };
    let mut e = engine.borrow_mut();
    e.progress()?;
    Ok(reqs.iter().all(|r| r.done_in(&mut e)))
}

/// Makes progress once; the index of a completed request, if any.
pub fn test_any(reqs: &mut [Request<'_>]) -> Result<Option<usize>> {
    if reqs.is_empty() {
        return Ok(None);
    }
    let Some(engine) = engine_of(reqs) else {
        return Ok(Some(0));
    };
    let mut e = engine.borrow_mut();
    e.progress()?;
    Ok(reqs.iter().position(|r| r.done_in(&mut e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One word (see `Request::live`): a wider request made every message
    /// of a stream wait for the ring's stores.
    #[test]
    fn a_request_is_one_word() {
        assert_eq!(
            std::mem::size_of::<Request<'_>>(),
            std::mem::size_of::<usize>()
        );
    }
}
