//! The combining service's logic (OCHANOMIZU-5): keyed requests climb a tree of
//! ranks towards the key's owner; interior ranks merge matching requests into
//! one and split the reply on its way back down.
//!
//! A [`Request`] carries a key, an operation id, a [`Mode`], an arrival
//! [`Level`], an expected count, a value and a weight (how many original
//! requests it stands for). A [`Node`] is one rank's state machine. It takes
//! requests from its own clients ([`Node::submit`]) and messages from other
//! ranks ([`Node::on_msg`]), and the time now ([`Node::poll`]); it never reads a
//! clock or touches a socket. What it wants done comes out of
//! [`Node::take_actions`]: messages to send, replies to deliver to local clients.
//!
//! **Levels.** 0: never combined, sent straight to the owner. 1: no wait; a later request
//! with the same key attaches to an outstanding one — it *shares* the reply when
//! its value is absorbed by what went up (`combine(V, v) == V`: reads, test-and-set),
//! otherwise it queues behind and goes up, merged with the others that queued,
//! when the outstanding reply comes back. 2: wait up to `wait_ns` for partners
//! (or until the whole subtree has contributed). 3: wait until every expected
//! contribution of the subtree is there (`count` must then cover the whole group;
//! a smaller count is only awaited at the owner). Once part of a subtree's
//! contributions went up uncombined (a full store somewhere), an interior node
//! can no longer see "all" of them, so a level-3 request may carry `wait_ns` as
//! a fallback: an entry still incomplete then goes up as it is. Only the owner
//! enforces "all"; interior waiting is an optimisation and may give up.
//!
//! **Fetch-and-op, serialized (the NYU Ultracomputer rule).** In [`Mode::Fetch`]
//! the owner keeps a value per key, replies with the value *before* the request
//! and stores `combine(old, v)`. A merged request carries `v1 ⊕ v2 ⊕ ...`; when its
//! reply `x` returns, the first member gets `x`, the second `x ⊕ v1`, the third
//! `x ⊕ v1 ⊕ v2`: exactly as if the members had reached the owner one after the
//! other. Every caller of `fetch_add` so gets a distinct previous value.
//! [`Mode::Reduce`] instead collects `count` contributions at the owner and sends
//! the total to every contributor (keyed reductions, barriers); the owner keeps
//! nothing afterwards.
//!
//! **Routing.** A request names where its reply goes (`reply_to`, `reply_id`):
//! the rank that merged it, or the original client. So a node that forwards a
//! request without merging keeps no state for it, which is what makes overflow
//! safe: when the bounded store of a node is full, new requests go up
//! uncombined, and nothing is lost or waits forever. (The owner's own table of
//! values and level-3 collections is not bounded: it cannot hand them on.)
//!
//! **Tree.** For a key owned by rank o, ranks of one host form a binary tree
//! (heap order) under the host's leader (o on its own host, else the host's
//! first rank), and the leaders a binary tree under o: one message per host
//! crosses the network per merged request. Binary rather than binomial: both
//! are ceil(log2(p+1)) levels deep, but a binomial root takes log2(p) requests
//! per combined round where a binary node takes at most two (plus its own
//! reply), and the fan-in of the busiest rank is what limits a hot spot.

// foldhash, not SipHash: every combining request looks these up (several
// times on an interior node); the keys come from authenticated members of
// the job, so flooding resistance buys nothing.
use foldhash::HashMap;

/// Reply ids with this bit set name a local client; without it, a merged entry.
pub const CLIENT_BIT: u64 = 1 << 63;

/// When a request may be merged with others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// 0: never combined.
    Never = 0,
    /// 1: no wait; later requests attach to an outstanding one.
    Attach = 1,
    /// 2: wait up to `wait_ns` for partners.
    Wait = 2,
    /// 3: wait for all expected contributions.
    All = 3,
}

/// What the owner does with a (merged) request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Reply with the stored value, store `combine(old, v)`; members get prefixes.
    Fetch = 0,
    /// Collect `count` contributions, reply with their combination to each.
    Reduce = 1,
}

/// Built-in operation ids (user operations use ids from [`OP_USER_FIRST`]).
/// Values are little-endian 8-byte lanes, combined lane by lane.
pub mod op {
    /// No value (barriers): the combination is empty.
    pub const NONE: u32 = 0;
    /// Keep the left value (reads: the owner's value is not changed).
    pub const KEEP: u32 = 1;
    /// Wrapping sum of i64 (and u64) lanes.
    pub const SUM_I64: u32 = 2;
    /// Sum of f64 lanes.
    pub const SUM_F64: u32 = 3;
    /// Minimum of i64 lanes.
    pub const MIN_I64: u32 = 4;
    /// Maximum of i64 lanes.
    pub const MAX_I64: u32 = 5;
    /// Minimum of u64 lanes.
    pub const MIN_U64: u32 = 6;
    /// Maximum of u64 lanes.
    pub const MAX_U64: u32 = 7;
    /// Minimum of f64 lanes.
    pub const MIN_F64: u32 = 8;
    /// Maximum of f64 lanes.
    pub const MAX_F64: u32 = 9;
    /// Bitwise or of 64-bit lanes (test-and-set uses value 1).
    pub const BOR: u32 = 10;
    /// Bitwise and of 64-bit lanes.
    pub const BAND: u32 = 11;
    /// Bitwise xor of 64-bit lanes.
    pub const BXOR: u32 = 12;
    /// Wrapping product of i64 lanes.
    pub const PROD_I64: u32 = 13;
    /// Product of f64 lanes.
    pub const PROD_F64: u32 = 14;
}

/// First id available to user-registered operations.
pub const OP_USER_FIRST: u32 = 1024;

/// The operations a node can apply: built-ins and whatever the runtime adds.
pub trait Ops {
    /// `a ⊕ b`. Must be associative; in [`Mode::Reduce`] also commutative (the
    /// tree merges in arrival order).
    fn combine(&self, op: u32, a: &[u8], b: &[u8]) -> Result<Vec<u8>, String>;
}

/// Only the built-in operations.
#[derive(Clone, Copy, Debug, Default)]
pub struct Builtins;

impl Ops for Builtins {
    fn combine(&self, op: u32, a: &[u8], b: &[u8]) -> Result<Vec<u8>, String> {
        builtin(op, a, b)
    }
}

/// Applies built-in operation `op`; an error names what is wrong.
pub fn builtin(id: u32, a: &[u8], b: &[u8]) -> Result<Vec<u8>, String> {
    match id {
        op::NONE => return Ok(Vec::new()),
        op::KEEP => return Ok(a.to_vec()),
        _ => {}
    }
    if a.len() != b.len() || !a.len().is_multiple_of(8) {
        return Err(format!(
            "operation {id} combines values of {} and {} bytes; both must be the same whole number of 8-byte lanes",
            a.len(),
            b.len()
        ));
    }
    let i = |c: &[u8]| i64::from_le_bytes(c.try_into().expect("8 bytes"));
    let u = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    let f = |c: &[u8]| f64::from_le_bytes(c.try_into().expect("8 bytes"));
    let mut out = Vec::with_capacity(a.len());
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let lane = match id {
            op::SUM_I64 => i(x).wrapping_add(i(y)).to_le_bytes(),
            op::SUM_F64 => (f(x) + f(y)).to_le_bytes(),
            op::MIN_I64 => i(x).min(i(y)).to_le_bytes(),
            op::MAX_I64 => i(x).max(i(y)).to_le_bytes(),
            op::MIN_U64 => u(x).min(u(y)).to_le_bytes(),
            op::MAX_U64 => u(x).max(u(y)).to_le_bytes(),
            op::MIN_F64 => f(x).min(f(y)).to_le_bytes(),
            op::MAX_F64 => f(x).max(f(y)).to_le_bytes(),
            op::BOR => (u(x) | u(y)).to_le_bytes(),
            op::BAND => (u(x) & u(y)).to_le_bytes(),
            op::BXOR => (u(x) ^ u(y)).to_le_bytes(),
            op::PROD_I64 => i(x).wrapping_mul(i(y)).to_le_bytes(),
            op::PROD_F64 => (f(x) * f(y)).to_le_bytes(),
            other => return Err(format!("unknown combining operation {other}")),
        };
        out.extend_from_slice(&lane);
    }
    Ok(out)
}

/// A combining request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// What is combined on (a counter's name hashed, a group id...).
    pub key: u64,
    /// Operation id.
    pub op: u32,
    /// Fetch-and-op or reduction.
    pub mode: Mode,
    /// Arrival level.
    pub level: Level,
    /// Expected contributions (levels 3 and [`Mode::Reduce`]).
    pub count: u32,
    /// Level 2: how long a node waits for partners, in nanoseconds.
    pub wait_ns: u64,
    /// How many original requests this one stands for.
    pub weight: u32,
    /// Rank the reply goes to.
    pub reply_to: u32,
    /// Id the reply carries back (an entry of `reply_to`, or a client id).
    pub reply_id: u64,
    /// The operand.
    pub value: Vec<u8>,
}

/// A message between nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// A request on its way to the owner.
    Request(Request),
    /// The reply to request `id`: a value, or why it failed.
    Reply {
        /// The request's `reply_id`.
        id: u64,
        /// The value, or an error message.
        value: Result<Vec<u8>, String>,
    },
}

/// What the node asks its runtime to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send `msg` to rank `to`.
    Send {
        /// Destination rank (in the group).
        to: u32,
        /// The message.
        msg: Msg,
    },
    /// Local client `id` (without [`CLIENT_BIT`]) gets its reply.
    Deliver {
        /// Client id as given to [`Node::submit`].
        id: u64,
        /// The value, or an error message.
        value: Result<Vec<u8>, String>,
    },
}

impl Msg {
    /// Wire encoding (little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Msg::Request(r) => {
                b.push(1);
                b.extend_from_slice(&r.key.to_le_bytes());
                b.extend_from_slice(&r.op.to_le_bytes());
                b.push(r.mode as u8);
                b.push(r.level as u8);
                b.extend_from_slice(&r.count.to_le_bytes());
                b.extend_from_slice(&r.wait_ns.to_le_bytes());
                b.extend_from_slice(&r.weight.to_le_bytes());
                b.extend_from_slice(&r.reply_to.to_le_bytes());
                b.extend_from_slice(&r.reply_id.to_le_bytes());
                b.extend_from_slice(&r.value);
            }
            Msg::Reply { id, value } => {
                let (tag, bytes) = match value {
                    Ok(v) => (2, v.as_slice()),
                    Err(e) => (3, e.as_bytes()),
                };
                b.push(tag);
                b.extend_from_slice(&id.to_le_bytes());
                b.extend_from_slice(bytes);
            }
        }
        b
    }

    /// Decodes what [`Msg::encode`] wrote; any other input is an error.
    pub fn decode(b: &[u8]) -> Result<Msg, String> {
        let need = |n: usize| {
            if b.len() < n {
                Err(format!(
                    "combining message of {} bytes is truncated",
                    b.len()
                ))
            } else {
                Ok(())
            }
        };
        need(1)?;
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        match b[0] {
            1 => {
                need(43)?;
                let mode = match b[13] {
                    0 => Mode::Fetch,
                    1 => Mode::Reduce,
                    m => return Err(format!("combining request with unknown mode {m}")),
                };
                let level = match b[14] {
                    0 => Level::Never,
                    1 => Level::Attach,
                    2 => Level::Wait,
                    3 => Level::All,
                    l => return Err(format!("combining request with unknown level {l}")),
                };
                Ok(Msg::Request(Request {
                    key: u64_at(1),
                    op: u32_at(9),
                    mode,
                    level,
                    count: u32_at(15),
                    wait_ns: u64_at(19),
                    weight: u32_at(27),
                    reply_to: u32_at(31),
                    reply_id: u64_at(35),
                    value: b[43..].to_vec(),
                }))
            }
            2 | 3 => {
                need(9)?;
                let rest = &b[9..];
                let value = if b[0] == 2 {
                    Ok(rest.to_vec())
                } else {
                    Err(String::from_utf8_lossy(rest).into_owned())
                };
                Ok(Msg::Reply {
                    id: u64_at(1),
                    value,
                })
            }
            t => Err(format!("unknown combining message type {t}")),
        }
    }
}

/// The host of each rank of the group (any labels), and the trees built on it.
#[derive(Clone, Debug)]
pub struct Tree {
    host: Vec<usize>,
    /// Per owner: parent and subtree size of every rank.
    cache: HashMap<u32, (Vec<Option<u32>>, Vec<u32>)>,
}

impl Tree {
    /// A tree over `host.len()` ranks, rank r living on host `host[r]`.
    pub fn new(host: Vec<usize>) -> Tree {
        Tree {
            host,
            cache: HashMap::default(),
        }
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.host.len() as u32
    }

    /// The rank that owns `key`.
    pub fn owner(&self, key: u64) -> u32 {
        (key % self.host.len().max(1) as u64) as u32
    }

    fn build(&mut self, owner: u32) -> &(Vec<Option<u32>>, Vec<u32>) {
        let host = &self.host;
        self.cache.entry(owner).or_insert_with(|| {
            let n = host.len();
            let mut hosts: Vec<(usize, Vec<u32>)> = Vec::new();
            for (r, &h) in host.iter().enumerate() {
                match hosts.iter_mut().find(|(k, _)| *k == h) {
                    Some((_, v)) => v.push(r as u32),
                    None => hosts.push((h, vec![r as u32])),
                }
            }
            let oh = host[owner as usize];
            let oi = hosts
                .iter()
                .position(|(h, _)| *h == oh)
                .expect("owner's host");
            hosts.rotate_left(oi);
            let mut parent = vec![None; n];
            let binary = |order: &[u32], parent: &mut Vec<Option<u32>>| {
                for v in 1..order.len() {
                    parent[order[v] as usize] = Some(order[(v - 1) / 2]);
                }
            };
            let mut leaders = Vec::new();
            for (_, members) in &mut hosts {
                let li = members.iter().position(|&r| r == owner).unwrap_or(0);
                members.rotate_left(li);
                binary(members, &mut parent);
                leaders.push(members[0]);
            }
            binary(&leaders, &mut parent);
            let mut size = vec![1u32; n];
            // Add each rank to all its ancestors.
            for r in 0..n {
                let mut a = parent[r];
                while let Some(x) = a {
                    size[x as usize] += 1;
                    a = parent[x as usize];
                }
            }
            (parent, size)
        })
    }

    /// `r`'s parent in the tree of `owner` (`None` for the owner).
    pub fn parent(&mut self, r: u32, owner: u32) -> Option<u32> {
        self.build(owner).0[r as usize]
    }

    /// Number of ranks in `r`'s subtree (itself included).
    pub fn subtree(&mut self, r: u32, owner: u32) -> u32 {
        self.build(owner).1[r as usize]
    }
}

/// The part of a request a member of a merged entry keeps for its reply.
#[derive(Clone, Debug)]
struct Member {
    reply_to: u32,
    reply_id: u64,
    value: Vec<u8>,
}

/// Requests match when all of these agree.
type MatchKey = (u64, u32, Mode, Level);

#[derive(Debug)]
struct Entry {
    mk: MatchKey,
    count: u32,
    wait_ns: u64,
    members: Vec<Member>,
    /// Level 1: attached requests whose value the sent combination absorbs.
    shared: Vec<Member>,
    combined: Vec<u8>,
    weight: u32,
    /// Level 2: when it goes up at the latest.
    deadline: Option<u64>,
    sent: bool,
}

/// One rank's combining state machine. See the module doc.
#[derive(Debug)]
pub struct Node {
    me: u32,
    tree: Tree,
    cap: usize,
    entries: HashMap<u64, Entry>,
    /// The entry still collecting, per match key.
    waiting: HashMap<MatchKey, u64>,
    /// Entries sent up and awaiting their reply, per match key (oldest first).
    outstanding: HashMap<MatchKey, Vec<u64>>,
    /// Owner: each key's value.
    values: HashMap<u64, Vec<u8>>,
    /// Owner: level-3 and reduce collections (not bounded by `cap`).
    collecting: HashMap<MatchKey, Entry>,
    next_id: u64,
    out: Vec<Action>,
    /// Combining messages this node has received.
    pub handled: u64,
}

impl Node {
    /// Node of rank `me` in `tree`, keeping at most `cap` entries in its store.
    pub fn new(me: u32, tree: Tree, cap: usize) -> Node {
        Node {
            me,
            tree,
            cap,
            entries: HashMap::default(),
            waiting: HashMap::default(),
            outstanding: HashMap::default(),
            values: HashMap::default(),
            collecting: HashMap::default(),
            next_id: 1,
            out: Vec::new(),
            handled: 0,
        }
    }

    /// Entries in the bounded store now.
    pub fn stored(&self) -> usize {
        self.entries.len()
    }

    /// The owner's current value of `key`, if this rank owns it and it was set.
    pub fn value(&self, key: u64) -> Option<&[u8]> {
        self.values.get(&key).map(|v| v.as_slice())
    }

    /// What to do now (drains the list).
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.out)
    }

    /// Whether anything waits for a deadline or a reply.
    pub fn busy(&self) -> bool {
        !self.entries.is_empty() || !self.collecting.is_empty()
    }

    /// The earliest level-2 deadline, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.entries
            .values()
            .filter(|e| !e.sent)
            .filter_map(|e| e.deadline)
            .min()
    }

    /// A local client's request; its reply comes as [`Action::Deliver`] with
    /// `client`. `reply_to`, `reply_id` and `weight` are filled in here.
    pub fn submit(&mut self, now: u64, client: u64, mut req: Request, ops: &dyn Ops) {
        req.reply_to = self.me;
        req.reply_id = client | CLIENT_BIT;
        req.weight = 1;
        self.on_request(now, req, ops);
    }

    /// A message from rank `from`.
    pub fn on_msg(&mut self, now: u64, from: u32, msg: Msg, ops: &dyn Ops) {
        self.handled += 1;
        let _ = from;
        match msg {
            Msg::Request(r) => self.on_request(now, r, ops),
            Msg::Reply { id, value } => self.reply(self.me, id, value, ops),
        }
    }

    /// Sends up every waiting entry whose deadline is `<= now`.
    pub fn poll(&mut self, now: u64) {
        let due: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.sent && e.deadline.is_some_and(|d| d <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.send_up(id);
        }
    }

    fn on_request(&mut self, now: u64, req: Request, ops: &dyn Ops) {
        let owner = self.tree.owner(req.key);
        if req.weight == 0 || (req.reply_to >= self.tree.size() && req.reply_to != self.me) {
            return; // nothing to answer, or nowhere to answer to
        }
        if owner == self.me {
            return self.at_owner(req, ops);
        }
        let mk = (req.key, req.op, req.mode, req.level);
        let member = Member {
            reply_to: req.reply_to,
            reply_id: req.reply_id,
            value: req.value.clone(),
        };
        // Level 1: share the reply of an outstanding request that absorbs us.
        if req.level == Level::Attach && req.mode == Mode::Fetch {
            if let Some(&id) = self.outstanding.get(&mk).and_then(|v| v.last()) {
                let e = self.entries.get_mut(&id).expect("outstanding entry");
                if ops.combine(req.op, &e.combined, &req.value).as_ref() == Ok(&e.combined) {
                    e.shared.push(member);
                    return;
                }
            }
        }
        let hold_all = req.level == Level::All && req.count >= self.tree.size();
        if req.level == Level::Never {
            // An ordinary message: straight to the owner, no tree.
            self.out.push(Action::Send {
                to: owner,
                msg: Msg::Request(req),
            });
            return;
        }
        if req.level == Level::All && !hold_all {
            return self.forward(req);
        }
        let id = match self.waiting.get(&mk) {
            Some(&id) => {
                let e = self.entries.get_mut(&id).expect("waiting entry");
                match ops.combine(req.op, &e.combined, &req.value) {
                    Ok(c) => e.combined = c,
                    Err(msg) => {
                        return self.reply(req.reply_to, req.reply_id, Err(msg), ops);
                    }
                }
                e.members.push(member);
                e.weight = e.weight.saturating_add(req.weight);
                id
            }
            None => {
                if self.entries.len() >= self.cap {
                    return self.forward(req); // store full: go up uncombined
                }
                let id = self.next_id;
                self.next_id += 1;
                let deadline = match req.level {
                    Level::Wait => Some(now.saturating_add(req.wait_ns)),
                    // Level 3's fallback: see the module doc.
                    Level::All if req.wait_ns > 0 => Some(now.saturating_add(req.wait_ns)),
                    _ => None,
                };
                self.entries.insert(
                    id,
                    Entry {
                        mk,
                        count: req.count,
                        wait_ns: req.wait_ns,
                        members: vec![member],
                        shared: Vec::new(),
                        combined: req.value,
                        weight: req.weight,
                        deadline,
                        sent: false,
                    },
                );
                self.waiting.insert(mk, id);
                id
            }
        };
        let e = &self.entries[&id];
        let full = e.weight >= self.tree.subtree(self.me, owner);
        let go = match req.level {
            Level::Attach => self.outstanding.get(&mk).is_none_or(|v| v.is_empty()) || full,
            Level::Wait => full || e.deadline.is_some_and(|d| d <= now),
            Level::All => full || e.deadline.is_some_and(|d| d <= now),
            Level::Never => true,
        };
        if go {
            self.send_up(id);
        }
    }

    fn forward(&mut self, req: Request) {
        let owner = self.tree.owner(req.key);
        let to = self.tree.parent(self.me, owner).unwrap_or(owner);
        self.out.push(Action::Send {
            to,
            msg: Msg::Request(req),
        });
    }

    fn send_up(&mut self, id: u64) {
        let Some(e) = self.entries.get_mut(&id) else {
            return;
        };
        if e.sent {
            return;
        }
        e.sent = true;
        let (key, op, mode, level) = e.mk;
        self.waiting.remove(&e.mk);
        self.outstanding.entry(e.mk).or_default().push(id);
        let req = Request {
            key,
            op,
            mode,
            level,
            count: e.count,
            wait_ns: e.wait_ns,
            weight: e.weight,
            reply_to: self.me,
            reply_id: id,
            value: e.combined.clone(),
        };
        self.forward(req);
    }

    fn at_owner(&mut self, req: Request, ops: &dyn Ops) {
        let mk = (req.key, req.op, req.mode, req.level);
        let member = Member {
            reply_to: req.reply_to,
            reply_id: req.reply_id,
            value: req.value.clone(),
        };
        if req.mode == Mode::Fetch && req.level != Level::All {
            return self.apply(req.key, req.op, vec![member], &req.value, ops);
        }
        let e = self.collecting.entry(mk).or_insert_with(|| Entry {
            mk,
            count: req.count,
            wait_ns: 0,
            members: Vec::new(),
            shared: Vec::new(),
            combined: Vec::new(),
            weight: 0,
            deadline: None,
            sent: false,
        });
        if e.members.is_empty() {
            e.combined = req.value.clone();
        } else {
            match ops.combine(req.op, &e.combined, &req.value) {
                Ok(c) => e.combined = c,
                Err(msg) => return self.reply(req.reply_to, req.reply_id, Err(msg), ops),
            }
        }
        e.members.push(member);
        e.weight = e.weight.saturating_add(req.weight);
        if e.weight >= e.count {
            let e = self.collecting.remove(&mk).expect("collecting");
            match req.mode {
                Mode::Fetch => self.apply(req.key, req.op, e.members, &e.combined, ops),
                Mode::Reduce => {
                    for m in e.members {
                        self.reply(m.reply_to, m.reply_id, Ok(e.combined.clone()), ops);
                    }
                }
            }
        }
    }

    /// Owner: applies a (merged) fetch-and-op and answers its members.
    fn apply(&mut self, key: u64, op: u32, members: Vec<Member>, v: &[u8], ops: &dyn Ops) {
        let old = self
            .values
            .entry(key)
            .or_insert_with(|| vec![0; v.len()])
            .clone();
        match ops.combine(op, &old, v) {
            Ok(new) => {
                self.values.insert(key, new);
                self.decombine(op, members, Vec::new(), Ok(old), ops);
            }
            Err(msg) => self.decombine(op, members, Vec::new(), Err(msg), ops),
        }
    }

    /// Splits reply `x` of a merged fetch-and-op: member i gets
    /// `x ⊕ v0 ⊕ ... ⊕ v(i-1)`; sharers get `x ⊕ (all)`.
    fn decombine(
        &mut self,
        op: u32,
        members: Vec<Member>,
        shared: Vec<Member>,
        x: Result<Vec<u8>, String>,
        ops: &dyn Ops,
    ) {
        let mut x = x;
        for m in members {
            let next = match &x {
                Ok(v) => ops.combine(op, v, &m.value),
                Err(e) => Err(e.clone()),
            };
            self.reply(m.reply_to, m.reply_id, x, ops);
            x = next;
        }
        for m in shared {
            self.reply(m.reply_to, m.reply_id, x.clone(), ops);
        }
    }

    /// Routes a reply: to a local client, into a local entry, or to a rank.
    fn reply(&mut self, to: u32, id: u64, value: Result<Vec<u8>, String>, ops: &dyn Ops) {
        if to != self.me {
            self.out.push(Action::Send {
                to,
                msg: Msg::Reply { id, value },
            });
            return;
        }
        if id & CLIENT_BIT != 0 {
            self.out.push(Action::Deliver {
                id: id & !CLIENT_BIT,
                value,
            });
            return;
        }
        let Some(e) = self.entries.remove(&id) else {
            return; // a reply for nothing we sent: dropped
        };
        if let Some(v) = self.outstanding.get_mut(&e.mk) {
            v.retain(|&x| x != id);
            if v.is_empty() {
                self.outstanding.remove(&e.mk);
            }
        }
        match e.mk.2 {
            Mode::Fetch => self.decombine(e.mk.1, e.members, e.shared, value, ops),
            Mode::Reduce => {
                for m in e.members.into_iter().chain(e.shared) {
                    self.reply(m.reply_to, m.reply_id, value.clone(), ops);
                }
            }
        }
        // Level 1: requests that queued behind go up now.
        if e.mk.3 == Level::Attach && !self.outstanding.contains_key(&e.mk) {
            if let Some(&w) = self.waiting.get(&e.mk) {
                self.send_up(w);
            }
        }
    }
}

// Tests index ranks by number on purpose (rank r's state), and tables of
// algorithms are clearer spelled out than behind type aliases.
#[cfg(test)]
#[allow(clippy::needless_range_loop, clippy::type_complexity)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fa(key: u64, level: Level, wait_ns: u64, count: u32) -> Request {
        Request {
            key,
            op: op::SUM_I64,
            mode: Mode::Fetch,
            level,
            count,
            wait_ns,
            weight: 1,
            reply_to: 0,
            reply_id: 0,
            value: 1i64.to_le_bytes().to_vec(),
        }
    }

    /// A network of nodes with messages delivered in a random order.
    struct Net {
        nodes: Vec<Node>,
        inflight: Vec<(u32, u32, Msg)>,
        delivered: Vec<Vec<(u64, Result<Vec<u8>, String>)>>,
        now: u64,
        max_stored: usize,
    }

    impl Net {
        fn new(hosts: Vec<usize>, cap: usize) -> Net {
            let n = hosts.len();
            let tree = Tree::new(hosts);
            Net {
                nodes: (0..n as u32)
                    .map(|r| Node::new(r, tree.clone(), cap))
                    .collect(),
                inflight: Vec::new(),
                delivered: vec![Vec::new(); n],
                now: 0,
                max_stored: 0,
            }
        }

        fn collect(&mut self, r: usize) {
            self.max_stored = self.max_stored.max(self.nodes[r].stored());
            for a in self.nodes[r].take_actions() {
                match a {
                    Action::Send { to, msg } => self.inflight.push((r as u32, to, msg)),
                    Action::Deliver { id, value } => self.delivered[r].push((id, value)),
                }
            }
        }

        fn submit(&mut self, r: usize, client: u64, req: Request) {
            self.nodes[r].submit(self.now, client, req, &Builtins);
            self.collect(r);
        }

        /// One random step: deliver a message, or advance the clock and poll.
        fn step(&mut self, rng: &mut u64) -> bool {
            *rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pick = (*rng >> 33) as usize;
            if !self.inflight.is_empty() && !pick.is_multiple_of(4) {
                let (from, to, msg) = self.inflight.swap_remove(pick % self.inflight.len());
                self.nodes[to as usize].on_msg(self.now, from, msg, &Builtins);
                self.collect(to as usize);
                true
            } else {
                self.now += (pick % 7) as u64;
                for r in 0..self.nodes.len() {
                    self.nodes[r].poll(self.now);
                    self.collect(r);
                }
                !self.inflight.is_empty() || self.nodes.iter().any(|n| n.busy())
            }
        }
    }

    /// Every rank calls fetch_add(1) `m` times, one at a time; returns all
    /// previous values and the owner's final value.
    fn run_fetch_add(
        hosts: Vec<usize>,
        cap: usize,
        m: usize,
        level: Level,
        wait: u64,
        seed: u64,
    ) -> (Vec<i64>, i64, usize) {
        let n = hosts.len();
        let mut net = Net::new(hosts, cap);
        let key = 12345u64;
        let mut issued = vec![0usize; n];
        let mut got = Vec::new();
        let mut rng = seed;
        for r in 0..n {
            net.submit(r, 0, fa(key, level, wait, n as u32));
            issued[r] = 1;
        }
        let mut guard = 0;
        loop {
            let more = net.step(&mut rng);
            for r in 0..n {
                let replies: Vec<_> = net.delivered[r].drain(..).collect();
                for (_, v) in replies {
                    let v = v.expect("fetch_add succeeds");
                    got.push(i64::from_le_bytes(v.try_into().unwrap()));
                    if issued[r] < m {
                        issued[r] += 1;
                        net.submit(r, issued[r] as u64, fa(key, level, wait, n as u32));
                    }
                }
            }
            if got.len() == n * m {
                break;
            }
            guard += 1;
            assert!(
                more || guard < 100_000,
                "stalled with {} of {} replies",
                got.len(),
                n * m
            );
            assert!(guard < 1_000_000, "no end");
        }
        let owner = Tree::new(vec![0; n]).owner(key) as usize;
        let fin = net.nodes[owner]
            .value(key)
            .map(|v| i64::from_le_bytes(v.try_into().unwrap()))
            .unwrap_or(0);
        (got, fin, net.max_stored)
    }

    fn check_permutation(mut got: Vec<i64>, fin: i64, total: usize) {
        got.sort();
        assert_eq!(got, (0..total as i64).collect::<Vec<_>>());
        assert_eq!(fin, total as i64);
    }

    fn hosts(n: usize, kind: u8) -> Vec<usize> {
        (0..n)
            .map(|r| match kind % 3 {
                0 => 0,
                1 => r * 3 / n,
                _ => r % 2,
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn fetch_add_serializes_at_every_level(
            n in 1usize..12, m in 1usize..5, lvl in 0u8..4, cap in 0usize..5,
            wait in 0u64..20, hk in 0u8..3, seed: u64,
        ) {
            let level = [Level::Never, Level::Attach, Level::Wait, Level::All][lvl as usize];
            let (got, fin, max_stored) = run_fetch_add(hosts(n, hk), cap, m, level, wait, seed);
            prop_assert!(max_stored <= cap, "store grew to {max_stored} > {cap}");
            check_permutation(got, fin, n * m);
        }

        #[test]
        fn barrier_replies_only_after_everyone_arrived(
            n in 1usize..12, cap in 0usize..4, hk in 0u8..3, seed: u64, order_seed: u64,
        ) {
            let mut net = Net::new(hosts(n, hk), cap);
            let mut order: Vec<usize> = (0..n).collect();
            let mut s = order_seed;
            for i in (1..n).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                order.swap(i, (s >> 33) as usize % (i + 1));
            }
            let bar = Request { key: 7, op: op::NONE, mode: Mode::Reduce, level: Level::All,
                count: n as u32, wait_ns: 0, weight: 1, reply_to: 0, reply_id: 0, value: vec![] };
            let mut rng = seed;
            for (k, &r) in order.iter().enumerate() {
                net.submit(r, 0, bar.clone());
                for _ in 0..5 { net.step(&mut rng); }
                if k + 1 < n {
                    prop_assert!(net.delivered.iter().all(|d| d.is_empty()), "released early");
                }
            }
            while net.delivered.iter().any(|d| d.is_empty()) {
                prop_assert!(net.step(&mut rng), "barrier stalled");
            }
        }
    }

    #[test]
    fn level2_waits_exactly_until_its_deadline() {
        // Ranks 0..4 on one host; key owned by 0; binary tree: rank 1's
        // subtree is {1, 3}, its parent 0.
        let mut n = Node::new(1, Tree::new(vec![0; 4]), 8);
        n.submit(100, 1, fa(0, Level::Wait, 50, 4), &Builtins);
        assert!(n.take_actions().is_empty(), "waits for a partner");
        assert_eq!(n.next_deadline(), Some(150));
        n.poll(149);
        assert!(n.take_actions().is_empty(), "one tick early");
        n.poll(150);
        let a = n.take_actions();
        assert!(
            matches!(&a[..], [Action::Send { to: 0, msg: Msg::Request(r) }] if r.weight == 1),
            "{a:?}"
        );
        // A partner arriving before the deadline makes it go up at once, merged.
        let mut n = Node::new(1, Tree::new(vec![0; 4]), 8);
        n.submit(0, 1, fa(0, Level::Wait, 50, 4), &Builtins);
        let mut r = fa(0, Level::Wait, 50, 4);
        r.reply_to = 3;
        r.reply_id = 9;
        n.on_msg(10, 3, Msg::Request(r), &Builtins);
        let a = n.take_actions();
        assert!(
            matches!(&a[..], [Action::Send { to: 0, msg: Msg::Request(r) }] if r.weight == 2 && r.value == 2i64.to_le_bytes()),
            "{a:?}"
        );
        // The reply x is split: first member gets x, second x + 1.
        let id = match &a[0] {
            Action::Send {
                msg: Msg::Request(r),
                ..
            } => r.reply_id,
            _ => unreachable!(),
        };
        n.on_msg(
            20,
            0,
            Msg::Reply {
                id,
                value: Ok(40i64.to_le_bytes().to_vec()),
            },
            &Builtins,
        );
        let a = n.take_actions();
        assert!(a.contains(&Action::Deliver {
            id: 1,
            value: Ok(40i64.to_le_bytes().to_vec())
        }));
        assert!(a.contains(&Action::Send {
            to: 3,
            msg: Msg::Reply {
                id: 9,
                value: Ok(41i64.to_le_bytes().to_vec())
            }
        }));
        assert_eq!(n.stored(), 0);
    }

    /// Regression: with a store of one, part of a subtree's level-3 requests
    /// went up uncombined while another key held the slot; the entry made later
    /// waited for a weight it could never reach. The fallback bound ends it.
    #[test]
    fn level3_entry_after_overflow_goes_up_at_its_fallback() {
        // Rank 1's subtree is {1, 3}; key 0 is owned by rank 0.
        let mut n = Node::new(1, Tree::new(vec![0; 4]), 1);
        let mut other = fa(4, Level::Wait, 1_000_000, 4); // holds the only slot
        other.reply_to = 3;
        n.on_msg(0, 3, Msg::Request(other), &Builtins);
        let mut r3 = fa(0, Level::All, 100, 4);
        r3.reply_to = 3;
        n.on_msg(1, 3, Msg::Request(r3), &Builtins);
        let a = n.take_actions();
        assert!(
            matches!(&a[..], [Action::Send { to: 0, .. }]),
            "overflowed: {a:?}"
        );
        n.poll(1_000_000); // the other key goes up; its reply frees the slot
        let id = match &n.take_actions()[..] {
            [Action::Send {
                msg: Msg::Request(r),
                ..
            }] => r.reply_id,
            a => panic!("{a:?}"),
        };
        let reply = Msg::Reply {
            id,
            value: Ok(0i64.to_le_bytes().to_vec()),
        };
        n.on_msg(1_000_001, 0, reply, &Builtins);
        n.take_actions();
        assert_eq!(n.stored(), 0);
        n.submit(1_000_002, 1, fa(0, Level::All, 100, 4), &Builtins);
        assert!(
            n.take_actions().is_empty(),
            "waits for rank 3, which went ahead"
        );
        n.poll(1_000_101);
        assert!(n.take_actions().is_empty());
        n.poll(1_000_102);
        let a = n.take_actions();
        assert!(
            matches!(&a[..], [Action::Send { to: 0, msg: Msg::Request(r) }] if r.weight == 1),
            "{a:?}"
        );
    }

    #[test]
    fn full_store_forwards_uncombined() {
        let mut n = Node::new(2, Tree::new(vec![0; 4]), 0);
        n.submit(0, 1, fa(0, Level::Wait, 1_000, 4), &Builtins);
        let a = n.take_actions();
        assert!(
            matches!(&a[..], [Action::Send { to: 0, msg: Msg::Request(r) }] if r.reply_to == 2 && r.reply_id == 1 | CLIENT_BIT),
            "{a:?}"
        );
        assert_eq!(n.stored(), 0);
    }

    #[test]
    fn test_and_set_attachments_share_the_reply() {
        // Rank 2's own TAS goes up; rank 3's attaches and shares: it gets 1.
        let tas = |reply_to| Request {
            key: 0,
            op: op::BOR,
            mode: Mode::Fetch,
            level: Level::Attach,
            count: 4,
            wait_ns: 0,
            weight: 1,
            reply_to,
            reply_id: 5,
            value: 1u64.to_le_bytes().to_vec(),
        };
        let mut n = Node::new(1, Tree::new(vec![0; 4]), 8);
        n.submit(0, 1, tas(2), &Builtins);
        let a = n.take_actions();
        let id = match &a[..] {
            [Action::Send {
                msg: Msg::Request(r),
                ..
            }] => r.reply_id,
            _ => panic!("{a:?}"),
        };
        n.on_msg(0, 3, Msg::Request(tas(3)), &Builtins);
        assert!(n.take_actions().is_empty(), "attached, nothing sent");
        n.on_msg(
            0,
            0,
            Msg::Reply {
                id,
                value: Ok(0u64.to_le_bytes().to_vec()),
            },
            &Builtins,
        );
        let a = n.take_actions();
        assert!(a.contains(&Action::Deliver {
            id: 1,
            value: Ok(0u64.to_le_bytes().to_vec())
        }));
        assert!(a.contains(&Action::Send {
            to: 3,
            msg: Msg::Reply {
                id: 5,
                value: Ok(1u64.to_le_bytes().to_vec())
            }
        }));
    }

    #[test]
    fn tree_follows_hosts() {
        // Hosts {0,1,2}, {3,4}, {5}; owner 4.
        let mut t = Tree::new(vec![0, 0, 0, 1, 1, 2]);
        assert_eq!(t.parent(4, 4), None);
        assert_eq!(t.parent(3, 4), Some(4));
        assert_eq!(t.parent(0, 4), Some(4), "host leader under the owner");
        assert_eq!(t.parent(1, 4), Some(0));
        assert_eq!(t.parent(2, 4), Some(0));
        assert_eq!(t.subtree(4, 4), 6);
        assert_eq!(t.subtree(0, 4), 3);
    }

    #[test]
    fn one_host_tree_is_binary_and_shallow() {
        for n in 1..=64usize {
            let mut t = Tree::new(vec![0; n]);
            for owner in [0, n as u32 / 2, n as u32 - 1] {
                let mut children = vec![0u32; n];
                let mut deepest = 0;
                for r in 0..n as u32 {
                    if let Some(p) = t.parent(r, owner) {
                        children[p as usize] += 1;
                    }
                    let mut depth = 0;
                    let mut a = r;
                    while let Some(p) = t.parent(a, owner) {
                        a = p;
                        depth += 1;
                    }
                    assert_eq!(a, owner, "n={n}: rank {r} does not reach the owner");
                    deepest = deepest.max(depth);
                }
                assert!(children.iter().all(|&c| c <= 2), "n={n}: {children:?}");
                // A complete binary tree of n nodes has floor(log2 n) levels below its root.
                assert_eq!(deepest, (n as f64).log2().floor() as u32, "n={n}");
                assert_eq!(t.subtree(owner, owner), n as u32);
            }
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Msg::decode(&b);
        }

        #[test]
        fn encode_decode_round_trip(key: u64, opid: u32, count: u32, wait_ns: u64, weight: u32,
                                    reply_to: u32, reply_id: u64, value in proptest::collection::vec(any::<u8>(), 0..24)) {
            let m = Msg::Request(Request { key, op: opid, mode: Mode::Reduce, level: Level::Wait,
                count, wait_ns, weight, reply_to, reply_id, value: value.clone() });
            prop_assert_eq!(Msg::decode(&m.encode()), Ok(m));
            let r = Msg::Reply { id: reply_id, value: Ok(value) };
            prop_assert_eq!(Msg::decode(&r.encode()), Ok(r));
            let e = Msg::Reply { id: 3, value: Err("bad".into()) };
            prop_assert_eq!(Msg::decode(&e.encode()), Ok(e));
        }
    }
}
