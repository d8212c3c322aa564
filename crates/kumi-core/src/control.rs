//! The control channel between a rank and its launcher.
//!
//! A rank connects to the launcher's control socket (named by `KUMI_CONTROL`),
//! proves it knows the job secret, and then uses the channel for the key-value
//! exchange of bootstrap, fences, abort and finalize. The launcher never trusts a
//! connection before the proof: the first frame it sends is a random challenge, and
//! the only frame it accepts in reply is a [`ToLauncher::Hello`] whose `mac` is the
//! HMAC-SHA256 of the challenge under the secret. The secret itself never crosses
//! the socket.
//!
//! Framing: a little-endian `u32` body length, then the body in postcard encoding.
//! [`FrameDecoder`] reassembles frames from any split of the byte stream and refuses
//! a length above [`MAX_FRAME`] *before* allocating for it.

use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};

/// Largest control frame body accepted, in bytes.
pub const MAX_FRAME: usize = 1 << 20;
/// Length of a challenge nonce and of a MAC, in bytes.
pub const NONCE_BYTES: usize = 32;

/// Frames a rank sends to the launcher.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToLauncher {
    /// The answer to the challenge: who the rank is, and the proof.
    Hello {
        /// Job id the rank believes it belongs to.
        job: String,
        /// Global rank.
        rank: u32,
        /// Process id of the rank.
        pid: u32,
        /// HMAC-SHA256(secret, "kumi-control" || nonce || job || rank).
        mac: Vec<u8>,
    },
    /// Publish a key (bootstrap address cards and the like).
    Put {
        /// Key.
        key: String,
        /// Value.
        value: Vec<u8>,
    },
    /// Wait until every rank of the job has sent `Fence`; then all earlier puts are
    /// visible to every rank.
    Fence,
    /// Read a key published before the last fence.
    Get {
        /// Key.
        key: String,
    },
    /// The rank aborts the whole job with this exit code.
    Abort {
        /// Exit code for the job.
        code: i32,
        /// Why, in the user's words.
        message: String,
    },
    /// The rank has finalized; an exit that follows is a normal end.
    Finalize,
    /// Supervision: a long wait began or ended, or counters.
    Report(crate::deadlock::Report),
    /// Instead of `Hello`: a read-only monitor (`kumi top`, `kumi ps`). It needs
    /// no proof of the secret: the server accepts only peers of the job owner's
    /// uid, who can read the ranks' memory anyway, and a monitor can only read.
    Monitor,
    /// A monitor asks for the job's state; answered with `ToRank::Snapshot`.
    Snapshot,
}

/// Frames the launcher sends to a rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToRank {
    /// The first frame on every connection.
    Challenge {
        /// Random bytes the rank must MAC.
        nonce: Vec<u8>,
    },
    /// The proof was good; the channel is open.
    Welcome,
    /// The connection is refused; the launcher closes it after this frame.
    Refused {
        /// Why.
        reason: String,
    },
    /// Every rank has reached the fence.
    FenceDone,
    /// Answer to `Get`.
    Value {
        /// Key asked for.
        key: String,
        /// Its value, or `None` if nobody published it.
        value: Option<Vec<u8>>,
    },
    /// To a monitor: the job's state.
    Snapshot(crate::deadlock::Snapshot),
    /// From the supervisor of a job a process manager started (`srun`),
    /// which cannot signal the ranks: end now with this exit code (it has
    /// printed why).
    End {
        /// The exit code.
        code: i32,
    },
}

/// One program of a job and the ranks that run it. A job is one or more
/// (MPMD: `kumi run -n 1 ./a : -n 3 ./b`), ranked in order: the first app's
/// ranks are 0.., the next app's follow, and each rank's `KUMI_APPNUM` is
/// its app's index. Bytes, since Unix programs and arguments need not be
/// UTF-8.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct App {
    /// Program to execute (looked up in `PATH` when it has no `/`).
    pub program: Vec<u8>,
    /// Its arguments.
    pub args: Vec<Vec<u8>>,
    /// How many ranks run it.
    pub ranks: u32,
    /// Variables set for these ranks only (over the job's).
    pub env: Vec<(String, String)>,
    /// Their working directory (`None`: the launcher's, or the agent's on
    /// another host).
    pub wdir: Option<Vec<u8>>,
}

/// The app that global `rank` runs and its index (`None`: beyond the job).
pub fn app_of(apps: &[App], rank: u32) -> Option<(u32, &App)> {
    let mut first = 0u32;
    for (i, a) in apps.iter().enumerate() {
        if rank >= first && rank - first < a.ranks {
            return Some((i as u32, a));
        }
        first = first.checked_add(a.ranks)?;
    }
    None
}

/// Frames the launcher sends to the agent of a remote host (over the remote
/// shell's standard input; same framing as the rank channel).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
// `Start` is sent once per host and job; boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum ToAgent {
    /// Start this host's ranks. Always the first frame.
    Start {
        /// What every rank of the job is told.
        job: crate::rankenv::JobVars,
        /// What every rank of this host is told.
        host: crate::rankenv::HostVars,
        /// Index of the host in the job.
        node: u32,
        /// The job's programs, in rank order (see [`App`]).
        apps: Vec<App>,
        /// Global ranks of this host, in local-rank order.
        ranks: Vec<u32>,
        /// The user's `KUMI_*` variables, forwarded (a remote shell need
        /// not pass the environment on).
        env: Vec<(String, String)>,
        /// Prefix output lines with `[<rank>] `.
        tag_output: bool,
    },
    /// Stop the ranks (SIGTERM, then SIGKILL after the grace).
    Stop,
    /// Kill the ranks now.
    Kill,
}

/// Frames an agent sends to the launcher (over the remote shell's standard
/// output).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FromAgent {
    /// The ranks are running.
    Started {
        /// Their process ids, in local order.
        pids: Vec<u32>,
    },
    /// The ranks could not be started; the agent exits.
    Failed {
        /// Exit code the launcher should use.
        code: i32,
        /// Why.
        message: String,
    },
    /// Whole output lines, already tagged.
    Output {
        /// Standard error (else standard output).
        stderr: bool,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A rank ended.
    Reaped {
        /// Global rank.
        rank: u32,
        /// Process id.
        pid: u32,
        /// Exit code, if it exited.
        code: Option<i32>,
        /// Signal, if one killed it.
        signal: Option<i32>,
        /// Code of the kumi call it was in.
        call: u32,
    },
    /// Every rank is reaped and every output line sent; the agent exits.
    Done,
}

/// Why a frame could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The announced body length is above [`MAX_FRAME`].
    TooLong(usize),
    /// The body is not a valid message.
    Malformed(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLong(n) => write!(
                f,
                "control frame of {n} bytes exceeds the limit of {MAX_FRAME}"
            ),
            FrameError::Malformed(e) => write!(f, "malformed control frame: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Encodes a message as one frame (length prefix + body).
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = postcard::to_stdvec(msg).expect("control messages always serialize");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reassembles frames from a byte stream.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that do not yet form a whole frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame, if one is buffered. An error means the stream is
    /// corrupt and the connection must be dropped.
    pub fn next_frame<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes(self.buf[..4].try_into().expect("4 bytes")) as usize;
        if len > MAX_FRAME {
            return Err(FrameError::TooLong(len));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let msg = postcard::from_bytes(&self.buf[4..4 + len])
            .map_err(|e| FrameError::Malformed(e.to_string()));
        self.buf.drain(..4 + len);
        msg.map(Some)
    }
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The proof a rank sends for `nonce`: HMAC-SHA256 under the job secret, bound to
/// the job id and the rank so a proof cannot be replayed for another identity.
pub fn prove(secret: &[u8], nonce: &[u8], job: &str, rank: u32) -> Vec<u8> {
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(b"kumi-control");
    mac.update(nonce);
    mac.update(job.as_bytes());
    mac.update(&rank.to_le_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// Checks a proof in constant time.
pub fn verify(secret: &[u8], nonce: &[u8], job: &str, rank: u32, proof: &[u8]) -> bool {
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(b"kumi-control");
    mac.update(nonce);
    mac.update(job.as_bytes());
    mac.update(&rank.to_le_bytes());
    mac.verify_slice(proof).is_ok()
}

/// HMAC-SHA256 under `secret` over `parts` in order (each part should start with
/// a domain string naming its use, so proofs of one protocol never pass in
/// another). Used by the data connections of the network transport.
pub fn mac_parts(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().to_vec()
}

/// Checks a [`mac_parts`] proof in constant time.
pub fn verify_parts(secret: &[u8], parts: &[&[u8]], proof: &[u8]) -> bool {
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    for p in parts {
        mac.update(p);
    }
    mac.verify_slice(proof).is_ok()
}

/// Hex encoding of a secret, for the environment.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Decodes a hex string; `None` if it is not hex.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_rank_runs_the_app_its_place_falls_in() {
        let app = |p: &str, ranks| App {
            program: p.into(),
            args: vec![],
            ranks,
            env: vec![],
            wdir: None,
        };
        let apps = [app("a", 1), app("b", 0), app("c", 3)];
        let at = |r| app_of(&apps, r).map(|(i, a)| (i, a.program.clone()));
        assert_eq!(at(0), Some((0, b"a".to_vec())));
        assert_eq!(
            at(1),
            Some((2, b"c".to_vec())),
            "an app of no ranks is skipped"
        );
        assert_eq!(at(3), Some((2, b"c".to_vec())));
        assert_eq!(at(4), None);
        assert_eq!(
            app_of(&[app("x", u32::MAX), app("y", 5)], u32::MAX),
            Some((1, &app("y", 5)))
        );
    }

    #[test]
    fn frames_survive_any_split() {
        let msgs = vec![
            ToLauncher::Put {
                key: "card/3".into(),
                value: vec![1, 2, 3],
            },
            ToLauncher::Fence,
            ToLauncher::Abort {
                code: 3,
                message: "bad input".into(),
            },
        ];
        let bytes: Vec<u8> = msgs.iter().flat_map(encode).collect();
        for split in 0..bytes.len() {
            let mut d = FrameDecoder::new();
            let mut got = Vec::new();
            d.push(&bytes[..split]);
            while let Some(m) = d.next_frame::<ToLauncher>().unwrap() {
                got.push(m);
            }
            d.push(&bytes[split..]);
            while let Some(m) = d.next_frame::<ToLauncher>().unwrap() {
                got.push(m);
            }
            assert_eq!(got, msgs);
        }
    }

    #[test]
    fn refuses_oversized_frame_before_reading_it() {
        let mut d = FrameDecoder::new();
        d.push(&((MAX_FRAME as u32) + 1).to_le_bytes());
        assert_eq!(
            d.next_frame::<ToRank>(),
            Err(FrameError::TooLong(MAX_FRAME + 1))
        );
    }

    #[test]
    fn proof_binds_secret_nonce_job_and_rank() {
        let p = prove(b"secret", b"nonce", "j1", 2);
        assert!(verify(b"secret", b"nonce", "j1", 2, &p));
        assert!(!verify(b"secreT", b"nonce", "j1", 2, &p));
        assert!(!verify(b"secret", b"nonce2", "j1", 2, &p));
        assert!(!verify(b"secret", b"nonce", "j2", 2, &p));
        assert!(!verify(b"secret", b"nonce", "j1", 3, &p));
        assert!(!verify(b"secret", b"nonce", "j1", 2, &p[..31]));
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(from_hex(&to_hex(&[0, 255, 16])), Some(vec![0, 255, 16]));
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex("abc"), None);
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut d = FrameDecoder::new();
            d.push(&bytes);
            for _ in 0..8 {
                match d.next_frame::<ToLauncher>() { Ok(Some(_)) => {}, _ => break }
            }
        }
    }
}
