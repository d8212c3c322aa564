//! The per-host segment: one shared mapping per job per host.
//!
//! ```text
//! 0                 header page (4096 bytes): magic "KUMISHM1", version,
//!                   local_size, ring_bytes, total size, job id (64 bytes),
//!                   creator pid + start time, the host's single-copy choice
//! 4096              local_size x RankBlock (128 bytes each, 64-aligned)
//! senders           local_size sender sets, each `senders::words` words
//!                   padded to a cache line (see `senders`)
//! rings             local_size x local_size rings, [src][dst] row-major, each
//!                   RING_CONTROL_BYTES (tail line, producer line) + ring_bytes
//! areas             coll_area::AREAS collective areas, each an owner line and
//!                   local_size slots (see `coll_area`)
//! ```
//!
//! [`Segment::total_bytes`] computes the size; opening a segment checks magic,
//! version and sizes against the file's length before touching anything else, so
//! a short or foreign file is an error, never an out-of-bounds access.
//!
//! Two ways to share it:
//! - **memfd** (the launcher's way): [`Segment::create_memfd`] makes an anonymous
//!   file, sealed against growing and shrinking (so a mapping can never lose its
//!   pages under a rank), and the launcher passes its descriptor to the ranks in
//!   `KUMI_SHM_FD`. Nothing exists in the filesystem, so nothing can be left behind.
//! - **named** (ranks started by a foreign launcher): `/dev/shm/kumi-<uid>-<job>`,
//!   created with `O_EXCL` and mode 0600 by the host's first rank, opened by the
//!   others, and unlinked as soon as all have mapped it. `kumi clean` finds
//!   leftovers by their prefix and checks their owners with
//!   [`Segment::inspect_named`] and [`owner_alive`].
//!
//! Everything in the header is written once by the creator before the magic is
//! published (Release); openers read the magic with Acquire and only then the rest.

use crate::cma;
use crate::shm::coll_area::{self, CollArea};
use crate::shm::ring::{RECORD_ALIGN, RING_CONTROL_BYTES};
use crate::shm::senders;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use kumi_core::call::Call;
use kumi_core::config::SingleCopy;
use rustix::fs::{Mode, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// First bytes of every segment.
pub const MAGIC: [u8; 8] = *b"KUMISHM1";
/// Layout version; bumped on any change of the layout (2: collective areas,
/// 4: sender sets, 5: the single-copy choice, 6: the progress bell).
pub const VERSION: u32 = 6;
/// Bytes of the header page.
pub const HEADER_PAGE: usize = 4096;
/// Longest job id a segment records.
pub const JOB_MAX: usize = 64;
/// Bytes of one [`RankBlock`].
pub const RANK_BLOCK_BYTES: usize = 128;
/// Most local ranks one segment serves.
pub const MAX_LOCAL_SIZE: usize = 4096;
/// Smallest ring (`KUMI_SHM_RING_BYTES`, checked by the configuration).
pub const MIN_RING: usize = kumi_core::config::RING_BYTES.0;
/// Largest ring.
pub const MAX_RING: usize = kumi_core::config::RING_BYTES.1;

/// Whether `n` bytes can be a ring: a power of two from [`MIN_RING`] to
/// [`MAX_RING`].
fn ring_size_ok(n: usize) -> bool {
    n.is_power_of_two() && (MIN_RING..=MAX_RING).contains(&n)
}
/// Smallest default ring (and the default of [`ShmConfig::default`]).
pub const DEFAULT_RING: usize = 65536;
/// Largest default ring.
pub const DEFAULT_RING_MAX: usize = 1 << 20;
/// What the default rings of one host may take together (sparse: a page
/// costs memory only once a message has passed through it).
pub const DEFAULT_RINGS_BUDGET: usize = 32 << 20;

/// What a host's segment is made with: the rings' size, and what its
/// creator decided for every rank of the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShmConfig {
    /// Bytes of payload space in each ring (power of two). `KUMI_SHM_RING_BYTES`.
    pub ring_bytes: usize,
    /// The ranks of the host move long messages by single copy
    /// (`KUMI_SINGLE_COPY` as the creator resolved it: [`ShmConfig::for_host`]).
    /// One decision in the segment, so the ranks cannot disagree (their
    /// collectives choose their ways by it).
    pub single_copy: bool,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            ring_bytes: DEFAULT_RING,
            single_copy: true,
        }
    }
}

impl ShmConfig {
    /// The default for `local_size` ranks: `DEFAULT_RINGS_BUDGET` over
    /// the `local_size`^2 rings, as a power of two from [`DEFAULT_RING`] to
    /// `DEFAULT_RING_MAX`. Two ranks get 1 MiB rings: with 64 KiB, eager
    /// 8 KiB messages filled a ring after a handful and streamed at half
    /// the rate (docs/BENCHMARKS.md); 16 ranks get 128 KiB.
    pub fn default_for(local_size: usize) -> ShmConfig {
        let n = local_size.max(1);
        let share = DEFAULT_RINGS_BUDGET / n.saturating_mul(n);
        let pow2 = if share == 0 {
            0
        } else {
            1usize << (usize::BITS - 1 - share.leading_zeros())
        };
        ShmConfig {
            ring_bytes: pow2.clamp(DEFAULT_RING, DEFAULT_RING_MAX),
            ..ShmConfig::default()
        }
    }

    /// The rings of `local_size` ranks: `ring_bytes` as configured
    /// (`kumi_core::config::Shm::ring_bytes`, checked there), else
    /// [`ShmConfig::default_for`]. `None` if a configured size is not a
    /// power of two from [`MIN_RING`] to [`MAX_RING`].
    pub fn for_ranks(local_size: usize, ring_bytes: Option<usize>) -> Option<ShmConfig> {
        match ring_bytes {
            None => Some(ShmConfig::default_for(local_size)),
            Some(n) => ring_size_ok(n).then_some(ShmConfig {
                ring_bytes: n,
                ..ShmConfig::default()
            }),
        }
    }

    /// What the creator of a host's segment makes it with: the rings of
    /// [`ShmConfig::for_ranks`], and `KUMI_SINGLE_COPY` resolved for the
    /// host's `local_size` ranks ([`cma::host_allows`]: `auto` measures,
    /// but not for a rank alone, which has nobody to copy from). `None` as
    /// `for_ranks`.
    pub fn for_host(
        local_size: usize,
        ring_bytes: Option<usize>,
        single_copy: SingleCopy,
    ) -> Option<ShmConfig> {
        let rings = Self::for_ranks(local_size, ring_bytes)?;
        Some(ShmConfig {
            single_copy: local_size > 1 && cma::host_allows(single_copy),
            ..rings
        })
    }

    fn check(&self) -> io::Result<()> {
        if ring_size_ok(self.ring_bytes) {
            return Ok(());
        }
        Err(invalid_input(&format!(
            "a ring of {} bytes: must be a power of two from {MIN_RING} to {MAX_RING}",
            self.ring_bytes
        )))
    }
}

/// The header page's fields. Written once by the creator, `magic` last.
#[repr(C)]
struct SegHeader {
    /// [`MAGIC`] as a little-endian word; 0 until the creator has written the rest.
    magic: AtomicU64,
    version: u32,
    local_size: u32,
    ring_bytes: u64,
    total_bytes: u64,
    creator_pid: u32,
    job_len: u32,
    creator_start: u64,
    job: [u8; JOB_MAX],
    /// [`ShmConfig::single_copy`]: 1 or 0.
    single_copy: u32,
}

const _: () = assert!(std::mem::size_of::<SegHeader>() <= HEADER_PAGE);

/// One job's shared segment on one host, mapped into this process.
pub struct Segment {
    /// `map`'s start, copied here: every access to the segment starts from it.
    base: NonNull<u8>,
    len: usize,
    /// The mapping, shared with the progress bells handed out
    /// ([`Segment::progress_bell`]), which may outlive the segment.
    map: Arc<Mapping>,
    local_size: usize,
    ring_bytes: usize,
    job: String,
    /// (offset of the first collective area, bytes of one area, payload
    /// half), fixed with the sizes: collectives ask for their area several
    /// times per call (a lazily made value cost a call and a check each).
    areas: (usize, usize, usize),
}

/// A shared mapping, unmapped when the last holder lets it go.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; its holders access it only
// through atomics and the protocols built on them.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` offers nothing but the drop.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` is the mapping `map` created; its last holder is
        // going, and every reference into it borrows a holder (the rings a
        // transport builds live in the same struct as its segment; a bell
        // holds the mapping itself).
        unsafe {
            let _ = rustix::mm::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

// SAFETY: a `Segment` is a mapping owned by this value; everything shared through
// it is accessed through atomics or the ring protocol, whichever thread holds it.
unsafe impl Send for Segment {}
// SAFETY: `&Segment` exposes only atomics (`RankBlock`) and read-only header data.
unsafe impl Sync for Segment {}

/// What `kumi clean` needs to know of a named segment.
#[derive(Clone, Debug)]
pub struct SegmentInfo {
    /// Job id written at creation.
    pub job: String,
    /// (pid, process start time) of the creator and of every rank that attached.
    pub owners: Vec<(u32, u64)>,
}

impl SegmentInfo {
    /// Whether any owner still runs (if none does, the segment is a leftover).
    pub fn any_owner_alive(&self) -> bool {
        self.owners
            .iter()
            .any(|&(pid, start)| owner_alive(pid, start))
    }
}

/// The block of one local rank in the segment: two cache lines.
///
/// Line 0 is written by *other* ranks (they ring the doorbell) and read by the
/// owner; line 1 is written by the owner only and read by others and by the
/// launcher. Keeping them apart means a sender ringing never steals the line the
/// owner keeps writing, and vice versa.
#[repr(C, align(64))]
pub struct RankBlock {
    /// Futex word: bumped by a sender that found the owner asleep.
    doorbell: AtomicU32,
    /// 1 while the owner is asleep or about to sleep (written by the owner).
    sleeping: AtomicU32,
    /// The owner's progress bell (`crate::bell`): others ring it; the owner
    /// writes it only when what it leaves outstanding changes.
    progress: AtomicU32,
    _line0: [u8; 52],
    /// The [`Call`] the owner is in (advisory).
    call: AtomicU32,
    /// Owner's pid, valid once `state` is not 0.
    pid: AtomicU32,
    /// Owner's process start time (clock ticks since boot), with `pid`.
    start_time: AtomicU64,
    /// 0 empty, 1 attached, 2 finalized.
    state: AtomicU32,
    /// The CPU the owner last ran on while waiting (`u32::MAX`: not known yet).
    cpu: AtomicU32,
    /// What the owner waits for, when kumi bound the ranks to cores
    /// ([`AWAITS_NOTHING`], [`AWAITS_OTHER`], or a local rank plus one).
    awaits: AtomicU32,
    _line1: [u8; 36],
}

const _: () = assert!(std::mem::size_of::<RankBlock>() == RANK_BLOCK_BYTES);

/// [`RankBlock::awaits`]: the rank runs, or is in no wait that published
/// (only ranks that kumi bound to cores because their host runs more ranks
/// than it has cores publish their waits).
pub const AWAITS_NOTHING: u32 = 0;
/// [`RankBlock::awaits`]: the rank waits for something other than a message
/// of one local rank (any source, a rank of another host, a collective, a
/// set of requests): it may need its core at any moment.
pub const AWAITS_OTHER: u32 = u32::MAX;

/// [`RankBlock::state`]: nobody attached yet.
pub const STATE_EMPTY: u32 = 0;
/// [`RankBlock::state`]: a rank has attached.
pub const STATE_ATTACHED: u32 = 1;
/// [`RankBlock::state`]: the rank has finalized.
pub const STATE_FINALIZED: u32 = 2;

fn invalid_input(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

fn invalid_data(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn check_job(job: &str) -> io::Result<()> {
    if job.is_empty() || job.len() > JOB_MAX {
        return Err(invalid_input(&format!(
            "job id {job:?} must be 1 to {JOB_MAX} bytes"
        )));
    }
    if job.bytes().any(|b| b == b'/' || b == 0) {
        return Err(invalid_input(&format!(
            "job id {job:?} must not contain '/' or NUL"
        )));
    }
    Ok(())
}

fn check_local_size(local_size: usize) -> io::Result<()> {
    if local_size == 0 || local_size > MAX_LOCAL_SIZE {
        return Err(invalid_input(&format!(
            "local size {local_size} must be 1 to {MAX_LOCAL_SIZE}"
        )));
    }
    Ok(())
}

impl Segment {
    /// Bytes of a segment for `local_size` ranks and rings of `ring_bytes`, or
    /// `None` if that overflows.
    pub fn total_bytes(local_size: usize, ring_bytes: usize) -> Option<usize> {
        Self::areas_offset(local_size, ring_bytes)?.checked_add(coll_area::total_bytes(local_size)?)
    }

    /// The collective areas' geometry for these sizes, which
    /// [`Segment::total_bytes`] accepted (the caller checked).
    fn areas_of(local_size: usize, ring_bytes: usize) -> (usize, usize, usize) {
        (
            Self::areas_offset(local_size, ring_bytes).unwrap_or(0),
            coll_area::area_bytes(local_size).unwrap_or(0),
            coll_area::payload_bytes(local_size),
        )
    }

    /// Where the collective areas start: after the rings (64-aligned, as ring
    /// sizes are multiples of 64).
    fn areas_offset(local_size: usize, ring_bytes: usize) -> Option<usize> {
        let rings = local_size
            .checked_mul(local_size)?
            .checked_mul(ring_bytes.checked_add(RING_CONTROL_BYTES)?)?;
        Self::rings_offset(local_size)?.checked_add(rings)
    }

    fn rings_offset(local_size: usize) -> Option<usize> {
        let sets = local_size.checked_mul(Self::sender_set_bytes(local_size))?;
        Self::senders_offset(local_size)?.checked_add(sets)
    }

    fn senders_offset(local_size: usize) -> Option<usize> {
        let blocks = local_size.checked_mul(RANK_BLOCK_BYTES)?;
        // Already 64-aligned (128-byte blocks after a 4096-byte page).
        HEADER_PAGE.checked_add(blocks)
    }

    /// Bytes of one rank's sender set: its words, padded to a cache line so
    /// that announcing to one rank never touches another's line.
    fn sender_set_bytes(local_size: usize) -> usize {
        (senders::words(local_size) * 8).next_multiple_of(64)
    }

    /// Creates an anonymous segment (memfd) for `local_size` ranks; the fd is
    /// handed to the ranks, which map it with [`Segment::from_fd`]. The fd is
    /// close-on-exec (the launcher clears that for its children) and sealed
    /// against resizing.
    pub fn create_memfd(
        job: &str,
        local_size: usize,
        cfg: &ShmConfig,
    ) -> io::Result<(Segment, OwnedFd)> {
        check_job(job)?;
        check_local_size(local_size)?;
        cfg.check()?;
        let fd = rustix::fs::memfd_create(
            format!("kumi-{job}"),
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )?;
        let seg = Self::init(&fd, job, local_size, cfg)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        Ok((seg, fd))
    }

    /// Maps a segment from an inherited fd and checks its header. The fd may be
    /// closed afterwards (this consumes it); the mapping stays.
    pub fn from_fd(fd: OwnedFd, local_size: usize) -> io::Result<Segment> {
        Self::open_fd(&fd, Some(local_size), true)
    }

    /// The name of the named segment of `job`, without `/dev/shm/`.
    pub fn named(job: &str) -> String {
        format!("{}{job}", named_path_prefix())
    }

    /// Creates `/dev/shm/kumi-<uid>-<job>` (exclusive, mode 0600) for `local_size`
    /// ranks. Fails with `AlreadyExists` if it exists.
    pub fn create_named(job: &str, local_size: usize, cfg: &ShmConfig) -> io::Result<Segment> {
        check_job(job)?;
        check_local_size(local_size)?;
        cfg.check()?;
        let name = Self::named(job);
        let flags =
            rustix::shm::OFlags::CREATE | rustix::shm::OFlags::EXCL | rustix::shm::OFlags::RDWR;
        let fd = rustix::shm::open(name.as_str(), flags, Mode::RUSR | Mode::WUSR)?;
        Self::init(&fd, job, local_size, cfg).inspect_err(|_| {
            let _ = rustix::shm::unlink(name.as_str());
        })
    }

    /// Opens the named segment of `job`, waiting up to two seconds for its creator
    /// to finish initialising it.
    pub fn open_named(job: &str, local_size: usize) -> io::Result<Segment> {
        check_job(job)?;
        let name = Self::named(job);
        let fd = rustix::shm::open(name.as_str(), rustix::shm::OFlags::RDWR, Mode::empty())?;
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match Self::open_fd(&fd, Some(local_size), true) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(invalid_data(format!("/dev/shm/{name}: {e} after 2 s")))
                }
                r => return r,
            }
        }
    }

    /// Removes the named segment of `job` (mappings stay valid).
    pub fn unlink_named(job: &str) -> io::Result<()> {
        check_job(job)?;
        Ok(rustix::shm::unlink(Self::named(job).as_str())?)
    }

    /// Reads the job id and owners of a named segment, given as its name
    /// (`kumi-<uid>-<job>`) or its path under `/dev/shm`. Maps it read-only.
    pub fn inspect_named(name_or_path: &str) -> io::Result<SegmentInfo> {
        let name = name_or_path
            .strip_prefix("/dev/shm/")
            .unwrap_or(name_or_path);
        if name.is_empty() || name.contains('/') {
            return Err(invalid_input(&format!(
                "{name_or_path:?} is not a segment in /dev/shm"
            )));
        }
        let fd = rustix::shm::open(name, rustix::shm::OFlags::RDONLY, Mode::empty())?;
        let seg = Self::open_fd(&fd, None, false)?;
        let mut owners = vec![(seg.header().creator_pid, seg.header().creator_start)];
        for i in 0..seg.local_size {
            let b = seg.rank_block(i);
            if b.state() != STATE_EMPTY {
                owners.push((b.pid(), b.start_time()));
            }
        }
        Ok(SegmentInfo {
            job: seg.job.clone(),
            owners,
        })
    }

    /// Sizes the file, maps it and writes the header.
    fn init(fd: &OwnedFd, job: &str, local_size: usize, cfg: &ShmConfig) -> io::Result<Segment> {
        let ring_bytes = cfg.ring_bytes;
        let len = Self::total_bytes(local_size, ring_bytes)
            .filter(|&n| isize::try_from(n).is_ok())
            .ok_or_else(|| {
                invalid_input(&format!(
                    "{local_size} ranks x rings of {ring_bytes} bytes is too large"
                ))
            })?;
        rustix::fs::ftruncate(fd, len as u64)?;
        let base = map(fd, len, true)?;
        let seg = Segment {
            base,
            len,
            map: Arc::new(Mapping { base, len }),
            local_size,
            ring_bytes,
            job: job.to_string(),
            areas: Self::areas_of(local_size, ring_bytes),
        };
        let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
        let mut job_bytes = [0u8; JOB_MAX];
        job_bytes[..job.len()].copy_from_slice(job.as_bytes());
        let h = SegHeader {
            magic: AtomicU64::new(0),
            version: VERSION,
            local_size: local_size as u32,
            ring_bytes: ring_bytes as u64,
            total_bytes: len as u64,
            creator_pid: pid,
            job_len: job.len() as u32,
            creator_start: process_start_time(pid).unwrap_or(0),
            job: job_bytes,
            single_copy: cfg.single_copy as u32,
        };
        // SAFETY: the mapping is at least HEADER_PAGE bytes, page-aligned, freshly
        // created (zero) and not yet visible to anyone who would read it before
        // the magic below is published.
        unsafe { seg.base.as_ptr().cast::<SegHeader>().write(h) };
        // Release: openers that read the magic with Acquire see the fields above.
        seg.header()
            .magic
            .store(u64::from_le_bytes(MAGIC), Ordering::Release);
        Ok(seg)
    }

    /// Maps an existing segment and validates it. `expect_local`: the local size
    /// the caller was told (None: take the header's). An uninitialised segment
    /// (zero magic, or shorter than a page while its creator sizes it) is
    /// `WouldBlock`, so a named opener can wait for the creator.
    fn open_fd(fd: &OwnedFd, expect_local: Option<usize>, writable: bool) -> io::Result<Segment> {
        let file_len = rustix::fs::fstat(fd)?.st_size;
        let file_len = usize::try_from(file_len)
            .map_err(|_| invalid_data(format!("segment size {file_len}")))?;
        if file_len < HEADER_PAGE {
            let msg = format!("shared-memory segment is truncated: {file_len} bytes, shorter than its {HEADER_PAGE}-byte header");
            return Err(if file_len == 0 {
                io::Error::new(io::ErrorKind::WouldBlock, msg)
            } else {
                invalid_data(msg)
            });
        }
        let base = map(fd, file_len, writable)?;
        let mut seg = Segment {
            base,
            len: file_len,
            map: Arc::new(Mapping {
                base,
                len: file_len,
            }),
            local_size: 0,
            ring_bytes: 0,
            job: String::new(),
            areas: (0, 0, 0),
        };
        let h = seg.header();
        // Acquire: pairs with the creator's Release store of the magic.
        let magic = h.magic.load(Ordering::Acquire);
        if magic == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "shared-memory segment not initialised yet",
            ));
        }
        if magic.to_le_bytes() != MAGIC {
            return Err(invalid_data(format!(
                "not a kumi shared-memory segment: magic {:?}, expected {:?}",
                String::from_utf8_lossy(&magic.to_le_bytes()),
                "KUMISHM1"
            )));
        }
        if h.version != VERSION {
            return Err(invalid_data(format!(
                "shared-memory segment version {} (this kumi reads {VERSION})",
                h.version
            )));
        }
        let local_size = h.local_size as usize;
        if let Some(expect) = expect_local {
            if local_size != expect {
                return Err(invalid_data(format!(
                    "shared-memory segment is for {local_size} local ranks, expected {expect}"
                )));
            }
        }
        check_local_size(local_size)
            .map_err(|e| invalid_data(format!("shared-memory segment header: {e}")))?;
        let ring_bytes = usize::try_from(h.ring_bytes).unwrap_or(0);
        if !ring_size_ok(ring_bytes) {
            return Err(invalid_data(format!(
                "shared-memory segment header: ring size {}",
                h.ring_bytes
            )));
        }
        let want = Self::total_bytes(local_size, ring_bytes);
        if want != Some(file_len) || h.total_bytes != file_len as u64 {
            return Err(invalid_data(format!(
                "shared-memory segment is {file_len} bytes; its header ({local_size} ranks, rings of {ring_bytes} \
                 bytes) needs {}",
                want.map_or("more than the address space".to_string(), |n| n.to_string())
            )));
        }
        if h.job_len as usize > JOB_MAX {
            return Err(invalid_data(format!(
                "shared-memory segment header: job id of {} bytes",
                h.job_len
            )));
        }
        if h.single_copy > 1 {
            return Err(invalid_data(format!(
                "shared-memory segment header: single-copy choice {}",
                h.single_copy
            )));
        }
        let job = std::str::from_utf8(&h.job[..h.job_len as usize])
            .map_err(|_| invalid_data("shared-memory segment header: job id is not UTF-8".into()))?
            .to_string();
        seg.local_size = local_size;
        seg.ring_bytes = ring_bytes;
        seg.areas = Self::areas_of(local_size, ring_bytes);
        seg.job = job;
        Ok(seg)
    }

    fn header(&self) -> &SegHeader {
        // SAFETY: the mapping is at least HEADER_PAGE bytes and page-aligned; the
        // non-atomic fields are read only after the magic was acquired (or, for
        // the creator, after writing them) and never change afterwards.
        unsafe { &*self.base.as_ptr().cast::<SegHeader>() }
    }

    /// Number of local ranks.
    pub fn local_size(&self) -> usize {
        self.local_size
    }

    /// Bytes of record space in each ring.
    pub fn ring_bytes(&self) -> usize {
        self.ring_bytes
    }

    /// The job id recorded at creation.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// Whether the host's ranks move long messages by single copy, as the
    /// creator decided ([`ShmConfig::single_copy`]).
    pub fn single_copy(&self) -> bool {
        self.header().single_copy == 1
    }

    /// The block of local rank `i`. Panics if `i >= local_size()`. Inline:
    /// every collective's publish asks it for the members' "asleep" flags.
    #[inline]
    pub fn rank_block(&self, i: usize) -> &RankBlock {
        assert!(
            i < self.local_size,
            "local rank {i} out of {}",
            self.local_size
        );
        // SAFETY: in bounds of the validated mapping (blocks follow the header
        // page), 64-aligned, and `RankBlock` is all atomics and padding.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(HEADER_PAGE + i * RANK_BLOCK_BYTES)
                .cast::<RankBlock>()
        }
    }

    /// Local rank `i`'s progress bell, which keeps the mapping alive for as
    /// long as it exists (the progress thread sleeps on it without holding
    /// the engine). Panics if `i` is out of range.
    pub fn progress_bell(&self, i: usize) -> crate::bell::Bell {
        let word = self.rank_block(i).progress();
        // SAFETY: the word is in the mapping, which `map` keeps.
        unsafe { crate::bell::Bell::within(word, self.map.clone()) }
    }

    /// The sender set of local rank `i` (see `senders`). Panics if `i` is out
    /// of range.
    pub(crate) fn sender_set(&self, i: usize) -> &[AtomicU64] {
        assert!(
            i < self.local_size,
            "local rank {i} out of {}",
            self.local_size
        );
        let n = self.local_size;
        let off = HEADER_PAGE + n * RANK_BLOCK_BYTES + i * Self::sender_set_bytes(n);
        // SAFETY: in bounds of the validated mapping (the sets follow the rank
        // blocks, `total_bytes` counts them), 64-aligned, and only ever
        // accessed as atomic words.
        unsafe {
            std::slice::from_raw_parts(
                self.base.as_ptr().add(off).cast::<AtomicU64>(),
                senders::words(n),
            )
        }
    }

    /// Start of ring `[src][dst]`: its control lines, then its data. Panics if
    /// either index is out of range.
    pub(crate) fn ring_base(&self, src: usize, dst: usize) -> *mut u8 {
        assert!(src < self.local_size && dst < self.local_size);
        let n = self.local_size;
        let off = HEADER_PAGE
            + n * RANK_BLOCK_BYTES
            + n * Self::sender_set_bytes(n)
            + (src * n + dst) * (RING_CONTROL_BYTES + self.ring_bytes);
        debug_assert!(
            off & (RECORD_ALIGN - 1) == 0 && off + RING_CONTROL_BYTES + self.ring_bytes <= self.len
        );
        // SAFETY: in bounds of the mapping, by the size validated at open.
        unsafe { self.base.as_ptr().add(off) }
    }
}

impl Segment {
    /// Collective area `k` (`k < coll_area::AREAS`). Panics if out of range.
    #[inline]
    pub fn coll_area(&self, k: usize) -> CollArea<'_> {
        assert!(k < coll_area::AREAS, "collective area {k}");
        let (first, area, payload) = self.areas;
        let off = first + k * area;
        debug_assert!(off.is_multiple_of(64) && off + area <= self.len);
        CollArea {
            seg: self,
            // SAFETY: in bounds of the mapping, whose size `total_bytes` (areas
            // included) was checked at creation or open.
            base: unsafe { NonNull::new_unchecked(self.base.as_ptr().add(off)) },
            local_size: self.local_size,
            payload,
        }
    }
}

fn map(fd: &OwnedFd, len: usize, writable: bool) -> io::Result<NonNull<u8>> {
    let prot = if writable {
        ProtFlags::READ | ProtFlags::WRITE
    } else {
        ProtFlags::READ
    };
    // SAFETY: a fresh shared mapping chosen by the kernel (null hint), so it
    // aliases nothing of ours; the fd is valid for the call.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            MapFlags::SHARED,
            fd.as_fd(),
            0,
        )?
    };
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))
}

impl RankBlock {
    /// The call the rank is in now.
    pub fn call(&self) -> Call {
        Call::from_code(self.call.load(Ordering::Relaxed))
    }

    /// Publishes the call this rank is in (one relaxed store). Relaxed suffices:
    /// the value is advisory, read by the launcher for reports only; nothing is
    /// published through it, and a reader that sees an older call is merely
    /// a moment late. Inline: every blocking call that waits sets it twice,
    /// and out of line it was a call through the global offset table each.
    #[inline]
    pub fn set_call(&self, c: Call) {
        self.call.store(c as u32, Ordering::Relaxed);
    }

    /// The CPU the owner last published (`u32::MAX` if none).
    pub fn cpu(&self) -> u32 {
        self.cpu.load(Ordering::Relaxed)
    }

    /// Publishes the CPU the owner runs on. Relaxed suffices: the value is
    /// advisory (it only decides whether a waiting neighbour yields), and a
    /// stale one costs time, never correctness.
    pub fn set_cpu(&self, cpu: u32) {
        self.cpu.store(cpu, Ordering::Relaxed);
    }

    /// What the owner waits for: [`AWAITS_NOTHING`], [`AWAITS_OTHER`], or
    /// local rank `k` as `k + 1`.
    #[inline]
    pub fn awaits(&self) -> u32 {
        self.awaits.load(Ordering::Relaxed)
    }

    /// Publishes what the owner waits for (see [`RankBlock::awaits`]).
    /// Relaxed suffices: the value is advisory, like the CPU: it decides
    /// whether a waiting rank of the same core keeps the core or yields it,
    /// and a stale value costs one yield too many or a bounded spin too long,
    /// never a message (the waits themselves look at the rings).
    #[inline]
    pub fn set_awaits(&self, v: u32) {
        self.awaits.store(v, Ordering::Relaxed);
    }

    /// Records the owner and marks the block attached. Release: a reader that
    /// sees `state` (Acquire) sees the pid and start time.
    pub fn attach(&self, pid: u32, start_time: u64) {
        self.cpu.store(u32::MAX, Ordering::Relaxed);
        self.pid.store(pid, Ordering::Relaxed);
        self.start_time.store(start_time, Ordering::Relaxed);
        self.state.store(STATE_ATTACHED, Ordering::Release);
    }

    /// Marks the rank finalized.
    pub fn set_finalized(&self) {
        self.state.store(STATE_FINALIZED, Ordering::Release);
    }

    /// [`STATE_EMPTY`], [`STATE_ATTACHED`] or [`STATE_FINALIZED`]. Acquire: pairs
    /// with `attach`.
    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    /// The owner's pid (valid when `state()` is not empty).
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    /// The owner's process start time (valid when `state()` is not empty).
    pub fn start_time(&self) -> u64 {
        self.start_time.load(Ordering::Relaxed)
    }

    /// The doorbell futex word (senders bump it, the owner waits on it).
    pub(crate) fn doorbell(&self) -> &AtomicU32 {
        &self.doorbell
    }

    /// The owner's progress bell word (see `crate::bell`).
    pub(crate) fn progress(&self) -> &AtomicU32 {
        &self.progress
    }

    /// The owner's "I am asleep" flag.
    pub(crate) fn sleeping(&self) -> &AtomicU32 {
        &self.sleeping
    }

    /// Whether the owner sleeps on its doorbell (or is about to). Relaxed:
    /// advisory, for the same reason as [`RankBlock::awaits`].
    #[inline]
    pub fn is_asleep(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed) != 0
    }
}

/// Start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), or `None` if there is no such process. With the pid it
/// names a process uniquely: pids are reused, start times are not.
pub fn process_start_time(pid: u32) -> Option<u64> {
    stat_fields(pid).map(|(_, start)| start)
}

/// (state letter, start time) from `/proc/<pid>/stat`. The command name (field
/// 2) may contain spaces and parentheses, so fields are counted after the last
/// `)`: there field 3 (state) comes first and field 22 is the 20th.
fn stat_fields(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// Whether the process `pid` that started at `start_time` still runs. A zombie
/// (exited, not yet reaped) counts as gone. `start_time` 0 means unknown: then
/// any live process with that pid counts.
pub fn owner_alive(pid: u32, start_time: u64) -> bool {
    if pid == 0 {
        return false;
    }
    match stat_fields(pid) {
        Some((state, start)) => {
            !matches!(state, 'Z' | 'X') && (start_time == 0 || start == start_time)
        }
        None => false,
    }
}

/// `kumi-<uid>-`: the prefix of every named segment of this user in `/dev/shm`.
pub fn named_path_prefix() -> String {
    format!("kumi-{}-", rustix::process::getuid().as_raw())
}

#[cfg(test)]
mod tests {

    #[test]
    fn default_rings_shrink_with_the_number_of_ranks() {
        let ring = |n| ShmConfig::default_for(n).ring_bytes;
        assert_eq!(ring(1), 1 << 20);
        assert_eq!(ring(2), 1 << 20);
        assert_eq!(ring(4), 1 << 20);
        assert_eq!(ring(6), 512 << 10);
        assert_eq!(ring(8), 512 << 10);
        assert_eq!(ring(16), 128 << 10);
        assert_eq!(ring(64), DEFAULT_RING);
        assert_eq!(ring(MAX_LOCAL_SIZE), DEFAULT_RING);
        for n in 1..=MAX_LOCAL_SIZE {
            assert!(
                ring(n).is_power_of_two()
                    && ring(n) * n * n <= DEFAULT_RINGS_BUDGET.max(DEFAULT_RING * n * n)
            );
        }
    }

    use super::*;

    #[test]
    fn configured_rings_must_be_powers_of_two_in_range() {
        assert_eq!(
            ShmConfig::for_ranks(2, Some(65536)),
            Some(ShmConfig::default())
        );
        assert_eq!(
            ShmConfig::for_ranks(2, Some(4096)).unwrap().ring_bytes,
            4096
        );
        assert_eq!(
            ShmConfig::for_ranks(2, Some(64 << 20)).unwrap().ring_bytes,
            64 << 20
        );
        assert_eq!(
            ShmConfig::for_ranks(16, None),
            Some(ShmConfig::default_for(16))
        );
        for bad in [2048, 5000, 128 << 20, 0] {
            assert_eq!(ShmConfig::for_ranks(2, Some(bad)), None, "{bad}");
        }
    }

    #[test]
    fn own_start_time_and_liveness() {
        let me = std::process::id();
        let t = process_start_time(me).expect("own stat");
        assert!(owner_alive(me, t));
        assert!(
            !owner_alive(me, t + 1),
            "another start time is another process"
        );
        assert!(!owner_alive(0, 0));
    }

    #[test]
    fn layout_sizes() {
        // Two ranks: a control line, 256 entry lines, 128 pieces of 4 KiB
        // (a line apart) and payload halves of 128 KiB (the cap) per slot.
        let areas = 8 * (64 + 2 * (64 + 256 * 64 + 128 * (4096 + 64) + 2 * 131072));
        assert_eq!(
            Segment::total_bytes(2, 4096),
            Some(4096 + 256 + 2 * 64 + 4 * (128 + 4096) + areas)
        );
        // A sender set per rank: 65 ranks need two words, one line each.
        assert_eq!(Segment::sender_set_bytes(65), 64);
        assert_eq!(Segment::sender_set_bytes(513), 128);
        assert_eq!(Segment::total_bytes(usize::MAX / 2, 4096), None);
    }

    #[test]
    fn memfd_round_trip_header() {
        let cfg = ShmConfig {
            ring_bytes: 4096,
            ..ShmConfig::default()
        };
        let (seg, fd) = Segment::create_memfd("job-x", 3, &cfg).unwrap();
        let other = Segment::from_fd(fd.try_clone().unwrap(), 3).unwrap();
        assert_eq!(
            (other.local_size(), other.ring_bytes(), other.job()),
            (3, 4096, "job-x")
        );
        seg.rank_block(2).set_call(Call::Barrier);
        assert_eq!(other.rank_block(2).call(), Call::Barrier);
        let e = Segment::from_fd(fd, 4).err().unwrap();
        assert!(e.to_string().contains("3 local ranks"), "{e}");
        // The creator's single-copy choice reaches every mapping, either way.
        assert!(other.single_copy());
        for choice in [false, true] {
            let cfg = ShmConfig {
                single_copy: choice,
                ..cfg.clone()
            };
            let (_seg, fd) = Segment::create_memfd("job-y", 2, &cfg).unwrap();
            assert_eq!(Segment::from_fd(fd, 2).unwrap().single_copy(), choice);
        }
        assert!(Segment::create_memfd(&"j".repeat(65), 2, &cfg).is_err());
        assert!(Segment::create_memfd("a/b", 2, &cfg).is_err());
    }

    /// The areas are shared between mappings, distinct from each other and
    /// from the rings, and a claimed area keeps its owner.
    #[test]
    fn collective_areas_are_shared_and_claimed_once() {
        use crate::shm::coll_area::{claim, group_key, publish, reached, AreaMem, AREAS, DEPTH};
        let cfg = ShmConfig {
            ring_bytes: 4096,
            ..ShmConfig::default()
        };
        let (seg, fd) = Segment::create_memfd("job-a", 3, &cfg).unwrap();
        let other = Segment::from_fd(fd, 3).unwrap();
        for k in 0..AREAS {
            let (a, b) = (seg.coll_area(k), other.coll_area(k));
            assert!(claim(&a, group_key(k as u32, 1)));
            assert!(claim(&b, group_key(k as u32, 1)));
            assert!(!claim(&b, group_key(k as u32, 2)));
            // A short contribution in its entry, a longer one in its piece,
            // a long one in its half.
            let (short, long) = ([k as u8 + 1; 40], [k as u8 + 2; 6000]);
            a.write(2, 7, 40, 0, &short);
            a.write(2, 7, 100, 0, &long[..100]);
            a.write(2, 7, 6000, 0, &long);
            publish(&a, &[0, 1, 2], 2, 7, 0, true, |_| panic!("nobody sleeps"));
            assert!(reached(&b, 2, 7) && !reached(&b, 2, 8) && !reached(&b, 1, 1));
            assert_eq!(b.bytes(2, 7, 40, 0, 40), &short[..]);
            assert_eq!(b.bytes(2, 7, 100, 0, 100), &long[..100]);
            assert_eq!(b.bytes(2, 7, 6000, 0, 6000), &long[..]);
            // Collective 7 + DEPTH shares the entry, 9 the half.
            assert!(!reached(&b, 2, 7 + DEPTH as u64));
            a.write(1, 8, 8, 0, &[9; 8]);
            assert_eq!(b.bytes(1, 8, 8, 0, 8), &[9; 8]);
        }
        // Nothing spilled into another area's slots.
        assert!(!reached(&other.coll_area(0), 0, 1));
        other.rank_block(1).sleeping().store(1, Ordering::Relaxed);
        let mut rung = vec![];
        publish(&seg.coll_area(0), &[0, 1, 2], 0, 1, 0, true, |j| {
            rung.push(j)
        });
        assert_eq!(rung, [1]);
    }
}
