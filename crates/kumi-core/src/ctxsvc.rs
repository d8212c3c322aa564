//! Communicator contexts handed out without an agreement among the members:
//! what `MPI_Comm_idup` needs (a communicator made without blocking) and
//! `MPI_Comm_create_from_group` (one made with no parent communicator).
//!
//! Ordinary communicator creation agrees on a context by a collective (the
//! largest of the members' next free ids), which blocks each member until
//! all have joined; a nonblocking duplicate cannot. Instead every member of
//! the parent asks one server (world rank 0's engine) for the context of
//! "the `k`-th nonblocking duplicate of parent `p`": MPI orders collective
//! calls on a communicator the same way on every member, so they all ask
//! with the same key, and the first to ask makes the server allocate a
//! fresh id, which the others then get too (a communicator made from a
//! group is keyed by its string tag, its members and how many the asker
//! made with both before: [`from_group_key`]). The server forgets a key once
//! all `size` members asked. Ids come from their own range
//! ([`FIRST`] upwards, in pairs like every context: point-to-point, then
//! collective), which agreed ids never reach, so the two never collide.
//!
//! Frames are of kind [`crate::header::Kind::Ctx`]: a request carries the
//! key as its payload (at most [`MAX_KEY`] bytes), the number of members in
//! `src` and the asker's request id in `id`; the answer has [`FLAG_ANSWER`]
//! set, the same `id`, and the context in `aux`.

use std::collections::HashMap;

/// The first context the server hands out.
pub const FIRST: u32 = 0x8000_0000;

/// Flag of an answer.
pub const FLAG_ANSWER: u8 = 1;

/// Longest key a request may carry.
pub const MAX_KEY: usize = 64 * 1024;

/// The key of the `k`-th nonblocking duplicate of the communicator with
/// context `parent` whose smallest world rank is `leader` (the
/// communicators one split makes share a context, not a leader).
pub fn idup_key(parent: u32, leader: u32, k: u64) -> Vec<u8> {
    let mut b = vec![0u8];
    b.extend_from_slice(&parent.to_le_bytes());
    b.extend_from_slice(&leader.to_le_bytes());
    b.extend_from_slice(&k.to_le_bytes());
    b
}

/// The key of the `k`-th communicator made from the group of world ranks
/// `members` with string tag `tag` (every member counts its own calls).
pub fn from_group_key(tag: &str, members: &[u32], k: u64) -> Vec<u8> {
    let mut b = vec![1u8];
    b.extend_from_slice(&k.to_le_bytes());
    b.extend_from_slice(&(members.len() as u64).to_le_bytes());
    for m in members {
        b.extend_from_slice(&m.to_le_bytes());
    }
    b.extend_from_slice(tag.as_bytes());
    b
}

/// The server's state (world rank 0 keeps one).
#[derive(Debug, Default)]
pub struct Server {
    next: u32,
    /// Key -> (context, members still to ask).
    open: HashMap<Vec<u8>, (u32, u32)>,
}

impl Server {
    /// The context of the communicator of `size` members that `key` names
    /// ([`idup_key`], [`from_group_key`]), allocating it for the first asker.
    pub fn ask(&mut self, key: &[u8], size: u32) -> Result<u32, String> {
        if size == 0 {
            return Err("a communicator of no members".into());
        }
        if key.len() > MAX_KEY {
            return Err(format!("a key of {} bytes", key.len()));
        }
        if let Some((ctx, left)) = self.open.get_mut(key) {
            let ctx = *ctx;
            *left -= 1;
            if *left == 0 {
                self.open.remove(key);
            }
            return Ok(ctx);
        }
        let ctx = FIRST
            .checked_add(self.next)
            .filter(|c| c.checked_add(1).is_some_and(|d| d < u32::MAX))
            .ok_or_else(|| "nonblocking communicator contexts exhausted".to_string())?;
        self.next += 2;
        if size > 1 {
            self.open.insert(key.to_vec(), (ctx, size - 1));
        }
        Ok(ctx)
    }

    /// Keys asked for by some members but not all yet.
    pub fn open(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Members of several parents ask in any interleaving: every member
        /// of one (parent, k) gets the same context, different keys get
        /// different ones, all in the server's range, and nothing stays open.
        #[test]
        fn one_context_per_key_whatever_the_order(order in proptest::collection::vec(0usize..64, 0..200)) {
            // Keys: 4 parents x 3 duplicates, each parent of 1..=4 members.
            // Parents 2 and 3 share a context (one split), not a leader; and
            // two groups with one tag.
            let mut keys: Vec<(Vec<u8>, u32)> = (0..4u32)
                .flat_map(|p| (0..3u64).map(move |k| (idup_key(2 * (p / 2) + 2, p, k), p + 1)))
                .collect();
            keys.push((from_group_key("t", &[0, 2], 0), 2));
            keys.push((from_group_key("t", &[0, 2, 3], 0), 3));
            keys.push((from_group_key("t", &[0, 2], 1), 2));
            let mut asks: Vec<(Vec<u8>, u32)> = keys
                .iter()
                .flat_map(|(key, n)| std::iter::repeat_n((key.clone(), *n), *n as usize))
                .collect();
            // Shuffle by the random order.
            for (i, &j) in order.iter().enumerate() {
                let n = asks.len();
                asks.swap(i % n, j % n);
            }
            let mut s = Server::default();
            let mut got: HashMap<Vec<u8>, Vec<u32>> = HashMap::new();
            for (key, n) in asks {
                let c = s.ask(&key, n).unwrap();
                got.entry(key).or_default().push(c);
            }
            let mut firsts: Vec<u32> = got.values().map(|v| v[0]).collect();
            for v in got.values() {
                prop_assert!(v.iter().all(|&c| c == v[0] && c >= FIRST && c % 2 == 0));
            }
            firsts.sort_unstable();
            firsts.dedup();
            prop_assert_eq!(firsts.len(), keys.len());
            prop_assert_eq!(s.open(), 0);
        }
    }

    #[test]
    fn the_range_ends_with_an_error() {
        let mut s = Server {
            next: u32::MAX - FIRST - 3,
            ..Server::default()
        };
        assert!(s.ask(&idup_key(2, 0, 0), 1).is_ok());
        assert!(s
            .ask(&idup_key(2, 0, 1), 1)
            .unwrap_err()
            .contains("exhausted"));
    }
}
