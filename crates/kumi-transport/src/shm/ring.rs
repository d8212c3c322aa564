//! The single-producer/single-consumer byte ring: S-3000's one-way FIFO path.
//!
//! One ring carries the frames of one ordered pair of local ranks. Its memory, in
//! the segment, is three parts, each starting on its own cache line:
//!
//! ```text
//! line 0   tail: AtomicU64       written by the consumer only
//! line 1   want_room: AtomicU32  written by the producer only (rest reserved)
//! data     ring_bytes bytes of records
//! ```
//!
//! A record is `[stamp: u64][payload_len: u32][header_len: u32][header][payload]`,
//! padded to a multiple of 64 bytes. The header is 40 bytes; where a smaller
//! form saves a cache line (payloads of 9-32 bytes, 73-96, ...) the
//! transport stores 24 (the compact form: `id` and `aux` zero) or 16 (the
//! short form: also `len` equal to the payload's length, which every
//! non-synchronous eager message has): an eager message of up to 32 bytes is
//! then exactly one line. (With the full header only 8 bytes fit, and a
//! 16-byte message took two line transfers: docs/BENCHMARKS.md, sessions 7
//! and 19.)
//! Records never straddle the end of the buffer: a record that does not fit is
//! preceded by a *wrap marker* (a record whose `payload_len` is `u32::MAX`) that
//! sends the consumer to the start of the next lap.
//!
//! # Positions and stamps: the head counter is carried in-band
//!
//! Producer and consumer count bytes with monotonic `u64` *positions*; the offset
//! in the buffer is `position % ring_bytes`. DESIGN.md says the producer alone
//! writes the head counter; here that counter is not a separate word but the
//! **stamps**: the producer publishes the record at position `p` by storing
//! `p + 1` into the record's first word (Release), after writing the rest of it.
//! The consumer polls the stamp at its own position (Acquire) and finds a record
//! exactly when the stamp equals `position + 1`. A separate head word would cost
//! the consumer two cache-line transfers per message (the head's line, then the
//! data's); with the stamp inside the data, an 8-byte message costs one. A stamp
//! left by an earlier lap belongs to a smaller position, so it never looks valid.
//!
//! Stale *payload* bytes from an earlier lap could, though: a payload word that
//! happens to sit at a 64-byte boundary where a later record will start could hold
//! any value, including `position + 1`. So before publishing a record the producer
//! looks at the first word of the position that follows it, and if that word
//! equals the stamp a record there would carry, overwrites it with a zero
//! *terminator* (Relaxed; the record's Release stamp publishes it). The consumer
//! only ever polls a position right after the record it just consumed, so it
//! sees that word or something newer, never a stamp that is not one. The word
//! is only ever written by the producer, so the producer's look reads its own
//! last write, and in the usual case (an old stamp or payload of another value)
//! nothing is written: writing the terminator unconditionally cost the consumer
//! a second cache-line transfer per small message (it polls that line next, so
//! the terminator and then the next record each moved it over). The
//! terminator is also skipped when the ring is exactly full: the following
//! word is then the stamp of the oldest unread record (an older position, so
//! not valid either). Offset 0 of each lap is always a record start, so
//! nothing else is exposed.
//!
//! The look itself is skipped where the producer knows what it last wrote:
//! it keeps one bit per line, clear once a stamp or terminator of its own is
//! the line's first word (an older position or zero: never valid), set when a
//! record's body covers it (and at first, knowing nothing of the ring). In a
//! stream, records start where records started a lap before and nothing is
//! read; the look read a line the consumer had just read or prefetched, and
//! reading it again cost the sender a cache-line transfer per message
//! (docs/BENCHMARKS.md, session 19).
//!
//! # The consumer's tail, cached by the producer
//!
//! The consumer alone writes `tail` (the position up to which the producer may
//! overwrite), with Release after it has finished reading the bytes it frees. The
//! producer keeps a copy of `tail` in its own process memory and re-reads the real
//! one (Acquire) only when the ring *possibly* looks full with the copy; if it is
//! *really* full with the fresh value, the push fails (as rtrb does). In the common
//! case a push therefore touches no line the consumer writes.
//!
//! The consumer batches its tail publications: it stores `tail` when it has
//! consumed at least a quarter of the ring since the last store, or when it finds
//! the ring empty. Each store moves the tail line to the producer's cache and back,
//! so batching saves those transfers while streaming; publishing on empty
//! guarantees that a producer waiting for room eventually sees all of it. (A
//! quarter is a guess: small enough that a producer rarely stalls on an unpublished
//! tail, large enough to make the transfers rare. Tune it with data.)
//!
//! # What each side owns, and how stale the other's view may be
//!
//! | data                       | writer   | reader's view                                    |
//! |----------------------------|----------|--------------------------------------------------|
//! | stamps, records            | producer | consumer: exact once its stamp matches (Acquire) |
//! | `tail`                     | consumer | producer: a cached copy that lags by any amount  |
//! | `want_room`                | producer | consumer: read after a SeqCst fence (`transport`)|
//! | `Producer::head`           | producer | nobody (process-private; the stamps publish it)  |
//! | `Consumer::pos, published` | consumer | nobody (process-private; `tail` publishes it)    |
//!
//! No allocation, lock or read-modify-write on the push/pop path. The logic is
//! generic over [`RingMem`] so that the model checker (loom) runs it over a heap
//! of atomic words, where every payload byte is copied with Relaxed atomics:
//! loom then proves that the Release/Acquire pairs on stamps and `tail` really
//! publish the payload, not just the counters.

// Under loom the transport is compiled out; only the model tests use the ring.
#![cfg_attr(loom, allow(dead_code))]

use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};
use kumi_core::header::{Header, COMPACT_HEADER_BYTES, HEADER_BYTES, SHORT_HEADER_BYTES};

/// Records start on, and are padded to, this many bytes (one cache line).
pub const RECORD_ALIGN: usize = 64;

/// Bytes of a record before its payload, with the full header: stamp, lengths,
/// header. (A compact header takes 16 bytes less.)
pub const RECORD_OVERHEAD: usize = 16 + HEADER_BYTES;

/// Bytes in front of a ring's data in the segment: the consumer's line (`tail`)
/// and the producer's line (`want_room`).
pub const RING_CONTROL_BYTES: usize = 2 * RECORD_ALIGN;

/// Smallest ring the logic accepts (the segment asks for much more; the model
/// checker uses tiny rings).
pub const MIN_RING_BYTES: usize = 2 * RECORD_ALIGN;

/// `payload_len` of a wrap marker.
const WRAP: u32 = u32::MAX;

/// Offset of the `[payload_len][header_len]` word in a record.
const LEN_AT: usize = 8;
/// Offset of the header in a record; the payload follows it.
const HEADER_AT: usize = 16;

/// Largest payload one record may carry in a ring of `ring_bytes` bytes: a record
/// takes at most half the ring, so that a record plus the wrap marker in front of
/// it always fits in an empty ring. Rounded down to a multiple of 8.
pub const fn max_payload(ring_bytes: usize) -> usize {
    (ring_bytes / 2 - RECORD_OVERHEAD) & !7
}

/// Bytes a record with a `hdr`-byte header and `len` payload bytes occupies
/// in the ring.
#[inline]
const fn record_bytes(hdr: usize, len: usize) -> usize {
    (HEADER_AT + hdr + len + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// Whether a payload of `len` bytes goes in the compact form: exactly when
/// the form saves a cache line, i.e. the full form would spill 1-16 bytes
/// into one more line (9-24 bytes, 73-88, 137-152, ...; see
/// `Producer::compact_fits`).
#[inline]
const fn compact_len(len: usize) -> bool {
    (len + HEADER_AT + HEADER_BYTES - 1) % RECORD_ALIGN < HEADER_BYTES - COMPACT_HEADER_BYTES
}

/// Whether a payload of `len` bytes goes in a smaller form than the full
/// one when its header allows: exactly when the short form saves a cache line
/// (9-32 bytes: one line instead of two; 73-96: two instead of three...).
#[inline]
const fn small_len(len: usize) -> bool {
    (len + HEADER_AT + HEADER_BYTES - 1) % RECORD_ALIGN < HEADER_BYTES - SHORT_HEADER_BYTES
}

/// The memory of one ring: its data bytes and its two control words.
///
/// # Safety
/// Implementations promise that `stamp(off)` must return the same atomic word for the same 8-aligned `off`
/// as the one `write`/`read` address at `off`, and every method must accept any
/// `off`/length inside `0..capacity()`.
pub(crate) unsafe trait RingMem {
    /// Bytes of record data (a power of two, at least [`MIN_RING_BYTES`]).
    fn capacity(&self) -> usize;
    /// The stamp word of the record starting at data offset `off` (64-aligned).
    fn stamp(&self, off: usize) -> &AtomicU64;
    /// The consumer's published position.
    fn tail(&self) -> &AtomicU64;
    /// Set by a producer that found the ring full and is going to sleep.
    fn want_room(&self) -> &AtomicU32;
    /// Copies `src` to data offset `off`. Only the producer calls it, on bytes the
    /// consumer has released and not yet been told about.
    fn write(&self, off: usize, src: &[u8]);
    /// Writes a record's body at data offset `off` (64-aligned): its
    /// `[payload_len][header_len]` word, header and payload, in that order
    /// (everything but the stamp). Only the producer calls it, as `write`.
    #[inline]
    fn write_record(&self, off: usize, len_word: u64, header: &[u8], payload: &[u8]) {
        self.write(off + LEN_AT, &len_word.to_le_bytes());
        self.write(off + HEADER_AT, header);
        self.write(off + HEADER_AT + header.len(), payload);
    }
    /// Copies `dst.len()` bytes from data offset `off`. Only the consumer calls
    /// it, on bytes of a record whose stamp it has acquired.
    fn read(&self, off: usize, dst: &mut [u8]);
    /// Asks the processor to bring the line at data offset `off` (any offset
    /// below `capacity()`) into this core's cache ahead of use. A hint only:
    /// no access happens, nothing is ordered, and an implementation may do
    /// nothing (the model checker's does).
    #[inline]
    fn prefetch(&self, _off: usize) {}
}

/// The producer's end of a ring.
pub(crate) struct Producer<M: RingMem> {
    mem: M,
    /// Position of the next record. Process-private; the stamps publish it.
    head: u64,
    /// Last value read from the consumer's `tail`. Never ahead of the real tail;
    /// behind it by whatever the consumer freed since we last looked.
    cached_tail: u64,
    /// Bytes the last refused push needed (0: the last push succeeded).
    blocked_need: u64,
    cap: u64,
    max_payload: usize,
    /// One bit per line of the ring: set while the line's first word may hold
    /// bytes of a record's body (header, payload, or bytes a record skipped),
    /// clear once we last wrote a stamp or a terminator there. `terminate`
    /// reads the ring only where a bit is set. All set at first: nothing is
    /// assumed of the ring's earlier contents.
    body_lines: Box<[u64]>,
}

impl<M: RingMem> Producer<M> {
    /// The producer of a fresh ring (all zero, never used). A ring has one
    /// producer for its whole life: a second one would restart at position 0.
    pub(crate) fn new(mem: M) -> Self {
        let cap = mem.capacity();
        assert!(
            cap.is_power_of_two() && cap >= MIN_RING_BYTES,
            "ring of {cap} bytes"
        );
        Producer {
            mem,
            head: 0,
            cached_tail: 0,
            blocked_need: 0,
            cap: cap as u64,
            max_payload: max_payload(cap),
            body_lines: vec![!0u64; (cap / RECORD_ALIGN).div_ceil(64)].into_boxed_slice(),
        }
    }

    /// Appends one record with the full header, or returns `false` (writing
    /// nothing) if there is no room. Panics if `payload` is longer than
    /// [`Self::max_payload`]: callers check that first (the transport returns
    /// an error instead).
    #[inline]
    pub(crate) fn try_push(&mut self, header: &[u8; HEADER_BYTES], payload: &[u8]) -> bool {
        assert!(
            payload.len() <= self.max_payload,
            "payload of {} bytes above ring maximum",
            payload.len()
        );
        self.push::<HEADER_BYTES>(header, payload)
    }

    /// Whether [`Self::try_push_small`] takes this message: a payload that a
    /// smaller header fits in one cache line less (`small_len`: 9-32 bytes,
    /// one line instead of two; 73-96...) and a header whose `id` and `aux`
    /// are zero. Not otherwise: an 8-byte message with a smaller header (48
    /// of the line's 64 bytes written) streamed at 0.75x the rate of the full
    /// form, which fills the line (docs/BENCHMARKS.md, session 7).
    #[inline]
    pub(crate) fn small_fits(header: &Header, payload: &[u8]) -> bool {
        small_len(payload.len()) && header.id == 0 && header.aux == 0
    }

    /// [`Self::try_push`] with the header in the smallest form it allows
    /// (only when [`Self::small_fits`]): the short one if `short` (the
    /// header's `len` is the payload's length: an eager message), else the
    /// compact one where that saves a line, else the full one. Out of line,
    /// and chosen by the caller: with the choice inside `try_push` and the
    /// sizes in variables, the push of an 8-byte message, which never takes
    /// it, ran 20 instructions more (docs/BENCHMARKS.md, session 7).
    #[inline(never)]
    pub(crate) fn try_push_small(
        &mut self,
        header: &[u8; HEADER_BYTES],
        short: bool,
        payload: &[u8],
    ) -> bool {
        assert!(
            payload.len() <= self.max_payload,
            "payload of {} bytes above ring maximum",
            payload.len()
        );
        debug_assert!(
            Header::compactable(header),
            "id or aux set in a small record"
        );
        if short {
            self.push::<SHORT_HEADER_BYTES>(&header[..SHORT_HEADER_BYTES], payload)
        } else if compact_len(payload.len()) {
            self.push::<COMPACT_HEADER_BYTES>(&header[..COMPACT_HEADER_BYTES], payload)
        } else {
            self.push::<HEADER_BYTES>(header, payload)
        }
    }

    /// For the tests and models: the form the transport would choose, from
    /// the encoded header.
    #[cfg(any(test, loom))]
    pub(crate) fn push_either(&mut self, header: &[u8; HEADER_BYTES], payload: &[u8]) -> bool {
        if small_len(payload.len()) && Header::compactable(header) {
            let short = header[16..24] == (payload.len() as u64).to_le_bytes();
            self.try_push_small(header, short, payload)
        } else {
            self.try_push(header, payload)
        }
    }

    /// [`Self::try_push`] with a header of `H` bytes (`header.len() == H`).
    #[inline(always)]
    fn push<const H: usize>(&mut self, header: &[u8], payload: &[u8]) -> bool {
        let size = record_bytes(H, payload.len()) as u64;
        let off = self.head & (self.cap - 1);
        // A record never straddles the end: pad with a wrap marker if needed.
        let pad = if off + size > self.cap {
            self.cap - off
        } else {
            0
        };
        let need = pad + size;
        // Possibly full, judging by our stale copy of the tail?
        if self.head + need > self.cached_tail + self.cap {
            // Acquire pairs with the consumer's Release store of `tail`: its reads
            // of the bytes it freed happen before our overwriting them.
            self.cached_tail = self.mem.tail().load(Ordering::Acquire);
            // Really full.
            if self.head + need > self.cached_tail + self.cap {
                self.blocked_need = need;
                return false;
            }
        }
        self.blocked_need = 0;
        let start = self.head + pad;
        let roff = (start & (self.cap - 1)) as usize;
        let len_word = payload.len() as u64 | (H as u64) << 32;
        self.mem.write_record(roff, len_word, header, payload);
        let next = start + size;
        self.terminate(next);
        self.mark_record(roff, size as usize);
        // Release: the length, header, payload and terminator written above are
        // visible to a consumer whose Acquire load reads this stamp.
        self.mem.stamp(roff).store(start + 1, Ordering::Release);
        if pad > 0 {
            // The wrap marker goes in after the record it jumps to, so a consumer
            // that sees the marker (Acquire) also sees the record's stamp.
            let mut wrap_word = [0u8; 8];
            wrap_word[..4].copy_from_slice(&WRAP.to_le_bytes());
            self.mem.write(off as usize + LEN_AT, &wrap_word);
            // Release: publishes the marker's length word (and the record after it).
            self.mem
                .stamp(off as usize)
                .store(self.head + 1, Ordering::Release);
            self.clear_body_line(off as usize / RECORD_ALIGN);
        }
        self.head = next;
        true
    }

    /// Whether line `line`'s first word may hold body bytes (`body_lines`).
    #[inline]
    fn is_body_line(&self, line: usize) -> bool {
        self.body_lines[line / 64] >> (line % 64) & 1 != 0
    }

    /// Notes that line `line`'s first word is now one of our stamps or a
    /// terminator.
    #[inline]
    fn clear_body_line(&mut self, line: usize) {
        self.body_lines[line / 64] &= !(1u64 << (line % 64));
    }

    /// Notes a record of `size` bytes written at data offset `off`: a stamp
    /// on its first line, body bytes on the others.
    #[inline]
    fn mark_record(&mut self, off: usize, size: usize) {
        let first = off / RECORD_ALIGN;
        self.clear_body_line(first);
        let (mut line, end) = (first + 1, first + size / RECORD_ALIGN);
        while line < end {
            let (word, bit) = (line / 64, line % 64);
            let n = (64 - bit).min(end - line);
            self.body_lines[word] |= (!0u64 >> (64 - n)) << bit;
            line += n;
        }
    }

    /// Writes the zero terminator at position `next` if the word there would
    /// pass for the stamp of a record at `next` (see the module doc), unless
    /// the ring is exactly full up to there. Looks only where `body_lines`
    /// says the word may be body bytes: a stamp or a terminator we wrote
    /// there is an older position's or zero, never `next + 1`.
    #[inline]
    fn terminate(&mut self, next: u64) {
        let off = (next & (self.cap - 1)) as usize;
        let line = off / RECORD_ALIGN;
        if next < self.cached_tail + self.cap && self.is_body_line(line) {
            let w = self.mem.stamp(off);
            // Relaxed load: only this producer ever writes the ring's data, so
            // this reads our own last write there. Relaxed store: the consumer
            // reads this word only after acquiring the stamp of the record that
            // precedes it, which we store with Release after.
            if w.load(Ordering::Relaxed) == next + 1 {
                w.store(0, Ordering::Relaxed);
                self.clear_body_line(line);
            }
        }
    }

    /// Whether the last refused push would now fit (re-reads the real tail).
    /// `true` if no push was refused. Once it fits the producer no longer counts
    /// as blocked, so a caller that gives up on that push can still sleep later.
    pub(crate) fn room_for_blocked(&mut self) -> bool {
        if self.blocked_need == 0 {
            return true;
        }
        // Acquire: as in `try_push`.
        self.cached_tail = self.mem.tail().load(Ordering::Acquire);
        if self.head + self.blocked_need <= self.cached_tail + self.cap {
            self.blocked_need = 0;
            return true;
        }
        false
    }

    /// Whether the last push was refused for want of room.
    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked_need != 0
    }

    /// Announces (or withdraws) that this producer waits for room. Relaxed: the
    /// caller orders it against its re-read of `tail` with a SeqCst fence, and the
    /// consumer reads it after its own SeqCst fence (Dekker; see `mod.rs`).
    pub(crate) fn set_want_room(&self, on: bool) {
        self.mem.want_room().store(u32::from(on), Ordering::Relaxed);
    }
}

/// A record found by [`Consumer::peek`]: where it is and how long its payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// Data offset of the record.
    pub(crate) off: usize,
    /// Payload bytes.
    pub(crate) len: usize,
    /// Header bytes ([`HEADER_BYTES`], [`COMPACT_HEADER_BYTES`] or
    /// [`SHORT_HEADER_BYTES`]).
    pub(crate) hdr: usize,
}

/// The consumer's end of a ring.
pub(crate) struct Consumer<M: RingMem> {
    mem: M,
    /// Position of the next record to read. Process-private.
    pos: u64,
    /// Last value stored to `tail`.
    published: u64,
    cap: u64,
    max_payload: usize,
    /// How far past `pos`, in bytes, `pop` asks for the line ahead (0: never).
    prefetch: u64,
}

impl<M: RingMem> Consumer<M> {
    /// The consumer of a fresh ring (all zero, never used).
    pub(crate) fn new(mem: M) -> Self {
        let cap = mem.capacity();
        assert!(
            cap.is_power_of_two() && cap >= MIN_RING_BYTES,
            "ring of {cap} bytes"
        );
        Consumer {
            mem,
            pos: 0,
            published: 0,
            cap: cap as u64,
            max_payload: max_payload(cap),
            prefetch: 0,
        }
    }

    /// Makes each `pop` ask for the cache line `bytes` past the next record
    /// (0: never; at most half the ring is used).
    ///
    /// Why: a consumer that streams reads every record's line after the
    /// producer wrote it on another core, one miss per small record; asking
    /// a few lines ahead lets those transfers overlap. Measured here (8-byte
    /// message rate, 10 alternating runs): 4 lines ahead +14 %; 2 lines +6 %;
    /// 3 and 8 lines no better than 4 (docs/BENCHMARKS.md).
    pub(crate) fn set_prefetch(&mut self, bytes: u64) {
        self.prefetch = bytes.min(self.cap / 2);
    }

    /// Whether a record (or a wrap marker, which is always followed by one) is
    /// ready. No side effects.
    #[inline]
    pub(crate) fn ready(&self) -> bool {
        let off = (self.pos & (self.cap - 1)) as usize;
        // Acquire (rather than Relaxed) so that a caller that goes on to read
        // the record on the strength of this answer may.
        self.mem.stamp(off).load(Ordering::Acquire) == self.pos + 1
    }

    /// The next record, if one is ready. Steps over a wrap marker. An impossible
    /// length (the peer wrote garbage into the shared ring) is an error.
    #[inline]
    pub(crate) fn peek(&mut self) -> Result<Option<Record>, String> {
        for _ in 0..2 {
            let off = (self.pos & (self.cap - 1)) as usize;
            // Acquire pairs with the producer's Release store of this stamp: the
            // record's length, header and payload are visible once it matches.
            if self.mem.stamp(off).load(Ordering::Acquire) != self.pos + 1 {
                return Ok(None);
            }
            let mut w = [0u8; 8];
            self.mem.read(off + LEN_AT, &mut w);
            let len = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            if len == WRAP {
                if off == 0 {
                    return Err(format!(
                        "wrap marker at the start of the ring (position {})",
                        self.pos
                    ));
                }
                self.pos += self.cap - off as u64;
                continue;
            }
            let len = len as usize;
            let hdr = u32::from_le_bytes([w[4], w[5], w[6], w[7]]) as usize;
            if hdr != HEADER_BYTES && hdr != COMPACT_HEADER_BYTES && hdr != SHORT_HEADER_BYTES {
                return Err(format!(
                    "record at position {} claims a header of {hdr} bytes",
                    self.pos
                ));
            }
            if len > self.max_payload || off + record_bytes(hdr, len) > self.cap as usize {
                return Err(format!(
                    "record at position {} claims {len} payload bytes",
                    self.pos
                ));
            }
            return Ok(Some(Record { off, len, hdr }));
        }
        Err(format!(
            "two wrap markers in a row at position {}",
            self.pos
        ))
    }

    /// Copies a peeked record's header (its full form: a compact one gets its
    /// zero `id` and `aux` back, a short one also its `len`) and payload out (`payload.len()` must be the
    /// record's length).
    #[cfg_attr(not(any(test, loom)), allow(dead_code))]
    pub(crate) fn read_record(
        &self,
        rec: Record,
        header: &mut [u8; HEADER_BYTES],
        payload: &mut [u8],
    ) {
        debug_assert_eq!(payload.len(), rec.len);
        header.fill(0);
        self.mem.read(rec.off + HEADER_AT, &mut header[..rec.hdr]);
        if rec.hdr == SHORT_HEADER_BYTES {
            header[16..24].copy_from_slice(&(rec.len as u64).to_le_bytes());
        }
        self.mem.read(rec.off + HEADER_AT + rec.hdr, payload);
    }

    /// Consumes the record last returned by [`Self::peek`]. Returns `true` if it
    /// published the tail (the caller then checks whether the producer waits).
    #[inline]
    pub(crate) fn pop(&mut self, rec: Record) -> bool {
        self.pos += record_bytes(rec.hdr, rec.len) as u64;
        if self.prefetch != 0 {
            self.mem
                .prefetch(((self.pos + self.prefetch) & (self.cap - 1)) as usize);
        }
        if self.pos - self.published >= self.cap / 4 {
            self.publish();
            return true;
        }
        false
    }

    /// Whether records were consumed since the tail was last published.
    #[cfg_attr(loom, allow(dead_code))]
    #[inline]
    pub(crate) fn behind(&self) -> bool {
        self.pos != self.published
    }

    /// Publishes the tail if it lags: called when the ring was found empty, so
    /// a producer waiting for room always gets all of it. Returns `true` if it
    /// stored.
    #[inline]
    pub(crate) fn publish_if_behind(&mut self) -> bool {
        if self.pos != self.published {
            self.publish();
            return true;
        }
        false
    }

    fn publish(&mut self) {
        // Release: every read of the records we are freeing happens before the
        // producer's Acquire load that sees this value, hence before it overwrites.
        self.mem.tail().store(self.pos, Ordering::Release);
        self.published = self.pos;
    }

    /// After a tail publication: whether the producer announced that it waits
    /// for room. The SeqCst fence orders our `tail` store before this load, and
    /// pairs with the fence the producer puts between its `want_room` store and
    /// its re-read of `tail` (Dekker): either it sees our tail, or we see its flag.
    /// With `full_fence` false the producer's side issues a `membarrier` that
    /// does the work of both fences (see `transport.rs`), and a compiler fence
    /// suffices here.
    pub(crate) fn producer_waiting(&self, full_fence: bool) -> bool {
        if full_fence {
            fence(Ordering::SeqCst);
        } else {
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        }
        // Relaxed: the fence above does the ordering.
        self.mem.want_room().load(Ordering::Relaxed) != 0
    }
}

/// A ring in mapped memory (production), or in a heap buffer for tests.
#[cfg(not(loom))]
pub(crate) struct RawMem {
    /// Start of the ring's control lines; the data follows at
    /// [`RING_CONTROL_BYTES`].
    base: *mut u8,
    cap: usize,
}

// SAFETY: `RawMem` is a pointer into a shared mapping that outlives it (the owner
// of the mapping keeps it alive); the ring protocol, not thread identity, decides
// who touches which bytes, so moving it to another thread changes nothing.
#[cfg(not(loom))]
unsafe impl Send for RawMem {}

/// Whether the ring in `mem` looks like it holds a record its consumer has
/// not read, as a third rank sees it (neither the producer nor the consumer:
/// it only loads the consumer's published `tail` and the stamp there).
/// Advisory: the consumer publishes `tail` late (module doc), so a record it
/// has read may still look unread; a record it has not read looks so once
/// its stamp is visible. Relaxed loads: nothing is read on the strength of
/// the answer.
pub(crate) fn looks_unread<M: RingMem>(mem: &M) -> bool {
    let tail = mem.tail().load(Ordering::Relaxed);
    let off = (tail & (mem.capacity() as u64 - 1)) as usize;
    mem.stamp(off).load(Ordering::Relaxed) == tail + 1
}

#[cfg(not(loom))]
impl RawMem {
    /// A ring whose control lines start at `base` and whose `cap` data bytes
    /// follow them.
    ///
    /// # Safety
    /// `base` must be 64-aligned, valid for reads and writes of
    /// `RING_CONTROL_BYTES + cap` bytes for as long as the `RawMem` lives, and
    /// those bytes must be used by this ring's one producer and one consumer only.
    pub(crate) unsafe fn new(base: *mut u8, cap: usize) -> RawMem {
        debug_assert_eq!(base as usize % RECORD_ALIGN, 0);
        RawMem { base, cap }
    }

    #[inline]
    fn data(&self) -> *mut u8 {
        // SAFETY: the data follows the control lines inside the region `new` was
        // given.
        unsafe { self.base.add(RING_CONTROL_BYTES) }
    }

    /// The bytes `off..off + len` of the data, borrowed (zero-copy consume).
    /// Only for a consumer, on a record whose stamp it has acquired.
    #[inline]
    pub(crate) fn bytes(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.cap);
        // SAFETY: in bounds (checked above); the producer does not write these
        // bytes until the consumer publishes a tail past them, which it does only
        // after the borrow ends (pop takes `&mut`).
        unsafe { std::slice::from_raw_parts(self.data().add(off), len) }
    }
}

// SAFETY: stamps are the 8-aligned words of the same data bytes `write` and
// `read` address; every access is bounds-checked against `cap`.
#[cfg(not(loom))]
unsafe impl RingMem for RawMem {
    #[inline]
    fn capacity(&self) -> usize {
        self.cap
    }
    #[inline]
    fn stamp(&self, off: usize) -> &AtomicU64 {
        // Every caller passes a masked, 8-aligned offset; masking again
        // (two instructions, no branch) keeps even a wrong one in bounds.
        debug_assert!(off & 7 == 0 && off + 8 <= self.cap);
        let off = off & (self.cap - 1) & !7;
        // SAFETY: in bounds (`cap` is a power of two, so the mask keeps `off
        // + 8 <= cap`) and 8-aligned (base is 64-aligned); every access to a
        // stamp word is atomic, and the producer's plain copies never cover a
        // word the consumer may be polling (module doc).
        unsafe { &*self.data().add(off).cast::<AtomicU64>() }
    }
    #[inline]
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: first word of the consumer's control line, aligned, only ever
        // accessed atomically.
        unsafe { &*self.base.cast::<AtomicU64>() }
    }
    #[inline]
    fn want_room(&self) -> &AtomicU32 {
        // SAFETY: first word of the producer's control line, aligned, only ever
        // accessed atomically.
        unsafe { &*self.base.add(RECORD_ALIGN).cast::<AtomicU32>() }
    }
    #[inline]
    fn write_record(&self, off: usize, len_word: u64, header: &[u8], payload: &[u8]) {
        // One check for the whole body (the record never straddles the end).
        let end = off + HEADER_AT + header.len() + payload.len();
        assert!(off & 7 == 0 && end <= self.cap);
        // SAFETY: `off..end` is inside the data (checked above) and is ring
        // space the consumer has released, so nobody reads it concurrently;
        // the length word is 8-aligned (`off` is; the data base is
        // 64-aligned); the header and payload are the caller's buffers, which
        // cannot overlap the ring.
        unsafe {
            let at = self.data().add(off);
            at.add(LEN_AT).cast::<u64>().write(len_word.to_le());
            crate::copy_bytes(header.as_ptr(), at.add(HEADER_AT), header.len());
            crate::copy_bytes(
                payload.as_ptr(),
                at.add(HEADER_AT + header.len()),
                payload.len(),
            );
        }
    }
    #[inline]
    fn write(&self, off: usize, src: &[u8]) {
        assert!(off + src.len() <= self.cap);
        // SAFETY: in bounds; the destination is ring space the consumer has
        // released, so nobody reads it concurrently; `src` cannot overlap the
        // ring (it is the caller's buffer).
        unsafe { crate::copy_bytes(src.as_ptr(), self.data().add(off), src.len()) }
    }
    #[inline]
    fn read(&self, off: usize, dst: &mut [u8]) {
        dst.copy_from_slice(self.bytes(off, dst.len()));
    }
    #[inline]
    fn prefetch(&self, off: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // The ring's size is a power of two (`Consumer::new`): a mask, not
            // a division, on every record.
            let p = self.data().wrapping_add(off & (self.cap - 1));
            // SAFETY: `prefetch` needs SSE, which every x86_64 has; it reads
            // nothing and never faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>().cast_const()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = off;
    }
}

#[cfg(not(loom))]
impl Consumer<RawMem> {
    /// A peeked record's header bytes ([`HEADER_BYTES`], or the
    /// [`COMPACT_HEADER_BYTES`] or [`SHORT_HEADER_BYTES`] of a smaller form)
    /// and payload, borrowed from
    /// the ring (zero-copy). Valid until `pop`, which needs `&mut self`.
    #[inline]
    pub(crate) fn bytes(&self, rec: Record) -> (&[u8], &[u8]) {
        (
            self.mem.bytes(rec.off + HEADER_AT, rec.hdr),
            self.mem.bytes(rec.off + HEADER_AT + rec.hdr, rec.len),
        )
    }
}

/// A ring in a heap of atomic words, for the model checker: every byte moves
/// through Relaxed atomics, so loom sees (and checks) how each is published.
#[cfg(loom)]
#[derive(Clone)]
pub(crate) struct LoomMem {
    inner: loom::sync::Arc<LoomInner>,
}

#[cfg(loom)]
struct LoomInner {
    words: Vec<AtomicU64>,
    tail: AtomicU64,
    want_room: AtomicU32,
}

#[cfg(loom)]
impl LoomMem {
    /// A zeroed ring of `cap` data bytes.
    pub(crate) fn new(cap: usize) -> LoomMem {
        let words = (0..cap / 8).map(|_| AtomicU64::new(0)).collect();
        LoomMem {
            inner: loom::sync::Arc::new(LoomInner {
                words,
                tail: AtomicU64::new(0),
                want_room: AtomicU32::new(0),
            }),
        }
    }
}

// SAFETY: stamps are `words[off / 8]`, the same words `write`/`read` copy through.
#[cfg(loom)]
unsafe impl RingMem for LoomMem {
    fn capacity(&self) -> usize {
        self.inner.words.len() * 8
    }
    fn stamp(&self, off: usize) -> &AtomicU64 {
        &self.inner.words[off / 8]
    }
    fn tail(&self) -> &AtomicU64 {
        &self.inner.tail
    }
    fn want_room(&self) -> &AtomicU32 {
        &self.inner.want_room
    }
    fn write(&self, off: usize, src: &[u8]) {
        // Word by word, Relaxed: the single producer owns these bytes, so a
        // read-modify-write of a partly covered word loses nothing.
        let mut i = 0;
        while i < src.len() {
            let at = off + i;
            let (w, b) = (at / 8, at % 8);
            let n = (8 - b).min(src.len() - i);
            let mut bytes = self.inner.words[w].load(Ordering::Relaxed).to_le_bytes();
            bytes[b..b + n].copy_from_slice(&src[i..i + n]);
            self.inner.words[w].store(u64::from_le_bytes(bytes), Ordering::Relaxed);
            i += n;
        }
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        let mut i = 0;
        while i < dst.len() {
            let at = off + i;
            let (w, b) = (at / 8, at % 8);
            let n = (8 - b).min(dst.len() - i);
            let bytes = self.inner.words[w].load(Ordering::Relaxed).to_le_bytes();
            dst[i..i + n].copy_from_slice(&bytes[b..b + n]);
            i += n;
        }
    }
}

/// A heap-allocated ring (control lines + data) for the unit tests.
#[cfg(all(test, not(loom)))]
pub(crate) struct HeapRing {
    lines: Vec<[u64; 8]>,
    cap: usize,
}

#[cfg(all(test, not(loom)))]
impl HeapRing {
    pub(crate) fn new(cap: usize) -> HeapRing {
        // `[u64; 8]` is 8-aligned only; over-allocate one line and align by hand.
        HeapRing {
            lines: vec![[0u64; 8]; (RING_CONTROL_BYTES + cap) / 64 + 1],
            cap,
        }
    }
    pub(crate) fn ends(&mut self) -> (Producer<RawMem>, Consumer<RawMem>) {
        let (a, b) = self.mems();
        (Producer::new(a), Consumer::new(b))
    }
    /// The ring's memory for a producer and a consumer.
    pub(crate) fn mems(&mut self) -> (RawMem, RawMem) {
        let p = self.lines.as_mut_ptr().cast::<u8>();
        let base = p.wrapping_add(p.align_offset(RECORD_ALIGN));
        // SAFETY: `base` is 64-aligned and `RING_CONTROL_BYTES + cap` bytes of the
        // vector follow it (one spare line covers the alignment); the vector
        // outlives both ends in every test; one producer and one consumer.
        unsafe { (RawMem::new(base, self.cap), RawMem::new(base, self.cap)) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// A header that is compact (zero from byte 24 on) for every other `seq`.
    fn header_for(seq: u64) -> [u8; HEADER_BYTES] {
        let mut h = [0u8; HEADER_BYTES];
        h[..8].copy_from_slice(&seq.to_le_bytes());
        if seq % 2 == 1 {
            h[32..40].copy_from_slice(&(!seq).to_le_bytes());
        }
        h
    }

    /// [`header_for`] of a message of `len` bytes: for every fourth `seq`
    /// its `len` field says so, which allows the short form.
    fn header_of(seq: u64, len: usize) -> [u8; HEADER_BYTES] {
        let mut h = header_for(seq);
        if seq % 4 == 2 {
            h[16..24].copy_from_slice(&(len as u64).to_le_bytes());
        }
        h
    }

    fn payload_for(seq: u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (seq as usize * 31 + i * 7) as u8)
            .collect()
    }

    #[test]
    fn the_smaller_forms_exactly_where_they_save_a_line() {
        for len in 0..=max_payload(65536) {
            let full = record_bytes(HEADER_BYTES, len);
            assert_eq!(
                compact_len(len),
                record_bytes(COMPACT_HEADER_BYTES, len) < full,
                "{len} bytes"
            );
            assert_eq!(
                small_len(len),
                record_bytes(SHORT_HEADER_BYTES, len) < full,
                "{len} bytes"
            );
            // Where the compact form saves a line, the short one saves the same.
            assert!(!compact_len(len) || small_len(len), "{len} bytes");
        }
        assert!(!compact_len(8) && compact_len(9) && compact_len(24) && !compact_len(25));
        assert!(!small_len(8) && small_len(9) && small_len(32) && !small_len(33));
    }

    /// Each form the producer picks comes back from the ring as the header it
    /// was given, and takes the lines it should.
    #[test]
    fn each_header_form_round_trips() {
        let mut ring = HeapRing::new(4096);
        let (mut p, mut c) = ring.ends();
        // (seq, len, lines): seq 1 full, 0 compact, 2 short (`header_of`).
        for (seq, len, lines) in [
            (1u64, 8usize, 1u64),
            (1, 9, 2),
            (0, 24, 1),
            (0, 25, 2),
            (2, 25, 1),
            (2, 32, 1),
            (2, 33, 2),
            (0, 96, 3),
            (2, 96, 2),
        ] {
            let head = p.head;
            let h = header_of(seq, len);
            assert!(p.push_either(&h, &payload_for(seq, len)));
            assert_eq!(p.head - head, lines * 64, "seq {seq}, {len} bytes");
            let r = c.peek().unwrap().unwrap();
            let mut got = [0u8; HEADER_BYTES];
            let mut pl = vec![0u8; len];
            c.read_record(r, &mut got, &mut pl);
            assert_eq!(
                (got, pl),
                (h, payload_for(seq, len)),
                "seq {seq}, {len} bytes"
            );
            c.pop(r);
        }
    }

    /// A [`RawMem`] that counts the stamp words the producer touches.
    struct Counting(RawMem, std::rc::Rc<std::cell::Cell<usize>>);

    // SAFETY: every method is `RawMem`'s.
    unsafe impl RingMem for Counting {
        fn capacity(&self) -> usize {
            self.0.capacity()
        }
        fn stamp(&self, off: usize) -> &AtomicU64 {
            self.1.set(self.1.get() + 1);
            self.0.stamp(off)
        }
        fn tail(&self) -> &AtomicU64 {
            self.0.tail()
        }
        fn want_room(&self) -> &AtomicU32 {
            self.0.want_room()
        }
        fn write(&self, off: usize, src: &[u8]) {
            self.0.write(off, src)
        }
        fn read(&self, off: usize, dst: &mut [u8]) {
            self.0.read(off, dst)
        }
    }

    /// Where the word after a record was last written as a stamp, the
    /// producer does not read it (it is an older position, never the next
    /// stamp): a stream of one-line records touches one stamp word a record
    /// once each line has held a stamp; two-line records, once their starts
    /// fall where starts fell a lap before. Where it held body bytes, it looks.
    #[test]
    fn the_producer_looks_after_a_record_only_where_body_bytes_were() {
        let cap = 4096;
        let mut ring = HeapRing::new(cap);
        let (a, b) = ring.mems();
        let mut c = Consumer::new(b);
        let touched = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut p = Producer::new(Counting(a, touched.clone()));
        let mut push = |p: &mut Producer<Counting>, len: usize| {
            touched.set(0);
            assert!(p.try_push(&header_for(1), &payload_for(1, len)));
            let r = c.peek().unwrap().unwrap();
            c.pop(r);
            c.publish_if_behind();
            touched.get()
        };
        // First lap: nothing known of the ring, so every push looks (but the
        // last, after which the ring is full by the producer's stale copy of
        // the tail: no terminator then).
        let looks: usize = (0..cap / 64).map(|_| push(&mut p, 8) - 1).sum();
        assert_eq!(looks, cap / 64 - 1);
        // Second lap: every line's first word is one of our stamps.
        for _ in 0..cap / 64 {
            assert_eq!(push(&mut p, 8), 1);
        }
        // Two-line records (payload 64 B) over that lap: their second lines
        // now hold body bytes, but the next record starts on a stamp line.
        for _ in 0..cap / 128 {
            assert_eq!(push(&mut p, 64), 1);
        }
        // One-line records where the two-line ones lay: every other start
        // follows a line of body bytes, which is looked at.
        let looks: Vec<usize> = (0..8).map(|_| push(&mut p, 8)).collect();
        assert_eq!(looks, [2, 1, 2, 1, 2, 1, 2, 1]);
    }

    #[test]
    fn max_payload_of_default_ring() {
        assert_eq!(max_payload(65536), 32712);
        assert_eq!(record_bytes(HEADER_BYTES, max_payload(65536)), 32768);
        assert_eq!(
            record_bytes(HEADER_BYTES, 8),
            64,
            "full header: 8 bytes in one line"
        );
        assert_eq!(record_bytes(HEADER_BYTES, 9), 128);
        assert_eq!(
            record_bytes(COMPACT_HEADER_BYTES, 24),
            64,
            "compact: 24 bytes"
        );
        assert_eq!(record_bytes(COMPACT_HEADER_BYTES, 25), 128);
    }

    #[test]
    fn fills_refuses_and_resumes() {
        let mut ring = HeapRing::new(4096);
        let (mut p, mut c) = ring.ends();
        let mut n = 0u64;
        while p.try_push(&header_for(n), &payload_for(n, 8)) {
            n += 1;
        }
        assert_eq!(n, 64, "64 one-line records fill 4096 bytes");
        assert!(p.is_blocked() && !p.room_for_blocked());
        let r = c.peek().unwrap().unwrap();
        assert!(!c.pop(r), "one line is below the publication batch");
        assert!(!p.room_for_blocked(), "tail not published yet");
        assert!(c.publish_if_behind());
        assert!(p.room_for_blocked());
        assert!(p.try_push(&header_for(n), &payload_for(n, 8)));
    }

    /// Pushes and consumes one-line records until the head reaches `end`.
    fn one_line_records_until(p: &mut Producer<RawMem>, c: &mut Consumer<RawMem>, end: u64) {
        while p.head < end {
            assert!(p.try_push(&header_for(1), &[]));
            let r = c.peek().unwrap().unwrap();
            c.pop(r);
            c.publish_if_behind();
        }
    }

    /// A payload word equal to a future record's stamp must not be taken for a
    /// record (the terminator): lap 1's data ends up under lap 2's positions.
    /// Lap 0 puts a stamp on every line first, so the producer knows the ring
    /// and must notice that lap 1's payload covered those stamps.
    #[test]
    fn stale_payload_never_looks_like_a_stamp() {
        let cap = 4096usize;
        let mut ring = HeapRing::new(cap);
        let (mut p, mut c) = ring.ends();
        // Lap 0: one-line records on every line.
        one_line_records_until(&mut p, &mut c, cap as u64);
        // Lap 1: one big record starting at 0, whose payload words at every
        // 64-byte boundary hold the stamps lap 2's one-line records would
        // carry. (A full header: odd `header_for` numbers.)
        const PAYLOAD_AT: usize = HEADER_AT + HEADER_BYTES;
        let len = max_payload(cap);
        let mut payload = vec![0u8; len];
        for k in 1..(len + PAYLOAD_AT) / 64 {
            let at = k * 64 - PAYLOAD_AT; // payload offset landing on boundary k
            let forged = (2 * cap + k * 64 + 1) as u64;
            payload[at..at + 8].copy_from_slice(&forged.to_le_bytes());
        }
        assert!(p.try_push(&header_for(3), &payload));
        let r = c.peek().unwrap().unwrap();
        c.pop(r);
        // The rest of lap 1: one-line records, consumed.
        one_line_records_until(&mut p, &mut c, 2 * cap as u64);
        // Lap 2, position 2 cap: one record, then the consumer polls
        // 2 cap + 64, where the old payload holds exactly 2 cap + 64 + 1.
        assert!(p.try_push(&header_for(2), &[1, 2, 3]));
        let r = c.peek().unwrap().unwrap();
        assert_eq!(r.len, 3);
        c.pop(r);
        assert_eq!(c.peek().unwrap(), None);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(usize),
        Pop,
    }

    fn run_ops(ring_bytes: usize, ops: &[Op]) -> Result<(), TestCaseError> {
        let mut ring = HeapRing::new(ring_bytes);
        let (mut p, mut c) = ring.ends();
        let mut model: VecDeque<(u64, usize)> = VecDeque::new();
        let mut seq = 0u64;
        for op in ops {
            match *op {
                Op::Push(len) => {
                    let len = len % (max_payload(ring_bytes) + 1);
                    if p.push_either(&header_of(seq, len), &payload_for(seq, len)) {
                        model.push_back((seq, len));
                        seq += 1;
                    } else {
                        // Refused: a drained ring whose tail is published must not.
                        prop_assert!(
                            !(model.is_empty() && c.pos == c.published),
                            "drained ring refused"
                        );
                    }
                }
                Op::Pop => match c.peek().map_err(TestCaseError::fail)? {
                    None => {
                        prop_assert!(model.is_empty());
                        c.publish_if_behind();
                    }
                    Some(r) => {
                        let (s, len) = model.pop_front().expect("record the model does not have");
                        prop_assert_eq!(r.len, len);
                        let mut h = [0u8; HEADER_BYTES];
                        let mut pl = vec![0u8; len];
                        c.read_record(r, &mut h, &mut pl);
                        prop_assert_eq!(h, header_of(s, len));
                        prop_assert_eq!(pl, payload_for(s, len));
                        c.pop(r);
                    }
                },
            }
        }
        Ok(())
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![(0usize..4096).prop_map(Op::Push), Just(Op::Pop)]
    }

    proptest! {
        /// Random sizes through a small ring, pushes and pops interleaved: every
        /// record comes out once, in order, intact; an empty ring never refuses.
        #[test]
        fn ring_matches_a_queue(ops in proptest::collection::vec(op(), 1..400),
                                shift in 0u32..3) {
            run_ops(4096 << shift, &ops)?;
        }
    }

    #[test]
    fn empty_ring_accepts_the_largest_record_at_any_offset() {
        for start in (0..4096).step_by(64) {
            let mut ring = HeapRing::new(4096);
            let (mut p, mut c) = ring.ends();
            if start > 0 {
                // Advance both ends to `start` with small records.
                for _ in 0..start / 64 {
                    assert!(p.try_push(&header_for(0), &[]));
                    let r = c.peek().unwrap().unwrap();
                    c.pop(r);
                }
                c.publish_if_behind();
            }
            let big = vec![7u8; max_payload(4096)];
            assert!(p.try_push(&header_for(1), &big), "start {start}");
            let r = c.peek().unwrap().unwrap();
            assert_eq!(r.len, big.len());
        }
    }

    /// Two threads, 200,000 records of random sizes (a quarter up to the maximum),
    /// checked byte by byte and in order.
    #[test]
    fn two_thread_stress() {
        const N: u64 = 200_000;
        let cap = 8192;
        let mut ring = HeapRing::new(cap);
        let (mut p, mut c) = ring.ends();
        let max = max_payload(cap);
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64;
                let mut buf = vec![0u8; max];
                for seq in 0..N {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let len = if x & 3 == 0 {
                        (x >> 8) as usize % (max + 1)
                    } else {
                        (x >> 8) as usize % 64
                    };
                    for (i, b) in buf[..len].iter_mut().enumerate() {
                        *b = (seq as usize).wrapping_mul(131).wrapping_add(i) as u8;
                    }
                    while !p.push_either(&header_of(seq, len), &buf[..len]) {
                        std::hint::spin_loop();
                    }
                }
            });
            s.spawn(move || {
                let mut seq = 0u64;
                let mut h = [0u8; HEADER_BYTES];
                let mut buf = vec![0u8; max];
                while seq < N {
                    match c.peek().unwrap() {
                        None => {
                            c.publish_if_behind();
                            std::hint::spin_loop();
                        }
                        Some(r) => {
                            c.read_record(r, &mut h, &mut buf[..r.len]);
                            assert_eq!(h, header_of(seq, r.len));
                            for (i, &b) in buf[..r.len].iter().enumerate() {
                                assert_eq!(
                                    b,
                                    (seq as usize).wrapping_mul(131).wrapping_add(i) as u8
                                );
                            }
                            c.pop(r);
                            seq += 1;
                        }
                    }
                }
            });
        });
    }
}

/// Model checks: the protocol on a 256-byte ring (four lines) with records of
/// one and two lines, so pushes wrap and find the ring full. Run with
/// `RUSTFLAGS="--cfg loom" cargo test -p kumi-transport --release loom`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use std::sync::Arc; // created outside the model: not a loom type

    const CAP: usize = 256;

    /// Compact (zero from byte 24 on) for even `seq`, full for odd; for
    /// `seq` 2, 6, 10... its `len` field is `len`, which allows the short form.
    fn header_for(seq: u8, len: usize) -> [u8; HEADER_BYTES] {
        let mut h = [seq; HEADER_BYTES];
        if seq % 2 == 0 {
            h[COMPACT_HEADER_BYTES..].fill(0);
        }
        if seq % 4 == 2 {
            h[16..24].copy_from_slice(&(len as u64).to_le_bytes());
        }
        h
    }

    fn payload_for(seq: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| seq.wrapping_mul(17).wrapping_add(i as u8))
            .collect()
    }

    /// Producer pushes `payloads` (spinning while full), consumer pops them and
    /// checks header, length and every byte, in order.
    ///
    /// What loom can and cannot check here: it explores every interleaving and
    /// every older value a Relaxed load may return, so a missing Release/Acquire
    /// on the stamps (payload read before it is written) or a terminator not
    /// published by the stamp is found. It does not model loads that see
    /// *later* stores (load buffering), so the Release on `tail` (consumer's
    /// reads before the producer's overwrites) is argued in comments only.
    fn check(payloads: Vec<Vec<u8>>) {
        let payloads = Arc::new(payloads);
        let mut b = loom::model::Builder::new();
        // Bounded preemptions keep the run short (4: about 8 s for all three
        // models, release build); the interleavings that matter (a stamp,
        // terminator or tail store landing between two reads) need one or two.
        // LOOM_MAX_PREEMPTIONS in the environment overrides the bound.
        if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
            b.preemption_bound = Some(4);
        }
        b.check(move || {
            let mem = LoomMem::new(CAP);
            let mut p = Producer::new(mem.clone());
            let mut c = Consumer::new(mem);
            let sent = payloads.clone();
            let t = loom::thread::spawn(move || {
                for (seq, pl) in sent.iter().enumerate() {
                    while !p.push_either(&header_for(seq as u8, pl.len()), pl) {
                        loom::thread::yield_now();
                    }
                }
            });
            let mut h = [0u8; HEADER_BYTES];
            for (seq, want) in payloads.iter().enumerate() {
                let r = loop {
                    match c.peek().expect("no corruption") {
                        Some(r) => break r,
                        None => {
                            c.publish_if_behind();
                            loom::thread::yield_now();
                        }
                    }
                };
                assert_eq!(r.len, want.len());
                let mut pl = vec![0u8; r.len];
                c.read_record(r, &mut h, &mut pl);
                assert_eq!(h, header_for(seq as u8, r.len));
                assert_eq!(&pl, want);
                c.pop(r);
            }
            t.join().unwrap();
        });
    }

    /// 64 + 128 + 128 bytes through 256: the third record finds the ring full
    /// until the consumer frees room, then wraps (marker at 192).
    #[test]
    fn loom_ring_wrap_and_full() {
        check(vec![
            payload_for(0, 8),
            payload_for(1, 70),
            payload_for(2, 72),
        ]);
    }

    /// One-line records, more than a lap's worth: full, tail batching, stale
    /// stamps of the previous lap; the 16-byte one in the short form.
    #[test]
    fn loom_ring_small_records_lap() {
        check(
            [0, 8, 16, 8, 1]
                .iter()
                .enumerate()
                .map(|(s, &l)| payload_for(s as u8, l))
                .collect(),
        );
    }

    /// The first record's payload holds, at ring offset 64, the stamp the record
    /// at position 256 + 64 will carry; the consumer polls that word after the
    /// lap and must see the terminator (or the real record), never the forgery.
    #[test]
    fn loom_ring_stale_payload_is_not_a_record() {
        let mut first = payload_for(0, 72);
        // Payload byte k sits at ring offset 56 + k: offset 64 is k = 8.
        first[8..16].copy_from_slice(&((CAP + 64 + 1) as u64).to_le_bytes());
        check(vec![
            first,
            payload_for(1, 0),
            payload_for(2, 0),
            payload_for(3, 5),
            payload_for(4, 9),
        ]);
    }
}
