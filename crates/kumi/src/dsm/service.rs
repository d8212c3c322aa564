//! The engine's side of distributed shared memory: the segments this rank
//! takes part in, each with its protocol state (`kumi_core::dsm::Node`), and
//! the frames between them (kind `Dsm`). The engine serves them whatever the
//! application does (the progress thread while it computes), so a lock's
//! manager grants it even while its own rank runs a loop: DSE's "kernel
//! process", as part of every rank's engine.
//!
//! A frame from a peer that is not a member of the segment, for a segment
//! not open here, or that the protocol refuses, is dropped with a logged
//! reason; the protocol changes nothing for a message it refuses.

use crate::engine::{log, Engine};
use crate::error::{Error, Result};
use kumi_core::dsm::{Geometry, Msg, Node, Page, Prot, Store};
use kumi_core::header::{Header, Kind};
use std::collections::HashMap;

/// One segment's protocol state.
struct Seg {
    node: Node,
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
struct NoPages;

impl Store for NoPages {
    fn page(&self, _: Page) -> &[u8] {
        &[]
    }
    fn page_mut(&mut self, _: Page) -> &mut [u8] {
        &mut []
    }
    fn protect(&mut self, _: Page, _: Prot) {}
}

impl DsmState {
    /// Whether other ranks may wait on this one's service.
    #[inline]
    pub(crate) fn serving(&self) -> bool {
        !self.segs.is_empty()
    }

    /// Opens segment `id` shaped `g`, this rank being `me` of the world
    /// ranks `members`.
    pub(crate) fn open(&mut self, id: u32, g: Geometry, me: u32, members: Vec<u32>) {
        let node = Node::new(g, me, &mut NoPages);
        self.segs.insert(
            id,
            Seg {
                node,
                g,
                me,
                members,
            },
        );
    }

    /// Closes segment `id` (its array is being freed).
    pub(crate) fn close(&mut self, id: u32) {
        self.segs.remove(&id);
    }

    /// The lock this rank waits for in segment `id`, and its holder if known.
    pub(crate) fn awaited(&self, id: u32) -> Option<(u32, Option<u32>)> {
        self.segs.get(&id).and_then(|s| s.node.awaited())
    }
}

/// Starts taking lock `lock` of segment `id`; [`DsmState::awaited`] says
/// when it is held.
pub(crate) fn acquire(e: &mut Engine, id: u32, lock: u32) -> Result<()> {
    let s = seg(e, id)?;
    s.node
        .acquire(lock, &mut NoPages)
        .map_err(|why| refused(id, lock, why))?;
    transmit(e, id)
}

/// Releases lock `lock` of segment `id`.
pub(crate) fn release(e: &mut Engine, id: u32, lock: u32) -> Result<()> {
    let s = seg(e, id)?;
    s.node
        .release(lock, &mut NoPages)
        .map_err(|why| refused(id, lock, why))?;
    transmit(e, id)
}

fn seg(e: &mut Engine, id: u32) -> Result<&mut Seg> {
    e.svc
        .dsm
        .segs
        .get_mut(&id)
        .ok_or_else(|| Error::Protocol(format!("DSM segment #{id} is not open")))
}

fn refused(id: u32, lock: u32, why: String) -> Error {
    Error::invalid("lock", lock as i64, format!("{why} (DSM segment #{id})"))
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
            if let Err(why) = s.node.handle(me, m, &mut NoPages) {
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
    let handled = Msg::decode(p, &s.g).and_then(|m| s.node.handle(h.src, m, &mut NoPages));
    if let Err(why) = handled {
        return drop(e, why);
    }
    transmit(e, id)
}
