//! Gives the library its soname and its segment alignment, and puts the files
//! `kumi cc`, `kumi fc` and MPICH-built binaries look for next to it in the
//! target directory: `libmpi.so.12`, `libmpich.so.12` and (for Fortran)
//! `libmpichfort.so.12` and `libmpifort.so.12` (symlinks to `libmpi.so`,
//! which holds the Fortran binding too), `include/mpi.h`, `include/mpif.h`,
//! the `mpi` and `mpi_f08` modules (`include/*.mod`, where gfortran is
//! installed), and
//! the `mpicc`, `mpicxx`, `mpifort`, `mpif90`, `mpif77`, `mpirun`, `mpiexec`
//! shims (symlinks to the `kumi` binary, which behaves by the name it is
//! called with).
use std::path::{Path, PathBuf};

fn link(target: &str, name: &Path) {
    if std::fs::read_link(name).is_ok_and(|t| t == Path::new(target)) {
        return;
    }
    let _ = std::fs::remove_file(name);
    if let Err(e) = std::os::unix::fs::symlink(target, name) {
        println!("cargo:warning=could not create {}: {e}", name.display());
    }
}

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi.so.12");
    // The library is over 2 MiB, and the kernel maps a file that large on a
    // 2 MiB boundary (for huge pages; ext4 does): every rank would have its
    // code at the same address modulo 2 MiB under a random one above, and
    // ranks sharing a core then slow each other down (most likely through
    // the branch predictors; docs/BENCHMARKS.md, session 8). Segments
    // aligned to more than a page make glibc (2.35 and later) reserve the
    // span itself and place the library at a random 8 KiB boundary instead.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,max-page-size=0x2000");
    println!("cargo:rerun-if-changed=include/mpi.h");
    println!("cargo:rerun-if-changed=include/mpif.h");
    println!("cargo:rerun-if-changed=include/kumi.h");
    println!("cargo:rerun-if-changed=include/mpi.f90");
    println!("cargo:rerun-if-changed=include/mpi_f08.f90");
    println!("cargo:rerun-if-changed=include/kumi.f90");
    println!("cargo:rerun-if-changed=build.rs");
    // OUT_DIR is target/<profile>/build/kumi-mpi-<hash>/out.
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let Some(dir) = out.ancestors().nth(3) else {
        return;
    };
    for so in SONAMES {
        link("libmpi.so", &dir.join(so));
    }
    for shim in [
        "mpicc", "mpicxx", "mpifort", "mpif90", "mpif77", "mpirun", "mpiexec",
    ] {
        link("kumi", &dir.join(shim));
    }
    let inc = dir.join("include");
    let _ = std::fs::create_dir_all(&inc);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    for h in ["mpi.h", "mpif.h", "kumi.h"] {
        if let Err(e) = std::fs::copy(src.join(h), inc.join(h)) {
            println!("cargo:warning=could not copy {h}: {e}");
        }
    }
    for module in ["mpi.f90", "mpi_f08.f90", "kumi.f90"] {
        fortran_module(&src.join(module), &inc, &out);
    }
}

/// The names the library is found under: its own, MPICH's C library's and
/// MPICH's Fortran library's (Debian's name and upstream's).
const SONAMES: [&str; 4] = [
    "libmpi.so.12",
    "libmpich.so.12",
    "libmpichfort.so.12",
    "libmpifort.so.12",
];

/// Compiles a module (`mpi`, `mpi_f08`) into `inc` where gfortran is
/// installed (else nothing: `kumi fc` says what is missing when it is
/// used). Only the `.mod` file is kept: the modules declare, the library
/// defines.
fn fortran_module(src: &Path, inc: &Path, out: &Path) {
    let fc = std::env::var("KUMI_FC").unwrap_or_else(|_| "gfortran".into());
    println!("cargo:rerun-if-env-changed=KUMI_FC");
    watch_compiler(&fc);
    let Ok(status) = std::process::Command::new(&fc)
        .arg("-c")
        .arg(src)
        .arg("-I")
        .arg(inc)
        .arg("-J")
        .arg(inc)
        .arg("-o")
        .arg(out.join(src.with_extension("o").file_name().unwrap_or_default()))
        .status()
    else {
        return;
    };
    if !status.success() {
        println!(
            "cargo:warning={fc} could not compile {} ({status})",
            src.display()
        );
    }
}

/// Makes cargo run this script again when the compiler `fc` changes or, if
/// it is not installed, when it may have been (a directory of `PATH`
/// changed): kumi built before gfortran was installed gets its modules at
/// the next build, not only after a change of its sources.
fn watch_compiler(fc: &str) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let found = if fc.contains('/') {
        Some(PathBuf::from(fc)).filter(|p| p.exists())
    } else {
        dirs.iter().map(|d| d.join(fc)).find(|p| p.exists())
    };
    println!("cargo:rerun-if-env-changed=PATH");
    match found {
        Some(p) => println!("cargo:rerun-if-changed={}", p.display()),
        None => {
            for d in dirs.iter().filter(|d| d.is_dir()) {
                println!("cargo:rerun-if-changed={}", d.display());
            }
        }
    }
}
