//! A rank started by a PMIx server (`srun --mpi=pmix`): its identity and
//! its key-value exchange come from the server through the PMIx client
//! library, which kumi loads when it finds `PMIX_RANK` in the environment
//! (`libpmix.so.2`; Debian's `libpmix2`), so that kumi neither needs it to
//! build nor to run elsewhere.
//!
//! Only what bootstrap needs is declared: `PMIx_Init`, `Get`, `Put`,
//! `Commit`, `Fence` (collecting the data), `Abort`, `Finalize`, and the
//! three structures they take, whose layouts are PMIx 4's (checked against
//! `pmix_common.h` of PMIx 4.2: `pmix_proc_t` 260 bytes with the rank at
//! 256, `pmix_value_t` 32 with its data at 8, `pmix_info_t` 552 with its
//! flags at 512 and its value at 520).

use crate::bootstrap::{Exchange, Identity};
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};

const NSLEN: usize = 256;
const PMIX_SUCCESS: c_int = 0;
const PMIX_BOOL: u16 = 1;
const PMIX_STRING: u16 = 3;
const PMIX_UINT16: u16 = 13;
const PMIX_UINT32: u16 = 14;
const PMIX_BYTE_OBJECT: u16 = 27;
const PMIX_GLOBAL: u8 = 3;
const PMIX_RANK_WILDCARD: u32 = u32::MAX - 1;

#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; NSLEN],
    rank: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Value {
    ty: u16,
    /// The union: a pointer, a number, or a byte object (pointer, length).
    data: [u64; 3],
}

#[repr(C)]
struct Info {
    key: [c_char; 512],
    flags: u32,
    value: Value,
}

const _: () = assert!(std::mem::size_of::<Proc>() == 260);
const _: () = assert!(std::mem::size_of::<Value>() == 32);
const _: () = assert!(std::mem::size_of::<Info>() == 552);

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type DestructFn = unsafe extern "C" fn(*mut Value);

/// `PMIx_Abort` and this rank's proc, once initialized: for [`end_job`].
static ABORT: std::sync::OnceLock<(AbortFn, Proc)> = std::sync::OnceLock::new();

/// Ends the job through the PMIx server (not from a signal handler: the
/// client library is not async-signal-safe). Nothing happens for a rank not
/// started by one.
pub(crate) fn end_job(message: &str) -> bool {
    let Some((abort, _)) = ABORT.get() else {
        return false;
    };
    let msg = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: PMIx_Abort with a NUL-terminated message and no procs.
    unsafe { abort(1, msg.as_ptr(), std::ptr::null_mut(), 0) };
    true
}

/// The PMIx client of a rank.
pub(crate) struct Pmix {
    me: Proc,
    get: GetFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    abort: AbortFn,
    finalize: FinalizeFn,
    destruct: DestructFn,
}

// SAFETY: the PMIx client library is thread-safe (its calls are serialized
// on its own progress thread); kumi calls it from one thread at a time
// anyway (the bootstrap, then the owner of the universe's mutex).
unsafe impl Send for Pmix {}

fn sym<T: Copy>(lib: *mut c_void, name: &str) -> Result<T> {
    let c = CString::new(name).unwrap_or_default();
    // SAFETY: dlsym on a handle dlopen returned, with a NUL-terminated name.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    if p.is_null() {
        return Err(Error::Bootstrap(format!("libpmix.so.2 has no {name}")));
    }
    debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `T` is the function pointer type of `name` as PMIx 4 declares
    // it (see the types above), the same size as the symbol's address.
    Ok(unsafe { std::mem::transmute_copy(&p) })
}

fn check(what: &str, rc: c_int) -> Result<()> {
    if rc == PMIX_SUCCESS {
        Ok(())
    } else {
        Err(Error::Bootstrap(format!(
            "PMIx {what} failed (status {rc})"
        )))
    }
}

impl Pmix {
    /// Loads the client library, initializes it and learns who this rank is.
    pub fn connect() -> Result<(Pmix, Identity)> {
        let name = c"libpmix.so.2";
        // SAFETY: dlopen with a NUL-terminated name; the library stays loaded
        // for the life of the process (never closed).
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if lib.is_null() {
            return Err(Error::Bootstrap(
                "this rank was started by a PMIx server (PMIX_RANK is set) but libpmix.so.2 \
                 cannot be loaded: install libpmix2 (Debian), or start with srun --mpi=pmi2"
                    .into(),
            ));
        }
        let init: InitFn = sym(lib, "PMIx_Init")?;
        let mut p = Pmix {
            me: Proc {
                nspace: [0; NSLEN],
                rank: 0,
            },
            get: sym(lib, "PMIx_Get")?,
            put: sym(lib, "PMIx_Put")?,
            commit: sym(lib, "PMIx_Commit")?,
            fence: sym(lib, "PMIx_Fence")?,
            abort: sym(lib, "PMIx_Abort")?,
            finalize: sym(lib, "PMIx_Finalize")?,
            destruct: sym(lib, "PMIx_Value_destruct")?,
        };
        // SAFETY: PMIx_Init fills the proc structure it is given; no info.
        check("init", unsafe { init(&mut p.me, std::ptr::null_mut(), 0) })?;
        let _ = ABORT.set((p.abort, p.me));
        crate::pmi::arm_exit_words(p.me.rank);
        let rank = p.me.rank;
        let size = p.number(PMIX_RANK_WILDCARD, c"pmix.job.size")?;
        // Node-level: asked of the namespace (the wildcard rank).
        let peers = p.string(PMIX_RANK_WILDCARD, c"pmix.lpeers")?;
        let mut host_ranks: Vec<u32> = peers
            .split(',')
            .map(|r| r.trim().parse())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::Bootstrap(format!("PMIx local peers {peers:?}")))?;
        host_ranks.sort_unstable();
        let local_rank = host_ranks.iter().position(|&r| r == rank).ok_or_else(|| {
            Error::Bootstrap(format!(
                "rank {rank} is not among its local peers {peers:?}"
            ))
        })? as u32;
        if size == 0 || rank >= size || host_ranks.iter().any(|&r| r >= size) {
            return Err(Error::Bootstrap(format!(
                "PMIx says rank {rank} of {size}, peers {peers:?}"
            )));
        }
        let appnum = p.number(rank, c"pmix.appnum").unwrap_or(0);
        let host = p
            .string(rank, c"pmix.hname")
            .ok()
            .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
            .unwrap_or_else(crate::hostname);
        // SAFETY: PMIx_Init wrote a NUL-terminated namespace (PMIX_MAX_NSLEN).
        let nspace = unsafe { CStr::from_ptr(p.me.nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let job = crate::pmi::job_id("pmix", &nspace);
        let secret = crate::pmi::share_secret(&mut p, rank)?;
        let id = Identity {
            job,
            rank,
            size,
            local_rank,
            local_size: host_ranks.len() as u32,
            control: None,
            secret,
            shm_fd: None,
            host_ranks: Some(host_ranks),
            host,
            net: String::new(),
            local_cores: None,
            appnum,
        };
        Ok((p, id))
    }

    fn proc_of(&self, rank: u32) -> Proc {
        Proc { rank, ..self.me }
    }

    /// `key` of `rank` (the job's, with the wildcard), released after `read`.
    fn with_value<T>(
        &self,
        rank: u32,
        key: &CStr,
        read: impl FnOnce(&Value) -> Result<T>,
    ) -> Result<T> {
        let mut v: *mut Value = std::ptr::null_mut();
        let who = self.proc_of(rank);
        // SAFETY: PMIx_Get with a valid proc, a NUL-terminated key, no info,
        // and an out pointer it sets to a value it allocates.
        check(&format!("get {}", key.to_string_lossy()), unsafe {
            (self.get)(&who, key.as_ptr(), std::ptr::null(), 0, &mut v)
        })?;
        if v.is_null() {
            return Err(Error::Bootstrap(format!(
                "PMIx returned no {}",
                key.to_string_lossy()
            )));
        }
        // SAFETY: v points to the value PMIx_Get allocated; it is read, then
        // destructed and freed as PMIX_VALUE_RELEASE does.
        unsafe {
            let r = read(&*v);
            (self.destruct)(v);
            libc::free(v.cast());
            r
        }
    }

    fn number(&self, rank: u32, key: &CStr) -> Result<u32> {
        self.with_value(rank, key, |v| match v.ty {
            PMIX_UINT32 => Ok(v.data[0] as u32),
            PMIX_UINT16 => Ok(v.data[0] as u16 as u32),
            t => Err(Error::Bootstrap(format!(
                "PMIx {}: type {t}, not a number",
                key.to_string_lossy()
            ))),
        })
    }

    fn string(&self, rank: u32, key: &CStr) -> Result<String> {
        self.with_value(rank, key, |v| match v.ty {
            PMIX_STRING if v.data[0] != 0 => {
                // SAFETY: a PMIX_STRING value holds a NUL-terminated string.
                Ok(unsafe { CStr::from_ptr(v.data[0] as *const c_char) }
                    .to_string_lossy()
                    .into_owned())
            }
            t => Err(Error::Bootstrap(format!(
                "PMIx {}: type {t}, not a string",
                key.to_string_lossy()
            ))),
        })
    }

    /// Asks the server to end every rank of the job.
    pub fn abort(&mut self, message: &str) {
        let msg = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: PMIx_Abort with a NUL-terminated message and no procs
        // (the whole namespace).
        unsafe { (self.abort)(1, msg.as_ptr(), std::ptr::null_mut(), 0) };
    }

    /// Ends the exchange.
    pub fn finalize(&mut self) -> Result<()> {
        // SAFETY: PMIx_Finalize with no info.
        check("finalize", unsafe { (self.finalize)(std::ptr::null(), 0) })
    }
}

fn key_of(key: &str) -> Result<CString> {
    CString::new(key).map_err(|_| Error::Bootstrap(format!("a PMIx key with NUL: {key:?}")))
}

impl Exchange for Pmix {
    fn put(&mut self, _rank: u32, key: &str, mut value: Vec<u8>) -> Result<()> {
        let k = key_of(key)?;
        let mut v = Value {
            ty: PMIX_BYTE_OBJECT,
            data: [value.as_mut_ptr() as u64, value.len() as u64, 0],
        };
        // SAFETY: PMIx_Put copies the byte object it is given (pointer and
        // length of `value`, alive for the call).
        check("put", unsafe {
            (self.put)(PMIX_GLOBAL, k.as_ptr(), &mut v)
        })
    }

    fn fence(&mut self) -> Result<()> {
        // SAFETY: PMIx_Commit takes nothing.
        check("commit", unsafe { (self.commit)() })?;
        let mut collect = Info {
            key: [0; 512],
            flags: 0,
            value: Value {
                ty: PMIX_BOOL,
                data: [1, 0, 0],
            },
        };
        for (d, s) in collect.key.iter_mut().zip(c"pmix.collect".to_bytes()) {
            *d = *s as c_char;
        }
        // SAFETY: PMIx_Fence over no explicit procs (the whole namespace)
        // with one info asking to collect the data.
        check("fence", unsafe {
            (self.fence)(std::ptr::null(), 0, &collect, 1)
        })
    }

    fn get_many(&mut self, keys: &[(u32, String)]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter()
            .map(|(rank, key)| {
                let k = key_of(key)?;
                self.with_value(*rank, &k, |v| match v.ty {
                    PMIX_BYTE_OBJECT => {
                        let (p, n) = (v.data[0] as *const u8, v.data[1] as usize);
                        if p.is_null() {
                            return Ok(Some(Vec::new()));
                        }
                        // SAFETY: a byte object holds `n` bytes at `p`.
                        Ok(Some(unsafe { std::slice::from_raw_parts(p, n) }.to_vec()))
                    }
                    t => Err(Error::Bootstrap(format!(
                        "PMIx {key} of rank {rank}: type {t}"
                    ))),
                })
            })
            .collect()
    }
}
