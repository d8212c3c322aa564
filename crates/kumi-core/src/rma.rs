//! One-sided access to a window part on another host: the wire form of the
//! active messages that the target's progress engine serves (put, get,
//! accumulate, lock, unlock, and the replies), and their checks.
//!
//! A request rides in a frame of kind [`Kind::Rma`] whose header fields mean:
//!
//! | field | request                                   | reply                       |
//! |-------|-------------------------------------------|-----------------------------|
//! | ctx   | the window's id (its communicator's context) | same                     |
//! | src   | the origin's rank in the window           | the target's rank           |
//! | tag   | opcode, accumulate operation, element kind (bytes 0, 1, 2) | opcode `REPLY` |
//! | flags | [`FLAG_FETCH`] / [`FLAG_EXCLUSIVE`]       | [`FLAG_ERROR`]              |
//! | len   | payload bytes; for a get, the bytes asked for | payload bytes           |
//! | id    | the origin's request (0: no reply wanted) | the request answered        |
//! | aux   | byte offset in the target's part          | offset of this chunk in the answer |
//!
//! A compare-and-swap carries the new value, then the value to compare with.
//! Everything here is checked before use: a frame that fails [`Msg::decode`]
//! is dropped by the runtime with its reason, and never touches memory.

use crate::header::{Header, Kind};

/// Opcode of a put.
const PUT: u8 = 1;
/// Opcode of a get.
const GET: u8 = 2;
/// Opcode of an accumulate.
const ACC: u8 = 3;
/// Opcode of a lock request.
const LOCK: u8 = 4;
/// Opcode of an unlock.
const UNLOCK: u8 = 5;
/// Opcode of a reply.
const REPLY: u8 = 6;

/// Accumulate: send the bytes there before back.
pub const FLAG_FETCH: u8 = 1;
/// Lock, unlock: exclusively (else shared).
pub const FLAG_EXCLUSIVE: u8 = 2;
/// Reply: the payload is an error message.
pub const FLAG_ERROR: u8 = 4;

/// How an accumulate combines the bytes sent (`data`) with those in the
/// target (`cur`): `cur = data op cur`, element by element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AccOp {
    /// `cur = data` (MPI_REPLACE).
    Replace = 1,
    /// Nothing (MPI_NO_OP: a fetch only).
    NoOp = 2,
    /// Sum.
    Sum = 3,
    /// Product.
    Prod = 4,
    /// Minimum.
    Min = 5,
    /// Maximum.
    Max = 6,
    /// Logical and (nonzero is true).
    Land = 7,
    /// Logical or.
    Lor = 8,
    /// Logical exclusive or.
    Lxor = 9,
    /// Bitwise and.
    Band = 10,
    /// Bitwise or.
    Bor = 11,
    /// Bitwise exclusive or.
    Bxor = 12,
    /// Compare and swap of one element: `cur = data` if `cur == compare`.
    Cas = 13,
    /// The smaller value and its index (pairs only).
    MinLoc = 14,
    /// The larger value and its index (pairs only).
    MaxLoc = 15,
}

impl AccOp {
    fn from_u8(v: u8) -> Option<AccOp> {
        use AccOp::*;
        [
            Replace, NoOp, Sum, Prod, Min, Max, Land, Lor, Lxor, Band, Bor, Bxor, Cas, MinLoc,
            MaxLoc,
        ]
        .into_iter()
        .find(|&o| o as u8 == v)
    }

    /// Whether the operation is defined on elements of `elem`: replacing,
    /// fetching and compare-and-swap on any; arithmetic and logic on
    /// numbers, but bitwise operations on integers only; sum and product
    /// on complex numbers; MinLoc and MaxLoc on pairs only.
    pub fn takes(self, elem: Elem) -> bool {
        use AccOp::*;
        use Elem::*;
        let float = matches!(elem, F32 | F64 | LongDouble);
        let complex = matches!(elem, C32 | C64 | CLongDouble);
        let pair = matches!(
            elem,
            Pair32 | PairF32 | PairF64 | F32Int | F64Int | I64Int | I16Int | LongDoubleInt
        );
        match self {
            Replace | NoOp | Cas => true,
            MinLoc | MaxLoc => pair,
            Sum | Prod => !pair,
            Min | Max | Land | Lor | Lxor => !pair && !complex,
            Band | Bor | Bxor => !pair && !complex && !float,
        }
    }
}

/// The element type an accumulate combines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Elem {
    I8 = 1,
    U8 = 2,
    I16 = 3,
    U16 = 4,
    I32 = 5,
    U32 = 6,
    I64 = 7,
    U64 = 8,
    F32 = 9,
    F64 = 10,
    /// C's `long double` on x86-64 (80-bit extended in 16 bytes).
    LongDouble = 11,
    /// Complex numbers of two `f32`, two `f64`, two `long double`.
    C32 = 12,
    C64 = 13,
    CLongDouble = 14,
    /// Pairs whose index has the value's type: `i32`, `f32`, `f64`
    /// (MPI_2INT, MPI_2REAL, MPI_2DOUBLE_PRECISION).
    Pair32 = 15,
    PairF32 = 16,
    PairF64 = 17,
    /// A value and a C `int` index, in C's layout (MPI_FLOAT_INT,
    /// MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT, MPI_LONG_DOUBLE_INT).
    F32Int = 18,
    F64Int = 19,
    I64Int = 20,
    I16Int = 21,
    LongDoubleInt = 22,
}

impl Elem {
    /// Every element kind, in the order of their numbers.
    pub const ALL: [Elem; 22] = {
        use Elem::*;
        [
            I8,
            U8,
            I16,
            U16,
            I32,
            U32,
            I64,
            U64,
            F32,
            F64,
            LongDouble,
            C32,
            C64,
            CLongDouble,
            Pair32,
            PairF32,
            PairF64,
            F32Int,
            F64Int,
            I64Int,
            I16Int,
            LongDoubleInt,
        ]
    };

    fn from_u8(v: u8) -> Option<Elem> {
        Elem::ALL.into_iter().find(|&e| e as u8 == v)
    }

    /// Bytes of one element.
    pub fn size(self) -> usize {
        use Elem::*;
        match self {
            I8 | U8 => 1,
            I16 | U16 => 2,
            I32 | U32 | F32 => 4,
            I64 | U64 | F64 | C32 | Pair32 | PairF32 | F32Int | I16Int => 8,
            LongDouble | C64 | PairF64 | F64Int | I64Int => 16,
            CLongDouble | LongDoubleInt => 32,
        }
    }
}

/// What a request asks (or a reply answers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// Write `data` at byte `off`.
    Put {
        /// Byte offset in the target's part.
        off: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// Read `len` bytes at byte `off`.
    Get {
        /// Byte offset in the target's part.
        off: u64,
        /// Bytes asked for.
        len: u64,
    },
    /// Combine `data` into the bytes at `off` (atomically per element with
    /// respect to every other accumulate to the part).
    Acc {
        /// Byte offset in the target's part.
        off: u64,
        /// The operation.
        op: AccOp,
        /// The element type.
        elem: Elem,
        /// Answer with the bytes there before.
        fetch: bool,
        /// The operand (whole elements).
        data: &'a [u8],
        /// For [`AccOp::Cas`]: the value to compare with (as long as `data`).
        compare: &'a [u8],
    },
    /// Take the part's passive-target lock; answered when granted.
    Lock {
        /// Exclusively, or shared.
        exclusive: bool,
    },
    /// Release the lock taken by [`Op::Lock`].
    Unlock {
        /// As it was taken.
        exclusive: bool,
    },
    /// A (piece of the) answer to request `id`.
    Reply {
        /// Offset of `data` in the whole answer.
        at: u64,
        /// The bytes, or why the request failed.
        result: Result<&'a [u8], &'a str>,
    },
}

/// A decoded one-sided message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg<'a> {
    /// The window.
    pub win: u32,
    /// The sender's rank in the window.
    pub src: u32,
    /// The origin's request (0: no reply wanted).
    pub id: u64,
    /// What it asks or answers.
    pub op: Op<'a>,
}

impl<'a> Msg<'a> {
    /// The frame's header and payload (the payload of a compare-and-swap is
    /// `data` then `compare`, which the caller appends: see [`Msg::payload`]).
    pub fn header(&self) -> Header {
        let mut h = Header::new(Kind::Rma);
        h.ctx = self.win;
        h.src = self.src;
        h.id = self.id;
        let (code, flags, aux, len, extra) = match self.op {
            Op::Put { off, data } => (PUT, 0, off, data.len() as u64, 0),
            Op::Get { off, len } => (GET, 0, off, len, 0),
            Op::Acc {
                off,
                op,
                elem,
                fetch,
                data,
                compare,
            } => (
                ACC,
                if fetch { FLAG_FETCH } else { 0 },
                off,
                (data.len() + compare.len()) as u64,
                u32::from(op as u8) << 8 | u32::from(elem as u8) << 16,
            ),
            Op::Lock { exclusive } => (LOCK, excl(exclusive), 0, 0, 0),
            Op::Unlock { exclusive } => (UNLOCK, excl(exclusive), 0, 0, 0),
            Op::Reply { at, result } => match result {
                Ok(d) => (REPLY, 0, at, d.len() as u64, 0),
                Err(m) => (REPLY, FLAG_ERROR, at, m.len() as u64, 0),
            },
        };
        h.tag = (u32::from(code) | extra) as i32;
        h.flags = flags;
        h.aux = aux;
        h.len = len;
        h
    }

    /// The frame's payload, in pieces to send one after the other.
    pub fn payload(&self) -> [&'a [u8]; 2] {
        match self.op {
            Op::Put { data, .. } => [data, &[]],
            Op::Acc { data, compare, .. } => [data, compare],
            Op::Reply { result, .. } => match result {
                Ok(d) => [d, &[]],
                Err(m) => [m.as_bytes(), &[]],
            },
            Op::Get { .. } | Op::Lock { .. } | Op::Unlock { .. } => [&[], &[]],
        }
    }

    /// Decodes and checks a frame of kind [`Kind::Rma`]. Offsets and lengths
    /// are not checked against any part here (the runtime knows the parts);
    /// everything else is.
    pub fn decode(h: &Header, p: &'a [u8]) -> Result<Msg<'a>, String> {
        if h.kind != Kind::Rma {
            return Err(format!("{:?} frame is not one-sided", h.kind));
        }
        let tag = h.tag as u32;
        let (code, op_b, elem_b) = (tag as u8, (tag >> 8) as u8, (tag >> 16) as u8);
        if tag >> 24 != 0 || (code != ACC && tag >> 8 != 0) {
            return Err(format!("one-sided frame with tag {tag:#x}"));
        }
        let no_payload = |what: &str| {
            if p.is_empty() {
                Ok(())
            } else {
                Err(format!("one-sided {what} carries {} bytes", p.len()))
            }
        };
        let sized = || {
            if h.len == p.len() as u64 {
                Ok(())
            } else {
                Err(format!(
                    "one-sided frame announces {} bytes, carries {}",
                    h.len,
                    p.len()
                ))
            }
        };
        let flags_only = |allowed: u8| {
            if h.flags & !allowed == 0 {
                Ok(())
            } else {
                Err(format!("one-sided frame with flags {:#x}", h.flags))
            }
        };
        let exclusive = h.flags & FLAG_EXCLUSIVE != 0;
        let op = match code {
            PUT => {
                flags_only(0)?;
                sized()?;
                Op::Put {
                    off: h.aux,
                    data: p,
                }
            }
            GET => {
                flags_only(0)?;
                no_payload("get")?;
                if h.id == 0 {
                    return Err("one-sided get without a request to answer".into());
                }
                Op::Get {
                    off: h.aux,
                    len: h.len,
                }
            }
            ACC => {
                flags_only(FLAG_FETCH)?;
                sized()?;
                let op = AccOp::from_u8(op_b)
                    .ok_or_else(|| format!("unknown accumulate operation {op_b}"))?;
                let elem = Elem::from_u8(elem_b)
                    .ok_or_else(|| format!("unknown accumulate element kind {elem_b}"))?;
                if !op.takes(elem) {
                    return Err(format!("accumulate {op:?} on {elem:?} elements"));
                }
                let (data, compare) = if op == AccOp::Cas {
                    if p.len() != 2 * elem.size() {
                        return Err(format!(
                            "compare-and-swap of {} bytes (one {elem:?} and its comparand: {})",
                            p.len(),
                            2 * elem.size()
                        ));
                    }
                    p.split_at(elem.size())
                } else {
                    (p, &p[p.len()..])
                };
                if !data.len().is_multiple_of(elem.size()) {
                    return Err(format!(
                        "accumulate of {} bytes: not whole {elem:?} elements",
                        data.len()
                    ));
                }
                let fetch = h.flags & FLAG_FETCH != 0;
                if fetch && h.id == 0 {
                    return Err("fetching accumulate without a request to answer".into());
                }
                Op::Acc {
                    off: h.aux,
                    op,
                    elem,
                    fetch,
                    data,
                    compare,
                }
            }
            LOCK | UNLOCK => {
                flags_only(FLAG_EXCLUSIVE)?;
                no_payload("lock")?;
                if h.aux != 0 || h.len != 0 {
                    return Err("one-sided lock with an offset or a length".into());
                }
                if code == LOCK {
                    if h.id == 0 {
                        return Err("one-sided lock without a request to answer".into());
                    }
                    Op::Lock { exclusive }
                } else {
                    Op::Unlock { exclusive }
                }
            }
            REPLY => {
                flags_only(FLAG_ERROR)?;
                sized()?;
                if h.id == 0 {
                    return Err("one-sided reply to no request".into());
                }
                let result = if h.flags & FLAG_ERROR != 0 {
                    Err(std::str::from_utf8(p)
                        .map_err(|_| "one-sided error reply that is not UTF-8".to_string())?)
                } else {
                    Ok(p)
                };
                Op::Reply { at: h.aux, result }
            }
            c => return Err(format!("unknown one-sided opcode {c}")),
        };
        Ok(Msg {
            win: h.ctx,
            src: h.src,
            id: h.id,
            op,
        })
    }
}

fn excl(exclusive: bool) -> u8 {
    if exclusive {
        FLAG_EXCLUSIVE
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(m: Msg<'_>) -> Msg<'static> {
        let h = Header::decode(&m.header().encode()).expect("header");
        let p: Vec<u8> = m.payload().concat();
        let p: &'static [u8] = Box::leak(p.into_boxed_slice());
        Msg::decode(&h, p).expect("decodes")
    }

    fn acc_op() -> impl Strategy<Value = AccOp> {
        // Not Cas: one element and a comparand (its own test).
        (1u8..=15)
            .prop_filter("not Cas", |&v| v != AccOp::Cas as u8)
            .prop_map(|v| AccOp::from_u8(v).expect("op"))
    }

    fn elem() -> impl Strategy<Value = Elem> {
        (1u8..=Elem::ALL.len() as u8).prop_map(|v| Elem::from_u8(v).expect("elem"))
    }

    proptest! {
        #[test]
        fn requests_and_replies_round_trip(win: u32, src: u32, id in 1u64.., off: u64,
                                           data in proptest::collection::vec(any::<u8>(), 0..64),
                                           exclusive: bool, at: u64) {
            for op in [
                Op::Put { off, data: &data },
                Op::Get { off, len: data.len() as u64 },
                Op::Lock { exclusive },
                Op::Unlock { exclusive },
                Op::Reply { at, result: Ok(&data) },
                Op::Reply { at, result: Err("no such window") },
            ] {
                let m = Msg { win, src, id, op };
                prop_assert_eq!(round_trip(m), m);
            }
        }

        #[test]
        fn accumulates_round_trip(op in acc_op(), elem in elem(), n in 0usize..8, fetch: bool,
                                  id in 1u64.., off: u64) {
            prop_assume!(op.takes(elem));
            let data = vec![7u8; n * elem.size()];
            let m = Msg { win: 4, src: 1, id, op: Op::Acc { off, op, elem, fetch, data: &data, compare: &[] } };
            prop_assert_eq!(round_trip(m), m);
        }

        /// Any header and payload: decoding never panics, and what decodes
        /// encodes back to the same frame.
        #[test]
        fn garbage_is_refused_or_faithful(flags: u8, tag: i32, len in 0u64..80, id: u64, aux: u64,
                                          p in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut h = Header::new(Kind::Rma);
            (h.flags, h.tag, h.len, h.id, h.aux) = (flags, tag, len, id, aux);
            if let Ok(m) = Msg::decode(&h, &p) {
                prop_assert_eq!(m.header(), h);
                prop_assert_eq!(m.payload().concat(), p);
            }
        }
    }

    #[test]
    fn compare_and_swap_carries_both_values() {
        let (new, cmp) = (5u64.to_le_bytes(), 3u64.to_le_bytes());
        let m = Msg {
            win: 2,
            src: 0,
            id: 9,
            op: Op::Acc {
                off: 16,
                op: AccOp::Cas,
                elem: Elem::U64,
                fetch: true,
                data: &new,
                compare: &cmp,
            },
        };
        assert_eq!(round_trip(m), m);
        // One element and its comparand, nothing else.
        let h = m.header();
        assert!(Msg::decode(&h, &[0u8; 24]).is_err());
    }

    #[test]
    fn malformed_requests_say_why() {
        let mut h = Header::new(Kind::Rma);
        h.tag = i32::from(ACC) | (AccOp::Band as i32) << 8 | (Elem::F64 as i32) << 16;
        h.len = 8;
        let e = Msg::decode(&h, &[0; 8]).unwrap_err();
        assert!(e.contains("Band on F64"), "{e}");
        h.tag = i32::from(ACC) | (AccOp::Sum as i32) << 8 | (Elem::I32 as i32) << 16;
        h.len = 6;
        let e = Msg::decode(&h, &[0; 6]).unwrap_err();
        assert!(e.contains("not whole"), "{e}");
        h.tag = i32::from(GET);
        h.len = 8;
        h.id = 0;
        assert!(Msg::decode(&h, &[])
            .unwrap_err()
            .contains("without a request"));
        h.tag = 77;
        assert!(Msg::decode(&h, &[])
            .unwrap_err()
            .contains("unknown one-sided opcode"));
    }
}
