//! Where the elements of a global array live: its distribution over ranks
//! (DSE's global arrays, `SEEDS.md` §3), as pure arithmetic.
//!
//! A [`Layout`] maps a global index to its owner and its index there, and
//! cuts a range of global indices into runs that are consecutive on one
//! owner ([`Layout::runs`]): one copy or one message per run, never one per
//! element.

/// How a global array's elements are dealt to ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dist {
    /// Consecutive blocks, as even as they can be: the first `len % ranks`
    /// ranks hold one element more.
    Block,
    /// Blocks of this many elements dealt round-robin (1: element by
    /// element).
    Cyclic(usize),
    /// Rank `r` holds `counts[r]` consecutive elements, in rank order (the
    /// owners choose).
    Counts(Vec<usize>),
}

/// A run of consecutive global elements held by one rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// The owner.
    pub rank: usize,
    /// Index of the run's first element in the owner's part.
    pub local: usize,
    /// Elements in the run.
    pub len: usize,
    /// Offset of the run's first element from the start of the range asked.
    pub at: usize,
}

/// A distribution of `len` elements over `ranks` ranks, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    len: usize,
    ranks: usize,
    dist: Dist,
    /// Block and counts: where each rank's elements start, and `len` last.
    starts: Vec<usize>,
}

impl Layout {
    /// The layout of `len` elements dealt to `ranks` ranks as `dist` says;
    /// an error says what does not fit.
    pub fn new(len: usize, ranks: usize, dist: Dist) -> Result<Layout, String> {
        if ranks == 0 {
            return Err("a distribution over no ranks".into());
        }
        let counts = match &dist {
            Dist::Block => (0..ranks)
                .map(|r| len / ranks + usize::from(r < len % ranks))
                .collect(),
            Dist::Cyclic(0) => return Err("cyclic blocks of 0 elements".into()),
            Dist::Cyclic(_) => Vec::new(),
            Dist::Counts(c) => {
                if c.len() != ranks {
                    return Err(format!("{} counts for {ranks} ranks", c.len()));
                }
                let sum = c.iter().try_fold(0usize, |a, &n| a.checked_add(n));
                if sum != Some(len) {
                    return Err(format!(
                        "counts that add up to {} for {len} elements",
                        sum.map_or("more than fits".into(), |s| s.to_string())
                    ));
                }
                c.clone()
            }
        };
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut at = 0;
        for c in counts {
            starts.push(at);
            at += c;
        }
        starts.push(at);
        Ok(Layout {
            len,
            ranks,
            dist,
            starts,
        })
    }

    /// Elements in the array.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The distribution.
    pub fn dist(&self) -> &Dist {
        &self.dist
    }

    /// Elements rank `r` holds.
    pub fn local_len(&self, r: usize) -> usize {
        match self.dist {
            Dist::Cyclic(b) => {
                let (full, rest) = (self.len / b, self.len % b);
                let (rounds, extra) = (full / self.ranks, full % self.ranks);
                rounds * b
                    + match r.cmp(&extra) {
                        std::cmp::Ordering::Less => b,
                        std::cmp::Ordering::Equal => rest,
                        std::cmp::Ordering::Greater => 0,
                    }
            }
            _ => self.starts[r + 1] - self.starts[r],
        }
    }

    /// Where global element `i` (< len) lives: its owner and its index there.
    pub fn locate(&self, i: usize) -> (usize, usize) {
        debug_assert!(i < self.len);
        match self.dist {
            Dist::Cyclic(b) => {
                let k = i / b;
                (k % self.ranks, (k / self.ranks) * b + i % b)
            }
            // The last rank whose part starts at or before `i` (ranks that
            // hold nothing start where the next one does).
            _ => {
                let r = self.starts[..self.ranks].partition_point(|&s| s <= i) - 1;
                (r, i - self.starts[r])
            }
        }
    }

    /// The global index of element `local` (< [`Layout::local_len`]) of
    /// rank `r`'s part: the inverse of [`Layout::locate`].
    pub fn global(&self, r: usize, local: usize) -> usize {
        debug_assert!(local < self.local_len(r));
        match self.dist {
            Dist::Cyclic(b) => ((local / b) * self.ranks + r) * b + local % b,
            _ => self.starts[r] + local,
        }
    }

    /// The global elements `[start, start + count)` as runs on one owner
    /// each, in order; an error if the range leaves the array.
    pub fn runs(&self, start: usize, count: usize) -> Result<Vec<Run>, String> {
        let end = start
            .checked_add(count)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                format!(
                    "elements {start}..{} outside an array of {}",
                    start.saturating_add(count),
                    self.len
                )
            })?;
        let mut runs = Vec::new();
        let mut i = start;
        while i < end {
            let (rank, local) = self.locate(i);
            let left = match self.dist {
                Dist::Cyclic(b) => b - i % b,
                _ => self.starts[rank + 1] - i,
            };
            let len = left.min(end - i);
            // Blocks dealt round-robin to one rank follow each other there.
            if let Some(last) = runs
                .last_mut()
                .filter(|l: &&mut Run| l.rank == rank && l.local + l.len == local)
            {
                last.len += len;
                i += len;
                continue;
            }
            runs.push(Run {
                rank,
                local,
                len,
                at: i - start,
            });
            i += len;
        }
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every element's owner and local index, by dealing them out one by one.
    fn naive(len: usize, ranks: usize, dist: &Dist) -> Vec<(usize, usize)> {
        let mut next = vec![0; ranks];
        let mut owner = |r: usize| {
            next[r] += 1;
            (r, next[r] - 1)
        };
        match dist {
            Dist::Block => {
                let mut out = Vec::new();
                for r in 0..ranks {
                    for _ in 0..len / ranks + usize::from(r < len % ranks) {
                        out.push(owner(r));
                    }
                }
                out
            }
            Dist::Cyclic(b) => (0..len).map(|i| owner((i / b) % ranks)).collect(),
            Dist::Counts(c) => (0..ranks)
                .flat_map(|r| std::iter::repeat_n(r, c[r]))
                .map(owner)
                .collect(),
        }
    }

    fn dist() -> impl Strategy<Value = (usize, usize, Dist)> {
        (1usize..7, 0usize..40).prop_flat_map(|(ranks, len)| {
            // Counts from ranks - 1 cut points in 0..=len.
            let counts = proptest::collection::vec(0..=len, ranks - 1).prop_map(move |mut cuts| {
                cuts.sort_unstable();
                cuts.push(len);
                let mut at = 0;
                cuts.into_iter()
                    .map(|c| {
                        let n = c - at;
                        at = c;
                        n
                    })
                    .collect::<Vec<_>>()
            });
            prop_oneof![
                Just(Dist::Block).boxed(),
                (1usize..6).prop_map(Dist::Cyclic).boxed(),
                counts.prop_map(Dist::Counts).boxed(),
            ]
            .prop_map(move |d| (ranks, len, d))
        })
    }

    proptest! {
        #[test]
        fn locate_runs_and_local_len_agree_with_dealing_out((ranks, len, d) in dist(),
                                                            a in 0usize..41, b in 0usize..41) {
            let l = Layout::new(len, ranks, d.clone()).unwrap();
            let want = naive(len, ranks, &d);
            for (i, &w) in want.iter().enumerate() {
                prop_assert_eq!(l.locate(i), w);
                prop_assert_eq!(l.global(w.0, w.1), i);
            }
            for r in 0..ranks {
                prop_assert_eq!(l.local_len(r), want.iter().filter(|w| w.0 == r).count());
            }
            let (start, count) = (a.min(len), b.min(len - a.min(len)));
            let runs = l.runs(start, count).unwrap();
            let mut i = start;
            for run in &runs {
                prop_assert!(run.len > 0);
                prop_assert_eq!(run.at, i - start);
                for k in 0..run.len {
                    prop_assert_eq!(want[i + k], (run.rank, run.local + k));
                }
                i += run.len;
            }
            prop_assert_eq!(i, start + count);
            // Maximal: two runs in a row are never one.
            for w in runs.windows(2) {
                prop_assert!(w[0].rank != w[1].rank || w[0].local + w[0].len != w[1].local);
            }
        }
    }

    #[test]
    fn what_does_not_fit_is_named() {
        let e = |len, ranks, d| Layout::new(len, ranks, d).unwrap_err();
        assert!(e(4, 0, Dist::Block).contains("no ranks"));
        assert!(e(4, 2, Dist::Cyclic(0)).contains("0 elements"));
        assert!(e(4, 2, Dist::Counts(vec![4])).contains("1 counts for 2 ranks"));
        assert!(e(4, 2, Dist::Counts(vec![1, 2])).contains("add up to 3 for 4"));
        let l = Layout::new(4, 2, Dist::Block).unwrap();
        assert!(l
            .runs(3, 2)
            .unwrap_err()
            .contains("elements 3..5 outside an array of 4"));
        assert!(l.runs(usize::MAX, 2).is_err());
    }
}
