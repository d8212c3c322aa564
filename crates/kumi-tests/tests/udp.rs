//! The reliable-UDP network transport (`KUMI_NET_TRANSPORT=udp`) through the
//! real launcher: the point-to-point suite across namespace hosts, clean and
//! with seeded faults injected on every rank's outgoing datagrams (drop,
//! duplicate, reorder: results must stay exact), 64 MiB and 1,000 messages
//! checksummed, a killed rank ending the job, and a stranger sending datagrams
//! to a rank's port. Tests across hosts need root; without it each prints a
//! loud SKIPPED message. The one-host tests run over loopback without root.

use kumi_tests::netns::{self, assert_clean, cluster};
use kumi_tests::{bin, kumi_run, text, AttackedJob};
use std::net::UdpSocket;
use std::process::Output;
use std::time::{Duration, Instant};

const UDP: (&str, &str) = ("KUMI_NET_TRANSPORT", "udp");
const FAULTS: (&str, &str) = (
    "KUMI_UDP_FAULTS",
    "drop=0.05,dup=0.02,reorder=0.05,delay=400,seed=7",
);

/// The job ran with faults injected: every rank says how many datagrams it
/// dropped, and some rank dropped (and so sent again) some.
fn faults_were_injected(o: &Output, n: usize) {
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("udp faults injected"))
        .collect();
    assert_eq!(lines.len(), n, "one fault summary per rank:\n{err}");
    let dropped: u64 = lines
        .iter()
        .filter_map(|l| {
            l.split_once("injected: ")?
                .1
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert!(dropped > 0, "no datagram was dropped:\n{err}");
}

fn p2p_ok(o: &Output, n: usize) {
    netns::p2p_ok(o, n);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("refused"), "a job peer was refused:\n{err}");
}

#[test]
fn p2p_suite_over_udp_on_2_hosts_x_2_ranks() {
    if netns::skip_unless_root("p2p_suite_over_udp_on_2_hosts_x_2_ranks") {
        return;
    }
    let c = cluster(2);
    let p2p = bin("p2p");
    let o = c.kumi_run(4, &[(0, 2), (1, 2)], &[UDP], &[p2p.to_str().unwrap()]);
    p2p_ok(&o, 4);
    assert_clean(&c);
}

#[test]
fn p2p_suite_over_udp_with_faults_on_2_hosts_x_2_ranks() {
    if netns::skip_unless_root("p2p_suite_over_udp_with_faults_on_2_hosts_x_2_ranks") {
        return;
    }
    let c = cluster(2);
    let p2p = bin("p2p");
    for seed in ["7", "8"] {
        let faults = FAULTS.1.replace("seed=7", &format!("seed={seed}"));
        let o = c.kumi_run(
            4,
            &[(0, 2), (1, 2)],
            &[UDP, (FAULTS.0, &faults), ("KUMI_FORCE_TCP", "all")],
            &[p2p.to_str().unwrap()],
        );
        p2p_ok(&o, 4);
        faults_were_injected(&o, 4);
    }
    assert_clean(&c);
}

/// The same on one host over loopback, every pair over UDP: runs without root.
#[test]
fn p2p_suite_over_udp_on_one_host_clean_and_with_faults() {
    let p2p = bin("p2p");
    // Clean; with faults; and with the transport's knobs far from their
    // defaults (tiny datagrams and window: fragmentation and credits at work).
    let knobs = [("KUMI_UDP_SEGMENT", "600"), ("KUMI_UDP_WINDOW", "8")];
    for extra in [&[][..], &[FAULTS][..], &knobs[..]] {
        let mut env = vec![("KUMI_FORCE_TCP", "all"), ("KUMI_NET", "iface:lo"), UDP];
        env.extend_from_slice(extra);
        let o = kumi_run(3, &env, &[p2p.to_str().unwrap()]);
        p2p_ok(&o, 3);
        if extra.contains(&FAULTS) {
            faults_were_injected(&o, 3);
        }
    }
}

#[test]
fn big_and_many_messages_over_udp_across_hosts_clean_and_with_faults() {
    if netns::skip_unless_root("big_and_many_messages_over_udp_across_hosts") {
        return;
    }
    let c = cluster(2);
    let prog = bin("netmsg");
    for faults in [None, Some(FAULTS)] {
        for (mode, want) in [
            ("big", "64 MiB from rank"),
            ("many", "1000 messages from rank"),
        ] {
            let mut env = vec![UDP];
            if let Some(f) = faults {
                env.push(f);
            }
            let t = Instant::now();
            let o = c.kumi_run(2, &[(0, 1), (1, 1)], &env, &[prog.to_str().unwrap(), mode]);
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success() && out.matches(want).count() == 2,
                "{mode} (faults {faults:?}): {}",
                text(&o)
            );
            if faults.is_some() {
                faults_were_injected(&o, 2);
            }
            eprintln!(
                "{mode}, faults {faults:?}: {:.2} s",
                t.elapsed().as_secs_f64()
            );
        }
    }
    assert_clean(&c);
}

#[test]
fn a_killed_rank_ends_a_udp_job_everywhere() {
    if netns::skip_unless_root("a_killed_rank_ends_a_udp_job_everywhere") {
        return;
    }
    let c = cluster(2);
    let mut child = c.start_spinning_job(&[UDP]);
    std::thread::sleep(Duration::from_millis(200));
    let rank = c
        .find_process(1, |a| a.ends_with(b"netmsg"))
        .expect("a rank runs on host 1");
    // SAFETY: kill takes a pid and a signal number, no pointers.
    assert_eq!(unsafe { libc::kill(rank, libc::SIGKILL) }, 0);
    let status = netns::wait_at_most(
        &mut child,
        Duration::from_secs(10),
        "the launcher, after a rank was killed,",
    );
    assert!(!status.success(), "exit status {status:?}");
    netns::wait_all_gone(&c, Duration::from_secs(10));
    assert_clean(&c);
}

/// A datagram prefix as the UDP transport writes it (`kumi_transport::udp::wire`),
/// written by hand as a stranger would.
fn prefix(ty: u8, from: u32, to: u32) -> Vec<u8> {
    let mut b = b"KUD1".to_vec();
    b.extend([ty, 0, 0, 0]);
    b.extend(from.to_le_bytes());
    b.extend(to.to_le_bytes());
    b
}

#[test]
fn strangers_datagrams_are_refused_and_the_udp_job_finishes() {
    let job = AttackedJob::start("udp");
    let addr = job.addr.clone();

    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    // 1. Random bytes.
    s.send_to(&[0x5a; 100], &addr).unwrap();
    // 2. A greeting claiming rank 2 (not from rank 2's address).
    let mut hello = prefix(1, 2, 0);
    hello.extend([7u8; 96]);
    s.send_to(&hello, &addr).unwrap();
    // 3. A proof with a wrong MAC, claiming rank 1.
    let mut proof = prefix(3, 1, 0);
    proof.extend([0xee; 96]);
    s.send_to(&proof, &addr).unwrap();
    // 4. A data datagram with a guessed token, claiming rank 1.
    let mut data = prefix(4, 1, 0);
    data.extend(0u64.to_le_bytes());
    data.extend([1u8; 200]);
    s.send_to(&data, &addr).unwrap();
    // 5. A datagram addressed to another rank.
    s.send_to(&prefix(4, 1, 5), &addr).unwrap();

    let err = job.finish();
    let me = s.local_addr().unwrap().to_string();
    let refusals: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(&format!("refused a datagram from {me}")))
        .collect();
    assert_eq!(refusals.len(), 5, "one line per refusal:\n{err}");
    assert!(
        refusals.iter().all(|l| l.starts_with("kumi: rank 0: ")),
        "{err}"
    );
    for reason in [
        "not kumi's datagram protocol",
        "claims to be rank 2",
        "addressed to rank 5",
    ] {
        assert!(
            refusals.iter().any(|l| l.contains(reason)),
            "no refusal says {reason:?}:\n{err}"
        );
    }
    assert_eq!(
        err.lines().filter(|l| l.contains("refused")).count(),
        5,
        "a job peer was refused:\n{err}"
    );
}
