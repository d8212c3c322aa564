//! Knight's tour counting, as DSE did it: the search tree of open tours from
//! every start square is expanded serially to a fixed depth, and the subtrees
//! below are handed out to ranks through a task pool.
//!
//! The pool is a FIFO of subtree indices fed by one shared counter: a rank takes
//! the next chunk with a fetch-and-add through kumi's combining service
//! (requests in flight together attach to one trip to the counter's owner).
//! The owner answers between its own subtrees, so chunks are kept small. Counts per start square are
//! summed and checked against a serial search on rank 0 (boards up to 5x5) and
//! against the known totals (1728 directed open tours on 5x5, 6,637,920 on 6x6).

use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::{Arrival, Comm};
use std::time::Instant;

/// Known number of directed open knight's tours (all starts) by board side.
pub fn known_total(n: usize) -> Option<u64> {
    match n {
        1 => Some(1),
        2..=4 => Some(0),
        5 => Some(1728),
        6 => Some(6_637_920),
        _ => None,
    }
}

struct Board {
    n: usize,
    moves: Vec<Vec<usize>>,
}

impl Board {
    fn new(n: usize) -> Board {
        let mut moves = vec![Vec::new(); n * n];
        for (sq, m) in moves.iter_mut().enumerate() {
            let (r, c) = ((sq / n) as isize, (sq % n) as isize);
            for (dr, dc) in [
                (1, 2),
                (2, 1),
                (2, -1),
                (1, -2),
                (-1, -2),
                (-2, -1),
                (-2, 1),
                (-1, 2),
            ] {
                let (rr, cc) = (r + dr, c + dc);
                if rr >= 0 && cc >= 0 && (rr as usize) < n && (cc as usize) < n {
                    m.push(rr as usize * n + cc as usize);
                }
            }
        }
        Board { n, moves }
    }

    /// Number of complete tours extending `path` (visited marks its squares).
    /// `poll` runs every 4096 nodes: it lets kumi serve other ranks' requests
    /// (the task counter's owner is also a worker).
    fn count(
        &self,
        visited: &mut [bool],
        at: usize,
        depth: usize,
        nodes: &mut u64,
        poll: &mut dyn FnMut(),
    ) -> u64 {
        *nodes += 1;
        if nodes.is_multiple_of(4096) {
            poll();
        }
        if depth == self.n * self.n {
            return 1;
        }
        let mut total = 0;
        for &next in &self.moves[at] {
            if !visited[next] {
                visited[next] = true;
                total += self.count(visited, next, depth + 1, nodes, poll);
                visited[next] = false;
            }
        }
        total
    }

    /// All paths of `depth` squares (or complete tours shorter than that) from
    /// every start, in a fixed order: the task list.
    fn prefixes(&self, depth: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        let mut visited = vec![false; self.n * self.n];
        for s in 0..self.n * self.n {
            path.push(s as u8);
            visited[s] = true;
            self.expand(&mut path, &mut visited, depth, &mut out);
            visited[s] = false;
            path.pop();
        }
        out
    }

    fn expand(
        &self,
        path: &mut Vec<u8>,
        visited: &mut [bool],
        depth: usize,
        out: &mut Vec<Vec<u8>>,
    ) {
        if path.len() == depth || path.len() == self.n * self.n {
            out.push(path.clone());
            return;
        }
        let at = *path.last().expect("nonempty") as usize;
        for &next in &self.moves[at] {
            if !visited[next] {
                visited[next] = true;
                path.push(next as u8);
                self.expand(path, visited, depth, out);
                path.pop();
                visited[next] = false;
            }
        }
    }

    fn count_task(&self, path: &[u8], poll: &mut dyn FnMut()) -> u64 {
        let mut visited = vec![false; self.n * self.n];
        for &s in path {
            visited[s as usize] = true;
        }
        self.count(
            &mut visited,
            *path.last().expect("nonempty") as usize,
            path.len(),
            &mut 0,
            poll,
        )
    }

    fn serial(&self) -> Vec<u64> {
        (0..self.n * self.n)
            .map(|s| {
                let mut v = vec![false; self.n * self.n];
                v[s] = true;
                self.count(&mut v, s, 1, &mut 0, &mut || {})
            })
            .collect()
    }
}

/// Counts tours on an n x n board with subtrees cut at `depth` squares.
pub fn run(w: &Comm, n: usize, depth: usize, progress: &dyn Fn(usize, usize, &str)) -> Outcome {
    if !(1..=8).contains(&n) {
        return Err(Failure::Usage(format!(
            "knights: board side {n} must be 1..8"
        )));
    }
    let depth = depth.clamp(1, n * n);
    let (me, p) = (w.rank(), w.size());
    let board = Board::new(n);
    progress(0, 2, &format!("{n}x{n}, depth {depth}"));
    let tasks = board.prefixes(depth);
    let chunk = (tasks.len() / (64 * p)).clamp(1, 16);
    // Any kumi call drives progress; a probe for a tag nobody sends is the cheapest.
    let mut poll = || {
        let _ = w.iprobe(kumi::ANY_SOURCE, 49);
    };
    let mut counts = vec![0u64; n * n];
    let comb = w.combiner()?;
    comb.reset("knights-next-subtree")?;
    w.barrier()?;
    let t = Instant::now();
    // The task pool: a FIFO of subtree indices; each rank takes the next
    // chunk with a combining fetch-and-add on one shared counter.
    loop {
        let lo = comb.fetch_add("knights-next-subtree", chunk as i64, Arrival::Attach)? as usize;
        if lo >= tasks.len() {
            break;
        }
        for task in &tasks[lo..(lo + chunk).min(tasks.len())] {
            counts[task[0] as usize] += board.count_task(task, &mut poll);
        }
    }
    xfer::allreduce(w, &mut counts, |a, b| a + b)?;
    let secs = xfer::max(w, t.elapsed().as_secs_f64())?;
    progress(1, 2, "check");
    let total: u64 = counts.iter().sum();
    let mut serial_secs = f64::NAN;
    if me == 0 {
        if let Some(k) = known_total(n) {
            if total != k {
                return Err(Failure::check(
                    "knights total",
                    format!("{total} open tours on {n}x{n}, known {k}"),
                ));
            }
        }
        if n <= 5 {
            let t = Instant::now();
            let want = board.serial();
            serial_secs = t.elapsed().as_secs_f64();
            if let Some(s) = (0..n * n).find(|&s| want[s] != counts[s]) {
                return Err(Failure::check(
                    "knights count vs serial",
                    format!(
                        "start square {s}: {} tours, serial search {}",
                        counts[s], want[s]
                    ),
                ));
            }
        }
    }
    progress(2, 2, "done");
    let mut f = Figure::new("knights", p, n * n, "seconds", secs)
        .with_num("tours", total as f64)
        .with_num("depth", depth as f64)
        .with_num("subtrees", tasks.len() as f64)
        .with_str("check", "PASSED");
    if serial_secs.is_finite() {
        f = f
            .with_num("serial_seconds", serial_secs)
            .with_num("speedup", serial_secs / secs);
    }
    Ok(vec![f])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_by_five_has_1728_tours_and_prefixes_partition_them() {
        let b = Board::new(5);
        assert_eq!(b.serial().iter().sum::<u64>(), 1728);
        let split: u64 = b
            .prefixes(6)
            .iter()
            .map(|t| b.count_task(t, &mut || {}))
            .sum();
        assert_eq!(split, 1728);
    }
}
