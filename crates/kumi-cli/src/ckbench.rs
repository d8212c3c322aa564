//! `kumi bench checkpoint`: what a coordinated checkpoint costs, beside what
//! the disk itself gives (`dd ... conv=fsync`, one writer per rank, at once),
//! and how long a job takes from a rank's death to computing again under
//! `kumi run --max-restarts`. The two sides alternate, round by round, and
//! the ratio is the median of the rounds' own ratios (ANCHORS.md: this
//! machine changes speed for every program alike).

use crate::bench::BenchArgs;
use crate::comparison::median;
use kumi_bench::checkpoint::sizes;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The `value` of each JSON record of `metric` in `out`, by size.
fn records(out: &str, metric: &str) -> Vec<(usize, f64)> {
    out.lines()
        .filter(|l| l.contains(&format!("\"metric\": \"{metric}\"")))
        .filter_map(|l| {
            let num = |key: &str| {
                let at = l.find(&format!("\"{key}\": "))? + key.len() + 4;
                l[at..].split([',', '}']).next()?.trim().parse::<f64>().ok()
            };
            Some((num("size")? as usize, num("value")?))
        })
        .collect()
}

fn kumi_job(
    me: &Path,
    np: u32,
    ckdir: &Path,
    rank_args: &[String],
    restarts: bool,
) -> Result<String, String> {
    let mut c = Command::new(me);
    c.args(["run", "-n", &np.to_string(), "--checkpoint-dir"])
        .arg(ckdir)
        .args(["--checkpoint-keep", "1"]);
    if restarts {
        c.args(["--max-restarts", "1"]);
    }
    let o = c
        .arg("--")
        .arg(me)
        .args(["bench-rank", "checkpoint"])
        .args(rank_args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot start the job: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "the benchmark job failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Seconds for `np` dd's copying `size` bytes each from `src` (noise, in
/// the page cache) at once, flushed; with `rotate`, and then the previous
/// such set of files deleted: the work of a checkpoint kept in one copy
/// (kumi deletes the previous checkpoint once the new one is complete).
fn dd(
    dir: &Path,
    src: &Path,
    np: u32,
    size: usize,
    rep: usize,
    rotate: bool,
) -> Result<f64, String> {
    let bs = size.min(1 << 20);
    let file = |set: usize, i: u32| dir.join(format!("dd-{set}-{i}"));
    let t = Instant::now();
    let children: Vec<_> = (0..np)
        .map(|i| {
            Command::new("dd")
                .arg(format!("if={}", src.display()))
                .arg(format!("of={}", file(rep % 2, i).display()))
                .arg(format!("bs={bs}"))
                .arg(format!("count={}", size / bs))
                .args(["conv=fsync", "status=none"])
                .spawn()
                .map_err(|e| format!("cannot run dd: {e}"))
        })
        .collect::<Result<_, _>>()?;
    for mut c in children {
        let st = c.wait().map_err(|e| format!("dd: {e}"))?;
        if !st.success() {
            return Err(format!("dd failed ({st})"));
        }
    }
    let plain = t.elapsed().as_secs_f64();
    for i in 0..np {
        let _ = std::fs::remove_file(file((rep + 1) % 2, i));
    }
    Ok(if rotate {
        t.elapsed().as_secs_f64()
    } else {
        plain
    })
}

/// Removes what [`dd`] left.
fn dd_clean(dir: &Path, np: u32) {
    for set in 0..2 {
        for i in 0..np {
            let _ = std::fs::remove_file(dir.join(format!("dd-{set}-{i}")));
        }
    }
}

/// `kumi bench checkpoint`.
pub fn main(a: &BenchArgs) -> i32 {
    match run(a) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kumi bench checkpoint: {e}");
            1
        }
    }
}

fn run(a: &BenchArgs) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find kumi: {e}"))?;
    let dir = std::path::absolute(
        a.dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("kumi-ckpt-bench")),
    )
    .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let max = a
        .max_size
        .unwrap_or(if a.quick { 16 << 20 } else { 1 << 30 });
    let reps = a.reps.unwrap_or(3).max(1);
    let rounds = if a.quick { 1 } else { a.rounds() as usize };
    let np = a.np;
    // A checkpoint of np parts, and the previous one until it is complete,
    // and dd's source.
    let need = (2 * u64::from(np) + 1) * max as u64;
    let free = rustix::fs::statvfs(&dir)
        .map(|s| s.f_bavail * s.f_frsize)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    if free < need + (1 << 30) {
        return Err(format!(
            "{} has {} MiB free; {} ranks x {} MiB need {} MiB and 1 GiB to spare (give a smaller --max-size or another --dir)",
            dir.display(),
            free >> 20,
            np,
            max >> 20,
            need >> 20
        ));
    }
    let sizes = sizes(max);
    // dd copies the same kind of bytes the ranks write (a virtual disk may
    // write zeros faster), from the page cache as the ranks from memory.
    let src = dir.join("dd-source");
    std::fs::write(
        &src,
        kumi_bench::checkpoint::noise(*sizes.last().unwrap_or(&0), 7),
    )
    .map_err(|e| format!("{}: {e}", src.display()))?;
    let rank_args: Vec<String> = [
        "--max-size",
        &max.to_string(),
        "--reps",
        &reps.to_string(),
        "--rep-ms",
        "1",
    ]
    .map(String::from)
    .to_vec();
    // Per size: kumi's seconds, dd's seconds, and their ratio, per round.
    let mut kumi_s = vec![Vec::new(); sizes.len()];
    let mut dd_s = vec![Vec::new(); sizes.len()];
    let mut ratio = vec![Vec::new(); sizes.len()];
    let mut rot_s = vec![Vec::new(); sizes.len()];
    let mut rot_ratio = vec![Vec::new(); sizes.len()];
    let mut restart = Vec::new();
    for round in 0..rounds {
        eprintln!("kumi bench checkpoint: round {} of {rounds}", round + 1);
        let ck = dir.join("kumi");
        let out = kumi_job(&me, np, &ck, &rank_args, false)?;
        let _ = std::fs::remove_dir_all(&ck);
        let got = records(&out, "seconds");
        for (i, &size) in sizes.iter().enumerate() {
            let k = got
                .iter()
                .find(|(s, _)| *s == size)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("no figure for {size} bytes in:\n{out}"))?;
            // One more than timed: the first has no previous set to delete.
            let dd_times = |rotate| -> Result<f64, String> {
                let mut t: Vec<f64> = (0..=reps)
                    .map(|r| dd(&dir, &src, np, size, r, rotate))
                    .collect::<Result<_, _>>()?;
                t.remove(0);
                dd_clean(&dir, np);
                Ok(median(t))
            };
            let (d, dr) = (dd_times(false)?, dd_times(true)?);
            rot_s[i].push(dr);
            rot_ratio[i].push(dr / k);
            kumi_s[i].push(k);
            dd_s[i].push(d);
            ratio[i].push(d / k);
        }
        let probe = dir.join("died");
        let ck = dir.join("restart");
        let mut args = rank_args.clone();
        args.extend(["--probe".to_string(), probe.display().to_string()]);
        let out = kumi_job(&me, np, &ck, &args, true)?;
        let _ = std::fs::remove_dir_all(&ck);
        let _ = std::fs::remove_file(&probe);
        restart.extend(records(&out, "restart_s").into_iter().map(|(_, v)| v));
    }
    let _ = std::fs::remove_file(&src);
    let gbps = |size: usize, s: f64| f64::from(np) * size as f64 / s / 1e9;
    if a.json {
        for (i, &size) in sizes.iter().enumerate() {
            let (k, d, dr) = (
                median(kumi_s[i].clone()),
                median(dd_s[i].clone()),
                median(rot_s[i].clone()),
            );
            println!(
                "{{\"bench\": \"checkpoint\", \"np\": {np}, \"size\": {size}, \"metric\": \"GBps\", \"kumi\": {:.4}, \"dd\": {:.4}, \"ratio\": {:.4}, \"dd_rotate\": {:.4}, \"ratio_rotate\": {:.4}}}",
                gbps(size, k),
                gbps(size, d),
                median(ratio[i].clone()),
                gbps(size, dr),
                median(rot_ratio[i].clone())
            );
        }
        println!(
            "{{\"bench\": \"checkpoint\", \"np\": {np}, \"metric\": \"restart_s\", \"value\": {:.4}}}",
            median(restart)
        );
        return Ok(());
    }
    println!(
        "checkpoint cost, {np} ranks, in {}, median of {rounds} round(s) x {reps}",
        dir.display()
    );
    println!(
        "{:>10} {:>9} {:>10} {:>9} {:>8} {:>11} {:>10}",
        "size/rank", "s/ckpt", "kumi GB/s", "dd GB/s", "kumi/dd", "dd+rm GB/s", "kumi/dd+rm"
    );
    let mut worst = (usize::MAX, f64::INFINITY, f64::INFINITY);
    for (i, &size) in sizes.iter().enumerate() {
        let (k, d, dr) = (
            median(kumi_s[i].clone()),
            median(dd_s[i].clone()),
            median(rot_s[i].clone()),
        );
        let (r, rr) = (median(ratio[i].clone()), median(rot_ratio[i].clone()));
        println!(
            "{:>9}M {:>9.4} {:>10.3} {:>9.3} {:>8.2} {:>11.3} {:>10.2}",
            size >> 20,
            k,
            gbps(size, k),
            gbps(size, d),
            r,
            gbps(size, dr),
            rr
        );
        if r < worst.1 {
            (worst.0, worst.1) = (size, r);
        }
        worst.2 = worst.2.min(rr);
    }
    println!(
        "worst kumi/dd {:.2} (at {} MiB per rank), worst kumi/dd+rm {:.2}: dd is {np} writers at once, conv=fsync, \
         the same kind of bytes; dd+rm then deletes the previous copy, as kumi retires its previous checkpoint",
        worst.1,
        worst.0 >> 20,
        worst.2
    );
    println!(
        "from a rank's death to the restarted job computing again: {:.3} s (median of {}; 1 MiB per rank)",
        median(restart.clone()),
        restart.len()
    );
    Ok(())
}
