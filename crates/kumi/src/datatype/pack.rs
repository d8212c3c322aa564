//! Moving the bytes of a typemap: packing elements into one block and
//! unpacking them back, a strided series at a time
//! ([`Datatype::walk_series`]), each series in a loop made for its run
//! length.

use super::Datatype;
use std::ops::ControlFlow;

/// Which way [`strided`] copies: from the strided runs into one block
/// (pack), or from one block into the strided runs (unpack).
#[derive(Clone, Copy)]
enum Way {
    Gather,
    Scatter,
}

/// Copies `n` runs of `len` bytes, `stride` apart from `runs`, to or from
/// the `n * len` bytes at `packed`. The short runs of strided types (a
/// column of doubles, every other byte) copy as one load and store each in
/// a loop made for their length, not a call to `memcpy` per run.
///
/// # Safety
/// Each run readable (gather) or writable (scatter) at `runs + j * stride`,
/// and `n * len` bytes writable or readable at `packed`, not overlapping them.
#[inline(always)]
unsafe fn strided(way: Way, runs: *mut u8, stride: isize, n: usize, len: usize, packed: *mut u8) {
    #[inline(always)]
    unsafe fn each<const L: usize>(
        way: Way,
        runs: *mut u8,
        stride: isize,
        n: usize,
        packed: *mut u8,
    ) {
        for j in 0..n {
            // SAFETY: the caller's contract, for run j and its L packed
            // bytes; `[u8; L]` has alignment 1.
            unsafe {
                let (r, p) = (runs.offset(j as isize * stride), packed.add(j * L));
                match way {
                    Way::Gather => p.cast::<[u8; L]>().write(r.cast::<[u8; L]>().read()),
                    Way::Scatter => r.cast::<[u8; L]>().write(p.cast::<[u8; L]>().read()),
                }
            }
        }
    }
    // SAFETY: forwarded contract.
    unsafe {
        match len {
            1 => each::<1>(way, runs, stride, n, packed),
            2 => each::<2>(way, runs, stride, n, packed),
            4 => each::<4>(way, runs, stride, n, packed),
            8 => each::<8>(way, runs, stride, n, packed),
            16 => each::<16>(way, runs, stride, n, packed),
            _ => {
                for j in 0..n {
                    let (r, p) = (runs.offset(j as isize * stride), packed.add(j * len));
                    match way {
                        Way::Gather => std::ptr::copy_nonoverlapping(r, p, len),
                        Way::Scatter => std::ptr::copy_nonoverlapping(p, r, len),
                    }
                }
            }
        }
    }
}

/// Walks `count` elements of `t` at `base`, copying to or from `packed`
/// until it is full (gather) or used up (scatter): the runs that fit
/// whole in strided loops, then a partial one.
///
/// # Safety
/// The typemap's bytes of `count` elements at `base` readable (gather) or
/// writable (scatter); `packed` valid for its length the other way.
unsafe fn copy_packed(
    t: &Datatype,
    way: Way,
    base: *mut u8,
    count: usize,
    packed: *mut u8,
    len: usize,
) {
    let mut pos = 0;
    let _ = t.walk_series(count, |o, l, n, stride| {
        let room = len - pos;
        // (A division only when the packed bytes end inside this series.)
        let whole = if n.saturating_mul(l) <= room {
            n
        } else {
            room / l
        };
        // SAFETY: the caller's contract for the typemap's runs; the `whole`
        // runs take `whole * l <= len - pos` packed bytes.
        unsafe { strided(way, base.offset(o), stride, whole, l, packed.add(pos)) };
        pos += whole * l;
        if whole < n {
            // The last run that fits in part (or none: `len` reached).
            let part = len - pos;
            // SAFETY: as above, `part < l` bytes of run `whole`.
            unsafe {
                strided(
                    way,
                    base.offset(o + whole as isize * stride),
                    0,
                    1,
                    part,
                    packed.add(pos),
                )
            };
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
}

impl Datatype {
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
        if let Some(o) = self.dense_offset() {
            let n = (self.size() * count).min(out.len());
            // SAFETY: the elements abut (one run as long as the extent), so the
            // typemap of `count` elements is the `size * count` bytes from
            // `base + o`, readable by the caller's contract; `n <= out.len()`.
            unsafe { kumi_transport::copy_bytes(base.offset(o), out.as_mut_ptr(), n) };
            return;
        }
        // SAFETY: the typemap's bytes are readable (the caller's contract);
        // gathering only reads through `base`, and `out` is valid for its length.
        unsafe {
            copy_packed(
                self,
                Way::Gather,
                base.cast_mut(),
                count,
                out.as_mut_ptr(),
                out.len(),
            )
        };
    }

    /// Copies packed bytes `data` into elements at `base`; stops when `data` runs
    /// out (a short message fills a prefix of the layout).
    ///
    /// # Safety
    /// Every byte the typemap covers, for elements `0..count` starting at `base`,
    /// must be writable.
    pub unsafe fn unpack(&self, data: &[u8], base: *mut u8, count: usize) {
        if let Some(o) = self.dense_offset() {
            let n = (self.size() * count).min(data.len());
            // SAFETY: as in `pack`: the `size * count` bytes from `base + o` are
            // the typemap, writable by the caller's contract; `n <= data.len()`.
            unsafe { kumi_transport::copy_bytes(data.as_ptr(), base.offset(o), n) };
            return;
        }
        // SAFETY: the typemap's bytes are writable (the caller's contract);
        // scattering only reads `data`, valid for its length.
        unsafe {
            copy_packed(
                self,
                Way::Scatter,
                base,
                count,
                data.as_ptr().cast_mut(),
                data.len(),
            )
        };
    }
}
