//! Fortran MPI programs (`crates/kumi-tests/fortran`, one concern each):
//! compiled with `kumi fc` and run with `kumi run` at several sizes and
//! across two namespace hosts; the same sources compiled by Debian's MPICH
//! (`mpif90.mpich`, which links MPICH's `libmpichfort.so.12`) run unmodified
//! on kumi's library through `LD_LIBRARY_PATH`. Each program checks its own
//! results and calls `MPI_ABORT` on the first wrong one.
//!
//! Needs the workspace built, gfortran and Debian's MPICH (`test.sh`
//! installs both), and pympistandard in `target/py` for the check that the
//! generated binding is current.

use kumi_tests::programs::{compile_all, lib_dir, outputs as text, run, stem};
use kumi_tests::{bin, netns};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The programs, by file; each prints `<name> ok` from rank 0 when it passes.
const PROGRAMS: &[&str] = &["p2p.f", "coll.f90", "comm.f", "types.f90", "f08.f90"];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fortran")
}

/// Compiles every program (and `unsupported.f`) with `compiler` into `out`.
fn compile_fortran(compiler: &[String], out: &Path) {
    let files: Vec<&str> = PROGRAMS.iter().copied().chain(["unsupported.f"]).collect();
    compile_all(compiler, &["-O2"], &src_dir(), &files, out);
}

/// Programs built with `kumi fc`, once per test binary.
fn kumi_built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = lib_dir().join("mpi-tests/fortran-kumi");
        compile_fortran(&[bin("kumi").display().to_string(), "fc".into()], &out);
        out
    })
}

/// The same programs built with Debian's MPICH, once per test binary.
fn mpich_built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let ok = Command::new("mpif90.mpich")
            .arg("-show")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "mpif90.mpich is missing: install Debian's MPICH and gfortran \
             (apt-get install libmpich-dev gfortran; test.sh does)"
        );
        let out = lib_dir().join("mpi-tests/fortran-mpich");
        compile_fortran(&["mpif90.mpich".into()], &out);
        out
    })
}

fn expect_pass(name: &str, n: usize, o: &Output, how: &str) {
    let (out, err) = text(o);
    assert!(
        o.status.success() && out.contains(&format!("{name} ok")),
        "{name} ({how}) at np {n} failed ({}):\nstdout:\n{out}\nstderr:\n{err}",
        o.status
    );
}

/// Runs program `file` at each size, built by `kumi fc` and by MPICH.
fn suite(file: &str) {
    let name = stem(file);
    for n in [1, 2, 3, 4, 8] {
        let o = run(n, &kumi_built().join(name), &[]);
        expect_pass(name, n, &o, "kumi fc");
    }
    let env = [("LD_LIBRARY_PATH", lib_dir().display().to_string())];
    for n in [1, 2, 4] {
        let o = run(n, &mpich_built().join(name), &env);
        expect_pass(
            name,
            n,
            &o,
            "built by MPICH's mpif90, run on kumi's library",
        );
    }
}

#[test]
fn fortran_point_to_point_statuses_requests_and_indices() {
    suite("p2p.f");
}

#[test]
fn fortran_collectives_in_place_fortran_types_and_user_operation() {
    suite("coll.f90");
}

#[test]
fn fortran_communicators_topologies_strings_errors_and_attributes() {
    suite("comm.f");
}

#[test]
fn fortran_derived_datatypes_and_mpi_bottom() {
    suite("types.f90");
}

#[test]
fn fortran_2008_typed_handles_array_sections_and_optional_ierror() {
    suite("f08.f90");
}

/// An MPICH-built Fortran program loads kumi's library alone: MPICH's
/// Fortran library (which calls MPICH internals) must not be the one found.
#[test]
fn mpich_built_fortran_program_loads_only_kumis_library() {
    let prog = mpich_built().join("p2p");
    let o = Command::new("ldd")
        .arg(&prog)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run ldd");
    let (out, err) = text(&o);
    let mpi: Vec<&str> = out.lines().filter(|l| l.contains("libmpi")).collect();
    assert!(
        !mpi.is_empty()
            && mpi
                .iter()
                .all(|l| l.contains(&lib_dir().display().to_string())),
        "libraries found:\n{out}\n{err}"
    );
}

/// A Fortran call to a function kumi does not implement ends the job naming
/// it, from both builds.
#[test]
fn unsupported_fortran_call_fails_naming_it() {
    let env = [("LD_LIBRARY_PATH", lib_dir().display().to_string())];
    for dir in [kumi_built(), mpich_built()] {
        let o = run(2, &dir.join("unsupported"), &env);
        let (out, err) = text(&o);
        assert!(
            !o.status.success()
                && err.contains("MPI_OPEN_PORT is not supported by kumi yet")
                && !out.contains("returned from"),
            "{}: {}\nstdout:\n{out}\nstderr:\n{err}",
            dir.display(),
            o.status
        );
    }
}

#[test]
fn fortran_programs_across_two_namespace_hosts() {
    if netns::skip_unless_root("fortran_programs_across_two_namespace_hosts") {
        return;
    }
    let c = netns::Cluster::create(2).unwrap_or_else(|e| panic!("cannot create 2 test hosts: {e}"));
    for file in PROGRAMS {
        let name = stem(file);
        let prog = kumi_built().join(name);
        let o = c.kumi_run(
            4,
            &[(0, 2), (1, 2)],
            &[],
            &[prog.to_str().expect("utf-8 path")],
        );
        expect_pass(name, 4, &o, "2 hosts x 2 ranks");
    }
}

/// `kumi fc --showme` and the `mpifort`/`mpif90`/`mpif77` shims: kumi's
/// include directory (with `mpif.h` and the `mpi` and `mpi_f08` modules),
/// library and rpath,
/// and gfortran's flags for the older code MPICH's wrappers accept (MPI's
/// buffers of any type, `X'..'` constants); a missing compiler is
/// named with the variable that chooses it.
#[test]
fn kumi_fc_showme_shims_and_a_missing_compiler() {
    let show = |cmd: &Path, pre: &[&str]| {
        let o = Command::new(cmd)
            .args(pre)
            .args(["--showme", "-O2", "x.f90", "-o", "x"])
            .output()
            .expect("run the wrapper");
        assert!(o.status.success(), "{:?}", text(&o));
        text(&o).0
    };
    let line = show(&bin("kumi"), &["fc"]);
    let inc = lib_dir().join("include");
    for want in [
        "gfortran ",
        &format!("-I{}", inc.display()),
        "-fallow-argument-mismatch",
        "-fallow-invalid-boz",
        "-lmpi",
        "-Wl,-rpath,",
        "x.f90",
    ] {
        assert!(line.contains(want), "missing {want:?} in: {line}");
    }
    for f in ["mpif.h", "mpi.mod", "mpi_f08.mod"] {
        assert!(
            inc.join(f).exists(),
            "{f} is missing from {}",
            inc.display()
        );
    }
    for shim in ["mpifort", "mpif90", "mpif77"] {
        assert_eq!(show(&lib_dir().join(shim), &[]), line, "{shim}");
    }
    let o = Command::new(bin("kumi"))
        .args(["fc", "x.f90"])
        .env("KUMI_FC", "/nonexistent/gfortran")
        .output()
        .expect("run kumi fc");
    let (_, err) = text(&o);
    assert!(
        o.status.code() == Some(1) && err.contains("is not installed (KUMI_FC)"),
        "{:?}: {err}",
        o.status
    );
}

/// The Fortran binding (`crates/kumi-mpi/src/fortran/gen.rs`, `mpif.h`) is
/// what `scripts/gen-fortran.py` makes of the MPI Forum's API description and
/// the functions kumi implements now: implementing a function in C and not
/// regenerating fails here.
#[test]
fn fortran_binding_is_generated_from_the_current_sources() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("target/py/bin/python");
    assert!(
        python.exists(),
        "{} is missing: test.sh makes the venv (with pympistandard)",
        python.display()
    );
    let o = Command::new(&python)
        .arg(root.join("scripts/gen-fortran.py"))
        .arg("--check")
        .output()
        .expect("run gen-fortran.py");
    assert!(o.status.success(), "{:?}", text(&o));
}

/// A program whose MPI library is gone (built by a `kumi` whose directory
/// was removed since) ends with the loader's message and code 127 on every
/// rank, which `kumi run` reports: no crash inside kumi.
#[test]
fn a_program_whose_library_is_gone_fails_with_the_loaders_message() {
    let dir = lib_dir().join("mpi-tests/fortran-gone");
    let _ = std::fs::remove_dir_all(&dir);
    let kdir = dir.join("bin");
    std::fs::create_dir_all(&kdir).expect("dir");
    for f in ["kumi", "libmpi.so"] {
        std::fs::copy(lib_dir().join(f), kdir.join(f)).expect("copy");
    }
    let inc = kdir.join("include");
    std::fs::create_dir_all(&inc).expect("include dir");
    for f in ["mpi.h", "mpif.h", "mpi.mod"] {
        std::fs::copy(lib_dir().join("include").join(f), inc.join(f)).expect("copy");
    }
    let prog = dir.join("unsupported");
    let o = Command::new(kdir.join("kumi"))
        .args(["fc", "-o"])
        .arg(&prog)
        .arg(src_dir().join("unsupported.f"))
        .output()
        .expect("run the copied kumi fc");
    assert!(o.status.success(), "{:?}", text(&o));
    std::fs::remove_dir_all(&kdir).expect("remove the library");
    // Without the test harness's LD_LIBRARY_PATH (cargo's, with the
    // target directory): only the rpath to the removed directory is left.
    let o = Command::new(bin("kumi"))
        .args(["run", "-n", "2"])
        .arg(&prog)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("start kumi run");
    let (_, err) = text(&o);
    assert!(
        o.status.code() == Some(127)
            && err.contains("error while loading shared libraries: libmpi.so.12")
            && err.contains("exited with code 127"),
        "{:?}\n{err}",
        o.status
    );
    let _ = std::fs::remove_dir_all(&dir);
}
