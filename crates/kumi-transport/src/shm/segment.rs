//! The per-host segment (skeleton with the agreed interface).
use kumi_core::call::Call;
use std::io;
use std::os::fd::OwnedFd;

/// Sizes of the shared-memory transport, read from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShmConfig {
    /// Bytes of payload space in each ring (power of two). `KUMI_SHM_RING_BYTES`.
    pub ring_bytes: usize,
}

impl ShmConfig {
    /// Reads `KUMI_SHM_RING_BYTES`; an invalid value is an error naming it.
    pub fn from_env() -> Result<ShmConfig, String> {
        todo!()
    }
}

/// One job's shared segment on one host, mapped into this process.
pub struct Segment {
    _priv: (),
}

/// What `kumi clean` needs to know of a named segment.
#[derive(Clone, Debug)]
pub struct SegmentInfo {
    /// Job id written at creation.
    pub job: String,
    /// (pid, process start time) of the creator and of every rank that attached.
    pub owners: Vec<(u32, u64)>,
}

/// The block of one local rank in the segment.
pub struct RankBlock {
    _priv: (),
}

impl Segment {
    /// Creates an anonymous segment (memfd) for `local_size` ranks; the fd is
    /// handed to the ranks, which map it with [`Segment::from_fd`].
    pub fn create_memfd(job: &str, local_size: usize, cfg: &ShmConfig) -> io::Result<(Segment, OwnedFd)> {
        let _ = (job, local_size, cfg);
        todo!()
    }
    /// Maps a segment from an inherited fd and checks its header.
    pub fn from_fd(fd: OwnedFd, local_size: usize) -> io::Result<Segment> {
        let _ = (fd, local_size);
        todo!()
    }
    /// Number of local ranks.
    pub fn local_size(&self) -> usize {
        todo!()
    }
    /// The block of local rank `i`.
    pub fn rank_block(&self, i: usize) -> &RankBlock {
        let _ = i;
        todo!()
    }
}

impl RankBlock {
    /// The call the rank is in now.
    pub fn call(&self) -> Call {
        todo!()
    }
    /// Publishes the call this rank is in (one relaxed store).
    pub fn set_call(&self, c: Call) {
        let _ = c;
        todo!()
    }
}
