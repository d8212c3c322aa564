//! The library's state between `MPI_Init` and `MPI_Finalize`: the universe, and
//! the tables that map integer handles onto runtime objects.

use crate::consts::*;
use crate::{class_name, err, set_err_comm, MPI_Status, MpiErr, R};
use kumi::datatype::Datatype;
use kumi::raw::{RawMessage, RawPersistent, RawRequest, Ticket};
use kumi::{Comm, Status, Universe};
use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::ThreadId;

/// `MPI_Comm_errhandler_function`.
pub(crate) type ErrFn = unsafe extern "C" fn(*mut c_int, *mut c_int);
/// `MPI_File_errhandler_function` (its first argument is an `MPI_File *`).
pub(crate) type FileErrFn = unsafe extern "C" fn(*mut *mut c_void, *mut c_int);
/// `MPI_Comm_copy_attr_function`.
pub(crate) type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `MPI_Comm_delete_attr_function`.
pub(crate) type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;
/// `MPI_User_function`.
pub(crate) type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_int);
/// `MPI_User_function_c`: the same with an `MPI_Count` length.
pub(crate) type UserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut i64, *mut c_int);

/// A program's reduction function, made by `MPI_Op_create` or `MPI_Op_create_c`.
#[derive(Clone, Copy)]
pub(crate) enum UserOp {
    Int(UserFn),
    Big(UserFnC),
}

/// A Cartesian topology attached to a communicator.
pub(crate) use kumi::topo::Cart;

/// The constructor call that made a derived datatype: its combiner
/// (`MPI_COMBINER_...`) and the integer, address and datatype arguments in
/// the order `MPI_Type_get_contents` returns them.
#[derive(Debug)]
pub(crate) struct TypeCtor {
    pub combiner: c_int,
    pub ints: Vec<c_int>,
    pub aints: Vec<isize>,
    /// The counts of a large-count (`_c`) constructor, which MPI-4 returns
    /// apart (only `MPI_Type_get_envelope_c` and `_contents_c` see them).
    pub large: Vec<i64>,
    pub types: Vec<TypeArg>,
}

/// A datatype argument of a constructor: a predefined handle, or a derived
/// type (its layout and how it was made), which `MPI_Type_get_contents`
/// returns as a new handle.
#[derive(Clone, Debug)]
pub(crate) enum TypeArg {
    Named(c_int),
    Derived(Datatype, Option<Rc<TypeCtor>>),
}

/// A distributed graph topology attached to a communicator: this rank's
/// in- and out-neighbours (communicator ranks, repeats allowed) and their
/// weights (`None`: `MPI_UNWEIGHTED`).
#[derive(Clone, Debug)]
pub(crate) struct DistGraph {
    pub sources: Vec<usize>,
    pub source_weights: Option<Vec<c_int>>,
    pub dests: Vec<usize>,
    pub dest_weights: Option<Vec<c_int>>,
    /// For an MPI-1 graph (`MPI_Graph_create`): the whole graph as given,
    /// `index` and `edges` (every rank knows it; its neighbours are both
    /// the sources and the destinations above).
    pub mpi1: Option<Rc<(Vec<c_int>, Vec<c_int>)>>,
}

pub(crate) struct CommEntry {
    /// The runtime communicator; for an intercommunicator, the one for
    /// point-to-point across (its ranks are the remote group's).
    pub comm: Comm,
    /// The intercommunicator, if this is one, and a hidden handle of its
    /// local group (for collectives that combine within the group first).
    pub inter: Option<Rc<kumi::inter::InterComm>>,
    pub inter_local: c_int,
    pub errh: c_int,
    pub attrs: HashMap<c_int, *mut c_void>,
    pub cart: Option<Cart>,
    pub graph: Option<DistGraph>,
    pub name: String,
}

pub(crate) struct Keyval {
    pub copy: Option<CopyFn>,
    pub delete: Option<DeleteFn>,
    pub extra: *mut c_void,
}

/// A request in the table. The common case is not here: a contiguous send
/// or receive (`MPI_Isend`, `MPI_Irecv` of a predefined type) is a
/// [`Ticket`] packed into its handle ([`ticket_bits`]).
pub(crate) enum ReqEntry {
    Active(RawRequest),
    /// `p` is `None` for a persistent operation with `MPI_PROC_NULL`; boxed
    /// to keep entries small (they move in and out of the table per request).
    Persistent {
        p: Option<Box<RawPersistent>>,
        active: Option<RawRequest>,
    },
    /// A nonblocking collective (`MPI_Ibarrier`, `MPI_Iallreduce`...).
    Coll(Box<dyn CollPending>),
    /// A persistent collective (`MPI_Bcast_init`...): `start` begins one
    /// run (the nonblocking collective with the arguments given at
    /// creation); `active` is the run in flight.
    PersistentColl {
        start: Rc<dyn Fn() -> R<Box<dyn CollPending>>>,
        active: Option<Box<dyn CollPending>>,
    },
}

/// A nonblocking collective behind an MPI request: the runtime's
/// `CollRequest`, held as an opaque value, plus where its result goes.
pub(crate) trait CollPending {
    /// Makes progress once; `true` when the collective has completed.
    fn test(&mut self) -> kumi::Result<bool>;
    /// Waits for completion and writes the result to the program's buffer.
    fn finish(self: Box<Self>) -> R<()>;
    /// [`CollPending::finish`] with the status a wait reports: empty for a
    /// collective (its error in `MPI_ERROR`); a nonblocking sendrecv's is its
    /// receive's.
    fn complete(self: Box<Self>) -> (MPI_Status, Option<MpiErr>) {
        let mut st = empty_status();
        match self.finish() {
            Ok(()) => (st, None),
            Err(e) => {
                st.MPI_ERROR = e.class;
                (st, Some(e))
            }
        }
    }

    /// [`CollPending::complete`] by a wait that holds the library's state,
    /// for a request whose completion adds to it (`MPI_Comm_idup`'s new
    /// communicator); the others need not look at it.
    fn complete_in(self: Box<Self>, _s: &mut State) -> (MPI_Status, Option<MpiErr>) {
        self.complete()
    }

    /// `MPI_Cancel`: `None` if this kind of request cannot be cancelled.
    fn cancel(&mut self) -> Option<R<()>> {
        None
    }

    /// `MPI_Request_get_status`: makes progress once; the status a wait
    /// would report if the request has completed (it stays to be completed),
    /// `None` if not. A collective's says nothing (MPI leaves it empty).
    fn status(&mut self) -> R<Option<(MPI_Status, Option<MpiErr>)>> {
        Ok(self.test()?.then(|| (empty_status(), None)))
    }
}

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
const INDEX_BITS: c_int = 0x03ff_ffff;

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
    fn new(base: c_int, fixed: &'static [(c_int, usize)]) -> Self {
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
    fn set_fixed(&mut self, h: c_int, v: V) {
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

/// `repr(C)`, communicators first: every call looks one up, and in this
/// order the table's header shares a cache line with the `RefCell` flag
/// that `st()` takes. A call after the rank has been descheduled (ranks
/// taking turns on a core) finds the library's state out of the cache, and
/// each line costs a miss: with the application's own data between calls,
/// `MPI_Comm_rank` touched 11 lines the Rust API does not (valgrind's cache
/// simulation; docs/BENCHMARKS.md, session 6).
#[repr(C)]
pub(crate) struct State {
    pub comms: Slab<CommEntry>,
    pub universe: Universe,
    pub groups: HashMap<c_int, Vec<u32>>,
    pub types: HandleMap<(Datatype, String)>,
    /// How each derived datatype was made, for `MPI_Type_get_envelope` and
    /// `MPI_Type_get_contents`.
    pub type_ctors: HashMap<c_int, Rc<TypeCtor>>,
    /// Error classes and codes the program added (`MPI_Add_error_class`,
    /// `MPI_Add_error_code`): code -> (its class, its string). A class is its
    /// own code. Numbered from 79, after MPICH's predefined classes.
    pub user_errors: HashMap<c_int, (c_int, String)>,
    /// Predefined datatypes, made on first use (a lookup here is a hash of
    /// the handle; their handles are constants, never freed).
    builtins: RefCell<HandleMap<Datatype>>,
    pub reqs: Slab<(ReqEntry, c_int)>,
    pub msgs: HashMap<c_int, RawMessage>,
    pub ops: HashMap<c_int, (UserOp, bool)>,
    pub infos: HashMap<c_int, Vec<(String, String)>>,
    pub keyvals: HashMap<c_int, Keyval>,
    /// Attributes on datatypes (`MPI_Type_set_attr`), by type handle.
    pub type_attrs: HashMap<c_int, HashMap<c_int, *mut c_void>>,
    pub errhs: HashMap<c_int, ErrFn>,
    /// The error handler of each communicator an `MPI_Comm_idup` has not
    /// completed yet (its handle exists, its entry not): MPICH lets a
    /// program set it at once (mpi4py does), and it applies on completion.
    pub idup_errh: HashMap<c_int, c_int>,
    /// Error handlers made by `MPI_File_create_errhandler`.
    pub file_errhs: HashMap<c_int, FileErrFn>,
    /// Open files by index (their `MPI_File` handles encode it; see
    /// `crate::file`).
    pub files: HashMap<usize, crate::file::FileEntry>,
    /// The completion flags of generalized requests (`MPI_Grequest_start`),
    /// by request handle, until `MPI_Grequest_complete`.
    pub grequests: HashMap<c_int, Rc<std::cell::Cell<bool>>>,
    /// Partitioned requests' shared state, by request handle (see `crate::part`).
    pub partitioned: HashMap<c_int, Rc<RefCell<crate::part::Part>>>,
    /// Windows by handle (see `crate::win`).
    pub wins: HashMap<c_int, crate::win::WinEntry>,
    /// Open sessions and their error handlers (see `crate::session`).
    pub sessions: HashMap<c_int, c_int>,
    pub next_file: usize,
    /// The error handler of `MPI_FILE_NULL`: what `MPI_File_open` and
    /// `MPI_File_delete` report through, and what new files start with
    /// (`MPI_ERRORS_RETURN` by the standard).
    pub file_null_errh: c_int,
    pub bsend: Option<(*mut c_void, c_int)>,
    next: c_int,
}

/// The predefined communicators' places in the communicator table.
const FIXED_COMMS: &[(c_int, usize)] = &[(MPI_COMM_WORLD, 0), (MPI_COMM_SELF, 1)];

/// Phases of the library: 0 before init, 1 running, 2 finalized (in
/// [`STATE`]).
#[inline(always)]
pub(crate) fn phase() -> &'static AtomicU8 {
    &STATE.phase
}

/// The communicator whose error handler handles the error of the current
/// call (in [`STATE`]; see `crate::set_err_comm`).
#[inline(always)]
pub(crate) fn err_comm() -> &'static AtomicI32 {
    &STATE.err_comm
}

pub(crate) static INIT_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Records the calling thread as the one that initialized MPI.
pub(crate) fn set_init_thread() {
    let _ = INIT_THREAD.set(std::thread::current().id());
    // Relaxed: see `Global::init_pthread`.
    STATE
        .init_pthread
        .store(kumi::raw::thread_id(), Ordering::Relaxed);
}

/// What every call reads before its work, on one cache line: the phase, the
/// initializing thread, the error communicator, the state's `RefCell` flag
/// and (`State` is `repr(C)`, communicators first) the communicator table's
/// header. See `State` for why lines matter.
#[repr(C, align(64))]
struct Global {
    phase: AtomicU8,
    /// `MPI_THREAD_SERIALIZED` was asked for: then `init_pthread` is a token
    /// that the thread inside MPI holds for the length of its call (0 when no
    /// thread is inside), see [`Token`].
    serialized: AtomicBool,
    err_comm: AtomicI32,
    /// The thread that may call with no further check: the initializing
    /// thread while MPI runs under `MPI_THREAD_FUNNELED`; 0 before, after,
    /// and under `MPI_THREAD_SERIALIZED`. One comparison stands for the
    /// three of the other fields (the phase, the thread, the thread level)
    /// on every call ([`Token::enter`], [`st`]); any other caller takes the
    /// slow path, which checks them one by one. Relaxed: only the
    /// initializing thread stores it (in `MPI_Init`, after the state is
    /// installed and the Release store of `phase`; `MPI_Init_thread`; and
    /// `MPI_Finalize`, before the state is taken), and only that thread can
    /// find its own id in it, in program order; another thread finds 0 or
    /// an id not its own and takes the slow path, whose Acquire load of
    /// `phase` orders what it reads next.
    owner: AtomicUsize,
    /// [`kumi::raw::thread_id`] of the thread that initialized MPI (0 before): comparing it
    /// with the caller's costs one load, where a thread-local flag costs a call
    /// into the dynamic linker (`__tls_get_addr`) in a shared library. The
    /// initializing thread lives as long as MPI is in use (its identity can only
    /// be reused after it exits). Relaxed: written before the Release store of
    /// `phase` that makes MPI "running", and read after the Acquire load of it
    /// (`st`).
    init_pthread: AtomicUsize,
    /// The `RefCell`'s flag at byte 24, the state from byte 32: the
    /// communicator table's first entry and vector header end the line.
    state: RefCell<Option<State>>,
}
// SAFETY: the state is only ever touched by the thread that initialized MPI:
// `st()` checks the calling thread against INIT_THREAD before borrowing, and
// `install`/`take` are called from MPI_Init/MPI_Finalize on that thread. The
// other fields are atomics.
unsafe impl Sync for Global {}
/// The library's state and the words every call reads first.
static STATE: Global = Global {
    phase: AtomicU8::new(0),
    serialized: AtomicBool::new(false),
    err_comm: AtomicI32::new(MPI_COMM_WORLD),
    owner: AtomicUsize::new(0),
    init_pthread: AtomicUsize::new(0),
    state: RefCell::new(None),
};

/// The right of one thread at a time to be inside MPI, under
/// `MPI_THREAD_SERIALIZED` (see `Global::serialized`): taken on entry to an
/// outermost MPI call, given back when it returns. The Acquire of the take
/// and the Release of the give-back order one thread's use of the library's
/// state before the next thread's, which is what makes the state (plain,
/// single-threaded data) safe to hand from thread to thread. Under
/// `MPI_THREAD_FUNNELED` (the default) the initializing thread holds it for
/// good and taking it costs one load of a flag.
pub(crate) struct Token(bool);

impl Token {
    /// Takes the token for this call. `Err` if another thread is inside MPI.
    #[inline(always)]
    pub(crate) fn enter() -> Result<Token, ()> {
        // Relaxed: see `Global::owner`. Not `is_owner`: any owner means
        // `MPI_THREAD_FUNNELED`, which needs no token; a call from another
        // thread is refused by `st` (and the calls that do not use the state
        // may be made from any thread, as before `MPI_Init`).
        if STATE.owner.load(Ordering::Relaxed) != 0 {
            return Ok(Token(false));
        }
        Self::enter_slow()
    }

    #[cold]
    #[inline(never)]
    fn enter_slow() -> Result<Token, ()> {
        // Relaxed: set once in MPI_Init_thread, before the Release store of
        // `phase` that every call's Acquire load (in `st`) pairs with.
        if !STATE.serialized.load(Ordering::Relaxed) {
            return Ok(Token(false));
        }
        Self::take()
    }

    fn take() -> Result<Token, ()> {
        let me = kumi::raw::thread_id();
        // Relaxed: only this thread stores its own id there.
        if STATE.init_pthread.load(Ordering::Relaxed) == me {
            return Ok(Token(false)); // a call made inside a call of ours
        }
        // Acquire: see everything the previous holder did (its Release).
        match STATE
            .init_pthread
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(Token(true)),
            Err(_) => Err(()),
        }
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        if self.0 {
            // Release: hands this call's effects to the next holder.
            STATE.init_pthread.store(0, Ordering::Release);
        }
    }
}

/// Switches to `MPI_THREAD_SERIALIZED` (in `MPI_Init_thread`): from now on
/// each call takes the token, and the initializing thread gives it up.
pub(crate) fn set_serialized() {
    STATE.serialized.store(true, Ordering::Relaxed);
    clear_owner();
    // Release: the initialization's effects go to the next holder.
    STATE.init_pthread.store(0, Ordering::Release);
}

/// The thread level in force.
pub(crate) fn serialized() -> bool {
    STATE.serialized.load(Ordering::Relaxed)
}

pub(crate) fn on_init_thread() -> bool {
    // Relaxed: see `Global::init_pthread`.
    let t = STATE.init_pthread.load(Ordering::Relaxed);
    t != 0 && t == kumi::raw::thread_id()
}

pub(crate) fn install(s: State) {
    *STATE.state.borrow_mut() = Some(s);
}

pub(crate) fn take() -> Option<State> {
    STATE.state.borrow_mut().take()
}

/// The state, for a call made between init and finalize on the init thread.
///
/// Inlined into every call, with the refusals out of line: returned from a
/// function of its own, the borrow came back through memory and was loaded
/// in wider words than it was stored in, which the processor cannot forward
/// and waits for (the same holds for the other helpers every call makes:
/// see `crate::guard`).
#[inline(always)]
pub(crate) fn st() -> R<RefMut<'static, State>> {
    if !is_owner() {
        return st_checked();
    }
    let Ok(b) = STATE.state.try_borrow_mut() else {
        return reentered();
    };
    // SAFETY: the owner finds the state installed: `set_owner` runs after
    // `install` and `clear_owner` before `take`, all on the owner's thread,
    // the only one that finds its id in `Global::owner`.
    Ok(RefMut::map(b, |s| unsafe { s.as_mut().unwrap_unchecked() }))
}

/// The state to read, for the fast path of a call that cannot block
/// (`MPI_Isend`, `MPI_Irecv` of a predefined type), without the `RefCell`'s
/// flag: taking and giving back the flag are two stores per call, and such
/// a call is made by the thousand in a row, each store waiting in the
/// processor's store buffer behind the previous message's stores into the
/// ring (docs/BENCHMARKS.md, session 18). `None` when the caller is not
/// `Global::owner` or the state is borrowed: the call's general path takes
/// [`st`], which says why it refuses.
///
/// # Safety
/// The caller must not borrow the state ([`st`], or anything that calls
/// it: another MPI function, a user callback) while it holds the
/// reference; the lifetime is the caller's to end.
#[inline(always)]
pub(crate) unsafe fn st_ref() -> Option<&'static State> {
    if !is_owner() {
        return None;
    }
    // SAFETY: the state is not borrowed mutably now (checked), and the
    // caller's contract keeps it so while the reference lives; only the
    // owner's thread touches the state (see `Global`'s Sync).
    let s = unsafe { STATE.state.try_borrow_unguarded() }.ok()?;
    // SAFETY: the owner finds the state installed, as in `st`.
    Some(unsafe { s.as_ref().unwrap_unchecked() })
}

/// [`st`] for a caller other than `Global::owner`: under
/// `MPI_THREAD_SERIALIZED`, or refused.
#[inline(never)]
fn st_checked() -> R<RefMut<'static, State>> {
    // Acquire pairs with the Release store at the end of MPI_Init: a thread that
    // sees "running" also sees INIT_THREAD set.
    if phase().load(Ordering::Acquire) != 1 || !on_init_thread() {
        return refused();
    }
    match STATE.state.try_borrow_mut() {
        Ok(b) => RefMut::filter_map(b, |s| s.as_mut()).or_else(|_| not_initialized()),
        Err(_) => reentered(),
    }
}

/// Whether the caller is `Global::owner`: MPI runs, under
/// `MPI_THREAD_FUNNELED`, and this is its thread.
#[inline(always)]
fn is_owner() -> bool {
    // Relaxed: see `Global::owner`.
    STATE.owner.load(Ordering::Relaxed) == kumi::raw::thread_id()
}

/// Makes the calling thread, which has just started MPI (the state
/// installed, `phase` running), `Global::owner`: MPI starts under
/// `MPI_THREAD_FUNNELED`, and `MPI_Init_thread` asking for more clears the
/// owner after ([`set_serialized`]).
pub(crate) fn set_owner() {
    // Relaxed: see `Global::owner`.
    STATE.owner.store(kumi::raw::thread_id(), Ordering::Relaxed);
}

/// Ends the fast path of [`is_owner`] (at `MPI_Finalize`, or when
/// `MPI_Init_thread` switches to `MPI_THREAD_SERIALIZED`).
pub(crate) fn clear_owner() {
    // Relaxed: see `Global::owner`.
    STATE.owner.store(0, Ordering::Relaxed);
}

/// Why [`st`] refuses a call: MPI is not running, or this is not its thread.
#[cold]
#[inline(never)]
fn refused<T>() -> R<T> {
    // Acquire: see `st`.
    match phase().load(Ordering::Acquire) {
        0 => err(MPI_ERR_OTHER, "MPI is not initialized: call MPI_Init first"),
        2 => err(MPI_ERR_OTHER, "MPI has been finalized"),
        _ if serialized() => err(
            MPI_ERR_OTHER,
            "called while another thread is inside MPI; kumi provides \
             MPI_THREAD_SERIALIZED: one thread at a time",
        ),
        _ => err(
            MPI_ERR_OTHER,
            "called from a thread other than the one that initialized MPI; kumi provides \
             MPI_THREAD_FUNNELED unless MPI_Init_thread asks for more: only the main \
             thread may make MPI calls",
        ),
    }
}

#[cold]
#[inline(never)]
fn reentered<T>() -> R<T> {
    err(
        MPI_ERR_INTERN,
        "MPI called from inside a callback of another MPI call",
    )
}

#[cold]
#[inline(never)]
fn not_initialized<T>() -> R<T> {
    err(MPI_ERR_OTHER, "MPI is not initialized")
}

impl State {
    pub fn new(universe: Universe, world: Comm, selfc: Comm) -> State {
        let mut comms = Slab::new(NEW_COMM, FIXED_COMMS);
        for (h, c, n) in [
            (MPI_COMM_WORLD, world, "MPI_COMM_WORLD"),
            (MPI_COMM_SELF, selfc, "MPI_COMM_SELF"),
        ] {
            comms.set_fixed(
                h,
                CommEntry {
                    comm: c,
                    inter: None,
                    inter_local: MPI_COMM_NULL,
                    errh: MPI_ERRORS_ARE_FATAL,
                    attrs: HashMap::new(),
                    cart: None,
                    graph: None,
                    name: n.into(),
                },
            );
        }
        let mut groups = HashMap::new();
        groups.insert(MPI_GROUP_EMPTY, Vec::new());
        let mut infos = HashMap::new();
        infos.insert(MPI_INFO_ENV, Vec::new());
        State {
            universe,
            comms,
            groups,
            types: HandleMap::default(),
            type_ctors: HashMap::new(),
            user_errors: HashMap::new(),
            builtins: RefCell::default(),
            reqs: Slab::new(NEW_REQUEST, &[]),
            msgs: HashMap::new(),
            ops: HashMap::new(),
            infos,
            keyvals: HashMap::new(),
            type_attrs: HashMap::new(),
            errhs: HashMap::new(),
            idup_errh: HashMap::new(),
            file_errhs: HashMap::new(),
            files: HashMap::new(),
            wins: HashMap::new(),
            sessions: HashMap::new(),
            partitioned: HashMap::new(),
            grequests: HashMap::new(),
            next_file: 0,
            file_null_errh: MPI_ERRORS_RETURN,
            bsend: None,
            next: 0,
        }
    }

    /// A fresh index for a program-created handle.
    pub fn fresh(&mut self, base: c_int) -> c_int {
        self.next += 1;
        // Added to the base's index bits, not or-ed with them: `NEW_TYPE`
        // starts at index 0x100 (below it are the predefined pair types),
        // and or-ing made index 0x045 and 0x145 the same handle, so the
        // 257th datatype overwrote the first one's entry.
        let (kind, first) = (base & !INDEX_BITS, base & INDEX_BITS);
        kind | (first + self.next) & INDEX_BITS
    }

    #[inline(always)]
    pub fn new_request(&mut self, e: ReqEntry, comm: c_int) -> c_int {
        self.reqs.add((e, comm))
    }

    #[inline]
    pub fn free_request(&mut self, h: c_int) {
        self.reqs.discard(h);
    }

    /// The communicator through which requests held as tickets reach the
    /// engine (every communicator of the rank shares it).
    #[inline(always)]
    pub fn engine_comm(&self) -> R<&Comm> {
        match self.comms.get(&MPI_COMM_WORLD) {
            Some(c) => Ok(&c.comm),
            None => err(MPI_ERR_INTERN, "MPI_COMM_WORLD is gone from the table"),
        }
    }

    /// The table entry of ticket `t`, an operation on communicator `comm`,
    /// whose bits do not fit a handle (see `p2p::ticket_handle`).
    #[cold]
    pub(crate) fn ticket_entry(&mut self, t: Ticket, comm: c_int) -> R<c_int> {
        let r = match self.comms.get(&comm) {
            Some(c) => RawRequest::from_ticket(&c.comm, t),
            None => {
                // The caller found the communicator a moment ago.
                return err(MPI_ERR_INTERN, format!("communicator {comm:#x} vanished"));
            }
        };
        Ok(self.new_request(ReqEntry::Active(r), comm))
    }

    /// The live ticket of handle `h`, if it is a ticket's handle: `Some(Err)`
    /// when it names no operation (spent, or never made).
    #[inline(always)]
    pub fn ticket(&self, h: c_int) -> Option<R<Ticket>> {
        let b = ticket_bits(h)?;
        Some(self.engine_comm().and_then(|c| {
            Ticket::from_bits(c, b).ok_or_else(|| MpiErr {
                class: MPI_ERR_REQUEST,
                msg: format!("{h:#x} is not a request (or it was completed already)"),
            })
        }))
    }

    /// Removes request `h` from the table (its handle is reused later).
    pub fn take_request(&mut self, h: c_int) -> Option<(ReqEntry, c_int)> {
        self.reqs.remove(&h)
    }

    pub fn comm_entry(&mut self, h: c_int) -> R<&mut CommEntry> {
        match self.comms.get_mut(&h) {
            Some(c) => {
                set_err_comm(h);
                Ok(c)
            }
            None => {
                set_err_comm(MPI_COMM_WORLD);
                Self::no_comm(h)
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn no_comm<T>(h: c_int) -> R<T> {
        match h {
            MPI_COMM_NULL => err(MPI_ERR_COMM, "the communicator is MPI_COMM_NULL"),
            _ => err(
                MPI_ERR_COMM,
                format!("{h:#x} is not a communicator (or it was freed)"),
            ),
        }
    }

    pub fn comm(&mut self, h: c_int) -> R<Comm> {
        Ok(self.comm_ref(h)?.clone())
    }

    /// The communicator behind a handle, borrowed (errors of the call go to
    /// its handler from now on).
    #[inline(always)]
    pub fn comm_ref(&self, h: c_int) -> R<&Comm> {
        match self.comms.get(&h) {
            Some(c) => {
                set_err_comm(h);
                Ok(&c.comm)
            }
            None => {
                set_err_comm(MPI_COMM_WORLD);
                Self::no_comm(h)
            }
        }
    }

    pub fn group(&self, h: c_int) -> R<&Vec<u32>> {
        match self.groups.get(&h) {
            Some(g) => Ok(g),
            None => err(
                MPI_ERR_GROUP,
                format!("{h:#x} is not a group (or it was freed)"),
            ),
        }
    }

    /// A new info object holding `kv`.
    pub fn new_info(&mut self, kv: Vec<(String, String)>) -> c_int {
        let h = self.fresh(NEW_INFO);
        self.infos.insert(h, kv);
        h
    }

    pub fn new_group(&mut self, members: Vec<u32>) -> c_int {
        if members.is_empty() {
            return MPI_GROUP_EMPTY;
        }
        let h = self.fresh(NEW_GROUP);
        self.groups.insert(h, members);
        h
    }

    /// Enters the program's error handler function `f` in `table` (of
    /// communicator, window or file handlers) under a fresh handle.
    pub fn new_errhandler<F>(
        &mut self,
        f: Option<F>,
        table: fn(&mut State) -> &mut HashMap<c_int, F>,
    ) -> R<c_int> {
        let Some(f) = f else {
            return err(MPI_ERR_ARG, "the error handler function is NULL");
        };
        let h = self.fresh(NEW_ERRH);
        table(self).insert(h, f);
        Ok(h)
    }

    /// The communicator behind a handle, for an operation on one group (a
    /// collective, a constructor): an intercommunicator is refused by name.
    pub fn intra(&mut self, h: c_int) -> R<Comm> {
        Ok(self.intra_ref(h)?.clone())
    }

    /// [`State::intra`], borrowed.
    #[inline(always)]
    pub fn intra_ref(&self, h: c_int) -> R<&Comm> {
        match self.comms.get(&h) {
            Some(e) if e.inter.is_none() => {
                set_err_comm(h);
                Ok(&e.comm)
            }
            Some(_) => {
                set_err_comm(h);
                Self::inter_refused()
            }
            None => {
                set_err_comm(MPI_COMM_WORLD);
                Self::no_comm(h)
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn inter_refused<T>() -> R<T> {
        err(
            MPI_ERR_COMM,
            "this operation on an intercommunicator is not supported by kumi yet \
             (point-to-point, MPI_Barrier, MPI_Bcast, MPI_Comm_dup and MPI_Intercomm_merge are)",
        )
    }

    /// The intercommunicator behind a handle, if it is one.
    pub fn inter(&mut self, h: c_int) -> R<Option<Rc<kumi::inter::InterComm>>> {
        Ok(self.comm_entry(h)?.inter.clone())
    }

    /// The datatype behind a handle.
    pub fn dtype(&self, h: c_int) -> R<Datatype> {
        if let Some(d) = self.builtins.borrow().get(&h) {
            return Ok(d.clone());
        }
        if let Some(d) = make_builtin(h) {
            self.builtins.borrow_mut().insert(h, d.clone());
            return Ok(d);
        }
        match self.types.get(&h) {
            Some((d, _)) => Ok(d.clone()),
            None if h == MPI_DATATYPE_NULL => {
                err(MPI_ERR_TYPE, "the datatype is MPI_DATATYPE_NULL")
            }
            None => err(
                MPI_ERR_TYPE,
                format!("{h:#x} is not a datatype (or it was freed)"),
            ),
        }
    }
}

thread_local! {
    /// Built-in types for lookups without the state (status queries after
    /// finalize): a thread-local costs a call into the dynamic linker per
    /// access in a shared library, so calls with the state use its cache.
    static BUILTIN: RefCell<HandleMap<Datatype>> = RefCell::new(HandleMap::default());
}

/// Builds the layout of a predefined datatype: MPICH encodes the size of a
/// basic type in bits 8-15; the five pair types for MINLOC/MAXLOC are laid
/// out as C structs.
fn make_builtin(h: c_int) -> Option<Datatype> {
    let u = h as u32;
    if u & 0xff00_0000 == 0x4c00_0000 {
        let size = ((u >> 8) & 0xff) as usize;
        return Some(match h {
            MPI_2INT => Datatype::basic_runs(&[(0, 4), (4, 4)], 8),
            // A complex number aligns as its parts (`double _Complex`: 8),
            // which decides the padding of structures holding one.
            MPI_C_FLOAT_COMPLEX
            | MPI_C_DOUBLE_COMPLEX
            | MPI_C_LONG_DOUBLE_COMPLEX
            | MPI_CXX_FLOAT_COMPLEX
            | MPI_CXX_DOUBLE_COMPLEX
            | MPI_CXX_LONG_DOUBLE_COMPLEX
            | MPI_COMPLEX
            | MPI_DOUBLE_COMPLEX
            | MPI_COMPLEX8
            | MPI_COMPLEX16
            | MPI_COMPLEX32 => Datatype::basic_aligned(size, (size / 2).min(16), u),
            _ => Datatype::basic(size, u),
        });
    }
    Some(match h {
        MPI_FLOAT_INT => Datatype::basic_runs(&[(0, 4), (4, 4)], 8),
        MPI_DOUBLE_INT => Datatype::basic_runs(&[(0, 8), (8, 4)], 16),
        MPI_LONG_INT => Datatype::basic_runs(&[(0, 8), (8, 4)], 16),
        MPI_SHORT_INT => Datatype::basic_runs(&[(0, 2), (4, 4)], 8),
        MPI_LONG_DOUBLE_INT => Datatype::basic_runs(&[(0, 16), (16, 4)], 32),
        _ => return None,
    })
}

/// A predefined datatype, made once per thread (see [`State::dtype`] for the
/// lookup calls between init and finalize make).
pub(crate) fn builtin_type(h: c_int) -> Option<Datatype> {
    BUILTIN.with(|b| {
        if let Some(d) = b.borrow().get(&h) {
            return Some(d.clone());
        }
        let d = make_builtin(h)?;
        b.borrow_mut().insert(h, d.clone());
        Some(d)
    })
}

/// Hands an error to the error handler of communicator `comm`; returns the
/// class if the handler returns.
pub(crate) fn handle_error(name: &str, comm: c_int, e: MpiErr) -> c_int {
    // Errors of file calls go to the file's handler (see `crate::file`).
    let file = crate::file::err_target(comm);
    let (errh, user, file_user, rank) = match st() {
        Ok(mut s) => {
            let errh = match file {
                Some(i) => s.files.get(&i).map_or(s.file_null_errh, |f| f.errh),
                None if crate::win::err_target(comm) => {
                    s.wins.get(&comm).map_or(MPI_ERRORS_ARE_FATAL, |w| w.errh)
                }
                None if crate::session::err_target(comm) => s
                    .sessions
                    .get(&comm)
                    .copied()
                    .unwrap_or(MPI_ERRORS_ARE_FATAL),
                None => s.comms.get(&comm).map_or(MPI_ERRORS_ARE_FATAL, |c| c.errh),
            };
            let user = s.errhs.get(&errh).copied();
            let file_user = s.file_errhs.get(&errh).copied();
            let rank = s.comm(MPI_COMM_WORLD).map_or(0, |c| c.rank());
            (errh, user, file_user, Some(rank))
        }
        Err(_) => (MPI_ERRORS_ARE_FATAL, None, None, None),
    };
    if errh == MPI_ERRORS_RETURN {
        return e.class;
    }
    if let (Some(f), Some(i)) = (file_user, file) {
        let mut fh = crate::file::handle(i);
        let mut code = e.class;
        // SAFETY: the program registered `f` as an MPI_File_errhandler_function,
        // which takes pointers to the file handle and the error code.
        unsafe { f(&mut fh, &mut code) };
        return e.class;
    }
    if let Some(f) = user {
        let mut c = comm;
        let mut code = e.class;
        // SAFETY: the program registered `f` as an MPI_Comm_errhandler_function,
        // which takes pointers to the communicator and the error code.
        unsafe { f(&mut c, &mut code) };
        return e.class;
    }
    let who = match (rank, phase().load(Ordering::Acquire)) {
        (Some(r), _) => format!("on rank {r}"),
        (None, 0) => "before MPI_Init completed".to_string(),
        (None, 1) => match std::env::var("KUMI_RANK") {
            Ok(r) => format!("on rank {r}, on a thread that may not call MPI now"),
            Err(_) => "on a thread that may not call MPI now".to_string(),
        },
        (None, _) => "during or after MPI_Finalize".to_string(),
    };
    let msg = format!("{name} {who}: {} ({})", e.msg, class_name(e.class));
    match st() {
        Ok(s) => s.universe.abort(e.class.max(1), &msg),
        Err(_) => {
            eprintln!("kumi: {msg}");
            std::process::exit(e.class.clamp(1, 255));
        }
    }
}

// ----- pointer helpers ------------------------------------------------------------

/// Writes `v` to the output argument `p`.
#[inline(always)]
pub(crate) fn out<T>(p: *mut T, what: &str, v: T) -> R<()> {
    if p.is_null() {
        return null_out(what);
    }
    // SAFETY: not null; the MPI standard makes the caller pass a pointer to a
    // writable object of this type.
    unsafe { p.write(v) };
    Ok(())
}

#[cold]
#[inline(never)]
fn null_out(what: &str) -> R<()> {
    err(MPI_ERR_ARG, format!("the output argument `{what}` is NULL"))
}

/// Reads the input argument `p`.
#[inline(always)]
pub(crate) fn read<T: Copy>(p: *const T, what: &str) -> R<T> {
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("the argument `{what}` is NULL"));
    }
    // SAFETY: not null; the caller passes a pointer to a readable object.
    Ok(unsafe { p.read() })
}

/// An input array of `n` elements.
pub(crate) fn slice<'a, T>(p: *const T, n: c_int, what: &str) -> R<&'a [T]> {
    if n < 0 {
        return err(
            MPI_ERR_COUNT,
            format!("the length of `{what}` is negative ({n})"),
        );
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("the array `{what}` is NULL"));
    }
    // SAFETY: the standard makes the caller pass an array of `n` elements.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// An output array of `n` elements.
pub(crate) fn slice_mut<'a, T>(p: *mut T, n: c_int, what: &str) -> R<&'a mut [T]> {
    if n < 0 {
        return err(
            MPI_ERR_COUNT,
            format!("the length of `{what}` is negative ({n})"),
        );
    }
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("the array `{what}` is NULL"));
    }
    // SAFETY: the standard makes the caller pass an array of `n` writable elements.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n as usize) })
}

/// Copies `s` into the C string buffer `p` of `cap` bytes (NUL-terminated);
/// writes its length to `len`.
pub(crate) fn out_str(p: *mut std::ffi::c_char, cap: usize, len: *mut c_int, s: &str) -> R<()> {
    if p.is_null() {
        return err(MPI_ERR_ARG, "the string buffer is NULL");
    }
    let n = s.len().min(cap.saturating_sub(1));
    // SAFETY: the standard makes the caller pass a buffer of at least `cap`
    // bytes; we write `n + 1 <= cap`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), p as *mut u8, n);
        *p.add(n) = 0;
    }
    if !len.is_null() {
        out(len, "resultlen", n as c_int)?;
    }
    Ok(())
}

/// Reads a C string argument.
pub(crate) fn in_str(p: *const std::ffi::c_char, what: &str) -> R<String> {
    if p.is_null() {
        return err(MPI_ERR_ARG, format!("the string `{what}` is NULL"));
    }
    // SAFETY: the standard makes the caller pass a NUL-terminated string.
    Ok(unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned())
}

/// Whether a status pointer asks for the status (not NULL or MPI_STATUS_IGNORE).
#[inline(always)]
pub(crate) fn wants(p: *mut MPI_Status) -> bool {
    !p.is_null() && p as usize != STATUS_IGNORE
}

#[inline(always)]
pub(crate) fn status_of(s: &Status, error: c_int) -> MPI_Status {
    let bytes = s.bytes as u64;
    MPI_Status {
        count_lo: bytes as u32 as c_int,
        count_hi_and_cancelled: (((bytes >> 32) as c_int) << 1) | s.cancelled as c_int,
        MPI_SOURCE: s.source,
        MPI_TAG: s.tag,
        MPI_ERROR: error,
    }
}

/// The status of a completed operation with no message (a send, `MPI_PROC_NULL`,
/// a null request): source `MPI_ANY_SOURCE`, tag `MPI_ANY_TAG`, count 0.
#[inline(always)]
pub(crate) fn empty_status() -> MPI_Status {
    MPI_Status {
        count_lo: 0,
        count_hi_and_cancelled: 0,
        MPI_SOURCE: MPI_ANY_SOURCE,
        MPI_TAG: MPI_ANY_TAG,
        MPI_ERROR: MPI_SUCCESS,
    }
}

#[inline(always)]
pub(crate) fn put_status(p: *mut MPI_Status, s: MPI_Status) {
    if wants(p) {
        // SAFETY: not null or MPI_STATUS_IGNORE: the caller passed a status.
        unsafe { p.write(s) };
    }
}

/// Size in bytes recorded in a status.
pub(crate) fn status_bytes(s: &MPI_Status) -> u64 {
    (s.count_lo as u32 as u64) | (((s.count_hi_and_cancelled as u32 as u64) >> 1) << 32)
}

/// Checks a count argument.
#[inline(always)]
pub(crate) fn count(n: c_int) -> R<usize> {
    if n < 0 {
        return negative_count(n);
    }
    Ok(n as usize)
}

#[cold]
#[inline(never)]
fn negative_count(n: c_int) -> R<usize> {
    err(MPI_ERR_COUNT, format!("count {n} is negative"))
}
