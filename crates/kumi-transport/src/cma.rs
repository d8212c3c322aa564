//! Single copy between processes of one host ("cross-memory attach"):
//! `process_vm_readv` / `process_vm_writev` move bytes straight from one process's
//! buffer into another's, with no intermediate copy in a shared segment.
//!
//! The kernel may refuse (Yama ptrace restrictions, seccomp in containers, a
//! kernel built without it). The runtime calls these once, and on refusal falls
//! back to pipelined copies through the ring for the rest of the job.
//! [`deny_for_tests`] (`KUMI_TEST_DENY_CMA=1`, set by the runtime) makes every
//! call fail with `EPERM` as a refusing kernel would, so the fallback can be
//! tested on a machine that allows it.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

static DENIED: AtomicBool = AtomicBool::new(false);

/// From now on every copy fails with `EPERM`, as on a kernel that refuses.
pub fn deny_for_tests() {
    // Relaxed: the flag guards no other data; it is set at start, before the
    // first copy, on the thread that will make it (or that starts the one
    // that will, which orders it).
    DENIED.store(true, Ordering::Relaxed);
}

fn denied_for_test() -> bool {
    // Relaxed: see `deny_for_tests`.
    DENIED.load(Ordering::Relaxed)
}

/// Lets any process of this user read this process's memory with
/// `process_vm_readv`, where Yama's `ptrace_scope=1` would allow only ancestors.
/// Best effort: without Yama this is a no-op.
pub fn allow_peer_access() {
    // SAFETY: prctl(PR_SET_PTRACER, ANY) takes plain integer arguments and only
    // changes this process's Yama attribute; failure is harmless and ignored.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}

/// Reads `dst.len()` bytes at `remote_addr` in process `pid` into `dst`.
/// Loops over partial transfers; an error names what the kernel said.
pub fn read_from(pid: i32, remote_addr: u64, dst: &mut [u8]) -> io::Result<()> {
    if denied_for_test() {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    let mut done = 0usize;
    while done < dst.len() {
        let local = libc::iovec {
            iov_base: dst[done..].as_mut_ptr().cast(),
            iov_len: dst.len() - done,
        };
        let remote = libc::iovec {
            iov_base: (remote_addr as usize + done) as *mut libc::c_void,
            iov_len: dst.len() - done,
        };
        // SAFETY: `local` covers exactly the unwritten tail of `dst`, which we borrow
        // mutably for the whole call; the kernel writes only there. `remote` names
        // memory in another process, which the kernel checks (EFAULT if unmapped).
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "process_vm_readv moved no bytes",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

/// Writes `src` to `remote_addr` in process `pid`. Loops over partial transfers.
pub fn write_to(pid: i32, remote_addr: u64, src: &[u8]) -> io::Result<()> {
    if denied_for_test() {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    let mut done = 0usize;
    while done < src.len() {
        let local = libc::iovec {
            iov_base: src[done..].as_ptr() as *mut libc::c_void,
            iov_len: src.len() - done,
        };
        let remote = libc::iovec {
            iov_base: (remote_addr as usize + done) as *mut libc::c_void,
            iov_len: src.len() - done,
        };
        // SAFETY: the kernel only reads from `local`, which covers the unsent tail of
        // `src`, borrowed for the whole call; `remote` is checked by the kernel.
        let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "process_vm_writev moved no bytes",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_own_memory() {
        let pid = std::process::id() as i32;
        let src: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut dst = vec![0u8; src.len()];
        read_from(pid, src.as_ptr() as u64, &mut dst).unwrap();
        assert_eq!(src, dst);
        let mut dst2 = vec![0u8; 1000];
        write_to(pid, dst2.as_mut_ptr() as u64, &src[..1000]).unwrap();
        assert_eq!(&dst2[..], &src[..1000]);
    }

    #[test]
    fn bad_address_is_an_error_not_a_crash() {
        let mut dst = [0u8; 16];
        assert!(read_from(std::process::id() as i32, 8, &mut dst).is_err());
    }
}
