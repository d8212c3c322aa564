//! How a rank waits: poll, then poll and yield, then sleep on its doorbell
//! ([`WaitPolicy`]); oversubscribed and bound to cores, whether to keep the
//! core or hand it to a rank nearer to the next message (turns). What a wait
//! is for ([`WaitInfo`]) goes to the launcher's deadlock detector.

use super::{Engine, WaitInfo};
use crate::error::Result;
use kumi_core::call::Call;
use kumi_transport::{Awaits, Capabilities, Transport, Turn};
use std::time::{Duration, Instant};

/// Passes a waiting rank that found its core to be its own polls before it
/// looks again ([`Capabilities::turn`]). A guess: a pass is ~50 ns,
/// so the look is repeated about every microsecond, which is how soon a rank
/// of the core may become nearer to the message than this one.
pub(super) const KEPT_PASSES: u32 = 16;

/// How a rank waits when nothing is arriving: poll, then yield, then sleep.
#[derive(Clone, Debug)]
pub(crate) struct WaitPolicy {
    /// Empty polls before the clock is first read (a wait shorter than this
    /// costs no system call).
    pub polls: u32,
    pub spin: Duration,
    pub yield_for: Duration,
    pub sleep_timeout: Duration,
    /// Empty passes per `sched_yield` before the clock is read
    /// (`KUMI_YIELD_EVERY`; default by transport, see `wait_loop`).
    pub yield_every: Option<u32>,
    /// More ranks on this host than cores.
    pub oversubscribed: bool,
    /// Oversubscribed, how long a rank waiting in a collective keeps the
    /// core without yielding once every other rank bound to its core waits
    /// in the same collective (`KUMI_MATE_SPIN_US`; see
    /// [`Engine::wait_until_with_mates`]).
    pub mate_spin: Duration,
}

impl WaitPolicy {
    /// Defaults depend on whether this host runs more ranks than it has cores.
    ///
    /// One rank per core: waking a process that sleeps in the kernel costs
    /// ~50 us on an idle virtual CPU, so the rank keeps polling for a good
    /// while (`spin` 200 us, then `yield_for` 2 ms) before it sleeps on its
    /// doorbell. Both phases poll *and* yield now and then (see `wait_loop`):
    /// the scheduler may have put both ranks of a pair on one core, and a rank
    /// that only spins would keep its peer off that core until the next tick.
    ///
    /// Oversubscribed: every poll a waiting rank makes is time the rank that
    /// holds the data cannot run, so it yields after a handful of empty polls
    /// and does not spin at all; after 50 ms of yielding it sleeps. Not
    /// sooner: a yield costs the core's other ranks almost nothing, while a
    /// rank asleep costs whoever needs it a wake-up of 50 us to milliseconds
    /// (the scheduler places a woken task by its lag); with a short bound, a
    /// stall of the machine made ranks fall asleep one after another, each
    /// wake-up lengthening the others' waits past the bound again
    /// (docs/BENCHMARKS.md, session 6). The numbers are measured choices,
    /// overridable: `KUMI_POLLS`, `KUMI_SPIN_US`, `KUMI_YIELD_US`,
    /// `KUMI_SLEEP_MS` (the configuration's [`kumi_core::config::Wait`]).
    pub fn new(w: &kumi_core::config::Wait, oversubscribed: bool) -> WaitPolicy {
        let (polls, spin, yield_for) = if oversubscribed {
            (4, 0, 50_000)
        } else {
            (128, 200, 2_000)
        };
        WaitPolicy {
            polls: w.polls.unwrap_or(polls),
            spin: Duration::from_micros(w.spin_us.unwrap_or(spin)),
            yield_for: Duration::from_micros(w.yield_us.unwrap_or(yield_for)),
            sleep_timeout: Duration::from_millis(w.sleep_ms),
            oversubscribed,
            mate_spin: Duration::from_micros(w.mate_spin_us),
            yield_every: w.yield_every,
        }
    }
}

/// Which transport a waiting rank sleeps on.
#[derive(Clone, Copy)]
pub(super) enum Bed {
    Shm,
    Net,
}

impl Engine {
    /// Makes progress until `done` holds, waiting by the [`WaitPolicy`].
    #[inline(always)]
    pub fn wait_until(
        &mut self,
        info: WaitInfo,
        done: impl FnMut(&mut Engine) -> bool,
    ) -> Result<()> {
        self.wait_until_with_mates(info, done, |_| false)
    }

    /// [`Engine::wait_until`], for a wait that every member of a collective
    /// makes until all have arrived (a barrier, an allreduce), where
    /// `mates_wait` says that every other rank bound to this core has
    /// arrived and so waits too. Oversubscribed, a waiting rank yields its
    /// core on every empty pass, which hands it to a rank of its own core;
    /// when those all wait for the same ranks of other cores, the hand-over
    /// is wasted and the rank keeps the core instead, polling, for up to
    /// `KUMI_MATE_SPIN_US` (then yields as usual). Each core then changes
    /// ranks once per collective, not back and forth (measured:
    /// docs/BENCHMARKS.md, session 12).
    ///
    /// Every wait of a bound, oversubscribed rank also publishes whom it
    /// waits for ([`WaitInfo::world`]), and a wait for one local rank keeps
    /// or hands on the core by the chains of waits of the core's ranks
    /// ([`Capabilities::turn`]): the rank nearest to the next message keeps
    /// it (as above, up to `KUMI_MATE_SPIN_US`), the others yield, and one
    /// handed the core back while a nearer rank waits for it sleeps until a
    /// send to its source wakes it ([`Capabilities::wake_waiters_of`]).
    /// Yields alone keep the order in which the core's ranks take turns,
    /// whatever the order their messages come in; the sleeps re-order them
    /// (a token ring of 8 ranks on 2 cores: docs/BENCHMARKS.md, session 16).
    #[inline(always)]
    pub fn wait_until_with_mates(
        &mut self,
        info: WaitInfo,
        mut done: impl FnMut(&mut Engine) -> bool,
        mut mates_wait: impl FnMut(&Engine) -> bool,
    ) -> Result<()> {
        if done(self) {
            return Ok(());
        }
        self.set_call(info.call);
        let r = self.wait_loop(&info, &mut done, &mut mates_wait);
        self.set_call(Call::None);
        self.watch.wait_ended();
        r
    }

    /// Whether kumi bound the local ranks to cores (see `bind`).
    pub(crate) fn bound(&self) -> bool {
        self.bound_cores.is_some()
    }

    /// Whether local rank `local` is another rank bound to this rank's core.
    pub(crate) fn shares_core_with(&self, local: usize) -> bool {
        local != self.my_local
            && self
                .bound_cores
                .is_some_and(|n| n > 0 && local % n == self.my_local % n)
    }

    pub(super) fn wait_loop(
        &mut self,
        info: &WaitInfo,
        done: &mut dyn FnMut(&mut Engine) -> bool,
        mates_wait: &mut dyn FnMut(&Engine) -> bool,
    ) -> Result<()> {
        if self.wake_ahead {
            return self.wait_loop_bound(info, done, mates_wait);
        }
        self.wait_passes(info, done, mates_wait, None)
    }

    /// [`Engine::wait_loop`] of a rank bound to a core on an oversubscribed
    /// host: it says at once whom it waits for, wakes the ranks waiting for
    /// those it sent to, and if it waits for one rank of this host, decides
    /// on its first empty pass whether to keep the core (the polls before it
    /// are for a message about to come, which the decision tells).
    #[inline(never)]
    pub(super) fn wait_loop_bound(
        &mut self,
        info: &WaitInfo,
        done: &mut dyn FnMut(&mut Engine) -> bool,
        mates_wait: &mut dyn FnMut(&Engine) -> bool,
    ) -> Result<()> {
        let awaited = self.publish_awaits(info);
        self.wake_waiters();
        let r = self.wait_passes(info, done, mates_wait, awaited);
        if let Some(shm) = &self.shm {
            shm.publish_awaits(Awaits::Nothing);
        }
        r
    }

    /// Publishes what this rank waits for, for the other ranks of its core
    /// ([`Capabilities::turn`]); returns the awaited local rank if the wait
    /// is for one. Called as a wait starts (a wait whose condition held at
    /// once publishes nothing).
    pub(super) fn publish_awaits(&self, info: &WaitInfo) -> Option<usize> {
        let shm = self.shm.as_ref()?;
        let local = match info.world {
            u32::MAX => None,
            w => shm.local_of(w).filter(|&l| l != self.my_local),
        };
        shm.publish_awaits(local.map_or(Awaits::Other, Awaits::Local));
        local
    }

    /// Wakes the ranks asleep in a wait for a local rank this one has sent to
    /// since its last wait ([`Capabilities::wake_waiters_of`]). Done here,
    /// once this rank's own wait is published, not at the send: a woken rank
    /// of this core may take the core at once, and this one, caught between
    /// its waits, would look to the others as if it ran (so nearer than the
    /// token, which cost a hand-over each time).
    pub(super) fn wake_waiters(&mut self) {
        let (Some(shm), mut sent) = (&self.shm, std::mem::take(&mut self.sent_to)) else {
            return;
        };
        while sent != 0 {
            let j = sent.trailing_zeros() as usize;
            sent &= sent - 1;
            shm.wake_waiters_of(j);
        }
    }

    /// Sharing its core with another awake local rank while every rank
    /// has one: moves to a free core if this rank is the one to move
    /// ([`Capabilities::roomier_cpu`], `bind::Spread`).
    #[cold]
    fn move_apart(&mut self) {
        if let (Some(shm), Some(spread)) = (&self.shm, &mut self.spread) {
            spread.try_move(|allowed| shm.roomier_cpu(allowed));
        }
    }

    /// See [`Capabilities::turn`].
    pub(super) fn turn(&self, src: usize) -> Turn {
        match (&self.shm, self.bound_cores) {
            (Some(shm), Some(cores)) => shm.turn(src, cores),
            _ => Turn::Yield,
        }
    }

    /// The passes of a wait; `awaited`: the local rank it waits for, when
    /// the rank is bound and oversubscribed ([`Engine::wait_loop_bound`]).
    #[inline(always)]
    pub(super) fn wait_passes(
        &mut self,
        info: &WaitInfo,
        done: &mut dyn FnMut(&mut Engine) -> bool,
        mates_wait: &mut dyn FnMut(&Engine) -> bool,
        awaited: Option<usize>,
    ) -> Result<()> {
        // Passes left before the next look at whether the core is this
        // rank's (`Capabilities::turn`).
        let mut kept = 0u32;
        // Whether this wait has handed its core on to a nearer rank before.
        let mut passed = false;
        // The clock is read only after `policy.polls` empty polls, so a short
        // wait costs no system call at all.
        // (Waiting for one rank of this host, oversubscribed and bound: the
        // decision on the first empty pass, see `wait_loop_bound`.)
        let mut idle_polls = if awaited.is_some() {
            self.policy.polls
        } else {
            0
        };
        // Counts down to the next yield (a `%` per pass would be a division
        // in the loop that decides how soon a waiting rank sees a frame).
        let mut until_yield = 0u32;
        let mut idle_since: Option<Instant> = None;
        let mut started: Option<Instant> = None;
        // Why a waiting rank yields: two ranks that wait on each other can
        // end up on one core even with a core free for each (under load; and
        // over TCP on an idle machine too, since the kernel treats a socket
        // wake-up as synchronous and moves the wakee onto the waker's core).
        // A rank that then only spins keeps the peer it waits for off the
        // core until its spin budget ends or the scheduler's next tick;
        // `sched_yield` hands the core over at once when the peer shares it,
        // and is one cheap system call when nothing else wants the core
        // (docs/BENCHMARKS.md, "Why a waiting rank yields"). So:
        // - network only: every empty pass makes a system call anyway
        //   (`epoll_wait`, ~0.5 us); yield on each;
        // - network and shared memory: yield on one empty pass in 8;
        // - shared memory only: passes cost tens of nanoseconds and a reply
        //   usually comes within a few of them (0.4 us), so yield on one empty
        //   pass in 32 (~1.5 us of spinning), which keeps that fast path free
        //   of system calls and bounds what a shared core costs;
        // and once the clock is read (`policy.polls` empty passes), on each.
        let yield_every: u32 = match (self.shm.is_some(), self.net.is_some()) {
            (_, false) => 32,
            (true, true) => 8,
            (false, true) => 1,
        };
        let yield_every = self.policy.yield_every.unwrap_or(yield_every);
        // With shared memory only and a core per rank, the scheduler still
        // sometimes puts two ranks on one core (see above); then, and only
        // then, yielding helps. So such a rank yields only while another
        // awake local rank last ran on its CPU (`Capabilities::shares_core`),
        // and otherwise polls on without a system call: a yield costs ~0.5 us,
        // more than a whole 8-byte message. `KUMI_YIELD_EVERY` (set) restores
        // unconditional yields.
        let ask_core =
            self.net.is_none() && !self.policy.oversubscribed && self.policy.yield_every.is_none();
        let may_yield = |e: &mut Engine| -> bool {
            if !ask_core {
                return true;
            }
            let shared = e.shm.as_mut().is_none_or(|s| s.shares_core());
            if shared {
                e.move_apart();
            }
            shared
        };
        loop {
            let n = self.progress()?;
            if done(self) {
                return Ok(());
            }
            if n > 0 {
                idle_polls = 0;
                until_yield = 0;
                idle_since = None;
                continue;
            }
            idle_polls += 1;
            if idle_polls < self.policy.polls {
                until_yield += 1;
                if until_yield == yield_every {
                    until_yield = 0;
                    if may_yield(self) {
                        std::thread::yield_now();
                        continue;
                    }
                }
                std::hint::spin_loop();
                continue;
            }
            if kept > 0 {
                // The core was found to be this rank's a moment ago: poll
                // without looking again (a look follows chains of waits
                // through other ranks' lines, and the message comes sooner
                // to a tighter loop).
                kept -= 1;
                std::hint::spin_loop();
                continue;
            }
            let now = Instant::now();
            let start = *started.get_or_insert(now);
            self.watch.waiting(info, start, now, &self.counters);
            self.demand_waiting(now, start);
            let idle = now - *idle_since.get_or_insert(now);
            // The `spin` and `yield_for` phases now both poll and yield (see
            // above); their sum is how long the rank waits before sleeping.
            if idle < self.policy.spin {
                if may_yield(self) {
                    std::thread::yield_now();
                }
            } else if idle < self.policy.spin + self.policy.yield_for {
                // Oversubscribed, with every rank of this core waiting here
                // too, or nearest to the next message: keep the core (see
                // `wait_until_with_mates`), for a while; hand it on to a
                // nearer rank at any time (`KUMI_MATE_SPIN_US=0`: never look).
                let turn = match awaited {
                    Some(s) if self.policy.mate_spin > Duration::ZERO => self.turn(s),
                    _ => Turn::Yield,
                };
                let keep = self.policy.oversubscribed
                    && idle < self.policy.spin + self.policy.mate_spin
                    && (turn == Turn::Keep || mates_wait(self));
                if keep {
                    if turn == Turn::Keep {
                        kept = KEPT_PASSES;
                    }
                    std::hint::spin_loop();
                } else if turn == Turn::Pass && passed && self.net.is_none() {
                    // Handed on before in this wait and given the core back
                    // while a nearer rank still waits for it: the core's
                    // ranks take their turns in an order that is not the
                    // order their messages come in, and yielding keeps that
                    // order (a yield sends the rank to the back). Sleeping
                    // takes this rank out of it; the rank that sends to its
                    // source wakes it (`wake_waiters_of`), which puts it
                    // back in the order of the messages.
                    self.sleep(done);
                } else {
                    passed |= turn == Turn::Pass;
                    std::thread::yield_now();
                }
            } else {
                self.sleep(done);
            }
        }
    }

    /// Sleeps until a frame may have arrived (or the policy's timeout passes).
    /// A sender blocked on a full ring sleeps too: the shm consumer rings its
    /// doorbell when it frees room.
    ///
    /// `done` is asked once more after the sleep is announced: a condition
    /// that is not a frame (a collective area's sequence word, see
    /// `coll/shm.rs`) may have come true between the last look and the
    /// announcement, and its publisher, having seen no sleeper, rang nobody.
    /// (Dekker: our announcement and fence in `prepare_sleep`, then this
    /// look; the publisher's store, fence, then its look at our flag.)
    pub(super) fn sleep(&mut self, done: &mut dyn FnMut(&mut Engine) -> bool) {
        let timeout = self.policy.sleep_timeout;
        let (bed, timeout) = match (self.shm.is_some(), self.net.is_some()) {
            (true, false) => (Bed::Shm, timeout),
            (false, true) => (Bed::Net, timeout),
            // Two wake-up sources and no common one yet: sleep on the network
            // briefly and look at the rings in between.
            (true, true) => (Bed::Net, timeout.min(Duration::from_millis(1))),
            // Only messages to self could arrive, and none will while we sleep.
            (false, false) => {
                std::thread::sleep(timeout.min(Duration::from_millis(10)));
                return;
            }
        };
        if !self.bed(bed).prepare_sleep() {
            return;
        }
        if done(self) {
            self.bed(bed).cancel_sleep();
            return;
        }
        self.bed(bed).sleep(timeout);
    }

    /// The transport a rank sleeps on (see `sleep`).
    pub(super) fn bed(&mut self, bed: Bed) -> &mut dyn Transport {
        match bed {
            Bed::Shm => &mut **self.shm.as_mut().expect("sleeping on shared memory"),
            Bed::Net => &mut **self.net.as_mut().expect("sleeping on the network"),
        }
    }
}
