//! The profile as TOML: the raw tables serde reads, each value checked and
//! turned into the profile's types, with the position of what is wrong.

use super::*;

pub(super) type Fail = (Range<usize>, String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    pub(super) defaults: Option<RawDefaults>,
    #[serde(default)]
    pub(super) rule: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    pub(super) cpu_lat_limit_us: Option<Spanned<Value>>,
    pub(super) cpu_lat_timeout_ms: Option<Spanned<Value>>,
    pub(super) fallback: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) name: Spanned<String>,
    #[serde(rename = "match")]
    pub(super) matcher: Option<RawMatch>,
    pub(super) cpu_lat_limit_us: Option<Spanned<Value>>,
    pub(super) cpu_lat_timeout_ms: Option<Spanned<Value>>,
    pub(super) fallback: Option<Spanned<Value>>,
    pub(super) queue: Option<BTreeMap<String, Spanned<Value>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMatch {
    pub(super) name: Option<Spanned<Value>>,
    pub(super) model: Option<Spanned<Value>>,
    pub(super) serial: Option<Spanned<Value>>,
    pub(super) wwid: Option<Spanned<Value>>,
    pub(super) driver: Option<Spanned<Value>>,
    pub(super) pci: Option<Spanned<Value>>,
    pub(super) transport: Option<Spanned<Value>>,
    pub(super) rotational: Option<bool>,
    pub(super) removable: Option<bool>,
    pub(super) property: Option<BTreeMap<String, Spanned<String>>>,
}

pub(super) fn settings(
    limit: &Option<Spanned<Value>>,
    timeout: &Option<Spanned<Value>>,
    fallback: &Option<Spanned<Value>>,
) -> Result<Settings, Fail> {
    Ok(Settings {
        limit: limit.as_ref().map(parse_limit).transpose()?,
        timeout_ms: timeout.as_ref().map(parse_timeout).transpose()?,
        fallback: fallback.as_ref().map(parse_fallback).transpose()?,
    })
}

/// The error for `rule`, whose name a rule at `first` already has.
pub(super) fn duplicate(first: &Origin, rule: &Rule) -> ProfileError {
    let at = &rule.origin;
    let place = if first.file == at.file {
        format!("on line {}", first.line)
    } else {
        format!("in {} on line {}", first.file.display(), first.line)
    };
    ProfileError::Invalid {
        file: at.file.clone(),
        line: at.line,
        column: at.column,
        message: format!(
            "duplicate rule name {:?} (first named {place}); expected each rule to have its own name",
            rule.name
        ),
    }
}

pub(super) fn rule(r: RawRule, origin: Origin) -> Result<Rule, Fail> {
    let name = r.name.get_ref().trim().to_string();
    if name.is_empty() {
        return Err((
            r.name.span(),
            "rule name must not be empty; expected a name to report it by".into(),
        ));
    }
    let matcher = match r.matcher {
        Some(m) => matcher(m)?,
        None => Matcher::default(),
    };
    let mut queue = Vec::new();
    for (attr, value) in r.queue.unwrap_or_default() {
        if attr.starts_with("cpu_lat_") {
            return Err((
                value.span(),
                format!("set {attr} in the rule itself, not in [rule.queue]"),
            ));
        }
        let text = super::queue::value(&attr, &value)?;
        queue.push((attr, text));
    }
    Ok(Rule {
        name,
        origin,
        matcher,
        settings: settings(&r.cpu_lat_limit_us, &r.cpu_lat_timeout_ms, &r.fallback)?,
        queue,
    })
}

pub(super) fn matcher(m: RawMatch) -> Result<Matcher, Fail> {
    let globs = |v: &Option<Spanned<Value>>, key: &str| -> Result<Option<Globs>, Fail> {
        let Some(v) = v else { return Ok(None) };
        let list = strings(v, key)?;
        Globs::parse(&list)
            .map(Some)
            .map_err(|e| (v.span(), format!("match.{key}: {e}")))
    };
    let transport = match &m.transport {
        None => None,
        Some(v) => {
            let mut out = Vec::new();
            for t in strings(v, "transport")? {
                let parsed = t.parse::<Transport>().map_err(|()| {
                    (
                        v.span(),
                        format!(
                            "match.transport: unknown transport {t:?}, expected one of {}",
                            Transport::NAMES.join(", ")
                        ),
                    )
                })?;
                out.push(parsed);
            }
            Some(out)
        }
    };
    let mut property = Vec::new();
    for (key, re) in m.property.unwrap_or_default() {
        let compiled = Regex::new(re.get_ref()).map_err(|e| {
            (
                re.span(),
                format!(
                    "match.property.{key}: invalid regex: {}; expected a regular expression (Rust regex syntax)",
                    first_line(&e.to_string())
                ),
            )
        })?;
        property.push((key, compiled));
    }
    Ok(Matcher {
        name: globs(&m.name, "name")?,
        model: globs(&m.model, "model")?,
        serial: globs(&m.serial, "serial")?,
        wwid: globs(&m.wwid, "wwid")?,
        driver: globs(&m.driver, "driver")?,
        pci: globs(&m.pci, "pci")?,
        transport,
        rotational: m.rotational,
        removable: m.removable,
        property,
    })
}

/// A string or a non-empty array of strings.
pub(super) fn strings(v: &Spanned<Value>, key: &str) -> Result<Vec<String>, Fail> {
    let expected = || {
        (
            v.span(),
            format!(
                "match.{key}: expected a string or an array of strings, found {}",
                describe(v.get_ref())
            ),
        )
    };
    match v.get_ref() {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(expected))
            .collect(),
        _ => Err(expected()),
    }
}

pub(super) fn parse_limit(v: &Spanned<Value>) -> Result<Limit, Fail> {
    let expected = format!("expected an integer from 0 to {LIMIT_MAX_US}, \"off\" or \"auto\"");
    match v.get_ref() {
        Value::Integer(n) if *n < 0 => Err((
            v.span(),
            format!(
                "cpu_lat_limit_us: {n} is negative; {expected} (use \"off\" for no constraint)"
            ),
        )),
        Value::Integer(n) if *n as u64 > LIMIT_MAX_US => Err((
            v.span(),
            format!("cpu_lat_limit_us: {n} is out of range; {expected}"),
        )),
        Value::Integer(n) => Ok(Limit::Us(*n as u64)),
        Value::String(s) if s == "off" => Ok(Limit::Off),
        Value::String(s) if s == "auto" => Ok(Limit::Auto),
        other => Err((
            v.span(),
            format!("cpu_lat_limit_us: {expected}, found {}", describe(other)),
        )),
    }
}

pub(super) fn parse_timeout(v: &Spanned<Value>) -> Result<u64, Fail> {
    match v.get_ref() {
        Value::Integer(n) if (TIMEOUT_MIN_MS as i64..=TIMEOUT_MAX_MS as i64).contains(n) => {
            Ok(*n as u64)
        }
        other => Err((
            v.span(),
            format!(
                "cpu_lat_timeout_ms: expected an integer from {TIMEOUT_MIN_MS} to {TIMEOUT_MAX_MS} (milliseconds), found {}",
                describe(other)
            ),
        )),
    }
}

pub(super) fn parse_fallback(v: &Spanned<Value>) -> Result<Fallback, Fail> {
    match v.get_ref().as_str() {
        Some("none") => Ok(Fallback::None),
        Some("cpu-resume-latency") => Ok(Fallback::CpuResumeLatency),
        _ => Err((
            v.span(),
            format!(
                "fallback: expected \"none\" or \"cpu-resume-latency\", found {}",
                describe(v.get_ref())
            ),
        )),
    }
}

pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("string {s:?}"),
        Value::Integer(i) => format!("integer {i}"),
        Value::Float(f) => format!("float {f}"),
        Value::Boolean(b) => format!("boolean {b}"),
        Value::Datetime(d) => format!("datetime {d}"),
        Value::Array(_) => "an array".to_string(),
        Value::Table(_) => "a table".to_string(),
    }
}

pub(super) fn first_line(s: &str) -> &str {
    s.lines().last().unwrap_or(s).trim()
}

/// Line starts of a text, for line and column of many offsets in it
/// without counting from the start each time.
pub(super) struct LineIndex<'a> {
    pub(super) text: &'a str,
    /// Byte offset of each '\n'.
    pub(super) newlines: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        let newlines = text
            .bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'\n')
            .map(|(i, _)| i)
            .collect();
        LineIndex { text, newlines }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub(super) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = self.newlines.partition_point(|&n| n < offset);
        let start = if before == 0 {
            0
        } else {
            self.newlines[before - 1] + 1
        };
        // toml's spans fall on character boundaries; if one did not, the
        // column counts the whole characters before it
        let column = self.text.get(start..offset).map_or_else(
            || {
                String::from_utf8_lossy(&self.text.as_bytes()[start..offset])
                    .chars()
                    .count()
            },
            |l| l.chars().count(),
        );
        (before + 1, column + 1)
    }
}
