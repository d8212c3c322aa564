//! Intercommunicators through the Rust API (`kumi::inter`): the world's
//! first `cut` ranks against the rest, for a few cuts; on each, the
//! exchange across (an all-to-all with uneven blocks, several in flight),
//! the broadcast from each side, a split by parity with reversed keys (the
//! remote ranks in the other group's new order) and one without a match,
//! nonblocking duplicates, and the merge. Rank 0 prints `inter: all checks passed on <n> ranks`.
//!
//! `kumi run -n 5 target/release/inter`

use kumi::inter::{InterComm, Root};
use kumi::{Comm, Error};

type R = Result<(), Error>;

fn ensure(ok: bool, what: impl FnOnce() -> String) -> R {
    if ok {
        Ok(())
    } else {
        Err(Error::Protocol(what()))
    }
}

/// The byte remote rank `from` (of side `side`) sends to rank `to`, `k`-th.
fn byte(side: usize, from: usize, to: usize, k: usize) -> u8 {
    (side * 101 + from * 13 + to * 7 + k) as u8
}

/// Block lengths: `from` sends `(from + to) % 3` bytes to `to`.
fn len(from: usize, to: usize) -> usize {
    (from + to) % 3
}

/// Checks `ic` (this rank on side `side`: 1 for the first ranks).
fn check(ic: &InterComm, side: usize) -> R {
    let (me, n) = (ic.local().rank(), ic.remote_size());
    let other = 1 - side;
    // All-to-all across, three at once.
    let mut reqs = Vec::new();
    for round in 0..3 {
        let counts: Vec<usize> = (0..n).map(|j| len(me, j) + round).collect();
        let data: Vec<u8> = (0..n)
            .flat_map(|j| (0..counts[j]).map(move |k| byte(side, me, j, k)))
            .collect();
        let rcounts: Vec<usize> = (0..n).map(|j| len(j, me) + round).collect();
        let each: Vec<(usize, usize)> = (0..n).map(|j| (j, j)).collect();
        reqs.push((
            rcounts.clone(),
            ic.iexchange(data, &counts, &each, &rcounts, &each)?,
        ));
    }
    for (rcounts, q) in reqs {
        let got = q.wait()?;
        let want: Vec<u8> = (0..n)
            .flat_map(|j| (0..rcounts[j]).map(move |k| byte(other, j, me, k)))
            .collect();
        ensure(got == want, || {
            format!("exchange on rank {me}: {got:?} != {want:?}")
        })?;
    }
    // A remote rank out of range is refused, naming it.
    let bad = ic.iexchange(vec![1], &[1], &[(n, 0)], &[], &[]);
    ensure(bad.is_err(), || {
        "an exchange with remote rank n started".into()
    })?;
    // Broadcast from rank 0 of each side.
    for root_side in [0, 1] {
        let mut buf = [0u64; 4];
        let who = match (side == root_side, me) {
            (true, 0) => {
                buf = [1, 2, 3, 40 + root_side as u64];
                Root::Me
            }
            (true, _) => Root::None,
            (false, _) => Root::Remote(0),
        };
        ic.bcast(&mut buf, who)?;
        if who != Root::None {
            ensure(buf == [1, 2, 3, 40 + root_side as u64], || {
                format!("bcast from side {root_side} on rank {me}: {buf:?}")
            })?;
        }
    }
    ic.barrier()
}

fn run(w: &Comm) -> R {
    let (p, r) = (w.size(), w.rank());
    let mut cut = 1;
    while cut <= p / 2 {
        let side = usize::from(r < cut);
        let half = w.split(Some(side as u32), r as i32)?.expect("a color");
        let ic = InterComm::create(&half, 0, w, if side == 1 { cut } else { 0 }, 9)?;
        check(&ic, side)?;
        let (me, ln, rn) = (ic.local().rank(), ic.local().size(), ic.remote_size());
        // Split by parity, keys reversed.
        let parity = me % 2;
        let sp = ic.split(Some(parity as u32), -(me as i32))?;
        let (mine, theirs) = ((ln + 1 - parity) / 2, (rn + 1 - parity) / 2);
        match sp {
            None => ensure(theirs == 0, || {
                format!("no split on rank {r} with {theirs} to match")
            })?,
            Some(sp) => {
                ensure(
                    sp.local().size() == mine && sp.remote_size() == theirs,
                    || format!("split sizes on rank {r}"),
                )?;
                ensure(sp.local().rank() == mine - 1 - me / 2, || {
                    format!("split order on rank {r}")
                })?;
                check(&sp, side)?;
            }
        }
        // Only one side takes a color: nobody gets an intercommunicator.
        let none = ic.split((side == 1).then_some(0), 0)?;
        ensure(none.is_none(), || {
            format!("a one-sided split gave rank {r} an intercommunicator")
        })?;
        // Two nonblocking duplicates, completed in the other order.
        let (a, b) = (ic.idup()?, ic.idup()?);
        let b = b.wait()?;
        let a = a.wait()?;
        check(&b, side)?;
        check(&a, side)?;
        // The merge puts the high side last.
        let m = ic.merge(side == 1)?;
        let want = if side == 1 { rn + me } else { me };
        ensure(m.size() == p && m.rank() == want, || {
            format!("merge on rank {r}: {} of {}", m.rank(), m.size())
        })?;
        cut += if p > 4 { p / 2 - 1 } else { 1 };
    }
    Ok(())
}

fn main() {
    let universe = kumi::init().expect("init");
    let w = universe.world();
    if let Err(e) = run(&w) {
        eprintln!("inter: rank {}: {e}", w.rank());
        std::process::exit(1);
    }
    w.barrier().expect("barrier");
    if w.rank() == 0 {
        println!("inter: all checks passed on {} ranks", w.size());
    }
}
