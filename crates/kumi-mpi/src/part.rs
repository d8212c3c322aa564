//! Partitioned communication (MPI 4: `MPI_Psend_init`, `MPI_Precv_init`,
//! `MPI_Pready*`, `MPI_Parrived`) on kumi's persistent point-to-point.
//!
//! A partitioned request is a persistent collective-style request (see
//! `ReqEntry::PersistentColl`) around one persistent send or receive of all
//! the partitions. The send goes out as one message the moment the last
//! partition is marked ready (so early partitions are not sent piecemeal,
//! but nothing waits for the wait call either); the receive is posted at
//! the start, and a partition has arrived when the whole message has.

use crate::consts::*;
use crate::state::{empty_status, out, slice, st, status_of, CollPending, ReqEntry};
use crate::{err, MPI_Status, MpiErr, R};
use kumi::raw::{RawPersistent, RawRequest, SendMode};
use kumi::Status;
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::rc::Rc;

/// The state one partitioned request's runs share with `MPI_Pready`.
pub(crate) struct Part {
    p: RawPersistent,
    send: bool,
    ready: Vec<bool>,
    started: bool,
    active: Option<RawRequest>,
    status: Option<Status>,
}

type Shared = Rc<RefCell<Part>>;

/// One run (from `MPI_Start` to its completion).
struct Run(Shared);

impl CollPending for Run {
    fn test(&mut self) -> kumi::Result<bool> {
        let mut p = self.0.borrow_mut();
        if p.status.is_some() {
            return Ok(true);
        }
        let Some(r) = p.active.as_mut() else {
            return Ok(false); // a send not yet all ready
        };
        let done = r.test()?;
        p.status = done;
        Ok(done.is_some())
    }

    fn finish(self: Box<Self>) -> R<()> {
        let (_, e) = self.complete();
        e.map_or(Ok(()), Err)
    }

    fn complete(self: Box<Self>) -> (MPI_Status, Option<MpiErr>) {
        let mut p = self.0.borrow_mut();
        p.started = false;
        let r = match (p.status.take(), p.active.take()) {
            (Some(s), _) => Ok(s),
            (None, Some(mut r)) => r.wait().map_err(MpiErr::from),
            (None, None) => Err(MpiErr {
                class: MPI_ERR_REQUEST,
                msg: "waited for a partitioned send whose partitions are not all marked ready \
                      (MPI_Pready); nothing else could mark them meanwhile"
                    .into(),
            }),
        };
        match r {
            Ok(_) if p.send => (empty_status(), None),
            Ok(s) => (status_of(&s, MPI_SUCCESS), None),
            Err(e) => {
                let mut st = empty_status();
                st.MPI_ERROR = e.class;
                (st, Some(e))
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn init(
    buf: *mut c_void,
    partitions: c_int,
    count: i64,
    dt: c_int,
    peer: c_int,
    tag: c_int,
    comm: c_int,
    info: c_int,
    request: *mut c_int,
    send: bool,
) -> R<()> {
    if request.is_null() {
        return err(MPI_ERR_ARG, "the output argument `request` is NULL");
    }
    let (c, d) = {
        let mut s = st()?;
        crate::info::check(info)?;
        (s.intra(comm)?, s.dtype(dt)?)
    };
    if partitions <= 0 || count < 0 {
        return err(MPI_ERR_ARG, format!("{partitions} partitions of {count} elements: partitions must be positive, count not negative"));
    }
    // (MPI 4.0 gives the count as an MPI_Count.)
    let n = (partitions as usize).checked_mul(count as usize).filter(|&n| n <= c_int::MAX as usize).ok_or_else(|| MpiErr { class: MPI_ERR_COUNT, msg: format!("{partitions} partitions of {count} elements exceed 2^31-1 elements, which kumi does not support yet") })?;
    if peer < 0 || peer as usize >= c.size() {
        return err(MPI_ERR_RANK, format!("rank {peer} is not a rank of this communicator of {} (partitioned communication names one peer)", c.size()));
    }
    if !(0..=kumi::TAG_UB).contains(&tag) {
        return err(
            MPI_ERR_TAG,
            format!("tag {tag} is not between 0 and MPI_TAG_UB"),
        );
    }
    let p = if send {
        RawPersistent::send(&c, buf as *const u8, n, &d, peer, tag, SendMode::Standard)
    } else {
        RawPersistent::recv(&c, buf as *mut u8, n, &d, peer, tag)
    };
    let part: Shared = Rc::new(RefCell::new(Part {
        p,
        send,
        ready: vec![false; partitions as usize],
        started: false,
        active: None,
        status: None,
    }));
    let run = part.clone();
    let start = Rc::new(move || -> R<Box<dyn CollPending>> {
        {
            let mut p = run.borrow_mut();
            p.ready.iter_mut().for_each(|r| *r = false);
            p.status = None;
            p.started = true;
            if !p.send {
                // SAFETY: MPI makes the program keep the buffer valid from the
                // start until the run completes.
                p.active = Some(unsafe { p.p.start()? });
            }
        }
        Ok(Box::new(Run(run.clone())))
    });
    let mut s = st()?;
    let h = s.new_request(
        ReqEntry::PersistentColl {
            start,
            active: None,
        },
        comm,
    );
    s.partitioned.insert(h, part);
    drop(s);
    out(request, "request", h)
}

/// The shared state of partitioned request `h`, checked to be started.
fn part_of(h: c_int, send: bool) -> R<Shared> {
    let p = st()?.partitioned.get(&h).cloned();
    match p {
        Some(p) if p.borrow().send == send && p.borrow().started => Ok(p),
        Some(p) if p.borrow().send != send => err(
            MPI_ERR_REQUEST,
            format!(
                "{h:#x} is a partitioned {}, not a {}",
                if send { "receive" } else { "send" },
                if send { "send" } else { "receive" }
            ),
        ),
        Some(_) => err(
            MPI_ERR_REQUEST,
            format!("the partitioned request {h:#x} is not started (MPI_Start)"),
        ),
        None => err(
            MPI_ERR_REQUEST,
            format!("{h:#x} is not a partitioned request"),
        ),
    }
}

/// Marks partitions ready; sends the message when the last one is.
fn ready(h: c_int, parts: impl Iterator<Item = c_int>) -> R<()> {
    let p = part_of(h, true)?;
    let mut p = p.borrow_mut();
    let n = p.ready.len();
    for i in parts {
        match usize::try_from(i).ok().filter(|&i| i < n) {
            Some(i) if !p.ready[i] => p.ready[i] = true,
            Some(_) => {
                return err(
                    MPI_ERR_ARG,
                    format!("partition {i} is already marked ready"),
                )
            }
            None => return err(MPI_ERR_ARG, format!("partition {i} is not one of the {n}")),
        }
    }
    if p.active.is_none() && p.ready.iter().all(|&r| r) {
        // SAFETY: MPI makes the program keep the buffer valid and unchanged
        // from MPI_Pready until the run completes.
        let r = unsafe { p.p.start()? };
        p.active = Some(r);
    }
    Ok(())
}

mpi! {
    fn MPI_Psend_init / PMPI_Psend_init(buf: *const c_void, partitions: c_int, count: i64, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, info: c_int, request: *mut c_int) {
        init(buf as *mut c_void, partitions, count, datatype, dest, tag, comm, info, request, true)
    }

    fn MPI_Precv_init / PMPI_Precv_init(buf: *mut c_void, partitions: c_int, count: i64, datatype: c_int, source: c_int, tag: c_int, comm: c_int, info: c_int, request: *mut c_int) {
        init(buf, partitions, count, datatype, source, tag, comm, info, request, false)
    }

    fn MPI_Pready / PMPI_Pready(partition: c_int, request: c_int) {
        ready(request, std::iter::once(partition))
    }

    fn MPI_Pready_range / PMPI_Pready_range(partition_low: c_int, partition_high: c_int, request: c_int) {
        if partition_low > partition_high {
            return err(MPI_ERR_ARG, format!("the range {partition_low}..={partition_high} is empty"));
        }
        ready(request, partition_low..=partition_high)
    }

    fn MPI_Pready_list / PMPI_Pready_list(length: c_int, array_of_partitions: *const c_int, request: c_int) {
        let list = slice(array_of_partitions, length, "array_of_partitions")?.to_vec();
        ready(request, list.into_iter())
    }

    fn MPI_Parrived / PMPI_Parrived(request: c_int, partition: c_int, flag: *mut c_int) {
        let p = part_of(request, false)?;
        let arrived = {
            let mut p = p.borrow_mut();
            if partition < 0 || partition as usize >= p.ready.len() {
                return err(MPI_ERR_ARG, format!("partition {partition} is not one of the {}", p.ready.len()));
            }
            if p.status.is_none() {
                let done = match p.active.as_mut() {
                    Some(r) => r.test()?,
                    None => None,
                };
                p.status = done;
            }
            p.status.is_some()
        };
        out(flag, "flag", arrived as c_int)
    }
}
