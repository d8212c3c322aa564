//! What the UDP transport puts in a datagram, byte by byte, without any I/O.
//!
//! Every datagram starts with the same 16-byte prefix:
//!
//! ```text
//! "KUD1" | type u8 | 3 zero bytes | from u32 | to u32
//! ```
//!
//! then, by type:
//!
//! ```text
//! HELLO      nonce_c[32] | 64 zero bytes                  112 bytes
//! CHALLENGE  nonce_c[32] | nonce_a[32] | mac_a[32]        112 bytes
//! PROOF      nonce_c[32] | nonce_a[32] | mac_c[32]        112 bytes
//! DATA       token u64 | a `kumi_core::rudp` datagram
//! ```
//!
//! The handshake is the TCP transport's (see `tcp::wire`) over datagrams:
//! `mac_a`, `mac_c` and the session `token` are HMAC-SHA256 under the job
//! secret over a domain string each, the job id, both ranks and both nonces.
//! The token is therefore itself a proof of the secret, bound to this session:
//! a datagram that carries it was sent by the peer (or someone on the path
//! between), and an off-path stranger cannot guess it. A HELLO is padded to the
//! size of the CHALLENGE it provokes, so a forged source address gains no
//! amplification.

/// Magic that opens every datagram.
pub const MAGIC: &[u8; 4] = b"KUD1";
/// Bytes of the common prefix.
pub const PREFIX: usize = 16;
/// Length of nonces and MACs.
pub const NONCE: usize = 32;
/// Bytes of every handshake datagram.
pub const HANDSHAKE_BYTES: usize = PREFIX + 3 * NONCE;
/// Bytes before a data datagram's `rudp` part.
pub const DATA_PREFIX: usize = PREFIX + 8;

/// Datagram types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Type {
    /// A dialer's greeting.
    Hello = 1,
    /// The answer: the acceptor's nonce and proof.
    Challenge = 2,
    /// The dialer's proof.
    Proof = 3,
    /// Session traffic.
    Data = 4,
}

/// The common prefix of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// What follows.
    pub ty: Type,
    /// Sender's rank (as claimed).
    pub from: u32,
    /// Receiver's rank.
    pub to: u32,
}

impl Prefix {
    /// Appends the prefix to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[self.ty as u8, 0, 0, 0]);
        out.extend_from_slice(&self.from.to_le_bytes());
        out.extend_from_slice(&self.to.to_le_bytes());
    }

    /// Reads the prefix; `None` if this is not a kumi datagram.
    pub fn read(d: &[u8]) -> Option<Prefix> {
        if d.len() < PREFIX || &d[..4] != MAGIC || d[5..8] != [0, 0, 0] {
            return None;
        }
        let ty = match d[4] {
            1 => Type::Hello,
            2 => Type::Challenge,
            3 => Type::Proof,
            4 => Type::Data,
            _ => return None,
        };
        Some(Prefix {
            ty,
            from: u32::from_le_bytes(d[8..12].try_into().ok()?),
            to: u32::from_le_bytes(d[12..16].try_into().ok()?),
        })
    }
}

/// A handshake datagram's body (after the prefix): two nonces and a MAC.
/// For a HELLO only `nonce_c` is meaningful.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handshake {
    /// The dialer's nonce.
    pub nonce_c: [u8; NONCE],
    /// The acceptor's nonce.
    pub nonce_a: [u8; NONCE],
    /// The proof.
    pub mac: [u8; NONCE],
}

impl Handshake {
    /// Encodes the whole datagram.
    pub fn encode(&self, p: Prefix) -> Vec<u8> {
        let mut out = Vec::with_capacity(HANDSHAKE_BYTES);
        p.write(&mut out);
        out.extend_from_slice(&self.nonce_c);
        out.extend_from_slice(&self.nonce_a);
        out.extend_from_slice(&self.mac);
        out
    }

    /// Decodes a handshake datagram of exactly [`HANDSHAKE_BYTES`].
    pub fn decode(d: &[u8]) -> Option<Handshake> {
        if d.len() != HANDSHAKE_BYTES {
            return None;
        }
        let mut h = Handshake {
            nonce_c: [0; NONCE],
            nonce_a: [0; NONCE],
            mac: [0; NONCE],
        };
        h.nonce_c.copy_from_slice(&d[PREFIX..PREFIX + NONCE]);
        h.nonce_a
            .copy_from_slice(&d[PREFIX + NONCE..PREFIX + 2 * NONCE]);
        h.mac.copy_from_slice(&d[PREFIX + 2 * NONCE..]);
        Some(h)
    }
}

/// Everything a proof is bound to: the same as TCP's handshake, with the
/// UDP handshake's own domains below.
pub use crate::tcp::wire::Binding;

const ACCEPT_DOMAIN: &[u8] = b"kumi-udp-accept";
const CONNECT_DOMAIN: &[u8] = b"kumi-udp-connect";
const TOKEN_DOMAIN: &[u8] = b"kumi-udp-token";

impl Binding<'_> {
    /// The acceptor's proof in the UDP handshake.
    pub fn udp_accept_mac(&self) -> [u8; NONCE] {
        self.mac_in(ACCEPT_DOMAIN)
    }

    /// The dialer's proof in the UDP handshake.
    pub fn udp_connect_mac(&self) -> [u8; NONCE] {
        self.mac_in(CONNECT_DOMAIN)
    }

    /// Checks the acceptor's UDP proof (constant time).
    pub fn udp_verify_accept(&self, mac: &[u8]) -> bool {
        self.verify_in(ACCEPT_DOMAIN, mac)
    }

    /// Checks the dialer's UDP proof (constant time).
    pub fn udp_verify_connect(&self, mac: &[u8]) -> bool {
        self.verify_in(CONNECT_DOMAIN, mac)
    }

    /// The session token both ends put in every data datagram.
    pub fn udp_token(&self) -> u64 {
        let m = self.mac_in(TOKEN_DOMAIN);
        let mut b = [0u8; 8];
        b.copy_from_slice(&m[..8]);
        u64::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_round_trips_and_rejects_strangers() {
        let p = Prefix {
            ty: Type::Proof,
            from: 3,
            to: 9,
        };
        let mut b = Vec::new();
        p.write(&mut b);
        assert_eq!(Prefix::read(&b), Some(p));
        b[4] = 77;
        assert_eq!(Prefix::read(&b), None);
        assert_eq!(Prefix::read(b"KUD1"), None);
    }

    #[test]
    fn proofs_bind_everything() {
        let (n1, n2) = ([1u8; NONCE], [2u8; NONCE]);
        let b = Binding {
            secret: b"s",
            job: "j",
            from: 0,
            to: 1,
            nonce_c: &n1,
            nonce_a: &n2,
        };
        assert!(b.udp_verify_accept(&b.udp_accept_mac()));
        assert!(!b.udp_verify_accept(&b.udp_connect_mac()));
        let other = Binding { to: 2, ..b };
        assert!(!other.udp_verify_connect(&b.udp_connect_mac()));
        assert_ne!(b.udp_token(), other.udp_token());
        let wrong = Binding { secret: b"t", ..b };
        assert!(!wrong.udp_verify_connect(&b.udp_connect_mac()));
    }

    proptest! {
        #[test]
        fn random_bytes_decode_or_are_refused(d in proptest::collection::vec(any::<u8>(), 0..130)) {
            let _ = Prefix::read(&d);
            let _ = Handshake::decode(&d);
        }
    }
}
