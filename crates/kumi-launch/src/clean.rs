//! `kumi clean`: remove what dead jobs left in `/dev/shm`.
//!
//! `kumi run` itself leaves nothing (memfd, abstract socket). Named segments exist
//! only for ranks started without kumi's launcher, and one survives when every
//! process of its job was killed before unlinking it. A segment records its owners
//! as (pid, start time) pairs; the start time makes a recycled pid harmless. The
//! rule is conservative:
//!
//! * a segment is removed only if *every* recorded owner is gone;
//! * a file with our prefix that cannot be read as a segment is removed only if it
//!   is older than [`UNREADABLE_AGE`], because a segment being created right now is
//!   unreadable for a moment (its header is written after the file exists);
//! * only files of this user's prefix (`kumi-<uid>-`) are looked at.
//!
//! [`scan`] decides; [`apply`] acts; the caller prints the [`Item`]s.

use kumi_transport::shm::{named_path_prefix, owner_alive, Segment};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where named segments live.
pub const SHM_DIR: &str = "/dev/shm";
/// Age after which an unreadable file with our prefix counts as a leftover.
pub const UNREADABLE_AGE: Duration = Duration::from_secs(60);

/// What to do with one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Remove it: a segment whose owners are all gone.
    RemoveDead {
        /// Job id read from the segment.
        job: String,
        /// Pids of its (gone) owners.
        owners: Vec<u32>,
    },
    /// Remove it: unreadable and old.
    RemoveUnreadable {
        /// Why it could not be read.
        error: String,
    },
    /// Keep it: an owner is alive.
    KeepLive {
        /// Job id.
        job: String,
        /// A live owner.
        pid: u32,
    },
    /// Keep it: unreadable but recent (may be being created).
    KeepRecent {
        /// Why it could not be read.
        error: String,
    },
}

/// One file and what happened to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The file.
    pub path: PathBuf,
    /// The decision.
    pub action: Action,
    /// `Some(Ok)` removed, `Some(Err)` removal failed, `None` not attempted.
    pub removed: Option<Result<(), String>>,
}

impl Item {
    /// Whether the decision is to remove.
    pub fn to_remove(&self) -> bool {
        matches!(
            self.action,
            Action::RemoveDead { .. } | Action::RemoveUnreadable { .. }
        )
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        let verb = match (&self.removed, self.to_remove()) {
            (_, false) => "kept",
            (None, true) => "would remove",
            (Some(Ok(())), true) => "removed",
            (Some(Err(_)), true) => "cannot remove",
        };
        write!(f, "{verb} {path}")?;
        match &self.action {
            Action::RemoveDead { job, owners } => {
                let pids: Vec<String> = owners.iter().map(u32::to_string).collect();
                write!(f, " (job {job}; owners gone: pid {})", pids.join(", "))?
            }
            Action::RemoveUnreadable { error } => {
                write!(f, " (not a readable segment: {error}; older than 1 minute)")?
            }
            Action::KeepLive { job, pid } => write!(f, " (job {job}; owner pid {pid} is alive)")?,
            Action::KeepRecent { error } => write!(
                f,
                " (not a readable segment: {error}; younger than 1 minute, may be in creation)"
            )?,
        }
        if let Some(Err(e)) = &self.removed {
            write!(f, ": {e}")?;
        }
        Ok(())
    }
}

/// Decides about every file in `dir` whose name starts with `prefix`.
pub fn scan(dir: &Path, prefix: &str, now: SystemTime) -> std::io::Result<Vec<Item>> {
    let mut items = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let action = match Segment::inspect_named(&path.to_string_lossy()) {
            Ok(info) => match info
                .owners
                .iter()
                .find(|&&(pid, start)| owner_alive(pid, start))
            {
                Some(&(pid, _)) => Action::KeepLive { job: info.job, pid },
                None => Action::RemoveDead {
                    job: info.job,
                    owners: info.owners.iter().map(|o| o.0).collect(),
                },
            },
            Err(e) => {
                let age = std::fs::symlink_metadata(&path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| now.duration_since(t).ok())
                    .unwrap_or(Duration::ZERO);
                if age > UNREADABLE_AGE {
                    Action::RemoveUnreadable {
                        error: e.to_string(),
                    }
                } else {
                    Action::KeepRecent {
                        error: e.to_string(),
                    }
                }
            }
        };
        items.push(Item {
            path,
            action,
            removed: None,
        });
    }
    Ok(items)
}

/// Removes the files `scan` decided to remove.
pub fn apply(items: &mut [Item]) {
    for item in items.iter_mut().filter(|i| i.to_remove()) {
        item.removed = Some(std::fs::remove_file(&item.path).map_err(|e| e.to_string()));
    }
}

/// Scans this user's named segments in [`SHM_DIR`] and, unless `dry_run`, removes
/// the leftovers.
pub fn clean(dry_run: bool) -> std::io::Result<Vec<Item>> {
    let mut items = scan(Path::new(SHM_DIR), &named_path_prefix(), SystemTime::now())?;
    if !dry_run {
        apply(&mut items);
    }
    Ok(items)
}

/// The last line: how many were removed and kept.
pub fn summary(items: &[Item], dry_run: bool) -> String {
    let removed = items
        .iter()
        .filter(|i| matches!(i.removed, Some(Ok(()))))
        .count();
    let failed = items
        .iter()
        .filter(|i| matches!(i.removed, Some(Err(_))))
        .count();
    let to_remove = items.iter().filter(|i| i.to_remove()).count();
    let kept = items.len() - to_remove;
    if items.is_empty() {
        "nothing to clean".to_string()
    } else if dry_run {
        format!("would remove {to_remove}, keep {kept}")
    } else if failed > 0 {
        format!("removed {removed}, kept {kept}, failed to remove {failed}")
    } else {
        format!("removed {removed}, kept {kept}")
    }
}
