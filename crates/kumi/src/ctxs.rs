//! The context service: contexts for communicators made without blocking
//! (`MPI_Comm_idup`) or from groups, asked of world rank 0, which serves
//! them (`kumi_core::ctxsvc` decides). Its frames are `Kind::Ctx`.

use crate::engine::{log, Engine};
use crate::error::{Error, Result};
use kumi_core::header::{Header, Kind};

/// Contexts of nonblocking duplicates: the server (used on world rank 0),
/// how many each parent made here, and the answers awaited.
#[derive(Default)]
pub(crate) struct Ctxs {
    server: kumi_core::ctxsvc::Server,
    idups: std::collections::HashMap<(u32, u32), u64>,
    /// Communicators made from groups here, by (string tag, members).
    from_groups: std::collections::HashMap<(String, Vec<u32>), u64>,
    asks: std::collections::HashMap<u64, Option<std::result::Result<u32, String>>>,
    next_ask: u64,
}

impl Engine {
    /// Asks the context server for the context of the communicator of
    /// `size` members that `key` names (`kumi_core::ctxsvc`); the answer
    /// comes to [`Engine::ctx_answer`].
    pub(crate) fn ask_ctx(&mut self, key: &[u8], size: usize) -> Result<u64> {
        if key.len() > kumi_core::ctxsvc::MAX_KEY {
            return Err(Error::invalid(
                "stringtag",
                key.len() as i64,
                format!(
                    "a key of at most {} bytes (tag and members)",
                    kumi_core::ctxsvc::MAX_KEY
                ),
            ));
        }
        self.svc.ctxs.next_ask += 1;
        let id = self.svc.ctxs.next_ask;
        let mut h = Header::new(Kind::Ctx);
        h.src =
            u32::try_from(size).map_err(|_| Error::Protocol("communicator too large".into()))?;
        h.len = key.len() as u64;
        h.id = id;
        self.svc.ctxs.asks.insert(id, None);
        self.push_frame(0, &h, key)?;
        Ok(id)
    }

    /// How many communicators this rank made before from the group of
    /// world ranks `members` with string tag `tag` (counting this one).
    pub(crate) fn next_from_group(&mut self, tag: &str, members: &[u32]) -> u64 {
        let n = self
            .svc
            .ctxs
            .from_groups
            .entry((tag.to_string(), members.to_vec()))
            .or_insert(0);
        *n += 1;
        *n - 1
    }

    /// The number of the next nonblocking duplicate of communicator
    /// (context, leader) made here.
    pub(crate) fn next_idup(&mut self, parent: (u32, u32)) -> u64 {
        let n = self.svc.ctxs.idups.entry(parent).or_insert(0);
        *n += 1;
        *n - 1
    }

    /// The answer to ask `id`, once it came (taken: asked once).
    pub(crate) fn ctx_answer(&mut self, id: u64) -> Option<Result<u32>> {
        if !matches!(self.svc.ctxs.asks.get(&id), Some(Some(_))) {
            return None;
        }
        let a = self.svc.ctxs.asks.remove(&id).flatten()?;
        Some(a.map_err(|m| Error::Protocol(format!("the context server (world rank 0): {m}"))))
    }

    /// Whether ask `id` has its answer.
    pub(crate) fn ctx_answered(&self, id: u64) -> bool {
        matches!(self.svc.ctxs.asks.get(&id), Some(Some(_)))
    }

    /// Handles a `Kind::Ctx` frame (registered by `services::register`).
    pub(crate) fn on_ctx_frame(&mut self, from: u32, h: &Header, p: &[u8]) -> Result<()> {
        use kumi_core::ctxsvc::FLAG_ANSWER;
        let answer = h.flags & FLAG_ANSWER != 0;
        if h.flags & !FLAG_ANSWER != 0 || h.len != p.len() as u64 || (answer && !p.is_empty()) {
            return Err(Error::Protocol(format!(
                "context frame with flags {:#x}, {} bytes",
                h.flags,
                p.len()
            )));
        }
        if h.flags & FLAG_ANSWER == 0 {
            if self.world_rank != 0 {
                return Err(Error::Protocol(format!(
                    "rank {from} asked for a context of rank {}, not the server",
                    self.world_rank
                )));
            }
            let got = self.svc.ctxs.server.ask(p, h.src);
            if let Err(m) = &got {
                log(
                    self.world_rank,
                    &format!("refused a context to rank {from}: {m}"),
                );
            }
            let mut a = Header::new(Kind::Ctx);
            a.flags = FLAG_ANSWER;
            a.id = h.id;
            // 0 (the world's context, never handed out): refused.
            a.aux = u64::from(got.unwrap_or(0));
            return self.push_frame(from, &a, &[]);
        }
        match self.svc.ctxs.asks.get_mut(&h.id) {
            Some(slot @ None) if from == 0 => {
                *slot = Some(match u32::try_from(h.aux) {
                    Ok(c) if c >= kumi_core::ctxsvc::FIRST && c % 2 == 0 => Ok(c),
                    _ => Err(format!("refused (answer {:#x})", h.aux)),
                });
                Ok(())
            }
            _ => Err(Error::Protocol(format!(
                "context answer {:#x} from rank {from} to no open ask",
                h.id
            ))),
        }
    }
}
