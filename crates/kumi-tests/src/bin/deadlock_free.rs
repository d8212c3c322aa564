//! Rank programs that wait a long time but never deadlock: the supervision
//! tests check that kumi never reports them.
//!
//! `deadlock_free <mode>`:
//! - `compute`: rank 0 computes (a busy loop, no kumi call) for 10 s between
//!   two messages to rank 1, which waits in a receive all that time; the other
//!   ranks wait in the final barrier;
//! - `sleep`: the last rank sleeps 5 s before sending to every other rank,
//!   which all wait in a receive from it;
//! - `long [bytes] [times]`: rank 0 sends `bytes` (default 1 GiB) to rank 1
//!   `times` times (default 4); each message takes long enough to move that
//!   both ends' waits are seen.

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
        "long" => {
            let arg = |i: usize, d: usize| {
                std::env::args()
                    .nth(i)
                    .map_or(d, |a| a.parse().expect("a number"))
            };
            let (len, times) = (arg(2, 1 << 30), arg(3, 4));
            let mut m = vec![0u8; len];
            for t in 0..times {
                if me == 0 {
                    for (i, x) in m.iter_mut().enumerate().step_by(4096) {
                        *x = (i >> 12) as u8 ^ t as u8;
                    }
                    w.send(&m, 1, 3).expect("send");
                } else if me == 1 {
                    w.recv(&mut m, 0, 3).expect("recv");
                    assert!(m
                        .iter()
                        .enumerate()
                        .step_by(4096)
                        .all(|(i, &x)| x == (i >> 12) as u8 ^ t as u8));
                }
            }
        }
        m => panic!("unknown mode {m}"),
    }
    println!("rank {me} done");
}
