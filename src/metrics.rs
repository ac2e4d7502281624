//! The Prometheus text exposition format (version 0.0.4, what the
//! node_exporter textfile collector reads): families with HELP and TYPE,
//! their samples grouped under them, label values escaped.

use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
}

impl Type {
    fn as_str(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
        }
    }
}

/// One metric family and its samples, label sets already rendered.
#[derive(Debug)]
pub struct Family {
    name: &'static str,
    kind: Type,
    help: &'static str,
    samples: Vec<(String, String)>,
}

impl Family {
    pub fn new(name: &'static str, kind: Type, help: &'static str) -> Family {
        debug_assert!(
            kind != Type::Counter || name.ends_with("_total"),
            "{name}: a counter's name ends in _total"
        );
        Family {
            name,
            kind,
            help,
            samples: Vec::new(),
        }
    }

    /// A sample; `value` is a number as the format writes it (see [`int`],
    /// [`micros`], [`millis`]).
    pub fn add(&mut self, labels: &[(&str, &str)], value: impl Into<String>) {
        self.samples.push((render_labels(labels), value.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// The exposition of `families` in order. A family without samples is left
/// out: one the kernel does not have (the lease on an unpatched kernel) is
/// absent rather than present and empty.
pub fn render(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families.iter().filter(|f| !f.is_empty()) {
        let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help));
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.as_str());
        for (labels, value) in &f.samples {
            let _ = writeln!(out, "{}{labels} {value}", f.name);
        }
    }
    out
}

fn render_labels(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let body: Vec<String> = (labels.iter())
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// A label value: backslash, double quote and line feed are escaped.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text: backslash and line feed are escaped (quotes are not).
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

pub fn int(v: impl Into<i128>) -> String {
    v.into().to_string()
}

/// Microseconds as seconds, exactly (no float rounding of big counters).
pub fn micros(us: u64) -> String {
    decimal(us, 1_000_000, 6)
}

/// Milliseconds as seconds, exactly.
pub fn millis(ms: u64) -> String {
    decimal(ms, 1_000, 3)
}

fn decimal(v: u64, per: u64, digits: usize) -> String {
    let (whole, frac) = (v / per, v % per);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_as_the_format_says() {
        assert_eq!(escape_label(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label("two\nlines"), "two\\nlines");
        assert_eq!(escape_label("plain {x=1}"), "plain {x=1}");
        let mut f = Family::new("blkqos_x", Type::Gauge, "A \\ help\nline");
        f.add(&[("device", "sd\"a"), ("rule", "")], "1");
        assert_eq!(
            render(&[f]),
            "# HELP blkqos_x A \\\\ help\\nline\n# TYPE blkqos_x gauge\nblkqos_x{device=\"sd\\\"a\",rule=\"\"} 1\n"
        );
    }

    #[test]
    fn families_without_samples_are_left_out_and_samples_stay_grouped() {
        let mut a = Family::new("blkqos_a_total", Type::Counter, "A.");
        let b = Family::new("blkqos_b", Type::Gauge, "B.");
        a.add(&[("cpu", "0")], int(1u64));
        a.add(&[("cpu", "1")], int(2u64));
        let text = render(&[a, b]);
        assert_eq!(
            text,
            "# HELP blkqos_a_total A.\n# TYPE blkqos_a_total counter\n\
             blkqos_a_total{cpu=\"0\"} 1\nblkqos_a_total{cpu=\"1\"} 2\n"
        );
    }

    #[test]
    fn kernel_units_become_exact_seconds() {
        assert_eq!(micros(0), "0");
        assert_eq!(micros(4), "0.000004");
        assert_eq!(micros(2_500_000), "2.5");
        assert_eq!(micros(u64::MAX), "18446744073709.551615");
        assert_eq!(millis(3), "0.003");
        assert_eq!(millis(60_000), "60");
        assert_eq!(int(-1i64), "-1");
    }
}
