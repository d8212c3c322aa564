//! Parallel files: MPI-IO's model of one file opened together by the ranks of
//! a communicator, on a file system every rank sees (one host, or hosts that
//! mount the same directory).
//!
//! ```no_run
//! use kumi::file::{Access, File, OpenMode};
//! let universe = kumi::init()?;
//! let world = universe.world();
//! let mode = OpenMode { create: true, ..OpenMode::new(Access::WriteOnly) };
//! let mut f = File::open(&world, "/tmp/out.dat", mode)?;
//! // Each rank writes its 8 bytes at its own offset.
//! let me = world.rank() as u64;
//! f.write_at(8 * me, &me.to_le_bytes())?;
//! f.close()?;
//! # Ok::<(), kumi::Error>(())
//! ```
//!
//! Design decisions a newcomer might otherwise undo:
//! - **Independent POSIX I/O underneath.** Every rank opens the file itself and
//!   reads and writes with `pread`/`pwrite` at the offsets its view gives.
//!   The collective calls (`MPI_File_write_all`...) do the same independent
//!   I/O: correct, and free of waiting, but without the two-phase
//!   aggregation that makes many small strided accesses fast on parallel
//!   file systems (left for later, with measurements).
//! - **A view is a pure mapping** ([`View`]): the displacement, the
//!   elementary type and the file type (tiled from the displacement on) turn
//!   a position in the rank's data stream into file extents
//!   ([`View::extents`]). It is checked and tested without files.
//! - **The shared file pointer is a counter of the combining service** on
//!   the file's own communicator (a duplicate of the one it was opened on):
//!   `write_shared` is a fetch-and-add of the amount written, so concurrent
//!   callers get disjoint ranges exactly as if their calls ran one after
//!   another, served by the counter's owner even while it computes.
//! - **Atomic mode takes POSIX record locks** (open-file-description locks)
//!   over the byte span of each access, so concurrent overlapping accesses
//!   of different ranks see each other whole or not at all.
//! - **Failures are [`Error::File`]** with a [`Fault`] that names the kind
//!   (MPI-IO's error classes map one to one) and a sentence with the path.

use crate::coll::{Arrival, Combiner, Op};
use crate::comm::Comm;
use crate::datatype::Datatype;
use crate::error::{Error, Result};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

pub use crate::error::Fault;

fn fault(f: Fault, path: &str, detail: impl Into<String>) -> Error {
    Error::File {
        fault: f,
        path: path.to_string(),
        detail: detail.into(),
    }
}

/// The [`Fault`] an operating-system error is.
fn os_fault(e: &io::Error) -> Fault {
    match e.raw_os_error() {
        Some(libc::ENOENT) => Fault::NoSuchFile,
        Some(libc::EEXIST) => Fault::Exists,
        Some(libc::EACCES | libc::EPERM) => Fault::Access,
        Some(libc::ENOSPC) => Fault::NoSpace,
        Some(libc::EDQUOT) => Fault::Quota,
        Some(libc::EROFS) => Fault::ReadOnly,
        Some(libc::ENAMETOOLONG | libc::EISDIR | libc::ENOTDIR | libc::ELOOP) => Fault::BadName,
        _ => Fault::Io,
    }
}

fn os_error(path: &str, what: &str, e: io::Error) -> Error {
    fault(os_fault(&e), path, format!("{what}: {e}"))
}

/// How a file is accessed (exactly one of MPI's `MPI_MODE_RDONLY`,
/// `MPI_MODE_WRONLY`, `MPI_MODE_RDWR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads only.
    ReadOnly,
    /// Writes only.
    WriteOnly,
    /// Both.
    ReadWrite,
}

/// How [`File::open`] opens a file (MPI's `amode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenMode {
    /// Reading, writing or both.
    pub access: Access,
    /// Create the file if it does not exist.
    pub create: bool,
    /// With `create`: fail if it exists.
    pub exclusive: bool,
    /// Remove the file when it is closed.
    pub delete_on_close: bool,
    /// A promise that nobody else opens the file meanwhile (a hint; kumi
    /// does nothing different).
    pub unique_open: bool,
    /// Start every file pointer at the end of the file.
    pub append: bool,
    /// Only the shared file pointer is used (no explicit offsets, no
    /// individual pointers).
    pub sequential: bool,
}

impl OpenMode {
    /// `access` with every flag off.
    pub fn new(access: Access) -> OpenMode {
        OpenMode {
            access,
            create: false,
            exclusive: false,
            delete_on_close: false,
            unique_open: false,
            append: false,
            sequential: false,
        }
    }

    /// Why this mode is not allowed, if it is not (MPI: read-only with
    /// create or exclusive, read-write with sequential).
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.access == Access::ReadOnly && (self.create || self.exclusive) {
            return Err("a read-only file cannot be created (MPI_MODE_RDONLY with \
                        MPI_MODE_CREATE or MPI_MODE_EXCL)"
                .into());
        }
        if self.access == Access::ReadWrite && self.sequential {
            return Err("sequential access is for read-only or write-only files \
                        (MPI_MODE_RDWR with MPI_MODE_SEQUENTIAL)"
                .into());
        }
        Ok(())
    }

    /// The mode as bits, to compare across ranks.
    fn bits(&self) -> u64 {
        let a = match self.access {
            Access::ReadOnly => 1,
            Access::WriteOnly => 2,
            Access::ReadWrite => 3,
        };
        a | (self.create as u64) << 2
            | (self.exclusive as u64) << 3
            | (self.delete_on_close as u64) << 4
            | (self.unique_open as u64) << 5
            | (self.append as u64) << 6
            | (self.sequential as u64) << 7
    }
}

/// Where a seek counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whence {
    /// From the start of the view.
    Set,
    /// From the current position.
    Current,
    /// From the end of the file (as seen through the view).
    End,
}

/// A rank's window on the file: the bytes from `disp` on, tiled by the file
/// type, counted in elementary types. A position `k` in the view is the
/// `k`-th elementary type of the data the file type selects.
#[derive(Clone, Debug)]
pub struct View {
    disp: u64,
    etype: Datatype,
    filetype: Datatype,
    /// The file type's runs, as a list (a compact typemap flattened).
    runs: Vec<(isize, usize)>,
    /// Data bytes of the file type before each of its runs.
    before: Vec<usize>,
}

impl View {
    /// The default view: every byte of the file, from offset 0.
    pub fn bytes() -> View {
        let b = Datatype::basic(1, 0);
        View::new(0, b.clone(), b, true).expect("the byte view is valid")
    }

    /// A view of the file from byte `disp`, in units of `etype`, through
    /// `filetype`. Both types must have non-negative, non-decreasing
    /// displacements (MPI's rule for file types; refused as an I/O fault,
    /// the class ROMIO gives it), and the file type must hold a whole,
    /// non-zero number of elementary types. Overlapping parts are allowed
    /// only where the file cannot be written (`writable` false), as MPI
    /// says (an I/O fault otherwise, as ROMIO gives it).
    pub fn new(
        disp: u64,
        etype: Datatype,
        filetype: Datatype,
        writable: bool,
    ) -> std::result::Result<View, (Fault, String)> {
        let arg = |m: String| (Fault::Argument, m);
        if etype.size() == 0 {
            return Err(arg("the elementary type holds no data".into()));
        }
        let mut runs = Vec::new();
        for (name, t) in [("elementary type", &etype), ("file type", &filetype)] {
            let (mut start, mut end) = (0isize, 0isize);
            runs = t.flat_runs().map_err(|e| arg(format!("the {name}: {e}")))?;
            for &(o, l) in &runs {
                if o < start {
                    return Err((
                        Fault::Io,
                        format!(
                            "the {name} has a negative or decreasing displacement \
                             ({o} after {start})"
                        ),
                    ));
                }
                if o < end && writable {
                    return Err((
                        Fault::Io,
                        format!(
                            "the {name} overlaps itself (data at {o}, before {end}), \
                             which MPI allows only for a file that is not written"
                        ),
                    ));
                }
                (start, end) = (o, end.max(o + l as isize));
            }
        }
        if filetype.size() == 0 || !filetype.size().is_multiple_of(etype.size()) {
            return Err(arg(format!(
                "the file type holds {} bytes, not a non-zero multiple of the \
                 elementary type's {}",
                filetype.size(),
                etype.size()
            )));
        }
        if filetype.extent() <= 0 {
            return Err(arg(format!(
                "the file type's extent is {}; tiling the file needs a positive one",
                filetype.extent()
            )));
        }
        let mut before = Vec::with_capacity(runs.len());
        let mut n = 0;
        for &(_, l) in &runs {
            before.push(n);
            n += l;
        }
        Ok(View {
            disp,
            etype,
            filetype,
            runs,
            before,
        })
    }

    /// The displacement in bytes.
    pub fn disp(&self) -> u64 {
        self.disp
    }

    /// The elementary type.
    pub fn etype(&self) -> &Datatype {
        &self.etype
    }

    /// The file type.
    pub fn filetype(&self) -> &Datatype {
        &self.filetype
    }

    /// Bytes of one elementary type.
    pub fn etype_size(&self) -> u64 {
        self.etype.size() as u64
    }

    /// The file extents `(offset, length)` that hold `len` data bytes of the
    /// view starting at data byte `start`, in order, adjacent ones merged.
    pub fn extents(
        &self,
        start: u64,
        len: usize,
    ) -> std::result::Result<Vec<(u64, usize)>, String> {
        let mut out: Vec<(u64, usize)> = Vec::new();
        if len == 0 {
            return Ok(out);
        }
        let too_far =
            || format!("data byte {start}+{len} of the view lies beyond 2^63 in the file");
        let runs = &self.runs;
        let size = self.filetype.size() as u64;
        let extent = self.filetype.extent() as u64;
        let mut tile = start / size;
        let within = (start % size) as usize;
        let mut i = self.before.partition_point(|&b| b <= within) - 1;
        let mut skip = within - self.before[i];
        let mut left = len;
        while left > 0 {
            let (o, l) = runs[i];
            let n = (l - skip).min(left);
            let off = tile
                .checked_mul(extent)
                .and_then(|t| t.checked_add(self.disp))
                .and_then(|t| t.checked_add(o as u64 + skip as u64))
                .filter(|&t| {
                    t.checked_add(n as u64)
                        .is_some_and(|e| e <= i64::MAX as u64)
                })
                .ok_or_else(too_far)?;
            match out.last_mut() {
                Some((a, m)) if *a + *m as u64 == off => *m += n,
                _ => out.push((off, n)),
            }
            left -= n;
            skip = 0;
            i += 1;
            if i == runs.len() {
                i = 0;
                tile += 1;
            }
        }
        Ok(out)
    }

    /// The position (in elementary types) of the end of a file of
    /// `file_bytes` bytes as seen through the view: the data bytes the view
    /// selects below that size, rounded up to a whole elementary type.
    pub fn end_position(&self, file_bytes: u64) -> u64 {
        if file_bytes <= self.disp {
            return 0;
        }
        let rel = file_bytes - self.disp;
        let extent = self.filetype.extent() as u64;
        let (tiles, within) = (rel / extent, rel % extent);
        let mut data = tiles * self.filetype.size() as u64;
        for &(o, l) in &self.runs {
            let o = o as u64;
            if within > o {
                data += (within - o).min(l as u64);
            }
        }
        data.div_ceil(self.etype_size())
    }
}

/// A file opened by every rank of a communicator (MPI's `MPI_File`).
pub struct File {
    comm: Comm,
    fd: std::fs::File,
    path: String,
    mode: OpenMode,
    view: View,
    /// The individual file pointer, in elementary types of the view.
    pos: u64,
    shared: Combiner,
    atomic: bool,
}

/// The shared file pointer's counter in the file's combining service.
const SHARED: &str = "kumi.file.shared";

impl File {
    /// Opens (or creates) `path` on every rank of `comm`. Collective: every
    /// rank passes the same mode and a name of the same file. Creation (and
    /// the exclusive check) happens once, at rank 0, before the others open
    /// it; if any rank fails, every rank gets an error and no file stays
    /// open.
    #[track_caller]
    pub fn open(comm: &Comm, path: &str, mode: OpenMode) -> Result<File> {
        let comm = comm.dup()?;
        let bits = mode.bits();
        let mut v = [bits, !bits];
        comm.allreduce_in_place(&mut v, &Op::max())?;
        if v != [bits, !bits] {
            return Err(fault(
                Fault::NotSame,
                path,
                "the ranks opened it with different access modes",
            ));
        }
        // The same mode everywhere: every rank refuses it or none does.
        mode.check().map_err(|d| fault(Fault::Amode, path, d))?;
        let try_open = |first: bool| {
            let mut o = std::fs::OpenOptions::new();
            o.read(mode.access != Access::WriteOnly)
                .write(mode.access != Access::ReadOnly)
                .custom_flags(libc::O_CLOEXEC);
            if first {
                o.create(mode.create)
                    .create_new(mode.create && mode.exclusive);
            }
            o.open(path)
        };
        // Rank 0 first: it creates the file, then tells the others how it went
        // (its fault and errno, so their errors can say why).
        let mut first = [0i32; 2];
        let mut fd = None;
        if comm.rank() == 0 {
            match try_open(true) {
                Ok(f) => fd = Some(f),
                Err(e) => first = [os_fault(&e) as i32 + 1, e.raw_os_error().unwrap_or(0)],
            }
        }
        comm.bcast(&mut first, 0)?;
        if first[0] != 0 {
            let e = io::Error::from_raw_os_error(first[1]);
            return Err(os_error(path, "rank 0 could not open it", e));
        }
        let mut mine = [0i32; 2];
        let mut my_err = None;
        if comm.rank() != 0 {
            match try_open(false) {
                Ok(f) => fd = Some(f),
                Err(e) => {
                    mine = [os_fault(&e) as i32 + 1, comm.rank() as i32];
                    my_err = Some(e);
                }
            }
        }
        let mut any = mine;
        comm.allreduce_in_place(&mut any, &Op::max())?;
        if any[0] != 0 {
            return Err(match my_err {
                Some(e) => os_error(path, "could not open it", e),
                None => fault(
                    Fault::Io,
                    path,
                    format!("rank {} could not open it (see its error)", any[1]),
                ),
            });
        }
        let fd = fd.expect("opened");
        let shared = comm.combiner()?;
        let mut f = File {
            comm,
            fd,
            path: path.to_string(),
            mode,
            view: View::bytes(),
            pos: 0,
            shared,
            atomic: false,
        };
        if mode.append {
            let end = f.size()?;
            f.pos = end;
            if f.comm.rank() == 0 {
                f.shared.fetch_add(SHARED, end as i64, Arrival::Never)?;
            }
            f.comm.barrier()?;
        }
        Ok(f)
    }

    /// Closes the file on every rank (collective); removes it if it was
    /// opened with `delete_on_close`.
    #[track_caller]
    pub fn close(self) -> Result<()> {
        self.comm.barrier()?;
        let File {
            comm,
            fd,
            path,
            mode,
            ..
        } = self;
        drop(fd);
        if mode.delete_on_close && comm.rank() == 0 {
            std::fs::remove_file(&path).map_err(|e| os_error(&path, "could not remove it", e))?;
        }
        comm.barrier()
    }

    /// Removes `path` (not collective).
    pub fn delete(path: &str) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| os_error(path, "could not remove it", e))
    }

    /// The file's own communicator (a duplicate of the one it was opened on).
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// The path it was opened with.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The mode it was opened with.
    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    /// The file's size in bytes.
    pub fn size(&self) -> Result<u64> {
        self.fd
            .metadata()
            .map(|m| m.len())
            .map_err(|e| os_error(&self.path, "could not read its size", e))
    }

    /// Every rank's `v` is the same, or a [`Fault::NotSame`] error on all.
    fn same(&self, v: u64, what: &str) -> Result<()> {
        let mut x = [v, !v];
        self.comm.allreduce_in_place(&mut x, &Op::max())?;
        if x != [v, !v] {
            return Err(fault(
                Fault::NotSame,
                &self.path,
                format!("the ranks passed different {what}"),
            ));
        }
        Ok(())
    }

    /// `local` if every rank's is `Ok` (collective): a check that fails on
    /// one rank fails the call on all, so none goes on into a collective step
    /// the others will not make.
    fn agree<T>(&self, local: Result<T>) -> Result<T> {
        let all = self.all_ok(local.is_ok())?;
        match local {
            Err(e) => Err(e),
            Ok(_) if !all => Err(fault(
                Fault::Argument,
                &self.path,
                "the call failed on another rank (see its error)",
            )),
            Ok(v) => Ok(v),
        }
    }

    /// Whether `ok` holds on every rank (collective). A caller that checks
    /// arguments of its own before a collective call (the C ABI) passes its
    /// outcome here first, so that a rank whose check failed does not leave
    /// the others waiting in a collective step it will not make.
    #[track_caller]
    pub fn all_ok(&self, ok: bool) -> Result<bool> {
        let mut bad = [!ok as u32];
        self.comm.allreduce_in_place(&mut bad, &Op::max())?;
        Ok(bad[0] == 0)
    }

    /// Runs `f` at rank 0 only and gives every rank its outcome (collective).
    fn at_root(&self, what: &str, f: impl FnOnce() -> io::Result<()>) -> Result<()> {
        let mut r = [0i32; 2];
        if self.comm.rank() == 0 {
            if let Err(e) = f() {
                r = [os_fault(&e) as i32 + 1, e.raw_os_error().unwrap_or(0)];
            }
        }
        self.comm.bcast(&mut r, 0)?;
        if r[0] != 0 {
            return Err(os_error(
                &self.path,
                what,
                io::Error::from_raw_os_error(r[1]),
            ));
        }
        Ok(())
    }

    fn writable(&self) -> Result<()> {
        if self.mode.access == Access::ReadOnly {
            return Err(fault(
                Fault::ReadOnly,
                &self.path,
                "it was opened read-only",
            ));
        }
        Ok(())
    }

    /// Truncates or extends the file to `bytes` (collective, the same size
    /// on every rank).
    #[track_caller]
    pub fn set_size(&self, bytes: u64) -> Result<()> {
        self.same(bytes, "sizes")?;
        self.writable()?;
        self.at_root("could not set its size", || self.fd.set_len(bytes))
    }

    /// Makes sure the first `bytes` bytes of the file have storage; a larger
    /// file is left as it is (collective, the same size on every rank).
    #[track_caller]
    pub fn preallocate(&self, bytes: u64) -> Result<()> {
        self.same(bytes, "sizes")?;
        self.writable()?;
        self.at_root("could not preallocate it", || {
            if bytes == 0 {
                return Ok(());
            }
            let len =
                i64::try_from(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
            // SAFETY: `fd` is an open descriptor this File owns.
            let rc =
                unsafe { libc::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(&self.fd), 0, len) };
            match rc {
                0 => Ok(()),
                // Not supported by the file system: extend as a hole.
                libc::EOPNOTSUPP | libc::EINVAL => {
                    if self.fd.metadata()?.len() < bytes {
                        self.fd.set_len(bytes)?;
                    }
                    Ok(())
                }
                e => Err(io::Error::from_raw_os_error(e)),
            }
        })
    }

    /// Writes this rank's data to the storage device, then waits for every
    /// rank to have done so (collective).
    #[track_caller]
    pub fn sync(&self) -> Result<()> {
        let r = self.fd.sync_all();
        let mut bad = [r.is_err() as u32];
        self.comm.allreduce_in_place(&mut bad, &Op::max())?;
        r.map_err(|e| os_error(&self.path, "could not sync it", e))?;
        if bad[0] != 0 {
            return Err(fault(
                Fault::Io,
                &self.path,
                "another rank could not sync it",
            ));
        }
        Ok(())
    }

    /// Turns atomic mode on or off (collective, the same on every rank).
    #[track_caller]
    pub fn set_atomicity(&mut self, atomic: bool) -> Result<()> {
        self.same(atomic as u64, "atomicity flags")?;
        self.atomic = atomic;
        Ok(())
    }

    /// Whether atomic mode is on.
    pub fn atomicity(&self) -> bool {
        self.atomic
    }

    /// Sets the view (collective; every rank passes an elementary type of the
    /// same size). `disp = None` is MPI's `MPI_DISPLACEMENT_CURRENT`: the
    /// shared file pointer's byte position, for files opened for sequential
    /// access only. Both file pointers go back to 0.
    #[track_caller]
    pub fn set_view(
        &mut self,
        disp: Option<u64>,
        etype: Datatype,
        filetype: Datatype,
    ) -> Result<()> {
        self.same(etype.size() as u64, "elementary type sizes")?;
        let disp = match disp {
            Some(d) => d,
            None if self.mode.sequential => {
                let at = self.shared.read(SHARED)? as u64;
                self.byte_offset(at)?
            }
            None => {
                return Err(fault(
                    Fault::Argument,
                    &self.path,
                    "the current displacement (MPI_DISPLACEMENT_CURRENT) is only for \
                     files opened for sequential access",
                ))
            }
        };
        let writable = self.mode.access != Access::ReadOnly;
        let v =
            View::new(disp, etype, filetype, writable).map_err(|(f, d)| fault(f, &self.path, d));
        // Agreeing also orders every rank's read of the old shared position
        // (above) before rank 0 resets it.
        let v = self.agree(v)?;
        if self.comm.rank() == 0 {
            let at = self.shared.read(SHARED)?;
            self.shared.fetch_add(SHARED, -at, Arrival::Never)?;
        }
        self.view = v;
        self.pos = 0;
        self.comm.barrier()
    }

    /// The current view.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// The absolute byte offset in the file of view position `pos`.
    pub fn byte_offset(&self, pos: u64) -> Result<u64> {
        let b = self.data_byte(pos)?;
        let e = self
            .view
            .extents(b, 1)
            .map_err(|d| fault(Fault::Argument, &self.path, d))?;
        Ok(e[0].0)
    }

    fn data_byte(&self, pos: u64) -> Result<u64> {
        pos.checked_mul(self.view.etype_size())
            .filter(|&b| b <= i64::MAX as u64)
            .ok_or_else(|| {
                fault(
                    Fault::Argument,
                    &self.path,
                    format!("position {pos} is beyond 2^63 bytes"),
                )
            })
    }

    fn whole_etypes(&self, bytes: usize) -> Result<u64> {
        let es = self.view.etype_size();
        if !(bytes as u64).is_multiple_of(es) {
            return Err(fault(
                Fault::Argument,
                &self.path,
                format!("{bytes} bytes are not a whole number of elementary types of {es} bytes"),
            ));
        }
        Ok(bytes as u64 / es)
    }

    fn not_sequential(&self) -> Result<()> {
        if self.mode.sequential {
            return Err(fault(
                Fault::Unsupported,
                &self.path,
                "it was opened for sequential access: only the shared file pointer may be used",
            ));
        }
        Ok(())
    }

    /// Takes a POSIX record lock over the span of `ext` in atomic mode
    /// (released when the guard drops).
    fn lock(&self, ext: &[(u64, usize)], write: bool) -> Result<Option<RangeLock<'_>>> {
        let (Some(first), Some(last), true) = (ext.first(), ext.last(), self.atomic) else {
            return Ok(None);
        };
        let (start, end) = (first.0, last.0 + last.1 as u64);
        RangeLock::take(&self.fd, start, end - start, write)
            .map(Some)
            .map_err(|e| os_error(&self.path, "could not lock the range for atomic access", e))
    }

    /// Reads into `buf` from view position `pos` (elementary types); returns
    /// the bytes read, fewer than `buf.len()` only at the end of the file.
    fn read_view(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        if self.mode.access == Access::WriteOnly {
            return Err(fault(Fault::Access, &self.path, "it was opened write-only"));
        }
        self.whole_etypes(buf.len())?;
        let ext = self
            .view
            .extents(self.data_byte(pos)?, buf.len())
            .map_err(|d| fault(Fault::Argument, &self.path, d))?;
        let _lock = self.lock(&ext, false)?;
        let mut done = 0;
        for (off, len) in ext {
            let mut got = 0;
            while got < len {
                match self
                    .fd
                    .read_at(&mut buf[done + got..done + len], off + got as u64)
                {
                    Ok(0) => return Ok(done + got),
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(os_error(&self.path, "read failed", e)),
                }
            }
            done += len;
        }
        Ok(done)
    }

    /// Writes `data` at view position `pos`; returns the bytes written (all).
    fn write_view(&self, pos: u64, data: &[u8]) -> Result<usize> {
        self.writable()?;
        self.whole_etypes(data.len())?;
        let ext = self
            .view
            .extents(self.data_byte(pos)?, data.len())
            .map_err(|d| fault(Fault::Argument, &self.path, d))?;
        let _lock = self.lock(&ext, true)?;
        let mut done = 0;
        for (off, len) in ext {
            self.fd
                .write_all_at(&data[done..done + len], off)
                .map_err(|e| os_error(&self.path, "write failed", e))?;
            done += len;
        }
        Ok(done)
    }

    /// Reads `buf.len()` bytes (a whole number of elementary types) at view
    /// position `pos`; returns the bytes read (fewer only at the end of the
    /// file).
    pub fn read_at(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        self.not_sequential()?;
        self.read_view(pos, buf)
    }

    /// Writes `data` at view position `pos`; returns the bytes written.
    pub fn write_at(&self, pos: u64, data: &[u8]) -> Result<usize> {
        self.not_sequential()?;
        self.write_view(pos, data)
    }

    /// Reads at the individual file pointer and advances it by what was read.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        self.not_sequential()?;
        let n = self.read_view(self.pos, buf)?;
        self.pos += n as u64 / self.view.etype_size();
        Ok(n)
    }

    /// Writes at the individual file pointer and advances it.
    pub fn write(&mut self, data: &[u8]) -> Result<usize> {
        self.not_sequential()?;
        let n = self.write_view(self.pos, data)?;
        self.pos += n as u64 / self.view.etype_size();
        Ok(n)
    }

    fn sought(&self, at: u64, offset: i64, whence: Whence) -> Result<u64> {
        let base = match whence {
            Whence::Set => 0,
            Whence::Current => at as i64,
            Whence::End => self.view.end_position(self.size()?) as i64,
        };
        base.checked_add(offset)
            .filter(|&p| p >= 0)
            .map(|p| p as u64)
            .ok_or_else(|| {
                fault(
                    Fault::Argument,
                    &self.path,
                    format!(
                        "seeking by {offset} from {base} ({whence:?}) gives a negative position"
                    ),
                )
            })
    }

    /// Moves the individual file pointer (in elementary types).
    pub fn seek(&mut self, offset: i64, whence: Whence) -> Result<()> {
        self.not_sequential()?;
        self.pos = self.sought(self.pos, offset, whence)?;
        Ok(())
    }

    /// The individual file pointer (in elementary types).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Takes `n` elementary types from the shared file pointer; returns where
    /// they start.
    fn take_shared(&self, n: u64) -> Result<u64> {
        let n =
            i64::try_from(n).map_err(|_| fault(Fault::Argument, &self.path, "access too large"))?;
        Ok(self.shared.fetch_add(SHARED, n, Arrival::Never)? as u64)
    }

    /// Reads at the shared file pointer, which advances by the amount asked
    /// for; concurrent callers get disjoint parts, in some order.
    pub fn read_shared(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.whole_etypes(buf.len())?;
        let at = self.take_shared(n)?;
        self.read_view(at, buf)
    }

    /// Writes at the shared file pointer (see [`File::read_shared`]).
    pub fn write_shared(&self, data: &[u8]) -> Result<usize> {
        let n = self.whole_etypes(data.len())?;
        let at = self.take_shared(n)?;
        self.write_view(at, data)
    }

    /// Where every rank's part of an ordered access starts: at the shared
    /// pointer, in rank order (collective).
    fn ordered_start(&self, n: u64) -> Result<u64> {
        let mut before = [n];
        self.comm.exscan_in_place(&mut before, &Op::sum())?;
        let mut total = [n];
        self.comm.allreduce_in_place(&mut total, &Op::sum())?;
        let mut base = [0u64];
        if self.comm.rank() == 0 {
            base[0] = self.take_shared(total[0])?;
            before[0] = 0;
        }
        self.comm.bcast(&mut base, 0)?;
        Ok(base[0] + before[0])
    }

    /// Collective read at the shared file pointer, the ranks' parts one after
    /// another in rank order.
    #[track_caller]
    pub fn read_ordered(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.agree(self.whole_etypes(buf.len()))?;
        let at = self.ordered_start(n)?;
        self.read_view(at, buf)
    }

    /// Collective write at the shared file pointer, in rank order.
    #[track_caller]
    pub fn write_ordered(&self, data: &[u8]) -> Result<usize> {
        let n = self.agree(self.writable().and(self.whole_etypes(data.len())))?;
        let at = self.ordered_start(n)?;
        self.write_view(at, data)
    }

    /// Moves the shared file pointer (collective, the same arguments on
    /// every rank).
    #[track_caller]
    pub fn seek_shared(&self, offset: i64, whence: Whence) -> Result<()> {
        self.same(offset as u64, "offsets")?;
        self.same(whence as u64, "seek origins")?;
        let mut r = [0i64; 2];
        if self.comm.rank() == 0 {
            let cur = self.shared.read(SHARED)?;
            match self.sought(cur as u64, offset, whence) {
                Ok(to) => {
                    self.shared
                        .fetch_add(SHARED, to as i64 - cur, Arrival::Never)?;
                }
                Err(_) => r = [1, cur],
            }
        }
        self.comm.bcast(&mut r, 0)?;
        if r[0] != 0 {
            return Err(fault(
                Fault::Argument,
                &self.path,
                format!("seeking the shared pointer by {offset} from {} ({whence:?}) gives a negative position", r[1]),
            ));
        }
        Ok(())
    }

    /// The shared file pointer (in elementary types).
    pub fn position_shared(&self) -> Result<u64> {
        Ok(self.shared.read(SHARED)? as u64)
    }
}

/// An open-file-description lock over a byte range, released on drop.
struct RangeLock<'a> {
    fd: &'a std::fs::File,
    start: u64,
    len: u64,
}

impl<'a> RangeLock<'a> {
    fn take(fd: &'a std::fs::File, start: u64, len: u64, write: bool) -> io::Result<Self> {
        let kind = if write { libc::F_WRLCK } else { libc::F_RDLCK };
        Self::fcntl(fd, kind, start, len)?;
        Ok(RangeLock { fd, start, len })
    }

    fn fcntl(fd: &std::fs::File, kind: i32, start: u64, len: u64) -> io::Result<()> {
        // SAFETY: a zeroed `flock` is a valid value of this plain C struct.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = start as libc::off_t;
        fl.l_len = len as libc::off_t;
        loop {
            // SAFETY: `fd` is open for the lock's lifetime; `fl` is a valid
            // `flock` that the call reads (OFD locks need `l_pid` 0: zeroed).
            let rc = unsafe {
                libc::fcntl(
                    std::os::fd::AsRawFd::as_raw_fd(fd),
                    libc::F_OFD_SETLKW,
                    &mut fl,
                )
            };
            if rc == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for RangeLock<'_> {
    fn drop(&mut self) {
        // An unlock of a lock we hold cannot fail in a way we could act on.
        let _ = Self::fcntl(self.fd, libc::F_UNLCK, self.start, self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte() -> Datatype {
        Datatype::basic(1, 0)
    }

    fn int() -> Datatype {
        Datatype::basic(4, 1)
    }

    #[test]
    fn byte_view_is_the_file() {
        let v = View::bytes();
        assert_eq!(v.extents(10, 5).unwrap(), [(10, 5)]);
        assert_eq!(v.end_position(100), 100);
    }

    #[test]
    fn strided_view_maps_each_rank_to_its_blocks() {
        // Rank 1 of 4, blocks of 2 ints: file type = 2 ints at offset 8 of 32.
        let ft = int().contiguous(2).unwrap();
        let ft = Datatype::create_struct(&[1], &[8], &[ft])
            .unwrap()
            .resized(0, 32);
        let v = View::new(100, int(), ft, true).unwrap();
        // 5 ints from position 1: rest of tile 0, tile 1, first int of tile 2.
        assert_eq!(v.extents(4, 20).unwrap(), [(112, 4), (140, 8), (172, 8)]);
        assert_eq!(v.end_position(100), 0);
        assert_eq!(v.end_position(112), 1);
        assert_eq!(v.end_position(132), 2);
        assert_eq!(v.end_position(150), 4);
    }

    #[test]
    fn adjacent_runs_are_merged() {
        let ft = int().contiguous(3).unwrap();
        let v = View::new(0, int(), ft, true).unwrap();
        assert_eq!(v.extents(0, 36).unwrap(), [(0, 36)]);
    }

    #[test]
    fn views_that_mpi_forbids_are_refused() {
        assert!(View::new(0, int(), byte().contiguous(6).unwrap(), true).is_err());
        let back = Datatype::create_struct(&[1, 1], &[8, 0], &[int(), int()]).unwrap();
        assert!(View::new(0, int(), back, false).is_err());
        let neg = Datatype::create_struct(&[1], &[-4], &[int()]).unwrap();
        assert!(View::new(0, int(), neg, false).is_err_and(|e| e.0 == Fault::Io));
        // Overlaps are for reading only.
        let over = Datatype::create_struct(&[3, 1], &[0, 4], &[int(), int()]).unwrap();
        assert!(View::new(0, int(), over.clone(), false).is_ok());
        assert!(View::new(0, int(), over, true).is_err_and(|e| e.0 == Fault::Io));
        assert!(View::new(0, byte().contiguous(0).unwrap(), byte(), true).is_err());
    }

    #[test]
    fn offsets_beyond_the_file_limit_are_errors() {
        let v = View::bytes();
        assert!(v.extents(i64::MAX as u64, 2).is_err());
    }

    #[test]
    fn modes_mpi_forbids_are_refused() {
        let ro = OpenMode::new(Access::ReadOnly);
        assert!(ro.check().is_ok());
        assert!(OpenMode { create: true, ..ro }.check().is_err());
        assert!(OpenMode {
            exclusive: true,
            ..ro
        }
        .check()
        .is_err());
        let rw = OpenMode::new(Access::ReadWrite);
        assert!(OpenMode {
            sequential: true,
            ..rw
        }
        .check()
        .is_err());
        let wo = OpenMode::new(Access::WriteOnly);
        assert!(OpenMode {
            sequential: true,
            create: true,
            ..wo
        }
        .check()
        .is_ok());
        assert_ne!(ro.bits(), wo.bits());
    }

    proptest::proptest! {
        /// The extents of a range are exactly the file bytes a byte-by-byte
        /// walk of the tiled file type gives.
        #[test]
        fn extents_match_a_byte_walk(
            blocks in proptest::collection::vec((0usize..4, 1usize..4), 1..4),
            pad in 0usize..5,
            disp in 0u64..50,
            start in 0u64..40,
            len in 0usize..40,
        ) {
            let mut runs = Vec::new();
            let mut at = 0isize;
            for &(gap, l) in &blocks {
                at += gap as isize;
                runs.push((at, l));
                at += l as isize;
            }
            let ft = Datatype::basic_runs(&runs, at + pad as isize);
            let v = View::new(disp, byte(), ft, true).unwrap();
            let mut walk = Vec::new();
            let mut tile = 0u64;
            while walk.len() < (start as usize + len) {
                for &(o, l) in &runs {
                    for b in 0..l {
                        walk.push(disp + tile * (at as u64 + pad as u64) + o as u64 + b as u64);
                    }
                }
                tile += 1;
            }
            let want = &walk[start as usize..start as usize + len];
            let got: Vec<u64> = v.extents(start, len).unwrap().iter()
                .flat_map(|&(o, l)| o..o + l as u64).collect();
            proptest::prop_assert_eq!(got, want.to_vec());
        }
    }
}
