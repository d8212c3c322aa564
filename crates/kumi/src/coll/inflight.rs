//! Nonblocking collectives in flight: the engine's list of them
//! ([`Active`]), their progress and completion, and their requests
//! ([`CollRequest`]), whether they go through the area or as messages.

use super::*;
use std::collections::VecDeque;

/// A nonblocking collective in flight: a schedule of messages, or one
/// through the local group's area.
pub(crate) enum Active {
    Sched(Run),
    Shm(shm::Pending),
    /// Part through the area, the rest by messages; done when both are.
    ShmAndSched(shm::Pending, Box<Run>),
}

/// Advances nonblocking collectives and the combining service's timers.
pub(crate) fn progress(e: &mut Engine) -> Result<usize> {
    let mut n = 0;
    if !e.svc.coll.active.is_empty() {
        let mut active = std::mem::take(&mut e.svc.coll.active);
        active.retain_mut(|(id, act)| {
            let more = advance(e, *id, act);
            n += usize::from(!more);
            more
        });
        active.append(&mut e.svc.coll.active);
        e.svc.coll.active = active;
    }
    if e.svc.coll.combine.wake.is_some() {
        n += combine::on_timer(e)?;
    }
    Ok(n)
}

/// Advances nonblocking collective `id`: `true` while it goes on; once it
/// is over, its result is kept for its request (unless abandoned).
fn advance(e: &mut Engine, id: u64, act: &mut Active) -> bool {
    let finished = match act {
        Active::Shm(p) => {
            if !p.poll(e) {
                return true;
            }
            if let Some(x) = p.failed.take() {
                return finish(e, id, Err(*x));
            }
            Ok(None)
        }
        Active::Sched(run) => match run.poll(e) {
            Ok(false) => return true,
            Ok(true) => Ok(run.result()),
            Err(x) => {
                run.abort(e);
                Err(x)
            }
        },
        Active::ShmAndSched(p, run) => {
            let area = p.poll(e);
            if let Some(x) = p.failed.take() {
                run.abort(e);
                return finish(e, id, Err(*x));
            }
            match run.poll(e) {
                Ok(sent) if !(sent && area) => return true,
                Ok(_) => Ok(None),
                Err(x) => {
                    run.abort(e);
                    Err(x)
                }
            }
        }
    };
    finish(e, id, finished)
}

/// Keeps the result of nonblocking collective `id`, which is over, for its
/// request (unless abandoned); `false`, for `advance` to return.
fn finish(e: &mut Engine, id: u64, mut result: Result<Option<AlignedBuf>>) -> bool {
    let c = &mut e.svc.coll;
    // Its buffers go now (unless the request takes one as its result).
    if let Some(i) = c.owned.iter().position(|&(o, _)| o == id) {
        let (_, Owned { result: out, hold }) = c.owned.swap_remove(i);
        drop(hold);
        if let Ok(r) = &mut result {
            *r = out;
        }
    }
    if let Some(i) = c.abandoned.iter().position(|&a| a == id) {
        c.abandoned.swap_remove(i);
    } else {
        c.done.put(id, result);
    }
    false
}

/// The buffers of kumi's own that a collective started on the Rust API's
/// owned vectors runs over (its form over the program's buffers, on
/// these): kept until it completes, waited for or not, and `result` then
/// its request's.
pub(crate) struct Owned {
    result: Option<AlignedBuf>,
    /// What the collective only reads (a copy of the vector sent).
    hold: Option<AlignedBuf>,
}

impl Owned {
    /// The buffers of one that works in `out` alone (in place), its result.
    pub fn result(out: AlignedBuf) -> Owned {
        Owned {
            result: Some(out),
            hold: None,
        }
    }

    /// The buffers of one that reads `hold` and whose result is `out`
    /// (`None`: an empty vector).
    pub fn reading(hold: AlignedBuf, out: Option<AlignedBuf>) -> Owned {
        Owned {
            result: out,
            hold: Some(hold),
        }
    }
}

/// Results of nonblocking collectives that are over and whose requests have
/// not taken them yet. A short list, not a map: a collective's result is
/// usually taken by the next kumi call, and they finish and are waited for
/// mostly in the order they started, so the one looked for is near the
/// front, and a hash map's insert and removal cost more than that search
/// (docs/BENCHMARKS.md, session 47).
#[derive(Default)]
pub(crate) struct Done(VecDeque<(u64, Result<Option<AlignedBuf>>)>);

impl Done {
    fn at(&self, id: u64) -> Option<usize> {
        self.0.iter().position(|&(i, _)| i == id)
    }

    fn has(&self, id: u64) -> bool {
        self.at(id).is_some()
    }

    fn put(&mut self, id: u64, result: Result<Option<AlignedBuf>>) {
        self.0.push_back((id, result));
    }

    fn take(&mut self, id: u64) -> Option<Result<Option<AlignedBuf>>> {
        let i = self.at(id)?;
        self.0.remove(i).map(|(_, r)| r)
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Result<Option<AlignedBuf>>> {
        let i = self.at(id)?;
        self.0.get_mut(i).map(|(_, r)| r)
    }
}

/// The request of a collective over segments started with [`Exec::Start`].
pub(super) fn started(r: Option<CollRequest<u8>>) -> CollRequest<u8> {
    r.expect("a started collective has a request")
}

/// A nonblocking collective in flight. Its result is taken with
/// [`CollRequest::wait`]; it progresses inside any kumi call of this rank.
/// Dropping it lets it finish on its own (the result is discarded).
#[must_use = "a nonblocking collective must be waited on"]
pub struct CollRequest<T: Pod> {
    engine: EngineRef,
    id: Option<u64>,
    _t: PhantomData<T>,
}

impl<T: Pod> CollRequest<T> {
    /// Makes progress once; `true` when the collective has completed.
    pub fn test(&mut self) -> Result<bool> {
        let Some(id) = self.id else { return Ok(true) };
        let mut e = self.engine.borrow_mut();
        if e.svc.coll.done.has(id) {
            return Ok(true);
        }
        e.progress()?;
        Ok(e.svc.coll.done.has(id))
    }

    /// Blocks until the collective completes; returns its result (the reduced
    /// vector for `iallreduce`, empty for `ibarrier`).
    #[track_caller]
    pub fn wait(mut self) -> Result<Vec<T>> {
        let Some(id) = self.id.take() else {
            return Ok(Vec::new());
        };
        let info = WaitInfo::plain(Call::Collective);
        let mut e = self.engine.borrow_mut();
        e.wait_until_with_mates(
            info,
            |e| e.svc.coll.done.has(id),
            |e| e.svc.coll.mates_wait(e, id),
        )?;
        match e.svc.coll.done.take(id).expect("completed") {
            Ok(Some(buf)) => Ok(bytemuck::cast_slice::<u8, T>(buf.bytes()).to_vec()),
            Ok(None) => Ok(Vec::new()),
            Err(x) => Err(x),
        }
    }
}

impl<T: Pod> CollRequest<T> {
    /// A request complete already (nothing to exchange).
    pub(super) fn done(engine: EngineRef) -> CollRequest<T> {
        CollRequest {
            engine,
            id: None,
            _t: PhantomData,
        }
    }
}

impl<T: Pod> Drop for CollRequest<T> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            if let Some(mut e) = self.engine.try_borrow_mut() {
                if e.svc.coll.done.take(id).is_none() {
                    e.svc.coll.abandoned.push(id);
                }
            }
        }
    }
}

impl CollState {
    /// The id of the next nonblocking collective.
    fn take_id(&mut self) -> u64 {
        let id = self.next_nb;
        self.next_nb += 1;
        id
    }

    /// Whether the ranks of this core wait through nonblocking collective
    /// `id` too ([`shm::Pending::mates_wait`]).
    fn mates_wait(&self, e: &Engine, id: u64) -> bool {
        self.active
            .iter()
            .find(|(i, _)| *i == id)
            .is_some_and(|(_, a)| matches!(a, Active::Shm(p) if p.mates_wait(e)))
    }
}

impl Comm {
    /// A request for collective `run`, advanced once now: its first
    /// messages go out in the call (an area part has published already), so
    /// that the peers can work on them while this rank computes.
    pub(super) fn start<T: Pod>(&self, run: Active) -> CollRequest<T> {
        let id = Self::push_active(&mut self.engine(), run);
        self.request(id)
    }

    /// Lists `run` and returns its id. A schedule is advanced once first;
    /// an area collective is not (its start polled it), but one its start
    /// found complete (a rooted form's root, a member whose sources had all
    /// published) is finished now and never listed, so that its wait finds
    /// it over without a pass of progress.
    pub(super) fn push_active(e: &mut Engine, mut run: Active) -> u64 {
        let id = e.svc.coll.take_id();
        let goes_on = match &run {
            Active::Shm(p) if !p.is_done() => true,
            _ => advance(e, id, &mut run),
        };
        if goes_on {
            e.svc.coll.active.push((id, run));
        }
        id
    }

    /// `r`, a collective started over the buffers of `owned`, as the
    /// request of an owned form: `owned` stays until the collective
    /// completes (its request dropped or not), and `wait` then returns
    /// `owned.result` (an empty vector where that is `None`).
    pub(super) fn keeping<T: Pod>(&self, mut r: CollRequest<u8>, owned: Owned) -> CollRequest<T> {
        let mut e = self.engine();
        let c = &mut e.svc.coll;
        let Some(id) = r.id.take() else {
            // Complete already, nothing exchanged: the result is as made.
            let id = c.take_id();
            c.done.put(id, Ok(owned.result));
            drop(e);
            return self.request(id);
        };
        match c.done.get_mut(id) {
            // Complete in its start (or the progress thread's since).
            Some(Ok(done)) => *done = owned.result,
            Some(Err(_)) => {}
            None => c.owned.push((id, owned)),
        }
        drop(e);
        self.request(id)
    }

    /// The request of nonblocking collective `id`.
    pub(super) fn request<T: Pod>(&self, id: u64) -> CollRequest<T> {
        CollRequest {
            engine: self.engine_rc().clone(),
            id: Some(id),
            _t: PhantomData,
        }
    }

    /// [`Comm::shm_whole`] for a nonblocking collective through the area:
    /// the [`shm::Pending`] that `f` starts joins the engine's list under
    /// the same lock, and its request comes back. (Handed out of the
    /// closure and on to [`Comm::start`], a `Pending` of a few hundred
    /// bytes was copied half a dozen times a call.)
    #[inline]
    pub(super) fn shm_start<T: Pod>(
        &self,
        at: &'static Location<'static>,
        f: impl FnOnce(&mut Guard<'_>, &mut shm::Group) -> Option<Result<shm::Pending>>,
    ) -> Result<Option<CollRequest<T>>> {
        let id = self.shm_whole(at, true, |e, g| {
            f(e, g).map(|r| r.map(|p| Self::push_active(e, Active::Shm(p))))
        })?;
        Ok(id.map(|id| self.request(id)))
    }
}
