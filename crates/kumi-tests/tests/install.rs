//! `kumi install --prefix DIR`: the installed tree works from wherever it is
//! moved. A C and a Fortran program built by CMake's `find_package(MPI)`
//! and by Meson's `dependency('mpi')` from the moved tree (the projects in
//! `crates/kumi-tests/install`) run with its `mpiexec`; pkg-config finds the
//! moved tree too.
//!
//! Needs the workspace built, CMake, Meson, gfortran and pkg-config
//! (`test.sh` installs them).

use kumi_tests::programs::outputs;
use kumi_tests::{bin, text};
use std::path::Path;
use std::process::Command;

#[test]
fn an_installed_tree_moved_elsewhere_builds_with_cmake_and_runs() {
    let base = std::env::temp_dir().join(format!("kumi-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (first, moved, build) = (base.join("a"), base.join("moved"), base.join("build"));
    let o = Command::new(bin("kumi"))
        .args(["install", "--prefix"])
        .arg(&first)
        .output()
        .expect("kumi install");
    assert!(o.status.success(), "{}", text(&o));
    std::fs::rename(&first, &moved).expect("move the tree");
    for f in [
        "bin/kumi",
        "bin/mpicc",
        "bin/mpifort",
        "bin/mpiexec",
        "lib/libmpi.so",
        "lib/libmpi.so.12",
        "lib/libmpichfort.so.12",
        "include/mpi.h",
        "include/mpif.h",
        "include/mpi.mod",
        "include/mpi_f08.mod",
        "lib/pkgconfig/kumi.pc",
        "lib/pkgconfig/mpich.pc",
        "share/modulefiles/kumi",
        "share/doc/kumi/kumi-run.txt",
    ] {
        assert!(
            moved.join(f).exists(),
            "{f} is missing from the installed tree"
        );
    }
    // CMake, with nothing of the build tree on its paths.
    std::fs::create_dir_all(&build).expect("build dir");
    let path = format!("{}/bin:/usr/bin:/bin", moved.display());
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("install");
    let o = Command::new("cmake")
        .arg(&project)
        .current_dir(&build)
        .env("PATH", &path)
        .env("MPI_HOME", &moved)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("cmake (test.sh installs it)");
    let (out, _) = outputs(&o);
    assert!(o.status.success(), "cmake: {}", text(&o));
    let m = moved.display().to_string();
    assert!(
        out.contains(&format!("MPIEXEC={m}/bin/mpiexec"))
            && out.contains(&format!("MPI_C_LIBRARIES={m}/lib/libmpi.so")),
        "CMake found another MPI: {out}"
    );
    let o = Command::new("make")
        .current_dir(&build)
        .env("PATH", &path)
        .output()
        .expect("make");
    assert!(o.status.success(), "make: {}", text(&o));
    runs_hellos(&moved, &build, &path);
    // Meson asks pkg-config for Open MPI's `ompi-c` first, then the
    // `mpicc` on PATH: as on a machine whose only MPI is kumi, the
    // pkg-config files it sees are the tree's.
    let meson_build = base.join("meson-build");
    let o = Command::new("meson")
        .arg("setup")
        .arg(&meson_build)
        .current_dir(&project)
        .env("PATH", &path)
        .env("PKG_CONFIG_LIBDIR", moved.join("lib/pkgconfig"))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("meson (test.sh installs it)");
    let (out, _) = outputs(&o);
    assert!(
        o.status.success()
            && out.contains(&format!("mpicc found: YES ({m}/bin/mpicc)"))
            && out.contains(&format!("mpifort found: YES ({m}/bin/mpifort)")),
        "meson setup: {}",
        text(&o)
    );
    let o = Command::new("ninja")
        .current_dir(&meson_build)
        .env("PATH", &path)
        .output()
        .expect("ninja");
    assert!(o.status.success(), "ninja: {}", text(&o));
    runs_hellos(&moved, &meson_build, &path);
    let o = Command::new("pkg-config")
        .args(["--cflags", "--libs", "kumi"])
        .env("PKG_CONFIG_PATH", moved.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config");
    let (out, _) = outputs(&o);
    assert!(
        o.status.success() && out.contains(&format!("-I{m}/lib/pkgconfig/../../include")),
        "pkg-config: {}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// The C and Fortran hellos built in `build` run with the tree's `mpiexec`.
fn runs_hellos(tree: &Path, build: &Path, path: &str) {
    for (exe, n, says) in [
        ("hello_c", "3", "hello from C: 3 ranks, sum 3"),
        ("hello_f", "2", "hello from Fortran: 2 ranks, sum 1"),
    ] {
        let o = Command::new(tree.join("bin/mpiexec"))
            .args(["-n", n])
            .arg(build.join(exe))
            .env("PATH", path)
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .expect("mpiexec");
        assert!(
            o.status.success() && outputs(&o).0.contains(says),
            "{}: {}",
            build.join(exe).display(),
            text(&o)
        );
    }
}
