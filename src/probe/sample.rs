//! What one probe run records: the shared input of the analysis, the JSON
//! document and the plot. Latencies are nanoseconds (a 4 KiB read is tens
//! of microseconds to milliseconds; u32 holds 4 s).

use serde::{Deserialize, Serialize};

/// One idle state of the serving CPUs' table (CPU 0 of them stands for
/// all: the tables of one machine's CPUs are the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableState {
    pub index: u32,
    pub name: String,
    pub exit_latency_us: u64,
    pub target_residency_us: u64,
    /// Disabled on any serving CPU.
    pub disabled: bool,
}

/// A configuration: how the serving CPUs are held during a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Config {
    /// The machine as found: nothing written.
    Deep,
    /// Every state deeper than the shallowest halting state held off for
    /// the run (the per-CPU resume latency at that state's exit latency).
    C1 { limit_us: u64 },
    /// The lease at `limit_us` (`auto` resolved), renewed by I/O and
    /// lapsing `timeout_ms` after the last one: the kernel's knobs where
    /// present, else `blkqos lease`.
    Lease {
        limit_us: u64,
        timeout_ms: u64,
        /// "auto" when the limit came from `--limits auto`.
        auto: bool,
    },
}

impl Config {
    /// The name tables, the JSON and the plot use: `deep`, `c1`,
    /// `lease@0`, `lease@auto=4`.
    pub fn label(&self) -> String {
        match self {
            Config::Deep => "deep".to_string(),
            Config::C1 { .. } => "c1".to_string(),
            Config::Lease {
                limit_us,
                auto: true,
                ..
            } => format!("lease@auto={limit_us}"),
            Config::Lease { limit_us, .. } => format!("lease@{limit_us}"),
        }
    }

    /// The limit a profile rule would carry; `None` for deep and c1.
    pub fn limit_us(&self) -> Option<u64> {
        match self {
            Config::Lease { limit_us, .. } => Some(*limit_us),
            _ => None,
        }
    }
}

/// One run of one configuration: the QD1 phase, then the bursty phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Index into the probe's configurations.
    pub config: usize,
    pub round: u32,
    /// Which of the configuration's runs in this round (0, 1: the A/A pair).
    pub rep: u32,
    /// Each read of the sustained QD1 phase, in order.
    pub qd1_ns: Vec<u32>,
    /// The QD1 phase's wall time: IOPS is `qd1_ns.len() / qd1_secs`.
    pub qd1_secs: f64,
    /// The first read of each burst (after an idle gap: it pays the exit).
    pub first_ns: Vec<u32>,
    /// The other reads of each burst.
    pub rest_ns: Vec<u32>,
    /// Share of the serving CPUs' time in each idle state of the table
    /// (same order), during the QD1 phase: 0..=1, summing to at most 1
    /// (the rest is time not idle).
    pub qd1_residency: Vec<f64>,
    /// The same during the bursty phase, idle gaps included.
    pub burst_residency: Vec<f64>,
}
