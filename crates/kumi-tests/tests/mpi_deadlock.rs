//! The deadlock catalogue through the MPI C ABI: `crates/kumi-mpi/tests/c/deadlock.c`
//! built with `kumi cc -g` deadlocks in each of its modes; kumi must report
//! within 3 s, end the job with exit code 86, and name the ranks, the MPI calls
//! as the program wrote them, and the program's own file:line and function
//! (the caller of the MPI function, symbolized from the debug information).
//!
//! Needs the workspace built (`kumi`, `libmpi.so`) and a C compiler.

use kumi_tests::bin;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The exit code `kumi run --help` documents for a deadlock.
const DEADLOCK_EXIT: i32 = 86;
const SOON: Duration = Duration::from_secs(3);

fn program() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let kumi = bin("kumi");
        let dir = kumi
            .parent()
            .expect("target dir")
            .join("mpi-tests/deadlock");
        std::fs::create_dir_all(&dir).expect("output dir");
        let out = dir.join("deadlock");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kumi-mpi/tests/c/deadlock.c");
        let o = Command::new(&kumi)
            .args(["cc", "-g", "-O0", "-Wall", "-o"])
            .arg(&out)
            .arg(&src)
            .output()
            .expect("run kumi cc");
        assert!(
            o.status.success(),
            "kumi cc failed on deadlock.c:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// Runs `deadlock MODE` on `n` ranks; checks the exit code, the time to the
/// report, and that the report holds every `expect`ed piece.
fn deadlock(n: usize, mode: &str, expect: &[&str]) {
    let t0 = Instant::now();
    let mut child = Command::new(bin("kumi"))
        .args(["run", "-n", &n.to_string()])
        .arg(program())
        .arg(mode)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kumi run");
    let mut reported_after = None;
    let mut text = String::new();
    for line in BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        if reported_after.is_none() && line.contains("deadlock:") {
            reported_after = Some(t0.elapsed());
        }
        text.push_str(&line);
        text.push('\n');
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
        }
    }
    let status = child.wait().expect("wait for kumi run");
    assert_eq!(status.code(), Some(DEADLOCK_EXIT), "{mode}:\n{text}");
    let t = reported_after.unwrap_or_else(|| panic!("{mode}: no report:\n{text}"));
    assert!(t < SOON, "{mode}: reported after {t:?}\n{text}");
    for e in expect {
        assert!(text.contains(e), "{mode}: no {e:?} in\n{text}");
    }
}

#[test]
fn c_recv_cycle_of_two() {
    deadlock(
        2,
        "recv2",
        &[
            "rank 0 waits in MPI_Recv on MPI_COMM_WORLD from rank 1, tag 7 (at ",
            "rank 1 waits in MPI_Recv on MPI_COMM_WORLD from rank 0, tag 7 (at ",
            "deadlock.c:38 in main)",
            "cycle 0 -> 1 -> 0",
        ],
    );
}

#[test]
fn c_all_in_barrier_but_one_in_recv() {
    deadlock(
        4,
        "barrier",
        &[
            "ranks 0-2 wait in MPI_Barrier on MPI_COMM_WORLD (at ",
            "deadlock.c:43 in main)",
            "rank 3 waits in MPI_Recv on MPI_COMM_WORLD from rank 0, tag 7",
            "deadlock.c:41 in main)",
        ],
    );
}

#[test]
fn c_bcast_against_reduce() {
    deadlock(
        4,
        "bcastreduce",
        &[
            "rank 0 waits in MPI_Reduce on MPI_COMM_WORLD",
            "deadlock.c:47 in main)",
            "ranks 1-3 wait in MPI_Bcast on MPI_COMM_WORLD",
            "deadlock.c:49 in main)",
        ],
    );
}

#[test]
fn c_wildcard_recv_that_nothing_matches() {
    deadlock(
        3,
        "wildcard",
        &[
            "rank 0 waits in MPI_Recv on MPI_COMM_WORLD from any source, tag 5",
            "deadlock.c:52 in main)",
            "ranks 1, 2 wait in MPI_Barrier on MPI_COMM_WORLD",
            "deadlock.c:55 in main)",
        ],
    );
}

#[test]
fn c_send_send_cycle_of_one_mib_messages() {
    deadlock(
        2,
        "sendsend",
        &[
            "rank 0 waits in MPI_Send on MPI_COMM_WORLD to rank 1, tag 7",
            "rank 1 waits in MPI_Send on MPI_COMM_WORLD to rank 0, tag 7",
            "deadlock.c:59 in main)",
            "cycle 0 -> 1 -> 0",
        ],
    );
}

#[test]
fn c_irecv_wait_cycle_of_two() {
    // The request handle carries nothing but the engine's request: what
    // the report says of the wait comes from the engine.
    deadlock(
        2,
        "irecvwait",
        &[
            "rank 0 waits in MPI_Wait on MPI_COMM_WORLD from rank 1, tag 7 (at ",
            "rank 1 waits in MPI_Wait on MPI_COMM_WORLD from rank 0, tag 7 (at ",
            "deadlock.c:63 in main)",
            "cycle 0 -> 1 -> 0",
        ],
    );
}

#[test]
fn c_waitall_cycle_of_two() {
    // Two requests pending, both from one peer: the report names the call
    // and the communicator, and the cycle through that peer.
    deadlock(
        2,
        "waitall",
        &[
            "ranks 0, 1 wait in MPI_Waitall on MPI_COMM_WORLD (at ",
            "deadlock.c:68 in main)",
            "cycle 0 -> 1 -> 0",
        ],
    );
}

#[test]
fn c_waitall_cycle_beside_a_computing_rank() {
    // Not every rank is blocked: only the peer the two waits share (all
    // their requests are from one rank) lets kumi see the cycle; with the
    // requests packed in their handles and with requests of the table.
    for mode in ["partial", "partialtyped"] {
        deadlock(
            3,
            mode,
            &[
                "ranks 0, 1 wait in MPI_Waitall on MPI_COMM_WORLD (at ",
                "deadlock.c:79 in main)",
                "cycle 0 -> 1 -> 0",
            ],
        );
    }
}
