//! `udev` (one event) and `coldplug` (every disk at boot): they report
//! through the log, one line per device they changed.

use super::Ctx;
use crate::engine::{Done, Engine, Forget, Job, MediaChange};
use crate::error::{EXIT_FAILED, EXIT_USAGE, Error};
use crate::plan::{Plan, PlanError, Scope};
use crate::profile::Profile;
use crate::uevent::{self, Action};
use std::path::Path;

/// What udev's environment says of the event.
pub struct Env<'a> {
    pub action: Option<&'a str>,
    pub devpath: Option<&'a str>,
    pub diskseq: Option<u64>,
    /// `DISK_MEDIA_CHANGE=1`.
    pub media_change: bool,
}

/// Entry point for `udev`: one event, one disk. Add and change apply the
/// profile to it; remove plans the profile again without it.
pub fn udev(ctx: &Ctx, env: &Env, profile: &Path) -> Result<u8, Error> {
    let event = match uevent::parse(&ctx.sysfs, env.action, env.devpath, env.diskseq) {
        Ok(Some(event)) => event,
        Ok(None) => {
            log::debug!("ignored: partitions are tuned through their disk");
            return Ok(0);
        }
        Err(e) => {
            log::error!("refused event: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let name = &event.name;
    if let Some(gone) = event.earlier
        && the_earlier_disk_is_forgotten_already(ctx, name, gone)?
    {
        return Ok(0);
    }
    let scope = match event.action {
        Action::Add | Action::Change => Scope::devices(std::slice::from_ref(name)),
        Action::Remove => Scope {
            devices: Vec::new(),
            removed: Some(name.clone()),
        },
    };
    if event.action == Action::Remove && !profile.exists() {
        return remove_without_profile(ctx, name, profile);
    }
    // The kernel's word that the disk is the one it was: only for the
    // diskseq the event names, which a disk made since would not have.
    let media_change = match (event.action, env.media_change, env.diskseq) {
        (Action::Change, true, Some(diskseq)) => Some(MediaChange {
            name: name.clone(),
            diskseq,
        }),
        _ => None,
    };
    let engine = Engine {
        media_change,
        ..ctx.engine()
    };
    let result = Profile::load_trusted(profile)
        .map_err(Error::from)
        .and_then(|p| {
            (engine)
                .run(&Job::Apply { profile: &p, scope })
                .map_err(|f| f.error.for_command("udev"))
        })
        .map(|done| {
            let partial = done.partial();
            match event.action {
                Action::Add | Action::Change => log_plan(&with_vanished(done)),
                Action::Remove => log_removal(name, &done),
            }
            partial
        });
    match result {
        Ok(partial) => Ok(if partial { EXIT_FAILED } else { 0 }),
        // A disk that is not a candidate (empty, hidden multipath path, RAM disk).
        Err(Error::Plan(PlanError::NoSuchDevice(_) | PlanError::Partition { .. })) => {
            log::debug!("{name}: not a disk blkqos manages; ignored");
            Ok(0)
        }
        Err(e) => {
            log::error!("{name}: {} failed: {e}", event.action.as_str());
            Ok(e.exit_code())
        }
    }
}

/// A remove with no profile installed (the udev rule runs remove without
/// one): what the removed disk alone held goes back from the state, as
/// `restore` of that disk would; what a disk still tuned shares stays as
/// it is, since without the profile what that disk wants is unknown. A
/// profile that is there but bad is refused instead (nothing changes).
fn remove_without_profile(ctx: &Ctx, name: &str, profile: &Path) -> Result<u8, Error> {
    log::info!(
        "{name}: removed; no profile at {}: putting back what it alone held",
        profile.display()
    );
    // removed: its own entries are forgotten even when they were the last
    let job = Job::Restore {
        scope: Scope {
            devices: vec![name.to_string()],
            removed: Some(name.to_string()),
        },
        forget: Forget::default(),
    };
    match ctx.engine().run(&job) {
        Ok(done) => {
            log_removal(name, &done);
            // its own attributes left with it, which log_removal counts
            let own = format!("block/{name}/");
            for w in done.plan.warnings.iter().filter(|w| !w.starts_with(&own)) {
                log::warn!("{w}");
            }
            Ok(if done.partial() { EXIT_FAILED } else { 0 })
        }
        // never tuned: nothing saved for it
        Err(f) if matches!(f.error, Error::Plan(PlanError::Unknown(_))) => Ok(0),
        Err(f) => {
            let e = f.error.for_command("udev");
            log::error!("{name}: remove failed: {e}");
            Ok(e.exit_code())
        }
    }
}

/// The remove of a disk whose name another disk has now, handled late.
/// Where the saved state is still the earlier disk's (the new disk's add
/// has not run), it is a remove like any other: what the earlier disk held
/// on other disks (an array's members) goes back, and the disk that has
/// the name now is left out of the plan. Where the new disk's add ran, the
/// state is the new disk's already: nothing to do.
fn the_earlier_disk_is_forgotten_already(ctx: &Ctx, name: &str, gone: u64) -> Result<bool, Error> {
    let state = ctx.state.read()?;
    let earlier = state.disks.get(name).and_then(|id| id.diskseq) == Some(gone);
    if earlier {
        log::info!(
            "{name}: removed an earlier disk (diskseq {gone}), another disk has the name now: putting back what the earlier one held"
        );
    } else {
        log::info!(
            "{name}: removed an earlier disk (diskseq {gone}); the disk that has the name now is tuned by its own events: left as it is"
        );
    }
    Ok(!earlier)
}

/// Entry point for `coldplug`: `apply` reporting like the udev path.
pub fn coldplug(ctx: &Ctx, profile: &Path) -> Result<u8, Error> {
    let profile = Profile::load_trusted(profile)?;
    let done = ctx
        .engine()
        .run(&Job::Apply {
            profile: &profile,
            scope: Scope::all(),
        })
        .map_err(|f| f.error.for_command("coldplug"))?;
    let partial = done.partial();
    let plan = with_vanished(done);
    log_plan(&plan);
    log::info!(
        "coldplug: {} disk(s), {} matched a rule, {} value(s) written",
        plan.devices.len(),
        plan.devices.iter().filter(|d| d.rule.is_some()).count(),
        plan.changes().count()
    );
    Ok(if partial { EXIT_FAILED } else { 0 })
}

/// The written plan, with a warning per value whose device went away.
fn with_vanished(done: Done) -> Plan {
    let mut plan = done.plan;
    plan.warnings.extend(
        (done.vanished.iter()).map(|p| format!("{p}: vanished before it was written; skipped")),
    );
    plan
}

/// What re-planning without a removed device wrote: originals put back,
/// values the devices still there want instead.
fn log_removal(name: &str, done: &Done) {
    for c in done.plan.changes() {
        if done.plan.forget.contains(&c.path) {
            log::info!("{name}: removed; put back {} = {}", c.path, c.after);
        } else {
            log::info!("{name}: removed; {} {} -> {}", c.path, c.before, c.after);
        }
    }
    // Its attributes left with it: nothing to report but the count.
    for w in done.plan.warnings.iter().chain(&done.vanished) {
        log::debug!("{w}");
    }
    if done.forgotten > 0 {
        log::info!("{name}: removed; forgot {} saved value(s)", done.forgotten);
    }
}

/// One line per device: what was written, under which rule.
fn log_plan(plan: &Plan) {
    for d in &plan.devices {
        let rule = match &d.rule {
            Some(r) => format!("rule {r:?}"),
            None => "no rule".to_string(),
        };
        if d.changes.is_empty() {
            log::debug!("{}: {rule}: already as wanted", d.name);
            continue;
        }
        let own = format!("block/{}/", d.name);
        let writes: Vec<String> = (d.changes.iter())
            .map(|c| {
                let path = c.path.strip_prefix(&own).unwrap_or(&c.path);
                format!("{path} {} -> {}", c.before, c.after)
            })
            .collect();
        log::info!("{}: {rule}: {}", d.name, writes.join(", "));
    }
    for w in &plan.warnings {
        log::warn!("{w}");
    }
}
