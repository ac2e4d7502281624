//! The probe's human table: one line per configuration, the A/A spread,
//! the reference and the answer in a sentence.

use super::analysis::{Analysis, Answer, ConfigStats, Ratio, WITHIN};
use super::recommend::ratio_text;
use super::sample::TableState;
use crate::report::{Style, escape_control, table};
use std::fmt::Write;

/// The table without colour.
pub fn render_table(a: &Analysis, states: &[TableState]) -> String {
    render_table_styled(a, states, Style::plain())
}

pub fn render_table_styled(a: &Analysis, states: &[TableState], style: Style) -> String {
    let rows: Vec<Vec<String>> = a.configs.iter().map(|c| row(a, c)).collect();
    let mut out = table(
        style,
        &[
            "CONFIG",
            "RUNS",
            "P50_US",
            "P99_US",
            "P99.9_US",
            "MAX_US",
            "IOPS",
            "FIRST_P50",
            "FIRST_P99",
            "DEEP%",
            "P99_VS_REF",
            "FIRST_P90_VS_REF",
        ],
        &rows,
    );
    let idle: Vec<String> = (states.iter())
        .map(|s| {
            let off = if s.disabled { ", disabled" } else { "" };
            format!("{} ({} us{off})", s.name, s.exit_latency_us)
        })
        .collect();
    let _ = writeln!(
        out,
        "idle states: {}; DEEP%: share of QD1 time {}",
        if idle.is_empty() {
            "none".to_string()
        } else {
            idle.join(", ")
        },
        a.residency_axis
    );
    let _ = writeln!(
        out,
        "* a called difference: the {:.0} % interval ({} draws of whole runs) excludes 1 and the ratio is beyond the A/A spread",
        a.bootstrap.level * 100.0,
        a.bootstrap.iterations
    );
    let s = &a.spread;
    let pct = |p: Option<f64>| p.map_or("-".to_string(), |p| format!("{p:.1} %"));
    let _ = writeln!(
        out,
        "A/A spread ({} pairs): QD1 p99 {}, first-of-burst p90 {}, IOPS {}{}",
        s.pairs,
        pct(s.qd1_p99_pct),
        pct(s.first_p90_pct),
        pct(s.iops_pct),
        if a.noisy { " (noisy)" } else { "" }
    );
    let _ = writeln!(
        out,
        "reference: {}: {}",
        a.reference.as_deref().unwrap_or("-"),
        a.reference_why
    );
    let _ = writeln!(
        out,
        "answer: {}",
        escape_control(&answer_sentence(&a.answer))
    );
    if matches!(a.answer, Answer::TooNoisy { .. }) {
        // the tail is what a host's stalls move most; the median and the
        // rate of reads still say where a lease pays, if not how much
        let reference =
            (a.configs.iter()).find(|c| a.reference.as_deref() == Some(c.label.as_str()));
        let p50 = |c: &ConfigStats| c.qd1.as_ref().map(|q| q.p50_us);
        for c in (a.configs.iter()).filter(|c| a.reference.as_deref() != Some(c.label.as_str())) {
            if let (Some(r), Some(mine), Some(theirs)) =
                (c.vs_reference.iops, p50(c), reference.and_then(p50))
            {
                let _ = writeln!(
                    out,
                    "  {}: IOPS {}{}, QD1 p50 {mine:.1} us against {theirs:.1}",
                    escape_control(&c.label),
                    ratio_text(&r),
                    if r.called { " *" } else { "" }
                );
            }
        }
        let _ = writeln!(
            out,
            "  longer runs steady the tail: --duration 600 runs each configuration for about ten times as long"
        );
    }
    out
}

fn row(a: &Analysis, c: &ConfigStats) -> Vec<String> {
    let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let q = c.qd1.as_ref();
    let f = c.first.as_ref();
    let is_ref = a.reference.as_deref() == Some(c.label.as_str());
    let ratio = |r: Option<&Ratio>| match r {
        _ if is_ref => "(reference)".to_string(),
        None => "-".to_string(),
        Some(r) => format!("{}{}", ratio_text(r), if r.called { " *" } else { "" }),
    };
    vec![
        c.label.clone(),
        c.runs.to_string(),
        num(q.map(|p| p.p50_us)),
        num(q.map(|p| p.p99_us)),
        num(q.map(|p| p.p999_us)),
        num(q.map(|p| p.max_us)),
        c.iops.map_or("-".to_string(), |v| format!("{v:.0}")),
        num(f.map(|p| p.p50_us)),
        num(f.map(|p| p.p99_us)),
        format!("{:.1}", c.deep_residency * 100.0),
        ratio(c.vs_reference.qd1_p99.as_ref()),
        ratio(c.vs_reference.first_p90.as_ref()),
    ]
}

/// The answer in one sentence.
pub fn answer_sentence(answer: &Answer) -> String {
    let bound = WITHIN * 100.0;
    match answer {
        Answer::Limit {
            limit_us,
            label,
            p99_ratio,
            first_ratio,
        } => format!(
            "cpu_lat_limit_us = {limit_us} ({label}): the loosest limit tried within {bound:.0} % of the reference, QD1 p99 {}{}",
            ratio_text(p99_ratio),
            first_ratio.map_or(String::new(), |f| format!(
                ", first-of-burst p90 {}",
                ratio_text(&f)
            ))
        ),
        Answer::NothingToBuy { why } => format!("nothing to buy: {why}"),
        Answer::TooNoisy { spread_pct } => format!(
            "too noisy to tell: two runs of one configuration differ by up to {spread_pct:.1} %, over the {bound:.0} % a decision needs; rerun with more rounds or on a quieter machine"
        ),
        Answer::NoLimitReaches {
            strictest_tried: Some(us),
        } => format!(
            "no limit tried gets within {bound:.0} % of the reference (the strictest was {us} us); try a stricter one, 0"
        ),
        Answer::NoLimitReaches {
            strictest_tried: None,
        } => format!(
            "no lease limit was tried, and the machine as found is not within {bound:.0} % of the reference; try limit 0"
        ),
        Answer::NoData { why } => format!("no answer: {why}"),
    }
}
