//! Distributed shared memory through the Rust API (`kumi::dsm`), over every
//! rank of the job whichever host it is on:
//! - `primitives`: for each distribution (block, cyclic by 1 and by 3,
//!   counts the owners choose, some of them 0): every rank writes its share
//!   of the elements (single and ranged writes, and stores through its own
//!   part's pointer), a barrier, and every rank reads the whole array in one
//!   call and checks every element; `write_sync` seen by the owner after a
//!   message; `fetch_op` hands out each of 0..n*M exactly once; a
//!   compare-and-swap counter; a histogram of plain reads and writes under a
//!   lock (mutual exclusion and release consistency across hosts); an
//!   access outside the array, an unlock of a lock not held and a lock
//!   taken twice fail naming why, and the array still works;
//! - `deadlock` (2 ranks): each holds one lock and asks for the other's;
//! - `killed` (2 ranks): rank 1 holds a lock and dies; rank 0 waits for it;
//! - `scale`: allocate, write one's part, barrier, read everyone's, free.
//!
//! Rank 0 prints `dsm: <mode> passed on <n> ranks`.
//!
//! `kumi run -n 4 target/release/dsm primitives`

use kumi::dsm::{Array, Dist};
use kumi::win::AccOp;
use kumi::{Comm, Error};

type R = Result<(), Error>;

fn check(ok: bool, m: impl FnOnce() -> String) -> R {
    if ok {
        Ok(())
    } else {
        Err(Error::Protocol(m()))
    }
}

fn value(i: usize) -> u64 {
    (i as u64) * 1000 + 7
}

/// Every rank writes the elements `i` with `i % n == rank`, in three ways;
/// everyone reads all back.
fn fill_and_read(c: &Comm, a: &Array<u64>, what: &str) -> R {
    let (n, me, len) = (c.size(), c.rank(), a.len());
    // Own part through its pointer: the elements of this rank's part whose
    // global index is ours to write.
    let (p, local) = a.local();
    for j in 0..local {
        let i = a.layout().global(me, j);
        if i % n == me && i.is_multiple_of(3) {
            // SAFETY: `j` is within this rank's part, which nobody else
            // writes before the barrier below (every element has one writer).
            unsafe { p.add(j).write(value(i)) };
        }
    }
    for i in (me..len).step_by(n) {
        if i % 3 == 1 {
            a.set(i, value(i))?;
        } else if i % 3 == 2 {
            a.write(i, &[value(i)])?;
        } else if a.layout().locate(i).0 != me {
            a.write_sync(i, &[value(i)])?;
        }
    }
    a.barrier()?;
    let mut all = vec![0u64; len];
    a.read(0, &mut all)?;
    for (i, &v) in all.iter().enumerate() {
        check(v == value(i), || {
            format!(
                "{what}: rank {me} read {v} at {i} (owner {:?}), wrote {}",
                a.layout().locate(i),
                value(i)
            )
        })?;
    }
    // A ranged write across owners, by one rank, read back by all (once
    // everyone has read the first values).
    a.barrier()?;
    if me == n - 1 && len > 1 {
        let tail: Vec<u64> = (1..len).map(|i| value(i) + 1).collect();
        a.write(1, &tail)?;
    }
    a.barrier()?;
    a.read(0, &mut all)?;
    for (i, &v) in all.iter().enumerate().skip(1) {
        check(v == value(i) + 1, || {
            format!("{what}: ranged write: {v} at {i}")
        })?;
    }
    a.barrier()
}

fn primitives(c: &Comm) -> R {
    let (n, me) = (c.size(), c.rank());
    let len = 7 * n + 3;
    for dist in [Dist::Block, Dist::Cyclic(1), Dist::Cyclic(3)] {
        let a: Array<u64> = Array::new(c, len, dist.clone())?;
        fill_and_read(c, &a, &format!("{dist:?}"))?;
    }
    // Owner-chosen: rank r holds 2r elements (rank 0 none).
    let a: Array<u64> = Array::owned(c, 2 * me)?;
    check(a.len() == n * (n - 1), || {
        format!("owned length {}", a.len())
    })?;
    fill_and_read(c, &a, "owned")?;

    // write_sync: complete at the owner when it returns; the owner, told by
    // a message, sees it in its own part without any call of its own.
    let a: Array<u64> = Array::new(c, n, Dist::Block)?;
    let right = (me + 1) % n;
    a.write_sync(right, &[value(me)])?;
    c.send(&[1u8], right as i32, 3)?;
    c.recv(&mut [0u8], ((me + n - 1) % n) as i32, 3)?;
    let (p, _) = a.local();
    // SAFETY: element 0 of this rank's part, written by the left neighbour
    // before its message (its write_sync completed first).
    let got = unsafe { p.read_volatile() };
    check(got == value((me + n - 1) % n), || {
        format!("write_sync: rank {me} holds {got}")
    })?;
    a.barrier()?;

    // fetch_op: every rank takes M tickets from element 0.
    const M: usize = 40;
    let t: Array<u64> = Array::with_locks(c, 3, Dist::Cyclic(1), 2)?;
    let mut mine = Vec::with_capacity(M);
    for _ in 0..M {
        mine.push(t.fetch_op(0, AccOp::Sum, 1)?);
    }
    // compare_and_swap: a counter in element 1.
    for _ in 0..M {
        let mut cur = t.get(1)?;
        loop {
            let was = t.compare_and_swap(1, cur, cur + 1)?;
            if was == cur {
                break;
            }
            cur = was;
        }
    }
    // A histogram under lock 0: plain read, then write.
    for _ in 0..M {
        t.lock(0)?;
        let v = t.get(2)?;
        t.set(2, v + 1)?;
        t.unlock(0)?;
    }
    t.barrier()?;
    let mut all = vec![0u64; n * M];
    c.allgather(&mine, &mut all)?;
    all.sort_unstable();
    check(all.iter().enumerate().all(|(i, &v)| v == i as u64), || {
        "fetch_op handed out a ticket twice or skipped one".into()
    })?;
    let want = (n * M) as u64;
    let ends = [t.get(0)?, t.get(1)?, t.get(2)?];
    check(ends == [want; 3], || {
        format!("ends {ends:?} (tickets, CAS counter, histogram under a lock), want {want}")
    })?;

    // Errors name what was wrong, and change nothing.
    let e = t.get(3).unwrap_err().to_string();
    check(
        e.contains("elements 3..4 outside an array of 3") && e.contains("DSM array #"),
        || format!("out of range: {e}"),
    )?;
    let e = t.read(2, &mut [0u64; 5]).unwrap_err().to_string();
    check(e.contains("outside an array of 3"), || {
        format!("range: {e}")
    })?;
    let e = t.unlock(1).unwrap_err().to_string();
    check(e.contains("lock 1 is not held"), || format!("unlock: {e}"))?;
    t.lock(1)?;
    let e = t.lock(1).unwrap_err().to_string();
    check(e.contains("not recursive"), || format!("lock twice: {e}"))?;
    t.unlock(1)?;
    let e = t.lock(2).unwrap_err().to_string();
    check(e.contains("lock 2 outside the segment's 2 locks"), || {
        format!("lock number: {e}")
    })?;
    check(t.get(2)? == want, || "the array changed".into())?;
    t.barrier()
}

/// Each of two ranks holds one lock and asks for the other's.
fn deadlock(c: &Comm) -> R {
    let a: Array<u64> = Array::new(c, 2, Dist::Block)?;
    let me = c.rank() as u32;
    a.lock(me)?;
    a.barrier()?;
    a.lock(1 - me)?;
    Err(Error::Protocol("took a lock another rank holds".into()))
}

/// Rank 1 holds a lock and dies in the middle of fetch-and-adds on rank
/// 0's element; rank 0 waits for the lock.
fn killed(c: &Comm) -> R {
    let a: Array<u64> = Array::new(c, 2, Dist::Block)?;
    if c.rank() == 1 {
        a.lock(0)?;
        a.barrier()?;
        std::thread::spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::process::abort();
        });
        loop {
            a.fetch_op(0, AccOp::Sum, 1)?;
        }
    }
    a.barrier()?;
    a.lock(0)?;
    Err(Error::Protocol("took a lock a dead rank held".into()))
}

/// Allocate, write one's part, barrier, read everyone's.
fn scale(c: &Comm) -> R {
    let (n, me) = (c.size(), c.rank());
    const PER: usize = 16;
    let a: Array<u64> = Array::new(c, n * PER, Dist::Block)?;
    let mine: Vec<u64> = (0..PER).map(|k| value(me * PER + k)).collect();
    a.write(me * PER, &mine)?;
    a.barrier()?;
    let mut all = vec![0u64; n * PER];
    a.read(0, &mut all)?;
    for (i, &v) in all.iter().enumerate() {
        check(v == value(i), || format!("rank {me} read {v} at {i}"))?;
    }
    a.barrier()
}

fn main() {
    let universe = kumi::init().expect("kumi init");
    let w = universe.world();
    let mode = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "primitives".into());
    let r = match mode.as_str() {
        "primitives" => primitives(&w),
        "deadlock" => deadlock(&w),
        "killed" => killed(&w),
        "scale" => scale(&w),
        m => universe.abort(
            2,
            &format!("dsm: unknown mode {m} (primitives, deadlock, killed, scale)"),
        ),
    };
    if let Err(e) = r {
        universe.abort(1, &format!("dsm {mode} on rank {}: {e}", w.rank()));
    }
    if w.rank() == 0 {
        println!("dsm: {mode} passed on {} ranks", w.size());
    }
}
