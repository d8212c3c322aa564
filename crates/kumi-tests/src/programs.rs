//! MPI programs of the tests (C in `crates/kumi-mpi/tests/c`, Fortran in
//! `crates/kumi-tests/fortran`): compiled with a real compiler wrapper
//! (kumi's, or MPICH's to run unmodified on kumi's library) and run with the
//! real `kumi run`.

use crate::bin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The directory of `kumi`, `libmpi.so` and its other names.
pub fn lib_dir() -> PathBuf {
    let dir = bin("kumi").parent().expect("target dir").to_path_buf();
    assert!(
        dir.join("libmpi.so").exists(),
        "kumi's libmpi.so is missing: cargo build --release -p kumi-mpi"
    );
    dir
}

/// A source file's name without its extension: its program's name.
pub fn stem(file: &str) -> &str {
    file.split('.').next().unwrap_or(file)
}

/// Compiles each of `files` (in `dir`) with `compiler` (a command line) and
/// `flags` into `out/<stem>`, panicking with the compiler's output on the
/// first failure. The compiler runs in `out`, where Fortran writes the
/// modules a program defines (so two builds of one source never share them).
pub fn compile_all(compiler: &[String], flags: &[&str], dir: &Path, files: &[&str], out: &Path) {
    std::fs::create_dir_all(out).expect("output dir");
    for f in files {
        let o = Command::new(&compiler[0])
            .current_dir(out)
            .args(&compiler[1..])
            .args(flags)
            .arg("-o")
            .arg(out.join(stem(f)))
            .arg(dir.join(f))
            .output()
            .unwrap_or_else(|e| panic!("cannot run {compiler:?}: {e}"));
        assert!(
            o.status.success(),
            "{compiler:?} failed on {f}:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// `kumi run -n <n> <prog>` with `env` added; its output.
pub fn run(n: usize, prog: &Path, env: &[(&str, String)]) -> Output {
    let mut c = Command::new(bin("kumi"));
    c.arg("run").arg("-n").arg(n.to_string()).arg(prog);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("start kumi run")
}

/// Standard output and standard error, as text.
pub fn outputs(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
