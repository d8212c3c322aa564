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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// [`PROBE_BYTES`] blocks moved each way on this host: the medians of
/// alternate pairs, so that a machine changing speed meanwhile moves all
/// alike.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// The slower of two `memcpy`s on two cores, as a ring or the
    /// collective area pays them for each block, at once: into the buffer
    /// (whose lines the other core holds from its last read) and out of it
    /// (pulling the lines just written).
    pub copy: Duration,
    /// A `memcpy` within one core, of lines already in its cache: what a
    /// ring pays twice, one copy after the other, between two ranks that
    /// share a core (reported by `kumi bench floor`; not part of the rule).
    pub local: Duration,
    /// A `process_vm_readv` of the buffer just written: the kernel's path
    /// is the one a read from a peer takes (pin the source's pages, copy
    /// them), without needing a peer.
    pub read: Duration,
}

impl Probe {
    /// Measures this host (about 0.6 ms) on two threads of this process,
    /// bound to two CPUs (the first this thread may use and another, where
    /// the process has one; both to one, if that is all): in turns, one
    /// writes the buffer and the other copies it out or reads it. The
    /// calling thread's binding is not touched. An error: the
    /// kernel refuses the read (seccomp, no cross-memory attach).
    ///
    /// Why across cores: a ring's copies cross cores, and writing lines
    /// another core holds can be several times slower than a copy within
    /// one, where a read is not (docs/BENCHMARKS.md, session 54).
    pub fn measure() -> io::Result<Probe> {
        let (writer_cpu, reader_cpu) = probe_cpus()?;
        // Written before the first pair, so that no pair pays page faults.
        let src = vec![1u8; PROBE_BYTES];
        let mut mid = vec![2u8; PROBE_BYTES];
        let me = std::process::id() as i32;
        // A kernel that refuses says so here, before any thread waits.
        read_from(me, src.as_ptr() as u64, &mut mid)?;
        let mid_at = mid.as_mut_ptr() as usize;
        // Turn `t`: the writer fills `mid` when `t` is even, the reader
        // takes it when `t` is odd, copying it out when `t % 4 == 1` and
        // reading it when `t % 4 == 3`; pair 0 (turns 0-3) is untimed.
        let turns = 4 * (PROBE_PAIRS + 1);
        let timed = |t: usize| t >= 4;
        let turn = AtomicUsize::new(0);
        let wait_for = |t: usize| {
            // Acquire, with the Release stores below: what one side wrote
            // into `mid` before passing the turn is visible to the other.
            while turn.load(Ordering::Acquire) != t {
                std::thread::yield_now();
            }
        };
        std::thread::scope(|s| {
            let writer = s.spawn(|| -> Vec<Duration> {
                // `probe_cpus` found the CPU allowed; unbound, the figures
                // would only be less telling.
                let _ = bind_this_thread(writer_cpu);
                let mut writes = Vec::new();
                for t in (0..turns).step_by(2) {
                    wait_for(t);
                    // SAFETY: from the reader's store of `t` to ours of
                    // `t + 1`, no one else touches `mid`; it outlives the
                    // scope.
                    let m =
                        unsafe { std::slice::from_raw_parts_mut(mid_at as *mut u8, PROBE_BYTES) };
                    let t0 = Instant::now();
                    m.copy_from_slice(black_box(&src));
                    black_box(m);
                    if timed(t) && t % 4 == 0 {
                        writes.push(t0.elapsed());
                    }
                    turn.store(t + 1, Ordering::Release);
                }
                writes
            });
            type Times = io::Result<(Vec<Duration>, Vec<Duration>, Vec<Duration>)>;
            let reader = s.spawn(|| -> Times {
                let _ = bind_this_thread(reader_cpu);
                let mut dst = vec![3u8; PROBE_BYTES];
                let mut again = vec![4u8; PROBE_BYTES];
                let (mut copies, mut reads, mut locals) = (Vec::new(), Vec::new(), Vec::new());
                let mut failed = Ok(());
                for t in (1..turns).step_by(2) {
                    wait_for(t);
                    // SAFETY: from the writer's store of `t` to ours of
                    // `t + 1`, no one writes `mid`.
                    let m = unsafe { std::slice::from_raw_parts(mid_at as *const u8, PROBE_BYTES) };
                    let t0 = Instant::now();
                    if t % 4 == 1 {
                        dst.copy_from_slice(black_box(m));
                        black_box(&mut dst);
                    } else if let Err(e) = read_from(me, mid_at as u64, &mut dst) {
                        failed = Err(e);
                    }
                    let took = t0.elapsed();
                    // Every turn is passed on, even after a failure, so
                    // that the writer finishes.
                    turn.store(t + 1, Ordering::Release);
                    match (timed(t), t % 4) {
                        (true, 1) => copies.push(took),
                        (true, _) => reads.push(took),
                        _ => {}
                    }
                    if timed(t) && t % 4 == 3 {
                        // `dst` is in this core's cache now.
                        let t0 = Instant::now();
                        again.copy_from_slice(black_box(&dst));
                        black_box(&mut again);
                        locals.push(t0.elapsed());
                    }
                }
                failed.map(|()| (copies, reads, locals))
            });
            let panicked = |who| io::Error::other(format!("the probe's {who} panicked"));
            let writes = writer.join().map_err(|_| panicked("writer"))?;
            let (copies, mut reads, mut locals) =
                reader.join().map_err(|_| panicked("reader"))??;
            // The two copies of a block run at once: the slower sets the pace.
            let mut rings: Vec<Duration> = writes
                .iter()
                .zip(&copies)
                .map(|(&w, &c)| w.max(c))
                .collect();
            rings.sort_unstable();
            reads.sort_unstable();
            locals.sort_unstable();
            Ok(Probe {
                copy: rings[PROBE_PAIRS / 2],
                local: locals[PROBE_PAIRS / 2],
                read: reads[PROBE_PAIRS / 2],
            })
        })
    }

    /// Whether single copy is the faster way here. Through a ring or the
    /// collective area a block costs two copies at once on two cores, the
    /// time of the slower (`copy`); by single copy, a read, split between
    /// the two ranks (half a read each, at once). So single copy would win
    /// where a read takes less than two of the copies; but the area's real
    /// paths cost more than their copies (sections, sequence words, more
    /// rounds), and a read of up to about three copies still leaves single
    /// copy the faster way (measured: docs/BENCHMARKS.md, session 62).
    ///
    /// The rule is the same with more ranks than cores, where two ranks of
    /// a core copy within it (`local`, several times faster): some of their
    /// pairs still cross cores, and where copies across cores slow down for
    /// minutes at a time the area loses more than it gains while they are
    /// fast, and a read keeps its speed. Made once at the start, the choice
    /// takes the way whose worst is least (measured: docs/BENCHMARKS.md,
    /// session 57).
    pub fn single_copy_pays(&self) -> bool {
        self.read < 3 * self.copy
    }

    /// `bytes / time` in GB/s (10^9 bytes per second), for reports.
    pub fn gbps(time: Duration) -> f64 {
        PROBE_BYTES as f64 / time.as_secs_f64().max(1e-9) / 1e9
    }
}

/// Two CPUs for the probe's threads: the first this thread may run on, and
/// another this process may use, if any (a rank bound to one CPU by its
/// launcher may still bind a thread elsewhere inside its cgroup's CPUs, so
/// the online CPUs are tried in order).
fn probe_cpus() -> io::Result<(usize, usize)> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes
    // at most `size_of::<cpu_set_t>()` bytes into it.
    let first = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set))
    }
    .ok_or_else(|| io::Error::other("no CPU allowed"))?;
    // SAFETY: sysconf takes an integer name and returns an integer.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let other = (0..online.min(libc::CPU_SETSIZE as usize))
        .filter(|&c| c != first)
        .find(|&c| may_bind(c))
        .unwrap_or(first);
    Ok((first, other))
}

/// Whether a thread of this process may be bound to `cpu` (asked of a
/// short-lived thread, so that no binding of the caller changes).
fn may_bind(cpu: usize) -> bool {
    std::thread::scope(|s| {
        s.spawn(|| bind_this_thread(cpu).is_ok())
            .join()
            .unwrap_or(false)
    })
}

/// Binds the calling thread to `cpu`.
fn bind_this_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: as in `probe_cpus`; CPU_SET writes inside the set
    // (`cpu < CPU_SETSIZE`, it came from one); pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What `KUMI_SINGLE_COPY` comes to on this host: `auto` measures (a
/// kernel that refuses the read turns it off). The creator of a host's
/// shared segment decides, once, and writes it there for every rank of the
/// host.
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
    fn the_probe_times_both_ways_and_decides_by_three_copies() {
        let p = Probe::measure().unwrap();
        assert!(
            p.copy > Duration::ZERO && p.local > Duration::ZERO && p.read > Duration::ZERO,
            "{p:?}"
        );
        // A ring's copy across cores 10 us, within a core 4 us.
        let at = |us| Probe {
            copy: Duration::from_micros(10),
            local: Duration::from_micros(4),
            read: Duration::from_micros(us),
        };
        assert!(at(5).single_copy_pays() && at(19).single_copy_pays());
        // A read of 2.5 copies: the area still loses there.
        assert!(at(25).single_copy_pays() && at(29).single_copy_pays());
        // Within a core the copy is faster than the read; the rule looks
        // across cores all the same.
        assert!(at(8).single_copy_pays());
        assert!(!at(30).single_copy_pays() && !at(60).single_copy_pays());
        assert!(host_allows(SingleCopy::On) && !host_allows(SingleCopy::Off));
    }

    /// The probe's two threads go to two CPUs where there are two, even
    /// when the calling thread is bound to one (as a rank is), and the
    /// caller stays bound as it was.
    #[test]
    fn the_probe_crosses_cores_and_leaves_the_caller_bound() {
        // The CPUs this process may use (the test's thread is not bound).
        let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::thread::spawn(move || {
            let first = probe_cpus().unwrap().0;
            bind_this_thread(first).unwrap();
            let (a, b) = probe_cpus().unwrap();
            assert_eq!(a, first);
            if allowed >= 2 {
                assert_ne!(a, b, "two CPUs allowed, the probe's threads on one");
            }
            Probe::measure().unwrap();
            // SAFETY: as in `probe_cpus`.
            let still = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
                (0..libc::CPU_SETSIZE as usize).all(|c| libc::CPU_ISSET(c, &set) == (c == first))
            };
            assert!(still, "the caller's binding changed");
        })
        .join()
        .unwrap();
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
