//! The TCP transport: frames between ranks on different hosts.
//!
//! One connection per pair of ranks that talk, opened lazily by the first
//! [`Transport::try_send`] to a peer, so a job never opens the N² connections
//! nobody uses (DSE's 59-node wall). Sockets are nonblocking, `TCP_NODELAY`, and
//! watched by one epoll instance; [`Transport::poll`] asks it with a zero timeout,
//! so a rank that spins in a kumi call sees a frame as soon as the kernel has it
//! (waking a process asleep in the kernel costs ~50 us here; polling does not),
//! and [`Transport::sleep`] is the same epoll wait with a timeout.
//!
//! # Decisions
//!
//! * **Nothing before the proof.** A connection is a fixed-size handshake first
//!   ([`wire`]): both sides prove the job secret with an HMAC over both nonces, the
//!   job id and both ranks. Until the connector's proof has been checked, the
//!   acceptor keeps a few fixed-size arrays for it and nothing else; a peer that
//!   sends garbage, a wrong proof or nothing at all is dropped with one logged line
//!   (`kumi: rank R: refused a data connection from ADDR: reason`) and the rank
//!   runs on.
//! * **Simultaneous connects.** If both ranks of a pair dial each other at once,
//!   the connection dialed by the lower rank wins: the lower rank answers the
//!   higher one's HELLO with `DUP`, the higher rank abandons its own dial and
//!   accepts. Frames are written only once a connection is authenticated, and they
//!   wait in a per-*peer* queue (not per connection), so whichever connection wins
//!   carries them, in order.
//! * **Acceptance.** `try_send` writes straight to the socket when nothing is
//!   queued for that peer; what the socket does not take is copied to the peer's
//!   queue. A queue above [`TcpConfig::high_water`] bytes refuses new frames
//!   (`Ok(false)`), which is how the engine's rendezvous pipeline is paced.
//! * **Failures.** A job peer whose authenticated connection breaks (reset, closed
//!   mid-frame, a frame that fails the checks) is reported by `poll` as an
//!   [`io::Error`] wrapping a [`PeerError`] that names it; the runtime turns that
//!   into a job abort naming both ranks. A peer that closes cleanly between frames
//!   has ended (it finalized); only sending to it afterwards is an error.

pub mod addr;
pub mod wire;

use crate::{Sink, Transport};
use kumi_core::header::Header;
use rustix::event::epoll;
use std::fmt;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};
use wire::{Answer, Binding, FrameReader, Hello, ANSWER_BYTES, HELLO_BYTES, NONCE, PROOF_BYTES};

/// Default largest payload of one frame. Large messages go as rendezvous `Data`
/// chunks of this size; 256 KiB keeps a chunk's copy short while amortizing the
/// per-frame costs. Measured between two network namespaces (1-4 MiB streams):
/// 64 and 128 KiB chunks, or 1 MiB, were no faster, nor were fixed socket
/// buffers of 1 or 4 MiB instead of the kernel's autotuning (which is kept).
pub const DEFAULT_MAX_PAYLOAD: usize = 256 * 1024;
/// Default per-peer queue size above which `try_send` refuses frames. One
/// chunk: what the socket does not take is copied to the queue, so a deep
/// queue only adds a copy of the stream on the sender (4 MiB per peer, too,
/// is a lot of memory in a large job); the engine keeps the rest of a
/// rendezvous in the user's buffer and offers it again once the queue drains.
/// 256 KiB streamed 1-4 MiB messages between namespaces at least as fast as
/// 1 and 4 MiB did (noisy, shared machine).
pub const DEFAULT_HIGH_WATER: usize = 256 * 1024;
/// Time an unauthenticated connection has to complete the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Unauthenticated connections held at once; more are refused at once.
pub const MAX_PENDING: usize = 64;

/// How a TCP transport is set up.
#[derive(Clone)]
pub struct TcpConfig {
    /// Rank, job, address and frame limit.
    pub id: crate::NetIdentity,
    /// Queued bytes per peer above which `try_send` refuses.
    pub high_water: usize,
    /// Look at the sockets on one [`Transport::poll`] in this many while no
    /// frame is arriving (1: on every one). A rank that also has shared memory
    /// sets more, so its shared-memory fast path does not pay a system call
    /// per pass; see [`TcpTransport::poll`].
    pub poll_every: u32,
}

impl fmt::Debug for TcpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpConfig")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A job peer's connection failed; the job cannot go on as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerError {
    /// The peer's global rank.
    pub peer: u32,
    /// What happened.
    pub reason: String,
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the data connection with rank {}: {}",
            self.peer, self.reason
        )
    }
}

impl std::error::Error for PeerError {}

impl PeerError {
    /// The `PeerError` inside an error returned by the transport, if any.
    pub fn find(e: &io::Error) -> Option<&PeerError> {
        e.get_ref().and_then(|x| x.downcast_ref::<PeerError>())
    }
}

#[derive(Default)]
struct Peer {
    /// Encoded frames waiting for the socket; `out[head..]` is unsent.
    out: Vec<u8>,
    head: usize,
    /// The authenticated connection.
    conn: Option<usize>,
    /// Our dial, not yet answered.
    dial: Option<usize>,
    /// Its dial to us, mid-handshake.
    incoming: Option<usize>,
    /// It closed its connection cleanly (it has ended).
    closed: bool,
}

impl Peer {
    fn queued(&self) -> usize {
        self.out.len() - self.head
    }
}

enum State {
    Dialing {
        peer: u32,
        nonce: [u8; NONCE],
        got: [u8; ANSWER_BYTES],
        n: usize,
        connected: bool,
    },
    Hello {
        got: [u8; HELLO_BYTES],
        n: usize,
        deadline: Instant,
    },
    Proof {
        peer: u32,
        nonce_c: [u8; NONCE],
        nonce_a: [u8; NONCE],
        got: [u8; PROOF_BYTES],
        n: usize,
        deadline: Instant,
    },
    Open {
        peer: u32,
        reader: FrameReader,
    },
    /// Lost a simultaneous-connect race; closed when answered.
    Abandoned,
}

struct Conn {
    sock: TcpStream,
    addr: SocketAddr,
    state: State,
    /// Handshake bytes not yet written (written before any frame).
    hs_out: Vec<u8>,
    want_out: bool,
}

/// What handling a connection concluded.
enum Verdict {
    Keep,
    /// Close without a word (a clean end, a lost race).
    Close,
    /// Close and log one refusal line.
    Refuse(String),
    /// A job peer failed.
    Fatal(u32, String),
}

const LISTENER: u64 = u64::MAX;

/// Most open connections read directly instead of through epoll (see `poll`).
const DIRECT_MAX: usize = 4;
/// One pass in this many uses epoll even when reading directly.
const DIRECT_EPOLL_EVERY: u32 = 16;

/// The TCP transport of one rank.
pub struct TcpTransport {
    cfg: TcpConfig,
    listener: TcpListener,
    local: SocketAddr,
    epoll: OwnedFd,
    addrs: Vec<Option<SocketAddr>>,
    peers: Vec<Peer>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    events: Vec<epoll::Event>,
    pending_in: usize,
    refusals: u64,
    failed: Option<PeerError>,
    idle_polls: u32,
    /// The last look at the sockets found something (traffic is flowing).
    busy: bool,
    /// Authenticated connections (indexes into `conns`), for direct reads.
    open: Vec<usize>,
    /// Connections waiting to write (registered for `OUT` with epoll).
    want_out: usize,
}

// SAFETY: the only field that is not `Send` by itself is `events`: rustix's
// epoll event records carry their user data in a union with a pointer, but
// kumi stores only integer tokens there (a connection index or LISTENER) and
// never dereferences them. Everything else is owned sockets and plain data, so
// moving the transport to another thread (the rank's progress thread, under
// the engine's lock) is sound.
unsafe impl Send for TcpTransport {}

impl TcpTransport {
    /// Listens on `cfg.id.bind` (any port). Peers' addresses come later through
    /// [`TcpTransport::set_peer_addr`], before the first send to them.
    pub fn new(cfg: TcpConfig) -> io::Result<TcpTransport> {
        let listener = TcpListener::bind((cfg.id.bind, 0))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &ep,
            &listener,
            epoll::EventData::new_u64(LISTENER),
            epoll::EventFlags::IN,
        )?;
        let n = cfg.id.size as usize;
        Ok(TcpTransport {
            cfg,
            listener,
            local,
            epoll: ep,
            addrs: vec![None; n],
            peers: (0..n).map(|_| Peer::default()).collect(),
            conns: Vec::new(),
            free: Vec::new(),
            events: Vec::with_capacity(64),
            pending_in: 0,
            refusals: 0,
            failed: None,
            idle_polls: 0,
            busy: false,
            open: Vec::new(),
            want_out: 0,
        })
    }

    /// The address this rank listens on (its address card).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Records where `peer` listens.
    pub fn set_peer_addr(&mut self, peer: u32, addr: SocketAddr) {
        if let Some(a) = self.addrs.get_mut(peer as usize) {
            *a = Some(addr);
        }
    }

    /// Connections refused so far (foreign or unauthenticated peers).
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    fn log(&self, msg: &str) {
        eprintln!("kumi: rank {}: {msg}", self.cfg.id.rank);
    }

    fn fail(&mut self, peer: u32, reason: String) {
        if self.failed.is_none() {
            self.failed = Some(PeerError { peer, reason });
        }
    }

    fn insert(&mut self, c: Conn) -> io::Result<usize> {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        let flags = if c.want_out {
            epoll::EventFlags::IN | epoll::EventFlags::OUT
        } else {
            epoll::EventFlags::IN
        };
        epoll::add(
            &self.epoll,
            &c.sock,
            epoll::EventData::new_u64(idx as u64),
            flags,
        )?;
        self.want_out += usize::from(c.want_out);
        self.conns[idx] = Some(c);
        Ok(idx)
    }

    fn close(&mut self, idx: usize) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::take) else {
            return;
        };
        let _ = epoll::delete(&self.epoll, &c.sock);
        if matches!(c.state, State::Hello { .. } | State::Proof { .. }) {
            self.pending_in -= 1;
        }
        self.want_out -= usize::from(c.want_out);
        self.open.retain(|&i| i != idx);
        for p in &mut self.peers {
            for slot in [&mut p.conn, &mut p.dial, &mut p.incoming] {
                if *slot == Some(idx) {
                    *slot = None;
                }
            }
        }
        self.free.push(idx);
    }

    fn set_want_out(&mut self, idx: usize, want: bool) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        if c.want_out == want {
            return;
        }
        c.want_out = want;
        if want {
            self.want_out += 1;
        } else {
            self.want_out -= 1;
        }
        let flags = if want {
            epoll::EventFlags::IN | epoll::EventFlags::OUT
        } else {
            epoll::EventFlags::IN
        };
        let _ = epoll::modify(
            &self.epoll,
            &c.sock,
            epoll::EventData::new_u64(idx as u64),
            flags,
        );
    }

    /// Starts a connection to `peer`.
    fn dial(&mut self, peer: u32) -> io::Result<()> {
        let addr = self.addrs[peer as usize].ok_or_else(|| {
            io::Error::other(PeerError {
                peer,
                reason: "its address is unknown (no address card)".into(),
            })
        })?;
        let fd = rustix::net::socket_with(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::STREAM,
            rustix::net::SocketFlags::NONBLOCK | rustix::net::SocketFlags::CLOEXEC,
            None,
        )?;
        rustix::net::sockopt::set_tcp_nodelay(&fd, true)?;
        match rustix::net::connect(&fd, &addr) {
            Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
            Err(e) => {
                return Err(io::Error::other(PeerError {
                    peer,
                    reason: format!("cannot connect to {addr}: {e}"),
                }))
            }
        }
        let nonce = crate::random_bytes::<NONCE>()?;
        let hello = Hello {
            from: self.cfg.id.rank,
            to: peer,
            nonce,
        };
        let idx = self.insert(Conn {
            sock: TcpStream::from(fd),
            addr,
            state: State::Dialing {
                peer,
                nonce,
                got: [0; ANSWER_BYTES],
                n: 0,
                connected: false,
            },
            hs_out: hello.encode().to_vec(),
            want_out: true,
        })?;
        self.peers[peer as usize].dial = Some(idx);
        Ok(())
    }

    fn accept_all(&mut self) {
        loop {
            let (sock, addr) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            if self.pending_in >= MAX_PENDING {
                self.refusals += 1;
                self.log(&format!(
                    "refused a data connection from {addr}: more than {MAX_PENDING} connections are mid-handshake"
                ));
                continue;
            }
            if sock.set_nonblocking(true).is_err() || sock.set_nodelay(true).is_err() {
                continue;
            }
            let c = Conn {
                sock,
                addr,
                state: State::Hello {
                    got: [0; HELLO_BYTES],
                    n: 0,
                    deadline: Instant::now() + HANDSHAKE_TIMEOUT,
                },
                hs_out: Vec::new(),
                want_out: false,
            };
            if self.insert(c).is_ok() {
                self.pending_in += 1;
            }
        }
    }

    /// Writes handshake bytes, then (on an open connection) the peer's queue.
    /// Returns a verdict if the socket failed.
    fn flush(&mut self, idx: usize) -> Verdict {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return Verdict::Keep;
        };
        let peer_of = match c.state {
            State::Open { peer, .. } => Some(peer),
            _ => None,
        };
        let mut blocked = false;
        while !c.hs_out.is_empty() {
            match (&c.sock).write(&c.hs_out) {
                Ok(0) => return fatal_or_close(&c.state, "the socket took no bytes".into()),
                Ok(n) => {
                    c.hs_out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) => return fatal_or_close(&c.state, format!("write failed: {e}")),
            }
        }
        if let (false, Some(peer)) = (blocked, peer_of) {
            let p = &mut self.peers[peer as usize];
            while p.queued() > 0 {
                match (&c.sock).write(&p.out[p.head..]) {
                    Ok(0) => return Verdict::Fatal(peer, "the socket took no bytes".into()),
                    Ok(n) => p.head += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        blocked = true;
                        break;
                    }
                    Err(e) => return Verdict::Fatal(peer, format!("write failed: {e}")),
                }
            }
            if p.queued() == 0 {
                p.out.clear();
                p.head = 0;
            } else if p.head > (1 << 20) && p.head * 2 > p.out.len() {
                p.out.drain(..p.head);
                p.head = 0;
            }
        }
        let dialing = matches!(
            c.state,
            State::Dialing {
                connected: false,
                ..
            }
        );
        self.set_want_out(idx, blocked || dialing);
        Verdict::Keep
    }

    fn handle(
        &mut self,
        idx: usize,
        flags: epoll::EventFlags,
        sink: &mut Sink<'_>,
    ) -> (Verdict, usize) {
        let mut delivered = 0;
        if flags.contains(epoll::EventFlags::OUT) {
            if let Some(Conn {
                sock,
                state: State::Dialing {
                    peer, connected, ..
                },
                addr,
                ..
            }) = self.conns.get_mut(idx).and_then(Option::as_mut)
            {
                if !*connected {
                    match rustix::net::sockopt::socket_error(&*sock) {
                        Ok(Ok(())) => *connected = true,
                        Ok(Err(e)) => {
                            return (
                                Verdict::Fatal(*peer, format!("cannot connect to {addr}: {e}")),
                                0,
                            )
                        }
                        Err(e) => {
                            return (
                                Verdict::Fatal(*peer, format!("cannot connect to {addr}: {e}")),
                                0,
                            )
                        }
                    }
                }
            }
            match self.flush(idx) {
                Verdict::Keep => {}
                v => return (v, 0),
            }
        }
        if !flags
            .intersects(epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR)
        {
            return (Verdict::Keep, 0);
        }
        // Handshake steps read exactly their own bytes, so nothing that follows
        // in the stream (frames) is consumed early. Each step may lead to the
        // next, hence the loop.
        for _ in 0..8 {
            let me = self.cfg.id.rank;
            let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
                return (Verdict::Keep, delivered);
            };
            let Conn { sock, state, .. } = c;
            match state {
                State::Hello { got, n, .. } => match read_some(sock, &mut got[*n..]) {
                    Ok(Some(0)) => {
                        return (
                            Verdict::Refuse("closed before saying hello".into()),
                            delivered,
                        )
                    }
                    Ok(Some(k)) => {
                        *n += k;
                        if *n < HELLO_BYTES {
                            continue;
                        }
                        let got = *got;
                        match self.on_hello(idx, &got) {
                            Verdict::Keep => {}
                            v => return (v, delivered),
                        }
                    }
                    Ok(None) => return (Verdict::Keep, delivered),
                    Err(e) => return (Verdict::Refuse(format!("read failed: {e}")), delivered),
                },
                State::Proof {
                    peer,
                    nonce_c,
                    nonce_a,
                    got,
                    n,
                    ..
                } => match read_some(sock, &mut got[*n..]) {
                    Ok(Some(0)) => {
                        return (
                            Verdict::Refuse(format!(
                                "closed before proving the job secret (claimed rank {peer})"
                            )),
                            delivered,
                        )
                    }
                    Ok(Some(k)) => {
                        *n += k;
                        if *n < PROOF_BYTES {
                            continue;
                        }
                        let b = Binding {
                            secret: &self.cfg.id.secret,
                            job: &self.cfg.id.job,
                            from: *peer,
                            to: me,
                            nonce_c,
                            nonce_a,
                        };
                        if !wire::verify_connect(&b, &got[..]) {
                            return (
                                Verdict::Refuse(format!(
                                    "wrong proof of the job secret (claimed rank {peer})"
                                )),
                                delivered,
                            );
                        }
                        let peer = *peer;
                        *state = State::Open {
                            peer,
                            reader: FrameReader::new(self.cfg.id.max_payload),
                        };
                        self.pending_in -= 1;
                        let p = &mut self.peers[peer as usize];
                        p.incoming = None;
                        p.conn = Some(idx);
                        self.open.push(idx);
                        match self.flush(idx) {
                            Verdict::Keep => {}
                            v => return (v, delivered),
                        }
                    }
                    Ok(None) => return (Verdict::Keep, delivered),
                    Err(e) => return (Verdict::Refuse(format!("read failed: {e}")), delivered),
                },
                State::Dialing {
                    peer,
                    nonce,
                    got,
                    n,
                    ..
                } => match read_some(sock, &mut got[*n..]) {
                    Ok(Some(0)) => {
                        return (
                            Verdict::Fatal(
                                *peer,
                                "it closed the connection during the handshake".into(),
                            ),
                            delivered,
                        )
                    }
                    Ok(Some(k)) => {
                        *n += k;
                        if *n < ANSWER_BYTES {
                            continue;
                        }
                        let (peer, nonce, answer) = (*peer, *nonce, Answer::decode(got));
                        match answer {
                            Some(Answer::Duplicate) => {
                                // The other side keeps its own dial to us; our
                                // queue waits for it.
                                return (Verdict::Close, delivered);
                            }
                            Some(Answer::Accept {
                                nonce: nonce_a,
                                mac,
                            }) => {
                                let b = Binding {
                                    secret: &self.cfg.id.secret,
                                    job: &self.cfg.id.job,
                                    from: me,
                                    to: peer,
                                    nonce_c: &nonce,
                                    nonce_a: &nonce_a,
                                };
                                if !wire::verify_accept(&b, &mac) {
                                    return (
                                        Verdict::Fatal(
                                            peer,
                                            format!(
                                                "{} answered without proving the job secret",
                                                c_addr(&self.conns, idx)
                                            ),
                                        ),
                                        delivered,
                                    );
                                }
                                let proof = wire::connect_mac(&b);
                                let c = self.conns[idx].as_mut().expect("connection exists");
                                c.hs_out.extend_from_slice(&proof);
                                c.state = State::Open {
                                    peer,
                                    reader: FrameReader::new(self.cfg.id.max_payload),
                                };
                                let p = &mut self.peers[peer as usize];
                                p.dial = None;
                                p.conn = Some(idx);
                                self.open.push(idx);
                                match self.flush(idx) {
                                    Verdict::Keep => {}
                                    v => return (v, delivered),
                                }
                            }
                            None => {
                                return (
                                    Verdict::Fatal(
                                        peer,
                                        format!(
                                            "{} does not speak kumi's data protocol",
                                            c_addr(&self.conns, idx)
                                        ),
                                    ),
                                    delivered,
                                )
                            }
                        }
                    }
                    Ok(None) => return (Verdict::Keep, delivered),
                    Err(e) => {
                        return (
                            Verdict::Fatal(*peer, format!("read failed: {e}")),
                            delivered,
                        )
                    }
                },
                State::Abandoned => {
                    let mut sink_buf = [0u8; ANSWER_BYTES];
                    return match read_some(sock, &mut sink_buf) {
                        Ok(None) => (Verdict::Keep, delivered),
                        _ => (Verdict::Close, delivered),
                    };
                }
                State::Open { peer, reader } => {
                    let peer = *peer;
                    let space = reader.space();
                    let room = space.len();
                    match read_some(sock, space) {
                        Ok(Some(0)) => {
                            return if reader.pending() > 0 {
                                (
                                    Verdict::Fatal(
                                        peer,
                                        format!(
                                            "closed in the middle of a frame ({} bytes of it received)",
                                            reader.pending()
                                        ),
                                    ),
                                    delivered,
                                )
                            } else {
                                self.peers[peer as usize].closed = true;
                                (Verdict::Close, delivered)
                            };
                        }
                        Ok(Some(k)) => {
                            // A read that did not fill the space emptied the
                            // socket: reading again would only return EAGAIN,
                            // one system call more per message (epoll is
                            // level-triggered, so bytes that come later are
                            // reported by the next poll).
                            let drained = k < room;
                            reader.filled(k);
                            loop {
                                match reader.next_frame() {
                                    Ok(Some((h, p))) => {
                                        sink(peer, &h, p);
                                        delivered += 1;
                                    }
                                    Ok(None) => break,
                                    Err(e) => {
                                        return (
                                            Verdict::Fatal(
                                                peer,
                                                format!("it sent a bad frame: {e}"),
                                            ),
                                            delivered,
                                        )
                                    }
                                }
                            }
                            if drained {
                                return (Verdict::Keep, delivered);
                            }
                        }
                        Ok(None) => return (Verdict::Keep, delivered),
                        Err(e) => {
                            return (
                                Verdict::Fatal(peer, format!("the connection broke: {e}")),
                                delivered,
                            )
                        }
                    }
                }
            }
        }
        (Verdict::Keep, delivered)
    }

    /// A complete HELLO arrived on incoming connection `idx`.
    fn on_hello(&mut self, idx: usize, got: &[u8; HELLO_BYTES]) -> Verdict {
        let me = self.cfg.id.rank;
        let Some(h) = Hello::decode(got) else {
            return Verdict::Refuse("not a kumi data connection (bad greeting)".into());
        };
        if h.to != me {
            return Verdict::Refuse(format!("it asked for rank {}, this is rank {me}", h.to));
        }
        if h.from >= self.cfg.id.size || h.from == me {
            return Verdict::Refuse(format!(
                "it claims to be rank {}, not a peer in this job of {} ranks",
                h.from, self.cfg.id.size
            ));
        }
        let from = h.from;
        let p = &self.peers[from as usize];
        // A job peer never dials while it has a connection to us (a clean close
        // means it ended), so a second one is a stranger's.
        if p.conn.is_some() {
            return Verdict::Refuse(format!("rank {from} is already connected"));
        }
        let duplicate = p.incoming.is_some() || (p.dial.is_some() && me < from);
        let c = self.conns[idx].as_mut().expect("connection exists");
        if duplicate {
            c.hs_out.extend_from_slice(&Answer::Duplicate.encode());
            let _ = self.flush(idx);
            return Verdict::Close;
        }
        let nonce_a = match crate::random_bytes::<NONCE>() {
            Ok(n) => n,
            Err(e) => return Verdict::Refuse(format!("no randomness for a challenge: {e}")),
        };
        let b = Binding {
            secret: &self.cfg.id.secret,
            job: &self.cfg.id.job,
            from,
            to: me,
            nonce_c: &h.nonce,
            nonce_a: &nonce_a,
        };
        let mac = wire::accept_mac(&b);
        let deadline = match c.state {
            State::Hello { deadline, .. } => deadline,
            _ => Instant::now() + HANDSHAKE_TIMEOUT,
        };
        c.hs_out.extend_from_slice(
            &Answer::Accept {
                nonce: nonce_a,
                mac,
            }
            .encode(),
        );
        c.state = State::Proof {
            peer: from,
            nonce_c: h.nonce,
            nonce_a,
            got: [0; PROOF_BYTES],
            n: 0,
            deadline,
        };
        // We are the higher rank of a simultaneous connect: our dial loses.
        if let Some(d) = self.peers[from as usize].dial.take() {
            if let Some(dc) = self.conns.get_mut(d).and_then(Option::as_mut) {
                dc.state = State::Abandoned;
            }
        }
        self.peers[from as usize].incoming = Some(idx);
        self.flush(idx)
    }

    fn apply(&mut self, idx: usize, v: Verdict) {
        match v {
            Verdict::Keep => return,
            Verdict::Close => {}
            Verdict::Refuse(reason) => {
                self.refusals += 1;
                let addr = c_addr(&self.conns, idx);
                self.log(&format!("refused a data connection from {addr}: {reason}"));
            }
            Verdict::Fatal(peer, reason) => self.fail(peer, reason),
        }
        let claimed = match self
            .conns
            .get(idx)
            .and_then(Option::as_ref)
            .map(|c| &c.state)
        {
            Some(State::Proof { peer, .. }) => Some(*peer),
            _ => None,
        };
        self.close(idx);
        // An impostor may have made us abandon a dial: dial again if frames wait.
        if let Some(p) = claimed {
            let peer = &self.peers[p as usize];
            if peer.queued() > 0
                && peer.conn.is_none()
                && peer.dial.is_none()
                && peer.incoming.is_none()
            {
                if let Err(e) = self.dial(p) {
                    self.fail(p, e.to_string());
                }
            }
        }
    }

    fn expire(&mut self, now: Instant) {
        let late: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c.as_ref()?.state {
                State::Hello { deadline, .. } | State::Proof { deadline, .. }
                    if deadline <= now =>
                {
                    Some(i)
                }
                _ => None,
            })
            .collect();
        for i in late {
            self.apply(
                i,
                Verdict::Refuse(format!(
                    "no proof of the job secret within {} s",
                    HANDSHAKE_TIMEOUT.as_secs()
                )),
            );
        }
    }
}

fn c_addr(conns: &[Option<Conn>], idx: usize) -> String {
    conns
        .get(idx)
        .and_then(Option::as_ref)
        .map_or_else(|| "?".into(), |c| c.addr.to_string())
}

fn fatal_or_close(state: &State, reason: String) -> Verdict {
    match state {
        State::Dialing { peer, .. } | State::Open { peer, .. } => Verdict::Fatal(*peer, reason),
        State::Hello { .. } | State::Proof { .. } => Verdict::Refuse(reason),
        State::Abandoned => Verdict::Close,
    }
}

/// One read: `Some(0)` end of file, `Some(n)` bytes, `None` nothing now.
fn read_some(sock: &TcpStream, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        match (&*sock).read(buf) {
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

impl Transport for TcpTransport {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn max_payload(&self) -> usize {
        self.cfg.id.max_payload
    }

    fn try_send(&mut self, peer: u32, header: &Header, payload: &[u8]) -> io::Result<bool> {
        self.cfg.id.check_frame(peer, payload.len())?;
        let p = &mut self.peers[peer as usize];
        if p.closed {
            return Err(io::Error::other(PeerError {
                peer,
                reason: "it has closed its connection (ended) but is sent a message".into(),
            }));
        }
        let prefix = wire::frame_prefix(header, payload.len());
        let total = prefix.len() + payload.len();
        if p.queued() == 0 {
            if let Some(idx) = p.conn {
                let c = self.conns[idx].as_mut().expect("open connection exists");
                if c.hs_out.is_empty() {
                    let written = loop {
                        match (&c.sock)
                            .write_vectored(&[IoSlice::new(&prefix), IoSlice::new(payload)])
                        {
                            Ok(n) => break n,
                            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                            Err(e) if e.kind() == ErrorKind::WouldBlock => break 0,
                            Err(e) => {
                                let v = Verdict::Fatal(peer, format!("write failed: {e}"));
                                self.apply(idx, v);
                                return Ok(true);
                            }
                        }
                    };
                    if written == total {
                        return Ok(true);
                    }
                    if written < prefix.len() {
                        p.out.extend_from_slice(&prefix[written..]);
                        p.out.extend_from_slice(payload);
                    } else {
                        p.out.extend_from_slice(&payload[written - prefix.len()..]);
                    }
                    self.set_want_out(idx, true);
                    return Ok(true);
                }
            }
        } else if p.queued() >= self.cfg.high_water {
            return Ok(false);
        }
        p.out.extend_from_slice(&prefix);
        p.out.extend_from_slice(payload);
        match (p.conn, p.dial, p.incoming) {
            (Some(idx), _, _) => {
                let v = self.flush(idx);
                self.apply(idx, v);
            }
            (None, None, None) => self.dial(peer)?,
            _ => {}
        }
        Ok(true)
    }

    fn poll(&mut self, sink: &mut Sink<'_>) -> io::Result<usize> {
        let mut delivered = 0;
        // With no connection at all, only a new one can arrive: look for it on
        // one pass in 64, so a rank busy with shared memory pays no system call
        // per pass for a network it does not use yet.
        self.idle_polls = self.idle_polls.wrapping_add(1);
        if self.conns.len() == self.free.len() && !self.idle_polls.is_multiple_of(64) {
            return Ok(0);
        }
        // A rank with shared-memory peers too (`poll_every` > 1) looks at the
        // sockets on one pass in `poll_every` while they are quiet, so a pass
        // that finds a shared-memory frame costs no system call most of the
        // time; the network waits at most `poll_every - 1` shared-memory passes
        // (tens of nanoseconds each) more, against ~0.5 us per `epoll_wait`.
        // Once a look finds anything (frames flowing, output queued), every
        // pass looks again.
        if !self.busy && !self.idle_polls.is_multiple_of(self.cfg.poll_every.max(1)) {
            return Ok(0);
        }
        // Direct reads: while every live connection is authenticated, none
        // waits to write and there are few of them, a nonblocking read on each
        // replaces `epoll_wait` + read: one system call per arriving frame
        // instead of two, on the latency path. One pass in DIRECT_EPOLL_EVERY
        // still asks epoll, for new connections and hang-ups.
        let live = self.conns.len() - self.free.len();
        if !self.open.is_empty()
            && self.open.len() == live
            && self.open.len() <= DIRECT_MAX
            && self.want_out == 0
            && !self.idle_polls.is_multiple_of(DIRECT_EPOLL_EVERY)
        {
            let mut delivered = 0;
            let mut i = 0;
            while i < self.open.len() {
                let idx = self.open[i];
                let (v, n) = self.handle(idx, epoll::EventFlags::IN, sink);
                delivered += n;
                self.apply(idx, v);
                // `apply` may have closed it (removed from `open`).
                if self.open.get(i) == Some(&idx) {
                    i += 1;
                }
            }
            self.busy = delivered > 0;
            if let Some(e) = self.failed.take() {
                return Err(io::Error::other(e));
            }
            return Ok(delivered);
        }
        self.events.clear();
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(&mut self.events),
            Some(&zero),
        ) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        self.busy = !self.events.is_empty();
        for i in 0..self.events.len() {
            let ev = self.events[i];
            let (flags, token) = (ev.flags, ev.data.u64());
            if token == LISTENER {
                self.accept_all();
                continue;
            }
            let (v, n) = self.handle(token as usize, flags, sink);
            delivered += n;
            self.apply(token as usize, v);
        }
        if self.pending_in > 0 {
            self.expire(Instant::now());
        }
        if let Some(e) = self.failed.take() {
            return Err(io::Error::other(e));
        }
        Ok(delivered)
    }

    fn prepare_sleep(&mut self) -> bool {
        // Frames are delivered as soon as they are read, so none is held here.
        true
    }

    fn sleep(&mut self, timeout: Duration) {
        let mut one: Vec<epoll::Event> = Vec::with_capacity(1);
        let ts = rustix::event::Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let _ = epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(&mut one),
            Some(&ts),
        );
    }

    fn cancel_sleep(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use kumi_core::header::Kind;

    fn pair_cfg(rank: u32, secret: &[u8]) -> TcpConfig {
        TcpConfig {
            id: crate::NetIdentity {
                job: "jtest".into(),
                secret: secret.to_vec(),
                rank,
                size: 2,
                bind: std::net::Ipv4Addr::LOCALHOST,
                max_payload: 1024,
            },
            high_water: 8192,
            poll_every: 1,
        }
    }

    fn pump(a: &mut TcpTransport, b: &mut TcpTransport, got: &mut Vec<(u32, Header, Vec<u8>)>) {
        for _ in 0..2000 {
            a.poll(&mut |f, h, p| got.push((f, *h, p.to_vec())))
                .unwrap();
            b.poll(&mut |f, h, p| got.push((f, *h, p.to_vec())))
                .unwrap();
        }
    }

    #[test]
    fn simultaneous_first_sends_keep_order_on_one_connection() {
        let mut a = TcpTransport::new(pair_cfg(0, b"s")).unwrap();
        let mut b = TcpTransport::new(pair_cfg(1, b"s")).unwrap();
        a.set_peer_addr(1, b.local_addr());
        b.set_peer_addr(0, a.local_addr());
        let mut got = Vec::new();
        for i in 0..50u64 {
            let mut h = Header::new(Kind::Eager);
            h.id = i;
            assert!(a.try_send(1, &h, &[i as u8; 100]).unwrap());
            assert!(b.try_send(0, &h, &[i as u8; 7]).unwrap());
        }
        pump(&mut a, &mut b, &mut got);
        let from0: Vec<u64> = got.iter().filter(|g| g.0 == 0).map(|g| g.1.id).collect();
        let from1: Vec<u64> = got.iter().filter(|g| g.0 == 1).map(|g| g.1.id).collect();
        assert_eq!(from0, (0..50).collect::<Vec<_>>());
        assert_eq!(from1, (0..50).collect::<Vec<_>>());
        assert_eq!(a.refusals() + b.refusals(), 0);
        let open = |t: &TcpTransport| t.conns.iter().flatten().count();
        assert_eq!((open(&a), open(&b)), (1, 1), "one connection per pair");
    }

    /// Connects 0 -> 1, then writes `raw` on 0's socket and lets 1 read it.
    fn job_peer_sends(raw: &[u8], close: bool) -> io::Error {
        let mut a = TcpTransport::new(pair_cfg(0, b"s")).unwrap();
        let mut b = TcpTransport::new(pair_cfg(1, b"s")).unwrap();
        a.set_peer_addr(1, b.local_addr());
        assert!(a.try_send(1, &Header::new(Kind::Eager), b"ok").unwrap());
        let mut got = 0;
        for _ in 0..2000 {
            a.poll(&mut |_, _, _| {}).unwrap();
            b.poll(&mut |_, _, _| got += 1).unwrap();
        }
        assert_eq!(got, 1);
        let idx = a.peers[1].conn.expect("connected");
        let c = a.conns[idx].as_mut().unwrap();
        (&c.sock).write_all(raw).unwrap();
        if close {
            drop(a);
        }
        for _ in 0..2000 {
            if let Err(e) = b.poll(&mut |_, _, _| panic!("no frame may pass")) {
                return e;
            }
        }
        panic!("the broken stream was not reported");
    }

    #[test]
    fn job_peer_closing_mid_frame_is_reported_naming_it() {
        let mut raw = wire::frame_prefix(&Header::new(Kind::Eager), 100).to_vec();
        raw.extend([1u8; 10]);
        let e = job_peer_sends(&raw, true);
        let pe = PeerError::find(&e).expect("a peer error");
        assert_eq!(pe.peer, 0);
        assert!(pe.reason.contains("middle of a frame"), "{pe}");
    }

    #[test]
    fn job_peer_sending_an_oversize_or_unknown_frame_is_reported() {
        let raw = wire::frame_prefix(&Header::new(Kind::Eager), 1 << 30);
        let e = job_peer_sends(&raw, false);
        assert!(
            PeerError::find(&e)
                .unwrap()
                .reason
                .contains("above the limit"),
            "{e}"
        );
        let mut raw = wire::frame_prefix(&Header::new(Kind::Eager), 0);
        raw[4] = 200;
        let e = job_peer_sends(&raw, false);
        assert!(
            PeerError::find(&e)
                .unwrap()
                .reason
                .contains("unknown frame kind"),
            "{e}"
        );
    }

    #[test]
    fn wrong_secret_is_refused_on_both_sides() {
        let mut a = TcpTransport::new(pair_cfg(0, b"right")).unwrap();
        let mut b = TcpTransport::new(pair_cfg(1, b"wrong")).unwrap();
        b.set_peer_addr(0, a.local_addr());
        assert!(b.try_send(0, &Header::new(Kind::Eager), b"hi").unwrap());
        let mut b_err = None;
        for _ in 0..2000 {
            a.poll(&mut |_, _, _| panic!("no frame may pass")).unwrap();
            if let Err(e) = b.poll(&mut |_, _, _| panic!("no frame may pass")) {
                b_err = Some(e);
                break;
            }
        }
        let e = b_err.expect("the dialer learns that the answer was not proven");
        assert_eq!(PeerError::find(&e).map(|p| p.peer), Some(0));
    }
}
