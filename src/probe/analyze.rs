//! From the runs to the analysis: pooled percentiles per configuration,
//! cluster-bootstrap intervals, the A/A spread, the reference and the
//! answer. Pure: the same runs give the same analysis.

use super::analysis::{
    Analysis, Bootstrap, ConfigStats, FIRST_QUANTILE, ITERATIONS, LEVEL, Ratio, Ratios, SEED,
    Spread, WITHIN,
};
use super::recommend;
use super::sample::{Config, Run, TableState};
use super::stats::{self, Clusters, Percentiles, Resampler};
use std::collections::BTreeMap;

/// The analysis of `runs` (each naming its configuration by index into
/// `configs`) on a machine with idle-state table `table`.
pub fn analyze(configs: &[Config], table: &[TableState], runs: &[Run]) -> Analysis {
    analyze_with(configs, table, runs, ITERATIONS, SEED)
}

/// `analyze` with another number of bootstrap draws or seed.
pub fn analyze_with(
    configs: &[Config],
    table: &[TableState],
    runs: &[Run],
    iterations: u32,
    seed: u64,
) -> Analysis {
    let (residency_axis, counted) = residency_axis(table);
    let measured: Vec<Measured> = (configs.iter().enumerate())
        .map(|(i, _)| Measured::new(runs.iter().filter(|r| r.config == i).collect()))
        .collect();
    let boots: Vec<Boot> = (measured.iter().enumerate())
        .map(|(i, m)| m.bootstrap(iterations, seed.wrapping_add(i as u64)))
        .collect();
    let mut stats: Vec<ConfigStats> = (configs.iter().zip(&measured).zip(&boots))
        .map(|((c, m), b)| m.stats(c, table.len(), &counted, b))
        .collect();
    let spread = spread(&stats.iter().map(|s| s.spread.clone()).collect::<Vec<_>>());

    let c1 = (configs.iter().enumerate())
        .position(|(i, c)| matches!(c, Config::C1 { .. }) && stats[i].qd1.is_some());
    if let Some(c1) = c1 {
        fill_ratios(&mut stats, &boots, c1);
    }
    let chosen = recommend::reference(&stats, c1);
    if let Some((r, _)) = &chosen {
        fill_ratios(&mut stats, &boots, *r);
    }
    // the yardstick's own steadiness: a configuration that varies by
    // itself (deep, whose governor enters C6 in some runs and not in
    // others) is a finding, not noise that hides every other one
    let yardstick = chosen
        .as_ref()
        .map_or_else(Spread::default, |(r, _)| stats[*r].spread.clone());
    let answer = recommend::answer(&stats, chosen.as_ref().map(|(r, _)| *r), &yardstick);
    let (reference, reference_why) = match chosen {
        Some((r, why)) => (Some(stats[r].label.clone()), why),
        None => (None, "no configuration has QD1 samples".to_string()),
    };
    Analysis {
        residency_axis,
        residency_states: counted.iter().map(|&i| table[i].name.clone()).collect(),
        bootstrap: Bootstrap {
            iterations,
            seed,
            level: LEVEL,
            within_pct: WITHIN * 100.0,
        },
        reference,
        reference_why,
        noisy: recommend::noisy(&yardstick),
        configs: stats,
        spread,
        answer,
    }
}

/// What `deep_residency` adds up, and its name: the states deeper than
/// the shallowest halting one (not POLL, exit latency over 0), or, with a
/// single halting state, that state.
fn residency_axis(table: &[TableState]) -> (String, Vec<usize>) {
    let halting: Vec<usize> = (table.iter().enumerate())
        .filter(|(_, s)| !crate::idle::is_polling(&s.name) && s.exit_latency_us > 0)
        .map(|(i, _)| i)
        .collect();
    match halting.as_slice() {
        [] => ("no halting state".to_string(), Vec::new()),
        [only] => (
            format!("halting (no state deeper than {})", table[*only].name),
            vec![*only],
        ),
        [first, deeper @ ..] => (
            format!("deeper than {}", table[*first].name),
            deeper.to_vec(),
        ),
    }
}

/// One configuration's runs, ready for the bootstrap.
struct Measured<'a> {
    runs: Vec<&'a Run>,
    /// Each run's samples, sorted (the A/A pairs' statistics).
    qd1_sorted: Vec<Vec<u32>>,
    first_sorted: Vec<Vec<u32>>,
    qd1: Clusters,
    first: Clusters,
    /// Runs with an IOPS figure, in ascending IOPS: (run, IOPS).
    iops: Vec<(usize, f64)>,
}

/// A configuration's statistic in each bootstrap draw (`None` where the
/// draw had no samples of it).
struct Boot {
    p99: Vec<Option<f64>>,
    first: Vec<Option<f64>>,
    iops: Vec<Option<f64>>,
}

fn sorted(v: &[u32]) -> Vec<u32> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

/// Reads per second of a run's QD1 phase; `None` for a phase without
/// reads or time.
fn run_iops(r: &Run) -> Option<f64> {
    let iops = r.qd1_ns.len() as f64 / r.qd1_secs;
    (!r.qd1_ns.is_empty() && r.qd1_secs > 0.0 && iops.is_finite()).then_some(iops)
}

/// Every run's samples in one sorted vector (runs are sorted already: the
/// stable sort merges them as runs).
fn pooled(runs: &[Vec<u32>]) -> Vec<u32> {
    let mut all: Vec<u32> = runs.concat();
    all.sort();
    all
}

fn median(sorted: &[f64]) -> Option<f64> {
    stats::weighted_median(sorted, &vec![1; sorted.len()])
}

impl<'a> Measured<'a> {
    fn new(runs: Vec<&'a Run>) -> Measured<'a> {
        let qd1: Vec<&[u32]> = runs.iter().map(|r| r.qd1_ns.as_slice()).collect();
        let first: Vec<&[u32]> = runs.iter().map(|r| r.first_ns.as_slice()).collect();
        let mut iops: Vec<(usize, f64)> = (runs.iter().enumerate())
            .filter_map(|(i, r)| Some((i, run_iops(r)?)))
            .collect();
        iops.sort_by(|a, b| a.1.total_cmp(&b.1));
        Measured {
            qd1_sorted: qd1.iter().map(|s| sorted(s)).collect(),
            first_sorted: first.iter().map(|s| sorted(s)).collect(),
            qd1: Clusters::new(&qd1),
            first: Clusters::new(&first),
            iops,
            runs,
        }
    }

    fn bootstrap(&self, iterations: u32, seed: u64) -> Boot {
        let mut draws = Resampler::new(seed);
        let mut w = vec![0u32; self.runs.len()];
        let values: Vec<f64> = self.iops.iter().map(|&(_, v)| v).collect();
        let mut iops_w = vec![0u32; self.iops.len()];
        let n = iterations as usize;
        let mut b = Boot {
            p99: Vec::with_capacity(n),
            first: Vec::with_capacity(n),
            iops: Vec::with_capacity(n),
        };
        if self.runs.is_empty() {
            return b;
        }
        let us = |ns: f64| ns / 1000.0;
        for _ in 0..n {
            draws.draw(&mut w);
            b.p99.push(self.qd1.quantile(&w, 0.99).map(us));
            b.first
                .push(self.first.quantile(&w, FIRST_QUANTILE).map(us));
            for (k, &(run, _)) in self.iops.iter().enumerate() {
                iops_w[k] = w[run];
            }
            b.iops.push(stats::weighted_median(&values, &iops_w));
        }
        b
    }

    fn stats(&self, c: &Config, states: usize, counted: &[usize], b: &Boot) -> ConfigStats {
        let mean = |get: fn(&Run) -> &[f64]| -> Vec<f64> {
            let n = self.runs.len().max(1) as f64;
            (0..states)
                .map(|i| {
                    (self.runs.iter())
                        .map(|r| get(r).get(i).copied().unwrap_or(0.0))
                        .sum::<f64>()
                        / n
                })
                .collect()
        };
        let qd1_residency = mean(|r| &r.qd1_residency);
        let burst_residency = mean(|r| &r.burst_residency);
        let deep = |res: &[f64]| counted.iter().map(|&i| res[i]).sum();
        let rest: Vec<Vec<u32>> = self.runs.iter().map(|r| sorted(&r.rest_ns)).collect();
        let iops: Vec<f64> = self.iops.iter().map(|&(_, v)| v).collect();
        ConfigStats {
            label: c.label(),
            config: c.clone(),
            runs: self.runs.len(),
            qd1: Percentiles::of_sorted(&pooled(&self.qd1_sorted)),
            iops: median(&iops),
            first: Percentiles::of_sorted(&pooled(&self.first_sorted)),
            rest: Percentiles::of_sorted(&pooled(&rest)),
            deep_residency: deep(&qd1_residency),
            burst_deep_residency: deep(&burst_residency),
            qd1_residency,
            burst_residency,
            p99_interval_us: stats::interval(
                &mut b.p99.iter().flatten().copied().collect::<Vec<_>>(),
                LEVEL,
            ),
            vs_reference: Ratios::default(),
            spread: spread_of(self),
        }
    }
}

/// Every configuration's ratios against configuration `r`, each called
/// only beyond the larger of the two configurations' A/A spreads.
fn fill_ratios(stats: &mut [ConfigStats], boots: &[Boot], r: usize) {
    let rs = stats[r].spread.clone();
    let wider = |a: Option<f64>, b: Option<f64>| a.unwrap_or(0.0).max(b.unwrap_or(0.0)) / 100.0;
    let point = |s: &ConfigStats| {
        (
            s.qd1.as_ref().map(|p| p.p99_us),
            s.first.as_ref().map(|p| p.p90_us),
            s.iops,
        )
    };
    let base = point(&stats[r]);
    for (s, b) in stats.iter_mut().zip(boots) {
        let own = point(s);
        let rb = &boots[r];
        let sp = &s.spread;
        s.vs_reference = Ratios {
            qd1_p99: ratio(
                own.0,
                base.0,
                &b.p99,
                &rb.p99,
                wider(sp.qd1_p99_pct, rs.qd1_p99_pct),
            ),
            first_p90: ratio(
                own.1,
                base.1,
                &b.first,
                &rb.first,
                wider(sp.first_p90_pct, rs.first_p90_pct),
            ),
            iops: ratio(
                own.2,
                base.2,
                &b.iops,
                &rb.iops,
                wider(sp.iops_pct, rs.iops_pct),
            ),
        };
    }
}

/// `own / base` with the interval of the draws' ratios (each side drawn
/// on its own runs), called when the interval excludes 1 and the ratio is
/// further from 1 than `spread`.
fn ratio(
    own: Option<f64>,
    base: Option<f64>,
    own_draws: &[Option<f64>],
    base_draws: &[Option<f64>],
    spread: f64,
) -> Option<Ratio> {
    let quotient = |a: f64, b: f64| (b > 0.0).then(|| a / b).filter(|q| q.is_finite());
    let point = quotient(own?, base?)?;
    let mut draws: Vec<f64> = (own_draws.iter().zip(base_draws))
        .filter_map(|(a, b)| quotient((*a)?, (*b)?))
        .collect();
    let iv = stats::interval(&mut draws, LEVEL)?;
    Some(Ratio {
        ratio: point,
        lo: iv.lo,
        hi: iv.hi,
        called: (iv.lo > 1.0 || iv.hi < 1.0) && (point - 1.0).abs() > spread,
    })
}

/// The A/A spread over every configuration's pairs: the largest of theirs.
fn spread(each: &[Spread]) -> Spread {
    let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    each.iter().fold(Spread::default(), |acc, s| Spread {
        pairs: acc.pairs + s.pairs,
        qd1_p99_pct: max(acc.qd1_p99_pct, s.qd1_p99_pct),
        first_p90_pct: max(acc.first_p90_pct, s.first_p90_pct),
        iops_pct: max(acc.iops_pct, s.iops_pct),
        run_qd1_p99_pct: max(acc.run_qd1_p99_pct, s.run_qd1_p99_pct),
    })
}

/// The A/A spread of one configuration: its first runs of each round
/// pooled against its second runs pooled, each statistic taken as the
/// ratios against the reference are (pooled reads, the median run's
/// IOPS): the difference the same configuration measured twice shows.
/// Not the largest difference between two single runs: a run that met
/// one stall of the host (a tick-long read in a TCG guest, a preempted
/// vCPU) would make every difference too small to call, where the
/// pooled statistics hardly move.
fn spread_of(m: &Measured) -> Spread {
    let mut by_round: BTreeMap<u32, [Option<usize>; 2]> = BTreeMap::new();
    for (i, r) in m.runs.iter().enumerate() {
        if let Some(slot) = by_round.entry(r.round).or_default().get_mut(r.rep as usize) {
            *slot = Some(i);
        }
    }
    let pairs = by_round
        .values()
        .filter(|r| r[0].is_some() && r[1].is_some())
        .count();
    // and how far two single runs of a round land apart, typically (the
    // median pair: one stalled run does not make the machine noisy)
    let run_p99 = |i: usize| stats::percentile(&m.qd1_sorted[i], 0.99).map(f64::from);
    let mut run_diffs: Vec<f64> = (by_round.into_values())
        .filter_map(|[a, b]| {
            let (x, y) = (run_p99(a?)?, run_p99(b?)?);
            let d = (x / y).ln().abs();
            (x > 0.0 && y > 0.0 && d.is_finite()).then_some(d)
        })
        .collect();
    run_diffs.sort_by(f64::total_cmp);
    let run_median = run_diffs.get(run_diffs.len() / 2).copied();
    // what each rep's runs give, pooled
    let side = |rep: u32| {
        let mine: Vec<usize> = (0..m.runs.len())
            .filter(|&i| m.runs[i].rep == rep)
            .collect();
        let pooled = |sorted: &[Vec<u32>]| {
            let mut all: Vec<u32> = mine
                .iter()
                .flat_map(|&i| sorted[i].iter().copied())
                .collect();
            all.sort_unstable();
            all
        };
        let mut iops: Vec<f64> = mine.iter().filter_map(|&i| run_iops(m.runs[i])).collect();
        iops.sort_by(f64::total_cmp);
        [
            stats::percentile(&pooled(&m.qd1_sorted), 0.99).map(f64::from),
            stats::percentile(&pooled(&m.first_sorted), FIRST_QUANTILE).map(f64::from),
            iops.get(iops.len() / 2)
                .copied()
                .filter(|_| !iops.is_empty()),
        ]
    };
    let mut diff = [None::<f64>; 3];
    if pairs > 0 {
        for (k, (x, y)) in side(0).into_iter().zip(side(1)).enumerate() {
            let (Some(x), Some(y)) = (x, y) else { continue };
            let d = (x / y).ln().abs();
            if x > 0.0 && y > 0.0 && d.is_finite() {
                diff[k] = Some(d);
            }
        }
    }
    let pct = |x: Option<f64>| x.map(|x| (x.exp() - 1.0) * 100.0);
    Spread {
        pairs,
        qd1_p99_pct: pct(diff[0]),
        first_p90_pct: pct(diff[1]),
        iops_pct: pct(diff[2]),
        run_qd1_p99_pct: pct(run_median),
    }
}
