//! Percentiles and the cluster bootstrap behind the probe's intervals.
//!
//! Point estimates are exact (nearest rank on the sorted samples). The
//! bootstrap draws whole runs, so it cannot sort the pooled samples of
//! each draw (a configuration may have 40 runs of 50,000 reads, drawn 1000
//! times): each run is a cumulative histogram instead, with buckets 1/256
//! of an octave wide (a value read back is within 0.2 % of the sample),
//! and a percentile of a draw is a binary search over buckets that sums
//! one count per run at each step. A hand-written histogram rather than
//! `hdrhistogram`: that crate's histograms merge by adding every bucket,
//! where this search needs only the cumulative counts, and the bucketing
//! is the dozen lines below.

use serde::{Deserialize, Serialize};

/// Nearest rank: the smallest sample with at least `q` of all samples at
/// or below it (`q` = 0.99 of 1..=100 is 99). `None` without samples.
pub fn percentile(sorted: &[u32], q: f64) -> Option<u32> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let i = rank(q, n as u64) - 1;
    sorted.get(i as usize).copied()
}

/// The 1-based nearest rank of quantile `q` among `n` > 0 samples; the
/// small slack keeps 0.99 * 100 at 99 where floating point gives 99.000..1.
fn rank(q: f64, n: u64) -> u64 {
    let r = (q * n as f64 - 1e-9).ceil();
    (r.max(1.0) as u64).min(n)
}

fn us(ns: u32) -> f64 {
    f64::from(ns) / 1000.0
}

/// A latency distribution's summary, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub samples: u64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Percentiles {
    pub fn of_sorted(sorted: &[u32]) -> Option<Percentiles> {
        let at = |q| percentile(sorted, q).map(us);
        Some(Percentiles {
            samples: sorted.len() as u64,
            p50_us: at(0.5)?,
            p90_us: at(0.9)?,
            p99_us: at(0.99)?,
            p999_us: at(0.999)?,
            max_us: us(*sorted.last()?),
        })
    }
}

/// Significant bits kept by a bucket: values below 2^SIG ns are exact.
const SIG: u32 = 9;
const HALF: u32 = 1 << (SIG - 1);

/// Bucket of `v`: the value with all but its top SIG bits dropped, indexed
/// so that buckets are in value order.
fn bucket(v: u32) -> u32 {
    if v < (1 << SIG) {
        return v;
    }
    let shift = 32 - v.leading_zeros() - SIG;
    shift * HALF + (v >> shift)
}

/// The middle of bucket `b`'s values, in nanoseconds.
fn bucket_mid_ns(b: u32) -> f64 {
    if b < (1 << SIG) {
        return f64::from(b);
    }
    let shift = b / HALF - 1;
    let low = u64::from(b - shift * HALF) << shift;
    low as f64 + ((1u64 << shift) - 1) as f64 / 2.0
}

/// The runs of one configuration as cumulative histograms over the
/// buckets their samples span.
pub struct Clusters {
    first: u32,
    width: usize,
    /// Run-major: `cum[r * width + i]` is how many of run r's samples lie
    /// in buckets `first..=first + i`.
    cum: Vec<u32>,
    counts: Vec<u64>,
}

impl Clusters {
    pub fn new(runs: &[&[u32]]) -> Clusters {
        let all = || runs.iter().flat_map(|r| r.iter().map(|&v| bucket(v)));
        let first = all().min().unwrap_or(0);
        let width = all().max().map_or(0, |last| (last - first) as usize + 1);
        let mut cum = vec![0u32; width * runs.len()];
        for (r, samples) in runs.iter().enumerate() {
            let row = &mut cum[r * width..(r + 1) * width];
            for &v in samples.iter() {
                row[(bucket(v) - first) as usize] += 1;
            }
            let mut sum = 0;
            for c in row.iter_mut() {
                sum += *c;
                *c = sum;
            }
        }
        Clusters {
            first,
            width,
            cum,
            counts: runs.iter().map(|r| r.len() as u64).collect(),
        }
    }

    /// Quantile `q` (nanoseconds, to the bucket) of the runs pooled, run r
    /// counted `weights[r]` times; `None` when the draw has no samples.
    pub fn quantile(&self, weights: &[u32], q: f64) -> Option<f64> {
        let total: u64 = (weights.iter().zip(&self.counts))
            .map(|(&w, &n)| u64::from(w) * n)
            .sum();
        if total == 0 {
            return None;
        }
        let want = rank(q, total);
        let below = |i: usize| -> u64 {
            (weights.iter().enumerate())
                .filter(|(_, w)| **w > 0)
                .map(|(r, &w)| u64::from(w) * u64::from(self.cum[r * self.width + i]))
                .sum()
        };
        // the smallest bucket whose cumulative count reaches the rank; the
        // last bucket holds every sample, so the search ends inside
        let (mut lo, mut hi) = (0, self.width - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if below(mid) >= want {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(bucket_mid_ns(self.first + lo as u32))
    }
}

/// The median of the values `sorted` (ascending), value i counted
/// `weights[i]` times: the mean of the middle two for an even count.
pub fn weighted_median(sorted: &[f64], weights: &[u32]) -> Option<f64> {
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if total == 0 {
        return None;
    }
    let at = |k: u64| {
        let mut seen = 0;
        for (v, &w) in sorted.iter().zip(weights) {
            seen += u64::from(w);
            if seen > k {
                return Some(*v);
            }
        }
        None
    };
    Some((at((total - 1) / 2)? + at(total / 2)?) / 2.0)
}

/// A two-sided interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

/// The percentile interval of bootstrap values covering `level` of them
/// (0.95: the 2.5th and 97.5th percentiles); `None` without values.
pub fn interval(values: &mut [f64], level: f64) -> Option<Interval> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let at = |q: f64| values.get(((n - 1) as f64 * q).round() as usize).copied();
    if n == 0 {
        return None;
    }
    Some(Interval {
        lo: at((1.0 - level) / 2.0)?,
        hi: at((1.0 + level) / 2.0)?,
    })
}

/// Draws of `n` runs with replacement, as a count per run.
pub struct Resampler {
    rng: fastrand::Rng,
}

impl Resampler {
    pub fn new(seed: u64) -> Resampler {
        Resampler {
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    pub fn draw(&mut self, weights: &mut [u32]) {
        let n = weights.len();
        weights.fill(0);
        for _ in 0..n {
            weights[self.rng.usize(..n)] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_exact_on_small_inputs() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 0.999), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[7], 0.99), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
        let v: Vec<u32> = (1..=1000).map(|x| x * 1000).collect();
        let p = Percentiles::of_sorted(&v).unwrap();
        assert_eq!(
            (p.p50_us, p.p90_us, p.p99_us, p.p999_us, p.max_us),
            (500.0, 900.0, 990.0, 999.0, 1000.0)
        );
        assert_eq!(p.samples, 1000);
    }

    #[test]
    fn buckets_are_ordered_and_close() {
        let mut last = 0;
        for v in (0..600).chain((1..40).map(|k| k * 9973)).chain([u32::MAX]) {
            let b = bucket(v);
            assert!(b >= last, "{v}: bucket {b} after {last}");
            last = b;
            let mid = bucket_mid_ns(b);
            let err = (mid - f64::from(v)).abs() / f64::from(v.max(1));
            assert!(err <= 1.0 / 256.0, "{v}: read back as {mid}");
        }
        for v in 0..512 {
            assert_eq!(bucket_mid_ns(bucket(v)), f64::from(v), "exact below 2^SIG");
        }
    }

    #[test]
    fn cluster_quantiles_weight_runs() {
        let a: Vec<u32> = (1..=100).collect();
        let b: Vec<u32> = (101..=200).collect();
        let c = Clusters::new(&[&a, &b]);
        assert_eq!(c.quantile(&[1, 1], 0.5), Some(100.0));
        assert_eq!(c.quantile(&[1, 1], 0.99), Some(198.0));
        // run b drawn twice, a not at all
        assert_eq!(c.quantile(&[0, 2], 0.5), Some(150.0));
        assert_eq!(c.quantile(&[3, 0], 0.99), Some(99.0));
        assert_eq!(c.quantile(&[0, 0], 0.5), None);
        // large values: within the bucket's half width of the exact answer
        let big: Vec<u32> = (1..=10_000).map(|x| x * 97).collect();
        let c = Clusters::new(&[&big]);
        let exact = f64::from(percentile(&big, 0.99).unwrap());
        let got = c.quantile(&[1], 0.99).unwrap();
        assert!((got - exact).abs() / exact < 0.002, "{got} vs {exact}");
    }

    #[test]
    fn medians_and_intervals() {
        assert_eq!(weighted_median(&[1.0, 2.0, 3.0], &[1, 1, 1]), Some(2.0));
        assert_eq!(
            weighted_median(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 1, 1]),
            Some(2.5)
        );
        assert_eq!(weighted_median(&[1.0, 2.0, 3.0], &[0, 0, 2]), Some(3.0));
        assert_eq!(weighted_median(&[1.0], &[0]), None);
        let mut v: Vec<f64> = (0..=1000).map(f64::from).rev().collect();
        let i = interval(&mut v, 0.95).unwrap();
        assert_eq!((i.lo, i.hi), (25.0, 975.0));
        assert!(interval(&mut [], 0.95).is_none());
    }

    #[test]
    fn draws_are_reproducible_and_keep_the_count() {
        let (mut a, mut b) = (Resampler::new(7), Resampler::new(7));
        let (mut wa, mut wb) = (vec![0; 10], vec![0; 10]);
        a.draw(&mut wa);
        b.draw(&mut wb);
        assert_eq!(wa, wb);
        assert_eq!(wa.iter().sum::<u32>(), 10);
        a.draw(&mut wa);
        assert_ne!(wa, wb, "a second draw differs");
    }
}
