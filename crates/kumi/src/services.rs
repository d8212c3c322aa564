//! The runtime's services beside point-to-point: collectives and the
//! combining service (`coll`), one-sided access across hosts (`rma`),
//! distributed shared memory (`dsm`) and the context service (`ctxs`).
//!
//! The engine holds their state in one [`Services`] value, lends itself to
//! their progress ([`progress`]) and hands them the frames of the kinds they
//! registered ([`register`]); it names none of them. A new service
//! (distributed shared memory, checkpoints) adds its state to [`Services`],
//! its frame kinds to [`register`] and its progress to [`progress`]: the
//! engine does not change.

use crate::coll::{self, CollState};
use crate::ctxs::Ctxs;
use crate::dsm::service::{self as dsm, DsmState};
use crate::dsm::tasks::{self, TaskState};
use crate::engine::{Engine, FrameHandler};
use crate::error::Result;
use crate::rma::{self, RmaState};
use kumi_core::header::Kind;

/// The services' state, held by the engine.
pub(crate) struct Services {
    /// Collectives in flight and the combining service.
    pub coll: CollState,
    /// One-sided access across hosts: parts served, answers awaited. Boxed,
    /// like `ctxs`: rarely used, and kept off the cache lines of the engine's
    /// hot fields (inline they made the engine ~400 bytes larger).
    pub rma: Box<RmaState>,
    /// Contexts of nonblocking duplicates.
    pub ctxs: Box<Ctxs>,
    /// Distributed shared memory: segments and their locks (boxed, as `rma`).
    pub dsm: Box<DsmState>,
    /// Task queues: the ones this rank keeps, and its pops in flight.
    pub tasks: Box<TaskState>,
}

impl Services {
    /// The services of a rank whose collectives are configured as `coll` says.
    pub fn new(coll: coll::Config) -> Services {
        Services {
            coll: CollState::new(coll),
            rma: Default::default(),
            ctxs: Default::default(),
            dsm: Default::default(),
            tasks: Default::default(),
        }
    }

    /// Whether [`progress`] has anything to do (asked on every pass).
    #[inline]
    pub fn busy(&self) -> bool {
        self.coll.busy() || self.rma.busy()
    }

    /// Whether other ranks may wait on this one's services while the
    /// application computes (then the progress thread looks at the engine).
    #[inline]
    pub fn serving(&self) -> bool {
        self.coll.busy()
            || self.coll.combine.serving()
            || self.rma.serving()
            || self.dsm.serving()
            || self.tasks.serving()
    }
}

/// Registers every service's frame kinds with the engine.
pub(crate) fn register(e: &mut Engine) -> Result<()> {
    e.register(Kind::Combine, coll::on_combine_frame as FrameHandler)?;
    e.register(Kind::Rma, rma::on_frame as FrameHandler)?;
    e.register(Kind::Dsm, dsm::on_frame as FrameHandler)?;
    e.register(Kind::Tasks, tasks::on_frame as FrameHandler)?;
    e.register(Kind::Ctx, Engine::on_ctx_frame as FrameHandler)
}

/// One pass of every service that has work; how many events happened.
pub(crate) fn progress(e: &mut Engine) -> Result<usize> {
    let mut n = 0;
    if e.svc.coll.busy() {
        n += coll::progress(e)?;
    }
    if e.svc.rma.busy() {
        n += rma::progress(e)?;
    }
    Ok(n)
}
