//! Derived datatypes: the layout of one element as a list of byte runs.
//!
//! MPI describes non-contiguous data with type constructors (vector, indexed,
//! struct, subarray...). kumi flattens every type, when it is built, into its
//! *typemap*: the byte runs `(offset, length)` one element covers, in order,
//! adjacent runs merged, together with its lower bound and extent. Packing `count`
//! elements walks that list `count` times, shifted by the extent each time. That
//! is one representation for all constructors and one loop for pack and unpack;
//! the price is memory proportional to the number of runs, which for the layouts
//! stencil codes use (a face of a block, a column) is small.
//!
//! A typemap is kept as *unit* runs and repetition levels around them
//! (`reps`: counts and byte strides, outermost first) where that says the
//! same thing: always for equal runs evenly spaced (a vector's blocks, a
//! column, which pack and unpack then copy in one strided loop), and for a
//! regular repetition whose flat list would pass [`FLAT_RUNS`] runs (a
//! contiguous or vector type of billions of strided elements, which MPI 4's
//! large counts make ordinary), so the typemap stays as small as the
//! constructors that made it; [`Datatype::walk`] visits either form in
//! typemap order. An irregular layout (indexed blocks,
//! structures of several parts) is always flat, and refused beyond
//! [`MAX_RUNS`] runs with an error naming the number, rather than exhausting
//! memory.
//!
//! Sending uses the typemap directly: a type whose single run starts at offset 0
//! and fills its extent is contiguous and goes to the engine as is; any other is
//! packed into a staging buffer first (and unpacked from one on receipt).

use crate::error::{Error, Result};
use std::ops::ControlFlow;
use std::sync::Arc;

mod pack;

/// The most runs a regular repetition is flattened to; beyond, it keeps its
/// unit and repetition levels (module doc). A guess at "small": 1 MiB of runs.
pub const FLAT_RUNS: usize = 1 << 16;

#[cfg(not(test))]
fn flat_runs_limit() -> usize {
    FLAT_RUNS
}

// Tests compare both forms of one layout: they lower the limit.
#[cfg(test)]
thread_local!(static FLAT_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(FLAT_RUNS) });

#[cfg(test)]
fn flat_runs_limit() -> usize {
    FLAT_LIMIT.with(|l| l.get())
}

/// The most runs a flat typemap may have (16 bytes each: 2 GiB).
pub const MAX_RUNS: usize = 1 << 27;

/// The basic element a type is made of, when it is made of one kind only (used
/// for `get_elements` and by reductions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Basic {
    /// Size of one basic element, in bytes.
    pub size: usize,
    /// An opaque tag naming the basic type (the ABI's handle, say); types built
    /// from different tags are mixed.
    pub tag: u32,
}

/// How one dimension of an array is distributed over the processes of its
/// grid dimension ([`Datatype::darray`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Contiguous blocks, one per process, of the given size (`None`: the
    /// size divided evenly, rounded up).
    Block(Option<usize>),
    /// Blocks of the given size (`None`: 1) dealt out round-robin.
    Cyclic(Option<usize>),
    /// Not distributed (the grid dimension must be 1).
    None,
}

/// A datatype: the typemap of one element plus bounds. Cheap to clone, and
/// `Send`: a reduction's function, which may run on the progress thread,
/// may hold the type it works on (the C library lends it to the program's
/// function for its queries).
#[derive(Clone, Debug)]
pub struct Datatype {
    inner: Shared,
}

/// A datatype's layout: shared by a reference count, or never freed (a
/// predefined type, [`Datatype::permanent`]). Cloning a permanent one is a
/// copy; a count's locked increment on the path of a small collective waits
/// for the caller's last stores to leave its core.
#[derive(Debug)]
enum Shared {
    Counted(Arc<Layout>),
    Permanent(&'static Layout),
}

impl Clone for Shared {
    #[inline]
    fn clone(&self) -> Shared {
        match self {
            Shared::Counted(a) => Shared::Counted(a.clone()),
            Shared::Permanent(l) => Shared::Permanent(l),
        }
    }
}

impl std::ops::Deref for Shared {
    type Target = Layout;
    #[inline]
    fn deref(&self) -> &Layout {
        match self {
            Shared::Counted(a) => a,
            Shared::Permanent(l) => l,
        }
    }
}

#[derive(Clone, Debug)]
struct Layout {
    /// Byte runs of one element, relative to its start, merged where adjacent;
    /// of a compact layout, the runs of its unit (at repetition index 0).
    runs: Vec<(isize, usize)>,
    /// Repetition levels around `runs`, outermost first: `(count, byte
    /// stride)`, each count at least 2. Empty for a flat typemap.
    reps: Vec<(usize, isize)>,
    /// Runs of one element's flat typemap: `runs.len()` times the counts.
    nruns: usize,
    /// Total bytes of data in one element.
    size: usize,
    lb: isize,
    ub: isize,
    true_lb: isize,
    true_ub: isize,
    /// Basic elements per element, and their kind if there is only one kind.
    elements: usize,
    basic: Option<Basic>,
    /// Of a type of several kinds: the sizes of its basic elements in the
    /// order they pack, run-length coded (`(size, how many)`), for counting
    /// the elements of a part of one (`MPI_Get_elements`); `None` for one
    /// kind, or past [`MAX_SIGNATURE`] runs.
    sig: Option<Arc<[(usize, usize)]>>,
    /// The alignment C gives the data (the largest of its basic parts'):
    /// a structure's extent is rounded up to a multiple of it.
    align: usize,
}

/// The alignment C gives a basic type of `size` bytes (x86-64, and every
/// common 64-bit ABI): its size, for the power-of-two sizes up to 16.
/// The longest signature kept (runs of one basic size): beyond it, a
/// partial element of a mixed type counts as no whole number of elements.
const MAX_SIGNATURE: usize = 1024;

/// Appends `n` basic elements of `size` bytes to a signature; `false` when
/// it grows past [`MAX_SIGNATURE`].
fn sig_push(sig: &mut Vec<(usize, usize)>, size: usize, n: usize) -> bool {
    match sig.last_mut() {
        Some((s, k)) if *s == size => *k += n,
        _ if n == 0 => {}
        _ => sig.push((size, n)),
    }
    sig.len() <= MAX_SIGNATURE
}

fn natural_align(size: usize) -> usize {
    if size.is_power_of_two() {
        size.min(16)
    } else {
        1
    }
}

/// What a constructor passes on besides the typemap: the alignment
/// ([`Layout::align`]), from its old type or as given.
#[derive(Clone, Copy)]
struct Shape {
    align: usize,
}

/// Every copy of `runs` that `levels` make (outermost first), from `shift`,
/// each run as the series `inner` (count, stride).
fn series<F>(
    levels: &[(usize, isize)],
    shift: isize,
    runs: &[(isize, usize)],
    inner: (usize, isize),
    f: &mut F,
) -> ControlFlow<()>
where
    F: FnMut(isize, usize, usize, isize) -> ControlFlow<()>,
{
    match levels.split_first() {
        None => {
            for &(o, l) in runs {
                f(shift + o, l, inner.0, inner.1)?;
            }
        }
        Some((&(n, stride), rest)) => {
            for j in 0..n {
                series(rest, shift + j as isize * stride, runs, inner, f)?;
            }
        }
    }
    ControlFlow::Continue(())
}

/// The blocks of elements a constructor lays out.
enum Blocks {
    /// `count` blocks of `blocklen` elements, block `j` at byte `base + j * stride`.
    Regular {
        base: isize,
        count: usize,
        blocklen: usize,
        stride: isize,
    },
    /// Blocks `(byte offset, elements)`, in typemap order.
    List(Vec<(isize, usize)>),
}

impl Blocks {
    /// A list of one block with data is the regular series of one.
    fn regular(self) -> Blocks {
        match self {
            Blocks::List(v) => match v.iter().filter(|b| b.1 > 0).collect::<Vec<_>>()[..] {
                [&(base, blocklen)] => Blocks::Regular {
                    base,
                    count: 1,
                    blocklen,
                    stride: 0,
                },
                _ => Blocks::List(v),
            },
            r => r,
        }
    }

    /// Calls `f(byte offset, elements)` for each block, in order.
    fn each(&self, f: &mut impl FnMut(isize, usize)) {
        match *self {
            Blocks::Regular {
                base,
                count,
                blocklen,
                stride,
            } => (0..count).for_each(|j| f(base + j as isize * stride, blocklen)),
            Blocks::List(ref v) => v.iter().for_each(|&(b, n)| f(b, n)),
        }
    }
}

/// A typemap before its runs are merged: unit runs and repetition levels
/// ([`Layout::reps`]; none for a flat one).
struct Map {
    runs: Vec<(isize, usize)>,
    reps: Vec<(usize, isize)>,
}

impl Map {
    fn flat(runs: Vec<(isize, usize)>) -> Map {
        Map {
            runs,
            reps: Vec::new(),
        }
    }
}

fn too_many(runs: usize) -> Error {
    Error::InvalidArgument {
        arg: "datatype",
        value: runs as i64,
        allowed: format!(
            "a layout of at most {MAX_RUNS} separate runs of bytes (this one has {runs}; \
             only a regular repetition, such as a contiguous or vector type, may have more)"
        ),
    }
}

fn overflow() -> Error {
    Error::InvalidArgument {
        arg: "datatype",
        value: 0,
        allowed: "a layout whose size and offsets fit in the address space".into(),
    }
}

fn neg(arg: &'static str, v: i64) -> Error {
    Error::InvalidArgument {
        arg,
        value: v,
        allowed: "a non-negative number".into(),
    }
}

impl Datatype {
    /// A basic type of `size` bytes (`MPI_INT`, `MPI_DOUBLE`...). `tag` names it.
    pub fn basic(size: usize, tag: u32) -> Datatype {
        Self::basic_aligned(size, natural_align(size), tag)
    }

    /// A basic type of `size` bytes that C aligns to `align` bytes (a
    /// complex number: its part's alignment, `double _Complex` 8).
    pub fn basic_aligned(size: usize, align: usize, tag: u32) -> Datatype {
        Self::from_map(
            Map::flat(if size > 0 { vec![(0, size)] } else { vec![] }),
            Some((0, size as isize)),
            1,
            Some(Basic { size, tag }),
            None,
            Shape {
                align: align.max(1),
            },
        )
    }

    /// A basic pair type with holes, such as `MPI_DOUBLE_INT` (`{double; int}`):
    /// runs `(offset, size)` with the given extent.
    /// Each run is one basic element; the pair aligns as its largest.
    pub fn basic_runs(runs: &[(isize, usize)], extent: isize) -> Datatype {
        let align = runs.iter().map(|r| natural_align(r.1)).max().unwrap_or(1);
        Self::from_map(
            Map::flat(runs.to_vec()),
            Some((0, extent)),
            runs.len(),
            None,
            Some(runs.iter().map(|r| (r.1, 1)).collect()),
            Shape { align },
        )
    }

    fn shape(&self) -> Shape {
        Shape {
            align: self.inner.align,
        }
    }

    /// The type of the typemap `map`. Callers check that its data size fits
    /// (`repeat`, `create_struct`); the sums here saturate.
    fn from_map(
        map: Map,
        bounds: Option<(isize, isize)>,
        elements: usize,
        basic: Option<Basic>,
        sig: Option<Arc<[(usize, usize)]>>,
        shape: Shape,
    ) -> Datatype {
        let Map { runs, mut reps } = map;
        let mut merged: Vec<(isize, usize)> = Vec::with_capacity(runs.len());
        for (off, len) in runs {
            if len == 0 {
                continue;
            }
            match merged.last_mut() {
                Some((o, l)) if *o + *l as isize == off => *l += len,
                _ => merged.push((off, len)),
            }
        }
        // Equal runs evenly spaced (a vector's blocks, a column) are one run
        // and a level: pack and unpack then copy them in one strided loop.
        if let [(o0, l0), (o1, _), ..] = merged[..] {
            let stride = o1 - o0;
            let even = merged
                .windows(2)
                .all(|w| w[1].1 == l0 && w[1].0 - w[0].0 == stride);
            if even && stride != 0 {
                reps.push((merged.len(), stride));
                merged.truncate(1);
            }
        }
        reps.retain(|&(n, _)| n > 1);
        // A level whose copies abut the next inner level's copies merges
        // with it; a level whose copies abut its unit's one run is a longer run.
        let mut k = 1;
        while k < reps.len() {
            let ((n1, s1), (n2, s2)) = (reps[k - 1], reps[k]);
            match (n2.checked_mul(n1), (n2 as isize).checked_mul(s2)) {
                (Some(n), Some(span)) if s1 == span => {
                    reps[k - 1] = (n, s2);
                    reps.remove(k);
                }
                _ => k += 1,
            }
        }
        while let (Some(&(n, stride)), [(_, l)]) = (reps.last(), merged.as_mut_slice()) {
            match l.checked_mul(n) {
                Some(all) if stride == *l as isize => {
                    *l = all;
                    reps.pop();
                }
                _ => break,
            }
        }
        let copies = reps.iter().fold(1usize, |a, &(n, _)| a.saturating_mul(n));
        let unit: usize = merged.iter().fold(0usize, |a, r| a.saturating_add(r.1));
        let size = unit.saturating_mul(copies);
        let mut true_lb = merged.iter().map(|r| r.0).min().unwrap_or(0);
        let mut true_ub = merged.iter().map(|r| r.0 + r.1 as isize).max().unwrap_or(0);
        for &(n, stride) in &reps {
            // The last copy is the farthest, up or down.
            let far = (n as isize - 1).saturating_mul(stride);
            if far < 0 {
                true_lb = true_lb.saturating_add(far);
            } else {
                true_ub = true_ub.saturating_add(far);
            }
        }
        let (lb, ub) = bounds.unwrap_or((true_lb, true_ub));
        Datatype {
            inner: Shared::Counted(Arc::new(Layout {
                nruns: merged.len().saturating_mul(copies),
                runs: merged,
                reps,
                size,
                lb,
                ub,
                true_lb,
                true_ub,
                elements,
                sig: if basic.is_some() { None } else { sig },
                basic,
                align: shape.align,
            })),
        }
    }

    /// Bytes of data in one element.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// Lower bound of one element.
    pub fn lb(&self) -> isize {
        self.inner.lb
    }

    /// Extent: the stride between consecutive elements.
    pub fn extent(&self) -> isize {
        self.inner.ub - self.inner.lb
    }

    /// Lower bound of the bytes actually covered.
    pub fn true_lb(&self) -> isize {
        self.inner.true_lb
    }

    /// Span of the bytes actually covered.
    pub fn true_extent(&self) -> isize {
        self.inner.true_ub - self.inner.true_lb
    }

    /// The basic element this type is made of, if only one kind.
    pub fn basic_element(&self) -> Option<Basic> {
        self.inner.basic
    }

    /// Number of basic elements in one element.
    pub fn elements(&self) -> usize {
        self.inner.elements
    }

    /// The basic elements' sizes of one element in packing order
    /// (run-length coded), if known.
    fn signature(&self) -> Option<Vec<(usize, usize)>> {
        match (self.inner.basic, &self.inner.sig) {
            (Some(b), _) => Some(vec![(b.size, self.inner.elements)]),
            (None, Some(s)) => Some(s.to_vec()),
            (None, None) => None,
        }
    }

    /// The signature of `n` elements of this type, if it stays short.
    fn signature_times(&self, n: usize) -> Option<Arc<[(usize, usize)]>> {
        if self.inner.basic.is_some() {
            return None;
        }
        let one = self.signature()?;
        if let [(size, k)] = one[..] {
            return Some(vec![(size, k.checked_mul(n)?)].into());
        }
        // Each repetition adds a run at least: the loop ends early when the
        // signature grows too long.
        let mut all = Vec::new();
        for _ in 0..n {
            for &(size, k) in &one {
                if !sig_push(&mut all, size, k) {
                    return None;
                }
            }
        }
        Some(all.into())
    }

    /// Where the data starts if consecutive elements abut (the layout is one
    /// run exactly as long as the extent), so `count` elements are one block:
    /// pack and unpack then copy once instead of once per element.
    fn dense_offset(&self) -> Option<isize> {
        match (self.inner.runs.as_slice(), self.inner.reps.is_empty()) {
            ([(o, l)], true) if *l as isize == self.extent() => Some(*o),
            _ => None,
        }
    }

    /// Whether `count` elements are one run of bytes starting at the buffer.
    pub fn is_contiguous(&self) -> bool {
        match (self.inner.runs.as_slice(), self.inner.reps.is_empty()) {
            ([], _) => true,
            ([(0, len)], true) => *len as isize == self.extent() && self.inner.lb == 0,
            _ => false,
        }
    }

    /// The byte runs of one element, when its typemap is kept flat (`None`
    /// for a compact one: use [`Datatype::walk`], or [`Datatype::flat_runs`]).
    pub fn runs(&self) -> Option<&[(isize, usize)]> {
        self.inner.reps.is_empty().then_some(&self.inner.runs[..])
    }

    /// The number of runs in one element's typemap, flat or not.
    pub fn run_count(&self) -> usize {
        self.inner.nruns
    }

    /// The byte runs of one element as a list, built from a compact typemap
    /// if need be; an error beyond [`MAX_RUNS`].
    pub fn flat_runs(&self) -> Result<Vec<(isize, usize)>> {
        if let Some(r) = self.runs() {
            return Ok(r.to_vec());
        }
        if self.inner.nruns > MAX_RUNS {
            return Err(too_many(self.inner.nruns));
        }
        let mut v = Vec::with_capacity(self.inner.nruns);
        let _ = self.walk(1, |o, l| {
            v.push((o, l));
            ControlFlow::Continue(())
        });
        Ok(v)
    }

    /// Visits the byte runs of `count` elements in typemap order, offsets
    /// relative to the first element's start, until `f` breaks. Runs that
    /// abut in a series come as one (`count` elements of a dense type are
    /// one run, not `count`: callers pay per run, not per element).
    pub fn walk(
        &self,
        count: usize,
        mut f: impl FnMut(isize, usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.walk_series(count, |o, l, n, stride| {
            if n > 1 && stride == l as isize {
                return f(o, l * n);
            }
            for j in 0..n {
                f(o + j as isize * stride, l)?;
            }
            ControlFlow::Continue(())
        })
    }

    /// [`Datatype::walk`] a series at a time: `f(offset, len, n, stride)` is
    /// `n` runs of `len` bytes, `stride` apart. A type of one run per copy
    /// gives its innermost repetition (or its elements) as one series, so
    /// pack and unpack run a tight loop over a strided layout.
    pub fn walk_series(
        &self,
        count: usize,
        mut f: impl FnMut(isize, usize, usize, isize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let (ext, runs, reps) = (self.extent(), &self.inner.runs[..], &self.inner.reps[..]);
        match (runs, reps.split_last()) {
            ([(o, l)], None) => f(*o, *l, count, ext),
            ([_], Some((&inner, outer))) => {
                for i in 0..count {
                    series(outer, i as isize * ext, runs, inner, &mut f)?;
                }
                ControlFlow::Continue(())
            }
            _ => {
                for i in 0..count {
                    series(reps, i as isize * ext, runs, (1, 0), &mut f)?;
                }
                ControlFlow::Continue(())
            }
        }
    }

    fn repeat(&self, blocks: Blocks, bounds: Option<(isize, isize)>) -> Result<Datatype> {
        let blocks = blocks.regular();
        let ext = self.extent();
        // With a negative extent the last element of a block is its lowest.
        let span = |base: isize, blocklen: usize| -> Result<(isize, isize)> {
            let len = isize::try_from(blocklen).map_err(|_| overflow())?;
            let last = len
                .checked_mul(ext)
                .and_then(|s| s.checked_sub(ext))
                .and_then(|s| base.checked_add(s))
                .ok_or_else(overflow)?;
            let lo = base.min(last).checked_add(self.lb());
            let hi = base
                .max(last)
                .checked_add(self.lb())
                .and_then(|h| h.checked_add(ext));
            Ok((lo.ok_or_else(overflow)?, hi.ok_or_else(overflow)?))
        };
        // The blocks' element total and extremes, and how many runs a flat
        // typemap would take.
        let (elems, nblocks, (lo, hi)) = match &blocks {
            Blocks::Regular {
                base,
                count,
                blocklen,
                stride,
            } => {
                let n = count.checked_mul(*blocklen).ok_or_else(overflow)?;
                let far = isize::try_from(count.saturating_sub(1))
                    .ok()
                    .and_then(|c| c.checked_mul(*stride))
                    .and_then(|f| base.checked_add(f))
                    .ok_or_else(overflow)?;
                let ends = if n == 0 {
                    (isize::MAX, isize::MIN)
                } else {
                    let (a, b) = (span(*base, *blocklen)?, span(far, *blocklen)?);
                    (a.0.min(b.0), a.1.max(b.1))
                };
                (n, if n == 0 { 0 } else { *count }, ends)
            }
            Blocks::List(v) => {
                let (mut n, mut k, mut ends) = (0usize, 0usize, (isize::MAX, isize::MIN));
                for &(base, blocklen) in v.iter().filter(|b| b.1 > 0) {
                    n = n.checked_add(blocklen).ok_or_else(overflow)?;
                    k += 1;
                    let (lo, hi) = span(base, blocklen)?;
                    ends = (ends.0.min(lo), ends.1.max(hi));
                }
                (n, k, ends)
            }
        };
        let elements = elems.checked_mul(self.elements()).ok_or_else(overflow)?;
        self.size().checked_mul(elems).ok_or_else(overflow)?;
        let bounds = bounds.or(Some(if lo <= hi { (lo, hi) } else { (0, 0) }));
        let dense = self.dense_offset();
        let flat = match dense {
            Some(_) => nblocks,
            None => elems.saturating_mul(self.inner.nruns),
        };
        let sig = self.signature_times(elems);
        let make = |map| {
            Self::from_map(
                map,
                bounds,
                elements,
                self.inner.basic,
                sig.clone(),
                self.shape(),
            )
        };
        // Blocks evenly spaced (or one block) of more runs than a flat list
        // should hold: the unit and its levels.
        if let (
            true,
            &Blocks::Regular {
                base,
                count,
                blocklen,
                stride,
            },
        ) = (flat > flat_runs_limit(), &blocks)
        {
            let shift = |(o, l): (isize, usize)| Ok((base.checked_add(o).ok_or_else(overflow)?, l));
            let map = match dense {
                Some(o) => Map {
                    runs: vec![shift((
                        o,
                        self.size().checked_mul(blocklen).ok_or_else(overflow)?,
                    ))?],
                    reps: vec![(count, stride)],
                },
                None => Map {
                    runs: self
                        .inner
                        .runs
                        .iter()
                        .map(|&r| shift(r))
                        .collect::<Result<_>>()?,
                    reps: [(count, stride), (blocklen, ext)]
                        .into_iter()
                        .chain(self.inner.reps.iter().copied())
                        .collect(),
                },
            };
            return Ok(make(map));
        }
        if flat > MAX_RUNS {
            return Err(too_many(flat));
        }
        let mut runs = Vec::with_capacity(flat);
        let mut push = |base: isize, blocklen: usize| {
            if let Some(o) = dense {
                // A block of a dense type is one run (MPI_Type_contiguous(2^31
                // - 1, MPI_BYTE) is one run, not two billion).
                runs.push((base + o, blocklen * self.size()));
            } else {
                let _ = self.walk(blocklen, |o, l| {
                    runs.push((base + o, l));
                    ControlFlow::Continue(())
                });
            }
        };
        blocks.each(&mut push);
        Ok(make(Map {
            runs,
            reps: Vec::new(),
        }))
    }

    /// `count` elements of `self`, one after the other.
    pub fn contiguous(&self, count: usize) -> Result<Datatype> {
        self.repeat(
            Blocks::Regular {
                base: 0,
                count: 1,
                blocklen: count,
                stride: 0,
            },
            None,
        )
    }

    /// `count` blocks of `blocklen` elements, block starts `stride` elements apart.
    pub fn vector(&self, count: usize, blocklen: usize, stride: isize) -> Result<Datatype> {
        let s = stride.checked_mul(self.extent()).ok_or_else(overflow)?;
        self.hvector(count, blocklen, s)
    }

    /// Like [`Datatype::vector`] with the stride in bytes.
    pub fn hvector(&self, count: usize, blocklen: usize, stride: isize) -> Result<Datatype> {
        self.repeat(
            Blocks::Regular {
                base: 0,
                count,
                blocklen,
                stride,
            },
            None,
        )
    }

    /// Blocks of `blocklens[i]` elements at displacements `displs[i]` elements.
    pub fn indexed(&self, blocklens: &[i64], displs: &[i64]) -> Result<Datatype> {
        let ext = self.extent() as i64;
        let d = displs
            .iter()
            .map(|&x| x.checked_mul(ext).ok_or_else(overflow))
            .collect::<Result<Vec<i64>>>()?;
        self.hindexed(blocklens, &d)
    }

    /// Blocks of `blocklens[i]` elements at byte displacements `displs[i]`.
    pub fn hindexed(&self, blocklens: &[i64], displs: &[i64]) -> Result<Datatype> {
        let mut v = Vec::with_capacity(blocklens.len());
        for (&b, &d) in blocklens.iter().zip(displs) {
            if b < 0 {
                return Err(neg("blocklength", b));
            }
            let d = isize::try_from(d).map_err(|_| overflow())?;
            v.push((d, usize::try_from(b).map_err(|_| overflow())?));
        }
        self.repeat(Blocks::List(v), None)
    }

    /// A structure: `blocklens[i]` elements of `types[i]` at byte displacement
    /// `displs[i]`. As MPI says (and C lays out an array of structures), the
    /// extent is rounded up to a multiple of the largest alignment of the
    /// parts (`{double; int}`: 12 bytes of data, extent 16). Resized parts
    /// count with their old type's alignment and are rounded around too, as
    /// MPICH 4 does (MPI 3 dropped the explicit bound markers that stopped
    /// the rounding).
    pub fn create_struct(
        blocklens: &[i64],
        displs: &[i64],
        types: &[Datatype],
    ) -> Result<Datatype> {
        let mut parts = Vec::with_capacity(types.len());
        let (mut elements, mut size, mut nruns) = (0usize, 0usize, 0usize);
        let mut basic: Option<Option<Basic>> = None;
        // The parts' signatures one after the other (while known).
        let mut sig: Option<Vec<(usize, usize)>> = Some(Vec::new());
        let (mut lo, mut hi) = (isize::MAX, isize::MIN);
        let mut align = 1;
        for ((&b, &d), t) in blocklens.iter().zip(displs).zip(types) {
            if b < 0 {
                return Err(neg("blocklength", b));
            }
            let (d, b) = (
                isize::try_from(d).map_err(|_| overflow())?,
                usize::try_from(b).map_err(|_| overflow())?,
            );
            let part = t.repeat(Blocks::List(vec![(d, b)]), None)?;
            elements = elements.checked_add(part.elements()).ok_or_else(overflow)?;
            size = size.checked_add(part.size()).ok_or_else(overflow)?;
            nruns = nruns.saturating_add(part.run_count());
            sig = sig.and_then(|mut v| {
                let all = part
                    .signature()?
                    .into_iter()
                    .all(|(size, k)| sig_push(&mut v, size, k));
                all.then_some(v)
            });
            if b > 0 {
                align = align.max(t.inner.align);
                lo = lo.min(part.lb());
                hi = hi.max(part.lb() + part.extent());
                basic = Some(match basic {
                    None => t.inner.basic,
                    Some(x) if x == t.inner.basic => x,
                    Some(_) => None,
                });
            }
            if part.run_count() > 0 {
                parts.push(part);
            }
        }
        let bounds = if lo > hi {
            (0, 0)
        } else {
            // MPI's epsilon: the smallest increment that makes the extent a
            // multiple of the alignment.
            let a = align as isize;
            (lo, lo + (hi - lo + a - 1) / a * a)
        };
        // One part with data is its typemap, compact or not; several are one
        // flat list.
        let map = match &parts[..] {
            [one] => Map {
                runs: one.inner.runs.clone(),
                reps: one.inner.reps.clone(),
            },
            _ if nruns > MAX_RUNS => return Err(too_many(nruns)),
            _ => {
                let mut runs = Vec::with_capacity(nruns);
                for p in &parts {
                    runs.extend(p.flat_runs()?);
                }
                Map::flat(runs)
            }
        };
        Ok(Self::from_map(
            map,
            Some(bounds),
            elements,
            basic.flatten(),
            sig.map(Into::into),
            Shape { align },
        ))
    }

    /// The same data with lower bound `lb` and extent `extent`.
    pub fn resized(&self, lb: isize, extent: isize) -> Datatype {
        let l = &self.inner;
        Datatype {
            inner: Shared::Counted(Arc::new(Layout {
                lb,
                ub: lb + extent,
                ..Layout::clone(l)
            })),
        }
    }

    /// The same type, never freed: for the predefined types, made once per
    /// process, so that their clones cost no locked instruction (`Shared`).
    pub fn permanent(self) -> Datatype {
        let l = match self.inner {
            Shared::Permanent(_) => return self,
            Shared::Counted(a) => Arc::unwrap_or_clone(a),
        };
        Datatype {
            inner: Shared::Permanent(Box::leak(Box::new(l))),
        }
    }

    /// The same data with MPI-1's explicit bounds: `lb` and `ub` where given
    /// (the `MPI_LB` and `MPI_UB` markers of a structure), the type's own
    /// bounds otherwise. An upper bound below the lower one gives a negative
    /// extent, as MPI-1 allows. (MPICH 4 takes the last marker of each kind
    /// and resizes the structure of the other parts the same way.)
    pub fn with_bounds(&self, lb: Option<isize>, ub: Option<isize>) -> Datatype {
        let lb = lb.unwrap_or(self.lb());
        let ub = ub.unwrap_or(self.lb() + self.extent());
        self.resized(lb, ub - lb)
    }

    /// A sub-block of an n-dimensional array of `self`: `sizes` of the whole,
    /// `subsizes` of the block, `starts` of its corner; `c_order` for row-major
    /// (C) order, otherwise column-major (Fortran). The extent is the whole array.
    pub fn subarray(
        &self,
        sizes: &[i64],
        subsizes: &[i64],
        starts: &[i64],
        c_order: bool,
    ) -> Result<Datatype> {
        let n = sizes.len();
        if subsizes.len() != n || starts.len() != n || n == 0 {
            return Err(Error::InvalidArgument {
                arg: "ndims",
                value: n as i64,
                allowed: "at least one dimension, the same number in sizes, subsizes and starts"
                    .into(),
            });
        }
        for d in 0..n {
            if sizes[d] <= 0
                || subsizes[d] <= 0
                || starts[d] < 0
                || starts[d] + subsizes[d] > sizes[d]
            {
                return Err(Error::InvalidArgument {
                    arg: "subsizes",
                    value: subsizes[d],
                    allowed: format!(
                        "in dimension {d}: size > 0, 0 < subsize, 0 <= start, start + subsize <= size ({})",
                        sizes[d]
                    ),
                });
            }
        }
        // Dimensions from the fastest-varying outwards.
        let order: Vec<usize> = if c_order {
            (0..n).rev().collect()
        } else {
            (0..n).collect()
        };
        let ext = self.extent();
        let mut t = self.contiguous(subsizes[order[0]] as usize)?;
        let mut stride = ext * sizes[order[0]] as isize;
        let mut offset = starts[order[0]] as isize * ext;
        for &d in &order[1..] {
            t = t.hvector(subsizes[d] as usize, 1, stride)?;
            offset += starts[d] as isize * stride;
            stride *= sizes[d] as isize;
        }
        let runs = t.inner.runs.iter().map(|&(o, l)| (o + offset, l)).collect();
        Ok(Self::from_map(
            Map {
                runs,
                reps: t.inner.reps.clone(),
            },
            Some((self.lb(), self.lb() + stride)),
            t.elements(),
            self.inner.basic,
            t.inner.sig.clone(),
            self.shape(),
        ))
    }

    /// This process's part of an n-dimensional array of `self` distributed
    /// over a grid of processes (MPI's `MPI_Type_create_darray`): process
    /// `rank` of `size`, grid `psizes` (row-major), each dimension of `gsizes`
    /// distributed as `distribs` says; `c_order` for a row-major array. The
    /// elements come in the array's order; the extent is the whole array.
    pub fn darray(
        &self,
        size: usize,
        rank: usize,
        gsizes: &[i64],
        distribs: &[Distribution],
        psizes: &[i64],
        c_order: bool,
    ) -> Result<Datatype> {
        let n = gsizes.len();
        let bad = |arg: &'static str, value: i64, allowed: String| Error::InvalidArgument {
            arg,
            value,
            allowed,
        };
        if n == 0 || distribs.len() != n || psizes.len() != n {
            return Err(bad(
                "ndims",
                n as i64,
                "at least one dimension, the same number in gsizes, distribs and psizes".into(),
            ));
        }
        if psizes.iter().any(|&p| p <= 0) || gsizes.iter().any(|&g| g <= 0) {
            return Err(bad("psizes", 0, "positive process and array sizes".into()));
        }
        let procs: i64 = psizes.iter().product();
        if procs != size as i64 || rank >= size {
            return Err(bad(
                "psizes",
                procs,
                format!("a grid of exactly size = {size} processes holding rank {rank}"),
            ));
        }
        // The grid is row-major whatever the array's order.
        let mut coords = vec![0i64; n];
        let mut r = rank as i64;
        for d in (0..n).rev() {
            coords[d] = r % psizes[d];
            r /= psizes[d];
        }
        // The indices each dimension owns, as runs (start, length).
        let mut owned: Vec<Vec<(i64, i64)>> = Vec::with_capacity(n);
        for d in 0..n {
            let (g, p, c) = (gsizes[d], psizes[d], coords[d]);
            let runs = match distribs[d] {
                Distribution::None => {
                    if p != 1 {
                        return Err(bad(
                            "psizes",
                            p,
                            format!("1 in dimension {d}, which is not distributed"),
                        ));
                    }
                    vec![(0, g)]
                }
                Distribution::Block(darg) => {
                    let b = darg.map_or((g + p - 1) / p, |b| b as i64);
                    if b <= 0 || b * p < g {
                        return Err(bad(
                            "darg",
                            b,
                            format!(
                                "a block size of at least {} in dimension {d} ({g} over {p})",
                                (g + p - 1) / p
                            ),
                        ));
                    }
                    let lo = (c * b).min(g);
                    vec![(lo, (lo + b).min(g) - lo)]
                }
                Distribution::Cyclic(darg) => {
                    let b = darg.map_or(1, |b| b as i64);
                    if b <= 0 {
                        return Err(bad(
                            "darg",
                            b,
                            format!("a positive block size in dimension {d}"),
                        ));
                    }
                    let mut v = Vec::new();
                    let mut lo = c * b;
                    while lo < g {
                        v.push((lo, b.min(g - lo)));
                        lo += b * p;
                    }
                    v
                }
            };
            owned.push(runs.into_iter().filter(|&(_, l)| l > 0).collect());
        }
        // Dimensions from the fastest-varying outwards, and their strides.
        let order: Vec<usize> = if c_order {
            (0..n).rev().collect()
        } else {
            (0..n).collect()
        };
        let ext = self.extent() as i64;
        let mut stride = vec![0i64; n];
        let mut s = ext;
        for &d in &order {
            stride[d] = s;
            s = s.checked_mul(gsizes[d]).ok_or_else(overflow)?;
        }
        let total = s;
        // Every combination of the slower dimensions' indices, in order, then
        // the fastest dimension's runs.
        let (fast, slow) = (order[0], &order[1..]);
        let mut blocks: Vec<i64> = Vec::new();
        let mut displs: Vec<i64> = Vec::new();
        fn walk(
            slow: &[usize],
            owned: &[Vec<(i64, i64)>],
            stride: &[i64],
            base: i64,
            out: &mut dyn FnMut(i64),
        ) {
            let Some((&d, rest)) = slow.split_last() else {
                out(base);
                return;
            };
            for &(lo, len) in &owned[d] {
                for i in lo..lo + len {
                    walk(rest, owned, stride, base + i * stride[d], out);
                }
            }
        }
        walk(slow, &owned, &stride, 0, &mut |base| {
            for &(lo, len) in &owned[fast] {
                blocks.push(len);
                displs.push(base + lo * stride[fast]);
            }
        });
        let t = self.hindexed(&blocks, &displs)?;
        Ok(Self::from_map(
            Map {
                runs: t.inner.runs.clone(),
                reps: t.inner.reps.clone(),
            },
            Some((0, total as isize)),
            t.elements(),
            self.inner.basic,
            t.inner.sig.clone(),
            self.shape(),
        ))
    }

    /// Number of basic elements in `bytes` bytes of packed data, if that is a
    /// whole number: the basic elements of a part of the last element count
    /// too (`MPI_Get_elements`), walked in packing order for a mixed type.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        if self.size() == 0 {
            return Some(0);
        }
        let whole = bytes / self.size();
        let mut rest = bytes % self.size();
        let mut n = whole * self.elements();
        if rest == 0 {
            return Some(n);
        }
        for (size, k) in self.signature()? {
            let fit = (rest / size.max(1)).min(k);
            n += fit;
            rest -= fit * size;
            if fit < k {
                break;
            }
        }
        (rest == 0).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Datatype {
        Datatype::basic(4, 1)
    }

    #[test]
    fn vector_layout_and_bounds() {
        let v = int().vector(3, 2, 4).unwrap();
        assert_eq!(v.flat_runs().unwrap(), &[(0, 8), (16, 8), (32, 8)]);
        assert_eq!(v.size(), 24);
        assert_eq!(v.extent(), 40);
        assert!(!v.is_contiguous());
        assert!(int().contiguous(5).unwrap().is_contiguous());
    }

    #[test]
    fn elements_of_a_part_of_a_mixed_type() {
        let (int, double) = (Datatype::basic(4, 1), Datatype::basic(8, 2));
        // {int; double}: 12 bytes of data, two elements.
        let s = Datatype::create_struct(&[1, 1], &[0, 8], &[int.clone(), double.clone()]).unwrap();
        assert_eq!(s.elements_in(24), Some(4));
        assert_eq!(s.elements_in(28), Some(5));
        assert_eq!(s.elements_in(26), None, "half an int");
        // Three of them in a vector, and a struct of that and a double.
        let v = s.vector(3, 1, 2).unwrap();
        assert_eq!(v.elements_in(36 + 12 + 4), Some(6 + 2 + 1));
        let t = Datatype::create_struct(&[1, 2], &[0, 200], &[v, double]).unwrap();
        assert_eq!(t.elements(), 8);
        assert_eq!(t.elements_in(36 + 8), Some(7));
        // One kind: any number of whole basic elements.
        assert_eq!(int.contiguous(5).unwrap().elements_in(12), Some(3));
        // A signature too long to keep: whole elements still count.
        let big = s.contiguous(5000).unwrap();
        assert_eq!(big.elements_in(big.size()), Some(10000));
        assert_eq!(big.elements_in(12), None);
    }

    #[test]
    fn pack_unpack_round_trip() {
        let v = int().vector(2, 1, 3).unwrap();
        let src: Vec<i32> = (0..12).collect();
        let mut packed = vec![0u8; v.packed_size(2)];
        // SAFETY: two elements of extent 16 bytes fit in 12 ints.
        unsafe { v.pack(src.as_ptr() as *const u8, 2, &mut packed) };
        let got: Vec<i32> = packed
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [0, 3, 4, 7]);
        let mut dst = [0i32; 12];
        // SAFETY: as above.
        unsafe { v.unpack(&packed, dst.as_mut_ptr() as *mut u8, 2) };
        assert_eq!(dst[..8], [0, 0, 0, 3, 4, 0, 0, 7]);
    }

    #[test]
    fn subarray_c_order() {
        // 4x5 array, 2x3 block at (1,1).
        let s = int().subarray(&[4, 5], &[2, 3], &[1, 1], true).unwrap();
        assert_eq!(s.flat_runs().unwrap(), &[(24, 12), (44, 12)]);
        assert_eq!(s.extent(), 80);
        assert_eq!(s.elements_in(24), Some(6));
    }

    #[test]
    fn darray_block_and_cyclic() {
        // 4x6 ints over a 2x2 grid, rows in blocks, columns cyclic by 2, C order.
        let t = int()
            .darray(
                4,
                1,
                &[4, 6],
                &[Distribution::Block(None), Distribution::Cyclic(Some(2))],
                &[2, 2],
                true,
            )
            .unwrap();
        // Rank 1 = coords (0, 1): rows 0-1, columns 2-3.
        assert_eq!(t.flat_runs().unwrap(), &[(8, 8), (32, 8)]);
        assert_eq!(t.extent(), 96);
        // Fortran order, one dimension cyclic by 1 over 3: every third.
        let f = int()
            .darray(3, 2, &[7], &[Distribution::Cyclic(None)], &[3], false)
            .unwrap();
        assert_eq!(f.flat_runs().unwrap(), &[(8, 4), (20, 4)]);
        // A block too small for the grid is refused.
        assert!(int()
            .darray(2, 0, &[10], &[Distribution::Block(Some(4))], &[2], true)
            .is_err());
    }

    #[test]
    fn struct_and_resized() {
        let d = Datatype::basic(8, 2);
        let s = Datatype::create_struct(&[1, 1], &[0, 8], &[d.clone(), int()]).unwrap();
        assert_eq!(s.size(), 12);
        // C's `struct { double; int; }`: padded to the double's alignment.
        assert_eq!(s.extent(), 16);
        assert_eq!(s.true_extent(), 12);
        let r = s.resized(0, 12);
        assert_eq!(r.extent(), 12);
        assert_eq!(r.true_extent(), 12);
        assert_eq!(r.basic_element(), None);
        // Around a resized part too (MPICH 4 does the same).
        let t = Datatype::create_struct(&[1, 1], &[0, 12], &[r, Datatype::basic(1, 3)]).unwrap();
        assert_eq!(t.extent(), 16);
        // { char; short } is 4 bytes in C; { char c[3]; } is 3.
        let ch = Datatype::basic(1, 3);
        let cs = Datatype::create_struct(&[1, 1], &[0, 2], &[ch.clone(), Datatype::basic(2, 4)]);
        assert_eq!(cs.unwrap().extent(), 4);
        assert_eq!(
            Datatype::create_struct(&[3], &[0], &[ch]).unwrap().extent(),
            3
        );
        // A part that is itself a padded structure counts with its alignment.
        let outer = Datatype::create_struct(&[1, 1], &[0, 16], &[s, int()]).unwrap();
        assert_eq!(outer.extent(), 24);
        // double _Complex aligns to 8, not 16; { char; double _Complex } is 24.
        let z = Datatype::basic_aligned(16, 8, 5);
        let cz = Datatype::create_struct(&[1, 1], &[0, 8], &[Datatype::basic(1, 3), z]);
        assert_eq!(cz.unwrap().extent(), 24);
    }

    #[test]
    fn explicit_bounds_below_each_other_give_a_negative_extent() {
        // MPI-1's { (LB,6), 4*(BYTE,0), (UB,-3) }.
        let b = Datatype::create_struct(&[4], &[0], &[Datatype::basic(1, 3)]).unwrap();
        let t = b.with_bounds(Some(6), Some(-3));
        assert_eq!((t.lb(), t.extent(), t.size()), (6, -9, 4));
        // Copies step by the extent, downwards, in typemap order.
        let c = t.contiguous(3).unwrap();
        assert_eq!((c.lb(), c.extent()), (-12, 9));
        assert_eq!((c.true_lb(), c.true_extent()), (-18, 22));
        assert_eq!(walked(&c, 1), vec![(0, 4), (-9, 4), (-18, 4)]);
        // A bound not given is the data's.
        let l = Datatype::create_struct(&[], &[], &[])
            .unwrap()
            .with_bounds(Some(10), None);
        assert_eq!((l.lb(), l.extent()), (10, -10));
    }

    /// Every run of `count` elements, as a list.
    fn walked(t: &Datatype, count: usize) -> Vec<(isize, usize)> {
        first_runs(t, count, usize::MAX)
    }

    /// The first `k` runs of `count` elements.
    fn first_runs(t: &Datatype, count: usize, k: usize) -> Vec<(isize, usize)> {
        let mut v = Vec::new();
        let _ = t.walk(count, |o, l| {
            v.push((o, l));
            if v.len() == k {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        v
    }

    /// Adjacent runs merged, for comparing typemaps whatever their form.
    fn merged(v: Vec<(isize, usize)>) -> Vec<(isize, usize)> {
        let mut m: Vec<(isize, usize)> = Vec::new();
        for (o, l) in v {
            match m.last_mut() {
                Some((a, n)) if *a + *n as isize == o => *n += l,
                _ => m.push((o, l)),
            }
        }
        m
    }

    #[test]
    fn a_large_count_of_a_strided_type_stays_small() {
        // MPI_Type_contiguous_c(2^31 + 100, resized char with extent 2): one
        // unit run and one level, not two billion runs.
        let ch = Datatype::basic(1, 3).resized(0, 2);
        let n = (1usize << 31) + 100;
        let big = ch.contiguous(n).unwrap();
        assert_eq!(big.runs(), None);
        assert_eq!(big.run_count(), n);
        assert_eq!(big.size(), n);
        assert_eq!(big.extent(), 2 * n as isize);
        assert_eq!(big.true_extent(), 2 * n as isize - 1);
        assert_eq!(big.elements(), n);
        assert_eq!(first_runs(&big, 1, 3), [(0, 1), (2, 1), (4, 1)]);
        // A vector of it, and that resized: still compact, bounds right.
        let v = big.vector(3, 1, 2).unwrap();
        assert_eq!(v.size(), 3 * n);
        assert_eq!(v.true_extent(), 4 * 2 * n as isize + 2 * n as isize - 1);
        // An irregular layout of it is refused by name, not built.
        let e = Datatype::create_struct(&[1, 1], &[0, 1], &[big.clone(), ch]).unwrap_err();
        assert!(format!("{e}").contains("separate runs"), "{e}");
        // A single part of a structure keeps the compact form.
        let s = Datatype::create_struct(&[1], &[8], &[big]).unwrap();
        assert_eq!(s.runs(), None);
        assert_eq!(first_runs(&s, 1, 2), [(8, 1), (10, 1)]);
    }

    #[test]
    fn pack_and_unpack_through_a_compact_typemap() {
        let ch = Datatype::basic(1, 3).resized(0, 2);
        let n = FLAT_RUNS + 7;
        let t = ch.contiguous(n).unwrap();
        assert_eq!(t.runs(), None);
        let src: Vec<u8> = (0..2 * n * 2).map(|i| i as u8).collect();
        let mut packed = vec![0u8; t.packed_size(2)];
        // SAFETY: two elements of extent 2n bytes fit in 4n bytes.
        unsafe { t.pack(src.as_ptr(), 2, &mut packed) };
        let want: Vec<u8> = src.iter().step_by(2).copied().collect();
        assert_eq!(packed, want);
        let mut dst = vec![0u8; 4 * n];
        // A short message fills a prefix.
        // SAFETY: as above.
        unsafe { t.unpack(&packed[..n + 3], dst.as_mut_ptr(), 2) };
        for (i, &b) in dst.iter().enumerate() {
            let want = if i % 2 == 0 && i / 2 < n + 3 {
                src[i]
            } else {
                0
            };
            assert_eq!(b, want, "byte {i}");
        }
    }

    /// A random type built from nested regular and irregular constructors.
    fn build(ops: &[(u8, usize, usize, isize)]) -> Result<Datatype> {
        let mut t = Datatype::basic(4, 1);
        for &(op, a, b, c) in ops {
            t = match op % 6 {
                0 => t.contiguous(a)?,
                1 => t.vector(a, b, c)?,
                2 => t.hvector(a, b, c * 3 + 1)?,
                3 => t.resized(-(c.abs() % 3), t.extent() + b as isize),
                4 => t.hindexed(&[a as i64, 0, b as i64], &[0, 5, c as i64 * 40])?,
                _ => Datatype::create_struct(&[a as i64], &[c as i64], &[t])?,
            };
        }
        Ok(t)
    }

    proptest::proptest! {
        /// Compact and flat forms of one layout agree on everything.
        #[test]
        fn compact_typemaps_equal_flat_ones(
            ops in proptest::collection::vec(
                (0u8..6, 1usize..4, 0usize..4, -5isize..6), 1..5),
            count in 0usize..4,
        ) {
            let flat = build(&ops);
            FLAT_LIMIT.with(|l| l.set(0));
            let compact = build(&ops);
            FLAT_LIMIT.with(|l| l.set(FLAT_RUNS));
            let (Ok(f), Ok(c)) = (flat, compact) else { return Ok(()) };
            proptest::prop_assert_eq!(merged(walked(&f, count)), merged(walked(&c, count)));
            proptest::prop_assert_eq!(
                (f.size(), f.lb(), f.extent(), f.true_lb(), f.true_extent(), f.elements()),
                (c.size(), c.lb(), c.extent(), c.true_lb(), c.true_extent(), c.elements())
            );
            proptest::prop_assert_eq!(f.is_contiguous(), c.is_contiguous());
            proptest::prop_assert_eq!(f.dense_offset(), c.dense_offset());
            proptest::prop_assert_eq!(merged(f.flat_runs().unwrap()), merged(c.flat_runs().unwrap()));
            let bytes = f.packed_size(count);
            let span = (f.true_lb().min(0).unsigned_abs() + (f.extent().unsigned_abs() + f.true_extent() as usize) * (count + 1)) + 64;
            let src: Vec<u8> = (0..2 * span).map(|i| (i * 7 + 3) as u8).collect();
            let base = src[span..].as_ptr();
            let (mut pf, mut pc) = (vec![0u8; bytes], vec![0u8; bytes]);
            // SAFETY: `base` has `span` bytes on each side, more than the
            // typemap of `count` elements reaches.
            unsafe {
                f.pack(base, count, &mut pf);
                c.pack(base, count, &mut pc);
            }
            proptest::prop_assert_eq!(pf, pc);
        }
    }
}
