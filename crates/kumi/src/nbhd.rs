//! Communicators of the ranks that share a directory: MPICH's
//! `MPIX_COMM_TYPE_NEIGHBORHOOD` split with the `nbhd_common_dirname` hint,
//! which programs use to find the ranks that can read each other's files
//! (one node's local disk, one file system mounted on some nodes).
//!
//! "Share" is what the file system says, not what a path looks like: each
//! rank makes a marker file in the directory, and the ranks that see the
//! same markers form one group. A path names different directories on
//! hosts that mount different things there, and the same directory under
//! two names (symbolic links, other mount points) on one host.

use crate::{Comm, Result};
use std::collections::hash_map::{DefaultHasher, RandomState};
use std::hash::{BuildHasher, Hash, Hasher};
use std::panic::Location;
use std::path::Path;

impl Comm {
    /// Splits the communicator by the directory `dir` names on each rank:
    /// the ranks that see one another's files in it form a communicator,
    /// ordered by `key` (ties by rank). Every rank gets `None` when the ranks
    /// name different paths or some name none (a mistake MPICH refuses the
    /// same way), and a rank for which `dir` is not a directory it can write
    /// gets `None`.
    /// Collective: every member must call it. A marker file
    /// (`.kumi-nbhd-*`) lives in the directory for the length of the call.
    #[track_caller]
    pub fn split_by_directory(&self, dir: Option<&Path>, key: i32) -> Result<Option<Comm>> {
        let at = Location::caller();
        let mut h = DefaultHasher::new();
        dir.hash(&mut h);
        // Rank 0's nonce names the markers of this split (with the context:
        // two communicators may split into one directory at once).
        let nonce = RandomState::new().hash_one(self.rank());
        let mut mine = h.finish().to_le_bytes().to_vec();
        mine.extend_from_slice(&nonce.to_le_bytes());
        let all = self.allgather_bytes(&mine, at)?;
        let same = all.iter().all(|c| c.get(..8) == mine.get(..8));
        let nonce = all[0].get(8..16).unwrap_or_default();
        let prefix = format!(".kumi-nbhd-{}-{}-", self.ctx(), hex(nonce));
        let dir = dir.filter(|_| same);
        let marker = dir.map(|d| d.join(format!("{prefix}{}", self.rank())));
        let made = marker.as_ref().is_some_and(|m| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(m)
                .is_ok()
        });
        // Every marker is in place before anyone looks.
        self.barrier_at(at)?;
        let color = match dir {
            Some(d) if made => lowest_seen(d, &prefix, self.size()),
            _ => None,
        };
        // Everyone has looked before any marker goes.
        self.barrier_at(at)?;
        if let (true, Some(m)) = (made, &marker) {
            let _ = std::fs::remove_file(m);
        }
        // Seeing no marker at all (its own vanished) leaves a rank out.
        self.split(color, key)
    }
}

/// The lowest rank whose marker (`prefix` and a rank below `size`) is in
/// `dir`, as this rank sees it.
fn lowest_seen(dir: &Path, prefix: &str, size: usize) -> Option<u32> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            let r: u32 = name.to_str()?.strip_prefix(prefix)?.parse().ok()?;
            ((r as usize) < size).then_some(r)
        })
        .min()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
