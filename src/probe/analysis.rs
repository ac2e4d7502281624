//! What the probe concludes from its runs: the types of the analysis (in
//! the JSON document as `analysis`), apart from how they are computed
//! (`analyze`), chosen (`recommend`) and shown (`render`, `plot`).

use super::sample::Config;
use super::stats::{Interval, Percentiles};
use serde::{Deserialize, Serialize};

/// How close to the reference a configuration must stay to count as
/// buying what the reference buys: the upper end of its ratio's interval
/// at most 1 + WITHIN.
pub const WITHIN: f64 = 0.05;
/// An A/A spread of QD1 p99 above this marks the whole probe noisy.
pub const NOISY: f64 = 0.10;
/// The first-of-burst quantile ratios and the A/A spread use. Not p99: a
/// run has a few hundred bursts, so its p99 rests on a handful of reads
/// and one run's p99 moves by more than the 5 % a decision needs; the
/// idle-state exit a first read pays moves most first reads, not only the
/// tail, so p90 sees it.
pub const FIRST_QUANTILE: f64 = 0.90;
/// Bootstrap draws.
pub const ITERATIONS: u32 = 1000;
/// The bootstrap's seed: the same runs give the same intervals.
pub const SEED: u64 = 0x626c_6b71_6f73;
/// The intervals' coverage.
pub const LEVEL: f64 = 0.95;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// What `deep_residency` measures: "deeper than C1" (time in states
    /// deeper than the shallowest halting state), or "halting (no state
    /// deeper than haltpoll)" where the table has one halting state and
    /// the share is of halting at all; "no halting state" without one.
    pub residency_axis: String,
    /// The states `deep_residency` adds up, by name.
    pub residency_states: Vec<String>,
    pub bootstrap: Bootstrap,
    /// The label of the configuration the ratios are against; `None` when
    /// no configuration has samples.
    pub reference: Option<String>,
    pub reference_why: String,
    pub configs: Vec<ConfigStats>,
    /// The largest of the configurations' A/A spreads.
    pub spread: Spread,
    /// The reference's own A/A spread of QD1 p99 (pooled, or its median
    /// pair of runs) is over 10 %: the yardstick moves more than most
    /// effects worth a lease.
    pub noisy: bool,
    pub answer: Answer,
}

/// How the intervals were drawn: whole runs resampled with replacement
/// within each configuration (host noise moves whole runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    pub iterations: u32,
    pub seed: u64,
    pub level: f64,
    /// The ratios' bound, in percent (5).
    pub within_pct: f64,
}

/// One configuration's runs, pooled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigStats {
    pub label: String,
    pub config: Config,
    pub runs: usize,
    /// The QD1 reads; `None` without any.
    pub qd1: Option<Percentiles>,
    /// The median over runs of each run's reads per second at QD1.
    pub iops: Option<f64>,
    /// The first read of each burst (it pays the idle-state exit).
    pub first: Option<Percentiles>,
    /// The other reads of the bursts.
    pub rest: Option<Percentiles>,
    /// Mean share of time in each idle state (table order), QD1 phase.
    pub qd1_residency: Vec<f64>,
    /// The same in the bursty phase, gaps included.
    pub burst_residency: Vec<f64>,
    /// Share of time (0..=1) in the states `residency_axis` names, QD1.
    pub deep_residency: f64,
    /// The same in the bursty phase.
    pub burst_deep_residency: f64,
    /// The bootstrap interval of QD1 p99 (microseconds).
    pub p99_interval_us: Option<Interval>,
    /// Against the reference (the reference's own are 1).
    pub vs_reference: Ratios,
    /// Its own A/A spread: how far its two runs of a round land apart.
    pub spread: Spread,
}

/// This configuration's statistic over the reference's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    pub qd1_p99: Option<Ratio>,
    /// First-of-burst p90 (see FIRST_QUANTILE).
    pub first_p90: Option<Ratio>,
    pub iops: Option<Ratio>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub ratio: f64,
    pub lo: f64,
    pub hi: f64,
    /// A difference: the interval excludes 1 and the ratio is further
    /// from 1 than the statistic's A/A spread.
    pub called: bool,
}

/// How far the same configuration measured twice lands from itself: its
/// first runs of each round pooled against its second runs pooled, each
/// statistic as the ratios take it, as a percentage (exp(|ln a/b|) - 1);
/// and, apart, the median over rounds of the difference between the two
/// single runs' QD1 p99 (how unsteady one run is). `None` without a pair.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub pairs: usize,
    pub qd1_p99_pct: Option<f64>,
    pub first_p90_pct: Option<f64>,
    pub iops_pct: Option<f64>,
    pub run_qd1_p99_pct: Option<f64>,
}

/// What to put in the profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// The loosest limit tried that stays within 5 % of the reference on
    /// QD1 p99 and first-of-burst p90.
    Limit {
        limit_us: u64,
        label: String,
        p99_ratio: Ratio,
        first_ratio: Option<Ratio>,
    },
    /// The machine as found is already within 5 % of the reference.
    NothingToBuy { why: String },
    /// Nothing qualifies, and the A/A spread (percent) is over 5 %: the
    /// probe cannot tell.
    TooNoisy { spread_pct: f64 },
    /// No lease limit tried gets within 5 %: try a stricter one (0).
    NoLimitReaches { strictest_tried: Option<u64> },
    /// No configuration has QD1 samples.
    NoData { why: String },
}
