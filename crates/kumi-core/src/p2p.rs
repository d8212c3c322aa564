//! The point-to-point protocol's decisions, with no I/O: which protocol a
//! message takes, what a receive does when a large message matches it, and
//! what every reply frame means for the request it names. The runtime's
//! engine keeps the buffers, the transports, the request table and the
//! system calls, and carries out what these functions decide: frames to
//! send, completions, and copies (into a receive's buffer, out of the
//! sender's memory or into the receiver's).
//!
//! Protocols, chosen per message ([`Protocol::eager`]):
//! - **eager** (up to the limit of the peer's route; a collective's block to
//!   a rank of this host, where single copy is on, up to
//!   [`Limits::coll_host`]): the whole message in one frame. A plain send
//!   is complete when the transport takes the frame; a synchronous one when
//!   the receiver's `Ack` comes back.
//! - **rendezvous** (larger): `Rts` carries the sender's buffer address and
//!   the matched receive decides how the bytes move ([`Protocol::pull`]):
//!   it reads them straight out of the sender's memory (single copy) and
//!   answers `Fin`; from [`Limits::split_min`] on it reads the first half
//!   while the sender writes the second ([`Pull::Split`]: `Split`, then
//!   `Wrote`); if the kernel refuses single copy the rank says so once and
//!   from then on answers `Cts`, and the sender pushes `Data` chunks
//!   ([`Send::chunk`]) through its transport.
//!
//! Every frame that names a request is checked here against that request
//! (the peer it is with, the message's length, its phase, each chunk's
//! bounds) before the engine touches a buffer; a frame that does not fit is
//! a [`Violation`], which the engine logs and drops. Matching itself is
//! [`crate::matching`]; what an unmatched message leaves is [`Unexpected`].

use crate::header::{Header, Kind, FLAG_FAN_OUT};
use crate::matching::Envelope;

/// The eager limit on the network when none is asked: up to it, eager beat
/// the rendezvous over TCP at ping-pong and streaming (measured:
/// docs/BENCHMARKS.md, session 11).
pub const EAGER_NET: usize = 32 * 1024;

/// The largest messages sent in one frame, by route, and where the split
/// copy starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest message sent eagerly to a rank of this host (and to itself).
    pub host: usize,
    /// Largest message sent eagerly to a rank on another host.
    pub net: usize,
    /// The smaller of the two: every message up to it fits one frame,
    /// whichever route it takes.
    pub min: usize,
    /// Largest block of a collective sent eagerly to a rank of this host
    /// while single copy is on ([`Protocol::eager`]); `host` unless
    /// [`Limits::with_coll_copy`] lowers it.
    pub coll_host: usize,
    /// Rendezvous messages at least this long use the two-sided copy.
    pub split_min: usize,
}

/// An eager limit that a transport cannot carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitError {
    /// The limit asked for.
    pub asked: usize,
    /// The largest frame payload of the smallest transport present.
    pub largest: usize,
}

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KUMI_EAGER_LIMIT={} exceeds the largest frame the transport holds ({} bytes); \
             lower it or raise KUMI_SHM_RING_BYTES",
            self.asked, self.largest
        )
    }
}

impl std::error::Error for LimitError {}

impl Limits {
    /// The limits for a rank whose host transport carries frames of up to
    /// `host_max` payload bytes and whose network transport `net_max` (each
    /// `None` where absent); `asked` (`KUMI_EAGER_LIMIT`) sets both and must
    /// fit both.
    ///
    /// Unasked, the host limit follows the ring: a quarter of its largest
    /// record rounded down to a power of two, between 8 and 64 KiB, so an
    /// eager record never takes more than a sixteenth of its ring (records
    /// of more filled it); up to that, eager streams faster than the
    /// rendezvous, to one receiver or several (measured: docs/BENCHMARKS.md,
    /// sessions 11 and 37). On the network: [`EAGER_NET`].
    pub fn new(
        host_max: Option<usize>,
        net_max: Option<usize>,
        asked: Option<u64>,
        split_min: usize,
    ) -> Result<Limits, LimitError> {
        let (host, net) = match asked {
            Some(v) => {
                let v = usize::try_from(v).unwrap_or(usize::MAX);
                if let Some(m) = host_max.into_iter().chain(net_max).min() {
                    if v > m {
                        return Err(LimitError {
                            asked: v,
                            largest: m,
                        });
                    }
                }
                (v, v)
            }
            None => {
                let net = EAGER_NET.min(net_max.unwrap_or(usize::MAX));
                let host = match host_max {
                    Some(m) => {
                        let quarter = (m / 4).max(1);
                        let pow2 = 1usize << (usize::BITS - 1 - quarter.leading_zeros());
                        pow2.clamp(8 * 1024, 64 * 1024).min(m)
                    }
                    None => net,
                };
                (host, if net_max.is_some() { net } else { host })
            }
        };
        Ok(Limits {
            host,
            net,
            min: host.min(net),
            coll_host: host,
            split_min,
        })
    }

    /// These limits with a collective's blocks of at least `copy_min` bytes
    /// (`KUMI_COLL_COPY_MIN`) to a rank of this host going by rendezvous
    /// where single copy is on: a read out of the sender's buffer does not
    /// slow down where copies across cores through the rings do, and a
    /// point-to-point message stays eager, where its ping-pong was faster
    /// (measured: docs/BENCHMARKS.md, session 56).
    pub fn with_coll_copy(self, copy_min: usize) -> Limits {
        Limits {
            coll_host: self.host.min(copy_min.saturating_sub(1)),
            ..self
        }
    }
}

/// Where a two-sided copy splits a message of `len` bytes: the receiver
/// reads `[0, split)`, the sender writes `[split, len)`. Cache-line aligned.
#[inline]
pub fn split_point(len: usize) -> usize {
    (len / 2) & !63
}

/// How a matched rendezvous message reaches the receive ([`Protocol::pull`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pull {
    /// It does not fit: the receive fails, naming both sizes, and `Fin`
    /// releases the sender.
    Truncated,
    /// Two-sided copy: send `Split` (the sender writes `[split, len)`),
    /// read `[0, split)` once that frame is out, answer `Fin`; the receive
    /// is complete when both halves are in ([`Incoming::add`]).
    Split {
        /// The first byte the sender writes.
        split: usize,
    },
    /// Read the whole message out of the sender, then answer `Fin`. If the
    /// kernel refuses, [`Protocol::read_refused`] and [`Pull::Push`].
    Read,
    /// Send `Cts`: the sender pushes the message in `Data` chunks.
    Push,
}

/// This rank's protocol state: its limits and whether it copies between
/// processes.
#[derive(Clone, Copy, Debug)]
pub struct Protocol {
    /// The eager limits.
    pub limits: Limits,
    /// Single copy between processes is on (it turns off for good when the
    /// kernel refuses a read).
    single_copy: bool,
    /// A single-copy read has succeeded (so the kernel allows it): only then
    /// does a rank ask a peer to write into it (a split copy).
    verified: bool,
    /// Every message up to this many bytes goes eagerly, whatever its
    /// route and context: no send below it asks [`Protocol::eager`].
    pub surely_eager: usize,
}

impl Protocol {
    /// A rank's protocol with `limits`, copying between processes if
    /// `single_copy`.
    pub fn new(limits: Limits, single_copy: bool) -> Protocol {
        Protocol {
            limits,
            single_copy,
            verified: false,
            surely_eager: limits.min.min(limits.coll_host),
        }
    }

    /// Whether a message of `len` bytes goes in one frame: to a rank on
    /// another host (`net`) or of this one, of a collective (`coll`) or
    /// not. A collective's block to a rank of this host longer than
    /// [`Limits::coll_host`] goes by rendezvous while single copy is on
    /// (once the kernel refused it, a rendezvous would be pushed through
    /// the ring in chunks, which an eager frame beats).
    #[inline]
    pub fn eager(&self, len: usize, net: bool, coll: bool) -> bool {
        match (net, coll && self.single_copy) {
            (true, _) => len <= self.limits.net,
            (false, true) => len <= self.limits.coll_host,
            (false, false) => len <= self.limits.host,
        }
    }

    /// How a rendezvous message of `len` bytes from a rank of this host
    /// (`same_host`) or not reaches a receive of `cap` bytes.
    /// `sender_busy`: the sender has copies of its own to serve meanwhile,
    /// either because this rank has a rendezvous message out to it (an
    /// exchange: `Irecv`, `Send`, `Wait` on both sides) or because it had
    /// some out to other ranks when it sent this one ([`FLAG_FAN_OUT`]: a
    /// scatter's root). Then a split would give the sender half of this copy
    /// on top of its own work while this rank idles, so the message is read
    /// whole (measured: docs/BENCHMARKS.md, sessions 36 and 63).
    pub fn pull(&self, len: usize, cap: usize, same_host: bool, sender_busy: bool) -> Pull {
        if len > cap {
            Pull::Truncated
        } else if !(self.single_copy && same_host) {
            Pull::Push
        } else if self.verified
            && !sender_busy
            && len >= self.limits.split_min
            && split_point(len) > 0
        {
            // A split with an empty first half would count the receiver's
            // half complete twice (once on `Wrote`, once on the empty read).
            Pull::Split {
                split: split_point(len),
            }
        } else {
            Pull::Read
        }
    }

    /// A single-copy read succeeded.
    pub fn read_done(&mut self) {
        self.verified = true;
    }

    /// The kernel refused a single-copy read: every later message is pushed.
    pub fn read_refused(&mut self) {
        self.single_copy = false;
    }
}

/// What a send is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendPhase {
    /// `Fin` (rendezvous) or `Ack` (synchronous eager), or `Split` or `Cts`.
    AwaitReply,
    /// Pushing `Data` chunks to receiver request `recv_req`; `off` bytes out.
    Streaming {
        /// The receiver's request, which every chunk names.
        recv_req: u64,
        /// Bytes pushed so far.
        off: usize,
    },
}

/// A send in flight (synchronous eager or rendezvous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Send {
    /// The world rank it goes to.
    pub peer: u32,
    /// Message bytes.
    pub len: usize,
    /// Sent by rendezvous (else a synchronous eager send, or a plain one
    /// waiting for room in the transport).
    pub rendezvous: bool,
    /// What it waits for.
    pub phase: SendPhase,
}

/// What a reply frame asks of the send it names ([`Send::on_reply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `Fin` or `Ack`: the send is complete.
    Done,
    /// `Cts`: push the message ([`Send::chunk`]); the send is streaming.
    Push,
    /// `Split`: write bytes `[at, len)` of the message at `remote + at` in the
    /// peer's memory, then answer [`wrote`] to receiver request `recv_req`.
    WriteHalf {
        /// First byte of the sender's half.
        at: usize,
        /// The receive buffer's address in the peer.
        remote: u64,
        /// The receiver's request.
        recv_req: u64,
    },
}

/// A chunk to push: `len` bytes at offset `off` of the message, in a frame
/// with `header`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The `Data` frame's header.
    pub header: Header,
    /// Offset in the message.
    pub off: usize,
    /// Bytes.
    pub len: usize,
}

impl Send {
    /// A send of `len` bytes to `peer` (by rendezvous or not), waiting for
    /// its reply.
    #[inline]
    pub fn new(peer: u32, len: usize, rendezvous: bool) -> Send {
        Send {
            peer,
            len,
            rendezvous,
            phase: SendPhase::AwaitReply,
        }
    }

    /// Reply frame `h` from world rank `from` for send `s` (`None`: no open
    /// send has the id the frame names). Checks that it comes from the peer,
    /// names the message's length where the frame carries it, and fits the
    /// send's phase; `Cts` moves the send to streaming.
    pub fn on_reply(s: Option<&mut Send>, from: u32, h: &Header) -> Result<Reply, Violation> {
        let unknown = Violation::UnknownSend {
            kind: h.kind,
            id: h.id,
        };
        let Some(s) = s.filter(|s| s.peer == from) else {
            return Err(unknown);
        };
        match h.kind {
            Kind::Fin | Kind::Ack => Ok(Reply::Done),
            Kind::Cts if s.len as u64 == h.len && s.phase == SendPhase::AwaitReply => {
                s.phase = SendPhase::Streaming {
                    recv_req: h.aux,
                    off: 0,
                };
                Ok(Reply::Push)
            }
            Kind::Split if s.len as u64 == h.len && s.phase == SendPhase::AwaitReply => {
                Ok(Reply::WriteHalf {
                    at: split_point(s.len),
                    remote: h.aux,
                    recv_req: h.ctx as u64 | ((h.src as u64) << 32),
                })
            }
            _ => Err(unknown),
        }
    }

    /// The next chunk of a streaming send, at most `max` bytes (the
    /// transport's largest payload); `None` when every byte is out (or the
    /// send is not streaming). [`Send::pushed`] once the transport took it.
    pub fn chunk(&self, max: usize) -> Option<Chunk> {
        let SendPhase::Streaming { recv_req, off } = self.phase else {
            return None;
        };
        if off >= self.len {
            return None;
        }
        let len = max.max(1).min(self.len - off);
        let mut header = Header::new(Kind::Data);
        header.id = recv_req;
        header.aux = off as u64;
        header.len = self.len as u64;
        Some(Chunk { header, off, len })
    }

    /// The transport took a chunk of `n` bytes.
    pub fn pushed(&mut self, n: usize) {
        if let SendPhase::Streaming { off, .. } = &mut self.phase {
            *off += n;
        }
    }

    /// Every byte of a streaming send is out.
    pub fn all_pushed(&self) -> bool {
        matches!(self.phase, SendPhase::Streaming { off, .. } if off >= self.len)
    }
}

/// A rendezvous message arriving in a receive: `total` bytes, `got` in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// Message bytes.
    pub total: usize,
    /// Bytes in the receive's buffer so far.
    pub got: usize,
}

/// What a frame for a receive asks ([`Incoming::on_frame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// `Data`: copy the frame's payload to byte `off` of the buffer.
    CopyAt {
        /// Where the chunk goes.
        off: usize,
        /// The message is complete with it.
        complete: bool,
    },
    /// `Wrote`: the sender wrote its half.
    Wrote {
        /// It could not: the receive fails.
        failed: bool,
        /// The message is complete.
        complete: bool,
    },
}

impl Incoming {
    /// A message of `total` bytes, none in yet.
    #[inline]
    pub fn new(total: usize) -> Incoming {
        Incoming { total, got: 0 }
    }

    /// `n` more bytes are in; whether the message is complete.
    #[inline]
    pub fn add(&mut self, n: usize) -> bool {
        self.got += n;
        self.got == self.total
    }

    /// Frame `h` with `payload` bytes for receive `r` (`None`: no open
    /// receive with a rendezvous under way has the id the frame names).
    /// A chunk must fall inside the message; the sender's half is counted
    /// once it is written.
    pub fn on_frame(
        r: Option<&mut Incoming>,
        h: &Header,
        payload: usize,
    ) -> Result<Arrival, Violation> {
        let Some(r) = r else {
            return Err(Violation::UnknownRecv {
                kind: h.kind,
                id: h.id,
            });
        };
        match h.kind {
            Kind::Data => {
                let off = usize::try_from(h.aux).unwrap_or(usize::MAX);
                if off.checked_add(payload).is_none_or(|end| end > r.total) {
                    return Err(Violation::ChunkOverrun {
                        off,
                        len: payload,
                        total: r.total,
                    });
                }
                Ok(Arrival::CopyAt {
                    off,
                    complete: r.add(payload),
                })
            }
            Kind::Wrote => Ok(Arrival::Wrote {
                failed: h.flags & 1 != 0,
                complete: r.add(r.total - split_point(r.total)),
            }),
            _ => Err(Violation::UnknownRecv {
                kind: h.kind,
                id: h.id,
            }),
        }
    }
}

/// A message that arrived before any receive matched it.
#[derive(Debug, PartialEq, Eq)]
pub enum Unexpected {
    /// An eager message, copied.
    Eager {
        /// The world rank it came from.
        from: u32,
        /// The message.
        data: Vec<u8>,
        /// A synchronous send's request, to acknowledge on matching.
        sync_id: Option<u64>,
    },
    /// A rendezvous message, still in the sender's memory.
    Rts {
        /// The world rank it came from.
        from: u32,
        /// Message bytes.
        len: usize,
        /// The sender's request.
        sender_req: u64,
        /// The sender's buffer address.
        addr: u64,
        /// The sender had rendezvous messages out to other ranks too
        /// ([`FLAG_FAN_OUT`]).
        fan_out: bool,
    },
}

impl Unexpected {
    /// The message's length in bytes.
    pub fn bytes(&self) -> usize {
        match self {
            Unexpected::Eager { data, .. } => data.len(),
            Unexpected::Rts { len, .. } => *len,
        }
    }
}

/// The header of an eager message of `len` bytes with envelope `env`.
#[inline(always)]
pub fn eager(env: &Envelope, len: usize) -> Header {
    let mut h = Header::new(Kind::Eager);
    h.ctx = env.ctx;
    h.src = env.src;
    h.tag = env.tag;
    h.len = len as u64;
    h
}

/// `Rts` for send request `id` of `len` bytes at `addr` in the sender;
/// `fan_out`: the sender has rendezvous messages out to other ranks too
/// ([`FLAG_FAN_OUT`]).
#[inline]
pub fn rts(env: &Envelope, len: usize, id: u64, addr: u64, fan_out: bool) -> Header {
    let mut h = eager(env, len);
    h.kind = Kind::Rts;
    h.id = id;
    h.aux = addr;
    if fan_out {
        h.flags |= FLAG_FAN_OUT;
    }
    h
}

/// Whether an `Rts`'s sender had rendezvous messages out to other ranks
/// too ([`FLAG_FAN_OUT`]).
#[inline]
pub fn rts_fan_out(h: &Header) -> bool {
    h.flags & FLAG_FAN_OUT != 0
}

/// A rendezvous arrival's length, checked to fit an address.
#[inline]
pub fn rts_len(h: &Header) -> Result<usize, Violation> {
    usize::try_from(h.len).map_err(|_| Violation::Length(h.len))
}

/// `Fin` (the message is in, or will never be: sender request `sender_req`
/// is complete).
#[inline]
pub fn fin(sender_req: u64) -> Header {
    reply(Kind::Fin, sender_req)
}

/// `Ack`: synchronous send `sender_req`'s message matched.
#[inline]
pub fn ack(sender_req: u64) -> Header {
    reply(Kind::Ack, sender_req)
}

/// `Cts`: push the `len`-byte message of `sender_req` to receive `recv_req`.
#[inline]
pub fn cts(sender_req: u64, recv_req: u64, len: usize) -> Header {
    let mut h = reply(Kind::Cts, sender_req);
    h.aux = recv_req;
    h.len = len as u64;
    h
}

/// `Split`: write the second half of `sender_req`'s `len`-byte message into
/// the buffer at `buf` of receive `recv_req` (carried in `ctx`, low 32 bits,
/// and `src`, high).
#[inline]
pub fn split(sender_req: u64, recv_req: u64, buf: u64, len: usize) -> Header {
    let mut h = reply(Kind::Split, sender_req);
    h.aux = buf;
    h.len = len as u64;
    h.ctx = recv_req as u32;
    h.src = (recv_req >> 32) as u32;
    h
}

/// `Wrote`: the sender's half of receive `recv_req` is written, or could not
/// be (`failed`).
#[inline]
pub fn wrote(recv_req: u64, failed: bool) -> Header {
    let mut h = reply(Kind::Wrote, recv_req);
    h.flags = u8::from(failed);
    h
}

#[inline]
fn reply(kind: Kind, id: u64) -> Header {
    let mut h = Header::new(kind);
    h.id = id;
    h
}

/// A point-to-point frame that does not fit this rank's state: dropped, with
/// this as the logged reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A reply names no open send with the peer it came from (or does not
    /// fit the send's length or phase).
    UnknownSend {
        /// The frame's kind.
        kind: Kind,
        /// The request it names.
        id: u64,
    },
    /// A frame names no receive with a rendezvous under way.
    UnknownRecv {
        /// The frame's kind.
        kind: Kind,
        /// The request it names.
        id: u64,
    },
    /// A chunk falls outside its message.
    ChunkOverrun {
        /// Its offset.
        off: usize,
        /// Its length.
        len: usize,
        /// The message's.
        total: usize,
    },
    /// An eager frame whose announced length is not its payload's.
    EagerLength {
        /// Announced.
        announced: u64,
        /// Carried.
        carried: usize,
    },
    /// A message length this machine cannot address.
    Length(u64),
    /// A frame of another service reached point-to-point.
    NotPointToPoint(Kind),
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Violation::UnknownSend { kind, id } => {
                write!(f, "{kind:?} for unknown send request {id:#x}")
            }
            Violation::UnknownRecv { kind, id } => {
                write!(f, "{kind:?} for unknown receive request {id:#x}")
            }
            Violation::ChunkOverrun { off, len, total } => write!(
                f,
                "data chunk at offset {off} of {len} bytes overruns the {total}-byte message"
            ),
            Violation::EagerLength { announced, carried } => {
                write!(
                    f,
                    "eager frame announces {announced} bytes, carries {carried}"
                )
            }
            Violation::NotPointToPoint(kind) => {
                write!(f, "a {kind:?} frame reached point-to-point")
            }
            Violation::Length(n) => {
                write!(f, "a {n}-byte message overflows this machine's addresses")
            }
        }
    }
}

impl std::error::Error for Violation {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ENV: Envelope = Envelope {
        ctx: 4,
        src: 0,
        tag: 9,
    };
    const RECEIVER: u32 = 1;

    #[test]
    fn unasked_limits_follow_the_ring_and_the_network_is_32k() {
        let host = |m: usize| Limits::new(Some(m), None, None, 0).unwrap();
        assert_eq!(
            (host(1 << 19).host, host(1 << 19).net),
            (64 << 10, 64 << 10)
        );
        assert_eq!(host(1 << 20).host, 64 << 10, "never above 64 KiB");
        assert_eq!(host(131_000).host, 16 << 10, "a quarter, a power of two");
        assert_eq!(host(40_000).host, 8 << 10, "never below 8 KiB");
        assert_eq!(host(4000).host, 4000, "unless the ring is smaller");
        let both = Limits::new(Some(1 << 19), Some(1 << 30), None, 0).unwrap();
        assert_eq!(
            (both.host, both.net, both.min),
            (64 << 10, 32 << 10, 32 << 10)
        );
        let small_net = Limits::new(Some(1 << 19), Some(10_000), None, 0).unwrap();
        assert_eq!(
            (small_net.host, small_net.net, small_net.min),
            (64 << 10, 10_000, 10_000)
        );
        let p = Protocol::new(small_net, true);
        assert!(p.eager(20_000, false, false) && !p.eager(20_000, true, false));
    }

    #[test]
    fn a_collectives_long_block_to_this_host_goes_by_rendezvous_while_single_copy_is_on() {
        let l = Limits::new(Some(1 << 19), Some(1 << 30), None, 0)
            .unwrap()
            .with_coll_copy(32 << 10);
        assert_eq!(
            (l.host, l.coll_host, l.min),
            (64 << 10, (32 << 10) - 1, 32 << 10)
        );
        let mut p = Protocol::new(l, true);
        assert_eq!(p.surely_eager, (32 << 10) - 1);
        assert!(p.eager((32 << 10) - 1, false, true) && !p.eager(32 << 10, false, true));
        assert!(
            p.eager(64 << 10, false, false),
            "point to point stays eager"
        );
        assert!(
            p.eager(32 << 10, true, true),
            "the network's limit is its own"
        );
        p.read_refused();
        assert!(
            p.eager(64 << 10, false, true),
            "no single copy: eager again"
        );
        assert!(!p.eager((64 << 10) + 1, false, true));
        let never = Limits::new(Some(1 << 19), None, None, 0)
            .unwrap()
            .with_coll_copy(1 << 30);
        assert_eq!(never.coll_host, never.host, "never above the eager limit");
        assert!(
            Protocol::new(l, false).eager(64 << 10, false, true),
            "the host chose no single copy"
        );
    }

    #[test]
    fn an_asked_limit_sets_both_and_must_fit_every_transport() {
        let l = Limits::new(Some(32_712), Some(1 << 30), Some(100), 0).unwrap();
        assert_eq!((l.host, l.net, l.min), (100, 100, 100));
        let e = Limits::new(Some(32_712), Some(4096), Some(8192), 0).unwrap_err();
        assert_eq!(
            e,
            LimitError {
                asked: 8192,
                largest: 4096
            }
        );
        assert!(
            e.to_string().contains("KUMI_EAGER_LIMIT=8192") && e.to_string().contains("4096 bytes")
        );
    }

    #[test]
    fn the_pull_follows_size_route_and_what_the_kernel_allowed() {
        let l = Limits::new(Some(1 << 19), None, None, 16 << 10).unwrap();
        let mut p = Protocol::new(l, true);
        assert_eq!(p.pull(100, 99, true, false), Pull::Truncated);
        assert_eq!(
            p.pull(1 << 20, 1 << 20, false, false),
            Pull::Push,
            "another host"
        );
        assert_eq!(
            p.pull(1 << 20, 1 << 20, true, false),
            Pull::Read,
            "no read has succeeded yet"
        );
        p.read_done();
        assert_eq!(
            p.pull(1 << 20, 1 << 20, true, false),
            Pull::Split { split: 1 << 19 }
        );
        assert_eq!(
            p.pull(1 << 20, 1 << 20, true, true),
            Pull::Read,
            "the sender has this rank's message, or others', to copy: read whole"
        );
        assert_eq!(
            p.pull((16 << 10) - 1, 1 << 20, true, false),
            Pull::Read,
            "below split_min"
        );
        p.read_refused();
        assert_eq!(
            p.pull(1 << 20, 1 << 20, true, false),
            Pull::Push,
            "refused once, pushed since"
        );
        assert_eq!(split_point(1000), 448, "cache-line aligned");
    }

    #[test]
    fn replies_that_do_not_fit_their_send_are_violations() {
        let mut s = Send::new(RECEIVER, 1000, true);
        let unknown = |h: &Header| Violation::UnknownSend {
            kind: h.kind,
            id: h.id,
        };
        let f = fin(5);
        assert_eq!(Send::on_reply(None, RECEIVER, &f), Err(unknown(&f)));
        assert_eq!(
            Send::on_reply(Some(&mut s), 7, &f),
            Err(unknown(&f)),
            "wrong peer"
        );
        let c = cts(5, 77, 999);
        assert_eq!(
            Send::on_reply(Some(&mut s), RECEIVER, &c),
            Err(unknown(&c)),
            "wrong length"
        );
        assert_eq!(
            Send::on_reply(Some(&mut s), RECEIVER, &eager(&ENV, 1000)),
            Err(unknown(&eager(&ENV, 1000)))
        );
        let c = cts(5, 77, 1000);
        assert_eq!(Send::on_reply(Some(&mut s), RECEIVER, &c), Ok(Reply::Push));
        assert_eq!(
            s.phase,
            SendPhase::Streaming {
                recv_req: 77,
                off: 0
            }
        );
        let sp = split(5, 77, 0x1000, 1000);
        assert_eq!(
            Send::on_reply(Some(&mut s), RECEIVER, &sp),
            Err(unknown(&sp)),
            "split while streaming"
        );
        assert_eq!(
            Send::on_reply(Some(&mut s), RECEIVER, &c),
            Err(unknown(&c)),
            "a second Cts"
        );
        assert!(unknown(&c)
            .to_string()
            .contains("Cts for unknown send request 0x5"));
    }

    #[test]
    fn frames_for_a_receive_stay_inside_its_message() {
        let mut r = Incoming::new(100);
        let mut d = Header::new(Kind::Data);
        d.id = 3;
        d.aux = 90;
        assert_eq!(
            Incoming::on_frame(Some(&mut r), &d, 11),
            Err(Violation::ChunkOverrun {
                off: 90,
                len: 11,
                total: 100
            })
        );
        d.aux = u64::MAX;
        assert!(
            Incoming::on_frame(Some(&mut r), &d, 1).is_err(),
            "offset overflow"
        );
        assert_eq!(
            Incoming::on_frame(None, &d, 1),
            Err(Violation::UnknownRecv {
                kind: Kind::Data,
                id: 3
            })
        );
        assert_eq!(r.got, 0, "nothing counted from refused frames");
        assert!(Incoming::on_frame(Some(&mut r), &fin(3), 0).is_err());
    }

    /// What one message of a generated schedule looks like.
    #[derive(Clone, Debug)]
    struct Msg {
        len: usize,
        cap: usize,
        same_host: bool,
        /// The kernel refuses this message's single-copy read.
        refuse_read: bool,
        /// The sender's write of its half fails.
        write_fails: bool,
        /// The transport's largest payload, for pushed chunks.
        chunk_max: usize,
        /// The receiver reads its half after the sender's `Wrote` arrived.
        read_late: bool,
        /// The sender had rendezvous messages out to other ranks too.
        fan_out: bool,
    }

    fn msg() -> impl Strategy<Value = Msg> {
        (
            1usize..5000,
            0usize..5000,
            any::<bool>(),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.1),
            1usize..1500,
            any::<bool>(),
            prop::bool::weighted(0.3),
        )
            .prop_map(
                |(len, cap, same_host, refuse_read, write_fails, chunk_max, read_late, fan_out)| {
                    Msg {
                        len,
                        cap: if cap % 3 == 0 { cap } else { len + cap % 7 },
                        same_host,
                        refuse_read,
                        write_fails,
                        chunk_max,
                        read_late,
                        fan_out,
                    }
                },
            )
    }

    /// How a receive ended.
    #[derive(Debug, PartialEq)]
    enum Outcome {
        Received,
        Truncated { message: usize, buffer: usize },
        Failed,
    }

    /// One rendezvous message carried out as the engine carries it out,
    /// over byte vectors: every frame goes through the encoder and the
    /// protocol's checks, every copy is one the protocol asked for. Returns
    /// how the receive ended and how the message moved.
    fn rendezvous(p: &mut Protocol, m: &Msg, seed: u8) -> (Outcome, Pull) {
        let message: Vec<u8> = (0..m.len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect();
        let mut buf = vec![0xEEu8; m.cap];
        let (sid, rid) = (0x1_0000_0005u64, 0x2_0000_0009u64);
        let mut send = Send::new(RECEIVER, m.len, true);
        let mut send_done = 0;
        let rts = Header::decode(&rts(&ENV, m.len, sid, 0x7000, m.fan_out).encode()).unwrap();
        let len = rts_len(&rts).unwrap();
        // Frames in flight, each way, in order.
        let mut to_sender: Vec<Header> = Vec::new();
        let mut to_receiver: Vec<(Header, Vec<u8>)> = Vec::new();
        let mut incoming = None;
        let mut failed = false;
        let mut recv_done = 0;
        let mut pending_read = None;
        let mut pull = p.pull(len, m.cap, m.same_host, rts_fan_out(&rts));
        let first = pull;
        match pull {
            Pull::Truncated => {
                to_sender.push(fin(rts.id));
                recv_done += 1;
            }
            Pull::Read if m.refuse_read => {
                p.read_refused();
                pull = Pull::Push;
            }
            Pull::Read => {
                buf[..len].copy_from_slice(&message);
                p.read_done();
                to_sender.push(fin(rts.id));
                recv_done += 1;
            }
            Pull::Split { split: at } => {
                incoming = Some(Incoming::new(len));
                to_sender.push(split(rts.id, rid, 0x9000, len));
                pending_read = Some(at);
            }
            Pull::Push => {}
        }
        if pull == Pull::Push {
            incoming = Some(Incoming::new(len));
            to_sender.push(cts(rts.id, rid, len));
        }
        let read_first_half = |buf: &mut Vec<u8>, incoming: &mut Option<Incoming>, at: usize| {
            buf[..at].copy_from_slice(&message[..at]);
            incoming.as_mut().unwrap().add(at)
        };
        if let (Some(at), false) = (pending_read, m.read_late) {
            if read_first_half(&mut buf, &mut incoming, at) {
                recv_done += 1;
            }
            to_sender.push(fin(rts.id));
            pending_read = None;
        }
        // The sender answers every reply; its chunks and writes reach the receiver.
        while !to_sender.is_empty() {
            for h in std::mem::take(&mut to_sender) {
                let h = Header::decode(&h.encode()).unwrap();
                match Send::on_reply(Some(&mut send), RECEIVER, &h).unwrap() {
                    Reply::Done => send_done += 1,
                    Reply::Push => {
                        while let Some(c) = send.chunk(m.chunk_max) {
                            assert!(c.len >= 1 && c.len <= m.chunk_max);
                            to_receiver.push((c.header, message[c.off..c.off + c.len].to_vec()));
                            send.pushed(c.len);
                        }
                        assert!(send.all_pushed());
                        send_done += 1;
                    }
                    Reply::WriteHalf {
                        at,
                        remote,
                        recv_req,
                    } => {
                        assert_eq!((remote, recv_req), (0x9000, rid));
                        if !m.write_fails {
                            buf[at..len].copy_from_slice(&message[at..]);
                        }
                        to_receiver.push((wrote(recv_req, m.write_fails), Vec::new()));
                    }
                }
            }
            for (h, data) in std::mem::take(&mut to_receiver) {
                let h = Header::decode(&h.encode()).unwrap();
                assert_eq!(h.id, rid);
                match Incoming::on_frame(incoming.as_mut(), &h, data.len()).unwrap() {
                    Arrival::CopyAt { off, complete } => {
                        buf[off..off + data.len()].copy_from_slice(&data);
                        recv_done += usize::from(complete);
                    }
                    Arrival::Wrote {
                        failed: f,
                        complete,
                    } => {
                        failed |= f;
                        recv_done += usize::from(complete);
                    }
                }
            }
            if let Some(at) = pending_read.take() {
                if read_first_half(&mut buf, &mut incoming, at) {
                    recv_done += 1;
                }
                to_sender.push(fin(rts.id));
            }
        }
        assert_eq!(send_done, 1, "the send completes exactly once: {m:?}");
        assert_eq!(recv_done, 1, "the receive completes exactly once: {m:?}");
        let outcome = if m.len > m.cap {
            Outcome::Truncated {
                message: m.len,
                buffer: m.cap,
            }
        } else if failed {
            Outcome::Failed
        } else {
            assert_eq!(&buf[..len], &message[..], "{m:?}");
            assert!(
                buf[len..].iter().all(|&b| b == 0xEE),
                "nothing beyond the message: {m:?}"
            );
            Outcome::Received
        };
        (outcome, first)
    }

    /// A split-copy minimum below two cache lines once split a short message
    /// at byte 0, and the receive completed twice when the sender's `Wrote`
    /// arrived before the (empty) read.
    #[test]
    fn a_message_too_short_to_halve_is_read_whole_not_split() {
        let mut p = Protocol::new(Limits::new(Some(1 << 16), None, None, 0).unwrap(), true);
        p.read_done();
        assert_eq!(p.pull(127, 200, true, false), Pull::Read);
        assert_eq!(p.pull(128, 200, true, false), Pull::Split { split: 64 });
        let m = Msg {
            len: 104,
            cap: 105,
            same_host: true,
            refuse_read: false,
            write_fails: false,
            chunk_max: 1,
            read_late: true,
            fan_out: false,
        };
        assert_eq!(rendezvous(&mut p, &m, 1), (Outcome::Received, Pull::Read));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Sequences of rendezvous messages through one rank's protocol:
        /// each arrives whole, exactly once, or fails saying why; a split
        /// copy comes only after a read succeeded and never from a sender
        /// with messages out to others, and never a single copy after one
        /// was refused or across hosts.
        #[test]
        fn every_rendezvous_delivers_each_message_once(
            msgs in prop::collection::vec(msg(), 1..6),
            split_min in 0usize..3000,
            single_copy in any::<bool>(),
        ) {
            let l = Limits::new(Some(1 << 16), Some(1 << 16), None, split_min).unwrap();
            let mut p = Protocol::new(l, single_copy);
            let (mut verified, mut refused) = (false, !single_copy);
            for (i, m) in msgs.iter().enumerate() {
                let (outcome, pull) = rendezvous(&mut p, m, i as u8);
                match pull {
                    Pull::Truncated => prop_assert!(m.len > m.cap),
                    Pull::Split { .. } => prop_assert!(
                        verified && !refused && m.same_host && m.len >= split_min && !m.fan_out
                    ),
                    Pull::Read => prop_assert!(!refused && m.same_host),
                    Pull::Push => prop_assert!(refused || !m.same_host),
                }
                match outcome {
                    Outcome::Truncated { message, buffer } => {
                        prop_assert_eq!((message, buffer), (m.len, m.cap))
                    }
                    Outcome::Failed => {
                        let split = matches!(pull, Pull::Split { .. });
                        prop_assert!(m.write_fails && split)
                    }
                    Outcome::Received => {}
                }
                if pull == Pull::Read {
                    verified |= !m.refuse_read;
                    refused |= m.refuse_read;
                }
            }
        }
    }
}
