//! Requests: the slab that holds them (an id is a slot and its generation,
//! so a stale id finds nothing), what a request started as a ticket waits
//! for, and how a result is completed, read and freed.

use super::{log, Engine, WaitInfo};
use crate::error::{Error, Result};
use crate::request::Status;
use kumi_core::call::Call;
use kumi_core::p2p;

/// A request handle: slab index in the low 32 bits, generation in the high 32.
pub(crate) type ReqId = u64;

/// Bits of a request's slot index in a packed id ([`pack_id`]).
pub(super) const PACKED_INDEX_BITS: u32 = 16;

/// Bits of the slot's generation in a packed id: what tells a stale id from
/// a live one (it fails to unless the slot was reused a multiple of 1024
/// times since).
pub(super) const PACKED_GEN_BITS: u32 = 10;

/// Request id `id` in 26 bits (a slot index below 65536 and the low bits
/// of its generation), for handles of 32 bits that keep 6 for their kind;
/// `None` for a slot beyond that. [`Engine::unpack_id`] undoes it.
#[inline(always)]
pub(crate) fn pack_id(id: ReqId) -> Option<u32> {
    let (gen, i) = ((id >> 32) as u32, id as u32);
    (i < 1 << PACKED_INDEX_BITS)
        .then_some(((gen & ((1 << PACKED_GEN_BITS) - 1)) << PACKED_INDEX_BITS) | i)
}

/// A point-to-point request's own part: the buffer the engine keeps and
/// the protocol's state (`kumi_core::p2p`).
pub(super) enum Op {
    Send {
        buf: *const u8,
        send: p2p::Send,
    },
    Recv {
        buf: *mut u8,
        cap: usize,
        /// A rendezvous message under way into it.
        data: Option<p2p::Incoming>,
    },
}

pub(super) struct Req {
    pub(super) done: bool,
    pub(super) status: Status,
    /// Boxed: a request moves into and out of the slab once per message,
    /// and an inline error would make it half again as large (128 bytes).
    pub(super) error: Option<Box<Error>>,
    /// The user let go of the handle; free the slot on completion.
    pub(super) detached: bool,
    pub(super) op: Op,
}

impl Req {
    /// A receive into the `cap` bytes at `buf`, in flight.
    pub(super) fn recv(buf: *mut u8, cap: usize) -> Req {
        Req {
            done: false,
            status: Status::empty(),
            error: None,
            detached: false,
            op: Op::Recv {
                buf,
                cap,
                data: None,
            },
        }
    }
}

/// What an operation started as a [`crate::raw::Ticket`] waits for, kept
/// beside its request for wait reports ("MPI_Recv from rank 1, tag 7"):
/// a ticket is one word (the C library's request handle encodes it), so
/// the rest lives here.
#[derive(Clone, Copy)]
pub(crate) struct Described {
    pub send: bool,
    /// Point-to-point context id of the operation's communicator.
    pub ctx: u32,
    /// The peer's rank in that communicator, or `ANY_SOURCE`.
    pub peer: i32,
    /// The tag, or `ANY_TAG`.
    pub tag: i32,
}

impl Described {
    /// What a wait on the operation is: (call, context, peer, tag).
    pub fn what(&self) -> (Call, u32, i32, i32) {
        let call = if self.send { Call::Send } else { Call::Recv };
        (call, self.ctx, self.peer, self.tag)
    }
}

#[derive(Default)]
pub(super) struct Slab {
    /// Each slot's generation (bumped when its request is removed: an old
    /// id no longer finds the slot's next request) and request.
    pub(super) entries: Vec<(u32, Option<Req>)>,
    /// The descriptions of requests started as tickets, by slot, each with
    /// the generation of the request it describes: a slot's description is
    /// its request's only while the generations agree, so the requests
    /// not started as tickets (the Rust API's, the runtime's own) write
    /// nothing here and are not found by [`Engine::unpack_id`]. Apart from
    /// `entries`, whose slots stay as small as before tickets existed.
    pub(super) tickets: Vec<(u32, Described)>,
    pub(super) free: Vec<u32>,
    /// Requests not completed yet (for the progress thread).
    pub(super) open: usize,
}

impl Slab {
    /// Stores request `r` (described as `what`, if given: see
    /// [`Engine::describe`]); its id.
    #[inline(always)]
    pub(super) fn insert(&mut self, r: Req, what: Option<Described>) -> ReqId {
        self.open += usize::from(!r.done);
        let id = match self.free.pop() {
            Some(i) => {
                let e = &mut self.entries[i as usize];
                // A free slot holds `None` (`remove` took its request), so
                // there is nothing to drop: skip the drop glue.
                let old = e.1.replace(r);
                debug_assert!(old.is_none());
                std::mem::forget(old);
                ((e.0 as u64) << 32) | i as u64
            }
            None => {
                self.entries.push((1, Some(r)));
                (1u64 << 32) | (self.entries.len() as u64 - 1)
            }
        };
        if let Some(w) = what {
            self.describe(id, w);
        }
        id
    }

    /// Records `what` as the description of request `id` (live).
    #[inline(always)]
    pub(super) fn describe(&mut self, id: ReqId, what: Described) {
        let (gen, i) = ((id >> 32) as u32, id as u32 as usize);
        if i >= self.tickets.len() {
            self.grow_tickets(i);
        }
        self.tickets[i] = (gen, what);
    }

    #[cold]
    pub(super) fn grow_tickets(&mut self, i: usize) {
        let none = Described {
            send: false,
            ctx: u32::MAX,
            peer: -2,
            tag: -2,
        };
        self.tickets.resize(i + 1, (0, none));
    }

    /// The description of live request `id`, if it was started as a ticket.
    #[inline(always)]
    pub(super) fn described(&self, id: ReqId) -> Option<Described> {
        let (gen, i) = ((id >> 32) as u32, id as u32 as usize);
        match (self.entries.get(i), self.tickets.get(i)) {
            (Some((g, Some(_))), Some(&(dg, d))) if *g == gen && dg == gen => Some(d),
            _ => None,
        }
    }

    pub(super) fn get(&mut self, id: ReqId) -> Option<&mut Req> {
        self.get_with_open(id).map(|(r, _)| r)
    }

    /// [`Slab::get`], with the count of open requests beside it (for
    /// [`Engine::mark_done`] while the request is borrowed).
    pub(super) fn get_with_open(&mut self, id: ReqId) -> Option<(&mut Req, &mut usize)> {
        let (gen, i) = ((id >> 32) as u32, id as u32 as usize);
        match self.entries.get_mut(i) {
            Some((g, Some(r))) if *g == gen => Some((r, &mut self.open)),
            _ => None,
        }
    }

    #[inline(always)]
    pub(super) fn remove(&mut self, id: ReqId) -> Option<Req> {
        let (gen, i) = ((id >> 32) as u32, id as u32 as usize);
        match self.entries.get_mut(i) {
            Some((g, slot @ Some(_))) if *g == gen => {
                *g = g.wrapping_add(1).max(1);
                self.free.push(i as u32);
                let r = slot.take();
                self.open -= usize::from(r.as_ref().is_some_and(|r| !r.done));
                r
            }
            _ => None,
        }
    }
}

impl Engine {
    pub(super) fn finish(&mut self, id: ReqId) {
        let detached = match self.reqs.get_with_open(id) {
            Some((r, open)) => Self::mark_done(open, r),
            None => false,
        };
        if detached {
            self.drop_detached(id);
        }
    }

    /// Marks `r` complete (counted out of `open`, the slab's count of open
    /// requests); returns whether nobody waits for it any more. For callers
    /// that hold `r` already (`complete_eager`), so it is not looked up twice.
    #[inline(always)]
    pub(super) fn mark_done(open: &mut usize, r: &mut Req) -> bool {
        *open -= usize::from(!r.done);
        r.done = true;
        r.detached
    }

    /// Frees a completed request nobody waits for, logging its error if any.
    #[cold]
    pub(super) fn drop_detached(&mut self, id: ReqId) {
        if let Some(r) = self.reqs.remove(id) {
            if let Some(e) = r.error {
                log(
                    self.world_rank,
                    &format!("a request nobody waits for failed: {e}"),
                );
            }
        }
    }

    pub fn is_done(&mut self, id: ReqId) -> bool {
        self.reqs.get(id).is_none_or(|r| r.done)
    }

    /// Records what request `id`, started as a ticket, waits for (which
    /// makes [`Engine::unpack_id`] find it).
    #[inline(always)]
    pub fn describe(&mut self, id: ReqId, what: Described) {
        if self.reqs.get(id).is_some() {
            self.reqs.describe(id, what);
        }
    }

    /// What request `id` (started as a ticket) waits for, as a wait report
    /// gives it; `None` if it is not a live request started as a ticket.
    pub fn described(&self, id: ReqId) -> Option<Described> {
        self.reqs.described(id)
    }

    /// The live request, started as a ticket, whose id [`pack_id`] packed
    /// into `bits`, if there is one (a stale id names a slot freed since, or
    /// reused: its generation has moved on, unless it wrapped around
    /// [`PACKED_GEN_BITS`]).
    #[inline(always)]
    pub fn unpack_id(&self, bits: u32) -> Option<ReqId> {
        self.unpack_ticket(bits).map(|(id, _, _)| id)
    }

    /// [`Engine::unpack_id`] with, from the same lookup, whether the request
    /// is done and what it waits for.
    #[inline(always)]
    pub fn unpack_ticket(&self, bits: u32) -> Option<(ReqId, bool, Described)> {
        let i = (bits & ((1 << PACKED_INDEX_BITS) - 1)) as usize;
        let gen = bits >> PACKED_INDEX_BITS;
        let (g, Some(req)) = self.reqs.entries.get(i)? else {
            return None;
        };
        let &(tg, what) = self.reqs.tickets.get(i)?;
        (g & ((1 << PACKED_GEN_BITS) - 1) == gen && tg == *g).then_some((
            ((*g as u64) << 32) | i as u64,
            req.done,
            what,
        ))
    }

    /// [`Engine::take_result`] of a request started as a ticket: an error
    /// comes with the context of the operation's communicator.
    #[inline]
    pub fn take_outcome(&mut self, id: ReqId) -> std::result::Result<Status, (Error, u32)> {
        match self.reqs.remove(id) {
            Some(r) => match r.error {
                Some(e) => {
                    // Read after the removal: the slot's description stays
                    // until the slot's next ticket.
                    let i = id as u32 as usize;
                    let ctx = match self.reqs.tickets.get(i) {
                        Some(&(g, d)) if g == (id >> 32) as u32 => d.ctx,
                        _ => u32::MAX,
                    };
                    Err((*e, ctx))
                }
                None => Ok(r.status),
            },
            None => Ok(Status::empty()),
        }
    }

    /// The result of request `id` if it has completed, left in place (for a
    /// call that reports it without completing the request); `None` while
    /// it is in flight. A request that is not live reports an empty status.
    pub fn peek_result(&mut self, id: ReqId) -> Option<Result<Status>> {
        match self.reqs.get(id) {
            Some(r) if !r.done => None,
            Some(r) => Some(match &r.error {
                Some(e) => Err((**e).clone()),
                None => Ok(r.status),
            }),
            None => Some(Ok(Status::empty())),
        }
    }

    /// Takes the result of a completed request and frees its slot. (Not
    /// [`Engine::take_outcome`] with the context dropped: the Rust API's
    /// `wait_all` ran 18 instructions more per message that way.)
    pub fn take_result(&mut self, id: ReqId) -> Result<Status> {
        match self.reqs.remove(id) {
            Some(r) => match r.error {
                Some(e) => Err(*e),
                None => Ok(r.status),
            },
            None => Ok(Status::empty()),
        }
    }

    /// Blocks until request `id` completes and returns its result.
    pub fn wait(&mut self, info: WaitInfo, id: ReqId) -> Result<Status> {
        self.wait_until(info, |e| e.is_done(id))?;
        self.take_result(id)
    }

    /// The user dropped the handle of a request that may still be in flight.
    pub fn detach(&mut self, id: ReqId) {
        let done = match self.reqs.get(id) {
            Some(r) => {
                r.detached = true;
                r.done
            }
            None => return,
        };
        if done {
            self.reqs.remove(id);
        }
    }
}
