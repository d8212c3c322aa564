//! The DGEMM that `lu` runs on: faer's own kernels, or
//! OpenBLAS loaded at run time when it is installed.
//!
//! `KUMI_BLAS` picks: `faer` (pure Rust, always there; AVX-512 or AVX2 chosen
//! at run time), `openblas` (`libopenblas.so.0`, an error if it cannot be
//! loaded), or `auto` (the default: OpenBLAS if it loads, else faer).
//!
//! OpenBLAS picks its kernel from the CPU model, and Debian's 0.3.21 does not
//! know this machine's: it falls back to its SSE3 "Prescott" kernel, 5x slower
//! (`../shared/ANCHORS.md`). So before the library is loaded, and only if the
//! user has not chosen, [`prepare_env`] names the kernel the CPU's features
//! allow (`OPENBLAS_CORETYPE=SkylakeX` with AVX-512, `Haswell` with AVX2+FMA)
//! and asks for one thread (each rank owns one core). The kernel OpenBLAS
//! really uses is read back from the library and printed with every figure.
//!
//! OpenBLAS's kernel keeps its speed on the LU's rank-k updates, where
//! faer's loses some once C no longer fits the caches (docs/BENCHMARKS.md,
//! "Figures moved out of the code").

use crate::figure::Failure;
use faer::{Accum, MatMut, MatRef, Par};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// `cblas_dgemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`.
type CblasDgemm = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    f64,
    *const f64,
    c_int,
    *const f64,
    c_int,
    f64,
    *mut f64,
    c_int,
);
type GetName = unsafe extern "C" fn() -> *const c_char;

// CBLAS enumeration values (the CBLAS interface's own constants).
const COL_MAJOR: c_int = 102;
const NO_TRANS: c_int = 111;

struct OpenBlas {
    dgemm: CblasDgemm,
    name: String,
}

enum Backend {
    Faer,
    OpenBlas(OpenBlas),
}

static BACKEND: OnceLock<Result<Backend, String>> = OnceLock::new();

/// Sets `OPENBLAS_CORETYPE` and `OPENBLAS_NUM_THREADS` for this process when
/// the user has not (see the module doc). Call it while the process has one
/// thread (before `kumi::init`): the environment is not safe to change while
/// other threads may read it.
pub fn prepare_env() {
    if std::env::var_os("OPENBLAS_CORETYPE").is_none() {
        if let Some(core) = openblas_core() {
            std::env::set_var("OPENBLAS_CORETYPE", core);
        }
    }
    if std::env::var_os("OPENBLAS_NUM_THREADS").is_none() {
        std::env::set_var("OPENBLAS_NUM_THREADS", "1");
    }
}

/// The OpenBLAS kernel this CPU's features allow.
fn openblas_core() -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some("SkylakeX");
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some("Haswell");
        }
    }
    None
}

fn faer_name() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "faer 0.23 (private-gemm-x86, AVX-512F)".into();
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return "faer 0.23 (private-gemm-x86, AVX2+FMA)".into();
        }
    }
    "faer 0.23 (portable SIMD)".into()
}

/// Loads `libopenblas.so.0` and its two routines.
fn load_openblas() -> Result<OpenBlas, String> {
    let lib = c"libopenblas.so.0";
    // SAFETY: dlopen with a NUL-terminated name; the handle is never closed,
    // so the function pointers taken from it stay valid for the process.
    let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        // SAFETY: dlerror returns NULL or a NUL-terminated message.
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            "not found".to_string()
        } else {
            // SAFETY: non-null, NUL-terminated, read before any other dl* call.
            unsafe { CStr::from_ptr(why) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(format!(
            "cannot load libopenblas.so.0 ({why}); install it with \
             `apt-get install libopenblas0-serial` or set KUMI_BLAS=faer"
        ));
    }
    let sym = |name: &CStr| -> Result<*mut c_void, String> {
        // SAFETY: `h` is a live handle and `name` is NUL-terminated.
        let p = unsafe { libc::dlsym(h, name.as_ptr()) };
        if p.is_null() {
            Err(format!(
                "libopenblas.so.0 has no {}",
                name.to_string_lossy()
            ))
        } else {
            Ok(p)
        }
    };
    let g = sym(c"cblas_dgemm")?;
    // SAFETY: this symbol is the CBLAS routine, whose C signature is the type above.
    let dgemm = unsafe { std::mem::transmute::<*mut c_void, CblasDgemm>(g) };
    let text = |name: &CStr| -> String {
        match sym(name) {
            Ok(p) => {
                // SAFETY: OpenBLAS's `char *openblas_get_*(void)` functions
                // have this signature.
                let f = unsafe { std::mem::transmute::<*mut c_void, GetName>(p) };
                // SAFETY: they take nothing and return a static string or NULL.
                let s = unsafe { f() };
                if s.is_null() {
                    "?".into()
                } else {
                    // SAFETY: as above.
                    unsafe { CStr::from_ptr(s) }
                        .to_string_lossy()
                        .trim()
                        .to_string()
                }
            }
            Err(_) => "?".into(),
        }
    };
    let core = text(c"openblas_get_corename");
    let config = text(c"openblas_get_config");
    Ok(OpenBlas {
        dgemm,
        name: format!("OpenBLAS ({config}; kernel {core})"),
    })
}

fn backend() -> Result<&'static Backend, Failure> {
    let b = BACKEND.get_or_init(
        || match std::env::var("KUMI_BLAS").as_deref().unwrap_or("auto") {
            "faer" => Ok(Backend::Faer),
            "openblas" => load_openblas().map(Backend::OpenBlas),
            "auto" | "" => Ok(load_openblas()
                .map(Backend::OpenBlas)
                .unwrap_or(Backend::Faer)),
            other => Err(format!(
                "KUMI_BLAS={other}: expected auto, faer or openblas"
            )),
        },
    );
    b.as_ref().map_err(|e| Failure::Usage(e.clone()))
}

/// Which DGEMM runs, as printed with the figures (loads it if needed).
pub fn kernel() -> Result<String, Failure> {
    Ok(match backend()? {
        Backend::Faer => faer_name(),
        Backend::OpenBlas(o) => o.name.clone(),
    })
}

fn dim(v: usize) -> c_int {
    c_int::try_from(v).expect("matrix dimension fits a C int")
}

/// Column stride of a view (rows are contiguous in every view lu makes).
fn ld(rows: usize, col_stride: isize) -> c_int {
    dim((col_stride.max(1) as usize).max(rows).max(1))
}

/// `c = beta c + alpha a b` (beta 0 or 1: `Accum::Replace` or `Accum::Add`).
pub fn gemm(c: MatMut<'_, f64>, accum: Accum, a: MatRef<'_, f64>, b: MatRef<'_, f64>, alpha: f64) {
    let be = backend().expect("the BLAS was loaded by kernel() before any product");
    let (m, n, k) = (c.nrows(), c.ncols(), a.ncols());
    assert!(
        a.nrows() == m && b.nrows() == k && b.ncols() == n,
        "gemm shapes"
    );
    match be {
        Backend::Faer => faer::linalg::matmul::matmul(c, accum, a, b, alpha, Par::Seq),
        Backend::OpenBlas(o) => {
            if m == 0 || n == 0 {
                return;
            }
            assert!(
                c.row_stride() == 1 && a.row_stride() == 1 && b.row_stride() == 1,
                "column-major views"
            );
            let beta = match accum {
                Accum::Add => 1.0,
                Accum::Replace => 0.0,
            };
            let (lda, ldb, ldc) = (
                ld(m, a.col_stride()),
                ld(k, b.col_stride()),
                ld(m, c.col_stride()),
            );
            // SAFETY: the views describe valid column-major matrices of these
            // shapes and strides (faer checked them when they were made); C
            // is borrowed mutably and A, B shared, so C overlaps neither.
            unsafe {
                (o.dgemm)(
                    COL_MAJOR,
                    NO_TRANS,
                    NO_TRANS,
                    dim(m),
                    dim(n),
                    dim(k),
                    alpha,
                    a.as_ptr(),
                    lda,
                    b.as_ptr(),
                    ldb,
                    beta,
                    c.as_ptr_mut(),
                    ldc,
                )
            }
        }
    }
}

/// `b = l^-1 b` with `l` unit lower triangular (its upper part is ignored).
/// Always faer's: at lu's shapes (a 256 x 256 triangle, thousands of
/// columns) it ran 2.4x faster than OpenBLAS's `dtrsm` in the same run
/// (N=8000: 0.12 s against 0.29 s per rank).
pub fn solve_unit_lower(l: MatRef<'_, f64>, b: MatMut<'_, f64>) {
    faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place(l, b, Par::Seq)
}
