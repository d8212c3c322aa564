//! Asynchronous progress: one rank computes for 2 s without calling kumi while
//! the others need it, and they must not wait for it to finish.
//!
//! - `combine`: every other rank calls `fetch_add` on 16 counters (owned by
//!   every rank in turn, so the computing rank owns some and forwards for
//!   others), at arrival levels 0 and 1;
//! - `coll`: the computing rank starts `iallreduce` and `ibarrier`, then
//!   computes; the others call blocking `allreduce` and `barrier`;
//! - `rendezvous`: the computing rank posts a 4 MiB receive, then computes;
//!   rank 0 sends it (a rendezvous: the receiver must answer clear-to-send).
//!
//! - `testloop`: as `rendezvous`, but rank 0 starts the send and tests it
//!   between slices of 100 us of computation instead of waiting in kumi:
//!   a rank that only tests must still get the computing rank served;
//! - `quiet`: rank 1 posts a receive from rank 0, then both compute for
//!   300 ms, and only then does rank 0 send: nobody waits on rank 1 while it
//!   computes, so its progress thread must not wake (it sleeps until a rank
//!   that waits rings it). Rank 1 counts its thread's context switches over
//!   the computation and fails if there were more than a handful.
//!
//! Rank 0 prints `progress: <mode> others done in <ms> ms while rank 1
//! computed 2000 ms` and fails unless that is under half the computation,
//! or, given `stall` (to show the test can fail: `KUMI_PROGRESS=off`), over it.
//! After finalize, every rank checks that its progress thread has ended
//! (without the join in finalize this fails: the thread is still winding down).
//!
//! `kumi run -n 3 target/release/progress combine|coll|rendezvous|testloop [stall]`
//! (`quiet`: `-n 2`)

use kumi::{Arrival, Comm, Error, Op};
use kumi_tests::compute;
use std::time::{Duration, Instant};

const SLEEPER: usize = 1;
const COMPUTE: Duration = Duration::from_millis(2000);
const COUNTERS: usize = 16;
const ROUNDS: usize = 10;

fn fail(m: String) -> Error {
    Error::Protocol(m)
}

/// Runs `others` on every rank but the sleeper, which computes instead (after
/// `before`, and then runs `after`). Returns the slowest other rank's time.
fn run(
    w: &Comm,
    others: impl FnOnce() -> Result<(), Error>,
    sleeper: impl FnOnce(&dyn Fn()) -> Result<(), Error>,
) -> Result<Duration, Error> {
    w.barrier()?;
    let t = Instant::now();
    if w.rank() == SLEEPER {
        sleeper(&|| {
            compute(COMPUTE);
        })?;
    } else {
        others()?;
    }
    let mine = t.elapsed();
    let mut all = vec![0u64; w.size()];
    w.allgather(&[mine.as_micros() as u64], &mut all)?;
    let slowest = all
        .iter()
        .enumerate()
        .filter(|&(r, _)| r != SLEEPER)
        .map(|(_, &us)| us)
        .max()
        .unwrap_or(0);
    Ok(Duration::from_micros(slowest))
}

fn combine(w: &Comm) -> Result<Duration, Error> {
    let c = w.combiner()?;
    let names: Vec<String> = (0..COUNTERS).map(|i| format!("counter{i}")).collect();
    let took = run(
        w,
        || {
            for round in 0..ROUNDS {
                let arrival = if round % 2 == 0 {
                    Arrival::Never
                } else {
                    Arrival::Attach
                };
                for n in &names {
                    c.fetch_add(n, 1, arrival)?;
                }
            }
            Ok(())
        },
        |work| {
            work();
            Ok(())
        },
    )?;
    c.barrier()?;
    let want = ((w.size() - 1) * ROUNDS) as i64;
    for n in &names {
        let v = c.read(n)?;
        if v != want {
            return Err(fail(format!("{n}: final value {v}, want {want}")));
        }
    }
    Ok(took)
}

fn coll(w: &Comm) -> Result<Duration, Error> {
    let me = w.rank() as i64;
    let p = w.size() as i64;
    let want = p * (p - 1) / 2;
    let sum = Op::sum();
    let took = run(
        w,
        || {
            let mut v = [me];
            w.allreduce_in_place(&mut v, &sum)?;
            if v[0] != want {
                return Err(fail(format!("allreduce gave {}, want {want}", v[0])));
            }
            w.barrier()
        },
        |work| {
            let r = w.iallreduce(vec![me], &sum)?;
            let b = w.ibarrier()?;
            work();
            let v = r.wait()?;
            b.wait()?;
            if v != [want] {
                return Err(fail(format!("iallreduce gave {v:?}, want {want}")));
            }
            Ok(())
        },
    )?;
    Ok(took)
}

/// `tested`: rank 0 starts the send and tests it between slices of 100 us
/// of computation instead of sending in one blocking call.
fn rendezvous(w: &Comm, tested: bool) -> Result<Duration, Error> {
    const LEN: usize = 4 << 20;
    let took = run(
        w,
        || {
            if w.rank() != 0 {
                return Ok(());
            }
            let buf: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
            if !tested {
                return w.send(&buf, SLEEPER as i32, 5);
            }
            kumi::scope(|s| {
                let mut r = w.isend(s, &buf, SLEEPER as i32, 5)?;
                while !r.test()? {
                    compute(Duration::from_micros(100));
                }
                Ok(())
            })
        },
        |work| {
            let mut buf = vec![0u8; LEN];
            kumi::scope(|s| {
                let r = w.irecv(s, &mut buf, 0, 5)?;
                work();
                r.wait().map(|_| ())
            })?;
            if let Some(i) = (0..LEN).find(|&i| buf[i] != (i % 251) as u8) {
                return Err(fail(format!("byte {i} of the 4 MiB message is wrong")));
            }
            Ok(())
        },
    )?;
    Ok(took)
}

/// Context switches (voluntary and not) of this process's progress
/// thread so far, from `/proc/self/task/<tid>/status`.
fn progress_thread_switches() -> Result<u64, Error> {
    // A thread names itself when it first runs, which on busy cores can be
    // a while after it was made: look for up to a second.
    for _ in 0..100 {
        for t in std::fs::read_dir("/proc/self/task").map_err(Error::Io)? {
            let dir = t.map_err(Error::Io)?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim() != "kumi-progress" {
                continue;
            }
            let status = std::fs::read_to_string(dir.join("status")).map_err(Error::Io)?;
            return Ok(status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(fail("no progress thread in this process".into()))
}

fn quiet(w: &Comm) -> Result<(), Error> {
    const QUIET: Duration = Duration::from_millis(300);
    const MOST: u64 = 5;
    let mut buf = [0u64; 4];
    w.barrier()?;
    match w.rank() {
        0 => {
            compute(QUIET);
            w.send(&[7u64; 4], SLEEPER as i32, 9)?;
        }
        SLEEPER => {
            kumi::scope(|s| {
                let r = w.irecv(s, &mut buf, 0, 9)?;
                let before = progress_thread_switches()?;
                compute(QUIET);
                let woke = progress_thread_switches()? - before;
                println!("progress: quiet: the thread switched {woke} times in {QUIET:?}");
                if woke > MOST {
                    return Err(fail(format!(
                        "the progress thread woke {woke} times while nobody waited (at most {MOST})"
                    )));
                }
                r.wait().map(|_| ())
            })?;
            if buf != [7; 4] {
                return Err(fail(format!("received {buf:?}")));
            }
            println!("progress: quiet passed");
        }
        _ => {}
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("combine");
    let stall = args.get(2).map(String::as_str) == Some("stall");
    let u = kumi::init()?;
    let w = u.world();
    if w.size() <= SLEEPER {
        return Err(fail("progress needs at least 2 ranks".into()));
    }
    if mode == "quiet" {
        quiet(&w)?;
        return u.finalize();
    }
    let took = match mode {
        "combine" => combine(&w)?,
        "coll" => coll(&w)?,
        "rendezvous" => rendezvous(&w, false)?,
        "testloop" => rendezvous(&w, true)?,
        m => return Err(fail(format!("unknown mode {m:?}"))),
    };
    if w.rank() == 0 {
        let ms = took.as_millis();
        println!(
            "progress: {mode} others done in {ms} ms while rank {SLEEPER} computed {} ms",
            COMPUTE.as_millis()
        );
        let half = COMPUTE / 2;
        if stall && took < half {
            return Err(fail(format!(
                "expected the others to stall for the computation, they took {ms} ms"
            )));
        }
        if !stall && took >= half {
            return Err(fail(format!(
                "the others waited {ms} ms for a computing rank (more than half its 2 s)"
            )));
        }
        println!("progress: {mode} passed");
    }
    u.finalize()?;
    // Finalize waits for the progress thread to end: the engine, and with it
    // the transports' last words, must end on this thread, not be dropped by
    // that one while this one leaves `main`.
    // A joined thread can still be listed for a moment (the kernel wakes the
    // joiner before it has taken the thread out of /proc), so look for up to
    // a second; one still running after finalize stays there.
    let count = || -> Result<usize, Error> {
        Ok(std::fs::read_dir("/proc/self/task")
            .map_err(Error::Io)?
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim() == "kumi-progress")
            .count())
    };
    let mut progress_threads = count()?;
    for _ in 0..100 {
        if progress_threads == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        progress_threads = count()?;
    }
    if progress_threads > 0 {
        return Err(fail(format!(
            "{progress_threads} progress thread(s) still running after finalize"
        )));
    }
    Ok(())
}
