//! Rank programs that deadlock on purpose, for the supervision tests.
//!
//! `deadlock <mode>`; every mode blocks some ranks forever. The launcher must
//! find it, name the ranks and calls, and end the job with exit code 86.
//! - `recv2`: ranks 0 and 1 each receive from the other (tag 7) first;
//! - `recv5`: five ranks in a ring, each receives from its right neighbour;
//! - `barrier`: every rank but the last enters a barrier, the last waits for a
//!   message from rank 0 (tag 7);
//! - `mismatch`: ranks 0 and 1 enter a barrier on world, ranks 2 and 3 one on a
//!   duplicate of world: mismatched collectives;
//! - `bcastreduce`: rank 0 enters a reduce to root 0, the others a broadcast
//!   from root 0: mismatched collectives, each side waits for the other;
//! - `wildcard`: rank 0 receives from any source with tag 5; every other rank
//!   sends it a message with tag 6 (it arrives, matches nothing) then waits in a
//!   barrier;
//! - `sendsend`: ranks 0 and 1 each send 256 KiB (rendezvous: above every
//!   default eager limit) to the other first;
//! - `ssend`: ranks 0 and 1 each send 8 bytes synchronously to the other first;
//! - `waitall`: ranks 0 and 1 post a receive from each other with tag 3 and a
//!   send with tag 4, and wait for both (a wait on requests);
//! - `split`: world splits in {0,1} and {2,3}; ranks 0 and 1 each receive from
//!   the other on their communicator, ranks 2 and 3 compute for 2 s and then do
//!   the same on theirs.

use kumi_tests::compute;
use std::time::Duration;

fn main() {
    let mode = std::env::args().nth(1).expect("mode");
    let universe = kumi::init().expect("init");
    let w = universe.world();
    let (me, n) = (w.rank() as i32, w.size() as i32);
    let mut b = [0u8; 8];
    match mode.as_str() {
        "recv2" => {
            w.recv(&mut b, 1 - me, 7).expect("recv");
        }
        "recv5" => {
            w.recv(&mut b, (me + 1) % n, 7).expect("recv");
        }
        "barrier" => {
            if me == n - 1 {
                w.recv(&mut b, 0, 7).expect("recv");
            } else {
                w.barrier().expect("barrier");
            }
        }
        "mismatch" => {
            let d = w.dup().expect("dup");
            if me < 2 {
                w.barrier().expect("barrier");
            } else {
                d.barrier().expect("barrier");
            }
        }
        "bcastreduce" => {
            let mut v = [1u64; 4];
            if me == 0 {
                let mut out = [0u64; 4];
                w.reduce(&v, &mut out, &kumi::Op::sum(), 0).expect("reduce");
            } else {
                w.bcast(&mut v, 0).expect("bcast");
            }
        }
        "wildcard" => {
            if me == 0 {
                w.recv(&mut b, kumi::ANY_SOURCE, 5).expect("recv");
            } else {
                w.send(&b, 0, 6).expect("send");
                w.barrier().expect("barrier");
            }
        }
        "sendsend" => {
            let big = vec![1u8; 256 * 1024];
            w.send(&big, 1 - me, 7).expect("send");
        }
        "ssend" => {
            w.ssend(&b, 1 - me, 7).expect("ssend");
        }
        "waitall" => {
            let mut r = [0u8; 8];
            kumi::scope(|s| {
                let a = w.irecv(s, &mut r, 1 - me, 3)?;
                let c = w.isend(s, &b, 1 - me, 4)?;
                kumi::wait_all(vec![a, c]).map(|_| ())
            })
            .expect("waitall");
        }
        "split" => {
            let c = w
                .split(Some((me / 2) as u32), me)
                .expect("split")
                .expect("member");
            if me >= 2 {
                compute(Duration::from_secs(2));
            }
            c.recv(&mut b, 1 - c.rank() as i32, 7).expect("recv");
        }
        m => panic!("unknown mode {m}"),
    }
    unreachable!("mode {mode} was meant to deadlock");
}
