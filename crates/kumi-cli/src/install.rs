//! `kumi install --prefix DIR`: kumi as a cluster's users find it. Copies
//! this `kumi` and what it needs from beside it (the build tree, or another
//! install) into
//!
//! ```text
//! DIR/bin/kumi, mpicc mpicxx mpifort mpif90 mpif77 mpirun mpiexec (links)
//! DIR/lib/libmpi.so, libmpi.a, and the names MPICH programs ask for
//!        (libmpi.so.12, libmpich.so.12, libmpichfort.so.12, libmpifort.so.12)
//! DIR/include/mpi.h, mpif.h, kumi.h, mpi.mod, mpi_f08.mod, kumi.mod
//! DIR/lib/pkgconfig/kumi.pc, mpich.pc   (pkg-config; Meson's dependency('mpi'))
//! DIR/share/modulefiles/kumi            (environment modules)
//! DIR/share/doc/kumi/*.txt              (every command's --help)
//! ```
//!
//! Nothing in the tree names DIR: `kumi cc` finds `../lib` and `../include`
//! from its own location, the pkg-config files use `${pcfiledir}`, the
//! modulefile its own path. So the tree can be moved or shared over NFS; a
//! program built from it keeps the library's path it was built with (its
//! rpath), as with any MPI.

use clap::{Args, CommandFactory};
use std::path::{Path, PathBuf};

/// Options of `kumi install`.
#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Where to install (created if missing).
    #[arg(long, value_name = "DIR")]
    pub prefix: PathBuf,
}

/// The MPI names of the `kumi` binary (see `cc::multicall`).
const LINKS: [&str; 7] = [
    "mpicc", "mpicxx", "mpifort", "mpif90", "mpif77", "mpirun", "mpiexec",
];
/// The names of kumi's library that programs built with MPICH ask for.
const SONAMES: [&str; 4] = [
    "libmpi.so.12",
    "libmpich.so.12",
    "libmpichfort.so.12",
    "libmpifort.so.12",
];

/// Installs; returns the exit code.
pub fn main(args: InstallArgs) -> i32 {
    match install(&args.prefix) {
        Ok(()) => {
            println!(
                "kumi installed in {p}: add {p}/bin to PATH (or `module use {p}/share/modulefiles; module load kumi`)",
                p = args.prefix.display()
            );
            0
        }
        Err(e) => {
            eprintln!("kumi install: {e}");
            1
        }
    }
}

fn ctx<T>(r: std::io::Result<T>, what: &Path) -> Result<T, String> {
    r.map_err(|e| format!("{}: {e}", what.display()))
}

fn install(prefix: &Path) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate kumi: {e}"))?;
    let here = exe.parent().ok_or("kumi has no directory")?;
    // The library and headers beside this kumi: a build tree (all in one
    // directory) or an installed tree (../lib, ../include).
    let lib = [here.to_path_buf(), here.join("../lib")]
        .into_iter()
        .find(|d| d.join("libmpi.so").exists())
        .ok_or_else(|| {
            format!(
                "libmpi.so is not beside {} nor in ../lib: build it first (cargo build --release)",
                exe.display()
            )
        })?;
    let include = [here.join("include"), here.join("../include")]
        .into_iter()
        .find(|d| d.join("mpi.h").exists())
        .ok_or("mpi.h is not in include/ beside kumi nor in ../include: build kumi first")?;
    let (bin_d, lib_d, inc_d) = (
        prefix.join("bin"),
        prefix.join("lib"),
        prefix.join("include"),
    );
    let (pc_d, mod_d, doc_d) = (
        lib_d.join("pkgconfig"),
        prefix.join("share/modulefiles"),
        prefix.join("share/doc/kumi"),
    );
    for d in [&bin_d, &lib_d, &inc_d, &pc_d, &mod_d, &doc_d] {
        ctx(std::fs::create_dir_all(d), d)?;
    }
    copy(&exe, &bin_d.join("kumi"))?;
    for name in LINKS {
        link("kumi", &bin_d.join(name))?;
    }
    copy(&lib.join("libmpi.so"), &lib_d.join("libmpi.so"))?;
    if lib.join("libmpi.a").exists() {
        copy(&lib.join("libmpi.a"), &lib_d.join("libmpi.a"))?;
    }
    for so in SONAMES {
        link("libmpi.so", &lib_d.join(so))?;
    }
    for f in [
        "mpi.h",
        "mpif.h",
        "kumi.h",
        "mpi.mod",
        "mpi_f08.mod",
        "kumi.mod",
    ] {
        if include.join(f).exists() {
            copy(&include.join(f), &inc_d.join(f))?;
        }
    }
    let version = env!("CARGO_PKG_VERSION");
    for (name, what) in [
        ("kumi", "kumi's MPI library"),
        ("mpich", "kumi's MPI library (MPICH-compatible ABI)"),
    ] {
        let pc = format!(
            "prefix=${{pcfiledir}}/../..\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n\n\
             Name: {name}\nDescription: {what}\nVersion: {version}\n\
             Cflags: -I${{includedir}}\nLibs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lmpi\n"
        );
        let p = pc_d.join(format!("{name}.pc"));
        ctx(std::fs::write(&p, pc), &p)?;
    }
    let module = format!(
        "#%Module1.0\n## kumi {version}: a cluster-computing system with an MPICH-compatible MPI\n\
         set prefix [file normalize [file join [file dirname $ModulesCurrentModulefile] .. ..]]\n\
         module-whatis \"kumi {version}: kumi run, mpirun, mpicc, mpifort and libmpi.so.12\"\n\
         conflict mpi\n\
         prepend-path PATH $prefix/bin\n\
         prepend-path PKG_CONFIG_PATH $prefix/lib/pkgconfig\n\
         prepend-path CMAKE_PREFIX_PATH $prefix\n\
         setenv MPI_HOME $prefix\n"
    );
    let m = mod_d.join("kumi");
    ctx(std::fs::write(&m, module), &m)?;
    // Every command's help, as the manual.
    let mut cli = crate::Cli::command();
    let help = |c: &mut clap::Command| c.render_long_help().to_string();
    let top = doc_d.join("kumi.txt");
    ctx(std::fs::write(&top, help(&mut cli)), &top)?;
    for sub in cli.get_subcommands_mut() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let p = doc_d.join(format!("kumi-{}.txt", sub.get_name()));
        ctx(std::fs::write(&p, help(sub)), &p)?;
    }
    let p = doc_d.join("mpirun.txt");
    ctx(std::fs::write(&p, crate::mpirun::HELP), &p)?;
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    // Replace, not overwrite in place: a running program may map the old one.
    let _ = std::fs::remove_file(to);
    ctx(std::fs::copy(from, to), from).map(drop)
}

fn link(target: &str, at: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(at);
    ctx(std::os::unix::fs::symlink(target, at), at)
}
