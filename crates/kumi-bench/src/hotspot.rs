//! `kumi bench hotspot`: every rank hammers `fetch_add` on one counter. Modes:
//! `none` (level 0: every request travels to the owner), `level1` (attach to an
//! outstanding request), `level2` (wait up to `KUMI_HOTSPOT_WAIT_US`, default
//! 100 us, for partners). Metrics:
//! `ops_per_s` (all ranks' calls per second) and `busiest_msgs_per_op`: the
//! combining messages the busiest rank received, per operation round (one call
//! by every rank) — about p-1 without combining, about the tree's fan-in with it.

use crate::coll::Labeled;
use crate::Record;
use kumi::{Arrival, Comm, Error, Op};
use std::time::{Duration, Instant};

/// How long a level-2 request waits for partners at each interior rank:
/// `KUMI_HOTSPOT_WAIT_US` microseconds, default 100. The trade-off, measured at
/// np=16 on the 2-core machine (docs/BENCHMARKS.md): 20 us combines little when
/// 16 ranks share 2 cores (a round of requests takes longer than that to
/// arrive: 6.9 messages per op at the busiest rank); 100 us gets close to the
/// tree's fan-in (4.5); longer windows gain little more and cost throughput.
fn level2_window() -> Result<Duration, Error> {
    match std::env::var("KUMI_HOTSPOT_WAIT_US") {
        Err(_) => Ok(Duration::from_micros(100)),
        Ok(v) => v.parse::<u64>().map(Duration::from_micros).map_err(|_| {
            Error::Protocol(format!(
                "KUMI_HOTSPOT_WAIT_US={v:?}: expected a number of microseconds"
            ))
        }),
    }
}

/// Runs the kernel: `calls` fetch_adds per rank and mode.
pub fn run(w: &Comm, calls: usize) -> Result<Vec<Labeled>, Error> {
    let p = w.size();
    let c = w.combiner()?;
    let mut out = Vec::new();
    for (mode, arrival) in [
        ("none", Arrival::Never),
        ("level1", Arrival::Attach),
        ("level2", Arrival::Wait(level2_window()?)),
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
