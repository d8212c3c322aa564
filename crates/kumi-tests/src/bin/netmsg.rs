//! Rank program for the multi-host tests: `netmsg MODE [ARG]`.
//!
//! * `big`: ranks 0 and the last rank (on different hosts) exchange 64 MiB each
//!   way at once, checksummed byte by byte.
//! * `many`: the same two ranks post 1,000 nonblocking receives and 1,000
//!   nonblocking sends to each other at once, sizes 0..40 KiB, all checked.
//! * `spin`: every rank passes a token around a ring forever (until killed).
//! * `allpairs`: every rank sends every other rank a 1 KiB message at once
//!   (nonblocking), then an allreduce and an alltoall; everything checked.
//! * `sec FLAG`: rank 0 prints its data address, then ping-pongs with rank 1
//!   until the file FLAG exists (while a test attacks its data port), then tells
//!   every rank to finish. Rank 2, if any, talks to rank 0 only after that.

use kumi::{scope, wait_all, Comm};
use kumi_tests::{check, fill};

fn big(w: &Comm) {
    let (me, last) = (w.rank(), w.size() - 1);
    if me != 0 && me != last {
        return;
    }
    let peer = if me == 0 { last } else { 0 };
    let n = 64 << 20;
    let mut out = vec![0u8; n];
    fill(&mut out, me, 1);
    let mut inb = vec![0u8; n];
    scope(|s| {
        let r = w.irecv(s, &mut inb, peer as i32, 5).expect("irecv");
        let q = w.isend(s, &out, peer as i32, 5).expect("isend");
        wait_all(vec![r, q]).expect("wait");
    });
    if let Err(at) = check(&inb, peer, 1) {
        panic!("rank {me}: 64 MiB from rank {peer} differs at byte {at}");
    }
    println!("rank {me}: 64 MiB from rank {peer} checked");
}

fn many(w: &Comm) {
    let (me, last) = (w.rank(), w.size() - 1);
    if me != 0 && me != last {
        return;
    }
    let peer = if me == 0 { last } else { 0 };
    let k = 1000usize;
    let size = |from: usize, i: usize| (i * 37 + from * 11) % (40 * 1024);
    let outs: Vec<Vec<u8>> = (0..k)
        .map(|i| {
            let mut b = vec![0u8; size(me, i)];
            fill(&mut b, me, i as u64);
            b
        })
        .collect();
    let mut ins: Vec<Vec<u8>> = (0..k).map(|i| vec![0u8; size(peer, i)]).collect();
    scope(|s| {
        let mut reqs = Vec::new();
        for (i, b) in ins.iter_mut().enumerate() {
            reqs.push(w.irecv(s, b, peer as i32, i as i32).expect("irecv"));
        }
        for (i, b) in outs.iter().enumerate() {
            reqs.push(w.isend(s, b, peer as i32, i as i32).expect("isend"));
        }
        wait_all(reqs).expect("wait_all");
    });
    for (i, b) in ins.iter().enumerate() {
        if let Err(at) = check(b, peer, i as u64) {
            panic!("rank {me}: message {i} from rank {peer} differs at byte {at}");
        }
    }
    println!("rank {me}: {k} messages from rank {peer} checked");
}

fn allpairs(w: &Comm) {
    let (me, n) = (w.rank(), w.size());
    let len = 1024;
    let outs: Vec<Vec<u8>> = (0..n)
        .map(|to| {
            let mut b = vec![0u8; len];
            fill(&mut b, me, to as u64);
            b
        })
        .collect();
    let mut ins: Vec<Vec<u8>> = vec![vec![0u8; len]; n];
    scope(|s| {
        let mut reqs = Vec::new();
        for (from, b) in ins.iter_mut().enumerate().filter(|(r, _)| *r != me) {
            reqs.push(w.irecv(s, b, from as i32, 7).expect("irecv"));
        }
        for (to, b) in outs.iter().enumerate().filter(|(r, _)| *r != me) {
            reqs.push(w.isend(s, b, to as i32, 7).expect("isend"));
        }
        wait_all(reqs).expect("wait_all");
    });
    for (from, b) in ins.iter().enumerate().filter(|(r, _)| *r != me) {
        if let Err(at) = check(b, from, me as u64) {
            panic!("rank {me}: the message from rank {from} differs at byte {at}");
        }
    }
    let mut sum = [me as u64];
    w.allreduce_in_place(&mut sum, &kumi::Op::sum())
        .expect("allreduce");
    assert_eq!(sum[0], (n * (n - 1) / 2) as u64, "rank {me}: allreduce");
    let send: Vec<u64> = (0..n).map(|to| (me * n + to) as u64).collect();
    let mut recv = vec![0u64; n];
    w.alltoall(&send, &mut recv).expect("alltoall");
    for (from, &v) in recv.iter().enumerate() {
        assert_eq!(v, (from * n + me) as u64, "rank {me}: alltoall from {from}");
    }
    w.barrier().expect("barrier");
    if me == 0 {
        println!("allpairs: {n} ranks, every pair, allreduce and alltoall checked");
    }
}

fn spin(w: &Comm) -> ! {
    let (me, n) = (w.rank(), w.size());
    let mut token = [0u64; 1];
    if me == 0 {
        println!("spinning");
        w.send(&token, 1, 0).expect("send");
    }
    loop {
        w.recv(&mut token, ((me + n - 1) % n) as i32, 0)
            .expect("recv");
        token[0] += 1;
        w.send(&token, ((me + 1) % n) as i32, 0).expect("send");
    }
}

fn sec(w: &Comm, u: &kumi::Universe, flag: &str) {
    let me = w.rank();
    let mut buf = [0u64; 1];
    match me {
        0 => {
            let addr = u
                .data_address()
                .expect("rank 0 listens for data connections");
            println!("addr {addr}");
            let mut i = 0u64;
            while !std::path::Path::new(flag).exists() {
                w.send(&[i], 1, 1).expect("send");
                w.recv(&mut buf, 1, 1).expect("recv");
                assert_eq!(buf[0], i + 1);
                i += 1;
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            for r in 1..w.size() {
                w.send(&[u64::MAX], r as i32, 2).expect("send");
            }
            println!("exchanged {i} round trips during the attacks");
        }
        1 => loop {
            let st = w.recv(&mut buf, 0, kumi::ANY_TAG).expect("recv");
            if st.tag == 2 {
                break;
            }
            w.send(&[buf[0] + 1], 0, 1).expect("send");
        },
        _ => {
            w.recv(&mut buf, 0, 2).expect("recv");
        }
    }
}

fn main() {
    let universe = kumi::init().expect("init");
    let world = universe.world();
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("big") => big(&world),
        Some("many") => many(&world),
        Some("spin") => spin(&world),
        Some("allpairs") => allpairs(&world),
        Some("sec") => sec(&world, &universe, args.get(2).expect("sec FLAG")),
        other => panic!("unknown mode {other:?}: use big, many, spin, allpairs or sec FLAG"),
    }
    world.barrier().expect("barrier");
}
