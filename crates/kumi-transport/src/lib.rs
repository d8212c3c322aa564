//! kumi-transport: moving frames between ranks.
//!
//! May depend on: kumi-core, and system-call crates. Never on the runtime above it.
//!
//! # The contract every transport keeps
//!
//! A transport moves *frames* — a [`Header`] plus a payload of at most
//! [`Transport::max_payload`] bytes — between the ranks it serves, named by their
//! global (job-wide) rank.
//!
//! 1. **Order.** Frames from one sender to one receiver are delivered in the order
//!    they were accepted by [`Transport::try_send`]. Nothing is promised across
//!    senders. Matching (`ANY_SOURCE`, tags, contexts) sits above the transports and
//!    relies on this per-pair order alone.
//! 2. **Acceptance and completion.** `try_send` either copies the whole frame into
//!    the transport and returns `Ok(true)` — the caller's buffer is free at once —
//!    or takes nothing and returns `Ok(false)` (no room now: make progress and try
//!    again). A transport never keeps a pointer to the caller's buffer.
//! 3. **Delivery.** [`Transport::poll`] hands each arrived frame to a sink exactly
//!    once. The payload slice is borrowed from the transport and valid only during
//!    the call; a sink that keeps the data copies it.
//! 4. **No threads, no blocking.** Every method returns promptly. The runtime's
//!    progress engine decides when to poll and when to sleep; a transport only
//!    offers [`Transport::prepare_sleep`] / [`Transport::sleep`] so the engine can
//!    sleep until a frame may have arrived.
//! 5. **Errors.** A frame that breaks the protocol (bad kind, impossible length) is
//!    an error from `poll` naming the peer; the transport never panics on input.
//!
//! 6. **Capabilities.** What a transport may offer beyond moving frames is
//!    [`Capabilities`]: single copy (a peer's buffers read or written in
//!    place), turns on an oversubscribed host (who waits for whom, who should
//!    keep a shared core), the call a rank is blocked in published where the
//!    launcher reads it after a crash, progress bells (a rank asks another's
//!    progress thread for a pass), and an inlined poll. Each has a default
//!    that says "not offered"; a transport implements what it has, and the
//!    runtime's engine reaches its transports through [`Transport`] and
//!    [`Capabilities`] alone. Doorbells (sleeping until a frame may have
//!    arrived) are [`Transport::prepare_sleep`] and [`Transport::sleep`].
//!
//! [`Header`]: kumi_core::header::Header

#![deny(missing_docs)]

#[cfg(not(loom))]
pub mod bell;
pub mod cma;
pub mod lock;
pub mod loopback;
pub mod shm;
pub(crate) mod sync;
pub mod tcp;
pub mod udp;

use kumi_core::header::Header;
use std::io;
use std::time::Duration;

/// Receives arrived frames: `(sender global rank, header, payload)`.
pub type Sink<'a> = dyn FnMut(u32, &Header, &[u8]) + 'a;

/// A way to move frames between ranks. See the module doc for the contract.
pub trait Transport {
    /// Short name for logs and statistics ("shm", "tcp", ...).
    fn name(&self) -> &'static str;

    /// Largest payload one frame may carry.
    fn max_payload(&self) -> usize;

    /// Offers one frame to `peer`. `Ok(true)`: copied, the caller's buffers are
    /// free. `Ok(false)`: no room now; nothing was taken.
    fn try_send(&mut self, peer: u32, header: &Header, payload: &[u8]) -> io::Result<bool>;

    /// Delivers arrived frames to `sink`, in per-sender order, and returns how many.
    fn poll(&mut self, sink: &mut Sink<'_>) -> io::Result<usize>;

    /// Announces that the caller is about to sleep. Returns `false` if a frame is
    /// already waiting (do not sleep). After `true`, senders will wake the caller.
    fn prepare_sleep(&mut self) -> bool;

    /// Sleeps until a frame may have arrived or `timeout` passes; clears the
    /// announcement made by `prepare_sleep`. Spurious wake-ups are allowed.
    fn sleep(&mut self, timeout: Duration);

    /// Withdraws an announcement made by `prepare_sleep` without sleeping.
    fn cancel_sleep(&mut self);
}

/// What a transport may offer beyond [`Transport`] (contract item 6). Every
/// method has a default that says "not offered", so a transport implements
/// only what it has; the shared-memory transport implements them all.
pub trait Capabilities: Transport {
    /// Whether [`Transport::poll`] may find something: `false` lets a
    /// waiting rank skip the poll. Default: always poll.
    #[inline]
    fn needs_poll(&self) -> bool {
        true
    }

    /// [`Transport::poll`] with the sink's type known, so the caller's
    /// handling of a frame can be compiled into the loop that finds it (the
    /// small-message path). Default: through [`Transport::poll`].
    #[inline]
    fn poll_with<F: FnMut(u32, &Header, &[u8]) + ?Sized>(
        &mut self,
        sink: &mut F,
    ) -> io::Result<usize>
    where
        Self: Sized,
    {
        self.poll(&mut |from, h, p| sink(from, h, p))
    }

    /// Single copy: the process whose memory holds world rank `peer`'s
    /// buffers, for [`cma`]; `None`: not offered (the runtime then has large
    /// messages pushed in chunks).
    fn single_copy_pid(&self, _peer: u32) -> Option<i32> {
        None
    }

    /// Publishes the call this rank is in where the launcher can read it
    /// even after the rank died. Default: not published.
    fn publish_call(&self, _call: kumi_core::call::Call) {}

    /// This host's index of world rank `peer`, if the transport serves it
    /// as a rank of this host (the turns below name local ranks).
    fn local_of(&self, _peer: u32) -> Option<usize> {
        None
    }

    /// Turns: publishes what this rank waits for, for the ranks sharing its
    /// core. Default: nothing published.
    fn publish_awaits(&self, _awaits: Awaits) {}

    /// Turns: wakes the ranks asleep in a wait for local rank `local`'s
    /// message (a frame was just sent to it). Default: none to wake.
    fn wake_waiters_of(&self, _local: usize) {}

    /// Turns: what this rank, bound with the host's ranks to `cores` cores
    /// and waiting for local rank `src`, does with its core. Default: yield
    /// as usual.
    fn turn(&self, _src: usize, _cores: usize) -> Turn {
        Turn::Yield
    }

    /// Whether another awake rank of this host last ran on this rank's CPU
    /// (then a waiting rank should yield). Default: assume so.
    fn shares_core(&mut self) -> bool {
        true
    }

    /// This rank's progress bell, where other ranks of its host can ring it
    /// ([`bell`]). Default: none (the runtime makes a private one).
    #[cfg(not(loom))]
    fn progress_bell(&self) -> Option<bell::Bell> {
        None
    }

    /// Rings the progress bell of every other rank of this host that left
    /// kumi with work outstanding and is not waiting inside kumi now (which
    /// would progress itself): this rank has waited a while ([`bell`]).
    /// Default: nobody to ring.
    fn ring_progress(&self) {}

    /// Where this rank, sharing its CPU with another awake rank of this
    /// host ([`Capabilities::shares_core`]), should move, of the CPUs
    /// `allowed`: one on which no other awake local rank last ran, if the
    /// rank it shares with has the lower local rank (that one stays).
    /// Default: nowhere.
    fn roomier_cpu(&self, _allowed: &[usize]) -> Option<usize> {
        None
    }
}

/// What a waiting rank waits for, as published for turns
/// ([`Capabilities::publish_awaits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Awaits {
    /// Nothing: the rank runs.
    Nothing,
    /// Something other than one local rank (any source, a collective,
    /// several requests).
    Other,
    /// A message of this local rank.
    Local(usize),
}

/// What a waiting rank bound to a core does with it ([`Capabilities::turn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Keep it: this rank is nearest to the next message.
    Keep,
    /// Hand it on: an awake rank of the core is strictly nearer.
    Pass,
    /// Yield as usual: a tie, a chain that reaches a wait for something
    /// other than one local rank (that rank may need the core at any
    /// moment), or nothing known.
    Yield,
}

impl Capabilities for loopback::Loopback {}

/// What every network transport knows of its rank and job (the part of
/// [`tcp::TcpConfig`] and [`udp::UdpConfig`] they share).
#[derive(Clone)]
pub struct NetIdentity {
    /// Job id (bound into every proof).
    pub job: String,
    /// Job secret.
    pub secret: Vec<u8>,
    /// This rank.
    pub rank: u32,
    /// Job size.
    pub size: u32,
    /// Address to bind or listen on (port chosen by the system).
    pub bind: std::net::Ipv4Addr,
    /// Largest payload of one frame.
    pub max_payload: usize,
}

impl std::fmt::Debug for NetIdentity {
    /// Everything but the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetIdentity")
            .field("job", &self.job)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("bind", &self.bind)
            .field("max_payload", &self.max_payload)
            .finish_non_exhaustive()
    }
}

impl NetIdentity {
    /// What a network transport checks of a frame offered to `peer` before
    /// taking it: a peer of the job other than this rank, and a payload
    /// within `max_payload` bytes.
    pub(crate) fn check_frame(&self, peer: u32, len: usize) -> io::Result<()> {
        let (rank, max) = (self.rank, self.max_payload);
        if peer >= self.size || peer == rank {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("rank {peer} is not a network peer of rank {rank}"),
            ));
        }
        if len > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a frame of {len} bytes exceeds the limit of {max}"),
            ));
        }
        Ok(())
    }
}

/// `N` bytes from the kernel's random source (nonces of the handshakes).
pub(crate) fn random_bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    let mut got = 0;
    while got < N {
        // SAFETY: the pointer and length describe the unfilled part of `b`.
        let r = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), N - got, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        got += r as usize;
    }
    Ok(b)
}

/// Whether the kernel lets this process use asymmetric fences, with
/// `membarrier` on the rare side (the shared-memory rings' sleepers, the
/// engine lock's progress thread): it registers the process for global
/// expedited membarriers and issuing one works. Whether kumi *may* use them
/// is `KUMI_SHM_MEMBARRIER`, which the callers pass.
pub fn membarrier_works() -> bool {
    use rustix::thread::{membarrier, MembarrierCommand};
    membarrier(MembarrierCommand::RegisterGlobalExpedited).is_ok()
        && membarrier(MembarrierCommand::GlobalExpedited).is_ok()
}

/// Copies `len` bytes from `src` to `dst`, as `ptr::copy_nonoverlapping`,
/// but without a call into the C library's `memcpy` for 8 bytes or fewer:
/// small messages are copied twice on their way (into the ring, out to the
/// receiver's buffer), and for them the call cost more than the copy
/// (`scripts/count-instructions.sh`).
///
/// Not for 9 to 16 bytes: two 8-byte moves there were slower than
/// `memcpy`'s one 16-byte move, into the ring and out of it, for a reason
/// not known (docs/BENCHMARKS.md, session 7).
///
/// # Safety
/// As for `ptr::copy_nonoverlapping`: `src` readable and `dst` writable for
/// `len` bytes, the two regions not overlapping. No alignment is required.
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    use std::ptr::{read_unaligned, write_unaligned};
    if len == 8 {
        // SAFETY: the caller's contract covers 8 bytes at both; unaligned
        // accesses need no alignment.
        unsafe { write_unaligned(dst.cast::<u64>(), read_unaligned(src.cast::<u64>())) };
    } else if (4..8).contains(&len) {
        // Two overlapping moves cover every byte exactly as one copy would.
        // SAFETY: the caller's contract covers `len` bytes at both ends, and
        // both moves lie within them (`len - 4 >= 0`); unaligned accesses
        // need no alignment.
        unsafe {
            let a = read_unaligned(src.cast::<u32>());
            let b = read_unaligned(src.add(len - 4).cast::<u32>());
            write_unaligned(dst.cast::<u32>(), a);
            write_unaligned(dst.add(len - 4).cast::<u32>(), b);
        }
    } else if len < 4 {
        // Written out, not as a loop: LLVM turns a byte loop into a call of
        // `memcpy`, which costs more than the copy.
        // SAFETY: each access is below `len`, inside both ranges of the
        // caller's contract; unaligned accesses need no alignment.
        unsafe {
            if len >= 2 {
                write_unaligned(dst.cast::<u16>(), read_unaligned(src.cast::<u16>()));
            }
            if len & 1 == 1 {
                *dst.add(len - 1) = *src.add(len - 1);
            }
        }
    } else if len > ALIAS_PIECE && aliased(src, dst) {
        // SAFETY: the caller's contract.
        unsafe { copy_in_pieces(src, dst, len) };
    } else {
        // SAFETY: the caller's contract is `copy_nonoverlapping`'s.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
    }
}

/// The largest piece [`copy_in_pieces`] hands `memcpy`: below glibc's
/// threshold for `rep movsb` (2 KiB and up on this kind of machine).
const ALIAS_PIECE: usize = 2048;

/// Whether `dst` lies a few bytes (1 to 63) after `src` modulo 4 KiB: there
/// glibc's `memcpy` of more than a couple of KiB, which is `rep movsb`, runs
/// an order of magnitude slower, its stores and loads aliasing in the 4 KiB
/// pages; two buffers of one size from `malloc` lie 16 bytes apart modulo
/// 4 KiB. Measured: docs/BENCHMARKS.md, session 22.
#[inline(always)]
fn aliased(src: *const u8, dst: *mut u8) -> bool {
    let d = (dst as usize).wrapping_sub(src as usize) & 4095;
    d != 0 && d < 64
}

/// `copy_nonoverlapping` in pieces of `ALIAS_PIECE` bytes, which `memcpy`
/// copies with vector moves, not `rep movsb`.
///
/// # Safety
/// As for [`copy_bytes`].
#[cold]
#[inline(never)]
pub unsafe fn copy_in_pieces(src: *const u8, dst: *mut u8, len: usize) {
    let mut off = 0;
    while off < len {
        let n = (len - off).min(ALIAS_PIECE);
        // SAFETY: `off + n <= len`, inside both ranges of the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src.add(off), dst.add(off), n) };
        off += n;
    }
}

#[cfg(test)]
mod copy_tests {
    use super::copy_bytes;

    /// Every length up to 40, at every misalignment of either side: the
    /// bytes copied are exactly the source's, and no byte around the
    /// destination range changes.
    #[test]
    fn copies_exactly_the_bytes_asked_for() {
        let src: Vec<u8> = (0..64u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(1))
            .collect();
        for len in 0..=40 {
            for so in 0..8 {
                for dof in 0..8 {
                    let mut dst = vec![0xEEu8; 64];
                    // SAFETY: both ranges lie inside their vectors, which do
                    // not overlap.
                    unsafe { copy_bytes(src.as_ptr().add(so), dst.as_mut_ptr().add(dof), len) };
                    assert_eq!(&dst[dof..dof + len], &src[so..so + len], "len {len}");
                    assert!(dst[..dof].iter().all(|&b| b == 0xEE), "before, len {len}");
                    assert!(
                        dst[dof + len..].iter().all(|&b| b == 0xEE),
                        "after, len {len}"
                    );
                }
            }
        }
    }

    /// Large copies between buffers a few bytes apart modulo 4 KiB (which go
    /// in pieces) and not (which go whole) copy exactly, whatever the tail.
    #[test]
    fn large_copies_in_pieces_copy_exactly() {
        let src: Vec<u8> = (0..40_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for len in [2049, 4096, 6000, 32768, 33000] {
            for gap in [0usize, 8, 16, 63, 64, 100] {
                let mut dst = vec![0xEEu8; 4096 + len + 200];
                // Where the destination lies `gap` bytes after the source
                // modulo 4 KiB.
                let want = (src.as_ptr() as usize + gap) & 4095;
                let at = (want + 4096 - (dst.as_ptr() as usize & 4095)) & 4095;
                // SAFETY: `at + len` is inside `dst`; the vectors do not overlap.
                unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr().add(at), len) };
                assert_eq!(&dst[at..at + len], &src[..len], "len {len} gap {gap}");
                assert!(
                    dst[..at].iter().all(|&b| b == 0xEE),
                    "before, len {len} gap {gap}"
                );
                assert!(
                    dst[at + len..].iter().all(|&b| b == 0xEE),
                    "after, len {len} gap {gap}"
                );
            }
        }
    }
}
