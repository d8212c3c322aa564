//! Cross-process stress: every rank sends `count` messages of random sizes to
//! random peers; every payload is checked byte for byte and every sender's
//! sequence is checked for order.
//!
//! Sizes are log-uniform from 0 to 1 MiB (each power of two equally likely), so
//! the eager path, the rendezvous path and both boundaries are all exercised many
//! times without moving terabytes. The plan (who sends what to whom) comes from
//! one seed that every rank expands identically, so receivers know what to expect.
//!
//! `kumi run -n 4 target/release/stress [total_messages] [seed]`

use kumi::{scope, wait_all, ANY_SOURCE};
use kumi_tests::{check, fill, Rng};

const MAX: u64 = 1 << 20;

fn size(r: &mut Rng) -> usize {
    let bits = r.below(21);
    if bits == 0 {
        return r.below(2) as usize;
    }
    ((1u64 << (bits - 1)) + r.below(1 << (bits - 1))).min(MAX) as usize
}

fn main() -> Result<(), kumi::Error> {
    let mut args = std::env::args().skip(1);
    let total: u64 = args
        .next()
        .map_or(100_000, |a| a.parse().expect("total: a number"));
    let seed: u64 = args
        .next()
        .map_or(1, |a| a.parse().expect("seed: a number"));
    let universe = kumi::init()?;
    let w = universe.world();
    let (me, n) = (w.rank(), w.size());
    assert!(n >= 2, "stress needs at least 2 ranks");

    // The plan: message i goes from src(i) to dst(i) with size(i).
    let mut plan = Rng(seed);
    let mut mine_out = Vec::new(); // (global index, dst, size)
    let mut expect_in = vec![Vec::new(); n]; // per sender: (global index, size) in order
    for i in 0..total {
        let src = plan.below(n as u64) as usize;
        let mut dst = plan.below(n as u64 - 1) as usize;
        if dst >= src {
            dst += 1;
        }
        let len = size(&mut plan);
        if src == me {
            mine_out.push((i, dst, len));
        }
        if dst == me {
            expect_in[src].push((i, len));
        }
    }
    let incoming: usize = expect_in.iter().map(|v| v.len()).sum();
    let mut next_from = vec![0usize; n];
    let mut bytes = 0u64;

    // Send in windows of 16 nonblocking sends, receiving with ANY_SOURCE in
    // between so that no rank blocks the others.
    let mut received = 0usize;
    let mut inbox = vec![0u8; MAX as usize];
    let mut recv_one = |inbox: &mut Vec<u8>| -> Result<(), kumi::Error> {
        let st = w.recv(&mut inbox[..], ANY_SOURCE, 0)?;
        let src = st.source as usize;
        let k = next_from[src];
        let (idx, len) = *expect_in[src]
            .get(k)
            .unwrap_or_else(|| panic!("unexpected extra message from {src}"));
        assert_eq!(st.bytes, len, "message {idx} from {src}: size");
        if let Err(off) = check(&inbox[..len], src, idx) {
            panic!("message {idx} from {src} ({len} bytes) corrupt at byte {off} or out of order");
        }
        next_from[src] += 1;
        bytes += len as u64;
        Ok(())
    };
    for window in mine_out.chunks(16) {
        let bufs: Vec<Vec<u8>> = window
            .iter()
            .map(|&(i, _, len)| {
                let mut b = vec![0u8; len];
                fill(&mut b, me, i);
                b
            })
            .collect();
        scope(|s| -> Result<(), kumi::Error> {
            let mut reqs = Vec::new();
            for (b, &(_, dst, _)) in bufs.iter().zip(window) {
                reqs.push(w.isend(s, b, dst as i32, 0)?);
            }
            // Receive what is already there while our sends are in flight.
            while received < incoming && w.iprobe(ANY_SOURCE, 0)?.is_some() {
                recv_one(&mut inbox)?;
                received += 1;
            }
            let mut reqs = reqs;
            while !kumi::test_all(&mut reqs)? {
                if received < incoming && w.iprobe(ANY_SOURCE, 0)?.is_some() {
                    recv_one(&mut inbox)?;
                    received += 1;
                }
            }
            wait_all(reqs)?;
            Ok(())
        })?;
    }
    while received < incoming {
        recv_one(&mut inbox)?;
        received += 1;
    }
    for (src, v) in expect_in.iter().enumerate() {
        assert_eq!(next_from[src], v.len(), "messages from {src}");
    }
    w.barrier()?;
    println!(
        "stress: rank {me} sent {} and received {received} messages ({bytes} bytes), all checked",
        mine_out.len()
    );
    Ok(())
}
