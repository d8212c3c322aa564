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
//! Sending uses the typemap directly: a type whose single run starts at offset 0
//! and fills its extent is contiguous and goes to the engine as is; any other is
//! packed into a staging buffer first (and unpacked from one on receipt).

use crate::error::{Error, Result};
use std::sync::Arc;

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
    inner: Arc<Layout>,
}

#[derive(Debug)]
struct Layout {
    /// Byte runs of one element, relative to its start, merged where adjacent.
    runs: Vec<(isize, usize)>,
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
        Self::from_runs(
            if size > 0 { vec![(0, size)] } else { vec![] },
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
        Self::from_runs(
            runs.to_vec(),
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

    fn from_runs(
        runs: Vec<(isize, usize)>,
        bounds: Option<(isize, isize)>,
        elements: usize,
        basic: Option<Basic>,
        sig: Option<Arc<[(usize, usize)]>>,
        shape: Shape,
    ) -> Datatype {
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
        let size = merged.iter().map(|r| r.1).sum();
        let true_lb = merged.iter().map(|r| r.0).min().unwrap_or(0);
        let true_ub = merged.iter().map(|r| r.0 + r.1 as isize).max().unwrap_or(0);
        let (lb, ub) = bounds.unwrap_or((true_lb, true_ub));
        Datatype {
            inner: Arc::new(Layout {
                runs: merged,
                size,
                lb,
                ub,
                true_lb,
                true_ub,
                elements,
                sig: if basic.is_some() { None } else { sig },
                basic,
                align: shape.align,
            }),
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
        match self.runs() {
            [(o, l)] if *l as isize == self.extent() => Some(*o),
            _ => None,
        }
    }

    /// Whether `count` elements are one run of bytes starting at the buffer.
    pub fn is_contiguous(&self) -> bool {
        match self.inner.runs.as_slice() {
            [] => true,
            [(0, len)] => *len as isize == self.extent() && self.inner.lb == 0,
            _ => false,
        }
    }

    /// The byte runs of one element.
    pub fn runs(&self) -> &[(isize, usize)] {
        &self.inner.runs
    }

    fn repeat(
        &self,
        offsets: impl Iterator<Item = (isize, usize)>,
        bounds: Option<(isize, isize)>,
    ) -> Result<Datatype> {
        let ext = self.extent();
        let mut runs = Vec::new();
        let mut elements = 0usize;
        let mut blocks = 0usize;
        let (mut lo, mut hi) = (isize::MAX, isize::MIN);
        // A type whose one run fills its extent makes a block of any length
        // one run: no walk over its elements (MPI_Type_contiguous(2^31 - 1,
        // MPI_BYTE) is one run, not two billion).
        let dense = self.dense_offset();
        for (base, blocklen) in offsets {
            if blocklen == 0 {
                continue;
            }
            let span = (blocklen as isize).checked_mul(ext).ok_or_else(overflow)?;
            let last = base.checked_add(span - ext).ok_or_else(overflow)?;
            if let Some(o) = dense {
                let len = usize::try_from(span).map_err(|_| overflow())?;
                runs.push((base.checked_add(o).ok_or_else(overflow)?, len));
            } else {
                for i in 0..blocklen {
                    let shift = base + i as isize * ext;
                    for &(o, l) in self.runs() {
                        runs.push((o + shift, l));
                    }
                }
            }
            // With a negative extent the last element is the lowest.
            lo = lo.min(base.min(last) + self.lb());
            hi = hi.max(base.max(last) + self.lb() + ext);
            elements = elements
                .checked_add(blocklen.checked_mul(self.elements()).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
            blocks = blocks.saturating_add(blocklen);
        }
        let bounds = bounds.or(if lo <= hi {
            Some((lo, hi))
        } else {
            Some((0, 0))
        });
        Ok(Self::from_runs(
            runs,
            bounds,
            elements,
            self.inner.basic,
            self.signature_times(blocks),
            self.shape(),
        ))
    }

    /// `count` elements of `self`, one after the other.
    pub fn contiguous(&self, count: usize) -> Result<Datatype> {
        self.repeat(std::iter::once((0, count)), None)
    }

    /// `count` blocks of `blocklen` elements, block starts `stride` elements apart.
    pub fn vector(&self, count: usize, blocklen: usize, stride: isize) -> Result<Datatype> {
        let s = stride.checked_mul(self.extent()).ok_or_else(overflow)?;
        self.hvector(count, blocklen, s)
    }

    /// Like [`Datatype::vector`] with the stride in bytes.
    pub fn hvector(&self, count: usize, blocklen: usize, stride: isize) -> Result<Datatype> {
        self.repeat((0..count).map(|i| (i as isize * stride, blocklen)), None)
    }

    /// Blocks of `blocklens[i]` elements at displacements `displs[i]` elements.
    pub fn indexed(&self, blocklens: &[i64], displs: &[i64]) -> Result<Datatype> {
        let ext = self.extent() as i64;
        let d: Vec<i64> = displs.iter().map(|&x| x * ext).collect();
        self.hindexed(blocklens, &d)
    }

    /// Blocks of `blocklens[i]` elements at byte displacements `displs[i]`.
    pub fn hindexed(&self, blocklens: &[i64], displs: &[i64]) -> Result<Datatype> {
        let mut v = Vec::with_capacity(blocklens.len());
        for (&b, &d) in blocklens.iter().zip(displs) {
            if b < 0 {
                return Err(neg("blocklength", b));
            }
            v.push((d as isize, b as usize));
        }
        self.repeat(v.into_iter(), None)
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
        let mut runs = Vec::new();
        let mut elements = 0usize;
        let mut basic: Option<Option<Basic>> = None;
        // The parts' signatures one after the other (while known).
        let mut sig: Option<Vec<(usize, usize)>> = Some(Vec::new());
        let (mut lo, mut hi) = (isize::MAX, isize::MIN);
        let mut align = 1;
        for ((&b, &d), t) in blocklens.iter().zip(displs).zip(types) {
            if b < 0 {
                return Err(neg("blocklength", b));
            }
            let part = t.repeat(std::iter::once((d as isize, b as usize)), None)?;
            runs.extend_from_slice(part.runs());
            elements += part.elements();
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
        }
        let bounds = if lo > hi {
            (0, 0)
        } else {
            // MPI's epsilon: the smallest increment that makes the extent a
            // multiple of the alignment.
            let a = align as isize;
            (lo, lo + (hi - lo + a - 1) / a * a)
        };
        Ok(Self::from_runs(
            runs,
            Some(bounds),
            elements,
            basic.flatten(),
            sig.map(Into::into),
            Shape { align },
        ))
    }

    /// The same data with lower bound `lb` and extent `extent`.
    pub fn resized(&self, lb: isize, extent: isize) -> Datatype {
        Self::from_runs(
            self.runs().to_vec(),
            Some((lb, lb + extent)),
            self.elements(),
            self.inner.basic,
            self.inner.sig.clone(),
            self.shape(),
        )
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
        let shifted: Vec<(isize, usize)> = t.runs().iter().map(|&(o, l)| (o + offset, l)).collect();
        Ok(Self::from_runs(
            shifted,
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
        Ok(Self::from_runs(
            t.runs().to_vec(),
            Some((0, total as isize)),
            t.elements(),
            self.inner.basic,
            t.inner.sig.clone(),
            self.shape(),
        ))
    }

    /// Bytes that `count` elements pack into.
    pub fn packed_size(&self, count: usize) -> usize {
        self.size() * count
    }

    /// Copies `count` elements laid out at `base` into `out` (which must hold
    /// [`Datatype::packed_size`] bytes).
    ///
    /// # Safety
    /// Every byte the typemap covers, for elements `0..count` starting at `base`,
    /// must be readable.
    pub unsafe fn pack(&self, base: *const u8, count: usize, out: &mut [u8]) {
        let ext = self.extent();
        if let Some(o) = self.dense_offset() {
            let n = (self.size() * count).min(out.len());
            // SAFETY: the elements abut (one run as long as the extent), so the
            // typemap of `count` elements is the `size * count` bytes from
            // `base + o`, readable by the caller's contract; `n <= out.len()`.
            unsafe { kumi_transport::copy_bytes(base.offset(o), out.as_mut_ptr(), n) };
            return;
        }
        let mut pos = 0;
        for i in 0..count {
            for &(o, l) in self.runs() {
                // SAFETY: the caller guarantees the typemap's bytes are readable;
                // `out` holds `size * count` bytes and `pos + l` stays within it.
                unsafe {
                    let src = base.offset(i as isize * ext + o);
                    std::ptr::copy_nonoverlapping(src, out.as_mut_ptr().add(pos), l);
                }
                pos += l;
            }
        }
    }

    /// Copies packed bytes `data` into elements at `base`; stops when `data` runs
    /// out (a short message fills a prefix of the layout).
    ///
    /// # Safety
    /// Every byte the typemap covers, for elements `0..count` starting at `base`,
    /// must be writable.
    pub unsafe fn unpack(&self, data: &[u8], base: *mut u8, count: usize) {
        let ext = self.extent();
        if let Some(o) = self.dense_offset() {
            let n = (self.size() * count).min(data.len());
            // SAFETY: as in `pack`: the `size * count` bytes from `base + o` are
            // the typemap, writable by the caller's contract; `n <= data.len()`.
            unsafe { kumi_transport::copy_bytes(data.as_ptr(), base.offset(o), n) };
            return;
        }
        let mut pos = 0;
        'outer: for i in 0..count {
            for &(o, l) in self.runs() {
                if pos >= data.len() {
                    break 'outer;
                }
                let n = l.min(data.len() - pos);
                // SAFETY: the caller guarantees the typemap's bytes are writable;
                // `pos + n <= data.len()`.
                unsafe {
                    let dst = base.offset(i as isize * ext + o);
                    std::ptr::copy_nonoverlapping(data.as_ptr().add(pos), dst, n);
                }
                pos += n;
            }
        }
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
        assert_eq!(v.runs(), &[(0, 8), (16, 8), (32, 8)]);
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
        assert_eq!(s.runs(), &[(24, 12), (44, 12)]);
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
        assert_eq!(t.runs(), &[(8, 8), (32, 8)]);
        assert_eq!(t.extent(), 96);
        // Fortran order, one dimension cyclic by 1 over 3: every third.
        let f = int()
            .darray(3, 2, &[7], &[Distribution::Cyclic(None)], &[3], false)
            .unwrap();
        assert_eq!(f.runs(), &[(8, 4), (20, 4)]);
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
}
