//! Asynchronous progress, through real jobs: a rank computing for 2 s without
//! calling kumi must not hold up the others' combining requests, collectives
//! or rendezvous (the progress thread serves them), on one host and across
//! namespace hosts; with `KUMI_PROGRESS=off` a rendezvous does stall, which
//! shows the test measures what it claims; and a thread nobody needs does
//! not wake (it is woken by ranks that wait). (Collectives through the shared
//! memory areas no longer need the computing rank once it has started them,
//! so they are no negative control.)

use kumi_tests::netns::{self, Cluster};
use kumi_tests::{bin, kumi_run, text};
use std::process::Output;

fn passed(o: &Output, mode: &str) {
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains(&format!("progress: {mode} passed")),
        "{mode}: {}",
        text(o)
    );
}

#[test]
fn a_computing_rank_still_serves_combining_collectives_and_rendezvous() {
    let prog = bin("progress");
    // `testloop`: the rank that needs it only tests, never waits in kumi.
    for mode in ["combine", "coll", "rendezvous", "testloop"] {
        let o = kumi_run(3, &[], &[prog.to_str().unwrap(), mode]);
        passed(&o, mode);
    }
}

#[test]
fn without_the_progress_thread_the_others_stall() {
    let prog = bin("progress");
    let o = kumi_run(
        3,
        &[("KUMI_PROGRESS", "off")],
        &[prog.to_str().unwrap(), "rendezvous", "stall"],
    );
    passed(&o, "rendezvous");
}

#[test]
fn a_progress_thread_nobody_waits_for_stays_asleep() {
    // A short interval, so that a thread looking on a timer would wake
    // thousands of times in the 300 ms.
    let prog = bin("progress");
    let o = kumi_run(
        2,
        &[("KUMI_PROGRESS_US", "100")],
        &[prog.to_str().unwrap(), "quiet"],
    );
    passed(&o, "quiet");
}

#[test]
fn a_bad_progress_setting_is_refused_by_name() {
    let prog = bin("progress");
    let o = kumi_run(
        2,
        &[("KUMI_PROGRESS", "sometimes")],
        &[prog.to_str().unwrap(), "coll"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("KUMI_PROGRESS"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_computing_rank_serves_others_across_namespace_hosts() {
    if netns::skip_unless_root("a_computing_rank_serves_others_across_namespace_hosts") {
        return;
    }
    let c = Cluster::create(2).unwrap_or_else(|e| panic!("cannot create 2 test hosts: {e}"));
    let prog = bin("progress");
    // Rank 0 on the first host, ranks 1 (the computing one) and 2 on the
    // second: it serves rank 0 over TCP and rank 2 over shared memory.
    for mode in ["combine", "coll", "rendezvous", "testloop"] {
        let o = c.kumi_run(3, &[(0, 1), (1, 2)], &[], &[prog.to_str().unwrap(), mode]);
        passed(&o, mode);
    }
    assert!(c.all_pids().is_empty(), "processes left in the test hosts");
}
