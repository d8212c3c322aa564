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
//! - `scale`: allocate, write one's part, barrier, read everyone's, free;
//! - page-shared segments (`kumi::dsm::Shared`), plain loads and stores:
//!   `stencil` (a 1-D Jacobi sweep over a segment with barriers, checked
//!   against the same sweep done serially), `histogram` (bins incremented
//!   under one lock by every rank: several writers per page), `handoff`
//!   (each rank in turn takes a lock, rewrites every page, releases it and
//!   tells the next rank, which must see all of it), `in_call` (a page not
//!   mapped here passed to a send: stopped with a message naming it);
//! - `tasks`: a tree of tasks through the task queue (each spawns up to 3
//!   more, to depth 9): every task runs exactly once, every rank's pops end
//!   with `None` only once all ran, and pushes after that fail.
//!
//! Rank 0 prints `dsm: <mode> passed on <n> ranks`.
//!
//! `kumi run -n 4 target/release/dsm primitives`

use kumi::dsm::{Array, Dist, Shared, TaskQueue};
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

/// One Jacobi step of `u` into `v` for indices `lo..hi` (ends fixed).
fn sweep(u: &[f64], v: &mut [f64], lo: usize, hi: usize) {
    for i in lo.max(1)..hi.min(u.len() - 1) {
        v[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
    }
}

fn stencil(c: &Comm) -> R {
    let (n, me) = (c.size(), c.rank());
    const LEN: usize = 20_000;
    const STEPS: usize = 30;
    let start = |i: usize| ((i * 7919) % 1000) as f64;
    let a: Shared<f64> = Shared::new(c, 2 * LEN)?;
    // SAFETY: every value is written by one rank between barriers, and read
    // by others only after the barrier that follows.
    let s = unsafe { a.as_mut_slice() };
    let (lo, hi) = (me * LEN / n, (me + 1) * LEN / n);
    for i in lo..hi {
        s[i] = start(i);
        s[LEN + i] = start(i);
    }
    a.barrier()?;
    for step in 0..STEPS {
        let (u, v) = s.split_at_mut(LEN);
        if step.is_multiple_of(2) {
            sweep(u, v, lo, hi);
        } else {
            sweep(v, u, lo, hi);
        }
        a.barrier()?;
    }
    // The same sweeps, serially.
    let mut u: Vec<f64> = (0..LEN).map(start).collect();
    let mut v = u.clone();
    for _ in 0..STEPS {
        sweep(&u, &mut v, 0, LEN);
        std::mem::swap(&mut u, &mut v);
    }
    let got = if STEPS.is_multiple_of(2) {
        &s[..LEN]
    } else {
        &s[LEN..]
    };
    // Every rank reads the whole result (pages of every home).
    for (i, (&g, &w)) in got.iter().zip(&u).enumerate() {
        check(g == w, || {
            format!("stencil: rank {me} has {g} at {i}, serially {w}")
        })?;
    }
    a.free()
}

fn histogram(c: &Comm) -> R {
    let (n, me) = (c.size(), c.rank());
    const BINS: usize = 3000;
    const M: usize = 200;
    let h: Shared<u32> = Shared::new(c, BINS)?;
    let bin = |r: usize, k: usize| (r * 7 + k * k * 31 + k) % BINS;
    for k in 0..M {
        h.lock(0)?;
        // SAFETY: bins are touched only under lock 0 until the barrier.
        unsafe { *h.as_ptr().add(bin(me, k)) += 1 };
        h.unlock(0)?;
    }
    h.barrier()?;
    let mut want = vec![0u32; BINS];
    for r in 0..n {
        for k in 0..M {
            want[bin(r, k)] += 1;
        }
    }
    // SAFETY: no rank writes after the barrier.
    let got = unsafe { h.as_mut_slice() };
    check(got == &want[..], || {
        let i = (0..BINS).find(|&i| got[i] != want[i]).unwrap_or(0);
        format!(
            "histogram: rank {me} sees {} in bin {i}, want {}",
            got[i], want[i]
        )
    })?;
    h.free()
}

fn handoff(c: &Comm) -> R {
    let (n, me) = (c.size(), c.rank());
    const LEN: usize = 5000;
    let a: Shared<u64> = Shared::new(c, LEN)?;
    let p = a.as_ptr();
    for round in 0..2 * n {
        if round % n == me {
            if round > 0 {
                c.recv(&mut [0u8], ((me + n - 1) % n) as i32, 9)?;
            }
            a.lock(0)?;
            for i in 0..LEN {
                // SAFETY: under lock 0; the previous writer released it.
                let v = unsafe { p.add(i).read() };
                let want = if round == 0 {
                    0
                } else {
                    (round as u64 - 1) * 100_000 + i as u64
                };
                check(v == want, || {
                    format!("handoff round {round}: rank {me} saw {v} at {i}")
                })?;
                // SAFETY: as above.
                unsafe { p.add(i).write(round as u64 * 100_000 + i as u64) };
            }
            a.unlock(0)?;
            if round + 1 < 2 * n {
                c.send(&[1u8], ((me + 1) % n) as i32, 9)?;
            }
        }
    }
    a.free()
}

/// A page that is not mapped here, passed to a send.
fn in_call(c: &Comm) -> R {
    let a: Shared<u8> = Shared::new(c, 1 << 16)?;
    if c.rank() == 0 {
        // SAFETY: nobody writes; the send touches pages homed at rank 1.
        let s = unsafe { a.as_mut_slice() };
        c.send(&s[s.len() - 100..], 1, 4)?;
    } else if c.rank() == 1 {
        c.recv(&mut [0u8; 100], 0, 4)?;
    }
    Err(Error::Protocol(
        "a send of unmapped DSM memory went through".into(),
    ))
}

fn tasks(c: &Comm) -> R {
    let me = c.rank();
    // A task is (depth, id); it spawns 1 + id % 3 children until depth 9.
    let q: TaskQueue<[u64; 2]> = TaskQueue::new(c)?;
    let (mut ran, mut spawned, mut ids) = (0u64, 0u64, 0u64);
    if me == 0 {
        q.push(&[0, 1])?;
        spawned += 1;
    }
    while let Some([depth, id]) = q.pop()? {
        ran += 1;
        ids = ids.wrapping_add(id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        if depth < 9 {
            for k in 0..1 + id % 3 {
                q.push(&[depth + 1, id * 4 + k])?;
                spawned += 1;
            }
        }
    }
    check(q.pop()?.is_none(), || "a pop after the end".into())?;
    let e = q.push(&[0, 0]).unwrap_err().to_string();
    check(e.contains("after its work was over"), || {
        format!("push after the end: {e}")
    })?;
    let mut sums = [ran, spawned, ids];
    c.allreduce_in_place(&mut sums, &kumi::Op::sum())?;
    // The same tree, serially.
    let (mut want_ran, mut want_ids, mut stack) = (0u64, 0u64, vec![(0u64, 1u64)]);
    while let Some((d, id)) = stack.pop() {
        want_ran += 1;
        want_ids = want_ids.wrapping_add(id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        if d < 9 {
            stack.extend((0..1 + id % 3).map(|k| (d + 1, id * 4 + k)));
        }
    }
    check(
        want_ran > 1000 && sums == [want_ran, want_ran, want_ids],
        || format!("tasks: ran/spawned/ids {sums:?}, want {want_ran} tasks, ids {want_ids}"),
    )
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
        "stencil" => stencil(&w),
        "histogram" => histogram(&w),
        "handoff" => handoff(&w),
        "in_call" => in_call(&w),
        "tasks" => tasks(&w),
        m => universe.abort(
            2,
            &format!(
                "dsm: unknown mode {m} (primitives, deadlock, killed, scale, stencil, \
                 histogram, handoff, in_call, tasks)"
            ),
        ),
    };
    if let Err(e) = r {
        universe.abort(1, &format!("dsm {mode} on rank {}: {e}", w.rank()));
    }
    if w.rank() == 0 {
        println!("dsm: {mode} passed on {} ranks", w.size());
    }
}
