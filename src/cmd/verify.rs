//! `verify`: live values against what a profile wants.

use super::apply::DeviceOut;
use super::{Ctx, doc};
use crate::engine::Job;
use crate::error::{EXIT_FAILED, Error};
use crate::plan::Scope;
use crate::profile::Profile;
use crate::report::{escape_control, table, warn_all};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

#[derive(Serialize)]
struct Verified<'a> {
    #[serde(flatten)]
    device: DeviceOut<'a>,
    ok: bool,
}

pub fn verify(ctx: &Ctx, profile: &Path, json: bool, out: &mut String) -> Result<u8, Error> {
    let profile_path = profile;
    let profile = Profile::load(profile)?;
    let preview = ctx.engine().preview(&Job::Apply {
        profile: &profile,
        scope: Scope::all(),
    })?;
    let plan = preview.plan;
    // an entry left out of the state is a value verify cannot judge
    if plan.distrusted > 0 {
        return Err(Error::from(crate::state::StateError::Distrusted {
            path: ctx.state.file(),
            count: plan.distrusted,
        }));
    }
    // nor one it could not read
    if let Some((path, reason)) = plan.unread.first() {
        return Err(Error::Plan(crate::plan::PlanError::Read {
            path: path.clone(),
            reason: reason.clone(),
        }));
    }
    let ok = plan.is_empty();
    let shown = escape_control(&profile_path.display().to_string()).into_owned();
    if json {
        let devices: Vec<Verified> = (plan.devices.iter())
            .map(|d| Verified {
                device: DeviceOut::from(d),
                ok: d.changes.is_empty(),
            })
            .collect();
        let mut d = doc(
            "verify",
            false,
            false,
            &devices,
            &plan.warnings,
            &preview.unreadable,
            None,
        );
        d.files = super::file_names(&profile);
        out.push_str(&d.render());
    } else {
        let rows: Vec<Vec<String>> = plan
            .changes()
            .map(|c| vec![c.path.clone(), c.before.clone(), c.after.clone()])
            .collect();
        if ok {
            let _ = writeln!(out, "{} live values match {}", ctx.style.good("ok:"), shown);
        } else {
            out.push_str(&table(ctx.style, &["PATH", "LIVE", "WANTED"], &rows));
            let _ = writeln!(
                out,
                "{} {} value(s) differ from {}",
                ctx.style.bad("mismatch:"),
                rows.len(),
                shown
            );
        }
        warn_all(&plan.warnings);
    }
    Ok(if ok { 0 } else { EXIT_FAILED })
}
