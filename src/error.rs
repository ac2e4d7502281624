//! The command's error type and its exit codes, decided in one place.

use crate::apply::ApplyError;
use crate::plan::PlanError;
use crate::profile::ProfileError;
use crate::state::StateError;

/// Exit codes: 0 success, 1 an operation failed (rolled back) or verify found
/// a mismatch, 2 usage or profile error (nothing written), 3 another run
/// held the lock past the lock timeout (nothing written: try again).
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_BUSY: u8 = 3;

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
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::State(StateError::Busy { .. })
            | Error::Apply(ApplyError::State(StateError::Busy { .. })) => EXIT_BUSY,
            Error::Profile(_) | Error::Usage(_) | Error::Plan(PlanError::NoSuchDevice(_)) => {
                EXIT_USAGE
            }
            Error::Plan(PlanError::Read { .. }) | Error::Apply(_) | Error::State(_) => EXIT_FAILED,
        }
    }
}
