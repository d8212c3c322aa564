//! Coordinated checkpoints: their layout on disk, the commit decision, which
//! checkpoint a restart may use, and which ones to delete. Pure: the caller
//! reads and writes the files and passes bytes and names in.
//!
//! A checkpoint directory holds one directory per epoch, `ckpt-<epoch>/`,
//! with one part per rank (`rank-<r>`: a [`PartHeader`] then the rank's
//! state) and a `MANIFEST` ([`Manifest`]). The protocol is a two-phase commit
//! with rank 0 as coordinator:
//! 1. rank 0 picks the epoch ([`next_epoch`]: one past every epoch present,
//!    complete or not, so a half-written directory is never reused) and
//!    creates its directory;
//! 2. every rank writes `rank-<r>.tmp`, flushes it to disk, renames it to
//!    `rank-<r>` and votes ([`Vote`]: its length and CRC-32C, or why it failed);
//! 3. rank 0 turns the votes into a manifest ([`commit`]); only if every
//!    rank succeeded does it write `MANIFEST.tmp`, flush it, rename it to
//!    `MANIFEST` and flush the directory: **that rename is the commit point**;
//! 4. then, and only then, older epochs beyond the last K go ([`retire`]).
//!
//! So a crash at any step leaves the previous complete checkpoint intact, and
//! an epoch without a readable manifest is never used. On restart, a part is
//! used only if its header names its epoch, rank and job size, its length is
//! the manifest's and its CRC-32C matches ([`check_part`]); the manifest
//! carries a CRC of its own text, so a torn or edited manifest is refused too.

use crate::config::{ConfigError, Env};
use std::fmt::Write as _;

/// The format of manifests and parts this kumi writes and reads.
pub const FORMAT: u32 = 1;
/// The bytes a part starts with.
pub const PART_MAGIC: [u8; 8] = *b"KUMICKPT";
/// Length of a [`PartHeader`] on disk.
pub const PART_HEADER_BYTES: usize = 40;
/// The manifest's file name inside an epoch's directory.
pub const MANIFEST: &str = "MANIFEST";
/// The directory (beside the epochs', not one of them) where the newest
/// retired checkpoint waits to have its part files overwritten by the
/// next checkpoint's: rewriting a file's blocks is cheaper for a file system
/// than freeing them and allocating new ones.
pub const SPARE: &str = "spare";
/// Length of an encoded [`Vote`].
pub const VOTE_BYTES: usize = 320;
const HOST_MAX: usize = 64;
const WHY_MAX: usize = VOTE_BYTES - 16 - HOST_MAX - 2;

/// The directory of epoch `epoch`.
pub fn epoch_dir(epoch: u64) -> String {
    format!("ckpt-{epoch}")
}

/// The epoch an entry of the checkpoint directory belongs to, if it is one.
pub fn parse_epoch_dir(name: &str) -> Option<u64> {
    let n = name.strip_prefix("ckpt-")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// The file of rank `rank`'s part, and its name while it is written.
pub fn part_file(rank: u32) -> (String, String) {
    (format!("rank-{rank}"), format!("rank-{rank}.tmp"))
}

/// CRC-32C (Castagnoli) of `bytes`, continuing from `crc` (0 to start).
pub fn crc(crc: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, bytes)
}

/// The fixed header of a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartHeader {
    /// The checkpoint's epoch.
    pub epoch: u64,
    /// The rank that wrote it.
    pub rank: u32,
    /// The job's size.
    pub size: u32,
    /// Bytes of state after the header.
    pub len: u64,
}

impl PartHeader {
    /// The header's bytes: magic, format, rank, epoch, size, 4 zero bytes,
    /// length; little-endian.
    pub fn encode(&self) -> [u8; PART_HEADER_BYTES] {
        let mut b = [0u8; PART_HEADER_BYTES];
        b[..8].copy_from_slice(&PART_MAGIC);
        b[8..12].copy_from_slice(&FORMAT.to_le_bytes());
        b[12..16].copy_from_slice(&self.rank.to_le_bytes());
        b[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        b[24..28].copy_from_slice(&self.size.to_le_bytes());
        b[32..40].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Checks that `bytes` is the header of `want`.
    pub fn check(bytes: &[u8], want: &PartHeader) -> Result<(), String> {
        if bytes.len() < PART_HEADER_BYTES {
            return Err(format!(
                "truncated: {} bytes, shorter than the {PART_HEADER_BYTES}-byte header",
                bytes.len()
            ));
        }
        if bytes[..8] != PART_MAGIC {
            return Err("not a kumi checkpoint part (wrong magic bytes)".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let format = u32_at(8);
        if format != FORMAT {
            return Err(format!(
                "written in checkpoint format {format}; this kumi reads format {FORMAT}"
            ));
        }
        let got = (u32_at(12), u64_at(16), u32_at(24));
        if got != (want.rank, want.epoch, want.size) {
            return Err(format!(
                "its header says rank {} of epoch {} in a job of {}, not rank {} of epoch {} in a job of {}",
                got.0, got.1, got.2, want.rank, want.epoch, want.size
            ));
        }
        if u64_at(32) != want.len {
            return Err(format!(
                "its header says {} bytes of state, the manifest {}",
                u64_at(32),
                want.len
            ));
        }
        Ok(())
    }
}

/// Checks a part against its manifest entry, given its file size, header
/// bytes and the CRC-32C of everything after the header (`None`: not read
/// yet). A sentence says what is wrong.
pub fn check_part(
    m: &Manifest,
    rank: u32,
    file_len: u64,
    header: &[u8],
    data_crc: Option<u32>,
) -> Result<(), String> {
    let part = m
        .parts
        .get(rank as usize)
        .ok_or_else(|| format!("the manifest has no part for rank {rank}"))?;
    let want = PART_HEADER_BYTES as u64 + part.len;
    if file_len != want {
        return Err(format!("{} bytes where the manifest says {want}", file_len));
    }
    PartHeader::check(
        header,
        &PartHeader {
            epoch: m.epoch,
            rank,
            size: m.size,
            len: part.len,
        },
    )?;
    match data_crc {
        Some(c) if c != part.crc => Err(format!(
            "checksum mismatch (CRC-32C {c:08x}, the manifest says {:08x}): the data changed after it was written",
            part.crc
        )),
        _ => Ok(()),
    }
}

/// One rank's answer to "is your part written and durable?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Vote {
    /// Written, flushed and renamed into place.
    Done {
        /// Bytes of state (without the header).
        len: u64,
        /// CRC-32C of the state.
        crc: u32,
        /// The rank's host.
        host: String,
    },
    /// It could not: why (one line).
    Failed(String),
}

impl Vote {
    /// Fixed-length bytes, so that rank 0 gathers the votes in one call.
    /// The host and the reason are cut to what fits (on a character boundary).
    pub fn encode(&self) -> [u8; VOTE_BYTES] {
        let mut b = [0u8; VOTE_BYTES];
        let cut = |s: &str, max: usize| -> Vec<u8> {
            let mut end = s.len().min(max);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.as_bytes()[..end].to_vec()
        };
        match self {
            Vote::Done { len, crc, host } => {
                b[0] = 1;
                b[4..8].copy_from_slice(&crc.to_le_bytes());
                b[8..16].copy_from_slice(&len.to_le_bytes());
                let h = cut(host, HOST_MAX);
                b[16] = h.len() as u8;
                b[17..17 + h.len()].copy_from_slice(&h);
            }
            Vote::Failed(why) => {
                b[0] = 2;
                let w = cut(why, WHY_MAX);
                b[16..18].copy_from_slice(&(w.len() as u16).to_le_bytes());
                b[18..18 + w.len()].copy_from_slice(&w);
            }
        }
        b
    }

    /// The vote in `b`; anything malformed is a failed vote saying so.
    pub fn decode(b: &[u8]) -> Vote {
        if b.len() != VOTE_BYTES {
            return Vote::Failed(format!("a vote of {} bytes, not {VOTE_BYTES}", b.len()));
        }
        match b[0] {
            1 if (b[16] as usize) <= HOST_MAX => Vote::Done {
                crc: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
                len: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
                host: String::from_utf8_lossy(&b[17..17 + b[16] as usize]).into_owned(),
            },
            2 => {
                let n = (u16::from_le_bytes([b[16], b[17]]) as usize).min(WHY_MAX);
                Vote::Failed(String::from_utf8_lossy(&b[18..18 + n]).into_owned())
            }
            _ => Vote::Failed("a malformed vote".into()),
        }
    }
}

/// One rank's part as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// Bytes of state.
    pub len: u64,
    /// CRC-32C of the state.
    pub crc: u32,
    /// The host that wrote it.
    pub host: String,
}

/// What identifies the job a checkpoint belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobIdentity {
    /// The program(s), as `kumi run` resolved them (`a : b` for several).
    pub program: String,
    /// Rank 0's arguments.
    pub args: Vec<String>,
    /// Ranks.
    pub size: u32,
}

/// A complete checkpoint's description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Its epoch.
    pub epoch: u64,
    /// The kumi version that wrote it.
    pub kumi: String,
    /// Ranks.
    pub size: u32,
    /// The program(s).
    pub program: String,
    /// Rank 0's arguments.
    pub args: Vec<String>,
    /// When it was committed (seconds since 1970).
    pub time: u64,
    /// One part per rank, by rank.
    pub parts: Vec<Part>,
}

/// Bytes that cannot stand in a manifest line as they are: `%XX`.
fn escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b <= b' ' || b >= 0x7f || b == b'%' {
            let _ = write!(out, "%{b:02X}");
        } else {
            out.push(b as char);
        }
    }
    if out.is_empty() {
        out.push('%');
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    if s == "%" {
        return Some(String::new());
    }
    let (mut out, b) = (Vec::new(), s.as_bytes());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl Manifest {
    /// The manifest's text: one `key value` per line, every value escaped,
    /// and last a line with the CRC-32C of everything before it.
    pub fn encode(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "kumi-checkpoint {FORMAT}");
        let _ = writeln!(t, "kumi {}", escape(&self.kumi));
        let _ = writeln!(t, "epoch {}", self.epoch);
        let _ = writeln!(t, "size {}", self.size);
        let _ = writeln!(t, "time {}", self.time);
        let _ = writeln!(t, "program {}", escape(&self.program));
        for a in &self.args {
            let _ = writeln!(t, "arg {}", escape(a));
        }
        for (r, p) in self.parts.iter().enumerate() {
            let _ = writeln!(t, "part {r} {} {:08x} {}", p.len, p.crc, escape(&p.host));
        }
        let sum = crc(0, t.as_bytes());
        let _ = writeln!(t, "end {sum:08x}");
        t
    }

    /// Parses a manifest; a sentence says what is wrong with a bad one.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, String> {
        let text =
            std::str::from_utf8(bytes).map_err(|_| "not text (invalid UTF-8)".to_string())?;
        let body_end = text
            .rfind("end ")
            .filter(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n')
            .ok_or("incomplete: no end line (a torn write?)")?;
        let end = text[body_end + 4..]
            .strip_suffix('\n')
            .filter(|e| e.len() == 8)
            .ok_or("incomplete: a cut end line (a torn write?)")?;
        let want =
            u32::from_str_radix(end, 16).map_err(|_| format!("a malformed end line: {end:?}"))?;
        if crc(0, &text.as_bytes()[..body_end]) != want {
            return Err("checksum mismatch: the manifest was changed or torn".into());
        }
        let mut m = Manifest {
            epoch: 0,
            kumi: String::new(),
            size: 0,
            program: String::new(),
            args: Vec::new(),
            time: 0,
            parts: Vec::new(),
        };
        let mut seen_format = false;
        for (n, line) in text[..body_end].lines().enumerate() {
            let bad = || format!("line {}: cannot read {line:?}", n + 1);
            let (key, value) = line.split_once(' ').ok_or_else(bad)?;
            let num = |v: &str| v.parse::<u64>().map_err(|_| bad());
            match key {
                "kumi-checkpoint" => {
                    let f = num(value)?;
                    if f != u64::from(FORMAT) {
                        return Err(format!(
                            "written in checkpoint format {f}; this kumi reads format {FORMAT}"
                        ));
                    }
                    seen_format = true;
                }
                "kumi" => m.kumi = unescape(value).ok_or_else(bad)?,
                "epoch" => m.epoch = num(value)?,
                "size" => m.size = u32::try_from(num(value)?).map_err(|_| bad())?,
                "time" => m.time = num(value)?,
                "program" => m.program = unescape(value).ok_or_else(bad)?,
                "arg" => m.args.push(unescape(value).ok_or_else(bad)?),
                "part" => {
                    let f: Vec<&str> = value.split(' ').collect();
                    let [r, len, c, host] = f[..] else {
                        return Err(bad());
                    };
                    if num(r)? != m.parts.len() as u64 {
                        return Err(format!("line {}: parts out of order", n + 1));
                    }
                    m.parts.push(Part {
                        len: num(len)?,
                        crc: u32::from_str_radix(c, 16).map_err(|_| bad())?,
                        host: unescape(host).ok_or_else(bad)?,
                    });
                }
                _ => return Err(bad()),
            }
        }
        if !seen_format {
            return Err("no format line: not a kumi manifest".into());
        }
        if m.parts.len() as u64 != u64::from(m.size) || m.size == 0 {
            return Err(format!(
                "{} parts for a job of {} ranks",
                m.parts.len(),
                m.size
            ));
        }
        Ok(m)
    }

    /// Why this checkpoint cannot resume `job` under kumi `kumi`, if it cannot.
    pub fn refusal(&self, job: &JobIdentity, kumi: &str) -> Option<String> {
        if self.size != job.size {
            return Some(format!(
                "it was taken by a job of {} ranks; this job has {}",
                self.size, job.size
            ));
        }
        if self.program != job.program {
            return Some(format!(
                "it was taken by another program ({}; this job runs {})",
                self.program, job.program
            ));
        }
        if major_minor(&self.kumi) != major_minor(kumi) {
            return Some(format!(
                "it was written by kumi {}; this is kumi {kumi}, whose state layout may differ",
                self.kumi
            ));
        }
        None
    }

    /// The hosts of the parts, each once, in rank order.
    pub fn hosts(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for p in &self.parts {
            if !out.contains(&p.host.as_str()) {
                out.push(&p.host);
            }
        }
        out
    }
}

fn major_minor(v: &str) -> &str {
    match v.match_indices('.').nth(1) {
        Some((i, _)) => &v[..i],
        None => v,
    }
}

/// The commit decision (step 3): the manifest if every rank voted `Done`,
/// else one line naming the first rank that failed and why.
pub fn commit(
    epoch: u64,
    job: &JobIdentity,
    kumi: &str,
    time: u64,
    votes: &[Vote],
) -> Result<Manifest, String> {
    if votes.len() != job.size as usize {
        return Err(format!("{} votes for {} ranks", votes.len(), job.size));
    }
    let mut parts = Vec::with_capacity(votes.len());
    for (r, v) in votes.iter().enumerate() {
        match v {
            Vote::Done { len, crc, host } => parts.push(Part {
                len: *len,
                crc: *crc,
                host: host.clone(),
            }),
            Vote::Failed(why) => return Err(format!("rank {r} could not write its part: {why}")),
        }
    }
    Ok(Manifest {
        epoch,
        kumi: kumi.to_string(),
        size: job.size,
        program: job.program.clone(),
        args: job.args.clone(),
        time,
        parts,
    })
}

/// What a checkpoint directory holds, epoch by epoch: the manifest's bytes
/// (`None`: no manifest, an incomplete epoch).
pub type Listing = Vec<(u64, Option<Vec<u8>>)>;

/// The epoch the next checkpoint gets: one past every epoch present.
pub fn next_epoch(listing: &Listing) -> u64 {
    listing.iter().map(|(e, _)| e + 1).max().unwrap_or(1)
}

/// The checkpoints a restart of `job` may use, newest first, and one line for
/// each epoch passed over (naming its manifest and why). Epochs without a
/// manifest are incomplete and skipped silently unless newer than every
/// complete one (then they are named: a checkpoint was being written).
/// An incompatible checkpoint is a refusal, not a fallback: the newest
/// complete one decides ([`Restart::Refused`]).
pub fn restart_candidates(listing: &Listing, job: &JobIdentity, kumi: &str) -> Restart {
    let mut sorted: Vec<&(u64, Option<Vec<u8>>)> = listing.iter().collect();
    sorted.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut usable = Vec::new();
    let mut passed = Vec::new();
    for (epoch, manifest) in sorted {
        let name = format!("{}/{MANIFEST}", epoch_dir(*epoch));
        let Some(bytes) = manifest else {
            if usable.is_empty() {
                passed.push(format!("{}: incomplete (no {MANIFEST})", epoch_dir(*epoch)));
            }
            continue;
        };
        match Manifest::decode(bytes) {
            Err(why) => passed.push(format!("{name}: {why}")),
            Ok(m) if m.epoch != *epoch => passed.push(format!("{name}: it says epoch {}", m.epoch)),
            Ok(m) => {
                if usable.is_empty() {
                    if let Some(why) = m.refusal(job, kumi) {
                        return Restart::Refused { epoch: *epoch, why };
                    }
                }
                if m.refusal(job, kumi).is_none() {
                    usable.push(m);
                }
            }
        }
    }
    Restart::From { usable, passed }
}

/// The answer of [`restart_candidates`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Resume from the first usable one (newest first; empty: none exists).
    From {
        /// Manifests that decode and suit the job, newest first.
        usable: Vec<Manifest>,
        /// Epochs passed over, one line each.
        passed: Vec<String>,
    },
    /// The newest complete checkpoint belongs to another job.
    Refused {
        /// Its epoch.
        epoch: u64,
        /// Why, as a sentence.
        why: String,
    },
}

/// The epochs to delete once `committed` is complete (step 4): every
/// incomplete epoch older than it, and complete ones beyond the newest `keep`
/// (at least 1: the one just committed stays).
pub fn retire(listing: &Listing, committed: u64, keep: usize) -> Vec<u64> {
    let mut complete: Vec<u64> = listing
        .iter()
        .filter(|(e, m)| m.is_some() && *e <= committed)
        .map(|(e, _)| *e)
        .collect();
    complete.sort_unstable_by_key(|&e| std::cmp::Reverse(e));
    let mut out: Vec<u64> = complete.into_iter().skip(keep.max(1)).collect();
    out.extend(
        listing
            .iter()
            .filter(|(e, m)| m.is_none() && *e < committed)
            .map(|(e, _)| *e),
    );
    out.sort_unstable();
    out
}

/// How a rank checkpoints: `KUMI_CKPT_*`, set by `kumi run
/// --checkpoint-dir` (or by hand, for a job started another way).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `KUMI_CKPT_DIR`: where checkpoints go.
    pub dir: String,
    /// `KUMI_CKPT_EVERY`: seconds between checkpoints when the program asks
    /// whether one is due.
    pub every_s: f64,
    /// `KUMI_CKPT_KEEP`: complete checkpoints kept.
    pub keep: usize,
    /// `KUMI_CKPT_RESTART`: the epochs a restart may resume, newest first
    /// (empty: a fresh start).
    pub restart: Vec<u64>,
    /// `KUMI_CKPT_PROGRAM`: the program(s) as `kumi run` names them in the
    /// manifest (unset: this rank's executable).
    pub program: Option<String>,
}

/// Default of `KUMI_CKPT_EVERY`, seconds.
pub const DEFAULT_EVERY_S: f64 = 600.0;
/// Default of `KUMI_CKPT_KEEP`.
pub const DEFAULT_KEEP: usize = 2;

impl Settings {
    /// The settings in `env`, or `None` when `KUMI_CKPT_DIR` is not set.
    pub fn parse(env: &Env) -> Result<Option<Settings>, ConfigError> {
        let Some(dir) = env.get("KUMI_CKPT_DIR").filter(|d| !d.is_empty()) else {
            return Ok(None);
        };
        let every_s = match env.get("KUMI_CKPT_EVERY") {
            None => DEFAULT_EVERY_S,
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && (0.0..=1e9).contains(s))
                .ok_or_else(|| env.err("KUMI_CKPT_EVERY", "a number of seconds from 0 to 1e9"))?,
        };
        let keep = env
            .num("KUMI_CKPT_KEEP", 1, 1 << 20)?
            .map_or(DEFAULT_KEEP, |k| k as usize);
        let restart = match env.get("KUMI_CKPT_RESTART").map(str::trim) {
            None | Some("") => Vec::new(),
            Some(v) => v
                .split(',')
                .map(|e| e.trim().parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| {
                    env.err(
                        "KUMI_CKPT_RESTART",
                        "epochs separated by commas, newest first",
                    )
                })?,
        };
        Ok(Some(Settings {
            dir: dir.to_string(),
            every_s,
            keep,
            restart,
            program: env.get("KUMI_CKPT_PROGRAM").map(str::to_string),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobIdentity {
        JobIdentity {
            program: "/bin/jacobi".into(),
            args: vec!["-n".into(), "a b%c".into(), String::new()],
            size: 3,
        }
    }

    fn done(len: u64, crc: u32) -> Vote {
        Vote::Done {
            len,
            crc,
            host: "node1".into(),
        }
    }

    fn manifest(epoch: u64) -> Manifest {
        commit(
            epoch,
            &job(),
            "0.1.0",
            1700000000,
            &[done(8, 1), done(0, 2), done(1 << 40, 3)],
        )
        .unwrap()
    }

    #[test]
    fn a_manifest_reads_back_as_written() {
        let m = manifest(4);
        assert_eq!(Manifest::decode(m.encode().as_bytes()).unwrap(), m);
        assert_eq!(m.hosts(), ["node1"]);
    }

    #[test]
    fn every_torn_or_changed_manifest_is_refused() {
        let text = manifest(4).encode();
        for cut in 0..text.len() {
            assert!(
                Manifest::decode(&text.as_bytes()[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        for i in 0..text.len() {
            let mut b = text.clone().into_bytes();
            b[i] ^= 0x04;
            assert!(Manifest::decode(&b).is_err(), "bit flipped at {i}");
        }
    }

    #[test]
    fn a_commit_needs_every_rank() {
        let err = commit(
            2,
            &job(),
            "0.1.0",
            0,
            &[done(1, 1), Vote::Failed("disk full".into()), done(1, 1)],
        )
        .unwrap_err();
        assert_eq!(err, "rank 1 could not write its part: disk full");
        assert!(commit(2, &job(), "0.1.0", 0, &[done(1, 1)]).is_err());
    }

    #[test]
    fn votes_survive_their_encoding_and_garbage_is_a_failed_vote() {
        for v in [
            done(7, 0xdead_beef),
            Vote::Failed("é".repeat(400)),
            Vote::Done {
                len: 1,
                crc: 2,
                host: "h".repeat(100),
            },
        ] {
            let back = Vote::decode(&v.encode());
            match (&v, &back) {
                (Vote::Failed(a), Vote::Failed(b)) => {
                    assert!(a.starts_with(b.as_str()) && !b.is_empty())
                }
                (Vote::Done { host: a, .. }, Vote::Done { host: b, .. }) => {
                    assert!(a.starts_with(b.as_str()) && b.len() <= HOST_MAX)
                }
                _ => panic!("{v:?} came back as {back:?}"),
            }
        }
        assert!(matches!(Vote::decode(&[9u8; VOTE_BYTES]), Vote::Failed(_)));
        assert!(matches!(Vote::decode(&[1u8; 3]), Vote::Failed(_)));
    }

    #[test]
    fn a_part_is_checked_against_its_manifest() {
        let m = manifest(5);
        let h = PartHeader {
            epoch: 5,
            rank: 0,
            size: 3,
            len: 8,
        }
        .encode();
        assert_eq!(check_part(&m, 0, 48, &h, Some(1)), Ok(()));
        assert!(check_part(&m, 0, 47, &h, Some(1))
            .unwrap_err()
            .contains("47 bytes"));
        assert!(check_part(&m, 0, 48, &h, Some(7))
            .unwrap_err()
            .contains("checksum mismatch"));
        assert!(check_part(&m, 1, 40, &h, None)
            .unwrap_err()
            .contains("rank 0 of epoch 5"));
        assert!(check_part(&m, 3, 48, &h, None)
            .unwrap_err()
            .contains("no part for rank 3"));
        let mut other = h;
        other[0] = b'X';
        assert!(check_part(&m, 0, 48, &other, None)
            .unwrap_err()
            .contains("magic"));
    }

    fn listing(entries: &[(u64, Option<Manifest>)]) -> Listing {
        entries
            .iter()
            .map(|(e, m)| (*e, m.as_ref().map(|m| m.encode().into_bytes())))
            .collect()
    }

    #[test]
    fn a_restart_takes_the_newest_complete_checkpoint_and_names_what_it_passed() {
        let mut torn = manifest(6).encode().into_bytes();
        torn.truncate(20);
        let mut l = listing(&[(3, Some(manifest(3))), (5, Some(manifest(5))), (7, None)]);
        l.push((6, Some(torn)));
        let Restart::From { usable, passed } = restart_candidates(&l, &job(), "0.1.3") else {
            panic!("refused");
        };
        assert_eq!(usable.iter().map(|m| m.epoch).collect::<Vec<_>>(), [5, 3]);
        assert_eq!(passed.len(), 2, "{passed:?}");
        assert!(passed[0].starts_with("ckpt-7: incomplete"));
        assert!(passed[1].starts_with("ckpt-6/MANIFEST: incomplete: no end line"));
        assert_eq!(next_epoch(&l), 8);
    }

    #[test]
    fn a_checkpoint_of_another_job_is_refused_with_a_reason() {
        let l = listing(&[(2, Some(manifest(2)))]);
        let refused = |j: JobIdentity, k: &str| match restart_candidates(&l, &j, k) {
            Restart::Refused { epoch: 2, why } => why,
            r => panic!("{r:?}"),
        };
        assert!(refused(JobIdentity { size: 4, ..job() }, "0.1.0")
            .contains("job of 3 ranks; this job has 4"));
        assert!(refused(
            JobIdentity {
                program: "/bin/other".into(),
                ..job()
            },
            "0.1.0"
        )
        .contains("another program"));
        assert!(refused(job(), "0.2.0").contains("kumi 0.1.0"));
        let moved = listing(&[(2, Some(manifest(9)))]);
        let Restart::From { usable, passed } = restart_candidates(&moved, &job(), "0.1.0") else {
            panic!()
        };
        assert!(usable.is_empty() && passed[0].contains("it says epoch 9"));
    }

    #[test]
    fn retiring_keeps_the_newest_k_complete_and_drops_older_incomplete() {
        let l = listing(&[
            (1, Some(manifest(1))),
            (2, None),
            (3, Some(manifest(3))),
            (4, Some(manifest(4))),
            (5, None),
        ]);
        assert_eq!(retire(&l, 4, 2), [1, 2]);
        assert_eq!(retire(&l, 4, 1), [1, 2, 3]);
        assert_eq!(retire(&l, 4, 0), [1, 2, 3], "the one just committed stays");
        assert_eq!(
            retire(&l, 3, 5),
            [2],
            "a newer epoch being written is not touched"
        );
    }

    #[test]
    fn epoch_directories_are_recognised_exactly() {
        assert_eq!(parse_epoch_dir("ckpt-12"), Some(12));
        for n in [
            "ckpt-",
            "ckpt-1a",
            "ckpt--1",
            "x-1",
            "ckpt-99999999999999999999999",
        ] {
            assert_eq!(parse_epoch_dir(n), None, "{n}");
        }
    }

    #[test]
    fn the_settings_come_from_the_environment_checked() {
        let env = |v: &[(&str, &str)]| Env::from_vars(v.iter().copied());
        assert_eq!(Settings::parse(&env(&[])).unwrap(), None);
        let s = Settings::parse(&env(&[
            ("KUMI_CKPT_DIR", "/c"),
            ("KUMI_CKPT_RESTART", "5, 3"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (s.every_s, s.keep, s.restart),
            (DEFAULT_EVERY_S, DEFAULT_KEEP, vec![5, 3])
        );
        for bad in [
            ("KUMI_CKPT_EVERY", "-1"),
            ("KUMI_CKPT_KEEP", "0"),
            ("KUMI_CKPT_RESTART", "x"),
        ] {
            let e = Settings::parse(&env(&[("KUMI_CKPT_DIR", "/c"), bad])).unwrap_err();
            assert_eq!(e.name, bad.0);
        }
    }
}
