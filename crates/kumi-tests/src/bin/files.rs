//! Parallel files through the Rust API (`kumi::file`), with real ranks on
//! one file:
//! - `shared`: every rank appends M records through the shared file pointer
//!   with random pauses between them; every record must be in the file
//!   exactly once and the pointer must end at the total (the counter is the
//!   combining service's fetch-and-add, served while its owner sleeps);
//! - `atomic`: in atomic mode, every rank rewrites one strided region (each
//!   access is many `pwrite`s) with its own stamp while reading it back;
//!   every read must see one writer's stamp throughout, never a mix;
//! - `errors`: a missing file, an exclusive create of an existing one and a
//!   forbidden mode fail with their fault on every rank.
//!
//! Rank 0 prints `files: <mode> passed on <n> ranks`.
//!
//! `kumi run -n 4 target/release/files shared|atomic|errors DIR`

use kumi::datatype::Datatype;
use kumi::file::{Access, Fault, File, OpenMode};
use kumi::{Comm, Error};
use kumi_tests::Rng;
use std::time::Duration;

type R = Result<(), Error>;

fn fail(m: String) -> Error {
    Error::Protocol(m)
}

/// A file name every rank agrees on (rank 0's pid), under `dir`.
fn name(w: &Comm, dir: &str, what: &str) -> Result<String, Error> {
    let mut pid = [std::process::id()];
    w.bcast(&mut pid, 0)?;
    Ok(format!("{dir}/kumi-files-{what}.{}", pid[0]))
}

fn shared(w: &Comm, dir: &str) -> R {
    const M: u32 = 20;
    let (p, me) = (w.size(), w.rank() as u32);
    let path = name(w, dir, "shared")?;
    let mode = OpenMode {
        create: true,
        delete_on_close: true,
        ..OpenMode::new(Access::ReadWrite)
    };
    let f = File::open(w, &path, mode)?;
    let mut rng = Rng(0x5EED ^ me as u64);
    for k in 0..M {
        std::thread::sleep(Duration::from_micros(rng.below(400)));
        let rec: Vec<u8> = [me, k].iter().flat_map(|v| v.to_le_bytes()).collect();
        f.write_shared(&rec)?;
    }
    f.sync()?;
    w.barrier()?;
    let end = f.position_shared()?;
    let want = p as u64 * M as u64 * 8;
    if end != want {
        return Err(fail(format!("shared pointer ends at {end}, want {want}")));
    }
    let mut all = vec![0u8; want as usize];
    let got = f.read_at(0, &mut all)?;
    if got != all.len() {
        return Err(fail(format!("read {got} of {} bytes", all.len())));
    }
    let mut seen = vec![0u32; p * M as usize];
    for rec in all.chunks(8) {
        let q = u32::from_le_bytes(rec[..4].try_into().expect("4 bytes"));
        let k = u32::from_le_bytes(rec[4..].try_into().expect("4 bytes"));
        if q as usize >= p || k >= M {
            return Err(fail(format!("a record ({q}, {k}) that nobody wrote")));
        }
        seen[q as usize * M as usize + k as usize] += 1;
    }
    if let Some(i) = seen.iter().position(|&c| c != 1) {
        return Err(fail(format!(
            "record ({}, {}) is in the file {} times",
            i / M as usize,
            i % M as usize,
            seen[i]
        )));
    }
    f.close()
}

fn atomic(w: &Comm, dir: &str) -> R {
    const ELEMS: usize = 256;
    const ROUNDS: u32 = 60;
    let me = w.rank() as u32;
    let path = name(w, dir, "atomic")?;
    let mode = OpenMode {
        create: true,
        delete_on_close: true,
        ..OpenMode::new(Access::ReadWrite)
    };
    let mut f = File::open(w, &path, mode)?;
    // 4 bytes of every 64: an access of ELEMS elements is ELEMS writes.
    let int = Datatype::basic(4, 1);
    let ft = int.vector(1, 1, 16)?.resized(0, 64);
    f.set_view(Some(0), int, ft)?;
    f.set_atomicity(true)?;
    let stamp = |v: u32| -> Vec<u8> { (0..ELEMS).flat_map(|_| v.to_le_bytes()).collect() };
    if me == 0 {
        f.write_at(0, &stamp(u32::MAX))?;
    }
    w.barrier()?;
    let mut buf = vec![0u8; ELEMS * 4];
    let mut reads = 0;
    for round in 0..ROUNDS {
        f.write_at(0, &stamp(me * 1000 + round))?;
        f.read_at(0, &mut buf)?;
        reads += 1;
        let first = &buf[..4];
        if let Some(i) = buf.chunks(4).position(|c| c != first) {
            return Err(fail(format!(
                "rank {me}, round {round}: element {i} holds {:?} but element 0 {first:?}: \
                 a read saw two writes",
                &buf[i * 4..i * 4 + 4]
            )));
        }
    }
    w.barrier()?;
    if me == 0 {
        println!("atomic: {reads} reads per rank, each whole");
    }
    f.close()
}

fn errors(w: &Comm, dir: &str) -> R {
    let path = name(w, dir, "errors")?;
    let fault_of = |r: Result<File, Error>| match r {
        Err(Error::File { fault, .. }) => Ok(fault),
        Err(e) => Err(fail(format!("expected a file error, got {e}"))),
        Ok(_) => Err(fail("expected a file error, the open succeeded".into())),
    };
    let got = fault_of(File::open(w, &path, OpenMode::new(Access::ReadOnly)))?;
    if got != Fault::NoSuchFile {
        return Err(fail(format!("missing file: {got:?}")));
    }
    let excl = OpenMode {
        create: true,
        exclusive: true,
        ..OpenMode::new(Access::WriteOnly)
    };
    File::open(w, &path, excl)?.close()?;
    let got = fault_of(File::open(w, &path, excl))?;
    if got != Fault::Exists {
        return Err(fail(format!(
            "exclusive create of an existing file: {got:?}"
        )));
    }
    let bad = OpenMode {
        create: true,
        ..OpenMode::new(Access::ReadOnly)
    };
    let got = fault_of(File::open(w, &path, bad))?;
    if got != Fault::Amode {
        return Err(fail(format!("read-only create: {got:?}")));
    }
    w.barrier()?;
    if w.rank() == 0 {
        File::delete(&path)?;
    }
    Ok(())
}

fn main() {
    let universe = kumi::init().expect("kumi init");
    let w = universe.world();
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("shared");
    let dir = args.get(2).cloned().unwrap_or_else(|| "/tmp".into());
    let r = match mode {
        "shared" => shared(&w, &dir),
        "atomic" => atomic(&w, &dir),
        "errors" => errors(&w, &dir),
        m => universe.abort(
            2,
            &format!("files: unknown mode {m} (shared, atomic, errors)"),
        ),
    };
    if let Err(e) = r {
        universe.abort(1, &format!("files {mode} on rank {}: {e}", w.rank()));
    }
    if w.rank() == 0 {
        println!("files: {mode} passed on {} ranks", w.size());
    }
}
