//! [`ShmTransport`]: one rank's end of the shared-memory transport.
//!
//! # Sleeping and doorbells
//!
//! A rank that has nothing to do may sleep on the futex word `doorbell` of its
//! [`RankBlock`]. The protocol is Dekker's, with a SeqCst fence on each side:
//!
//! ```text
//! sender                              sleeper (prepare_sleep, then sleep)
//! store stamp (Release)               seen = doorbell.load
//! fence(SeqCst)                       sleeping.store(1)
//! if sleeping.load() == 1:            fence(SeqCst)
//!     doorbell += 1; FUTEX_WAKE       if any stamp is ready: do not sleep
//!                                     FUTEX_WAIT(doorbell, seen)
//! ```
//!
//! The two fences are ordered one way or the other in the single SeqCst order:
//! if the sender's comes first, the sleeper's stamp check sees the record and it
//! does not sleep; if the sleeper's comes first, the sender sees `sleeping` and
//! rings. A ring that lands between the sleeper's check and its `FUTEX_WAIT` is
//! not lost: the kernel compares the word with `seen` and returns at once. The
//! fence costs the sender a few nanoseconds per frame; the common case (receiver
//! awake) touches no line the receiver writes.
//!
//! The same pattern covers a *producer* sleeping because a ring is full: it sets
//! the ring's `want_room` flag, fences, and re-reads `tail`; the consumer,
//! after each tail publication, fences and reads `want_room`, and rings the
//! producer's doorbell if it is set. Without this a sender blocked on a full ring
//! could sleep through the consumer draining it.
//!
//! The futex is shared (not `FUTEX_PRIVATE_FLAG`): the word lives in a
//! `MAP_SHARED` mapping of several processes.
//!
//! # The fast side's fence is asymmetric
//!
//! A SeqCst fence right after the stamp store makes the sender wait until that
//! store has left its store buffer, i.e. for the whole cache-line transfer to
//! the receiver (tens of nanoseconds on every message), and the consumer pays
//! the same after each tail publication. But only the *sleeping* side is
//! rare and slow. So, where the kernel offers it, each rank registers for
//! `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)` at start, the fast sides put
//! only a compiler fence between their store and their load, and the side that
//! is about to sleep calls `membarrier`, which makes every running thread of
//! every registered process execute a full barrier before it returns (an IPI;
//! a few microseconds, on a path that is about to sleep anyway). The argument
//! is the usual one for asymmetric fences: the sleeper's own call begins with
//! a full barrier, so its `sleeping` store is visible before any sender's
//! forced barrier; a sender whose `sleeping` load ran before that barrier had
//! its stamp store drained by it, so the sleeper's check after `membarrier`
//! returns sees the record; a sender whose load ran after it sees `sleeping`.
//! A thread that was not running at the time went through a context switch,
//! which is a full barrier. `KUMI_SHM_MEMBARRIER=off` (job-wide, like every
//! knob) goes back to the symmetric fences; so does a kernel without it.

use super::ring::{looks_unread, Consumer, Producer, RawMem};
use super::segment::{
    owner_alive, process_start_time, RankBlock, Segment, AWAITS_NOTHING, AWAITS_OTHER, STATE_EMPTY,
};
use super::senders::{self, Senders};
use crate::sync::{fence, Ordering};
use crate::{Awaits, Capabilities, Sink, Transport, Turn};
use kumi_core::call::Call;
use kumi_core::header::{Header, COMPACT_HEADER_BYTES, HEADER_BYTES};
use rustix::thread::{futex, membarrier, MembarrierCommand};
use std::io;
use std::sync::atomic::compiler_fence;
use std::time::Duration;

/// Records taken from one ring per ring visit in `poll`, so that one busy sender
/// cannot starve the others. A guess; tune it with data.
const PER_RING: usize = 32;

/// Global rank to local rank.
enum PeerMap {
    /// Local rank `i` is global rank `base + i` (the usual block placement).
    Contiguous(u32),
    /// (global, local), sorted by global.
    Sorted(Vec<(u32, usize)>),
}

/// The shared-memory transport of one rank.
pub struct ShmTransport {
    /// Producer ends of rings `[me][j]`, indexed by local rank `j` (including
    /// `me`: a rank may send to itself).
    out: Vec<Producer<RawMem>>,
    /// Whether this rank announced itself in local rank `j`'s sender set
    /// (before its first record to `j`), by `j`.
    announced: Vec<bool>,
    /// The local ranks whose ring refused a push of this rank's and may
    /// still be full (a later push or look may have found room): the only
    /// producers a sleep looks at, where visiting all of them cost a pass
    /// over every local rank per sleep.
    blocked: Vec<usize>,
    /// Consumer ends of rings `[j][me]`, indexed by local rank `j`.
    inc: Vec<Consumer<RawMem>>,
    /// The local ranks that ever sent to this one: the only rings a poll
    /// visits (`senders`).
    senders: Senders,
    /// Index into `senders.list()` of the ring to visit first in the next
    /// `poll` (the one after the last that delivered).
    next_rr: usize,
    /// Doorbell value read by `prepare_sleep`, for `FUTEX_WAIT`.
    bell_seen: u32,
    me: usize,
    globals: Vec<u32>,
    map: PeerMap,
    max_payload: usize,
    /// Senders and consumers use compiler fences; sleepers use `membarrier`
    /// (module doc).
    asym: bool,
    /// Owns the mapping the rings point into: declared after them, and the
    /// rings have no destructor, so they never outlive it.
    segment: Segment,
}

impl ShmTransport {
    /// The transport of local rank `me` over `segment`; `globals[i]` is the global
    /// rank of local rank `i`. Attaches this process to `me`'s block (pid and
    /// start time, for the launcher and `kumi clean`); a block that is already
    /// attached is refused, since its rings would restart at position 0.
    /// `membarrier`: whether asymmetric fences may be used
    /// (`KUMI_SHM_MEMBARRIER`; they are only if the kernel has them too).
    pub fn new(
        segment: Segment,
        me: usize,
        globals: Vec<u32>,
        membarrier: bool,
    ) -> io::Result<ShmTransport> {
        let n = segment.local_size();
        if me >= n || globals.len() != n {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "local rank {me} with {} global ranks for a segment of {n}",
                    globals.len()
                ),
            ));
        }
        let block = segment.rank_block(me);
        if block.state() != STATE_EMPTY {
            let alive = if owner_alive(block.pid(), block.start_time()) {
                "running"
            } else {
                "gone"
            };
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "local rank {me} of the segment is already attached by pid {} ({alive})",
                    block.pid()
                ),
            ));
        }
        let pid = std::process::id();
        block.attach(pid, process_start_time(pid).unwrap_or(0));
        let map = if globals
            .iter()
            .enumerate()
            .all(|(i, &g)| g.checked_sub(globals[0]) == Some(i as u32))
        {
            PeerMap::Contiguous(globals[0])
        } else {
            let mut v: Vec<(u32, usize)> = globals.iter().copied().zip(0..).collect();
            v.sort_unstable();
            if v.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a global rank appears twice in globals",
                ));
            }
            PeerMap::Sorted(v)
        };
        let cap = segment.ring_bytes();
        let out = (0..n)
            .map(|j| Producer::new(ring_mem(&segment, me, j)))
            .collect();
        let inc = (0..n)
            .map(|j| Consumer::new(ring_mem(&segment, j, me)))
            .collect();
        Ok(ShmTransport {
            out,
            announced: vec![false; n],
            blocked: Vec::new(),
            inc,
            senders: Senders::new(senders::words(n)),
            next_rr: 0,
            bell_seen: 0,
            me,
            globals,
            map,
            max_payload: super::ring::max_payload(cap),
            asym: membarrier && crate::membarrier_works(),
            segment,
        })
    }

    /// Makes every incoming ring ask for the line `bytes` ahead of the
    /// record it consumes (see `Consumer::set_prefetch`; 0 turns it off).
    pub fn set_prefetch(&mut self, bytes: u64) {
        for c in &mut self.inc {
            c.set_prefetch(bytes);
        }
    }

    /// The segment, for the rank's own block (call state, counters).
    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    /// This rank's local index.
    pub fn local_rank(&self) -> usize {
        self.me
    }

    /// One step along a chain of waits from local rank `j` (see
    /// [`ShmTransport::turn`]).
    fn chain_step(&self, j: usize) -> Step {
        let s = match self.segment.rank_block(j).awaits() {
            AWAITS_NOTHING => return Step::Live,
            AWAITS_OTHER => return Step::Unknown,
            a => (a - 1) as usize,
        };
        if s >= self.globals.len() || s == j {
            return Step::Unknown;
        }
        if looks_unread(&ring_mem(&self.segment, s, j)) {
            return Step::Live;
        }
        Step::Waits(s)
    }

    /// Makes this rank's side of the sleep protocol use full fences instead of
    /// `membarrier` (module doc), as `KUMI_SHM_MEMBARRIER=off` does. For a
    /// host with more ranks than cores, where ranks sleep often (they hand
    /// their core to the rank nearest to the next message, `turn`): a
    /// `membarrier` per sleep made a ring of 8 ranks on 2 cores take 12 us a
    /// hop instead of 1.1, and a full fence per send costs tens of
    /// nanoseconds in hops of a microsecond. Every rank of the host must make
    /// the same choice (a sender without the fence and a sleeper without the
    /// `membarrier` could miss each other): it is made from the host's rank
    /// and core counts, which they all share.
    pub fn use_full_fences(&mut self) {
        self.asym = false;
    }

    /// Whether a publisher in the collective area must fence fully before it
    /// looks for sleepers (`coll_area::publish`): false with asymmetric
    /// fences, where every sleeper calls `membarrier` in `prepare_sleep`.
    pub fn full_fences(&self) -> bool {
        !self.asym
    }

    /// Rings local rank `j`'s doorbell, waking it if it sleeps (a spurious
    /// wake-up as far as it knows). For the runtime's abort path.
    pub fn wake(&self, j: usize) {
        Self::ring_doorbell(self.segment.rank_block(j));
    }

    fn ring_doorbell(block: &RankBlock) {
        // Release: a sleeper that reads the new value in `prepare_sleep` also
        // sees what we published before (it then finds the record and stays up).
        block.doorbell().fetch_add(1, Ordering::Release);
        // Shared futex: the word is in a MAP_SHARED mapping of other processes.
        // An error (e.g. EFAULT) cannot happen for a valid mapping; if it did, the
        // sleeper would still wake at its timeout.
        let _ = futex::wake(block.doorbell(), futex::Flags::empty(), 1);
    }

    /// After a tail publication on ring `[j][me]`: wake `j` if it sleeps for room.
    #[inline]
    fn wake_producer_if_waiting(&self, j: usize) {
        if self.inc[j].producer_waiting(!self.asym) {
            Self::ring_doorbell(self.segment.rank_block(j));
        }
    }

    fn peer_error(&self, j: usize, what: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "shm: bad frame from rank {} (local {j}): {what}",
                self.globals[j]
            ),
        )
    }

    fn clear_sleep_flags(&mut self) {
        // Relaxed: withdrawing an announcement publishes nothing; a sender that
        // still sees the old 1 merely rings once more (a spurious wake-up).
        self.segment
            .rank_block(self.me)
            .sleeping()
            .store(0, Ordering::Relaxed);
        for &j in &self.blocked {
            if self.out[j].is_blocked() {
                self.out[j].set_want_room(false);
            }
        }
    }
}

impl Capabilities for ShmTransport {
    /// Whether another local rank that is awake last ran on the CPU this
    /// rank runs on now: then a rank that waits for messages should yield,
    /// as that neighbour (often the very peer it waits for) cannot run while
    /// it polls. Otherwise polling on without a system call is fastest.
    /// Publishes this rank's CPU for the others as a side effect.
    ///
    /// Costs a `sched_getcpu` (glibc reads it from the rseq area: a load) and
    /// one load per local rank, of lines their owners write only when they
    /// move to another CPU.
    fn shares_core(&mut self) -> bool {
        // SAFETY: sched_getcpu has no preconditions; -1 means unknown.
        let cpu = unsafe { libc::sched_getcpu() };
        let Ok(cpu) = u32::try_from(cpu) else {
            return true;
        };
        let mine = self.segment.rank_block(self.me);
        if mine.cpu() != cpu {
            mine.set_cpu(cpu);
        }
        (0..self.globals.len()).filter(|&j| j != self.me).any(|j| {
            let b = self.segment.rank_block(j);
            // Advisory, like the CPU itself (a stale flag costs one yield
            // too many or too few, never a lost message).
            b.cpu() == cpu && !b.is_asleep()
        })
    }

    fn roomier_cpu(&self, allowed: &[usize]) -> Option<usize> {
        let cpus: Vec<Option<u32>> = (0..self.globals.len())
            .map(|j| {
                let b = self.segment.rank_block(j);
                // Advisory, as in `shares_core`: a stale CPU costs a move
                // too many or too few, never a message.
                (!b.is_asleep() || j == self.me)
                    .then(|| b.cpu())
                    .filter(|&c| c != u32::MAX)
            })
            .collect();
        roomier_cpu(self.me, &cpus, allowed)
    }

    /// What this rank, bound with the other local ranks to `cores` cores
    /// (local ranks `a` and `b` share one when `a % cores == b % cores`) and
    /// waiting for a message of local rank `src`, does with its core: keep
    /// it ([`Turn::Keep`]) when it is nearer than every other awake rank of
    /// its core to a rank that may send; hand it on ([`Turn::Pass`]) when an
    /// awake rank of the core is strictly nearer; else yield as before
    /// ([`Turn::Yield`]). Nearness is the chain of waits: a rank that runs,
    /// or has an unread message from the rank it waits for, is "live" (0); a
    /// rank waiting for a live one is at 1, and so on. A chain that reaches a
    /// rank waiting for something other than one local rank tells nothing:
    /// this rank then yields. In a token ring of 8 ranks on 2 cores, with the
    /// token at rank 1, core 0's ranks 2, 4, 6 and 0 are at 1, 3, 5 and 7:
    /// rank 2 keeps the core, and the others, should the scheduler give it
    /// to them, hand it on. Without this, the rank whose message comes next
    /// yields in turn with ranks that have nothing to do, and each hop waits
    /// on average for half a round of its core's ranks (~1.2 us a hand-over
    /// here).
    ///
    /// Ties yield (as every waiting rank did before). Reads the published
    /// waits ([`RankBlock::awaits`]) and the rings' unread records along the
    /// chains, all of them one step at a time, so that it stops at the
    /// nearest live rank: a rank the scheduler gave the core by mistake finds
    /// out after two steps per chain in the ring above. With more than
    /// `CORE_CHAINS` (32) awake ranks on the core it yields.
    fn turn(&self, src: usize, cores: usize) -> Turn {
        let n = self.globals.len();
        if cores == 0 || src >= n || src == self.me {
            return Turn::Yield;
        }
        // The awake ranks of this core, each with how far its chain has been
        // followed (all one wait further than `src` is from this rank).
        let mut mates = [0usize; CORE_CHAINS];
        let mut len = 0;
        for j in (self.me % cores..n).step_by(cores) {
            // A rank asleep takes no turn of the core; its doorbell wakes it
            // when its message comes.
            if j == self.me || self.segment.rank_block(j).is_asleep() {
                continue;
            }
            if len == CORE_CHAINS {
                return Turn::Yield;
            }
            mates[len] = j;
            len += 1;
        }
        let mates = &mut mates[..len];
        // Round k looks at the mates' chains at depth k and this rank's at
        // depth k + 1 (its source's at depth k). A chain that ends in a wait
        // for something else (any source, a collective, requests) says
        // nothing of how near its rank is: that rank may need the core at
        // any moment, so it is yielded to, but never slept for (a rank
        // waiting in a barrier beside a ping-pong would otherwise send the
        // ping-pong's rank to sleep every round trip: 1.2 -> 1.64 us).
        let mut mine = src;
        for _ in 0..n {
            for m in mates.iter_mut() {
                match self.chain_step(*m) {
                    Step::Live => return Turn::Pass,
                    Step::Unknown => return Turn::Yield,
                    Step::Waits(next) => *m = next,
                }
            }
            match self.chain_step(mine) {
                // This rank is one further: a mate live one step on ties.
                Step::Live
                    if mates
                        .iter()
                        .all(|&m| matches!(self.chain_step(m), Step::Waits(_))) =>
                {
                    return Turn::Keep
                }
                Step::Live | Step::Unknown => return Turn::Yield,
                Step::Waits(next) => mine = next,
            }
        }
        // Every chain goes round without reaching a live rank: nothing is in
        // flight between these ranks; no reason to keep the core.
        Turn::Yield
    }

    /// Wakes every local rank asleep in a wait for local rank `j`'s message
    /// (see [`RankBlock::awaits`]): a frame sent to `j` made it live, so they
    /// are next to it ([`ShmTransport::turn`]), and woken now they are on
    /// their core's run queue by the time it sends. Advisory: a rank that
    /// announces its sleep just after this look is not woken ahead, and
    /// wakes when its own message rings its doorbell.
    fn wake_waiters_of(&self, j: usize) {
        for k in 0..self.globals.len() {
            let b = self.segment.rank_block(k);
            if k != self.me && b.is_asleep() && b.awaits() == j as u32 + 1 {
                Self::ring_doorbell(b);
            }
        }
    }

    fn progress_bell(&self) -> Option<crate::bell::Bell> {
        Some(self.segment.progress_bell(self.me))
    }

    fn ring_progress(&self) {
        for k in 0..self.globals.len() {
            let b = self.segment.rank_block(k);
            // A rank inside a blocking kumi call progresses itself (`call` is
            // advisory: at worst one ring too many or one late).
            if k != self.me && b.call() == Call::None {
                crate::bell::Bell::ring_if_armed(b.progress());
            }
        }
    }

    /// Publishes what this rank waits for (see [`RankBlock::awaits`]).
    #[inline]
    fn publish_awaits(&self, awaits: Awaits) {
        let v = match awaits {
            Awaits::Nothing => AWAITS_NOTHING,
            Awaits::Other => AWAITS_OTHER,
            Awaits::Local(l) => l as u32 + 1,
        };
        self.segment.rank_block(self.me).set_awaits(v);
    }

    fn publish_call(&self, call: Call) {
        self.segment.rank_block(self.me).set_call(call);
    }

    fn single_copy_pid(&self, peer: u32) -> Option<i32> {
        let pid = self.segment.rank_block(self.local_of(peer)?).pid();
        i32::try_from(pid).ok().filter(|&p| p > 0)
    }

    /// Local rank of global rank `peer`, if it is on this host.
    fn local_of(&self, peer: u32) -> Option<usize> {
        match &self.map {
            PeerMap::Contiguous(base) => peer
                .checked_sub(*base)
                .map(|i| i as usize)
                .filter(|&i| i < self.globals.len()),
            PeerMap::Sorted(v) => v
                .binary_search_by_key(&peer, |&(g, _)| g)
                .ok()
                .map(|k| v[k].1),
        }
    }

    /// Whether [`Transport::poll`] has anything to do: a record ready, or a
    /// consumed stretch of a ring not handed back to its producer yet (a poll
    /// that stops at its per-ring budget leaves one), or a sender not known
    /// yet. No side effects; a load and a compare per ring that was ever
    /// used (and per word of the sender set), where an empty poll runs its
    /// round robin: the engine asks this first on every pass of a waiting
    /// rank.
    #[inline]
    fn needs_poll(&self) -> bool {
        self.senders.behind(self.segment.sender_set(self.me))
            || self.senders.list().iter().any(|&j| {
                let c = &self.inc[j];
                c.ready() || c.behind()
            })
    }

    /// [`Transport::poll`] with the sink's type known, so that the caller's
    /// handling of a frame compiles into the loop that finds it (the engine
    /// calls this: through the trait, the sink was a call through a pointer
    /// with its own frame, a sixth of a received small message's path).
    #[inline]
    fn poll_with<F: FnMut(u32, &Header, &[u8]) + ?Sized>(
        &mut self,
        sink: &mut F,
    ) -> io::Result<usize> {
        self.senders.refresh(self.segment.sender_set(self.me));
        let n = self.senders.list().len();
        let mut total = 0;
        let mut last = None;
        // Round robin without `%`: a division per pass is a good part of a
        // waiting rank's poll, which is what bounds how soon it sees a frame.
        let after = |k: usize| if k + 1 == n { 0 } else { k + 1 };
        let mut k = if self.next_rr < n { self.next_rr } else { 0 };
        for _ in 0..n {
            let j = self.senders.list()[k];
            let mut got = 0;
            while got < PER_RING {
                let rec = match self.inc[j].peek() {
                    Ok(Some(rec)) => rec,
                    Ok(None) => {
                        // Empty: publish what we consumed, so a producer waiting
                        // for room gets all of it.
                        if self.inc[j].publish_if_behind() {
                            self.wake_producer_if_waiting(j);
                        }
                        break;
                    }
                    Err(e) => return Err(self.peer_error(j, &e)),
                };
                let (h, payload) = self.inc[j].bytes(rec);
                // The ring hands a smaller header as its 24 or 16 bytes (see
                // ring.rs); it has checked the length is one of the three.
                let header = match h.len() {
                    HEADER_BYTES => Header::decode(h),
                    COMPACT_HEADER_BYTES => Header::decode_compact(h),
                    _ => Header::decode_short(h, payload.len()),
                }
                .map_err(|e| self.peer_error(j, &e.to_string()))?;
                sink(self.globals[j], &header, payload);
                if self.inc[j].pop(rec) {
                    self.wake_producer_if_waiting(j);
                }
                got += 1;
            }
            if got > 0 {
                last = Some(k);
            }
            total += got;
            k = after(k);
        }
        if let Some(k) = last {
            self.next_rr = after(k);
        }
        Ok(total)
    }
}

/// Where a chain of waits goes from one rank ([`ShmTransport::turn`]).
enum Step {
    /// The rank runs, or has an unread message from the rank it waits for.
    Live,
    /// The rank waits for something other than one local rank.
    Unknown,
    /// The rank waits for this local rank, with nothing from it unread.
    Waits(usize),
}

/// Most awake ranks of one core among which [`ShmTransport::turn`] decides
/// (more, and the rank yields as if it had not looked).
const CORE_CHAINS: usize = 32;

/// The memory of ring `[src][dst]` of `segment`, for its one producer (`src`)
/// or its one consumer (`dst`), or for a third rank that only loads its
/// atomic words (`looks_unread`).
fn ring_mem(segment: &Segment, src: usize, dst: usize) -> RawMem {
    // SAFETY: `ring_base` points at a 64-aligned ring of `RING_CONTROL_BYTES +
    // ring_bytes` bytes inside the mapping `segment` owns, and the transport that
    // calls this keeps the segment (dropped after the rings, which have no
    // destructor). One producer and one consumer per ring: local rank `src` alone
    // produces into row `src` and `dst` alone consumes column `dst`, and
    // `ShmTransport::new` refuses a rank block that is already attached.
    unsafe { RawMem::new(segment.ring_base(src, dst), segment.ring_bytes()) }
}

impl Transport for ShmTransport {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn try_send(&mut self, peer: u32, header: &Header, payload: &[u8]) -> io::Result<bool> {
        let j = self.local_of(peer).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("shm: rank {peer} is not on this host"),
            )
        })?;
        if payload.len() > self.max_payload {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "shm: payload of {} bytes above the maximum {}",
                    payload.len(),
                    self.max_payload
                ),
            ));
        }
        if !self.announced[j] {
            // Before the record, and so before the fence below (`senders`).
            senders::announce(self.segment.sender_set(j), self.me);
            self.announced[j] = true;
        }
        let hdr: [u8; HEADER_BYTES] = header.encode();
        let pushed = if Producer::<RawMem>::small_fits(header, payload) {
            self.out[j].try_push_small(&hdr, header.len == payload.len() as u64, payload)
        } else {
            self.out[j].try_push(&hdr, payload)
        };
        if !pushed {
            if !self.blocked.contains(&j) {
                self.blocked.push(j);
            }
            return Ok(false);
        }
        // Dekker with the receiver's prepare_sleep (module doc): our stamp store
        // is ordered before the load of `sleeping` by this fence, or, with
        // asymmetric fences, by the sleeper's `membarrier` (the compiler fence
        // keeps the compiler from moving the load above the store).
        if self.asym {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
        let block = self.segment.rank_block(j);
        // A Relaxed load (`is_asleep`): the fence above does the ordering.
        if block.is_asleep() {
            Self::ring_doorbell(block);
        }
        Ok(true)
    }

    fn poll(&mut self, sink: &mut Sink<'_>) -> io::Result<usize> {
        self.poll_with(sink)
    }

    fn prepare_sleep(&mut self) -> bool {
        let block = self.segment.rank_block(self.me);
        // Acquire: pairs with a sender's Release bump (see `ring_doorbell`).
        self.bell_seen = block.doorbell().load(Ordering::Acquire);
        // Relaxed stores: the SeqCst fence below orders them before our checks.
        block.sleeping().store(1, Ordering::Relaxed);
        let out = &self.out;
        self.blocked.retain(|&j| out[j].is_blocked());
        for &j in &self.blocked {
            self.out[j].set_want_room(true);
        }
        // Dekker with senders (their stamp, fence, load of `sleeping`) and with
        // consumers of our full rings (their tail, fence, load of `want_room`).
        // With asymmetric fences their side has only a compiler fence and this
        // membarrier does the work of both (module doc); it cannot fail after
        // the registration succeeded (same kernel, same process), and the fence
        // after it is what the symmetric protocol needs.
        if self.asym {
            let _ = membarrier(MembarrierCommand::GlobalExpedited);
        }
        fence(Ordering::SeqCst);
        let mut room = false;
        for &j in &self.blocked {
            let p = &mut self.out[j];
            if p.room_for_blocked() {
                // No longer blocked: withdraw its flag here, as clear_sleep_flags
                // only visits producers that are still blocked.
                p.set_want_room(false);
                room = true;
            }
        }
        // Work for a poll (a record, or a tail not handed back that a
        // producer may be waiting for): stay up.
        if room || self.needs_poll() {
            self.clear_sleep_flags();
            return false;
        }
        true
    }

    fn sleep(&mut self, timeout: Duration) {
        let ts = futex::Timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let block = self.segment.rank_block(self.me);
        // Returns at once if the doorbell moved since `prepare_sleep`; EINTR,
        // EAGAIN and ETIMEDOUT are all just "wake up" (spurious wake-ups are
        // allowed by the contract).
        let _ = futex::wait(
            block.doorbell(),
            futex::Flags::empty(),
            self.bell_seen,
            Some(&ts),
        );
        self.clear_sleep_flags();
    }

    fn cancel_sleep(&mut self) {
        self.clear_sleep_flags();
    }
}

/// [`Capabilities::roomier_cpu`] over the local ranks' last CPUs (`None`:
/// asleep, or not known yet): local rank `me` moves when an awake rank of a
/// lower local rank last ran on its CPU, to the first CPU of `allowed`,
/// counting from the `me`-th, on which no other awake rank last ran.
/// Starting at a different place per rank keeps two ranks that move at
/// once from picking the same CPU.
pub(crate) fn roomier_cpu(me: usize, cpus: &[Option<u32>], allowed: &[usize]) -> Option<usize> {
    let mine = cpus.get(me).copied().flatten()?;
    if !cpus[..me].contains(&Some(mine)) {
        return None;
    }
    let taken = |cpu: usize| {
        cpus.iter()
            .enumerate()
            .any(|(j, &c)| j != me && c == Some(cpu as u32))
    };
    let n = allowed.len();
    (0..n)
        .map(|k| allowed[(me + k) % n])
        .find(|&cpu| cpu as u32 != mine && !taken(cpu))
}

#[cfg(test)]
mod tests {
    use super::roomier_cpu;

    #[test]
    fn the_higher_of_two_ranks_on_one_cpu_moves_to_a_free_one() {
        let both = [Some(0), Some(0)];
        assert_eq!(roomier_cpu(1, &both, &[0, 1]), Some(1));
        assert_eq!(roomier_cpu(0, &both, &[0, 1]), None, "the lower stays");
        // Apart already, or the other asleep: nobody moves.
        assert_eq!(roomier_cpu(1, &[Some(0), Some(1)], &[0, 1]), None);
        assert_eq!(roomier_cpu(1, &[None, Some(0)], &[0, 1]), None);
        // Its own CPU not known yet: nowhere.
        assert_eq!(roomier_cpu(1, &[Some(0), None], &[0, 1]), None);
    }

    #[test]
    fn ranks_moving_at_once_pick_different_cpus_and_never_a_taken_one() {
        let three = [Some(4), Some(4), Some(4)];
        let allowed = [4, 5, 6, 7];
        assert_eq!(roomier_cpu(1, &three, &allowed), Some(5));
        assert_eq!(roomier_cpu(2, &three, &allowed), Some(6));
        // Every other CPU has an awake rank: stay.
        assert_eq!(roomier_cpu(1, &[Some(0), Some(0), Some(1)], &[0, 1]), None);
        // An asleep rank's CPU counts as free.
        assert_eq!(roomier_cpu(1, &[Some(0), Some(0), None], &[0, 1]), Some(1));
        assert_eq!(roomier_cpu(1, &[Some(0), Some(0)], &[0]), None);
    }
}
