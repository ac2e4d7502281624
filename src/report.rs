//! Output: the versioned JSON document and the human tables.

use serde::Serialize;
use std::borrow::Cow;
use std::io::IsTerminal;

/// Bumped only on incompatible changes to the JSON documents.
pub const JSON_SCHEMA: u32 = 3;

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
    /// The error's message, when the command failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What kind of error, and where in which file, when the command failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// The profile files read (the profile, then its drop-ins), for a
    /// command that reads a profile.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// A failed command's error in the JSON document.
#[derive(Serialize)]
pub struct Failure {
    pub kind: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
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
    /// No colour: text that is not printed straight to the terminal (a
    /// file, a test).
    pub const fn plain() -> Style {
        Style { color: false }
    }

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
    // Every cell escaped here, once for every command: a disk's name (an
    // md array's, a virtual disk's) is its creator's choice. Escaping is
    // idempotent, so a cell escaped already is left as it is.
    let rows: Vec<Vec<String>> = (rows.iter())
        .map(|r| r.iter().map(|c| escape_control(c).into_owned()).collect())
        .collect();
    let rows = &rows;
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

/// A string from outside (hardware identity, sysfs, an error) made safe to
/// print as one line of text: control characters (a newline, an escape
/// sequence from a USB or SCSI INQUIRY string) and the bidirectional
/// overrides that reorder what a terminal shows are written as escapes.
pub fn escape_control(s: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
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

/// Warnings go to stderr with the other messages (`-q` silences them):
/// stdout holds only what the command prints, a table or one JSON document.
pub fn warn_all(list: &[String]) {
    for w in list {
        log::warn!("{w}");
    }
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

    #[test]
    fn control_characters_are_escaped_and_plain_text_borrowed() {
        assert!(matches!(escape_control("SAMSUNG MZQL2"), Cow::Borrowed(_)));
        assert_eq!(
            escape_control("a\x1b[2J\nb\t\u{7f}\u{202e}c"),
            r"a\x1b[2J\nb\t\x7f\u{202e}c"
        );
    }
}
