//! Parallel files (`kumi::file`) through real jobs: the shared file pointer
//! under contention, atomic mode against concurrent overlapping accesses, and
//! open errors, on one host and across namespace hosts (which see the same
//! file system, as hosts sharing a mount would). The files go to a directory
//! of the test's own, which must be empty afterwards.

use kumi_tests::netns::{self, Cluster};
use kumi_tests::{bin, kumi_run, text};
use std::path::PathBuf;
use std::process::Output;

fn passed(o: &Output, mode: &str) {
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains(&format!("files: {mode} passed")),
        "{mode}: {}",
        text(o)
    );
}

/// An empty directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kumi-files-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

fn left_in(d: &PathBuf) -> Vec<String> {
    std::fs::read_dir(d)
        .expect("scratch directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn shared_pointer_atomic_mode_and_open_errors_on_one_host() {
    let prog = bin("files");
    let dir = scratch("one-host");
    for n in [1, 3, 8] {
        for mode in ["shared", "atomic", "errors"] {
            let o = kumi_run(
                n,
                &[],
                &[prog.to_str().unwrap(), mode, dir.to_str().unwrap()],
            );
            passed(&o, mode);
        }
    }
    assert_eq!(left_in(&dir), Vec::<String>::new(), "files left behind");
    std::fs::remove_dir(&dir).expect("remove scratch directory");
}

#[test]
fn shared_pointer_and_atomic_mode_across_namespace_hosts() {
    if netns::skip_unless_root("shared_pointer_and_atomic_mode_across_namespace_hosts") {
        return;
    }
    let c = Cluster::create(2).unwrap_or_else(|e| panic!("cannot create 2 test hosts: {e}"));
    let prog = bin("files");
    let dir = scratch("two-hosts");
    for mode in ["shared", "atomic"] {
        let o = c.kumi_run(
            4,
            &[(0, 2), (1, 2)],
            &[],
            &[prog.to_str().unwrap(), mode, dir.to_str().unwrap()],
        );
        passed(&o, mode);
    }
    assert_eq!(left_in(&dir), Vec::<String>::new(), "files left behind");
    std::fs::remove_dir(&dir).expect("remove scratch directory");
    assert!(c.all_pids().is_empty(), "processes left in the test hosts");
}
