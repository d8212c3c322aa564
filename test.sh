#!/usr/bin/env bash
# The whole test suite of kumi, as the README and CI run it.
# Installs what the tests need on a fresh machine (Debian, as root), then checks
# formatting and lints, runs every test, and model-checks the shared-memory ring.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v cargo >/dev/null; then
    echo "test.sh: cargo is not installed (https://rustup.rs)" >&2
    exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# `kumi top` is tested in a pseudo-terminal that tmux provides.
command -v tmux >/dev/null || { apt-get update -qq && apt-get install -y -qq tmux >/dev/null; } || true
# The MPI ABI tests (crates/kumi-tests/tests/mpi_abi.rs) compare with Debian's
# MPICH and run mpi4py's PyPI wheel (MPICH-ABI flavour) on kumi's libmpi.so.12.
command -v mpicc.mpich >/dev/null || { apt-get update -qq && apt-get install -y -qq libmpich-dev mpich python3-venv >/dev/null; }
# `kumi bench startup` is tested against both references (crates/kumi-tests/
# tests/bench_suite.rs), so Open MPI too.
command -v mpicc.openmpi >/dev/null || { apt-get update -qq && apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null; }
# `kumi bench lu` is tested with both DGEMMs: faer (built in) and OpenBLAS.
[ -e /usr/lib/x86_64-linux-gnu/libopenblas.so.0 ] || { apt-get update -qq && apt-get install -y -qq libopenblas0-serial >/dev/null; }
# The Fortran tests (crates/kumi-tests/tests/fortran.rs) compile with gfortran,
# kumi's and MPICH's wrappers.
command -v gfortran >/dev/null || { apt-get update -qq && apt-get install -y -qq gfortran >/dev/null; }
# The debugging tests (crates/kumi-tests/tests/debugging.rs) run gdb.
command -v gdb >/dev/null || { apt-get update -qq && apt-get install -y -qq gdb >/dev/null; }
# The install test (crates/kumi-tests/tests/install.rs) builds with CMake's
# find_package(MPI) and Meson's dependency('mpi'), and asks pkg-config.
command -v cmake >/dev/null && command -v meson >/dev/null && command -v pkg-config >/dev/null || { apt-get update -qq && apt-get install -y -qq cmake meson ninja-build pkg-config >/dev/null; }
# The Slurm tests (crates/kumi-tests/tests/slurm.rs) start their own Slurm
# cluster (private munged, slurmctld and slurmd's in test namespaces, removed
# afterwards); apt starts no service here, and the tests start none of the
# machine's own. Slurm's PMIx plugin (srun --mpi=pmix) opens the unversioned
# pmix2/lib/libpmix.so, which only libpmix-dev provides.
command -v slurmd >/dev/null && command -v munged >/dev/null && [ -e /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so ] || { apt-get update -qq && apt-get install -y -qq slurm-wlm munge libpmix2 libpmix-dev >/dev/null; }
target/py/bin/python -c 'import mpi4py, numpy' 2>/dev/null || { python3 -m venv target/py && target/py/bin/pip install -q mpi4py numpy; }
# The Fortran binding is generated from the MPI Forum's API description.
target/py/bin/python -c 'import pympistandard' 2>/dev/null || target/py/bin/pip install -q pympistandard==0.2.0
# mpi4py's own test suite (from its source release, the wheel's version)
# runs on kumi's library too.
v=$(target/py/bin/python -c 'import mpi4py; print(mpi4py.__version__)')
[ -f "target/py/mpi4py-$v/test/main.py" ] || {
    target/py/bin/pip download -q --no-binary :all: --no-deps "mpi4py==$v" -d target/py/sdist &&
        tar xzf "target/py/sdist/mpi4py-$v.tar.gz" -C target/py
}

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings

echo "== cargo doc -D warnings (every intra-doc link resolves)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --lib -q

echo "== cargo build (the kumi binary, libmpi.so and its links, which tests run)"
# `cargo test` alone does not produce the cdylib `libmpi.so` in target/release:
# the MPI tests load it, so build every artifact first.
cargo build --workspace --release

echo "== cargo test (release build: the stress tests move gigabytes)"
cargo test --workspace --release

echo "== loom model check of the shared-memory ring and sender sets, the engine lock and the window locks"
CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" \
    cargo test -p kumi-transport --release --lib loom

left=$(ls /dev/shm 2>/dev/null | grep '^kumi' || true)
if [ -n "$left" ]; then
    echo "test.sh: the tests left kumi files in /dev/shm: $left" >&2
    exit 1
fi
echo "== all tests passed"
