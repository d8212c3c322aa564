//! The reliable-UDP transport: frames between ranks on different hosts over
//! datagrams, with `kumi_core::rudp` doing sequencing, acknowledgements,
//! retransmission and credits (GAMMA's lesson: the kernel's TCP path is the
//! latency floor; a datagram path below it is not, as long as flow control is
//! kept).
//!
//! One nonblocking UDP socket per rank: one `recvfrom` looks at every peer,
//! and [`Transport::sleep`] is an epoll wait on it. Peers' addresses come from
//! their address cards ([`UdpTransport::set_peer_addr`]); a datagram is only
//! looked at if it comes from the address the rank it names published.
//!
//! # Decisions
//!
//! * **Nothing before the proof.** A pair's session starts with the TCP
//!   transport's challenge-response over datagrams ([`wire`]): HELLO,
//!   CHALLENGE, PROOF, each a fixed 112 bytes, each resent on a timer until
//!   answered. Until a peer has proven the job secret, the rank keeps a fixed
//!   handful of bytes for it and nothing else. After the handshake every data
//!   datagram carries a session token derived from the secret and both nonces,
//!   so datagrams from anyone without the secret are dropped before they reach
//!   the session. A refused greeting, proof or datagram costs one logged line
//!   (`kumi: rank R: refused a datagram from ADDR: reason`), up to
//!   [`MAX_REFUSAL_LINES`] lines; the rank runs on.
//! * **Simultaneous dials.** As over TCP, the lower rank's dial wins: the higher
//!   rank answers the lower one's HELLO and abandons its own. Frames wait in the
//!   peer's session (sequence numbers are not spent before the handshake), so
//!   whichever dial wins carries them.
//! * **Acceptance.** `try_send` queues the frame in the peer's session (one
//!   copy) and sends what the peer's credit allows at once; a session holding
//!   more than its send buffer refuses new frames (`Ok(false)`).
//! * **Datagram size.** Frames are cut into datagrams of
//!   [`UdpConfig::segment`] bytes, the MTU by default, and consecutive full
//!   datagrams to one peer leave in one `sendmsg` with segmentation offload and
//!   arrive through one `recvmsg` with receive offload (`gso`). The window is
//!   what the socket's receive buffer holds, shared among the network peers.
//!   With fault injection on, every datagram is sent on its own so that each
//!   can be dropped, duplicated or held back.
//! * **Failures.** A peer that breaks the protocol after proving the secret,
//!   or acknowledges nothing for [`UdpConfig::dead_after`], is reported by
//!   `poll`/`try_send` as an [`io::Error`] wrapping a [`PeerError`], like TCP.
//! * **Ending.** UDP has no close: dropping the transport keeps answering for
//!   up to [`LINGER`] until every frame it sent has been acknowledged, so the
//!   last frames of a job are not lost with the process.

pub mod faults;
mod gso;
pub mod wire;

use crate::tcp::PeerError;
use crate::{Sink, Transport};
use faults::{Fate, FaultSpec, Faults};
use kumi_core::header::{Header, HEADER_BYTES};
use kumi_core::rudp::{self, Session};
use rustix::event::epoll;
use std::fmt;
use std::io::{self, IoSlice};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};
use wire::{Binding, Handshake, Prefix, Type, DATA_PREFIX, HANDSHAKE_BYTES, NONCE, PREFIX};

/// Default largest payload of one frame: TCP's, so the engine's rendezvous
/// chunks are the same size on both.
pub const DEFAULT_MAX_PAYLOAD: usize = crate::tcp::DEFAULT_MAX_PAYLOAD;
/// Default bytes per datagram on the wire (`KUMI_UDP_SEGMENT`): what fits an
/// Ethernet MTU of 1500 without IP fragmentation. See `gso` for why MTU-sized
/// datagrams sent 44 per system call beat larger, fragmented ones.
pub const DEFAULT_SEGMENT: usize = 1472;
/// Default [`UdpConfig::max_window`] (`KUMI_UDP_WINDOW`).
pub const DEFAULT_WINDOW: u64 = 512;
/// Most datagrams in one segmented send (the kernel allows 64; the UDP length
/// field bounds the whole send to 64 KiB).
const MAX_BATCH: usize = 44;
/// Largest UDP payload over IPv4.
pub const MAX_UDP: usize = 65_507;
/// Receive and send buffer asked of the kernel (forced when privileged).
pub const SOCKET_BUFFER: usize = 8 << 20;
/// First interval between resent handshake datagrams (doubles up to 200 ms).
const HANDSHAKE_RETRY: Duration = Duration::from_millis(5);
/// Longest the transport keeps answering when dropped.
pub const LINGER: Duration = Duration::from_secs(2);
/// Refusals logged in full; later ones are counted only.
pub const MAX_REFUSAL_LINES: u64 = 64;

/// How a UDP transport is set up.
#[derive(Clone)]
pub struct UdpConfig {
    /// Rank, job, address and frame limit.
    pub id: crate::NetIdentity,
    /// Most datagrams in flight to one peer (less if the socket's receive
    /// buffer holds less).
    pub max_window: u64,
    /// Bytes per datagram on the wire, headers included (at most [`MAX_UDP`]).
    /// Frames are cut to fit; above the path MTU the kernel fragments them.
    pub segment: usize,
    /// Peers reached over the network (the window is shared among them).
    pub net_peers: u32,
    /// Look at the socket on one poll in this many while idle (see
    /// `TcpConfig::poll_every`).
    pub poll_every: u32,
    /// A peer that acknowledges nothing, or does not complete the handshake,
    /// this long has failed.
    pub dead_after: Duration,
    /// Faults to inject on outgoing datagrams (tests).
    pub faults: Option<FaultSpec>,
    /// Print the sessions' counters when the transport is dropped
    /// (`KUMI_UDP_STATS`).
    pub stats: bool,
}

impl fmt::Debug for UdpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpConfig")
            .field("id", &self.id)
            .field("segment", &self.segment)
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

/// Where a pair's handshake stands.
#[derive(Clone, Copy)]
enum Hs {
    Idle,
    /// We sent HELLO and wait for the CHALLENGE.
    Dialing {
        nonce_c: [u8; NONCE],
        since: Instant,
        next: Instant,
        tries: u32,
    },
    /// We answered its HELLO and wait for its PROOF (or a datagram with the
    /// token, which proves as much).
    Accepting {
        nonce_c: [u8; NONCE],
        nonce_a: [u8; NONCE],
        token: u64,
    },
    /// We sent the PROOF; the session is usable. Until the peer shows it has
    /// the proof (any datagram with the token), it is resent on a timer.
    Confirming {
        nonce_c: [u8; NONCE],
        nonce_a: [u8; NONCE],
        token: u64,
        next: Instant,
        tries: u32,
        since: Instant,
    },
    Open {
        nonce_c: [u8; NONCE],
        token: u64,
    },
}

struct Peer {
    addr: Option<SocketAddr>,
    hs: Hs,
    session: Option<Session>,
    /// Listed in `UdpTransport::live`.
    live: bool,
}

/// The UDP transport of one rank.
pub struct UdpTransport {
    cfg: UdpConfig,
    sock: UdpSocket,
    local: SocketAddr,
    epoll: OwnedFd,
    events: Vec<epoll::Event>,
    rcfg: rudp::Config,
    peers: Vec<Peer>,
    /// Peers with a session or a handshake under way.
    live: Vec<u32>,
    /// Earliest time a session or handshake needs the clock.
    next_timer: Option<Instant>,
    buf: Vec<u8>,
    head: Vec<u8>,
    faults: Option<Faults>,
    /// Datagrams the socket refused (EAGAIN), sent before anything else, with
    /// their segment size (0: one datagram).
    stalled: Option<(SocketAddr, Vec<u8>, u16)>,
    /// Segmentation offload works (cleared at the first refusal).
    gso: bool,
    /// Datagrams being gathered for one segmented send.
    batch: Vec<u8>,
    refusals: u64,
    failed: Option<PeerError>,
    idle_polls: u32,
    busy: bool,
}

// SAFETY: as for `TcpTransport`: the epoll event records carry only integer
// tokens, never dereferenced; everything else is owned sockets and plain data.
unsafe impl Send for UdpTransport {}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Sends one datagram made of `parts`, through the fault layer if any.
/// `Ok(false)`: the socket is full; the datagram was kept in `stalled`.
fn send_datagram(
    sock: &UdpSocket,
    faults: &mut Option<Faults>,
    stalled: &mut Option<(SocketAddr, Vec<u8>, u16)>,
    addr: SocketAddr,
    parts: &[&[u8]],
    now: Instant,
) -> io::Result<bool> {
    let times = match faults.as_mut().map(|f| f.decide(now)) {
        None => 1,
        Some(Fate::Send(n)) => n,
        Some(Fate::Hold(until)) => {
            let f = faults.as_mut().expect("faults are on");
            f.held.push((until, addr, parts.concat()));
            return Ok(true);
        }
    };
    for _ in 0..times {
        if !send_raw(sock, addr, parts)? {
            *stalled = Some((addr, parts.concat(), 0));
            return Ok(false);
        }
    }
    Ok(true)
}

/// `Ok(false)` if the socket's buffer is full.
fn send_raw(sock: &UdpSocket, addr: SocketAddr, parts: &[&[u8]]) -> io::Result<bool> {
    let iov: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    loop {
        match rustix::net::sendmsg_addr(
            sock,
            &addr,
            &iov,
            &mut rustix::net::SendAncillaryBuffer::default(),
            rustix::net::SendFlags::empty(),
        ) {
            Ok(_) => return Ok(true),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => return Ok(false),
            // The peer's port is closed (ICMP): a retransmission will tell
            // whether it is gone for good; the session's timers decide.
            Err(rustix::io::Errno::CONNREFUSED) => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Sends the `count` datagrams gathered in `batch` (all of `segment` bytes
/// but the last) in one call if the kernel segments, else one by one; clears
/// `batch`. `Ok(false)`: the socket is full; the rest is kept in `stalled`.
fn send_batch(
    sock: &UdpSocket,
    gso: &mut bool,
    stalled: &mut Option<(SocketAddr, Vec<u8>, u16)>,
    addr: SocketAddr,
    batch: &mut Vec<u8>,
    count: usize,
    segment: usize,
) -> io::Result<bool> {
    if count > 1 && *gso {
        match gso::send_segments(sock, addr, batch, segment as u16) {
            Ok(true) => {
                batch.clear();
                return Ok(true);
            }
            Ok(false) => {
                *stalled = Some((addr, std::mem::take(batch), segment as u16));
                return Ok(false);
            }
            // The kernel or the device does not segment: one by one from now on.
            Err(_) => *gso = false,
        }
    }
    let mut off = 0;
    while off < batch.len() {
        let end = (off + segment).min(batch.len());
        if !send_raw(sock, addr, &[&batch[off..end]])? {
            *stalled = Some((addr, batch[off..].to_vec(), segment as u16));
            batch.clear();
            return Ok(false);
        }
        off = end;
    }
    batch.clear();
    Ok(true)
}

impl UdpTransport {
    /// Binds `cfg.id.bind` (any port). Peers' addresses come later through
    /// [`UdpTransport::set_peer_addr`], before the first send to them.
    pub fn new(cfg: UdpConfig) -> io::Result<UdpTransport> {
        let sock = UdpSocket::bind((cfg.id.bind, 0))?;
        sock.set_nonblocking(true)?;
        {
            use rustix::net::sockopt as so;
            if so::set_socket_recv_buffer_size_force(&sock, SOCKET_BUFFER).is_err() {
                let _ = so::set_socket_recv_buffer_size(&sock, SOCKET_BUFFER);
            }
            if so::set_socket_send_buffer_size_force(&sock, SOCKET_BUFFER).is_err() {
                let _ = so::set_socket_send_buffer_size(&sock, SOCKET_BUFFER);
            }
        }
        // The kernel reports twice what it accounts for data, and a datagram
        // costs up to about twice its size in buffers (headers, fragments).
        let rcvbuf = rustix::net::sockopt::socket_recv_buffer_size(&sock).unwrap_or(200_000);
        let segment = cfg
            .segment
            .clamp(DATA_PREFIX + rudp::DATA_HEADER + 64, MAX_UDP);
        let datagram = segment - DATA_PREFIX - rudp::DATA_HEADER;
        let per = segment as u64 * 2;
        let window = (rcvbuf as u64 / 2 / per / u64::from(cfg.net_peers.max(1))).clamp(
            rudp::INITIAL_CREDIT,
            cfg.max_window.max(rudp::INITIAL_CREDIT),
        );
        let rcfg = rudp::Config {
            max_datagram: datagram,
            window,
            max_frame: cfg.id.max_payload + HEADER_BYTES,
            send_buffer: (window as usize * datagram).max(2 * (cfg.id.max_payload + HEADER_BYTES)),
            dead_after: cfg.dead_after,
            ack_every: (window / 4).clamp(1, 32) as u32,
            ..rudp::Config::default()
        };
        let local = sock.local_addr()?;
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &ep,
            &sock,
            epoll::EventData::new_u64(0),
            epoll::EventFlags::IN,
        )?;
        let n = cfg.id.size as usize;
        let faults = cfg.faults.clone().map(|f| Faults::new(f, cfg.id.rank));
        let gso = gso::enable_gro(&sock) && segment < MAX_UDP / 2;
        let mut cfg = cfg;
        cfg.segment = segment;
        Ok(UdpTransport {
            cfg,
            sock,
            local,
            epoll: ep,
            events: Vec::with_capacity(4),
            rcfg,
            peers: (0..n)
                .map(|_| Peer {
                    addr: None,
                    hs: Hs::Idle,
                    session: None,
                    live: false,
                })
                .collect(),
            live: Vec::new(),
            next_timer: None,
            buf: vec![0u8; MAX_UDP + 1],
            head: Vec::with_capacity(128),
            faults,
            stalled: None,
            gso,
            batch: Vec::with_capacity(MAX_UDP),
            refusals: 0,
            failed: None,
            idle_polls: 0,
            busy: false,
        })
    }

    /// The address this rank receives datagrams on (its address card).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Records where `peer` receives.
    pub fn set_peer_addr(&mut self, peer: u32, addr: SocketAddr) {
        if let Some(p) = self.peers.get_mut(peer as usize) {
            p.addr = Some(addr);
        }
    }

    /// The session settings in use (window, datagram size).
    pub fn session_config(&self) -> &rudp::Config {
        &self.rcfg
    }

    /// Datagrams and greetings refused so far.
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    /// Data datagrams sent again so far, over all peers.
    pub fn retransmits(&self) -> u64 {
        self.peers
            .iter()
            .filter_map(|p| p.session.as_ref())
            .map(|s| s.stats().retransmits)
            .sum()
    }

    fn refuse(&mut self, from: SocketAddr, reason: &str) {
        self.refusals += 1;
        if self.refusals <= MAX_REFUSAL_LINES {
            eprintln!(
                "kumi: rank {}: refused a datagram from {from}: {reason}",
                self.cfg.id.rank
            );
        } else if self.refusals == MAX_REFUSAL_LINES + 1 {
            eprintln!(
                "kumi: rank {}: more than {MAX_REFUSAL_LINES} datagrams refused; no longer logging each",
                self.cfg.id.rank
            );
        }
    }

    fn fail(&mut self, peer: u32, reason: String) {
        if self.failed.is_none() {
            self.failed = Some(PeerError { peer, reason });
        }
    }

    fn make_live(&mut self, peer: u32) {
        let p = &mut self.peers[peer as usize];
        if !p.live {
            p.live = true;
            self.live.push(peer);
        }
    }

    fn binding<'a>(
        &'a self,
        from: u32,
        to: u32,
        nc: &'a [u8; NONCE],
        na: &'a [u8; NONCE],
    ) -> Binding<'a> {
        Binding {
            secret: &self.cfg.id.secret,
            job: &self.cfg.id.job,
            from,
            to,
            nonce_c: nc,
            nonce_a: na,
        }
    }

    fn send_handshake(
        &mut self,
        ty: Type,
        peer: u32,
        h: &Handshake,
        now: Instant,
    ) -> io::Result<()> {
        let Some(addr) = self.peers[peer as usize].addr else {
            return Ok(());
        };
        let d = h.encode(Prefix {
            ty,
            from: self.cfg.id.rank,
            to: peer,
        });
        send_datagram(
            &self.sock,
            &mut self.faults,
            &mut self.stalled,
            addr,
            &[&d],
            now,
        )?;
        Ok(())
    }

    fn dial(&mut self, peer: u32, now: Instant) -> io::Result<()> {
        if self.peers[peer as usize].addr.is_none() {
            return Err(io::Error::other(PeerError {
                peer,
                reason: "its address is unknown (no address card)".into(),
            }));
        }
        let nonce_c = crate::random_bytes::<NONCE>()?;
        self.peers[peer as usize].hs = Hs::Dialing {
            nonce_c,
            since: now,
            next: now + HANDSHAKE_RETRY,
            tries: 1,
        };
        self.make_live(peer);
        self.next_timer = earliest(self.next_timer, Some(now + HANDSHAKE_RETRY));
        let h = Handshake {
            nonce_c,
            nonce_a: [0; NONCE],
            mac: [0; NONCE],
        };
        self.send_handshake(Type::Hello, peer, &h, now)
    }

    fn session(&mut self, peer: u32) -> &mut Session {
        let rcfg = &self.rcfg;
        self.peers[peer as usize]
            .session
            .get_or_insert_with(|| Session::new(rcfg.clone()))
    }

    /// Sends what `peer`'s session has to send.
    fn flush(&mut self, peer: u32, now: Instant) -> io::Result<()> {
        if self.stalled.is_some() && !self.unstall()? {
            return Ok(());
        }
        let me = self.cfg.id.rank;
        let p = &mut self.peers[peer as usize];
        let token = match p.hs {
            Hs::Open { token, .. } | Hs::Confirming { token, .. } => token,
            _ => return Ok(()),
        };
        let (Some(addr), Some(s)) = (p.addr, p.session.as_mut()) else {
            return Ok(());
        };
        let batching = self.gso && self.faults.is_none();
        let segment = self.cfg.segment;
        let mut count = 0;
        self.batch.clear();
        loop {
            self.head.clear();
            Prefix {
                ty: Type::Data,
                from: me,
                to: peer,
            }
            .write(&mut self.head);
            self.head.extend_from_slice(&token.to_le_bytes());
            let Some(body) = s.poll_transmit(now, &mut self.head) else {
                break;
            };
            if !batching {
                if !send_datagram(
                    &self.sock,
                    &mut self.faults,
                    &mut self.stalled,
                    addr,
                    &[&self.head, body],
                    now,
                )? {
                    break;
                }
                continue;
            }
            let full = self.head.len() + body.len() == segment;
            self.batch.extend_from_slice(&self.head);
            self.batch.extend_from_slice(body);
            count += 1;
            if full && count < MAX_BATCH {
                continue;
            }
            let sent = send_batch(
                &self.sock,
                &mut self.gso,
                &mut self.stalled,
                addr,
                &mut self.batch,
                count,
                segment,
            )?;
            count = 0;
            if !sent {
                break;
            }
        }
        if count > 0 {
            send_batch(
                &self.sock,
                &mut self.gso,
                &mut self.stalled,
                addr,
                &mut self.batch,
                count,
                segment,
            )?;
        }
        self.next_timer = earliest(self.next_timer, s.poll_timeout());
        Ok(())
    }

    /// Sends the stalled datagram if the socket takes it now.
    fn unstall(&mut self) -> io::Result<bool> {
        let Some((addr, d, seg)) = self.stalled.take() else {
            return Ok(true);
        };
        let sent = if seg == 0 {
            send_raw(&self.sock, addr, &[&d])?
        } else {
            gso::send_segments(&self.sock, addr, &d, seg)?
        };
        if !sent {
            self.stalled = Some((addr, d, seg));
        }
        Ok(sent)
    }

    /// Runs timers that are due: handshake resends, session timers, held
    /// (fault-injected) datagrams.
    fn timers(&mut self, now: Instant) -> io::Result<()> {
        if let Some(f) = &mut self.faults {
            let mut i = 0;
            while i < f.held.len() {
                if f.held[i].0 <= now {
                    let (_, addr, d) = f.held.swap_remove(i);
                    let _ = send_raw(&self.sock, addr, &[&d])?;
                } else {
                    i += 1;
                }
            }
        }
        if self.next_timer.is_none_or(|t| t > now) {
            return Ok(());
        }
        self.next_timer = None;
        for i in 0..self.live.len() {
            let peer = self.live[i];
            let p = &mut self.peers[peer as usize];
            match p.hs {
                Hs::Dialing {
                    nonce_c,
                    since,
                    next,
                    tries,
                } => {
                    if now.saturating_duration_since(since) >= self.cfg.dead_after {
                        self.fail(
                            peer,
                            format!(
                                "it did not answer the handshake within {:.1} s",
                                self.cfg.dead_after.as_secs_f64()
                            ),
                        );
                        continue;
                    }
                    if next <= now {
                        let next = now
                            + (HANDSHAKE_RETRY * 2u32.pow(tries.min(6)))
                                .min(Duration::from_millis(200));
                        p.hs = Hs::Dialing {
                            nonce_c,
                            since,
                            next,
                            tries: tries + 1,
                        };
                        let h = Handshake {
                            nonce_c,
                            nonce_a: [0; NONCE],
                            mac: [0; NONCE],
                        };
                        self.send_handshake(Type::Hello, peer, &h, now)?;
                        self.next_timer = earliest(self.next_timer, Some(next));
                    } else {
                        self.next_timer = earliest(self.next_timer, Some(next));
                    }
                }
                Hs::Confirming {
                    nonce_c,
                    nonce_a,
                    token,
                    next,
                    tries,
                    since,
                } => {
                    if now.saturating_duration_since(since) >= self.cfg.dead_after {
                        self.fail(
                            peer,
                            format!(
                                "it did not confirm the handshake within {:.1} s",
                                self.cfg.dead_after.as_secs_f64()
                            ),
                        );
                        continue;
                    }
                    let mut next = next;
                    if next <= now {
                        next = now
                            + (HANDSHAKE_RETRY * 2u32.pow(tries.min(6)))
                                .min(Duration::from_millis(200));
                        p.hs = Hs::Confirming {
                            nonce_c,
                            nonce_a,
                            token,
                            next,
                            tries: tries + 1,
                            since,
                        };
                        let mac = self
                            .binding(self.cfg.id.rank, peer, &nonce_c, &nonce_a)
                            .udp_connect_mac();
                        let h = Handshake {
                            nonce_c,
                            nonce_a,
                            mac,
                        };
                        self.send_handshake(Type::Proof, peer, &h, now)?;
                    }
                    self.next_timer = earliest(self.next_timer, Some(next));
                }
                _ => {}
            }
            let p = &mut self.peers[peer as usize];
            if let Some(s) = p.session.as_mut() {
                if s.poll_timeout().is_some_and(|t| t <= now) {
                    if let Err(e) = s.handle_timeout(now) {
                        self.fail(peer, e.to_string());
                        continue;
                    }
                    self.flush(peer, now)?;
                }
                let t = self.peers[peer as usize]
                    .session
                    .as_ref()
                    .and_then(Session::poll_timeout);
                self.next_timer = earliest(self.next_timer, t);
            }
        }
        Ok(())
    }

    /// Handles one datagram from `from`; returns frames delivered.
    fn on_datagram(
        &mut self,
        from: SocketAddr,
        off: usize,
        len: usize,
        now: Instant,
        sink: &mut Sink<'_>,
    ) -> io::Result<usize> {
        let me = self.cfg.id.rank;
        if len > MAX_UDP {
            self.refuse(from, "a datagram larger than UDP allows");
            return Ok(0);
        }
        let Some(pre) = Prefix::read(&self.buf[off..off + len]) else {
            self.refuse(from, "not kumi's datagram protocol");
            return Ok(0);
        };
        if pre.to != me {
            self.refuse(
                from,
                &format!("it is addressed to rank {}, this is rank {me}", pre.to),
            );
            return Ok(0);
        }
        let peer = pre.from;
        if peer >= self.cfg.id.size || peer == me {
            self.refuse(
                from,
                &format!(
                    "it claims to be rank {peer}, not a peer in this job of {} ranks",
                    self.cfg.id.size
                ),
            );
            return Ok(0);
        }
        match self.peers[peer as usize].addr {
            Some(a) if a == from => {}
            // Not learned yet: ranks learn their peers' addresses just after
            // the fence that publishes them, so a fast peer's first greeting
            // can come first. Its dial resends it; drop this one quietly.
            None => return Ok(0),
            Some(_) => {
                self.refuse(
                    from,
                    &format!("it claims to be rank {peer}, which publishes another address"),
                );
                return Ok(0);
            }
        }
        if pre.ty == Type::Data {
            return self.on_data(peer, from, off, len, now, sink);
        }
        let Some(h) = Handshake::decode(&self.buf[off..off + len]) else {
            self.refuse(from, &format!("a handshake datagram of {len} bytes, not {HANDSHAKE_BYTES} (claimed rank {peer})"));
            return Ok(0);
        };
        match pre.ty {
            Type::Hello => self.on_hello(peer, &h, now)?,
            Type::Challenge => self.on_challenge(peer, from, &h, now)?,
            Type::Proof => self.on_proof(peer, from, &h, now)?,
            Type::Data => {}
        }
        Ok(0)
    }

    fn on_hello(&mut self, peer: u32, h: &Handshake, now: Instant) -> io::Result<()> {
        let me = self.cfg.id.rank;
        let nonce_a = match self.peers[peer as usize].hs {
            // Our own dial wins; it will answer that.
            Hs::Dialing { .. } if me < peer => return Ok(()),
            // A resent HELLO: answer the same.
            Hs::Accepting {
                nonce_c, nonce_a, ..
            } if nonce_c == h.nonce_c => nonce_a,
            // A late copy of our greeting's answer, or of the peer's own
            // dial that lost the race: it comes from the peer's address, and
            // the session already runs.
            Hs::Open { .. } | Hs::Confirming { .. } => return Ok(()),
            _ => crate::random_bytes::<NONCE>()?,
        };
        let b = self.binding(peer, me, &h.nonce_c, &nonce_a);
        let (mac, token) = (b.udp_accept_mac(), b.udp_token());
        self.peers[peer as usize].hs = Hs::Accepting {
            nonce_c: h.nonce_c,
            nonce_a,
            token,
        };
        self.make_live(peer);
        let ans = Handshake {
            nonce_c: h.nonce_c,
            nonce_a,
            mac,
        };
        self.send_handshake(Type::Challenge, peer, &ans, now)
    }

    fn on_challenge(
        &mut self,
        peer: u32,
        from: SocketAddr,
        h: &Handshake,
        now: Instant,
    ) -> io::Result<()> {
        let me = self.cfg.id.rank;
        match self.peers[peer as usize].hs {
            Hs::Dialing { nonce_c, .. } if nonce_c == h.nonce_c => {}
            // A duplicate of the answer we acted on: the timer resends the proof.
            Hs::Confirming { nonce_c, .. } | Hs::Open { nonce_c, .. } if nonce_c == h.nonce_c => {
                return Ok(())
            }
            _ => {
                self.refuse(
                    from,
                    &format!(
                        "an answer to a greeting this rank did not send (claimed rank {peer})"
                    ),
                );
                return Ok(());
            }
        }
        let b = self.binding(me, peer, &h.nonce_c, &h.nonce_a);
        if !b.udp_verify_accept(&h.mac) {
            self.refuse(
                from,
                &format!("an answer without proof of the job secret (claimed rank {peer})"),
            );
            return Ok(());
        }
        let (mac, token) = (b.udp_connect_mac(), b.udp_token());
        let next = now + HANDSHAKE_RETRY;
        let since = match self.peers[peer as usize].hs {
            Hs::Dialing { since, .. } => since,
            _ => now,
        };
        self.peers[peer as usize].hs = Hs::Confirming {
            nonce_c: h.nonce_c,
            nonce_a: h.nonce_a,
            token,
            next,
            tries: 1,
            since,
        };
        self.next_timer = earliest(self.next_timer, Some(next));
        let proof = Handshake {
            nonce_c: h.nonce_c,
            nonce_a: h.nonce_a,
            mac,
        };
        self.send_handshake(Type::Proof, peer, &proof, now)?;
        self.session(peer);
        self.flush(peer, now)
    }

    fn on_proof(
        &mut self,
        peer: u32,
        from: SocketAddr,
        h: &Handshake,
        now: Instant,
    ) -> io::Result<()> {
        let me = self.cfg.id.rank;
        match self.peers[peer as usize].hs {
            Hs::Accepting {
                nonce_c, nonce_a, ..
            } if nonce_c == h.nonce_c && nonce_a == h.nonce_a => {}
            Hs::Open { nonce_c, .. } if nonce_c == h.nonce_c => {
                // Our confirmation was lost: confirm again.
                self.session(peer).ack_soon();
                return self.flush(peer, now);
            }
            _ => {
                self.refuse(
                    from,
                    &format!(
                        "a proof for a greeting this rank did not answer (claimed rank {peer})"
                    ),
                );
                return Ok(());
            }
        }
        let b = self.binding(peer, me, &h.nonce_c, &h.nonce_a);
        if !b.udp_verify_connect(&h.mac) {
            self.refuse(
                from,
                &format!("wrong proof of the job secret (claimed rank {peer})"),
            );
            return Ok(());
        }
        self.open(peer, h.nonce_c, b.udp_token(), now)
    }

    /// The peer has proven the secret to us as acceptor.
    fn open(
        &mut self,
        peer: u32,
        nonce_c: [u8; NONCE],
        token: u64,
        now: Instant,
    ) -> io::Result<()> {
        self.peers[peer as usize].hs = Hs::Open { nonce_c, token };
        self.session(peer).ack_soon();
        self.flush(peer, now)
    }

    fn on_data(
        &mut self,
        peer: u32,
        from: SocketAddr,
        off: usize,
        len: usize,
        now: Instant,
        sink: &mut Sink<'_>,
    ) -> io::Result<usize> {
        if len < DATA_PREFIX {
            self.refuse(
                from,
                &format!("a data datagram of {len} bytes (claimed rank {peer})"),
            );
            return Ok(0);
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&self.buf[off + PREFIX..off + DATA_PREFIX]);
        let got = u64::from_le_bytes(t);
        let expected = match self.peers[peer as usize].hs {
            Hs::Open { token, .. } | Hs::Confirming { token, .. } | Hs::Accepting { token, .. } => {
                Some(token)
            }
            _ => None,
        };
        if expected != Some(got) {
            self.refuse(
                from,
                &format!("a data datagram without this session's token (claimed rank {peer})"),
            );
            return Ok(0);
        }
        // The token proves the secret: a lost PROOF or confirmation is moot.
        match self.peers[peer as usize].hs {
            Hs::Accepting { nonce_c, token, .. } => self.open(peer, nonce_c, token, now)?,
            Hs::Confirming { nonce_c, token, .. } => {
                self.peers[peer as usize].hs = Hs::Open { nonce_c, token }
            }
            _ => {}
        }
        let rcfg = &self.rcfg;
        let s = self.peers[peer as usize]
            .session
            .get_or_insert_with(|| Session::new(rcfg.clone()));
        let mut delivered = 0;
        let mut bad: Option<String> = None;
        let r = s.on_datagram(now, &self.buf[off + DATA_PREFIX..off + len], &mut |frame| {
            if bad.is_some() {
                return;
            }
            if frame.len() < HEADER_BYTES {
                bad = Some(format!("a frame of {} bytes has no header", frame.len()));
                return;
            }
            match Header::decode(&frame[..HEADER_BYTES]) {
                Ok(h) => {
                    sink(peer, &h, &frame[HEADER_BYTES..]);
                    delivered += 1;
                }
                Err(e) => bad = Some(format!("it sent a bad frame: {e}")),
            }
        });
        if let Err(e) = r {
            self.fail(peer, e.to_string());
        } else if let Some(b) = bad {
            self.fail(peer, b);
        }
        let s = self.peers[peer as usize].session.as_ref();
        self.next_timer = earliest(self.next_timer, s.and_then(Session::poll_timeout));
        if s.is_some_and(|s| s.wants_transmit(now)) {
            self.flush(peer, now)?;
        }
        Ok(delivered)
    }

    /// Is a session still waiting for acknowledgements?
    fn unacknowledged(&self) -> bool {
        self.peers
            .iter()
            .any(|p| p.session.as_ref().is_some_and(|s| !s.is_idle()))
    }

    fn recv_all(&mut self, sink: &mut Sink<'_>, budget: usize) -> io::Result<(usize, usize)> {
        let (mut frames, mut datagrams) = (0, 0);
        let mut now = None;
        // Stop at the first read that completes a frame: the engine polls
        // again at once, and one more read that finds nothing (~0.5 us)
        // would only delay the reply it is about to send.
        while datagrams < budget && frames == 0 {
            let Some(r) = gso::recv(&self.sock, &mut self.buf)? else {
                break;
            };
            let t = *now.get_or_insert_with(Instant::now);
            let step = r.segment.max(1);
            let mut off = 0;
            while off < r.len {
                let len = step.min(r.len - off);
                datagrams += 1;
                frames += self.on_datagram(r.from, off, len, t, sink)?;
                off += len;
            }
        }
        Ok((frames, datagrams))
    }

    /// Offers one frame.
    fn send_frame(&mut self, peer: u32, header: &Header, payload: &[u8]) -> io::Result<bool> {
        let len = HEADER_BYTES + payload.len();
        let hs_idle = matches!(self.peers[peer as usize].hs, Hs::Idle);
        let s = self.session(peer);
        if !s.can_send(len) {
            return Ok(false);
        }
        s.send(&[&header.encode(), payload]);
        let now = Instant::now();
        if hs_idle {
            self.dial(peer, now)?;
        } else {
            self.make_live(peer);
            self.flush(peer, now)?;
        }
        Ok(true)
    }
}

impl Transport for UdpTransport {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn max_payload(&self) -> usize {
        self.cfg.id.max_payload
    }

    fn try_send(&mut self, peer: u32, header: &Header, payload: &[u8]) -> io::Result<bool> {
        self.cfg.id.check_frame(peer, payload.len())?;
        if let Some(e) = self.failed.take() {
            return Err(io::Error::other(e));
        }
        let r = self.send_frame(peer, header, payload);
        if let Some(e) = self.failed.take() {
            return Err(io::Error::other(e));
        }
        r
    }

    fn poll(&mut self, sink: &mut Sink<'_>) -> io::Result<usize> {
        self.idle_polls = self.idle_polls.wrapping_add(1);
        if self.live.is_empty() && !self.idle_polls.is_multiple_of(64) {
            return Ok(0);
        }
        if !self.busy
            && self.next_timer.is_none()
            && self.faults.as_ref().is_none_or(|f| f.held.is_empty())
            && self.stalled.is_none()
            && !self.idle_polls.is_multiple_of(self.cfg.poll_every.max(1))
        {
            return Ok(0);
        }
        let (frames, datagrams) = self.recv_all(sink, 64)?;
        self.busy = datagrams > 0;
        if self.next_timer.is_some() || self.faults.is_some() || self.stalled.is_some() {
            let now = Instant::now();
            if self.stalled.is_some() {
                self.unstall()?;
            }
            self.timers(now)?;
        }
        if let Some(e) = self.failed.take() {
            return Err(io::Error::other(e));
        }
        Ok(frames)
    }

    fn prepare_sleep(&mut self) -> bool {
        true
    }

    fn sleep(&mut self, timeout: Duration) {
        let now = Instant::now();
        let mut until = now + timeout;
        let held = self.faults.as_ref().and_then(Faults::next_release);
        if let Some(t) = earliest(self.next_timer, held) {
            until = until.min(t);
        }
        if self.stalled.is_some() {
            until = until.min(now + Duration::from_micros(100));
        }
        let d = until.saturating_duration_since(now);
        let ts = rustix::event::Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as i64,
        };
        self.events.clear();
        let _ = epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(&mut self.events),
            Some(&ts),
        );
    }

    fn cancel_sleep(&mut self) {}
}

impl Drop for UdpTransport {
    /// Keeps answering until every frame sent has been acknowledged (bounded
    /// by [`LINGER`]), then a little longer for the peers' last
    /// retransmissions, so the job's last frames are not lost with the process.
    fn drop(&mut self) {
        self.linger();
        if self.cfg.stats {
            let mut t = rudp::Stats::default();
            for s in self.peers.iter().filter_map(|p| p.session.as_ref()) {
                let s = s.stats();
                t.sent += s.sent;
                t.retransmits += s.retransmits;
                t.acks += s.acks;
                t.duplicates += s.duplicates;
                t.delivered += s.delivered;
            }
            eprintln!(
                "kumi: rank {}: udp: {} datagrams sent, {} sent again, {} bare acks, {} duplicates received, {} frames delivered, window {}",
                self.cfg.id.rank, t.sent, t.retransmits, t.acks, t.duplicates, t.delivered, self.rcfg.window
            );
        }
        if let Some(f) = &self.faults {
            eprintln!(
                "kumi: rank {}: udp faults injected: {} datagrams dropped; {} sent again",
                self.cfg.id.rank,
                f.dropped,
                self.retransmits()
            );
        }
    }
}

impl UdpTransport {
    fn linger(&mut self) {
        if self.live.is_empty() {
            return;
        }
        let start = Instant::now();
        let mut quiet_since: Option<Instant> = None;
        let mut ignore = |_: u32, _: &Header, _: &[u8]| {};
        while start.elapsed() < LINGER {
            if self.poll(&mut ignore).is_err() {
                return;
            }
            let now = Instant::now();
            if self.unacknowledged() || self.faults.as_ref().is_some_and(|f| !f.held.is_empty()) {
                quiet_since = None;
            } else if now.saturating_duration_since(*quiet_since.get_or_insert(now))
                >= Duration::from_millis(20)
            {
                return;
            }
            self.sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests;
