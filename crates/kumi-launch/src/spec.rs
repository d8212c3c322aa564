//! What the user asked for: the programs, their arguments and ranks, and what
//! every rank starts with (environment, working directory), checked.

use kumi_core::control::App;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStringExt;

/// The largest job `kumi run` accepts. A guard against a typo (`-n 4000000`),
/// not a design limit: nothing in kumi grows with the job size beyond a few
/// bytes per rank (hosts and agents carry the rest), and the hosts' own
/// limits (processes, memory) are reported by the system when they are hit.
pub const MAX_RANKS: u32 = 1 << 20;

/// A job to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    /// The programs, in rank order: one, or several for an MPMD job.
    pub apps: Vec<App>,
    /// Prefix every forwarded output line with `[<rank>] `.
    pub tag_output: bool,
    /// Variables every rank gets, on every host (`-x`), over the launcher's
    /// own environment (which the ranks of this host inherit anyway).
    pub env: Vec<(String, String)>,
}

/// Why a [`JobSpec`] is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    /// An app of no ranks.
    NoRanks,
    /// More than [`MAX_RANKS`] in all.
    TooManyRanks(u64),
    /// A variable name that `setenv` cannot take.
    BadName(String),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::NoRanks => write!(f, "every program needs at least one rank"),
            SpecError::TooManyRanks(n) => {
                write!(f, "{n} ranks is more than kumi's limit of {MAX_RANKS}")
            }
            SpecError::BadName(n) => write!(
                f,
                "{n:?} is not a variable name (letters, digits and _, not starting with a digit)"
            ),
        }
    }
}

impl std::error::Error for SpecError {}

/// An app of `ranks` ranks running `program` with `args`.
pub fn app(ranks: u32, program: OsString, args: Vec<OsString>) -> App {
    App {
        program: program.into_vec(),
        args: args.into_iter().map(OsStringExt::into_vec).collect(),
        ranks,
        env: Vec::new(),
        wdir: None,
    }
}

/// Whether `name` can be an environment variable's name.
pub fn var_name_ok(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl JobSpec {
    /// A checked spec of one or more apps, with no extra environment.
    pub fn new(apps: Vec<App>, tag_output: bool) -> Result<JobSpec, SpecError> {
        let total: u64 = apps.iter().map(|a| u64::from(a.ranks)).sum();
        if apps.is_empty() || apps.iter().any(|a| a.ranks == 0) {
            return Err(SpecError::NoRanks);
        }
        if total > u64::from(MAX_RANKS) {
            return Err(SpecError::TooManyRanks(total));
        }
        if let Some((bad, _)) = apps
            .iter()
            .flat_map(|a| &a.env)
            .find(|(k, _)| !var_name_ok(k))
        {
            return Err(SpecError::BadName(bad.clone()));
        }
        Ok(JobSpec {
            apps,
            tag_output,
            env: Vec::new(),
        })
    }

    /// The same spec with `env` set for every rank (names checked).
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Result<JobSpec, SpecError> {
        if let Some((bad, _)) = env.iter().find(|(k, _)| !var_name_ok(k)) {
            return Err(SpecError::BadName(bad.clone()));
        }
        self.env = env;
        Ok(self)
    }

    /// Number of ranks of the job.
    pub fn size(&self) -> u32 {
        // `new` checked the sum fits.
        self.apps.iter().map(|a| a.ranks).sum()
    }

    /// The program the job is known by (the first app's; `a + b` for MPMD).
    pub fn name(&self) -> String {
        self.apps
            .iter()
            .map(|a| String::from_utf8_lossy(&a.program).into_owned())
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// The file `name` (a program name without `/`) names on this `PATH`.
pub fn find_in_path(name: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|f| f.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_is_bounded_and_every_app_has_ranks() {
        let one = |n| vec![app(n, "x".into(), vec![])];
        assert_eq!(JobSpec::new(one(0), false), Err(SpecError::NoRanks));
        assert_eq!(JobSpec::new(vec![], false), Err(SpecError::NoRanks));
        assert_eq!(
            JobSpec::new(one(MAX_RANKS + 1), false),
            Err(SpecError::TooManyRanks(u64::from(MAX_RANKS) + 1))
        );
        let two = vec![
            app(MAX_RANKS, "a".into(), vec![]),
            app(u32::MAX, "b".into(), vec![]),
        ];
        assert!(matches!(
            JobSpec::new(two, false),
            Err(SpecError::TooManyRanks(_))
        ));
        let s = JobSpec::new(
            vec![app(1, "a".into(), vec![]), app(3, "b".into(), vec![])],
            false,
        )
        .unwrap();
        assert_eq!((s.size(), s.name().as_str()), (4, "a + b"));
    }

    #[test]
    fn variable_names_are_checked() {
        let s = JobSpec::new(vec![app(1, "a".into(), vec![])], false).unwrap();
        assert!(s
            .clone()
            .with_env(vec![("OMP_NUM_THREADS".into(), "2".into())])
            .is_ok());
        for bad in ["", "1X", "A=B", "A B"] {
            assert_eq!(
                s.clone().with_env(vec![(bad.into(), "v".into())]),
                Err(SpecError::BadName(bad.into()))
            );
        }
    }
}
