//! Write a plan (or saved originals) transactionally: every value is read
//! back, and on the first failure everything this run wrote is put back.

use crate::discover::Inventory;
use crate::plan::{Change, Plan, live_value, same_value};
use crate::state::{Locked, Saved, State, StateError};
use crate::sysfs::{Sysfs, is_vanished};
use std::collections::BTreeSet;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(
        "{cause}; rolled back {rolled_back} write(s){}{}",
        rollback_note(.rollback_failures),
        unsaved_note(.unsaved)
    )]
    Failed {
        cause: String,
        rolled_back: usize,
        rollback_failures: Vec<RollbackFailure>,
        /// The state could not be saved after the failure either.
        unsaved: Option<StateError>,
    },
    #[error(transparent)]
    State(#[from] StateError),
}

/// A value this run wrote and could not put back.
#[derive(Debug)]
pub struct RollbackFailure {
    pub path: String,
    pub message: String,
}

fn rollback_note(failures: &[RollbackFailure]) -> String {
    if failures.is_empty() {
        String::new()
    } else {
        let list: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
        format!("; ROLLBACK INCOMPLETE: {}", list.join("; "))
    }
}

fn unsaved_note(unsaved: &Option<StateError>) -> String {
    unsaved
        .as_ref()
        .map(|e| format!("; and the saved state could not be updated: {e}"))
        .unwrap_or_default()
}

/// What a transaction did.
#[derive(Debug, Default)]
pub struct Written {
    pub changes: Vec<Change>,
    /// Paths that vanished (device removed) before they could be written.
    pub vanished: Vec<String>,
    /// Saved originals dropped from the state (put back, or their device gone).
    pub forgotten: usize,
}

/// Write each change, read it back, and undo all of them on any failure.
fn transaction(sysfs: &Sysfs, changes: &[Change]) -> Result<Written, ApplyError> {
    let mut done: Vec<&Change> = Vec::new();
    let mut out = Written::default();
    for c in changes {
        log::debug!("write {} = {} (was {})", c.path, c.after, c.before);
        let failure = match sysfs.write(&c.path, &c.after) {
            Err(e) if is_vanished(&e) => {
                out.vanished.push(c.path.clone());
                continue;
            }
            Err(e) => Some(format!("{}: cannot write {:?}: {e}", c.path, c.after)),
            Ok(()) => {
                done.push(c);
                match sysfs.read(&c.path) {
                    Ok(v) if same_value(&c.path, &v, &c.after) => None,
                    Ok(v) => Some(format!(
                        "{}: wrote {:?} but it reads back {v:?}",
                        c.path, c.after
                    )),
                    Err(e) => Some(format!("{}: cannot read back: {e}", c.path)),
                }
            }
        };
        if let Some(cause) = failure {
            let mut rollback_failures = Vec::new();
            for w in done.iter().rev() {
                log::debug!("roll back {} = {}", w.path, w.before);
                match sysfs.write(&w.path, &w.before) {
                    Ok(()) => {}
                    Err(e) if is_vanished(&e) => {}
                    Err(e) => rollback_failures.push(RollbackFailure {
                        path: w.path.clone(),
                        message: format!("{}: cannot restore {:?}: {e}", w.path, w.before),
                    }),
                }
            }
            return Err(ApplyError::Failed {
                cause,
                rolled_back: done.len() - rollback_failures.len(),
                rollback_failures,
                unsaved: None,
            });
        }
        out.changes.push(c.clone());
    }
    Ok(out)
}

/// Apply a plan. Originals are saved (and persisted) before the first write,
/// so even a crash mid-run leaves `restore` able to undo it.
pub fn apply(sysfs: &Sysfs, locked: &mut Locked, plan: &Plan) -> Result<Written, ApplyError> {
    let changes: Vec<Change> = plan.changes().cloned().collect();
    let mut added = Vec::new();
    let before_state = locked.state.clone();
    for c in &changes {
        match locked.state.saved.get_mut(&c.path) {
            Some(s) => s.owners.extend(c.owners.iter().cloned()),
            None => {
                locked.state.saved.insert(
                    c.path.clone(),
                    Saved {
                        original: c.before.clone(),
                        owners: c.owners.clone(),
                    },
                );
                added.push(c.path.clone());
            }
        }
    }
    for d in &plan.devices {
        match &d.rule {
            Some(r) => locked.state.rules.insert(d.name.clone(), r.clone()),
            None => locked.state.rules.remove(&d.name),
        };
    }
    if !changes.is_empty() || locked.state != before_state {
        locked.save()?;
    }
    match transaction(sysfs, &changes) {
        Ok(w) => {
            let mut forget: Vec<&String> =
                w.vanished.iter().filter(|p| added.contains(p)).collect();
            // A released path now holds its original (or is gone): forget it.
            forget.extend(&plan.released);
            let before = locked.state.clone();
            for p in forget {
                locked.state.saved.remove(p);
            }
            if let Some(gone) = &plan.removed {
                // A removed device serves nothing; what served only it went
                // back above or left with it.
                for s in locked.state.saved.values_mut() {
                    s.owners.remove(gone);
                }
                locked.state.saved.retain(|_, s| !s.owners.is_empty());
                locked.state.rules.remove(gone);
            }
            let mut w = w;
            w.forgotten = before.saved.len() - locked.state.saved.len();
            if locked.state != before {
                locked.save()?;
            }
            Ok(w)
        }
        Err(mut e) => {
            // What could not be rolled back still holds the new value: its
            // original must stay saved for `restore`.
            let mut next = before_state;
            if let ApplyError::Failed {
                rollback_failures, ..
            } = &e
            {
                for f in rollback_failures {
                    if let Some(s) = locked.state.saved.get(&f.path) {
                        next.saved.insert(f.path.clone(), s.clone());
                    }
                }
            }
            locked.state = next;
            if let Err(save) = locked.save()
                && let ApplyError::Failed { unsaved, .. } = &mut e
            {
                *unsaved = Some(save);
            }
            Err(e)
        }
    }
}

/// Put back the saved originals of the given devices (all when empty) and
/// forget them. A per-CPU value shared with devices not being restored stays.
pub fn restore(
    sysfs: &Sysfs,
    locked: &mut Locked,
    inv: &Inventory,
    devices: &[String],
) -> Result<Restored, ApplyError> {
    let (next, mut planned) = plan_restore(sysfs, &locked.state, inv, devices)?;
    let written = transaction(sysfs, &planned.changes)?;
    planned.warnings.extend(
        written
            .vanished
            .iter()
            .map(|p| format!("{p}: vanished; forgetting its saved value")),
    );
    planned.changes = written.changes;
    if next != locked.state {
        locked.state = next;
        locked.save()?;
    }
    Ok(planned)
}

/// What restoring the given devices (all when empty) would write, and the
/// state that remains afterwards; reads only.
pub fn plan_restore(
    sysfs: &Sysfs,
    state: &State,
    inv: &Inventory,
    devices: &[String],
) -> Result<(State, Restored), ApplyError> {
    let scope: Option<BTreeSet<String>> = (!devices.is_empty()).then(|| {
        let mut s: BTreeSet<String> = devices.iter().cloned().collect();
        for d in devices {
            if let Some(dev) = inv.get(d) {
                s.extend(dev.targets.iter().cloned());
            }
        }
        s
    });
    let mut next = state.clone();
    let mut changes = Vec::new();
    let mut warnings = Vec::new();
    for (path, saved) in &state.saved {
        if let Some(s) = &scope {
            if saved.owners.is_disjoint(s) {
                continue;
            }
            let shared_cpu = path.starts_with("devices/system/cpu/") && !saved.owners.is_subset(s);
            if shared_cpu {
                if let Some(e) = next.saved.get_mut(path) {
                    e.owners.retain(|o| !s.contains(o));
                }
                continue;
            }
        }
        next.saved.remove(path);
        match sysfs.read(path) {
            Ok(v) if same_value(path, &v, &saved.original) => {}
            Ok(v) => changes.push(Change {
                path: path.clone(),
                before: live_value(path, &v),
                after: saved.original.clone(),
                owners: saved.owners.clone(),
            }),
            Err(e) if is_vanished(&e) && device_present(sysfs, path) => {
                // Only a device that left takes its original with it.
                warnings.push(format!(
                    "{path}: missing although its device is there; its saved original is kept"
                ));
                next.saved.insert(path.clone(), saved.clone());
            }
            Err(e) if is_vanished(&e) => {
                warnings.push(format!("{path}: gone; forgetting its saved value"))
            }
            Err(e) => {
                return Err(ApplyError::Failed {
                    cause: format!("{path}: cannot read: {e}"),
                    rolled_back: 0,
                    rollback_failures: Vec::new(),
                    unsaved: None,
                });
            }
        }
    }
    match &scope {
        Some(s) => next.rules.retain(|d, _| !s.contains(d)),
        None => next.rules.clear(),
    }
    let forgotten = state.saved.len() - next.saved.len();
    Ok((
        next,
        Restored {
            changes,
            warnings,
            forgotten,
        },
    ))
}

/// Whether the device (disk or CPU) an attribute path belongs to is still
/// in the tree.
fn device_present(sysfs: &Sysfs, path: &str) -> bool {
    let depth = if path.starts_with("devices/system/cpu/") {
        4
    } else {
        2
    };
    let dir: Vec<&str> = path.split('/').take(depth).collect();
    sysfs.exists(&dir.join("/"))
}

pub struct Restored {
    pub changes: Vec<Change>,
    pub warnings: Vec<String>,
    /// Saved values dropped from the state (put back or gone).
    pub forgotten: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn change(path: &str, before: &str, after: &str) -> Change {
        Change {
            path: path.into(),
            before: before.into(),
            after: after.into(),
            owners: BTreeSet::new(),
        }
    }

    #[test]
    fn a_device_removed_between_plan_and_write_is_skipped_not_failed() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("block/a/queue")).unwrap();
        fs::write(dir.path().join("block/a/queue/x"), "-1\n").unwrap();
        let sysfs = Sysfs::new(dir.path());
        let changes = [
            change("block/gone/queue/x", "-1", "5"),
            change("block/a/queue/x", "-1", "5"),
        ];
        let w = transaction(&sysfs, &changes).unwrap();
        assert_eq!(w.vanished, ["block/gone/queue/x"]);
        assert_eq!(w.changes.len(), 1);
        assert_eq!(sysfs.read("block/a/queue/x").unwrap(), "5");
    }

    #[test]
    fn a_failed_write_puts_back_the_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("q")).unwrap();
        fs::write(dir.path().join("q/a"), "-1\n").unwrap();
        std::os::unix::fs::symlink("/dev/full", dir.path().join("q/b")).unwrap();
        let sysfs = Sysfs::new(dir.path());
        let err =
            transaction(&sysfs, &[change("q/a", "-1", "5"), change("q/b", "x", "5")]).unwrap_err();
        assert!(err.to_string().contains("rolled back 1 write"), "{err}");
        assert_eq!(sysfs.read("q/a").unwrap(), "-1");
    }
}
