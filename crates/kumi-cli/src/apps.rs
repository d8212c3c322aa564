//! `kumi bench apps BUILD_DIR...`: the binaries of public benchmarks (NPB,
//! Himeno, HPL, the OSU micro-benchmarks), built outside kumi, run on kumi,
//! MPICH and Open MPI side by side: alternating rounds, medians, each run's
//! own verification checked, the paired ratios kumi/reference.
//!
//! Which binary runs where is read from the binaries themselves (their ELF
//! `DT_NEEDED` and `DT_RUNPATH`): a program linked to `libmpi.so.12` /
//! `libmpich.so.12` (MPICH's ABI) runs on MPICH through `mpiexec.mpich` and
//! on kumi through `kumi run` with kumi's library first on the library path,
//! the same file on both, unless a build made with kumi's own wrappers (its
//! run path is kumi's library directory) is given too: kumi then runs that
//! one. A program linked to `libmpi.so.40` is Open MPI's. The runner never
//! builds or downloads anything: it takes the builds it is given.

use crate::bench::{round_order, BenchArgs, Reference};
use crate::comparison::{human_size, Comparison};
use kumi_bench::apps::{Program, SizeMeaning};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Which MPI a binary was built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Abi {
    /// MPICH's (kumi's too).
    Mpich,
    /// Open MPI's.
    OpenMpi,
}

/// One binary of a build.
#[derive(Clone, Debug)]
struct Binary {
    path: PathBuf,
    abi: Abi,
    /// Built with kumi's wrappers: its run path names kumi's library
    /// directory, so it loads kumi's library wherever it runs.
    kumi_built: bool,
}

/// Every side of a comparison: kumi first, then the references.
const SIDES: [Side; 3] = [Side::Kumi, Side::Mpich, Side::OpenMpi];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Kumi,
    Mpich,
    OpenMpi,
}

impl Side {
    fn label(self) -> &'static str {
        match self {
            Side::Kumi => "kumi",
            Side::Mpich => "mpich",
            Side::OpenMpi => "openmpi",
        }
    }

    fn reference(self) -> Reference {
        match self {
            Side::Kumi => Reference::KumiC,
            Side::Mpich => Reference::Mpich,
            Side::OpenMpi => Reference::Openmpi,
        }
    }

    /// The binary this side runs, out of every build of one program: kumi
    /// prefers a build of its own, then runs MPICH's with its library;
    /// MPICH runs an MPICH build not made by kumi; Open MPI its own.
    fn pick<'b>(self, builds: &'b [Binary]) -> Result<Option<&'b Binary>, String> {
        let one = |f: &dyn Fn(&Binary) -> bool| -> Result<Option<&'b Binary>, String> {
            let found: Vec<&Binary> = builds.iter().filter(|b| f(b)).collect();
            match found[..] {
                [] => Ok(None),
                [b] => Ok(Some(b)),
                _ => Err(format!(
                    "{} builds for {}: {}; give one",
                    found.len(),
                    self.label(),
                    found
                        .iter()
                        .map(|b| b.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        };
        match self {
            Side::Kumi => match one(&|b| b.abi == Abi::Mpich && b.kumi_built)? {
                Some(b) => Ok(Some(b)),
                None => one(&|b| b.abi == Abi::Mpich),
            },
            Side::Mpich => one(&|b| b.abi == Abi::Mpich && !b.kumi_built),
            Side::OpenMpi => one(&|b| b.abi == Abi::OpenMpi),
        }
    }
}

/// What a binary's ELF dynamic section says of its libraries.
struct Links {
    /// `DT_NEEDED`: the sonames it asks for.
    needed: Vec<String>,
    /// `DT_RUNPATH` or `DT_RPATH`, split at `:`.
    runpath: Vec<String>,
}

/// The libraries a binary asks for and its run path; `None` if it is not a
/// dynamically linked ELF file.
fn links(path: &Path) -> Result<Option<Links>, String> {
    use object::read::elf::{Dyn, FileHeader};
    let data = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !data.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    let bad = |e: object::Error| format!("{}: not an ELF file kumi can read: {e}", path.display());
    let header = object::elf::FileHeader64::<object::Endianness>::parse(&*data).map_err(bad)?;
    let endian = header.endian().map_err(bad)?;
    let sections = header.sections(endian, &*data).map_err(bad)?;
    let Some((dynamic, link)) = sections.dynamic(endian, &*data).map_err(bad)? else {
        return Ok(None);
    };
    let strings = sections.strings(endian, &*data, link).map_err(bad)?;
    let (mut needed, mut runpath) = (Vec::new(), Vec::new());
    for d in dynamic {
        let tag = d.d_tag(endian);
        let text = || {
            d.string(endian, strings)
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .map_err(bad)
        };
        match tag {
            object::elf::DT_NEEDED => needed.push(text()?),
            object::elf::DT_RUNPATH | object::elf::DT_RPATH => {
                runpath.extend(text()?.split(':').map(String::from))
            }
            _ => {}
        }
    }
    Ok(Some(Links { needed, runpath }))
}

/// Classifies one file: `Ok(None)` if it is no program kumi knows or links
/// no MPI library (a note says why for a known name).
fn classify(
    path: &Path,
    kumi_lib: &Path,
    notes: &mut Vec<String>,
) -> Result<Option<Binary>, String> {
    let Some(Links { needed, runpath }) = links(path)? else {
        notes.push(format!(
            "{}: not a dynamically linked program; left out",
            path.display()
        ));
        return Ok(None);
    };
    // MPICH's C and Fortran libraries (Debian's Fortran programs ask only
    // for libmpichfort.so.12), and Open MPI's (libmpi.so.40, and
    // libmpi_mpifh.so.40 and friends for Fortran).
    let abi = if needed.iter().any(|n| {
        matches!(
            n.as_str(),
            "libmpi.so.12" | "libmpich.so.12" | "libmpichfort.so.12" | "libmpifort.so.12"
        )
    }) {
        Abi::Mpich
    } else if needed
        .iter()
        .any(|n| n.starts_with("libmpi") && n.ends_with(".so.40"))
    {
        Abi::OpenMpi
    } else {
        notes.push(format!(
            "{}: links no MPICH or Open MPI library (a static build?); left out",
            path.display()
        ));
        return Ok(None);
    };
    let kumi_built = runpath
        .iter()
        .any(|d| Path::new(d).canonicalize().is_ok_and(|d| d == kumi_lib));
    Ok(Some(Binary {
        path: path.to_path_buf(),
        abi,
        kumi_built,
    }))
}

/// Every program under the build directories, by name, with its builds.
fn scan(
    dirs: &[PathBuf],
    kumi_lib: &Path,
    notes: &mut Vec<String>,
) -> Result<BTreeMap<String, (Program, Vec<Binary>)>, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut found: BTreeMap<String, (Program, Vec<Binary>)> = BTreeMap::new();
    for dir in dirs {
        if !dir.is_dir() {
            return Err(format!("{}: not a directory", dir.display()));
        }
        // Absolute: each program starts in its own directory (`run_once`),
        // where a path relative to ours would name nothing.
        let dir = &std::path::absolute(dir)
            .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
        // Depth-first, a few levels (NPB's bin/, OSU's libexec/osu-micro-
        // benchmarks/mpi/collective/), not following links to directories.
        let mut stack = vec![(dir.clone(), 0)];
        let before = found.values().map(|(_, b)| b.len()).sum::<usize>();
        while let Some((d, depth)) = stack.pop() {
            let entries =
                std::fs::read_dir(&d).map_err(|e| format!("cannot read {}: {e}", d.display()))?;
            for e in entries.flatten() {
                let path = e.path();
                let Ok(meta) = e.metadata() else { continue };
                let name = e.file_name().to_string_lossy().into_owned();
                if meta.is_dir() {
                    if depth < 6 && !name.starts_with('.') {
                        stack.push((path, depth + 1));
                    }
                    continue;
                }
                let Some(program) = Program::from_file_name(&name) else {
                    continue;
                };
                if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                    continue;
                }
                if let Some(b) = classify(&path, kumi_lib, notes)? {
                    found
                        .entry(program.name())
                        .or_insert_with(|| (program, Vec::new()))
                        .1
                        .push(b);
                }
            }
        }
        if found.values().map(|(_, b)| b.len()).sum::<usize>() == before {
            notes.push(format!(
                "{}: no NPB (*.<class>.x), Himeno (bmt), HPL (xhpl) or OSU (osu_*) program in it",
                dir.display()
            ));
        }
    }
    Ok(found)
}

/// One run of one binary on one side; its standard output, or why it does
/// not count (it failed, hung past the time limit, or printed no figure).
fn run_once(
    side: Side,
    bin: &Binary,
    np: u32,
    limit: Duration,
    kumi_lib: &Path,
    scratch: &Path,
) -> Result<String, String> {
    let mut c = side.reference().launcher(np)?;
    c.arg(&bin.path);
    // HPL reads HPL.dat from where it starts.
    if let Some(d) = bin.path.parent() {
        c.current_dir(d);
    }
    if side == Side::Kumi && !bin.kumi_built {
        // An MPICH build finds kumi's libmpi.so.12/libmpich.so.12 first.
        let mut paths = vec![kumi_lib.to_path_buf()];
        if let Some(lp) = std::env::var_os("LD_LIBRARY_PATH") {
            paths.extend(std::env::split_paths(&lp));
        }
        c.env(
            "LD_LIBRARY_PATH",
            std::env::join_paths(paths).map_err(|e| e.to_string())?,
        );
    }
    let launcher = side.reference().tools().1;
    run_bounded(&mut c, launcher, limit, scratch).map(|(out, _)| out)
}

/// Where [`run_bounded`] keeps a job's standard output: after a failed or
/// timed-out run, what it printed before it ended.
pub(crate) fn stdout_in(scratch: &Path) -> std::path::PathBuf {
    scratch.join("stdout")
}

/// Runs `c` (which starts `launcher`) in a process group of its own, with
/// its output into files under `scratch`, for at most `limit`: its standard
/// output and when it exited (exactly: a pidfd says when), or
/// why not: it failed, ran past the limit (the whole group is ended then),
/// or the runner was interrupted.
pub(crate) fn run_bounded(
    c: &mut Command,
    launcher: &str,
    limit: Duration,
    scratch: &Path,
) -> Result<(String, Instant), String> {
    let out_path = stdout_in(scratch);
    let err_path = scratch.join("stderr");
    let file = |p: &Path| {
        std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    c.stdin(Stdio::null())
        .stdout(file(&out_path)?)
        .stderr(file(&err_path)?);
    // Its own process group, so a run past the limit is ended whole (the
    // launcher and every rank it started); and what escapes the group comes
    // back to this runner (`end_orphans`).
    std::os::unix::process::CommandExt::process_group(c, 0);
    adopt_orphans();
    let start = Instant::now();
    let mut child = c
        .spawn()
        .map_err(|e| format!("cannot start {launcher}: {e}"))?;
    let pidfd = rustix::process::Pid::from_raw(child.id() as i32)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(s);
        }
        let ran = start.elapsed();
        if ran > limit || interrupted() {
            break None;
        }
        // Until the child exits, at most 20 ms at a time (to look at the
        // limit and for an interrupt); the pidfd ends the wait at the exit.
        let step = (limit - ran).min(Duration::from_millis(20));
        match &pidfd {
            Some(fd) => {
                let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
                let t = rustix::event::Timespec::try_from(step).ok();
                let _ = rustix::event::poll(&mut fds, t.as_ref());
            }
            None => std::thread::sleep(step.min(Duration::from_millis(1))),
        }
    };
    let ran = start.elapsed();
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    if status.is_some() {
        let left = end_orphans();
        if left > 0 {
            eprintln!(
                "kumi bench: {launcher} exited and left {left} process(es) of its job running; ended them"
            );
        }
    }
    let tail = || {
        let text = read(&out_path) + &read(&err_path);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(12)..].join("\n")
    };
    let Some(status) = status else {
        let pgid = child.id() as i32;
        // SAFETY: killpg has no memory preconditions; the group is the one
        // this runner made for the child, which has not been reaped.
        unsafe { libc::killpg(pgid, libc::SIGTERM) };
        let grace = Instant::now();
        while child.try_wait().ok().flatten().is_none() && grace.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
        let _ = child.wait();
        // What the launcher put out of its group's reach (hydra's proxies
        // and through them the ranks) was ended by the launcher or is ours.
        end_orphans();
        if interrupted() {
            return Err("interrupted; the run was ended".into());
        }
        return Err(format!(
            "still running after {} s (--timeout); ended. Its last lines:\n{}",
            limit.as_secs(),
            tail()
        ));
    };
    if !status.success() {
        return Err(format!(
            "{launcher} failed ({status}). Its last lines:\n{}",
            tail()
        ));
    }
    Ok((read(&out_path), start + ran))
}

/// Makes this runner the reaper of its jobs' orphans. MPICH's hydra starts
/// its proxies (and through them the ranks) in sessions of their own, out
/// of reach of the launcher's process group; a program may do the same
/// with a helper. When the launcher is gone such processes would be
/// re-parented to init and run on; as a child subreaper this runner gets
/// them instead, and [`end_orphans`] ends them after each job.
fn adopt_orphans() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and touches no
    // memory of this process; setting it twice is harmless.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// This process's children and whether each has exited (a zombie), from
/// `/proc`.
fn own_children() -> Vec<(i32, bool)> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the command's closing parenthesis: state, parent.
            let mut f = stat.rsplit_once(')')?.1.split_whitespace();
            let zombie = f.next()? == "Z";
            let parent: i32 = f.next()?.parse().ok()?;
            (parent == me).then_some((pid, zombie))
        })
        .collect()
}

/// Ends and reaps every process left to this runner (see
/// [`adopt_orphans`]), once the job's launcher has been reaped: the
/// runner's only other child then, so every child is an orphan of that
/// job. SIGTERM first, SIGKILL after a second, until none is left (at most
/// ten seconds: a process stuck in the kernel cannot be ended). Returns how
/// many were still running when found.
fn end_orphans() -> usize {
    let start = Instant::now();
    let mut running = std::collections::HashSet::new();
    loop {
        let children = own_children();
        if children.is_empty() || start.elapsed() > Duration::from_secs(10) {
            return running.len();
        }
        let sig = if start.elapsed() < Duration::from_secs(1) {
            libc::SIGTERM
        } else {
            libc::SIGKILL
        };
        for (pid, zombie) in children {
            if zombie {
                // SAFETY: waitpid on a child that has exited; the status
                // pointer may be null.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
            } else {
                running.insert(pid);
                // SAFETY: kill has no memory preconditions; `pid` is this
                // process's unreaped child, so it names that process.
                unsafe { libc::kill(pid, sig) };
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Set by SIGINT, SIGTERM or SIGHUP: the programs run in process groups of
/// their own (so that a run past its time can be ended whole), which a
/// terminal's interrupt does not reach; the runner ends the one running and
/// stops.
static STOP: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

pub(crate) fn interrupted() -> bool {
    // Relaxed: a flag polled every few milliseconds; nothing is published
    // through it.
    STOP.get()
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
}

/// Refuses a `--vs` other than MPICH and Open MPI, which a benchmark of
/// whole programs (`bench`) compares kumi with.
pub(crate) fn references_only(a: &BenchArgs, bench: &str) -> Result<(), String> {
    match a
        .vs
        .iter()
        .find(|r| !matches!(r, Reference::Mpich | Reference::Openmpi))
    {
        Some(r) => Err(format!(
            "--vs {}: {bench} compares kumi with mpich and openmpi",
            r.name()
        )),
        None => Ok(()),
    }
}

/// Makes SIGINT, SIGTERM and SIGHUP set the flag [`interrupted`] reads.
pub(crate) fn watch_interrupts() -> Result<(), String> {
    let flag = STOP.get_or_init(Default::default);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(sig, flag.clone())
            .map_err(|e| format!("cannot watch signal {sig}: {e}"))?;
    }
    Ok(())
}

/// `kumi bench apps`.
pub fn main(a: &BenchArgs) -> i32 {
    if let Err(e) = watch_interrupts() {
        eprintln!("kumi bench apps: {e}");
        return 2;
    }
    match run(a) {
        _ if interrupted() => {
            eprintln!("kumi bench apps: interrupted; the program running was ended");
            130
        }
        Ok(0) => 0,
        Ok(failed) => {
            eprintln!("kumi bench apps: {failed} program(s) failed; their figures are left out");
            1
        }
        Err(e) => {
            eprintln!("kumi bench apps: {e}");
            2
        }
    }
}

/// A private scratch directory, removed when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    /// `kumi-bench-<what>-<pid>` in the temporary directory, created.
    pub(crate) fn new(what: &str) -> Result<Scratch, String> {
        let s =
            Scratch(std::env::temp_dir().join(format!("kumi-bench-{what}-{}", std::process::id())));
        std::fs::create_dir_all(&s.0)
            .map_err(|e| format!("cannot create {}: {e}", s.0.display()))?;
        Ok(s)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(a: &BenchArgs) -> Result<usize, String> {
    if a.builds.is_empty() {
        return Err("give the directories of the benchmarks' builds, e.g. \
                    `kumi bench apps ~/NPB3.4-MPI/bin ~/npb-openmpi/bin` (see --help)"
            .into());
    }
    references_only(a, "apps")?;
    let kumi_lib = crate::cc::lib_dir()?;
    let mut notes = Vec::new();
    let mut programs = scan(&a.builds, &kumi_lib, &mut notes)?;
    if !a.ops.is_empty() {
        if let Some(bad) = a.ops.iter().find(|o| !programs.contains_key(o.as_str())) {
            return Err(format!(
                "--ops: no program {bad:?} in the builds; found: {}",
                programs.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        programs.retain(|name, _| a.ops.contains(name));
    }
    if programs.is_empty() {
        return Err(format!("nothing to run:\n  {}", notes.join("\n  ")));
    }
    for n in &notes {
        eprintln!("kumi bench apps: {n}");
    }
    let wanted = |s: Side| match s {
        Side::Kumi => true,
        Side::Mpich => a.vs.is_empty() || a.vs.contains(&Reference::Mpich),
        Side::OpenMpi => a.vs.is_empty() || a.vs.contains(&Reference::Openmpi),
    };
    let limit = Duration::from_secs(a.timeout);
    let scratch = Scratch::new("apps")?;
    let mut failed = 0;
    let mut done: Vec<Comparison> = Vec::new();
    for (name, (program, builds)) in &programs {
        // The sides that have a build of this program, and what each runs.
        let mut sides = Vec::new();
        for s in SIDES.into_iter().filter(|&s| wanted(s)) {
            match s.pick(builds).map_err(|e| format!("{name}: {e}"))? {
                Some(b) => sides.push((s, b)),
                None if s == Side::Kumi => {
                    eprintln!("kumi bench apps: {name}: no build for MPICH's ABI (which kumi runs); left out");
                }
                None if !a.vs.is_empty() => {
                    eprintln!(
                        "kumi bench apps: {name}: no build for {}; that side is left out",
                        s.label()
                    );
                }
                None => {}
            }
        }
        if sides.first().is_none_or(|(s, _)| *s != Side::Kumi) {
            continue;
        }
        for (s, b) in &sides {
            let how = match (s, b.kumi_built) {
                (Side::Kumi, false) => " (MPICH's build on kumi's library)",
                _ => "",
            };
            eprintln!(
                "kumi bench apps: {name} on {}: {}{how}",
                s.label(),
                b.path.display()
            );
        }
        let labels = sides.iter().map(|(s, _)| s.label().to_string()).collect();
        let mut cmp = Comparison::new("apps", a.np, labels);
        cmp.size_label = match program.size_meaning() {
            SizeMeaning::Bytes => human_size,
            SizeMeaning::Order => |n| format!("N={n}"),
            SizeMeaning::None => |_| String::new(),
        };
        'rounds: for round in 0..a.rounds() {
            // A round counts only when every side of it verified: the ratios
            // pair the sides' values round by round.
            let mut this_round = Vec::new();
            for side in round_order(sides.len(), round) {
                let (s, b) = sides[side];
                let figures = run_once(s, b, a.np, limit, &kumi_lib, &scratch.0)
                    .and_then(|out| program.parse(&out));
                match figures {
                    Ok(figs) => {
                        let shown: Vec<String> = figs
                            .iter()
                            .take(3)
                            .map(|f| format!("{:.3} {}", f.value, f.metric))
                            .collect();
                        eprintln!(
                            "kumi bench apps: round {}/{}, {name} on {}: {}{}",
                            round + 1,
                            a.rounds(),
                            s.label(),
                            shown.join(", "),
                            if figs.len() > 3 { ", ..." } else { "" }
                        );
                        this_round.push((side, figs));
                    }
                    Err(_) if interrupted() => return Ok(0),
                    Err(e) => {
                        eprintln!(
                            "kumi bench apps: {name} at np={} on {} ({}) FAILED: {e}",
                            a.np,
                            s.label(),
                            b.path.display()
                        );
                        failed += 1;
                        break 'rounds;
                    }
                }
            }
            for (side, figs) in this_round {
                for f in figs {
                    let op = if f.variant.is_empty() {
                        name.clone()
                    } else {
                        format!("{name} {}", f.variant)
                    };
                    cmp.add(side, (op, f.size), f.metric, f.value);
                }
            }
        }
        if !cmp.is_empty() {
            if !a.json {
                println!("{}", cmp.table(name));
            }
            done.push(cmp);
        }
    }
    if !a.json && done.len() > 1 {
        // The headline: the worst program against each reference. Every
        // figure here is "higher is better" or "lower is better" alike
        // within a program; across programs a ratio is turned so that
        // below 1 always means kumi is slower.
        for s in [Side::Mpich, Side::OpenMpi] {
            let worst = done
                .iter()
                .filter_map(|c| {
                    let (r, what) = c.worst(s.label())?;
                    let speed = if kumi_bench::apps::lower_is_better(&c.metric) {
                        1.0 / r
                    } else {
                        r
                    };
                    Some((speed, what))
                })
                .min_by(|x, y| x.0.total_cmp(&y.0));
            if let Some((speed, what)) = worst {
                println!(
                    "worst over all programs, kumi's speed / {}'s: {speed:.3} ({what})",
                    s.label()
                );
            }
        }
    }
    let lines: Vec<String> = done.iter().flat_map(Comparison::json_lines).collect();
    if a.json {
        for l in &lines {
            println!("{l}");
        }
    }
    if let Some(dir) = &a.suite.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let f = dir.join(format!("apps-np{}.jsonl", a.np));
        std::fs::write(&f, lines.join("\n") + "\n")
            .map_err(|e| format!("cannot write {}: {e}", f.display()))?;
        eprintln!("kumi bench apps: wrote {}", f.display());
    }
    Ok(failed)
}
