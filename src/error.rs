//! The one error type operations return, and the exit codes it maps to.
//!
//! Exit codes are part of the interface (issue 2, "Commands"): scripts and
//! cron jobs branch on them, and `serve` maps the same kinds to HTTP statuses.

use std::fmt;

/// What went wrong, as far as a caller needs to know to react.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Something failed on the machine (podman, the file system).
    Failed,
    /// The input was wrong; nothing was changed.
    BadInput,
    /// No such session: bad input on the command line, 404 over HTTP.
    NotFound,
    /// Another command holds the session.
    Busy,
    /// Not ready yet (an image being built); try again later (issue 4).
    NotReady,
}

impl Kind {
    /// The process exit code of this kind (documented in the README and man page).
    pub fn exit_code(self) -> u8 {
        match self {
            Kind::Failed => 1,
            Kind::BadInput | Kind::NotFound => 2,
            Kind::Busy => 3,
            Kind::NotReady => 4,
        }
    }
}

/// An error with a message meant for the person who ran the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(Kind::Failed, message)
    }
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(Kind::BadInput, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, message)
    }
    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(Kind::Busy, message)
    }
    /// Prefix the message with what was being done, keeping the kind.
    pub fn context(self, what: impl fmt::Display) -> Self {
        Error {
            kind: self.kind,
            message: format!("{what}: {}", self.message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Error::failed(format!("{e:#}"))
    }
}

/// Attach "what we were doing with which path" to an I/O error.
pub trait IoContext<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::failed(format!("{}: {e}", what())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_documented_ones() {
        assert_eq!(Kind::Failed.exit_code(), 1);
        assert_eq!(Kind::BadInput.exit_code(), 2);
        assert_eq!(Kind::NotFound.exit_code(), 2);
        assert_eq!(Kind::Busy.exit_code(), 3);
        assert_eq!(Kind::NotReady.exit_code(), 4);
    }

    #[test]
    fn context_keeps_the_kind() {
        let e = Error::busy("held").context("session x");
        assert_eq!(e.kind, Kind::Busy);
        assert_eq!(e.message, "session x: held");
    }
}
