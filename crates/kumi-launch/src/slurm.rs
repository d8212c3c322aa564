//! `kumi run` inside a Slurm allocation (`sbatch`, `salloc`): the hosts and
//! their slots come from the allocation's environment, and the agents are
//! started with `srun` (one step per host, within the allocation) instead of
//! a remote shell. Parsing is pure and tested here; [`crate::remote`] starts
//! the agents.

use crate::hosts::HostSlots;

/// What Slurm's environment says of the allocation this process runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Job id (`SLURM_JOB_ID`).
    pub job: String,
    /// Nodes and the tasks Slurm placed on each.
    pub hosts: Vec<HostSlots>,
    /// `SLURM_NTASKS`, if set (`-n` of sbatch/salloc).
    pub ntasks: Option<u32>,
}

impl Allocation {
    /// The allocation this process runs in, read through `var`; `None` outside
    /// one, or inside a job step (a program `srun` started, which is one rank
    /// of a step and not the place to start a job from).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Allocation>, String> {
        let (Some(job), Some(list)) = (var("SLURM_JOB_ID"), var("SLURM_JOB_NODELIST")) else {
            return Ok(None);
        };
        if var("SLURM_STEP_ID").is_some() {
            return Ok(None);
        }
        let nodes = parse_nodelist(&list).map_err(|e| format!("SLURM_JOB_NODELIST={list}: {e}"))?;
        let per = var("SLURM_TASKS_PER_NODE")
            .or_else(|| var("SLURM_JOB_CPUS_PER_NODE"))
            .ok_or("SLURM_TASKS_PER_NODE is not set")?;
        let slots = parse_counts(&per, nodes.len())
            .map_err(|e| format!("SLURM_TASKS_PER_NODE={per}: {e}"))?;
        let ntasks = match var("SLURM_NTASKS") {
            Some(n) => Some(
                n.trim()
                    .parse()
                    .map_err(|_| format!("SLURM_NTASKS={n}: not a number"))?,
            ),
            None => None,
        };
        Ok(Some(Allocation {
            job,
            hosts: nodes
                .into_iter()
                .zip(slots)
                .map(|(name, slots)| HostSlots { name, slots })
                .collect(),
            ntasks,
        }))
    }
}

/// Expands a Slurm host list: `n[1-4,7],login,gpu[01-02]` is n1, n2, n3, n4,
/// n7, login, gpu01, gpu02 (ranges keep their zero padding).
pub fn parse_nodelist(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        // One name: up to a comma outside brackets.
        let mut depth = 0;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        let item = &rest[..end];
        rest = rest[end..].strip_prefix(',').unwrap_or(&rest[end..]);
        expand(item, &mut out)?;
    }
    if out.is_empty() {
        return Err("no nodes".into());
    }
    Ok(out)
}

fn expand(item: &str, out: &mut Vec<String>) -> Result<(), String> {
    let Some(open) = item.find('[') else {
        if item.is_empty() || item.contains(']') {
            return Err(format!("{item:?} is not a host name"));
        }
        out.push(item.to_string());
        return Ok(());
    };
    let close = item[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| format!("{item:?}: '[' without ']'"))?;
    let (prefix, ranges, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    let mut tails = Vec::new();
    expand_tail(suffix, &mut tails)?;
    for r in ranges.split(',') {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let bad = || format!("{item:?}: {r:?} is not a range");
        let (x, y): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if y < x || y - x > 1 << 20 {
            return Err(bad());
        }
        for v in x..=y {
            for t in &tails {
                out.push(format!("{prefix}{v:0width$}{t}", width = a.len()));
            }
        }
    }
    Ok(())
}

fn expand_tail(suffix: &str, out: &mut Vec<String>) -> Result<(), String> {
    if suffix.is_empty() {
        out.push(String::new());
        return Ok(());
    }
    expand(suffix, out)
}

/// Expands Slurm's per-node counts: `2(x3),1` is 2, 2, 2, 1; there must be
/// one per node.
pub fn parse_counts(s: &str, nodes: usize) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let (n, times) = match part.split_once("(x") {
            Some((n, t)) => (
                n,
                t.strip_suffix(')')
                    .and_then(|t| t.parse::<usize>().ok())
                    .ok_or_else(|| format!("{part:?} is not COUNT(xTIMES)"))?,
            ),
            None => (part, 1),
        };
        let n: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("{part:?} is not a count"))?;
        if n == 0 || out.len() + times > nodes {
            return Err(format!("{part:?} does not fit {nodes} nodes"));
        }
        out.extend(std::iter::repeat_n(n, times));
    }
    if out.len() != nodes {
        return Err(format!("{} counts for {nodes} nodes", out.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn node_lists_expand_as_slurm_writes_them() {
        assert_eq!(
            parse_nodelist("n[1-4,7]").unwrap(),
            names(&["n1", "n2", "n3", "n4", "n7"])
        );
        assert_eq!(
            parse_nodelist("login,gpu[01-02],n[9-10]").unwrap(),
            names(&["login", "gpu01", "gpu02", "n9", "n10"])
        );
        assert_eq!(
            parse_nodelist("r[1-2]c[0-1]").unwrap(),
            names(&["r1c0", "r1c1", "r2c0", "r2c1"])
        );
        for bad in ["", "n[1-", "n[3-1]", "n[a-b]", "n]"] {
            assert!(parse_nodelist(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn per_node_counts_expand_and_must_match_the_nodes() {
        assert_eq!(parse_counts("2(x3),1", 4).unwrap(), [2, 2, 2, 1]);
        assert_eq!(parse_counts("4", 1).unwrap(), [4]);
        assert!(parse_counts("2(x3)", 2).is_err());
        assert!(parse_counts("2,2", 3).is_err());
        assert!(parse_counts("0", 1).is_err());
        assert!(parse_counts("2(x", 1).is_err());
    }

    #[test]
    fn the_allocation_comes_from_the_environment_but_not_inside_a_step() {
        let env = |v: &'static [(&'static str, &'static str)]| {
            move |n: &str| v.iter().find(|(k, _)| *k == n).map(|(_, x)| x.to_string())
        };
        const JOB: &[(&str, &str)] = &[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "n[0-2]"),
            ("SLURM_TASKS_PER_NODE", "2(x2),1"),
            ("SLURM_NTASKS", "5"),
        ];
        let a = Allocation::from_env(env(JOB)).unwrap().unwrap();
        assert_eq!(a.ntasks, Some(5));
        assert_eq!(
            a.hosts
                .iter()
                .map(|h| (h.name.as_str(), h.slots))
                .collect::<Vec<_>>(),
            [("n0", 2), ("n1", 2), ("n2", 1)]
        );
        assert_eq!(
            Allocation::from_env(env(&[("SLURM_JOB_ID", "7")])),
            Ok(None)
        );
        const STEP: &[(&str, &str)] = &[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "n0"),
            ("SLURM_TASKS_PER_NODE", "1"),
            ("SLURM_STEP_ID", "0"),
        ];
        assert_eq!(Allocation::from_env(env(STEP)), Ok(None));
        const BAD: &[(&str, &str)] = &[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "n[0-2]"),
            ("SLURM_TASKS_PER_NODE", "2"),
        ];
        assert!(Allocation::from_env(env(BAD))
            .unwrap_err()
            .contains("SLURM_TASKS_PER_NODE"));
    }
}
