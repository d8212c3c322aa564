//! `kumi bench hotspot`: every rank hammers `fetch_add` on one counter. Modes:
//! `none` (level 0: every request travels to the owner), `level1` (attach to an
//! outstanding request), `level2` (wait up to 20 us for partners). Metrics:
//! `ops_per_s` (all ranks' calls per second) and `busiest_msgs_per_op`: the
//! combining messages the busiest rank received, per operation round (one call
//! by every rank) — about p-1 without combining, about the tree's fan-in with it.

use crate::coll::Labeled;
use crate::Record;
use kumi::{Arrival, Comm, Error, Op};
use std::time::{Duration, Instant};

/// Runs the kernel: `calls` fetch_adds per rank and mode.
pub fn run(w: &Comm, calls: usize) -> Result<Vec<Labeled>, Error> {
    let p = w.size();
    let c = w.combiner()?;
    let mut out = Vec::new();
    for (mode, arrival) in [
        ("none", Arrival::Never),
        ("level1", Arrival::Attach),
        ("level2", Arrival::Wait(Duration::from_micros(20))),
    ] {
        let counter = format!("hot.{mode}");
        c.barrier()?;
        let before = c.messages_handled();
        w.barrier()?;
        let t = Instant::now();
        for _ in 0..calls {
            c.fetch_add(&counter, 1, arrival)?;
        }
        // Everyone's calls are answered once all ranks are past their loops.
        w.barrier()?;
        let mut el = [t.elapsed().as_secs_f64()];
        let mut msgs = [(c.messages_handled() - before) as f64];
        w.allreduce_in_place(&mut el, &Op::max())?;
        w.allreduce_in_place(&mut msgs, &Op::max())?;
        let rec = |metric: &str, value: f64| Labeled {
            record: Record {
                bench: "hotspot".into(),
                np: p,
                size: 8,
                metric: metric.into(),
                value,
            },
            key: "mode",
            label: mode.into(),
        };
        out.push(rec("ops_per_s", (calls * p) as f64 / el[0]));
        out.push(rec("busiest_msgs_per_op", msgs[0] / calls as f64));
    }
    Ok(out)
}
