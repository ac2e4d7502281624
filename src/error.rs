//! The command's error type and its exit codes, decided in one place.

use crate::plan::PlanError;
use crate::profile::ProfileError;
use crate::state::StateError;
use crate::sysfs::NotSysfs;
use crate::transaction::ApplyError;

/// Exit codes: 0 success, 1 an operation failed (rolled back) or verify found
/// a mismatch, 2 usage or profile error (nothing written).
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    NotSysfs(#[from] NotSysfs),
    #[error("{command} needs root ({cause}); --dry-run shows the plan without it")]
    NeedsRoot {
        command: &'static str,
        cause: StateError,
    },
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Profile(_)
            | Error::Usage(_)
            | Error::NotSysfs(_)
            | Error::NeedsRoot { .. }
            | Error::Plan(PlanError::NoSuchDevice(_)) => EXIT_USAGE,
            Error::Plan(PlanError::Read { .. }) | Error::Apply(_) | Error::State(_) => EXIT_FAILED,
        }
    }
}
