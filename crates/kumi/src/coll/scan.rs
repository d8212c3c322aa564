//! Scan and exscan: through the collective area inside one host
//! (`shm::scan`), or by single copy there for a long one
//! (`shm::scan_single_copy`), else a chain of messages
//! (`kumi_core::coll::scan_linear`).

use super::*;

thread_local! {
    /// The received prefix of the linear scans, kept from call to call.
    static SCAN_SCRATCH: std::cell::RefCell<AlignedBuf> = Default::default();
}

impl Comm {
    /// Inclusive prefix: rank i gets `send(0) ⊕ ... ⊕ send(i)`.
    #[track_caller]
    pub fn scan<T: Pod>(&self, send: &[T], recv: &mut [T], op: &Op<T>) -> Result<()> {
        self.scan_at(Some(send), recv, op, false, Location::caller())
    }

    /// [`Comm::scan`] in place.
    #[track_caller]
    pub fn scan_in_place<T: Pod>(&self, buf: &mut [T], op: &Op<T>) -> Result<()> {
        self.scan_at(None, buf, op, false, Location::caller())
    }

    /// Exclusive prefix: rank i > 0 gets `send(0) ⊕ ... ⊕ send(i-1)`; rank 0's
    /// `recv` is left as it was.
    #[track_caller]
    pub fn exscan<T: Pod>(&self, send: &[T], recv: &mut [T], op: &Op<T>) -> Result<()> {
        self.scan_at(Some(send), recv, op, true, Location::caller())
    }

    /// [`Comm::exscan`] in place (rank 0's `buf` is unchanged).
    #[track_caller]
    pub fn exscan_in_place<T: Pod>(&self, buf: &mut [T], op: &Op<T>) -> Result<()> {
        self.scan_at(None, buf, op, true, Location::caller())
    }

    /// Linear chain: receive the prefix from the left, pass own prefix right.
    /// This rank's contribution is `send` (as long as `buf`, checked here),
    /// or `buf` in place (`None`); the result goes to `buf`. Rank 0 sends straight from its contribution,
    /// and the last rank of an exclusive scan receives straight into `buf`
    /// (its result is the prefix alone). The others work in `buf` and one
    /// scratch buffer kept from call to call for the received prefix: fresh
    /// whole-length temporaries cost page faults and zeroing (measured:
    /// docs/BENCHMARKS.md, session 22).
    fn scan_at<T: Pod>(
        &self,
        send: Option<&[T]>,
        buf: &mut [T],
        op: &Op<T>,
        exclusive: bool,
        at: &'static Location<'static>,
    ) -> Result<()> {
        if let Some(send) = send.filter(|s| s.len() != buf.len()) {
            return Err(bad(
                "recv",
                buf.len(),
                format!("the length of send ({})", send.len()),
            ));
        }
        op.check_for(buf.len())?;
        let (p, me) = (self.size(), self.rank());
        // An inclusive scan's result starts as this rank's own part; an
        // exclusive one leaves rank 0's buffer alone.
        let mine_into_buf = |buf: &mut [T]| {
            if let Some(send) = send {
                copy_slice(buf, send);
            }
        };
        if p == 1 {
            if !exclusive {
                mine_into_buf(buf);
            }
            return Ok(());
        }
        // Inside one host: every rank folds the contributions before it out
        // of the area (or, with more than two ranks a core, the prefix of
        // the rank before it: `shm::scan_chains`), none waiting for a rank
        // after it, in chunks of a payload half (whole elements, or groups
        // of a grouped operation: a scan is one per element).
        let elem = op.unit_bytes();
        let info = self.info(Call::Collective, -2, -2, at);
        let done = self.shm_whole(at, false, |e, g| {
            let chunk = (g.payload / elem) * elem;
            (chunk > 0).then(|| {
                let f = |a: &[u8], b: &mut [u8]| {
                    op.f.call(bytemuck::cast_slice(a), bytemuck::cast_slice_mut(b))
                };
                let (send, buf) = (send.map(as_bytes), as_bytes_mut(buf));
                // By single copy where the host chose it, the vector is
                // long and every member has a core (every member knows
                // these alike): it keeps its speed where the area's copies
                // across cores slow down (docs/BENCHMARKS.md, session 56).
                if shm::scan_by_copy(e, buf.len()) {
                    let how = (elem, !exclusive);
                    return shm::scan_single_copy(e, g, (send, buf), how, &f, info);
                }
                let how = (exclusive, shm::scan_chains(e, g, buf.len()));
                let mut off = 0;
                loop {
                    let r = off..(off + chunk).min(buf.len());
                    let own = send.map(|b| &b[r.clone()]);
                    shm::scan(e, g, own, &mut buf[r.clone()], &f, how, info)?;
                    off = r.end;
                    if off == buf.len() {
                        return Ok(());
                    }
                }
            })
        })?;
        if done.is_some() {
            return Ok(());
        }
        let (_, wire) = self.wire()?;
        let ctx = self.coll_ctx();
        if me == 0 {
            // Its own contribution is the prefix.
            if !exclusive {
                mine_into_buf(buf);
            }
            let mine = send.unwrap_or(buf);
            return self.send_on(ctx, as_bytes(mine), 1, wire.tag, false, at);
        }
        if exclusive && me + 1 == p {
            return self
                .recv_on(
                    ctx,
                    as_bytes_mut(buf),
                    me as i32 - 1,
                    wire.tag,
                    Call::Collective,
                    at,
                )
                .map(drop);
        }
        mine_into_buf(buf);
        SCAN_SCRATCH.with_borrow_mut(|scratch| -> Result<()> {
            let len = std::mem::size_of_val(buf);
            if scratch.bytes().len() < len {
                *scratch = AlignedBuf::zeroed(len);
            }
            // 16-byte aligned, whole elements: a slice of `T`.
            let left: &mut [T] = bytemuck::cast_slice_mut(&mut scratch.bytes_mut()[..len]);
            self.recv_on(
                ctx,
                as_bytes_mut(left),
                me as i32 - 1,
                wire.tag,
                Call::Collective,
                at,
            )?;
            // buf = prefix ⊕ mine: the next rank's prefix, and this rank's
            // inclusive result.
            op.f.call(left, buf);
            if me + 1 < p {
                self.send_on(ctx, as_bytes(buf), me as i32 + 1, wire.tag, false, at)?;
            }
            if exclusive {
                copy_slice(buf, left);
            }
            Ok(())
        })
    }
}
