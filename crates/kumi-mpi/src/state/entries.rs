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
