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
    let mut rest = i64::from(n) / fixed;
    let free: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] == 0).collect();
    if free.is_empty() {
        return if rest == 1 {
            Ok(())
        } else {
            Err(format!("the dims multiply to {fixed}, not {n}"))
        };
    }
    let mut primes = Vec::new();
    let mut p = 2;
    while p * p <= rest {
        while rest % p == 0 {
            primes.push(p);
            rest /= p;
        }
        p += 1;
    }
    if rest > 1 {
        primes.push(rest);
    }
    let mut vals = vec![1i64; free.len()];
    for &q in primes.iter().rev() {
        let i = (0..vals.len()).min_by_key(|&i| vals[i]).unwrap_or(0);
        vals[i] *= q;
    }
    vals.sort_by(|a, b| b.cmp(a));
    for (k, &i) in free.iter().enumerate() {
        dims[i] = vals[k] as i32;
    }
    Ok(())
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
