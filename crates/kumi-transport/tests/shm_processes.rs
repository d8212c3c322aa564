//! The shared-memory transport across real processes (fork), the named-segment
//! life cycle, and corrupted segments.
#![cfg(not(loom))]

use kumi_core::header::{Header, Kind};
use kumi_transport::shm::{owner_alive, process_start_time, Segment, ShmConfig, ShmTransport};
use kumi_transport::{Awaits, Capabilities, Transport, Turn};
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// Forks; the child runs `f` and exits with 0 if it returned `true`, 1 if it
/// returned false or panicked. Returns the child's pid.
fn fork_child(f: impl FnOnce() -> bool) -> libc::pid_t {
    // SAFETY: fork in a test process. The child runs only `f` and then `_exit`s,
    // never returning into the test harness; `f` uses no lock another thread of
    // the harness could hold at fork time (no allocation-heavy runtime state is
    // shared: the harness threads only wait for their own tests).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(false);
        // SAFETY: terminates the child at once, skipping the harness's exit path.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    pid
}

fn wait_child(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

fn dup(fd: &OwnedFd) -> OwnedFd {
    fd.as_fd().try_clone_to_owned().expect("dup")
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn frame_byte(seq: u64, i: usize) -> u8 {
    (seq.wrapping_mul(0x9e37_79b9) as usize).wrapping_add(i.wrapping_mul(7)) as u8
}

/// Sends `n` frames of random sizes to `peer` while receiving `n` from it;
/// checks each received frame's sequence number (per-sender order), length and
/// bytes. Returns true if everything matched.
/// The `id` of frame `seq` in [`exchange`]: set on one frame in three.
fn id_of(seq: u64) -> u64 {
    if seq.is_multiple_of(3) {
        seq + 1
    } else {
        0
    }
}

/// What frame `seq`'s `len` field says beyond its payload's length.
fn extra_len_of(seq: u64) -> u64 {
    if seq % 3 == 1 {
        1 << 40
    } else {
        0
    }
}

fn exchange(t: &mut ShmTransport, peer: u32, n: u64, seed: u64) -> bool {
    let max = t.max_payload();
    let mut rng = Rng(seed);
    let mut buf = vec![0u8; max];
    let (mut sent, mut got) = (0u64, 0u64);
    let mut ok = true;
    let mut pending: Option<(Header, usize)> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    while sent < n || got < n {
        if sent < n {
            let (h, len) = *pending.get_or_insert_with(|| {
                let r = rng.next();
                // Mostly small frames, some up to the maximum.
                let len = if r & 7 == 0 {
                    (r >> 16) as usize % (max + 1)
                } else {
                    (r >> 16) as usize % 200
                };
                // The sequence number in the tag; one frame in three with an
                // `id` (the full header in the ring), one with a `len` that is
                // not the payload's (the compact one where it saves a line),
                // one an eager message's (the short one where it saves a line).
                let mut h = Header::new(Kind::Eager);
                h.tag = sent as i32;
                h.id = id_of(sent);
                h.len = len as u64 + extra_len_of(sent);
                (h, len)
            });
            for (i, b) in buf[..len].iter_mut().enumerate() {
                *b = frame_byte(sent, i);
            }
            if t.try_send(peer, &h, &buf[..len]).expect("try_send") {
                sent += 1;
                pending = None;
            }
        }
        t.poll(&mut |src, h, payload| {
            let good = src == peer
                && h.tag == got as i32
                && h.id == id_of(got)
                && h.len == payload.len() as u64 + extra_len_of(got)
                && payload
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == frame_byte(got, i));
            if !good && ok {
                eprintln!(
                    "bad frame #{got} from {src}: tag {} id {} len {} / {}",
                    h.tag,
                    h.id,
                    h.len,
                    payload.len()
                );
            }
            ok &= good;
            got += 1;
        })
        .expect("poll");
        if Instant::now() > deadline {
            eprintln!("timed out: sent {sent}, got {got}");
            return false;
        }
    }
    ok
}

/// 100,000 frames each way between two processes, random sizes up to the
/// maximum, contents and per-sender order checked on both sides.
#[test]
fn two_processes_exchange_100k_frames_each_way() {
    let cfg = ShmConfig {
        ring_bytes: 16384,
        ..ShmConfig::default()
    };
    let (seg, fd) = Segment::create_memfd("xchg", 2, &cfg).unwrap();
    let child_fd = dup(&fd);
    let child = fork_child(move || {
        let seg = Segment::from_fd(child_fd, 2).unwrap();
        let mut t = ShmTransport::new(seg, 1, vec![10, 11], true).unwrap();
        exchange(&mut t, 10, 100_000, 2)
    });
    let mut t = ShmTransport::new(seg, 0, vec![10, 11], true).unwrap();
    let ok = exchange(&mut t, 11, 100_000, 1);
    assert!(wait_child(child), "child saw a bad frame or failed");
    assert!(ok, "parent saw a bad frame");
}

/// A receiver asleep on its doorbell is woken by the sender's frame long before
/// its timeout; and a sender blocked on a full ring is woken when it drains.
#[test]
fn sleeping_receiver_is_woken_by_the_doorbell() {
    let (seg, fd) = Segment::create_memfd("bell", 2, &ShmConfig::default()).unwrap();
    let child_fd = dup(&fd);
    let child = fork_child(move || {
        let seg = Segment::from_fd(child_fd, 2).unwrap();
        let mut t = ShmTransport::new(seg, 1, vec![0, 1], true).unwrap();
        // Wait until the parent sleeps, then send one frame.
        while t.segment().rank_block(0).call() != kumi_core::call::Call::Recv {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(50));
        t.try_send(0, &Header::new(Kind::Eager), b"wake up!")
            .unwrap()
    });
    let mut t = ShmTransport::new(seg, 0, vec![0, 1], true).unwrap();
    assert!(t.prepare_sleep(), "nothing pending yet");
    t.segment()
        .rank_block(0)
        .set_call(kumi_core::call::Call::Recv);
    let start = Instant::now();
    let timeout = Duration::from_secs(10);
    let mut got = Vec::new();
    let mut prepared = true;
    while got.is_empty() && start.elapsed() < timeout {
        if prepared {
            t.sleep(timeout);
        }
        t.poll(&mut |_, _, p| got.push(p.to_vec())).unwrap();
        prepared = got.is_empty() && t.prepare_sleep();
    }
    let waited = start.elapsed();
    assert_eq!(got, vec![b"wake up!".to_vec()]);
    assert!(
        waited < Duration::from_secs(2),
        "woke after {waited:?}, not by the doorbell"
    );
    assert!(wait_child(child));
}

/// A sender that fills the ring and sleeps is woken when the receiver drains it.
#[test]
fn sender_blocked_on_full_ring_is_woken_when_it_drains() {
    let (seg, fd) = Segment::create_memfd(
        "full",
        2,
        &ShmConfig {
            ring_bytes: 4096,
            ..ShmConfig::default()
        },
    )
    .unwrap();
    let child_fd = dup(&fd);
    let child = fork_child(move || {
        let seg = Segment::from_fd(child_fd, 2).unwrap();
        let mut t = ShmTransport::new(seg, 1, vec![0, 1], true).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut n = 0;
        let t0 = Instant::now();
        while n < 200 && t0.elapsed() < Duration::from_secs(10) {
            n += t.poll(&mut |_, _, _| ()).unwrap();
        }
        n == 200
    });
    let mut t = ShmTransport::new(seg, 0, vec![0, 1], true).unwrap();
    let start = Instant::now();
    let mut sent = 0;
    let mut slept = 0;
    while sent < 200 {
        if t.try_send(1, &Header::new(Kind::Eager), &[1; 8]).unwrap() {
            sent += 1;
        } else if t.prepare_sleep() {
            slept += 1;
            t.sleep(Duration::from_secs(10));
        }
    }
    assert!(slept > 0, "the ring never filled");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "blocked sender slept to its timeout"
    );
    assert!(wait_child(child));
}

/// `needs_poll` (what a waiting rank asks before each poll) stays true while a
/// poll has work: records ready, or records consumed and not yet handed back
/// to the producer (a poll that stops at its per-ring budget leaves them so;
/// skipping the poll then would starve a producer waiting for room).
#[test]
fn needs_poll_until_consumed_records_are_handed_back() {
    let cfg = ShmConfig {
        ring_bytes: 65536,
        ..ShmConfig::default()
    };
    let (seg, fd) = Segment::create_memfd("needs", 2, &cfg).unwrap();
    let mut t0 = ShmTransport::new(seg, 0, vec![0, 1], true).unwrap();
    let mut t1 = ShmTransport::new(Segment::from_fd(fd, 2).unwrap(), 1, vec![0, 1], true).unwrap();
    let send = |t: &mut ShmTransport, k: usize| {
        for _ in 0..k {
            assert!(t.try_send(1, &Header::new(Kind::Eager), &[7; 8]).unwrap());
        }
    };
    let poll = |t: &mut ShmTransport| t.poll(&mut |_, _, _| ()).unwrap();
    assert!(!t1.needs_poll());
    send(&mut t0, 40);
    assert!(t1.needs_poll());
    // A poll takes at most its budget (32) from a ring; the rest waits.
    assert_eq!(poll(&mut t1), 32);
    assert!(t1.needs_poll(), "8 records still ready");
    assert_eq!(poll(&mut t1), 8);
    assert!(
        !t1.needs_poll(),
        "the poll that found the ring empty handed it back"
    );
    // Exactly the budget: consumed, and not handed back yet (a quarter of
    // the ring is 256 such records).
    send(&mut t0, 32);
    assert_eq!(poll(&mut t1), 32);
    assert!(t1.needs_poll(), "consumed records not handed back yet");
    assert_eq!(poll(&mut t1), 0);
    assert!(!t1.needs_poll());
}

#[test]
fn unknown_peer_and_oversized_payload_are_errors() {
    let (seg, _fd) = Segment::create_memfd("errs", 2, &ShmConfig::default()).unwrap();
    let mut t = ShmTransport::new(seg, 0, vec![4, 9], true).unwrap();
    let h = Header::new(Kind::Eager);
    assert_eq!(
        t.try_send(5, &h, b"x").unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    let big = vec![0u8; t.max_payload() + 1];
    assert_eq!(
        t.try_send(9, &h, &big).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    assert_eq!(t.max_payload(), 32712, "default 64 KiB ring");
    // Self-send works through ring [me][me].
    assert!(t.try_send(4, &h, b"me").unwrap());
    assert!(t.needs_poll());
    let mut got = vec![];
    t.poll(&mut |src, _, p| got.push((src, p.to_vec())))
        .unwrap();
    assert_eq!(got, vec![(4, b"me".to_vec())]);
}

#[test]
fn corrupt_kind_byte_is_a_poll_error_naming_the_peer() {
    let (seg, fd) = Segment::create_memfd("kind", 2, &ShmConfig::default()).unwrap();
    let seg1 = Segment::from_fd(dup(&fd), 2).unwrap();
    let mut a = ShmTransport::new(seg, 0, vec![0, 7], true).unwrap();
    let mut b = ShmTransport::new(seg1, 1, vec![0, 7], true).unwrap();
    assert!(b.try_send(0, &Header::new(Kind::Eager), b"ok").unwrap());
    // Overwrite the kind byte of that record in ring [1][0] through a third map.
    let raw = map_file(&fd);
    // Header page, two rank blocks, two sender sets (a line each), then
    // ring [1][0] is the third ring; its data follows its two control lines.
    let ring10 = 4096 + 2 * 128 + 2 * 64 + 2 * (128 + 65536) + 128;
    raw.write_at(ring10 + 16, &[99]);
    let e = a.poll(&mut |_, _, _| ()).unwrap_err();
    assert!(e.to_string().contains("rank 7"), "{e}");
}

/// A plain writable view of a segment file, to corrupt it on purpose.
struct RawMap(*mut u8, usize);
impl RawMap {
    fn write_at(&self, off: usize, bytes: &[u8]) {
        assert!(off + bytes.len() <= self.1);
        // SAFETY: in bounds of our own mapping; the test corrupts it on purpose
        // while no other thread uses it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.0.add(off), bytes.len()) }
    }
}
impl Drop for RawMap {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping `map_file` made.
        unsafe { libc::munmap(self.0.cast(), self.1) };
    }
}
fn map_file(fd: &OwnedFd) -> RawMap {
    use std::os::fd::AsRawFd;
    let len = rustix::fs::fstat(fd).unwrap().st_size as usize;
    // SAFETY: a fresh shared mapping of a valid fd, at a kernel-chosen address.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    RawMap(p.cast(), len)
}

fn plain_memfd(bytes: &[u8], len: usize) -> OwnedFd {
    let fd = rustix::fs::memfd_create("corrupt", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes).unwrap();
    f.set_len(len as u64).unwrap();
    OwnedFd::from(f)
}

/// Wrong magic, truncated files, lying header fields: errors, never panics.
#[test]
fn corrupted_segments_fail_from_fd() {
    let cfg = ShmConfig {
        ring_bytes: 4096,
        ..ShmConfig::default()
    };
    let len = Segment::total_bytes(2, 4096).unwrap();
    // A good segment copied byte for byte, then damaged in several ways.
    let (_seg, fd) = Segment::create_memfd("corrupt", 2, &cfg).unwrap();
    let good = std::fs::read(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd)
    ))
    .unwrap();
    assert_eq!(good.len(), len);
    assert!(Segment::from_fd(plain_memfd(&good, len), 2).is_ok());

    let cases: Vec<(&str, Vec<u8>, usize)> = vec![
        (
            "bad magic",
            [b"NOTKUMI!".as_slice(), &good[8..]].concat(),
            len,
        ),
        ("truncated", good.clone(), len - 4096),
        ("short header", good[..100].to_vec(), 100),
        ("empty", vec![], 0),
        (
            "ring size lies",
            {
                let mut g = good.clone();
                g[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
                g
            },
            len,
        ),
        (
            "local size lies",
            {
                let mut g = good.clone();
                g[12..16].copy_from_slice(&3u32.to_le_bytes());
                g
            },
            len,
        ),
        (
            "version",
            {
                let mut g = good.clone();
                g[8..12].copy_from_slice(&9u32.to_le_bytes());
                g
            },
            len,
        ),
        (
            "single-copy choice",
            {
                let mut g = good.clone();
                g[112..116].copy_from_slice(&7u32.to_le_bytes());
                g
            },
            len,
        ),
        (
            "job length",
            {
                let mut g = good.clone();
                g[36..40].copy_from_slice(&1000u32.to_le_bytes());
                g
            },
            len,
        ),
    ];
    for (what, bytes, flen) in cases {
        let r = Segment::from_fd(plain_memfd(&bytes[..bytes.len().min(flen)], flen), 2);
        let e = r.err().unwrap_or_else(|| panic!("{what}: accepted"));
        assert!(!e.to_string().is_empty(), "{what}");
        eprintln!("{what}: {e}");
    }
}

fn unique_job(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("test-{tag}-{}-{nanos}", std::process::id())
}

/// Named segment: create (exclusive), open, inspect (owners include this
/// process), unlink.
#[test]
fn named_segment_life_cycle() {
    let job = unique_job("named");
    let cfg = ShmConfig {
        ring_bytes: 4096,
        ..ShmConfig::default()
    };
    let seg = Segment::create_named(&job, 2, &cfg).unwrap();
    assert_eq!(
        Segment::create_named(&job, 2, &cfg).err().unwrap().kind(),
        std::io::ErrorKind::AlreadyExists
    );
    let other = Segment::open_named(&job, 2).unwrap();
    let _t = ShmTransport::new(other, 1, vec![0, 1], true).unwrap();
    let path = format!("/dev/shm/{}", Segment::named(&job));
    assert!(std::path::Path::new(&path).exists());
    let info = Segment::inspect_named(&path).unwrap();
    let me = std::process::id();
    assert_eq!(info.job, job);
    assert_eq!(info.owners.len(), 2, "creator and rank 1");
    assert!(info.owners.iter().all(|&(pid, _)| pid == me));
    assert!(info.any_owner_alive());
    let by_name = Segment::inspect_named(&Segment::named(&job)).unwrap();
    assert_eq!(by_name.owners, info.owners);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    Segment::unlink_named(&job).unwrap();
    assert!(!std::path::Path::new(&path).exists());
    assert!(Segment::open_named(&job, 2).is_err());
    drop(seg);
}

/// A segment whose creator and ranks have all exited reads as dead.
#[test]
fn named_segment_of_dead_owners_is_dead() {
    let job = unique_job("dead");
    let j2 = job.clone();
    let child = fork_child(move || {
        let seg = Segment::create_named(
            &j2,
            1,
            &ShmConfig {
                ring_bytes: 4096,
                ..ShmConfig::default()
            },
        )
        .unwrap();
        let t = ShmTransport::new(seg, 0, vec![0], true).unwrap();
        drop(t);
        true
    });
    assert!(wait_child(child));
    let info = Segment::inspect_named(&Segment::named(&job)).unwrap();
    Segment::unlink_named(&job).unwrap();
    assert_eq!(info.owners.len(), 2);
    assert!(info
        .owners
        .iter()
        .all(|&(pid, start)| pid == child as u32 && start > 0));
    assert!(!info.any_owner_alive());
    assert!(info
        .owners
        .iter()
        .all(|&(pid, start)| !owner_alive(pid, start)));
    // And a live one for contrast.
    let me = std::process::id();
    assert!(owner_alive(me, process_start_time(me).unwrap()));
}

/// The runtime may move its transport to a progress thread.
#[test]
fn transport_is_send() {
    fn send<T: Send>() {}
    send::<ShmTransport>();
    send::<Segment>();
}

#[test]
fn attaching_a_rank_twice_is_refused() {
    let (seg, fd) = Segment::create_memfd("twice", 2, &ShmConfig::default()).unwrap();
    let _a = ShmTransport::new(seg, 0, vec![0, 1], true).unwrap();
    let again = Segment::from_fd(fd, 2).unwrap();
    let e = ShmTransport::new(again, 0, vec![0, 1], true).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
}

/// Eight transports over one segment, as 8 ranks on 2 cores (local rank `i`
/// on core `i % 2`), for [`ShmTransport::turn`].
fn eight_on_two_cores(tag: &str) -> Vec<ShmTransport> {
    let (seg, fd) = Segment::create_memfd(
        tag,
        8,
        &ShmConfig {
            ring_bytes: 65536,
            ..ShmConfig::default()
        },
    )
    .unwrap();
    let globals: Vec<u32> = (0..8).collect();
    let mut ts = vec![ShmTransport::new(seg, 0, globals.clone(), true).unwrap()];
    for i in 1..8 {
        let seg = Segment::from_fd(dup(&fd), 8).unwrap();
        ts.push(ShmTransport::new(seg, i, globals.clone(), true).unwrap());
    }
    ts
}

/// Publishes that local rank `i` waits for local rank `src`.
fn waits_for(ts: &[ShmTransport], i: usize, src: usize) {
    ts[i].publish_awaits(Awaits::Local(src));
}

/// Local rank `from` sends an 8-byte token to local rank `to`.
fn send_token(ts: &mut [ShmTransport], from: usize, to: u32) {
    assert!(ts[from]
        .try_send(to, &Header::new(Kind::Eager), &[1; 8])
        .unwrap());
}

#[test]
fn core_goes_to_the_rank_nearest_the_token() {
    let mut ts = eight_on_two_cores("nearest");
    // A token ring with the token at rank 1 (running): every other rank waits
    // for its left neighbour. On core 0, ranks 2, 4, 6 and 0 are 1, 3, 5 and
    // 7 waits away from it.
    for i in [0, 2, 3, 4, 5, 6, 7] {
        waits_for(&ts, i, (i + 7) % 8);
    }
    assert_eq!(
        ts[2].turn(1, 2),
        Turn::Keep,
        "rank 2 is next: it keeps core 0"
    );
    for i in [0, 4, 6] {
        assert_eq!(
            ts[i].turn((i + 7) % 8, 2),
            Turn::Pass,
            "rank {i} hands core 0 on"
        );
    }
    // Core 1: ranks 3, 5, 7 are 2, 4 and 6 away; rank 1 runs, so nobody
    // waiting there may keep the core from it.
    assert_ne!(ts[3].turn(2, 2), Turn::Keep, "rank 1 runs on core 1");

    // Rank 1 sends the token to rank 2 and waits for rank 0: rank 2 now has
    // an unread message, so it is live, and rank 4 (waiting for 3, waiting
    // for 2) is nearest on core 0; rank 3 is nearest on core 1.
    send_token(&mut ts, 1, 2);
    waits_for(&ts, 1, 0);
    assert_ne!(
        ts[4].turn(3, 2),
        Turn::Keep,
        "rank 2 has its message: it needs the core"
    );
    assert_eq!(ts[3].turn(2, 2), Turn::Keep, "rank 3 is next on core 1");
    assert_ne!(ts[5].turn(4, 2), Turn::Keep);

    // Rank 2 takes the message and runs: it is live, and rank 4 waits behind it.
    assert_eq!(ts[2].poll(&mut |_, _, _| ()).unwrap(), 1);
    ts[2].publish_awaits(Awaits::Nothing);
    assert_ne!(ts[4].turn(3, 2), Turn::Keep, "rank 2 runs on core 0");
    // It sends on and waits: rank 4 is nearest on core 0 again, one away.
    send_token(&mut ts, 2, 3);
    waits_for(&ts, 2, 1);
    assert_eq!(
        ts[4].turn(3, 2),
        Turn::Keep,
        "rank 4 is next: it keeps core 0"
    );
    assert_ne!(ts[2].turn(1, 2), Turn::Keep);
}

#[test]
fn core_is_not_kept_on_ties_unknown_waits_or_cycles() {
    let mut ts = eight_on_two_cores("ties");
    // Rank 1 runs; ranks 0 and 2 of core 0 both wait for it: a tie, both yield.
    waits_for(&ts, 0, 1);
    waits_for(&ts, 2, 1);
    for i in [4, 6] {
        waits_for(&ts, i, 7);
    }
    for i in [3, 5, 7] {
        waits_for(&ts, i, 0);
    }
    assert_eq!(ts[0].turn(1, 2), Turn::Yield, "tie with rank 2");
    assert_eq!(ts[2].turn(1, 2), Turn::Yield, "tie with rank 0");
    // Rank 2 waits for something else instead (any source, a collective):
    // it may need the core at any moment.
    ts[2].publish_awaits(Awaits::Other);
    // It is yielded to, never slept for (it would send a ping-pong's rank
    // to sleep beside a rank in a barrier).
    assert_eq!(ts[0].turn(1, 2), Turn::Yield, "rank 2's wait is not known");
    // Running, it is a rank nearer than rank 0: rank 0 hands the core on.
    ts[2].publish_awaits(Awaits::Nothing);
    assert_eq!(ts[0].turn(1, 2), Turn::Pass, "rank 2 runs");
    // Asleep, it takes no turn of the core: rank 0 keeps it.
    assert!(ts[2].prepare_sleep());
    assert_eq!(ts[0].turn(1, 2), Turn::Keep, "rank 2 sleeps");
    ts[2].cancel_sleep();
    assert_ne!(ts[0].turn(1, 2), Turn::Keep, "rank 2 is awake again");
    // Waiting for rank 7, which waits for 0, it is three waits from rank 1,
    // rank 0 one: rank 0 keeps the core.
    waits_for(&ts, 2, 7);
    assert_eq!(
        ts[0].turn(1, 2),
        Turn::Keep,
        "rank 2 waits for 7, which waits for 0"
    );
    // Every rank waits for another with nothing in flight: no rank is live,
    // nothing to keep the core for.
    waits_for(&ts, 1, 0);
    for i in [0, 2, 4, 6] {
        assert_ne!(
            ts[i].turn((i + 1) % 8, 2),
            Turn::Keep,
            "rank {i} in a cycle"
        );
    }
    // A source out of range, or this rank itself, is never a reason.
    assert_ne!(ts[0].turn(8, 2), Turn::Keep);
    assert_ne!(ts[0].turn(0, 2), Turn::Keep);
    assert_ne!(ts[0].turn(1, 0), Turn::Keep);
}

#[test]
fn a_send_wakes_the_sleepers_waiting_for_its_receiver() {
    let mut ts = eight_on_two_cores("wakeahead");
    // Rank 4 sleeps waiting for rank 3, rank 6 waiting for rank 5.
    waits_for(&ts, 4, 3);
    waits_for(&ts, 6, 5);
    assert!(ts[4].prepare_sleep());
    assert!(ts[6].prepare_sleep());
    // Rank 2 sends to rank 3: rank 4 is next to the token, so it is woken.
    send_token(&mut ts, 2, 3);
    ts[2].wake_waiters_of(3);
    let t = Instant::now();
    ts[4].sleep(Duration::from_secs(20));
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "rank 4 was not woken: {:?}",
        t.elapsed()
    );
    // Rank 6 waits for rank 5, whom nobody sent to: it sleeps on (to its
    // timeout, here).
    let t = Instant::now();
    ts[6].sleep(Duration::from_millis(300));
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "rank 6 was woken after {:?}",
        t.elapsed()
    );
}
