//! Errors are values, with messages a user understands.

use std::fmt;

/// What went wrong in a kumi call.
#[derive(Debug)]
pub enum Error {
    /// A message was larger than the receive buffer. The message is consumed; no
    /// byte beyond the buffer was written.
    Truncated {
        /// Size of the message, in bytes.
        message_bytes: usize,
        /// Size of the receive buffer, in bytes.
        buffer_bytes: usize,
        /// Sender's rank in the communicator.
        source: i32,
        /// The message's tag.
        tag: i32,
    },
    /// An argument is out of its allowed range.
    InvalidArgument {
        /// The argument's name, as in the function signature.
        arg: &'static str,
        /// Its value.
        value: i64,
        /// What was allowed.
        allowed: String,
    },
    /// The job environment could not be set up.
    Bootstrap(String),
    /// A peer broke the protocol; the frame was dropped.
    Protocol(String),
    /// An operating-system call failed.
    Io(std::io::Error),
    /// A checkpoint could not be taken or read back: a sentence saying which
    /// and why (see `crate::checkpoint`).
    Checkpoint(String),
    /// A parallel file operation failed (see `crate::file`): what went
    /// wrong, on which file, and why.
    File {
        /// The kind of failure (MPI-IO's error classes map onto these).
        fault: Fault,
        /// The file's path as the program gave it.
        path: String,
        /// A sentence on what was wrong.
        detail: String,
    },
}

impl Error {
    /// An [`Error::InvalidArgument`].
    pub(crate) fn invalid(arg: &'static str, value: i64, allowed: impl Into<String>) -> Error {
        Error::InvalidArgument {
            arg,
            value,
            allowed: allowed.into(),
        }
    }
}

/// A copy of an error that stays where it is (a request's, reported by a
/// call that does not complete the request). An [`Error::Io`] is copied as
/// its kind and message.
impl Clone for Error {
    fn clone(&self) -> Error {
        match self {
            Error::Truncated {
                message_bytes,
                buffer_bytes,
                source,
                tag,
            } => Error::Truncated {
                message_bytes: *message_bytes,
                buffer_bytes: *buffer_bytes,
                source: *source,
                tag: *tag,
            },
            Error::InvalidArgument {
                arg,
                value,
                allowed,
            } => Error::InvalidArgument {
                arg,
                value: *value,
                allowed: allowed.clone(),
            },
            Error::Bootstrap(m) => Error::Bootstrap(m.clone()),
            Error::Checkpoint(m) => Error::Checkpoint(m.clone()),
            Error::Protocol(m) => Error::Protocol(m.clone()),
            Error::Io(e) => Error::Io(std::io::Error::new(e.kind(), e.to_string())),
            Error::File {
                fault,
                path,
                detail,
            } => Error::File {
                fault: *fault,
                path: path.clone(),
                detail: detail.clone(),
            },
        }
    }
}

/// kumi's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { message_bytes, buffer_bytes, source, tag } => write!(
                f,
                "message truncated: a message of {message_bytes} bytes from rank {source} (tag {tag}) \
                 does not fit the receive buffer of {buffer_bytes} bytes"
            ),
            Error::InvalidArgument { arg, value, allowed } => {
                write!(f, "invalid argument `{arg}` = {value}: {allowed}")
            }
            Error::Bootstrap(m) => write!(f, "kumi could not start this rank: {m}"),
            Error::Checkpoint(m) => write!(f, "{m}"),
            Error::Protocol(m) => write!(f, "protocol error: {m}"),
            Error::Io(e) => write!(f, "system error: {e}"),
            Error::File { path, detail, .. } => write!(f, "file {path:?}: {detail}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<kumi_core::p2p::Violation> for Error {
    fn from(v: kumi_core::p2p::Violation) -> Error {
        Error::Protocol(v.to_string())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// What kind of failure a file operation met (MPI-IO's error classes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The file does not exist (and creating it was not asked for).
    NoSuchFile,
    /// The file exists, and exclusive creation was asked for.
    Exists,
    /// Permission denied, or a read of a file opened write-only.
    Access,
    /// The device is full.
    NoSpace,
    /// A quota is exceeded.
    Quota,
    /// A write to a file opened read-only, or on a read-only file system.
    ReadOnly,
    /// The access mode is not a valid combination.
    Amode,
    /// The name is not a usable file name (a directory, too long...).
    BadName,
    /// The operation is not allowed on this file (an explicit offset on a
    /// file opened for sequential access).
    Unsupported,
    /// An argument is out of range (a negative position, a buffer that is
    /// not a whole number of elementary types, a view that is not allowed).
    Argument,
    /// The ranks passed different values where the standard wants one.
    NotSame,
    /// Any other input/output error.
    Io,
}
