//! `mpirun` and `mpiexec`: the command lines job scripts give MPICH's Hydra
//! and Open MPI's `mpirun`, turned into one `kumi run` command line. The
//! translation is a pure function ([`translate`]); `kumi run` does the rest,
//! so every option means the same under either name.
//!
//! An option neither launcher has, or one kumi cannot honour, is refused
//! naming it: a job script must not run differently from what it says.

use std::ffi::OsString;

/// What an `mpirun` command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Run `kumi` with these arguments.
    Run(Vec<OsString>),
    /// Print the help.
    Help,
    /// Print the version.
    Version,
}

/// The help `mpirun --help` prints.
pub const HELP: &str = "\
Usage: mpirun [OPTIONS] PROGRAM [ARGS] [: [-n N] [-env VAR VALUE] PROGRAM [ARGS]]...
       (mpiexec is the same)

kumi's mpirun takes the options of MPICH's mpiexec (Hydra) and of Open MPI's
mpirun that job scripts use, and runs `kumi run` (see `kumi run --help`).

  -n, -np, -c N                  number of ranks
  -N, -ppn, --npernode N         ranks per host
  -H, -host, -hosts HOST[:N],... hosts and their slots
  -f, --hostfile, -machinefile F host file (`host slots=N` or `host:N` lines)
  -genv VAR VALUE, -env VAR VALUE, -x VAR[=VALUE]
                                 set VAR for the ranks (after ':', for that
                                 program's ranks only)
  -genvlist, -envlist A,B        pass these variables of this shell on
  -envall, -genvall              accepted: the environment passes on to the
                                 ranks of this host (to other hosts, only
                                 KUMI_* and what -x/-genv name)
  -wdir, --wdir, -wd DIR         working directory of the ranks
  --bind-to core|hwthread|none   bind each rank to a core, or never
  --map-by slot|core|node        fill each host in turn, or one rank per host
                                 in turn (also -rr, --bynode, --byslot)
  -l, -prepend-rank, --tag-output
                                 prefix each output line with [rank]
  --timeout SECONDS              end the job after this long (exit 124); also
                                 MPIEXEC_TIMEOUT
  --oversubscribe, --allow-run-as-root
                                 accepted: kumi always allows both
  --version, --help

A ':' starts another program of the same job (MPMD): MPI_COMM_WORLD spans
them all, and MPI_APPNUM tells each rank which program it runs.
Any other option is refused, naming it.";

/// Options for the whole job that take a value, and the `kumi run` option
/// they become.
fn global_valued(flag: &str) -> Option<&'static str> {
    Some(match flag {
        "-N" | "-ppn" | "--ppn" | "-npernode" | "--npernode" => "--ppn",
        "-H" | "-host" | "--host" | "-hosts" | "--hosts" => "--hosts",
        "-f" | "-hostfile" | "--hostfile" | "-machinefile" | "--machinefile"
        | "--default-hostfile" => "--hostfile",
        "-gwdir" => "--wdir",
        "-bind-to" | "--bind-to" => "--bind-to",
        "-map-by" | "--map-by" => "--map-by",
        "-timeout" | "--timeout" => "--timeout",
        "-x" => "-x",
        _ => return None,
    })
}

/// Options for the whole job that take no value: the `kumi run` arguments
/// they become.
fn global_flag(flag: &str) -> Option<&'static [&'static str]> {
    Some(match flag {
        "-l" | "-prepend-rank" | "--prepend-rank" | "-tag-output" | "--tag-output" => {
            &["--tag-output"]
        }
        "-rr" | "--bynode" | "-bynode" => &["--map-by", "node"],
        "--byslot" | "-byslot" => &["--map-by", "slot"],
        "--bind-to-core" | "-bind-to-core" => &["--bind-to", "core"],
        "--bind-to-none" | "-bind-to-none" => &["--bind-to", "none"],
        "-envall"
        | "-genvall"
        | "--oversubscribe"
        | "-oversubscribe"
        | "--allow-run-as-root"
        | "-allow-run-as-root" => &[],
        _ => return None,
    })
}

/// One program's part of the line: the options Hydra and Open MPI keep per
/// program (`-n`, `-env`, `-envlist`, `-wdir`), as `kumi run` section options.
#[derive(Default)]
struct Section {
    opts: Vec<OsString>,
    has_n: bool,
    command: Vec<OsString>,
}

/// Translates `mpirun` arguments (without the program name). `timeout_env`
/// is `MPIEXEC_TIMEOUT`, used when no `--timeout` is given; `var` reads this
/// shell's variables (for `-genvlist` and `-envlist`).
pub fn translate(
    args: &[OsString],
    timeout_env: Option<String>,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Action, String> {
    let mut global: Vec<OsString> = Vec::new();
    let mut sections: Vec<Section> = vec![Section::default()];
    let mut timeout = false;
    let mut i = 0;
    while i < args.len() {
        let first = sections.len() == 1;
        let sec = sections.last_mut().unwrap_or_else(|| unreachable!());
        let a = args[i].to_string_lossy().into_owned();
        let (name, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut take = |what: &str| -> Result<String, String> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            i += 1;
            args.get(i)
                .map(|v| v.to_string_lossy().into_owned())
                .ok_or_else(|| format!("{what} needs a value"))
        };
        let export = |to: &mut Vec<OsString>, list: String, what: &str| {
            for v in list.split(',').filter(|v| !v.is_empty()) {
                let value =
                    var(v).ok_or_else(|| format!("{what}: {v} is not set in this shell"))?;
                to.extend(["-x".into(), format!("{v}={value}").into()]);
            }
            Ok::<(), String>(())
        };
        match name.as_str() {
            "-h" | "-help" | "--help" | "-?" if first => return Ok(Action::Help),
            "-V" | "-version" | "--version" if first => return Ok(Action::Version),
            "--" if sec.command.is_empty() => {
                sec.command.extend(args[i + 1..].iter().cloned());
                break;
            }
            _ if !sec.command.is_empty() => {
                // The program's own arguments, up to a ':'.
                if a == ":" {
                    sections.push(Section::default());
                } else {
                    sec.command.push(args[i].clone());
                }
            }
            "-n" | "-np" | "--np" | "--n" | "-c" => {
                let v = take(&name)?;
                sec.opts.extend(["-n".into(), v.into()]);
                sec.has_n = true;
            }
            "-env" => {
                let k = take(&name)?;
                i += 1;
                let v = args
                    .get(i)
                    .map(|v| v.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("-env {k} needs a value"))?;
                sec.opts.extend(["-x".into(), format!("{k}={v}").into()]);
            }
            "-envlist" => export(&mut sec.opts, take(&name)?, &name)?,
            "-wdir" | "--wdir" | "-wd" | "--wd" => {
                let v = take(&name)?;
                sec.opts.extend(["--wdir".into(), v.into()]);
            }
            "-genv" if first => {
                let k = take(&name)?;
                i += 1;
                let v = args
                    .get(i)
                    .map(|v| v.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("-genv {k} needs a value"))?;
                global.extend(["-x".into(), format!("{k}={v}").into()]);
            }
            "-genvlist" if first => export(&mut global, take(&name)?, &name)?,
            f if first && global_valued(f).is_some() => {
                let to = global_valued(f).unwrap_or_default();
                timeout |= to == "--timeout";
                let v = take(f)?;
                global.extend([to.into(), v.into()]);
            }
            f if first && global_flag(f).is_some() => {
                if inline.is_some() {
                    return Err(format!("{f} takes no value"));
                }
                global.extend(
                    global_flag(f)
                        .unwrap_or_default()
                        .iter()
                        .map(OsString::from),
                );
            }
            f if f.starts_with('-') && f.len() > 1 => {
                return Err(if first {
                    format!(
                        "option {f} is not one kumi's mpirun takes (see mpirun --help; `kumi run --help` for kumi's own)"
                    )
                } else {
                    format!(
                        "option {f} after ':' is not one kumi's mpirun takes there (-n, -env, -envlist, -wdir)"
                    )
                });
            }
            _ if a == ":" => return Err("':' with no program before it".into()),
            _ => sec.command.push(args[i].clone()),
        }
        i += 1;
    }
    if sections.iter().any(|s| s.command.is_empty()) {
        return Err("no program to run".into());
    }
    if !timeout {
        if let Some(t) = timeout_env.filter(|t| !t.trim().is_empty()) {
            global.extend(["--timeout".into(), t.trim().into()]);
        }
    }
    let mut out: Vec<OsString> = vec!["run".into()];
    out.append(&mut global);
    if let [only] = sections.as_mut_slice() {
        // One program: its options are the job's.
        out.append(&mut only.opts);
        out.push("--".into());
        out.append(&mut only.command);
        return Ok(Action::Run(out));
    }
    out.push("--".into());
    for (k, mut s) in sections.into_iter().enumerate() {
        if !s.has_n {
            return Err(format!(
                "program {} of the MPMD line needs its own -n",
                k + 1
            ));
        }
        out.push(":".into());
        out.append(&mut s.opts);
        out.append(&mut s.command);
    }
    Ok(Action::Run(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn run(v: &[&str]) -> Result<Vec<OsString>, String> {
        let shell = |n: &str| (n == "HOME").then(|| "/root".to_string());
        match translate(&os(v), None, &shell)? {
            Action::Run(a) => Ok(a),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn hydra_and_open_mpi_lines_map_onto_kumi_run() {
        assert_eq!(
            run(&["-np", "4", "./a.out", "-n", "x"]).unwrap(),
            os(&["run", "-n", "4", "--", "./a.out", "-n", "x"])
        );
        assert_eq!(
            run(&["-n=2", "-f", "hosts", "-ppn", "1", "-hosts", "a,b", "prog"]).unwrap(),
            os(&[
                "run",
                "--hostfile",
                "hosts",
                "--ppn",
                "1",
                "--hosts",
                "a,b",
                "-n",
                "2",
                "--",
                "prog"
            ])
        );
        assert_eq!(
            run(&[
                "--allow-run-as-root",
                "--oversubscribe",
                "-N",
                "2",
                "--bind-to",
                "core",
                "--map-by",
                "node",
                "-x",
                "A=1",
                "-x",
                "HOME",
                "--tag-output",
                "--timeout",
                "30",
                "p"
            ])
            .unwrap(),
            os(&[
                "run",
                "--ppn",
                "2",
                "--bind-to",
                "core",
                "--map-by",
                "node",
                "-x",
                "A=1",
                "-x",
                "HOME",
                "--tag-output",
                "--timeout",
                "30",
                "--",
                "p"
            ])
        );
        assert_eq!(
            run(&[
                "-genv",
                "A",
                "1 2",
                "-genvlist",
                "HOME",
                "-envall",
                "-l",
                "-wdir",
                "/t",
                "p"
            ])
            .unwrap(),
            os(&[
                "run",
                "-x",
                "A=1 2",
                "-x",
                "HOME=/root",
                "--tag-output",
                "--wdir",
                "/t",
                "--",
                "p"
            ])
        );
    }

    #[test]
    fn mpmd_sections_keep_their_own_counts_and_variables() {
        assert_eq!(
            run(&[
                "-genv", "G", "1", "-n", "1", "-wdir", "/w", "./a", "x", ":", "-np", "3", "-env",
                "R", "w", "./b", "-n", "7"
            ])
            .unwrap(),
            os(&[
                "run", "-x", "G=1", "--", ":", "-n", "1", "--wdir", "/w", "./a", "x", ":", "-n",
                "3", "-x", "R=w", "./b", "-n", "7"
            ])
        );
        let e = run(&["-n", "1", "./a", ":", "-n", "1", "--map-by", "node", "./b"]).unwrap_err();
        assert!(e.contains("--map-by") && e.contains("after ':'"), "{e}");
        let e = run(&["-n", "1", "./a", ":", "./b"]).unwrap_err();
        assert!(e.contains("program 2") && e.contains("-n"), "{e}");
        assert!(run(&["-n", "1", "./a", ":"])
            .unwrap_err()
            .contains("no program"));
    }

    #[test]
    fn unknown_options_are_refused_by_name_and_help_and_version_answer() {
        let e = run(&["--mca", "btl", "self", "p"]).unwrap_err();
        assert!(e.contains("--mca"), "{e}");
        assert!(run(&["-n", "2"]).unwrap_err().contains("no program"));
        assert!(run(&["-n"]).unwrap_err().contains("-n needs a value"));
        assert!(run(&["-genvlist", "NOPE", "p"])
            .unwrap_err()
            .contains("NOPE is not set"));
        assert!(run(&["-l=1", "p"]).unwrap_err().contains("takes no value"));
        let none = |_: &str| None;
        assert_eq!(translate(&os(&["--help"]), None, &none), Ok(Action::Help));
        assert_eq!(
            translate(&os(&["-n", "1", "--version"]), None, &none),
            Ok(Action::Version)
        );
    }

    #[test]
    fn mpiexec_timeout_from_the_environment_unless_given() {
        let none = |_: &str| None;
        assert_eq!(
            translate(&os(&["p"]), Some("5".into()), &none),
            Ok(Action::Run(os(&["run", "--timeout", "5", "--", "p"])))
        );
        assert_eq!(
            translate(&os(&["--timeout", "9", "p"]), Some("5".into()), &none),
            Ok(Action::Run(os(&["run", "--timeout", "9", "--", "p"])))
        );
    }
}
