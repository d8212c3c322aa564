//! Page-based distributed shared memory (SCASH's model, `SEEDS.md` §4): the
//! coherence protocol, with no I/O.
//!
//! A segment of `pages` pages is mapped as ordinary memory on every node.
//! Each page has a **home** node that keeps its master copy; other nodes
//! fetch a copy on first touch and keep it. Memory is made coherent by
//! **release consistency**: writes made before a release (an unlock, a
//! barrier) are visible to every node after its next acquire (a lock, the
//! same barrier). A data-race-free program therefore sees sequential
//! consistency, which the tests below check against a flat memory over
//! thousands of generated programs and schedules.
//!
//! How, per node ([`Node`]):
//! - **Copies and twins.** A non-home copy is `Invalid`, `Read` (clean) or
//!   `Write` (dirty). The first write to a clean copy saves a *twin* (the page
//!   as it was); at the next release or acquire the bytes that differ from
//!   the twin go to the home as a diff ([`Msg::Diff`]), which the home applies
//!   byte by byte, so several writers of one page (false sharing) merge. The
//!   home's own writes go to the master copy directly; it only notes that the
//!   page is dirty so that its release publishes them.
//! - **Versions.** The home counts the changes it published of each page:
//!   every diff applied, and every release of its own writes. A node knows a
//!   lower bound for every page's version ([`Node::known`]), learnt from its
//!   own writes' acknowledgements and from whatever its acquires carried. A
//!   copy fetched at version `v` is stale once the node knows of a version
//!   above `v`: an acquire invalidates it, and the next touch fetches it again.
//! - **Knowledge travels with synchronisation.** A release sends the node's
//!   whole knowledge to the lock's manager (lock `l` is managed by node
//!   `l % nodes`), which hands it with the next grant; a barrier's manager
//!   (node 0) merges every arrival's and hands the union back to all. A node
//!   merges what it learns into what it knew, so knowledge passes along
//!   chains of locks (A releases L1, B takes L1 and releases L2, C takes L2:
//!   C learns A's writes) — the transitivity happens-before needs.
//! - **What a version promises.** A copy at version `v` holds every change
//!   its home published up to `v` (and perhaps some not yet published, which
//!   nobody may read without a race). A writer whose diff the home applied
//!   on top of the very version the writer had, keeps its copy and takes the
//!   new version; otherwise its copy keeps the old one, and is fetched again
//!   once the node learns of anything newer.
//! - **Order of steps.** A release or barrier first sends its diffs and
//!   waits until the homes acknowledge them, so a home holds every write
//!   before anyone can learn of it; only then does it publish. An acquire
//!   sends its diffs first as well, so an invalidation never drops a write.
//!
//! Messages may be delayed and reordered arbitrarily, even between one pair
//! of nodes (the protocol never relies on per-pair order); losing or
//! duplicating them is the transport's business. Every message is checked
//! against the segment's geometry ([`Msg::check`]) and against what the node
//! is waiting for; one that does not fit is an error naming why, never a
//! panic or a silent change of memory.
//!
//! The node never touches memory itself: a [`Store`] gives it the pages and
//! applies its protections (`mprotect` in the runtime, plain vectors in the
//! tests).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// A page index in the segment.
pub type Page = u32;
/// A page version (the count of changes its home published).
pub type Version = u64;

/// What the application may do with a page, as the store should enforce it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prot {
    /// Nothing: the next touch must go through [`Node::access`].
    None,
    /// Loads only: the next store must go through [`Node::access`].
    Read,
    /// Loads and stores.
    ReadWrite,
}

/// The memory a node's protocol acts on.
pub trait Store {
    /// Page `p`'s bytes (the segment's page size).
    fn page(&self, p: Page) -> &[u8];
    /// Page `p`'s bytes, to apply a diff.
    fn page_mut(&mut self, p: Page) -> &mut [u8];
    /// Page `p` becomes `data` (a whole page from its home). A store whose
    /// memory has a cheaper way than a copy through [`Store::page_mut`]
    /// (a write into a file that has no page there yet) takes it here.
    fn install(&mut self, p: Page, data: &[u8]) {
        self.page_mut(p).copy_from_slice(data);
    }
    /// Sets what the application may do with page `p`.
    fn protect(&mut self, p: Page, prot: Prot);
    /// Page `p`'s copy is on its way (the node sent for it): a store may
    /// get ready to [`Store::install`] it, with time that is spent waiting
    /// anyway. The protocol never calls this (its caller does, after
    /// sending what the node asked); it changes nothing the protocol sees.
    fn prepare(&mut self, _p: Page) {}
}

/// A message between nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Msg {
    /// To a page's home: send the page.
    Fetch {
        /// The page.
        page: Page,
    },
    /// From the home: the page as of `version`.
    Page {
        /// The page.
        page: Page,
        /// The master copy's version when it was read.
        version: Version,
        /// The whole page.
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// To a page's home: the bytes a node changed, as runs (offset, bytes).
    Diff {
        /// The page.
        page: Page,
        /// The version of the copy the writer changed.
        base: Version,
        /// Changed runs, ascending, not overlapping.
        runs: Vec<DiffRun>,
    },
    /// From the home: the diff is applied; the page is now at `version`.
    DiffAck {
        /// The page.
        page: Page,
        /// The version that includes the diff.
        version: Version,
        /// No other change was published since the writer's base, so the
        /// writer's copy now holds every change published up to `version`.
        exact: bool,
    },
    /// To a lock's manager: grant me the lock.
    Acquire {
        /// The lock.
        lock: u32,
    },
    /// From a lock's manager: the lock you asked for is held by node `by`
    /// (sent when the request is queued, and whenever the lock passes to
    /// another node while it waits): what a report of the wait names.
    Held {
        /// The lock.
        lock: u32,
        /// Its holder.
        by: u32,
    },
    /// From a lock's manager: the lock is yours, with what its releasers knew.
    Grant {
        /// The lock.
        lock: u32,
        /// Page versions, ascending by page.
        known: Vec<(Page, Version)>,
    },
    /// To a lock's manager: I release the lock, knowing this.
    Release {
        /// The lock.
        lock: u32,
        /// Page versions, ascending by page.
        known: Vec<(Page, Version)>,
    },
    /// To the barrier's manager (node 0): I arrived, knowing this.
    Arrive {
        /// Page versions, ascending by page.
        known: Vec<(Page, Version)>,
    },
    /// From the barrier's manager: everyone arrived; together they knew this.
    Depart {
        /// Page versions, ascending by page.
        known: Vec<(Page, Version)>,
    },
}

/// Bytes of a page that a writer changed (a run of a diff).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffRun {
    /// Offset in the page.
    pub at: u32,
    /// The bytes there now (carried as one byte string on the wire, not
    /// byte by byte: a page's worth costs a copy, not 4096 calls).
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

/// The shape of a segment, which every message must fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Nodes sharing the segment.
    pub nodes: u32,
    /// Pages in the segment.
    pub pages: u32,
    /// Bytes per page.
    pub page_size: u32,
    /// Locks the segment offers.
    pub locks: u32,
}

impl Geometry {
    /// The home of page `p`: pages are dealt out in blocks, node `i` keeping
    /// the `i`-th block, so a rank whose loop covers its own block of the
    /// segment writes at home and sends no diffs.
    pub fn home(&self, p: Page) -> u32 {
        let per = self.pages.div_ceil(self.nodes.max(1)).max(1);
        (p / per).min(self.nodes.saturating_sub(1))
    }

    /// The manager of lock `l`.
    pub fn manager(&self, l: u32) -> u32 {
        l % self.nodes.max(1)
    }

    fn page_ok(&self, p: Page) -> Result<(), String> {
        if p < self.pages {
            Ok(())
        } else {
            Err(format!(
                "page {p} outside the segment's {} pages",
                self.pages
            ))
        }
    }

    fn lock_ok(&self, l: u32) -> Result<(), String> {
        if l < self.locks {
            Ok(())
        } else {
            Err(format!(
                "lock {l} outside the segment's {} locks",
                self.locks
            ))
        }
    }

    fn known_ok(&self, known: &[(Page, Version)]) -> Result<(), String> {
        for w in known.windows(2) {
            if w[0].0 >= w[1].0 {
                return Err("page versions not ascending by page".into());
            }
        }
        known.iter().try_for_each(|&(p, _)| self.page_ok(p))
    }
}

impl Msg {
    /// Checks every page, lock, offset and length against the segment.
    pub fn check(&self, g: &Geometry) -> Result<(), String> {
        match self {
            Msg::Fetch { page } | Msg::DiffAck { page, .. } => g.page_ok(*page),
            Msg::Page { page, data, .. } => {
                g.page_ok(*page)?;
                if data.len() != g.page_size as usize {
                    return Err(format!(
                        "a page of {} bytes where pages have {}",
                        data.len(),
                        g.page_size
                    ));
                }
                Ok(())
            }
            Msg::Diff { page, runs, .. } => {
                g.page_ok(*page)?;
                let mut end = 0u64;
                for DiffRun { at, bytes } in runs {
                    let (off, len) = (*at as u64, bytes.len() as u64);
                    if off < end || len == 0 || off + len > g.page_size as u64 {
                        return Err(format!(
                            "a diff run of {len} bytes at {off} (after byte {end}) in a page of {}",
                            g.page_size
                        ));
                    }
                    end = off + len;
                }
                Ok(())
            }
            Msg::Acquire { lock } => g.lock_ok(*lock),
            Msg::Held { lock, by } => {
                g.lock_ok(*lock)?;
                if *by >= g.nodes {
                    return Err(format!("lock {lock} held by node {by} of {}", g.nodes));
                }
                Ok(())
            }
            Msg::Grant { lock, known } | Msg::Release { lock, known } => {
                g.lock_ok(*lock)?;
                g.known_ok(known)
            }
            Msg::Arrive { known } | Msg::Depart { known } => g.known_ok(known),
        }
    }

    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a message always serializes")
    }

    /// A message from its wire form, checked ([`Msg::check`]).
    pub fn decode(bytes: &[u8], g: &Geometry) -> Result<Msg, String> {
        let m: Msg = postcard::from_bytes(bytes).map_err(|e| format!("malformed: {e}"))?;
        m.check(g)?;
        Ok(m)
    }

    /// A [`Msg::Page`] read in place from its wire form, its data borrowed
    /// from `bytes` (a page is the one message on a fault's path, and
    /// installing it straight from the frame saves a copy and an
    /// allocation); `None` for any other message (then [`Msg::decode`]).
    /// Checked like [`Msg::check`] does.
    pub fn decode_page<'a>(bytes: &'a [u8], g: &Geometry) -> Option<Result<PageRef<'a>, String>> {
        /// `Msg::Page`'s wire form: postcard writes a variant as its index
        /// (a varint, as every integer wider than a byte) and then its
        /// fields in order, and `serde_bytes` a byte string as its length
        /// and the bytes, which a borrowed slice reads.
        #[derive(Deserialize)]
        struct Wire<'a> {
            _variant: u32,
            page: Page,
            version: Version,
            #[serde(borrow)]
            data: &'a [u8],
        }
        /// `Msg::Page`'s index among the variants.
        const PAGE: u8 = 1;
        if bytes.first() != Some(&PAGE) {
            return None;
        }
        Some(
            postcard::from_bytes::<Wire>(bytes)
                .map_err(|e| format!("malformed: {e}"))
                .and_then(
                    |Wire {
                         page,
                         version,
                         data,
                         ..
                     }| {
                        g.page_ok(page)?;
                        if data.len() != g.page_size as usize {
                            return Err(format!(
                                "a page of {} bytes where pages have {}",
                                data.len(),
                                g.page_size
                            ));
                        }
                        Ok(PageRef {
                            page,
                            version,
                            data,
                        })
                    },
                ),
        )
    }
}

/// A [`Msg::Page`] whose data stays in the frame it came in
/// ([`Msg::decode_page`], [`Node::handle_page`]).
#[derive(Debug, PartialEq, Eq)]
pub struct PageRef<'a> {
    /// The page.
    pub page: Page,
    /// The master copy's version when it was read.
    pub version: Version,
    /// The whole page.
    pub data: &'a [u8],
}

/// The bytes of `cur` that differ from `twin`, as runs.
pub fn diff(twin: &[u8], cur: &[u8]) -> Vec<DiffRun> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < cur.len() {
        if cur[i] == twin[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < cur.len() && cur[i] != twin[i] {
            i += 1;
        }
        runs.push(DiffRun {
            at: start as u32,
            bytes: cur[start..i].to_vec(),
        });
    }
    runs
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Invalid,
    Read,
    /// Written since the last flush (a twin is kept, unless at home).
    Write,
}

/// What the application thread waits for.
#[derive(Debug, PartialEq, Eq)]
enum Wait {
    None,
    /// The copy of this page.
    Page(Page),
    /// Acknowledgements of this many diffs, then the next step.
    Acks(usize, Then),
    /// The grant of this lock.
    Grant(u32),
    /// The barrier's end.
    Depart,
}

/// What follows the acknowledgement of a flush's diffs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    Acquire(u32),
    Release(u32),
    Barrier,
}

#[derive(Default)]
struct Lock {
    holder: Option<u32>,
    queue: VecDeque<u32>,
    known: BTreeMap<Page, Version>,
}

/// One node's protocol state: its copies, the homes and locks it keeps, and
/// the one operation its application waits in.
pub struct Node {
    g: Geometry,
    me: u32,
    state: Vec<State>,
    /// Per page: the version of this node's copy (for a home page, unused).
    version: Vec<Version>,
    twins: HashMap<Page, Vec<u8>>,
    known: BTreeMap<Page, Version>,
    /// Locks this node holds.
    held: BTreeSet<u32>,
    /// The holder of the lock this node waits for, as its manager said.
    holder: Option<u32>,
    /// Per page homed here: the master copy's version.
    home_version: HashMap<Page, Version>,
    locks: HashMap<u32, Lock>,
    /// Barrier manager (node 0 only): who arrived at the current barrier,
    /// and what they knew.
    arrived: Vec<bool>,
    barrier_known: BTreeMap<Page, Version>,
    wait: Wait,
    out: VecDeque<(u32, Msg)>,
}

impl Node {
    /// Node `me` of a segment shaped `g`; sets the initial protections (home
    /// pages readable, the others not mapped yet).
    pub fn new(g: Geometry, me: u32, store: &mut (impl Store + ?Sized)) -> Node {
        let mut home_version = HashMap::new();
        let state = (0..g.pages)
            .map(|p| {
                if g.home(p) == me {
                    home_version.insert(p, 0);
                    store.protect(p, Prot::Read);
                    State::Read
                } else {
                    store.protect(p, Prot::None);
                    State::Invalid
                }
            })
            .collect();
        Node {
            g,
            me,
            state,
            version: vec![0; g.pages as usize],
            twins: HashMap::new(),
            known: BTreeMap::new(),
            held: BTreeSet::new(),
            holder: None,
            home_version,
            locks: HashMap::new(),
            arrived: vec![false; g.nodes as usize],
            barrier_known: BTreeMap::new(),
            wait: Wait::None,
            out: VecDeque::new(),
        }
    }

    /// Whether the application waits for a message (then only
    /// [`Node::handle`] moves it on).
    pub fn waiting(&self) -> bool {
        self.wait != Wait::None
    }

    /// The next message to send, with its destination (possibly this node).
    pub fn poll_transmit(&mut self) -> Option<(u32, Msg)> {
        self.out.pop_front()
    }

    /// What this node knows of page versions.
    pub fn known(&self) -> impl Iterator<Item = (Page, Version)> + '_ {
        self.known.iter().map(|(&p, &v)| (p, v))
    }

    fn is_home(&self, p: Page) -> bool {
        self.g.home(p) == self.me
    }

    fn idle(&self, what: &str) -> Result<(), String> {
        if self.waiting() {
            return Err(format!("{what} while waiting for {:?}", self.wait));
        }
        Ok(())
    }

    /// Makes page `p` readable (or writable): `Ok(true)` when it is, and the
    /// access may go ahead; `Ok(false)` when a copy is on its way (call again
    /// once [`Node::waiting`] is false).
    pub fn access(
        &mut self,
        p: Page,
        write: bool,
        store: &mut (impl Store + ?Sized),
    ) -> Result<bool, String> {
        self.g.page_ok(p)?;
        self.idle("an access")?;
        let i = p as usize;
        match self.state[i] {
            State::Invalid => {
                self.out.push_back((self.g.home(p), Msg::Fetch { page: p }));
                self.wait = Wait::Page(p);
                return Ok(false);
            }
            State::Read if write => {
                if !self.is_home(p) {
                    self.twins.insert(p, store.page(p).to_vec());
                }
                self.state[i] = State::Write;
                store.protect(p, Prot::ReadWrite);
            }
            State::Read | State::Write => {}
        }
        Ok(true)
    }

    /// The lock this node waits for, and its holder if the manager said.
    pub fn awaited(&self) -> Option<(u32, Option<u32>)> {
        match self.wait {
            Wait::Grant(l) => Some((l, self.holder)),
            _ => None,
        }
    }

    /// A touch of page `p` that the store's protection stopped: on a page
    /// with no copy, a load (or a store: it stops again once the copy is
    /// readable); on a readable page, a store. As [`Node::access`].
    pub fn fault(&mut self, p: Page, store: &mut (impl Store + ?Sized)) -> Result<bool, String> {
        self.g.page_ok(p)?;
        let write = self.state[p as usize] != State::Invalid;
        self.access(p, write, store)
    }

    /// Starts taking lock `l`: `Ok(true)` when held, `Ok(false)` when the
    /// node must wait for messages. Locks are not recursive.
    pub fn acquire(&mut self, l: u32, store: &mut (impl Store + ?Sized)) -> Result<bool, String> {
        self.g.lock_ok(l)?;
        self.idle("an acquire")?;
        if self.held.contains(&l) {
            return Err(format!(
                "lock {l} is held by this rank already (locks are not recursive)"
            ));
        }
        self.flush(Then::Acquire(l), store);
        Ok(!self.waiting())
    }

    /// Releases lock `l` once this node's writes are at their homes:
    /// `Ok(true)` when done.
    pub fn release(&mut self, l: u32, store: &mut (impl Store + ?Sized)) -> Result<bool, String> {
        self.g.lock_ok(l)?;
        self.idle("a release")?;
        if !self.held.remove(&l) {
            return Err(format!("lock {l} is not held by this rank"));
        }
        self.flush(Then::Release(l), store);
        Ok(!self.waiting())
    }

    /// Enters a barrier of all nodes: `Ok(true)` when it is over.
    pub fn barrier(&mut self, store: &mut (impl Store + ?Sized)) -> Result<bool, String> {
        self.idle("a barrier")?;
        self.flush(Then::Barrier, store);
        Ok(!self.waiting())
    }

    /// Sends the diffs of every dirty copy; publishes the home's own writes
    /// if `then` releases; goes on to `then` at once if no diff was sent.
    fn flush(&mut self, then: Then, store: &mut (impl Store + ?Sized)) {
        let mut sent = 0;
        for p in 0..self.g.pages {
            let i = p as usize;
            if self.state[i] != State::Write {
                continue;
            }
            if self.is_home(p) {
                // The master copy holds the writes already: a release makes
                // them a new version; an acquire leaves them for the release.
                if matches!(then, Then::Acquire(_)) {
                    continue;
                }
                let v = self.home_version.entry(p).or_default();
                *v += 1;
                let v = *v;
                bump(&mut self.known, p, v);
            } else {
                let twin = self.twins.remove(&p).expect("a dirty copy has a twin");
                let runs = diff(&twin, store.page(p));
                if !runs.is_empty() {
                    let base = self.version[i];
                    self.out.push_back((
                        self.g.home(p),
                        Msg::Diff {
                            page: p,
                            base,
                            runs,
                        },
                    ));
                    sent += 1;
                }
            }
            self.state[i] = State::Read;
            store.protect(p, Prot::Read);
        }
        if sent > 0 {
            self.wait = Wait::Acks(sent, then);
        } else {
            self.then(then);
        }
    }

    /// The step after a flush.
    fn then(&mut self, then: Then) {
        match then {
            Then::Acquire(l) => {
                self.out
                    .push_back((self.g.manager(l), Msg::Acquire { lock: l }));
                self.holder = None;
                self.wait = Wait::Grant(l);
            }
            Then::Release(l) => {
                let known = self.known.iter().map(|(&p, &v)| (p, v)).collect();
                self.out
                    .push_back((self.g.manager(l), Msg::Release { lock: l, known }));
                self.wait = Wait::None;
            }
            Then::Barrier => {
                let known = self.known.iter().map(|(&p, &v)| (p, v)).collect();
                self.out.push_back((0, Msg::Arrive { known }));
                self.wait = Wait::Depart;
            }
        }
    }

    /// Learns `known` and invalidates the copies it makes stale.
    fn learn(&mut self, known: &[(Page, Version)], store: &mut (impl Store + ?Sized)) {
        for &(p, v) in known {
            bump(&mut self.known, p, v);
        }
        for (&p, &v) in &self.known {
            let i = p as usize;
            if self.is_home(p) || self.state[i] == State::Invalid || self.version[i] >= v {
                continue;
            }
            // Flushed before every acquire, so no copy here is dirty.
            debug_assert_eq!(self.state[i], State::Read);
            self.state[i] = State::Invalid;
            store.protect(p, Prot::None);
        }
    }

    /// Handles a page from its home, read in place ([`Msg::decode_page`]):
    /// what [`Node::handle`] does with a [`Msg::Page`].
    pub fn handle_page(
        &mut self,
        from: u32,
        m: PageRef<'_>,
        store: &mut (impl Store + ?Sized),
    ) -> Result<(), String> {
        let PageRef {
            page,
            version,
            data,
        } = m;
        self.g.page_ok(page)?;
        if data.len() != self.g.page_size as usize {
            return Err(format!("a page of {} bytes", data.len()));
        }
        if from != self.g.home(page) {
            return Err(format!("page {page} from node {from}, not its home"));
        }
        if self.wait != Wait::Page(page) {
            return Err(format!("page {page} unasked for"));
        }
        if self.known.get(&page).is_some_and(|&k| version < k) {
            return Err(format!(
                "page {page} at version {version}, older than one known"
            ));
        }
        store.install(page, data);
        self.version[page as usize] = version;
        self.state[page as usize] = State::Read;
        store.protect(page, Prot::Read);
        self.wait = Wait::None;
        Ok(())
    }

    /// Handles message `m` from node `from` (checked against the geometry
    /// here as well); an error names what did not fit, and changes nothing.
    pub fn handle(
        &mut self,
        from: u32,
        m: Msg,
        store: &mut (impl Store + ?Sized),
    ) -> Result<(), String> {
        m.check(&self.g)?;
        if from >= self.g.nodes {
            return Err(format!("a message from node {from} of {}", self.g.nodes));
        }
        let not_home = |p: Page| format!("page {p} is not homed at node {}", self.me);
        match m {
            Msg::Fetch { page } => {
                let version = *self.home_version.get(&page).ok_or_else(|| not_home(page))?;
                let data = store.page(page).to_vec();
                self.out.push_back((
                    from,
                    Msg::Page {
                        page,
                        version,
                        data,
                    },
                ));
            }
            Msg::Diff { page, base, runs } => {
                let master = *self.home_version.get(&page).ok_or_else(|| not_home(page))?;
                let exact = base == master;
                let bytes = store.page_mut(page);
                for DiffRun { at, bytes: run } in runs {
                    bytes[at as usize..at as usize + run.len()].copy_from_slice(&run);
                }
                let version = master + 1;
                self.home_version.insert(page, version);
                self.out.push_back((
                    from,
                    Msg::DiffAck {
                        page,
                        version,
                        exact,
                    },
                ));
            }
            Msg::Page {
                page,
                version,
                data,
            } => {
                let m = PageRef {
                    page,
                    version,
                    data: &data,
                };
                return self.handle_page(from, m, store);
            }
            Msg::DiffAck {
                page,
                version,
                exact,
            } => {
                let Wait::Acks(left, then) = self.wait else {
                    return Err(format!("an acknowledgement of page {page} unasked for"));
                };
                bump(&mut self.known, page, version);
                if exact {
                    self.version[page as usize] = version;
                }
                if left > 1 {
                    self.wait = Wait::Acks(left - 1, then);
                } else {
                    self.then(then);
                }
            }
            Msg::Acquire { lock } => {
                self.manages(lock)?;
                let l = self.locks.entry(lock).or_default();
                match l.holder {
                    None => {
                        l.holder = Some(from);
                        let known = l.known.iter().map(|(&p, &v)| (p, v)).collect();
                        self.out.push_back((from, Msg::Grant { lock, known }));
                    }
                    Some(by) => {
                        l.queue.push_back(from);
                        self.out.push_back((from, Msg::Held { lock, by }));
                    }
                }
            }
            Msg::Release { lock, known } => {
                self.manages(lock)?;
                let l = self.locks.entry(lock).or_default();
                if l.holder != Some(from) {
                    return Err(format!(
                        "node {from} releases lock {lock}, which it does not hold"
                    ));
                }
                // The releaser learnt the lock's knowledge with its grant:
                // its own is the lock's now.
                l.known = known.into_iter().collect();
                l.holder = l.queue.pop_front();
                if let Some(next) = l.holder {
                    let known = l.known.iter().map(|(&p, &v)| (p, v)).collect();
                    self.out.push_back((next, Msg::Grant { lock, known }));
                    for &q in &l.queue {
                        self.out.push_back((q, Msg::Held { lock, by: next }));
                    }
                }
            }
            Msg::Held { lock, by } => {
                // A notice for an earlier wait may come late: only the
                // current one's counts.
                if self.wait == Wait::Grant(lock) {
                    self.holder = Some(by);
                }
            }
            Msg::Grant { lock, known } => {
                if self.wait != Wait::Grant(lock) {
                    return Err(format!("lock {lock} granted unasked for"));
                }
                self.held.insert(lock);
                self.learn(&known, store);
                self.wait = Wait::None;
            }
            Msg::Arrive { known } => {
                if self.me != 0 {
                    return Err("a barrier arrival at a node that does not manage barriers".into());
                }
                if std::mem::replace(&mut self.arrived[from as usize], true) {
                    return Err(format!("node {from} arrives twice at one barrier"));
                }
                for (p, v) in known {
                    bump(&mut self.barrier_known, p, v);
                }
                if self.arrived.iter().all(|&a| a) {
                    self.arrived.fill(false);
                    let known: Vec<_> = std::mem::take(&mut self.barrier_known)
                        .into_iter()
                        .collect();
                    for n in 0..self.g.nodes {
                        self.out.push_back((
                            n,
                            Msg::Depart {
                                known: known.clone(),
                            },
                        ));
                    }
                }
            }
            Msg::Depart { known } => {
                if self.wait != Wait::Depart || from != 0 {
                    return Err("a barrier's end unasked for".into());
                }
                self.learn(&known, store);
                self.wait = Wait::None;
            }
        }
        Ok(())
    }

    fn manages(&self, lock: u32) -> Result<(), String> {
        if self.g.manager(lock) == self.me {
            Ok(())
        } else {
            Err(format!("lock {lock} is not managed at node {}", self.me))
        }
    }
}

fn bump(known: &mut BTreeMap<Page, Version>, p: Page, v: Version) {
    let k = known.entry(p).or_default();
    *k = (*k).max(v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Memory as the runtime's store would be, with its protections checked:
    /// a load from a page with no access or a store to a read-only page is
    /// what a real page fault would catch, so here it fails the test.
    struct Mem {
        page_size: usize,
        pages: Vec<Vec<u8>>,
        prot: Vec<Prot>,
    }

    impl Mem {
        fn new(g: &Geometry) -> Mem {
            Mem {
                page_size: g.page_size as usize,
                pages: vec![vec![0; g.page_size as usize]; g.pages as usize],
                prot: vec![Prot::None; g.pages as usize],
            }
        }

        fn at(&self, w: usize) -> (usize, usize) {
            ((w * 4) / self.page_size, (w * 4) % self.page_size)
        }

        fn load(&self, w: usize) -> u32 {
            let (p, o) = self.at(w);
            assert_ne!(self.prot[p], Prot::None, "load from unmapped page {p}");
            u32::from_le_bytes(self.pages[p][o..o + 4].try_into().unwrap())
        }

        fn store(&mut self, w: usize, v: u32) {
            let (p, o) = self.at(w);
            assert_eq!(self.prot[p], Prot::ReadWrite, "store to protected page {p}");
            self.pages[p][o..o + 4].copy_from_slice(&v.to_le_bytes());
        }
    }

    impl Store for Mem {
        fn page(&self, p: Page) -> &[u8] {
            &self.pages[p as usize]
        }
        fn page_mut(&mut self, p: Page) -> &mut [u8] {
            &mut self.pages[p as usize]
        }
        fn protect(&mut self, p: Page, prot: Prot) {
            self.prot[p as usize] = prot;
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Read(usize),
        Write(usize, u32),
        Lock(u32),
        Unlock(u32),
        Barrier,
    }

    /// splitmix64: a seeded generator, so a failing schedule is replayed by
    /// its seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Who may touch a word during one phase (between barriers): data-race
    /// freedom by construction.
    #[derive(Clone, Copy)]
    enum Role {
        /// One node reads and writes it, without locks.
        Owned(u32),
        /// Anyone, inside critical sections of this lock.
        Locked(u32),
        /// Anyone reads it; nobody writes it.
        ReadOnly,
    }

    /// A data-race-free program for every node: phases of private work,
    /// critical sections and shared reads, each ended by a barrier; words
    /// are packed several to a page (false sharing) and change role from
    /// phase to phase; at the end every node reads every word.
    fn program(g: &Geometry, rng: &mut Rng) -> Vec<Vec<Op>> {
        let words = (g.pages * g.page_size / 4) as usize;
        let mut progs = vec![Vec::new(); g.nodes as usize];
        let mut stamp = 0u32;
        for _ in 0..1 + rng.below(4) {
            let roles: Vec<Role> = (0..words)
                .map(|_| match rng.below(3) {
                    0 => Role::Owned(rng.below(g.nodes as usize) as u32),
                    1 => Role::Locked(rng.below(g.locks as usize) as u32),
                    _ => Role::ReadOnly,
                })
                .collect();
            for (n, prog) in progs.iter_mut().enumerate() {
                let mine: Vec<usize> = (0..words)
                    .filter(|&w| matches!(roles[w], Role::Owned(o) if o as usize == n))
                    .collect();
                let shared: Vec<usize> = (0..words)
                    .filter(|&w| matches!(roles[w], Role::ReadOnly))
                    .collect();
                for _ in 0..rng.below(10) {
                    stamp += 1;
                    let value = (n as u32 + 1) << 24 | stamp;
                    match rng.below(3) {
                        0 if !mine.is_empty() => {
                            let w = mine[rng.below(mine.len())];
                            prog.push(if rng.below(2) == 0 {
                                Op::Read(w)
                            } else {
                                Op::Write(w, value)
                            });
                        }
                        1 if !shared.is_empty() => {
                            prog.push(Op::Read(shared[rng.below(shared.len())]))
                        }
                        _ => {
                            let l = rng.below(g.locks as usize) as u32;
                            let under: Vec<usize> = (0..words)
                                .filter(|&w| matches!(roles[w], Role::Locked(k) if k == l))
                                .collect();
                            prog.push(Op::Lock(l));
                            for i in 0..rng.below(4) {
                                if under.is_empty() {
                                    break;
                                }
                                let w = under[rng.below(under.len())];
                                prog.push(if rng.below(2) == 0 {
                                    Op::Read(w)
                                } else {
                                    Op::Write(w, value + (i as u32) * 0x10_0000)
                                });
                            }
                            prog.push(Op::Unlock(l));
                        }
                    }
                }
                prog.push(Op::Barrier);
            }
        }
        for prog in &mut progs {
            prog.extend((0..words).map(Op::Read));
        }
        progs
    }

    /// Runs `progs` on nodes over a network that delivers any message in
    /// flight next (so it reorders and delays freely), choosing at random
    /// between deliveries and program steps. Every load is checked against a
    /// flat memory that each store updates when it happens: in a
    /// data-race-free program that is the sequentially consistent answer.
    /// Returns the messages sent. `in_order`: a node steps only once every
    /// lower node finished or waits in a barrier (messages still move in
    /// any order), which forces an order of critical sections.
    fn run(g: Geometry, progs: &[Vec<Op>], rng: &mut Rng, in_order: bool) -> usize {
        let n = g.nodes as usize;
        let mut mems: Vec<Mem> = (0..n).map(|_| Mem::new(&g)).collect();
        let mut nodes: Vec<Node> = (0..n)
            .map(|i| Node::new(g, i as u32, &mut mems[i]))
            .collect();
        let mut flat = vec![0u32; (g.pages * g.page_size / 4) as usize];
        let mut pc = vec![0usize; n];
        let mut started = vec![false; n];
        let mut passed = vec![0; n];
        let mut net: Vec<(u32, u32, Vec<u8>)> = Vec::new();
        let mut sent = 0;
        loop {
            for (i, node) in nodes.iter_mut().enumerate() {
                while let Some((to, m)) = node.poll_transmit() {
                    // Every message crosses in its wire form.
                    net.push((i as u32, to, m.encode()));
                    sent += 1;
                }
            }
            // In order: node j is ahead of node i if it finished, passed more
            // barriers, or entered the barrier i is before.
            let ahead = |j: usize, i: usize| {
                pc[j] == progs[j].len()
                    || passed[j] > passed[i]
                    || (passed[j] == passed[i]
                        && started[j]
                        && matches!(progs[j][pc[j]], Op::Barrier))
            };
            let runnable: Vec<usize> = (0..n)
                .filter(|&i| !nodes[i].waiting() && pc[i] < progs[i].len())
                .filter(|&i| !in_order || (0..i).all(|j| ahead(j, i)))
                .collect();
            if runnable.is_empty() && net.is_empty() {
                break;
            }
            let pick = rng.below(runnable.len() + net.len());
            if pick >= runnable.len() {
                let (from, to, wire) = net.swap_remove(pick - runnable.len());
                receive(&mut nodes[to as usize], from, &wire, &mut mems[to as usize]).unwrap();
                continue;
            }
            let i = runnable[pick];
            let (node, mem) = (&mut nodes[i], &mut mems[i]);
            // As the runtime does: the node hears of a load or store only
            // when the page's protection stops it (a fault), so a protection
            // left too open would skip the protocol and show here.
            let done = match progs[i][pc[i]] {
                Op::Read(w) => {
                    let p = mem.at(w).0 as Page;
                    let ready = mem.prot[p as usize] != Prot::None || node.fault(p, mem).unwrap();
                    if ready && mem.prot[p as usize] != Prot::None {
                        assert_eq!(
                            mem.load(w),
                            flat[w],
                            "node {i} reads word {w} (page {p}) at step {}",
                            pc[i]
                        );
                        true
                    } else {
                        false
                    }
                }
                Op::Write(w, v) => {
                    let p = mem.at(w).0 as Page;
                    let ready =
                        mem.prot[p as usize] == Prot::ReadWrite || node.fault(p, mem).unwrap();
                    if ready && mem.prot[p as usize] == Prot::ReadWrite {
                        mem.store(w, v);
                        flat[w] = v;
                        true
                    } else {
                        false
                    }
                }
                _ if started[i] => true,
                Op::Lock(l) => node.acquire(l, mem).unwrap(),
                Op::Unlock(l) => node.release(l, mem).unwrap(),
                Op::Barrier => node.barrier(mem).unwrap(),
            };
            started[i] = !done;
            if done {
                passed[i] += matches!(progs[i][pc[i]], Op::Barrier) as usize;
                pc[i] += 1;
            }
        }
        for i in 0..n {
            assert_eq!(pc[i], progs[i].len(), "node {i} stuck: {:?}", nodes[i].wait);
        }
        sent
    }

    fn geometry(rng: &mut Rng) -> Geometry {
        Geometry {
            nodes: 1 + rng.below(5) as u32,
            pages: 1 + rng.below(6) as u32,
            page_size: [4, 8, 16][rng.below(3)],
            locks: 1 + rng.below(3) as u32,
        }
    }

    #[test]
    fn data_race_free_programs_see_sequential_consistency() {
        let mut messages = 0;
        for seed in 0..4000u64 {
            let mut rng = Rng(seed);
            let g = geometry(&mut rng);
            let progs = program(&g, &mut rng);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(g, &progs, &mut rng, false)
            }));
            match r {
                Ok(m) => messages += m,
                Err(e) => panic!("seed {seed}, {g:?}: {e:?}"),
            }
        }
        // The schedules did exercise the network.
        assert!(messages > 100_000, "{messages}");
    }

    #[test]
    fn one_program_under_many_schedules() {
        let g = Geometry {
            nodes: 4,
            pages: 2,
            page_size: 8,
            locks: 2,
        };
        let progs = program(&g, &mut Rng(7));
        for seed in 0..2000 {
            run(g, &progs, &mut Rng(seed), false);
        }
    }

    /// Knowledge passes along a chain of locks: A writes under L0; B takes
    /// L0, then releases L1 without writing; C takes L1 and must see A's
    /// write (its copy of the page was fetched before A wrote). The
    /// scheduler keeps the sections in that order (else C's read could come
    /// first, unordered with A's write: a race).
    #[test]
    fn writes_are_seen_through_a_chain_of_locks() {
        let g = Geometry {
            nodes: 4,
            pages: 4,
            page_size: 8,
            locks: 2,
        };
        // Word 6 is on page 3, homed at node 3: A, B and C are not its home.
        let progs = vec![
            vec![
                Op::Barrier,
                Op::Lock(0),
                Op::Write(6, 42),
                Op::Unlock(0),
                Op::Barrier,
            ],
            vec![
                Op::Barrier,
                Op::Lock(0),
                Op::Lock(1),
                Op::Unlock(1),
                Op::Unlock(0),
                Op::Barrier,
            ],
            vec![
                Op::Read(6),
                Op::Barrier,
                Op::Lock(1),
                Op::Read(6),
                Op::Unlock(1),
                Op::Barrier,
            ],
            vec![Op::Barrier, Op::Barrier],
        ];
        for seed in 0..3000 {
            run(g, &progs, &mut Rng(seed), true);
        }
    }

    #[test]
    fn writers_of_one_page_merge() {
        let g = Geometry {
            nodes: 3,
            pages: 1,
            page_size: 16,
            locks: 1,
        };
        // Nodes 1 and 2 write different words of node 0's one page.
        let progs = vec![
            vec![Op::Barrier, Op::Read(0), Op::Read(1), Op::Read(2)],
            vec![Op::Write(1, 11), Op::Barrier, Op::Read(2)],
            vec![Op::Write(2, 22), Op::Barrier, Op::Read(1)],
        ];
        for seed in 0..500 {
            run(g, &progs, &mut Rng(seed), false);
        }
    }

    fn g1() -> Geometry {
        Geometry {
            nodes: 2,
            pages: 2,
            page_size: 8,
            locks: 1,
        }
    }

    #[test]
    fn malformed_messages_are_refused_naming_why() {
        let g = g1();
        let bad = [
            (Msg::Fetch { page: 2 }, "page 2 outside"),
            (
                Msg::Page {
                    page: 0,
                    version: 1,
                    data: vec![0; 9],
                },
                "a page of 9 bytes",
            ),
            (
                Msg::Diff {
                    page: 0,
                    base: 0,
                    runs: vec![DiffRun {
                        at: 6,
                        bytes: vec![1, 2, 3],
                    }],
                },
                "a diff run of 3 bytes at 6",
            ),
            (
                Msg::Diff {
                    page: 0,
                    base: 0,
                    runs: vec![
                        DiffRun {
                            at: 2,
                            bytes: vec![1],
                        },
                        DiffRun {
                            at: 1,
                            bytes: vec![1],
                        },
                    ],
                },
                "a diff run of 1 bytes at 1",
            ),
            (Msg::Acquire { lock: 1 }, "lock 1 outside"),
            (Msg::Held { lock: 0, by: 2 }, "held by node 2 of 2"),
            (
                Msg::Depart {
                    known: vec![(1, 1), (0, 1)],
                },
                "not ascending",
            ),
        ];
        for (m, why) in bad {
            let e = Msg::decode(&m.encode(), &g).unwrap_err();
            assert!(e.contains(why), "{m:?}: {e}");
        }
        assert!(Msg::decode(&[200, 1], &g)
            .unwrap_err()
            .contains("malformed"));
    }

    #[test]
    fn a_peer_out_of_turn_is_refused_and_changes_nothing() {
        let g = g1();
        let mut mem = Mem::new(&g);
        let mut n0 = Node::new(g, 0, &mut mem);
        let page = |v| Msg::Page {
            page: 1,
            version: v,
            data: vec![9; 8],
        };
        assert!(n0
            .handle(1, page(0), &mut mem)
            .unwrap_err()
            .contains("unasked"));
        assert_eq!(mem.pages[1], vec![0; 8]);
        assert!(n0
            .handle(
                1,
                Msg::Release {
                    lock: 0,
                    known: vec![]
                },
                &mut mem
            )
            .unwrap_err()
            .contains("does not hold"));
        assert!(n0
            .handle(1, Msg::Fetch { page: 1 }, &mut mem)
            .unwrap_err()
            .contains("not homed"));
        assert!(n0.handle(5, Msg::Fetch { page: 0 }, &mut mem).is_err());
        n0.handle(1, Msg::Arrive { known: vec![] }, &mut mem)
            .unwrap();
        assert!(n0
            .handle(1, Msg::Arrive { known: vec![] }, &mut mem)
            .unwrap_err()
            .contains("twice"));
        // A copy older than what the node knows is refused.
        n0.known.insert(1, 3);
        assert!(n0.access(1, false, &mut mem).is_ok());
        assert!(n0
            .handle(1, page(2), &mut mem)
            .unwrap_err()
            .contains("older"));
        assert!(n0.waiting());
        n0.handle(1, page(3), &mut mem).unwrap();
        assert_eq!((mem.pages[1][0], n0.waiting()), (9, false));
    }

    /// Nodes of a segment without pages (its locks alone), and their memories.
    fn lock_nodes(n: u32, locks: u32) -> (Vec<Node>, Vec<Mem>) {
        let g = Geometry {
            nodes: n,
            pages: 0,
            page_size: 8,
            locks,
        };
        let mut mems: Vec<Mem> = (0..n).map(|_| Mem::new(&g)).collect();
        let nodes = (0..n)
            .map(|i| Node::new(g, i, &mut mems[i as usize]))
            .collect();
        (nodes, mems)
    }

    /// Delivers every message, in order, until none is left.
    /// Delivers a message in its wire form as the runtime does: a page
    /// read in place, anything else decoded.
    fn receive(node: &mut Node, from: u32, wire: &[u8], mem: &mut Mem) -> Result<(), String> {
        let g = node.g;
        match Msg::decode_page(wire, &g) {
            Some(page) => node.handle_page(from, page?, mem),
            None => node.handle(from, Msg::decode(wire, &g)?, mem),
        }
    }

    /// Pages read in place are what decoding reads, checked alike; every
    /// other message is left to [`Msg::decode`].
    #[test]
    fn pages_read_in_place_match_their_decoding() {
        let g = g1();
        let page = |page, data: Vec<u8>| Msg::Page {
            page,
            version: 300,
            data,
        };
        let wire = page(1, (1..=8).collect()).encode();
        let got = Msg::decode_page(&wire, &g).unwrap().unwrap();
        assert_eq!(
            (got.page, got.version, got.data),
            (1, 300, &[1, 2, 3, 4, 5, 6, 7, 8][..])
        );
        for (bad, why) in [
            (page(2, vec![0; 8]), "page 2 outside"),
            (page(0, vec![0; 9]), "a page of 9 bytes"),
        ] {
            let e = Msg::decode_page(&bad.encode(), &g).unwrap().unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(Msg::decode_page(&wire[..wire.len() - 1], &g)
            .unwrap()
            .unwrap_err()
            .contains("malformed"));
        for other in [
            Msg::Fetch { page: 1 },
            Msg::Acquire { lock: 0 },
            Msg::Arrive { known: vec![] },
        ] {
            assert!(Msg::decode_page(&other.encode(), &g).is_none());
        }
        // Only the page's home sends it.
        let mut mem = Mem::new(&g);
        let mut n0 = Node::new(g, 0, &mut mem);
        assert!(!n0.access(1, false, &mut mem).unwrap());
        let from_elsewhere = PageRef {
            page: 1,
            version: 0,
            data: &[7; 8],
        };
        assert!(n0
            .handle_page(0, from_elsewhere, &mut mem)
            .unwrap_err()
            .contains("not its home"));
    }

    fn deliver_all(n: &mut [Node], mems: &mut [Mem]) {
        loop {
            let mut moved = false;
            for i in 0..n.len() {
                while let Some((to, m)) = n[i].poll_transmit() {
                    n[to as usize]
                        .handle(i as u32, m, &mut mems[to as usize])
                        .unwrap();
                    moved = true;
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Two nodes each hold one lock and ask for the other's: each learns
    /// who holds what it waits for (what the deadlock report names); a lock
    /// is not taken twice, nor released by a node that does not hold it.
    #[test]
    fn waits_for_locks_name_their_holders() {
        let (mut n, mut mems) = lock_nodes(2, 2);
        // Even a lock a node manages itself is granted through a message.
        assert!(!n[0].acquire(0, &mut mems[0]).unwrap());
        assert!(!n[1].acquire(1, &mut mems[1]).unwrap());
        deliver_all(&mut n, &mut mems);
        assert!(!n[0].waiting() && !n[1].waiting());
        assert!(n[0]
            .acquire(0, &mut mems[0])
            .unwrap_err()
            .contains("not recursive"));
        assert!(!n[0].acquire(1, &mut mems[0]).unwrap());
        assert!(!n[1].acquire(0, &mut mems[1]).unwrap());
        deliver_all(&mut n, &mut mems);
        assert_eq!(n[0].awaited(), Some((1, Some(1))));
        assert_eq!(n[1].awaited(), Some((0, Some(0))));
        let (mut lone, mut m) = lock_nodes(1, 2);
        assert!(lone[0]
            .release(1, &mut m[0])
            .unwrap_err()
            .contains("not held"));
    }

    /// A queue of three waiters: when the lock passes on, those still
    /// waiting learn the new holder.
    #[test]
    fn waiters_learn_each_new_holder() {
        let (mut n, mut mems) = lock_nodes(4, 1);
        for i in 1..4 {
            n[i].acquire(0, &mut mems[i]).unwrap();
            deliver_all(&mut n, &mut mems);
        }
        assert_eq!(n[2].awaited(), Some((0, Some(1))));
        assert_eq!(n[3].awaited(), Some((0, Some(1))));
        n[1].release(0, &mut mems[1]).unwrap();
        deliver_all(&mut n, &mut mems);
        assert_eq!((n[2].awaited(), n[3].awaited()), (None, Some((0, Some(2)))));
    }

    #[test]
    fn diff_finds_changed_runs() {
        let run = |at, bytes: &[u8]| DiffRun {
            at,
            bytes: bytes.to_vec(),
        };
        assert_eq!(
            diff(&[0; 6], &[0, 1, 1, 0, 0, 2]),
            vec![run(1, &[1, 1]), run(5, &[2])]
        );
        assert!(diff(&[3; 4], &[3; 4]).is_empty());
    }

    proptest! {
        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Msg::decode(&b, &g1());
        }
    }
}
