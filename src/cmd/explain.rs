//! `explain`: which rule matches a device and why, which queues it
//! resolves to, and what applying the profile would write there.

use super::apply::{ChangeOut, DeviceOut};
use super::{Ctx, doc, kernel_name};
use crate::abi::Abi;
use crate::discover::{self, Detail, Device, Extent};
use crate::engine::Job;
use crate::error::Error;
use crate::idle::format_cpus;
use crate::matcher::Check;
use crate::plan::{self, Plan, Scope};
use crate::profile::{Effective, Fallback, Limit, Profile};
use crate::report::{Style, escape_control, warn_all};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// How one rule fared against the device.
#[derive(Serialize)]
struct RuleOut<'a> {
    name: &'a str,
    /// "match", "no-match", or "not-evaluated" (an earlier rule owns it).
    result: &'static str,
    checks: Vec<CheckOut<'a>>,
}

#[derive(Serialize)]
struct CheckOut<'a> {
    key: &'a str,
    ok: bool,
    detail: &'a str,
}

/// A queue the device's I/O lands on.
#[derive(Serialize)]
struct TargetOut<'a> {
    name: &'a str,
    abi: &'static str,
    cpus: &'a [u32],
}

/// The device explained, in the JSON document.
#[derive(Serialize)]
struct Explained<'a> {
    name: &'a str,
    kind: &'a str,
    transport: &'a str,
    model: Option<&'a str>,
    serial: Option<&'a str>,
    wwid: Option<&'a str>,
    driver: Option<&'a str>,
    pci: &'a [String],
    excluded: Option<&'a str>,
    rules: Vec<RuleOut<'a>>,
    targets: Vec<TargetOut<'a>>,
    /// The rule that owns the device, if any.
    rule: Option<&'a str>,
    /// What the owning rule asks for on it (null: no rule, or excluded).
    plan: Option<DeviceOut<'a>>,
    /// Every write applying the profile to this device would make.
    changes: Vec<ChangeOut<'a>>,
}

pub fn explain(
    ctx: &Ctx,
    profile_path: &Path,
    device: &str,
    json: bool,
    out: &mut String,
) -> Result<u8, Error> {
    let profile = Profile::load(profile_path)?;
    let device = &kernel_name(device)?;
    let only = [device.to_string()];
    // every disk: the warnings are the machine's, as `apply` shows them
    let inv = discover::scan(&ctx.sysfs, Extent::All, Detail::FULL)?;
    let d = inv
        .get(device)
        .ok_or_else(|| plan::no_such_device(&inv, device))?
        .clone();
    let checks: Vec<(&str, Option<Vec<Check>>)> = if d.excluded.is_some() {
        Vec::new()
    } else {
        let mut owned = false;
        (profile.rules.iter())
            .map(|rule| {
                if owned {
                    return (rule.name.as_str(), None);
                }
                let checks = rule.matcher.checks(&d);
                owned = checks.iter().all(|c| c.ok);
                (rule.name.as_str(), Some(checks))
            })
            .collect()
    };
    let owner = (checks.iter())
        .find(|(_, c)| c.as_ref().is_some_and(|c| c.iter().all(|c| c.ok)))
        .map(|(name, _)| *name);
    let targets: Vec<(String, Abi, Vec<u32>)> = (d.targets.iter())
        .map(|t| {
            let x = inv.get(t);
            (
                t.clone(),
                x.map_or(Abi::None, |x| x.abi),
                x.map(|x| x.cpus.clone()).unwrap_or_default(),
            )
        })
        .collect();
    let plan = match owner {
        Some(_) => {
            let job = Job::Apply {
                profile: &profile,
                scope: Scope::devices(&only),
            };
            Some(ctx.engine().preview_on(inv, &job)?.plan)
        }
        None => None,
    };
    if json {
        let explained = Explained {
            name: &d.name,
            kind: d.kind.as_str(),
            transport: d.transport.as_str(),
            model: d.model.as_deref(),
            serial: d.serial.as_deref(),
            wwid: d.wwid.as_deref(),
            driver: d.driver.as_deref(),
            pci: &d.pci,
            excluded: d.excluded.as_deref(),
            rules: (checks.iter())
                .map(|(name, checks)| RuleOut {
                    name,
                    result: match checks {
                        None => "not-evaluated",
                        Some(c) if c.iter().all(|c| c.ok) => "match",
                        Some(_) => "no-match",
                    },
                    checks: (checks.iter().flatten())
                        .map(|c| CheckOut {
                            key: &c.key,
                            ok: c.ok,
                            detail: &c.detail,
                        })
                        .collect(),
                })
                .collect(),
            targets: (targets.iter())
                .map(|(name, abi, cpus)| TargetOut {
                    name,
                    abi: abi.describe(),
                    cpus,
                })
                .collect(),
            rule: owner,
            plan: (plan.iter())
                .flat_map(|p| p.devices.iter())
                .find(|p| p.name == d.name)
                .map(DeviceOut::from),
            changes: (plan.iter())
                .flat_map(Plan::changes)
                .map(ChangeOut::from)
                .collect(),
        };
        let warnings = plan.as_ref().map_or(&[][..], |p| &p.warnings[..]);
        let mut document = doc("explain", false, false, [explained], warnings, &[], None);
        document.files = super::file_names(&profile);
        out.push_str(&document.render());
        return Ok(0);
    }
    text(
        ctx.style,
        &profile,
        &d,
        &checks,
        &targets,
        plan.as_ref(),
        out,
    );
    if let Some(plan) = &plan {
        warn_all(&plan.warnings);
    }
    Ok(0)
}

fn text(
    st: Style,
    profile: &Profile,
    d: &Device,
    checks: &[(&str, Option<Vec<Check>>)],
    targets: &[(String, Abi, Vec<u32>)],
    plan: Option<&Plan>,
    out: &mut String,
) {
    let _ = writeln!(
        out,
        "{} {} ({}, transport {}, model {}, serial {}, wwid {}, driver {}, pci {})",
        st.bold("device"),
        d.name,
        d.kind.as_str(),
        d.transport,
        shown(&d.model),
        shown(&d.serial),
        shown(&d.wwid),
        shown(&d.driver),
        if d.pci.is_empty() {
            "-".into()
        } else {
            escape_control(&d.pci.join(",")).into_owned()
        },
    );
    let files: Vec<String> = (profile.files.iter())
        .map(|f| escape_control(&f.display().to_string()).into_owned())
        .collect();
    let _ = writeln!(out, "{} {}", st.bold("profile"), files.join(", "));
    if let Some(why) = &d.excluded {
        let _ = writeln!(out, "not matched by any rule: excluded ({why})");
        return;
    }
    let mut owner = None;
    for (name, checks) in checks {
        let Some(checks) = checks else {
            let _ = writeln!(
                out,
                "rule {name:?}: {}",
                st.dim("not evaluated (an earlier rule owns the device)")
            );
            continue;
        };
        let ok = checks.iter().all(|c| c.ok);
        let _ = writeln!(
            out,
            "rule {name:?}: {}",
            if ok {
                st.good("MATCH")
            } else {
                st.bad("no match")
            }
        );
        if checks.is_empty() {
            let _ = writeln!(out, "    (no match keys: matches every device)");
        }
        for c in checks {
            let _ = writeln!(
                out,
                "    {} {}: {}",
                if c.ok { "+" } else { "-" },
                c.key,
                c.detail
            );
        }
        if ok {
            owner = profile.rules.iter().find(|r| r.name == *name);
        }
    }
    let shown_targets: Vec<String> = (targets.iter())
        .map(|(t, abi, cpus)| {
            let cpus = format_cpus(cpus);
            format!(
                "{t} (knobs: {}, cpus {})",
                abi.describe(),
                if cpus.is_empty() { "-" } else { &cpus }
            )
        })
        .collect();
    let _ = writeln!(out, "resolves to: {}", shown_targets.join(", "));
    let (Some(rule), Some(plan)) = (owner, plan) else {
        let _ = writeln!(out, "no rule matches: the device is left untouched");
        return;
    };
    if let Some(dp) = plan.devices.iter().find(|p| p.name == d.name) {
        let eff = profile.effective(rule);
        let _ = writeln!(
            out,
            "owned by rule {:?}: limit {}, timeout {}",
            rule.name,
            dp.limit_text().as_deref().unwrap_or("not managed"),
            dp.timeout_ms.map_or("-".to_string(), |t| format!("{t} ms")),
        );
        for (t, b) in &dp.backend {
            let knobs = targets
                .iter()
                .find(|(n, ..)| n == t)
                .map(|(_, abi, _)| *abi);
            let _ = writeln!(out, "    {t}: {b}{}", lease_note(knobs, &eff));
        }
        for a in &dp.auto {
            let _ = writeln!(out, "    auto on {}", a.describe());
        }
        if eff.limit.is_none() {
            let _ = writeln!(
                out,
                "    (the rule sets no limit: only its queue attributes are managed)"
            );
        }
    }
    let changes: Vec<_> = plan.changes().collect();
    if changes.is_empty() {
        let _ = writeln!(out, "live values already match");
    }
    for c in changes {
        let _ = writeln!(out, "would write {}: {} -> {}", c.path, c.before, c.after);
    }
}

/// What `blkqos lease` does for a target of this rule's, where the kernel
/// has no knobs for it: the text after its backend.
fn lease_note(knobs: Option<Abi>, eff: &Effective) -> String {
    let held = !matches!(eff.limit, None | Some(Limit::Off));
    match (knobs, eff.fallback) {
        (Some(Abi::None), Fallback::None) if held => format!(
            " (no knobs): `blkqos lease` (blkqos-lease.service) holds its CPUs from user space while the disk has I/O, released {} ms after the last; see blkqos-lease(8)",
            eff.timeout_ms
        ),
        (Some(Abi::None), Fallback::CpuResumeLatency) if held => "; `blkqos lease` leaves it to the static fallback; without the fallback it would hold the CPUs only while the disk has I/O".to_string(),
        _ => String::new(),
    }
}

/// A hardware string as one safe line, `-` when there is none.
fn shown(v: &Option<String>) -> String {
    v.as_deref()
        .map_or_else(|| "-".to_string(), |s| escape_control(s).into_owned())
}
