//! Handle tables: a slab of objects by MPICH-style indirect handle (index
//! and kind in one `int`), and the one-multiplication hasher of the maps.

use super::*;

/// Hashes an integer handle with one multiplication: the handle tables are
/// looked up several times per MPI call, and SipHash (the default, which
/// resists chosen keys) cost a tenth of a small message's time in the ABI.
/// Handles are chosen by this library and MPICH's constants, not by an
/// adversary.
#[derive(Default, Clone, Copy)]
pub(crate) struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(b as u32 ^ (self.0 as u32).rotate_left(8));
        }
    }

    fn write_u32(&mut self, i: u32) {
        // Fibonacci hashing; the fold brings the high bits (where MPICH puts
        // the handle kind) down to the low ones the table indexes with.
        let x = (i as u64 ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = x ^ (x >> 29);
    }

    fn write_i32(&mut self, i: i32) {
        self.write_u32(i as u32);
    }
}

/// A table keyed by handles.
pub(crate) type HandleMap<V> = HashMap<c_int, V, BuildHasherDefault<HandleHasher>>;

/// Bits of a created handle that carry its index (the rest say its kind, as
/// in MPICH's encoding: `NEW_COMM | index`, `NEW_REQUEST | index`).
pub(super) const INDEX_BITS: c_int = 0x03ff_ffff;

/// Objects reached by handle on every call (communicators, requests), in a
/// vector indexed by the handle's index bits: a lookup is a mask, a compare and
/// a load. Freed indices are reused, lowest-recently-freed first, so the table
/// stays as large as the most objects alive at once. `first` indices are
/// reserved for predefined handles, which [`Slab::index`] maps.
///
/// `repr(C)`, with what a lookup of `MPI_COMM_WORLD` reads first: the
/// communicator table sits at the end of the cache line that every call
/// reads anyway (see `Global`).
#[repr(C)]
pub(crate) struct Slab<V> {
    /// `fixed[0]`, kept here: the most named handle (`MPI_COMM_WORLD`) is
    /// then found without touching another cache line (see `index`).
    /// (`0, u32::MAX` in a table without predefined handles: an index
    /// past any slot, so that the handle 0 finds nothing.)
    first: (c_int, u32),
    slots: Vec<Option<V>>,
    free: Vec<c_int>,
    /// The kind bits of this table's created handles.
    base: c_int,
    /// Predefined handles and their indices.
    fixed: &'static [(c_int, usize)],
    /// Scratch bitset of [`Slab::pick_many_mut`].
    marks: Vec<u64>,
}

impl<V> Slab<V> {
    pub(super) fn new(base: c_int, fixed: &'static [(c_int, usize)]) -> Self {
        let mut slots = Vec::new();
        slots.resize_with(fixed.len(), || None);
        Slab {
            slots,
            free: Vec::new(),
            base,
            fixed,
            first: fixed.first().map_or((0, u32::MAX), |&(h, i)| (h, i as u32)),
            marks: Vec::new(),
        }
    }

    #[inline(always)]
    pub fn index(&self, h: c_int) -> Option<usize> {
        // `MPI_COMM_WORLD` is named on nearly every call: the predefined
        // handles' first entry is checked first, before the created ones.
        if self.first.0 == h {
            return Some(self.first.1 as usize);
        }
        if h & !INDEX_BITS == self.base {
            return Some((h & INDEX_BITS) as usize);
        }
        self.fixed.iter().find(|f| f.0 == h).map(|f| f.1)
    }

    #[inline(always)]
    pub fn get(&self, h: &c_int) -> Option<&V> {
        self.slots.get(self.index(*h)?)?.as_ref()
    }

    #[inline(always)]
    pub fn get_mut(&mut self, h: &c_int) -> Option<&mut V> {
        let i = self.index(*h)?;
        self.slots.get_mut(i)?.as_mut()
    }

    /// Every object and its handle.
    pub fn iter(&self) -> impl Iterator<Item = (c_int, &V)> {
        self.slots.iter().enumerate().filter_map(|(i, v)| {
            let h = match self.fixed.iter().find(|f| f.1 == i) {
                Some(f) => f.0,
                None => self.base | i as c_int,
            };
            Some((h, v.as_ref()?))
        })
    }

    /// Stores `v` under a new handle.
    #[inline(always)]
    pub fn add(&mut self, v: V) -> c_int {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as c_int
            }
        };
        // A free slot holds `None` (nothing to drop): replaced without the
        // drop glue of the table's largest entry.
        let old = self.slots[i as usize].replace(v);
        debug_assert!(old.is_none());
        std::mem::forget(old);
        self.base | i
    }

    /// A new handle with no object yet ([`Slab::fill`] gives it one; until
    /// then lookups find nothing, as for a freed handle).
    pub fn reserve(&mut self) -> c_int {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as c_int
            }
        };
        self.base | i
    }

    /// Stores `v` under handle `h` from [`Slab::reserve`].
    pub fn fill(&mut self, h: c_int, v: V) {
        if let Some(i) = self.index(h).filter(|&i| i >= self.fixed.len()) {
            if let Some(slot @ None) = self.slots.get_mut(i) {
                *slot = Some(v);
            }
        }
    }

    /// Stores `v` under the predefined handle `h`.
    pub(super) fn set_fixed(&mut self, h: c_int, v: V) {
        if let Some(i) = self.fixed.iter().find(|f| f.0 == h).map(|f| f.1) {
            self.slots[i] = Some(v);
        }
    }

    /// Drops the object of handle `h` where it lies (no move out of the
    /// table, as [`Slab::remove`] makes); `false` if there is none.
    #[inline]
    pub fn discard(&mut self, h: c_int) -> bool {
        let Some(i) = self.index(h) else {
            return false;
        };
        match self.slots.get_mut(i) {
            Some(slot @ Some(_)) => {
                *slot = None;
                if i >= self.fixed.len() {
                    self.free.push(i as c_int);
                }
                true
            }
            _ => false,
        }
    }

    pub fn remove(&mut self, h: &c_int) -> Option<V> {
        let i = self.index(*h)?;
        let v = self.slots.get_mut(i)?.take();
        if v.is_some() && i >= self.fixed.len() {
            self.free.push(i as c_int);
        }
        v
    }

    /// Mutable access to what `pick` chooses in the objects whose handles
    /// are among `hs`, each object once (in table order).
    pub fn pick_many_mut<T: ?Sized>(
        &mut self,
        hs: &[c_int],
        pick: fn(&mut V) -> Option<&mut T>,
    ) -> Vec<&mut T> {
        // One bit per slot, in a bitset kept between calls (no allocation
        // per call once it is as large as the table).
        let n = self.slots.len();
        self.marks.clear();
        self.marks.resize(n.div_ceil(64), 0);
        for &h in hs {
            if let Some(i) = self.index(h).filter(|&i| i < n) {
                self.marks[i / 64] |= 1 << (i % 64);
            }
        }
        let marks = &self.marks;
        let mut out = Vec::with_capacity(hs.len());
        out.extend(
            self.slots
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| marks[i / 64] >> (i % 64) & 1 == 1)
                .filter_map(|(_, v)| v.as_mut().and_then(pick)),
        );
        out
    }
}

/// The ticket bits of request handle `h`, if it is one: `TICKET_REQUEST |
/// bits` (see [`kumi::raw::Ticket::bits`]). A handle of this kind has no
/// table entry; the engine holds all there is of it.
#[inline(always)]
pub(crate) fn ticket_bits(h: c_int) -> Option<u32> {
    (h & !INDEX_BITS == TICKET_REQUEST).then_some((h & INDEX_BITS) as u32)
}
