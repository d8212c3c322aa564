//! The loom shim: every atomic the shared-memory code uses comes from here, so
//! `RUSTFLAGS="--cfg loom"` swaps in loom's model-checked versions (as tokio does).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
