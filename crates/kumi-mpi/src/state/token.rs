//! Who may call the library now: the phase (before init, running,
//! finalized), the thread that owns the state and, for
//! `MPI_THREAD_SERIALIZED` and `MPI_THREAD_MULTIPLE`, the token a thread
//! holds while in a call (refused to a second thread under the first, queued
//! for under the second: [`Turns`]); and the access to the one global
//! [`State`] they guard.

use super::*;

/// Phases of the library: 0 before init, 1 running, 2 finalized (in
/// [`STATE`]).
#[inline(always)]
pub(crate) fn phase() -> &'static AtomicU8 {
    &STATE.phase
}

/// The communicator whose error handler handles the error of the current
/// call (in [`STATE`]; see `crate::set_err_comm`).
#[inline(always)]
pub(crate) fn err_comm() -> &'static AtomicI32 {
    &STATE.err_comm
}

pub(crate) static INIT_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Records the calling thread as the one that initialized MPI.
pub(crate) fn set_init_thread() {
    let _ = INIT_THREAD.set(std::thread::current().id());
    // Relaxed: see `Global::init_pthread`.
    STATE
        .init_pthread
        .store(kumi::raw::thread_id(), Ordering::Relaxed);
}

/// What every call reads before its work, on one cache line: the phase, the
/// initializing thread, the error communicator, the state's `RefCell` flag
/// and (`State` is `repr(C)`, communicators first) the communicator table's
/// header. See `State` for why lines matter.
#[repr(C, align(64))]
pub(super) struct Global {
    phase: AtomicU8,
    /// The thread level granted (`MPI_THREAD_FUNNELED` until
    /// `MPI_Init_thread` asks for more). From `MPI_THREAD_SERIALIZED` up,
    /// `init_pthread` is a token that the thread inside MPI holds for the
    /// length of its call (0 when no thread is inside), see [`Token`].
    level: AtomicI32,
    err_comm: AtomicI32,
    /// The thread that may call with no further check: the initializing
    /// thread while MPI runs under `MPI_THREAD_FUNNELED`; 0 before, after,
    /// and under `MPI_THREAD_SERIALIZED`. One comparison stands for the
    /// three of the other fields (the phase, the thread, the thread level)
    /// on every call ([`Token::enter`], [`st`]); any other caller takes the
    /// slow path, which checks them one by one. Relaxed: only the
    /// initializing thread stores it (in `MPI_Init`, after the state is
    /// installed and the Release store of `phase`; `MPI_Init_thread`; and
    /// `MPI_Finalize`, before the state is taken), and only that thread can
    /// find its own id in it, in program order; another thread finds 0 or
    /// an id not its own and takes the slow path, whose Acquire load of
    /// `phase` orders what it reads next.
    owner: AtomicUsize,
    /// [`kumi::raw::thread_id`] of the thread that initialized MPI (0 before): comparing it
    /// with the caller's costs one load, where a thread-local flag costs a call
    /// into the dynamic linker (`__tls_get_addr`) in a shared library. The
    /// initializing thread lives as long as MPI is in use (its identity can only
    /// be reused after it exits). Relaxed: written before the Release store of
    /// `phase` that makes MPI "running", and read after the Acquire load of it
    /// (`st`).
    init_pthread: AtomicUsize,
    /// The `RefCell`'s flag at byte 24, the state from byte 32: the
    /// communicator table's first entry and vector header end the line.
    state: RefCell<Option<State>>,
}
// SAFETY: the state is only ever touched by the thread that initialized MPI:
// `st()` checks the calling thread against INIT_THREAD before borrowing, and
// `install`/`take` are called from MPI_Init/MPI_Finalize on that thread. The
// other fields are atomics.
unsafe impl Sync for Global {}
/// The library's state and the words every call reads first.
pub(super) static STATE: Global = Global {
    phase: AtomicU8::new(0),
    level: AtomicI32::new(MPI_THREAD_FUNNELED),
    err_comm: AtomicI32::new(MPI_COMM_WORLD),
    owner: AtomicUsize::new(0),
    init_pthread: AtomicUsize::new(0),
    state: RefCell::new(None),
};

/// The right of one thread at a time to be inside MPI, under
/// `MPI_THREAD_SERIALIZED` (see `Global::serialized`): taken on entry to an
/// outermost MPI call, given back when it returns. The Acquire of the take
/// and the Release of the give-back order one thread's use of the library's
/// state before the next thread's, which is what makes the state (plain,
/// single-threaded data) safe to hand from thread to thread. Under
/// `MPI_THREAD_FUNNELED` (the default) the initializing thread holds it for
/// good and taking it costs one load of a flag.
pub(crate) struct Token(Held);

/// What a [`Token`] gives back when dropped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Nothing: `MPI_THREAD_FUNNELED`, or a call made inside a call.
    Nothing,
    /// The `MPI_THREAD_SERIALIZED` token.
    Token,
    /// A turn of `MPI_THREAD_MULTIPLE` ([`Turns`]).
    Turn,
}

impl Token {
    /// Takes the token for this call. `Err` if another thread is inside MPI.
    #[inline(always)]
    pub(crate) fn enter() -> Result<Token, ()> {
        // Relaxed: see `Global::owner`. Not `is_owner`: any owner means
        // `MPI_THREAD_FUNNELED`, which needs no token; a call from another
        // thread is refused by `st` (and the calls that do not use the state
        // may be made from any thread, as before `MPI_Init`).
        if STATE.owner.load(Ordering::Relaxed) != 0 {
            return Ok(Token(Held::Nothing));
        }
        Self::enter_slow()
    }

    #[cold]
    #[inline(never)]
    pub(super) fn enter_slow() -> Result<Token, ()> {
        // A query from a callback the runtime runs (`lent`) is part of the
        // call that runs it (or of the progress thread's pass, which holds
        // the engine the turn's holder may be waiting for): no token.
        if in_callback() {
            return Ok(Token(Held::Nothing));
        }
        // Acquire: pairs with the Release store in `set_thread_level`, so a
        // thread that sees a level above MPI_THREAD_FUNNELED sees the
        // initialization before it (the cold path: an Acquire costs nothing
        // on x86 anyway).
        match STATE.level.load(Ordering::Acquire) {
            MPI_THREAD_MULTIPLE => Self::take_turn(),
            MPI_THREAD_SERIALIZED => Self::take(),
            _ => Ok(Token(Held::Nothing)),
        }
    }

    pub(super) fn take() -> Result<Token, ()> {
        let me = kumi::raw::thread_id();
        // Relaxed: only this thread stores its own id there.
        if STATE.init_pthread.load(Ordering::Relaxed) == me {
            return Ok(Token(Held::Nothing)); // a call made inside a call of ours
        }
        // Acquire: see everything the previous holder did (its Release).
        match STATE
            .init_pthread
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(Token(Held::Token)),
            Err(_) => Err(()),
        }
    }

    /// `MPI_THREAD_MULTIPLE`: waits for this thread's turn (never refuses).
    #[cold]
    fn take_turn() -> Result<Token, ()> {
        let me = kumi::raw::thread_id();
        // Relaxed: as in `take`.
        if STATE.init_pthread.load(Ordering::Relaxed) == me {
            return Ok(Token(Held::Nothing));
        }
        TURNS.take(me);
        Ok(Token(Held::Turn))
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        match self.0 {
            Held::Nothing => {}
            // Release: hands this call's effects to the next holder.
            Held::Token => STATE.init_pthread.store(0, Ordering::Release),
            Held::Turn => TURNS.give(),
        }
    }
}

/// The turns of `MPI_THREAD_MULTIPLE`: the holder's id in
/// `Global::init_pthread` (as the `MPI_THREAD_SERIALIZED` token's, so every
/// check made of the token holds of the turn too), taken with a
/// compare-exchange by whichever waiting thread comes first. Not a queue: with
/// more threads than cores a queue hands the turn to a thread that is not
/// running, and everyone waits for the scheduler (docs/BENCHMARKS.md,
/// session 26); a thread that gives the turn up to others yields its core
/// right after, so that they run.
struct Turns {
    /// Threads waiting for a turn (for the holder's [`Turns::queued`]).
    waiting: AtomicU32,
}

static TURNS: Turns = Turns {
    waiting: AtomicU32::new(0),
};

impl Turns {
    /// Waits for the turn: spinning a little, then yielding the core, then
    /// napping (see [`pause`]).
    fn take(&self, me: usize) {
        if self.try_take(me) {
            return;
        }
        // Relaxed: a count for the holder's decision, ordered by nothing.
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let mut looks = 0u32;
        loop {
            looks += 1;
            pause(looks);
            // Relaxed: a look before the compare-exchange, which orders.
            if STATE.init_pthread.load(Ordering::Relaxed) == 0 && self.try_take(me) {
                break;
            }
        }
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    fn try_take(&self, me: usize) -> bool {
        // Acquire: pairs with the Release in `give`, so the previous holder's
        // use of the state happens before ours.
        STATE
            .init_pthread
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Gives the turn up.
    fn give(&self) {
        // Release: hands this turn's effects to the next holder.
        STATE.init_pthread.store(0, Ordering::Release);
    }

    /// Whether a thread holds the turn (read by one that does not).
    fn held(&self) -> bool {
        // Relaxed: a stale answer costs one look more, or one try.
        STATE.init_pthread.load(Ordering::Relaxed) != 0
    }

    /// Whether a thread waits for a turn (read by the holder).
    fn queued(&self) -> bool {
        // Relaxed: a thread that starts waiting just after we looked is seen
        // at the next look, one pass of the engine later.
        self.waiting.load(Ordering::Relaxed) != 0
    }
}

/// How a thread waits for something another thread of its rank does (a turn,
/// a message): after `looks` looks, spin, then yield the core (threads beyond
/// the cores must not keep the one they wait for off it), and only after
/// thousands of those (milliseconds) nap.
fn pause(looks: u32) {
    if looks < 64 {
        std::hint::spin_loop();
    } else if looks < 4096 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

/// Bumped by the thread whose turn it is when a pass of the engine moved
/// something: the threads waiting outside for their operations
/// ([`hand_over`]) look at it instead of queuing for a turn after every
/// pass, so that one thread at a time polls the engine (for all of them)
/// and the others come in when there is news. Relaxed: it only says when to
/// queue; what moved is read under the turn, which orders it.
static MOVED: AtomicU32 = AtomicU32::new(0);

/// The looks (a few hundred microseconds of yields) after which a thread
/// waiting outside queues again without news (see [`hand_over`]).
const OUTSIDE_LOOKS: u32 = 512;

/// The runtime's hand-over under `MPI_THREAD_MULTIPLE` (see
/// `kumi::threads`), and the ABI's between the tests of a blocking
/// completion: called by the thread whose turn it is, waiting for an
/// operation, between two passes of the engine (`idle`: passes in a row that
/// moved nothing). While no other thread wants in, it keeps the turn and
/// polls on. When one does, it gives the turn away and waits outside until
/// the engine moves something (which may be its operation), or until no
/// thread holds the turn (someone must poll), then queues again. Kept when
/// this thread's own frames hold the state (a wait inside a call that did
/// not let it go first): the next holder would find it borrowed. The
/// communicator whose handler takes the call's errors is this call's and is
/// put back.
pub(crate) fn hand_over(idle: u32) {
    if idle == 0 {
        MOVED.fetch_add(1, Ordering::Relaxed);
    }
    if !TURNS.queued() || STATE.state.try_borrow_mut().is_err() {
        pause(idle);
        return;
    }
    let err = STATE.err_comm.load(Ordering::Relaxed);
    let me = kumi::raw::thread_id();
    let seen = MOVED.load(Ordering::Relaxed);
    TURNS.give();
    std::thread::yield_now();
    // Bounded too: the holder may be polling in a wait made of tests
    // (`wait_by_tests`), which cannot tell that it moved something.
    let mut looks = 0u32;
    while MOVED.load(Ordering::Relaxed) == seen && TURNS.held() && looks < OUTSIDE_LOOKS {
        looks += 1;
        pause(looks);
    }
    TURNS.take(me);
    STATE.err_comm.store(err, Ordering::Relaxed);
}

/// A blocking completion under `MPI_THREAD_MULTIPLE`, made of tests: `test`
/// (which takes the state and lets it go, and makes progress) until it
/// gives an answer, with the turn handed on between two (see
/// [`hand_over`]). The requests of the program live in the state, so a
/// wait that kept one borrowed would keep every other thread out.
pub(crate) fn wait_by_tests<T>(mut test: impl FnMut() -> R<Option<T>>) -> R<T> {
    let mut idle = 0u32;
    loop {
        if let Some(t) = test()? {
            return Ok(t);
        }
        idle = idle.saturating_add(1);
        hand_over(idle);
    }
}

/// Switches to `level` (`MPI_THREAD_SERIALIZED` or `MPI_THREAD_MULTIPLE`, in
/// `MPI_Init_thread`): from now on each call takes the token (or its turn),
/// and the initializing thread gives it up.
pub(crate) fn set_thread_level(level: c_int) {
    // Release: see `Token::enter_slow`.
    STATE.level.store(level, Ordering::Release);
    if level == MPI_THREAD_MULTIPLE {
        kumi::threads::set_hand_over(hand_over);
    }
    clear_owner();
    // Release: the initialization's effects go to the next holder.
    STATE.init_pthread.store(0, Ordering::Release);
}

/// The thread level in force.
pub(crate) fn thread_level() -> c_int {
    STATE.level.load(Ordering::Relaxed)
}

/// Whether several threads may be inside MPI at once (taking turns): then a
/// call lets the state go before it blocks (see [`hand_over`]). One load of
/// the line every call reads.
#[inline(always)]
pub(crate) fn multiple() -> bool {
    STATE.level.load(Ordering::Relaxed) == MPI_THREAD_MULTIPLE
}

/// Why a call made while another thread is inside MPI is refused.
pub(crate) const SERIALIZED_RULE: &str = "called while another thread is inside MPI; under \
     MPI_THREAD_SERIALIZED: one thread at a time (MPI_Init_thread with MPI_THREAD_MULTIPLE \
     lets threads call at once)";

/// Runs `f` out of line: the multi-threaded arm of `blocking_on!`, kept
/// out of the one-thread path's layout.
#[cold]
#[inline(never)]
pub(crate) fn out_of_line<T>(f: impl FnOnce() -> T) -> T {
    f()
}

/// Whether calls take the token (or a turn).
pub(crate) fn serialized() -> bool {
    thread_level() >= MPI_THREAD_SERIALIZED
}

pub(crate) fn on_init_thread() -> bool {
    // Relaxed: see `Global::init_pthread`.
    let t = STATE.init_pthread.load(Ordering::Relaxed);
    t != 0 && t == kumi::raw::thread_id()
}

pub(crate) fn install(s: State) {
    *STATE.state.borrow_mut() = Some(s);
}

pub(crate) fn take() -> Option<State> {
    STATE.state.borrow_mut().take()
}

/// The state, for a call made between init and finalize on the init thread.
///
/// Inlined into every call, with the refusals out of line: returned from a
/// function of its own, the borrow came back through memory and was loaded
/// in wider words than it was stored in, which the processor cannot forward
/// and waits for (the same holds for the other helpers every call makes:
/// see `crate::guard`).
#[inline(always)]
pub(crate) fn st() -> R<RefMut<'static, State>> {
    match owner() {
        Some(o) => o.st(),
        None => st_checked(),
    }
}

/// Proof that the calling thread is `Global::owner` (from [`owner`]): MPI
/// runs under `MPI_THREAD_FUNNELED` and this is its thread, so no other
/// thread calls. Neither `Copy` nor `Send`: made and spent in one call on
/// one thread ([`Owner::st`] consumes it).
pub(crate) struct Owner(std::marker::PhantomData<*const ()>);

/// The proof that the caller is the owner, if it is.
#[inline(always)]
pub(crate) fn owner() -> Option<Owner> {
    is_owner().then_some(Owner(std::marker::PhantomData))
}

impl Owner {
    /// The state, for the owner: [`st`] without its test.
    #[inline(always)]
    pub(crate) fn st(self) -> R<RefMut<'static, State>> {
        let Ok(b) = STATE.state.try_borrow_mut() else {
            return reentered();
        };
        // SAFETY: the owner finds the state installed: `set_owner` runs
        // after `install` and `clear_owner` before `take`, all on the
        // owner's thread, the only one that finds its id in
        // `Global::owner`; an `Owner` is spent in the call that made it
        // (no `clear_owner` in between), on that thread.
        Ok(RefMut::map(b, |s| unsafe { s.as_mut().unwrap_unchecked() }))
    }
}

/// The state to read, for the fast path of a call that cannot block
/// (`MPI_Isend`, `MPI_Irecv` of a predefined type), without the `RefCell`'s
/// flag: taking and giving back the flag are two stores per call, and such
/// a call is made by the thousand in a row, each store waiting in the
/// processor's store buffer behind the previous message's stores into the
/// ring (docs/BENCHMARKS.md, session 18). `None` when the caller is not
/// `Global::owner` or the state is borrowed: the call's general path takes
/// [`st`], which says why it refuses.
///
/// # Safety
/// The caller must not borrow the state ([`st`], or anything that calls
/// it: another MPI function, a user callback) while it holds the
/// reference; the lifetime is the caller's to end.
#[inline(always)]
pub(crate) unsafe fn st_ref() -> Option<&'static State> {
    if !is_owner() {
        return None;
    }
    // SAFETY: the state is not borrowed mutably now (checked), and the
    // caller's contract keeps it so while the reference lives; only the
    // owner's thread touches the state (see `Global`'s Sync).
    let s = unsafe { STATE.state.try_borrow_unguarded() }.ok()?;
    // SAFETY: the owner finds the state installed, as in `st`.
    Some(unsafe { s.as_ref().unwrap_unchecked() })
}

/// [`st`] for a caller other than `Global::owner`: under
/// `MPI_THREAD_SERIALIZED`, or refused.
#[inline(never)]
pub(super) fn st_checked() -> R<RefMut<'static, State>> {
    // Acquire pairs with the Release store at the end of MPI_Init: a thread that
    // sees "running" also sees INIT_THREAD set.
    if phase().load(Ordering::Acquire) != 1 || !on_init_thread() {
        return refused();
    }
    match STATE.state.try_borrow_mut() {
        Ok(b) => RefMut::filter_map(b, |s| s.as_mut()).or_else(|_| not_initialized()),
        Err(_) => reentered(),
    }
}

/// Whether the caller is `Global::owner`: MPI runs, under
/// `MPI_THREAD_FUNNELED`, and this is its thread.
#[inline(always)]
pub(super) fn is_owner() -> bool {
    // Relaxed: see `Global::owner`.
    STATE.owner.load(Ordering::Relaxed) == kumi::raw::thread_id()
}

/// Makes the calling thread, which has just started MPI (the state
/// installed, `phase` running), `Global::owner`: MPI starts under
/// `MPI_THREAD_FUNNELED`, and `MPI_Init_thread` asking for more clears the
/// owner after ([`set_serialized`]).
pub(crate) fn set_owner() {
    // Relaxed: see `Global::owner`.
    STATE.owner.store(kumi::raw::thread_id(), Ordering::Relaxed);
}

/// Ends the fast path of [`is_owner`] (at `MPI_Finalize`, or when
/// `MPI_Init_thread` switches to `MPI_THREAD_SERIALIZED`).
pub(crate) fn clear_owner() {
    // Relaxed: see `Global::owner`.
    STATE.owner.store(0, Ordering::Relaxed);
}

/// Why [`st`] refuses a call: MPI is not running, or this is not its thread.
#[cold]
#[inline(never)]
pub(super) fn refused<T>() -> R<T> {
    // Acquire: see `st`.
    match phase().load(Ordering::Acquire) {
        0 => err(MPI_ERR_OTHER, "MPI is not initialized: call MPI_Init first"),
        2 => err(MPI_ERR_OTHER, "MPI has been finalized"),
        _ if thread_level() == MPI_THREAD_MULTIPLE => err(
            MPI_ERR_INTERN,
            "kumi bug: a call under MPI_THREAD_MULTIPLE without its turn",
        ),
        _ if serialized() => err(MPI_ERR_OTHER, SERIALIZED_RULE),
        _ => err(
            MPI_ERR_OTHER,
            "called from a thread other than the one that initialized MPI; kumi provides \
             MPI_THREAD_FUNNELED unless MPI_Init_thread asks for more: only the main \
             thread may make MPI calls",
        ),
    }
}

#[cold]
#[inline(never)]
pub(super) fn reentered<T>() -> R<T> {
    err(
        MPI_ERR_INTERN,
        "MPI called from inside a callback of another MPI call",
    )
}

#[cold]
#[inline(never)]
pub(super) fn not_initialized<T>() -> R<T> {
    err(MPI_ERR_OTHER, "MPI is not initialized")
}
