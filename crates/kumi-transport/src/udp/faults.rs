//! Seeded faults on outgoing datagrams, for tests: `KUMI_UDP_FAULTS`.
//!
//! `drop=P,dup=P,reorder=P,delay=US,seed=N`: each datagram is lost with
//! probability `drop`, sent twice with probability `dup`, and held back with
//! probability `reorder` for a random 50..`delay` microseconds (default 500)
//! while later datagrams overtake it. The same seed gives the same decisions
//! for the same sequence of datagrams.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What to do with the datagrams a rank sends.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultSpec {
    /// Probability of losing a datagram.
    pub drop: f64,
    /// Probability of sending a datagram twice.
    pub dup: f64,
    /// Probability of holding a datagram back.
    pub reorder: f64,
    /// Longest hold, in microseconds.
    pub delay_us: u64,
    /// Seed of the decisions.
    pub seed: u64,
}

impl FaultSpec {
    /// Parses `drop=0.05,dup=0.02,reorder=0.05,delay=500,seed=7` (any subset).
    pub fn parse(s: &str) -> Result<FaultSpec, String> {
        let mut f = FaultSpec {
            drop: 0.0,
            dup: 0.0,
            reorder: 0.0,
            delay_us: 500,
            seed: 1,
        };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not KEY=VALUE"))?;
            let p = || -> Result<f64, String> {
                let x: f64 = v
                    .parse()
                    .map_err(|_| format!("{k}={v:?} is not a number"))?;
                if (0.0..=1.0).contains(&x) {
                    Ok(x)
                } else {
                    Err(format!("{k}={v} is not a probability"))
                }
            };
            match k {
                "drop" => f.drop = p()?,
                "dup" => f.dup = p()?,
                "reorder" => f.reorder = p()?,
                "delay" => f.delay_us = v.parse().map_err(|_| format!("delay={v:?}"))?,
                "seed" => f.seed = v.parse().map_err(|_| format!("seed={v:?}"))?,
                _ => {
                    return Err(format!(
                        "unknown fault {k:?}: use drop, dup, reorder, delay, seed"
                    ))
                }
            }
        }
        Ok(f)
    }
}

/// The decisions, and the datagrams held back.
pub(crate) struct Faults {
    spec: FaultSpec,
    state: u64,
    pub held: Vec<(Instant, SocketAddr, Vec<u8>)>,
    pub dropped: u64,
}

/// What to do with one datagram.
pub(crate) enum Fate {
    Send(u32),
    Hold(Instant),
}

impl Faults {
    pub fn new(spec: FaultSpec, rank: u32) -> Faults {
        let state = spec.seed ^ (u64::from(rank) << 32) ^ 0x6b75_6d69;
        Faults {
            spec,
            state,
            held: Vec::new(),
            dropped: 0,
        }
    }

    fn unit(&mut self) -> f64 {
        // splitmix64
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Decides one datagram's fate: sent `n` times (0: lost) or held.
    pub fn decide(&mut self, now: Instant) -> Fate {
        if self.unit() < self.spec.drop {
            self.dropped += 1;
            return Fate::Send(0);
        }
        if self.unit() < self.spec.reorder {
            let span = self.spec.delay_us.max(51) - 50;
            let us = 50 + (self.unit() * span as f64) as u64;
            return Fate::Hold(now + Duration::from_micros(us));
        }
        Fate::Send(if self.unit() < self.spec.dup { 2 } else { 1 })
    }

    /// The earliest release of a held datagram.
    pub fn next_release(&self) -> Option<Instant> {
        self.held.iter().map(|h| h.0).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let f = FaultSpec::parse("drop=0.05,dup=0.02,reorder=0.05,seed=7").unwrap();
        assert_eq!((f.drop, f.dup, f.reorder, f.seed), (0.05, 0.02, 0.05, 7));
        assert!(FaultSpec::parse("drop=2").is_err());
        assert!(FaultSpec::parse("lose=0.1").is_err());
    }

    #[test]
    fn the_seed_decides_and_rates_are_roughly_kept() {
        let spec = FaultSpec::parse("drop=0.1,seed=3").unwrap();
        let t = Instant::now();
        let run = |spec: &FaultSpec| {
            let mut f = Faults::new(spec.clone(), 0);
            (0..10_000)
                .filter(|_| matches!(f.decide(t), Fate::Send(0)))
                .count()
        };
        let a = run(&spec);
        assert_eq!(a, run(&spec));
        assert!((800..1200).contains(&a), "{a} of 10000 dropped");
    }
}
