//! One-sided windows (`kumi::win`) through real jobs: atomic accumulates,
//! tickets and large transfers on one host, on one host with every rank
//! pretending to be its own host (`KUMI_COLL_HOSTS`: every access then goes
//! through the target's engine, over shared memory) or split into two
//! pretend hosts (the parts of a host's ranks in one mapping), and across namespace
//! hosts over TCP; and a target that computes without calling kumi while
//! ranks on another host lock, read and write its part: its progress thread
//! serves them (and, with it turned off, they wait for the target, which
//! shows the test can tell).

use kumi_tests::netns::{self, Cluster};
use kumi_tests::{bin, kumi_run, text};
use std::process::Output;

fn passed(o: &Output, mode: &str, how: &str) {
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains(&format!("windows: {mode} passed")),
        "{mode} ({how}): {}",
        text(o)
    );
}

/// Milliseconds rank `r`'s rounds took, as `serve` prints them.
fn took(o: &Output, r: usize) -> u64 {
    let out = String::from_utf8_lossy(&o.stdout);
    let key = format!("windows: rank {r} took ");
    out.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|l| l.strip_suffix(" ms"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no time for rank {r}: {}", text(o)))
}

#[test]
fn accumulates_tickets_and_transfers_on_one_host() {
    let prog = bin("windows");
    for n in [1, 2, 3, 8] {
        let o = kumi_run(n, &[], &[prog.to_str().unwrap(), "atomics"]);
        passed(&o, "atomics", "one host");
        let hosts = n.to_string();
        let o = kumi_run(
            n,
            &[("KUMI_COLL_HOSTS", hosts.as_str())],
            &[prog.to_str().unwrap(), "atomics"],
        );
        passed(&o, "atomics", "every rank its own host");
    }
    // Two pretend hosts: the parts of a host's ranks share its mapping.
    for n in [3, 8] {
        let o = kumi_run(
            n,
            &[("KUMI_COLL_HOSTS", "2")],
            &[prog.to_str().unwrap(), "atomics"],
        );
        passed(&o, "atomics", "two pretend hosts");
    }
}

#[test]
fn windows_across_namespace_hosts_and_a_computing_target() {
    if netns::skip_unless_root("windows_across_namespace_hosts_and_a_computing_target") {
        return;
    }
    let c = Cluster::create(3).unwrap_or_else(|e| panic!("cannot create 3 test hosts: {e}"));
    let prog = bin("windows");
    for (n, slots) in [
        (3, vec![(0, 2), (1, 1)]),
        (4, vec![(0, 2), (1, 2)]),
        (5, vec![(0, 1), (1, 3), (2, 1)]),
    ] {
        let o = c.kumi_run(n, &slots, &[], &[prog.to_str().unwrap(), "atomics"]);
        passed(&o, "atomics", &format!("{n} ranks on hosts {slots:?}"));
    }
    // Rank 0 computes for 2 s; ranks 2 and 3 are on the other host.
    let o = c.kumi_run(
        4,
        &[(0, 2), (1, 2)],
        &[("SERVE_MS", "2000")],
        &[prog.to_str().unwrap(), "serve"],
    );
    passed(&o, "serve", "progress thread on");
    println!(
        "ranks 2 and 3 (other host) took {} and {} ms while rank 0 computed for 2000",
        took(&o, 2),
        took(&o, 3)
    );
    for r in [2, 3] {
        // The progress thread looks every 500 us: 150 answers take well
        // under a second, while the target computes for two.
        assert!(
            took(&o, r) < 1000,
            "rank {r} waited for the computing target: {}",
            text(&o)
        );
    }
    let o = c.kumi_run(
        4,
        &[(0, 2), (1, 2)],
        &[("SERVE_MS", "2000"), ("KUMI_PROGRESS", "off")],
        &[prog.to_str().unwrap(), "serve"],
    );
    passed(&o, "serve", "progress thread off");
    assert!(
        took(&o, 2).max(took(&o, 3)) >= 1500,
        "without a progress thread the target cannot answer while it computes: {}",
        text(&o)
    );
    // Rank 1 waits for a lock that rank 2 (the other host) releases only
    // after reading rank 1's part: no progress thread to answer for rank 1.
    let o = c.kumi_run(
        3,
        &[(0, 2), (1, 1)],
        &[("KUMI_PROGRESS", "off")],
        &[prog.to_str().unwrap(), "crossed"],
    );
    passed(&o, "crossed", "progress thread off");
    assert!(c.all_pids().is_empty(), "processes left in the test hosts");
}
