//! One-sided access across hosts: active messages that the target's progress
//! engine serves, whatever its application is doing (the DSE "kernel
//! process" of SEEDS.md, as part of every rank's engine).
//!
//! A window whose ranks span hosts exposes each rank's part to the others
//! here ([`RmaState::expose`]); ranks of the same host keep reaching it
//! directly (`win.rs`). The wire form and its checks are
//! `kumi_core::rma`; this module keeps the state on both sides:
//! - **target**: the exposed parts, by window id, with the address of the
//!   part's lock words in the host's shared lock area, so that accesses from
//!   other hosts and from this host exclude each other through the same
//!   words; lock requests that cannot be granted yet; the locks other hosts
//!   hold (an unlock must match one: a peer cannot release what it never
//!   took);
//! - **origin**: requests waiting for their answer. A put (and an
//!   accumulate that fetches nothing) is complete at the origin once its
//!   frame is queued; its acknowledgement is counted per window and awaited
//!   by a flush ([`flush`]), which MPI's epochs call. A get, a fetch, a
//!   lock and an unlock wait for their answer before they return (an
//!   unlock answered, no unlock is in flight when the window is freed).
//!   Lock requests are granted per window in the order they came.
//!
//! Every offset and length from the network is checked against the part
//! before memory is touched; a request for a window that is gone, or out of
//! its bounds, is answered with an error (the origin's call fails naming it)
//! rather than dropped, so no origin waits forever.

use crate::coll::{Builtin, Op as ReduceOp};
use crate::engine::{log, Engine, WaitInfo};
use crate::error::{Error, Result};
use crate::progress::Guard;
use kumi_core::header::Header;
use kumi_core::rma::{AccOp, Elem, Msg, Op};
use kumi_transport::shm::wordlock::{MutexWord, RwWord};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

/// Largest payload of one one-sided frame (puts, accumulates and answers
/// are cut into pieces of at most this, or the transport's limit).
const CHUNK: usize = 64 * 1024;

/// A part of a window that this rank exposes to other hosts.
pub(crate) struct Part {
    pub mem: Mem,
    /// For a dynamic window (`MPI_Win_create_dynamic`): the regions attached
    /// now (address, bytes); offsets are then addresses, and an access must
    /// fall inside attached memory (one region, or adjacent ones it spans).
    /// `None`: offsets count from `mem.base`.
    pub regions: Option<Vec<(usize, usize)>>,
    /// World rank of each window rank (to check who a request claims to be).
    pub members: Vec<u32>,
}

impl Part {
    /// The address of `[off, off + len)` of the part, if inside it.
    fn at(&self, off: u64, len: usize) -> std::result::Result<usize, String> {
        let Some(regions) = &self.regions else {
            return self.mem.range(off, len);
        };
        let outside =
            || format!("an access of {len} bytes at address {off:#x} outside the regions attached");
        let end = off.checked_add(len as u64).ok_or_else(outside)?;
        // The region holding each next byte, from `off` on, until `end`: an
        // access may run from one region into an adjacent one (regions do
        // not overlap, so each step moves past one).
        let holding = |a: u64| {
            regions
                .iter()
                .map(|&(b, l)| (b as u64, (b + l) as u64))
                .find(|&(b, e)| b <= a && (a < e || (a == e && len == 0)))
        };
        let mut at = off;
        loop {
            let (_, e) = holding(at).ok_or_else(outside)?;
            if e >= end {
                return Ok(off as usize);
            }
            at = e;
        }
    }
}

/// Where an exposed part and its lock words are.
#[derive(Clone, Copy)]
pub(crate) struct Mem {
    /// Address and size of the part in this process.
    pub base: usize,
    pub size: usize,
    /// Addresses of the part's reader-writer lock word and accumulate mutex
    /// word (in the host's shared lock area).
    pub rw: usize,
    pub mutex: usize,
}

impl Mem {
    /// `[off, off + len)` of the part, if inside it.
    fn range(&self, off: u64, len: usize) -> std::result::Result<usize, String> {
        match off.checked_add(len as u64) {
            Some(end) if end <= self.size as u64 => Ok(self.base + off as usize),
            _ => Err(format!(
                "an access of {len} bytes at byte {off} outside the part's {} bytes",
                self.size
            )),
        }
    }

    fn words(&self) -> (&AtomicU64, &AtomicU64) {
        // SAFETY: the window that exposed the part keeps its lock area mapped
        // until it withdraws the part (`RmaState::withdraw` in its drop), and
        // the words are 8-aligned atomics that every rank of the host maps.
        unsafe {
            (
                &*(self.rw as *const AtomicU64),
                &*(self.mutex as *const AtomicU64),
            )
        }
    }
}

/// What an origin waits for.
enum Waiting {
    /// An acknowledgement (put, accumulate without fetch): counted in
    /// `RmaState::unacked`.
    Ack,
    /// `len` bytes into `buf` (get, fetching accumulate).
    Data { buf: usize, len: usize, got: usize },
    /// A lock grant, or the release of a lock (an empty answer).
    Grant,
}

struct Pending {
    win: u32,
    /// World rank of the target (answers from anyone else are refused).
    target: u32,
    what: Waiting,
    done: bool,
    error: Option<String>,
}

/// A lock request that could not be granted yet.
#[derive(Clone, Copy)]
struct LockWait {
    win: u32,
    from: u32,
    src: u32,
    id: u64,
    exclusive: bool,
}

/// Both sides' state, in the engine.
#[derive(Default)]
pub(crate) struct RmaState {
    parts: HashMap<u32, Part>,
    pending: HashMap<u64, Pending>,
    next_id: u64,
    /// Unacknowledged puts and accumulates per window.
    unacked: HashMap<u32, usize>,
    /// Errors answered to unacknowledged accesses, per window (a flush
    /// returns them).
    failed: HashMap<u32, String>,
    /// Lock requests waiting, in the order they came.
    blocked: Vec<LockWait>,
    /// Locks granted to other hosts: (window, world rank, exclusive) -> count.
    held: HashMap<(u32, u32, bool), usize>,
}

impl RmaState {
    /// Whether other hosts may send requests here (the progress thread then
    /// serves them while the application computes).
    #[inline]
    pub(crate) fn serving(&self) -> bool {
        !self.parts.is_empty()
    }

    /// Whether a lock request waits to be granted (each progress pass retries).
    #[inline]
    pub(crate) fn busy(&self) -> bool {
        !self.blocked.is_empty()
    }

    /// Serves window `win`'s part of this rank to other hosts.
    pub(crate) fn expose(&mut self, win: u32, part: Part) {
        self.parts.insert(win, part);
    }

    /// Adds `len` bytes at `base` to dynamic window `win`'s regions.
    pub(crate) fn attach(&mut self, win: u32, base: usize, len: usize) -> Result<()> {
        let regions = self.regions(win)?;
        let end = base.checked_add(len).filter(|_| base != 0 || len == 0);
        let Some(end) = end else {
            return Err(Error::invalid(
                "base",
                base as i64,
                "memory of this process",
            ));
        };
        if let Some(&(b, l)) = regions.iter().find(|&&(b, l)| base < b + l && b < end) {
            return Err(Error::invalid(
                "base",
                base as i64,
                format!("a region that overlaps no attached one ({l} bytes at {b:#x} are)"),
            ));
        }
        regions.push((base, len));
        Ok(())
    }

    /// Removes the region attached at `base` from dynamic window `win`.
    pub(crate) fn detach(&mut self, win: u32, base: usize) -> Result<()> {
        let regions = self.regions(win)?;
        match regions.iter().position(|&(b, _)| b == base) {
            Some(i) => {
                regions.swap_remove(i);
                Ok(())
            }
            None => Err(Error::invalid(
                "base",
                base as i64,
                "the start of an attached region",
            )),
        }
    }

    fn regions(&mut self, win: u32) -> Result<&mut Vec<(usize, usize)>> {
        self.parts
            .get_mut(&win)
            .and_then(|p| p.regions.as_mut())
            .ok_or_else(|| Error::invalid("win", win as i64, "a dynamic window"))
    }

    /// Stops serving `win` (the window is being freed; MPI makes that
    /// collective, after every access is complete). Locks still asked for
    /// are refused.
    pub(crate) fn withdraw(&mut self, win: u32) -> Vec<(u32, u64)> {
        self.parts.remove(&win);
        self.unacked.remove(&win);
        self.failed.remove(&win);
        self.held.retain(|k, _| k.0 != win);
        let (gone, kept): (Vec<_>, Vec<_>) = self.blocked.drain(..).partition(|l| l.win == win);
        self.blocked = kept;
        gone.into_iter().map(|l| (l.from, l.id)).collect()
    }

    fn wait_for(&mut self, win: u32, target: u32, what: Waiting) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        if matches!(what, Waiting::Ack) {
            *self.unacked.entry(win).or_default() += 1;
        }
        self.pending.insert(
            id,
            Pending {
                win,
                target,
                what,
                done: false,
                error: None,
            },
        );
        id
    }
}

/// Sends one frame of `m`.
fn send(e: &mut Engine, to: u32, m: &Msg<'_>) -> Result<()> {
    let h = m.header();
    match m.payload() {
        [a, []] => e.push_frame(to, &h, a),
        [a, b] => e.push_frame(to, &h, &[a, b].concat()),
    }
}

/// Bytes per frame to world rank `to`.
fn chunk(e: &Engine, to: u32) -> usize {
    e.frame_limit(to).clamp(64, CHUNK)
}

/// Puts `data` at byte `off` of window `win`'s part at world rank `to`
/// (window rank `me` is ours). Complete here at return; acknowledged by a
/// later [`flush`].
pub(crate) fn put(e: &mut Engine, win: u32, me: u32, to: u32, off: u64, data: &[u8]) -> Result<()> {
    let n = chunk(e, to);
    let mut at = 0;
    loop {
        let piece = &data[at..(at + n).min(data.len())];
        let id = e.svc.rma.wait_for(win, to, Waiting::Ack);
        let m = Msg {
            win,
            src: me,
            id,
            op: Op::Put {
                off: off + at as u64,
                data: piece,
            },
        };
        send(e, to, &m)?;
        at += piece.len();
        if at >= data.len() {
            return Ok(());
        }
    }
}

/// Reads `out.len()` bytes at byte `off` of the part at world rank `to`;
/// waits for them.
pub(crate) fn get(
    e: &mut Guard<'_>,
    info: WaitInfo,
    (win, me, to): (u32, u32, u32),
    off: u64,
    out: &mut [u8],
) -> Result<()> {
    let id = e.svc.rma.wait_for(
        win,
        to,
        Waiting::Data {
            buf: out.as_mut_ptr() as usize,
            len: out.len(),
            got: 0,
        },
    );
    let m = Msg {
        win,
        src: me,
        id,
        op: Op::Get {
            off,
            len: out.len() as u64,
        },
    };
    send(e, to, &m)?;
    finish(e, info, id)
}

/// Accumulates `data` (whole elements of `elem`) at byte `off` of the part
/// at world rank `to` with `op`; with `fetch`, waits for the bytes there
/// before (as long as `data`). `compare` is the comparand of a
/// compare-and-swap (one element), empty otherwise.
#[allow(clippy::too_many_arguments)]
pub(crate) fn accumulate(
    e: &mut Guard<'_>,
    info: WaitInfo,
    (win, me, to): (u32, u32, u32),
    off: u64,
    (op, elem): (AccOp, Elem),
    data: &[u8],
    compare: &[u8],
    mut fetch: Option<&mut [u8]>,
) -> Result<()> {
    // Whole elements per frame (an element is combined atomically).
    let n = (chunk(e, to) / 2 / elem.size()).max(1) * elem.size();
    let mut ids = Vec::new();
    let mut at = 0;
    loop {
        let piece = &data[at..(at + n).min(data.len())];
        let what = match fetch.as_deref_mut() {
            Some(f) => Waiting::Data {
                buf: f[at..].as_mut_ptr() as usize,
                len: piece.len(),
                got: 0,
            },
            None => Waiting::Ack,
        };
        let id = e.svc.rma.wait_for(win, to, what);
        let m = Msg {
            win,
            src: me,
            id,
            op: Op::Acc {
                off: off + at as u64,
                op,
                elem,
                fetch: fetch.is_some(),
                data: piece,
                compare,
            },
        };
        send(e, to, &m)?;
        if fetch.is_some() {
            ids.push(id);
        }
        at += piece.len();
        if at >= data.len() {
            break;
        }
    }
    let mut first = Ok(());
    for id in ids {
        let r = finish(e, info, id);
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Takes the passive-target lock of the part at world rank `to`; waits for
/// the grant.
pub(crate) fn lock(
    e: &mut Guard<'_>,
    info: WaitInfo,
    (win, me, to): (u32, u32, u32),
    exclusive: bool,
) -> Result<()> {
    let id = e.svc.rma.wait_for(win, to, Waiting::Grant);
    send(
        e,
        to,
        &Msg {
            win,
            src: me,
            id,
            op: Op::Lock { exclusive },
        },
    )?;
    finish(e, info, id)
}

/// Releases a lock taken by [`lock`], after every access of this rank to the
/// window is acknowledged (MPI: they are complete at the target when the
/// unlock returns), and waits until the target has released it: no unlock
/// is still on its way when the window is freed (the target would refuse
/// it), and an unlock the target refuses fails here.
pub(crate) fn unlock(
    e: &mut Guard<'_>,
    info: WaitInfo,
    (win, me, to): (u32, u32, u32),
    exclusive: bool,
) -> Result<()> {
    flush(e, info, win)?;
    let id = e.svc.rma.wait_for(win, to, Waiting::Grant);
    send(
        e,
        to,
        &Msg {
            win,
            src: me,
            id,
            op: Op::Unlock { exclusive },
        },
    )?;
    finish(e, info, id)
}

/// Waits until every put and accumulate of this rank to window `win` is
/// acknowledged; returns the first error one of them met.
pub(crate) fn flush(e: &mut Guard<'_>, info: WaitInfo, win: u32) -> Result<()> {
    if e.svc.rma.unacked.get(&win).copied().unwrap_or(0) > 0 {
        e.wait_until(info, |e| {
            e.svc.rma.unacked.get(&win).copied().unwrap_or(0) == 0
        })?;
    }
    match e.svc.rma.failed.remove(&win) {
        Some(m) => Err(Error::Protocol(m)),
        None => Ok(()),
    }
}

/// Waits for request `id`'s answer and takes it.
fn finish(e: &mut Guard<'_>, info: WaitInfo, id: u64) -> Result<()> {
    e.wait_until(info, |e| e.svc.rma.pending.get(&id).is_none_or(|p| p.done))?;
    match e.svc.rma.pending.remove(&id) {
        Some(Pending { error: Some(m), .. }) => Err(Error::Protocol(m)),
        _ => Ok(()),
    }
}

/// A one-sided frame from world rank `from`.
pub(crate) fn on_frame(e: &mut Engine, from: u32, h: &Header, p: &[u8]) -> Result<()> {
    let m = Msg::decode(h, p).map_err(Error::Protocol)?;
    if let Op::Reply { at, result } = m.op {
        return on_reply(e, from, m.id, at, result);
    }
    let answer = serve(e, from, &m);
    if let Err(why) = &answer {
        log(
            e.world_rank,
            &format!("refused a one-sided request from rank {from}: {why}"),
        );
    }
    // A request with no id wants no answer (kumi's own always carry one).
    if m.id == 0 {
        return Ok(());
    }
    match answer {
        Ok(Answer::Bytes(data)) => reply(e, from, &m, Ok(&data)),
        Ok(Answer::Part(addr, len)) => {
            // SAFETY: `addr..addr + len` is inside an exposed part (checked by
            // `serve`), memory of this process that its window keeps valid
            // while exposed; `reply` copies it into frames before returning.
            let d = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
            reply(e, from, &m, Ok(d))
        }
        Ok(Answer::Later) => Ok(()),
        Err(why) => reply(e, from, &m, Err(&why)),
    }
}

/// Answers request `m` of world rank `from` (in pieces if long).
fn reply(
    e: &mut Engine,
    from: u32,
    m: &Msg<'_>,
    result: std::result::Result<&[u8], &str>,
) -> Result<()> {
    let me = e
        .svc
        .rma
        .parts
        .get(&m.win)
        .and_then(|p| p.members.iter().position(|&w| w == e.world_rank))
        .unwrap_or(0) as u32;
    let answer = |at: u64, result| Msg {
        win: m.win,
        src: me,
        id: m.id,
        op: Op::Reply { at, result },
    };
    let data = match result {
        Err(why) => return send(e, from, &answer(0, Err(why))),
        Ok(d) => d,
    };
    let n = chunk(e, from);
    let mut at = 0;
    loop {
        let piece = &data[at..(at + n).min(data.len())];
        send(e, from, &answer(at as u64, Ok(piece)))?;
        at += piece.len();
        if at >= data.len() {
            return Ok(());
        }
    }
}

/// What a request is answered with.
enum Answer {
    /// These bytes (a grant or an acknowledgement: none).
    Bytes(Vec<u8>),
    /// The bytes at this address of a part (a get: read straight into the
    /// frames, with no copy of the whole answer).
    Part(usize, usize),
    /// Nothing yet (a lock not free yet), or nothing at all (an unlock).
    Later,
}

/// Does what `m` asks and says what to answer (a grant or an
/// acknowledgement is empty; nothing when the answer comes later, a
/// lock not yet free).
fn serve(e: &mut Engine, from: u32, m: &Msg<'_>) -> std::result::Result<Answer, String> {
    let part = e
        .svc
        .rma
        .parts
        .get(&m.win)
        .ok_or_else(|| format!("no window {:#x} here (freed, or never made)", m.win))?;
    if part.members.get(m.src as usize) != Some(&from) {
        return Err(format!(
            "rank {from} claims to be rank {} of window {:#x}",
            m.src, m.win
        ));
    }
    let (at, part) = (|off, len| part.at(off, len), part.mem);
    match m.op {
        Op::Put { off, data } => {
            let p = at(off, data.len())?;
            // SAFETY: `p..p + len` is inside the part (checked above), memory
            // of this process that the window keeps valid while exposed; MPI's
            // epochs order it against the application's own accesses.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p as *mut u8, data.len()) };
            Ok(Answer::Bytes(Vec::new()))
        }
        Op::Get { off, len } => {
            let len = usize::try_from(len).map_err(|_| format!("a get of {len} bytes"))?;
            Ok(Answer::Part(at(off, len)?, len))
        }
        Op::Acc {
            off,
            op,
            elem,
            fetch,
            data,
            compare,
        } => {
            let p = at(off, data.len())?;
            let (_, mutex) = part.words();
            let m = MutexWord(mutex);
            m.lock();
            let mut cur = vec![0u8; data.len()];
            // SAFETY: as for a put; under the part's accumulate mutex, which
            // every accumulate to it (from this host too) holds.
            unsafe { std::ptr::copy_nonoverlapping(p as *const u8, cur.as_mut_ptr(), cur.len()) };
            let old = fetch.then(|| cur.clone());
            let r = apply(op, elem, &mut cur, data, compare);
            if r.is_ok() {
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(cur.as_ptr(), p as *mut u8, cur.len()) };
            }
            m.unlock();
            r.map_err(|e| e.to_string())?;
            Ok(Answer::Bytes(old.unwrap_or_default()))
        }
        Op::Lock { exclusive } => {
            let (rw, _) = part.words();
            // First come, first served: a request queues behind older
            // waiters of its window, or a stream of short exclusive locks
            // (ranks polling a shared structure) starves the one that waits.
            let queued = e.svc.rma.blocked.iter().any(|l| l.win == m.win);
            if !queued && RwWord(rw).try_lock(exclusive) {
                *e.svc.rma.held.entry((m.win, from, exclusive)).or_default() += 1;
                Ok(Answer::Bytes(Vec::new()))
            } else {
                e.svc.rma.blocked.push(LockWait {
                    win: m.win,
                    from,
                    src: m.src,
                    id: m.id,
                    exclusive,
                });
                Ok(Answer::Later)
            }
        }
        Op::Unlock { exclusive } => {
            let (rw, _) = part.words();
            let rw = RwWord(rw);
            match e.svc.rma.held.get_mut(&(m.win, from, exclusive)) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    rw.unlock(exclusive);
                    Ok(Answer::Bytes(Vec::new()))
                }
                _ => Err(format!(
                    "an unlock of window {:#x} from rank {from}, which holds no {} lock on it",
                    m.win,
                    if exclusive { "exclusive" } else { "shared" }
                )),
            }
        }
        Op::Reply { .. } => unreachable!("answered in on_frame"),
    }
}

/// An answer from world rank `from` to our request `id`.
fn on_reply(
    e: &mut Engine,
    from: u32,
    id: u64,
    at: u64,
    result: std::result::Result<&[u8], &str>,
) -> Result<()> {
    let Some(p) = e.svc.rma.pending.get_mut(&id) else {
        return Err(Error::Protocol(format!(
            "one-sided answer to unknown request {id:#x}"
        )));
    };
    if p.target != from || p.done {
        return Err(Error::Protocol(format!(
            "one-sided answer to request {id:#x} from rank {from}, asked of rank {}",
            p.target
        )));
    }
    match (result, &mut p.what) {
        (Err(why), _) => {
            p.error = Some(format!("one-sided access to rank {from}: {why}"));
            p.done = true;
        }
        (Ok(d), Waiting::Ack | Waiting::Grant) => {
            if !d.is_empty() || at != 0 {
                return Err(Error::Protocol(format!(
                    "acknowledgement of request {id:#x} carries {} bytes",
                    d.len()
                )));
            }
            p.done = true;
        }
        (Ok(d), Waiting::Data { buf, len, got }) => {
            let fits = at
                .checked_add(d.len() as u64)
                .is_some_and(|end| end <= *len as u64);
            if !fits || at != *got as u64 {
                return Err(Error::Protocol(format!(
                    "one-sided answer of {} bytes at {at} to a request of {len} ({got} received)",
                    d.len()
                )));
            }
            // SAFETY: `buf..buf + len` is the caller's buffer, lent until this
            // request completes (the caller waits for it in `finish`), and
            // `at + d.len() <= len` (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    d.as_ptr(),
                    (*buf as *mut u8).add(at as usize),
                    d.len(),
                )
            };
            *got += d.len();
            p.done = *got == *len;
        }
    }
    if p.done && matches!(p.what, Waiting::Ack) {
        let (win, error) = (p.win, p.error.take());
        e.svc.rma.pending.remove(&id);
        if let Some(n) = e.svc.rma.unacked.get_mut(&win) {
            *n = n.saturating_sub(1);
        }
        if let Some(m) = error {
            e.svc.rma.failed.entry(win).or_insert(m);
        }
    }
    Ok(())
}

/// Grants the lock requests that have become grantable (each progress pass
/// while some wait), in the order they came per window: the first that
/// cannot be granted holds back the later ones of its window. Returns how
/// many.
pub(crate) fn progress(e: &mut Engine) -> Result<usize> {
    let mut granted = Vec::new();
    let mut stuck: Vec<u32> = Vec::new();
    let rma = &mut e.svc.rma;
    rma.blocked.retain(|l| {
        if stuck.contains(&l.win) {
            return true;
        }
        let ok = match rma.parts.get(&l.win) {
            Some(part) => RwWord(part.mem.words().0).try_lock(l.exclusive),
            None => true,
        };
        if ok {
            granted.push(*l);
        } else {
            stuck.push(l.win);
        }
        !ok
    });
    let n = granted.len();
    for l in granted {
        let m = Msg {
            win: l.win,
            src: l.src,
            id: l.id,
            op: Op::Lock {
                exclusive: l.exclusive,
            },
        };
        if e.svc.rma.parts.contains_key(&l.win) {
            *e.svc
                .rma
                .held
                .entry((l.win, l.from, l.exclusive))
                .or_default() += 1;
            reply(e, l.from, &m, Ok(&[]))?;
        } else {
            reply(e, l.from, &m, Err("the window was freed"))?;
        }
    }
    Ok(n)
}

/// Answers the lock requests of a window being freed with an error.
pub(crate) fn refuse(e: &mut Engine, win: u32, waiting: Vec<(u32, u64)>) -> Result<()> {
    for (from, id) in waiting {
        let m = Msg {
            win,
            src: 0,
            id,
            op: Op::Lock { exclusive: false },
        };
        reply(e, from, &m, Err("the window was freed"))?;
    }
    Ok(())
}

/// `cur = data op cur` on elements of `elem` (bytes, any alignment); for a
/// compare-and-swap, `cur = data` if `cur == compare`.
pub(crate) fn apply(
    op: AccOp,
    elem: Elem,
    cur: &mut [u8],
    data: &[u8],
    compare: &[u8],
) -> Result<()> {
    let b = match op {
        AccOp::Replace => {
            cur.copy_from_slice(data);
            return Ok(());
        }
        AccOp::NoOp => return Ok(()),
        AccOp::Cas => {
            if cur == compare {
                cur.copy_from_slice(data);
            }
            return Ok(());
        }
        AccOp::Sum => Builtin::Sum,
        AccOp::Prod => Builtin::Prod,
        AccOp::Min => Builtin::Min,
        AccOp::Max => Builtin::Max,
        AccOp::Land => Builtin::Land,
        AccOp::Lor => Builtin::Lor,
        AccOp::Lxor => Builtin::Lxor,
        AccOp::Band => Builtin::Band,
        AccOp::Bor => Builtin::Bor,
        AccOp::Bxor => Builtin::Bxor,
        AccOp::MinLoc => Builtin::MinLoc,
        AccOp::MaxLoc => Builtin::MaxLoc,
    };
    use crate::coll::{Loc, LocInt};
    use num_complex::Complex;
    match elem {
        Elem::I8 => combine::<i8>(b, cur, data),
        Elem::U8 => combine::<u8>(b, cur, data),
        Elem::I16 => combine::<i16>(b, cur, data),
        Elem::U16 => combine::<u16>(b, cur, data),
        Elem::I32 => combine::<i32>(b, cur, data),
        Elem::U32 => combine::<u32>(b, cur, data),
        Elem::I64 => combine::<i64>(b, cur, data),
        Elem::U64 => combine::<u64>(b, cur, data),
        Elem::F32 => combine::<f32>(b, cur, data),
        Elem::F64 => combine::<f64>(b, cur, data),
        Elem::C32 => combine::<Complex<f32>>(b, cur, data),
        Elem::C64 => combine::<Complex<f64>>(b, cur, data),
        Elem::Pair32 => combine::<Loc<i32>>(b, cur, data),
        Elem::PairF32 => combine::<Loc<f32>>(b, cur, data),
        Elem::PairF64 => combine::<Loc<f64>>(b, cur, data),
        Elem::F32Int => combine::<LocInt<f32>>(b, cur, data),
        Elem::F64Int => combine::<LocInt<f64>>(b, cur, data),
        Elem::I64Int => combine::<LocInt<i64>>(b, cur, data),
        Elem::I16Int => combine::<LocInt<i16>>(b, cur, data),
        #[cfg(target_arch = "x86_64")]
        Elem::LongDouble => combine::<crate::coll::LongDouble>(b, cur, data),
        #[cfg(target_arch = "x86_64")]
        Elem::CLongDouble => combine::<Complex<crate::coll::LongDouble>>(b, cur, data),
        #[cfg(target_arch = "x86_64")]
        Elem::LongDoubleInt => combine::<LocInt<crate::coll::LongDouble>>(b, cur, data),
        #[cfg(not(target_arch = "x86_64"))]
        Elem::LongDouble | Elem::CLongDouble | Elem::LongDoubleInt => Err(Error::invalid(
            "elem",
            elem as i64,
            "an x86-64 host (long double is the x87 format there)".to_string(),
        )),
    }
}

fn combine<T: crate::coll::Elem>(b: Builtin, cur: &mut [u8], data: &[u8]) -> Result<()> {
    let w = std::mem::size_of::<T>();
    let a: Vec<T> = data
        .chunks_exact(w)
        .map(bytemuck::pod_read_unaligned)
        .collect();
    let mut c: Vec<T> = cur
        .chunks_exact(w)
        .map(bytemuck::pod_read_unaligned)
        .collect();
    ReduceOp::<T>::builtin(b).apply(&a, &mut c)?;
    cur.copy_from_slice(bytemuck::cast_slice(&c));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(regions: Option<Vec<(usize, usize)>>) -> Part {
        Part {
            mem: Mem {
                base: 0x1000,
                size: 64,
                rw: 0,
                mutex: 0,
            },
            regions,
            members: vec![0, 1],
        }
    }

    #[test]
    fn accesses_outside_a_part_are_refused() {
        let p = part(None);
        assert_eq!(p.at(0, 64), Ok(0x1000));
        assert_eq!(p.at(60, 4), Ok(0x103c));
        assert!(p.at(61, 4).is_err());
        assert!(p.at(64, 1).is_err());
        assert!(p.at(u64::MAX, 2).is_err(), "an offset that overflows");
        assert_eq!(p.at(64, 0), Ok(0x1040), "an empty access at the end");
    }

    #[test]
    fn dynamic_accesses_must_fall_inside_attached_memory() {
        let p = part(Some(vec![(0x2010, 16), (0x2000, 16), (0x2030, 8)]));
        assert_eq!(p.at(0x2000, 16), Ok(0x2000));
        assert_eq!(p.at(0x2018, 8), Ok(0x2018));
        // Regression: two regions that touch hold an access across them.
        assert_eq!(p.at(0x2008, 16), Ok(0x2008));
        assert_eq!(p.at(0x2000, 32), Ok(0x2000));
        // A gap between regions is not attached memory.
        assert!(p.at(0x2018, 16).is_err());
        assert!(p.at(0x2000, 33).is_err());
        assert_eq!(
            p.at(0x2038, 0),
            Ok(0x2038),
            "an empty access at a region's end"
        );
        assert!(p.at(0x1fff, 2).is_err());
        assert!(
            p.at(0x1000, 8).is_err(),
            "the static base means nothing here"
        );
        assert!(p.at(u64::MAX - 1, 4).is_err());
    }

    #[test]
    fn regions_may_not_overlap_and_detach_needs_a_start() {
        let mut st = RmaState::default();
        st.expose(7, part(Some(Vec::new())));
        st.attach(7, 0x3000, 32).unwrap();
        assert!(st.attach(7, 0x3010, 32).is_err(), "overlap");
        assert!(st.attach(7, 0x2ff0, 17).is_err(), "overlap from below");
        st.attach(7, 0x3020, 8).unwrap();
        assert!(st.detach(7, 0x3008).is_err(), "not a region's start");
        st.detach(7, 0x3000).unwrap();
        assert!(st.detach(7, 0x3000).is_err(), "detached twice");
        assert!(st.attach(8, 0x4000, 8).is_err(), "no such window");
        st.expose(9, part(None));
        assert!(st.attach(9, 0x4000, 8).is_err(), "not a dynamic window");
    }

    #[test]
    fn apply_combines_unaligned_elements() {
        let mut cur = [0u8; 17];
        let (a, b) = (5i32.to_le_bytes(), (-7i32).to_le_bytes());
        cur[1..5].copy_from_slice(&a);
        apply(AccOp::Sum, Elem::I32, &mut cur[1..5], &b, &[]).unwrap();
        assert_eq!(i32::from_le_bytes(cur[1..5].try_into().unwrap()), -2);
        apply(AccOp::Max, Elem::I32, &mut cur[1..5], &a, &[]).unwrap();
        assert_eq!(i32::from_le_bytes(cur[1..5].try_into().unwrap()), 5);
        let mut x = 3u64.to_le_bytes();
        apply(
            AccOp::Cas,
            Elem::U64,
            &mut x,
            &9u64.to_le_bytes(),
            &4u64.to_le_bytes(),
        )
        .unwrap();
        assert_eq!(u64::from_le_bytes(x), 3, "no swap when different");
        apply(
            AccOp::Cas,
            Elem::U64,
            &mut x,
            &9u64.to_le_bytes(),
            &3u64.to_le_bytes(),
        )
        .unwrap();
        assert_eq!(u64::from_le_bytes(x), 9);
        let mut f = 1.5f64.to_le_bytes();
        let g = f;
        assert!(apply(AccOp::Band, Elem::F64, &mut f, &g, &[]).is_err());
    }
}
