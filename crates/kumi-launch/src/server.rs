//! The control server: the job-wide end of the control channel.
//!
//! Ranks connect to an abstract Unix socket. The server trusts nothing before the
//! handshake: it sends a random challenge, then accepts exactly one frame, a
//! `Hello` whose MAC proves the job secret for the claimed job and rank. What an
//! unauthenticated peer can cost is bounded: its connection must come from our own
//! uid, it may send at most [`HANDSHAKE_BYTES`] before the proof, it must finish
//! within [`HANDSHAKE_TIMEOUT`], and at most [`MAX_PENDING`] such peers are held at
//! once: more wait in the listening socket's backlog, not accepted until one
//! of them answers or times out (so a job of thousands of ranks starts, and
//! a flood of strangers only delays it). A refused peer gets
//! `Refused{reason}` and is closed; the job goes on.
//!
//! After `Welcome`, the channel serves the key-value store, fences, abort,
//! finalize and supervision reports. A peer may answer the challenge with
//! `Monitor` instead of `Hello`: it then may only ask for snapshots of the job
//! (`kumi top`, `kumi ps`); the uid check on accept is its authentication.
//! Fences are counted per generation: when all ranks of the job have sent
//! `Fence`, every rank gets `FenceDone` and the next generation starts.
//!
//! The server does no blocking I/O and owns no clock: the event loop tells it which
//! connections are ready and what time it is, and it returns [`ControlEvent`]s.

use kumi_core::control::{self, FrameDecoder, ToLauncher, ToRank, NONCE_BYTES};
use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// Time an unauthenticated peer has to answer the challenge.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes an unauthenticated peer may send before its `Hello` is decoded. A `Hello`
/// is well under 200 bytes; this leaves room and no more.
pub const HANDSHAKE_BYTES: usize = 4096;
/// Unauthenticated connections held at once; more wait to be accepted.
pub const MAX_PENDING: usize = 64;

/// Something the event loop must act on or report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlEvent {
    /// A connection was refused (the reason is for the log).
    Refused(String),
    /// An authenticated rank's connection was dropped for breaking the protocol.
    Dropped {
        /// The rank.
        rank: u32,
        /// Why.
        reason: String,
    },
    /// A rank called abort.
    Abort {
        /// The rank.
        rank: u32,
        /// Its exit code.
        code: i32,
        /// Its message.
        message: String,
    },
    /// A rank authenticated.
    Connected {
        /// The rank.
        rank: u32,
        /// Its process id, as it said.
        pid: u32,
    },
    /// A rank's supervision report (long wait, counters).
    Report {
        /// The rank.
        rank: u32,
        /// What it said.
        report: kumi_core::deadlock::Report,
    },
    /// A monitor asks for the job's state: answer with [`ControlServer::reply`].
    SnapshotWanted(ConnId),
}

/// Identifies a connection to the event loop.
pub type ConnId = u64;

enum State {
    Challenged { nonce: Vec<u8>, deadline: Instant },
    Ready { rank: u32 },
    Monitor, // a read-only monitor (`kumi top`): may only ask for snapshots
}

/// A control connection: local ranks over the abstract Unix socket, ranks of
/// other hosts over TCP (`ControlServer::listen_tcp`). A TCP peer has no uid to
/// check, so the job-secret proof is its only way in, and it may not be a monitor.
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
        }
    }
}

struct Conn {
    stream: Stream,
    decoder: FrameDecoder,
    out: Vec<u8>,
    state: State,
}

/// The control server of one job.
pub struct ControlServer {
    listener: UnixListener,
    /// For ranks on other hosts (multi-host jobs only).
    tcp: Option<TcpListener>,
    address: String,
    job: String,
    secret: Vec<u8>,
    size: u32,
    conns: HashMap<ConnId, Conn>,
    next_id: ConnId,
    by_rank: Vec<Option<ConnId>>,
    connected: Vec<bool>,
    finalized: Vec<bool>,
    kv: HashMap<String, Vec<u8>>,
    fenced: Vec<bool>,
    fenced_count: u32,
}

impl ControlServer {
    /// Listens on the abstract socket `kumi-<uid>-<job>`.
    pub fn bind(job: &str, secret: &[u8], size: u32) -> io::Result<ControlServer> {
        let name = format!("kumi-{}-{job}", rustix::process::getuid().as_raw());
        let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
        let listener = UnixListener::bind_addr(&addr)?;
        listener.set_nonblocking(true)?;
        let n = size as usize;
        Ok(ControlServer {
            listener,
            tcp: None,
            address: format!("@{name}"),
            job: job.to_string(),
            secret: secret.to_vec(),
            size,
            conns: HashMap::new(),
            next_id: 0,
            by_rank: vec![None; n],
            connected: vec![false; n],
            finalized: vec![false; n],
            kv: HashMap::new(),
            fenced: vec![false; n],
            fenced_count: 0,
        })
    }

    /// The address ranks find in `KUMI_CONTROL` (`@` = abstract).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Whether `rank` has ever authenticated.
    pub fn connected(&self, rank: u32) -> bool {
        self.connected.get(rank as usize).copied().unwrap_or(false)
    }

    /// Whether `rank`'s channel is open now.
    pub fn open(&self, rank: u32) -> bool {
        self.by_rank.get(rank as usize).is_some_and(Option::is_some)
    }

    /// Sends `msg` to `rank` if its channel is open.
    pub fn tell(&mut self, rank: u32, msg: &ToRank) {
        self.send_rank(rank, msg);
    }

    /// Whether `rank` has sent `Finalize`.
    pub fn finalized(&self, rank: u32) -> bool {
        self.finalized.get(rank as usize).copied().unwrap_or(false)
    }

    /// The listening socket, to poll for readability.
    pub fn listener_fd(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }

    /// Every connection with whether it has output waiting (poll for writability).
    pub fn conn_fds(&self) -> impl Iterator<Item = (ConnId, BorrowedFd<'_>, bool)> {
        self.conns
            .iter()
            .map(|(id, c)| (*id, c.stream.as_fd(), !c.out.is_empty()))
    }

    /// The earliest handshake deadline, for the poll timeout.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter_map(|c| match c.state {
                State::Challenged { deadline, .. } => Some(deadline),
                State::Ready { .. } | State::Monitor => None,
            })
            .min()
    }

    /// Whether the server takes new connections now (fewer than
    /// [`MAX_PENDING`] are mid-handshake): the event loop polls the
    /// listeners only then.
    pub fn accepting(&self) -> bool {
        self.pending() < MAX_PENDING
    }

    fn pending(&self) -> usize {
        self.conns
            .values()
            .filter(|c| matches!(c.state, State::Challenged { .. }))
            .count()
    }

    /// Accepts waiting connections, while it takes any, and challenges them.
    pub fn accept(&mut self, now: Instant, events: &mut Vec<ControlEvent>) {
        while self.accepting() {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return, // WouldBlock, or a peer gone before accept
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let reason = match rustix::net::sockopt::socket_peercred(&stream) {
                Ok(cred) if cred.uid != rustix::process::getuid() => Some(format!(
                    "peer uid {} is not the job owner's",
                    cred.uid.as_raw()
                )),
                Ok(_) => None,
                Err(e) => Some(format!("cannot identify the peer: {e}")),
            };
            if let Some(reason) = reason {
                refuse_stream(stream, &reason);
                events.push(ControlEvent::Refused(reason));
                continue;
            }
            self.challenge(Stream::Unix(stream), now, events);
        }
    }

    /// Also listens on TCP at `ip` (any port), for ranks on other hosts; returns
    /// the address they find in `KUMI_CONTROL`.
    pub fn listen_tcp(&mut self, ip: std::net::IpAddr) -> io::Result<std::net::SocketAddr> {
        let l = TcpListener::bind((ip, 0))?;
        l.set_nonblocking(true)?;
        let a = l.local_addr()?;
        self.tcp = Some(l);
        Ok(a)
    }

    /// The TCP listener, if any, to poll for readability.
    pub fn tcp_listener_fd(&self) -> Option<BorrowedFd<'_>> {
        self.tcp.as_ref().map(|l| l.as_fd())
    }

    /// Accepts waiting TCP connections, while it takes any, and challenges
    /// them.
    pub fn accept_tcp(&mut self, now: Instant, events: &mut Vec<ControlEvent>) {
        while self.accepting() {
            let Some(l) = &self.tcp else { return };
            let (stream, _) = match l.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            if stream.set_nonblocking(true).is_err() || stream.set_nodelay(true).is_err() {
                continue;
            }
            self.challenge(Stream::Tcp(stream), now, events);
        }
    }

    /// Sends the challenge on a new connection and keeps it.
    fn challenge(&mut self, stream: Stream, now: Instant, events: &mut Vec<ControlEvent>) {
        {
            let mut nonce = vec![0u8; NONCE_BYTES];
            if getrandom::fill(&mut nonce).is_err() {
                refuse_stream(stream, "no randomness for a challenge");
                events.push(ControlEvent::Refused(
                    "no randomness for a challenge".into(),
                ));
                return;
            }
            let id = self.next_id;
            self.next_id += 1;
            let mut conn = Conn {
                stream,
                decoder: FrameDecoder::new(),
                out: control::encode(&ToRank::Challenge {
                    nonce: nonce.clone(),
                }),
                state: State::Challenged {
                    nonce,
                    deadline: now + HANDSHAKE_TIMEOUT,
                },
            };
            if flush(&mut conn).is_ok() {
                self.conns.insert(id, conn);
            }
        }
    }

    /// Refuses connections whose handshake deadline has passed.
    pub fn expire(&mut self, now: Instant, events: &mut Vec<ControlEvent>) {
        let late: Vec<ConnId> = self
            .conns
            .iter()
            .filter(
                |(_, c)| matches!(c.state, State::Challenged { deadline, .. } if deadline <= now),
            )
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            let reason = format!(
                "no answer to the challenge within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            );
            self.refuse(id, reason, events);
        }
    }

    /// Services a connection the event loop found ready.
    pub fn ready(
        &mut self,
        id: ConnId,
        readable: bool,
        writable: bool,
        events: &mut Vec<ControlEvent>,
    ) {
        if writable {
            if let Some(conn) = self.conns.get_mut(&id) {
                if flush(conn).is_err() {
                    self.close(id);
                    return;
                }
            }
        }
        if !readable {
            return;
        }
        let mut buf = [0u8; 16 * 1024];
        // Read what is there now, bounded per call so one chatty rank cannot starve
        // the others.
        for _ in 0..16 {
            let Some(conn) = self.conns.get_mut(&id) else {
                return;
            };
            match conn.stream.read(&mut buf) {
                Ok(0) => {
                    self.close(id);
                    return;
                }
                Ok(n) => conn.decoder.push(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.close(id);
                    return;
                }
            }
            if !self.process(id, events) {
                return;
            }
        }
    }

    /// Reads everything `rank` sent before it ended. Called when the rank's process
    /// has been reaped, so its end of the socket is closed and reading reaches end
    /// of file (bounded anyway, in case a descendant still holds the socket).
    pub fn settle(&mut self, rank: u32, events: &mut Vec<ControlEvent>) {
        for _ in 0..64 {
            match self.by_rank.get(rank as usize).copied().flatten() {
                Some(id) => self.ready(id, true, false, events),
                None => return,
            }
        }
    }

    /// Decodes and handles buffered frames; false if the connection is gone.
    fn process(&mut self, id: ConnId, events: &mut Vec<ControlEvent>) -> bool {
        loop {
            let Some(conn) = self.conns.get_mut(&id) else {
                return false;
            };
            match conn.state {
                State::Challenged { .. } => {
                    if conn.decoder.pending() > HANDSHAKE_BYTES {
                        self.refuse(
                            id,
                            format!("more than {HANDSHAKE_BYTES} bytes before the proof"),
                            events,
                        );
                        return false;
                    }
                    match conn.decoder.next_frame::<ToLauncher>() {
                        Ok(None) => return true,
                        Ok(Some(msg)) => {
                            if !self.handshake(id, msg, events) {
                                return false;
                            }
                        }
                        Err(e) => {
                            self.refuse(id, e.to_string(), events);
                            return false;
                        }
                    }
                }
                State::Monitor => match conn.decoder.next_frame::<ToLauncher>() {
                    Ok(None) => return true,
                    Ok(Some(ToLauncher::Snapshot)) => events.push(ControlEvent::SnapshotWanted(id)),
                    Ok(Some(_)) | Err(_) => {
                        self.close(id);
                        return false;
                    }
                },
                State::Ready { rank } => match conn.decoder.next_frame::<ToLauncher>() {
                    Ok(None) => return true,
                    Ok(Some(msg)) => self.handle(rank, msg, events),
                    Err(e) => {
                        self.close(id);
                        events.push(ControlEvent::Dropped {
                            rank,
                            reason: e.to_string(),
                        });
                        return false;
                    }
                },
            }
        }
    }

    /// Checks the answer to the challenge; false if the connection was refused.
    fn handshake(&mut self, id: ConnId, msg: ToLauncher, events: &mut Vec<ControlEvent>) -> bool {
        let Some(conn) = self.conns.get(&id) else {
            return false;
        };
        let State::Challenged { nonce, .. } = &conn.state else {
            return false;
        };
        if msg == ToLauncher::Monitor && !matches!(conn.stream, Stream::Tcp(_)) {
            // The peer's uid was checked on accept; a monitor only reads.
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.state = State::Monitor;
            }
            return true;
        }
        let refusal = match &msg {
            ToLauncher::Hello { job, rank, mac, .. } => {
                if *job != self.job {
                    Some(format!("wrong job id {:?}", crate::policy::one_line(job)))
                } else if *rank >= self.size {
                    Some(format!(
                        "rank {rank} is not below the job size {}",
                        self.size
                    ))
                } else if !control::verify(&self.secret, nonce, job, *rank, mac) {
                    Some(format!("bad proof of the job secret for rank {rank}"))
                } else if self.by_rank[*rank as usize].is_some() {
                    Some(format!("rank {rank} is already connected"))
                } else {
                    None
                }
            }
            _ => Some("the first frame was not Hello".to_string()),
        };
        if let Some(reason) = refusal {
            self.refuse(id, reason, events);
            return false;
        }
        let ToLauncher::Hello { rank, pid, .. } = msg else {
            return false;
        };
        events.push(ControlEvent::Connected { rank, pid });
        self.by_rank[rank as usize] = Some(id);
        self.connected[rank as usize] = true;
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.state = State::Ready { rank };
        }
        self.send(id, &ToRank::Welcome);
        true
    }

    fn handle(&mut self, rank: u32, msg: ToLauncher, events: &mut Vec<ControlEvent>) {
        match msg {
            ToLauncher::Hello { .. } => {
                if let Some(id) = self.by_rank[rank as usize] {
                    self.close(id);
                }
                events.push(ControlEvent::Dropped {
                    rank,
                    reason: "a second Hello on an open channel".into(),
                });
            }
            ToLauncher::Put { key, value } => {
                self.kv.insert(key, value);
            }
            ToLauncher::Get { key } => {
                let value = self.kv.get(&key).cloned();
                self.send_rank(rank, &ToRank::Value { key, value });
            }
            ToLauncher::Fence => {
                let r = rank as usize;
                if !self.fenced[r] {
                    self.fenced[r] = true;
                    self.fenced_count += 1;
                }
                if self.fenced_count == self.size {
                    self.fenced.iter_mut().for_each(|f| *f = false);
                    self.fenced_count = 0;
                    for r in 0..self.size {
                        self.send_rank(r, &ToRank::FenceDone);
                    }
                }
            }
            ToLauncher::Abort { code, message } => events.push(ControlEvent::Abort {
                rank,
                code,
                message,
            }),
            ToLauncher::Finalize => self.finalized[rank as usize] = true,
            ToLauncher::Report(report) => events.push(ControlEvent::Report { rank, report }),
            ToLauncher::Monitor | ToLauncher::Snapshot => {
                if let Some(id) = self.by_rank[rank as usize] {
                    self.close(id);
                }
                events.push(ControlEvent::Dropped {
                    rank,
                    reason: "a monitor request on a rank's channel".into(),
                });
            }
        }
    }

    /// Sends a frame on a connection (the answer to a monitor's request).
    pub fn reply(&mut self, id: ConnId, msg: &ToRank) {
        self.send(id, msg);
    }

    fn send_rank(&mut self, rank: u32, msg: &ToRank) {
        if let Some(id) = self.by_rank.get(rank as usize).copied().flatten() {
            self.send(id, msg);
        }
    }

    fn send(&mut self, id: ConnId, msg: &ToRank) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.out.extend_from_slice(&control::encode(msg));
        if flush(conn).is_err() {
            self.close(id);
        }
    }

    fn refuse(&mut self, id: ConnId, reason: String, events: &mut Vec<ControlEvent>) {
        if let Some(conn) = self.conns.remove(&id) {
            refuse_stream(conn.stream, &reason);
        }
        events.push(ControlEvent::Refused(reason));
    }

    fn close(&mut self, id: ConnId) {
        if let Some(conn) = self.conns.remove(&id) {
            if let State::Ready { rank } = conn.state {
                self.by_rank[rank as usize] = None;
            }
        }
    }
}

/// Best effort: tell the peer why, then close. The socket is nonblocking and the
/// frame small; if it does not fit, the peer learns from the close alone.
fn refuse_stream(mut stream: impl Write, reason: &str) {
    let _ = stream.write_all(&control::encode(&ToRank::Refused {
        reason: reason.to_string(),
    }));
}

/// Writes queued output without blocking. Err: the peer is gone.
fn flush(conn: &mut Conn) -> io::Result<()> {
    while !conn.out.is_empty() {
        match conn.stream.write(&conn.out) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                conn.out.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
