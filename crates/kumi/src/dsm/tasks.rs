//! DSE's task queue: one FIFO of work items every rank pushes to and pops
//! from, kept by rank 0's engine (`kumi_core::tasks`, which also decides
//! when the work is over). See [`TaskQueue`].

use crate::comm::Comm;
use crate::engine::{log, Engine};
use crate::error::{Error, Result};
use kumi_core::call::Call;
use kumi_core::header::{Header, Kind};
use kumi_core::tasks::{Msg, Queue};
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::panic::Location;

/// The rank that keeps every queue.
const KEEPER: u32 = 0;

/// Items a rank asks for ahead while it works (takes in flight and items
/// in hand): enough to cover a round trip to the keeper across hosts when
/// tasks take a few microseconds each; at the end of the work a rank may
/// hold this many that others, idle, could have run (measured:
/// docs/BENCHMARKS.md, "DSE's applications on the DSM").
const LOOKAHEAD: usize = 4;

/// A task queue over the ranks of a communicator: [`TaskQueue::push`]
/// anywhere, [`TaskQueue::pop`] anywhere, in FIFO order. A pop says that
/// its rank has no work of its own left (it pushed whatever its last item
/// made); when every rank waits in a pop and nothing is queued, every pop
/// returns `None`: the work is over. Rank 0's engine keeps the queue, and
/// serves it while rank 0's application computes.
///
/// ```no_run
/// let universe = kumi::init()?;
/// let world = universe.world();
/// let q: kumi::dsm::TaskQueue<u64> = kumi::dsm::TaskQueue::new(&world)?;
/// if world.rank() == 0 {
///     q.push(&100)?;
/// }
/// while let Some(n) = q.pop()? {
///     if n > 1 {
///         q.push(&(n / 2))?;
///         q.push(&(n - n / 2))?;
///     }
/// }
/// # Ok::<(), kumi::Error>(())
/// ```
pub struct TaskQueue<T: bytemuck::Pod> {
    raw: RawTaskQueue,
    _t: PhantomData<T>,
}

/// [`TaskQueue`] with items of a size chosen at run time (bytes), for the C
/// interface and for items whose type is not known at compile time.
pub struct RawTaskQueue {
    comm: Comm,
    item: usize,
}

/// One queue as this rank sees it.
struct End {
    me: u32,
    members: Vec<u32>,
    /// The queue itself, at the keeper.
    queue: Option<Queue>,
    max_item: usize,
    /// The answer to this rank's pop, once it came.
    answer: Option<Msg>,
    popping: bool,
    /// Takes (next items asked for ahead) in flight.
    taking: usize,
    /// Items the takes brought, in the order the keeper gave them.
    ahead: VecDeque<Vec<u8>>,
    done: bool,
}

/// Every queue this rank takes part in, by id (its communicator's context).
#[derive(Default)]
pub(crate) struct TaskState {
    ends: HashMap<u32, End>,
}

impl TaskState {
    /// Whether other ranks may wait on this one's service.
    #[inline]
    pub(crate) fn serving(&self) -> bool {
        self.ends.values().any(|e| e.queue.is_some())
    }
}

impl<T: bytemuck::Pod> TaskQueue<T> {
    /// An empty queue over the ranks of `comm`. Collective.
    #[track_caller]
    pub fn new(comm: &Comm) -> Result<TaskQueue<T>> {
        Ok(TaskQueue {
            raw: RawTaskQueue::new(comm, std::mem::size_of::<T>())?,
            _t: PhantomData,
        })
    }

    /// Queues `item` (at the back). An error once the work is over.
    pub fn push(&self, item: &T) -> Result<()> {
        self.raw.push(bytemuck::bytes_of(item))
    }

    /// The item at the front, waiting for one if the queue is empty; `None`
    /// once every rank waits in a pop with nothing queued (and from then on).
    #[track_caller]
    pub fn pop(&self) -> Result<Option<T>> {
        let mut item = T::zeroed();
        Ok(self
            .raw
            .pop(bytemuck::bytes_of_mut(&mut item))?
            .then_some(item))
    }
}

impl RawTaskQueue {
    /// An empty queue of items of `item` bytes over the ranks of `comm`.
    /// Collective.
    #[track_caller]
    pub fn new(comm: &Comm, item: usize) -> Result<RawTaskQueue> {
        let comm = comm.dup()?;
        let max_item = item;
        let me = comm.rank() as u32;
        {
            let mut e = comm.engine();
            let keeper = comm.members()[KEEPER as usize];
            if me != KEEPER && e.frame_limit(keeper) < max_item + 16 {
                return Err(Error::invalid(
                    "T",
                    max_item as i64,
                    "items that fit one frame of the transport",
                ));
            }
            let end = End {
                me,
                members: comm.members().to_vec(),
                queue: (me == KEEPER).then(|| Queue::new(comm.size() as u32, max_item)),
                max_item,
                answer: None,
                popping: false,
                taking: 0,
                ahead: VecDeque::new(),
                done: false,
            };
            e.svc.tasks.ends.insert(comm.ctx(), end);
        }
        // Every rank's end exists before any can push.
        comm.barrier()?;
        Ok(RawTaskQueue { comm, item })
    }

    /// The queue's communicator (a duplicate of the one it was made on).
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// Bytes per item.
    pub fn item_bytes(&self) -> usize {
        self.item
    }

    /// Queues `item` (at the back). An error once the work is over, or if
    /// `item` is not [`RawTaskQueue::item_bytes`] long.
    pub fn push(&self, item: &[u8]) -> Result<()> {
        self.whole(item.len())?;
        let id = self.comm.ctx();
        let mut e = self.comm.engine();
        if e.svc.tasks.ends.get(&id).is_some_and(|end| end.done) {
            return Err(Error::Protocol(format!(
                "a push to task queue #{id} after its work was over"
            )));
        }
        let m = Msg::Push {
            item: item.to_vec(),
        };
        send(&mut e, id, KEEPER, m)
    }

    fn whole(&self, len: usize) -> Result<()> {
        if len == self.item {
            return Ok(());
        }
        Err(Error::invalid(
            "item",
            len as i64,
            format!("an item of the queue's {} bytes", self.item),
        ))
    }

    /// Copies the item at the front into `item` (as long as an item) and
    /// returns `true`, waiting for one if the queue is empty; `false` once
    /// every rank waits in a pop with nothing queued (and from then on).
    ///
    /// With an item, the rank asks the keeper for its next ones at once
    /// (takes, `kumi_core::tasks`, up to `LOOKAHEAD` items ahead), so the
    /// next pop usually finds one here and does not wait a round trip;
    /// items so held are this rank's until its next pops.
    #[track_caller]
    pub fn pop(&self, item: &mut [u8]) -> Result<bool> {
        self.whole(item.len())?;
        let at = Location::caller();
        let id = self.comm.ctx();
        let mut e = self.comm.engine();
        if open(&mut e, id).done {
            return Ok(false);
        }
        let info = || self.comm.info(Call::TaskPop, -1, -2, at);
        // An item a take brought, or every take's answer first: an item in
        // hand is work of this rank's own, so it may pop only without one.
        let end = open(&mut e, id);
        if end.ahead.is_empty() && end.taking > 0 {
            e.wait_until(info(), |e| {
                e.svc
                    .tasks
                    .ends
                    .get(&id)
                    .is_none_or(|x| !x.ahead.is_empty() || x.taking == 0)
            })?;
        }
        let got = match open(&mut e, id).ahead.pop_front() {
            Some(item) => Some(item),
            None => {
                open(&mut e, id).popping = true;
                send(&mut e, id, KEEPER, Msg::Pop)?;
                let answered =
                    |e: &mut Engine| e.svc.tasks.ends.get(&id).is_none_or(|x| x.answer.is_some());
                if !answered(&mut e) {
                    // Any rank may end the wait by pushing.
                    e.wait_until(info(), answered)?;
                }
                let end = open(&mut e, id);
                end.popping = false;
                match end.answer.take() {
                    Some(Msg::Task { item }) => Some(item),
                    _ => None,
                }
            }
        };
        let Some(got) = got else {
            open(&mut e, id).done = true;
            return Ok(false);
        };
        item.copy_from_slice(&got);
        let end = open(&mut e, id);
        let more = LOOKAHEAD.saturating_sub(end.taking + end.ahead.len());
        end.taking += more;
        for _ in 0..more {
            send(&mut e, id, KEEPER, Msg::Take)?;
        }
        Ok(true)
    }
}

impl Drop for RawTaskQueue {
    fn drop(&mut self) {
        let id = self.comm.ctx();
        self.comm.engine().svc.tasks.ends.remove(&id);
    }
}

/// Queue `id`'s end here, which exists while its [`RawTaskQueue`] does.
fn open(e: &mut Engine, id: u32) -> &mut End {
    e.svc
        .tasks
        .ends
        .get_mut(&id)
        .expect("open while the queue lives")
}

/// Sends `m` to rank `to` of queue `id`; to this rank, handles it at once.
fn send(e: &mut Engine, id: u32, to: u32, m: Msg) -> Result<()> {
    let end = open(e, id);
    if to == end.me {
        let me = end.me;
        return deliver(e, id, me, m);
    }
    let world = end.members[to as usize];
    let mut h = Header::new(Kind::Tasks);
    h.ctx = id;
    h.src = end.me;
    let payload = m.encode();
    h.len = payload.len() as u64;
    e.push_frame(world, &h, &payload)
}

/// Message `m` from rank `from` of queue `id`, at this rank.
fn deliver(e: &mut Engine, id: u32, from: u32, m: Msg) -> Result<()> {
    let Some(end) = e.svc.tasks.ends.get_mut(&id) else {
        return Ok(());
    };
    let whole = match &m {
        Msg::Push { item } | Msg::Task { item } => item.len() == end.max_item,
        _ => true,
    };
    let refused = match (m, &mut end.queue) {
        (m, _) if !whole => Some(format!("{m:?}: not one item of {} bytes", end.max_item)),
        // A take's answer comes before the pop that follows it.
        (m @ (Msg::Task { .. } | Msg::Empty), _) if from == KEEPER && end.taking > 0 => {
            end.taking -= 1;
            if let Msg::Task { item } = m {
                end.ahead.push_back(item);
            }
            None
        }
        (m @ (Msg::Task { .. } | Msg::Done), _) if from == KEEPER && end.popping => {
            end.answer = Some(m);
            None
        }
        (m @ (Msg::Push { .. } | Msg::Pop | Msg::Take), Some(q)) => q.handle(from, m).err(),
        (m, _) => Some(format!("{m:?} unexpected here")),
    };
    if let Some(why) = refused {
        log(
            e.world_rank,
            &format!("task queue #{id}: refused a message from rank {from}: {why}"),
        );
        return Ok(());
    }
    // The keeper's answers.
    loop {
        let Some(out) = e
            .svc
            .tasks
            .ends
            .get_mut(&id)
            .and_then(|end| end.queue.as_mut())
            .and_then(Queue::poll_transmit)
        else {
            return Ok(());
        };
        send(e, id, out.0, out.1)?;
    }
}

/// A task-queue frame from world rank `from`.
pub(crate) fn on_frame(e: &mut Engine, from: u32, h: &Header, p: &[u8]) -> Result<()> {
    let id = h.ctx;
    let Some(end) = e.svc.tasks.ends.get(&id) else {
        log(
            e.world_rank,
            &format!("dropped a task-queue message from rank {from}: queue #{id} not open here"),
        );
        return Ok(());
    };
    if end.members.get(h.src as usize) != Some(&from) {
        log(
            e.world_rank,
            &format!(
                "dropped a task-queue message from rank {from}: not rank {} of queue #{id}",
                h.src
            ),
        );
        return Ok(());
    }
    match Msg::decode(p, end.max_item) {
        Ok(m) => deliver(e, id, h.src, m),
        Err(why) => {
            log(
                e.world_rank,
                &format!("dropped a task-queue message from rank {from}: {why}"),
            );
            Ok(())
        }
    }
}
