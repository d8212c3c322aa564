//! Single copy between processes of one host ("cross-memory attach"):
//! `process_vm_readv` / `process_vm_writev` move bytes straight from one process's
//! buffer into another's, with no intermediate copy in a shared segment.
//!
//! The kernel may refuse (Yama ptrace restrictions, seccomp in containers, a
//! kernel built without it). The runtime calls these once, and on refusal falls
//! back to pipelined copies through the ring for the rest of the job.
//! [`deny_for_tests`] (`KUMI_TEST_DENY_CMA=1`, set by the runtime) makes every
//! call fail with `EPERM` as a refusing kernel would, so the fallback can be
//! tested on a machine that allows it.
//!
//! Whether single copy pays depends on the host: a read through the kernel
//! pins the source's pages and copies them, and on some machines that runs
//! at a quarter of `memcpy`'s speed, where pushing the bytes through a ring
//! (two copies, on two cores at once) is faster. [`Probe`] measures it;
//! `KUMI_SINGLE_COPY=auto` follows [`Probe::single_copy_pays`] (measured:
//! docs/BENCHMARKS.md, session 49).

use kumi_core::config::SingleCopy;
use std::hint::black_box;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static DENIED: AtomicBool = AtomicBool::new(false);

/// From now on every copy fails with `EPERM`, as on a kernel that refuses.
pub fn deny_for_tests() {
    // Relaxed: the flag guards no other data; it is set at start, before the
    // first copy, on the thread that will make it (or that starts the one
    // that will, which orders it).
    DENIED.store(true, Ordering::Relaxed);
}

fn denied_for_test() -> bool {
    // Relaxed: see `deny_for_tests`.
    DENIED.load(Ordering::Relaxed)
}

/// Lets any process of this user read this process's memory with
/// `process_vm_readv`, where Yama's `ptrace_scope=1` would allow only ancestors.
/// Best effort: without Yama this is a no-op.
pub fn allow_peer_access() {
    // SAFETY: prctl(PR_SET_PTRACER, ANY) takes plain integer arguments and only
    // changes this process's Yama attribute; failure is harmless and ignored.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}

/// Reads `dst.len()` bytes at `remote_addr` in process `pid` into `dst`.
/// Loops over partial transfers; an error names what the kernel said.
pub fn read_from(pid: i32, remote_addr: u64, dst: &mut [u8]) -> io::Result<()> {
    read_scattered(pid, &[(remote_addr, dst.len())], dst)
}

/// Writes `src` to `remote_addr` in process `pid`. Loops over partial transfers.
pub fn write_to(pid: i32, remote_addr: u64, src: &[u8]) -> io::Result<()> {
    write_scattered(pid, &[(remote_addr, src.len())], src)
}

/// Remote ranges one call takes at most (the kernel's `IOV_MAX`).
const IOV_BATCH: usize = 1024;

/// Reads the ranges `(remote address, length)` of process `pid`, in order,
/// into `dst` one after the other (their lengths sum to `dst.len()`): up to
/// `IOV_BATCH` ranges per system call, where a strided layout of small
/// pieces would otherwise take one call each.
pub fn read_scattered(pid: i32, remote: &[(u64, usize)], dst: &mut [u8]) -> io::Result<()> {
    scattered(pid, remote, dst.as_mut_ptr(), dst.len(), false)
}

/// Writes `src` to the ranges `(remote address, length)` of process `pid`,
/// in order (see [`read_scattered`]).
pub fn write_scattered(pid: i32, remote: &[(u64, usize)], src: &[u8]) -> io::Result<()> {
    scattered(pid, remote, src.as_ptr() as *mut u8, src.len(), true)
}

fn scattered(
    pid: i32,
    remote: &[(u64, usize)],
    local: *mut u8,
    len: usize,
    write: bool,
) -> io::Result<()> {
    if denied_for_test() {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    let total: usize = remote.iter().map(|r| r.1).sum();
    if total != len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{len} local bytes for remote ranges of {total}"),
        ));
    }
    // The next range to move, how much of it is moved, and where its bytes
    // are in `local`.
    let (mut i, mut part, mut done) = (0usize, 0usize, 0usize);
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(IOV_BATCH.min(remote.len()));
    while done < len {
        iov.clear();
        let mut batch = 0usize;
        for (k, &(addr, l)) in remote[i..].iter().take(IOV_BATCH).enumerate() {
            let skip = if k == 0 { part } else { 0 };
            iov.push(libc::iovec {
                iov_base: (addr as usize + skip) as *mut libc::c_void,
                iov_len: l - skip,
            });
            batch += l - skip;
        }
        let here = libc::iovec {
            // SAFETY: `done + batch <= len`: the batch is the next bytes of
            // the ranges, whose lengths sum to `len`.
            iov_base: unsafe { local.add(done) }.cast(),
            iov_len: batch,
        };
        // SAFETY: `here` covers bytes of the caller's buffer, borrowed for
        // the call (read-only when writing out, written when reading in);
        // the remote ranges name memory of another process, which the
        // kernel checks (EFAULT if unmapped).
        let n = unsafe {
            if write {
                libc::process_vm_writev(pid, &here, 1, iov.as_ptr(), iov.len() as _, 0)
            } else {
                libc::process_vm_readv(pid, &here, 1, iov.as_ptr(), iov.len() as _, 0)
            }
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "process_vm_readv/writev moved no bytes",
            ));
        }
        // A partial transfer stops at a range's end, or inside one: go on
        // from there.
        let mut moved = n as usize;
        done += moved;
        while moved > 0 {
            let left = remote[i].1 - part;
            if moved >= left {
                moved -= left;
                i += 1;
                part = 0;
            } else {
                part += moved;
                moved = 0;
            }
        }
        while i < remote.len() && remote[i].1 == 0 {
            i += 1;
        }
    }
    Ok(())
}

/// Bytes [`Probe::measure`] copies at a time: as long as the rendezvous
/// messages and collective blocks the choice is for, and inside a core's L2
/// cache as a ring's pipelined copies are.
pub const PROBE_BYTES: usize = 256 << 10;

/// Timed pairs of copies (after one untimed pair) whose medians
/// [`Probe::measure`] takes.
const PROBE_PAIRS: usize = 3;

/// One [`PROBE_BYTES`] copy each way on this host: the medians of
/// alternate pairs, so that a machine changing speed meanwhile moves both
/// alike.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// A `memcpy` inside this process.
    pub copy: Duration,
    /// A `process_vm_readv` of this process's own memory: the kernel's
    /// path is the one a read from a peer takes (pin the source's pages,
    /// copy them), without needing a peer.
    pub read: Duration,
}

impl Probe {
    /// Measures this host (about 0.4 ms). An error: the kernel
    /// refuses the read (seccomp, no cross-memory attach).
    pub fn measure() -> io::Result<Probe> {
        // Written before the first pair, so that no pair pays page faults.
        let src = vec![1u8; PROBE_BYTES];
        let mut dst = vec![2u8; PROBE_BYTES];
        let me = std::process::id() as i32;
        let (mut copies, mut reads) = (Vec::new(), Vec::new());
        for pair in 0..=PROBE_PAIRS {
            let t0 = Instant::now();
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
            let t1 = Instant::now();
            read_from(me, src.as_ptr() as u64, &mut dst)?;
            let t2 = Instant::now();
            if pair > 0 {
                copies.push(t1 - t0);
                reads.push(t2 - t1);
            }
        }
        copies.sort_unstable();
        reads.sort_unstable();
        Ok(Probe {
            copy: copies[PROBE_PAIRS / 2],
            read: reads[PROBE_PAIRS / 2],
        })
    }

    /// Whether single copy is the faster way here. Through a ring a message
    /// costs a copy on each of two ranks: at once on two cores (the time
    /// of one), one after the other on a shared core (of two). By single
    /// copy it costs a read: split between the two ranks on two cores (half
    /// a read each, at once), whole on a shared core. Either way single
    /// copy wins where a read takes less than two copies. (A ring's copies
    /// cross cores and run slower than this `memcpy`, so the rule leans
    /// towards single copy.)
    pub fn single_copy_pays(&self) -> bool {
        self.read < 2 * self.copy
    }

    /// `bytes / time` in GB/s (10^9 bytes per second), for reports.
    pub fn gbps(time: Duration) -> f64 {
        PROBE_BYTES as f64 / time.as_secs_f64().max(1e-9) / 1e9
    }
}

/// What `KUMI_SINGLE_COPY` comes to on this host: `auto` measures (a kernel
/// that refuses the read turns it off). The creator of a host's shared
/// segment decides, once, and writes it there for every rank of the host.
pub fn host_allows(setting: SingleCopy) -> bool {
    match setting {
        SingleCopy::On => true,
        SingleCopy::Off => false,
        SingleCopy::Auto => Probe::measure().is_ok_and(|p| p.single_copy_pays()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_times_both_ways_and_decides_by_twice_the_copy() {
        let p = Probe::measure().unwrap();
        assert!(p.copy > Duration::ZERO && p.read > Duration::ZERO, "{p:?}");
        let copy = Duration::from_micros(10);
        let at = |us| Probe {
            copy,
            read: Duration::from_micros(us),
        };
        assert!(at(5).single_copy_pays() && at(19).single_copy_pays());
        assert!(!at(20).single_copy_pays() && !at(40).single_copy_pays());
        assert!(host_allows(SingleCopy::On) && !host_allows(SingleCopy::Off));
    }

    #[test]
    fn scattered_ranges_in_batches() {
        let pid = std::process::id() as i32;
        // 3000 ranges of 3 bytes, 5 apart (more than one batch), and an
        // empty one in the middle.
        let mut mem: Vec<u8> = (0..15_000u32).map(|i| (i % 251) as u8).collect();
        let mut ranges: Vec<(u64, usize)> = (0..3000)
            .map(|k| (mem.as_ptr() as u64 + 5 * k, 3))
            .collect();
        ranges.insert(1500, (mem.as_ptr() as u64, 0));
        let mut got = vec![0u8; 9000];
        read_scattered(pid, &ranges, &mut got).unwrap();
        let want: Vec<u8> = (0..3000)
            .flat_map(|k| mem[5 * k..5 * k + 3].to_vec())
            .collect();
        assert_eq!(got, want);
        let new: Vec<u8> = (0..9000u32).map(|i| (i % 7) as u8).collect();
        write_scattered(pid, &ranges, &new).unwrap();
        for k in 0..3000 {
            assert_eq!(&mem[5 * k..5 * k + 3], &new[3 * k..3 * k + 3]);
            assert_eq!(mem[5 * k + 3], ((5 * k + 3) % 251) as u8);
        }
        mem[0] = 0;
        assert!(read_scattered(pid, &ranges, &mut got[..10]).is_err());
    }

    #[test]
    fn reads_and_writes_own_memory() {
        let pid = std::process::id() as i32;
        let src: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut dst = vec![0u8; src.len()];
        read_from(pid, src.as_ptr() as u64, &mut dst).unwrap();
        assert_eq!(src, dst);
        let mut dst2 = vec![0u8; 1000];
        write_to(pid, dst2.as_mut_ptr() as u64, &src[..1000]).unwrap();
        assert_eq!(&dst2[..], &src[..1000]);
    }

    #[test]
    fn bad_address_is_an_error_not_a_crash() {
        let mut dst = [0u8; 16];
        assert!(read_from(std::process::id() as i32, 8, &mut dst).is_err());
    }
}
