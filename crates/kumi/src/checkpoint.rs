//! Coordinated checkpoint and restart, in cooperation with the program.
//!
//! The program says what its state is (it writes it into a [`Writer`] and
//! reads it back from a [`Reader`]) and when a consistent point is (it calls
//! [`Checkpoints::save`], or asks [`Checkpoints::due`] so that the interval
//! stays kumi's). kumi coordinates the ranks, writes, checksums, commits a
//! manifest atomically and keeps the last K; `kumi run --max-restarts`
//! restarts a failed job from the newest complete checkpoint. The protocol and
//! the file formats are `kumi_core::checkpoint`'s; this module does the I/O.
//!
//! ```no_run
//! let universe = kumi::init()?;
//! let mut ckpt = universe.checkpoints();
//! let mut u = vec![0.0f64; 1000];
//! let mut step = [0u64];
//! // A restarted job reads its state back (every rank, collectively).
//! ckpt.restore(|r| { r.get(&mut u)?; r.get(&mut step) })?;
//! while step[0] < 100 {
//!     // ... compute, communicate ...
//!     step[0] += 1;
//!     if ckpt.due()? {
//!         ckpt.save(|w| { w.put(&u)?; w.put(&step) })?;
//!     }
//! }
//! # Ok::<(), kumi::Error>(())
//! ```
//!
//! Every call is collective over the job (the world communicator), and every
//! rank gets the same answer: a checkpoint is complete on all ranks or on none.

use crate::{Comm, Error, Result};
use bytemuck::Pod;
use kumi_core::checkpoint::{
    self as ck, JobIdentity, Listing, Manifest, PartHeader, Settings, Vote,
};
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bytes a [`Writer`] checksums and writes at a time.
const WRITE_PIECE: usize = 1 << 20;

/// The job's checkpoints, as one rank sees them (see the module docs).
pub struct Checkpoints {
    world: Comm,
    settings: Option<Settings>,
    host: String,
    /// When the job started or last committed a checkpoint (rank 0's clock
    /// decides [`Checkpoints::due`]).
    last: Instant,
    /// The epoch of the next checkpoint, once rank 0 has chosen it.
    next: Option<u64>,
    /// The restart candidates are spent once the state was read back.
    restored: bool,
    /// Rank 0's deletion of checkpoints older than the last `keep`, joined
    /// before the next one starts and when this value goes, so the job
    /// never ends with more than `keep` of them left behind.
    retiring: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Checkpoints {
    fn drop(&mut self) {
        self.finish_retiring();
        // The job leaves its last checkpoints and nothing else.
        if self.world.rank() == 0 {
            if let Some(s) = &self.settings {
                let _ = fs::remove_dir_all(Path::new(&s.dir).join(ck::SPARE));
            }
        }
    }
}

/// A checkpoint's part being written: the program writes its state in, in
/// an order it reads back in.
pub struct Writer {
    file: BufWriter<File>,
    len: u64,
    crc: u32,
}

impl Writer {
    /// Appends bytes of state.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        // In pieces: each is checksummed while it is in the cache, and the
        // kernel starts writing back while later pieces are copied (one
        // write of a whole large state flushed more slowly: see
        // docs/BENCHMARKS.md, "Checkpoint cost").
        for piece in bytes.chunks(WRITE_PIECE) {
            self.crc = ck::crc(self.crc, piece);
            self.file.write_all(piece)?;
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Appends a slice of plain values.
    pub fn put<T: Pod>(&mut self, values: &[T]) -> io::Result<()> {
        self.write(bytemuck::cast_slice(values))
    }
}

/// A checkpoint's part being read back, verified before the first byte is
/// handed out.
pub struct Reader {
    file: io::BufReader<File>,
    left: u64,
}

impl Reader {
    /// Fills `bytes` with the next bytes of state; asking for more than the
    /// part holds is an error (the program reads what it did not write).
    pub fn read(&mut self, bytes: &mut [u8]) -> io::Result<()> {
        if bytes.len() as u64 > self.left {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the program asked for {} bytes of state; the checkpoint holds {} more",
                    bytes.len(),
                    self.left
                ),
            ));
        }
        self.file.read_exact(bytes)?;
        self.left -= bytes.len() as u64;
        Ok(())
    }

    /// Fills a slice of plain values.
    pub fn get<T: Pod>(&mut self, values: &mut [T]) -> io::Result<()> {
        self.read(bytemuck::cast_slice_mut(values))
    }

    /// Bytes of state not read yet.
    pub fn remaining(&self) -> u64 {
        self.left
    }
}

impl crate::Universe {
    /// This job's checkpoints (`kumi run --checkpoint-dir`, or `KUMI_CKPT_DIR`).
    pub fn checkpoints(&self) -> Checkpoints {
        Checkpoints {
            world: self.world(),
            settings: self.checkpoint.clone(),
            host: if self.id.host.is_empty() {
                rustix::system::uname()
                    .nodename()
                    .to_string_lossy()
                    .into_owned()
            } else {
                self.id.host.clone()
            },
            last: Instant::now(),
            next: None,
            restored: false,
            retiring: None,
        }
    }
}

fn failed(what: impl std::fmt::Display) -> Error {
    Error::Checkpoint(what.to_string())
}

/// The epochs in `dir` and their manifests' bytes.
fn listing(dir: &Path) -> io::Result<Listing> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(epoch) = entry.file_name().to_str().and_then(ck::parse_epoch_dir) {
            let manifest = fs::read(entry.path().join(ck::MANIFEST)).ok();
            out.push((epoch, manifest));
        }
    }
    Ok(out)
}

/// Flushes a directory, so that the renames in it are durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Checkpoints {
    /// True when the job checkpoints (a directory is configured).
    pub fn enabled(&self) -> bool {
        self.settings.is_some()
    }

    /// True when this run resumes a checkpoint: [`Checkpoints::restore`]
    /// will read one back. The same on every rank.
    pub fn restarting(&self) -> bool {
        !self.restored
            && self
                .settings
                .as_ref()
                .is_some_and(|s| !s.restart.is_empty())
    }

    /// Whether a checkpoint is due: once `--checkpoint-every` seconds have
    /// passed since the job started or last checkpointed, by rank 0's clock.
    /// Collective; every rank gets rank 0's answer. Always false (and no
    /// communication) when the job does not checkpoint.
    pub fn due(&mut self) -> Result<bool> {
        let Some(s) = &self.settings else {
            return Ok(false);
        };
        let mut due = [u8::from(self.last.elapsed().as_secs_f64() >= s.every_s)];
        self.world.bcast(&mut due, 0)?;
        Ok(due[0] == 1)
    }

    /// Takes a checkpoint: `write` puts this rank's state into its part;
    /// returns the epoch once every rank's part is durable and the manifest
    /// is committed, or `None` at once when the job does not checkpoint (no
    /// directory: the program runs unchanged without one). Collective. If
    /// any rank fails (its `write` returned an error, the disk is full...),
    /// no rank's call succeeds, the error names the rank and why, and the
    /// previous complete checkpoint stays.
    pub fn save(
        &mut self,
        write: impl FnOnce(&mut Writer) -> io::Result<()>,
    ) -> Result<Option<u64>> {
        let Some(s) = self.settings.clone() else {
            return Ok(None);
        };
        let dir = PathBuf::from(&s.dir);
        let (rank, size) = (self.world.rank(), self.world.size());
        // Step 1: rank 0 picks the epoch and makes its directory.
        let mut head = [0u64; 2];
        if rank == 0 {
            head = match self.prepare(&dir) {
                Ok(epoch) => [epoch, 0],
                Err(_) => [0, 1],
            };
        }
        self.world.bcast(&mut head, 0)?;
        if head[1] != 0 {
            return Err(failed(format!(
                "cannot create a checkpoint in {}: rank 0 could not make its directory",
                dir.display()
            )));
        }
        let epoch = head[0];
        let edir = dir.join(ck::epoch_dir(epoch));
        // Step 2: every rank writes its part and votes.
        let vote = match write_part(&edir, epoch, rank as u32, size as u32, write) {
            Ok((len, crc)) => Vote::Done {
                len,
                crc,
                host: self.host.clone(),
            },
            Err(e) => Vote::Failed(e.to_string()),
        };
        let mut votes = vec![0u8; if rank == 0 { size * ck::VOTE_BYTES } else { 0 }];
        self.world.gather(&vote.encode(), &mut votes, 0)?;
        // Step 3: rank 0 commits (or not) and says so.
        let mut verdict = [0u8; 512];
        if rank == 0 {
            let votes: Vec<Vote> = votes.chunks(ck::VOTE_BYTES).map(Vote::decode).collect();
            if let Err(why) = self.commit(&s, &dir, epoch, &votes) {
                let why = why.as_bytes();
                let n = why.len().min(verdict.len() - 1);
                verdict[0] = 1;
                verdict[1..=n].copy_from_slice(&why[..n]);
            }
        }
        self.world.bcast(&mut verdict, 0)?;
        self.next = Some(epoch + 1);
        if verdict[0] != 0 {
            let end = verdict
                .iter()
                .skip(1)
                .position(|&b| b == 0)
                .map_or(verdict.len(), |i| i + 1);
            return Err(failed(format!(
                "checkpoint {epoch} in {} was not taken: {}",
                dir.display(),
                String::from_utf8_lossy(&verdict[1..end])
            )));
        }
        self.last = Instant::now();
        Ok(Some(epoch))
    }

    /// Rank 0: the next epoch, its directory created.
    fn prepare(&mut self, dir: &Path) -> io::Result<u64> {
        fs::create_dir_all(dir)?;
        let epoch = match self.next {
            Some(e) => e,
            None => ck::next_epoch(&listing(dir)?),
        };
        let edir = dir.join(ck::epoch_dir(epoch));
        match fs::create_dir(&edir) {
            // A directory left by a run that died before committing it.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                fs::remove_dir_all(&edir)?;
                fs::create_dir(&edir)?;
            }
            r => r?,
        }
        Ok(epoch)
    }

    /// Rank 0: the manifest, made durable (the commit point), then the
    /// retirement of older checkpoints.
    fn commit(
        &mut self,
        s: &Settings,
        dir: &Path,
        epoch: u64,
        votes: &[Vote],
    ) -> std::result::Result<(), String> {
        let job = self.identity(s);
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let manifest = ck::commit(epoch, &job, env!("CARGO_PKG_VERSION"), time, votes)?;
        let edir = dir.join(ck::epoch_dir(epoch));
        // Every part must be where a restart will look: a directory that is
        // not shared between the hosts shows here.
        for (r, p) in manifest.parts.iter().enumerate() {
            let path = edir.join(ck::part_file(r as u32).0);
            match fs::metadata(&path) {
                Ok(m) if m.len() == ck::PART_HEADER_BYTES as u64 + p.len => {}
                Ok(m) => return Err(format!("{} has {} bytes, rank {r} wrote {}", path.display(), m.len(), p.len)),
                Err(e) => {
                    return Err(format!(
                        "rank {r}'s part {} is not visible from rank 0's host ({e}): the checkpoint directory must be shared by every host",
                        path.display()
                    ))
                }
            }
        }
        // The manifest's bytes are flushed before it is renamed into place;
        // flushing the epoch's directory then makes the parts' and the
        // manifest's names durable together, and flushing the checkpoint
        // directory the epoch's own name. (A crash in between leaves an epoch
        // without a readable manifest or with parts missing, which a restart
        // passes over: it never reads what it cannot verify.)
        let io = |e: io::Error| format!("writing its manifest: {e}");
        let tmp = edir.join(format!("{}.tmp", ck::MANIFEST));
        let mut f = File::create(&tmp).map_err(io)?;
        f.write_all(manifest.encode().as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        fs::rename(&tmp, edir.join(ck::MANIFEST)).map_err(io)?;
        sync_dir(&edir).map_err(io)?;
        sync_dir(dir).map_err(io)?;
        // Committed. Old checkpoints go on a thread of their own (deleting
        // large files takes time no rank should wait for while it computes);
        // the previous retirement has ended first, so the listing is
        // settled. The newest one retired becomes the spare whose files the
        // next checkpoint overwrites (`write_part`); the previous spare,
        // whose files this checkpoint took, goes with what they left.
        self.finish_retiring();
        if let Ok(l) = listing(dir) {
            let old: Vec<PathBuf> = ck::retire(&l, epoch, s.keep)
                .into_iter()
                .map(|e| dir.join(ck::epoch_dir(e)))
                .collect();
            if !old.is_empty() {
                let spare = dir.join(ck::SPARE);
                let remove = move || {
                    let _ = fs::remove_dir_all(&spare);
                    for (i, d) in old.into_iter().enumerate() {
                        // Without its manifest first: never a checkpoint again.
                        let recycled = i == 0
                            && fs::remove_file(d.join(ck::MANIFEST)).is_ok()
                            && fs::rename(&d, &spare).is_ok();
                        if !recycled {
                            let _ = fs::remove_dir_all(d);
                        }
                    }
                };
                self.retiring = std::thread::Builder::new()
                    .name("kumi-ckpt-retire".into())
                    .spawn(remove)
                    .ok();
            }
        }
        Ok(())
    }

    fn finish_retiring(&mut self) {
        if let Some(t) = self.retiring.take() {
            let _ = t.join();
        }
    }

    fn identity(&self, s: &Settings) -> JobIdentity {
        let mut args = std::env::args();
        let argv0 = args.next().unwrap_or_default();
        let program = s.program.clone().unwrap_or_else(|| {
            fs::read_link("/proc/self/exe").map_or(argv0, |p| p.display().to_string())
        });
        JobIdentity {
            program,
            args: args.collect(),
            size: self.world.size() as u32,
        }
    }

    /// Reads this rank's state back when the job restarts from a checkpoint
    /// ([`Checkpoints::restarting`]); returns the epoch, or `None` for a
    /// fresh start (then `read` is not called). Collective. The ranks agree
    /// on the newest checkpoint whose every part verifies (length, header
    /// and CRC-32C against the manifest); a part that does not is reported
    /// on this rank's standard error, naming the file, and an older
    /// checkpoint is tried. `read` must consume the whole part.
    pub fn restore(
        &mut self,
        read: impl FnOnce(&mut Reader) -> io::Result<()>,
    ) -> Result<Option<u64>> {
        let Some(s) = self.settings.clone().filter(|_| self.restarting()) else {
            return Ok(None);
        };
        let dir = PathBuf::from(&s.dir);
        let rank = self.world.rank() as u32;
        let candidates = &s.restart;
        let mut verdicts: Vec<Option<std::result::Result<Manifest, String>>> =
            vec![None; candidates.len()];
        let mut check = |i: usize| -> bool {
            let v = verdicts[i].get_or_insert_with(|| verify(&dir, candidates[i], rank));
            if let Err(why) = v {
                eprintln!("kumi: rank {rank}: {why}; trying an older checkpoint");
                *v = Err(String::new());
                return false;
            }
            v.is_ok()
        };
        let none = candidates.len() as u64;
        let mut from = 0usize;
        let chosen = loop {
            // Each rank proposes the first candidate from `from` on that it
            // can use; the oldest proposal is the only one all may agree on.
            let mine = (from..candidates.len())
                .find(|&i| check(i))
                .map_or(none, |i| i as u64);
            let mut agreed = [mine];
            self.world
                .allreduce_in_place(&mut agreed, &crate::Op::max())?;
            if agreed[0] == none {
                break None;
            }
            let i = agreed[0] as usize;
            let mut all = [u8::from(check(i))];
            self.world.allreduce_in_place(&mut all, &crate::Op::min())?;
            if all[0] == 1 {
                break Some(i);
            }
            from = i + 1;
        };
        self.restored = true;
        let Some(i) = chosen else {
            return Err(failed(format!(
                "no checkpoint in {} verifies on every rank (epochs tried: {candidates:?})",
                dir.display()
            )));
        };
        let epoch = candidates[i];
        let m = verdicts[i]
            .take()
            .and_then(|v| v.ok())
            .expect("verified above");
        let path = dir.join(ck::epoch_dir(epoch)).join(ck::part_file(rank).0);
        let mut file = File::open(&path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
        file.seek(SeekFrom::Start(ck::PART_HEADER_BYTES as u64))?;
        let mut reader = Reader {
            file: io::BufReader::with_capacity(1 << 20, file),
            left: m.parts[rank as usize].len,
        };
        let outcome = read(&mut reader).map_err(|e| format!("{}: {e}", path.display())).and_then(|()| {
            match reader.left {
                0 => Ok(()),
                n => Err(format!(
                    "{}: the program read its state and left {n} bytes unread: it reads less than it wrote",
                    path.display()
                )),
            }
        });
        // Every rank learns whether every rank could read its state.
        let mut ok = [u8::from(outcome.is_ok())];
        self.world.allreduce_in_place(&mut ok, &crate::Op::min())?;
        match (outcome, ok[0]) {
            (Err(why), _) => Err(failed(why)),
            (Ok(()), 0) => Err(failed(format!(
                "another rank could not read its state of checkpoint {epoch}"
            ))),
            (Ok(()), _) => {
                if rank == 0 && i > 0 {
                    eprintln!("kumi: resumed from checkpoint {epoch} (newer ones did not verify)");
                }
                Ok(Some(epoch))
            }
        }
    }
}

/// Writes this rank's part of `epoch` durably: `rank-<r>.tmp`, flushed,
/// renamed. Returns the state's length and CRC-32C.
fn write_part(
    edir: &Path,
    epoch: u64,
    rank: u32,
    size: u32,
    write: impl FnOnce(&mut Writer) -> io::Result<()>,
) -> io::Result<(u64, u32)> {
    let (name, tmp) = ck::part_file(rank);
    let tmp = edir.join(tmp);
    // This rank's file of the spare (a retired checkpoint), overwritten in
    // place, if there is one; else a new file. Either way it is cut to its
    // new length before it is flushed.
    let spare = edir.parent().map(|d| d.join(ck::SPARE).join(&name));
    let file = match spare.map(|f| fs::rename(f, &tmp)) {
        Some(Ok(())) => fs::OpenOptions::new().write(true).open(&tmp)?,
        _ => File::create(&tmp)?,
    };
    let mut w = Writer {
        file: BufWriter::with_capacity(1 << 20, file),
        len: 0,
        crc: 0,
    };
    // A placeholder header; the real one, with the length, once it is known.
    w.file.write_all(&[0u8; ck::PART_HEADER_BYTES])?;
    write(&mut w)?;
    let mut file = w.file.into_inner().map_err(|e| e.into_error())?;
    file.set_len(ck::PART_HEADER_BYTES as u64 + w.len)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(
        &PartHeader {
            epoch,
            rank,
            size,
            len: w.len,
        }
        .encode(),
    )?;
    file.sync_all()?;
    fs::rename(&tmp, edir.join(name))?;
    Ok((w.len, w.crc))
}

/// Verifies this rank's part of `epoch` completely; a sentence naming the
/// file says what is wrong.
fn verify(dir: &Path, epoch: u64, rank: u32) -> std::result::Result<Manifest, String> {
    let edir = dir.join(ck::epoch_dir(epoch));
    let mpath = edir.join(ck::MANIFEST);
    let m = fs::read(&mpath)
        .map_err(|e| e.to_string())
        .and_then(|b| Manifest::decode(&b))
        .map_err(|why| format!("checkpoint {}: {why}", mpath.display()))?;
    let path = edir.join(ck::part_file(rank).0);
    let at = |why: String| format!("checkpoint part {}: {why}", path.display());
    let mut file = File::open(&path).map_err(|e| at(e.to_string()))?;
    let len = file.metadata().map_err(|e| at(e.to_string()))?.len();
    let mut header = [0u8; ck::PART_HEADER_BYTES];
    let got = read_up_to(&mut file, &mut header).map_err(|e| at(e.to_string()))?;
    ck::check_part(&m, rank, len, &header[..got], None).map_err(at)?;
    let mut crc = 0u32;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| at(e.to_string()))?;
        if n == 0 {
            break;
        }
        crc = ck::crc(crc, &buf[..n]);
    }
    ck::check_part(&m, rank, len, &header, Some(crc)).map_err(at)?;
    Ok(m)
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}
