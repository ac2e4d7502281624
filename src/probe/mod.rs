//! `blkqos probe`: what the lease buys on this machine, measured here.
//! What a run records (`sample`), apart from how it is measured and read;
//! what the runs say (`analyze`: `stats` for percentiles and the
//! bootstrap, `recommend` for the reference and the answer, the types in
//! `analysis`), and how that is shown (`render`, `plot`).

pub mod analysis;
pub mod analyze;
pub mod hold;
pub mod machine;
pub mod plot;
pub mod recommend;
pub mod render;
pub mod sample;
pub mod stats;
pub mod target;
pub mod workload;

pub use analysis::{Analysis, Answer, ConfigStats, Ratio, Ratios, Spread};
pub use analyze::analyze;
pub use plot::svg;
pub use recommend::rule_snippet;
pub use render::render_table;

#[cfg(test)]
#[path = "../../tests/support/probe_runs.rs"]
mod probe_runs;
#[cfg(test)]
mod scenarios;

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
