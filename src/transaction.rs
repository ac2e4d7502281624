//! Write a plan transactionally: every value is read back, and on the first
//! failure everything this run wrote is put back.

use crate::plan::{Change, Plan, same_value};
use crate::state::{Locked, Saved, StateError};
use crate::sysfs::{Sysfs, is_vanished};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
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
fn transaction(sysfs: &Sysfs, changes: &[Change]) -> Result<Written, WriteError> {
    let mut done: Vec<&Change> = Vec::new();
    let mut out = Written::default();
    for c in changes {
        log::debug!("write {} = {} (was {})", c.path, c.after, c.before);
        let failure = match sysfs.write_and_read_back(&c.path, &c.after) {
            Err(e) if is_vanished(&e) => {
                out.vanished.push(c.path.clone());
                continue;
            }
            Err(e) => Some(format!("{}: cannot write {:?}: {e}", c.path, c.after)),
            Ok(read_back) => {
                done.push(c);
                match read_back {
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
            return Err(WriteError::Failed {
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

/// Write a plan. Originals are saved (and persisted) before the first
/// write, so even a crash mid-run leaves `restore` able to undo it; once
/// written, the plan's edits to the saved state are made and saved.
pub fn write(sysfs: &Sysfs, locked: &mut Locked, plan: &Plan) -> Result<Written, WriteError> {
    let changes: Vec<Change> = plan.changes().cloned().collect();
    let mut added = Vec::new();
    let before_state = locked.state.clone();
    for c in &changes {
        match locked.state.saved.get_mut(&c.path) {
            Some(s) => s.owners.extend(c.contributors.iter().cloned()),
            None => {
                locked.state.saved.insert(
                    c.path.clone(),
                    Saved {
                        original: c.before.clone(),
                        owners: c.contributors.clone(),
                    },
                );
                added.push(c.path.clone());
            }
        }
    }
    if plan.forget_all_rules {
        locked.state.rules.clear();
    }
    for (device, rule) in &plan.rules {
        match rule {
            Some(r) => locked.state.rules.insert(device.clone(), r.clone()),
            None => locked.state.rules.remove(device),
        };
    }
    if !changes.is_empty() || locked.state != before_state {
        locked.save()?;
    }
    match transaction(sysfs, &changes) {
        Ok(mut w) => {
            let written = locked.state.clone();
            // What vanished before this run saved anything for it is not ours.
            let forget = (w.vanished.iter())
                .filter(|p| added.contains(p))
                .chain(&plan.forget);
            for p in forget {
                locked.state.saved.remove(p);
            }
            for s in locked.state.saved.values_mut() {
                s.owners.retain(|o| !plan.disown.contains(o));
            }
            w.forgotten = written.saved.len() - locked.state.saved.len();
            if locked.state != written {
                locked.save()?;
            }
            Ok(w)
        }
        Err(mut e) => {
            // What could not be rolled back still holds the new value: its
            // original must stay saved for `restore`.
            let mut next = before_state;
            if let WriteError::Failed {
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
                && let WriteError::Failed { unsaved, .. } = &mut e
            {
                *unsaved = Some(save);
            }
            Err(e)
        }
    }
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
            contributors: Default::default(),
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
