//! What the ratios say: which configuration the others are measured
//! against, the limit to put in the profile, and the rule to paste.

use super::analysis::{Answer, ConfigStats, NOISY, Ratio, Spread, WITHIN};
use super::sample::Config;

/// The configuration the ratios are against and why: c1 (the lowest
/// latency a limit gets without polling), unless a lease beats it on QD1
/// p99 with a called difference (a KVM guest whose only halting state is
/// haltpoll: c1 is the machine as found there, and only polling at limit
/// 0 helps), then the best such lease; without c1, the lowest QD1 p99.
/// `stats` carry their ratios against `c1` where there is one.
pub fn reference(stats: &[ConfigStats], c1: Option<usize>) -> Option<(usize, String)> {
    let p99 = |i: usize| stats[i].qd1.as_ref().map(|p| p.p99_us);
    let lowest = |among: &mut dyn Iterator<Item = usize>| {
        among
            .filter_map(|i| Some((i, p99(i)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    };
    let Some(c1) = c1 else {
        let (best, us) = lowest(&mut (0..stats.len()))?;
        let why = format!(
            "no c1 configuration was measured: {} has the lowest QD1 p99 ({us:.1} us)",
            stats[best].label
        );
        return Some((best, why));
    };
    let beats_c1 = |i: &usize| {
        matches!(stats[*i].config, Config::Lease { .. })
            && (stats[*i].vs_reference.qd1_p99).is_some_and(|r| r.called && r.ratio < 1.0)
    };
    let Some((best, us)) = lowest(&mut (0..stats.len()).filter(beats_c1)) else {
        let why = "every state deeper than the shallowest halting state held off, \
                   the lowest latency a limit buys without polling"
            .to_string();
        return Some((c1, why));
    };
    let r = stats[best].vs_reference.qd1_p99.unwrap_or(ONE);
    let why = format!(
        "{} beats c1 on QD1 p99 ({us:.1} us, {} of c1's {:.1} us, a called difference): \
         c1 is not the best this machine does (its shallowest halting state is what it \
         idles in anyway), polling is",
        stats[best].label,
        ratio_text(&r),
        p99(c1).unwrap_or(0.0),
    );
    Some((best, why))
}

const ONE: Ratio = Ratio {
    ratio: 1.0,
    lo: 1.0,
    hi: 1.0,
    called: false,
};

/// "x0.79 [0.76, 0.82]".
pub fn ratio_text(r: &Ratio) -> String {
    format!("x{:.2} [{:.2}, {:.2}]", r.ratio, r.lo, r.hi)
}

/// Within the bound of the reference: the upper ends of the QD1 p99 and
/// first-of-burst intervals at most 1 + WITHIN (a configuration without
/// bursts is judged on QD1 alone only where it has no first reads).
fn within(s: &ConfigStats) -> bool {
    let ok = |r: &Ratio| r.hi <= 1.0 + WITHIN;
    let r = &s.vs_reference;
    r.qd1_p99.as_ref().is_some_and(ok) && r.first_p90.as_ref().map_or(s.first.is_none(), ok)
}

/// Whether a reference with A/A spread `s` is too unsteady to measure
/// against: its two pooled halves, or its typical pair of runs, over 10 %.
pub fn noisy(s: &Spread) -> bool {
    [s.qd1_p99_pct, s.run_qd1_p99_pct]
        .into_iter()
        .flatten()
        .any(|p| p > NOISY * 100.0)
}

/// The answer, from ratios against the reference, whose own A/A spread is
/// `spread`: deep within bound wins
/// (nothing to buy); else the loosest lease within bound; else too noisy
/// to tell where the A/A spread is over the bound; else none reaches it.
pub fn answer(stats: &[ConfigStats], reference: Option<usize>, spread: &Spread) -> Answer {
    if stats.iter().all(|s| s.qd1.is_none()) {
        return Answer::NoData {
            why: "no configuration has QD1 samples".to_string(),
        };
    }
    let spread_pct = [spread.qd1_p99_pct, spread.first_p90_pct]
        .into_iter()
        .flatten()
        .fold(0.0, f64::max);
    // a reference that moves by itself more than a lease buys on most
    // machines: an interval that happens to clear the bound says nothing
    // (a loaded CI host gave deep "within 5 %" at an A/A spread of 236 %).
    // What still stands is a limit that is the reference itself, every
    // looser configuration (and deep) worse by a called difference: the
    // polling a haltpoll guest needs, plain however noisy its host
    if noisy(spread) {
        let plain = reference.and_then(|r| {
            let limit = stats[r].config.limit_us()?;
            let worse = |s: &ConfigStats| {
                let r = &s.vs_reference;
                [r.qd1_p99, r.first_p90]
                    .into_iter()
                    .flatten()
                    .any(|x| x.called && x.ratio > 1.0)
            };
            let looser = |s: &&ConfigStats| match s.config {
                Config::Deep => true,
                Config::Lease { limit_us, .. } | Config::C1 { limit_us } => limit_us > limit,
            };
            let measured = |s: &&ConfigStats| s.qd1.is_some();
            (stats.iter().filter(measured).filter(looser).all(worse)).then(|| Answer::Limit {
                limit_us: limit,
                label: stats[r].label.clone(),
                p99_ratio: stats[r].vs_reference.qd1_p99.unwrap_or(ONE),
                first_ratio: stats[r].vs_reference.first_p90,
            })
        });
        if let Some(a) = plain {
            return a;
        }
        let spread_pct = [spread_pct, spread.run_qd1_p99_pct.unwrap_or(0.0)]
            .into_iter()
            .fold(0.0, f64::max);
        return Answer::TooNoisy { spread_pct };
    }
    let deep = (stats.iter()).find(|s| s.config == Config::Deep && s.qd1.is_some());
    if let Some(d) = deep.filter(|d| within(d)) {
        let r = d.vs_reference.qd1_p99.unwrap_or(ONE);
        let first = (d.vs_reference.first_p90.as_ref()).map_or(String::new(), |f| {
            format!(", first-of-burst p90 {}", ratio_text(f))
        });
        return Answer::NothingToBuy {
            why: format!(
                "the machine as found (deep) is within {:.0} % of the reference: QD1 p99 {}{first}",
                WITHIN * 100.0,
                ratio_text(&r)
            ),
        };
    }
    let best = (stats.iter())
        .filter(|s| within(s))
        .filter_map(|s| Some((s, s.config.limit_us()?, s.vs_reference.qd1_p99?)))
        // the loosest limit; of equal limits, the lower p99
        .max_by(|a, b| a.1.cmp(&b.1).then(b.2.ratio.total_cmp(&a.2.ratio)));
    if let Some((s, limit_us, p99_ratio)) = best {
        return Answer::Limit {
            limit_us,
            label: s.label.clone(),
            p99_ratio,
            first_ratio: s.vs_reference.first_p90,
        };
    }
    if spread_pct > WITHIN * 100.0 {
        return Answer::TooNoisy { spread_pct };
    }
    Answer::NoLimitReaches {
        strictest_tried: stats.iter().filter_map(|s| s.config.limit_us()).min(),
    }
}

/// The profile rule that applies a `Limit` answer to disk `disk`, as
/// TOML to paste; `None` for the other answers.
pub fn rule_snippet(disk: &str, answer: &Answer, timeout_ms: u64) -> Option<String> {
    let Answer::Limit { limit_us, .. } = answer else {
        return None;
    };
    let name = toml_string(&format!("probe-{disk}"));
    let pattern = toml_string(&glob_literal(disk));
    Some(format!(
        "[[rule]]\nname = {name}\nmatch = {{ name = {pattern} }}\n\
         cpu_lat_limit_us = {limit_us}\ncpu_lat_timeout_ms = {timeout_ms}\n"
    ))
}

/// A TOML basic string holding `s`.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A glob matching exactly `s`: each character a glob (or the matcher's
/// leading `!`) gives a meaning to, escaped with a backslash.
fn glob_literal(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '!' | '\\' | ',') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Limit, Profile};
    use std::path::Path;

    fn limit(us: u64) -> Answer {
        Answer::Limit {
            limit_us: us,
            label: format!("lease@{us}"),
            p99_ratio: ONE,
            first_ratio: None,
        }
    }

    #[test]
    fn the_snippet_is_a_rule_the_profile_parser_takes() {
        let text = rule_snippet("nvme0n1", &limit(4), 3).unwrap();
        let p = Profile::parse(Path::new("probe.toml"), &text)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let rule = &p.rules[0];
        assert_eq!(rule.name, "probe-nvme0n1");
        let eff = p.effective(rule);
        assert!(matches!(eff.limit, Some(Limit::Us(4))), "{eff:?}");
        assert_eq!(eff.timeout_ms, 3);
        assert!(text.contains("match = { name = \"nvme0n1\" }"), "{text}");
        let zero = rule_snippet("sda", &limit(0), 60000).unwrap();
        let p = Profile::parse(Path::new("probe.toml"), &zero).unwrap();
        assert!(matches!(p.effective(&p.rules[0]).limit, Some(Limit::Us(0))));
        assert_eq!(p.effective(&p.rules[0]).timeout_ms, 60000);
    }

    #[test]
    fn only_a_limit_has_a_snippet() {
        for a in [
            Answer::NothingToBuy { why: "x".into() },
            Answer::TooNoisy { spread_pct: 9.0 },
            Answer::NoLimitReaches {
                strictest_tried: Some(0),
            },
        ] {
            assert_eq!(rule_snippet("nvme0n1", &a, 3), None);
        }
    }

    #[test]
    fn an_odd_disk_name_is_matched_literally() {
        let name = "!md*[0]\"{a,b}";
        let text = rule_snippet(name, &limit(2), 3).unwrap();
        Profile::parse(Path::new("probe.toml"), &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let table: toml::Table = text.parse().unwrap();
        let rule = &table["rule"].as_array().unwrap()[0];
        let glob = rule["match"]["name"].as_str().unwrap();
        let m = globset::Glob::new(glob).unwrap().compile_matcher();
        assert!(m.is_match(name), "{glob}");
        assert!(!m.is_match("md0"), "{glob}");
        assert_eq!(
            rule["name"].as_str(),
            Some(format!("probe-{name}").as_str())
        );
    }
}
