//! The engine's side of distributed shared memory: the segments this rank
//! takes part in, each with its protocol state (`kumi_core::dsm::Node`) and
//! the memory it acts on, and the frames between them (kind `Dsm`). The
//! engine serves them whatever the application does (the progress thread
//! while it computes), so a page's home sends it and a lock's manager grants
//! it even while its own rank runs a loop: DSE's "kernel process", as part
//! of every rank's engine.
//!
//! A frame from a peer that is not a member of the segment, for a segment
//! not open here, or that the protocol refuses, is dropped with a logged
//! reason; the protocol changes nothing for a message it refuses.

use crate::engine::{log, Engine, WaitInfo};
use crate::error::{Error, Result};
use crate::progress::Guard;
use kumi_core::dsm::{Geometry, Msg, Node, Page, Prot, Store};
use kumi_core::header::{Header, Kind};
use std::collections::HashMap;

/// One segment's protocol state and memory.
struct Seg {
    node: Node,
    store: Box<dyn Store + Send>,
    g: Geometry,
    me: u32,
    /// World rank of each rank of the segment.
    members: Vec<u32>,
}

/// Every open segment, by id (its communicator's context).
#[derive(Default)]
pub(crate) struct DsmState {
    segs: HashMap<u32, Seg>,
}

/// The memory of a segment without pages (a DSM array's locks): the
/// protocol's checks refuse every page index before it reaches memory.
pub(crate) struct NoPages;

impl Store for NoPages {
    fn page(&self, _: Page) -> &[u8] {
        &[]
    }
    fn page_mut(&mut self, _: Page) -> &mut [u8] {
        &mut []
    }
    fn protect(&mut self, _: Page, _: Prot) {}
}

/// What a segment's application waits for: the lock it asked for and its
/// holder if known (`None` when it waits for something else).
pub(crate) type Awaited = Option<(u32, Option<u32>)>;

impl DsmState {
    /// Whether other ranks may wait on this one's service.
    #[inline]
    pub(crate) fn serving(&self) -> bool {
        !self.segs.is_empty()
    }

    /// Opens segment `id` shaped `g` over `store`, this rank being `me` of
    /// the world ranks `members`.
    pub(crate) fn open(
        &mut self,
        id: u32,
        g: Geometry,
        me: u32,
        members: Vec<u32>,
        mut store: Box<dyn Store + Send>,
    ) {
        let node = Node::new(g, me, &mut *store);
        let seg = Seg {
            node,
            store,
            g,
            me,
            members,
        };
        self.segs.insert(id, seg);
    }

    /// Closes segment `id` (its memory is being freed).
    pub(crate) fn close(&mut self, id: u32) {
        self.segs.remove(&id);
    }

    /// Whether segment `id`'s application waits, and for which lock.
    fn state(&self, id: u32) -> Option<(bool, Awaited)> {
        self.segs
            .get(&id)
            .map(|s| (s.node.waiting(), s.node.awaited()))
    }
}

/// Starts taking lock `lock` of segment `id` (then [`wait`]).
pub(crate) fn acquire(e: &mut Engine, id: u32, lock: u32) -> Result<()> {
    step(e, id, |s| s.node.acquire(lock, &mut *s.store), "lock", lock)
}

/// Starts releasing lock `lock` of segment `id` (then [`wait`]).
pub(crate) fn release(e: &mut Engine, id: u32, lock: u32) -> Result<()> {
    step(e, id, |s| s.node.release(lock, &mut *s.store), "lock", lock)
}

/// Starts a barrier of segment `id`'s ranks (then [`wait`]).
pub(crate) fn barrier(e: &mut Engine, id: u32) -> Result<()> {
    step(e, id, |s| s.node.barrier(&mut *s.store), "segment", id)
}

/// A fault on page `page` of segment `id` by a store (`write`), a load, or
/// an access of unknown kind (`None`: taken as a store if the page is
/// there to be read): `Ok(true)` when the access may be retried,
/// `Ok(false)` when a copy is on its way (then [`wait`], and ask again).
pub(crate) fn fault(e: &mut Engine, id: u32, page: Page, write: Option<bool>) -> Result<bool> {
    let mut ready = false;
    step(
        e,
        id,
        |s| {
            ready = match write {
                Some(w) => s.node.access(page, w, &mut *s.store)?,
                None => s.node.fault(page, &mut *s.store)?,
            };
            Ok(ready)
        },
        "page",
        page,
    )?;
    if !ready {
        // The request is sent: the store gets ready while the page travels.
        if let Some(s) = e.svc.dsm.segs.get_mut(&id) {
            s.store.prepare(page);
        }
    }
    Ok(ready)
}

/// The home of `page` in segment `id`, as a rank of the segment.
pub(crate) fn home(e: &Engine, id: u32, page: Page) -> Option<u32> {
    e.svc.dsm.segs.get(&id).map(|s| s.g.home(page))
}

fn step(
    e: &mut Engine,
    id: u32,
    f: impl FnOnce(&mut Seg) -> std::result::Result<bool, String>,
    arg: &'static str,
    value: u32,
) -> Result<()> {
    let s = e
        .svc
        .dsm
        .segs
        .get_mut(&id)
        .ok_or_else(|| Error::Protocol(format!("DSM segment #{id} is not open")))?;
    f(s).map_err(|why| Error::invalid(arg, value as i64, format!("{why} (DSM segment #{id})")))?;
    transmit(e, id)
}

/// Waits until segment `id`'s application waits no more; `info` describes
/// the wait for the launcher from what is awaited (a new description each
/// time a lock's holder changes).
pub(crate) fn wait(e: &mut Guard<'_>, id: u32, info: impl Fn(Awaited) -> WaitInfo) -> Result<()> {
    loop {
        let (waiting, now) = e
            .svc
            .dsm
            .state(id)
            .ok_or_else(|| Error::Protocol(format!("DSM segment #{id} is not open")))?;
        if !waiting {
            return Ok(());
        }
        e.wait_until(info(now), |e| e.svc.dsm.state(id) != Some((true, now)))?;
    }
}

/// Sends what segment `id`'s protocol wants sent; what it sends to this
/// rank is handled at once.
fn transmit(e: &mut Engine, id: u32) -> Result<()> {
    loop {
        let Some(s) = e.svc.dsm.segs.get_mut(&id) else {
            return Ok(());
        };
        let Some((to, m)) = s.node.poll_transmit() else {
            return Ok(());
        };
        if to == s.me {
            let me = s.me;
            if let Err(why) = s.node.handle(me, m, &mut *s.store) {
                log(e.world_rank, &format!("DSM segment #{id}: {why}"));
            }
            continue;
        }
        let world = s.members[to as usize];
        let mut h = Header::new(Kind::Dsm);
        h.ctx = id;
        h.src = s.me;
        let payload = m.encode();
        h.len = payload.len() as u64;
        e.push_frame(world, &h, &payload)?;
    }
}

/// A DSM frame from world rank `from`.
pub(crate) fn on_frame(e: &mut Engine, from: u32, h: &Header, p: &[u8]) -> Result<()> {
    let id = h.ctx;
    let drop = |e: &Engine, why: String| {
        log(
            e.world_rank,
            &format!("dropped a DSM message from rank {from} for segment #{id}: {why}"),
        );
        Ok(())
    };
    let Some(s) = e.svc.dsm.segs.get_mut(&id) else {
        return drop(e, "not open here".into());
    };
    if s.members.get(h.src as usize) != Some(&from) {
        let why = format!("rank {from} is not rank {} of the segment", h.src);
        return drop(e, why);
    }
    let handled = match Msg::decode_page(p, &s.g) {
        Some(page) => page.and_then(|m| s.node.handle_page(h.src, m, &mut *s.store)),
        None => Msg::decode(p, &s.g).and_then(|m| s.node.handle(h.src, m, &mut *s.store)),
    };
    if let Err(why) = handled {
        return drop(e, why);
    }
    transmit(e, id)
}
