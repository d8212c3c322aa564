//! The collective steps the suite's kernels need, in the shapes they need them.
//!
//! Sums, maxima and broadcasts are kumi's own collectives ([`Comm::allreduce_in_place`],
//! [`Comm::bcast`]), so the kernels measure what a user's program gets. The
//! vector-of-vectors gathers and the personalized all-to-all (sizes known only
//! to the sender) and the reduction with an arbitrary closure are written here
//! with point-to-point calls: a binomial tree or p-1 pairwise steps, which is
//! what matters at the suite's rank counts. Tags above 32000 are reserved for
//! these steps; the kernels use tags below it.

use bytemuck::Pod;
use kumi::{scope, Comm, Result};

const T_REDUCE: i32 = 32001;
const T_BCAST: i32 = 32002;
const T_GATHER: i32 = 32003;
const T_ALLTOALL: i32 = 32004;

/// Element-wise reduction of `buf` over all ranks with `op`; every rank gets the
/// result.
pub fn allreduce<T: Pod + Copy>(w: &Comm, buf: &mut [T], op: impl Fn(T, T) -> T) -> Result<()> {
    let (p, me) = (w.size(), w.rank());
    let mut tmp = buf.to_vec();
    // Reduce to rank 0 over a binomial tree.
    let mut step = 1;
    while step < p {
        if me % (2 * step) == 0 {
            if me + step < p {
                w.recv(&mut tmp, (me + step) as i32, T_REDUCE)?;
                for (a, b) in buf.iter_mut().zip(&tmp) {
                    *a = op(*a, *b);
                }
            }
        } else {
            w.send(buf, (me - step) as i32, T_REDUCE)?;
            break;
        }
        step *= 2;
    }
    tree_bcast(w, buf, 0)
}

/// Sum over all ranks, element-wise (kumi's allreduce).
pub fn sum(w: &Comm, buf: &mut [f64]) -> Result<()> {
    w.allreduce_in_place(buf, &kumi::Op::sum())
}

/// The largest of every rank's `x` (kumi's allreduce).
pub fn max(w: &Comm, x: f64) -> Result<f64> {
    let mut b = [x];
    w.allreduce_in_place(&mut b, &kumi::Op::max())?;
    Ok(b[0])
}

/// Broadcasts `buf` from `root` (kumi's broadcast).
pub fn bcast<T: Pod>(w: &Comm, buf: &mut [T], root: usize) -> Result<()> {
    w.bcast(buf, root)
}

/// Broadcast over a binomial tree of point-to-point messages (the closing step
/// of [`allreduce`]).
fn tree_bcast<T: Pod>(w: &Comm, buf: &mut [T], root: usize) -> Result<()> {
    let (p, me) = (w.size(), w.rank());
    let rel = (me + p - root) % p;
    let mut mask = 1;
    while mask < p {
        if rel & mask != 0 {
            w.recv(buf, ((rel - mask + root) % p) as i32, T_BCAST)?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if rel + mask < p && rel & (mask - 1) == 0 && rel & mask == 0 {
            w.send(buf, ((rel + mask + root) % p) as i32, T_BCAST)?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Every rank's `mine`, in rank order, on every rank.
pub fn allgatherv<T: Pod>(w: &Comm, mine: &[T]) -> Result<Vec<Vec<T>>> {
    let (p, me) = (w.size(), w.rank());
    let mut all: Vec<Vec<T>> = vec![Vec::new(); p];
    all[me] = mine.to_vec();
    let right = ((me + 1) % p) as i32;
    let left = ((me + p - 1) % p) as i32;
    for step in 0..p.saturating_sub(1) {
        let send_idx = (me + p - step) % p;
        let recv_idx = (me + p - step - 1) % p;
        let out = all[send_idx].clone();
        let got = scope(|s| -> Result<Vec<T>> {
            let r = w.isend(s, &out, right, T_GATHER)?;
            let (v, _) = w.recv_vec::<T>(left, T_GATHER)?;
            r.wait()?;
            Ok(v)
        })?;
        all[recv_idx] = got;
    }
    Ok(all)
}

/// Every rank's `mine` on `root` (in rank order); other ranks get an empty vector.
pub fn gatherv<T: Pod>(w: &Comm, mine: &[T], root: usize) -> Result<Vec<Vec<T>>> {
    let (p, me) = (w.size(), w.rank());
    if me != root {
        w.send(mine, root as i32, T_GATHER)?;
        return Ok(Vec::new());
    }
    let mut all = vec![Vec::new(); p];
    for (r, slot) in all.iter_mut().enumerate() {
        *slot = if r == me {
            mine.to_vec()
        } else {
            w.recv_vec::<T>(r as i32, T_GATHER)?.0
        };
    }
    Ok(all)
}

/// Personalized all-to-all: `out[r]` goes to rank r; returns what each rank sent
/// here, by source. Pairwise exchange in p-1 steps.
pub fn alltoallv<T: Pod>(w: &Comm, mut out: Vec<Vec<T>>) -> Result<Vec<Vec<T>>> {
    let (p, me) = (w.size(), w.rank());
    let mut got = vec![Vec::new(); p];
    got[me] = std::mem::take(&mut out[me]);
    for k in 1..p {
        let to = (me + k) % p;
        let from = (me + p - k) % p;
        let data = std::mem::take(&mut out[to]);
        got[from] = scope(|s| -> Result<Vec<T>> {
            let r = w.isend(s, &data, to as i32, T_ALLTOALL)?;
            let (v, _) = w.recv_vec::<T>(from as i32, T_ALLTOALL)?;
            r.wait()?;
            Ok(v)
        })?;
    }
    Ok(got)
}
