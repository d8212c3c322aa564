//! A rank program whose traffic is known exactly, for `kumi run --stats-json`.
//!
//! Rank `r` sends to every rank `q` (itself included) `expected_msgs(r, q)`
//! messages of `size(r, q, i)` bytes, then receives what every rank sends it.
//! The test computes the same figures with the same functions (copied there)
//! and compares them with the JSON the launcher writes.

/// Messages rank `r` sends to rank `q`.
fn expected_msgs(r: usize, q: usize) -> usize {
    1 + (r * 3 + q) % 4
}

/// Bytes of message `i` from `r` to `q`: small (eager), empty, and large
/// (rendezvous) ones.
fn size(r: usize, q: usize, i: usize) -> usize {
    match (r + q + i) % 3 {
        0 => 10 + r + q,
        1 => 0,
        _ => 100_000 + 8 * i,
    }
}

fn main() {
    let universe = kumi::init().expect("init");
    let w = universe.world();
    let (me, n) = (w.rank(), w.size());
    let bufs: Vec<Vec<u8>> = (0..n)
        .flat_map(|q| (0..expected_msgs(me, q)).map(move |i| vec![q as u8; size(me, q, i)]))
        .collect();
    kumi::scope(|s| {
        let mut reqs = Vec::new();
        let mut k = 0;
        for q in 0..n {
            for _ in 0..expected_msgs(me, q) {
                reqs.push(w.isend(s, &bufs[k], q as i32, 9).expect("isend"));
                k += 1;
            }
        }
        for q in 0..n {
            for i in 0..expected_msgs(q, me) {
                let (v, st) = w.recv_vec::<u8>(q as i32, 9).expect("recv");
                assert_eq!(v.len(), size(q, me, i));
                assert_eq!(st.source, q as i32);
            }
        }
        kumi::wait_all(reqs).expect("wait");
    });
    println!("rank {me} sent its messages");
}
