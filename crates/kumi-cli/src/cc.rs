//! `kumi cc` / `kumi cxx` / `kumi fc`: compile and link C, C++ and Fortran
//! MPI programs against kumi's `libmpi.so.12`; and the `mpicc`, `mpicxx`,
//! `mpifort`, `mpif90`, `mpif77`, `mpirun`, `mpiexec` names.
//!
//! The wrappers add kumi's include directory (`mpi.h`, `mpif.h` and the
//! `mpi` module), library directory and an rpath (so the program finds
//! kumi's library without `LD_LIBRARY_PATH`), and pass everything else to
//! the system compiler (`$KUMI_CC`/`$KUMI_CXX`/`$KUMI_FC`, default
//! `cc`/`c++`/`gfortran`). `--showme` prints the command instead of running
//! it.
//!
//! `-static-mpi` (or `KUMI_CC_LINK=static`) links kumi's MPI library into the
//! program (`libmpi.a`) instead of loading `libmpi.so.12` at run time, for a
//! program that must run where kumi's library is not at hand. It is not
//! faster: the shared library cost ranks sharing a core 15-25 % in small
//! collectives while the kernel mapped it on a 2 MiB boundary (the same
//! address modulo 2 MiB in every rank); its segments are now aligned so that
//! glibc places it at a random 8 KiB boundary instead (kumi-mpi's `build.rs`,
//! docs/BENCHMARKS.md, sessions 7 and 8). The price: a program linked so has
//! to be relinked to use another kumi, and profilers that interpose on `MPI_`
//! functions through `LD_PRELOAD` do not see its calls (link them in before
//! kumi's library instead).
//!
//! Where kumi's files are is derived from the `kumi` executable, so a build tree
//! and an installed tree both work: the library beside the binary
//! (`target/release/libmpi.so`) or in `../lib`; the header in `include/` beside
//! the binary, in `../include`, or in the source tree's `crates/kumi-mpi/include`.
//!
//! The MPI names are the `kumi` binary itself under another name (symlinks the
//! build creates beside it): [`multicall`] looks at `argv[0]`.

use clap::Args;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Arguments of `kumi cc` / `kumi cxx` / `kumi fc`.
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct CcArgs {
    /// Compiler arguments (sources, flags, `-o out`); `--showme` prints the
    /// full command instead of running it.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<OsString>,
}

/// Which language's compiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// `cc`.
    C,
    /// `c++`.
    Cxx,
    /// `gfortran`.
    Fortran,
}

impl Lang {
    /// The variable that names the compiler, and the default.
    fn compiler(self) -> (&'static str, &'static str) {
        match self {
            Lang::C => ("KUMI_CC", "cc"),
            Lang::Cxx => ("KUMI_CXX", "c++"),
            Lang::Fortran => ("KUMI_FC", "gfortran"),
        }
    }

    /// The wrapper's name in messages.
    fn wrapper(self) -> &'static str {
        match self {
            Lang::C => "kumi cc",
            Lang::Cxx => "kumi cxx",
            Lang::Fortran => "kumi fc",
        }
    }
}

/// How the program gets kumi's MPI library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// `-lmpi`: `libmpi.so.12`, found through the rpath at run time.
    Shared,
    /// `libmpi.a` linked into the program (`-static-mpi`).
    Static,
}

/// What kumi's static library needs from the system (rustc's
/// `--print native-static-libs` for it).
const STATIC_DEPS: [&str; 6] = ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"];

/// kumi's library and include directories.
struct Dirs {
    lib: PathBuf,
    include: PathBuf,
}

/// The directory of kumi's MPI library (beside the `kumi` executable or in
/// `../lib`), with the names MPICH-built programs ask for in it.
pub(crate) fn lib_dir() -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the kumi executable: {e}"))?;
    let bin = exe.parent().ok_or("the kumi executable has no directory")?;
    let lib = [bin.to_path_buf(), bin.join("../lib")]
        .into_iter()
        .find(|d| d.join("libmpi.so").exists())
        .ok_or_else(|| {
            format!(
                "kumi's MPI library (libmpi.so) is not beside {} nor in ../lib: build it with \
                 `cargo build --release -p kumi-mpi`",
                exe.display()
            )
        })?;
    // The names MPICH-built binaries ask for (normally made by the build).
    for so in [
        "libmpi.so.12",
        "libmpich.so.12",
        "libmpichfort.so.12",
        "libmpifort.so.12",
    ] {
        let p = lib.join(so);
        if !p.exists() {
            let _ = std::fs::remove_file(&p);
            std::os::unix::fs::symlink("libmpi.so", &p)
                .map_err(|e| format!("cannot create {}: {e}", p.display()))?;
        }
    }
    Ok(lib.canonicalize().unwrap_or(lib))
}

fn find_dirs() -> Result<Dirs, String> {
    let lib = lib_dir()?;
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the kumi executable: {e}"))?;
    let bin = exe.parent().ok_or("the kumi executable has no directory")?;
    let include = [
        bin.join("include"),
        bin.join("../include"),
        bin.join("../../crates/kumi-mpi/include"),
    ]
    .into_iter()
    .find(|d| d.join("mpi.h").exists())
    .ok_or_else(|| {
        format!(
            "kumi's mpi.h is not in {}/include nor ../include",
            bin.display()
        )
    })?;
    Ok(Dirs {
        lib,
        include: include.canonicalize().unwrap_or(include),
    })
}

/// Whether the arguments ask for no linking (`-c`, `-E`, `-S`, `-M`).
fn compile_only(args: &[OsString]) -> bool {
    args.iter()
        .any(|a| matches!(a.to_str(), Some("-c" | "-E" | "-S" | "-M" | "-MM")))
}

fn build_command(lang: Lang, args: &[OsString], d: &Dirs, link: Link) -> (OsString, Vec<OsString>) {
    let (var, default) = lang.compiler();
    let compiler = std::env::var_os(var).unwrap_or_else(|| default.into());
    let mut v: Vec<OsString> = vec![format!("-I{}", d.include.display()).into()];
    if lang == Lang::Fortran && is_gfortran_10_or_later(&compiler) {
        // As MPICH's wrappers do, for the code written before gfortran 10
        // made these errors: a procedure called with buffers of different
        // types in one file (every MPI program with implicit interfaces),
        // and `X'..'` hexadecimal constants (the NAS benchmarks).
        v.push("-fallow-argument-mismatch".into());
        v.push("-fallow-invalid-boz".into());
    }
    v.extend(args.iter().cloned());
    if !compile_only(args) {
        match link {
            Link::Shared => {
                v.push(format!("-L{}", d.lib.display()).into());
                v.push(format!("-Wl,-rpath,{}", d.lib.display()).into());
                v.push("-lmpi".into());
            }
            Link::Static => {
                v.push(d.lib.join("libmpi.a").into());
                v.extend(STATIC_DEPS.iter().map(OsString::from));
            }
        }
    }
    (compiler, v)
}

/// Whether `compiler` is gfortran 10 or later.
fn is_gfortran_10_or_later(compiler: &OsString) -> bool {
    if !Path::new(compiler)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("gfortran"))
    {
        return false;
    }
    Command::new(compiler)
        .arg("-dumpversion")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .split('.')
                .next()
                .and_then(|m| m.parse::<u32>().ok())
        })
        .is_some_and(|major| major >= 10)
}

fn quote(s: &OsString) -> String {
    let s = s.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The link mode: `-static-mpi` on the command line, else `KUMI_CC_LINK`
/// (`shared`, the default, or `static`).
fn link_mode(static_flag: bool) -> Result<Link, String> {
    if static_flag {
        return Ok(Link::Static);
    }
    match std::env::var("KUMI_CC_LINK").as_deref() {
        Err(_) | Ok("") | Ok("shared") => Ok(Link::Shared),
        Ok("static") => Ok(Link::Static),
        Ok(v) => Err(format!("KUMI_CC_LINK={v:?}: use shared or static")),
    }
}

/// The answers to the questions build systems ask an MPI compiler wrapper
/// (CMake's FindMPI, Meson, autotools): Open MPI's `--showme:*` (flags
/// only) and MPICH's `-compile-info`/`-link-info` (whole commands).
fn interrogate(flag: &str, lang: Lang, d: &Dirs, link: Link) -> Option<String> {
    let line = |(cc, v): (OsString, Vec<OsString>)| {
        std::iter::once(cc)
            .chain(v)
            .map(|a| quote(&a))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let flags = |v: Vec<OsString>| v.iter().map(quote).collect::<Vec<_>>().join(" ");
    let compile_only = [OsString::from("-c")];
    let (_, compile) = build_command(lang, &compile_only, d, link);
    let compile: Vec<OsString> = compile.into_iter().filter(|a| a != "-c").collect();
    let (_, all) = build_command(lang, &[], d, link);
    let link_flags: Vec<OsString> = all.into_iter().filter(|a| !compile.contains(a)).collect();
    Some(match flag.trim_start_matches('-') {
        "showme:compile" => flags(compile),
        "showme:link" => flags(link_flags),
        "showme:incdirs" => d.include.display().to_string(),
        "showme:libdirs" => d.lib.display().to_string(),
        "showme:libs" => match link {
            Link::Shared => "mpi".into(),
            Link::Static => "mpi gcc_s util rt pthread m dl".into(),
        },
        "showme:version" => format!("kumi {}", env!("CARGO_PKG_VERSION")),
        "compile-info" | "compile_info" => line(build_command(lang, &compile_only, d, link)),
        "link-info" | "link_info" => line(build_command(lang, &[], d, link)),
        _ => return None,
    })
}

/// Runs the compiler (or prints the command for `--showme`); the exit code.
pub fn compile(lang: Lang, args: Vec<OsString>) -> i32 {
    let showme = args
        .iter()
        .any(|a| matches!(a.to_str(), Some("--showme" | "-show" | "-showme")));
    let static_flag = args.iter().any(|a| a.to_str() == Some("-static-mpi"));
    let args: Vec<OsString> = args
        .into_iter()
        .filter(|a| {
            !matches!(
                a.to_str(),
                Some("--showme" | "-show" | "-showme" | "-static-mpi")
            )
        })
        .collect();
    let me = lang.wrapper();
    let link = match link_mode(static_flag) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{me}: {e}");
            return 2;
        }
    };
    let d = match find_dirs() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{me}: {e}");
            return 1;
        }
    };
    if link == Link::Static && !compile_only(&args) && !d.lib.join("libmpi.a").exists() {
        eprintln!(
            "{me}: -static-mpi needs kumi's static MPI library, {}, which is missing: \
             build it with `cargo build --release -p kumi-mpi`",
            d.lib.join("libmpi.a").display()
        );
        return 1;
    }
    if let [one] = args.as_slice() {
        if let Some(answer) = one.to_str().and_then(|f| interrogate(f, lang, &d, link)) {
            println!("{answer}");
            return 0;
        }
    }
    let (cc, v) = build_command(lang, &args, &d, link);
    if showme {
        let mut line = quote(&cc);
        for a in &v {
            line.push(' ');
            line.push_str(&quote(a));
        }
        println!("{line}");
        return 0;
    }
    if lang == Lang::Fortran && !d.include.join("mpi.mod").exists() {
        // Built without a Fortran compiler: `mpif.h` works, `use mpi` does not.
        eprintln!(
            "{me}: note: kumi's `mpi` module is missing from {} (no Fortran compiler when \
             kumi was built): `include 'mpif.h'` works; for `use mpi`, install gfortran and \
             rebuild kumi (cargo build --release)",
            d.include.display()
        );
    }
    let e = Command::new(&cc).args(&v).exec();
    let (var, _) = lang.compiler();
    if e.kind() == std::io::ErrorKind::NotFound {
        let hint = if lang == Lang::Fortran {
            "install gfortran (apt-get install gfortran) or name another compiler with KUMI_FC"
        } else {
            "install it or name another compiler with the variable"
        };
        eprintln!("{me}: the compiler {cc:?} is not installed ({var}): {hint}");
    } else {
        eprintln!("{me}: cannot run the compiler {cc:?} ({var}): {e}");
    }
    1
}

/// `kumi cc`, `kumi cxx` and `kumi fc`.
pub fn main(lang: Lang, args: CcArgs) -> i32 {
    compile(lang, args.args)
}

/// If the binary was started as `mpicc`, `mpicxx`, `mpifort`, `mpif90`,
/// `mpif77`, `mpirun` or `mpiexec`, does
/// that and returns the exit code.
pub fn multicall() -> Option<i32> {
    let mut argv = std::env::args_os();
    let arg0 = argv.next()?;
    let name = Path::new(&arg0).file_name()?.to_string_lossy().into_owned();
    let rest: Vec<OsString> = argv.collect();
    match name.as_str() {
        "mpicc" => Some(compile(Lang::C, rest)),
        "mpicxx" | "mpic++" | "mpiCC" => Some(compile(Lang::Cxx, rest)),
        "mpifort" | "mpif90" | "mpif77" => Some(compile(Lang::Fortran, rest)),
        "mpirun" | "mpiexec" => Some(
            match crate::mpirun::translate(&rest, std::env::var("MPIEXEC_TIMEOUT").ok(), &|v| {
                std::env::var(v).ok()
            }) {
                Ok(crate::mpirun::Action::Help) => {
                    println!("{}", crate::mpirun::HELP);
                    0
                }
                Ok(crate::mpirun::Action::Version) => {
                    println!(
                        "{name} (kumi {}): MPI 4.1, MPICH-compatible ABI (libmpi.so.12)",
                        env!("CARGO_PKG_VERSION")
                    );
                    0
                }
                Ok(crate::mpirun::Action::Run(a)) => match std::env::current_exe() {
                    Ok(exe) => {
                        let e = Command::new(exe).args(a).exec();
                        eprintln!("{name}: cannot start kumi: {e}");
                        1
                    }
                    Err(e) => {
                        eprintln!("{name}: cannot locate kumi: {e}");
                        1
                    }
                },
                Err(e) => {
                    eprintln!("{name}: {e}");
                    2
                }
            },
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn link_flags_only_when_linking() {
        let d = Dirs {
            lib: "/k/lib".into(),
            include: "/k/inc".into(),
        };
        let (_, v) = build_command(Lang::C, &os(&["-c", "x.c"]), &d, Link::Static);
        assert_eq!(v, os(&["-I/k/inc", "-c", "x.c"]));
        let (_, v) = build_command(Lang::C, &os(&["x.c", "-o", "x"]), &d, Link::Shared);
        assert_eq!(
            v,
            os(&[
                "-I/k/inc",
                "x.c",
                "-o",
                "x",
                "-L/k/lib",
                "-Wl,-rpath,/k/lib",
                "-lmpi"
            ])
        );
        let (_, v) = build_command(Lang::C, &os(&["x.c"]), &d, Link::Static);
        let mut want = os(&["-I/k/inc", "x.c", "/k/lib/libmpi.a"]);
        want.extend(os(&STATIC_DEPS));
        assert_eq!(v, want);
    }
}
