//! An in-process transport: several "ranks" as endpoints inside one process,
//! joined by queues. It keeps the whole contract of the trait (per-pair order,
//! copy on accept, bounded room) and exists so the runtime's protocol code can be
//! tested without processes. It is never used by a real job.

use crate::{Sink, Transport};
use kumi_core::header::Header;
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

type Queue = VecDeque<(u32, Header, Vec<u8>)>;

/// One endpoint of a loopback fabric.
pub struct Loopback {
    me: u32,
    /// Shared by the endpoints (behind mutexes, so an endpoint is `Send`,
    /// as the engine's network transport must be; tests use one thread).
    inboxes: Arc<Vec<Mutex<Queue>>>,
    capacity: usize,
    max_payload: usize,
}

impl Loopback {
    /// `n` connected endpoints; each inbox holds at most `capacity` frames.
    pub fn fabric(n: usize, capacity: usize, max_payload: usize) -> Vec<Loopback> {
        let inboxes = Arc::new(
            (0..n)
                .map(|_| Mutex::new(VecDeque::new()))
                .collect::<Vec<_>>(),
        );
        (0..n as u32)
            .map(|me| Loopback {
                me,
                inboxes: inboxes.clone(),
                capacity,
                max_payload,
            })
            .collect()
    }
}

impl Loopback {
    fn inbox(&self, rank: usize) -> MutexGuard<'_, Queue> {
        self.inboxes[rank]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Transport for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn try_send(&mut self, peer: u32, header: &Header, payload: &[u8]) -> io::Result<bool> {
        if self.inboxes.get(peer as usize).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no loopback peer {peer}"),
            ));
        }
        if payload.len() > self.max_payload {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "payload above max_payload",
            ));
        }
        let mut q = self.inbox(peer as usize);
        if q.len() >= self.capacity {
            return Ok(false);
        }
        q.push_back((self.me, *header, payload.to_vec()));
        Ok(true)
    }

    fn poll(&mut self, sink: &mut Sink<'_>) -> io::Result<usize> {
        let mut n = 0;
        loop {
            let next = self.inbox(self.me as usize).pop_front();
            match next {
                Some((from, h, p)) => {
                    sink(from, &h, &p);
                    n += 1;
                }
                None => return Ok(n),
            }
        }
    }

    fn prepare_sleep(&mut self) -> bool {
        self.inbox(self.me as usize).is_empty()
    }

    fn sleep(&mut self, _timeout: Duration) {}

    fn cancel_sleep(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use kumi_core::header::Kind;

    #[test]
    fn keeps_per_pair_order_and_bounds() {
        let mut f = Loopback::fabric(2, 2, 16);
        let mut h = Header::new(Kind::Eager);
        for i in 0..2 {
            h.tag = i;
            assert!(f[0].try_send(1, &h, &[i as u8]).unwrap());
        }
        assert!(!f[0].try_send(1, &h, &[9]).unwrap(), "full inbox refuses");
        let mut got = Vec::new();
        f[1].poll(&mut |from, h, p| got.push((from, h.tag, p.to_vec())))
            .unwrap();
        assert_eq!(got, vec![(0, 0, vec![0]), (0, 1, vec![1])]);
    }
}
