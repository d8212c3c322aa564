//! Communicators, groups, error handlers, Cartesian topologies and info
//! objects (their attributes are `attr.rs`'s).
//!
//! New communicators come from the runtime's collective `dup` and `split`
//! (`MPI_Comm_create`, `MPI_Comm_split_type` and `MPI_Cart_sub` are splits with
//! a computed color). A group is the list of world ranks of its members. A
//! Cartesian topology is a record (dims, periods) attached to a communicator;
//! rank order is row-major, as the standard prescribes, and `reorder` is
//! accepted and ignored (keeping ranks is a valid reordering).

use crate::consts::*;
use crate::state::{
    in_str, out, out_str, read, slice, slice_mut, st, Attrs, Cart, CommEntry, DistGraph, ErrFn,
    State,
};
use crate::{class_text, err, MpiErr, R};
use kumi::Comm;
use std::ffi::{c_char, c_int, c_void};
use std::rc::Rc;
use std::sync::atomic::Ordering;

pub(crate) fn add_comm(s: &mut State, comm: Comm, errh: c_int, cart: Option<Cart>) -> c_int {
    s.comms.add(CommEntry {
        comm,
        inter: None,
        inter_local: MPI_COMM_NULL,
        errh,
        attrs: Attrs::default(),
        cart,
        graph: None,
        neighborhood: None,
        name: String::new(),
    })
}

/// Registers a new intercommunicator (with `parent`'s error handler).
pub(crate) fn add_inter(parent: c_int, ic: kumi::inter::InterComm, newcomm: *mut c_int) -> R<()> {
    let mut s = st()?;
    let errh = s.comm_entry(parent)?.errh;
    let local = add_comm(&mut s, ic.local().clone(), errh, None);
    let h = add_comm(&mut s, ic.remote().clone(), errh, None);
    let e = s.comm_entry(h)?;
    e.inter = Some(Rc::new(ic));
    e.inter_local = local;
    drop(s);
    out(newcomm, "newcomm", h)
}

/// The intercommunicator behind a handle (an intracommunicator is an error).
pub(crate) fn inter_of(comm: c_int) -> R<Rc<kumi::inter::InterComm>> {
    let ic = st()?.inter(comm)?;
    match ic {
        Some(ic) => Ok(ic),
        None => err(MPI_ERR_COMM, "the communicator is not an intercommunicator"),
    }
}

/// Wraps the result of a split: `MPI_COMM_NULL` for a rank that took no part.
fn new_comm(parent: c_int, c: Option<Comm>, cart: Option<Cart>, newcomm: *mut c_int) -> R<()> {
    let mut s = st()?;
    let errh = s.comm_entry(parent)?.errh;
    let h = match c {
        Some(c) => add_comm(&mut s, c, errh, cart),
        None => MPI_COMM_NULL,
    };
    drop(s);
    out(newcomm, "newcomm", h)
}

pub(crate) fn world_ranks(c: &Comm) -> Vec<u32> {
    (0..c.size())
        .map(|r| c.world_rank(r).unwrap_or(usize::MAX) as u32)
        .collect()
}

fn my_world_rank(s: &mut State) -> R<u32> {
    Ok(s.comm(MPI_COMM_WORLD)?.rank() as u32)
}

/// The last of MPICH's predefined error classes (0 is `MPI_SUCCESS`;
/// `MPI_ERR_ERRHANDLER`, MPI 4.1's, is 80).
const LAST_PREDEFINED_CLASS: c_int = 80;

/// Adds an error class (`of` is `None`) or a code of class `of`; returns its
/// number, the next after every code in use, which `MPI_LASTUSEDCODE` then
/// reports.
fn add_error(of: Option<c_int>) -> R<c_int> {
    let mut s = st()?;
    if let Some(class) = of {
        let user_class = s.user_errors.get(&class).is_some_and(|e| e.0 == class);
        if !(0..=LAST_PREDEFINED_CLASS).contains(&class) && !user_class {
            return err(MPI_ERR_ARG, format!("{class} is not an error class"));
        }
    }
    // Relaxed: the value is only read back through this state's thread (the
    // attribute query), which the state's borrow already orders.
    let Some(n) = crate::attr::LASTCODE_V
        .load(Ordering::Relaxed)
        .checked_add(1)
    else {
        return err(MPI_ERR_OTHER, "no error codes are left");
    };
    s.user_errors.insert(n, (of.unwrap_or(n), String::new()));
    crate::attr::LASTCODE_V.store(n, Ordering::Relaxed);
    Ok(n)
}

fn cart_of(s: &mut State, comm: c_int) -> R<(Cart, Comm)> {
    let e = s.comm_entry(comm)?;
    match &e.cart {
        Some(c) => Ok((c.clone(), e.comm.clone())),
        None => err(
            MPI_ERR_TOPOLOGY,
            "the communicator has no Cartesian topology",
        ),
    }
}

fn graph_of(s: &mut State, comm: c_int) -> R<DistGraph> {
    match &s.comm_entry(comm)?.graph {
        Some(g) => Ok(g.clone()),
        None => err(
            MPI_ERR_TOPOLOGY,
            "the communicator has no distributed graph topology",
        ),
    }
}

/// `MPI_Dims_create`'s factorization (`kumi::topo`), its errors as `MPI_ERR_DIMS`.
fn dims_create(n: c_int, dims: &mut [c_int]) -> R<()> {
    kumi::topo::dims_create(n, dims).or_else(|m| err(MPI_ERR_DIMS, m))
}

/// `MPI_Group_incl`: the members at `rs` of `group`, in that order.
fn group_incl(group: c_int, rs: &[c_int], newgroup: *mut c_int) -> R<()> {
    let mut s = st()?;
    let g = s.group(group)?;
    let mut v = Vec::with_capacity(rs.len());
    for &r in rs {
        match g.get(r as usize) {
            Some(&w) if r >= 0 && !v.contains(&w) => v.push(w),
            _ => {
                return err(
                    MPI_ERR_RANK,
                    format!(
                        "rank {r} is not in the group of {} (or is listed twice)",
                        g.len()
                    ),
                )
            }
        }
    }
    let h = s.new_group(v);
    drop(s);
    out(newgroup, "newgroup", h)
}

/// `MPI_Group_excl`: the members of `group` but those at `rs`, in order.
fn group_excl(group: c_int, rs: &[c_int], newgroup: *mut c_int) -> R<()> {
    let mut s = st()?;
    let g = s.group(group)?;
    for &r in rs {
        if r < 0 || r as usize >= g.len() {
            return err(
                MPI_ERR_RANK,
                format!("rank {r} is not in the group of {}", g.len()),
            );
        }
    }
    let v: Vec<u32> = g
        .iter()
        .enumerate()
        .filter(|(i, _)| !rs.contains(&(*i as c_int)))
        .map(|(_, &w)| w)
        .collect();
    let h = s.new_group(v);
    drop(s);
    out(newgroup, "newgroup", h)
}

/// The ranks of `n` (first, last, stride) triplets, in order. A stride of 0,
/// or one that walks away from `last`, is refused (the range would be
/// endless or meaningless); so is a list longer than any group can be.
fn expand_ranges(ranges: *const [c_int; 3], n: c_int) -> R<Vec<c_int>> {
    let mut v = Vec::new();
    for &[first, last, stride] in slice(ranges, n, "ranges")? {
        if stride == 0
            || (i64::from(last) - i64::from(first)).signum() * i64::from(stride.signum()) < 0
        {
            return err(
                MPI_ERR_ARG,
                format!("range ({first}, {last}, {stride}): the stride must be nonzero and lead from first to last"),
            );
        }
        let mut r = first as i64;
        while (stride > 0 && r <= last as i64) || (stride < 0 && r >= last as i64) {
            if v.len() >= 1 << 24 {
                return err(MPI_ERR_ARG, "the ranges name more than 2^24 ranks");
            }
            v.push(r as c_int);
            r += stride as i64;
        }
    }
    Ok(v)
}

/// The result of calling another MPI function from inside one: its error
/// (already reported by that call's handler) as this call's.
fn ok_or_class(rc: c_int) -> R<()> {
    if rc == MPI_SUCCESS {
        Ok(())
    } else {
        err(rc, "the call it stands for failed")
    }
}

/// A group (of world ranks) as ranks of communicator `comm`: the
/// communicator, each member's rank in it, and this rank's place in the
/// group (`None` outside it). A member outside the communicator is an error.
fn group_in(comm: c_int, group: c_int) -> R<(Comm, Vec<usize>, Option<usize>)> {
    let (c, members, me) = {
        let mut s = st()?;
        let c = s.intra(comm)?;
        let me = my_world_rank(&mut s)?;
        (c, s.group(group)?.clone(), me)
    };
    let ranks = world_ranks(&c);
    let mut local = Vec::with_capacity(members.len());
    for m in &members {
        match ranks.iter().position(|r| r == m) {
            Some(i) => local.push(i),
            None => {
                return err(
                    MPI_ERR_GROUP,
                    format!("world rank {m} of the group is not in the communicator"),
                )
            }
        }
    }
    let pos = members.iter().position(|&m| m == me);
    Ok((c, local, pos))
}

/// `MPI_Comm_split` on an intercommunicator (or the lookup's error `e`):
/// an intercommunicator for each color both groups have.
fn inter_split(
    e: MpiErr,
    comm: c_int,
    color: Option<u32>,
    key: c_int,
    newcomm: *mut c_int,
) -> R<()> {
    let ic = st()?.inter(comm).ok().flatten().ok_or(e)?;
    match ic.split(color, key)? {
        Some(n) => add_inter(comm, n, newcomm),
        None => out(newcomm, "newcomm", MPI_COMM_NULL),
    }
}

/// `MPI_Comm_create` on an intercommunicator: each group passes a subgroup
/// of itself, and the two subgroups (in the order of their groups) become
/// the new intercommunicator; `MPI_COMM_NULL` outside them, and everywhere
/// when either is empty.
fn inter_create(comm: c_int, group: c_int, newcomm: *mut c_int) -> R<()> {
    let ic = inter_of(comm)?;
    let (members, me) = {
        let mut s = st()?;
        let me = my_world_rank(&mut s)?;
        (s.group(group)?.clone(), me)
    };
    let local = world_ranks(ic.local());
    if let Some(m) = members.iter().find(|m| !local.contains(m)) {
        return err(
            MPI_ERR_GROUP,
            format!("world rank {m} of the group is not in the intercommunicator's local group"),
        );
    }
    let pos = members.iter().position(|&m| m == me);
    match ic.split(pos.map(|_| 0), pos.unwrap_or(0) as i32)? {
        Some(n) => add_inter(comm, n, newcomm),
        None => out(newcomm, "newcomm", MPI_COMM_NULL),
    }
}

/// `MPI_Comm_dup`: a new communicator of the same group, topology, error
/// handler and (copied) attributes.
fn comm_dup(comm: c_int, newcomm: *mut c_int) -> R<()> {
    let (c, cart, graph, inter) = {
        let mut s = st()?;
        let e = s.comm_entry(comm)?;
        (
            e.comm.clone(),
            e.cart.clone(),
            e.graph.clone(),
            e.inter.clone(),
        )
    };
    if let Some(ic) = inter {
        add_inter(comm, ic.dup()?, newcomm)?;
    } else {
        new_comm(comm, Some(c.dup()?), cart, newcomm)?;
        st()?.comm_entry(read(newcomm, "newcomm")?)?.graph = graph;
    }
    let h = read(newcomm, "newcomm")?;
    if let Err(e) = crate::attr::copy_attrs(comm, h) {
        // A copy callback failed: so does the dup, leaving nothing.
        let mut s = st()?;
        if let Some(x) = s.comms.remove(&h) {
            s.comms.remove(&x.inter_local);
        }
        drop(s);
        out(newcomm, "newcomm", MPI_COMM_NULL)?;
        return Err(e);
    }
    Ok(())
}

/// `MPI_Comm_idup`: the new handle is written at once and usable when the
/// request completes (the runtime's `Comm::idup`). Attributes are copied
/// here, with the parent's copy callbacks (which may call MPI: no wait holds
/// the library then), and given to the new communicator when it is made.
fn comm_idup(comm: c_int, newcomm: *mut c_int, request: *mut c_int) -> R<()> {
    if newcomm.is_null() || request.is_null() {
        return err(MPI_ERR_ARG, "newcomm or request is NULL");
    }
    let (c, inter, errh, cart, graph, attrs) = {
        let mut s = st()?;
        let e = s.comm_entry(comm)?;
        let attrs: Vec<(c_int, *mut c_void)> = e.attrs.iter().map(|(&k, &v)| (k, v)).collect();
        (
            e.comm.clone(),
            e.inter.clone(),
            e.errh,
            e.cart.clone(),
            e.graph.clone(),
            attrs,
        )
    };
    let attrs = crate::attr::copied_attrs(comm, attrs)?
        .into_iter()
        .collect();
    let idup = match inter {
        Some(ic) => Dup::Inter(ic.idup()?),
        None => Dup::Intra(c.idup()?),
    };
    let (h, r) = {
        let mut s = st()?;
        let h = s.comms.reserve();
        s.idup_errh.insert(h, errh);
        let pending = Idup {
            idup: Some(idup),
            made: None,
            handle: h,
            entry: Some((errh, cart, graph, attrs)),
        };
        let r = s.new_request(crate::state::ReqEntry::Coll(Box::new(pending)), comm);
        (h, r)
    };
    out(newcomm, "newcomm", h)?;
    out(request, "request", r)
}

/// What the new communicator gets besides the runtime's: error handler,
/// topology, attributes.
type IdupEntry = (c_int, Option<Cart>, Option<DistGraph>, Attrs);

/// A duplicate under way: of an intra- or an intercommunicator.
enum Dup {
    Intra(kumi::Idup),
    Inter(kumi::inter::InterIdup),
}

/// A duplicate made.
enum Made {
    Intra(Comm),
    Inter(kumi::inter::InterComm),
}

impl Dup {
    fn test(&mut self) -> kumi::Result<Option<Made>> {
        Ok(match self {
            Dup::Intra(d) => d.test()?.map(Made::Intra),
            Dup::Inter(d) => d.test()?.map(Made::Inter),
        })
    }

    fn wait(self) -> kumi::Result<Made> {
        Ok(match self {
            Dup::Intra(d) => Made::Intra(d.wait()?),
            Dup::Inter(d) => Made::Inter(d.wait()?),
        })
    }
}

/// A nonblocking duplicate behind an MPI request.
struct Idup {
    idup: Option<Dup>,
    made: Option<Made>,
    handle: c_int,
    entry: Option<IdupEntry>,
}

impl crate::state::CollPending for Idup {
    fn test(&mut self) -> kumi::Result<bool> {
        if self.made.is_none() {
            if let Some(d) = self.idup.as_mut() {
                self.made = d.test()?;
            }
        }
        Ok(self.made.is_some())
    }

    fn finish(self: Box<Self>) -> R<()> {
        err(
            MPI_ERR_INTERN,
            "MPI_Comm_idup completes only by a wait or test that holds the library",
        )
    }

    fn complete_in(mut self: Box<Self>, s: &mut State) -> (crate::MPI_Status, Option<MpiErr>) {
        let mut status = crate::state::empty_status();
        let made = match (self.made.take(), self.idup.take()) {
            (Some(c), _) => Ok(c),
            (None, Some(d)) => d.wait(),
            (None, None) => Err(kumi::Error::Protocol(
                "MPI_Comm_idup completed twice".into(),
            )),
        };
        // An error handler set on the handle meanwhile wins.
        let set = s.idup_errh.remove(&self.handle);
        match (made, self.entry.take()) {
            (Ok(made), Some((errh, cart, graph, attrs))) => {
                let errh = set.unwrap_or(errh);
                let (comm, inter, inter_local) = match made {
                    Made::Intra(c) => (c, None, MPI_COMM_NULL),
                    Made::Inter(ic) => {
                        let local = add_comm(s, ic.local().clone(), errh, None);
                        (ic.remote().clone(), Some(Rc::new(ic)), local)
                    }
                };
                s.comms.fill(
                    self.handle,
                    CommEntry {
                        comm,
                        inter,
                        inter_local,
                        errh,
                        attrs,
                        cart,
                        graph,
                        neighborhood: None,
                        name: String::new(),
                    },
                );
                (status, None)
            }
            (made, _) => {
                let e: MpiErr = match made {
                    Err(e) => e.into(),
                    Ok(_) => MpiErr {
                        class: MPI_ERR_INTERN,
                        msg: "MPI_Comm_idup completed twice".into(),
                    },
                };
                status.MPI_ERROR = e.class;
                (status, Some(e))
            }
        }
    }
}

/// The weights argument of a distributed graph constructor: `None` for
/// `MPI_UNWEIGHTED`; `MPI_WEIGHTS_EMPTY` only with no edges.
fn weights_arg(p: *const c_int, n: usize, what: &str) -> R<Option<Vec<c_int>>> {
    let unweighted = crate::misc::MPI_UNWEIGHTED.0 as *const c_int;
    let empty = crate::misc::MPI_WEIGHTS_EMPTY.0 as *const c_int;
    if p == unweighted {
        return Ok(None);
    }
    if p == empty {
        if n > 0 {
            return err(
                MPI_ERR_ARG,
                format!("{what} is MPI_WEIGHTS_EMPTY but there are {n} edges"),
            );
        }
        return Ok(Some(Vec::new()));
    }
    Ok(Some(slice(p, n as c_int, what)?.to_vec()))
}

/// The ranks of a neighbour list, checked against the communicator's size.
/// The MPI-1 graph of a communicator (`MPI_Graph_create`).
fn graph1(comm: c_int) -> R<Rc<(Vec<c_int>, Vec<c_int>)>> {
    let mut s = st()?;
    match s
        .comm_entry(comm)?
        .graph
        .as_ref()
        .and_then(|g| g.mpi1.clone())
    {
        Some(g) => Ok(g),
        None => err(
            MPI_ERR_TOPOLOGY,
            "the communicator has no graph topology (MPI_Graph_create)",
        ),
    }
}

fn graph_rank(g: &(Vec<c_int>, Vec<c_int>), rank: c_int) -> R<usize> {
    match usize::try_from(rank) {
        Ok(r) if r < g.0.len() => Ok(r),
        _ => err(
            MPI_ERR_RANK,
            format!("rank {rank} is not a node of this graph of {}", g.0.len()),
        ),
    }
}

use kumi::topo::graph_neighbors;

fn neighbor_ranks(p: *const c_int, n: c_int, size: usize, what: &str) -> R<Vec<usize>> {
    if n < 0 {
        return err(MPI_ERR_ARG, format!("{what}: a negative degree ({n})"));
    }
    slice(p, n, what)?
        .iter()
        .map(|&r| {
            if r >= 0 && (r as usize) < size {
                Ok(r as usize)
            } else {
                err(
                    MPI_ERR_RANK,
                    format!("{what}: {r} is not a rank of this communicator of {size}"),
                )
            }
        })
        .collect()
}

/// The info key of MPI 4's hardware-guided communicator splits.
const HW_RESOURCE: &str = "mpi_hw_resource_type";
/// Its one standard value: a group of processes sharing memory (a host).
const SHARED_MEMORY: &str = "mpi_shared_memory";
/// The hint of `MPIX_COMM_TYPE_NEIGHBORHOOD`: a directory.
const NBHD_DIRNAME: &str = "nbhd_common_dirname";

fn compare_members(a: &[u32], b: &[u32]) -> c_int {
    if a == b {
        return MPI_IDENT;
    }
    let mut x = a.to_vec();
    let mut y = b.to_vec();
    x.sort_unstable();
    y.sort_unstable();
    if x == y {
        MPI_SIMILAR
    } else {
        MPI_UNEQUAL
    }
}

mpi! {
    fn MPI_Comm_size / PMPI_Comm_size(comm: c_int, size: *mut c_int) {
        let n = {
            let mut s = st()?;
            let e = s.comm_entry(comm)?;
            match &e.inter {
                Some(ic) => ic.local().size(),
                None => e.comm.size(),
            }
        };
        out(size, "size", n as c_int)
    }

    fn MPI_Comm_rank / PMPI_Comm_rank(comm: c_int, rank: *mut c_int) {
        let n = st()?.comm_entry(comm)?.comm.rank();
        out(rank, "rank", n as c_int)
    }

    fn MPI_Comm_dup / PMPI_Comm_dup(comm: c_int, newcomm: *mut c_int) {
        comm_dup(comm, newcomm)
    }

    // kumi acts on no communicator hints: they are checked and ignored, and
    // MPI_Comm_get_info returns an empty info object (the standard asks for
    // the hints the implementation did not ignore).
    fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(comm: c_int, info: c_int, newcomm: *mut c_int) {
        crate::info::check(info)?;
        comm_dup(comm, newcomm)
    }

    fn MPI_Comm_idup / PMPI_Comm_idup(comm: c_int, newcomm: *mut c_int, request: *mut c_int) {
        comm_idup(comm, newcomm, request)
    }

    fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(comm: c_int, info: c_int, newcomm: *mut c_int, request: *mut c_int) {
        crate::info::check(info)?;
        comm_idup(comm, newcomm, request)
    }

    fn MPI_Comm_set_info / PMPI_Comm_set_info(comm: c_int, info: c_int) {
        let mut s = st()?;
        s.comm_entry(comm)?;
        crate::info::check(info)
    }

    fn MPI_Comm_get_info / PMPI_Comm_get_info(comm: c_int, info_used: *mut c_int) {
        let mut s = st()?;
        s.comm_entry(comm)?;
        drop(s);
        out(info_used, "info_used", crate::info::create(Vec::new()))
    }

    fn MPI_Comm_split / PMPI_Comm_split(comm: c_int, color: c_int, key: c_int, newcomm: *mut c_int) {
        let color = match color {
            MPI_UNDEFINED => None,
            c if c >= 0 => Some(c as u32),
            c => return err(MPI_ERR_ARG, format!("color {c} is negative (use MPI_UNDEFINED to take no part)")),
        };
        let c = st()?.intra(comm);
        let c = match c {
            Ok(c) => c,
            Err(e) => return inter_split(e, comm, color, key, newcomm),
        };
        let n = c.split(color, key)?;
        new_comm(comm, n, None, newcomm)
    }

    // The hardware levels kumi knows are the host (MPI's resource type
    // "mpi_shared_memory") and the whole job: MPI_COMM_TYPE_SHARED and the
    // MPI 4 guided split with that resource type split by host; an
    // unguided split does too when that makes the group smaller, and says
    // so in the info; MPICH's MPIX_COMM_TYPE_NEIGHBORHOOD with the hint
    // `nbhd_common_dirname` groups the ranks that share that directory
    // (`kumi::Comm::split_by_directory`); anything else (other libraries'
    // own split types and hints included) gives MPI_COMM_NULL, as the
    // standard asks of a level the implementation does not know. On an
    // intercommunicator, the ranks of one host in both groups form an
    // intercommunicator.
    fn MPI_Comm_split_type / PMPI_Comm_split_type(comm: c_int, split_type: c_int, key: c_int, info: c_int, newcomm: *mut c_int) {
        let (c, addr, resource, dirname) = {
            let mut s = st()?;
            crate::info::check(info)?;
            let value = |key: &str| {
                crate::info::table().entry(info).ok().and_then(|kv| {
                    kv.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
                })
            };
            let (resource, dirname) = (value(HW_RESOURCE), value(NBHD_DIRNAME));
            s.comm_entry(comm)?;
            (s.intra(comm), s.universe.data_address().map(|a| a.ip()), resource, dirname)
        };
        if split_type == MPIX_COMM_TYPE_NEIGHBORHOOD {
            // The ranks that share the directory the hint names (MPICH's
            // extension; no other hint of it is known: no split).
            if let Ok(c) = &c {
                let n = c.split_by_directory(dirname.as_deref().map(std::path::Path::new), key)?;
                return new_comm(comm, n, None, newcomm);
            }
        }
        // A host is its name plus the address its ranks are reached at
        // (test hosts made of network namespaces share a name).
        let host = || {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            kumi::hostname().hash(&mut h);
            addr.hash(&mut h);
            Some((h.finish() & 0x7fff_ffff) as u32)
        };
        let color = match split_type {
            MPI_UNDEFINED => None,
            MPI_COMM_TYPE_SHARED | MPI_COMM_TYPE_HW_UNGUIDED => host(),
            MPI_COMM_TYPE_HW_GUIDED if resource.as_deref() == Some(SHARED_MEMORY) => host(),
            // A type kumi does not know (another implementation's): no split.
            _ => None,
        };
        // On an intercommunicator: the ranks of a host in both groups.
        let c = match c {
            Ok(c) => c,
            Err(e) => return inter_split(e, comm, color, key, newcomm),
        };
        let mut n = c.split(color, key)?;
        if split_type == MPI_COMM_TYPE_HW_UNGUIDED {
            // Only a strictly smaller group counts (the same on every rank:
            // when one host holds the whole group, every rank sees it).
            if n.as_ref().is_some_and(|h| h.size() == c.size()) {
                n = None;
            } else if n.is_some() {
                if let Ok(kv) = crate::info::table().entry(info) {
                    kv.retain(|(k, _)| k != HW_RESOURCE);
                    kv.push((HW_RESOURCE.into(), SHARED_MEMORY.into()));
                }
            }
        }
        new_comm(comm, n, None, newcomm)
    }

    fn MPI_Comm_create / PMPI_Comm_create(comm: c_int, group: c_int, newcomm: *mut c_int) {
        // Ranks may pass different, disjoint groups (MPI 2.2): each group
        // becomes its own communicator, named by its lowest rank.
        if st()?.inter(comm)?.is_some() {
            return inter_create(comm, group, newcomm);
        }
        let (c, local, pos) = group_in(comm, group)?;
        let color = local.iter().min().map(|&m| m as u32);
        let n = c.split(pos.and(color), pos.unwrap_or(0) as i32)?;
        new_comm(comm, n, None, newcomm)
    }

    fn MPI_Comm_create_group / PMPI_Comm_create_group(comm: c_int, group: c_int, tag: c_int, newcomm: *mut c_int) {
        let (c, local, pos) = group_in(comm, group)?;
        if pos.is_none() {
            // Only members call it (the standard); a rank outside gets nothing.
            return out(newcomm, "newcomm", MPI_COMM_NULL);
        }
        let n = c.create_group(&local, tag)?;
        new_comm(comm, n, None, newcomm)
    }

    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut c_int) {
        let h = read(comm, "comm")?;
        if h == MPI_COMM_WORLD || h == MPI_COMM_SELF {
            return err(MPI_ERR_COMM, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed");
        }
        st()?.comm_entry(h)?;
        crate::attr::delete_all_attrs(h, crate::attr::comm_attrs)?;
        let mut s = st()?;
        if let Some(e) = s.comms.remove(&h) {
            // An intercommunicator's hidden local group goes with it.
            s.comms.remove(&e.inter_local);
        }
        drop(s);
        out(comm, "comm", MPI_COMM_NULL)
    }

    fn MPI_Comm_compare / PMPI_Comm_compare(comm1: c_int, comm2: c_int, result: *mut c_int) {
        let mut s = st()?;
        let a = world_ranks(&s.comm(comm1)?);
        let b = world_ranks(&s.comm(comm2)?);
        drop(s);
        let r = if comm1 == comm2 {
            MPI_IDENT
        } else {
            match compare_members(&a, &b) {
                MPI_IDENT => MPI_CONGRUENT,
                x => x,
            }
        };
        out(result, "result", r)
    }

    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: c_int, flag: *mut c_int) {
        let inter = st()?.inter(comm)?.is_some();
        out(flag, "flag", inter as c_int)
    }

    fn MPI_Comm_group / PMPI_Comm_group(comm: c_int, group: *mut c_int) {
        let mut s = st()?;
        // An intercommunicator's group is its local one.
        let c = match s.inter(comm)? {
            Some(ic) => ic.local().clone(),
            None => s.comm(comm)?,
        };
        let g = s.new_group(world_ranks(&c));
        drop(s);
        out(group, "group", g)
    }

    fn MPI_Comm_remote_size / PMPI_Comm_remote_size(comm: c_int, size: *mut c_int) {
        let n = inter_of(comm)?.remote_size();
        out(size, "size", n as c_int)
    }

    fn MPI_Comm_remote_group / PMPI_Comm_remote_group(comm: c_int, group: *mut c_int) {
        let ranks = inter_of(comm)?.remote_world_ranks().into_iter().map(|w| w as u32).collect();
        let g = st()?.new_group(ranks);
        out(group, "group", g)
    }

    fn MPI_Intercomm_create / PMPI_Intercomm_create(local_comm: c_int, local_leader: c_int, peer_comm: c_int, remote_leader: c_int, tag: c_int, newintercomm: *mut c_int) {
        let (local, peer) = {
            let mut s = st()?;
            // The peer communicator matters at the leaders only.
            let peer = s.comm(peer_comm).ok();
            (s.intra(local_comm)?, peer)
        };
        if local_leader < 0 {
            return err(MPI_ERR_RANK, format!("local_leader {local_leader} is not a rank"));
        }
        if !(0..=kumi::TAG_UB).contains(&tag) {
            return err(MPI_ERR_TAG, format!("tag {tag} is not between 0 and MPI_TAG_UB"));
        }
        // `peer_comm` and `remote_leader` are read at the local leader only
        // (MPI 4.1 section 7.6.2): elsewhere they may be anything (often
        // MPI_COMM_NULL and -1), and the runtime does not look at them.
        let leader = local.rank() == local_leader as usize;
        let (peer, remote_leader) = match peer {
            _ if !leader => (local.clone(), 0),
            Some(_) if remote_leader < 0 => {
                return err(MPI_ERR_RANK, format!("remote_leader {remote_leader} is not a rank"));
            }
            Some(p) => (p, remote_leader as usize),
            None => return err(MPI_ERR_COMM, format!("the peer communicator {peer_comm:#x} is not a communicator")),
        };
        let ic = kumi::inter::InterComm::create(&local, local_leader as usize, &peer, remote_leader, tag)?;
        add_inter(local_comm, ic, newintercomm)
    }

    fn MPI_Intercomm_merge / PMPI_Intercomm_merge(intercomm: c_int, high: c_int, newintracomm: *mut c_int) {
        let ic = inter_of(intercomm)?;
        let c = ic.merge(high != 0)?;
        new_comm(intercomm, Some(c), None, newintracomm)
    }

    // MPI_Comm_disconnect: every pending operation on the communicator is
    // complete when the ranks meet (kumi's nonblocking operations complete
    // within their own waits), then it is freed.
    fn MPI_Comm_disconnect / PMPI_Comm_disconnect(comm: *mut c_int) {
        let h = read(comm, "comm")?;
        if h == MPI_COMM_WORLD || h == MPI_COMM_SELF {
            return err(MPI_ERR_COMM, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be disconnected");
        }
        let (c, ic) = {
            let mut s = st()?;
            let e = s.comm_entry(h)?;
            (e.comm.clone(), e.inter.clone())
        };
        match ic {
            Some(ic) => ic.barrier()?,
            None => c.barrier()?,
        }
        // SAFETY: the same argument, forwarded.
        ok_or_class(unsafe { PMPI_Comm_free(comm) })
    }

    fn MPI_Comm_set_name / PMPI_Comm_set_name(comm: c_int, comm_name: *const c_char) {
        let n = in_str(comm_name, "comm_name")?;
        st()?.comm_entry(comm)?.name = n;
        Ok(())
    }

    fn MPI_Comm_get_name / PMPI_Comm_get_name(comm: c_int, comm_name: *mut c_char, resultlen: *mut c_int) {
        let n = st()?.comm_entry(comm)?.name.clone();
        out_str(comm_name, MPI_MAX_OBJECT_NAME, resultlen, &n)
    }

    fn MPI_Group_size / PMPI_Group_size(group: c_int, size: *mut c_int) {
        let n = st()?.group(group)?.len();
        out(size, "size", n as c_int)
    }

    fn MPI_Group_rank / PMPI_Group_rank(group: c_int, rank: *mut c_int) {
        let mut s = st()?;
        let me = my_world_rank(&mut s)?;
        let r = s.group(group)?.iter().position(|&m| m == me);
        drop(s);
        out(rank, "rank", r.map_or(MPI_UNDEFINED, |r| r as c_int))
    }

    fn MPI_Group_range_incl / PMPI_Group_range_incl(group: c_int, n: c_int, ranges: *const [c_int; 3], newgroup: *mut c_int) {
        let rs = expand_ranges(ranges, n)?;
        group_incl(group, &rs, newgroup)
    }

    fn MPI_Group_range_excl / PMPI_Group_range_excl(group: c_int, n: c_int, ranges: *const [c_int; 3], newgroup: *mut c_int) {
        let rs = expand_ranges(ranges, n)?;
        group_excl(group, &rs, newgroup)
    }

    fn MPI_Group_incl / PMPI_Group_incl(group: c_int, n: c_int, ranks: *const c_int, newgroup: *mut c_int) {
        group_incl(group, slice(ranks, n, "ranks")?, newgroup)
    }

    fn MPI_Group_excl / PMPI_Group_excl(group: c_int, n: c_int, ranks: *const c_int, newgroup: *mut c_int) {
        group_excl(group, slice(ranks, n, "ranks")?, newgroup)
    }

    fn MPI_Group_union / PMPI_Group_union(group1: c_int, group2: c_int, newgroup: *mut c_int) {
        let mut s = st()?;
        let mut v = s.group(group1)?.clone();
        for &w in s.group(group2)? {
            if !v.contains(&w) {
                v.push(w);
            }
        }
        let h = s.new_group(v);
        drop(s);
        out(newgroup, "newgroup", h)
    }

    fn MPI_Group_intersection / PMPI_Group_intersection(group1: c_int, group2: c_int, newgroup: *mut c_int) {
        let mut s = st()?;
        let b = s.group(group2)?.clone();
        let v: Vec<u32> = s.group(group1)?.iter().copied().filter(|w| b.contains(w)).collect();
        let h = s.new_group(v);
        drop(s);
        out(newgroup, "newgroup", h)
    }

    fn MPI_Group_difference / PMPI_Group_difference(group1: c_int, group2: c_int, newgroup: *mut c_int) {
        let mut s = st()?;
        let b = s.group(group2)?.clone();
        let v: Vec<u32> = s.group(group1)?.iter().copied().filter(|w| !b.contains(w)).collect();
        let h = s.new_group(v);
        drop(s);
        out(newgroup, "newgroup", h)
    }

    fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(group1: c_int, n: c_int, ranks1: *const c_int, group2: c_int, ranks2: *mut c_int) {
        let rs = slice(ranks1, n, "ranks1")?;
        let outv = slice_mut(ranks2, n, "ranks2")?;
        let s = st()?;
        let a = s.group(group1)?;
        let b = s.group(group2)?;
        for (i, &r) in rs.iter().enumerate() {
            outv[i] = if r == MPI_PROC_NULL {
                MPI_PROC_NULL
            } else {
                let Some(w) = a.get(r as usize).filter(|_| r >= 0) else {
                    return err(MPI_ERR_RANK, format!("rank {r} is not in group1 of {}", a.len()));
                };
                b.iter().position(|x| x == w).map_or(MPI_UNDEFINED, |p| p as c_int)
            };
        }
        Ok(())
    }

    fn MPI_Group_compare / PMPI_Group_compare(group1: c_int, group2: c_int, result: *mut c_int) {
        let s = st()?;
        let r = compare_members(s.group(group1)?, s.group(group2)?);
        drop(s);
        out(result, "result", r)
    }

    fn MPI_Group_free / PMPI_Group_free(group: *mut c_int) {
        let g = read(group, "group")?;
        if g != MPI_GROUP_EMPTY && st()?.groups.remove(&g).is_none() {
            return err(MPI_ERR_GROUP, format!("{g:#x} is not a group"));
        }
        out(group, "group", MPI_GROUP_NULL)
    }

    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: c_int, errhandler: c_int) {
        let mut s = st()?;
        let known = matches!(errhandler, MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT)
            || s.errhs.contains_key(&errhandler);
        if !known {
            return err(MPI_ERR_ARG, format!("{errhandler:#x} is not an error handler"));
        }
        if let Some(e) = s.idup_errh.get_mut(&comm) {
            // A communicator of an MPI_Comm_idup still in progress.
            *e = errhandler;
            return Ok(());
        }
        s.comm_entry(comm)?.errh = errhandler;
        Ok(())
    }

    fn MPI_Errhandler_set / PMPI_Errhandler_set(comm: c_int, errhandler: c_int) {
        // SAFETY: same arguments.
        let rc = unsafe { PMPI_Comm_set_errhandler(comm, errhandler) };
        if rc == MPI_SUCCESS { Ok(()) } else { err(rc, "setting the error handler failed") }
    }

    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: c_int, errhandler: *mut c_int) {
        let mut s = st()?;
        let e = s.comm_entry(comm)?.errh;
        let e = s.errhandler_out(e);
        drop(s);
        out(errhandler, "errhandler", e)
    }

    // The MPI-1 names, deprecated (MPI-2) and removed (MPI-3), which old
    // binaries still call.
    fn MPI_Errhandler_create / PMPI_Errhandler_create(function: Option<ErrFn>, errhandler: *mut c_int) {
        // SAFETY: the same contract as MPI_Comm_create_errhandler.
        ok_or_class(unsafe { PMPI_Comm_create_errhandler(function, errhandler) })
    }

    fn MPI_Errhandler_get / PMPI_Errhandler_get(comm: c_int, errhandler: *mut c_int) {
        // SAFETY: the same contract as MPI_Comm_get_errhandler.
        ok_or_class(unsafe { PMPI_Comm_get_errhandler(comm, errhandler) })
    }

    fn MPI_Cart_map / PMPI_Cart_map(comm: c_int, ndims: c_int, dims: *const c_int, _periods: *const c_int, newrank: *mut c_int) {
        // kumi keeps ranks in place (no reordering): the first prod(dims)
        // ranks map onto themselves.
        let d = slice(dims, ndims, "dims")?;
        if d.iter().any(|&x| x <= 0) {
            return err(MPI_ERR_DIMS, format!("dims {d:?} has an entry that is not positive"));
        }
        let c = st()?.intra(comm)?;
        let total: i64 = d.iter().map(|&x| x as i64).product();
        if total > c.size() as i64 {
            return err(MPI_ERR_DIMS, format!("the grid {d:?} has {total} cells but the communicator only {} ranks", c.size()));
        }
        let r = c.rank() as i64;
        out(newrank, "newrank", if r < total { r as c_int } else { MPI_UNDEFINED })
    }

    fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(function: Option<ErrFn>, errhandler: *mut c_int) {
        let h = st()?.new_errhandler(function, |s| &mut s.errhs)?;
        out(errhandler, "errhandler", h)
    }

    fn MPI_Errhandler_free / PMPI_Errhandler_free(errhandler: *mut c_int) {
        let h = read(errhandler, "errhandler")?;
        if h == MPI_ERRHANDLER_NULL {
            return err(MPI_ERR_ERRHANDLER, "the error handler is MPI_ERRHANDLER_NULL");
        }
        st()?.release_errhandler(h)?;
        out(errhandler, "errhandler", MPI_ERRHANDLER_NULL)
    }

    // The standard: the handler is called with the code, and the call
    // returns MPI_SUCCESS once it returns (unless it ended the job).
    fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: c_int, errorcode: c_int) {
        st()?.comm_entry(comm)?;
        let e = MpiErr { class: errorcode, msg: format!("MPI_Comm_call_errhandler raised error code {errorcode}") };
        crate::state::handle_error("MPI_Comm_call_errhandler", comm, e);
        Ok(())
    }

    fn MPI_Error_string / PMPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) {
        if (0..=LAST_PREDEFINED_CLASS).contains(&errorcode) {
            return out_str(string, MPI_MAX_ERROR_STRING, resultlen, &format!("{}: {}", crate::class_name(errorcode), class_text(errorcode)));
        }
        // An added code: its string (empty until MPI_Add_error_string).
        let text = match st()?.user_errors.get(&errorcode) {
            Some((_, t)) => t.clone(),
            None => return err(MPI_ERR_ARG, format!("{errorcode} is not an error code")),
        };
        out_str(string, MPI_MAX_ERROR_STRING, resultlen, &text)
    }

    fn MPI_Error_class / PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) {
        if (0..=LAST_PREDEFINED_CLASS).contains(&errorcode) {
            return out(errorclass, "errorclass", errorcode);
        }
        // Works before MPI_Init too (for the predefined codes above).
        let class = st().ok().and_then(|s| s.user_errors.get(&errorcode).map(|e| e.0));
        match class {
            Some(c) => out(errorclass, "errorclass", c),
            None => err(MPI_ERR_ARG, format!("{errorcode} is not an error code")),
        }
    }

    fn MPI_Add_error_class / PMPI_Add_error_class(errorclass: *mut c_int) {
        let c = add_error(None)?;
        out(errorclass, "errorclass", c)
    }

    fn MPI_Add_error_code / PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) {
        let c = add_error(Some(errorclass))?;
        out(errorcode, "errorcode", c)
    }

    fn MPI_Add_error_string / PMPI_Add_error_string(errorcode: c_int, string: *const c_char) {
        let text = in_str(string, "string")?;
        if text.len() >= MPI_MAX_ERROR_STRING {
            return err(MPI_ERR_ARG, format!("the string has {} characters; MPI_MAX_ERROR_STRING is {MPI_MAX_ERROR_STRING}", text.len()));
        }
        match st()?.user_errors.get_mut(&errorcode) {
            Some(e) => {
                e.1 = text;
                Ok(())
            }
            None => err(MPI_ERR_ARG, format!("{errorcode} is not an error class or code the program added (predefined ones keep their strings)")),
        }
    }

    fn MPI_Cart_create / PMPI_Cart_create(comm_old: c_int, ndims: c_int, dims: *const c_int, periods: *const c_int, _reorder: c_int, comm_cart: *mut c_int) {
        let d = slice(dims, ndims, "dims")?.to_vec();
        let p: Vec<bool> = slice(periods, ndims, "periods")?.iter().map(|&x| x != 0).collect();
        let c = st()?.intra(comm_old)?;
        let cart = Cart::new(d, p).or_else(|m| err(MPI_ERR_DIMS, m))?;
        let (d, total) = (&cart.dims, cart.cells());
        if total > c.size() as i64 {
            return err(MPI_ERR_DIMS, format!("the grid {d:?} has {total} cells but the communicator only {} ranks", c.size()));
        }
        let inside = (c.rank() as i64) < total;
        let n = c.split(inside.then_some(0), c.rank() as i32)?;
        new_comm(comm_old, n, Some(cart), comm_cart)
    }

    fn MPI_Cart_coords / PMPI_Cart_coords(comm: c_int, rank: c_int, maxdims: c_int, coords: *mut c_int) {
        let (cart, c) = cart_of(&mut *st()?, comm)?;
        if rank < 0 || rank as usize >= c.size() {
            return err(MPI_ERR_RANK, format!("rank {rank} is not in the grid of {} ranks", c.size()));
        }
        let v = cart.coords(rank as usize);
        let o = slice_mut(coords, maxdims.min(v.len() as c_int), "coords")?;
        o.copy_from_slice(&v[..o.len()]);
        Ok(())
    }

    fn MPI_Cart_rank / PMPI_Cart_rank(comm: c_int, coords: *const c_int, rank: *mut c_int) {
        let (cart, _) = cart_of(&mut *st()?, comm)?;
        let x = slice(coords, cart.dims.len() as c_int, "coords")?;
        match cart.rank(x) {
            Some(r) => out(rank, "rank", r),
            None => err(MPI_ERR_RANK, format!("coordinates {x:?} are outside the non-periodic grid {:?}", cart.dims)),
        }
    }

    fn MPI_Cart_shift / PMPI_Cart_shift(comm: c_int, direction: c_int, disp: c_int, rank_source: *mut c_int, rank_dest: *mut c_int) {
        let (cart, c) = cart_of(&mut *st()?, comm)?;
        if direction < 0 || direction as usize >= cart.dims.len() {
            return err(MPI_ERR_DIMS, format!("direction {direction} is not a dimension of the {}-d grid", cart.dims.len()));
        }
        let (source, dest) = cart.shift(c.rank(), direction as usize, disp);
        out(rank_source, "rank_source", source.unwrap_or(MPI_PROC_NULL))?;
        out(rank_dest, "rank_dest", dest.unwrap_or(MPI_PROC_NULL))
    }

    fn MPI_Cart_sub / PMPI_Cart_sub(comm: c_int, remain_dims: *const c_int, newcomm: *mut c_int) {
        let (cart, c) = cart_of(&mut *st()?, comm)?;
        let keep: Vec<bool> = slice(remain_dims, cart.dims.len() as c_int, "remain_dims")?.iter().map(|&x| x != 0).collect();
        // Color: the coordinates along the dropped dimensions; key: along the kept.
        let (sub, color, key) = cart.sub(c.rank(), &keep);
        let n = c.split(Some(color), key)?;
        new_comm(comm, n, Some(sub), newcomm)
    }

    fn MPI_Cart_get / PMPI_Cart_get(comm: c_int, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) {
        let (cart, c) = cart_of(&mut *st()?, comm)?;
        let n = maxdims.min(cart.dims.len() as c_int);
        let me = cart.coords(c.rank());
        let (d, p, x) = (slice_mut(dims, n, "dims")?, slice_mut(periods, n, "periods")?, slice_mut(coords, n, "coords")?);
        for i in 0..n as usize {
            d[i] = cart.dims[i];
            p[i] = cart.periods[i] as c_int;
            x[i] = me[i];
        }
        Ok(())
    }

    fn MPI_Cartdim_get / PMPI_Cartdim_get(comm: c_int, ndims: *mut c_int) {
        let (cart, _) = cart_of(&mut *st()?, comm)?;
        out(ndims, "ndims", cart.dims.len() as c_int)
    }

    fn MPI_Topo_test / PMPI_Topo_test(comm: c_int, status: *mut c_int) {
        let t = {
            let mut s = st()?;
            let e = s.comm_entry(comm)?;
            if e.cart.is_some() {
                MPI_CART
            } else if e.graph.as_ref().is_some_and(|g| g.mpi1.is_some()) {
                MPI_GRAPH
            } else if e.graph.is_some() {
                MPI_DIST_GRAPH
            } else {
                MPI_UNDEFINED
            }
        };
        out(status, "status", t)
    }

    fn MPI_Graph_create / PMPI_Graph_create(comm_old: c_int, nnodes: c_int, index: *const c_int, edges: *const c_int, _reorder: c_int, comm_graph: *mut c_int) {
        let c = st()?.intra(comm_old)?;
        let p = c.size();
        if nnodes < 0 || nnodes as usize > p {
            return err(MPI_ERR_ARG, format!("nnodes {nnodes} is not between 0 and the communicator's {p} ranks"));
        }
        let idx = slice(index, nnodes, "index")?.to_vec();
        if let Some(i) = (0..idx.len()).find(|&i| idx[i] < if i == 0 { 0 } else { idx[i - 1] }) {
            return err(MPI_ERR_ARG, format!("index[{i}] = {} is smaller than the entry before it (or negative)", idx[i]));
        }
        let nedges = idx.last().copied().unwrap_or(0);
        let edg = slice(edges, nedges, "edges")?.to_vec();
        if let Some(e) = edg.iter().find(|&&e| e < 0 || e >= nnodes) {
            return err(MPI_ERR_RANK, format!("edges: {e} is not a node of this graph of {nnodes}"));
        }
        // Nodes keep their ranks (kumi does not reorder); ranks beyond the
        // graph get MPI_COMM_NULL.
        let me = c.rank();
        let color = (me < nnodes as usize).then_some(0);
        let d = c.split(color, me as i32)?;
        new_comm(comm_old, d, None, comm_graph)?;
        if me < nnodes as usize {
            let nb = graph_neighbors(&idx, &edg, me);
            let h = read(comm_graph, "comm_graph")?;
            st()?.comm_entry(h)?.graph = Some(DistGraph {
                sources: nb.clone(),
                source_weights: None,
                dests: nb,
                dest_weights: None,
                mpi1: Some(Rc::new((idx, edg))),
            });
        }
        Ok(())
    }

    fn MPI_Graphdims_get / PMPI_Graphdims_get(comm: c_int, nnodes: *mut c_int, nedges: *mut c_int) {
        let g = graph1(comm)?;
        out(nnodes, "nnodes", g.0.len() as c_int)?;
        out(nedges, "nedges", g.1.len() as c_int)
    }

    fn MPI_Graph_get / PMPI_Graph_get(comm: c_int, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) {
        let g = graph1(comm)?;
        let (ni, ne) = (g.0.len().min(maxindex.max(0) as usize), g.1.len().min(maxedges.max(0) as usize));
        slice_mut(index, ni as c_int, "index")?.copy_from_slice(&g.0[..ni]);
        slice_mut(edges, ne as c_int, "edges")?.copy_from_slice(&g.1[..ne]);
        Ok(())
    }

    fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(comm: c_int, rank: c_int, nneighbors: *mut c_int) {
        let g = graph1(comm)?;
        let r = graph_rank(&g, rank)?;
        out(nneighbors, "nneighbors", graph_neighbors(&g.0, &g.1, r).len() as c_int)
    }

    fn MPI_Graph_neighbors / PMPI_Graph_neighbors(comm: c_int, rank: c_int, maxneighbors: c_int, neighbors: *mut c_int) {
        let g = graph1(comm)?;
        let r = graph_rank(&g, rank)?;
        let nb = graph_neighbors(&g.0, &g.1, r);
        let n = nb.len().min(maxneighbors.max(0) as usize);
        for (o, &x) in slice_mut(neighbors, n as c_int, "neighbors")?.iter_mut().zip(&nb) {
            *o = x as c_int;
        }
        Ok(())
    }

    fn MPI_Graph_map / PMPI_Graph_map(comm: c_int, nnodes: c_int, _index: *const c_int, _edges: *const c_int, newrank: *mut c_int) {
        // kumi keeps ranks in place: the first nnodes ranks are the nodes.
        let c = st()?.intra(comm)?;
        if nnodes <= 0 || nnodes as usize > c.size() {
            return err(MPI_ERR_ARG, format!("nnodes {nnodes} is not between 1 and the communicator's {} ranks", c.size()));
        }
        let r = c.rank();
        out(newrank, "newrank", if r < nnodes as usize { r as c_int } else { MPI_UNDEFINED })
    }

    fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(comm_old: c_int, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, destinations: *const c_int, destweights: *const c_int, info: c_int, _reorder: c_int, comm_dist_graph: *mut c_int) {
        let c = st()?.intra(comm_old)?;
        let p = c.size();
        let sources = neighbor_ranks(sources, indegree, p, "sources")?;
        let dests = neighbor_ranks(destinations, outdegree, p, "destinations")?;
        let graph = DistGraph {
            mpi1: None,
            source_weights: weights_arg(sourceweights, sources.len(), "sourceweights")?,
            dest_weights: weights_arg(destweights, dests.len(), "destweights")?,
            sources,
            dests,
        };
        crate::info::check(info)?;
        // Ranks keep their order (kumi does not reorder).
        let d = c.dup()?;
        new_comm(comm_old, Some(d), None, comm_dist_graph)?;
        let h = read(comm_dist_graph, "comm_dist_graph")?;
        st()?.comm_entry(h)?.graph = Some(graph);
        Ok(())
    }

    fn MPI_Dist_graph_create / PMPI_Dist_graph_create(comm_old: c_int, n: c_int, sources: *const c_int, degrees: *const c_int, destinations: *const c_int, weights: *const c_int, info: c_int, _reorder: c_int, comm_dist_graph: *mut c_int) {
        let c = st()?.intra(comm_old)?;
        let p = c.size();
        // This rank's edges: source -> destination (weight), in the order given.
        let srcs = neighbor_ranks(sources, n, p, "sources")?;
        let degs = slice(degrees, n, "degrees")?;
        if let Some(d) = degs.iter().find(|&&d| d < 0) {
            return err(MPI_ERR_ARG, format!("degrees: a negative degree ({d})"));
        }
        let total: i64 = degs.iter().map(|&d| d as i64).sum();
        let total = c_int::try_from(total).map_err(|_| MpiErr { class: MPI_ERR_ARG, msg: format!("{total} edges are too many") })?;
        let dsts = neighbor_ranks(destinations, total, p, "destinations")?;
        let w = weights_arg(weights, dsts.len(), "weights")?;
        crate::info::check(info)?;
        // Each edge goes to both ends as (0 = out-edge of the receiver, 1 =
        // in-edge; the other end; weight), 12 bytes, in the order given.
        let mut to: Vec<Vec<u8>> = vec![Vec::new(); p];
        let mut k = 0;
        for (&s, &deg) in srcs.iter().zip(degs) {
            for _ in 0..deg {
                let (d, wt) = (dsts[k], w.as_ref().map_or(1, |w| w[k]));
                for (end, kind, other) in [(s, 0u32, d), (d, 1u32, s)] {
                    to[end].extend_from_slice(&kind.to_le_bytes());
                    to[end].extend_from_slice(&(other as u32).to_le_bytes());
                    to[end].extend_from_slice(&wt.to_le_bytes());
                }
                k += 1;
            }
        }
        let send_counts: Vec<usize> = to.iter().map(Vec::len).collect();
        let mut recv_counts = vec![0usize; p];
        c.alltoall(&send_counts, &mut recv_counts)?;
        let send: Vec<u8> = to.concat();
        let mut recv = vec![0u8; recv_counts.iter().sum()];
        c.alltoallv(&send, &send_counts, &mut recv, &recv_counts)?;
        let mut graph = DistGraph { sources: Vec::new(), source_weights: None, dests: Vec::new(), dest_weights: None, mpi1: None };
        let (mut sw, mut dw) = (Vec::new(), Vec::new());
        for rec in recv.chunks_exact(12) {
            let word = |i: usize| u32::from_le_bytes(rec[4 * i..4 * i + 4].try_into().expect("4 bytes"));
            let (kind, other, wt) = (word(0), word(1) as usize, word(2) as c_int);
            if other >= p || kind > 1 {
                return err(MPI_ERR_INTERN, "a malformed edge record arrived");
            }
            if kind == 0 {
                graph.dests.push(other);
                dw.push(wt);
            } else {
                graph.sources.push(other);
                sw.push(wt);
            }
        }
        // MPI makes every rank pass MPI_UNWEIGHTED or none do.
        if w.is_some() {
            graph.source_weights = Some(sw);
            graph.dest_weights = Some(dw);
        }
        let d = c.dup()?;
        new_comm(comm_old, Some(d), None, comm_dist_graph)?;
        let h = read(comm_dist_graph, "comm_dist_graph")?;
        st()?.comm_entry(h)?.graph = Some(graph);
        Ok(())
    }

    fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(comm: c_int, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) {
        let g = graph_of(&mut *st()?, comm)?;
        out(indegree, "indegree", g.sources.len() as c_int)?;
        out(outdegree, "outdegree", g.dests.len() as c_int)?;
        out(weighted, "weighted", c_int::from(g.source_weights.is_some() || g.dest_weights.is_some()))
    }

    fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(comm: c_int, maxindegree: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxoutdegree: c_int, destinations: *mut c_int, destweights: *mut c_int) {
        let g = graph_of(&mut *st()?, comm)?;
        let unweighted = crate::misc::MPI_UNWEIGHTED.0 as *mut c_int;
        for (max, ranks, w, rp, wp, what) in [
            (maxindegree, &g.sources, &g.source_weights, sources, sourceweights, "sources"),
            (maxoutdegree, &g.dests, &g.dest_weights, destinations, destweights, "destinations"),
        ] {
            let n = ranks.len().min(max.max(0) as usize);
            let out_r = slice_mut(rp, n as c_int, what)?;
            for (o, &r) in out_r.iter_mut().zip(ranks) {
                *o = r as c_int;
            }
            if let (Some(w), false) = (w, wp == unweighted) {
                let out_w = slice_mut(wp, n as c_int, "weights")?;
                out_w.copy_from_slice(&w[..n]);
            }
        }
        Ok(())
    }

    fn MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) {
        dims_create(nnodes, slice_mut(dims, ndims, "dims")?)
    }

    // A program kumi started is never a spawned one: it has no parent.
    fn MPI_Comm_get_parent / PMPI_Comm_get_parent(parent: *mut c_int) {
        st()?;
        out(parent, "parent", MPI_COMM_NULL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_create_errors_are_mpi_err_dims() {
        let mut d = [0, 0];
        dims_create(12, &mut d).unwrap();
        assert_eq!(d, [4, 3]);
        assert_eq!(
            dims_create(10, &mut [3, 0]).unwrap_err().class,
            MPI_ERR_DIMS
        );
    }
}
