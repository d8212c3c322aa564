//! What crosses a TCP data connection, byte by byte, without any I/O.
//!
//! A connection starts with a fixed-size handshake in which each side proves the
//! job secret without sending it:
//!
//! ```text
//! connector -> acceptor  HELLO   "KUMIDAT1" | from u32 | to u32 | nonce_c[32]     48 bytes
//! acceptor  -> connector ACCEPT  "KUMIACK1" | nonce_a[32] | mac_a[32]             72 bytes
//!                     or DUP     "KUMIDUP1" | 64 zero bytes                       72 bytes
//! connector -> acceptor  PROOF   mac_c[32]                                        32 bytes
//! ```
//!
//! `mac_a` and `mac_c` are HMAC-SHA256 under the job secret over a distinct
//! domain string each, the job id, both ranks and both nonces, so neither can be
//! replayed for another connection, another job, another pair of ranks or the
//! other direction. `DUP` answers a connection that lost a simultaneous-connect
//! race (see the parent module). Every handshake message has a fixed size, so
//! nothing is allocated for a peer before it has proven the secret.
//!
//! After the proof, frames follow: `payload_len u32 LE | Header (40 bytes) |
//! payload`. [`FrameReader`] checks the length against the transport's limit and
//! the kind against the known kinds *before* waiting for the payload, so a lying
//! peer costs at most the one bounded buffer each connection has.

use kumi_core::control::{mac_parts, verify_parts};
use kumi_core::header::{DecodeError, Header, HEADER_BYTES};
use std::fmt;

/// Magic that opens a connector's HELLO.
pub const HELLO_MAGIC: &[u8; 8] = b"KUMIDAT1";
/// Magic of an acceptor's answer that accepts.
pub const ACCEPT_MAGIC: &[u8; 8] = b"KUMIACK1";
/// Magic of an acceptor's answer to a duplicate connection.
pub const DUP_MAGIC: &[u8; 8] = b"KUMIDUP1";
/// Length of nonces and MACs.
pub const NONCE: usize = 32;
/// Length of a HELLO.
pub const HELLO_BYTES: usize = 8 + 4 + 4 + NONCE;
/// Length of an ACCEPT or DUP.
pub const ANSWER_BYTES: usize = 8 + NONCE + NONCE;
/// Length of a PROOF.
pub const PROOF_BYTES: usize = NONCE;
/// Bytes before a frame's payload: the payload length and the header.
pub const FRAME_PREFIX: usize = 4 + HEADER_BYTES;

const ACCEPT_DOMAIN: &[u8] = b"kumi-data-accept";
const CONNECT_DOMAIN: &[u8] = b"kumi-data-connect";

/// A connector's HELLO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The connector's rank.
    pub from: u32,
    /// The rank it wants to reach.
    pub to: u32,
    /// The connector's nonce.
    pub nonce: [u8; NONCE],
}

impl Hello {
    /// Encodes the HELLO.
    pub fn encode(&self) -> [u8; HELLO_BYTES] {
        let mut b = [0u8; HELLO_BYTES];
        b[..8].copy_from_slice(HELLO_MAGIC);
        b[8..12].copy_from_slice(&self.from.to_le_bytes());
        b[12..16].copy_from_slice(&self.to.to_le_bytes());
        b[16..].copy_from_slice(&self.nonce);
        b
    }

    /// Decodes a HELLO; `None` if the magic is wrong (not a kumi data connection).
    pub fn decode(b: &[u8; HELLO_BYTES]) -> Option<Hello> {
        if &b[..8] != HELLO_MAGIC {
            return None;
        }
        let mut nonce = [0u8; NONCE];
        nonce.copy_from_slice(&b[16..]);
        Some(Hello {
            from: u32::from_le_bytes(b[8..12].try_into().ok()?),
            to: u32::from_le_bytes(b[12..16].try_into().ok()?),
            nonce,
        })
    }
}

/// The acceptor's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Accepted; the acceptor's nonce and its proof.
    Accept {
        /// The acceptor's nonce.
        nonce: [u8; NONCE],
        /// The acceptor's proof (see [`accept_mac`]).
        mac: [u8; NONCE],
    },
    /// The acceptor keeps another connection between the two ranks.
    Duplicate,
}

impl Answer {
    /// Encodes the answer.
    pub fn encode(&self) -> [u8; ANSWER_BYTES] {
        let mut b = [0u8; ANSWER_BYTES];
        match self {
            Answer::Accept { nonce, mac } => {
                b[..8].copy_from_slice(ACCEPT_MAGIC);
                b[8..40].copy_from_slice(nonce);
                b[40..].copy_from_slice(mac);
            }
            Answer::Duplicate => b[..8].copy_from_slice(DUP_MAGIC),
        }
        b
    }

    /// Decodes an answer; `None` if it is neither.
    pub fn decode(b: &[u8; ANSWER_BYTES]) -> Option<Answer> {
        if &b[..8] == DUP_MAGIC {
            return Some(Answer::Duplicate);
        }
        if &b[..8] != ACCEPT_MAGIC {
            return None;
        }
        let mut nonce = [0u8; NONCE];
        let mut mac = [0u8; NONCE];
        nonce.copy_from_slice(&b[8..40]);
        mac.copy_from_slice(&b[40..]);
        Some(Answer::Accept { nonce, mac })
    }
}

/// Everything a proof is bound to.
#[derive(Clone, Copy, Debug)]
pub struct Binding<'a> {
    /// The job secret.
    pub secret: &'a [u8],
    /// The job id.
    pub job: &'a str,
    /// Connecting rank.
    pub from: u32,
    /// Accepting rank.
    pub to: u32,
    /// The connector's nonce.
    pub nonce_c: &'a [u8; NONCE],
    /// The acceptor's nonce.
    pub nonce_a: &'a [u8; NONCE],
}

impl Binding<'_> {
    fn parts<'b>(&'b self, domain: &'b [u8], from: &'b [u8; 4], to: &'b [u8; 4]) -> [&'b [u8]; 6] {
        [
            domain,
            self.job.as_bytes(),
            from,
            to,
            self.nonce_c,
            self.nonce_a,
        ]
    }

    /// The proof of this binding in `domain` (each handshake message and
    /// each transport has its own domain, so no proof is valid for another).
    pub fn mac_in(&self, domain: &[u8]) -> [u8; NONCE] {
        let (f, t) = (self.from.to_le_bytes(), self.to.to_le_bytes());
        to_array(mac_parts(self.secret, &self.parts(domain, &f, &t)))
    }

    /// Checks a proof made by [`Binding::mac_in`] in `domain`, in constant time.
    pub fn verify_in(&self, domain: &[u8], mac: &[u8]) -> bool {
        let (f, t) = (self.from.to_le_bytes(), self.to.to_le_bytes());
        verify_parts(self.secret, &self.parts(domain, &f, &t), mac)
    }
}

fn to_array(v: Vec<u8>) -> [u8; NONCE] {
    let mut a = [0u8; NONCE];
    let n = v.len().min(NONCE);
    a[..n].copy_from_slice(&v[..n]);
    a
}

/// The acceptor's proof.
pub fn accept_mac(b: &Binding<'_>) -> [u8; NONCE] {
    b.mac_in(ACCEPT_DOMAIN)
}

/// The connector's proof.
pub fn connect_mac(b: &Binding<'_>) -> [u8; NONCE] {
    b.mac_in(CONNECT_DOMAIN)
}

/// Checks the acceptor's proof in constant time.
pub fn verify_accept(b: &Binding<'_>, mac: &[u8]) -> bool {
    b.verify_in(ACCEPT_DOMAIN, mac)
}

/// Checks the connector's proof in constant time.
pub fn verify_connect(b: &Binding<'_>, mac: &[u8]) -> bool {
    b.verify_in(CONNECT_DOMAIN, mac)
}

/// Writes a frame's prefix (payload length and header).
pub fn frame_prefix(h: &Header, payload_len: usize) -> [u8; FRAME_PREFIX] {
    let mut b = [0u8; FRAME_PREFIX];
    b[..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
    b[4..].copy_from_slice(&h.encode());
    b
}

/// Why a byte stream is not a valid sequence of frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// A frame announces a payload above the limit.
    TooLong {
        /// Announced payload bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The header does not decode (unknown kind).
    BadHeader(DecodeError),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::TooLong { len, max } => {
                write!(
                    f,
                    "a frame announces {len} payload bytes, above the limit of {max}"
                )
            }
            WireError::BadHeader(e) => write!(f, "bad frame header: {e}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Reassembles frames from a byte stream into one buffer of fixed capacity
/// (`FRAME_PREFIX + max_payload`), allocated once: a frame always fits, and no
/// input makes it grow.
#[derive(Debug)]
pub struct FrameReader {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    max_payload: usize,
}

impl FrameReader {
    /// A reader for frames of at most `max_payload` payload bytes.
    pub fn new(max_payload: usize) -> FrameReader {
        FrameReader {
            buf: vec![0u8; FRAME_PREFIX + max_payload].into_boxed_slice(),
            start: 0,
            end: 0,
            max_payload,
        }
    }

    /// Bytes buffered that do not form a whole frame yet.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Free space to read into (never empty after [`FrameReader::next_frame`]
    /// returned `Ok(None)`). Call [`FrameReader::filled`] with what was written.
    pub fn space(&mut self) -> &mut [u8] {
        if self.start > 0 && (self.start == self.end || self.buf.len() - self.end < FRAME_PREFIX) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// Records `n` bytes written into [`FrameReader::space`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Copies bytes in (for tests and callers without a socket); returns how many
    /// fitted.
    pub fn push(&mut self, bytes: &[u8]) -> usize {
        let space = self.space();
        let n = space.len().min(bytes.len());
        space[..n].copy_from_slice(&bytes[..n]);
        self.filled(n);
        n
    }

    /// The next whole frame, if buffered. An error means the stream is corrupt:
    /// drop the connection.
    pub fn next_frame(&mut self) -> Result<Option<(Header, &[u8])>, WireError> {
        let avail = self.end - self.start;
        if avail < FRAME_PREFIX {
            return Ok(None);
        }
        let b = &self.buf[self.start..self.end];
        let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len > self.max_payload {
            return Err(WireError::TooLong {
                len,
                max: self.max_payload,
            });
        }
        let h = Header::decode(&b[4..FRAME_PREFIX]).map_err(WireError::BadHeader)?;
        if avail < FRAME_PREFIX + len {
            // Make sure the rest of the frame fits behind what is buffered.
            if self.buf.len() - self.start < FRAME_PREFIX + len {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            return Ok(None);
        }
        let p = self.start + FRAME_PREFIX;
        self.start += FRAME_PREFIX + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            // The slice below stays valid: resetting the indices moves no bytes.
        }
        Ok(Some((h, &self.buf[p..p + len])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kumi_core::header::Kind;
    use proptest::prelude::*;

    fn frame(h: &Header, payload: &[u8]) -> Vec<u8> {
        let mut v = frame_prefix(h, payload.len()).to_vec();
        v.extend_from_slice(payload);
        v
    }

    /// Feeds `bytes` in pieces of `step`, collecting frames until an error.
    fn run(bytes: &[u8], step: usize, max: usize) -> (Vec<(Header, Vec<u8>)>, Option<WireError>) {
        let mut r = FrameReader::new(max);
        let mut got = Vec::new();
        let mut i = 0;
        loop {
            loop {
                match r.next_frame() {
                    Ok(Some((h, p))) => got.push((h, p.to_vec())),
                    Ok(None) => break,
                    Err(e) => return (got, Some(e)),
                }
            }
            if i >= bytes.len() {
                return (got, None);
            }
            let end = (i + step).min(bytes.len());
            let n = r.push(&bytes[i..end]);
            assert!(
                n > 0,
                "the reader must always have room for more of a frame"
            );
            i += n;
        }
    }

    #[test]
    fn oversize_frame_is_refused_before_its_payload() {
        let mut h = Header::new(Kind::Eager);
        h.len = 100;
        let mut bytes = frame_prefix(&h, 100).to_vec();
        let (got, err) = run(&bytes, 7, 64);
        assert!(got.is_empty());
        assert_eq!(err, Some(WireError::TooLong { len: 100, max: 64 }));
        bytes[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            run(&bytes, 44, 64).1,
            Some(WireError::TooLong { .. })
        ));
    }

    #[test]
    fn unknown_kind_is_refused() {
        let mut bytes = frame(&Header::new(Kind::Eager), b"abc");
        bytes[4] = 99;
        assert_eq!(
            run(&bytes, 1, 64).1,
            Some(WireError::BadHeader(DecodeError::UnknownKind(99)))
        );
    }

    #[test]
    fn truncated_frame_stays_pending() {
        let bytes = frame(&Header::new(Kind::Data), &[7u8; 50]);
        let mut r = FrameReader::new(64);
        r.push(&bytes[..bytes.len() - 1]);
        assert_eq!(r.next_frame(), Ok(None));
        assert_eq!(r.pending(), bytes.len() - 1);
    }

    #[test]
    fn handshake_proofs_bind_everything() {
        let (nc, na) = ([1u8; NONCE], [2u8; NONCE]);
        let b = Binding {
            secret: b"s",
            job: "j1",
            from: 1,
            to: 2,
            nonce_c: &nc,
            nonce_a: &na,
        };
        let a = accept_mac(&b);
        let c = connect_mac(&b);
        assert!(verify_accept(&b, &a) && verify_connect(&b, &c));
        assert!(!verify_accept(&b, &c), "the two directions must differ");
        let other = Binding { from: 3, ..b };
        assert!(!verify_connect(&other, &c));
        let wrong = Binding { secret: b"t", ..b };
        assert!(!verify_connect(&wrong, &c));
        let h = Hello {
            from: 5,
            to: 6,
            nonce: nc,
        };
        assert_eq!(Hello::decode(&h.encode()), Some(h));
        let ans = Answer::Accept { nonce: na, mac: a };
        assert_eq!(Answer::decode(&ans.encode()), Some(ans));
        assert_eq!(
            Answer::decode(&Answer::Duplicate.encode()),
            Some(Answer::Duplicate)
        );
        assert_eq!(Hello::decode(&[0u8; HELLO_BYTES]), None);
    }

    fn kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::Eager),
            Just(Kind::Rts),
            Just(Kind::Cts),
            Just(Kind::Data),
            Just(Kind::Fin),
            Just(Kind::Ack)
        ]
    }

    proptest! {
        /// Valid frames come out whole and in order from any split of the stream.
        #[test]
        fn frames_survive_any_split(
            frames in proptest::collection::vec((kind(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..300)), 0..12),
            step in 1usize..700,
        ) {
            let mut bytes = Vec::new();
            let mut want = Vec::new();
            for (k, id, p) in &frames {
                let mut h = Header::new(*k);
                h.id = *id;
                h.len = p.len() as u64;
                bytes.extend(frame(&h, p));
                want.push((h, p.clone()));
            }
            let (got, err) = run(&bytes, step, 300);
            prop_assert_eq!(err, None);
            prop_assert_eq!(got, want);
        }

        /// Arbitrary bytes never panic the reader, never make it allocate, and
        /// every frame it yields respects the limit.
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2000), step in 1usize..600) {
            let (got, _) = run(&bytes, step, 256);
            for (_, p) in got {
                prop_assert!(p.len() <= 256);
            }
        }

        /// A valid prefix followed by garbage yields the valid frames first.
        #[test]
        fn corruption_after_valid_frames(n in 0usize..5, junk in proptest::collection::vec(any::<u8>(), 44..200)) {
            let mut bytes = Vec::new();
            for i in 0..n {
                let mut h = Header::new(Kind::Eager);
                h.id = i as u64;
                bytes.extend(frame(&h, &[i as u8; 10]));
            }
            bytes.extend(&junk);
            let (got, _) = run(&bytes, 13, 128);
            prop_assert!(got.len() >= n);
            for (i, (h, _)) in got.iter().take(n).enumerate() {
                prop_assert_eq!(h.id, i as u64);
            }
        }
    }
}
