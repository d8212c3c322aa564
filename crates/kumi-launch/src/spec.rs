//! What the user asked for: a program, its arguments, how many ranks.

use std::ffi::OsString;
use std::fmt;

/// The largest job `kumi run` accepts on one machine. A bound, not a tuned
/// figure: past a few thousand processes a single host runs out of pids, pipes or
/// patience, and a typo (`-n 40000`) should be an error, not a fork storm.
pub const MAX_RANKS: u32 = 4096;

/// A job to run on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    /// Number of ranks, 1..=[`MAX_RANKS`].
    pub size: u32,
    /// Program to execute (looked up in `PATH` when it has no `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Prefix every forwarded output line with `[<rank>] `.
    pub tag_output: bool,
}

/// Why a [`JobSpec`] is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    /// `-n` is zero.
    NoRanks,
    /// `-n` is above [`MAX_RANKS`].
    TooManyRanks(u32),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::NoRanks => write!(f, "a job needs at least one rank"),
            SpecError::TooManyRanks(n) => {
                write!(
                    f,
                    "{n} ranks is more than the limit of {MAX_RANKS} ranks on one machine"
                )
            }
        }
    }
}

impl std::error::Error for SpecError {}

impl JobSpec {
    /// A checked spec.
    pub fn new(
        size: u32,
        program: OsString,
        args: Vec<OsString>,
        tag_output: bool,
    ) -> Result<JobSpec, SpecError> {
        if size == 0 {
            return Err(SpecError::NoRanks);
        }
        if size > MAX_RANKS {
            return Err(SpecError::TooManyRanks(size));
        }
        Ok(JobSpec {
            size,
            program,
            args,
            tag_output,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_is_bounded() {
        assert_eq!(
            JobSpec::new(0, "x".into(), vec![], false),
            Err(SpecError::NoRanks)
        );
        assert_eq!(
            JobSpec::new(MAX_RANKS + 1, "x".into(), vec![], false),
            Err(SpecError::TooManyRanks(MAX_RANKS + 1))
        );
        assert!(JobSpec::new(MAX_RANKS, "x".into(), vec![], false).is_ok());
    }
}
