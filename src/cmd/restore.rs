//! `restore`: put back the originals saved by apply.

use super::apply::ChangeOut;
use super::{Ctx, doc, kernel_names};
use crate::engine::{Forget, Job};
use crate::error::{EXIT_FAILED, Error};
use crate::plan::{Plan, Scope};
use crate::report::{table, warn_all};
use serde::Serialize;
use std::fmt::Write as _;

/// What `restore` put back for one device, in the JSON document.
#[derive(Serialize)]
struct Restored<'a> {
    name: &'a str,
    rule: Option<&'a str>,
    changes: Vec<ChangeOut<'a>>,
}

pub fn restore(
    ctx: &Ctx,
    dry_run: bool,
    json: bool,
    devices: &[String],
    forget: Forget,
    out: &mut String,
) -> Result<u8, Error> {
    let devices = kernel_names(devices)?;
    let job = Job::Restore {
        scope: Scope::devices(&devices),
        forget,
    };
    let mut left = super::lease::LeftPutBack::default();
    // a partial restore (entries left out as untrusted, the state not
    // saved after the writes) exits 1
    let (mut plan, forgotten, partial): (Plan, usize, bool) = if dry_run {
        let plan = ctx.engine().preview(&job)?.plan;
        let n = plan.forget.len();
        let partial = plan.partial();
        (plan, n, partial)
    } else {
        let done = ctx.engine().run(&job).map_err(|f| f.error)?;
        let partial = done.partial();
        let mut plan = done.plan;
        plan.warnings.extend(
            (done.vanished.iter()).map(|p| format!("{p}: vanished; forgetting its saved value")),
        );
        (plan, done.forgotten, partial)
    };
    let code = if partial { EXIT_FAILED } else { 0 };
    if devices.is_empty() {
        // what a killed `blkqos lease` left on the CPUs
        left = super::lease::put_back_left(ctx, dry_run)?;
        plan.warnings.append(&mut left.warnings);
    }
    let mut devices: Vec<Restored> = (plan.devices.iter())
        .filter(|d| !d.changes.is_empty())
        .map(|d| Restored {
            name: &d.name,
            rule: d.rule.as_deref(),
            changes: d.changes.iter().map(ChangeOut::from).collect(),
        })
        .collect();
    if !left.restored.is_empty() {
        devices.push(Restored {
            name: "blkqos lease",
            rule: None,
            changes: (left.restored.iter())
                .map(|(path, before, after)| ChangeOut {
                    path,
                    before,
                    after,
                })
                .collect(),
        });
    }
    // Forgetting saved values that already match changes the state file.
    let changed = !devices.is_empty() || forgotten > 0;
    if json {
        out.push_str(
            &doc(
                "restore",
                changed,
                dry_run,
                &devices,
                &plan.warnings,
                &[],
                None,
            )
            .render(),
        );
        return Ok(code);
    }
    let rows: Vec<Vec<String>> = (devices.iter())
        .flat_map(|d| {
            (d.changes.iter()).map(|c| {
                vec![
                    d.name.to_string(),
                    c.path.to_string(),
                    c.before.to_string(),
                    c.after.to_string(),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "nothing to restore");
    } else {
        let head = if dry_run { "WOULD RESTORE" } else { "RESTORED" };
        out.push_str(&table(
            ctx.style,
            &["DEVICE", "PATH", "BEFORE", head],
            &rows,
        ));
    }
    warn_all(&plan.warnings);
    Ok(code)
}
