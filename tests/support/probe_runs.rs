//! Probe runs as machines record them, from a seeded generator: the
//! shapes of real measurements (a haltpoll KVM guest, an Ice Lake server,
//! a machine where deep and c1 are the same, a noisy host), for the
//! analysis's tests. Shared by the unit tests (src/probe) and the schema
//! test (tests/probe_schema.rs).

use blkqos::probe::sample::{Config, Run, TableState};

/// A latency distribution: log-normal with this median and p99 (us).
#[derive(Clone, Copy)]
pub struct Shape {
    pub p50_us: f64,
    pub p99_us: f64,
}

pub const fn shape(p50_us: f64, p99_us: f64) -> Shape {
    Shape { p50_us, p99_us }
}

/// How one configuration behaves on the machine.
#[derive(Clone)]
pub struct Behaviour {
    pub qd1: Shape,
    pub first: Shape,
    pub rest: Shape,
    /// Share of time per idle state (table order), QD1 and bursts.
    pub qd1_residency: Vec<f64>,
    pub burst_residency: Vec<f64>,
}

/// How the probe was run.
#[derive(Clone, Copy)]
pub struct Plan {
    pub rounds: u32,
    /// QD1 reads per run.
    pub reads: usize,
    /// Bursts of 8 per run.
    pub bursts: usize,
    /// Standard deviation of a run's log latency factor: the host moving
    /// whole runs.
    pub host_noise: f64,
    pub seed: u64,
}

pub const PLAN: Plan = Plan {
    rounds: 6,
    reads: 4000,
    bursts: 500,
    host_noise: 0.005,
    seed: 40,
};

/// A machine: its table, the configurations tried and how each behaves.
pub struct Machine {
    pub table: Vec<TableState>,
    pub configs: Vec<Config>,
    pub behaviours: Vec<Behaviour>,
}

impl Machine {
    pub fn record(&self, plan: Plan) -> Vec<Run> {
        record(plan, &self.behaviours)
    }
}

fn state(index: u32, name: &str, exit: u64, target: u64) -> TableState {
    TableState {
        index,
        name: name.to_string(),
        exit_latency_us: exit,
        target_residency_us: target,
        disabled: false,
    }
}

fn lease(limit_us: u64, auto: bool) -> Config {
    Config::Lease {
        limit_us,
        timeout_ms: 3,
        auto,
    }
}

fn behave(qd1: Shape, first: Shape, qd1_res: &[f64], burst_res: &[f64]) -> Behaviour {
    Behaviour {
        qd1,
        first,
        rest: qd1,
        qd1_residency: qd1_res.to_vec(),
        burst_residency: burst_res.to_vec(),
    }
}

/// A KVM guest whose idle driver is haltpoll: deep and c1 both idle in
/// "haltpoll" (p50 47 us, p99 80 us); only polling (limit 0) helps.
pub fn haltpoll() -> Machine {
    let halt = behave(
        shape(47.0, 80.0),
        shape(55.0, 100.0),
        &[0.05, 0.60],
        &[0.02, 0.93],
    );
    let poll = behave(
        shape(40.0, 63.0),
        shape(42.0, 68.0),
        &[0.70, 0.0],
        &[0.97, 0.0],
    );
    Machine {
        table: vec![state(0, "POLL", 0, 0), state(1, "haltpoll", 1, 1)],
        configs: vec![
            Config::Deep,
            Config::C1 { limit_us: 1 },
            lease(0, false),
            lease(1, true),
        ],
        behaviours: vec![halt.clone(), halt.clone(), poll, halt],
    }
}

/// An Ice Lake server: C6 (170 us exit) costs the first read of a burst
/// 170 us; c1 is flat; C1E (4 us) is close to c1.
pub fn icelake() -> Machine {
    let c1 = behave(
        shape(75.0, 95.0),
        shape(80.0, 105.0),
        &[0.0, 0.55, 0.0, 0.0],
        &[0.0, 0.92, 0.0, 0.0],
    );
    let c1e = behave(
        shape(75.5, 96.0),
        shape(80.5, 106.0),
        &[0.0, 0.15, 0.40, 0.0],
        &[0.0, 0.05, 0.87, 0.0],
    );
    let c6 = behave(
        shape(76.0, 104.0),
        shape(250.0, 290.0),
        &[0.0, 0.10, 0.37, 0.08],
        &[0.0, 0.02, 0.05, 0.86],
    );
    Machine {
        table: vec![
            state(0, "POLL", 0, 0),
            state(1, "C1", 1, 1),
            state(2, "C1E", 4, 4),
            state(3, "C6", 170, 600),
        ],
        configs: vec![
            Config::Deep,
            Config::C1 { limit_us: 1 },
            lease(0, false),
            lease(4, false),
            lease(4, true),
            lease(200, false),
        ],
        behaviours: vec![c6.clone(), c1.clone(), c1, c1e.clone(), c1e, c6],
    }
}

/// A machine where deep is c1: nothing deeper is ever entered.
pub fn flat() -> Machine {
    let b = behave(
        shape(60.0, 85.0),
        shape(64.0, 92.0),
        &[0.0, 0.5, 0.0],
        &[0.0, 0.9, 0.0],
    );
    Machine {
        table: vec![
            state(0, "POLL", 0, 0),
            state(1, "C1", 1, 1),
            state(2, "C6", 100, 400),
        ],
        configs: vec![Config::Deep, Config::C1 { limit_us: 1 }, lease(0, false)],
        behaviours: vec![b.clone(), b.clone(), b],
    }
}

/// Standard normal, Box-Muller.
fn normal(rng: &mut fastrand::Rng) -> f64 {
    let u1 = 1.0 - rng.f64(); // (0, 1]: ln is finite
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn draw(rng: &mut fastrand::Rng, s: Shape, factor: f64) -> u32 {
    // z of the 99th percentile
    let sigma = (s.p99_us / s.p50_us).ln() / 2.326_348;
    let us = s.p50_us * (sigma * normal(rng)).exp() * factor;
    (us * 1000.0).round().clamp(1.0, f64::from(u32::MAX)) as u32
}

fn residency(rng: &mut fastrand::Rng, shares: &[f64]) -> Vec<f64> {
    let v: Vec<f64> = (shares.iter())
        .map(|s| (s * (1.0 + 0.05 * normal(rng))).clamp(0.0, 1.0))
        .collect();
    let sum: f64 = v.iter().sum();
    let scale = if sum > 1.0 { 1.0 / sum } else { 1.0 };
    v.into_iter().map(|s| s * scale).collect()
}

/// Every configuration twice per round, in a random order each round.
pub fn record(plan: Plan, behaviours: &[Behaviour]) -> Vec<Run> {
    let mut rng = fastrand::Rng::with_seed(plan.seed);
    let mut runs = Vec::new();
    for round in 0..plan.rounds {
        let mut order: Vec<(usize, u32)> = (0..behaviours.len())
            .flat_map(|c| [(c, 0), (c, 1)])
            .collect();
        rng.shuffle(&mut order);
        for (config, rep) in order {
            let b = &behaviours[config];
            let factor = (plan.host_noise * normal(&mut rng)).exp();
            let qd1_ns: Vec<u32> = (0..plan.reads)
                .map(|_| draw(&mut rng, b.qd1, factor))
                .collect();
            let busy: f64 = qd1_ns.iter().map(|&n| f64::from(n)).sum::<f64>() / 1e9;
            let first_ns = (0..plan.bursts)
                .map(|_| draw(&mut rng, b.first, factor))
                .collect();
            let rest_ns = (0..plan.bursts * 7)
                .map(|_| draw(&mut rng, b.rest, factor))
                .collect();
            runs.push(Run {
                config,
                round,
                rep,
                qd1_ns,
                // submission and completion around each read
                qd1_secs: busy * 1.02,
                first_ns,
                rest_ns,
                qd1_residency: residency(&mut rng, &b.qd1_residency),
                burst_residency: residency(&mut rng, &b.burst_residency),
            });
        }
    }
    runs
}
