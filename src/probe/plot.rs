//! The probe's picture: QD1 p99 against deep residency, one point per
//! configuration, as a self-contained SVG written by hand (a plotting
//! crate would bring fonts and a renderer for a dozen shapes).

use super::analysis::Analysis;
use std::fmt::Write;

const W: f64 = 760.0;
const H: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;

/// Text safe inside an XML element or attribute.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // not allowed in XML 1.0 at all
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// The smallest round step (1, 2 or 5 times a power of ten) that cuts
/// `max` into at most `ticks` + 1 intervals.
fn step(max: f64, ticks: f64) -> f64 {
    let raw = (max / ticks).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|n| n * mag)
        .find(|s| max / s <= ticks + 1.0 + 1e-9)
        .unwrap_or(10.0 * mag)
}

/// The axis from 0 to a multiple of its step at or above `max`.
fn axis(max: f64) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let s = step(max, 5.0);
    (s, (max / s).ceil() * s)
}

fn finite(v: f64) -> f64 {
    if v.is_finite() { v } else { 0.0 }
}

/// One configuration on the plot: residency (%), QD1 p99, its interval
/// and first-of-burst p99 (microseconds).
struct Point<'a> {
    label: &'a str,
    x: f64,
    p99: f64,
    interval: Option<(f64, f64)>,
    first: Option<f64>,
}

/// The SVG document: x the time in the states `residency_axis` names, y
/// QD1 p99, bars its bootstrap interval, squares first-of-burst p99.
pub fn svg(a: &Analysis, title: &str) -> String {
    let points: Vec<Point> = (a.configs.iter())
        .filter_map(|c| {
            let q = c.qd1.as_ref()?;
            Some(Point {
                label: &c.label,
                x: finite(c.deep_residency * 100.0),
                p99: finite(q.p99_us),
                interval: (c.p99_interval_us).map(|i| (finite(i.lo), finite(i.hi))),
                first: c.first.as_ref().map(|f| finite(f.p99_us)),
            })
        })
        .collect();
    let x_max_data = points.iter().map(|p| p.x).fold(0.0, f64::max);
    let y_max_data = (points.iter())
        .flat_map(|p| [Some(p.p99), p.interval.map(|i| i.1), p.first])
        .flatten()
        .fold(0.0, f64::max);
    // residency is a share: at most 100 %, and 10 % wide at least so that
    // configurations that never go deep are not spread across the plot
    let (xs, x_max) = axis(x_max_data.clamp(10.0, 100.0));
    let (ys, y_max) = axis(y_max_data * 1.05);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let px = |x: f64| LEFT + x / x_max * pw;
    let py = |y: f64| TOP + ph - y / y_max * ph;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    // axes and grid
    let _ = writeln!(
        s,
        r#"<path d="M{LEFT} {TOP} V{} H{}" fill="none" stroke="black"/>"#,
        TOP + ph,
        LEFT + pw
    );
    for i in 0..=((x_max / xs).round() as u32) {
        let x = f64::from(i) * xs;
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#ddd"/><text x="{0:.1}" y="{3}" text-anchor="middle">{4}</text>"##,
            px(x),
            TOP,
            TOP + ph + 5.0,
            TOP + ph + 20.0,
            tick(x, xs)
        );
    }
    for i in 0..=((y_max / ys).round() as u32) {
        let y = f64::from(i) * ys;
        let _ = writeln!(
            s,
            r##"<line x1="{0}" y1="{1:.1}" x2="{2}" y2="{1:.1}" stroke="#ddd"/><text x="{3}" y="{4:.1}" text-anchor="end">{5}</text>"##,
            LEFT - 5.0,
            py(y),
            LEFT + pw,
            LEFT - 8.0,
            py(y) + 4.0,
            tick(y, ys)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 25.0,
        escape(&format!(
            "time in idle states {} (%, QD1)",
            a.residency_axis
        ))
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(20 {}) rotate(-90)" text-anchor="middle">QD1 p99 latency (us)</text>"#,
        TOP + ph / 2.0
    );
    // legend
    let lx = LEFT + pw - 250.0;
    let _ = writeln!(
        s,
        r##"<circle cx="{}" cy="{}" r="4" fill="#1f5fa8"/><text x="{}" y="{}">QD1 p99 (bars: {:.0} % interval)</text>"##,
        lx,
        TOP + 10.0,
        lx + 10.0,
        TOP + 14.0,
        a.bootstrap.level * 100.0
    );
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="8" height="8" fill="none" stroke="#c0392b"/><text x="{}" y="{}">first read of a burst, p99</text>"##,
        lx - 4.0,
        TOP + 24.0,
        lx + 10.0,
        TOP + 32.0
    );
    for Point {
        label,
        x,
        p99,
        interval: iv,
        first,
    } in &points
    {
        let cx = px(*x);
        let _ = writeln!(s, r#"<g class="config">"#);
        if let Some((lo, hi)) = iv {
            let _ = writeln!(
                s,
                r##"<path d="M{0:.1} {1:.1} V{2:.1} M{3:.1} {1:.1} H{4:.1} M{3:.1} {2:.1} H{4:.1}" stroke="#1f5fa8" fill="none"/>"##,
                cx,
                py(*lo),
                py(*hi),
                cx - 4.0,
                cx + 4.0
            );
        }
        if let Some(f) = first {
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="none" stroke="#c0392b"/>"##,
                cx - 4.0,
                py(*f) - 4.0
            );
        }
        let _ = writeln!(
            s,
            r##"<circle cx="{:.1}" cy="{:.1}" r="4" fill="#1f5fa8"/><text x="{:.1}" y="{:.1}">{}</text>"##,
            cx,
            py(*p99),
            cx + 7.0,
            py(*p99) - 6.0,
            escape(label)
        );
        let _ = writeln!(s, "</g>");
    }
    s.push_str("</svg>\n");
    s
}

/// A tick's number: no decimals where the step is whole.
fn tick(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::analyze::analyze;
    use crate::probe::probe_runs::{PLAN, icelake};

    /// Balanced tags and the names of the elements opened, in order.
    fn elements(svg: &str) -> Vec<String> {
        let mut open: Vec<String> = Vec::new();
        let mut seen = Vec::new();
        let mut rest = svg;
        while let Some(i) = rest.find('<') {
            let end = rest[i..].find('>').expect("a tag ends") + i;
            let tag = &rest[i + 1..end];
            assert!(!tag.contains('<'), "{tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop().as_deref(), Some(name), "closes what it opened");
            } else {
                let name: String = tag.chars().take_while(|c| c.is_alphanumeric()).collect();
                seen.push(name.clone());
                if !tag.ends_with('/') {
                    open.push(name);
                }
            }
            rest = &rest[end + 1..];
        }
        assert!(open.is_empty(), "left open: {open:?}");
        seen
    }

    #[test]
    fn the_plot_is_well_formed_with_every_configuration() {
        let m = icelake();
        let a = analyze(&m.configs, &m.table, &m.record(PLAN));
        let s = svg(&a, "nvme0n1 <Ice Lake> & co");
        let names = elements(&s);
        assert_eq!(names[0], "svg");
        assert_eq!(names.iter().filter(|n| *n == "g").count(), a.configs.len());
        for c in &a.configs {
            assert!(
                s.contains(&format!(">{}</text>", escape(&c.label))),
                "{}",
                c.label
            );
        }
        assert!(s.contains("nvme0n1 &lt;Ice Lake&gt; &amp; co"));
        assert!(s.contains("deeper than C1") && s.contains("(us)"));
        // every number in an attribute is finite, and on the canvas
        for attr in s
            .split('"')
            .skip(1)
            .step_by(2)
            .filter(|a| !a.starts_with("http"))
        {
            for n in attr.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')) {
                if let Ok(v) = n.parse::<f64>() {
                    assert!(v.is_finite() && (-100.0..=W.max(H)).contains(&v), "{attr}");
                }
            }
        }
        // a first-of-burst square per configuration, and the legend's
        assert_eq!(s.matches("<rect x=").count(), a.configs.len() + 1);
    }

    #[test]
    fn axes_step_in_round_numbers() {
        assert_eq!(axis(104.0 * 1.05), (20.0, 120.0));
        assert_eq!(axis(45.7), (10.0, 50.0));
        assert_eq!(axis(0.0), (0.2, 1.0));
        assert_eq!(axis(f64::NAN), (0.2, 1.0));
        assert_eq!(escape("a\u{1b}<'"), "a?&lt;&apos;");
    }
}
