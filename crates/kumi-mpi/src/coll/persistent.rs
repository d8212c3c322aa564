//! Persistent collectives (MPI 4, `MPI_Bcast_init`...): the arguments kept
//! at creation (arrays copied, buffers not) and a start that runs the
//! nonblocking twin with them.

use super::*;

/// How many entries each array argument of a persistent collective has,
/// by its name: the group's size for the regular collectives (only at the
/// root of a rooted one, where only the root reads them; none on the send
/// side of an `MPI_IN_PLACE` one, which ignores them), the in- and
/// out-degree for the neighbourhood ones.
pub(crate) struct ArrayLens {
    /// Entries of a send-side array (`sendcounts`, `sdispls`, `sendtypes`).
    send: Option<usize>,
    /// Entries of a receive-side array (`recvcounts`, `displs`...).
    recv: Option<usize>,
}

impl ArrayLens {
    /// `args`: the collective's arguments by name, as [`Keep::as_word`]s.
    pub(crate) fn new(name: &str, comm: c_int, args: &[(&str, Option<i64>)]) -> R<ArrayLens> {
        let arg = |n: &str| args.iter().find(|a| a.0 == n).and_then(|a| a.1);
        let root = arg("root").map(|r| r as c_int);
        let in_place = arg("sendbuf") == Some(IN_PLACE as i64);
        let mut s = st()?;
        if name.contains("Neighbor") {
            let (_, nb) = crate::coll::neighbor::neighbors(&mut s, comm)?;
            return Ok(ArrayLens {
                send: (!in_place).then_some(nb.outdegree()),
                recv: Some(nb.indegree()),
            });
        }
        let c = s.intra(comm)?;
        let (size, me) = (c.size(), c.rank() as c_int);
        // Gatherv reads its receive arrays, Scatterv its send arrays, only
        // at the root.
        let at_root = root.is_none_or(|r| r == me);
        Ok(ArrayLens {
            send: ((at_root || !name.contains("Scatterv")) && !in_place).then_some(size),
            recv: (at_root || !name.contains("Gatherv")).then_some(size),
        })
    }

    fn of(&self, arg: &str) -> Option<usize> {
        if arg.starts_with("send") || arg.starts_with("sdispl") {
            self.send
        } else {
            self.recv
        }
    }
}

/// A persistent collective's argument as kept until each start: scalars
/// and buffers as given, arrays copied.
pub(crate) trait Keep: Sized {
    type Kept: 'static;
    fn keep(self, arg: &str, lens: &ArrayLens) -> R<Self::Kept>;
    fn view(k: &Self::Kept) -> Self;
    /// The value as a word, if it is an integer or an address (`root`,
    /// `sendbuf`), to decide which arrays are read.
    fn as_word(&self) -> Option<i64> {
        None
    }
}

/// Scalars and buffers are kept as given; `word` says which of them count
/// for [`Keep::as_word`] (`root`, `sendbuf`).
macro_rules! keep_as_is {
    ($($t:ty => $word:expr),*) => {$(
        impl Keep for $t {
            type Kept = $t;
            fn keep(self, _: &str, _: &ArrayLens) -> R<$t> {
                Ok(self)
            }
            fn view(k: &$t) -> $t {
                *k
            }
            fn as_word(&self) -> Option<i64> {
                let word: fn($t) -> Option<i64> = $word;
                word(*self)
            }
        }
    )*};
}
keep_as_is!(
    i64 => |_| None,
    *mut c_void => |_| None,
    *const c_void => |p| Some(p as i64),
    c_int => |v| Some(i64::from(v))
);

/// A copied array (null stays null; an array the call does not read at
/// this rank stays the program's pointer, never read).
pub(crate) enum KeptArray<T> {
    Copy(Vec<T>),
    Raw(*const T),
}

macro_rules! keep_array {
    ($($t:ty),*) => {$(
        impl Keep for *const $t {
            type Kept = KeptArray<$t>;
            fn keep(self, arg: &str, lens: &ArrayLens) -> R<KeptArray<$t>> {
                match lens.of(arg) {
                    Some(n) if !self.is_null() => {
                        // SAFETY: the standard makes the argument an array
                        // of `n` entries at this rank (the group's size, or
                        // the neighbourhood's degree).
                        let v = unsafe { std::slice::from_raw_parts(self, n) }.to_vec();
                        Ok(KeptArray::Copy(v))
                    }
                    _ => Ok(KeptArray::Raw(self)),
                }
            }
            fn view(k: &KeptArray<$t>) -> *const $t {
                match k {
                    KeptArray::Copy(v) => v.as_ptr(),
                    KeptArray::Raw(p) => *p,
                }
            }
        }
    )*};
}
keep_array!(c_int, i64, isize);

/// A persistent collective: the communicator and `info` are checked now;
/// each `MPI_Start` then calls `begin`, which starts the nonblocking twin
/// through its own entry point (so argument errors are reported at the start,
/// by that function's name), and takes the run it registered.
fn persistent_coll(
    comm: c_int,
    info: c_int,
    request: *mut c_int,
    begin: impl Fn(*mut c_int) -> c_int + 'static,
) -> R<()> {
    need_request(request)?;
    {
        let mut s = st()?;
        s.intra(comm)?;
        crate::info::check(info)?;
    }
    let start = std::rc::Rc::new(move || -> R<Box<dyn CollPending>> {
        let mut h = MPI_REQUEST_NULL;
        let rc = begin(&mut h);
        if rc != MPI_SUCCESS {
            return err(
                rc,
                "the persistent collective could not start (its own error is reported above, or returned)",
            );
        }
        match st()?.take_request(h) {
            Some((ReqEntry::Coll(c), _)) => Ok(c),
            _ => err(MPI_ERR_INTERN, "the started collective left no request"),
        }
    });
    let h = st()?.new_request(
        ReqEntry::PersistentColl {
            start,
            active: None,
        },
        comm,
    );
    out(request, "request", h)
}

// Persistent collectives (MPI 4): each start runs the nonblocking twin.
mpi_persistent_colls! {
    MPI_Barrier_init / PMPI_Barrier_init => PMPI_Ibarrier(comm: c_int) on comm
    MPI_Bcast_init / PMPI_Bcast_init => PMPI_Ibcast(buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int) on comm
    MPI_Reduce_init / PMPI_Reduce_init => PMPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int) on comm
    MPI_Allreduce_init / PMPI_Allreduce_init => PMPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Gather_init / PMPI_Gather_init => PMPI_Igather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Gatherv_init / PMPI_Gatherv_init => PMPI_Igatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Scatter_init / PMPI_Scatter_init => PMPI_Iscatter(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Scatterv_init / PMPI_Scatterv_init => PMPI_Iscatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Allgather_init / PMPI_Allgather_init => PMPI_Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Allgatherv_init / PMPI_Allgatherv_init => PMPI_Iallgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoall_init / PMPI_Alltoall_init => PMPI_Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoallv_init / PMPI_Alltoallv_init => PMPI_Ialltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoallw_init / PMPI_Alltoallw_init => PMPI_Ialltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_int, comm: c_int) on comm
    MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init => PMPI_Ireduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init => PMPI_Ireduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Scan_init / PMPI_Scan_init => PMPI_Iscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Exscan_init / PMPI_Exscan_init => PMPI_Iexscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init => PMPI_Ineighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init => PMPI_Ineighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init => PMPI_Ineighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init => PMPI_Ineighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init => PMPI_Ineighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
}

// The large-count persistent collectives: each start runs the nonblocking
// large-count twin (which converts the copied counts afresh).
mpi_persistent_colls! {
    MPI_Bcast_init_c / PMPI_Bcast_init_c => PMPI_Ibcast_c(buffer: *mut c_void, count: i64, datatype: c_int, root: c_int, comm: c_int) on comm
    MPI_Reduce_init_c / PMPI_Reduce_init_c => PMPI_Ireduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: c_int, op: c_int, root: c_int, comm: c_int) on comm
    MPI_Allreduce_init_c / PMPI_Allreduce_init_c => PMPI_Iallreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Gather_init_c / PMPI_Gather_init_c => PMPI_Igather_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Gatherv_init_c / PMPI_Gatherv_init_c => PMPI_Igatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Scatter_init_c / PMPI_Scatter_init_c => PMPI_Iscatter_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Scatterv_init_c / PMPI_Scatterv_init_c => PMPI_Iscatterv_c(sendbuf: *const c_void, sendcounts: *const i64, displs: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, root: c_int, comm: c_int) on comm
    MPI_Allgather_init_c / PMPI_Allgather_init_c => PMPI_Iallgather_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, comm: c_int) on comm
    MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c => PMPI_Iallgatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoall_init_c / PMPI_Alltoall_init_c => PMPI_Ialltoall_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c => PMPI_Ialltoallv_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c => PMPI_Ialltoallw_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
    MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c => PMPI_Ireduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c => PMPI_Ireduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Scan_init_c / PMPI_Scan_init_c => PMPI_Iscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Exscan_init_c / PMPI_Exscan_init_c => PMPI_Iexscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: c_int, op: c_int, comm: c_int) on comm
    MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c => PMPI_Ineighbor_allgather_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c => PMPI_Ineighbor_allgatherv_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c => PMPI_Ineighbor_alltoall_c(sendbuf: *const c_void, sendcount: i64, sendtype: c_int, recvbuf: *mut c_void, recvcount: i64, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c => PMPI_Ineighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtype: c_int, comm: c_int) on comm
    MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c => PMPI_Ineighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm
}
