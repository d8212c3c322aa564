//! `kumi run`'s side of checkpoint/restart: which checkpoints a run may
//! resume, and the `KUMI_CKPT_*` variables that tell the ranks. The ranks
//! write and verify the checkpoints (`kumi::checkpoint`); the decisions are
//! `kumi_core::checkpoint`'s.

use kumi_core::checkpoint::{self as ck, JobIdentity, Listing, Restart};
use kumi_core::control::App;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The checkpoint options of a job.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Where checkpoints go (and come from on a restart).
    pub dir: PathBuf,
    /// Seconds between checkpoints (`None`: the ranks' default).
    pub every_s: Option<f64>,
    /// Complete checkpoints kept (`None`: the ranks' default).
    pub keep: Option<u32>,
}

/// Where a run starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    /// The epochs the ranks may resume, newest first (empty: the beginning).
    pub epochs: Vec<u64>,
    /// Checkpoints passed over, one line each (naming the file and why).
    pub passed: Vec<String>,
}

/// The program(s) of the job as checkpoints name them: each resolved to its
/// file (through `PATH` when it has no `/`), `a : b` for several.
pub fn program_identity(apps: &[App], cwd: &Path) -> String {
    apps.iter()
        .map(|a| {
            let p = Path::new(OsStr::from_bytes(&a.program));
            let base = a
                .wdir
                .as_ref()
                .map_or(cwd.to_path_buf(), |w| cwd.join(OsStr::from_bytes(w)));
            let found = if a.program.contains(&b'/') {
                Some(base.join(p))
            } else {
                crate::spec::find_in_path(p.as_os_str())
            };
            found
                .and_then(|f| f.canonicalize().ok())
                .unwrap_or_else(|| p.to_path_buf())
                .display()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(" : ")
}

/// The epochs in `dir` and their manifests' bytes (an unreadable manifest
/// counts as absent: that epoch is incomplete).
fn listing(dir: &Path) -> std::io::Result<Listing> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(epoch) = entry.file_name().to_str().and_then(ck::parse_epoch_dir) {
            out.push((epoch, std::fs::read(entry.path().join(ck::MANIFEST)).ok()));
        }
    }
    Ok(out)
}

/// Which checkpoints of `dir` a run of `job` may resume. An error is a
/// sentence saying why none may: the directory cannot be read, or its newest
/// complete checkpoint belongs to another job. Parts missing or of the
/// wrong length are found here; their contents are verified by the ranks.
pub fn resume(dir: &Path, job: &JobIdentity) -> Result<Resume, String> {
    let l = listing(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    match ck::restart_candidates(&l, job, env!("CARGO_PKG_VERSION")) {
        Restart::Refused { epoch, why } => Err(format!(
            "cannot resume checkpoint {epoch} of {}: {why}",
            dir.display()
        )),
        Restart::From { usable, mut passed } => {
            let mut epochs = Vec::new();
            for m in usable {
                let edir = dir.join(ck::epoch_dir(m.epoch));
                let bad = m.parts.iter().enumerate().find_map(|(r, p)| {
                    let path = edir.join(ck::part_file(r as u32).0);
                    let want = ck::PART_HEADER_BYTES as u64 + p.len;
                    match std::fs::metadata(&path) {
                        Ok(md) if md.len() == want => None,
                        Ok(md) => Some(format!(
                            "{}: {} bytes where the manifest says {want}",
                            path.display(),
                            md.len()
                        )),
                        Err(e) => Some(format!("{}: {e}", path.display())),
                    }
                });
                match bad {
                    Some(line) => passed.push(line),
                    None => epochs.push(m.epoch),
                }
            }
            for p in passed.iter_mut().filter(|p| p.starts_with("ckpt-")) {
                *p = format!("{}/{p}", dir.display());
            }
            Ok(Resume { epochs, passed })
        }
    }
}

/// The ranks' variables for `plan`, resuming `resume`.
pub fn env(plan: &Plan, resume: &Resume, program: &str) -> Vec<(String, String)> {
    let mut v = vec![
        ("KUMI_CKPT_DIR".to_string(), plan.dir.display().to_string()),
        ("KUMI_CKPT_PROGRAM".to_string(), program.to_string()),
        (
            "KUMI_CKPT_RESTART".to_string(),
            resume
                .epochs
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
    ];
    if let Some(s) = plan.every_s {
        v.push(("KUMI_CKPT_EVERY".into(), s.to_string()));
    }
    if let Some(k) = plan.keep {
        v.push(("KUMI_CKPT_KEEP".into(), k.to_string()));
    }
    v
}
