//! Rank programs that wait a long time but never deadlock: the supervision
//! tests check that kumi never reports them.
//!
//! `deadlock_free <mode>`:
//! - `compute`: rank 0 computes (a busy loop, no kumi call) for 10 s between
//!   two messages to rank 1, which waits in a receive all that time; the other
//!   ranks wait in the final barrier;
//! - `sleep`: the last rank sleeps 5 s before sending to every other rank,
//!   which all wait in a receive from it.

use kumi_tests::compute;
use std::time::Duration;

fn main() {
    let mode = std::env::args().nth(1).expect("mode");
    let universe = kumi::init().expect("init");
    let w = universe.world();
    let (me, n) = (w.rank() as i32, w.size() as i32);
    let mut b = [0u64; 1];
    match mode.as_str() {
        "compute" => {
            for round in 0..2u64 {
                if me == 0 {
                    // 1 s, then 10 s: the long computation the issue asks about.
                    let x = compute(Duration::from_millis(if round == 0 {
                        1000
                    } else {
                        10_000
                    }));
                    w.send(&[x], 1, 1).expect("send");
                } else if me == 1 {
                    w.recv(&mut b, 0, 1).expect("recv");
                }
            }
        }
        "sleep" => {
            if me == n - 1 {
                std::thread::sleep(Duration::from_secs(5));
                for q in 0..n - 1 {
                    w.send(&[7u64], q, 2).expect("send");
                }
            } else {
                w.recv(&mut b, n - 1, 2).expect("recv");
                assert_eq!(b[0], 7);
            }
        }
        m => panic!("unknown mode {m}"),
    }
    println!("rank {me} done");
}
