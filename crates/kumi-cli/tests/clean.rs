//! `kumi clean` end to end: a leftover segment of a dead owner is removed, one of
//! a live owner is kept.

use kumi_transport::shm::{named_path_prefix, Segment, ShmConfig};
use std::process::Command;

const KUMI: &str = env!("CARGO_BIN_EXE_kumi");

fn random_job(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("jtest{tag}{:x}{nanos:x}", std::process::id())
}

/// Not a test of its own: run by `clean_removes_dead_and_keeps_live` as a child
/// that creates a named segment and exits without unlinking it.
#[test]
fn segment_creator_helper() {
    let Ok(job) = std::env::var("KUMI_TEST_CREATE_SEGMENT") else {
        return;
    };
    let seg = Segment::create_named(&job, 1, &ShmConfig::default()).unwrap();
    std::mem::forget(seg);
}

#[test]
fn clean_removes_dead_and_keeps_live() {
    let dead = random_job("d");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["segment_creator_helper", "--exact", "--quiet"])
        .env("KUMI_TEST_CREATE_SEGMENT", &dead)
        .status()
        .unwrap();
    assert!(status.success());
    let live = random_job("l");
    let _seg = Segment::create_named(&live, 1, &ShmConfig::default()).unwrap();
    let dead_path = format!("/dev/shm/{}", Segment::named(&dead));
    let live_path = format!("/dev/shm/{}", Segment::named(&live));
    assert!(std::path::Path::new(&dead_path).exists());
    assert!(dead_path.contains(&named_path_prefix()));

    let dry = Command::new(KUMI)
        .args(["clean", "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "would remove {dead_path} (job {dead}; owners gone"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "kept {live_path} (job {live}; owner pid {} is alive)",
            std::process::id()
        )),
        "{text}"
    );
    assert!(
        std::path::Path::new(&dead_path).exists(),
        "dry run removes nothing"
    );

    let out = Command::new(KUMI).arg("clean").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("removed {dead_path}")), "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("kumi clean: removed"),
        "{text}"
    );
    assert!(!std::path::Path::new(&dead_path).exists());
    assert!(
        std::path::Path::new(&live_path).exists(),
        "a live owner's segment is kept"
    );
    Segment::unlink_named(&live).unwrap();
}
