//! The TOML profile: parsing and validation. Every error names the file, the
//! line and column, and what was expected; an invalid profile yields no
//! `Profile`, so nothing can be written from it.

use crate::abi::knobs::{LIMIT_MAX_US, TIMEOUT_DEFAULT_MS, TIMEOUT_MAX_MS, TIMEOUT_MIN_MS};
use crate::discover::{Detail, Device};
use crate::matcher::{Globs, Matcher};
use crate::transport::Transport;
use crate::trust;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use toml::{Spanned, Value};

mod queue;
mod raw;
use raw::*;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{}: cannot read profile: {source}{}", file.display(), missing_hint(source))]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: refusing a profile {why}: as root, only a profile that only root can change is applied", file.display())]
    Untrusted { file: PathBuf, why: String },
    #[error("{}:{line}:{column}: {message}", file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// The rule that owns a device, if any: the first whose match holds.
pub fn owning_rule<'p>(profile: &'p Profile, d: &Device) -> Option<&'p Rule> {
    profile.rules.iter().find(|r| r.matcher.matches(d))
}

// Here rather than in discover: what a scan reads depends on the profile,
// and discover knows nothing of profiles.
impl Detail {
    /// What matching the rules of `profile` reads (without one, as for a
    /// restore, neither).
    pub fn for_profile(profile: Option<&Profile>) -> Detail {
        let rules = || profile.into_iter().flat_map(|p| p.rules.iter());
        Detail {
            identity: rules().any(|r| r.matcher.uses_identity()),
            flags: rules().any(|r| r.matcher.uses_flags()),
            queues: false,
        }
    }
}

/// What a first run without a profile is told.
fn missing_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            "; start from the example (config/blkqos.toml in the source, /etc/blkqos/blkqos.toml from the package), check it with `blkqos check FILE`, and name it"
        }
        _ => "",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Limit {
    /// Explicitly unconstrained (-1).
    Off,
    /// States with exit latency <= N us.
    Us(u64),
    /// Chosen from the serving CPUs' idle-state table.
    Auto,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Off => f.write_str("off"),
            Limit::Us(n) => write!(f, "{n} us"),
            Limit::Auto => f.write_str("auto"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fallback {
    None,
    CpuResumeLatency,
}

#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub limit: Option<Limit>,
    pub timeout_ms: Option<u64>,
    pub fallback: Option<Fallback>,
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    /// Where the rule's name is written.
    pub origin: Origin,
    pub matcher: Matcher,
    pub settings: Settings,
    /// Other queue attributes, written as given.
    pub queue: Vec<(String, String)>,
}

/// A place in a profile file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

/// What a rule asks for once the defaults are filled in.
#[derive(Debug, Clone, Copy)]
pub struct Effective {
    pub limit: Option<Limit>,
    pub timeout_ms: u64,
    pub fallback: Fallback,
}

#[derive(Debug, Clone)]
pub struct Profile {
    pub path: PathBuf,
    /// Every file read: the profile, then its drop-ins in the order merged.
    pub files: Vec<PathBuf>,
    pub defaults: Settings,
    pub rules: Vec<Rule>,
}

/// One file's part of a profile: the profile itself or a drop-in.
struct Part {
    path: PathBuf,
    defaults: Settings,
    rules: Vec<Rule>,
    /// Where the file ends: where a missing rule is reported.
    end: Origin,
}

/// Where drop-ins live, beside the profile: `<dir of PROFILE>/blkqos.d`.
pub const DROP_IN_DIR: &str = "blkqos.d";

impl Profile {
    /// Load a profile that is about to be written to the system, or whose
    /// check says whether it would be (`check`, a dry run: the Ansible role
    /// validates with `check` before it deploys): as root, only one that
    /// nobody but root can change, drop-ins included.
    pub fn load_trusted(path: &Path) -> Result<Profile, ProfileError> {
        if trust::euid() == 0 {
            return Profile::load_with(path, open_trusted);
        }
        Profile::load(path)
    }

    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        Profile::load_with(path, |p| {
            trust::open_regular(p, true).map_err(|source| ProfileError::Read {
                file: p.to_path_buf(),
                source,
            })
        })
    }

    /// The profile at `path` and its drop-ins, each opened by `open`.
    fn load_with(
        path: &Path,
        open: impl Fn(&Path) -> Result<File, ProfileError>,
    ) -> Result<Profile, ProfileError> {
        // the bound is on the whole: every drop-in takes from what is left
        let mut left = MAX_PROFILE_BYTES;
        let first = Part::read(path, open(path)?, &mut left)?;
        let drop_ins = (drop_ins(path)?.iter())
            .map(|d| Part::read(d, open(d)?, &mut left))
            .collect::<Result<_, _>>()?;
        let profile = Profile::merge(first, drop_ins)?;
        for note in profile.notes() {
            log::warn!("{note}");
        }
        Ok(profile)
    }

    /// What in a valid profile does nothing: a rule's timeout where
    /// neither it nor `[defaults]` sets a limit (or the limit is off).
    pub fn notes(&self) -> Vec<String> {
        (self.rules.iter())
            .filter(|r| r.settings.timeout_ms.is_some())
            .filter(|r| matches!(self.effective(r).limit, None | Some(Limit::Off)))
            .map(|r| {
                let o = &r.origin;
                format!(
                    "{}:{}:{}: rule {:?}: cpu_lat_timeout_ms does nothing: neither the rule nor [defaults] sets cpu_lat_limit_us (a timeout is how long a limit outlives the last I/O)",
                    o.file.display(),
                    o.line,
                    o.column,
                    r.name
                )
            })
            .collect()
    }

    /// One profile file, without drop-ins.
    pub fn parse(path: &Path, text: &str) -> Result<Profile, ProfileError> {
        Profile::merge(Part::parse(path, text)?, Vec::new())
    }

    /// The parts in order: `[defaults]` key by key, the later part's value
    /// winning; rules appended, each name once across all of them.
    fn merge(first: Part, drop_ins: Vec<Part>) -> Result<Profile, ProfileError> {
        let end = first.end.clone();
        let mut profile = Profile {
            path: first.path.clone(),
            files: Vec::new(),
            defaults: Settings::default(),
            rules: Vec::new(),
        };
        // name -> index in `rules`: one lookup per rule, where scanning
        // the earlier rules made 47,000 rules take 14 s
        let mut seen: HashMap<String, usize> = HashMap::new();
        for part in std::iter::once(first).chain(drop_ins) {
            let d = part.defaults;
            let own = &mut profile.defaults;
            own.limit = d.limit.or(own.limit);
            own.timeout_ms = d.timeout_ms.or(own.timeout_ms);
            own.fallback = d.fallback.or(own.fallback);
            for rule in part.rules {
                if let Some(&first) = seen.get(&rule.name) {
                    return Err(duplicate(&profile.rules[first].origin, &rule));
                }
                seen.insert(rule.name.clone(), profile.rules.len());
                profile.rules.push(rule);
            }
            profile.files.push(part.path);
        }
        if profile.rules.is_empty() {
            // An empty or truncated profile would silently do nothing.
            return Err(ProfileError::Invalid {
                file: end.file,
                line: end.line,
                column: end.column,
                message: "no [[rule]]; expected at least one".to_string(),
            });
        }
        Ok(profile)
    }

    pub fn effective(&self, rule: &Rule) -> Effective {
        Effective {
            limit: rule.settings.limit.or(self.defaults.limit),
            timeout_ms: rule
                .settings
                .timeout_ms
                .or(self.defaults.timeout_ms)
                .unwrap_or(TIMEOUT_DEFAULT_MS),
            fallback: rule
                .settings
                .fallback
                .or(self.defaults.fallback)
                .unwrap_or(Fallback::None),
        }
    }
}

impl Part {
    /// Parse the file `path` from `file`, the one opened (and, as root,
    /// checked) for it.
    fn read(path: &Path, file: File, left: &mut u64) -> Result<Part, ProfileError> {
        let read_err = |source| ProfileError::Read {
            file: path.to_path_buf(),
            source,
        };
        let mut bytes = Vec::new();
        file.take(*left + 1)
            .read_to_end(&mut bytes)
            .map_err(read_err)?;
        let invalid = |valid: &str, message: String| {
            let (line, column) = LineIndex::new(valid).line_col(valid.len());
            ProfileError::Invalid {
                file: path.to_path_buf(),
                line,
                column,
                message,
            }
        };
        if bytes.len() as u64 > *left {
            return Err(invalid(
                "",
                format!(
                    "takes the profile and its drop-ins past {MAX_PROFILE_BYTES} bytes together; expected a smaller profile (globs match many disks with one rule)"
                ),
            ));
        }
        *left -= bytes.len() as u64;
        let text = String::from_utf8(bytes).map_err(|e| {
            // the position of the first byte that is not UTF-8
            let at = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            let valid = String::from_utf8_lossy(&bytes[..at]);
            invalid(
                &valid,
                "not UTF-8 text; expected a TOML profile".to_string(),
            )
        })?;
        Part::parse(path, &text)
    }

    fn parse(path: &Path, text: &str) -> Result<Part, ProfileError> {
        let lines = LineIndex::new(text);
        let origin = |offset: usize| {
            let (line, column) = lines.line_col(offset);
            Origin {
                file: path.to_path_buf(),
                line,
                column,
            }
        };
        let err = |span: Range<usize>, message: String| {
            let at = origin(span.start);
            ProfileError::Invalid {
                file: at.file,
                line: at.line,
                column: at.column,
                message,
            }
        };
        let raw: RawProfile = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().replace('\n', "; ");
            err(e.span().unwrap_or(0..0), with_expectation(message))
        })?;
        let defaults = match raw.defaults {
            Some(d) => settings(&d.cpu_lat_limit_us, &d.cpu_lat_timeout_ms, &d.fallback)
                .map_err(|(s, m)| err(s, m))?,
            None => Settings::default(),
        };
        let rules = (raw.rule.into_iter())
            .map(|r| {
                let at = origin(r.name.span().start);
                rule(r, at).map_err(|(s, m)| err(s, m))
            })
            .collect::<Result<_, _>>()?;
        Ok(Part {
            path: path.to_path_buf(),
            defaults,
            rules,
            end: origin(text.len()),
        })
    }
}

/// The drop-ins of the profile at `path`: `*.toml` in `<its dir>/blkqos.d`
/// in lexical (byte) order, hidden files left out; none when there is no
/// such directory.
fn drop_ins(path: &Path) -> Result<Vec<PathBuf>, ProfileError> {
    use std::os::unix::ffi::OsStrExt;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.join(DROP_IN_DIR),
        _ => PathBuf::from(DROP_IN_DIR),
    };
    let read_err = |source| ProfileError::Read {
        file: dir.clone(),
        source,
    };
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(read_err(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let name = entry.map_err(read_err)?.file_name();
        let bytes = name.as_bytes();
        if bytes.ends_with(b".toml") && !bytes.starts_with(b".") {
            names.push(name);
        }
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// TOML's own messages say what is wrong; add what was expected where they
/// do not.
fn with_expectation(message: String) -> String {
    if message.contains("expected") {
        return message;
    }
    let expected = if message.contains("duplicate key") {
        "each key and each table once"
    } else if let Some(field) = message.strip_prefix("missing field ") {
        return format!("{message}; expected {field} to be set");
    } else if message.contains("recurs") {
        "values nested a few levels deep at most"
    } else {
        "a TOML profile ([defaults] and [[rule]] tables)"
    };
    format!("{message}; expected {expected}")
}

/// A profile is a few dozen lines; megabytes are a mistake or an attack.
/// The profile and its drop-ins together: thousands of rules, parsed by
/// every udev event in a few MB and milliseconds (a 1 MiB one took ~110 MB).
const MAX_PROFILE_BYTES: u64 = 256 * 1024;

/// Run as root, blkqos writes what the profile says: open the profile
/// that someone other than root could have changed (the file, or any
/// directory above it, which would let them replace it; a sticky directory
/// such as /tmp protects root's own files) only to refuse it. Links are
/// followed, as they always were (a profile may be a link into a directory
/// of profiles): what is checked is where they lead, and the file read is
/// the file checked, so a swap after the check changes nothing.
fn open_trusted(path: &Path) -> Result<File, ProfileError> {
    let untrusted = |why: String| ProfileError::Untrusted {
        file: path.to_path_buf(),
        why,
    };
    let read_err = |source| ProfileError::Read {
        file: path.to_path_buf(),
        source,
    };
    let real = std::fs::canonicalize(path).map_err(read_err)?;
    // `real` has no links left: one there now is a swap, refused.
    let file = trust::open_regular(&real, false).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if meta.uid() != 0 {
        return Err(untrusted(format!("owned by uid {}", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted(format!(
            "writable by group or others (mode {:o})",
            meta.mode() & 0o7777
        )));
    }
    let dir = real.parent().unwrap_or(Path::new("/"));
    if let Some(why) = trust::untrusted_ancestors(dir, 0).map_err(read_err)? {
        return Err(untrusted(why));
    }
    // Only root can change those directories, so the file now at `real`
    // stays there; the one opened must be it.
    let now = std::fs::symlink_metadata(&real).map_err(read_err)?;
    if (now.dev(), now.ino()) != (meta.dev(), meta.ino()) {
        return Err(untrusted(format!(
            "replaced while it was opened (now {})",
            real.display()
        )));
    }
    Ok(file)
}

/// The queue attribute names the saved state may name besides the knobs:
/// any name sysfs could have, as `[rule.queue]` took any before it knew
/// each attribute's values, and what such a run saved must still go back.
pub fn is_queue_attr_name(attr: &str) -> bool {
    !attr.is_empty()
        && attr
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Profile, ProfileError> {
        Profile::parse(Path::new("p.toml"), text)
    }

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn a_full_profile_parses() {
        let p = parse(
            r#"
[defaults]
cpu_lat_timeout_ms = 5
fallback = "cpu-resume-latency"

[[rule]]
name = "fast-nvme"
match = { transport = "nvme", model = "SAMSUNG MZQL2*", name = ["nvme*", "!nvme9n1"] }
cpu_lat_limit_us = "auto"

[rule.queue]
read_ahead_kb = 128
scheduler = "none"

[[rule]]
name = "rest"
cpu_lat_limit_us = 0
cpu_lat_timeout_ms = 10
match.property = { ID_BUS = "^ata$" }
"#,
        )
        .unwrap();
        assert_eq!(p.rules.len(), 2);
        let e = p.effective(&p.rules[0]);
        assert_eq!(e.limit, Some(Limit::Auto));
        assert_eq!(e.timeout_ms, 5);
        assert_eq!(e.fallback, Fallback::CpuResumeLatency);
        assert_eq!(
            p.rules[0].queue,
            [
                ("read_ahead_kb".into(), "128".into()),
                ("scheduler".into(), "none".into())
            ]
        );
        assert_eq!(p.effective(&p.rules[1]).limit, Some(Limit::Us(0)));
        assert_eq!(p.effective(&p.rules[1]).timeout_ms, 10);
    }

    #[test]
    fn a_typo_names_the_line_column_and_the_expected_keys() {
        let e = error("[[rule]]\nname = \"a\"\ncpu_lat_limt_us = 10\n");
        assert!(e.starts_with("p.toml:3:1: "), "{e}");
        assert!(
            e.contains("cpu_lat_limt_us") && e.contains("cpu_lat_limit_us"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_are_rejected_with_their_position() {
        let e = error("[[rule]]\nname = \"a\"\ncpu_lat_limit_us = -5\n");
        assert!(
            e.starts_with("p.toml:3:20: ") && e.contains("negative"),
            "{e}"
        );
        let e = error("[[rule]]\nname = \"a\"\ncpu_lat_limit_us = 1000000\n");
        assert!(e.contains("out of range"), "{e}");
        let e = error("[[rule]]\nname = \"a\"\ncpu_lat_limit_us = \"fast\"\n");
        assert!(e.contains("\"off\" or \"auto\""), "{e}");
        let e = error("[[rule]]\nname = \"a\"\ncpu_lat_timeout_ms = 0\n");
        assert!(
            e.starts_with("p.toml:3:22: ") && e.contains("from 1 to"),
            "{e}"
        );
        let e = error("[defaults]\ncpu_lat_timeout_ms = 2.5\n");
        assert!(e.contains("found float 2.5"), "{e}");
        let e = error("[defaults]\nfallback = \"static\"\n");
        assert!(e.contains("cpu-resume-latency"), "{e}");
    }

    #[test]
    fn bad_match_expressions_are_rejected() {
        let e = error("[[rule]]\nname = \"a\"\nmatch = { name = \"nvme[\" }\n");
        assert!(
            e.starts_with("p.toml:3:18: ") && e.contains("invalid glob"),
            "{e}"
        );
        let e = error("[[rule]]\nname = \"a\"\nmatch = { property = { ID_BUS = \"(\" } }\n");
        assert!(e.contains("invalid regex"), "{e}");
        let e = error("[[rule]]\nname = \"a\"\nmatch = { transport = \"firewire\" }\n");
        assert!(
            e.contains("unknown transport") && e.contains("nvme, sata"),
            "{e}"
        );
        let e = error("[[rule]]\nname = \"a\"\nmatch = { rotational = \"yes\" }\n");
        assert!(e.starts_with("p.toml:3:"), "{e}");
        let e = error("[[rule]]\nname = \"a\"\nmatch = { colour = \"red\" }\n");
        assert!(e.contains("colour"), "{e}");
    }

    #[test]
    fn duplicate_and_missing_rule_names_are_rejected() {
        let e = error("[[rule]]\nname = \"a\"\n[[rule]]\nname = \"a\"\n");
        assert!(
            e.starts_with("p.toml:4:8: ") && e.contains("duplicate rule name"),
            "{e}"
        );
        let e = error("[[rule]]\ncpu_lat_limit_us = 3\n");
        assert!(e.contains("name"), "{e}");
    }

    #[test]
    fn a_duplicate_among_fifty_thousand_rules_names_both_lines() {
        let mut text: String = (0..50_000)
            .map(|i| format!("[[rule]]\nname = \"r{i}\"\n"))
            .collect();
        let p = parse(&text).expect("distinct names parse");
        assert_eq!(p.rules.len(), 50_000);
        // rule r17 is rule 18: its name is on line 2 * 18
        text.push_str("[[rule]]\nname = \"r17\"\n");
        let e = error(&text);
        assert!(
            e.starts_with("p.toml:100002:8: ") && e.contains("duplicate rule name \"r17\""),
            "{e}"
        );
        assert!(e.contains("first named on line 36"), "{e}");
    }

    #[test]
    fn queue_attributes_are_checked() {
        let e = error("[[rule]]\nname = \"a\"\n[rule.queue]\ncpu_lat_limit_us = 3\n");
        assert!(e.contains("in the rule itself"), "{e}");
        let e = error("[[rule]]\nname = \"a\"\n[rule.queue]\nread_ahead_kb = [1]\n");
        assert!(
            e.contains("read_ahead_kb: expected a multiple of 4 from 0 to 4294967292"),
            "{e}"
        );
        assert!(e.ends_with("found an array"), "{e}");
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let e = error("[[rule]\nname = \"a\"\n");
        assert!(e.starts_with("p.toml:1:"), "{e}");
    }
}
