//! The PMI-2 wire protocol, client side, with no I/O: what a rank started by
//! a process manager that speaks PMI-2 (Slurm's `srun --mpi=pmi2`, MPICH's
//! Hydra) sends on the socket named by `PMI_FD`, and what the answers mean.
//! The runtime's bootstrap owns the socket and carries these bytes.
//!
//! The exchange: one PMI-1 style line ([`INIT_LINE`], answered by a line
//! with `rc=0` and `pmi_version=2`), then commands and replies in PMI-2
//! framing: six ASCII digits giving the body's length, then the body,
//! `cmd=NAME;key=value;...;`. A reply names its command (`NAME-response`)
//! and carries `rc` (0 is success) and, on failure, `errmsg`.
//!
//! Keys and values never contain `;` or `=` here (kumi hex-encodes what it
//! publishes), which [`command`] checks rather than escapes. Every length
//! and number read from the process manager is checked before use.

use std::fmt;

/// The line that opens the exchange.
pub const INIT_LINE: &str = "cmd=init pmi_version=2 pmi_subversion=0\n";

/// The largest value the PMI-2 standard guarantees (`PMI2_MAX_VALLEN`).
pub const MAX_VALUE: usize = 1024;

/// The largest frame body accepted from the process manager: six digits.
pub const MAX_BODY: usize = 999_999;

/// Something the process manager said that does not fit the protocol, or a
/// request it refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PmiError {
    /// The answer is not what the protocol allows (with what was wrong).
    Malformed(String),
    /// The process manager answered `rc != 0`.
    Refused {
        /// The command.
        cmd: String,
        /// Its `rc`.
        rc: i64,
        /// Its `errmsg`, if any.
        msg: String,
    },
    /// A key or value kumi wanted to send cannot be carried.
    Unsendable(String),
}

impl fmt::Display for PmiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmiError::Malformed(m) => {
                write!(f, "the process manager's PMI-2 answer is malformed: {m}")
            }
            PmiError::Refused { cmd, rc, msg } if msg.is_empty() => {
                write!(f, "the process manager refused PMI-2 {cmd} (rc={rc})")
            }
            PmiError::Refused { cmd, rc, msg } => {
                write!(
                    f,
                    "the process manager refused PMI-2 {cmd} (rc={rc}): {msg}"
                )
            }
            PmiError::Unsendable(m) => write!(f, "cannot send over PMI-2: {m}"),
        }
    }
}

impl std::error::Error for PmiError {}

/// What a process manager speaking PMI-2 tells a rank through its
/// environment: `PMI_FD` (the socket), `PMI_RANK`, `PMI_SIZE` and
/// `PMI_JOBID` (which Slurm's `fullinit` wants back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmiEnv {
    /// `PMI_FD`.
    pub fd: i32,
    /// `PMI_RANK`.
    pub rank: u32,
    /// `PMI_SIZE`.
    pub size: u32,
    /// `PMI_JOBID`, if set.
    pub jobid: Option<String>,
}

impl PmiEnv {
    /// Reads the variables through `var`; `None` when `PMI_FD` is unset (no
    /// PMI-2 process manager started this process).
    pub fn parse(var: impl Fn(&str) -> Option<String>) -> Result<Option<PmiEnv>, PmiError> {
        let Some(fd) = var("PMI_FD") else {
            return Ok(None);
        };
        let num = |name: &str, v: Option<String>| -> Result<u32, PmiError> {
            let v =
                v.ok_or_else(|| PmiError::Malformed(format!("PMI_FD is set but {name} is not")))?;
            v.trim()
                .parse()
                .map_err(|_| PmiError::Malformed(format!("{name}={v:?} is not a number")))
        };
        let fd = i32::try_from(num("PMI_FD", Some(fd))?)
            .map_err(|_| PmiError::Malformed("PMI_FD is not a descriptor".into()))?;
        let rank = num("PMI_RANK", var("PMI_RANK"))?;
        let size = num("PMI_SIZE", var("PMI_SIZE"))?;
        if rank >= size {
            return Err(PmiError::Malformed(format!(
                "PMI_RANK={rank} is not below PMI_SIZE={size}"
            )));
        }
        let jobid = var("PMI_JOBID");
        if jobid.as_deref().is_some_and(|j| j.contains([';', '='])) {
            return Err(PmiError::Malformed(format!("PMI_JOBID={jobid:?}")));
        }
        Ok(Some(PmiEnv {
            fd,
            rank,
            size,
            jobid,
        }))
    }
}

/// Checks the answer to [`INIT_LINE`].
pub fn check_init_reply(line: &str) -> Result<(), PmiError> {
    let words: Vec<(&str, &str)> = line
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    let get = |k: &str| words.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    if get("cmd") != Some("response_to_init") {
        return Err(PmiError::Malformed(format!(
            "expected response_to_init, got {line:?}"
        )));
    }
    match (get("rc"), get("pmi_version")) {
        (Some("0"), Some("2")) => Ok(()),
        (Some("0"), v) => Err(PmiError::Malformed(format!(
            "the process manager speaks PMI version {}, not 2",
            v.unwrap_or("?")
        ))),
        (rc, _) => Err(PmiError::Refused {
            cmd: "init".into(),
            rc: rc.and_then(|r| r.parse().ok()).unwrap_or(-1),
            msg: String::new(),
        }),
    }
}

/// A framed command `cmd=NAME;k=v;...;`.
pub fn command(name: &str, pairs: &[(&str, &str)]) -> Result<Vec<u8>, PmiError> {
    let clean = |s: &str| !s.contains([';', '=', '\n']);
    let mut body = format!("cmd={name};");
    for (k, v) in pairs {
        if !clean(k) || !clean(v) || k.is_empty() {
            return Err(PmiError::Unsendable(format!(
                "{k:?}={v:?} holds ';', '=' or a newline"
            )));
        }
        body.push_str(&format!("{k}={v};"));
    }
    if body.len() > MAX_BODY {
        return Err(PmiError::Unsendable(format!(
            "a {}-byte command",
            body.len()
        )));
    }
    let mut out = format!("{:6}", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    Ok(out)
}

/// A reply: its pairs, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pairs: Vec<(String, String)>,
}

impl Reply {
    /// Parses a body; the reply must be to `cmd` (`cmd-response`) and
    /// succeed (`rc=0`).
    pub fn parse(body: &[u8], cmd: &str) -> Result<Reply, PmiError> {
        let text = std::str::from_utf8(body)
            .map_err(|_| PmiError::Malformed("a reply that is not UTF-8".into()))?;
        let mut pairs = Vec::new();
        for part in text.split(';').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                PmiError::Malformed(format!("{part:?} in {text:?} is not key=value"))
            })?;
            pairs.push((k.to_string(), v.to_string()));
        }
        let r = Reply { pairs };
        let want = format!("{cmd}-response");
        if r.get("cmd") != Some(want.as_str()) {
            return Err(PmiError::Malformed(format!(
                "expected {want}, got {text:?}"
            )));
        }
        match r.get("rc").map(str::parse::<i64>) {
            Some(Ok(0)) => Ok(r),
            Some(Ok(rc)) => Err(PmiError::Refused {
                cmd: cmd.to_string(),
                rc,
                msg: r.get("errmsg").unwrap_or_default().to_string(),
            }),
            _ => Err(PmiError::Malformed(format!("no rc in {text:?}"))),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key`, which must be there.
    pub fn need(&self, key: &str) -> Result<&str, PmiError> {
        self.get(key)
            .ok_or_else(|| PmiError::Malformed(format!("no {key} in the answer")))
    }

    /// `key` as a number, which must be there.
    pub fn number<T: std::str::FromStr>(&self, key: &str) -> Result<T, PmiError> {
        let v = self.need(key)?;
        v.parse()
            .map_err(|_| PmiError::Malformed(format!("{key}={v:?} is not a number")))
    }

    /// A `kvs-get` answer: the value, or `None` if no rank put the key.
    pub fn found(&self) -> Result<Option<&str>, PmiError> {
        match self.get("found") {
            Some("TRUE") => self.need("value").map(Some),
            Some("FALSE") => Ok(None),
            other => Err(PmiError::Malformed(format!("found={other:?}"))),
        }
    }
}

/// Reassembles reply frames from the socket's bytes.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// Bytes read from the socket.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame's body, if one is in.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, PmiError> {
        if self.buf.len() < 6 {
            return Ok(None);
        }
        let head = std::str::from_utf8(&self.buf[..6]).unwrap_or("");
        let len: usize = head
            .trim()
            .parse()
            .map_err(|_| PmiError::Malformed(format!("frame length {head:?}")))?;
        if self.buf.len() < 6 + len {
            return Ok(None);
        }
        let body = self.buf[6..6 + len].to_vec();
        self.buf.drain(..6 + len);
        Ok(Some(body))
    }
}

/// `PMI_process_mapping` (`(vector,(node,nodes,ranks),...)`: from `node`,
/// `nodes` consecutive nodes take `ranks` consecutive ranks each; the blocks
/// repeat until every rank is placed) as the node of each of `size` ranks.
pub fn process_mapping(value: &str, size: u32) -> Result<Vec<u32>, PmiError> {
    let bad = || PmiError::Malformed(format!("PMI_process_mapping {value:?}"));
    let inner = value
        .trim()
        .strip_prefix("(vector,")
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(bad)?;
    let mut blocks = Vec::new();
    for b in inner
        .split("),")
        .map(|b| b.trim_start_matches('(').trim_end_matches(')'))
    {
        let n: Vec<u32> = b
            .split(',')
            .map(|x| x.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let [node, nodes, ranks] = n[..] else {
            return Err(bad());
        };
        if nodes == 0 || ranks == 0 {
            return Err(bad());
        }
        blocks.push((node, nodes, ranks));
    }
    if blocks.is_empty() {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(size as usize);
    'all: loop {
        for &(node, nodes, ranks) in &blocks {
            for k in 0..nodes {
                let n = node.checked_add(k).ok_or_else(bad)?;
                for _ in 0..ranks {
                    if out.len() == size as usize {
                        break 'all;
                    }
                    out.push(n);
                }
            }
        }
    }
    Ok(out)
}

/// Where a rank sits, from the node of every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Its node.
    pub node: u32,
    /// The ranks of its node, in increasing order (local rank order).
    pub host_ranks: Vec<u32>,
    /// Its index there.
    pub local_rank: u32,
}

/// Rank `rank`'s placement in `nodes` (the node of each rank).
pub fn placement(nodes: &[u32], rank: u32) -> Option<Placement> {
    let node = *nodes.get(rank as usize)?;
    let host_ranks: Vec<u32> = (0..nodes.len() as u32)
        .filter(|&r| nodes[r as usize] == node)
        .collect();
    let local_rank = host_ranks.iter().position(|&r| r == rank)? as u32;
    Some(Placement {
        node,
        host_ranks,
        local_rank,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_read_and_checked() {
        let env = |v: &[(&str, &str)]| {
            let v: Vec<(String, String)> = v
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            PmiEnv::parse(move |n| v.iter().find(|(k, _)| k == n).map(|(_, x)| x.clone()))
        };
        assert_eq!(env(&[("PMI_RANK", "1")]), Ok(None));
        assert_eq!(
            env(&[
                ("PMI_FD", "11"),
                ("PMI_RANK", "1"),
                ("PMI_SIZE", "3"),
                ("PMI_JOBID", "4.0")
            ]),
            Ok(Some(PmiEnv {
                fd: 11,
                rank: 1,
                size: 3,
                jobid: Some("4.0".into())
            }))
        );
        assert!(env(&[("PMI_FD", "11"), ("PMI_RANK", "3"), ("PMI_SIZE", "3")]).is_err());
        assert!(env(&[("PMI_FD", "x"), ("PMI_RANK", "0"), ("PMI_SIZE", "3")]).is_err());
        assert!(env(&[("PMI_FD", "11"), ("PMI_SIZE", "3")])
            .unwrap_err()
            .to_string()
            .contains("PMI_RANK"));
    }

    #[test]
    fn commands_are_framed_and_refuse_separators() {
        assert_eq!(
            command("kvs-put", &[("key", "card-1"), ("value", "0a0b")]).unwrap(),
            b"    34cmd=kvs-put;key=card-1;value=0a0b;".to_vec()
        );
        assert!(command("kvs-put", &[("key", "a;b"), ("value", "x")]).is_err());
        assert!(command("kvs-put", &[("key", "a"), ("value", "x=y")]).is_err());
        assert!(command("kvs-put", &[("value", &"v".repeat(MAX_BODY))]).is_err());
    }

    #[test]
    fn slurms_answers_parse() {
        // As Slurm 22.05's pmi2 plugin answers.
        assert!(
            check_init_reply("cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n").is_ok()
        );
        assert!(
            check_init_reply("cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
                .unwrap_err()
                .to_string()
                .contains("version 1")
        );
        let r = Reply::parse(
            b"cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=2;size=4;appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
            "fullinit",
        )
        .unwrap();
        assert_eq!(
            (r.number::<u32>("rank"), r.number::<u32>("size")),
            (Ok(2), Ok(4))
        );
        assert!(r.number::<u32>("appnum").is_err(), "-1 is no app number");
        let e = Reply::parse(
            b"cmd=fullinit-response;rc=3;errmsg=pmijobid missing;",
            "fullinit",
        )
        .unwrap_err();
        assert!(e.to_string().contains("rc=3") && e.to_string().contains("pmijobid missing"));
        assert!(Reply::parse(b"cmd=kvs-put-response;rc=0;", "kvs-fence").is_err());
        assert!(Reply::parse(b"cmd=kvs-fence-response;", "kvs-fence").is_err());
        let got = Reply::parse(
            b"cmd=kvs-get-response;rc=0;found=TRUE;value=hello0;",
            "kvs-get",
        )
        .unwrap();
        assert_eq!(got.found(), Ok(Some("hello0")));
        let none = Reply::parse(b"cmd=kvs-get-response;rc=0;found=FALSE;", "kvs-get").unwrap();
        assert_eq!(none.found(), Ok(None));
    }

    #[test]
    fn frames_reassemble_from_any_split_and_bad_lengths_are_refused() {
        let mut all = command("a", &[("k", "v")]).unwrap();
        all.extend(command("bb", &[]).unwrap());
        for cut in 0..all.len() {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for part in [&all[..cut], &all[cut..]] {
                d.push(part);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(
                got,
                vec![b"cmd=a;k=v;".to_vec(), b"cmd=bb;".to_vec()],
                "cut {cut}"
            );
        }
        let mut d = Decoder::default();
        d.push(b"   -1x");
        assert!(d.next_frame().is_err());
    }

    #[test]
    fn process_mappings_place_blocks_and_repeat_them() {
        // Block: 2 ranks on node 0, 1 on node 1.
        assert_eq!(
            process_mapping("(vector,(0,1,2),(1,1,1))", 3).unwrap(),
            [0, 0, 1]
        );
        // Cyclic, written out and written once.
        assert_eq!(
            process_mapping("(vector,(0,2,1),(0,2,1))", 4).unwrap(),
            [0, 1, 0, 1]
        );
        assert_eq!(
            process_mapping("(vector,(0,2,1))", 5).unwrap(),
            [0, 1, 0, 1, 0]
        );
        for bad in [
            "",
            "(vector)",
            "(vector,(0,1))",
            "(vector,(0,0,1))",
            "(list,(0,1,1))",
            "(vector,(a,1,1))",
        ] {
            assert!(process_mapping(bad, 2).is_err(), "{bad:?}");
        }
        let p = placement(&[0, 1, 0, 1, 0], 4).unwrap();
        assert_eq!((p.node, p.host_ranks, p.local_rank), (0, vec![0, 2, 4], 2));
        assert_eq!(placement(&[0, 1], 2), None);
    }
}
