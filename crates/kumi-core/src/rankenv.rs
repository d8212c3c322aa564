//! The launcher-to-rank contract: what a rank is told through its
//! environment, written by the launcher ([`RankEnv::vars`] and its parts) and
//! read by the rank's bootstrap ([`RankEnv::parse`]): one type, so the two
//! sides cannot disagree on a name or a format.
//!
//! The launcher sets it in layers: job-wide ([`JobVars`]), per host
//! ([`HostVars`], for a host of a multi-host job) and per rank
//! ([`RankVars`]). A program started without any of it (`KUMI_RANK` unset) is
//! a job of one rank: [`RankEnv::parse`] returns `None`.

use crate::config::{ConfigError, Env};
use crate::control::{from_hex, to_hex};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Everything a rank started by a launcher is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankEnv {
    /// Job-wide.
    pub job: JobVars,
    /// This host's part (defaults for a single-host job).
    pub host: HostVars,
    /// This rank's part.
    pub rank: RankVars,
}

/// What every rank of a job is told alike.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobVars {
    /// `KUMI_JOB`.
    pub id: String,
    /// `KUMI_SIZE`.
    pub size: u32,
    /// `KUMI_CONTROL`: the launcher's control socket (`None`: no launcher).
    pub control: Option<String>,
    /// `KUMI_SECRET`, decoded.
    pub secret: Vec<u8>,
}

/// What the ranks of one host are told alike, beyond [`JobVars`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostVars {
    /// `KUMI_HOST_RANKS`: the world ranks of this host in local-rank order
    /// (`None`: every rank of the job runs here).
    pub host_ranks: Option<Vec<u32>>,
    /// `KUMI_HOST`: the host's name as the launcher knows it.
    pub host: String,
    /// `KUMI_NET`: which network the ranks use.
    pub net: String,
}

/// What one rank is told of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankVars {
    /// `KUMI_RANK`.
    pub rank: u32,
    /// `KUMI_LOCAL_RANK`.
    pub local_rank: u32,
    /// `KUMI_LOCAL_SIZE`.
    pub local_size: u32,
    /// `KUMI_LOCAL_CORES` (`None`: ask the system).
    pub local_cores: Option<usize>,
    /// `KUMI_NODE`.
    pub node: u32,
    /// `KUMI_SHM_FD`: the inherited descriptor of the host's segment.
    pub shm_fd: Option<i32>,
    /// `KUMI_APPNUM`: which program of an MPMD job this rank runs (0 for
    /// the first, and for a job of one program).
    pub appnum: u32,
}

/// Name-value pairs, in the order they are set.
pub type Vars = Vec<(String, String)>;

fn push(v: &mut Vars, name: &str, value: impl ToString) {
    debug_assert!(crate::config::var(name).is_some(), "{name}");
    v.push((name.to_string(), value.to_string()));
}

impl JobVars {
    /// The variables the launcher sets for every rank.
    pub fn vars(&self) -> Vars {
        let mut v = Vars::new();
        push(&mut v, "KUMI_JOB", &self.id);
        push(&mut v, "KUMI_SIZE", self.size);
        if let Some(c) = &self.control {
            push(&mut v, "KUMI_CONTROL", c);
        }
        push(&mut v, "KUMI_SECRET", to_hex(&self.secret));
        v
    }
}

impl HostVars {
    /// The variables the launcher sets for every rank of this host.
    pub fn vars(&self) -> Vars {
        let mut v = Vars::new();
        if let Some(r) = &self.host_ranks {
            push(&mut v, "KUMI_HOST_RANKS", rank_list(r));
        }
        if !self.host.is_empty() {
            push(&mut v, "KUMI_HOST", &self.host);
        }
        if !self.net.is_empty() {
            push(&mut v, "KUMI_NET", &self.net);
        }
        v
    }
}

impl RankVars {
    /// The variables the launcher sets for this rank alone.
    pub fn vars(&self) -> Vars {
        let mut v = Vars::new();
        push(&mut v, "KUMI_RANK", self.rank);
        push(&mut v, "KUMI_LOCAL_RANK", self.local_rank);
        push(&mut v, "KUMI_LOCAL_SIZE", self.local_size);
        if let Some(c) = self.local_cores {
            push(&mut v, "KUMI_LOCAL_CORES", c);
        }
        push(&mut v, "KUMI_NODE", self.node);
        if let Some(fd) = self.shm_fd {
            push(&mut v, "KUMI_SHM_FD", fd);
        }
        push(&mut v, "KUMI_APPNUM", self.appnum);
        v
    }
}

fn number<T: std::str::FromStr>(env: &Env, name: &'static str) -> Result<T, ConfigError> {
    env.get(name)
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| match env.get(name) {
            None => env.err(name, "KUMI_RANK is"),
            Some(_) => env.err(name, "a non-negative integer"),
        })
}

impl RankEnv {
    /// The whole environment, as the launcher sets it for one rank.
    pub fn vars(&self) -> Vars {
        let mut v = self.job.vars();
        v.extend(self.host.vars());
        v.extend(self.rank.vars());
        v
    }

    /// Reads the contract from `env`; `None` when `KUMI_RANK` is unset (a
    /// program started by hand). Every value is checked, and the identity
    /// must be consistent (rank below size, this rank in its host's list...).
    pub fn parse(env: &Env) -> Result<Option<RankEnv>, ConfigError> {
        if env.get("KUMI_RANK").is_none() {
            return Ok(None);
        }
        let rank: u32 = number(env, "KUMI_RANK")?;
        let size: u32 = number(env, "KUMI_SIZE")?;
        let local_rank: u32 = number(env, "KUMI_LOCAL_RANK")?;
        let local_size: u32 = number(env, "KUMI_LOCAL_SIZE")?;
        if size == 0 || rank >= size {
            return Err(env.err("KUMI_RANK", format!("a rank below KUMI_SIZE={size}")));
        }
        if local_size == 0 || local_size > size {
            return Err(env.err("KUMI_LOCAL_SIZE", format!("from 1 to KUMI_SIZE={size}")));
        }
        if local_rank >= local_size {
            return Err(env.err(
                "KUMI_LOCAL_RANK",
                format!("below KUMI_LOCAL_SIZE={local_size}"),
            ));
        }
        let id = env
            .get("KUMI_JOB")
            .filter(|j| !j.is_empty())
            .ok_or_else(|| env.err("KUMI_JOB", "a job id (KUMI_RANK is set)"))?
            .to_string();
        let secret = match env.get("KUMI_SECRET") {
            Some(h) => from_hex(h).ok_or_else(|| env.err("KUMI_SECRET", "hex digits"))?,
            None => Vec::new(),
        };
        let shm_fd = match env.get("KUMI_SHM_FD") {
            Some(v) => Some(
                v.trim()
                    .parse()
                    .ok()
                    .filter(|&fd: &i32| fd >= 0)
                    .ok_or_else(|| env.err("KUMI_SHM_FD", "a file descriptor"))?,
            ),
            None => None,
        };
        let host_ranks = match env.get("KUMI_HOST_RANKS") {
            Some(v) => Some(
                parse_ranks(v)
                    .filter(|r| {
                        r.len() == local_size as usize
                            && r.get(local_rank as usize) == Some(&rank)
                            && r.iter().all(|&x| x < size)
                    })
                    .ok_or_else(|| {
                        env.err(
                            "KUMI_HOST_RANKS",
                            format!(
                                "{local_size} ranks below {size} with rank {rank} at place {local_rank}"
                            ),
                        )
                    })?,
            ),
            None => None,
        };
        let local_cores = local_cores(env)?;
        let node = match env.get("KUMI_NODE") {
            Some(_) => number(env, "KUMI_NODE")?,
            None => 0,
        };
        let appnum = match env.get("KUMI_APPNUM") {
            Some(_) => number(env, "KUMI_APPNUM")?,
            None => 0,
        };
        Ok(Some(RankEnv {
            job: JobVars {
                id,
                size,
                control: env.get("KUMI_CONTROL").map(str::to_string),
                secret,
            },
            host: HostVars {
                host_ranks,
                host: env.get("KUMI_HOST").unwrap_or_default().to_string(),
                net: env.get("KUMI_NET").unwrap_or_default().to_string(),
            },
            rank: RankVars {
                rank,
                local_rank,
                local_size,
                local_cores,
                node,
                shm_fd,
                appnum,
            },
        }))
    }
}

/// `KUMI_LOCAL_CORES`, which the launcher sets (from the user's value, or
/// the cores it may use) and a user may set by hand: a positive number.
pub fn local_cores(env: &Env) -> Result<Option<usize>, ConfigError> {
    match env.get("KUMI_LOCAL_CORES") {
        Some(v) => Ok(Some(
            v.trim()
                .parse()
                .ok()
                .filter(|&c: &usize| c > 0)
                .ok_or_else(|| env.err("KUMI_LOCAL_CORES", "a positive number"))?,
        )),
        None => Ok(None),
    }
}

/// A rank list in compact form (`0-3,8,10-11`), as `KUMI_HOST_RANKS` holds it.
pub fn rank_list(ranks: &[u32]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        if !s.is_empty() {
            s.push(',');
        }
        if j > i {
            let _ = write!(s, "{}-{}", ranks[i], ranks[j]);
        } else {
            let _ = write!(s, "{}", ranks[i]);
        }
        i = j + 1;
    }
    s
}

/// Parses a rank list like `0-3,8,10-11` ([`rank_list`]'s form); `None` if
/// it is malformed or a range is reversed or longer than 2^20.
pub fn parse_ranks(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 1 << 20 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RankEnv {
        RankEnv {
            job: JobVars {
                id: "j0123456789".into(),
                size: 12,
                control: Some("@kumi-j0123456789".into()),
                secret: vec![0xde, 0xad, 0xbe, 0xef],
            },
            host: HostVars {
                host_ranks: Some(vec![0, 1, 2, 3, 8, 10, 11]),
                host: "h1".into(),
                net: "auto".into(),
            },
            rank: RankVars {
                rank: 8,
                local_rank: 4,
                local_size: 7,
                local_cores: Some(2),
                node: 1,
                shm_fd: Some(5),
                appnum: 2,
            },
        }
    }

    #[test]
    fn what_the_launcher_writes_the_rank_reads_back() {
        let r = sample();
        let env = Env::from_vars(r.vars());
        assert_eq!(RankEnv::parse(&env).unwrap(), Some(r));
        // Every name written is one the configuration table knows.
        assert!(env.unknown().is_empty());
    }

    #[test]
    fn without_kumi_rank_it_is_a_singleton() {
        assert_eq!(RankEnv::parse(&Env::default()).unwrap(), None);
    }

    #[test]
    fn an_inconsistent_identity_names_the_variable() {
        let cases: &[(&str, &str, &str)] = &[
            ("KUMI_RANK", "12", "KUMI_RANK"),
            ("KUMI_SIZE", "x", "KUMI_SIZE"),
            ("KUMI_LOCAL_RANK", "7", "KUMI_LOCAL_RANK"),
            ("KUMI_LOCAL_SIZE", "13", "KUMI_LOCAL_SIZE"),
            ("KUMI_SECRET", "zz", "KUMI_SECRET"),
            ("KUMI_SHM_FD", "-1", "KUMI_SHM_FD"),
            ("KUMI_HOST_RANKS", "0-3,9,10-11", "KUMI_HOST_RANKS"),
            ("KUMI_LOCAL_CORES", "0", "KUMI_LOCAL_CORES"),
            ("KUMI_JOB", "", "KUMI_JOB"),
        ];
        for &(name, value, blamed) in cases {
            let mut vars = sample().vars();
            vars.retain(|(k, _)| k != name);
            vars.push((name.into(), value.into()));
            let e = RankEnv::parse(&Env::from_vars(vars)).unwrap_err();
            assert_eq!(e.name, blamed, "{name}={value}: {e}");
        }
    }

    #[test]
    fn rank_lists_are_compact_and_read_back() {
        for r in [vec![0, 1, 2, 3, 8, 10, 11], vec![5], vec![1, 3, 5], vec![]] {
            assert_eq!(parse_ranks(&rank_list(&r)), Some(r));
        }
        assert_eq!(rank_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_ranks("3-1"), None);
        assert_eq!(parse_ranks("a"), None);
    }
}
