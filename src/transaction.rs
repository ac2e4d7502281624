//! Write a plan transactionally: every value is read back, and on the first
//! failure everything this run wrote is put back.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::disk_id::DiskId;
use crate::parallel;
use crate::plan::{Change, Plan, is_scheduler, same_value};
use crate::snapshot::device_dir;
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
    /// The save after the writes failed: they stand (what `restore` needs
    /// was saved before the first), but the state still holds originals
    /// this run put back.
    pub unsaved: Option<crate::state::StateError>,
}

/// How writing one change went.
enum Outcome {
    /// Written and read back as asked.
    Done,
    /// Its device went away before it could be written.
    Vanished,
    /// Not written, for this reason.
    NotWritten(String),
    /// Written, but it reads back otherwise or not at all.
    Wrong(String),
    /// Not tried: another write had failed.
    Skipped,
}

fn write_one(sysfs: &Sysfs, c: &Change) -> Outcome {
    log::debug!("write {} = {} (was {})", c.path, c.after, c.before);
    match sysfs.write_and_read_back(&c.path, &c.after) {
        Err(e) if is_vanished(&e) => Outcome::Vanished,
        Err(e) => Outcome::NotWritten(format!("{}: cannot write {:?}: {e}", c.path, c.after)),
        Ok(Ok(v)) if same_value(&c.path, &v, &c.after) => Outcome::Done,
        Ok(Ok(v)) => Outcome::Wrong(format!(
            "{}: wrote {:?} but it reads back {v:?}",
            c.path, c.after
        )),
        Ok(Err(e)) => Outcome::Wrong(format!("{}: cannot read back: {e}", c.path)),
    }
}

/// Write each change, read it back, and undo all of them on any failure.
fn transaction(sysfs: &Sysfs, changes: &[Change]) -> Result<Written, WriteError> {
    let put_back = |w: &Change| match sysfs.write(&w.path, &w.before) {
        Err(e) if is_vanished(&e) => Ok(()),
        other => other,
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = AtomicBool::new(false);
    write_all(changes, threads, &stop, |c| write_one(sysfs, c), put_back)
}

/// A thousand disks are a few thousand syscalls: the disks are shared out
/// between `threads`, each run of a disk's changes written by one thread
/// in the plan's order (with one thread, all of it in the plan's order).
/// After a failure, or a panic, no thread starts another write (`failed`
/// is set); what the others wrote meanwhile is put back with the rest.
fn write_all(
    changes: &[Change],
    threads: usize,
    failed: &AtomicBool,
    write: impl Fn(&Change) -> Outcome + Sync,
    put_back: impl Fn(&Change) -> std::io::Result<()>,
) -> Result<Written, WriteError> {
    // Each change is marked before it is written, and unmarked if it was
    // not: the marks, unlike the results, survive a panic, and whatever
    // may have been written is put back.
    let marked = Mutex::new(BTreeSet::new());
    let mark = |i: usize, on: bool| {
        let mut m = marked.lock().unwrap_or_else(|p| p.into_inner());
        if on { m.insert(i) } else { m.remove(&i) }
    };
    let outcomes = parallel::map(per_device(changes), threads, |disk| {
        let mut done = Vec::with_capacity(disk.len());
        for i in disk {
            if failed.load(Ordering::Relaxed) {
                done.push((i, Outcome::Skipped));
                continue;
            }
            mark(i, true);
            let o = {
                let _stop = StopOnPanic(failed);
                write(&changes[i])
            };
            if matches!(o, Outcome::Vanished | Outcome::NotWritten(_)) {
                mark(i, false);
            }
            if matches!(o, Outcome::NotWritten(_) | Outcome::Wrong(_)) {
                failed.store(true, Ordering::Relaxed);
            }
            done.push((i, o));
        }
        done
    });
    // in the plan's order: the runs are, and parallel::map keeps theirs
    let outcomes: Vec<(usize, Outcome)> = match outcomes {
        Ok(per_disk) => per_disk.into_iter().flatten().collect(),
        Err(p) => {
            return Err(roll_back(
                changes,
                marked,
                put_back,
                format!("internal error while writing: {p}"),
            ));
        }
    };
    // the first failure in the plan's order, whichever thread saw it
    let cause = outcomes.iter().find_map(|(_, o)| match o {
        Outcome::NotWritten(c) | Outcome::Wrong(c) => Some(c.clone()),
        _ => None,
    });
    if let Some(cause) = cause {
        return Err(roll_back(changes, marked, put_back, cause));
    }
    let mut out = Written::default();
    for (i, o) in outcomes {
        match o {
            Outcome::Done => out.changes.push(changes[i].clone()),
            Outcome::Vanished => out.vanished.push(changes[i].path.clone()),
            // no failure (checked above), so nothing was skipped
            Outcome::NotWritten(_) | Outcome::Wrong(_) | Outcome::Skipped => {}
        }
    }
    Ok(out)
}

/// Sets the flag when dropped by a panic: the other threads stop too.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// The indices of `changes` in runs of one disk (or CPU) each, in the
/// plan's order; a run goes to one thread. A disk's own attributes
/// (`[rule.queue]`, scheduler first) are one run, in its own device
/// plan; its cpu_lat knobs may be in another's (md0 carries its
/// members'), a run of their own, which the kernel serialises with the
/// rest (the queue's sysfs_lock).
fn per_device(changes: &[Change]) -> Vec<Vec<usize>> {
    let mut runs: Vec<Vec<usize>> = Vec::new();
    let mut last: Option<String> = None;
    for (i, c) in changes.iter().enumerate() {
        let device = device_dir(&c.path).unwrap_or_else(|| c.path.clone());
        match runs.last_mut() {
            Some(run) if last.as_ref() == Some(&device) => run.push(i),
            _ => runs.push(vec![i]),
        }
        last = Some(device);
    }
    runs
}

/// Put back everything marked as (maybe) written, latest first.
fn roll_back(
    changes: &[Change],
    marked: Mutex<BTreeSet<usize>>,
    put_back: impl Fn(&Change) -> std::io::Result<()>,
    cause: String,
) -> WriteError {
    let written = marked.into_inner().unwrap_or_else(|p| p.into_inner());
    // latest first, but a disk's scheduler before its other attributes
    let mut order: Vec<&Change> = written.iter().rev().map(|&i| &changes[i]).collect();
    for run in order.chunk_by_mut(|a, b| device_dir(&a.path) == device_dir(&b.path)) {
        run.sort_by_key(|c| !is_scheduler(&c.path));
    }
    let mut rollback_failures = Vec::new();
    for w in order {
        log::debug!("roll back {} = {}", w.path, w.before);
        if let Err(e) = put_back(w) {
            rollback_failures.push(RollbackFailure {
                path: w.path.clone(),
                message: format!("{}: cannot restore {:?}: {e}", w.path, w.before),
            });
        }
    }
    WriteError::Failed {
        cause,
        rolled_back: written.len() - rollback_failures.len(),
        rollback_failures,
        unsaved: None,
    }
}

/// The disks the state names: by a rule or as an owner of a saved value.
fn keep_named_disks(state: &mut crate::state::State) {
    let named: BTreeSet<&String> = (state.rules.keys())
        .chain(state.saved.values().flat_map(|s| s.owners.iter()))
        .collect();
    state.disks.retain(|d, _| named.contains(d));
}

/// What a change's path held before blkqos: what it reads now, but on a
/// CPU a `blkqos lease` holds, the value from before the lease.
fn original(state: &crate::state::State, c: &Change) -> String {
    match state.leases.get(&c.path) {
        Some(l) if crate::lease::cpuqos::ours(l, &c.before) => l.original.clone(),
        _ => c.before.clone(),
    }
}

/// Write a plan. Originals are saved (and persisted) before the first
/// write, so even a crash mid-run leaves `restore` able to undo it; once
/// written, the plan's edits to the saved state are made and saved.
pub fn write(sysfs: &Sysfs, locked: &mut Locked, plan: &Plan) -> Result<Written, WriteError> {
    let changes: Vec<Change> = plan.changes().cloned().collect();
    let mut added = Vec::new();
    let before_state = locked.state.clone();
    // What is about to be written is saved with the original: a failed run
    // goes back to `before_state`, and an entry it could not roll back
    // holds that value.
    for c in &changes {
        match locked.state.saved.get_mut(&c.path) {
            Some(s) => {
                s.owners.extend(c.contributors.iter().cloned());
                s.written = Some(c.after.clone());
            }
            None => {
                locked.state.saved.insert(
                    c.path.clone(),
                    Saved {
                        original: original(&locked.state, c),
                        owners: c.contributors.clone(),
                        written: Some(c.after.clone()),
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
        // which disk the name is now: saved once, at the first apply that
        // found it, and checked by every run after (engine::forget_replaced)
        if let Some(id) = DiskId::read(sysfs, device) {
            locked.state.disks.entry(device.clone()).or_insert(id);
        }
    }
    for c in &changes {
        for d in &c.contributors {
            if let Some(id) = DiskId::read(sysfs, d) {
                locked.state.disks.entry(d.clone()).or_insert(id);
            }
        }
    }
    keep_named_disks(&mut locked.state);
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
            // a running lease takes this in at its next step, under the lock
            for c in &changes {
                if let (Some(o), Some(l)) =
                    (&c.lease_original, locked.state.leases.get_mut(&c.path))
                {
                    l.original = o.clone();
                }
            }
            keep_named_disks(&mut locked.state);
            w.forgotten = written.saved.len() - locked.state.saved.len();
            if locked.state != written
                && let Err(e) = locked.save()
            {
                // the writes are made: reported as made, with this
                w.forgotten = 0;
                w.unsaved = Some(e);
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
            lease_original: None,
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

    /// What a test writer did: each change's index, in the order written.
    fn index(c: &Change) -> usize {
        c.path.parse().unwrap()
    }

    fn many(n: usize) -> Vec<Change> {
        (0..n).map(|i| change(&i.to_string(), "-1", "5")).collect()
    }

    /// Enough changes for the writes to be shared out between threads:
    /// the first one fails only after a write far past it was made by
    /// another thread, and that one is put back too.
    #[test]
    fn a_failed_write_puts_back_what_other_threads_wrote_after_it() {
        let changes = many(600);
        let written = Mutex::new(BTreeSet::new());
        let put_back = Mutex::new(BTreeSet::new());
        let far = std::sync::Condvar::new();
        let err = write_all(
            &changes,
            2,
            &AtomicBool::new(false),
            |c| {
                let mut w = written.lock().unwrap();
                if index(c) == 0 {
                    // wait for another thread to get past the first block
                    let (w, timeout) = far
                        .wait_timeout_while(w, std::time::Duration::from_secs(10), |w| {
                            !w.iter().any(|&i| i >= 16)
                        })
                        .unwrap();
                    assert!(!timeout.timed_out(), "no other thread wrote: {w:?}");
                    return Outcome::NotWritten("0: cannot write".into());
                }
                w.insert(index(c));
                far.notify_all();
                Outcome::Done
            },
            |c| {
                put_back.lock().unwrap().insert(index(c));
                Ok(())
            },
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("0: cannot write"), "{err}");
        let (written, put_back) = (
            written.into_inner().unwrap(),
            put_back.into_inner().unwrap(),
        );
        assert!(written.iter().any(|&i| i >= 16));
        assert_eq!(put_back, written);
    }

    /// A panic in one write is an error, and every write made (by any
    /// thread) is put back: the marks outlive the results.
    #[test]
    fn a_panic_while_writing_puts_back_every_write() {
        let changes = many(600);
        let written = Mutex::new(BTreeSet::new());
        let put_back = Mutex::new(BTreeSet::new());
        let err = write_all(
            &changes,
            2,
            &AtomicBool::new(false),
            |c| {
                assert!(index(c) != 300, "write {} is odd", c.path);
                written.lock().unwrap().insert(index(c));
                Outcome::Done
            },
            |c| {
                put_back.lock().unwrap().insert(index(c));
                Ok(())
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("write 300 is odd"), "{err}");
        let written = written.into_inner().unwrap();
        let mut put_back = put_back.into_inner().unwrap();
        // 300 was marked before it panicked: it may have been written
        assert!(put_back.remove(&300));
        assert_eq!(put_back, written);
    }

    #[test]
    fn the_files_are_as_they_were_after_a_failure_among_many() {
        let dir = tempfile::tempdir().unwrap();
        let mut changes = many(600);
        for c in &mut changes {
            c.path = format!("q/{}", c.path);
        }
        fs::create_dir_all(dir.path().join("q")).unwrap();
        for c in &changes {
            fs::write(dir.path().join(&c.path), "-1\n").unwrap();
        }
        fs::remove_file(dir.path().join("q/450")).unwrap();
        std::os::unix::fs::symlink("/dev/full", dir.path().join("q/450")).unwrap();
        let sysfs = Sysfs::new(dir.path());
        let err = transaction(&sysfs, &changes).unwrap_err();
        assert!(err.to_string().starts_with("q/450: cannot write"), "{err}");
        for c in changes.iter().filter(|c| c.path != "q/450") {
            assert_eq!(sysfs.read(&c.path).unwrap(), "-1", "{}", c.path);
        }
        let w = transaction(&sysfs, &changes[..450]).unwrap();
        assert_eq!(w.changes.len(), 450);
        assert!(
            changes[..450]
                .iter()
                .all(|c| sysfs.read(&c.path).unwrap() == "5")
        );
    }

    /// A panic stops the other threads as a failure does: each finishes
    /// the write it is in (held here until the panic has stopped the
    /// run), and starts no other.
    #[test]
    fn a_panic_stops_the_other_threads() {
        let changes = many(600);
        let stop = AtomicBool::new(false);
        let written = Mutex::new(BTreeSet::new());
        // without the stop, the held writes give up waiting after this
        let start = std::time::Instant::now();
        let err = write_all(
            &changes,
            2,
            &stop,
            |c| {
                let i = index(c);
                assert!(i != 20, "write 20 is odd");
                while i >= 32 && !stop.load(Ordering::Relaxed) && start.elapsed().as_secs() < 60 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                written.lock().unwrap().insert(i);
                Outcome::Done
            },
            |_| Ok(()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("write 20 is odd"), "{err}");
        let late = written
            .into_inner()
            .unwrap()
            .into_iter()
            .filter(|&i| i >= 32)
            .count();
        assert!(late <= 1, "{late} writes after the panic");
    }

    /// A disk's changes are written by one thread, in the plan's order,
    /// however the disks are shared out.
    #[test]
    fn a_disks_changes_are_written_by_one_thread_in_order() {
        let mut changes = Vec::new();
        for d in 0..200 {
            // five a disk: a disk's changes straddle the blocks of work
            for attr in [
                "scheduler",
                "cpu_lat_limit_us",
                "cpu_lat_timeout_ms",
                "nr_requests",
                "wbt_lat_usec",
            ] {
                changes.push(change(&format!("block/d{d}/queue/{attr}"), "1", "2"));
            }
        }
        let order = Mutex::new(Vec::new());
        // each thread's first write waits for the other's: both take part
        let both = std::sync::Barrier::new(2);
        let seen = Mutex::new(std::collections::HashSet::new());
        let w = write_all(
            &changes,
            2,
            &AtomicBool::new(false),
            |c| {
                let me = std::thread::current().id();
                if seen.lock().unwrap().insert(me) {
                    both.wait();
                }
                order.lock().unwrap().push((c.path.clone(), me));
                Outcome::Done
            },
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(seen.into_inner().unwrap().len(), 2);
        assert_eq!(w.changes, changes, "reported in the plan's order");
        let order = order.into_inner().unwrap();
        for d in 0..200 {
            let disk = format!("block/d{d}/");
            let mine: Vec<_> = order.iter().filter(|(p, _)| p.starts_with(&disk)).collect();
            let paths: Vec<&String> = mine.iter().map(|(p, _)| p).collect();
            let want: Vec<&String> = changes
                .iter()
                .map(|c| &c.path)
                .filter(|p| p.starts_with(&disk))
                .collect();
            assert_eq!(paths, want, "{disk}");
            assert!(
                mine.iter().all(|(_, t)| *t == mine[0].1),
                "{disk}: one thread"
            );
        }
    }

    /// Put back latest first, but a disk's scheduler before its other
    /// attributes, as forwards: switching it back resets nr_requests.
    #[test]
    fn a_rollback_puts_a_disks_scheduler_back_first() {
        let changes = [
            change("block/sda/queue/scheduler", "none", "bfq"),
            change("block/sda/queue/nr_requests", "64", "128"),
            change("block/sdb/queue/x", "1", "2"),
        ];
        let put_back = Mutex::new(Vec::new());
        let err = write_all(
            &changes,
            1,
            &AtomicBool::new(false),
            |c| match c.path.as_str() {
                "block/sdb/queue/x" => Outcome::NotWritten("x: cannot write".into()),
                _ => Outcome::Done,
            },
            |c| {
                put_back.lock().unwrap().push(c.path.clone());
                Ok(())
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("rolled back 2"), "{err}");
        assert_eq!(
            put_back.into_inner().unwrap(),
            ["block/sda/queue/scheduler", "block/sda/queue/nr_requests"]
        );
    }
}
