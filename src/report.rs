//! Output: the versioned JSON document and the human tables.

use serde::Serialize;
use std::io::IsTerminal;

/// Bumped only on incompatible changes to the JSON documents.
pub const JSON_SCHEMA: u32 = 1;

#[derive(Serialize)]
pub struct Document<'a, D: Serialize> {
    pub schema: u32,
    pub command: &'a str,
    pub changed: bool,
    pub dry_run: bool,
    pub devices: D,
    pub warnings: &'a [String],
    /// What a read-only command could not read (root's saved state, run as
    /// another user), and so left out of its answer.
    #[serde(skip_serializing_if = "<[Unreadable]>::is_empty")]
    pub unreadable: &'a [Unreadable],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    pub path: String,
    pub error: String,
}

impl<D: Serialize> Document<'_, D> {
    pub fn render(&self) -> String {
        // Serialising plain structs and maps with string keys cannot fail.
        let mut s = serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        s.push('\n');
        s
    }
}

/// Colour only for a terminal, and never when NO_COLOR is set.
#[derive(Clone, Copy)]
pub struct Style {
    color: bool,
}

impl Style {
    pub fn detect() -> Style {
        Style {
            color: std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    fn paint(self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    pub fn bold(self, s: &str) -> String {
        self.paint("1", s)
    }
    pub fn good(self, s: &str) -> String {
        self.paint("32", s)
    }
    pub fn bad(self, s: &str) -> String {
        self.paint("31", s)
    }
    pub fn dim(self, s: &str) -> String {
        self.paint("2", s)
    }
}

/// A left-aligned text table; the header is bold.
pub fn table(style: Style, header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let n = cells.len();
        let mut s = String::new();
        for (i, c) in cells.into_iter().enumerate() {
            s.push_str(&c);
            if i + 1 < n {
                s.push_str(&" ".repeat(width[i] - c.chars().count() + 2));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = style.bold(&line(header.iter().map(|h| h.to_string()).collect()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    out
}

pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "K", "M", "G", "T", "P"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes}B")
    } else {
        format!("{v:.1}{}", UNITS[u])
    }
}

pub fn warnings(style: Style, list: &[String]) -> String {
    list.iter()
        .map(|w| format!("{} {w}\n", style.bad("warning:")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let t = table(
            Style { color: false },
            &["A", "BB"],
            &[vec!["xyz".into(), "1".into()]],
        );
        assert_eq!(t, "A    BB\nxyz  1\n");
        assert_eq!(human_size(512), "512B");
        assert_eq!(human_size(3 * 1024 * 1024 * 1024), "3.0G");
    }
}
