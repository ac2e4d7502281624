//! `blkqos probe`: what the lease buys on this machine, measured here.
//! What a run records (`sample`), apart from how it is measured and read.

pub mod hold;
pub mod machine;
pub mod sample;
pub mod target;
pub mod workload;

/// Why a probe did not run, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// It would measure something else than asked, or disturb what holds
    /// the CPUs now: nothing was written.
    #[error("{0}")]
    Refused(String),
    /// A read, a write or the lease failed during the run (what it wrote
    /// was put back).
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}
pub mod analyze;
pub mod plot;
