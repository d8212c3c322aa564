#!/usr/bin/env python3
"""Generates kumi's Fortran binding (MPICH's Fortran ABI) from the MPI Forum's
machine-readable API description, filtered by what kumi implements in C.

    target/py/bin/python scripts/gen-fortran.py          # rewrite the outputs
    target/py/bin/python scripts/gen-fortran.py --check  # fail if they are stale

Reads:
  - the MPI Forum's API description: the `pympistandard` package (PyPI,
    pinned below; `./test.sh` installs it into target/py);
  - the functions kumi implements: every `MPI_X / PMPI_X` pair defined in
    crates/kumi-mpi/src, minus the stubs (src/stubs.rs).
Writes:
  - crates/kumi-mpi/include/mpif.h: every integer constant of kumi's mpi.h
    (the same values: MPICH's), the Fortran-only ones, and the common blocks
    of the sentinels, laid out as MPICH's (binary compatibility); valid in
    fixed and free source form;
  - crates/kumi-mpi/include/mpi.f90: the `mpi` module (mpif.h's constants
    and an explicit interface for every function the library exports);
  - crates/kumi-mpi/include/mpi_f08.f90: the `mpi_f08` module (typed
    handles, constants, sentinels bound to MPICH's symbols, callback
    interfaces, one generic interface per function the library exports);
  - crates/kumi-mpi/src/fortran/gen.rs: one wrapper per function of the
    standard's Fortran binding, exported under MPICH's eight names and, for
    `mpi_f08`, its two (`mpi_x_f08_`/`pmpir_x_f08_`: the same wrapper; or
    `mpi_x_f08ts_`, a wrapper that takes the choice buffers as descriptors
    and calls it: `fortran/f08.rs`). A
    function kumi implements becomes a call of its C form through the
    conversions of `fortran/mod.rs`; one it does not (or whose Fortran form
    needs what is not bound yet: callbacks with a Fortran calling
    convention, arrays of strings) fails naming itself.

Every rule is keyed on the standard's parameter kinds and types, never on a
function's name, but for the few functions the standard itself singles out
(the 1-based indices of MPI_Waitany and friends, MPI_Init's missing
arguments); those are listed in SPECIAL below.
"""
import argparse
import pathlib
import re
import sys

try:
    import pympistandard as std
except ImportError:
    sys.exit("gen-fortran: needs pympistandard==0.2.0 (target/py/bin/pip install pympistandard==0.2.0)")

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "crates/kumi-mpi/src"
OUT_RS = SRC / "fortran/gen.rs"
MPI_H = ROOT / "crates/kumi-mpi/include/mpi.h"
OUT_MPIF = ROOT / "crates/kumi-mpi/include/mpif.h"
OUT_F08 = ROOT / "crates/kumi-mpi/include/mpi_f08.f90"
OUT_MPI = ROOT / "crates/kumi-mpi/include/mpi.f90"

# The predefined attributes: Fortran names each by its C keyval plus one,
# and gets the value where C gets a pointer to it (MPICH's convention).
PREDEFINED_KEYVALS = {
    "MPI_TAG_UB", "MPI_HOST", "MPI_IO", "MPI_WTIME_IS_GLOBAL", "MPI_UNIVERSE_SIZE",
    "MPI_LASTUSEDCODE", "MPI_APPNUM", "MPI_WIN_BASE", "MPI_WIN_SIZE", "MPI_WIN_DISP_UNIT",
    "MPI_WIN_CREATE_FLAVOR", "MPI_WIN_MODEL",
}

# The handle types whose constants are integers in Fortran (MPICH's handles).
HANDLE_TYPES = {
    "MPI_Datatype", "MPI_Op", "MPI_Errhandler", "MPI_Comm", "MPI_Message", "MPI_Info",
    "MPI_Group", "MPI_Win", "MPI_Request", "MPI_Session", "MPI_File",
}

RUST_KEYWORDS = {"type", "ref", "in", "fn", "mod", "use", "loop", "match", "move", "self", "where"}

# Fortran function types whose calling convention is C's with every argument
# by reference: the Fortran procedure can be given to the C function as is.
SAME_CONVENTION = {
    "MPI_Op_create": "user_fn",
    "MPI_Op_create_c": "user_fn",
    "MPI_Comm_create_errhandler": "comm_errhandler_fn",
    "MPI_Win_create_errhandler": "win_errhandler_fn",
    "MPI_File_create_errhandler": "file_errhandler_fn",
    "MPI_Session_create_errhandler": "session_errhandler_fn",
}

# Written by hand in `fortran/mod.rs`: the keyvals' and generalized requests'
# callbacks are Fortran procedures, which the runtime calls by Fortran's
# convention;
# MPI_Pcontrol: variadic in C, one argument and no IERROR in Fortran.
HAND_WRITTEN = {
    "MPI_Comm_create_keyval", "MPI_Type_create_keyval", "MPI_Win_create_keyval", "MPI_Keyval_create",
    "MPI_Grequest_start", "MPI_Pcontrol",
}

# Lengths the standard leaves to the object (`*`), by function and argument.
LENGTHS = {("MPI_Cart_sub", "REMAIN_DIMS"): "fortran::cartdim(*comm)"}

# Where the standard's Fortran binding means something C's does not.
SPECIAL = {
    # Indices from 1 in Fortran.
    "MPI_Waitany": {"post_ok": ["fortran::index_out(index)"]},
    "MPI_Testany": {"post_ok": ["fortran::index_out(index)"]},
    "MPI_Waitsome": {"post_ok": ["fortran::indices_out(outcount, array_of_indices)"]},
    "MPI_Testsome": {"post_ok": ["fortran::indices_out(outcount, array_of_indices)"]},
}


def implemented():
    """kumi's C functions: name -> the Rust path of its PMPI_ entry."""
    stubs = set(re.findall(r'unsupported\("(P?MPI_\w+)"\)', (SRC / "stubs.rs").read_text()))
    found = {}
    for f in sorted(SRC.rglob("*.rs")):
        if f.name in ("stubs.rs",) or "fortran" in f.parts:
            continue
        rel = f.relative_to(SRC).with_suffix("")
        parts = [p for p in rel.parts if p not in ("lib", "mod")]
        path = "::".join(["crate"] + parts)
        text = f.read_text()
        for m in re.finditer(r"\b(MPI_\w+) (?:/|=>) (PMPI_\w+)\b", text):
            found[m.group(1)] = f"{path}::{m.group(2)}"
        for m in re.finditer(r'pub (?:unsafe )?extern "C" fn (MPI_\w+)\(', text):
            found.setdefault(m.group(1), f"{path}::{m.group(1)}")
    return {k: v for k, v in found.items() if k not in stubs}


def rust_name(n):
    n = n.lower()
    return n + "_" if n in RUST_KEYWORDS else n


class Unbound(Exception):
    """This function's Fortran form needs something not bound yet."""


def c_type(cparam):
    """The C declaration's type, without the parameter's name."""
    decl = str(cparam)
    name = cparam.name
    t = decl[: decl.rfind(name)].strip() if decl.rstrip("[]").endswith(name) else decl
    if decl.endswith("[]"):
        t += "[]"
    return t


def fortran_params(proc):
    """The Fortran side's parameters as Rust declares them (every argument by
    reference, then the strings' lengths): (name, type) pairs."""
    args, hidden = [], []
    for q in proc.express.f90.parameters:
        n = rust_name(q.name)
        ftype = q.type
        if ftype == "<type>":
            args.append((n, "*mut c_void"))
        elif ftype == "CHARACTER*(*)":
            args.append((n, "*mut c_char"))
            hidden.append((f"{n}_len", "usize"))
        elif ftype == "EXTERNAL":
            args.append((n, "*const c_void"))
        elif ftype.startswith("INTEGER") and "KIND=" in ftype:
            args.append((n, "*mut i64"))
        else:
            args.append((n, "*mut Fint"))
    return args + hidden


def wrapper(proc, cpath):
    """Rust source of the wrapper of `proc`, or raises Unbound."""
    name = proc._parseset["name"]
    f90 = proc.express.f90
    cparams = {p.name.lower(): p for p in proc.express.iso_c.parameters}
    pre, post, post_ok = [], [], []
    exprs = {}
    special = SPECIAL.get(name, {})
    ret = None
    keyval = next((rust_name(q.name) for q in f90.parameters if q._parseset["kind"] == "KEYVAL"), None)
    for q in f90.parameters:
        kind = q._parseset["kind"]
        direction = q._parseset["param_direction"]
        length = q._parseset["length"]
        n = rust_name(q.name)
        ftype = q.type
        if q.name == "IERROR":
            ret = n
            continue
        cp = cparams.get(q.name.lower())
        if cp is None:
            raise Unbound(f"{q.name} has no C counterpart")
        call = exprs.setdefault(cp.name, [])
        ct = c_type(cp)
        by_value = "*" not in ct and "[]" not in ct
        const = ct.startswith("const ")
        if ftype == "<type>":
            if kind == "C_BUFFER2":
                # MPI_Buffer_detach's address out: Fortran has no use for it
                # (and its argument is no pointer's room), as in MPICH.
                pre.append(f"let mut {n}_c: *mut c_void = std::ptr::null_mut();")
                call.append(f"&mut {n}_c as *mut *mut c_void as _")
            else:
                call.append(f"fortran::buf({n}) as _" if kind == "BUFFER" else f"{n} as _")
        elif ftype == "CHARACTER*(*)":
            if q.dimensions:
                raise Unbound("arrays of strings")
            if const or by_value:
                pre.append(f"let {n}_c = fortran::str_in({n}, {n}_len);")
                call.append(f"{n}_c.as_ptr() as _")
            else:
                pre.append(f"let mut {n}_c = fortran::str_buf({n}_len);")
                call.append(f"{n}_c.as_mut_ptr() as _")
                post.append(f"fortran::str_out({n}, {n}_len, &{n}_c);")
        elif ftype == "LOGICAL":
            if q.dimensions:
                lenv = LENGTHS.get((name, q.name))
                if lenv is None and length in (None, "*"):
                    raise Unbound("a LOGICAL array of unknown length")
                lenv = lenv or f"*{rust_name(length)}"
                pre.append(f"let mut {n}_c = fortran::logicals_in({n}, {lenv});")
                call.append(f"{n}_c.as_mut_ptr() as _")
                if direction != "in":
                    post.append(f"fortran::logicals_out({n}, &{n}_c);")
            elif by_value:
                call.append(f"fortran::logical_in(*{n})")
            else:
                pre.append(f"let mut {n}_c: c_int = 0;")
                call.append(f"&mut {n}_c")
                post.append(f"*{n} = fortran::logical_out({n}_c);")
        elif ftype == "EXTERNAL":
            if SAME_CONVENTION.get(name) != q.name.lower():
                raise Unbound("a Fortran callback")
            call.append(f"std::mem::transmute::<*const c_void, _>({n})")
        elif ftype.startswith("INTEGER"):
            if kind in ("ATTRIBUTE_VAL", "ATTRIBUTE_VAL_10", "EXTRA_STATE") and direction == "in":
                # The value itself, kept as C's `void*`.
                call.append(f"*{n} as isize as *mut c_void")
            elif kind == "ATTRIBUTE_VAL_10":
                # MPI-1's attribute out: C writes a `void*`, Fortran has an INTEGER.
                if keyval is None:
                    raise Unbound("an attribute without its keyval")
                pre.append(f"let mut {n}_c: i64 = 0;")
                call.append(f"&mut {n}_c as *mut i64 as *mut c_void")
                post_ok.append(f"fortran::attr_out(fortran::keyval(*{keyval}), &mut {n}_c, flag_c);")
                post.append(f"*{n} = {n}_c as Fint;")
            elif kind == "ATTRIBUTE_VAL":
                call.append(f"{n} as *mut c_void")
                if keyval is None:
                    raise Unbound("an attribute without its keyval")
                post_ok.append(f"fortran::attr_out(fortran::keyval(*{keyval}), {n}, flag_c);")
            elif kind == "FILE":
                if by_value:
                    call.append(f"crate::file::MPI_File_f2c(*{n})")
                else:
                    if direction == "out":
                        pre.append(f"let mut {n}_c: *mut c_void = std::ptr::null_mut();")
                    else:
                        pre.append(f"let mut {n}_c = crate::file::MPI_File_f2c(*{n});")
                    call.append(f"&mut {n}_c as *mut *mut c_void as _")
                    post.append(f"*{n} = crate::file::MPI_File_c2f({n}_c);")
            elif kind == "KEYVAL" and by_value:
                call.append(f"fortran::keyval(*{n})")
            elif kind == "STATUS":
                if const:
                    call.append(f"{n} as *const crate::MPI_Status")
                elif "," in q.dimensions:
                    call.append(f"fortran::statuses({n})")
                else:
                    call.append(f"fortran::status({n})")
            elif kind == "WEIGHT":
                call.append(f"fortran::weights({n})")
            elif by_value:
                call.append(f"*{n} as _")
            else:
                call.append(f"{n} as _")
        else:
            raise Unbound(f"Fortran type {ftype}")
    if ret is None:
        raise Unbound("no IERROR")
    call = []
    for cp in proc.express.iso_c.parameters:
        if cp.name in exprs:
            call += exprs[cp.name]
        elif cp._parseset["kind"] in ("ARGUMENT_COUNT", "ARGUMENT_LIST"):
            # MPI_Init's argc and argv, MPI_Info_create_env's.
            by_value = "*" not in c_type(cp) and "[]" not in c_type(cp)
            call.append("0" if by_value else "std::ptr::null_mut()")
        else:
            raise Unbound(f"C's {cp.name} has no Fortran counterpart")
    fname = name.upper()
    params = ", ".join(f"{n}: {t}" for n, t in fortran_params(proc))
    body = []
    body += pre
    body.append(f"let rc = {cpath}({', '.join(call)});")
    if post_ok or special.get("post_ok"):
        body.append("if rc == crate::consts::MPI_SUCCESS {")
        body += ["    " + p for p in post_ok]
        body += ["    " + p + ";" for p in special.get("post_ok", [])]
        body.append("}")
    body += post
    body.append(f"fortran::ierror({ret}, rc);")
    inner = "\n".join("        " + line for line in body)
    return params, f"""/// `{fname}`: `{name}` for Fortran.
#[allow(clippy::missing_safety_doc, unused_mut)]
unsafe extern "C" fn {name.lower()}({params}) {{
    // SAFETY: Fortran passes every argument by reference, valid for the
    // call, and each string's length after the others (`fortran` module).
    unsafe {{
{inner}
    }}
}}
"""


def unbound(proc, why):
    """A wrapper that fails naming the function, with the Fortran signature
    (so `ierror` is the argument the program passes as such)."""
    name = proc._parseset["name"]
    params = fortran_params(proc)
    ierror = next((rust_name(q.name) for q in proc.express.f90.parameters if q.name == "IERROR"), None)
    decl = ", ".join(f"{'_' if n != ierror else ''}{n}: {t}" for n, t in params)
    target = ierror or "std::ptr::null_mut()"
    return decl, f"""/// `{name.upper()}`: not bound for Fortran ({why}).
unsafe extern "C" fn {name.lower()}({decl}) {{
    // SAFETY: `ierror` is the program's, valid for one integer, or null.
    unsafe {{ fortran::unbound("{name.upper()}", {target}) }}
}}
"""


def names(fn):
    low = fn.lower()
    out = []
    for base in (low, "p" + low):
        out += [base, base + "_", base + "__", base.upper()]
    return out


def f08_names(fn, suffix):
    """`mpi_f08`'s names of `fn` (gfortran's mangling, MPICH's profiling
    names): `suffix` is `f08` or `f08ts` (with choice buffers)."""
    low = fn.lower()
    return [f"{low}_{suffix}_", f"pmpir{low[3:]}_{suffix}_"]


def is_choice(q):
    """An `mpi_f08` parameter that arrives as an array descriptor."""
    return "DIMENSION(..)" in q.type


# Each choice buffer's own count and datatype, by the standard's names.
BUFFER_PAIRS = {
    "buf": ("count", "datatype"),
    "buffer": ("count", "datatype"),
    "inbuf": ("incount", "datatype"),
    "outbuf": ("outcount", "datatype"),
    "sendbuf": ("sendcount", "sendtype"),
    "recvbuf": ("recvcount", "recvtype"),
    "origin_addr": ("origin_count", "origin_datatype"),
    "result_addr": ("result_count", "result_datatype"),
}


def f08_signature(proc):
    """`mpi_f08`'s parameters if they are `mpif.h`'s (names and order), so
    that the `mpif.h` wrapper serves both; else None."""
    a = proc._parseset["attributes"]
    if not a["f08_expressible"]:
        return None
    f08 = proc.express.f08.parameters
    if [q.name.lower() for q in f08] != [q.name.lower() for q in proc.express.f90.parameters]:
        return None
    return f08


def f08_wrapper(proc, params, f08):
    """The `_f08ts` wrapper of `proc` (some parameters choice buffers):
    each buffer as the C function needs it, then the `mpif.h` wrapper."""
    name = proc._parseset["name"]
    fname = name.upper()
    by = {q.name.lower(): q for q in f08}
    bufs = [rust_name(q.name) for q in f08 if is_choice(q)]
    scalars = {rust_name(q.name) for q in f08 if q._parseset["length"] is None}
    has_datatype = any(q._parseset["kind"] == "DATATYPE" for q in f08)
    pairs = {}
    for b in bufs:
        pair = BUFFER_PAIRS.get(b)
        if pair and all(x in scalars for x in pair):
            pairs[b] = pair
    used = [x for p in pairs.values() for x in p]
    pairs = {b: p for b, p in pairs.items() if all(used.count(x) == 1 for x in p)}
    pre, post, args = [], [], {}
    for b in bufs:
        q = by[b.rstrip("_")]
        if not has_datatype:
            # An address, not data: MPI_Get_address, a window's base.
            args[b] = f"fortran::f08::first({b})"
        elif q.asynchronous:
            if b in pairs:
                c, d = pairs[b]
                pre.append(f"let mut {c}_c = *{c};")
                pre.append(f"let mut {d}_c = *{d};")
                pre.append(
                    f'let {b}_s = match fortran::f08::Section::new("{fname}", {b}, &mut {c}_c, &mut {d}_c) '
                    f"{{ Ok(s) => s, Err(rc) => return fortran::ierror(ierror, rc) }};"
                )
                args[c] = f"&mut {c}_c"
                args[d] = f"&mut {d}_c"
            else:
                pre.append(
                    f'let {b}_s = match fortran::f08::Section::contiguous("{fname}", {b}) '
                    f"{{ Ok(s) => s, Err(rc) => return fortran::ierror(ierror, rc) }};"
                )
            args[b] = f"{b}_s.addr()"
        else:
            back = "true" if q._parseset["param_direction"] != "in" else "false"
            pre.append(f"let mut {b}_c = fortran::f08::Copied::new({b}, {back});")
            args[b] = f"{b}_c.addr()"
            post.append(f"{b}_c.finish();")
    decl = ", ".join(f"{n}: {'*const fortran::f08::Desc' if n in bufs else t}" for n, t in params)
    call = ", ".join(args.get(n, n) for n, _ in params)
    body = pre + [f"{name.lower()}({call});"] + post
    inner = "\n".join("        " + line for line in body)
    return decl, f"""/// `{fname}` for `use mpi_f08`: the choice buffers by descriptor.
#[allow(clippy::missing_safety_doc, unused_mut)]
unsafe extern "C" fn {name.lower()}_f08ts({decl}) {{
    // SAFETY: as for the `mpif.h` wrapper; each buffer a descriptor
    // gfortran passed (`fortran::f08`).
    unsafe {{
{inner}
    }}
}}
"""


def kind8(t):
    """A Fortran type with the three 8-byte integer kinds made one (what a
    generic interface can tell apart: type, kind and rank)."""
    return re.sub(r"INTEGER\(KIND=MPI_(COUNT|ADDRESS|OFFSET)_KIND\)", "INTEGER*8", t)


def large_form(proc):
    """The large-count (`_c`) form of `proc` in `mpi_f08` as (its C name,
    its `mpi_f08` parameters, whether it has a generic name of its own), or
    None: where the standard gives none, or where it would be no different
    to a generic interface from the `INTEGER` form (`MPI_Type_get_extent`:
    `MPI_ADDRESS_KIND` and `MPI_COUNT_KIND` are one kind; MPICH leaves the
    same ones out)."""
    if not proc.has_embiggenment() or not proc._parseset["attributes"]["f08_expressible"]:
        return None
    name = proc._parseset["name"]
    big = proc.express.embiggen
    own = not str(big.f08).startswith(name + "(")
    sig = [(kind8(q.type), q._parseset["length"] is not None) for q in big.f08.parameters]
    if not own and sig == [(kind8(q.type), q._parseset["length"] is not None) for q in proc.express.f08.parameters]:
        return None
    return name + "_c", big.f08.parameters, own


class LargeParam:
    """A large-count `mpi_f08` parameter `q` as `mpif.h` would declare it:
    outside choice buffers `mpi_f08`'s procedures take `mpif.h`'s arguments
    by reference (a handle is its integer, a status the five integers of the
    C layout), so `wrapper` serves both. `f90` is the `INTEGER` form's
    parameter of the same name, if any: the same array shape."""

    def __init__(self, q, f90):
        self.name = q.name.upper()
        self._parseset = q._parseset
        t = q.type
        if f90 is not None:
            self.dimensions = f90.dimensions
        else:
            self.dimensions = "(*)" if q._parseset["length"] is not None else ""
        if is_choice(q):
            self.type = "<type>"
        elif t.startswith("INTEGER") or f90 is None:
            self.type = t.split(",")[0]
        else:
            self.type = f90.type


class LargeProc:
    """A large-count form seen as a procedure of its own, `MPI_X_c`, for
    `wrapper`, `unbound` and `f08_wrapper`."""

    def __init__(self, proc, cname, params):
        by_name = {q.name.lower(): q for q in proc.express.f90.parameters}
        f90 = type("F90", (), {"parameters": [LargeParam(q, by_name.get(q.name.lower())) for q in params]})
        self._parseset = dict(proc._parseset, name=cname)
        self.express = type("Express", (), {"f90": f90, "iso_c": proc.express.embiggen.iso_c})


# The large-count forms the library exports: name -> (the generic name,
# the specific one). MPICH's symbols: `mpi_x_f08_large_`, `mpi_x_f08ts_large_`.
F08_LARGE = {}


def large_wrappers(impl):
    """The wrappers of every large-count form: (Rust source, how many are
    bound, how many not)."""
    out, bound, unbound_n = [], 0, 0
    for key in sorted(std.PROCEDURES):
        proc = std.PROCEDURES[key]
        form = large_form(proc)
        if form is None:
            continue
        cname, params, own = form
        name = proc._parseset["name"]
        lp = LargeProc(proc, cname, params)
        choice = any(is_choice(q) for q in params)
        suffix = "f08ts" if choice else "f08"
        exported = [f"{name.lower()}_{suffix}_large_", f"pmpir{name.lower()[3:]}_{suffix}_large_"]
        cpath = impl.get(cname)
        try:
            if cpath is None:
                raise Unbound("kumi does not implement it")
            fparams, src = wrapper(lp, cpath)
            bound += 1
        except Unbound as e:
            fparams, src = unbound(lp, e)
            unbound_n += 1
            choice = False  # fails naming itself whatever its arguments are
        out.append(src)
        quoted = " ".join(f'"{n}"' for n in exported)
        if choice:
            decl, ts = f08_wrapper(lp, fortran_params(lp), params)
            out.append(ts)
            out.append(f"fortran_names!({cname.lower()}_f08ts({decl}); {quoted});")
        else:
            out.append(f"fortran_names!({cname.lower()}({fparams}); {quoted});")
        out.append("")
        F08_LARGE[name] = (cname if own else name, f"{name}_{suffix}_large")
    return "\n".join(out), bound, unbound_n


# The functions of `mpi_f08` the library exports: name -> "f08" | "f08ts".
F08_BOUND = {}
# The functions of `mpif.h` and `use mpi` the library exports (generated
# and hand-written) that the standard expresses for Fortran 90.
F90_EXPORTED = HAND_WRITTEN | {"MPI_Wtime", "MPI_Wtick", "MPI_Aint_add", "MPI_Aint_diff"}


def generate():
    std.use_api_version(1)
    impl = implemented()
    out = [
        "//! Generated by `scripts/gen-fortran.py` from the MPI Forum's API",
        "//! description (pympistandard) and the functions kumi implements. Do not",
        "//! edit: rerun the script.",
        "#![allow(non_snake_case, unused_variables, clippy::all)]",
        "",
        "use super::{fortran_entry, fortran_names, Fint};",
        "use crate::fortran;",
        "#[allow(unused_imports)]",
        "use std::ffi::{c_char, c_int, c_void};",
        "",
    ]
    stats = {"bound": 0, "unbound": 0, "missing": 0}
    why_all = {}
    for key in sorted(std.PROCEDURES):
        proc = std.PROCEDURES[key]
        a = proc._parseset["attributes"]
        name = proc._parseset["name"]
        if not a["f90_expressible"] or a["callback"] or a["predefined_function"] or a["not_with_mpif"]:
            continue
        if name in HAND_WRITTEN:
            continue
        if proc.express.f90.return_type:
            continue  # MPI_Wtime and friends: `fortran/mod.rs`.
        cpath = impl.get(name)
        try:
            if cpath is None:
                stats["missing"] += 1
                raise Unbound("kumi does not implement it")
            params, src = wrapper(proc, cpath)
            stats["bound"] += 1
        except Unbound as e:
            if cpath is not None:
                stats["unbound"] += 1
                why_all[name] = str(e)
            params, src = unbound(proc, e)
        out.append(src)
        F90_EXPORTED.add(name)
        all_names = names(name)
        f08 = f08_signature(proc)
        if f08 is not None:
            if not any(is_choice(q) for q in f08):
                all_names += f08_names(name, "f08")
                F08_BOUND[name] = "f08"
            elif cpath is None or name in why_all:
                # Fails naming itself whatever its arguments are.
                all_names += f08_names(name, "f08ts")
                F08_BOUND[name] = "f08ts"
            else:
                decl, ts = f08_wrapper(proc, fortran_params(proc), f08)
                out.append(ts)
                quoted = " ".join(f'"{n}"' for n in f08_names(name, "f08ts"))
                out.append(f"fortran_names!({name.lower()}_f08ts({decl}); {quoted});")
                F08_BOUND[name] = "f08ts"
        quoted = " ".join(f'"{n}"' for n in all_names)
        out.append(f"fortran_names!({name.lower()}({params}); {quoted});")
        out.append("")
    src, stats["large"], stats["large_unbound"] = large_wrappers(impl)
    out.append(src)
    return "\n".join(out), stats, why_all


def c_constants():
    """kumi's mpi.h integer constants, in order: (name, value)."""
    return [(n, v) for n, v, _ in typed_constants()]


def typed_constants():
    """kumi's mpi.h integer constants, in order: (name, value, handle type
    or None)."""
    raw = {}
    types = {}
    order = []
    for line in MPI_H.read_text().splitlines():
        m = re.match(r"#define\s+(MPI_\w+)\s+(.+?)\s*(?:/[*/].*)?$", line)
        if not m:
            continue
        name, val = m.groups()
        cast = re.fullmatch(r"\(\((\w+)\)\s*(-?(?:0x[0-9a-fA-F]+|\d+))\)", val)
        if cast:
            if cast.group(1) not in HANDLE_TYPES:
                continue
            types[name] = cast.group(1)
            val = cast.group(2)
        val = val.strip("()")
        if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", val):
            v = int(val, 0)
            if v > 0x7FFFFFFF:
                v -= 1 << 32
        elif val in raw:
            v = raw[val]
            if val in types:
                types[name] = types[val]
        else:
            continue
        if not -(1 << 31) <= v < (1 << 31) or name.startswith("MPI_T_"):
            continue
        raw[name] = v
        order.append(name)
    return [(n, raw[n], types.get(n)) for n in order]


def fortran_value(name, v):
    """The Fortran value of C constant `name` (see `mpif_h`)."""
    if name in PREDEFINED_KEYVALS:
        return v + 1  # Fortran's keyval of the attribute (see `fortran::keyval`)
    if re.fullmatch(r"MPI_MAX_\w+_(STRING|NAME|KEY|VAL)", name):
        return v - 1  # characters, without C's terminating NUL
    return v


def mpif_h(externals=True):
    """mpif.h: fixed form with every line a valid free-form line too.
    Without `externals`, the lines declaring the predefined callbacks and
    functions are left out (the `mpi` module declares them by interfaces)."""
    out = [
        "! kumi's mpif.h: generated by scripts/gen-fortran.py from kumi's mpi.h",
        "! (MPICH's values and sentinel blocks). Do not edit: rerun the script.",
        "! Valid in fixed and free source form.",
    ]

    def param(kind, name, value):
        out.append(f"       {kind} {name}")
        out.append(f"       PARAMETER ({name}={value})")

    param("INTEGER", "MPI_SOURCE", 3)
    param("INTEGER", "MPI_TAG", 4)
    param("INTEGER", "MPI_ERROR", 5)
    param("INTEGER", "MPI_STATUS_SIZE", 5)
    for name, kind in [("MPI_ADDRESS_KIND", 8), ("MPI_OFFSET_KIND", 8), ("MPI_COUNT_KIND", 8),
                       ("MPI_INTEGER_KIND", 4)]:
        param("INTEGER", name, kind)
    param("LOGICAL", "MPI_SUBARRAYS_SUPPORTED", ".FALSE.")
    param("LOGICAL", "MPI_ASYNC_PROTECTS_NONBLOCKING", ".FALSE.")
    skip = {"MPI_SOURCE", "MPI_TAG", "MPI_ERROR", "MPI_STATUS_SIZE"}
    for name, v in c_constants():
        if name in skip:
            continue
        param("INTEGER", name, fortran_value(name, v))
    out += [
        "       INTEGER MPI_BOTTOM, MPI_IN_PLACE",
        "       INTEGER MPI_STATUS_IGNORE(MPI_STATUS_SIZE)",
        "       INTEGER MPI_STATUSES_IGNORE(MPI_STATUS_SIZE,1)",
        "       INTEGER MPI_ERRCODES_IGNORE(1)",
        "       CHARACTER*1 MPI_ARGVS_NULL(1,1)",
        "       CHARACTER*1 MPI_ARGV_NULL(1)",
        "       INTEGER MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY",
        "       COMMON /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE",
        "       COMMON /MPIPRIV2/ MPI_STATUSES_IGNORE, MPI_ERRCODES_IGNORE",
        "       COMMON /MPIPRIVC/ MPI_ARGVS_NULL, MPI_ARGV_NULL",
        "       COMMON /MPIFCMB5/ MPI_UNWEIGHTED",
        "       COMMON /MPIFCMB9/ MPI_WEIGHTS_EMPTY",
        "       SAVE /MPIPRIV1/, /MPIPRIV2/, /MPIPRIVC/, /MPIFCMB5/, /MPIFCMB9/",
    ]
    if externals:
        out += MPIF_EXTERNALS
    else:
        out += MPIF_EXTERNALS[:-2]  # the predefined callbacks only
    for line in out:
        if len(line) > 72:
            raise SystemExit(f"gen-fortran: mpif.h line longer than 72 columns: {line}")
    return "\n".join(out) + "\n"


# mpif.h's declarations of the predefined callbacks, then of its functions.
MPIF_EXTERNALS = [
        "       EXTERNAL MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, MPI_DUP_FN",
        "       EXTERNAL MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN",
        "       EXTERNAL MPI_COMM_DUP_FN",
        "       EXTERNAL MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN",
        "       EXTERNAL MPI_TYPE_DUP_FN",
        "       EXTERNAL MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN",
        "       EXTERNAL MPI_WIN_DUP_FN",
        "       EXTERNAL MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK",
        "       DOUBLE PRECISION MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK",
]


# `mpi_f08`'s procedures written by hand in `fortran/mod.rs`, by name.
F08_HAND_WRITTEN = {
    "MPI_Comm_create_keyval": "f08", "MPI_Type_create_keyval": "f08", "MPI_Win_create_keyval": "f08",
    "MPI_Pcontrol": "f08", "MPI_Wtime": "f08", "MPI_Wtick": "f08", "MPI_Aint_add": "f08",
    "MPI_Aint_diff": "f08", "MPI_Grequest_start": "f08",
}

# `mpi_f08`'s sentinels: (declaration, the symbol it is bound to:
# MPICH's names, defined by `fortran::f08::objects`).
F08_SENTINELS = [
    ("INTEGER :: MPI_BOTTOM", "MPIR_F08_MPI_BOTTOM"),
    ("INTEGER :: MPI_IN_PLACE", "MPIR_F08_MPI_IN_PLACE"),
    ("TYPE(MPI_Status) :: MPI_STATUS_IGNORE", "MPIR_F08_MPI_STATUS_IGNORE_OBJ"),
    ("TYPE(MPI_Status) :: MPI_STATUSES_IGNORE(1)", "MPIR_F08_MPI_STATUSES_IGNORE_OBJ"),
    ("INTEGER :: MPI_UNWEIGHTED(1)", "__mpi_f08_link_constants_MOD_mpi_unweighted"),
    ("INTEGER :: MPI_WEIGHTS_EMPTY(1)", "__mpi_f08_link_constants_MOD_mpi_weights_empty"),
    ("INTEGER :: MPI_ERRCODES_IGNORE(1)", "__mpi_f08_link_constants_MOD_mpi_errcodes_ignore"),
    ("CHARACTER(LEN=1) :: MPI_ARGV_NULL(1)", "__mpi_f08_link_constants_MOD_mpi_argv_null"),
    ("CHARACTER(LEN=1) :: MPI_ARGVS_NULL(1,1)", "__mpi_f08_link_constants_MOD_mpi_argvs_null"),
]

# The predefined callbacks: name -> the abstract interface they have.
F08_CALLBACKS = {
    "MPI_COMM_NULL_COPY_FN": "MPI_Comm_copy_attr_function",
    "MPI_COMM_DUP_FN": "MPI_Comm_copy_attr_function",
    "MPI_COMM_NULL_DELETE_FN": "MPI_Comm_delete_attr_function",
    "MPI_TYPE_NULL_COPY_FN": "MPI_Type_copy_attr_function",
    "MPI_TYPE_DUP_FN": "MPI_Type_copy_attr_function",
    "MPI_TYPE_NULL_DELETE_FN": "MPI_Type_delete_attr_function",
    "MPI_WIN_NULL_COPY_FN": "MPI_Win_copy_attr_function",
    "MPI_WIN_DUP_FN": "MPI_Win_copy_attr_function",
    "MPI_WIN_NULL_DELETE_FN": "MPI_Win_delete_attr_function",
}


def fortran_lines(text, indent):
    """Free-form lines of `text`, each at most 132 columns (continued with &)."""
    out = []
    for line in text.splitlines():
        line = indent + line.rstrip()
        lead = " " * (len(line) - len(line.lstrip()) + 4)
        while len(line) > 120:
            cut = line.rfind(", ", 0, 118) + 1
            out.append(line[:cut] + " &")
            line = lead + line[cut:].lstrip()
        out.append(line)
    return out


def f08_procedure(expr, specific, abstract=False):
    """An interface body from the standard's `mpi_f08` expression: the
    procedure renamed `specific`, its declarations, USE lines first."""
    lines = str(expr).splitlines()
    head = lines[0].strip()
    if head == "ABSTRACT INTERFACE":
        lines = lines[1:]
        head = lines[0].strip()
    decls = [l.strip() for l in lines[1:]]
    m = re.fullmatch(r"(?:(.+?)\s+)?(\w+)\((.*)\)", head)
    rtype, _, args = m.groups()
    uses = [d for d in decls if d.startswith("USE")]
    rest = [d for d in decls if not d.startswith("USE")]
    kind = "FUNCTION" if rtype else "SUBROUTINE"
    body = [f"{kind} {specific}({args})" + (" RESULT(res)" if rtype else "")]
    body += ["    " + u for u in uses]
    body += ["    IMPORT", "    IMPLICIT NONE"]
    body += ["    " + d for d in rest]
    if rtype:
        body.append(f"    {rtype} :: res")
    body.append(f"END {kind} {specific}")
    return fortran_lines("\n".join(body), "    ")


def mpi_f08():
    """The `mpi_f08` module: its types, constants, sentinels, callback
    interfaces, and one generic interface per procedure the library exports."""
    handles = sorted(HANDLE_TYPES)
    out = [
        "! kumi's mpi_f08 module: generated by scripts/gen-fortran.py from the MPI",
        "! Forum's API description and kumi's mpi.h (MPICH's values and symbols).",
        "! Do not edit: rerun the script.",
        "MODULE mpi_f08",
        "USE, INTRINSIC :: ISO_C_BINDING, ONLY : C_PTR",
        "IMPLICIT NONE",
        "PRIVATE :: C_PTR",
        "",
    ]
    for h in handles:
        out += [f"TYPE, BIND(C) :: {h}", "    INTEGER :: MPI_VAL", f"END TYPE {h}"]
    # The C struct's layout, so a status passes to C as it is.
    out += [
        "TYPE, BIND(C) :: MPI_Status",
        "    INTEGER :: count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR",
        "END TYPE MPI_Status",
        "",
    ]
    ints = [("MPI_SOURCE", 3), ("MPI_TAG", 4), ("MPI_ERROR", 5), ("MPI_STATUS_SIZE", 5),
            ("MPI_ADDRESS_KIND", 8), ("MPI_OFFSET_KIND", 8), ("MPI_COUNT_KIND", 8),
            ("MPI_INTEGER_KIND", 4)]
    for n, v in ints:
        out.append(f"INTEGER, PARAMETER :: {n} = {v}")
    out.append("LOGICAL, PARAMETER :: MPI_SUBARRAYS_SUPPORTED = .TRUE.")
    out.append("LOGICAL, PARAMETER :: MPI_ASYNC_PROTECTS_NONBLOCKING = .FALSE.")
    skip = {n for n, _ in ints}
    for name, v, htype in typed_constants():
        if name in skip:
            continue
        if htype:
            out.append(f"TYPE({htype}), PARAMETER :: {name} = {htype}({v})")
        else:
            out.append(f"INTEGER, PARAMETER :: {name} = {fortran_value(name, v)}")
    out.append("")
    for decl, sym in F08_SENTINELS:
        t, n = decl.split(" :: ")
        out.append(f"{t}, BIND(C, NAME=\"{sym}\") :: {n}")
    out.append("")
    abstract = []
    for key in sorted(std.CALLBACKS):
        cb = std.CALLBACKS[key]
        a = cb._parseset["attributes"]
        if key.startswith("mpi_t_") or not a["f08_expressible"]:
            continue
        abstract += f08_procedure(cb.express.f08, cb._parseset["name"])
        if cb.has_embiggenment():
            big = cb.express.embiggen.f08
            abstract += f08_procedure(big, re.search(r"(\w+)\(", str(big)).group(1))
    out += ["ABSTRACT INTERFACE"] + abstract + ["END INTERFACE", ""]
    by_iface = {}
    for n, iface in F08_CALLBACKS.items():
        by_iface.setdefault(iface, []).append(n)
    for iface, ns in by_iface.items():
        out.append(f"PROCEDURE({iface}) :: {', '.join(ns)}")
    out.append("")
    # Handles compare by their integers (`fortran::f08::handle_eq`).
    for op, suffix in (("==", "eq"), ("/=", "ne")):
        out.append(f"INTERFACE OPERATOR({op})")
        for h in handles:
            f = f"kumi_f08_{h[4:].lower()}_{suffix}"
            out += [
                f"    LOGICAL FUNCTION {f}(a, b)",
                f"        IMPORT :: {h}",
                f"        TYPE({h}), INTENT(IN) :: a, b",
                f"    END FUNCTION {f}",
            ]
        out.append("END INTERFACE")
    out.append("")
    bound = dict(F08_BOUND)
    bound.update(F08_HAND_WRITTEN)
    for name in sorted(bound):
        proc = std.PROCEDURES[name.lower()]
        specific = f"{name}_{bound[name]}"
        out.append(f"INTERFACE {name}")
        out += f08_procedure(proc.express.f08, specific)
        generic, large = F08_LARGE.get(name, (None, None))
        if generic == name:
            out += f08_procedure(proc.express.embiggen.f08, large)
        out.append(f"END INTERFACE {name}")
        if generic not in (None, name):
            out.append(f"INTERFACE {generic}")
            out += f08_procedure(proc.express.embiggen.f08, large)
            out.append(f"END INTERFACE {generic}")
    out.append("END MODULE mpi_f08")
    return "\n".join(out) + "\n"


def f90_interface(expr):
    """An explicit interface body from the standard's `mpif.h`/`use mpi`
    expression: a choice buffer (`<type>`) takes any type, kind and rank
    (gfortran's NO_ARG_CHECK, as MPICH's module does)."""
    lines = str(expr).splitlines()
    head = lines[0].strip()
    m = re.fullmatch(r"(?:(.+?)\s+)?(\w+)\((.*)\)", head)
    rtype, name, args = m.groups()
    kind = "FUNCTION" if rtype else "SUBROUTINE"
    body = [f"{kind} {name}({args})" + (" RESULT(res)" if rtype else ""), "    IMPORT", "    IMPLICIT NONE"]
    for d in lines[1:]:
        d = d.strip()
        if d.startswith("<type>"):
            for v in d[len("<type>"):].split(","):
                v = v.strip()
                n = v.split("(")[0]
                body.append(f"    !GCC$ ATTRIBUTES NO_ARG_CHECK :: {n}")
                body.append(f"    TYPE(*), DIMENSION(*) :: {n}")
        elif d.startswith("CHARACTER*(*)"):
            body.append("    CHARACTER(LEN=*) :: " + d[len("CHARACTER*(*)"):].strip())
        else:
            m2 = re.match(r"(INTEGER\(KIND=\w+\)|DOUBLE PRECISION|INTEGER|LOGICAL|EXTERNAL)\s+(.*)", d)
            body.append(f"    {m2.group(1)} :: {m2.group(2)}")
    if rtype:
        body.append(f"    {rtype} :: res")
    body.append(f"END {kind} {name}")
    return fortran_lines("\n".join(body), "    ")


def mpi_module(exported):
    """The `mpi` module: `mpif.h`'s constants and sentinels, and an explicit
    interface for each function of `exported` (names) the standard
    expresses for Fortran 90."""
    out = [
        "! kumi's `mpi` module: generated by scripts/gen-fortran.py (the constants",
        "! and sentinels of mpif.h, and an explicit interface for every function",
        "! the library exports). Do not edit: rerun the script.",
        "MODULE mpi",
        "IMPLICIT NONE",
    ]
    out += mpif_h(externals=False).splitlines()[3:]
    out.append("INTERFACE")
    for name in sorted(exported):
        proc = std.PROCEDURES[name.lower()]
        out += f90_interface(proc.express.f90)
    out += ["END INTERFACE", "END MODULE mpi"]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the outputs are stale")
    args = ap.parse_args()
    rs, stats, why = generate()
    outputs = {OUT_RS: rs, OUT_MPIF: mpif_h(), OUT_F08: mpi_f08(), OUT_MPI: mpi_module(F90_EXPORTED)}
    if args.check:
        stale = [str(p.relative_to(ROOT)) for p, text in outputs.items() if not p.exists() or p.read_text() != text]
        if stale:
            sys.exit(f"gen-fortran: {', '.join(stale)} stale: rerun scripts/gen-fortran.py")
        return
    for p, text in outputs.items():
        p.write_text(text)
    print(
        f"gen-fortran: {stats['bound']} functions bound, {stats['unbound']} implemented in C "
        f"but not bound for Fortran yet, {stats['missing']} not implemented; "
        f"large-count forms in mpi_f08: {stats['large']} bound, {stats['large_unbound']} not implemented"
    )
    for n, w in sorted(why.items()):
        print(f"  not bound: {n}: {w}")


if __name__ == "__main__":
    main()
