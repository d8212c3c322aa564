//! The library's state between `MPI_Init` and `MPI_Finalize`: the universe,
//! and the tables that map integer handles onto runtime objects.
//!
//! - [`entries`]: what the tables hold (communicator, request, keyval and
//!   datatype entries; the C callback types);
//! - [`slab`]: the handle tables themselves;
//! - [`token`]: which thread may use the state now, and getting at it;
//! - [`lent`]: what a callback of the program may ask about while the call
//!   running it holds the state;
//! - [`ptr`]: arguments from C (pointers, slices, strings, statuses);
//! - here: the [`State`], its lookups, the predefined datatypes, and what an
//!   error does ([`handle_error`]).
//!
//! A cycle remains between this module and the object modules (`file`,
//! `win`, `part`, `session`): the state holds their entries and routes an
//! error to the handler of the object it concerns, and they reach the state
//! through [`st`]. Entry tables that each object module registers (as the
//! runtime's services register frame handlers) would cut it.

mod entries;
mod lent;
mod ptr;
mod slab;
mod token;

pub(crate) use entries::*;
pub(crate) use lent::*;
pub(crate) use ptr::*;
pub(crate) use slab::*;
pub(crate) use token::*;

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
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::ThreadId;

/// `repr(C)`, communicators first: every call looks one up, and in this
/// order the table's header shares a cache line with the `RefCell` flag
/// that `st()` takes. A call after the rank has been descheduled (ranks
/// taking turns on a core) finds the library's state out of the cache, and
/// each line costs a miss (docs/BENCHMARKS.md, session 6).
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
    pub keyvals: HashMap<c_int, Keyval>,
    /// Attributes on datatypes (`MPI_Type_set_attr`), by type handle.
    pub type_attrs: HashMap<c_int, Attrs>,
    /// The parameterized Fortran 90 types made so far
    /// (`MPI_Type_create_f90_*`): (combiner, p or r, r) -> handle, the same
    /// handle for the same arguments; and each one's predefined type, which
    /// the reductions compute in.
    pub f90_types: HashMap<(c_int, c_int, c_int), c_int>,
    pub f90_base: HashMap<c_int, c_int>,
    pub errhs: HashMap<c_int, ErrFn>,
    /// The program's live references to each error handler it made (one
    /// from its creation, one more from each `MPI_*_get_errhandler`). A
    /// handler goes when the program holds none and no object uses it
    /// ([`State::release_errhandler`]): one freed while set on a
    /// communicator stays in force until the communicator goes (MPI 4.1
    /// section 9.3).
    pub errh_refs: HashMap<c_int, usize>,
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
    /// The program's checkpoint registrations (`kumi.h`), made on first use.
    pub ckpt: Option<Box<crate::checkpoint::Registry>>,
    next: c_int,
}

/// The predefined communicators' places in the communicator table.
const FIXED_COMMS: &[(c_int, usize)] = &[(MPI_COMM_WORLD, 0), (MPI_COMM_SELF, 1)];

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
                    attrs: Attrs::default(),
                    cart: None,
                    graph: None,
                    neighborhood: None,
                    name: n.into(),
                },
            );
        }
        let mut groups = HashMap::new();
        groups.insert(MPI_GROUP_EMPTY, Vec::new());
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
            keyvals: HashMap::new(),
            type_attrs: HashMap::new(),
            f90_types: HashMap::new(),
            f90_base: HashMap::new(),
            errhs: HashMap::new(),
            errh_refs: HashMap::new(),
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
            ckpt: None,
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
        self.errh_refs.insert(h, 1);
        Ok(h)
    }

    /// `h` handed to the program once more (by a `get_errhandler`).
    pub fn errhandler_out(&mut self, h: c_int) -> c_int {
        if self.errhs.contains_key(&h) || self.file_errhs.contains_key(&h) {
            *self.errh_refs.entry(h).or_insert(0) += 1;
        }
        h
    }

    /// The program gives up a reference to `h` (`MPI_Errhandler_free`);
    /// then every handler it holds no reference to and no communicator,
    /// window, file or session uses goes (one still in use when freed goes
    /// at a later free).
    pub fn release_errhandler(&mut self, h: c_int) -> R<()> {
        match self.errh_refs.get_mut(&h) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                self.errh_refs.remove(&h);
            }
            // A predefined handler (a reference to it freed) is no error.
            None if matches!(
                h,
                MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT
            ) => {}
            None => {
                return err(
                    MPI_ERR_ERRHANDLER,
                    format!("{h:#x} is not an error handler"),
                )
            }
        }
        let mut used: std::collections::HashSet<c_int> =
            self.comms.iter().map(|(_, c)| c.errh).collect();
        used.extend(self.wins.values().map(|w| w.errh));
        used.extend(self.files.values().map(|f| f.errh));
        used.extend(self.sessions.values().copied());
        used.extend(self.idup_errh.values().copied());
        used.insert(self.file_null_errh);
        let refs = &self.errh_refs;
        let keep = |k: &c_int| refs.contains_key(k) || used.contains(k);
        self.errhs.retain(|k, _| keep(k));
        self.file_errhs.retain(|k, _| keep(k));
        Ok(())
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
             (point-to-point, every collective MPI defines on one, blocking, nonblocking and \
             persistent, MPI_Comm_(i)dup, MPI_Comm_split, MPI_Comm_create and \
             MPI_Intercomm_merge are)",
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
            let d = d.permanent();
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
    if let Some(size) = basic_size(h) {
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

/// The size of predefined type `h` if it is one of MPICH's basic handles,
/// which carry it in bits 8-15 (extent the same, lower bound 0): read
/// without the state, for programs that ask for it element by element.
#[inline]
pub(crate) fn basic_size(h: c_int) -> Option<usize> {
    let u = h as u32;
    (u & 0xff00_0000 == 0x4c00_0000).then_some(((u >> 8) & 0xff) as usize)
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
