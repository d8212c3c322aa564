//! Info objects (`MPI_Info_*`): key-value hints, in a table of their own
//! beside the library's state, because MPI 4 lets a program make and use
//! them before `MPI_Init` and after `MPI_Finalize` (MPI 4.1, section 11.2.1),
//! from any thread. A mutex guards the table: info calls are rare.

use crate::consts::*;
use crate::state::{in_str, out, out_str, read};
use crate::{err, R};
use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard};

/// The live info objects, by handle.
pub(crate) struct Infos {
    infos: HashMap<c_int, Vec<(String, String)>>,
    next: c_int,
}

static INFOS: Mutex<Option<Infos>> = Mutex::new(None);

/// The locked table.
pub(crate) struct Table(MutexGuard<'static, Option<Infos>>);

/// The table, made on first use with `MPI_INFO_ENV` in it (empty: kumi
/// passes no hints from its launcher).
pub(crate) fn table() -> Table {
    // A panic while the lock was held (caught at the ABI) left no entry
    // half-made: every change to the map is one insert, remove or push.
    let mut g = INFOS.lock().unwrap_or_else(|p| p.into_inner());
    g.get_or_insert_with(|| Infos {
        infos: HashMap::from([(MPI_INFO_ENV, Vec::new())]),
        next: 0,
    });
    Table(g)
}

impl std::ops::Deref for Table {
    type Target = Infos;
    fn deref(&self) -> &Infos {
        self.0.as_ref().expect("made in table()")
    }
}

impl std::ops::DerefMut for Table {
    fn deref_mut(&mut self) -> &mut Infos {
        self.0.as_mut().expect("made in table()")
    }
}

impl Infos {
    /// The entries of info `h`.
    pub(crate) fn entry(&mut self, h: c_int) -> R<&mut Vec<(String, String)>> {
        match self.infos.get_mut(&h) {
            Some(i) => Ok(i),
            None => err(
                MPI_ERR_INFO,
                format!("{h:#x} is not an info object (or it was freed)"),
            ),
        }
    }
}

/// A new info object holding `kv`.
pub(crate) fn create(kv: Vec<(String, String)>) -> c_int {
    let mut t = table();
    t.next += 1;
    let h = NEW_INFO + (t.next & 0x00ff_ffff);
    t.infos.insert(h, kv);
    h
}

/// An info argument: `MPI_INFO_NULL` or a live info object.
pub(crate) fn check(h: c_int) -> R<()> {
    if h != MPI_INFO_NULL {
        table().entry(h)?;
    }
    Ok(())
}

/// The job's size for `MPI_Info_create_env`, from the launcher's contract
/// (known before `MPI_Init`).
fn maxprocs() -> String {
    ["KUMI_SIZE", "PMI_SIZE", "PMIX_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok())
        .unwrap_or_else(|| "1".into())
}

fn check_key(k: &str) -> R<()> {
    if k.is_empty() || k.len() > MPI_MAX_INFO_KEY {
        return err(
            MPI_ERR_INFO_KEY,
            format!("info key {k:?} is empty or longer than MPI_MAX_INFO_KEY"),
        );
    }
    Ok(())
}

mpi! {
    // MPI-4: what kumi knows of how the program was started, the same
    // before, during and after MPI. No `thread_level`: MPI means the level
    // asked for at launch (`mpiexec -thread_level`), which kumi's launchers
    // do not take; the level in force is MPI_Query_thread's.
    fn MPI_Info_create_env / PMPI_Info_create_env(_argc: c_int, _argv: *mut *mut c_char, info: *mut c_int) {
        let args: Vec<String> = std::env::args().collect();
        let mut kv = vec![
            ("command".to_string(), args.first().cloned().unwrap_or_default()),
            ("argv".to_string(), args.get(1..).unwrap_or_default().join(" ")),
            ("maxprocs".to_string(), maxprocs()),
        ];
        if let Ok(d) = std::env::current_dir() {
            kv.push(("wdir".to_string(), d.display().to_string()));
        }
        kv.push(("host".to_string(), kumi::hostname()));
        kv.push(("arch".to_string(), std::env::consts::ARCH.to_string()));
        out(info, "info", create(kv))
    }

    fn MPI_Info_create / PMPI_Info_create(info: *mut c_int) {
        out(info, "info", create(Vec::new()))
    }

    fn MPI_Info_set / PMPI_Info_set(info: c_int, key: *const c_char, value: *const c_char) {
        let (k, v) = (in_str(key, "key")?, in_str(value, "value")?);
        check_key(&k)?;
        if v.len() > MPI_MAX_INFO_VAL {
            return err(MPI_ERR_INFO_VALUE, "info value longer than MPI_MAX_INFO_VAL");
        }
        let mut t = table();
        let i = t.entry(info)?;
        match i.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1 = v,
            None => i.push((k, v)),
        }
        Ok(())
    }

    fn MPI_Info_get / PMPI_Info_get(info: c_int, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) {
        let k = in_str(key, "key")?;
        check_key(&k)?;
        let v = table().entry(info)?.iter().find(|e| e.0 == k).map(|e| e.1.clone());
        match v {
            Some(v) => {
                out_str(value, valuelen.max(0) as usize + 1, std::ptr::null_mut(), &v)?;
                out(flag, "flag", 1)
            }
            None => out(flag, "flag", 0),
        }
    }

    fn MPI_Info_get_string / PMPI_Info_get_string(info: c_int, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) {
        let k = in_str(key, "key")?;
        let cap = read(buflen, "buflen")?;
        let v = table().entry(info)?.iter().find(|e| e.0 == k).map(|e| e.1.clone());
        match v {
            Some(v) => {
                if cap > 0 {
                    out_str(value, cap as usize, std::ptr::null_mut(), &v)?;
                }
                out(buflen, "buflen", v.len() as c_int + 1)?;
                out(flag, "flag", 1)
            }
            None => out(flag, "flag", 0),
        }
    }

    fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(info: c_int, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) {
        let k = in_str(key, "key")?;
        let v = table().entry(info)?.iter().find(|e| e.0 == k).map(|e| e.1.len());
        match v {
            Some(n) => {
                out(valuelen, "valuelen", n as c_int)?;
                out(flag, "flag", 1)
            }
            None => out(flag, "flag", 0),
        }
    }

    fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(info: c_int, nkeys: *mut c_int) {
        let n = table().entry(info)?.len();
        out(nkeys, "nkeys", n as c_int)
    }

    fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(info: c_int, n: c_int, key: *mut c_char) {
        let k = table().entry(info)?.get(n.max(0) as usize).filter(|_| n >= 0).map(|e| e.0.clone());
        match k {
            Some(k) => out_str(key, MPI_MAX_INFO_KEY + 1, std::ptr::null_mut(), &k),
            None => err(MPI_ERR_ARG, format!("info has no key number {n}")),
        }
    }

    fn MPI_Info_delete / PMPI_Info_delete(info: c_int, key: *const c_char) {
        let k = in_str(key, "key")?;
        let mut t = table();
        let i = t.entry(info)?;
        match i.iter().position(|e| e.0 == k) {
            Some(p) => {
                i.remove(p);
                Ok(())
            }
            None => err(MPI_ERR_INFO_NOKEY, format!("info has no key {k:?}")),
        }
    }

    fn MPI_Info_dup / PMPI_Info_dup(info: c_int, newinfo: *mut c_int) {
        let v = table().entry(info)?.clone();
        out(newinfo, "newinfo", create(v))
    }

    fn MPI_Info_free / PMPI_Info_free(info: *mut c_int) {
        let h = read(info, "info")?;
        if h == MPI_INFO_ENV || table().infos.remove(&h).is_none() {
            return err(MPI_ERR_INFO, format!("{h:#x} is not an info object the program created"));
        }
        out(info, "info", MPI_INFO_NULL)
    }
}
