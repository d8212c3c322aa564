//! Test hosts made of Linux network namespaces.
//!
//! [`Cluster::create`]`(k)` makes k namespaces `kumi-t<pid>-<n>-<i>` (the
//! "hosts") and one more `...-sw` holding a bridge (the "switch"). Each host has
//! its loopback up and one veth `kt0` with address `10.251.0.<i+1>/24`, whose
//! other end is a port of the bridge. Each host knows every other host's
//! hardware address from the start (permanent neighbour entries), so no ARP
//! crosses the bridge: a software bridge drops part of the burst of ARP
//! broadcasts when ranks on dozens of hosts start talking at once, and a lost
//! reply is a `No route to host` or seconds of retransmission, which a real
//! switch does not inflict (docs/BENCHMARKS.md, session 28). Nothing is created in the namespace the
//! tests run in, and the addresses exist only inside these namespaces. The
//! [`Drop`] of the cluster kills whatever still runs inside the namespaces and
//! deletes them (which deletes the veths), also when a test panics.
//!
//! Jobs run as on a real cluster: the launcher is started inside the first host
//! (`ip netns exec`), and reaches the hosts through [`Cluster::rsh`], a small
//! script that does `ip netns exec <host> sh -c '<command>'` — the `--rsh`
//! contract of `kumi run`.
//!
//! Creating namespaces needs root. [`available`] says whether this process can;
//! tests that need it print a loud message and return when it cannot (CI runs
//! as root, so they run there).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The network used inside the test namespaces.
pub const SUBNET: &str = "10.251.0.0/24";
/// The interface name every test host has.
pub const IFACE: &str = "kt0";

/// Whether this process can create network namespaces (root and `ip` present).
pub fn available() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    let root = unsafe { libc_geteuid() } == 0;
    root && Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// Prints the loud skip message; returns true if the test must skip.
pub fn skip_unless_root(test: &str) -> bool {
    if available() {
        return false;
    }
    eprintln!(
        "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
         !!! SKIPPED {test}: multi-host tests need root to create network\n\
         !!! namespaces (ip netns). Run them as root (CI does).\n\
         !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
    );
    true
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// Runs the `ip` commands of `batch` (one per line) inside namespace `ns`.
fn ip_batch(ns: &str, batch: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("ip -batch: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let wrote = stdin.write_all(batch.as_bytes());
    drop(stdin);
    let o = child
        .wait_with_output()
        .map_err(|e| format!("ip -batch: {e}"))?;
    match (wrote, o.status.success()) {
        (Ok(()), true) => Ok(()),
        (w, _) => Err(format!(
            "ip -n {ns} -batch: {} {:?}",
            String::from_utf8_lossy(&o.stderr).trim(),
            w.err()
        )),
    }
}

/// K test hosts; everything is removed on drop.
pub struct Cluster {
    /// Host (namespace) names, in order.
    pub hosts: Vec<String>,
    /// Each host's address on [`SUBNET`].
    pub addrs: Vec<String>,
    switch: String,
    dir: PathBuf,
    rsh: PathBuf,
}

/// `k` test hosts, or a panic saying why they could not be made.
pub fn cluster(k: usize) -> Cluster {
    Cluster::create(k).unwrap_or_else(|e| panic!("cannot create {k} test hosts: {e}"))
}

/// Fails the test if any process is left in the test hosts.
pub fn assert_clean(c: &Cluster) {
    let left = c.all_pids();
    assert!(
        left.is_empty(),
        "processes left in the test hosts: {left:?}"
    );
}

/// The `p2p` test program passed all its checks on `n` ranks.
pub fn p2p_ok(o: &std::process::Output, n: usize) {
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success()
            && out.contains(&format!(
                "p2p: all {} checks passed on {n} ranks",
                crate::P2P_CHECKS
            )),
        "{}",
        crate::text(o)
    );
}

impl Cluster {
    /// Creates `k` hosts on one bridge.
    pub fn create(k: usize) -> Result<Cluster, String> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed); // Relaxed: only a unique number.
        let base = format!("kumi-t{}-{n}", std::process::id());
        let dir = std::env::temp_dir().join(&base);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let rsh = dir.join("rsh");
        std::fs::write(
            &rsh,
            "#!/bin/sh\n# kumi's --rsh for test hosts: rsh HOST COMMAND...\nhost=\"$1\"; shift\nexec ip netns exec \"$host\" sh -c \"$*\"\n",
        )
        .map_err(|e| format!("{}: {e}", rsh.display()))?;
        std::fs::set_permissions(&rsh, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let mut c = Cluster {
            hosts: Vec::new(),
            addrs: Vec::new(),
            switch: format!("{base}-sw"),
            dir,
            rsh,
        };
        // From here on, Drop cleans up whatever was made.
        ip(&["netns", "add", &c.switch])?;
        ip(&["-n", &c.switch, "link", "set", "lo", "up"])?;
        ip(&["-n", &c.switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &c.switch, "link", "set", "br0", "up"])?;
        let mac = |i: usize| format!("02:6b:75:6d:{:02x}:{:02x}", i >> 8, i & 0xff);
        for i in 0..k {
            let h = format!("{base}-{i}");
            ip(&["netns", "add", &h])?;
            c.hosts.push(h.clone());
            let port = format!("p{i}");
            let addr = format!("10.251.0.{}", i + 1);
            ip(&["-n", &h, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                &h,
                "link",
                "add",
                IFACE,
                "address",
                &mac(i),
                "type",
                "veth",
                "peer",
                "name",
                &port,
                "netns",
                &c.switch,
            ])?;
            ip(&["-n", &c.switch, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &c.switch, "link", "set", &port, "up"])?;
            ip(&["-n", &h, "addr", "add", &format!("{addr}/24"), "dev", IFACE])?;
            ip(&["-n", &h, "link", "set", IFACE, "up"])?;
            c.addrs.push(addr);
        }
        for (i, h) in c.hosts.iter().enumerate() {
            let neighbours: String = (0..k)
                .filter(|&j| j != i)
                .map(|j| {
                    format!(
                        "neigh replace {} lladdr {} dev {IFACE} nud permanent\n",
                        c.addrs[j],
                        mac(j)
                    )
                })
                .collect();
            ip_batch(h, &neighbours)?;
        }
        Ok(c)
    }

    /// The `--rsh` command for these hosts.
    pub fn rsh(&self) -> &Path {
        &self.rsh
    }

    /// A command that runs `program args` inside host `i`.
    pub fn command_on(&self, i: usize, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.hosts[i]]).arg(program);
        c
    }

    /// `kumi run` inside host 0, across `hosts` (`host:slots` pairs by index),
    /// with the given extra `kumi run` options, the rank program and its args.
    pub fn kumi_command(
        &self,
        n: usize,
        slots: &[(usize, usize)],
        opts: &[&str],
        prog: &[&str],
    ) -> Command {
        let list: Vec<String> = slots
            .iter()
            .map(|(h, s)| format!("{}:{s}", self.hosts[*h]))
            .collect();
        let mut c = self.command_on(0, &crate::bin("kumi"));
        c.arg("run")
            .arg("-n")
            .arg(n.to_string())
            .arg("--hosts")
            .arg(list.join(","))
            .arg("--rsh")
            .arg(&self.rsh)
            .arg("--iface")
            .arg(IFACE)
            .args(opts)
            .args(prog);
        c
    }

    /// Runs [`Cluster::kumi_command`] to its end.
    pub fn kumi_run(
        &self,
        n: usize,
        slots: &[(usize, usize)],
        env: &[(&str, &str)],
        prog: &[&str],
    ) -> Output {
        let mut c = self.kumi_command(n, slots, &[], prog);
        for (k, v) in env {
            c.env(k, v);
        }
        c.stdin(Stdio::null())
            .output()
            .expect("start kumi in the test host")
    }

    /// `netmsg spin` on 2 hosts x 2 ranks under `env`, started and seen
    /// running (its first line is `spinning`): for tests that kill a part
    /// of a live job. Stdout and stderr are piped; stdout's first line is
    /// consumed.
    pub fn start_spinning_job(&self, env: &[(&str, &str)]) -> std::process::Child {
        use std::io::BufRead;
        let prog = crate::bin("netmsg");
        let mut c = self.kumi_command(4, &[(0, 2), (1, 2)], &[], &[prog.to_str().unwrap(), "spin"]);
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kumi");
        let mut first = String::new();
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let _ = out.read_line(&mut first);
        assert_eq!(first.trim_end(), "spinning", "the job did not start");
        // Keep the pipe open (a rank writing to a closed stdout would fail).
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        child
    }

    /// A process inside host `i` one of whose command-line arguments
    /// satisfies `arg`.
    pub fn find_process(&self, i: usize, arg: impl Fn(&[u8]) -> bool) -> Option<i32> {
        self.pids(i).into_iter().find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| c.split(|b| *b == 0).any(&arg))
                .unwrap_or(false)
        })
    }

    /// Process ids running inside host `i`.
    pub fn pids(&self, i: usize) -> Vec<i32> {
        ns_pids(&self.hosts[i])
    }

    /// Process ids running inside any host.
    pub fn all_pids(&self) -> Vec<i32> {
        (0..self.hosts.len()).flat_map(|i| self.pids(i)).collect()
    }

    /// Names of namespaces of this cluster that exist.
    pub fn existing(&self) -> Vec<String> {
        list_namespaces()
            .into_iter()
            .filter(|n| *n == self.switch || self.hosts.contains(n))
            .collect()
    }
}

fn ns_pids(ns: &str) -> Vec<i32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .filter(|&p| crate::alive(p))
                .collect()
        })
        .unwrap_or_default()
}

/// Names of every network namespace that `ip netns` knows.
pub fn list_namespaces() -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let all: Vec<String> = self.hosts.iter().chain([&self.switch]).cloned().collect();
        for ns in &all {
            for pid in ns_pids(ns) {
                // Only processes inside our own namespaces: the test's own.
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        for ns in &all {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits for `child` to end, failing the test if it still runs after `limit`.
pub fn wait_at_most(
    child: &mut std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> std::process::ExitStatus {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        assert!(t0.elapsed() < limit, "{what} still runs after {limit:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Waits (up to `limit`) until no process runs inside any host of `c`.
pub fn wait_all_gone(c: &Cluster, limit: std::time::Duration) {
    let t0 = std::time::Instant::now();
    while !c.all_pids().is_empty() && t0.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
