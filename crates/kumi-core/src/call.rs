//! The runtime calls a rank can be inside, as a small integer a rank publishes
//! (one relaxed store) and the launcher reads when it writes a report.

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
}

impl Call {
    const ALL: [Call; 13] = [
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
    ];

    /// The call for a published code; unknown codes read as `None`.
    pub fn from_code(code: u32) -> Call {
        Self::ALL.get(code as usize).copied().unwrap_or(Call::None)
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for c in Call::ALL {
            assert_eq!(Call::from_code(c as u32), c);
        }
        assert_eq!(Call::from_code(9999), Call::None);
    }
}
