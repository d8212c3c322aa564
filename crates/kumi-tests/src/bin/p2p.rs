//! The point-to-point suite: every semantic the Rust API promises, checked by
//! real ranks. Runs at any size >= 2 (some checks need 3 ranks and are adapted
//! below that). Rank 0 prints `p2p: all <k> checks passed on <n> ranks`.
//!
//! `kumi run -n 4 target/debug/p2p`

use kumi::{scope, wait_all, wait_any, Comm, Error, ANY_SOURCE, ANY_TAG};
use kumi_tests::{check, fill};

type R = Result<(), Error>;
type Check = (&'static str, fn(&Comm) -> R);

fn main() {
    let universe = kumi::init().expect("init");
    let world = universe.world();
    assert!(world.size() >= 2, "the p2p suite needs at least 2 ranks");
    let checks: &[Check] = &[
        ("blocking send/recv with status", blocking),
        ("zero-length and self messages", zero_and_self),
        ("per-sender order with ANY_SOURCE/ANY_TAG", order),
        ("nonblocking wait_all / wait_any / test_all", nonblocking),
        ("probe and iprobe", probe),
        ("large messages (rendezvous), checksummed", large),
        ("truncation is an error naming both sizes", truncation),
        ("invalid rank, tag and source are rejected", invalid_args),
        ("synchronous send and sendrecv", sync_and_sendrecv),
        ("dup and split isolate matching", comms),
        ("cancel of an unmatched receive", cancel),
        (
            "dropped requests: the scope waits for them, their data arrives",
            dropped_requests,
        ),
        (
            "a blocking receive yields to one posted before it",
            blocking_after_posted,
        ),
        (
            "senders stream records of the eager limit into one receiver",
            eager_streams,
        ),
    ];
    assert_eq!(
        checks.len(),
        kumi_tests::P2P_CHECKS,
        "P2P_CHECKS counts them"
    );
    for (name, f) in checks {
        world.barrier().expect("barrier");
        if let Err(e) = f(&world) {
            panic!("rank {}: check '{name}' failed: {e}", world.rank());
        }
        if world.rank() == 0 {
            println!("ok: {name}");
        }
    }
    world.barrier().expect("barrier");
    if world.rank() == 0 {
        println!(
            "p2p: all {} checks passed on {} ranks",
            checks.len(),
            world.size()
        );
    }
}

fn blocking(w: &Comm) -> R {
    let (me, n) = (w.rank(), w.size());
    let right = ((me + 1) % n) as i32;
    let left = ((me + n - 1) % n) as i32;
    // Even ranks send first, odd ones receive first. With an odd size, rank n-1
    // and rank 0 are both even: their sends are eager and complete at once.
    let out = [me as u32 * 10, me as u32 * 10 + 1, 7];
    let mut inb = [0u32; 3];
    if me % 2 == 0 {
        w.send(&out, right, 5)?;
        let st = w.recv(&mut inb, left, 5)?;
        assert_eq!(
            (st.source, st.tag, st.bytes, st.count::<u32>()),
            (left, 5, 12, 3)
        );
    } else {
        let st = w.recv(&mut inb, left, 5)?;
        assert_eq!((st.source, st.tag, st.bytes), (left, 5, 12));
        w.send(&out, right, 5)?;
    }
    assert_eq!(inb, [left as u32 * 10, left as u32 * 10 + 1, 7]);
    Ok(())
}

fn zero_and_self(w: &Comm) -> R {
    let me = w.rank() as i32;
    // To self, nonblocking (a blocking send to self that is eager completes at once).
    let out = [1u8, 2, 3];
    let mut inb = [0u8; 3];
    scope(|s| -> R {
        let r = w.irecv(s, &mut inb, me, 9)?;
        let x = w.isend(s, &out, me, 9)?;
        wait_all(vec![r, x])?;
        Ok(())
    })?;
    assert_eq!(inb, out);
    // A large message to self goes through the same path.
    let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    let mut back = vec![0u8; big.len()];
    scope(|s| -> R {
        let r = w.irecv(s, &mut back, me, 10)?;
        let x = w.isend(s, &big, me, 10)?;
        wait_all(vec![x, r])?;
        Ok(())
    })?;
    assert!(big == back, "large self message corrupted");
    // Zero bytes between neighbours.
    let n = w.size();
    let right = ((w.rank() + 1) % n) as i32;
    let left = ((w.rank() + n - 1) % n) as i32;
    let st = w.sendrecv::<u8, u8>(&[], right, 11, &mut [], left, 11)?;
    assert_eq!((st.source, st.bytes), (left, 0));
    Ok(())
}

fn order(w: &Comm) -> R {
    // Every rank but 0 sends 200 numbered messages with mixed tags to rank 0;
    // rank 0 receives with wildcards and checks each sender's sequence is in order.
    let (me, n) = (w.rank(), w.size());
    let per = 200u32;
    if me == 0 {
        let mut next = vec![0u32; n];
        for _ in 0..per * (n as u32 - 1) {
            let mut v = [0u32; 2];
            let st = w.recv(&mut v, ANY_SOURCE, ANY_TAG)?;
            let src = st.source as usize;
            assert_eq!(v[0] as usize, src, "payload names its sender");
            assert_eq!(v[1], next[src], "message from {src} out of order");
            assert_eq!(st.tag, (v[1] % 3) as i32);
            next[src] += 1;
        }
        assert!(next[1..].iter().all(|&c| c == per));
        // Tag-selective receive may take a later message first, but per tag order holds.
    } else {
        for i in 0..per {
            w.send(&[me as u32, i], 0, (i % 3) as i32)?;
        }
    }
    w.barrier()?;
    // Tag selection: rank 1 sends tags 1,2,1,2; rank 0 takes tag 2s first, then 1s.
    if me == 1 {
        for (i, t) in [1, 2, 1, 2].iter().enumerate() {
            w.send(&[i as u8], 0, *t)?;
        }
    } else if me == 0 {
        let mut b = [0u8];
        for want in [1u8, 3, 0, 2] {
            let tag = if want % 2 == 1 { 2 } else { 1 };
            w.recv(&mut b, 1, tag)?;
            assert_eq!(b[0], want);
        }
    }
    Ok(())
}

fn nonblocking(w: &Comm) -> R {
    // Every rank sends k messages to every other with nonblocking calls. The
    // message from s to r with tag j has 1 + (s + r + j) % 5 elements, each equal
    // to s * 1000 + r * 10 + j, so both sides know its size and contents.
    let (me, n) = (w.rank(), w.size());
    let k = 8usize;
    let len = |s: usize, r: usize, j: usize| 1 + (s + r + j) % 5;
    let val = |s: usize, r: usize, j: usize| (s * 1000 + r * 10 + j) as u64;
    let outs: Vec<Vec<u64>> = (0..n * k)
        .map(|i| vec![val(me, i / k, i % k); len(me, i / k, i % k)])
        .collect();
    let mut ins: Vec<Vec<u64>> = (0..n * k)
        .map(|i| vec![0u64; len(i / k, me, i % k)])
        .collect();
    scope(|s| -> R {
        let mut reqs = Vec::new();
        for (i, buf) in ins.iter_mut().enumerate() {
            if i / k != me {
                reqs.push(w.irecv(s, buf, (i / k) as i32, (i % k) as i32)?);
            }
        }
        let mut sends = Vec::new();
        for (i, buf) in outs.iter().enumerate() {
            if i / k != me {
                sends.push(w.isend(s, buf, (i / k) as i32, (i % k) as i32)?);
            }
        }
        // Drain half of the receives with wait_any, then test_all, then wait_all.
        let mut done = 0;
        while reqs.len() > (n - 1) * k / 2 {
            let (_, st) = wait_any(&mut reqs)?;
            assert!(st.source >= 0 && (st.source as usize) < n);
            done += 1;
        }
        assert!(done > 0);
        let mut polls = 0u64;
        while !kumi::test_all(&mut reqs)? {
            polls += 1;
            assert!(polls < 100_000_000, "test_all never completed");
        }
        wait_all(reqs)?;
        wait_all(sends)?;
        Ok(())
    })?;
    for (i, buf) in ins.iter().enumerate() {
        let (peer, j) = (i / k, i % k);
        if peer != me {
            assert!(
                buf.iter().all(|&v| v == val(peer, me, j)),
                "wrong data from {peer} tag {j}: {buf:?}"
            );
        }
    }
    Ok(())
}

fn probe(w: &Comm) -> R {
    let me = w.rank();
    if me == 1 {
        w.send(&[3u16, 4, 5, 6, 7], 0, 42)?;
    }
    if me == 0 {
        let st = w.probe(ANY_SOURCE, 42)?;
        assert_eq!((st.source, st.tag, st.bytes), (1, 42, 10));
        let again = w.iprobe(1, 42)?.expect("probe leaves the message");
        assert_eq!(again.bytes, 10);
        assert!(w.iprobe(1, 43)?.is_none());
        let (v, st2) = w.recv_vec::<u16>(st.source, st.tag)?;
        assert_eq!(v, vec![3, 4, 5, 6, 7]);
        assert_eq!(st2.source, 1);
        assert!(w.iprobe(1, 42)?.is_none(), "message received once");
    }
    Ok(())
}

fn eager_streams(w: &Comm) -> R {
    // Every rank but 0 sends 48 messages of 64 KiB (the eager limit of up to
    // 5 ranks a host) and a few around it to rank 0, all at once: 3 MiB
    // each through a 1 MiB ring, so senders fill it and wait for room while
    // rank 0 receives in the order it posted, one sender after another.
    let (me, n) = (w.rank(), w.size());
    let lens = |i: usize| [64 * 1024, 64 * 1024 - 8, 64 * 1024 + 8, 65_000][i % 4];
    let per = 48usize;
    if me == 0 {
        let mut ins: Vec<Vec<u8>> = (0..(n - 1) * per)
            .map(|i| vec![0u8; lens(i % per)])
            .collect();
        scope(|s| -> R {
            let mut reqs = Vec::new();
            for (i, buf) in ins.iter_mut().enumerate() {
                let src = 1 + i / per;
                reqs.push(w.irecv(s, buf, src as i32, 30)?);
            }
            wait_all(reqs)?;
            Ok(())
        })?;
        for (i, buf) in ins.iter().enumerate() {
            if let Err(off) = check(buf, 1 + i / per, (i % per) as u64) {
                panic!(
                    "message {} of rank {} differs at byte {off}",
                    i % per,
                    1 + i / per
                );
            }
        }
    } else {
        let outs: Vec<Vec<u8>> = (0..per)
            .map(|i| {
                let mut b = vec![0u8; lens(i)];
                fill(&mut b, me, i as u64);
                b
            })
            .collect();
        scope(|s| -> R {
            let sends = outs
                .iter()
                .map(|b| w.isend(s, b, 0, 30))
                .collect::<Result<Vec<_>, _>>()?;
            wait_all(sends)?;
            Ok(())
        })?;
    }
    Ok(())
}

fn large(w: &Comm) -> R {
    let (me, n) = (w.rank(), w.size());
    let right = ((me + 1) % n) as i32;
    let left = ((me + n - 1) % n) as i32;
    // 64 KiB + 1: above every default eager limit (64 KiB at most).
    for (i, &len) in [64 * 1024 + 1, 100_000, 1 << 20, 3 << 20]
        .iter()
        .enumerate()
    {
        let mut out = vec![0u8; len];
        fill(&mut out, me, i as u64);
        let mut inb = vec![0u8; len];
        let st = w.sendrecv(&out, right, 20 + i as i32, &mut inb, left, 20 + i as i32)?;
        assert_eq!(st.bytes, len);
        if let Err(off) = check(&inb, left as usize, i as u64) {
            panic!("large message of {len} bytes from {left} differs at byte {off}");
        }
    }
    Ok(())
}

fn truncation(w: &Comm) -> R {
    let me = w.rank();
    for (tag, len) in [(30, 64usize), (31, 1 << 20)] {
        if me == 1 {
            w.send(&vec![1u8; len], 0, tag)?;
        } else if me == 0 {
            let mut small = vec![0u8; 16];
            match w.recv(&mut small, 1, tag) {
                Err(Error::Truncated {
                    message_bytes,
                    buffer_bytes,
                    source,
                    tag: t,
                }) => {
                    assert_eq!((message_bytes, buffer_bytes, source, t), (len, 16, 1, tag));
                    let text = Error::Truncated {
                        message_bytes,
                        buffer_bytes,
                        source,
                        tag: t,
                    }
                    .to_string();
                    assert!(
                        text.contains(&len.to_string()) && text.contains("16"),
                        "message: {text}"
                    );
                }
                other => panic!("expected a truncation error, got {other:?}"),
            }
            assert!(
                small.iter().all(|&b| b == 0),
                "nothing written on truncation"
            );
        }
    }
    // The job goes on: a normal message still flows after the error.
    if me == 1 {
        w.send(&[9u8], 0, 32)?;
    } else if me == 0 {
        let mut b = [0u8];
        w.recv(&mut b, 1, 32)?;
        assert_eq!(b, [9]);
    }
    Ok(())
}

fn invalid_args(w: &Comm) -> R {
    let n = w.size() as i32;
    let expect_arg = |r: Result<(), Error>, arg: &str| match r {
        Err(Error::InvalidArgument { arg: a, .. }) if a == arg => {}
        other => panic!("expected an invalid-argument error for `{arg}`, got {other:?}"),
    };
    expect_arg(w.send(&[1u8], n, 0), "dest");
    expect_arg(w.send(&[1u8], -3, 0), "dest");
    expect_arg(w.send(&[1u8], 0, -1), "tag");
    expect_arg(w.send(&[1u8], 0, kumi::TAG_UB + 1), "tag");
    expect_arg(w.recv(&mut [0u8], n + 5, 0).map(|_| ()), "source");
    expect_arg(w.recv(&mut [0u8], 0, -7).map(|_| ()), "tag");
    let msg = w.send(&[1u8], n, 0).unwrap_err().to_string();
    assert!(
        msg.contains("dest") && msg.contains(&n.to_string()),
        "message: {msg}"
    );
    Ok(())
}

fn sync_and_sendrecv(w: &Comm) -> R {
    let me = w.rank();
    if me == 0 {
        w.ssend(&[1u32, 2], 1, 50)?;
        // The receiver posts only after a delay; ssend returned, so it matched.
        let mut b = [0u8];
        w.recv(&mut b, 1, 51)?;
        assert_eq!(b[0], 1, "receiver saw the message before we returned");
    } else if me == 1 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut v = [0u32; 2];
        w.recv(&mut v, 0, 50)?;
        w.send(&[1u8], 0, 51)?;
    }
    Ok(())
}

fn comms(w: &Comm) -> R {
    let (me, n) = (w.rank(), w.size());
    let d = w.dup()?;
    assert_eq!((d.rank(), d.size()), (me, n));
    // A message on the dup is not received by a wildcard receive on the original.
    if me == 0 {
        d.send(&[7u8], 1, 1)?;
        w.send(&[8u8], 1, 1)?;
    } else if me == 1 {
        let mut b = [0u8];
        w.recv(&mut b, ANY_SOURCE, ANY_TAG)?;
        assert_eq!(b[0], 8, "world receive took the dup's message");
        d.recv(&mut b, 0, 1)?;
        assert_eq!(b[0], 7);
    }
    // Split into even and odd ranks, reversed order by key.
    let color = (me % 2) as u32;
    let s = w.split(Some(color), -(me as i32))?.expect("member");
    let members: Vec<usize> = (0..n).filter(|r| r % 2 == me % 2).rev().collect();
    assert_eq!(s.size(), members.len());
    assert_eq!(s.world_rank(s.rank()), Some(me));
    assert_eq!(members[s.rank()], me);
    // Sum of world ranks over the sub-communicator via a ring of sends.
    let mut total = me as u64;
    let mut carry = [me as u64];
    let sn = s.size();
    for _ in 1..sn {
        let mut got = [0u64];
        s.sendrecv(
            &carry,
            ((s.rank() + 1) % sn) as i32,
            0,
            &mut got,
            ((s.rank() + sn - 1) % sn) as i32,
            0,
        )?;
        total += got[0];
        carry = got;
    }
    assert_eq!(total, members.iter().map(|&r| r as u64).sum::<u64>());
    // A rank that passes no color gets no communicator.
    let none = w.split(if me == 0 { None } else { Some(0) }, 0)?;
    assert_eq!(none.is_none(), me == 0);
    if let Some(c) = none {
        assert_eq!(c.size(), n - 1);
        c.barrier()?;
    }
    Ok(())
}

fn cancel(w: &Comm) -> R {
    let mut b = [0u8; 4];
    scope(|s| -> R {
        let mut r = w.irecv(s, &mut b, ANY_SOURCE, 999)?;
        assert!(r.cancel(), "an unmatched receive can be cancelled");
        let st = r.wait()?;
        assert!(st.cancelled);
        Ok(())
    })?;
    Ok(())
}

/// A request dropped before its operation completes is detached, not lost:
/// the scope waits for it at its end, so a receive's data is in the buffer
/// after the scope; one dropped once complete (after `test`) frees at once.
/// Rank 1 drops its receives and ends its scope at once; rank 0 sends only
/// 50 ms later, eager and rendezvous sizes both.
fn dropped_requests(w: &Comm) -> R {
    let me = w.rank();
    let (small, big) = (
        [7u32, 8, 9],
        (0..300_000u32).map(|i| i ^ 0x5a5a).collect::<Vec<_>>(),
    );
    let mut got_small = [0u32; 3];
    let mut got_big = vec![0u32; big.len()];
    scope(|s| -> R {
        if me == 1 {
            drop(w.irecv(s, &mut got_small, 0, 41)?);
            drop(w.irecv(s, &mut got_big, 0, 42)?);
        }
        w.barrier()?;
        if me == 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            // The big one is a rendezvous: its request is in flight here.
            drop(w.isend(s, &big, 1, 42)?);
            w.send(&small, 1, 41)?;
        }
        Ok(())
    })?;
    if me == 1 {
        assert_eq!(got_small, small, "a dropped receive's data");
        assert!(got_big == big, "a dropped rendezvous receive's data");
    }
    let mut got_tested = [0u8; 2];
    scope(|s| -> R {
        if me == 0 {
            w.send(&[1u8, 2], 1, 43)?;
        } else if me == 1 {
            let mut r = w.irecv(s, &mut got_tested, 0, 43)?;
            let mut polls = 0u64;
            while !r.test()? {
                polls += 1;
                assert!(polls < 100_000_000, "test never completed");
            }
            drop(r);
        }
        Ok(())
    })?;
    if me == 1 {
        assert_eq!(got_tested, [1, 2], "a receive dropped once complete");
    }
    Ok(())
}

/// A blocking receive goes without a request when nothing is posted before
/// it (the engine's direct receive); one posted before it that accepts the
/// same message must still get it first; a synchronous send to a rank
/// already waiting in a blocking receive must be acknowledged, and a
/// rendezvous to one must arrive whole.
fn blocking_after_posted(w: &Comm) -> R {
    let me = w.rank();
    if me == 1 {
        // Rank 0 posts both receives before the messages leave.
        w.recv(&mut [0u8; 0], 0, 61)?;
        w.send(&[1u32], 0, 60)?;
        w.send(&[2u32], 0, 60)?;
        // Rank 0 is (most likely) waiting in its blocking receive by now.
        std::thread::sleep(std::time::Duration::from_millis(30));
        w.ssend(&[3u32], 0, 62)?;
        // A rendezvous for a waiting blocking receive (it becomes a request).
        std::thread::sleep(std::time::Duration::from_millis(30));
        let big: Vec<u32> = (0..100_000u32).collect();
        w.send(&big, 0, 63)?;
    } else if me == 0 {
        let (mut first, mut second, mut third) = ([0u32], [0u32], [0u32]);
        scope(|s| -> R {
            let r = w.irecv(s, &mut first, 1, ANY_TAG)?;
            w.send(&[0u8; 0], 1, 61)?;
            let st = w.recv(&mut second, ANY_SOURCE, 60)?;
            assert_eq!((st.source, st.tag), (1, 60));
            let st = r.wait()?;
            assert_eq!((st.source, st.tag), (1, 60));
            Ok(())
        })?;
        assert_eq!((first[0], second[0]), (1, 2), "posted first, matched first");
        let st = w.recv(&mut third, 1, 62)?;
        assert_eq!((third[0], st.tag, st.bytes), (3, 62, 4));
        let mut big = vec![0u32; 100_000];
        let st = w.recv(&mut big, 1, 63)?;
        assert_eq!((st.source, st.tag, st.bytes), (1, 63, 400_000));
        assert!(
            big.iter().enumerate().all(|(i, &v)| v == i as u32),
            "rendezvous into a waiting blocking receive"
        );
    }
    Ok(())
}
