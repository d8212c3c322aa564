//! Prints the cores each rank (and its progress thread) may run on, as the
//! kernel reports them after `kumi::init` applied `KUMI_BIND`.
//!
//! Each rank prints `rank <r> of <n>: main <list>; progress <list>` where a
//! list is `/proc/.../status`'s `Cpus_allowed_list` (e.g. `0-1` or `1`).
//!
//! With `crowd`, first every rank moves onto the first core it may run on
//! (pinned there, then free again, as the scheduler leaves ranks it woke
//! on one core), and allgathers its CPU until every rank's is different,
//! for at most `CROWD_CALLS` calls, printing `apart after <k> calls` or
//! `together after <k> calls`; the lines above follow.
//!
//! `kumi run -n 4 target/release/affinity [crowd]`

/// Calls after which ranks put on one core must be apart. kumi parts them
/// in the first few (a waiting rank that finds another on its core moves);
/// the scheduler alone takes thousands (docs/BENCHMARKS.md, session 49).
const CROWD_CALLS: usize = 500;

/// Puts the calling thread on the first core of its allowed set, and frees
/// it again there.
fn crowd() {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is an empty set; the calls read and write
    // `size` bytes of these sets and act on the calling thread (pid 0).
    unsafe {
        let mut all: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, size, &mut all), 0, "affinity");
        let first = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &all))
            .expect("a core");
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(first, &mut one);
        assert_eq!(libc::sched_setaffinity(0, size, &one), 0, "pin");
        assert_eq!(libc::sched_setaffinity(0, size, &all), 0, "unpin");
    }
}

fn allowed(status: &str) -> String {
    std::fs::read_to_string(status)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map_or_else(|| "?".into(), |v| v.trim().to_string())
}

fn main() -> Result<(), kumi::Error> {
    let universe = kumi::init()?;
    let w = universe.world();
    if std::env::args().nth(1).as_deref() == Some("crowd") {
        crowd();
        let mut cpus = vec![0u32; w.size()];
        let (mut k, mut apart) = (0, false);
        while k < CROWD_CALLS && !apart {
            // SAFETY: sched_getcpu has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() } as u32;
            w.allgather(&[cpu], &mut cpus)?;
            k += 1;
            let mut sorted = cpus.clone();
            sorted.sort_unstable();
            sorted.dedup();
            apart = sorted.len() == w.size();
        }
        if w.rank() == 0 {
            println!(
                "{} after {k} calls",
                if apart { "apart" } else { "together" }
            );
        }
    }
    // The progress thread is named `kumi-progress` (by itself, once it runs:
    // look for it for up to a second).
    let find = || {
        std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .map(|t| t.path())
            .find(|t| {
                std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.trim() == "kumi-progress")
            })
    };
    let mut thread = find();
    for _ in 0..100 {
        if thread.is_some() || w.size() == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        thread = find();
    }
    let progress = thread.map_or_else(
        || "none".into(),
        |t| allowed(&t.join("status").to_string_lossy()),
    );
    let line = format!(
        "rank {} of {}: main {}; progress {}",
        w.rank(),
        w.size(),
        allowed("/proc/thread-self/status"),
        progress
    );
    // One line per rank, in rank order.
    for r in 0..w.size() {
        if r == w.rank() {
            println!("{line}");
        }
        w.barrier()?;
    }
    Ok(())
}
