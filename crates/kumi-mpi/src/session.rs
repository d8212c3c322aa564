//! MPI-4 sessions: a program may start MPI with `MPI_Session_init` instead
//! of (or besides) `MPI_Init`, learn the process sets (`mpi://WORLD`,
//! `mpi://SELF`), make groups of them and communicators from the groups
//! with no parent communicator (`MPI_Comm_create_from_group`, whose context
//! comes from the runtime's context server: `kumi::Comm::create_from_group`).
//!
//! The runtime starts with the first of `MPI_Init` and `MPI_Session_init`
//! and ends with the last of `MPI_Finalize` and `MPI_Session_finalize`
//! (`crate::init`); kumi cannot start it again after that. Errors of a
//! session call go to the session's error handler.

use crate::consts::*;
use crate::state::{out, st, State};
use crate::{err, set_err_comm, MpiErr, R};
use std::ffi::{c_char, c_int};

/// Handles of sessions (MPICH's kind bits for a session, as made objects).
pub(crate) const NEW_SESSION: c_int = 0xb800_0000u32 as c_int;
const MPI_SESSION_NULL: c_int = 0x3800_0000;

/// The process sets every session knows.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// Whether error target `h` is a session (see `state::handle_error`).
pub(crate) fn err_target(h: c_int) -> bool {
    h & !0x03ff_ffff == NEW_SESSION
}

fn session(s: &mut State, h: c_int) -> R<&mut c_int> {
    if s.sessions.contains_key(&h) {
        set_err_comm(h);
        return Ok(s.sessions.get_mut(&h).expect("checked"));
    }
    err(
        MPI_ERR_SESSION,
        format!("{h:#x} is not a session (or it was finalized)"),
    )
}

/// The world ranks of process set `name`.
fn pset(s: &mut State, name: &str) -> R<Vec<u32>> {
    let w = s.comm(MPI_COMM_WORLD)?;
    match name {
        "mpi://WORLD" => Ok((0..w.size() as u32).collect()),
        "mpi://SELF" => Ok(vec![w.rank() as u32]),
        _ => err(
            MPI_ERR_ARG,
            format!("{name:?} is not a process set (kumi has mpi://WORLD and mpi://SELF)"),
        ),
    }
}

/// Refuses `h` unless it is an error handler a session or a communicator
/// may take.
fn check_errhandler(s: &State, h: c_int) -> R<()> {
    if matches!(
        h,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT
    ) || s.errhs.contains_key(&h)
    {
        return Ok(());
    }
    err(MPI_ERR_ARG, format!("{h:#x} is not an error handler"))
}

/// What every constructor from groups checks (string tag, info, error
/// handler), and the world communicator, whose engine makes the new one.
fn from_group_args(
    stringtag: *const c_char,
    info: c_int,
    errhandler: c_int,
) -> R<(String, kumi::Comm)> {
    let tag = name_arg(stringtag, "stringtag")?;
    if tag.len() > MPI_MAX_STRINGTAG_LEN {
        return err(
            MPI_ERR_ARG,
            format!(
                "a string tag of {} bytes (MPI_MAX_STRINGTAG_LEN is {MPI_MAX_STRINGTAG_LEN})",
                tag.len()
            ),
        );
    }
    let mut s = st()?;
    crate::info::check(info)?;
    check_errhandler(&s, errhandler)?;
    Ok((tag, s.comm(MPI_COMM_WORLD)?))
}

fn name_arg(p: *const c_char, what: &str) -> R<String> {
    crate::state::in_str(p, what)
}

mpi! {
    fn MPI_Session_init / PMPI_Session_init(info: c_int, errhandler: c_int, session_out: *mut c_int) {
        if session_out.is_null() {
            return err(MPI_ERR_ARG, "the output argument `session` is NULL");
        }
        crate::init::start_session()?;
        let mut s = st()?;
        crate::info::check(info)?;
        if let Err(e) = check_errhandler(&s, errhandler) {
            drop(s);
            crate::init::end_session()?;
            return Err(e);
        }
        let h = s.fresh(NEW_SESSION);
        s.sessions.insert(h, errhandler);
        drop(s);
        out(session_out, "session", h)
    }

    fn MPI_Session_finalize / PMPI_Session_finalize(session_p: *mut c_int) {
        let h = crate::state::read(session_p, "session")?;
        {
            let mut s = st()?;
            session(&mut s, h)?;
            s.sessions.remove(&h);
        }
        set_err_comm(MPI_COMM_WORLD);
        out(session_p, "session", MPI_SESSION_NULL)?;
        crate::init::end_session()
    }

    fn MPI_Session_get_num_psets / PMPI_Session_get_num_psets(session_h: c_int, _info: c_int, npset_names: *mut c_int) {
        session(&mut *st()?, session_h)?;
        out(npset_names, "npset_names", PSETS.len() as c_int)
    }

    fn MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(session_h: c_int, _info: c_int, n: c_int, pset_len: *mut c_int, pset_name: *mut c_char) {
        session(&mut *st()?, session_h)?;
        let Some(name) = usize::try_from(n).ok().and_then(|i| PSETS.get(i)) else {
            return err(MPI_ERR_ARG, format!("process set {n}: there are {}", PSETS.len()));
        };
        let cap = crate::state::read(pset_len, "pset_len")?;
        let need = name.len() as c_int + 1;
        // With a length of 0, the length needed (with the terminating NUL);
        // else as much of the name as fits, always terminated.
        if cap > 0 {
            if pset_name.is_null() {
                return err(MPI_ERR_ARG, "pset_name is NULL");
            }
            let k = name.len().min(cap as usize - 1);
            // SAFETY: the program passes `cap` writable bytes at `pset_name`,
            // and `k + 1 <= cap`.
            unsafe {
                std::ptr::copy_nonoverlapping(name.as_ptr(), pset_name as *mut u8, k);
                *pset_name.add(k) = 0;
            }
        }
        out(pset_len, "pset_len", need)
    }

    fn MPI_Session_get_pset_info / PMPI_Session_get_pset_info(session_h: c_int, pset_name: *const c_char, info: *mut c_int) {
        let name = name_arg(pset_name, "pset_name")?;
        let mut s = st()?;
        // The session last: its handler takes the error (the world lookup
        // in `pset` names the world).
        let members = pset(&mut s, &name);
        session(&mut s, session_h)?;
        let n = members?.len();
        let h = crate::info::create(vec![("mpi_size".to_string(), n.to_string())]);
        drop(s);
        out(info, "info", h)
    }

    fn MPI_Session_get_info / PMPI_Session_get_info(session_h: c_int, info_used: *mut c_int) {
        let mut s = st()?;
        session(&mut s, session_h)?;
        let level = level_name(crate::state::thread_level());
        let h = crate::info::create(vec![("thread_level".to_string(), level.to_string())]);
        drop(s);
        out(info_used, "info_used", h)
    }

    fn MPI_Group_from_session_pset / PMPI_Group_from_session_pset(session_h: c_int, pset_name: *const c_char, newgroup: *mut c_int) {
        let name = name_arg(pset_name, "pset_name")?;
        let mut s = st()?;
        let members = pset(&mut s, &name);
        session(&mut s, session_h)?;
        let members = members?;
        let g = s.new_group(members);
        drop(s);
        out(newgroup, "newgroup", g)
    }

    fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(group: c_int, stringtag: *const c_char, info: c_int, errhandler: c_int, newcomm: *mut c_int) {
        let (tag, world) = from_group_args(stringtag, info, errhandler)?;
        let members = st()?.group(group)?.clone();
        let members: Vec<usize> = members.iter().map(|&m| m as usize).collect();
        let c = world.create_from_group(&members, &tag)?;
        let h = crate::comm::add_comm(&mut *st()?, c, errhandler, None);
        out(newcomm, "newcomm", h)
    }

    fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(local_group: c_int, local_leader: c_int, remote_group: c_int, remote_leader: c_int, stringtag: *const c_char, info: c_int, errhandler: c_int, newintercomm: *mut c_int) {
        let (tag, world) = from_group_args(stringtag, info, errhandler)?;
        let (lg, rg) = {
            let s = st()?;
            (s.group(local_group)?.clone(), s.group(remote_group)?.clone())
        };
        let leader = |l: c_int, g: &[u32], what: &str| {
            usize::try_from(l).ok().filter(|&l| l < g.len()).ok_or_else(|| MpiErr {
                class: MPI_ERR_RANK,
                msg: format!("{what} {l} is not a rank of its group of {}", g.len()),
            })
        };
        let (ll, rl) = (leader(local_leader, &lg, "local_leader")?, leader(remote_leader, &rg, "remote_leader")?);
        // The local group's communicator, then, between the two leaders
        // only, the peer communicator the intercommunicator is made over
        // (both from groups, so no parent is needed); tags of kumi's own
        // after the program's, which a string tag cannot hold.
        let members = |g: &[u32]| g.iter().map(|&m| m as usize).collect::<Vec<_>>();
        let local = world.create_from_group(&members(&lg), &format!("{tag}\u{0}local"))?;
        let (lw, rw) = (lg[ll], rg[rl]);
        let me = world.rank() as u32;
        let (peer, rl_in_peer) = if me == lw {
            let pair = [lw.min(rw) as usize, lw.max(rw) as usize];
            let peer = world.create_from_group(&pair, &format!("{tag}\u{0}peer"))?;
            (peer, usize::from(rw > lw))
        } else {
            (local.clone(), 0)
        };
        let ic = kumi::inter::InterComm::create(&local, ll, &peer, rl_in_peer, 0)?;
        crate::comm::add_inter(MPI_COMM_WORLD, ic, newintercomm)?;
        let h = crate::state::read(newintercomm, "newintercomm")?;
        st()?.comm_entry(h)?.errh = errhandler;
        Ok(())
    }

    fn MPI_Session_create_errhandler / PMPI_Session_create_errhandler(f: Option<crate::state::ErrFn>, errhandler: *mut c_int) {
        let h = st()?.new_errhandler(f, |s| &mut s.errhs)?;
        out(errhandler, "errhandler", h)
    }

    fn MPI_Session_set_errhandler / PMPI_Session_set_errhandler(session_h: c_int, errhandler: c_int) {
        let mut s = st()?;
        check_errhandler(&s, errhandler)?;
        *session(&mut s, session_h)? = errhandler;
        Ok(())
    }

    fn MPI_Session_get_errhandler / PMPI_Session_get_errhandler(session_h: c_int, errhandler: *mut c_int) {
        let h = {
            let mut s = st()?;
            let h = *session(&mut s, session_h)?;
            s.errhandler_out(h)
        };
        out(errhandler, "errhandler", h)
    }

    fn MPI_Session_call_errhandler / PMPI_Session_call_errhandler(session_h: c_int, errorcode: c_int) {
        session(&mut *st()?, session_h)?;
        let e = MpiErr { class: errorcode, msg: format!("MPI_Session_call_errhandler raised error code {errorcode}") };
        crate::state::handle_error("MPI_Session_call_errhandler", session_h, e);
        Ok(())
    }
}

/// The name of a thread level, as `MPI_Info` values spell it.
pub(crate) fn level_name(level: c_int) -> &'static str {
    match level {
        MPI_THREAD_MULTIPLE => "MPI_THREAD_MULTIPLE",
        MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        _ => "MPI_THREAD_SINGLE",
    }
}
