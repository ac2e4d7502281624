//! `apply`: write what the profile wants, or show it (`--dry-run`).

use super::{Ctx, doc, kernel_names};
use crate::engine::{Failed, Job};
use crate::error::{EXIT_FAILED, Error};
use crate::plan::{Change, DevicePlan, Plan, Scope};
use crate::profile::Profile;
use crate::report::{Style, Unreadable, escape_control, table, warn_all};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One change in the JSON document.
#[derive(Serialize)]
pub struct ChangeOut<'a> {
    pub path: &'a str,
    pub before: &'a str,
    pub after: &'a str,
}

impl<'a> From<&'a Change> for ChangeOut<'a> {
    fn from(c: &'a Change) -> Self {
        ChangeOut {
            path: &c.path,
            before: &c.before,
            after: &c.after,
        }
    }
}

/// A requested limit in the JSON document: how it was given ("us",
/// "auto", "off") and the microseconds it comes to (for "auto", the
/// strictest over the targets; null for "off").
#[derive(Serialize)]
pub struct LimitOut {
    pub mode: &'static str,
    pub us: Option<u64>,
}

/// What "auto" chose on one target.
#[derive(Serialize)]
pub struct AutoOut<'a> {
    pub target: &'a str,
    pub us: u64,
    pub why: &'a str,
}

/// One device of a plan in the JSON document.
#[derive(Serialize)]
pub struct DeviceOut<'a> {
    pub name: &'a str,
    pub rule: Option<&'a str>,
    pub targets: &'a [String],
    pub backend: &'a BTreeMap<String, String>,
    pub limit: Option<LimitOut>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto: Vec<AutoOut<'a>>,
    pub timeout_ms: Option<u64>,
    pub changes: Vec<ChangeOut<'a>>,
}

impl<'a> From<&'a DevicePlan> for DeviceOut<'a> {
    fn from(d: &'a DevicePlan) -> Self {
        DeviceOut {
            name: &d.name,
            rule: d.rule.as_deref(),
            targets: &d.targets,
            backend: &d.backend,
            limit: d.limit.map(|l| LimitOut {
                mode: l.mode.as_str(),
                us: l.us,
            }),
            auto: (d.auto.iter())
                .map(|a| AutoOut {
                    target: &a.target,
                    us: a.us,
                    why: &a.why,
                })
                .collect(),
            timeout_ms: d.timeout_ms,
            changes: d.changes.iter().map(ChangeOut::from).collect(),
        }
    }
}

pub fn apply(
    ctx: &Ctx,
    profile: &Path,
    dry_run: bool,
    json: bool,
    devices: &[String],
    out: &mut String,
) -> Result<u8, Error> {
    let devices = kernel_names(devices)?;
    let scope = Scope::devices(&devices);
    if dry_run {
        let profile = Profile::load_trusted(profile)?;
        let preview = ctx.engine().preview(&Job::Apply {
            profile: &profile,
            scope,
        })?;
        emit_plan(
            ctx.style,
            &preview.plan,
            true,
            json,
            &preview.unreadable,
            &profile,
            out,
        );
        return Ok(if preview.plan.unread.is_empty() {
            0
        } else {
            EXIT_FAILED
        });
    }
    // Validated before taking the lock: a bad profile must not touch the state dir.
    let profile = Profile::load_trusted(profile)?;
    match ctx.engine().run(&Job::Apply {
        profile: &profile,
        scope,
    }) {
        Ok(done) => {
            let partial = done.partial();
            let mut plan = done.plan;
            plan.warnings.extend(
                (done.vanished.iter())
                    .map(|p| format!("{p}: vanished before it was written; skipped")),
            );
            emit_plan(ctx.style, &plan, false, json, &[], &profile, out);
            Ok(if partial { EXIT_FAILED } else { 0 })
        }
        Err(failed) => {
            let Failed { error, plan } = *failed;
            if json && let Some(plan) = plan {
                // nothing of it stays written
                let devices: Vec<DeviceOut> = (plan.devices.iter())
                    .map(|d| DeviceOut {
                        changes: Vec::new(),
                        ..DeviceOut::from(d)
                    })
                    .collect();
                let mut d = doc(
                    "apply",
                    false,
                    false,
                    &devices,
                    &plan.warnings,
                    &[],
                    Some(&error),
                );
                d.files = super::file_names(&profile);
                out.push_str(&d.render());
            }
            Err(error)
        }
    }
}

fn emit_plan(
    style: Style,
    plan: &Plan,
    dry_run: bool,
    json: bool,
    unreadable: &[Unreadable],
    profile: &Profile,
    out: &mut String,
) {
    if json {
        let devices: Vec<DeviceOut> = plan.devices.iter().map(DeviceOut::from).collect();
        let mut d = doc(
            "apply",
            !plan.is_empty(),
            dry_run,
            &devices,
            &plan.warnings,
            unreadable,
            None,
        );
        d.files = super::file_names(profile);
        out.push_str(&d.render());
        return;
    }
    out.push_str(&plan_table(style, plan));
    let n = plan.changes().count();
    let verb = match (dry_run, n) {
        (_, 0) => "nothing to change".to_string(),
        (true, _) => format!("{n} change(s) would be made (dry run; nothing written)"),
        (false, _) => format!("{n} change(s) made"),
    };
    let _ = writeln!(out, "{verb}");
    warn_all(&plan.warnings);
}

fn plan_table(style: Style, plan: &Plan) -> String {
    let mut rows = Vec::new();
    let mut untouched = Vec::new();
    for d in &plan.devices {
        let rule = match d.rule.as_deref() {
            Some(rule) => rule,
            None if d.changes.is_empty() => {
                untouched.push(d.name.as_str());
                continue;
            }
            // no rule now: what blkqos wrote for it goes back
            None => "(none: put back)",
        };
        let rule = rule.to_string();
        let limit = d.limit_text().unwrap_or_else(|| "-".into());
        if d.changes.is_empty() {
            rows.push(vec![
                d.name.clone(),
                rule.clone(),
                limit.clone(),
                "(no change)".to_string(),
                String::new(),
                String::new(),
            ]);
        }
        for c in &d.changes {
            rows.push(vec![
                d.name.clone(),
                rule.clone(),
                limit.clone(),
                c.path.clone(),
                c.before.clone(),
                c.after.clone(),
            ]);
        }
    }
    // no header over nothing: what is left out is said below
    let mut out = if rows.is_empty() {
        String::new()
    } else {
        table(
            style,
            &["DEVICE", "RULE", "LIMIT", "PATH", "BEFORE", "AFTER"],
            &rows,
        )
    };
    // a big host has thousands: counted, a few named, all with -v
    const NAMED: usize = 8;
    if !untouched.is_empty() {
        let n = untouched.len();
        let names = if n <= NAMED || log::log_enabled!(log::Level::Debug) {
            escape_control(&untouched.join(", ")).into_owned()
        } else {
            format!(
                "{}, ... (-v lists them)",
                escape_control(&untouched[..NAMED].join(", "))
            )
        };
        out.push_str(&format!(
            "no rule matches {n} disk(s) (untouched): {names}\n"
        ));
    }
    out
}
