//! Fixed-count kernels for counting instructions (`scripts/count-instructions.sh`)
//! and for A/B timing outside `kumi bench`: the same loops as
//! `crates/kumi-bench/c/probe.c` does through the MPI C ABI, so the two show
//! what the ABI adds to each message.
//!
//! `kumi run -n 2 target/release/examples/probe pingpong|rate|barrier|allreduce|gather|... [count] [size]`
//!
//! - pingpong: `count` round trips of `size` bytes (default 8, at most 1 MiB)
//!   between ranks 0 and 1;
//! - rate: `count` windows of 64 nonblocking `size`-byte sends (rank 0) and
//!   receives into one buffer (rank 1), each window acknowledged;
//! - barrier: `count` barriers on all ranks;
//! - allreduce: `count` sums of one double on all ranks (checked);
//! - allgather, iallgather: `count` allgathers of `size` bytes a rank
//!   (the nonblocking one started and waited for at once);
//! - allreduce1m: `count` in-place sums of 1 MiB of doubles (as `kumi bench
//!   coll` does);
//! - gather, gatherv, scatter, scatterv: `count` calls with blocks of `size`
//!   bytes per rank, root 0;
//! - igather_owned, ialltoall_owned: `count` calls of the Rust API's owned
//!   forms (a vector in, one back) with blocks of `size` bytes, root 0;
//! - bcast, reduce: `count` broadcasts of `size` bytes, or sums of `size / 8`
//!   doubles, to or from root 0;
//! - neighbor, ineighbor: `count` neighbourhood allgathers of `size` bytes
//!   on a periodic ring of every rank (as `kumi bench coll`'s
//!   `neighbor_allgather`; the nonblocking one started and waited for at
//!   once).
//!
//! It makes `MPI_COMM_SELF`'s split as `MPI_Init` does, so one rank of a job
//! may run this and another the C twin (a mixed job matches calls alike).
use kumi::raw;
use std::time::Instant;

fn main() -> Result<(), kumi::Error> {
    let mut args = std::env::args().skip(1);
    let kernel = args.next().unwrap_or_else(|| "pingpong".into());
    let count: usize = args
        .next()
        .map_or(20_000, |a| a.parse().expect("count: a number"));
    let size: usize = args
        .next()
        .map_or(8, |a| a.parse().expect("size: a number of bytes"));
    assert!(
        size <= 1 << 20,
        "probe: size {size} is out of range (0 to 1048576)"
    );
    let universe = kumi::init()?;
    let w = universe.world();
    let me = w.rank();
    let _self_comm = w.split(Some(me as u32), 0)?;
    if w.size() < 2 && matches!(kernel.as_str(), "pingpong" | "rate") {
        universe.abort(2, "probe pingpong|rate needs 2 ranks");
    }
    let mut buf = vec![0u8; size];
    // The rooted collectives: the root's side of all blocks, the v-forms' counts.
    let mut all = vec![0u8; size * w.size()];
    let counts = vec![size; w.size()];
    w.barrier()?;
    let t = Instant::now();
    let per = match kernel.as_str() {
        "pingpong" => {
            for _ in 0..count {
                if me == 0 {
                    w.send(&buf, 1, 2)?;
                    w.recv(&mut buf, 1, 2)?;
                } else if me == 1 {
                    w.recv(&mut buf, 0, 2)?;
                    w.send(&buf, 0, 2)?;
                }
            }
            2 * count
        }
        "rate" => {
            for _ in 0..count {
                if me == 0 {
                    kumi::scope(|s| -> Result<(), kumi::Error> {
                        let mut reqs = Vec::with_capacity(64);
                        for _ in 0..64 {
                            reqs.push(w.isend(s, &buf, 1, 3)?);
                        }
                        kumi::wait_all(reqs).map(drop)
                    })?;
                    w.recv(&mut [0u8; 0], 1, 4)?;
                } else if me == 1 {
                    let ptr = buf.as_mut_ptr();
                    let mut reqs = Vec::with_capacity(64);
                    for _ in 0..64 {
                        // SAFETY: `buf` outlives the requests, which all
                        // complete below before it is touched again; the
                        // receives may overwrite each other (never read).
                        reqs.push(unsafe { raw::irecv_contig(&w, ptr, size, 0, 3)? });
                    }
                    let mut all: Vec<&mut raw::RawRequest> = reqs.iter_mut().collect();
                    raw::wait_all(&mut all)?;
                    for mut r in reqs {
                        r.wait()?;
                    }
                    w.send(&[0u8; 0], 0, 4)?;
                }
            }
            64 * count
        }
        "barrier" => {
            for _ in 0..count {
                w.barrier()?;
            }
            count
        }
        "allreduce" => {
            let (x, mut y) = ([me as f64], [0f64]);
            let sum = kumi::Op::<f64>::sum();
            for _ in 0..count {
                w.allreduce(&x, &mut y, &sum)?;
            }
            let n = w.size() as f64;
            if y[0] != n * (n - 1.0) / 2.0 {
                universe.abort(3, &format!("allreduce gave {}", y[0]));
            }
            count
        }
        "iallreduce" => {
            let (x, mut y) = ([me as f64], [0f64]);
            let sum = kumi::Op::<f64>::sum();
            for _ in 0..count {
                kumi::scope(|s| w.iallreduce_into(s, &x, &mut y, &sum)?.wait())?;
            }
            count
        }
        "allgather" => {
            for _ in 0..count {
                w.allgather(&buf, &mut all)?;
            }
            count
        }
        "iallgather" => {
            for _ in 0..count {
                kumi::scope(|s| w.iallgather_into(s, &buf, &mut all)?.wait())?;
            }
            count
        }
        "allreduce1m" => {
            let mut big = vec![1.0f64; 1 << 17];
            let sum = kumi::Op::<f64>::sum();
            for _ in 0..count {
                w.allreduce_in_place(&mut big, &sum)?;
            }
            count
        }
        "gather" | "gatherv" | "scatter" | "scatterv" => {
            for _ in 0..count {
                match kernel.as_str() {
                    "gather" => w.gather(&buf, &mut all, 0)?,
                    "gatherv" => w.gatherv(&buf, &mut all, &counts, 0)?,
                    "scatter" => w.scatter(&all, &mut buf, 0)?,
                    _ => w.scatterv(&all, &counts, &mut buf, 0)?,
                }
            }
            count
        }
        "igather_owned" | "ialltoall_owned" => {
            // The Rust API's owned forms: a vector in, one back.
            let p = w.size();
            for _ in 0..count {
                let got = match kernel.as_str() {
                    "igather_owned" => w.igather(buf.clone(), 0)?.wait()?,
                    _ => w.ialltoall(all[..p * size].to_vec())?.wait()?,
                };
                std::hint::black_box(got);
            }
            count
        }
        "bcast" => {
            for _ in 0..count {
                w.bcast(&mut buf, 0)?;
            }
            count
        }
        "reduce" => {
            let (x, mut y) = (vec![0f64; size / 8], vec![0f64; size / 8]);
            let sum = kumi::Op::<f64>::sum();
            for _ in 0..count {
                w.reduce(&x, &mut y, &sum, 0)?;
            }
            count
        }
        "neighbor" | "ineighbor" => {
            let p = w.size();
            let (left, right) = ((me + p - 1) % p, (me + 1) % p);
            let (sends, recvs) = ([(left, 0), (right, 0)], [(left, 0), (right, 1)]);
            let mut two = vec![0u8; 2 * size];
            for _ in 0..count {
                if kernel == "neighbor" {
                    w.neighbor_exchange(&buf, &[size], &sends, &mut two, &[size, size], &recvs)?;
                } else {
                    kumi::scope(|s| {
                        w.ineighbor_exchange_into(
                            s,
                            &buf,
                            &[size],
                            &sends,
                            &mut two,
                            &[size, size],
                            &recvs,
                        )?
                        .wait()
                    })?;
                }
            }
            count
        }
        other => {
            eprintln!(
                "probe: unknown kernel {other:?}: pingpong, rate, barrier, allreduce, iallreduce, allreduce1m, gather, gatherv, scatter, scatterv, igather_owned, ialltoall_owned, bcast, reduce, neighbor or ineighbor"
            );
            universe.abort(2, "unknown kernel");
        }
    };
    if me == 0 {
        let us = t.elapsed().as_secs_f64() * 1e6 / per as f64;
        println!("rust {kernel}: {us:.3} us per message (or call)");
    }
    Ok(())
}
