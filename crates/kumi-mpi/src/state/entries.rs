//! What the handle tables hold: the entries of communicators, requests,
//! keyvals and derived datatypes, and the C function types programs register.

use super::*;

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
    pub attrs: Attrs,
    pub cart: Option<Cart>,
    pub graph: Option<DistGraph>,
    /// Its neighbourhood collectives' pairs, once one ran
    /// ([`crate::coll::neighbor::neighbors`]).
    pub neighborhood: Option<Rc<crate::coll::neighbor::Neighborhood>>,
    pub name: String,
}

/// Fortran's attribute copy callback (`MPI_COMM_CREATE_KEYVAL` from
/// Fortran): every argument by reference, the values and the extra state
/// `INTEGER(KIND=MPI_ADDRESS_KIND)`, the flag a `LOGICAL`, the error code
/// the last argument.
pub(crate) type FortranCopyFn = unsafe extern "C" fn(
    *const c_int,
    *const c_int,
    *const i64,
    *const i64,
    *mut i64,
    *mut c_int,
    *mut c_int,
);
/// Fortran's attribute delete callback.
pub(crate) type FortranDeleteFn =
    unsafe extern "C" fn(*const c_int, *const c_int, *const i64, *const i64, *mut c_int);
/// MPI-1 Fortran's (`MPI_KEYVAL_CREATE`): the same with default `INTEGER`
/// values and extra state.
pub(crate) type Fortran1CopyFn = unsafe extern "C" fn(
    *const c_int,
    *const c_int,
    *const c_int,
    *const c_int,
    *mut c_int,
    *mut c_int,
    *mut c_int,
);
/// MPI-1 Fortran's delete callback.
pub(crate) type Fortran1DeleteFn =
    unsafe extern "C" fn(*const c_int, *const c_int, *const c_int, *const c_int, *mut c_int);

/// A keyval's callbacks, called as the language that registered them calls.
/// An attribute value is C's `void*`; from Fortran it is the integer itself.
#[derive(Clone, Copy)]
pub(crate) enum KeyvalFns {
    C(Option<CopyFn>, Option<DeleteFn>),
    Fortran(Option<FortranCopyFn>, Option<FortranDeleteFn>),
    Fortran1(Option<Fortran1CopyFn>, Option<Fortran1DeleteFn>),
}

impl KeyvalFns {
    /// Runs the copy callback for attribute `val` (keyval `keyval`, extra
    /// state `extra`) of object `obj`: the new value if the callback copies
    /// it, `None` if it does not (or there is no callback), `Err` with the
    /// callback's error code.
    ///
    /// # Safety
    /// The callbacks must be what the program registered them as.
    pub(crate) unsafe fn copy(
        self,
        obj: c_int,
        keyval: c_int,
        extra: *mut c_void,
        val: *mut c_void,
    ) -> Result<Option<*mut c_void>, c_int> {
        let mut flag: c_int = 0;
        let (rc, new) = match self {
            KeyvalFns::C(Some(f), _) => {
                let mut new: *mut c_void = std::ptr::null_mut();
                // SAFETY: the callback's convention (the caller's contract),
                // every pointer to a live local.
                let rc = unsafe { f(obj, keyval, extra, val, (&raw mut new).cast(), &mut flag) };
                (rc, new)
            }
            KeyvalFns::Fortran(Some(f), _) => {
                let (e, v, mut new, mut rc) = (extra as i64, val as i64, 0i64, 0);
                // SAFETY: as above, by Fortran's convention (all by reference).
                unsafe { f(&obj, &keyval, &e, &v, &mut new, &mut flag, &mut rc) };
                (rc, new as usize as *mut c_void)
            }
            KeyvalFns::Fortran1(Some(f), _) => {
                let (e, v, mut new, mut rc) =
                    (extra as isize as c_int, val as isize as c_int, 0, 0);
                // SAFETY: as above, with MPI-1's default integers.
                unsafe { f(&obj, &keyval, &e, &v, &mut new, &mut flag, &mut rc) };
                (rc, new as isize as *mut c_void)
            }
            _ => return Ok(None),
        };
        match rc {
            0 => Ok((flag != 0).then_some(new)),
            rc => Err(rc),
        }
    }

    /// Runs the delete callback for attribute `val` of object `obj`; `Err`
    /// with the callback's error code.
    ///
    /// # Safety
    /// As for [`KeyvalFns::copy`].
    pub(crate) unsafe fn delete(
        self,
        obj: c_int,
        keyval: c_int,
        extra: *mut c_void,
        val: *mut c_void,
    ) -> Result<(), c_int> {
        let mut rc = 0;
        match self {
            // SAFETY: the callback's convention (the caller's contract).
            KeyvalFns::C(_, Some(f)) => rc = unsafe { f(obj, keyval, val, extra) },
            KeyvalFns::Fortran(_, Some(f)) => {
                let (v, e) = (val as i64, extra as i64);
                // SAFETY: as above, every pointer to a live local.
                unsafe { f(&obj, &keyval, &v, &e, &mut rc) };
            }
            KeyvalFns::Fortran1(_, Some(f)) => {
                let (v, e) = (val as isize as c_int, extra as isize as c_int);
                // SAFETY: as above, with MPI-1's default integers.
                unsafe { f(&obj, &keyval, &v, &e, &mut rc) };
            }
            _ => {}
        }
        if rc == 0 {
            Ok(())
        } else {
            Err(rc)
        }
    }
}

/// The attributes cached on a communicator or window, by keyval, in the
/// order they were set (a program sets a handful: a list is the fastest
/// map). They are deleted the last set first: MPI 4.1 asks it of
/// `MPI_COMM_SELF`'s at `MPI_Finalize` ("Allowing User Functions at Process
/// Termination"), which libraries use to close what they opened in order.
#[derive(Default)]
pub(crate) struct Attrs(Vec<(c_int, *mut c_void)>);

impl Attrs {
    pub fn get(&self, k: &c_int) -> Option<&*mut c_void> {
        self.0.iter().find(|a| a.0 == *k).map(|a| &a.1)
    }

    pub fn contains_key(&self, k: &c_int) -> bool {
        self.get(k).is_some()
    }

    /// Sets `k` to `v`: a value set again counts as set last.
    pub fn insert(&mut self, k: c_int, v: *mut c_void) {
        self.remove(&k);
        self.0.push((k, v));
    }

    pub fn remove(&mut self, k: &c_int) -> Option<*mut c_void> {
        let i = self.0.iter().position(|a| a.0 == *k)?;
        Some(self.0.remove(i).1)
    }

    /// In the order they were set.
    pub fn iter(&self) -> impl Iterator<Item = (&c_int, &*mut c_void)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// All of them, taken out in the order to delete them: the last set
    /// first.
    pub fn take_all(&mut self) -> Vec<(c_int, *mut c_void)> {
        let mut v = std::mem::take(&mut self.0);
        v.reverse();
        v
    }
}

impl FromIterator<(c_int, *mut c_void)> for Attrs {
    fn from_iter<I: IntoIterator<Item = (c_int, *mut c_void)>>(it: I) -> Attrs {
        let mut a = Attrs::default();
        for (k, v) in it {
            a.insert(k, v);
        }
        a
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Keyval {
    pub fns: KeyvalFns,
    pub extra: *mut c_void,
    /// Freed by the program while attributes still used it: it goes with
    /// the last of them (MPI 4.1 section 7.7.2), serving them until then.
    pub freed: bool,
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
