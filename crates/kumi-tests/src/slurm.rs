//! A real Slurm cluster on this machine, for the tests of kumi under Slurm.
//!
//! [`Slurm::start`]`(k)` makes `k` test hosts ([`crate::netns::Cluster`]),
//! starts a private `munged` (its own key, socket and files), `slurmctld` in
//! host 0 and one `slurmd` per host (`n0`..), each inside its host's network
//! namespace (`nsenter --net`: `ip netns exec` remounts `/sys`, which breaks
//! slurmd's cgroup mount), with a configuration written here and nothing of
//! the machine's own (`SLURM_CONF` points at it). The nodes share this
//! machine's file system and `/dev/shm`, as containers on one host would.
//! [`Drop`] stops the daemons, then the hosts' [`Drop`] kills whatever is
//! left inside them and removes them, and the directory goes: also when a
//! test panics.
//!
//! Needs root and Debian's `slurm-wlm`, `munge`, `libpmix2` and
//! `libpmix-dev` (Slurm's PMIx plugin opens the unversioned `libpmix.so`
//! that only the latter has), which `test.sh` installs. Without root the tests print a loud SKIPPED; as root,
//! a missing Slurm fails them.

use crate::netns::{self, Cluster};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// One cluster at a time in a test process: the tests of one file run in
/// parallel threads, and several clusters on two cores would make the
/// timing of suspend and gang scheduling the machine's, not Slurm's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A running Slurm cluster of test hosts.
pub struct Slurm {
    /// The hosts; node `n<i>` runs in host `i`.
    pub hosts: Cluster,
    dir: PathBuf,
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// Prints the loud skip message; returns true if the test must skip.
pub fn skip_unless_root(test: &str) -> bool {
    netns::skip_unless_root(test)
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let o = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {what}: {e} (test.sh installs slurm-wlm and munge)"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

impl Slurm {
    /// A cluster of `k` nodes, each with `cpus` CPUs, up and idle; or a panic
    /// saying why not.
    pub fn start(k: usize, cpus: usize) -> Slurm {
        Slurm::try_start(k, cpus).unwrap_or_else(|e| panic!("cannot start Slurm: {e}"))
    }

    fn try_start(k: usize, cpus: usize) -> Result<Slurm, String> {
        // A test that failed while holding it poisoned it; the cluster it
        // held is gone all the same.
        let turn = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let hosts = Cluster::create(k)?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed); // Relaxed: a unique number only.
        let dir = std::env::temp_dir().join(format!("kumi-slurm-{}-{n}", std::process::id()));
        let s = Slurm {
            hosts,
            dir,
            _turn: turn,
        };
        // From here on, Drop cleans up.
        for d in ["munge", "state", "spool", "log", "tmp"] {
            std::fs::create_dir_all(s.dir.join(d)).map_err(|e| e.to_string())?;
        }
        use std::os::unix::fs::PermissionsExt;
        let munge = s.dir.join("munge");
        std::fs::set_permissions(&munge, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        let mut key = [0u8; 1024];
        getrandom_fill(&mut key)?;
        std::fs::write(munge.join("key"), key).map_err(|e| e.to_string())?;
        std::fs::set_permissions(munge.join("key"), std::fs::Permissions::from_mode(0o600))
            .map_err(|e| e.to_string())?;
        run(
            Command::new("munged")
                .arg(format!("--socket={}", munge.join("sock").display()))
                .arg(format!("--key-file={}", munge.join("key").display()))
                .arg(format!("--pid-file={}", munge.join("pid").display()))
                .arg(format!("--log-file={}", munge.join("log").display()))
                .arg(format!("--seed-file={}", munge.join("seed").display()))
                .arg("--force"),
            "munged",
        )?;
        std::fs::write(s.conf(), s.config(cpus)).map_err(|e| e.to_string())?;
        for i in 0..k {
            std::fs::create_dir_all(s.dir.join(format!("tmp/n{i}"))).map_err(|e| e.to_string())?;
        }
        run(s.on(0, "slurmctld").arg("-i"), "slurmctld")?;
        for i in 0..k {
            run(s.on(i, "slurmd").args(["-N", &format!("n{i}")]), "slurmd")?;
        }
        let t0 = Instant::now();
        loop {
            let o = s
                .on(0, "sinfo")
                .args(["-h", "-N", "-o", "%T"])
                .output()
                .map_err(|e| e.to_string())?;
            let states = String::from_utf8_lossy(&o.stdout).into_owned();
            if states.lines().filter(|l| l.trim() == "idle").count() == k {
                return Ok(s);
            }
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(format!(
                    "the nodes are not idle after 30 s: {states:?}; logs in {}",
                    s.dir.join("log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    fn config(&self, cpus: usize) -> String {
        let host = kumi::hostname();
        let d = self.dir.display();
        let k = self.hosts.hosts.len();
        let mut c = format!(
            "ClusterName=kumi\n\
             SlurmctldHost={host}({ctl})\n\
             AuthType=auth/munge\nCredType=cred/munge\n\
             AuthInfo=socket={d}/munge/sock\n\
             SlurmUser=root\nSlurmdUser=root\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.%n.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.%n.log\n\
             TmpFS={d}/tmp/%n\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
             SlurmdParameters=config_overrides\n\
             MpiDefault=none\nReturnToService=2\n\
             SchedulerType=sched/backfill\n\
             PreemptMode=GANG\nSchedulerTimeSlice=5\n",
            ctl = self.hosts.addrs[0],
        );
        for (i, addr) in self.hosts.addrs.iter().enumerate() {
            c.push_str(&format!(
                "NodeName=n{i} NodeAddr={addr} NodeHostname={host} CPUs={cpus} State=UNKNOWN\n"
            ));
        }
        c.push_str(&format!(
            "PartitionName=kumi Nodes=n[0-{}] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:2\n",
            k - 1
        ));
        c
    }

    /// `program` inside host `i`'s network namespace, with this cluster's
    /// configuration.
    pub fn on(&self, i: usize, program: impl AsRef<Path>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/var/run/netns/{}", self.hosts.hosts[i]))
            .arg(program.as_ref())
            .env("SLURM_CONF", self.conf());
        c
    }

    /// `srun ARGS` from host 0, to its end.
    pub fn srun(&self, args: &[&str]) -> Output {
        self.on(0, "srun")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("start srun")
    }

    /// The directory of this cluster's files (for scripts and outputs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn getrandom_fill(buf: &mut [u8]) -> Result<(), String> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| format!("/dev/urandom: {e}"))
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let pids = ["slurmctld.pid".to_string(), "munge/pid".to_string()]
            .into_iter()
            .chain((0..self.hosts.hosts.len()).map(|i| format!("slurmd.n{i}.pid")));
        for f in pids {
            if let Some(pid) = std::fs::read_to_string(self.dir.join(f))
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            {
                // Only the daemons this cluster started (their pid files
                // are in its own directory).
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        // The hosts' own Drop kills what is left inside them and deletes them.
    }
}
