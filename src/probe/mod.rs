//! `blkqos probe`: what the lease buys on this machine, measured here.
//! What a run records (`sample`), apart from how it is measured and read.

pub mod sample;
