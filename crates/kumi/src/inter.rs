//! Intercommunicators: two disjoint groups of ranks that talk across (MPI's
//! `MPI_Intercomm_create`), as coupled codes and manager/worker programs
//! (mpi4py.futures) use them.
//!
//! An [`InterComm`] is three communicators:
//! - [`InterComm::remote`], for point-to-point: its members are the *remote*
//!   group, its rank is this rank's place in the *local* group, so `dest` and
//!   `source` name ranks of the other group and a receiver sees a sender's
//!   local rank, exactly MPI's intercommunicator semantics, with no change to
//!   the engine (messages match on context and the sender's rank, and only
//!   the other group ever sends on this context);
//! - [`InterComm::local`], an intracommunicator of the local group;
//! - a hidden intracommunicator of both groups (the group with the lower
//!   world rank at its leader first), on which the collectives that span
//!   both groups run, and from which [`InterComm::merge`] splits.
//!
//! Creation: the leaders exchange their groups and the largest context
//! counter of each group over the peer communicator; both groups then take
//! the same two fresh contexts (one for each communicator above).

use crate::coll::Op;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::CollRequest;
use bytemuck::Pod;
use kumi_core::call::Call;
use kumi_core::coll as sc;

/// The tag of an intercommunicator broadcast on its collective context.
const TAG_BCAST: i32 = i32::MAX - 1;
/// The tag of the leaders' exchange.
const TAG_EXCHANGE: i32 = i32::MAX - 2;

/// An intercommunicator (see the module documentation).
#[derive(Clone)]
pub struct InterComm {
    remote: Comm,
    local: Comm,
    both: Comm,
    /// Whether the local group comes first in `both`.
    first: bool,
}

impl InterComm {
    /// Joins `local` (this rank's group) with another, disjoint group:
    /// `local_leader` (a rank of `local`) and `remote_leader` (the other
    /// group's leader, a rank of `peer`) exchange what both groups need over
    /// `peer` with `tag`. Collective over both groups. `peer` and
    /// `remote_leader` are read at the local leader only (as MPI says): other
    /// ranks may pass anything.
    #[track_caller]
    pub fn create(
        local: &Comm,
        local_leader: usize,
        peer: &Comm,
        remote_leader: usize,
        tag: i32,
    ) -> Result<InterComm> {
        if local_leader >= local.size() {
            return Err(Error::invalid(
                "local_leader",
                local_leader as i64,
                format!("a rank of the local communicator of {}", local.size()),
            ));
        }
        let local = local.dup()?;
        let mut top = [local.engine().next_ctx];
        local.allreduce_in_place(&mut top, &Op::max())?;
        let mine: Vec<u32> = local.members().to_vec();
        // [largest context counter, leader's world rank, the group's world ranks]
        let mut theirs: Vec<u32> = Vec::new();
        if local.rank() == local_leader {
            if remote_leader >= peer.size() {
                return Err(Error::invalid(
                    "remote_leader",
                    remote_leader as i64,
                    format!("a rank of the peer communicator of {}", peer.size()),
                ));
            }
            if peer.world_rank(remote_leader) == local.world_rank(local_leader) {
                return Err(Error::invalid(
                    "remote_leader",
                    remote_leader as i64,
                    "the other group's leader, not this one",
                ));
            }
            let mut card = vec![top[0], mine[local_leader]];
            card.extend_from_slice(&mine);
            peer.send(&card, remote_leader as i32, tag)?;
            let (v, _) = peer.recv_vec::<u32>(remote_leader as i32, tag)?;
            theirs = v;
        }
        let mut n = [theirs.len() as u64];
        local.bcast(&mut n, local_leader)?;
        theirs.resize(n[0] as usize, 0);
        local.bcast(&mut theirs, local_leader)?;
        if theirs.len() < 3 {
            return Err(Error::Protocol(format!(
                "the other group's leader sent {} words, not a group",
                theirs.len()
            )));
        }
        let remote_group = theirs[2..].to_vec();
        if remote_group.iter().any(|w| mine.contains(w)) {
            return Err(Error::invalid(
                "remote_leader",
                remote_leader as i64,
                "a leader of a group disjoint from this one",
            ));
        }
        let ctx = top[0].max(theirs[0]);
        let next = ctx
            .checked_add(4)
            .ok_or_else(|| Error::Protocol("communicator context ids exhausted".into()))?;
        {
            let mut e = local.engine();
            e.next_ctx = e.next_ctx.max(next);
        }
        let first = mine[local_leader] < theirs[1];
        let remote = local.derived(ctx, local.rank() as u32, remote_group.clone());
        let (mut all, offset) = if first {
            (mine.clone(), 0)
        } else {
            (remote_group.clone(), remote_group.len())
        };
        all.extend_from_slice(if first { &remote_group } else { &mine });
        let both = local.derived(ctx + 2, (offset + local.rank()) as u32, all);
        Ok(InterComm {
            remote,
            local,
            both,
            first,
        })
    }

    /// The communicator for point-to-point across: ranks are those of the
    /// remote group; `rank()` is this rank's place in the local group.
    pub fn remote(&self) -> &Comm {
        &self.remote
    }

    /// The local group, as an intracommunicator.
    pub fn local(&self) -> &Comm {
        &self.local
    }

    /// The size of the remote group.
    pub fn remote_size(&self) -> usize {
        self.remote.size()
    }

    /// The world ranks of the remote group, in its order.
    pub fn remote_world_ranks(&self) -> Vec<usize> {
        self.remote.members().iter().map(|&w| w as usize).collect()
    }

    /// Blocks until every rank of both groups has called it.
    #[track_caller]
    pub fn barrier(&self) -> Result<()> {
        self.both.barrier()
    }

    /// Broadcast from one group to the other: the root (rank `root` of its
    /// group) passes `Root::Me`, the other ranks of its group `Root::None`
    /// (they take no part), the other group `Root::Remote(root)` and receives.
    /// The root sends to the other group's first rank, which broadcasts
    /// inside its group.
    #[track_caller]
    pub fn bcast<T: bytemuck::Pod>(&self, buf: &mut [T], root: Root) -> Result<()> {
        // On the intercommunicator's collective context: no tag of the
        // program's can match it.
        let (ctx, at) = (self.remote.coll_ctx(), std::panic::Location::caller());
        match root {
            Root::None => Ok(()),
            Root::Me => {
                self.remote
                    .send_on(ctx, bytemuck::cast_slice(buf), 0, TAG_BCAST, false, at)
            }
            Root::Remote(r) => {
                self.check_remote(r, "root")?;
                if self.local.rank() == 0 {
                    let b: &mut [u8] = bytemuck::cast_slice_mut(buf);
                    self.remote
                        .recv_on(ctx, b, r as i32, TAG_BCAST, Call::Collective, at)?;
                }
                self.local.bcast(buf, 0)
            }
        }
    }

    /// The leaders' exchange (call at local rank 0 only): sends `mine` to
    /// the other group's rank 0 and receives its `theirs` (the same length),
    /// on the collective context. The first group's leader sends first.
    #[track_caller]
    pub fn leaders_exchange(&self, mine: &[u8], theirs: &mut [u8]) -> Result<()> {
        let (ctx, at) = (self.remote.coll_ctx(), std::panic::Location::caller());
        if self.first {
            self.remote.send_on(ctx, mine, 0, TAG_EXCHANGE, false, at)?;
            self.remote
                .recv_on(ctx, theirs, 0, TAG_EXCHANGE, Call::Collective, at)?;
        } else {
            self.remote
                .recv_on(ctx, theirs, 0, TAG_EXCHANGE, Call::Collective, at)?;
            self.remote.send_on(ctx, mine, 0, TAG_EXCHANGE, false, at)?;
        }
        Ok(())
    }

    /// A nonblocking barrier over both groups.
    #[track_caller]
    pub fn ibarrier(&self) -> Result<crate::CollRequest<()>> {
        self.both.ibarrier()
    }

    /// Starts an allreduce across the groups (MPI's `MPI_Iallreduce` on an
    /// intercommunicator): `wait` returns, after this rank's `buf`, the
    /// combination by `op` of the *other* group's `buf`s (in rank order).
    /// One schedule on the communicator of both groups
    /// (`kumi_core::coll::allreduce_inter`), so it takes its place among
    /// the intercommunicator's collectives when it starts, and progresses
    /// with the engine. Collective over both groups; every `buf` has the
    /// same length.
    #[track_caller]
    pub fn iallreduce<T: Pod>(&self, buf: Vec<T>, op: &Op<T>) -> Result<CollRequest<T>> {
        let n = buf.len();
        let (local, me) = self.local_in_both();
        let s = sc::allreduce_inter(&local, self.both_index(0), me, 1, op.commutative);
        self.both.start_reduction(buf, n, op, s)
    }

    /// Starts a reduction across the groups to a root (MPI's `MPI_Ireduce`
    /// on an intercommunicator): the root (`Root::Me`) gets the combination
    /// of the other group's `buf`s (its own `buf` only gives the length);
    /// the rest of its group (`Root::None`) takes no part; the other group
    /// (`Root::Remote`) contributes. `wait` returns the work buffer: the
    /// result at the root.
    #[track_caller]
    pub fn ireduce<T: Pod>(&self, buf: Vec<T>, op: &Op<T>, root: Root) -> Result<CollRequest<T>> {
        let (local, me) = self.local_in_both();
        let s = match root {
            Root::Me => sc::recv_from(self.both_index(0), 1),
            Root::None => sc::Schedule::default(),
            Root::Remote(r) => {
                self.check_remote(r, "root")?;
                sc::reduce_inter(&local, self.both_index(r), me, 1, op.commutative)
            }
        };
        self.both.start_reduction(buf, 0, op, s)
    }

    /// `Ok` if `r` is a rank of the remote group (argument `what`).
    fn check_remote(&self, r: usize, what: &'static str) -> Result<()> {
        if r >= self.remote_size() {
            return Err(Error::invalid(
                what,
                r as i64,
                format!("a rank of the remote group of {}", self.remote_size()),
            ));
        }
        Ok(())
    }

    /// The ranks of this group in the communicator of both, and this rank's.
    fn local_in_both(&self) -> (Vec<usize>, usize) {
        let at = if self.first { 0 } else { self.remote_size() };
        let local = (at..at + self.local.size()).collect();
        (local, at + self.local.rank())
    }

    /// Where remote rank `r` sits in the communicator of both groups.
    fn both_index(&self, r: usize) -> usize {
        if self.first {
            self.local.size() + r
        } else {
            r
        }
    }

    /// Starts an exchange across the groups: block `b` of `send` (blocks of
    /// `send_counts` bytes, one after the other) goes to remote rank `r` for
    /// each `(r, b)` of `sends`; block `b` of the result (blocks of
    /// `recv_counts` bytes) comes from remote rank `r` for each `(r, b)` of
    /// `recvs`. Between two ranks the k-th block one sends is the k-th the
    /// other receives. The data movers of both groups (gather, scatter,
    /// allgather, all-to-all and their v- and w-forms) are such exchanges.
    /// Collective: every rank of both groups calls it, in the same order
    /// as the intercommunicator's other collectives, even with nothing to
    /// move (an `MPI_PROC_NULL` rank of a rooted one).
    #[track_caller]
    pub fn iexchange(
        &self,
        send: Vec<u8>,
        send_counts: &[usize],
        sends: &[(usize, usize)],
        recv_counts: &[usize],
        recvs: &[(usize, usize)],
    ) -> Result<crate::CollRequest<u8>> {
        let n = self.remote_size();
        let across = |list: &[(usize, usize)], what: &'static str| -> Result<Vec<(usize, usize)>> {
            list.iter()
                .map(|&(r, b)| {
                    if r < n {
                        Ok((self.both_index(r), b))
                    } else {
                        Err(Error::invalid(
                            what,
                            r as i64,
                            format!("a rank of the remote group of {n}"),
                        ))
                    }
                })
                .collect()
        };
        let (sends, recvs) = (across(sends, "sends")?, across(recvs, "recvs")?);
        self.both
            .ineighbor_exchange(send, send_counts, &sends, recv_counts, &recvs)
    }

    /// Splits both groups at once (MPI's `MPI_Comm_split` and, with a
    /// computed color, `MPI_Comm_create` on an intercommunicator): the ranks
    /// of this group passing `color` form the new local group, ordered by
    /// `key` (ties by old rank), and those of the other group passing the
    /// same color its remote group. `None` for `color = None`, and for a
    /// color the other group has no rank of. Collective over both groups.
    #[track_caller]
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<InterComm>> {
        let local = self.local.split(color, key)?;
        // Both groups' ranks of one color: this group's first if it comes
        // first, each in its old order.
        let side = u32::from(!self.first) as i32;
        let Some(pair) = self.both.split(color, side)? else {
            return Ok(None);
        };
        let local = local.expect("a rank with a color is in its group's split");
        // Each rank's new local rank; this group's ranks are `mine` of `pair`.
        let mut ranks = vec![0u32; pair.size()];
        pair.allgather(&[local.rank() as u32], &mut ranks)?;
        let mine = if self.first {
            0..local.size()
        } else {
            pair.size() - local.size()..pair.size()
        };
        let in_order = |range: std::ops::Range<usize>| -> Vec<u32> {
            let mut v: Vec<(u32, u32)> = range.map(|i| (ranks[i], pair.members()[i])).collect();
            v.sort_unstable();
            v.into_iter().map(|(_, w)| w).collect()
        };
        let theirs = if self.first {
            in_order(mine.end..pair.size())
        } else {
            in_order(0..mine.start)
        };
        if theirs.is_empty() {
            return Ok(None);
        }
        let ctx = pair.agree_ctx_block(4)?;
        let remote = local.derived(ctx, local.rank() as u32, theirs.clone());
        let (offset, mut all) = if self.first {
            (0, local.members().to_vec())
        } else {
            (theirs.len(), theirs.clone())
        };
        all.extend_from_slice(if self.first { &theirs } else { local.members() });
        let both = local.derived(ctx + 2, (offset + local.rank()) as u32, all);
        Ok(Some(InterComm {
            remote,
            local,
            both,
            first: self.first,
        }))
    }

    /// A new intercommunicator of the same groups (collective over both).
    #[track_caller]
    pub fn dup(&self) -> Result<InterComm> {
        let local = self.local.dup()?;
        let ctx = self.both.agree_ctx_block(4)?;
        let remote = self.remote.derived(
            ctx,
            self.remote.rank() as u32,
            self.remote.members().to_vec(),
        );
        let both = self.both.derived(
            ctx + 2,
            self.both.rank() as u32,
            self.both.members().to_vec(),
        );
        Ok(InterComm {
            remote,
            local,
            both,
            first: self.first,
        })
    }

    /// Starts a duplicate (MPI's `MPI_Comm_idup` of an intercommunicator):
    /// no rank waits for another here. Its contexts come from the context
    /// server, as [`Comm::idup`]'s do: one pair for the local group, two
    /// asked on the communicator of both groups (every rank of both asks in
    /// the same order, so all get the same answers).
    pub fn idup(&self) -> Result<InterIdup> {
        Ok(InterIdup {
            local: self.local.idup()?,
            remote: self.both.idup()?,
            both: self.both.idup()?,
            parent: self.clone(),
            made: [None, None, None],
        })
    }

    /// The intracommunicator of both groups (MPI's `MPI_Intercomm_merge`):
    /// the group whose ranks pass `high = false` first; if both pass the same,
    /// the group with the lower world rank at its leader first. Collective
    /// over both groups; every rank of a group passes the same `high`.
    #[track_caller]
    pub fn merge(&self, high: bool) -> Result<Comm> {
        let mut flags = vec![0u8; self.both.size()];
        self.both.allgather(&[high as u8], &mut flags)?;
        let (a, b) = if self.first {
            (self.local.size(), self.remote.size())
        } else {
            (self.remote.size(), self.local.size())
        };
        let (first_high, second_high) = (flags[0] != 0, flags[a] != 0);
        if flags[..a].iter().any(|&f| (f != 0) != first_high)
            || flags[a..a + b].iter().any(|&f| (f != 0) != second_high)
        {
            return Err(Error::invalid(
                "high",
                high as i64,
                "the same value on every rank of a group",
            ));
        }
        // The group that goes first in `both` keeps its place unless it alone
        // asked to be high.
        let swap = first_high && !second_high;
        let me = self.both.rank();
        let key = match (swap, me < a) {
            (false, _) => me,
            (true, true) => b + me,
            (true, false) => me - a,
        };
        Ok(self
            .both
            .split(Some(0), key as i32)?
            .expect("every rank takes part"))
    }
}

/// An intercommunicator duplicate under way ([`InterComm::idup`]).
pub struct InterIdup {
    local: crate::Idup,
    remote: crate::Idup,
    both: crate::Idup,
    parent: InterComm,
    /// The three communicators as they come: local, remote's context, both.
    made: [Option<Comm>; 3],
}

impl InterIdup {
    /// The duplicate, if its contexts have come (makes progress once).
    pub fn test(&mut self) -> Result<Option<InterComm>> {
        for (slot, idup) in
            self.made
                .iter_mut()
                .zip([&mut self.local, &mut self.remote, &mut self.both])
        {
            if slot.is_none() {
                *slot = idup.test()?;
            }
        }
        if let [Some(l), Some(r), Some(b)] = &self.made {
            return Ok(Some(assemble(&self.parent, l.clone(), r, b.clone())));
        }
        Ok(None)
    }

    /// Waits for the duplicate.
    #[track_caller]
    pub fn wait(self) -> Result<InterComm> {
        let [a, b, c] = self.made;
        let local = match a {
            Some(x) => x,
            None => self.local.wait()?,
        };
        let remote = match b {
            Some(x) => x,
            None => self.remote.wait()?,
        };
        let both = match c {
            Some(x) => x,
            None => self.both.wait()?,
        };
        Ok(assemble(&self.parent, local, &remote, both))
    }
}

/// The duplicate of `p` from its new local group, the communicator whose
/// context the remote one takes, and the new one of both groups.
fn assemble(p: &InterComm, local: Comm, remote: &Comm, both: Comm) -> InterComm {
    InterComm {
        remote: local.derived(
            remote.ctx(),
            p.remote.rank() as u32,
            p.remote.members().to_vec(),
        ),
        local,
        both,
        first: p.first,
    }
}

/// Who the root of an intercommunicator broadcast is, seen from this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// This rank is the root.
    Me,
    /// Another rank of this rank's group is the root: nothing to do.
    None,
    /// The root is this rank of the remote group.
    Remote(usize),
}
