//! Knight's tour counting, as DSE did it: the search tree of open tours is
//! expanded serially to a fixed depth, and the subtrees below are handed out
//! to ranks through a task pool. Boards up to 5x5 count the tours from every
//! start square; from 6x6 on, from one corner, which is DSE's problem (6x6,
//! depth 8: 7254 subtrees, 524,486 tours).
//!
//! Two versions run in one job, alternating, so their times pair up:
//! - **messages**: the pool is a counter of subtree indices; a rank takes the
//!   next chunk with a combining fetch-and-add (requests in flight together
//!   attach to one trip to the counter's owner), and the counts are summed
//!   with an allreduce;
//! - **dsm**: DSE's program: rank 0 pushes every subtree into a
//!   [`TaskQueue`], every rank pops until the queue says the work is over,
//!   and each rank's counts go into its part of a global [`Array`] that rank
//!   0 reads.
//!
//! The owner of the pool also searches; it answers between its own nodes
//! (a kumi call every 1024 nodes, and the progress thread). Counts per start
//! square are checked against a serial search (boards up to 5x5) and against
//! the known totals.

use crate::dsm::Model;
use crate::figure::{Failure, Figure, Outcome};
use crate::xfer;
use kumi::dsm::{Array, TaskQueue};
use kumi::{Arrival, Comm};
use std::time::Instant;

/// Known number of directed open knight's tours by board side, from every
/// start square up to 5x5, from a corner from 6x6 on (what [`run`] counts).
pub fn known_total(n: usize) -> Option<u64> {
    match n {
        1 => Some(1),
        2..=4 => Some(0),
        5 => Some(1728),
        6 => Some(524_486),
        _ => None,
    }
}

/// A task-queue item: a subtree's path, its length first.
type Item = [u8; 24];

/// Longest prefix an [`Item`] carries, so the deepest expansion.
const MAX_DEPTH: usize = std::mem::size_of::<Item>() - 1;

fn item(path: &[u8]) -> Item {
    let mut it = [0u8; 24];
    it[0] = path.len() as u8;
    it[1..=path.len()].copy_from_slice(path);
    it
}

fn path(it: &Item, squares: usize) -> Result<&[u8], Failure> {
    let len = it[0] as usize;
    match it.get(1..=len) {
        Some(p) if len >= 1 && p.iter().all(|&s| (s as usize) < squares) => Ok(p),
        _ => Err(Failure::check(
            "knights task item",
            format!("an item popped from the task queue is not a path: {it:?}"),
        )),
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
    /// `poll` runs every 1024 nodes: it lets kumi serve other ranks' requests
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
        if nodes.is_multiple_of(1024) {
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

    /// The start squares counted: all of them up to 5x5, a corner above.
    fn starts(&self) -> std::ops::Range<usize> {
        if self.n <= 5 {
            0..self.n * self.n
        } else {
            0..1
        }
    }

    /// All paths of `depth` squares (or complete tours shorter than that)
    /// from every start, in a fixed order: the task list.
    fn prefixes(&self, depth: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        let mut visited = vec![false; self.n * self.n];
        for s in self.starts() {
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
        self.starts()
            .map(|s| {
                let mut v = vec![false; self.n * self.n];
                v[s] = true;
                self.count(&mut v, s, 1, &mut 0, &mut || {})
            })
            .collect()
    }
}

/// What both versions share: the board, the task list, and a poll that lets
/// kumi serve other ranks while this one searches (a probe for a tag nobody
/// sends is the cheapest kumi call).
struct Job<'a> {
    w: &'a Comm,
    board: Board,
    tasks: Vec<Vec<u8>>,
}

impl Job<'_> {
    fn poll(&self) -> impl FnMut() + '_ {
        || {
            let _ = self.w.iprobe(kumi::ANY_SOURCE, 49);
        }
    }

    /// The messages version: tours per start square, on every rank.
    fn by_messages(&self, comb: &kumi::Combiner) -> Result<Vec<u64>, Failure> {
        let (w, n) = (self.w, self.board.n);
        let chunk = (self.tasks.len() / (64 * w.size())).clamp(1, 16);
        let mut counts = vec![0u64; n * n];
        let mut poll = self.poll();
        loop {
            let lo = comb.fetch_add(COUNTER, chunk as i64, Arrival::Attach)? as usize;
            if lo >= self.tasks.len() {
                break;
            }
            for task in &self.tasks[lo..(lo + chunk).min(self.tasks.len())] {
                counts[task[0] as usize] += self.board.count_task(task, &mut poll);
            }
        }
        xfer::allreduce(w, &mut counts, |a, b| a + b)?;
        Ok(counts)
    }

    /// The DSM version: tours per start square, on rank 0 (empty elsewhere).
    fn by_dsm(&self, queue: &TaskQueue<Item>, sums: &Array<u64>) -> Result<Vec<u64>, Failure> {
        let (w, n) = (self.w, self.board.n);
        let squares = n * n;
        if w.rank() == 0 {
            for task in &self.tasks {
                queue.push(&item(task))?;
            }
        }
        let mut counts = vec![0u64; squares];
        let mut poll = self.poll();
        while let Some(it) = queue.pop()? {
            let p = path(&it, squares)?;
            counts[p[0] as usize] += self.board.count_task(p, &mut poll);
        }
        sums.write(w.rank() * squares, &counts)?;
        sums.barrier()?;
        if w.rank() != 0 {
            return Ok(Vec::new());
        }
        let mut all = vec![0u64; squares * w.size()];
        sums.read(0, &mut all)?;
        Ok((0..squares)
            .map(|s| all.iter().skip(s).step_by(squares).sum())
            .collect())
    }
}

/// The combining counter the messages version's pool draws from.
const COUNTER: &str = "knights-next-subtree";

/// Counts tours on an n x n board with subtrees cut at `depth` squares, by
/// both versions, `reps` times each, alternating which goes first.
pub fn run(
    w: &Comm,
    n: usize,
    depth: usize,
    reps: usize,
    progress: &dyn Fn(usize, usize, &str),
) -> Outcome {
    if !(1..=8).contains(&n) {
        return Err(Failure::Usage(format!(
            "knights: board side {n} must be 1..8"
        )));
    }
    let depth = depth.clamp(1, (n * n).min(MAX_DEPTH));
    let (me, p) = (w.rank(), w.size());
    let reps = reps.max(1);
    let board = Board::new(n);
    let tasks = board.prefixes(depth);
    let job = Job { w, board, tasks };
    let comb = w.combiner()?;
    let sums: Array<u64> = Array::owned(w, n * n)?;
    // Rank 0's serial search (small boards), for the check and the
    // speed-up, timed in every round like the two versions (the machine's
    // speed drifts).
    let mut serial = None;
    let mut serial_secs = Vec::new();
    let mut secs = [Vec::new(), Vec::new()];
    for rep in 0..reps {
        if me == 0 && n <= 5 {
            progress(3 * rep, 3 * reps, "serial search");
            let t = Instant::now();
            serial = Some(job.board.serial());
            serial_secs.push(t.elapsed().as_secs_f64());
        }
        let order = Model::order(rep);
        for (k, model) in order.into_iter().enumerate() {
            progress(
                3 * rep + 1 + k,
                3 * reps,
                &format!("{n}x{n}, depth {depth}, {}", model.name()),
            );
            // A queue serves one search: it ends when the work is over.
            let queue = match model {
                Model::Messages => {
                    comb.reset(COUNTER)?;
                    None
                }
                Model::Dsm => Some(TaskQueue::<Item>::new(w)?),
            };
            w.barrier()?;
            let t = Instant::now();
            let counts = match &queue {
                None => job.by_messages(&comb)?,
                Some(q) => job.by_dsm(q, &sums)?,
            };
            secs[model as usize].push(xfer::max(w, t.elapsed().as_secs_f64())?);
            if me == 0 {
                check(&job.board, &counts, serial.as_deref(), model)?;
            }
        }
    }
    progress(3 * reps, 3 * reps, "done");
    let serial_secs = (!serial_secs.is_empty()).then(|| crate::median(serial_secs));
    let tours = known_total(n).map_or(f64::NAN, |t| t as f64);
    let mut out = Vec::new();
    for model in [Model::Messages, Model::Dsm] {
        let s = crate::median(secs[model as usize].clone());
        let mut f = Figure::new("knights", p, n * n, "seconds", s)
            .with_str("model", model.name())
            .with_num("depth", depth as f64)
            .with_num("subtrees", job.tasks.len() as f64)
            .with_str("check", "PASSED");
        if tours.is_finite() {
            f = f.with_num("tours", tours);
        }
        if let Some(ss) = serial_secs {
            f = f.with_num("serial_seconds", ss).with_num("speedup", ss / s);
        }
        out.push(f);
    }
    let ratios: Vec<f64> = secs[1].iter().zip(&secs[0]).map(|(d, m)| d / m).collect();
    out.push(
        Figure::new("knights", p, n * n, "ratio", crate::median(ratios))
            .with_str("model", "dsm/messages")
            .with_num("reps", reps as f64)
            .with_str("check", "PASSED"),
    );
    Ok(out)
}

/// Rank 0's check of one version's counts: the known total, and the serial
/// search's count per start where there is one.
fn check(
    board: &Board,
    counts: &[u64],
    serial: Option<&[u64]>,
    model: Model,
) -> Result<(), Failure> {
    let n = board.n;
    let total: u64 = counts.iter().sum();
    if let Some(k) = known_total(n) {
        if total != k {
            return Err(Failure::check(
                "knights total",
                format!(
                    "{total} open tours on {n}x{n} ({}), known {k}",
                    model.name()
                ),
            ));
        }
    }
    if let Some(want) = serial {
        if let Some(s) = board.starts().find(|&s| want[s] != counts[s]) {
            return Err(Failure::check(
                "knights count vs serial",
                format!(
                    "start square {s}: {} tours ({}), serial search {}",
                    counts[s],
                    model.name(),
                    want[s]
                ),
            ));
        }
    }
    Ok(())
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
