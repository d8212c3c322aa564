//! Diagnostic: half round-trip latency of the bare shared-memory transport
//! between two processes (no matching, no requests), to see how much of a
//! message's cost is the transport and how much the runtime above it.
//!
//! `cargo run --release -p kumi-transport --example shm_pingpong [iters]`

use kumi_core::header::{Header, Kind};
use kumi_transport::shm::{Segment, ShmConfig, ShmTransport};
use kumi_transport::Transport;
use std::time::Instant;

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("iters"));
    let (seg, fd) = Segment::create_memfd("diag", 2, &ShmConfig::default()).expect("segment");
    drop(seg);
    // SAFETY: fork in a single-threaded process; the child only uses its own
    // copies of the descriptor and memory and exits without returning.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    let me = if pid == 0 { 1 } else { 0 };
    let fd2 = fd.try_clone().expect("dup");
    let seg = Segment::from_fd(fd2, 2).expect("map");
    let mut t = ShmTransport::new(seg, me, vec![0, 1], true).expect("transport");
    let other = 1 - me as u32;
    let mut h = Header::new(Kind::Eager);
    h.len = 8;
    let payload = [7u8; 8];
    let mut got = 0u64;
    let start = Instant::now();
    for i in 0..iters {
        if me == 0 {
            while !t.try_send(other, &h, &payload).unwrap() {}
        }
        let target = i + 1;
        while got < target {
            t.poll(&mut |_, _, _| got += 1).unwrap();
        }
        if me == 1 {
            while !t.try_send(other, &h, &payload).unwrap() {}
        }
    }
    if me == 0 {
        let el = start.elapsed().as_secs_f64();
        println!(
            "bare shm transport: {:.3} us half round trip (8 B)",
            el * 1e6 / (2.0 * iters as f64)
        );
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    } else {
        std::process::exit(0);
    }
}
