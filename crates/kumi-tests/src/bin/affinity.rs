//! Prints the cores each rank (and its progress thread) may run on, as the
//! kernel reports them after `kumi::init` applied `KUMI_BIND`.
//!
//! Each rank prints `rank <r> of <n>: main <list>; progress <list>` where a
//! list is `/proc/.../status`'s `Cpus_allowed_list` (e.g. `0-1` or `1`).
//!
//! `kumi run -n 4 target/release/affinity`

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
