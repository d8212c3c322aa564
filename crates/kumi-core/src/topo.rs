//! Process topologies, as pure functions: Cartesian grids (coordinates, ranks,
//! shifts, sub-grids, neighbours in MPI's order), `MPI_Dims_create`'s balanced
//! factorization and MPI-1 graph adjacency. The MPI library and the Rust API
//! share them (`kumi::topo`); what a communicator carries is a [`Cart`].
//!
//! Ranks are row-major over the grid, as MPI defines them: the last
//! dimension varies fastest.

/// A Cartesian grid: its extent and periodicity per dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cart {
    /// Extent of each dimension (each positive).
    pub dims: Vec<i32>,
    /// Whether each dimension wraps around.
    pub periods: Vec<bool>,
}

impl Cart {
    /// A grid of `dims` (each positive) and `periods` (one per dimension).
    pub fn new(dims: Vec<i32>, periods: Vec<bool>) -> Result<Cart, String> {
        if let Some(d) = dims.iter().find(|&&d| d <= 0) {
            return Err(format!(
                "dims {dims:?} has an entry that is not positive ({d})"
            ));
        }
        if dims.len() != periods.len() {
            return Err(format!("{} dims but {} periods", dims.len(), periods.len()));
        }
        Ok(Cart { dims, periods })
    }

    /// Number of cells (ranks) of the grid.
    pub fn cells(&self) -> i64 {
        self.dims.iter().map(|&d| i64::from(d)).product()
    }

    /// The coordinates of `rank`.
    pub fn coords(&self, mut rank: usize) -> Vec<i32> {
        let mut c = vec![0; self.dims.len()];
        for d in (0..self.dims.len()).rev() {
            let n = self.dims[d].max(1) as usize;
            c[d] = (rank % n) as i32;
            rank /= n;
        }
        c
    }

    /// The rank at `coords` (wrapped along periodic dimensions); `None` off
    /// the edge of a non-periodic one (`MPI_PROC_NULL`).
    pub fn rank(&self, coords: &[i32]) -> Option<i32> {
        let mut r: i64 = 0;
        for (d, &x) in coords.iter().enumerate() {
            let n = i64::from(self.dims[d]);
            let mut x = i64::from(x);
            if x < 0 || x >= n {
                if !self.periods[d] {
                    return None;
                }
                x = x.rem_euclid(n);
            }
            r = r * n + x;
        }
        i32::try_from(r).ok()
    }

    /// `MPI_Cart_shift`: the ranks `disp` steps before and after `rank` along
    /// `direction` (source, destination); `None` off a non-periodic edge.
    pub fn shift(&self, rank: usize, direction: usize, disp: i32) -> (Option<i32>, Option<i32>) {
        let me = self.coords(rank);
        let at = |delta: i32| {
            let mut x = me.clone();
            x[direction] = x[direction].saturating_add(delta);
            self.rank(&x)
        };
        (at(disp.saturating_neg()), at(disp))
    }

    /// `rank`'s neighbours for the neighbourhood collectives, in MPI's order:
    /// for each dimension the source side (coordinate - 1), then the
    /// destination side (+ 1); `None` off a non-periodic edge.
    pub fn neighbors(&self, rank: usize) -> Vec<Option<usize>> {
        let mut nb = Vec::with_capacity(2 * self.dims.len());
        for d in 0..self.dims.len() {
            let (lo, hi) = self.shift(rank, d, 1);
            nb.push(lo.map(|r| r as usize));
            nb.push(hi.map(|r| r as usize));
        }
        nb
    }

    /// `MPI_Cart_sub`: the grid of the dimensions `keep` selects, and where
    /// `rank` goes: the color (its coordinates along the dropped dimensions)
    /// and the key (along the kept ones) that split the communicator.
    pub fn sub(&self, rank: usize, keep: &[bool]) -> (Cart, u32, i32) {
        let me = self.coords(rank);
        let (mut color, mut key) = (0i64, 0i64);
        for d in 0..self.dims.len() {
            let x = i64::from(me[d]);
            if keep[d] {
                key = key * i64::from(self.dims[d]) + x;
            } else {
                color = color * i64::from(self.dims[d]) + x;
            }
        }
        let kept =
            |v: &[i32]| -> Vec<i32> { (0..v.len()).filter(|&d| keep[d]).map(|d| v[d]).collect() };
        let sub = Cart {
            dims: kept(&self.dims),
            periods: (0..self.dims.len())
                .filter(|&d| keep[d])
                .map(|d| self.periods[d])
                .collect(),
        };
        (sub, color as u32, key as i32)
    }
}

/// `MPI_Dims_create`: fills the zero entries of `dims` with a balanced
/// factorization of `n` over them (largest first), given the fixed ones.
pub fn dims_create(n: i32, dims: &mut [i32]) -> Result<(), String> {
    if n < 1 {
        return Err(format!("nnodes {n} is not positive"));
    }
    if dims.iter().any(|&d| d < 0) {
        return Err("dims entries must be non-negative".into());
    }
    let fixed: i64 = dims
        .iter()
        .filter(|&&d| d > 0)
        .map(|&d| i64::from(d))
        .product();
    if i64::from(n) % fixed != 0 {
        return Err(format!(
            "{n} nodes cannot be split over the fixed dims (product {fixed})"
        ));
    }
    let rest = i64::from(n) / fixed;
    let free: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] == 0).collect();
    if free.is_empty() {
        return if rest == 1 {
            Ok(())
        } else {
            Err(format!("the dims multiply to {fixed}, not {n}"))
        };
    }
    let vals = balanced(rest, free.len());
    for (k, &i) in free.iter().enumerate() {
        dims[i] = vals[k] as i32;
    }
    Ok(())
}

/// The factorization of `n` into `k` factors, largest first, that are "as
/// close to each other as possible" (MPI 4.1 section 8.5.2). The standard
/// leaves the measure open; this is the one of Träff and Lübbe
/// ("Specification Guideline Violations by MPI_Dims_create", EuroMPI'15),
/// which MPICH adopted: the smallest difference between the largest and the
/// smallest factor, and of those the one whose factors are largest read
/// from the smallest up (360 over 3: 10x6x6, not 9x8x5). Programs and test
/// suites written against MPICH expect its answers.
fn balanced(n: i64, k: usize) -> Vec<i64> {
    let mut divs: Vec<i64> = (1..)
        .take_while(|d| d * d <= n)
        .filter(|d| n % d == 0)
        .flat_map(|d| [d, n / d])
        .collect();
    divs.sort_unstable_by(|a, b| b.cmp(a));
    divs.dedup();
    /// Whether factorization `a` is closer than `b`.
    fn closer(a: &[i64], b: &[i64]) -> bool {
        let spread = |v: &[i64]| v[0] - v[v.len() - 1];
        match spread(a).cmp(&spread(b)) {
            std::cmp::Ordering::Equal => a.iter().rev().gt(b.iter().rev()),
            o => o.is_lt(),
        }
    }
    // Once the largest factor is chosen, the best rest is the one largest
    // read from its smallest factor up (its smallest decides the spread,
    // the others the tie), whatever the largest was: so the best `k`
    // factors of `rest` none above `most` depend on those three alone, and
    // are worked out once each: the states are few (divisors x dimensions
    // x bounds), where the tuples are exponentially many.
    struct Tails<'a> {
        divs: &'a [i64],
        memo: std::collections::HashMap<(i64, usize, i64), Option<Vec<i64>>>,
    }
    impl Tails<'_> {
        /// The best `k` factors of `rest`, none above `most`, largest first.
        fn best(&mut self, rest: i64, k: usize, most: i64) -> Option<Vec<i64>> {
            if k == 1 {
                return (rest <= most).then(|| vec![rest]);
            }
            if let Some(t) = self.memo.get(&(rest, k, most)) {
                return t.clone();
            }
            let mut best: Option<Vec<i64>> = None;
            for i in 0..self.divs.len() {
                let d = self.divs[i];
                // Non-increasing, dividing, and large enough for the rest.
                let enough = i128::from(d)
                    .checked_pow(k as u32)
                    .is_none_or(|p| p >= i128::from(rest));
                if !enough {
                    break;
                }
                if d > most || rest % d != 0 {
                    continue;
                }
                if let Some(tail) = self.best(rest / d, k - 1, d) {
                    let better = best
                        .as_ref()
                        .is_none_or(|b| tail.iter().rev().chain([&d]).gt(b.iter().rev()));
                    if better {
                        let mut v = Vec::with_capacity(k);
                        v.push(d);
                        v.extend(tail);
                        best = Some(v);
                    }
                }
            }
            self.memo.insert((rest, k, most), best.clone());
            best
        }
    }
    if k == 1 {
        return vec![n];
    }
    let mut tails = Tails {
        divs: &divs,
        memo: std::collections::HashMap::new(),
    };
    let mut best: Option<Vec<i64>> = None;
    for &d in &divs {
        if i128::from(d)
            .checked_pow(k as u32)
            .is_some_and(|p| p < i128::from(n))
        {
            break;
        }
        if let Some(tail) = tails.best(n / d, k - 1, d) {
            let mut v = vec![d];
            v.extend(tail);
            if best.as_ref().is_none_or(|b| closer(&v, b)) {
                best = Some(v);
            }
        }
    }
    best.expect("n = n * 1 * ... * 1 is always a candidate")
}

/// Node `r`'s neighbours in an MPI-1 graph (`index`, `edges` as
/// `MPI_Graph_create` takes them): its edges, in the order given.
pub fn graph_neighbors(index: &[i32], edges: &[i32], r: usize) -> Vec<usize> {
    let lo = if r == 0 { 0 } else { index[r - 1] as usize };
    edges[lo..index[r] as usize]
        .iter()
        .map(|&e| e as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every non-increasing factorization of `n` into `k` factors.
    fn all_factorizations(
        n: i64,
        k: usize,
        most: i64,
        cur: &mut Vec<i64>,
        out: &mut Vec<Vec<i64>>,
    ) {
        if k == 0 {
            if n == 1 {
                out.push(cur.clone());
            }
            return;
        }
        for d in (1..=most.min(n)).rev() {
            if n % d == 0 {
                cur.push(d);
                all_factorizations(n / d, k - 1, d, cur, out);
                cur.pop();
            }
        }
    }

    #[test]
    fn the_bounded_search_finds_what_trying_everything_finds() {
        for n in 1..=400 {
            for k in 1..=5 {
                let mut all = Vec::new();
                all_factorizations(n, k, n, &mut Vec::new(), &mut all);
                // Smallest spread; of those, the largest read from the
                // smallest factor up.
                let spread = |v: &[i64]| v[0] - v[v.len() - 1];
                let up = |v: &[i64]| v.iter().rev().copied().collect::<Vec<i64>>();
                let best = all
                    .iter()
                    .min_by_key(|v| (spread(v), std::cmp::Reverse(up(v))))
                    .unwrap();
                assert_eq!(&balanced(n, k), best, "{n} over {k}");
            }
        }
    }

    #[test]
    fn dims_create_balances() {
        let mut d = [0, 0];
        dims_create(12, &mut d).unwrap();
        assert_eq!(d, [4, 3]);
        let mut d = [0, 3, 0];
        dims_create(24, &mut d).unwrap();
        assert_eq!(d, [4, 3, 2]);
        let mut d = [0, 0, 0];
        dims_create(7, &mut d).unwrap();
        assert_eq!(d, [7, 1, 1]);
        // As close as possible, not the greedy 12x6 (MPICH gives these).
        for (n, k, want) in [
            (72, 2, &[9, 8][..]),
            (72, 3, &[6, 4, 3]),
            (100, 3, &[5, 5, 4]),
            (360, 4, &[6, 5, 4, 3]),
            (360, 3, &[10, 6, 6]),
            (5040, 3, &[21, 16, 15]),
            (20, 4, &[5, 2, 2, 1]),
            (1 << 20, 3, &[128, 128, 64]),
        ] {
            let mut d = vec![0; k];
            dims_create(n, &mut d).unwrap();
            assert_eq!(d, want, "{n} over {k}");
        }
        // Many dimensions of a number of many divisors (MPICH's
        // topo/dims5 asks such; trying every tuple is exponential).
        let mut d = vec![0; 15];
        dims_create(995328, &mut d).unwrap();
        assert_eq!(d, [4, 4, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2]);
        let mut d = [0; 12];
        dims_create(i32::MAX - 1, &mut d).unwrap();
        assert_eq!(
            d.iter().map(|&x| i64::from(x)).product::<i64>(),
            i64::from(i32::MAX - 1)
        );
        assert!(dims_create(10, &mut [3, 0]).is_err());
        assert!(dims_create(0, &mut [0]).is_err());
        assert!(dims_create(6, &mut [2, 2]).is_err());
    }

    #[test]
    fn cart_rank_and_coords() {
        let c = Cart::new(vec![2, 3], vec![false, true]).unwrap();
        assert_eq!(c.coords(4), vec![1, 1]);
        assert_eq!(c.rank(&[1, 1]), Some(4));
        assert_eq!(c.rank(&[1, -1]), Some(5));
        assert_eq!(c.rank(&[2, 0]), None);
        // Every rank's coordinates lead back to it.
        for r in 0..6 {
            assert_eq!(c.rank(&c.coords(r)), Some(r as i32));
        }
        assert!(Cart::new(vec![2, 0], vec![false, false]).is_err());
    }

    #[test]
    fn shifts_neighbours_and_sub_grids() {
        let c = Cart::new(vec![2, 3], vec![false, true]).unwrap();
        // Rank 0 = (0, 0): off the non-periodic edge above, wrapped along
        // the periodic dimension.
        assert_eq!(c.shift(0, 0, 1), (None, Some(3)));
        assert_eq!(c.shift(0, 1, 1), (Some(2), Some(1)));
        assert_eq!(c.neighbors(0), vec![None, Some(3), Some(2), Some(1)]);
        // Keeping the second dimension: rows of 3, split by the first.
        let (sub, color, key) = c.sub(4, &[false, true]);
        assert_eq!(
            (sub.dims, sub.periods, color, key),
            (vec![3], vec![true], 1, 1)
        );
    }
}
