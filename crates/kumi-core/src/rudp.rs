//! Reliable, ordered, flow-controlled frames over datagrams, for one pair of
//! ranks, without I/O (GAMMA's lesson: below TCP, but with flow control).
//!
//! A [`Session`] is one end of a pair. The caller feeds it datagrams that
//! arrived ([`Session::on_datagram`]) and the current time, asks it for
//! datagrams to send ([`Session::poll_transmit`]) and for when it next needs the
//! clock ([`Session::poll_timeout`], [`Session::handle_timeout`]). No sockets,
//! no clocks: `now` is always a parameter, as in quinn-proto, so two sessions
//! can be driven over a simulated lossy channel in tests.
//!
//! # Datagram format (little-endian, after the I/O layer's own prefix)
//!
//! ```text
//! kind u8 | flags u8 | len u16 | ack u64 | limit u64 | sack u64 [| seq u64 | body[len]]
//! ```
//!
//! * `kind`: [`KIND_DATA`] (36-byte header and `len` body bytes; `len` must
//!   equal what follows) or [`KIND_ACK`] (the 28-byte header, then a `len`-byte
//!   body: `top u64`, one past the highest datagram received, and the holes
//!   below it, ascending, as `u16` offsets from `ack`, at most [`MAX_HOLES`]).
//! * `ack`: every datagram of the peer below it has arrived (cumulative).
//! * `sack`: bit `i` set: datagram `ack + 1 + i` has arrived too (selective).
//! * `limit`: the credit. The peer may send datagrams with `seq < limit`.
//! * `flags` (data): [`FLAG_FIRST`] / [`FLAG_LAST`] mark a frame's first and
//!   last fragment; a frame that fits one datagram carries both.
//!
//! # Decisions
//!
//! * **Credits, not congestion control.** The receiver advertises
//!   `limit = next expected + window`; `window` datagrams are what it can hold
//!   out of order (and what its socket buffer was sized for), so the sender never
//!   overruns it, and an in-order datagram is handed to the caller before the
//!   next is read, so nothing else queues. The limit never decreases. A sender
//!   assumes [`INITIAL_CREDIT`] until the first advertisement arrives.
//! * **One retransmission timer** (RFC 6298 style): RTO = SRTT + 4 RTTVAR from
//!   samples of datagrams sent once (Karn), bounded by [`Config::min_rto`] and
//!   [`Config::max_rto`], doubled on each expiry. On expiry the oldest few
//!   datagrams in flight that are not selectively acknowledged are sent again.
//!   A datagram with three selectively acknowledged ones above it is lost and
//!   sent again at once (fast retransmit), at most once per smoothed RTT.
//! * **Holes.** A datagram carries a 64-bit selective bitmap, too short for
//!   a window of thousands of MTU-sized datagrams. So a receiver that sees a
//!   new gap (and every 16 out-of-order arrivals after) sends a bare
//!   acknowledgement listing the holes; the sender sends those that have
//!   `DUP_THRESH` datagrams received above them again at once, and drops its
//!   copies of everything else below `top`. Recovery thus takes one round trip
//!   for all holes, not one per hole.
//! * **Delayed acks.** A datagram is acknowledged by the next datagram going
//!   back, or by a bare ack after [`Config::ack_delay`], or at once after
//!   [`Config::ack_every`] datagrams, a duplicate or a gap. A ping-pong thus
//!   sends no bare acks at all: the reply carries it.
//! * **Untrusted input.** Every field is checked before use: unknown kinds,
//!   lengths that disagree with the datagram, acknowledgements of datagrams
//!   never sent, credits beyond [`MAX_WINDOW`], sequence numbers beyond the
//!   credit this side gave, fragments out of frame order and frames beyond
//!   [`Config::max_frame`] are an [`Error`], never a panic, and nothing is
//!   allocated beyond the window and one frame.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

/// Kind of a datagram carrying a fragment of a frame.
pub const KIND_DATA: u8 = 1;
/// Kind of a bare acknowledgement.
pub const KIND_ACK: u8 = 2;
/// First fragment of a frame.
pub const FLAG_FIRST: u8 = 1;
/// Last fragment of a frame.
pub const FLAG_LAST: u8 = 2;
/// Bytes of a bare acknowledgement.
pub const ACK_HEADER: usize = 28;
/// Bytes before a data datagram's body.
pub const DATA_HEADER: usize = 36;
/// Largest window (datagrams) a peer may advertise or be given.
pub const MAX_WINDOW: u64 = 4096;
/// Credit a sender assumes before the peer's first advertisement; every
/// receiver accepts at least this many datagrams beyond its next expected one.
pub const INITIAL_CREDIT: u64 = 8;
/// Selective-acknowledgement bits per datagram.
const SACK_BITS: u64 = 64;
/// Datagrams sent again when the retransmission timer expires.
const RTO_BURST: usize = 8;
/// Most holes one acknowledgement lists.
pub const MAX_HOLES: usize = 256;
/// A hole with this many datagrams received above it is taken as lost.
const DUP_THRESH: u64 = 3;

/// How a session behaves. Both ends need not agree except that each
/// `window` is at least [`INITIAL_CREDIT`].
#[derive(Clone, Debug)]
pub struct Config {
    /// Most body bytes in one data datagram.
    pub max_datagram: usize,
    /// Datagrams this side holds beyond the next expected one (its credit).
    pub window: u64,
    /// Largest frame accepted from the peer.
    pub max_frame: usize,
    /// Unacknowledged plus unsent bytes above which [`Session::can_send`] says no.
    pub send_buffer: usize,
    /// RTO before the first RTT sample.
    pub initial_rto: Duration,
    /// Smallest RTO.
    pub min_rto: Duration,
    /// Largest RTO (also the cap of the backoff).
    pub max_rto: Duration,
    /// Longest a received datagram waits for a datagram going back to carry
    /// its acknowledgement.
    pub ack_delay: Duration,
    /// Acknowledge at once after this many datagrams.
    pub ack_every: u32,
    /// A datagram unacknowledged this long means the peer is gone.
    pub dead_after: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_datagram: 32 * 1024,
            window: 64,
            max_frame: 1 << 20,
            send_buffer: 4 << 20,
            initial_rto: Duration::from_millis(5),
            min_rto: Duration::from_millis(1),
            max_rto: Duration::from_millis(50),
            ack_delay: Duration::from_micros(200),
            ack_every: 16,
            dead_after: Duration::from_secs(60),
        }
    }
}

/// Why a session cannot go on. The session is unusable afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The peer sent a datagram that breaks the protocol.
    Protocol(String),
    /// A datagram has gone unacknowledged for [`Config::dead_after`].
    Silent(Duration),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Protocol(s) => write!(f, "it broke the datagram protocol: {s}"),
            Error::Silent(d) => write!(f, "it acknowledged nothing for {:.1} s", d.as_secs_f64()),
        }
    }
}

impl std::error::Error for Error {}

fn bad<T>(msg: String) -> Result<T, Error> {
    Err(Error::Protocol(msg))
}

/// One fragment kept until acknowledged.
struct Seg {
    flags: u8,
    data: Vec<u8>,
    /// Last transmission (None: never sent).
    sent: Option<Instant>,
    first_sent: Option<Instant>,
    tries: u32,
    sacked: bool,
    /// Listed in `Session::retx`.
    in_retx: bool,
}

/// Counters for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Data datagrams sent for the first time.
    pub sent: u64,
    /// Data datagrams sent again.
    pub retransmits: u64,
    /// Bare acknowledgements sent.
    pub acks: u64,
    /// Duplicate data datagrams received.
    pub duplicates: u64,
    /// Frames delivered.
    pub delivered: u64,
}

/// One end of a reliable pair. See the module doc.
pub struct Session {
    cfg: Config,
    // --- sending ---
    /// Sequence number of `segs[0]`: everything below is acknowledged.
    una: u64,
    /// Fragments `una..una + segs.len()`.
    segs: VecDeque<Seg>,
    /// First sequence number never sent.
    next_new: u64,
    /// The peer's credit: send only `seq < limit`.
    limit: u64,
    /// Bytes in `segs` with data still kept.
    queued: usize,
    /// Sequence numbers to send again, oldest first (may hold acknowledged ones).
    retx: VecDeque<u64>,
    rto_at: Option<Instant>,
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    backoff: u32,
    spare: Vec<Vec<u8>>,
    // --- receiving ---
    /// Next sequence number expected in order.
    recv_next: u64,
    /// Out-of-order fragments `recv_next + 1 + i`.
    ooo: VecDeque<Option<(u8, Vec<u8>)>>,
    /// The frame being reassembled, if its first fragment has arrived.
    frame: Vec<u8>,
    in_frame: bool,
    unacked_in: u32,
    ack_at: Option<Instant>,
    ack_now: bool,
    /// Send a bare acknowledgement listing the holes, before any data.
    holes_now: bool,
    /// Out-of-order arrivals since the holes were last listed.
    ooo_since_holes: u32,
    /// The body of a bare acknowledgement being sent.
    ack_body: Vec<u8>,
    stats: Stats,
}

/// Reads `N` bytes at `at` (the caller has checked the length).
fn le<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

impl Session {
    /// A fresh session.
    pub fn new(mut cfg: Config) -> Session {
        cfg.window = cfg.window.clamp(INITIAL_CREDIT, MAX_WINDOW);
        cfg.max_datagram = cfg.max_datagram.clamp(1, u16::MAX as usize);
        cfg.ack_every = cfg.ack_every.max(1);
        let rto = cfg.initial_rto.clamp(cfg.min_rto, cfg.max_rto);
        Session {
            cfg,
            una: 0,
            segs: VecDeque::new(),
            next_new: 0,
            limit: INITIAL_CREDIT,
            queued: 0,
            retx: VecDeque::new(),
            rto_at: None,
            srtt: None,
            rttvar: Duration::ZERO,
            rto,
            backoff: 0,
            spare: Vec::new(),
            recv_next: 0,
            ooo: VecDeque::new(),
            frame: Vec::new(),
            in_frame: false,
            unacked_in: 0,
            ack_at: None,
            ack_now: false,
            holes_now: false,
            ooo_since_holes: 0,
            ack_body: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// May a frame of `len` bytes be queued now? Always, when nothing is queued.
    pub fn can_send(&self, len: usize) -> bool {
        self.queued == 0 || self.queued + len <= self.cfg.send_buffer
    }

    /// Nothing is unacknowledged or unsent.
    pub fn is_idle(&self) -> bool {
        self.segs.is_empty()
    }

    /// Sends a bare acknowledgement with the next [`Session::poll_transmit`]
    /// (the I/O layer confirms a new session with it).
    pub fn ack_soon(&mut self) {
        self.ack_now = true;
    }

    /// Something waits to be sent now (new data within credit, a retransmission
    /// or an acknowledgement that is due).
    pub fn wants_transmit(&self, now: Instant) -> bool {
        !self.retx.is_empty()
            || (self.next_new < self.una + self.segs.len() as u64 && self.next_new < self.limit)
            || self.ack_now
            || self.ack_at.is_some_and(|t| t <= now)
    }

    /// Queues one frame made of `parts` (concatenated), fragmented into
    /// datagrams. The caller checks [`Session::can_send`] first if it wants
    /// flow control; the parts are copied.
    pub fn send(&mut self, parts: &[&[u8]]) {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let max = self.cfg.max_datagram;
        let n = total.div_ceil(max).max(1);
        let mut it = parts.iter().flat_map(|p| p.chunks(max));
        let mut cur: &[u8] = &[];
        for i in 0..n {
            let want = (total - i * max).min(max);
            let mut data = self.spare.pop().unwrap_or_default();
            data.clear();
            data.reserve(want);
            while data.len() < want {
                if cur.is_empty() {
                    cur = it.next().unwrap_or(&[]);
                    if cur.is_empty() {
                        continue;
                    }
                }
                let k = (want - data.len()).min(cur.len());
                data.extend_from_slice(&cur[..k]);
                cur = &cur[k..];
            }
            let mut flags = 0;
            if i == 0 {
                flags |= FLAG_FIRST;
            }
            if i == n - 1 {
                flags |= FLAG_LAST;
            }
            self.queued += data.len();
            self.segs.push_back(Seg {
                flags,
                data,
                sent: None,
                first_sent: None,
                tries: 0,
                sacked: false,
                in_retx: false,
            });
        }
    }

    fn write_ack_fields(&self, head: &mut Vec<u8>, kind: u8, flags: u8, len: u16) {
        head.push(kind);
        head.push(flags);
        head.extend_from_slice(&len.to_le_bytes());
        head.extend_from_slice(&self.recv_next.to_le_bytes());
        let limit = self.recv_next + self.cfg.window;
        head.extend_from_slice(&limit.to_le_bytes());
        let mut sack = 0u64;
        for (i, s) in self.ooo.iter().take(SACK_BITS as usize).enumerate() {
            if s.is_some() {
                sack |= 1 << i;
            }
        }
        head.extend_from_slice(&sack.to_le_bytes());
    }

    fn acked_out(&mut self) {
        self.ack_now = false;
        self.ack_at = None;
        self.unacked_in = 0;
    }

    /// The next datagram to send, if any: its header is appended to `head` and
    /// its body (possibly empty) returned; send `head` then the body as one
    /// datagram.
    pub fn poll_transmit(&mut self, now: Instant, head: &mut Vec<u8>) -> Option<&[u8]> {
        if self.holes_now {
            self.holes_now = false;
            self.ooo_since_holes = 0;
            return Some(self.bare_ack(head));
        }
        let end = self.una + self.segs.len() as u64;
        let mut pick = None;
        while let Some(seq) = self.retx.pop_front() {
            if seq >= self.una && seq < self.next_new {
                let s = &mut self.segs[(seq - self.una) as usize];
                s.in_retx = false;
                if !s.sacked {
                    pick = Some(seq);
                    self.stats.retransmits += 1;
                    break;
                }
            }
        }
        if pick.is_none() && self.next_new < end && self.next_new < self.limit {
            pick = Some(self.next_new);
            self.next_new += 1;
            self.stats.sent += 1;
        }
        if let Some(seq) = pick {
            let i = (seq - self.una) as usize;
            let (flags, len) = (self.segs[i].flags, self.segs[i].data.len() as u16);
            self.write_ack_fields(head, KIND_DATA, flags, len);
            head.extend_from_slice(&seq.to_le_bytes());
            self.acked_out();
            if self.rto_at.is_none() {
                self.rto_at = Some(now + self.rto);
            }
            let s = &mut self.segs[i];
            s.sent = Some(now);
            s.first_sent.get_or_insert(now);
            s.tries += 1;
            return Some(&s.data);
        }
        if self.ack_now || self.ack_at.is_some_and(|t| t <= now) {
            return Some(self.bare_ack(head));
        }
        None
    }

    /// A bare acknowledgement: the header, then `top u64` (one past the
    /// highest datagram received) and the holes below it as `u16` offsets
    /// from `ack`, ascending, at most [`MAX_HOLES`].
    fn bare_ack(&mut self, head: &mut Vec<u8>) -> &[u8] {
        let mut body = std::mem::take(&mut self.ack_body);
        body.clear();
        let top = match self.ooo.len() {
            0 => self.recv_next,
            n => self.recv_next + n as u64 + 1,
        };
        body.extend_from_slice(&top.to_le_bytes());
        if !self.ooo.is_empty() {
            body.extend_from_slice(&0u16.to_le_bytes());
            let mut n = 1;
            for (i, slot) in self.ooo.iter().enumerate() {
                if n == MAX_HOLES {
                    break;
                }
                if slot.is_none() {
                    body.extend_from_slice(&((i + 1) as u16).to_le_bytes());
                    n += 1;
                }
            }
        }
        self.write_ack_fields(head, KIND_ACK, 0, body.len() as u16);
        self.acked_out();
        self.stats.acks += 1;
        self.ack_body = body;
        &self.ack_body
    }

    /// When [`Session::handle_timeout`] must next be called, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.rto_at, self.ack_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Acts on expired timers: queues retransmissions, makes a delayed
    /// acknowledgement due, and reports a silent peer.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), Error> {
        if let Some(t) = self.rto_at {
            if t <= now {
                if let Some(first) = self.segs.front().and_then(|s| s.first_sent) {
                    let waited = now.saturating_duration_since(first);
                    if waited >= self.cfg.dead_after {
                        return Err(Error::Silent(waited));
                    }
                }
                // The oldest few datagrams in flight go again (the rest are
                // left to selective acknowledgements), and the RTO doubles.
                let rto = self.rto;
                let mut n = 0;
                for (i, s) in self.segs.iter_mut().enumerate() {
                    let seq = self.una + i as u64;
                    if seq >= self.next_new || n == RTO_BURST {
                        break;
                    }
                    if !s.sacked
                        && !s.in_retx
                        && s.sent
                            .is_some_and(|t| now.saturating_duration_since(t) >= rto)
                    {
                        s.in_retx = true;
                        self.retx.push_back(seq);
                        n += 1;
                    }
                }
                self.backoff = (self.backoff + 1).min(16);
                self.rto = (self.rto * 2).min(self.cfg.max_rto);
                self.rto_at = if self.una < self.next_new {
                    Some(now + self.rto)
                } else {
                    None
                };
            }
        }
        if self.ack_at.is_some_and(|t| t <= now) {
            self.ack_now = true;
        }
        Ok(())
    }

    fn sample_rtt(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let d = s.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + d) / 4;
                self.srtt = Some((s * 7 + r) / 8);
            }
        }
        let s = self.srtt.unwrap_or(r);
        self.rto = (s + self.rttvar * 4).clamp(self.cfg.min_rto, self.cfg.max_rto);
    }

    fn on_ack(&mut self, now: Instant, ack: u64, limit: u64, sack: u64) -> Result<(), Error> {
        if ack > self.next_new {
            return bad(format!(
                "it acknowledges datagram {} but only {} were sent",
                ack, self.next_new
            ));
        }
        if limit > ack.saturating_add(MAX_WINDOW) {
            return bad(format!(
                "a credit of {} datagrams beyond the largest window {MAX_WINDOW}",
                limit - ack
            ));
        }
        self.limit = self.limit.max(limit);
        if ack > self.una {
            while self.una < ack {
                let Some(mut s) = self.segs.pop_front() else {
                    break;
                };
                self.una += 1;
                if s.tries == 1 {
                    if let Some(t) = s.sent {
                        self.sample_rtt(now.saturating_duration_since(t));
                    }
                }
                if !s.sacked {
                    self.queued -= s.data.len();
                }
                if self.spare.len() < 64 && s.data.capacity() <= 2 * self.cfg.max_datagram {
                    s.data.clear();
                    self.spare.push(s.data);
                }
            }
            self.backoff = 0;
            if let Some(s) = self.srtt {
                self.rto = (s + self.rttvar * 4).clamp(self.cfg.min_rto, self.cfg.max_rto);
            }
            self.rto_at = if self.una < self.next_new {
                Some(now + self.rto)
            } else {
                None
            };
        }
        if sack != 0 {
            let mut top = None;
            for i in 0..SACK_BITS {
                if sack & (1 << i) == 0 {
                    continue;
                }
                let seq = ack + 1 + i;
                if seq >= self.next_new {
                    return bad(format!(
                        "it acknowledges datagram {seq} selectively but only {} were sent",
                        self.next_new
                    ));
                }
                top = Some(seq);
                if seq < self.una {
                    continue;
                }
                self.mark_sacked(seq);
            }
            // Loss detection: a datagram with three selectively acknowledged
            // ones above it is lost; send it again at once, unless it was sent
            // again less than a smoothed RTT ago.
            let srtt = self.srtt.unwrap_or(self.rto);
            if let Some(top) = top {
                let mut above = 0;
                let lo = self.una.max(ack);
                let mut lost = Vec::new();
                for seq in (lo..top).rev() {
                    let s = &mut self.segs[(seq - self.una) as usize];
                    if s.sacked {
                        above += 1;
                        continue;
                    }
                    let due = s.tries == 1
                        || s.sent
                            .is_some_and(|t| now.saturating_duration_since(t) >= srtt);
                    if above >= 3 && !s.in_retx && due {
                        s.in_retx = true;
                        lost.push(seq);
                    }
                }
                self.retx.extend(lost.into_iter().rev());
            }
        }
        Ok(())
    }

    /// The body of a bare acknowledgement: what the peer has above `ack`
    /// and what it lacks.
    /// Datagram `seq` (in the window) has arrived: its bytes need no resend.
    fn mark_sacked(&mut self, seq: u64) {
        let s = &mut self.segs[(seq - self.una) as usize];
        if !s.sacked {
            s.sacked = true;
            self.queued -= s.data.len();
            s.data = Vec::new();
        }
    }

    fn on_holes(&mut self, now: Instant, ack: u64, body: &[u8]) -> Result<(), Error> {
        let top = u64::from_le_bytes(le(body, 0));
        if top < ack || top > self.next_new {
            return bad(format!(
                "it claims datagrams up to {top}, acknowledged {ack}, sent {}",
                self.next_new
            ));
        }
        let holes = &body[8..];
        let n = holes.len() / 2;
        let hole = |i: usize| ack + u64::from(u16::from_le_bytes(le(holes, 2 * i)));
        for i in 0..n {
            if hole(i) >= top || (i > 0 && hole(i) <= hole(i - 1)) {
                return bad("holes out of order or above what it claims".into());
            }
        }
        if ack < self.una {
            // An old acknowledgement overtaken by a newer one: stale.
            return Ok(());
        }
        // With the list complete, everything in [ack, top) that is not a
        // hole has arrived.
        if n < MAX_HOLES {
            let mut h = 0;
            for seq in ack..top {
                if h < n && hole(h) == seq {
                    h += 1;
                    continue;
                }
                self.mark_sacked(seq);
            }
        }
        let srtt = self.srtt.unwrap_or(self.rto);
        for i in 0..n {
            let seq = hole(i);
            if top - seq <= DUP_THRESH {
                break;
            }
            let s = &mut self.segs[(seq - self.una) as usize];
            let due = s.tries == 1
                || s.sent
                    .is_some_and(|t| now.saturating_duration_since(t) >= srtt);
            if !s.sacked && !s.in_retx && due {
                s.in_retx = true;
                self.retx.push_back(seq);
            }
        }
        Ok(())
    }

    /// Handles one arrived datagram (the bytes after the I/O layer's prefix),
    /// handing every frame it completes, in order, to `deliver`.
    pub fn on_datagram(
        &mut self,
        now: Instant,
        d: &[u8],
        deliver: &mut dyn FnMut(&[u8]),
    ) -> Result<(), Error> {
        if d.len() < ACK_HEADER {
            return bad(format!("a datagram of {} bytes is too short", d.len()));
        }
        let (kind, flags) = (d[0], d[1]);
        let len = u16::from_le_bytes(le(d, 2)) as usize;
        let ack = u64::from_le_bytes(le(d, 4));
        let limit = u64::from_le_bytes(le(d, 12));
        let sack = u64::from_le_bytes(le(d, 20));
        match kind {
            KIND_ACK => {
                if d.len() != ACK_HEADER + len
                    || flags != 0
                    || len < 8
                    || !(len - 8).is_multiple_of(2)
                    || (len - 8) / 2 > MAX_HOLES
                {
                    return bad("a malformed acknowledgement".into());
                }
                self.on_ack(now, ack, limit, sack)?;
                return self.on_holes(now, ack, &d[ACK_HEADER..]);
            }
            KIND_DATA => {}
            k => return bad(format!("unknown datagram kind {k}")),
        }
        if d.len() < DATA_HEADER || d.len() - DATA_HEADER != len {
            return bad(format!(
                "a data datagram of {} bytes says its body has {len}",
                d.len()
            ));
        }
        if flags & !(FLAG_FIRST | FLAG_LAST) != 0 {
            return bad(format!("unknown flags {flags:#x}"));
        }
        let seq = u64::from_le_bytes(le(d, 28));
        self.on_ack(now, ack, limit, sack)?;
        let body = &d[DATA_HEADER..];
        if seq < self.recv_next {
            self.stats.duplicates += 1;
            self.ack_now = true;
            return Ok(());
        }
        let tolerance = self.cfg.window.max(INITIAL_CREDIT);
        if seq - self.recv_next >= tolerance {
            return bad(format!(
                "datagram {seq} is beyond the credit given (next expected {}, window {tolerance})",
                self.recv_next
            ));
        }
        self.unacked_in += 1;
        if self.unacked_in >= self.cfg.ack_every {
            self.ack_now = true;
        }
        if self.ack_at.is_none() {
            self.ack_at = Some(now + self.cfg.ack_delay);
        }
        if seq > self.recv_next {
            let i = (seq - self.recv_next - 1) as usize;
            let old_len = self.ooo.len();
            // Datagrams are missing that were not before.
            let new_gap = old_len == 0 || i > old_len;
            if old_len <= i {
                self.ooo.resize_with(i + 1, || None);
            }
            if self.ooo[i].is_some() {
                self.stats.duplicates += 1;
            } else {
                self.ooo[i] = Some((flags, body.to_vec()));
            }
            // A gap: tell the sender which datagrams are missing, at once
            // when a new one opens, else every few arrivals.
            self.ooo_since_holes += 1;
            if new_gap || self.ooo_since_holes >= 16 {
                self.holes_now = true;
            }
            return Ok(());
        }
        self.accept(flags, body, deliver)?;
        let filled_hole = !self.ooo.is_empty();
        while let Some(Some(_)) = self.ooo.front() {
            let Some(Some((f, b))) = self.ooo.pop_front() else {
                break;
            };
            self.accept(f, &b, deliver)?;
        }
        if let Some(None) = self.ooo.front() {
            self.ooo.pop_front();
        }
        if filled_hole && !self.ooo.is_empty() {
            // A hole was filled and others remain: list them again, so a
            // retransmission lost again is found without waiting for the RTO.
            self.holes_now = true;
        }
        Ok(())
    }

    /// The in-order fragment `recv_next`.
    fn accept(
        &mut self,
        flags: u8,
        body: &[u8],
        deliver: &mut dyn FnMut(&[u8]),
    ) -> Result<(), Error> {
        let first = flags & FLAG_FIRST != 0;
        let last = flags & FLAG_LAST != 0;
        if first == self.in_frame {
            return bad(if first {
                "a frame starts before the previous one ended".into()
            } else {
                "a fragment outside any frame".into()
            });
        }
        self.recv_next += 1;
        if first && last {
            if body.len() > self.cfg.max_frame {
                return bad(format!("a frame of {} bytes", body.len()));
            }
            self.stats.delivered += 1;
            deliver(body);
            return Ok(());
        }
        if self.frame.len() + body.len() > self.cfg.max_frame {
            return bad(format!("a frame of more than {} bytes", self.cfg.max_frame));
        }
        self.frame.extend_from_slice(body);
        self.in_frame = !last;
        if last {
            self.stats.delivered += 1;
            deliver(&self.frame);
            self.frame.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BinaryHeap;

    fn cfg() -> Config {
        Config {
            max_datagram: 100,
            window: 16,
            max_frame: 1000,
            send_buffer: 2000,
            ..Config::default()
        }
    }

    fn drain(s: &mut Session, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let mut head = Vec::new();
            let Some(body) = s.poll_transmit(now, &mut head) else {
                return out;
            };
            head.extend_from_slice(body);
            out.push(head);
        }
    }

    #[test]
    fn a_frame_crosses_fragmented_and_is_acknowledged() {
        let t = Instant::now();
        let (mut a, mut b) = (Session::new(cfg()), Session::new(cfg()));
        let frame: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
        a.send(&[&frame[..10], &frame[10..]]);
        let ds = drain(&mut a, t);
        assert_eq!(ds.len(), 3, "250 bytes in 100-byte datagrams");
        let mut got = Vec::new();
        for d in &ds {
            b.on_datagram(t, d, &mut |f| got.push(f.to_vec())).unwrap();
        }
        assert_eq!(got, vec![frame]);
        assert!(drain(&mut b, t).is_empty(), "the ack waits for a reply");
        let later = t + b.config().ack_delay;
        b.handle_timeout(later).unwrap();
        let acks = drain(&mut b, later);
        assert_eq!(acks.len(), 1);
        assert_eq!(acks[0].len(), ACK_HEADER + 8, "no holes listed");
        a.on_datagram(later, &acks[0], &mut |_| panic!("no frame"))
            .unwrap();
        assert!(a.is_idle());
    }

    #[test]
    fn a_lost_datagram_is_sent_again_after_the_rto() {
        let t = Instant::now();
        let (mut a, mut b) = (Session::new(cfg()), Session::new(cfg()));
        a.send(&[b"hello"]);
        assert_eq!(drain(&mut a, t).len(), 1); // lost
        let due = a.poll_timeout().expect("retransmission timer");
        a.handle_timeout(due).unwrap();
        let ds = drain(&mut a, due);
        assert_eq!(ds.len(), 1);
        let mut got = 0;
        b.on_datagram(due, &ds[0], &mut |f| {
            assert_eq!(f, b"hello");
            got += 1
        })
        .unwrap();
        assert_eq!((got, a.stats().retransmits), (1, 1));
    }

    #[test]
    fn holes_are_listed_and_sent_again_at_once() {
        let t = Instant::now();
        let (mut a, mut b) = (Session::new(cfg()), Session::new(cfg()));
        for i in 0..8u8 {
            a.send(&[&[i; 10]]);
        }
        let ds = drain(&mut a, t);
        let mut acks = Vec::new();
        for (i, d) in ds.iter().enumerate() {
            if i == 2 || i == 4 {
                continue; // lost
            }
            b.on_datagram(t, d, &mut |_| {}).unwrap();
            acks.extend(drain(&mut b, t));
        }
        assert!(!acks.is_empty(), "new gaps are reported at once");
        // The delayed acknowledgement lists the holes below everything received.
        let later = t + b.config().ack_delay;
        b.handle_timeout(later).unwrap();
        acks.extend(drain(&mut b, later));
        let last = acks.last().unwrap();
        // top 8, holes 2 and 4 as offsets 0 and 2 from ack 2.
        assert_eq!(last.len(), ACK_HEADER + 8 + 4);
        assert_eq!(&last[ACK_HEADER..ACK_HEADER + 8], &8u64.to_le_bytes());
        assert_eq!(&last[ACK_HEADER + 8..], &[0, 0, 2, 0]);
        for ack in &acks {
            a.on_datagram(t, ack, &mut |_| {}).unwrap();
        }
        let again = drain(&mut a, t);
        let seqs: Vec<u64> = again
            .iter()
            .map(|d| u64::from_le_bytes(d[28..36].try_into().unwrap()))
            .collect();
        assert_eq!(seqs, vec![2, 4], "exactly the holes, before any timer");
        let mut got = 0;
        for d in &again {
            b.on_datagram(t, d, &mut |_| got += 1).unwrap();
        }
        assert_eq!(got, 6, "frames 2..8 complete once the holes are filled");
    }

    #[test]
    fn the_sender_never_exceeds_the_credit() {
        let t = Instant::now();
        let mut a = Session::new(cfg());
        for _ in 0..20 {
            a.send(&[&[1u8; 50]]);
        }
        assert_eq!(drain(&mut a, t).len() as u64, INITIAL_CREDIT);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let t = Instant::now();
        let mut b = Session::new(cfg());
        let mut a = Session::new(cfg());
        a.send(&[b"x"]);
        let d = drain(&mut a, t).pop().unwrap();
        let mut beyond = d.clone();
        beyond[28..36].copy_from_slice(&1000u64.to_le_bytes());
        assert!(b.on_datagram(t, &beyond, &mut |_| {}).is_err());
        let mut lying = d.clone();
        lying[2] = 9;
        assert!(Session::new(cfg())
            .on_datagram(t, &lying, &mut |_| {})
            .is_err());
        let mut early_ack = d.clone();
        early_ack[4..12].copy_from_slice(&5u64.to_le_bytes());
        assert!(Session::new(cfg())
            .on_datagram(t, &early_ack, &mut |_| {})
            .is_err());
        let mut middle = d;
        middle[1] = 0;
        assert!(Session::new(cfg())
            .on_datagram(t, &middle, &mut |_| {})
            .is_err());
    }

    #[test]
    fn a_silent_peer_is_reported() {
        let t = Instant::now();
        let mut a = Session::new(Config {
            dead_after: Duration::from_millis(50),
            ..cfg()
        });
        a.send(&[b"x"]);
        drain(&mut a, t);
        let mut now;
        let err = loop {
            now = a
                .poll_timeout()
                .expect("a timer runs while data is unacked");
            match a.handle_timeout(now) {
                Ok(()) => drain(&mut a, now),
                Err(e) => break e,
            };
        };
        assert!(matches!(err, Error::Silent(_)));
        assert!(now - t < Duration::from_millis(500));
    }

    /// A datagram on the simulated wire: arrival time in microseconds, a
    /// tie-break, the receiving end, the bytes.
    type InFlight = (u64, u64, usize, Vec<u8>);

    /// A seeded lossy channel between two sessions.
    struct Faults {
        drop: u64,
        dup: u64,
        reorder: u64,
        /// Most extra delay in microseconds.
        jitter: u64,
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn pct(&mut self, p: u64) -> bool {
            self.next() % 100 < p
        }
    }

    /// Sends `n` frames each way over the faulty channel; every frame must
    /// arrive exactly once, in order, with its contents.
    fn simulate(seed: u64, n: usize, f: &Faults, c: [Config; 2]) -> (Stats, Stats, Duration) {
        let start = Instant::now();
        let mut rng = Rng(seed);
        let [c0, c1] = c;
        let mut ends = [Session::new(c0), Session::new(c1)];
        let frame = |side: usize, i: usize| -> Vec<u8> {
            let len = (i * 131 + side * 17 + seed as usize) % 330;
            (0..len).map(|j| (i * 7 + j + side) as u8).collect()
        };
        let mut offered = [0usize; 2];
        let mut got = [0usize; 2];
        // (arrival time in us, tie-break, to, bytes), earliest first.
        let mut net: BinaryHeap<std::cmp::Reverse<InFlight>> = BinaryHeap::new();
        let mut now_us = 0u64;
        let mut tie = 0u64;
        let base_delay = 10u64;
        for _step in 0..2_000_000 {
            let now = start + Duration::from_micros(now_us);
            for side in 0..2 {
                while offered[side] < n {
                    let fr = frame(side, offered[side]);
                    if !ends[side].can_send(fr.len()) {
                        break;
                    }
                    ends[side].send(&[&fr]);
                    offered[side] += 1;
                }
                for d in drain(&mut ends[side], now) {
                    if rng.pct(f.drop) {
                        continue;
                    }
                    let copies = if rng.pct(f.dup) { 2 } else { 1 };
                    for _ in 0..copies {
                        let mut at = now_us + base_delay + rng.next() % (f.jitter + 1);
                        if rng.pct(f.reorder) {
                            at += 200 + rng.next() % 2000;
                        }
                        tie += 1;
                        net.push(std::cmp::Reverse((at, tie, 1 - side, d.clone())));
                    }
                }
            }
            if got == [n, n] && ends.iter().all(Session::is_idle) {
                let stats = (ends[0].stats().clone(), ends[1].stats().clone());
                return (stats.0, stats.1, Duration::from_micros(now_us));
            }
            // Next event: a datagram's arrival or a timer.
            let timer = ends
                .iter()
                .filter_map(Session::poll_timeout)
                .map(|t| (t - start).as_nanos().div_ceil(1000) as u64)
                .min();
            let arrival = net.peek().map(|r| r.0 .0);
            let next = match (timer, arrival) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a
                    .or(b)
                    .expect("something pending while frames are undelivered"),
            };
            now_us = now_us.max(next);
            let now = start + Duration::from_micros(now_us);
            while net.peek().is_some_and(|r| r.0 .0 <= now_us) {
                let std::cmp::Reverse((_, _, to, d)) = net.pop().unwrap();
                let from = 1 - to;
                let (g, e) = (&mut got[to], &mut ends[to]);
                e.on_datagram(now, &d, &mut |fr| {
                    assert_eq!(
                        fr,
                        &frame(from, *g)[..],
                        "seed {seed}: frame {g} from {from}"
                    );
                    *g += 1;
                })
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            }
            for e in &mut ends {
                e.handle_timeout(now)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            }
        }
        for e in &ends {
            eprintln!(
                "una {} next_new {} end {} limit {} rto_at {:?} retx {:?} recv_next {} ooo {} ack_at {:?} ack_now {} in_frame {}",
                e.una, e.next_new, e.una + e.segs.len() as u64, e.limit, e.rto_at.map(|t| t - start), e.retx, e.recv_next, e.ooo.len(), e.ack_at.map(|t| t - start), e.ack_now, e.in_frame
            );
        }
        panic!("seed {seed}: no progress at {now_us} us: delivered {got:?} of {n}");
    }

    #[test]
    fn exactly_once_in_order_over_a_clean_channel() {
        let f = Faults {
            drop: 0,
            dup: 0,
            reorder: 0,
            jitter: 0,
        };
        let (a, b, _) = simulate(1, 500, &f, [cfg(), cfg()]);
        assert_eq!((a.retransmits, b.retransmits), (0, 0));
        assert_eq!((a.delivered, b.delivered), (500, 500));
    }

    #[test]
    fn exactly_once_in_order_over_a_lossy_channel_for_many_seeds() {
        let f = Faults {
            drop: 10,
            dup: 5,
            reorder: 10,
            jitter: 50,
        };
        let mut retx = 0;
        for seed in 0..200 {
            let (a, b, _) = simulate(seed, 200, &f, [cfg(), cfg()]);
            assert_eq!((a.delivered, b.delivered), (200, 200));
            retx += a.retransmits + b.retransmits;
        }
        assert!(retx > 0, "the channel lost nothing: the test tests nothing");
    }

    #[test]
    fn a_channel_that_loses_half_still_delivers() {
        let f = Faults {
            drop: 50,
            dup: 20,
            reorder: 30,
            jitter: 500,
        };
        for seed in 0..20 {
            simulate(seed, 50, &f, [cfg(), cfg()]);
        }
    }

    #[test]
    fn windows_of_different_sizes_interoperate() {
        let f = Faults {
            drop: 5,
            dup: 5,
            reorder: 5,
            jitter: 20,
        };
        for seed in 0..20 {
            let small = Config {
                window: 8 + seed * 7,
                ..cfg()
            };
            let big = Config {
                window: 200 - seed * 5,
                ..cfg()
            };
            simulate(seed, 100, &f, [small, big]);
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let t = Instant::now();
            let mut s = Session::new(cfg());
            s.send(&[b"some data to acknowledge"]);
            drain(&mut s, t);
            let _ = s.on_datagram(t, &bytes, &mut |_| {});
            let _ = s.handle_timeout(t + Duration::from_secs(1));
            drain(&mut s, t);
        }

        #[test]
        fn mutated_datagrams_never_panic(seed in any::<u64>(), flips in proptest::collection::vec((0usize..140, any::<u8>()), 1..6)) {
            let t = Instant::now();
            let mut a = Session::new(cfg());
            let mut b = Session::new(cfg());
            a.send(&[&[seed as u8; 250]]);
            for mut d in drain(&mut a, t) {
                for &(at, v) in &flips {
                    if let Some(x) = d.get_mut(at) { *x ^= v; }
                }
                if b.on_datagram(t, &d, &mut |f| assert!(f.len() <= 1000)).is_err() {
                    b = Session::new(cfg());
                }
            }
        }
    }
}
