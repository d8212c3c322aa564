//! Which hosts a job runs on, and which ranks go where.
//!
//! `--hosts h1:2,h2:2` and `--hostfile F` both give a list of hosts with a number
//! of slots (one if not said). A host file has one host per line, as `host`,
//! `host:N` or `host slots=N`; `#` starts a comment; blank lines are skipped. A
//! host named twice gets the sum of its slots.
//!
//! Placement fills each host's slots in order (ranks 0..s1 on the first host, and
//! so on), so neighbouring ranks share a host; ranks beyond the total number of
//! slots are dealt round-robin over the hosts, with a warning, because the hosts
//! are then oversubscribed.

/// A host and its slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSlots {
    /// Host name as the remote shell knows it.
    pub name: String,
    /// Ranks it should run before oversubscription.
    pub slots: u32,
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an empty host name".into());
    }
    if name.starts_with('-') || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{name:?} is not a host name"));
    }
    Ok(())
}

fn push(list: &mut Vec<HostSlots>, name: &str, slots: u32) -> Result<(), String> {
    check_name(name)?;
    if slots == 0 {
        return Err(format!("host {name} has 0 slots"));
    }
    match list.iter_mut().find(|h| h.name == name) {
        Some(h) => h.slots = h.slots.saturating_add(slots),
        None => list.push(HostSlots {
            name: name.to_string(),
            slots,
        }),
    }
    Ok(())
}

fn parse_slots(s: &str, what: &str) -> Result<u32, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("{what}: {s:?} is not a number of slots"))
}

/// Parses `--hosts`: `h1:2,h2:2,h3` (a host without a count has one slot).
pub fn parse_hosts(s: &str) -> Result<Vec<HostSlots>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.rsplit_once(':') {
            Some((h, n)) => push(&mut out, h, parse_slots(n, item)?)?,
            None => push(&mut out, item, 1)?,
        }
    }
    if out.is_empty() {
        return Err("no host given".into());
    }
    Ok(out)
}

/// Parses a host file (see the module doc). Errors name the line.
pub fn parse_hostfile(text: &str) -> Result<Vec<HostSlots>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |e: String| format!("line {}: {e}", i + 1);
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        let (name, mut slots) = match first.rsplit_once(':') {
            Some((h, n)) => (h, Some(parse_slots(n, first).map_err(at)?)),
            None => (first, None),
        };
        for w in words {
            match w.strip_prefix("slots=") {
                Some(n) if slots.is_none() => slots = Some(parse_slots(n, w).map_err(at)?),
                Some(_) => return Err(at(format!("{line:?} gives the slots twice"))),
                None => return Err(at(format!("{w:?}: expected slots=N"))),
            }
        }
        push(&mut out, name, slots.unwrap_or(1)).map_err(at)?;
    }
    if out.is_empty() {
        return Err("the host file names no host".into());
    }
    Ok(out)
}

/// Where each rank runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Per host (in the order given, hosts without ranks left out): its name and
    /// its global ranks in local-rank order.
    pub hosts: Vec<(String, Vec<u32>)>,
    /// Set when ranks outnumber slots.
    pub warning: Option<String>,
}

/// How consecutive ranks are dealt to hosts (`--map-by`, as Open MPI's
/// `mpirun` names it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapBy {
    /// Fill each host's slots before the next (`slot`, `core`): neighbours in
    /// rank share a host.
    #[default]
    Slot,
    /// One rank per host in turn, skipping full hosts (`node`).
    Node,
}

impl std::str::FromStr for MapBy {
    type Err = String;
    fn from_str(s: &str) -> Result<MapBy, String> {
        // Open MPI's modifiers (`slot:PE=2`, `node:OVERSUBSCRIBE`) do not
        // change where ranks go here.
        match s.split(':').next().unwrap_or("").to_ascii_lowercase().as_str() {
            "slot" | "core" | "hwthread" | "socket" | "numa" | "l3cache" | "package" => {
                Ok(MapBy::Slot)
            }
            "node" => Ok(MapBy::Node),
            _ => Err(format!(
                "--map-by {s}: kumi maps by slot (also core, socket...: fill each host in turn) or node (one rank per host in turn)"
            )),
        }
    }
}

/// Places `n` ranks on `hosts` as `map` says within their slots, then
/// round-robin beyond them.
pub fn place(n: u32, hosts: &[HostSlots], map: MapBy) -> Placement {
    let mut per: Vec<Vec<u32>> = vec![Vec::new(); hosts.len()];
    let mut next = 0u32;
    match map {
        MapBy::Slot => {
            for (i, h) in hosts.iter().enumerate() {
                while next < n && (per[i].len() as u32) < h.slots {
                    per[i].push(next);
                    next += 1;
                }
            }
        }
        MapBy::Node => {
            let mut placed = true;
            while next < n && placed {
                placed = false;
                for (i, h) in hosts.iter().enumerate() {
                    if next < n && (per[i].len() as u32) < h.slots {
                        per[i].push(next);
                        next += 1;
                        placed = true;
                    }
                }
            }
        }
    }
    let total: u64 = hosts.iter().map(|h| h.slots as u64).sum();
    let warning = (next < n).then(|| {
        format!(
            "{n} ranks but only {total} slots on {} host(s): placing the other {} round-robin (hosts are oversubscribed)",
            hosts.len(),
            n - next
        )
    });
    let mut i = 0;
    while next < n && !hosts.is_empty() {
        per[i % hosts.len()].push(next);
        next += 1;
        i += 1;
    }
    Placement {
        hosts: hosts
            .iter()
            .zip(per)
            .filter(|(_, r)| !r.is_empty())
            .map(|(h, r)| (h.name.clone(), r))
            .collect(),
        warning,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(v: &[(&str, u32)]) -> Vec<HostSlots> {
        v.iter()
            .map(|(n, s)| HostSlots {
                name: n.to_string(),
                slots: *s,
            })
            .collect()
    }

    #[test]
    fn hosts_option_parses() {
        assert_eq!(
            parse_hosts("h1:2,h2:2,h3").unwrap(),
            hs(&[("h1", 2), ("h2", 2), ("h3", 1)])
        );
        assert_eq!(parse_hosts("a:1,a:2").unwrap(), hs(&[("a", 3)]));
        assert!(parse_hosts("h1:x").is_err());
        assert!(parse_hosts("h1:0").is_err());
        assert!(parse_hosts("").is_err());
        assert!(parse_hosts("-oProxyCommand=x:1").is_err());
    }

    #[test]
    fn hostfile_accepts_both_forms_comments_and_blanks() {
        let f = "# cluster\n\nnode1 slots=4\nnode2:2   # two\n  node3\n";
        assert_eq!(
            parse_hostfile(f).unwrap(),
            hs(&[("node1", 4), ("node2", 2), ("node3", 1)])
        );
        let e = parse_hostfile("a slots=x\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        assert!(parse_hostfile("a foo=1").is_err());
        assert!(parse_hostfile("# nothing\n").is_err());
    }

    #[test]
    fn placement_by_slots_then_round_robin() {
        let p = place(4, &hs(&[("a", 2), ("b", 2)]), MapBy::Slot);
        assert_eq!(
            p.hosts,
            vec![("a".into(), vec![0, 1]), ("b".into(), vec![2, 3])]
        );
        assert!(p.warning.is_none());
        let p = place(3, &hs(&[("a", 2), ("b", 2)]), MapBy::Slot);
        assert_eq!(
            p.hosts,
            vec![("a".into(), vec![0, 1]), ("b".into(), vec![2])]
        );
        let p = place(7, &hs(&[("a", 2), ("b", 1)]), MapBy::Slot);
        assert_eq!(
            p.hosts,
            vec![("a".into(), vec![0, 1, 3, 5]), ("b".into(), vec![2, 4, 6])]
        );
        assert!(p.warning.unwrap().contains("round-robin"));
        let p = place(1, &hs(&[("a", 2), ("b", 2)]), MapBy::Slot);
        assert_eq!(p.hosts, vec![("a".into(), vec![0])]);
    }

    #[test]
    fn placement_by_node_deals_one_rank_per_host_in_turn() {
        let p = place(5, &hs(&[("a", 3), ("b", 1), ("c", 2)]), MapBy::Node);
        assert_eq!(
            p.hosts,
            vec![
                ("a".into(), vec![0, 3]),
                ("b".into(), vec![1]),
                ("c".into(), vec![2, 4])
            ]
        );
        assert!(p.warning.is_none());
        let p = place(4, &hs(&[("a", 1), ("b", 1)]), MapBy::Node);
        assert_eq!(
            p.hosts,
            vec![("a".into(), vec![0, 2]), ("b".into(), vec![1, 3])]
        );
        assert!(p.warning.is_some());
        assert_eq!("node".parse(), Ok(MapBy::Node));
        assert_eq!("core".parse(), Ok(MapBy::Slot));
        assert_eq!("slot:PE=2".parse(), Ok(MapBy::Slot));
        assert!("board"
            .parse::<MapBy>()
            .unwrap_err()
            .contains("--map-by board"));
    }
}
