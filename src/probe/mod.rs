//! `blkqos probe`: what the lease buys on this machine, measured here.
//! What a run records (`sample`), apart from how it is measured and read;
//! what the runs say (`analyze`: `stats` for percentiles and the
//! bootstrap, `recommend` for the reference and the answer, the types in
//! `analysis`), and how that is shown (`render`, `plot`).

pub mod analysis;
pub mod analyze;
pub mod plot;
pub mod recommend;
pub mod render;
pub mod sample;
pub mod stats;

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
