//! Helpers shared by the rank programs in `src/bin` and the tests in `tests/`.
//!
//! The rank programs are ordinary kumi programs; the tests start them with the
//! real `kumi` binary and check what they print and how they end. Nothing of
//! kumi's own is mocked here.
#![deny(missing_docs)]

pub mod netns;
pub mod programs;
pub mod slurm;

use std::path::PathBuf;
use std::process::{Command, Output};

/// A small deterministic generator (splitmix64), so a failing run can be
/// replayed from its seed without extra dependencies.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// How many checks the `p2p` program runs (its last line counts them).
pub const P2P_CHECKS: usize = 14;

/// Fills `buf` with bytes determined by `(seed, sender, index)`, so the receiver
/// can check every byte without being sent the expected contents.
pub fn fill(buf: &mut [u8], sender: usize, index: u64) {
    let mut r = Rng(((sender as u64) << 48) ^ index ^ 0x5eed);
    for chunk in buf.chunks_mut(8) {
        let v = r.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// Checks `buf` against [`fill`]; returns the first differing offset.
pub fn check(buf: &[u8], sender: usize, index: u64) -> Result<(), usize> {
    let mut r = Rng(((sender as u64) << 48) ^ index ^ 0x5eed);
    for (i, chunk) in buf.chunks(8).enumerate() {
        let v = r.next_u64().to_le_bytes();
        if chunk != &v[..chunk.len()] {
            let j = chunk
                .iter()
                .zip(v.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(i * 8 + j);
        }
    }
    Ok(())
}

/// Path of a binary built next to the running test (the `kumi` command or one
/// of this crate's rank programs).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target directory");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        p.display()
    );
    p
}

/// Runs `kumi run -n <n> <args...>` with extra environment; returns its output.
pub fn kumi_run(n: usize, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(bin("kumi"));
    c.arg("run").arg("-n").arg(n.to_string()).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("start kumi")
}

/// Entries of /dev/shm that look like kumi's.
pub fn kumi_shm_files() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("kumi"))
                .collect()
        })
        .unwrap_or_default()
}

/// Does process `pid` exist and is it not a zombie? (A rank whose parent died is
/// re-parented; where PID 1 does not reap, it stays a zombie, which is gone for
/// every purpose that matters here: it runs nothing and holds no memory.)
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}

/// Computes (a busy loop, no kumi call) for `d`; returns a value the optimizer
/// cannot drop. Rank programs use it to stand for a long computation.
pub fn compute(d: std::time::Duration) -> u64 {
    let t = std::time::Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
    x
}

/// 2x2 integer matrices, row-major, multiplied (wrapping): a user operation
/// that does not commute, so a result shows whether ranks were combined in
/// rank order.
pub fn matmul() -> kumi::Op<[i64; 4]> {
    kumi::Op::user(false, |a: &[[i64; 4]], b: &mut [[i64; 4]]| {
        for (x, y) in a.iter().zip(b.iter_mut()) {
            *y = [
                x[0].wrapping_mul(y[0])
                    .wrapping_add(x[1].wrapping_mul(y[2])),
                x[0].wrapping_mul(y[1])
                    .wrapping_add(x[1].wrapping_mul(y[3])),
                x[2].wrapping_mul(y[0])
                    .wrapping_add(x[3].wrapping_mul(y[2])),
                x[2].wrapping_mul(y[1])
                    .wrapping_add(x[3].wrapping_mul(y[3])),
            ];
        }
    })
}

/// A job's exit status and both of its outputs, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A 3-rank `netmsg sec` job on one host whose rank 0 keeps round trips
/// going while a test attacks its data port (`transport`: `tcp` or `udp`),
/// until [`AttackedJob::finish`] ends it.
pub struct AttackedJob {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    dir: PathBuf,
    /// Rank 0's data address, as it printed it.
    pub addr: String,
}

impl AttackedJob {
    /// Starts the job, network transport forced between all pairs on loopback.
    pub fn start(transport: &str) -> AttackedJob {
        use std::io::BufRead;
        use std::process::Stdio;
        let dir = std::env::temp_dir().join(format!("kumi-sec-{transport}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = Command::new(bin("kumi"))
            .args(["run", "-n", "3"])
            .arg(bin("netmsg"))
            .arg("sec")
            .arg(dir.join("go"))
            .env("KUMI_FORCE_TCP", "all")
            .env("KUMI_NET_TRANSPORT", transport)
            .env("KUMI_NET", "iface:lo")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kumi");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let addr = line
            .strip_prefix("addr ")
            .map(str::trim)
            .unwrap_or_else(|| panic!("expected rank 0's address, got {line:?}"))
            .to_string();
        AttackedJob {
            child,
            out,
            dir,
            addr,
        }
    }

    /// Lets the refusals be logged, ends the job, checks that it finished
    /// correctly through the attacks, and returns its standard error.
    pub fn finish(mut self) -> String {
        use std::io::Read;
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::fs::write(self.dir.join("go"), b"").unwrap();
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = self.child.wait().unwrap();
        let _ = std::fs::remove_dir_all(&self.dir);
        assert!(
            status.success(),
            "status {status:?}\nstdout:\n{rest}\nstderr:\n{err}"
        );
        assert!(rest.contains("round trips during the attacks"), "{rest}");
        err
    }
}
