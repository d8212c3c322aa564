//! Communicators: a group of ranks with its own matching context.
//!
//! Each communicator has two context ids, one for point-to-point and one for the
//! collectives it runs internally, so a user's `recv(ANY_SOURCE, ANY_TAG)` can
//! never take a message of a barrier. New communicators get context ids everyone
//! agrees on without a central allocator: each process keeps a counter above every
//! id it has used, the members exchange their counters, and the new id is the
//! largest. No member has used it, so no old message can match on it.

use crate::engine::WaitInfo;
use crate::error::{Error, Result};
use crate::progress::{EngineRef, Guard};
use crate::request::{Request, Scope, Status};
use bytemuck::Pod;
use kumi_core::call::Call;
use kumi_core::matching::{Envelope, Pattern};
use kumi_core::{ANY_SOURCE, ANY_TAG, TAG_UB};
use std::panic::Location;
use std::rc::Rc;

/// A communicator. Cloning is cheap and gives the same communicator.
#[derive(Clone)]
pub struct Comm {
    inner: Rc<CommInner>,
}

struct CommInner {
    engine: EngineRef,
    ctx: u32,
    rank: u32,
    /// World rank of each member, by communicator rank.
    members: Vec<u32>,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("ctx", &self.inner.ctx)
            .field("rank", &self.inner.rank)
            .field("size", &self.inner.members.len())
            .finish()
    }
}

fn as_bytes<T: Pod>(buf: &[T]) -> &[u8] {
    bytemuck::cast_slice(buf)
}

fn as_bytes_mut<T: Pod>(buf: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(buf)
}

impl Comm {
    pub(crate) fn world(engine: EngineRef) -> Comm {
        let (rank, size) = {
            let e = engine.borrow();
            (e.world_rank, e.world_size)
        };
        Comm {
            inner: Rc::new(CommInner {
                engine,
                ctx: 0,
                rank,
                members: (0..size).collect(),
            }),
        }
    }

    /// This process's rank in the communicator.
    pub fn rank(&self) -> usize {
        self.inner.rank as usize
    }

    /// Number of ranks in the communicator.
    pub fn size(&self) -> usize {
        self.inner.members.len()
    }

    /// The job-wide (world) rank of communicator rank `r`.
    pub fn world_rank(&self, r: usize) -> Option<usize> {
        self.inner.members.get(r).map(|&w| w as usize)
    }

    #[inline]
    pub(crate) fn engine(&self) -> Guard<'_> {
        self.inner.engine.borrow_mut()
    }

    #[inline]
    pub(crate) fn check_dest(&self, dest: i32) -> Result<u32> {
        if dest < 0 || dest as usize >= self.size() {
            return Err(Error::InvalidArgument {
                arg: "dest",
                value: dest as i64,
                allowed: format!("a rank from 0 to {} of this communicator", self.size() - 1),
            });
        }
        Ok(self.inner.members[dest as usize])
    }

    #[inline]
    fn check_send_tag(tag: i32) -> Result<()> {
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::InvalidArgument {
                arg: "tag",
                value: tag as i64,
                allowed: format!("a tag from 0 to {TAG_UB}"),
            });
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn pattern(&self, ctx: u32, source: i32, tag: i32) -> Result<Pattern> {
        let src = match source {
            ANY_SOURCE => None,
            s if s >= 0 && (s as usize) < self.size() => Some(s as u32),
            s => {
                return Err(Error::InvalidArgument {
                    arg: "source",
                    value: s as i64,
                    allowed: format!("a rank from 0 to {} or ANY_SOURCE (-1)", self.size() - 1),
                })
            }
        };
        let tag = match tag {
            ANY_TAG => None,
            t if (0..=TAG_UB).contains(&t) || (ctx & 1 == 1 && t > TAG_UB) => Some(t),
            t => {
                return Err(Error::InvalidArgument {
                    arg: "tag",
                    value: t as i64,
                    allowed: format!("a tag from 0 to {TAG_UB} or ANY_TAG (-1)"),
                })
            }
        };
        Ok(Pattern { ctx, src, tag })
    }

    // ----- blocking point-to-point ------------------------------------------------

    /// Sends `buf` to rank `dest` with `tag`. Returns when `buf` may be reused.
    #[track_caller]
    pub fn send<T: Pod>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        Self::check_send_tag(tag)?;
        self.send_on(
            self.inner.ctx,
            as_bytes(buf),
            dest,
            tag,
            false,
            Location::caller(),
        )
    }

    /// Synchronous send: returns when the receiver has matched the message.
    #[track_caller]
    pub fn ssend<T: Pod>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        Self::check_send_tag(tag)?;
        self.send_on(
            self.inner.ctx,
            as_bytes(buf),
            dest,
            tag,
            true,
            Location::caller(),
        )
    }

    /// The wait description for a call on this communicator.
    // Inlined: the blocking calls build one per call (out of line it was a
    // call of its own, 18 instructions per ping-pong round trip).
    #[inline(always)]
    pub(crate) fn info(
        &self,
        call: Call,
        peer: i32,
        tag: i32,
        at: &'static Location<'static>,
    ) -> WaitInfo {
        WaitInfo {
            call,
            ctx: self.inner.ctx,
            peer,
            tag,
            at,
            // A negative peer (any, none) is out of range as a u32.
            world: self
                .inner
                .members
                .get(peer as u32 as usize)
                .copied()
                .unwrap_or(u32::MAX),
        }
    }

    // Inlined into the API's blocking calls and the C ABI's: one call frame
    // less per message (always: left to itself, the compiler kept it out of
    // the C library's `MPI_Send`).
    #[inline(always)]
    pub(crate) fn send_on(
        &self,
        ctx: u32,
        bytes: &[u8],
        dest: i32,
        tag: i32,
        sync: bool,
        at: &'static Location<'static>,
    ) -> Result<()> {
        let peer = self.check_dest(dest)?;
        let env = Envelope {
            ctx,
            src: self.inner.rank,
            tag,
        };
        let mut e = self.engine();
        match e.start_send(env, peer, bytes.as_ptr(), bytes.len(), sync)? {
            None => Ok(()),
            Some(id) => e.wait(self.info(Call::Send, dest, tag, at), id).map(|_| ()),
        }
    }

    /// Receives into `buf` from `source` (or [`crate::ANY_SOURCE`]) with `tag` (or
    /// [`crate::ANY_TAG`]). A message larger than `buf` is an error naming both
    /// sizes; no byte beyond `buf` is written.
    #[track_caller]
    pub fn recv<T: Pod>(&self, buf: &mut [T], source: i32, tag: i32) -> Result<Status> {
        self.recv_on(
            self.inner.ctx,
            as_bytes_mut(buf),
            source,
            tag,
            Call::Recv,
            Location::caller(),
        )
    }

    #[inline(always)]
    pub(crate) fn recv_on(
        &self,
        ctx: u32,
        bytes: &mut [u8],
        source: i32,
        tag: i32,
        call: Call,
        at: &'static Location<'static>,
    ) -> Result<Status> {
        let pat = self.pattern(ctx, source, tag)?;
        let info = self.info(call, source, tag, at);
        self.engine()
            .recv(info, pat, bytes.as_mut_ptr(), bytes.len())
    }

    /// Receives a message of any size into a new vector. The message size must be
    /// a whole number of `T`.
    #[track_caller]
    pub fn recv_vec<T: Pod>(&self, source: i32, tag: i32) -> Result<(Vec<T>, Status)> {
        let st = self.probe(source, tag)?;
        let elem = std::mem::size_of::<T>().max(1);
        if st.bytes % elem != 0 {
            return Err(Error::InvalidArgument {
                arg: "T",
                value: elem as i64,
                allowed: format!(
                    "an element size dividing the message size of {} bytes",
                    st.bytes
                ),
            });
        }
        let mut v = vec![T::zeroed(); st.bytes / elem];
        // Receive the probed message itself: same source and tag, the earliest.
        let st = self.recv(&mut v, st.source, st.tag)?;
        Ok((v, st))
    }

    /// Sends `send` to `dest` and receives into `recv` from `source` at once
    /// (no deadlock if both sides call it).
    #[track_caller]
    pub fn sendrecv<T: Pod, U: Pod>(
        &self,
        send: &[T],
        dest: i32,
        send_tag: i32,
        recv: &mut [U],
        source: i32,
        recv_tag: i32,
    ) -> Result<Status> {
        crate::request::scope(|s| {
            let r = self.irecv(s, recv, source, recv_tag)?;
            let w = self.isend(s, send, dest, send_tag)?;
            w.wait()?;
            r.wait()
        })
    }

    /// Blocks until a message from `source` with `tag` can be received; returns
    /// its status without receiving it.
    #[track_caller]
    pub fn probe(&self, source: i32, tag: i32) -> Result<Status> {
        let pat = self.pattern(self.inner.ctx, source, tag)?;
        let mut found = None;
        let info = self.info(Call::Probe, source, tag, Location::caller());
        self.engine().wait_until(info, |e| {
            found = e.iprobe(&pat).ok().flatten();
            found.is_some()
        })?;
        Ok(found.expect("wait_until returns only when found"))
    }

    /// Like [`Comm::probe`], but returns `None` at once if no message is there.
    pub fn iprobe(&self, source: i32, tag: i32) -> Result<Option<Status>> {
        let pat = self.pattern(self.inner.ctx, source, tag)?;
        self.engine().iprobe(&pat)
    }

    // ----- nonblocking point-to-point ---------------------------------------------

    /// Starts sending `buf` to `dest`; `buf` stays borrowed until the scope ends.
    pub fn isend<'a, 's, T: Pod>(
        &self,
        scope: &'a Scope<'s>,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        Self::check_send_tag(tag)?;
        self.isend_on(scope, as_bytes(buf), dest, tag, false)
    }

    /// Starts a synchronous send (completes when the receiver matched it).
    pub fn issend<'a, 's, T: Pod>(
        &self,
        scope: &'a Scope<'s>,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        Self::check_send_tag(tag)?;
        self.isend_on(scope, as_bytes(buf), dest, tag, true)
    }

    fn isend_on<'a, 's>(
        &self,
        scope: &'a Scope<'s>,
        bytes: &'s [u8],
        dest: i32,
        tag: i32,
        sync: bool,
    ) -> Result<Request<'a>> {
        let peer = self.check_dest(dest)?;
        let env = Envelope {
            ctx: self.inner.ctx,
            src: self.inner.rank,
            tag,
        };
        let started = self
            .engine()
            .start_send(env, peer, bytes.as_ptr(), bytes.len(), sync)?;
        Ok(match started {
            None => scope.completed(),
            Some(id) => scope.register(&self.inner.engine, id),
        })
    }

    /// Starts a receive into `buf`; `buf` stays borrowed until the scope ends.
    pub fn irecv<'a, 's, T: Pod>(
        &self,
        scope: &'a Scope<'s>,
        buf: &'s mut [T],
        source: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        let pat = self.pattern(self.inner.ctx, source, tag)?;
        let bytes = as_bytes_mut(buf);
        let id = self
            .engine()
            .post_recv(pat, bytes.as_mut_ptr(), bytes.len())?;
        Ok(scope.register(&self.inner.engine, id))
    }

    // ----- collectives used by the runtime itself ----------------------------------

    pub(crate) fn coll_ctx(&self) -> u32 {
        self.inner.ctx + 1
    }

    /// Blocks until every rank of the communicator has entered the barrier.
    /// Dissemination algorithm (two levels across hosts; see `coll`).
    #[track_caller]
    pub fn barrier(&self) -> Result<()> {
        self.barrier_at(Location::caller())
    }

    /// World ranks of the members, by communicator rank (for `coll`).
    pub(crate) fn members(&self) -> &[u32] {
        &self.inner.members
    }

    /// The shared engine handle (for `coll`'s nonblocking requests).
    pub(crate) fn engine_rc(&self) -> &EngineRef {
        &self.inner.engine
    }

    /// The point-to-point context id.
    pub(crate) fn ctx(&self) -> u32 {
        self.inner.ctx
    }

    // ----- new communicators -------------------------------------------------------

    /// A new communicator with the same members and a fresh matching context.
    /// Collective: every member must call it.
    #[track_caller]
    pub fn dup(&self) -> Result<Comm> {
        let ctx = self.agree_ctx(&[], Call::Dup, Location::caller())?.0;
        Ok(self.derived(ctx, self.inner.rank, self.inner.members.clone()))
    }

    /// A communicator of `members` (ranks of this one, in the new order) that
    /// only those members create (MPI's `MPI_Comm_create_group`): they agree
    /// on its context through the first member, with point-to-point messages
    /// on this communicator under `tag`, which nothing else of theirs may use
    /// meanwhile. Every member passes the same list; a rank not in it gets
    /// `None` without communicating. Cost: 2(k-1) messages at the first of k
    /// members.
    #[track_caller]
    pub fn create_group(&self, members: &[usize], tag: i32) -> Result<Option<Comm>> {
        let p = self.size();
        for (i, &m) in members.iter().enumerate() {
            if m >= p || members[..i].contains(&m) {
                return Err(Error::InvalidArgument {
                    arg: "members",
                    value: m as i64,
                    allowed: format!("distinct ranks below {p}"),
                });
            }
        }
        let Some(me) = members.iter().position(|&m| m == self.rank()) else {
            return Ok(None);
        };
        let world: Vec<u32> = members.iter().map(|&m| self.inner.members[m]).collect();
        if crate::threads::multiple() {
            // As in `agree_ctx`: threads making communicators at once would
            // agree on one context; the server hands out each once, keyed by
            // the parent, the tag and the members.
            let info = self.info(Call::Dup, -2, -2, Location::caller());
            let ctx = self.group_ctx(&format!("group {} {tag}", self.ctx()), &world, info)?;
            return Ok(Some(self.derived(ctx, me as u32, world)));
        }
        let mine = self.engine().next_ctx;
        let ctx = if me == 0 {
            let mut ctx = mine;
            for &m in &members[1..] {
                let mut v = [0u32];
                self.recv(&mut v, m as i32, tag)?;
                ctx = ctx.max(v[0]);
            }
            for &m in &members[1..] {
                self.send(&[ctx], m as i32, tag)?;
            }
            ctx
        } else {
            self.send(&[mine], members[0] as i32, tag)?;
            let mut v = [0u32];
            self.recv(&mut v, members[0] as i32, tag)?;
            v[0]
        };
        let next = ctx
            .checked_add(2)
            .filter(|&c| c < kumi_core::ctxsvc::FIRST)
            .ok_or_else(|| Error::Protocol("communicator context ids exhausted".into()))?;
        self.engine().next_ctx = next;
        Ok(Some(self.derived(ctx, me as u32, world)))
    }

    /// A duplicate made without blocking (MPI's `MPI_Comm_idup`): collective,
    /// but no member waits for the others here or in [`Idup::test`]; the
    /// duplicate is ready when [`Idup::test`] returns it or [`Idup::wait`]
    /// does. Its context comes from the context server on world rank 0
    /// (`kumi_core::ctxsvc`), whose engine answers whenever it runs: when
    /// world rank 0 is inside kumi, or by its progress thread.
    pub fn idup(&self) -> Result<Idup> {
        let id = self.ask_next_ctx()?;
        Ok(Idup {
            parent: self.clone(),
            id,
        })
    }

    /// Asks the context server for the context of the next communicator
    /// made from this one, keyed by this one and how many this rank made
    /// from it so before (every member counts the same); returns the ask.
    fn ask_next_ctx(&self) -> Result<u64> {
        let mut e = self.engine();
        let leader = self.inner.members.iter().copied().min().unwrap_or(0);
        let k = e.next_idup((self.ctx(), leader));
        let key = kumi_core::ctxsvc::idup_key(self.ctx(), leader, k);
        e.ask_ctx(&key, self.size())
    }

    /// The answer to [`Comm::ask_next_ctx`]'s ask `id`, waited for.
    fn served_ctx(&self, id: u64, info: WaitInfo) -> Result<u32> {
        let mut e = self.engine();
        e.wait_until(info, |e| e.ctx_answered(id))?;
        e.ctx_answer(id).expect("answered")
    }

    /// A communicator of the world ranks `members` (in this order) that only
    /// they make, with no parent communicator (MPI's
    /// `MPI_Comm_create_from_group`): its context comes from the context
    /// server on world rank 0, keyed by `tag`, the members and how many this
    /// rank made with both before, so concurrent creations with different
    /// tags or groups never mix. Every member passes the same `members` and
    /// `tag`; this rank must be among them. Waits only for world rank 0's
    /// answer, not for the other members. (`self`: any communicator of this
    /// rank; only its engine is used.)
    #[track_caller]
    pub fn create_from_group(&self, members: &[usize], tag: &str) -> Result<Comm> {
        let world = self.engine().world_size as usize;
        let me = self.inner.members[self.inner.rank as usize];
        let mut seen = std::collections::HashSet::new();
        let ws: Vec<u32> = members
            .iter()
            .map(|&m| {
                if m < world && seen.insert(m) {
                    Ok(m as u32)
                } else {
                    Err(Error::invalid(
                        "members",
                        m as i64,
                        format!("distinct world ranks below {world}"),
                    ))
                }
            })
            .collect::<Result<_>>()?;
        let Some(rank) = ws.iter().position(|&w| w == me) else {
            return Err(Error::invalid(
                "members",
                ws.len() as i64,
                format!("a group that holds this rank (world rank {me})"),
            ));
        };
        let info = self.info(Call::Dup, -2, -2, Location::caller());
        let ctx = self.group_ctx(tag, &ws, info)?;
        Ok(self.derived(ctx, rank as u32, ws))
    }

    /// The context of the next communicator of the world ranks `ws` made
    /// under `tag`, from the context server, keyed by both and how many this
    /// rank made with them before (see `create_from_group`).
    fn group_ctx(&self, tag: &str, ws: &[u32], info: WaitInfo) -> Result<u32> {
        let mut e = self.engine();
        let k = e.next_from_group(tag, ws);
        let key = kumi_core::ctxsvc::from_group_key(tag, ws, k);
        let id = e.ask_ctx(&key, ws.len())?;
        e.wait_until(info, |e| e.ctx_answered(id))?;
        e.ctx_answer(id).expect("answered")
    }

    /// A communicator made from this one (same engine), made known to the
    /// supervision reports so waits on it can name world ranks.
    pub(crate) fn derived(&self, ctx: u32, rank: u32, members: Vec<u32>) -> Comm {
        self.engine().watch.comm_created(ctx, &members);
        Comm {
            inner: Rc::new(CommInner {
                engine: self.inner.engine.clone(),
                ctx,
                rank,
                members,
            }),
        }
    }

    /// Splits the communicator: ranks passing the same `color` form a new
    /// communicator, ordered by `key` (ties by old rank). `color = None` takes no
    /// part and gets `None`. Collective: every member must call it.
    #[track_caller]
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Comm>> {
        let mut mine = Vec::with_capacity(9);
        mine.push(color.is_some() as u8);
        mine.extend_from_slice(&color.unwrap_or(0).to_le_bytes());
        mine.extend_from_slice(&key.to_le_bytes());
        let (ctx, all) = self.agree_ctx(&mine, Call::Split, Location::caller())?;
        let Some(color) = color else { return Ok(None) };
        let mut group: Vec<(i32, usize)> = Vec::new();
        for (r, card) in all.iter().enumerate() {
            if card.len() != 9 {
                return Err(Error::Protocol(format!(
                    "split card of rank {r} has {} bytes",
                    card.len()
                )));
            }
            let has = card[0] == 1;
            let c = u32::from_le_bytes(card[1..5].try_into().expect("4 bytes"));
            let k = i32::from_le_bytes(card[5..9].try_into().expect("4 bytes"));
            if has && c == color {
                group.push((k, r));
            }
        }
        group.sort();
        let rank = group
            .iter()
            .position(|&(_, r)| r == self.rank())
            .expect("own card is in the group") as u32;
        let members = group.iter().map(|&(_, r)| self.inner.members[r]).collect();
        Ok(Some(self.derived(ctx, rank, members)))
    }

    /// `n` fresh contexts from `ctx` on (returned) that no member uses, agreed
    /// by every member (collective).
    #[track_caller]
    pub(crate) fn agree_ctx_block(&self, n: u32) -> Result<u32> {
        let mut top = [self.engine().next_ctx];
        self.allreduce_in_place(&mut top, &crate::coll::Op::max())?;
        let next = top[0]
            .checked_add(n)
            .filter(|&c| c < kumi_core::ctxsvc::FIRST)
            .ok_or_else(|| Error::Protocol("communicator context ids exhausted".into()))?;
        let mut e = self.engine();
        e.next_ctx = e.next_ctx.max(next);
        Ok(top[0])
    }

    /// Allgathers `extra` together with each member's context counter; returns
    /// the agreed new context id and everyone's `extra`.
    fn agree_ctx(
        &self,
        extra: &[u8],
        call: Call,
        at: &'static Location<'static>,
    ) -> Result<(u32, Vec<Vec<u8>>)> {
        if crate::threads::multiple() {
            // Two threads agreeing at once on different communicators would
            // read the same counter and take the same context: the context
            // server hands out each once.
            let id = self.ask_next_ctx()?;
            let all = self.allgather_bytes(extra, at)?;
            return Ok((self.served_ctx(id, self.info(call, -2, -2, at))?, all));
        }
        let next = self.engine().next_ctx;
        if extra.is_empty() {
            let mut top = [next];
            self.allreduce_at(&mut top, &crate::coll::Op::max(), at)?;
            return Ok((self.take_ctx(top[0])?, vec![Vec::new(); self.size()]));
        }
        let mut mine = next.to_le_bytes().to_vec();
        mine.extend_from_slice(extra);
        let all = self.allgather_bytes(&mine, at)?;
        let mut ctx = 0u32;
        let mut extras = Vec::with_capacity(all.len());
        for (r, card) in all.into_iter().enumerate() {
            if card.len() < 4 {
                return Err(Error::Protocol(format!(
                    "context card of rank {r} is {} bytes",
                    card.len()
                )));
            }
            ctx = ctx.max(u32::from_le_bytes(card[..4].try_into().expect("4 bytes")));
            extras.push(card[4..].to_vec());
        }
        Ok((self.take_ctx(ctx)?, extras))
    }

    /// Takes context `ctx`, the largest counter of the members (and its
    /// collective twin, `ctx + 1`): the counter moves past both.
    fn take_ctx(&self, ctx: u32) -> Result<u32> {
        let next = ctx
            .checked_add(2)
            .filter(|&c| c < kumi_core::ctxsvc::FIRST)
            .ok_or_else(|| Error::Protocol("communicator context ids exhausted".into()))?;
        self.engine().next_ctx = next;
        Ok(ctx)
    }
}

/// A nonblocking duplicate under way ([`Comm::idup`]).
pub struct Idup {
    parent: Comm,
    id: u64,
}

impl Idup {
    /// The duplicate, if its context has come (makes progress once).
    pub fn test(&mut self) -> Result<Option<Comm>> {
        let answer = {
            let mut e = self.parent.engine();
            e.progress()?;
            e.ctx_answer(self.id)
        };
        answer.map(|ctx| self.made(ctx)).transpose()
    }

    /// Waits for the duplicate.
    #[track_caller]
    pub fn wait(self) -> Result<Comm> {
        let info = self.parent.info(Call::Dup, -2, -2, Location::caller());
        self.made(self.parent.served_ctx(self.id, info))
    }

    fn made(&self, ctx: Result<u32>) -> Result<Comm> {
        let p = &self.parent;
        Ok(p.derived(ctx?, p.inner.rank, p.inner.members.clone()))
    }
}
