//! `explain`: which rule matches a device and why, which queues it
//! resolves to, and what applying the profile would write there.

use super::{Ctx, kernel_name};
use crate::abi::Abi;
use crate::discover::{self, Detail, Extent};
use crate::engine::Job;
use crate::error::Error;
use crate::idle::format_cpus;
use crate::plan::{Change, PlanError, Scope};
use crate::profile::Profile;
use crate::report::{escape_control, warn_all};
use std::fmt::Write as _;
use std::path::Path;

pub fn explain(
    ctx: &Ctx,
    profile_path: &Path,
    device: &str,
    out: &mut String,
) -> Result<u8, Error> {
    let profile = Profile::load(profile_path)?;
    let device = &kernel_name(device)?;
    let only = [device.to_string()];
    // every disk: the warnings are the machine's, as `apply` shows them
    let inv = discover::scan(&ctx.sysfs, Extent::All, Detail::FULL)?;
    let d = inv
        .get(device)
        .ok_or_else(|| PlanError::NoSuchDevice(device.to_string()))?
        .clone();
    let st = ctx.style;
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
        return Ok(0);
    }
    let mut owner = None;
    for rule in &profile.rules {
        if owner.is_some() {
            let _ = writeln!(
                out,
                "rule {:?}: {}",
                rule.name,
                st.dim("not evaluated (an earlier rule owns the device)")
            );
            continue;
        }
        let checks = rule.matcher.checks(&d);
        let ok = checks.iter().all(|c| c.ok);
        let _ = writeln!(
            out,
            "rule {:?}: {}",
            rule.name,
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
            owner = Some(rule);
        }
    }
    let targets: Vec<String> = (d.targets.iter())
        .map(|t| {
            let abi = inv.get(t).map_or(Abi::None, |x| x.abi);
            let cpus = inv.get(t).map(|x| format_cpus(&x.cpus)).unwrap_or_default();
            format!(
                "{t} (knobs: {}, cpus {})",
                abi.describe(),
                if cpus.is_empty() { "-" } else { &cpus }
            )
        })
        .collect();
    let _ = writeln!(out, "resolves to: {}", targets.join(", "));
    let Some(rule) = owner else {
        let _ = writeln!(out, "no rule matches: the device is left untouched");
        return Ok(0);
    };
    let plan = ctx
        .engine()
        .preview_on(
            inv,
            &Job::Apply {
                profile: &profile,
                scope: Scope::devices(&only),
            },
        )?
        .plan;
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
            let _ = writeln!(out, "    {t}: {b}");
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
    let changes: Vec<&Change> = plan.changes().collect();
    if changes.is_empty() {
        let _ = writeln!(out, "live values already match");
    }
    for c in changes {
        let _ = writeln!(out, "would write {}: {} -> {}", c.path, c.before, c.after);
    }
    warn_all(&plan.warnings);
    Ok(0)
}

/// A hardware string as one safe line, `-` when there is none.
fn shown(v: &Option<String>) -> String {
    v.as_deref()
        .map_or_else(|| "-".to_string(), |s| escape_control(s).into_owned())
}
