//! What kumi's debugging tools (`kumi stacks`, `kumi attach`, the stacks in
//! a deadlock report) run, where, and how they read gdb's answer. Pure: the
//! launcher and the CLI run the commands.

use serde::{Deserialize, Serialize};

/// How a tool reaches a host of the job, to run a command beside its ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reach {
    /// The launcher's own host: run the command directly.
    Local,
    /// Through the job's remote shell: `RSH... HOST 'command line'`, the
    /// command line quoted for the remote shell.
    Rsh {
        /// The remote shell and its leading arguments.
        rsh: Vec<String>,
        /// The host.
        host: String,
    },
    /// Through Slurm: a step of one task on the node, sharing the allocation.
    Srun {
        /// The node.
        host: String,
    },
}

impl Reach {
    /// The command line that runs `argv` on the host (`tty`: interactive,
    /// with a terminal where the way there needs to be asked for one).
    pub fn command(&self, argv: &[String], tty: bool) -> Vec<String> {
        match self {
            Reach::Local => argv.to_vec(),
            Reach::Rsh { rsh, host } => {
                let mut c = rsh.clone();
                if tty && rsh.first().is_some_and(|r| r.ends_with("ssh")) {
                    c.push("-t".into());
                }
                c.push(host.clone());
                c.push(
                    argv.iter()
                        .map(|a| shell_quote(a))
                        .collect::<Vec<_>>()
                        .join(" "),
                );
                c
            }
            Reach::Srun { host } => {
                let mut c: Vec<String> = [
                    "srun",
                    "--nodes=1",
                    "--ntasks=1",
                    "--overlap",
                    "--quiet",
                    "--mpi=none",
                    "--nodelist",
                ]
                .map(String::from)
                .to_vec();
                c.push(host.clone());
                if tty {
                    c.push("--pty".into());
                }
                c.extend(argv.iter().cloned());
                c
            }
        }
    }
}

/// `s` quoted for a POSIX shell (left alone when it needs no quotes).
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// gdb's arguments to print every thread's stack of process `pid` and
/// detach (the process is stopped only while gdb reads it).
pub fn stack_command(pid: u32) -> Vec<String> {
    [
        "gdb",
        "-nx",
        "-batch",
        "-p",
        &pid.to_string(),
        "-ex",
        "set width 0",
        "-ex",
        "set pagination off",
        "-ex",
        "thread apply all bt",
    ]
    .map(String::from)
    .to_vec()
}

/// One frame of a stack: its number, function, and where (`file:line`, or
/// the library it is in), as gdb names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Its number, 0 innermost.
    pub level: u32,
    /// The function (`??` when gdb does not know it).
    pub function: String,
    /// `file:line`, `from library`, or empty.
    pub at: String,
}

/// A thread's stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    /// gdb's header for it: `Thread 1 (... "name")`.
    pub name: String,
    /// Its frames, innermost first.
    pub frames: Vec<Frame>,
}

/// The threads of gdb's `thread apply all bt` output, in its order (gdb's
/// other lines are dropped).
pub fn parse_stacks(gdb: &str) -> Vec<Thread> {
    let mut out: Vec<Thread> = Vec::new();
    for line in gdb.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            let name = match (rest.find('"'), rest.rfind('"')) {
                (Some(a), Some(b)) if b > a => {
                    format!(
                        "thread {} \"{}\"",
                        rest.split(' ').next().unwrap_or("?"),
                        &rest[a + 1..b]
                    )
                }
                _ => format!("thread {}", rest.split(' ').next().unwrap_or("?")),
            };
            out.push(Thread {
                name,
                frames: Vec::new(),
            });
        } else if let (Some(t), Some(f)) = (out.last_mut(), parse_frame(line)) {
            t.frames.push(f);
        }
    }
    out
}

/// One `#N  [0xADDR in ]FUNCTION (ARGS) [at FILE:LINE | from LIB]` line.
fn parse_frame(line: &str) -> Option<Frame> {
    let rest = line.strip_prefix('#')?;
    let (level, rest) = rest.split_once(' ')?;
    let level = level.parse().ok()?;
    let mut rest = rest.trim_start();
    if rest.starts_with("0x") {
        rest = rest.split_once(" in ").map_or(rest, |(_, r)| r);
    }
    // The function name ends at the first " (" outside angle brackets (Rust
    // and C++ names carry generics, which may hold parentheses).
    let mut depth = 0i32;
    let mut end = rest.len();
    let b = rest.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b'(' if depth <= 0 && i > 0 && b[i - 1] == b' ' => {
                end = i - 1;
                break;
            }
            _ => {}
        }
    }
    let function = rest[..end].to_string();
    let tail = &rest[end..];
    let at = [") at ", ") from ", " at ", " from "]
        .iter()
        .find_map(|sep| {
            tail.rfind(sep).map(|i| {
                let word = if sep.contains("from") { "from " } else { "" };
                format!("{word}{}", &tail[i + sep.len()..])
            })
        })
        .unwrap_or_default();
    Some(Frame {
        level,
        function,
        at,
    })
}

/// Frames of kumi, the language runtimes and the C library: folded in a
/// report, which is about where the *program* is.
fn is_runtime(f: &Frame) -> bool {
    const PREFIXES: &[&str] = &[
        "kumi::",
        "kumi_",
        "<kumi",
        "rustix::",
        "std::",
        "core::",
        "alloc::",
        "<std",
        "<core",
        "<alloc",
        "__rust",
        "__GI_",
        "__libc",
        "__futex",
        "__pthread",
        "__clock",
        "__nanosleep",
        "__poll",
        "__select",
        "syscall",
        "clone",
        "start_thread",
        "_start",
        "PMPI_",
    ];
    PREFIXES.iter().any(|p| f.function.starts_with(p))
        || f.at.contains("libmpi.so")
        || f.at.contains("/rustc/")
        || f.function == "??"
}

/// A stack as kumi prints it: a line per thread, then its frames
/// (`#N function at file:line`), each indented by `indent`. kumi's own
/// progress thread is one line; a run of frames inside kumi or the runtime
/// is one line naming where the program entered it; at most `max_frames`
/// lines per thread.
pub fn format_stacks(threads: &[Thread], indent: &str, max_frames: usize) -> String {
    let mut s = String::new();
    for t in threads {
        if t.name.ends_with("\"kumi-progress\"") {
            s.push_str(&format!("{indent}{}: kumi's progress thread\n", t.name));
            continue;
        }
        s.push_str(&format!("{indent}{}:\n", t.name));
        let mut lines = Vec::new();
        let mut i = 0;
        while i < t.frames.len() {
            let f = &t.frames[i];
            let run = t.frames[i..].iter().take_while(|f| is_runtime(f)).count();
            if run > 1 {
                let last = &t.frames[i + run - 1];
                lines.push(format!(
                    "#{}-#{} in kumi and the runtime, entered at {}",
                    f.level, last.level, last.function
                ));
                i += run;
                continue;
            }
            let at = if f.at.is_empty() {
                String::new()
            } else if f.at.starts_with("from ") {
                format!(" {}", f.at)
            } else {
                format!(" at {}", f.at)
            };
            lines.push(format!("#{} {}{at}", f.level, f.function));
            i += 1;
            if f.function == "main" {
                break;
            }
        }
        let more = lines.len().saturating_sub(max_frames);
        for l in lines.iter().take(max_frames) {
            s.push_str(&format!("{indent}  {l}\n"));
        }
        if more > 0 {
            s.push_str(&format!("{indent}  ... {more} more\n"));
        }
    }
    s
}

/// One sentence for what went wrong when gdb printed no stack.
pub fn gdb_failure(output: &str) -> String {
    let text = output.to_lowercase();
    if text.contains("operation not permitted") || text.contains("ptrace:") {
        return "gdb may not attach to it (ptrace refused: as another user, or with \
                /proc/sys/kernel/yama/ptrace_scope above 0, run as root or set it to 0)"
            .into();
    }
    if text.contains("no such process") {
        return "the process is gone".into();
    }
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or_else(
            || "gdb printed nothing".to_string(),
            |l| format!("gdb: {}", l.trim()),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    const GDB: &str = r#"[New LWP 9944]
[Thread debugging using libthread_db enabled]
0x00007f4958941545 in __GI___clock_nanosleep (clock_id=clock_id@entry=0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
48	../sysdeps/unix/sysv/linux/clock_nanosleep.c: No such file or directory.

Thread 2 (Thread 0x7f495804d6c0 (LWP 9944) "kumi-progress"):
#0  syscall () at ../sysdeps/unix/sysv/linux/x86_64/syscall.S:38
#1  0x00007f495979eb17 in std::sys::pal::unix::futex::futex_wait () at library/std/src/sys/pal/unix/futex.rs:73
#7  0x00007f495951bf1f in core::panic::unwind_safe::{impl#23}::call_once<(), kumi::progress::run::{closure_env#0}> (self=...) at /rustc/x/library/core/src/panic/unwind_safe.rs:274
#9  0x00007f49594ce31b in __rust_try () from /opt/kumi/lib/libmpi.so.12
#23 0x00007f49597a4eef in alloc::boxed::{impl#31}::call_once<(), (dyn core::ops::function::FnOnce<(), Output=()> + core::marker::Send), alloc::alloc::Global> () at library/alloc/src/boxed.rs:2240

Thread 1 (Thread 0x7f4958850cc0 (LWP 9943) "jac"):
#0  0x00007f4958941545 in __GI___clock_nanosleep (clock_id=clock_id@entry=0, flags=flags@entry=0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
#3  0x000055a9053327a9 in main ()
[Inferior 1 (process 9943) detached]
"#;

    #[test]
    fn gdbs_backtrace_reads_as_threads_and_frames() {
        let t = parse_stacks(GDB);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "thread 2 \"kumi-progress\"");
        let f = &t[0].frames;
        assert_eq!(f.len(), 5);
        assert_eq!((f[0].level, f[0].function.as_str()), (0, "syscall"));
        assert_eq!(f[1].function, "std::sys::pal::unix::futex::futex_wait");
        assert_eq!(f[1].at, "library/std/src/sys/pal/unix/futex.rs:73");
        assert_eq!(
            f[2].function,
            "core::panic::unwind_safe::{impl#23}::call_once<(), kumi::progress::run::{closure_env#0}>"
        );
        assert_eq!(f[3].at, "from /opt/kumi/lib/libmpi.so.12");
        assert!(
            f[4].function.ends_with("alloc::alloc::Global>"),
            "{}",
            f[4].function
        );
        assert_eq!(t[1].frames[1].function, "main");
        assert_eq!(t[1].frames[1].at, "");
        let text = format_stacks(&t, "  ", 2);
        assert!(
            text.starts_with("  thread 2 \"kumi-progress\": kumi's progress thread\n"),
            "{text}"
        );
        assert!(text.contains("  thread 1 \"jac\":\n    #0 __GI___clock_nanosleep at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48\n    #3 main\n"), "{text}");
    }

    #[test]
    fn runs_of_runtime_frames_fold_into_where_the_program_entered_them() {
        let frame = |level, function: &str, at: &str| Frame {
            level,
            function: function.into(),
            at: at.into(),
        };
        let t = Thread {
            name: "thread 1 \"solver\"".into(),
            frames: vec![
                frame(0, "syscall", ""),
                frame(
                    1,
                    "kumi::engine::Engine::wait_loop",
                    "crates/kumi/src/engine/wait.rs:154",
                ),
                frame(
                    2,
                    "kumi::comm::Comm::recv<f64>",
                    "crates/kumi/src/comm.rs:230",
                ),
                frame(3, "solver::exchange", "src/main.rs:40"),
                frame(4, "solver::main", "src/main.rs:90"),
                frame(
                    5,
                    "core::ops::function::FnOnce::call_once",
                    "/rustc/x/core.rs:1",
                ),
                frame(6, "std::rt::lang_start", "/rustc/x/rt.rs:1"),
                frame(7, "main", ""),
                frame(8, "__libc_start_call_main", ""),
            ],
        };
        let text = format_stacks(&[t], "", 10);
        assert_eq!(
            text,
            "thread 1 \"solver\":\n  #0-#2 in kumi and the runtime, entered at kumi::comm::Comm::recv<f64>\n  #3 solver::exchange at src/main.rs:40\n  #4 solver::main at src/main.rs:90\n  #5-#6 in kumi and the runtime, entered at std::rt::lang_start\n  #7 main\n"
        );
    }

    #[test]
    fn a_command_reaches_each_kind_of_host() {
        let argv: Vec<String> = ["gdb", "-ex", "thread apply all bt"]
            .map(String::from)
            .to_vec();
        assert_eq!(Reach::Local.command(&argv, false), argv);
        let rsh = Reach::Rsh {
            rsh: vec!["ssh".into(), "-x".into()],
            host: "n1".into(),
        };
        assert_eq!(
            rsh.command(&argv, true),
            ["ssh", "-x", "-t", "n1", "gdb -ex 'thread apply all bt'"]
        );
        let srun = Reach::Srun { host: "n2".into() }.command(&argv, true);
        assert_eq!(
            &srun[srun.len() - 5..],
            ["n2", "--pty", "gdb", "-ex", "thread apply all bt"]
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_refused_attach_says_what_to_do() {
        assert!(gdb_failure("ptrace: Operation not permitted.").contains("ptrace_scope"));
        assert_eq!(gdb_failure("x\nsomething odd\n\n"), "gdb: something odd");
    }
}
