//! Jobs across test hosts made of network namespaces (see `kumi_tests::netns`):
//! the point-to-point suite with shared memory and the network mixed, and with
//! the network forced between all pairs, each over TCP and over UDP (the
//! default); large and many messages across hosts over TCP (`udp.rs` has
//! them over UDP); and the loss of a host's agent. These need root; without it each test prints a loud SKIPPED message.

use kumi_tests::netns::{self, assert_clean, cluster, p2p_ok};
use kumi_tests::{bin, kumi_run, text};
use std::time::Duration;

/// The network transports, each named explicitly (UDP is the default).
const TCP: (&str, &str) = ("KUMI_NET_TRANSPORT", "tcp");
const NETS: [(&str, &str); 2] = [TCP, ("KUMI_NET_TRANSPORT", "udp")];

#[test]
fn p2p_suite_on_2_hosts_x_2_ranks() {
    if netns::skip_unless_root("p2p_suite_on_2_hosts_x_2_ranks") {
        return;
    }
    let c = cluster(2);
    let p2p = bin("p2p");
    for net in NETS {
        let o = c.kumi_run(4, &[(0, 2), (1, 2)], &[net], &[p2p.to_str().unwrap()]);
        p2p_ok(&o, 4);
    }
    assert_clean(&c);
}

#[test]
fn p2p_suite_on_3_hosts_with_uneven_ranks() {
    if netns::skip_unless_root("p2p_suite_on_3_hosts_with_uneven_ranks") {
        return;
    }
    let c = cluster(3);
    let p2p = bin("p2p");
    for net in NETS {
        let o = c.kumi_run(
            6,
            &[(0, 1), (1, 3), (2, 2)],
            &[net],
            &[p2p.to_str().unwrap()],
        );
        p2p_ok(&o, 6);
    }
    assert_clean(&c);
}

#[test]
fn p2p_suite_with_tcp_forced_between_all_pairs() {
    if netns::skip_unless_root("p2p_suite_with_tcp_forced_between_all_pairs") {
        return;
    }
    let c = cluster(2);
    let p2p = bin("p2p");
    for net in NETS {
        let o = c.kumi_run(
            4,
            &[(0, 2), (1, 2)],
            &[("KUMI_FORCE_TCP", "all"), net],
            &[p2p.to_str().unwrap()],
        );
        p2p_ok(&o, 4);
    }
    assert_clean(&c);
}

/// The same on one host over loopback: runs without root too.
#[test]
fn p2p_suite_with_tcp_forced_on_one_host() {
    let p2p = bin("p2p");
    for net in NETS {
        let o = kumi_run(
            3,
            &[("KUMI_FORCE_TCP", "all"), ("KUMI_NET", "iface:lo"), net],
            &[p2p.to_str().unwrap()],
        );
        p2p_ok(&o, 3);
    }
}

#[test]
fn big_and_many_messages_across_hosts() {
    if netns::skip_unless_root("big_and_many_messages_across_hosts") {
        return;
    }
    let c = cluster(2);
    let prog = bin("netmsg");
    for (mode, want) in [
        ("big", "64 MiB from rank"),
        ("many", "1000 messages from rank"),
    ] {
        // Over TCP here; tests/udp.rs runs the same over UDP (the default).
        let o = c.kumi_run(
            2,
            &[(0, 1), (1, 1)],
            &[TCP],
            &[prog.to_str().unwrap(), mode],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.matches(want).count() == 2,
            "{mode}: {}",
            text(&o)
        );
    }
    assert_clean(&c);
}

#[test]
fn losing_an_agent_ends_the_job_everywhere_and_names_the_host() {
    if netns::skip_unless_root("losing_an_agent_ends_the_job_everywhere_and_names_the_host") {
        return;
    }
    let c = cluster(2);
    let mut child = c.start_spinning_job(&[]);
    // The agent of host 1: the process there whose command line says `agent`.
    let agent = c
        .find_process(1, |a| a == b"agent")
        .expect("an agent runs on host 1");
    let ranks_before = c.all_pids();
    assert!(
        ranks_before.len() >= 5,
        "agents and ranks: {ranks_before:?}"
    );
    // SAFETY: kill takes a pid and a signal number, no pointers.
    assert_eq!(unsafe { libc::kill(agent, libc::SIGKILL) }, 0);
    let status = netns::wait_at_most(&mut child, Duration::from_secs(5), "the launcher");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "exit status {status:?}; stderr:\n{err}");
    assert!(
        err.contains(&c.hosts[1]),
        "the report does not name host {}:\n{err}",
        c.hosts[1]
    );
    // Every rank on every host is gone (the launcher has been reaped).
    netns::wait_all_gone(&c, Duration::from_secs(5));
    assert_clean(&c);
    let names = c.hosts.clone();
    drop(c);
    let left: Vec<String> = netns::list_namespaces()
        .into_iter()
        .filter(|n| {
            names
                .iter()
                .any(|h| n.starts_with(h.trim_end_matches(char::is_numeric)))
        })
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}
