//! The analysis on recorded-shape runs of real machines (see
//! tests/support/probe_runs.rs): what it recommends, and why.

use super::analysis::{Analysis, Answer, ConfigStats};
use super::analyze::{analyze, analyze_with};
use super::probe_runs::{self as machines, Machine, PLAN, Plan, shape};
use super::render::render_table;

fn run(m: &Machine, plan: Plan) -> Analysis {
    analyze(&m.configs, &m.table, &m.record(plan))
}

fn config<'a>(a: &'a Analysis, label: &str) -> &'a ConfigStats {
    (a.configs.iter())
        .find(|c| c.label == label)
        .unwrap_or_else(|| panic!("no {label} in {a:#?}"))
}

fn near(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= want.abs() * rel
}

#[test]
fn a_haltpoll_guest_is_told_limit_0_against_lease_0() {
    let a = run(&machines::haltpoll(), PLAN);
    assert_eq!(a.reference.as_deref(), Some("lease@0"), "{a:#?}");
    assert!(a.reference_why.contains("beats c1"), "{}", a.reference_why);
    match &a.answer {
        Answer::Limit {
            limit_us: 0, label, ..
        } => assert_eq!(label, "lease@0"),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.residency_axis, "halting (no state deeper than haltpoll)");
    assert_eq!(a.residency_states, ["haltpoll"]);
    let deep = config(&a, "deep");
    let q = deep.qd1.as_ref().unwrap();
    assert!(
        near(q.p50_us, 47.0, 0.03) && near(q.p99_us, 80.0, 0.03),
        "{q:?}"
    );
    assert!(
        near(deep.deep_residency, 0.60, 0.05),
        "{}",
        deep.deep_residency
    );
    let r = deep.vs_reference.qd1_p99.unwrap();
    assert!(r.called && r.lo > 1.2, "deep pays the halt: {r:?}");
    // the auto limit (1 us: haltpoll itself) buys nothing over deep
    let auto = config(&a, "lease@auto=1").vs_reference.qd1_p99.unwrap();
    assert!(auto.hi > 1.05, "{auto:?}");
}

#[test]
fn ice_lake_keeps_c1e_and_rules_out_c6() {
    let a = run(&machines::icelake(), PLAN);
    assert_eq!(a.reference.as_deref(), Some("c1"), "{}", a.reference_why);
    assert_eq!(a.residency_axis, "deeper than C1");
    assert_eq!(a.residency_states, ["C1E", "C6"]);
    match &a.answer {
        Answer::Limit {
            limit_us: 4,
            p99_ratio,
            first_ratio,
            ..
        } => {
            assert!(p99_ratio.hi <= 1.05, "{p99_ratio:?}");
            assert!(first_ratio.unwrap().hi <= 1.05, "{first_ratio:?}");
        }
        other => panic!(
            "{other:?}\n{}",
            render_table(&a, &machines::icelake().table)
        ),
    }
    for c6 in ["deep", "lease@200"] {
        let first = config(&a, c6).vs_reference.first_p90.unwrap();
        // the C6 exit: 250 us against 80 us at the median and beyond
        assert!(
            first.called && first.lo > 2.5 && first.hi < 3.5,
            "{c6}: {first:?}"
        );
    }
    let deep = config(&a, "deep");
    assert!(
        near(deep.deep_residency, 0.45, 0.05),
        "{}",
        deep.deep_residency
    );
    assert!(near(deep.burst_deep_residency, 0.91, 0.05));
    assert_eq!(deep.qd1_residency.len(), 4);
    let first = deep.first.as_ref().unwrap();
    assert!(near(first.p50_us, 250.0, 0.03), "{first:?}");
    assert_eq!(
        first.samples,
        u64::from(PLAN.rounds) * 2 * PLAN.bursts as u64
    );
    assert_eq!(a.spread.pairs, 6 * PLAN.rounds as usize);
    assert!(!a.noisy);
}

#[test]
fn where_deep_is_c1_there_is_nothing_to_buy() {
    let a = run(&machines::flat(), PLAN);
    assert_eq!(a.reference.as_deref(), Some("c1"));
    assert!(
        matches!(a.answer, Answer::NothingToBuy { .. }),
        "{:?}",
        a.answer
    );
    // an A/A comparison: the same machine twice is no difference
    for label in ["deep", "lease@0"] {
        let r = &config(&a, label).vs_reference;
        for x in [r.qd1_p99, r.first_p90, r.iops] {
            let x = x.unwrap();
            assert!(!x.called && x.lo <= 1.0 && x.hi >= 1.0, "{label}: {x:?}");
        }
    }
}

#[test]
fn a_noisy_host_is_too_noisy_to_tell() {
    let plan = Plan {
        host_noise: 0.15,
        ..PLAN
    };
    let m = machines::icelake();
    let a = run(&m, plan);
    assert!(a.noisy, "{:?}", a.spread);
    match a.answer {
        Answer::TooNoisy { spread_pct } => assert!(spread_pct > 10.0, "{spread_pct}"),
        ref other => panic!("{other:?}"),
    }
    // what the median and the rate of reads say anyway, and how to do better
    let t = crate::probe::render_table(&a, &m.table);
    assert!(t.contains("  deep: IOPS x"), "{t}");
    assert!(
        !t.contains("  c1: IOPS"),
        "the reference is not compared with itself: {t}"
    );
    assert!(t.contains("--duration 600"), "{t}");
}

/// On a loaded host deep's interval may clear the bound by luck (a CI
/// host under builds: deep "within 5 %" at an A/A spread of 236 %): the
/// answer is that the probe cannot tell, not that there is nothing to buy.
#[test]
fn a_noisy_host_where_deep_happens_to_be_within_the_bound_is_too_noisy() {
    for seed in 0..20 {
        let plan = Plan {
            host_noise: 0.3,
            seed,
            ..PLAN
        };
        let a = run(&machines::flat(), plan);
        assert!(a.noisy, "seed {seed}: {:?}", a.spread);
        assert!(
            matches!(a.answer, Answer::TooNoisy { .. }),
            "seed {seed}: {:?}",
            a.answer
        );
    }
}

/// Deep that enters C6 during the QD1 phase in some runs and not in
/// others (menu's prediction flips; seen in the icx guest: deep's p99
/// between 129 and 250 us, c1's between 123 and 125) is deep's own
/// finding: it must not make the steady configurations "too noisy".
#[test]
fn deep_that_varies_by_itself_does_not_hide_the_answer() {
    let m = machines::icelake();
    let mut runs = m.record(PLAN);
    for r in runs.iter_mut().filter(|r| r.config == 0 && r.rep == 1) {
        for ns in r.qd1_ns.iter_mut() {
            *ns = ns.saturating_mul(2);
        }
    }
    let a = analyze(&m.configs, &m.table, &runs);
    assert!(!a.noisy, "{:?}", a.spread);
    assert!(
        matches!(a.answer, Answer::Limit { limit_us: 4, .. }),
        "{:?}\n{}",
        a.answer,
        render_table(&a, &m.table)
    );
    let deep = config(&a, "deep");
    assert!(deep.spread.qd1_p99_pct.unwrap() > 50.0, "{:?}", deep.spread);
    assert!(config(&a, "c1").spread.qd1_p99_pct.unwrap() < 10.0);
}

/// A haltpoll guest on a busy host: single runs of the polling lease
/// differ by well over 10 %, yet deep, c1 and every looser limit are worse
/// by called differences (the CI machine kind: IOPS x0.66, p99 x1.6): the
/// answer is limit 0, not "too noisy".
#[test]
fn a_noisy_guest_where_only_polling_pays_is_told_limit_0() {
    let plan = Plan {
        host_noise: 0.15,
        ..PLAN
    };
    let m = machines::haltpoll();
    let a = run(&m, plan);
    assert!(a.noisy, "{:?}", config(&a, "lease@0").spread);
    assert!(
        matches!(a.answer, Answer::Limit { limit_us: 0, .. }),
        "{:?}\n{}",
        a.answer,
        render_table(&a, &m.table)
    );
    // and where a looser configuration is not called worse, it cannot tell
    let plan = Plan {
        host_noise: 0.5,
        ..PLAN
    };
    let a = run(&m, plan);
    assert!(
        matches!(a.answer, Answer::TooNoisy { .. }),
        "{:?}\n{}",
        a.answer,
        render_table(&a, &m.table)
    );
}

/// One run of the reference that met a stall (a tick-long read in 2 % of
/// its reads: the stock kernel's guest, where c1's pooled p999 was 4 ms)
/// is one run: the probe is not too noisy for it.
#[test]
fn one_stalled_run_of_the_reference_is_not_noise() {
    let m = machines::icelake();
    let mut runs = m.record(PLAN);
    let c1 = (m.configs.iter()).position(|c| matches!(c, crate::probe::sample::Config::C1 { .. }));
    let stalled = (runs.iter_mut())
        .find(|r| Some(r.config) == c1 && r.round == 2 && r.rep == 1)
        .unwrap();
    let n = stalled.qd1_ns.len();
    for ns in stalled.qd1_ns.iter_mut().step_by(50).take(n / 50) {
        *ns = 4_000_000;
    }
    let a = analyze(&m.configs, &m.table, &runs);
    assert!(!a.noisy, "{:?}", config(&a, "c1").spread);
    assert!(
        matches!(a.answer, Answer::Limit { limit_us: 4, .. }),
        "{:?}\n{}",
        a.answer,
        render_table(&a, &m.table)
    );
}

#[test]
fn the_interval_holds_the_true_ratio_and_excludes_1() {
    // slow = fast * 1.5 in every quantile
    let mut m = machines::flat();
    m.behaviours[0].qd1 = shape(90.0, 127.5);
    m.behaviours[0].first = shape(96.0, 138.0);
    let a = run(&m, PLAN);
    let r = &config(&a, "deep").vs_reference;
    for x in [r.qd1_p99.unwrap(), r.first_p90.unwrap()] {
        assert!(
            x.lo <= 1.5 && 1.5 <= x.hi && x.lo > 1.0 && x.called,
            "{x:?}"
        );
        assert!(x.hi - x.lo < 0.1, "a tight interval: {x:?}");
    }
    // fewer reads per run: wider, still around the truth
    let small = Plan {
        reads: 500,
        bursts: 60,
        ..PLAN
    };
    let b = run(&m, small);
    let y = config(&b, "deep").vs_reference.qd1_p99.unwrap();
    let x = r.qd1_p99.unwrap();
    assert!(
        y.lo <= 1.5 && 1.5 <= y.hi && y.hi - y.lo > x.hi - x.lo,
        "{y:?} vs {x:?}"
    );
}

#[test]
fn the_reference_interval_is_its_own_p99s() {
    let a = run(&machines::flat(), PLAN);
    let c1 = config(&a, "c1");
    let r = c1.vs_reference.qd1_p99.unwrap();
    assert_eq!((r.ratio, r.lo, r.hi, r.called), (1.0, 1.0, 1.0, false));
    let iv = c1.p99_interval_us.unwrap();
    let p99 = c1.qd1.as_ref().unwrap().p99_us;
    assert!(
        iv.lo <= p99 && p99 <= iv.hi && iv.hi - iv.lo < 0.05 * p99,
        "{iv:?} {p99}"
    );
    // the same runs, the same intervals
    let m = machines::flat();
    let runs = m.record(PLAN);
    assert_eq!(
        analyze(&m.configs, &m.table, &runs),
        analyze(&m.configs, &m.table, &runs)
    );
    // another seed: its own draws, recorded, around the same p99
    let other = analyze_with(&m.configs, &m.table, &runs, 200, 1);
    assert_eq!((other.bootstrap.seed, other.bootstrap.iterations), (1, 200));
    let iv = other.configs[1].p99_interval_us.unwrap();
    assert!(iv.lo <= p99 && p99 <= iv.hi, "{iv:?} {p99}");
}

#[test]
fn without_c1_the_best_p99_is_the_reference() {
    let m = machines::haltpoll();
    let runs: Vec<_> = (m.record(PLAN).into_iter())
        .filter(|r| r.config != 1)
        .collect();
    let a = analyze(&m.configs, &m.table, &runs);
    assert_eq!(a.reference.as_deref(), Some("lease@0"));
    assert!(a.reference_why.contains("no c1"), "{}", a.reference_why);
    assert_eq!(config(&a, "c1").runs, 0);
    assert!(config(&a, "c1").qd1.is_none());
}

#[test]
fn no_runs_no_answer_and_no_panic() {
    let m = machines::icelake();
    let a = analyze(&m.configs, &m.table, &[]);
    assert!(matches!(a.answer, Answer::NoData { .. }));
    assert_eq!(a.reference, None);
    let a = analyze(&[], &[], &[]);
    assert!(a.configs.is_empty() && a.residency_axis == "no halting state");
    render_table(&a, &[]);
}

#[test]
fn the_analysis_survives_json() {
    let a = run(&machines::icelake(), PLAN);
    let text = serde_json::to_string(&a).unwrap();
    let back: Analysis = serde_json::from_str(&text).unwrap();
    assert_eq!(back, a);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["answer"]["kind"], "limit");
    assert_eq!(v["configs"][1]["config"]["kind"], "c1");
}

#[test]
fn the_table_shows_the_numbers_and_the_answer() {
    let m = machines::icelake();
    let a = run(&m, PLAN);
    let t = render_table(&a, &m.table);
    let c1 = config(&a, "c1").qd1.clone().unwrap();
    let deep = config(&a, "deep");
    for want in [
        "CONFIG".to_string(),
        "lease@auto=4".to_string(),
        format!("{:.1}", c1.p99_us),
        format!("{:.1}", c1.p999_us),
        format!("{:.0}", deep.iops.unwrap()),
        format!("{:.1}", deep.deep_residency * 100.0),
        format!("{:.1}", deep.first.as_ref().unwrap().p99_us),
        "(reference)".to_string(),
        "C6 (170 us)".to_string(),
        "A/A spread (36 pairs;".to_string(),
        "answer: cpu_lat_limit_us = 4".to_string(),
    ] {
        assert!(t.contains(&want), "{want:?} not in\n{t}");
    }
    let deep_line = t.lines().find(|l| l.starts_with("deep ")).unwrap();
    assert!(
        deep_line.ends_with(" *"),
        "deep's first reads differ: {deep_line}"
    );
    assert_eq!(t.lines().filter(|l| l.starts_with("lease@")).count(), 4);
}

/// The long probe the analysis must keep up with: 6 configurations of
/// 40 runs of 50,000 reads (run it with --release --ignored: 0.6 s on the 2-core dev host; a debug
/// build is several times slower).
#[test]
#[ignore]
fn a_long_probe_is_analyzed_in_well_under_2_s() {
    let m = machines::icelake();
    let plan = Plan {
        rounds: 20,
        reads: 50_000,
        ..PLAN
    };
    let runs = m.record(plan);
    let start = std::time::Instant::now();
    let a = analyze(&m.configs, &m.table, &runs);
    let took = start.elapsed();
    assert_eq!(a.configs[0].runs, 40);
    assert!(took.as_secs_f64() < 2.0, "{took:?}");
    println!("analyzed in {took:?}");
}
