//! The runtime calls a rank can be inside, as a small integer a rank publishes
//! (one relaxed store) and the launcher reads when it writes a report.
//!
//! A wait reported by a C program (through kumi's MPI ABI) also names the MPI
//! function the program called, so a report reads "MPI_Recv" as written, not
//! the runtime call underneath: [`with_mpi`] puts the function's index in
//! [`MPI_FUNCTIONS`] (plus one) in the bits above [`CALL_MASK`] of the code,
//! [`Call::from_code`] ignores those bits and [`name_of`] prefers them. The
//! table is append-only: codes travel from ranks to the launcher.

/// A runtime call a rank can be inside. `None` means "computing, not in kumi".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum Call {
    None = 0,
    Init,
    Finalize,
    Send,
    Recv,
    Wait,
    Test,
    Probe,
    Barrier,
    Split,
    Dup,
    Abort,
    Collective,
    /// Taking a lock of distributed shared memory; the wait's peer is the
    /// holder (when known), its tag the lock.
    DsmLock,
    /// A page fault of distributed shared memory, fetching the page; the
    /// wait's peer is the page's home.
    DsmFault,
    /// Waiting in a task queue's pop (any rank may push, or the work end).
    TaskPop,
}

impl Call {
    const ALL: [Call; 16] = [
        Call::None,
        Call::Init,
        Call::Finalize,
        Call::Send,
        Call::Recv,
        Call::Wait,
        Call::Test,
        Call::Probe,
        Call::Barrier,
        Call::Split,
        Call::Dup,
        Call::Abort,
        Call::Collective,
        Call::DsmLock,
        Call::DsmFault,
        Call::TaskPop,
    ];

    /// The call for a published code (the MPI function bits, if any, are
    /// ignored); unknown codes read as `None`.
    pub fn from_code(code: u32) -> Call {
        Self::ALL
            .get((code & CALL_MASK) as usize)
            .copied()
            .unwrap_or(Call::None)
    }

    /// The name a user sees in a report, e.g. `kumi::recv`.
    pub fn name(self) -> &'static str {
        match self {
            Call::None => "",
            Call::Init => "kumi::init",
            Call::Finalize => "kumi::finalize",
            Call::Send => "kumi::send",
            Call::Recv => "kumi::recv",
            Call::Wait => "kumi::wait",
            Call::Test => "kumi::test",
            Call::Probe => "kumi::probe",
            Call::Barrier => "kumi::barrier",
            Call::Split => "kumi::split",
            Call::Dup => "kumi::dup",
            Call::Abort => "kumi::abort",
            Call::Collective => "kumi collective",
            Call::DsmLock => "kumi::dsm::lock",
            Call::DsmFault => "a kumi::dsm page fault",
            Call::TaskPop => "kumi::dsm::TaskQueue::pop",
        }
    }
}

/// Bits of a code that hold the [`Call`]; the bits above name an MPI function.
pub const CALL_MASK: u32 = 0xffff;

/// MPI functions a report can name (those that can wait). Append only.
pub const MPI_FUNCTIONS: &[&str] = &[
    "MPI_Init",
    "MPI_Init_thread",
    "MPI_Finalize",
    "MPI_Send",
    "MPI_Ssend",
    "MPI_Bsend",
    "MPI_Rsend",
    "MPI_Recv",
    "MPI_Sendrecv",
    "MPI_Sendrecv_replace",
    "MPI_Probe",
    "MPI_Mprobe",
    "MPI_Mrecv",
    "MPI_Wait",
    "MPI_Waitall",
    "MPI_Waitany",
    "MPI_Waitsome",
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Gather",
    "MPI_Gatherv",
    "MPI_Scatter",
    "MPI_Scatterv",
    "MPI_Allgather",
    "MPI_Allgatherv",
    "MPI_Alltoall",
    "MPI_Alltoallv",
    "MPI_Alltoallw",
    "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block",
    "MPI_Scan",
    "MPI_Exscan",
    "MPI_Comm_split",
    "MPI_Comm_split_type",
    "MPI_Comm_dup",
    "MPI_Comm_dup_with_info",
    "MPI_Comm_create",
    "MPI_Comm_create_group",
    "MPI_Cart_create",
    "MPI_Cart_sub",
    "MPI_Intercomm_create",
    "MPI_Intercomm_merge",
    "MPI_Send_c",
    "MPI_Ssend_c",
    "MPI_Bsend_c",
    "MPI_Rsend_c",
    "MPI_Recv_c",
    "MPI_Sendrecv_c",
    "MPI_Bcast_c",
    "MPI_Reduce_c",
    "MPI_Allreduce_c",
    "MPI_Buffer_detach",
    "MPI_Abort",
];

/// `call`'s code, naming MPI function `mpi` too when it is in
/// [`MPI_FUNCTIONS`] (else just `call`'s code).
pub fn with_mpi(call: Call, mpi: &str) -> u32 {
    match MPI_FUNCTIONS.iter().position(|&f| f == mpi) {
        Some(i) => call as u32 | ((i as u32 + 1) << 16),
        None => call as u32,
    }
}

/// The name a user sees for a code: the MPI function it names, if any, else
/// the runtime call's name.
pub fn name_of(code: u32) -> &'static str {
    match (code >> 16).checked_sub(1) {
        Some(i) => MPI_FUNCTIONS
            .get(i as usize)
            .copied()
            .unwrap_or_else(|| Call::from_code(code).name()),
        None => Call::from_code(code).name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_names_ride_above_the_call() {
        let c = with_mpi(Call::Recv, "MPI_Recv");
        assert_eq!(Call::from_code(c), Call::Recv);
        assert_eq!(name_of(c), "MPI_Recv");
        assert_eq!(name_of(Call::Recv as u32), "kumi::recv");
        assert_eq!(with_mpi(Call::Recv, "MPI_Nonsense"), Call::Recv as u32);
        assert_eq!(name_of(Call::Recv as u32 | (9999 << 16)), "kumi::recv");
    }

    #[test]
    fn codes_round_trip() {
        for c in Call::ALL {
            assert_eq!(Call::from_code(c as u32), c);
        }
        assert_eq!(Call::from_code(9999), Call::None);
    }
}
