//! Rule match expressions, evaluated against one discovered device.

use crate::discover::Device;
use crate::transport::Transport;
use globset::{Glob, GlobMatcher};
use regex::Regex;

/// Glob patterns for one key; a leading `!` negates a pattern. A value
/// matches when it matches some positive pattern (or there is none) and no
/// negative one.
#[derive(Debug, Clone)]
pub struct Globs {
    items: Vec<(bool, String, GlobMatcher)>,
}

impl Globs {
    pub fn parse(patterns: &[String]) -> Result<Globs, String> {
        let items = patterns
            .iter()
            .map(|p| {
                let (neg, body) = match p.strip_prefix('!') {
                    Some(rest) => (true, rest),
                    None => (false, p.as_str()),
                };
                if body.is_empty() {
                    return Err(format!(
                        "empty glob pattern {p:?}; expected a glob after the '!'"
                    ));
                }
                let glob =
                    Glob::new(body).map_err(|e| {
                    format!(
                        "invalid glob {p:?}: {}; expected a shell glob (*, ?, [a-z], {{a,b}}), optionally after '!'",
                        e.kind()
                    )
                })?;
                Ok((neg, p.clone(), glob.compile_matcher()))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Globs { items })
    }

    /// Does any of `values` match (negations veto on any value)?
    fn eval(&self, values: &[&str]) -> (bool, String) {
        for (neg, pat, m) in &self.items {
            if *neg && let Some(v) = values.iter().find(|v| m.is_match(v)) {
                return (false, format!("{v:?} is excluded by {pat:?}"));
            }
        }
        let positives: Vec<&(bool, String, GlobMatcher)> =
            self.items.iter().filter(|i| !i.0).collect();
        if positives.is_empty() {
            return (true, format!("{} not excluded", show(values)));
        }
        for (_, pat, m) in &positives {
            if let Some(v) = values.iter().find(|v| m.is_match(v)) {
                return (true, format!("{v:?} matches {pat:?}"));
            }
        }
        let pats: Vec<&str> = positives.iter().map(|p| p.1.as_str()).collect();
        (false, format!("{} does not match {pats:?}", show(values)))
    }
}

fn show(values: &[&str]) -> String {
    match values {
        [] => "(no value)".to_string(),
        [v] => format!("{v:?}"),
        _ => format!("{values:?}"),
    }
}

#[derive(Debug, Clone, Default)]
pub struct Matcher {
    pub name: Option<Globs>,
    pub model: Option<Globs>,
    pub serial: Option<Globs>,
    pub wwid: Option<Globs>,
    pub driver: Option<Globs>,
    pub pci: Option<Globs>,
    pub transport: Option<Vec<Transport>>,
    pub rotational: Option<bool>,
    pub removable: Option<bool>,
    pub property: Vec<(String, Regex)>,
}

impl Matcher {
    /// Whether matching reads a disk's model, serial, WWID or driver.
    pub fn uses_identity(&self) -> bool {
        self.model.is_some()
            || self.serial.is_some()
            || self.wwid.is_some()
            || self.driver.is_some()
    }

    /// Whether matching reads a disk's rotational or removable flag.
    pub fn uses_flags(&self) -> bool {
        self.rotational.is_some() || self.removable.is_some()
    }
}

/// The outcome of one match key, for `explain`.
#[derive(Debug, Clone)]
pub struct Check {
    pub key: String,
    pub ok: bool,
    pub detail: String,
}

impl Matcher {
    pub fn matches(&self, d: &Device) -> bool {
        self.checks(d).iter().all(|c| c.ok)
    }

    pub fn checks(&self, d: &Device) -> Vec<Check> {
        let mut out = Vec::new();
        let mut globs = |key: &str, g: &Option<Globs>, values: Vec<&str>| {
            if let Some(g) = g {
                let (ok, detail) = g.eval(&values);
                out.push(Check {
                    key: key.into(),
                    ok,
                    detail,
                });
            }
        };
        fn opt(v: &Option<String>) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        globs("name", &self.name, vec![d.name.as_str()]);
        globs("model", &self.model, opt(&d.model));
        globs("serial", &self.serial, opt(&d.serial));
        globs("wwid", &self.wwid, opt(&d.wwid));
        globs("driver", &self.driver, opt(&d.driver));
        globs("pci", &self.pci, d.pci.iter().map(String::as_str).collect());
        if let Some(ts) = &self.transport {
            let ok = ts.contains(&d.transport);
            let want: Vec<&str> = ts.iter().map(|t| t.as_str()).collect();
            out.push(Check {
                key: "transport".into(),
                ok,
                detail: format!(
                    "{} {} {want:?}",
                    d.transport,
                    if ok { "in" } else { "not in" }
                ),
            });
        }
        let mut flag = |key: &str, want: Option<bool>, have: bool| {
            if let Some(w) = want {
                out.push(Check {
                    key: key.into(),
                    ok: w == have,
                    detail: format!("is {have}, wants {w}"),
                });
            }
        };
        flag("rotational", self.rotational, d.rotational);
        flag("removable", self.removable, d.removable);
        for (prop, re) in &self.property {
            let (ok, detail) = match d.properties.get(prop) {
                Some(v) if re.is_match(v) => (true, format!("{v:?} matches /{re}/")),
                Some(v) => (false, format!("{v:?} does not match /{re}/")),
                None => (false, "not set (no udev property)".to_string()),
            };
            out.push(Check {
                key: format!("property.{prop}"),
                ok,
                detail,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globs(p: &[&str]) -> Globs {
        Globs::parse(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn negated_globs_veto_and_positives_select() {
        let g = globs(&["nvme*", "!nvme1n1"]);
        assert!(g.eval(&["nvme0n1"]).0);
        assert!(!g.eval(&["nvme1n1"]).0);
        assert!(!g.eval(&["sda"]).0);
        let only_neg = globs(&["!loop*"]);
        assert!(only_neg.eval(&["sda"]).0);
        assert!(!only_neg.eval(&["loop0"]).0);
        assert!(!globs(&["X*"]).eval(&[]).0);
    }

    #[test]
    fn bad_globs_are_rejected() {
        assert!(Globs::parse(&["nvme[".to_string()]).is_err());
        assert!(Globs::parse(&["!".to_string()]).is_err());
    }
}
