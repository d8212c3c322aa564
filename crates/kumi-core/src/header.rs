//! The fixed header of every data-plane frame.
//!
//! 40 bytes, little-endian, the same on every transport. Its size is chosen so that
//! a shared-memory ring record (8-byte stamp + 8-byte length + header) leaves 8 bytes
//! of inline payload in the first 64-byte cache line: an 8-byte message crosses
//! between cores as one cache line. A header with `id` and `aux` zero (every
//! non-synchronous eager message) has a 24-byte compact form, which the ring
//! stores instead: up to 24 bytes of payload then fit in that line.
//!
//! Field use by kind (`id`, `aux` are opaque numbers chosen by the side named):
//!
//! | kind  | ctx/src/tag | len            | id                 | aux                  | payload |
//! |-------|-------------|----------------|--------------------|----------------------|---------|
//! | Eager | envelope    | message bytes  | sender request (sync sends) | 0           | message |
//! | Rts   | envelope    | message bytes  | sender request     | sender buffer address| none    |
//! | Cts   | 0           | message bytes  | sender request     | receiver request     | none    |
//! | Data  | 0           | message bytes  | receiver request   | byte offset          | chunk   |
//! | Fin   | 0           | 0              | sender request     | 0                    | none    |
//! | Ack   | 0           | 0              | sender request     | 0                    | none    |
//! | Split | recv request (ctx: low 32 bits, src: high) | message bytes | sender request | receiver buffer address | none |
//! | Wrote | 0           | 0              | receiver request   | 0                    | none    |
//! | Combine | p2p ctx of the communicator | payload bytes | 0           | 0                    | a `combine::Msg` |
//! | Rma   | window, origin rank, opcode | payload bytes (get: bytes asked) | origin request | byte offset | see `rma` |
//! | Ctx   | 0, members, 0 | key bytes (answer: 0) | asker's request | 0 (answer: the context) | the key (see `ctxsvc`) |
//!
//! `Split` / `Wrote` are the two-sided single copy: the receiver reads the first
//! half of the message out of the sender while the sender writes the second half
//! into the receiver, so both cores copy at once (see the runtime's engine).

/// Encoded size of a header in bytes.
pub const HEADER_BYTES: usize = 40;

/// Bytes of a header whose `id` and `aux` are zero, as a transport may carry
/// it: the encoding's first 24 bytes. The shared-memory ring stores such
/// headers so when the short form below does not apply (a `len` that is not
/// the payload's), which leaves 24 bytes of payload in a record's first
/// cache line instead of 8.
pub const COMPACT_HEADER_BYTES: usize = 24;

/// Bytes of a compact header whose `len` is its frame's payload length (every
/// eager message but a synchronous one), as a transport may carry it: the
/// encoding's first 16 bytes, `len` given back from the payload's length. The
/// shared-memory ring stores such headers so, which leaves 32 bytes of payload
/// in a record's first cache line.
pub const SHORT_HEADER_BYTES: usize = 16;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A whole message; its payload is the message.
    Eager = 1,
    /// Request to send a large message; the receiver pulls it (single copy) or
    /// answers `Cts` to have it pushed in `Data` chunks.
    Rts = 2,
    /// Clear to send: push the message in `Data` chunks to receiver request `aux`.
    Cts = 3,
    /// A chunk of a rendezvous message at byte offset `aux`.
    Data = 4,
    /// The receiver has pulled the whole message; sender request `id` is complete.
    Fin = 5,
    /// A synchronous eager message was matched; sender request `id` is complete.
    Ack = 6,
    /// The receiver reads the first half itself: write the second half into the
    /// receiver's buffer at `aux`, then answer `Wrote`.
    Split = 7,
    /// The sender has written its half into receiver request `id`.
    Wrote = 8,
    /// A combining-service message (a `combine::Msg` in the payload).
    Combine = 9,
    /// A one-sided access or its answer (an `rma::Msg`; see that module for
    /// what the fields mean).
    Rma = 10,
    /// A context for a nonblocking duplicate, asked of or answered by the
    /// context server (see `ctxsvc`).
    Ctx = 11,
    /// A distributed-shared-memory message (a `dsm::Msg` in the payload;
    /// `ctx` names the segment, `src` the sender's rank in it).
    Dsm = 12,
    /// A task-queue message (a `tasks::Msg` in the payload; `ctx` names the
    /// queue, `src` the sender's rank in it).
    Tasks = 13,
}

/// Flag: the sender waits for an `Ack` when the eager message is matched
/// (synchronous send).
pub const FLAG_SYNC: u8 = 1;

/// Flag on an `Rts`: when it went, its sender had rendezvous messages out
/// to other ranks too (a scatter's root, a neighbourhood exchange), so it
/// has copies of its own to serve; the receiver reads the message whole
/// rather than have the sender write half (`p2p::Protocol::pull`).
pub const FLAG_FAN_OUT: u8 = 2;

/// The header of a data-plane frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Frame kind.
    pub kind: Kind,
    /// Flags (`FLAG_*`).
    pub flags: u8,
    /// Communicator context id (matching context).
    pub ctx: u32,
    /// Sender's rank in the communicator of `ctx`.
    pub src: u32,
    /// Message tag.
    pub tag: i32,
    /// Total message length in bytes.
    pub len: u64,
    /// Request id (see the table in the module doc).
    pub id: u64,
    /// Auxiliary value (see the table in the module doc).
    pub aux: u64,
}

/// Why bytes could not be decoded as a header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes (the first number) than the form needs (the second).
    Short(usize, usize),
    /// The kind byte names no known frame kind.
    UnknownKind(u8),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Short(n, need) => {
                write!(f, "frame header truncated: {n} of {need} bytes")
            }
            DecodeError::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl Kind {
    fn from_u8(v: u8) -> Result<Kind, DecodeError> {
        Ok(match v {
            1 => Kind::Eager,
            2 => Kind::Rts,
            3 => Kind::Cts,
            4 => Kind::Data,
            5 => Kind::Fin,
            6 => Kind::Ack,
            7 => Kind::Split,
            8 => Kind::Wrote,
            9 => Kind::Combine,
            10 => Kind::Rma,
            11 => Kind::Ctx,
            12 => Kind::Dsm,
            13 => Kind::Tasks,
            k => return Err(DecodeError::UnknownKind(k)),
        })
    }
}

impl Header {
    /// A header of `kind` with every other field zero.
    pub const fn new(kind: Kind) -> Header {
        Header {
            kind,
            flags: 0,
            ctx: 0,
            src: 0,
            tag: 0,
            len: 0,
            id: 0,
            aux: 0,
        }
    }

    /// Encodes into exactly [`HEADER_BYTES`] bytes.
    #[inline]
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0] = self.kind as u8;
        b[1] = self.flags;
        b[4..8].copy_from_slice(&self.ctx.to_le_bytes());
        b[8..12].copy_from_slice(&self.src.to_le_bytes());
        b[12..16].copy_from_slice(&self.tag.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.id.to_le_bytes());
        b[32..40].copy_from_slice(&self.aux.to_le_bytes());
        b
    }

    /// Decodes the first [`HEADER_BYTES`] bytes of `b`. Checks only what the header
    /// alone can check (length, kind); ranks, contexts and lengths are checked by
    /// the receiver against its own state before use.
    #[inline]
    pub fn decode(b: &[u8]) -> Result<Header, DecodeError> {
        if b.len() < HEADER_BYTES {
            return Err(DecodeError::Short(b.len(), HEADER_BYTES));
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Header::with_prefix(b, u64_at(16), u64_at(24), u64_at(32))
    }

    /// The header whose first [`SHORT_HEADER_BYTES`] bytes are `b`'s (at
    /// least that many), with `len`, `id` and `aux` as given.
    #[inline]
    fn with_prefix(b: &[u8], len: u64, id: u64, aux: u64) -> Result<Header, DecodeError> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Ok(Header {
            kind: Kind::from_u8(b[0])?,
            flags: b[1],
            ctx: u32_at(4),
            src: u32_at(8),
            tag: u32_at(12) as i32,
            len,
            id,
            aux,
        })
    }

    /// Whether an encoded header may travel in its compact form (the first
    /// [`COMPACT_HEADER_BYTES`] bytes): its `id` and `aux` are zero.
    #[inline]
    pub fn compactable(encoded: &[u8; HEADER_BYTES]) -> bool {
        // Two word loads, not a loop over 16 bytes.
        let word = |i: usize| u64::from_ne_bytes(encoded[i..i + 8].try_into().expect("8 bytes"));
        word(24) | word(32) == 0
    }

    /// Decodes a compact header (the first [`COMPACT_HEADER_BYTES`] bytes of
    /// an encoding whose `id` and `aux` were zero).
    #[inline]
    pub fn decode_compact(b: &[u8]) -> Result<Header, DecodeError> {
        if b.len() < COMPACT_HEADER_BYTES {
            return Err(DecodeError::Short(b.len(), COMPACT_HEADER_BYTES));
        }
        let len = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        Header::with_prefix(b, len, 0, 0)
    }

    /// Decodes a short header (the first [`SHORT_HEADER_BYTES`] bytes of an
    /// encoding whose `id` and `aux` were zero), for a frame of `len` payload
    /// bytes.
    #[inline]
    pub fn decode_short(b: &[u8], len: usize) -> Result<Header, DecodeError> {
        if b.len() < SHORT_HEADER_BYTES {
            return Err(DecodeError::Short(b.len(), SHORT_HEADER_BYTES));
        }
        Header::with_prefix(b, len as u64, 0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::Eager),
            Just(Kind::Rts),
            Just(Kind::Cts),
            Just(Kind::Data),
            Just(Kind::Fin),
            Just(Kind::Ack),
            Just(Kind::Split),
            Just(Kind::Wrote),
            Just(Kind::Combine),
            Just(Kind::Rma),
            Just(Kind::Ctx),
            Just(Kind::Dsm),
            Just(Kind::Tasks)
        ]
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(k in kind(), flags: u8, ctx: u32, src: u32, tag: i32,
                                    len: u64, id: u64, aux: u64) {
            let h = Header { kind: k, flags, ctx, src, tag, len, id, aux };
            prop_assert_eq!(Header::decode(&h.encode()), Ok(h));
        }

        #[test]
        fn compact_form_round_trip(k in kind(), flags: u8, ctx: u32, src: u32, tag: i32,
                                   len: u64, id: u64, aux: u64) {
            let h = Header { kind: k, flags, ctx, src, tag, len, id, aux };
            let e = h.encode();
            prop_assert_eq!(Header::compactable(&e), id == 0 && aux == 0);
            if Header::compactable(&e) {
                prop_assert_eq!(Header::decode_compact(&e[..COMPACT_HEADER_BYTES]), Ok(h));
            }
        }

        /// Every header of an eager message (no `id`, no `aux`) comes back
        /// from its short form given the payload's length, and from its
        /// compact form.
        #[test]
        fn short_form_round_trip(k in kind(), flags: u8, ctx: u32, src: u32, tag: i32,
                                 len in 0usize..1 << 24) {
            let h = Header { kind: k, flags, ctx, src, tag, len: len as u64, id: 0, aux: 0 };
            let e = h.encode();
            prop_assert!(Header::compactable(&e));
            prop_assert_eq!(Header::decode_compact(&e[..COMPACT_HEADER_BYTES]), Ok(h));
            prop_assert_eq!(Header::decode_short(&e[..SHORT_HEADER_BYTES], len), Ok(h));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64),
                               len: usize) {
            let _ = Header::decode(&bytes);
            let _ = Header::decode_compact(&bytes);
            let _ = Header::decode_short(&bytes, len);
        }
    }

    #[test]
    fn rejects_unknown_kind_and_short_input() {
        let mut b = Header::new(Kind::Eager).encode();
        b[0] = 77;
        assert_eq!(Header::decode(&b), Err(DecodeError::UnknownKind(77)));
        assert_eq!(Header::decode(&b[..10]), Err(DecodeError::Short(10, 40)));
        assert_eq!(
            Header::decode_compact(&b[..23]),
            Err(DecodeError::Short(23, 24))
        );
        assert_eq!(
            Header::decode_short(&b[..15], 0),
            Err(DecodeError::Short(15, 16))
        );
    }
}
