//! The one sequence every command that changes the machine runs: take the
//! lock, scan, snapshot, plan, write, save. `apply`, `coldplug` and `udev`
//! add/change plan a profile; `udev` remove plans the profile without the
//! removed device; `restore` plans the saved originals back. A preview
//! (dry run, `verify`, `explain`) is the same without the lock and the write.

use crate::discover::{self, Detail, Extent, Inventory, ScanError};
use crate::disk_id::DiskId;
use crate::error::Error;
use crate::plan::{self, Plan, PlanError, Scope};
use crate::profile::Profile;
use crate::report::Unreadable;
use crate::snapshot::Snapshot;
use crate::state::{State, StateDir, StateError};
use crate::sysfs::Sysfs;
use crate::transaction;
use std::collections::{BTreeSet, HashSet};

/// What to plan.
pub enum Job<'a> {
    /// The profile's values within the scope (a removed device included).
    Apply { profile: &'a Profile, scope: Scope },
    /// The saved originals within the scope back.
    Restore { scope: Scope, forget: Forget },
}

/// What a restore may forget that runs otherwise refuse to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Forget {
    /// The originals of devices that are gone, even when every saved
    /// device is.
    pub missing: bool,
    /// What was saved for disks whose name another disk has now, even
    /// when every disk the state names is another one.
    pub replaced: bool,
}

impl Job<'_> {
    /// Whether every disk the state names being another one now is
    /// accepted (each forgotten) rather than refused.
    fn forgets_all_replaced(&self) -> bool {
        matches!(self, Job::Restore { forget, .. } if forget.replaced)
    }
}

pub struct Engine<'a> {
    pub sysfs: &'a Sysfs,
    pub state: &'a StateDir,
    /// The media change the run's udev event reports, if it does.
    pub media_change: Option<MediaChange>,
}

/// A media change the kernel reported (a udev change event with
/// `DISK_MEDIA_CHANGE=1`: a card swapped in a reader, `losetup`): the
/// disk `name`, at `diskseq` now, is the one it was, queue and all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaChange {
    pub name: String,
    pub diskseq: u64,
}

/// A written plan, holding only the changes made.
pub struct Done {
    pub plan: Plan,
    /// Paths that vanished (device removed) before they could be written.
    pub vanished: Vec<String>,
    /// Saved originals dropped from the state.
    pub forgotten: usize,
    /// The save after the writes failed: the writes stand, the run is
    /// partial (see transaction::Written::unsaved).
    pub unsaved: Option<crate::state::StateError>,
}

impl Done {
    /// Whether the run did less than asked though it wrote: its plan
    /// left something out (Plan::partial), or the state was not saved
    /// after the writes.
    pub fn partial(&self) -> bool {
        self.plan.partial() || self.unsaved.is_some()
    }
}

/// A run that failed, with the plan it was writing when it got that far.
pub struct Failed {
    pub error: Error,
    pub plan: Option<Plan>,
}

/// A plan that writes nothing, and what it was computed from.
pub struct Preview {
    pub snapshot: Snapshot,
    pub plan: Plan,
    /// What it could not read (root's saved state, run as another user),
    /// and so left out: for the JSON document's `unreadable`.
    pub unreadable: Vec<Unreadable>,
}

/// What a command that only reads leaves out when it cannot read the saved
/// state (root's, run as another user).
pub const WITHOUT_STATE: &str =
    "values blkqos set for disks the profile no longer covers are not shown";

impl Engine<'_> {
    /// Plan and write under the lock: the "before" values are the ones
    /// replaced, and parallel runs (udev workers, the boot unit) take turns.
    pub fn run(&self, job: &Job) -> Result<Done, Box<Failed>> {
        let failed = |error: Error, plan| Box::new(Failed { error, plan });
        let mut locked = self
            .state
            .lock()
            .map_err(|e| failed(needs_root(job, e), None))?;
        locked.state.held = lease_holds(self.state.dir());
        let before = locked.state.saved.len();
        let disks = locked.state.disks.clone();
        let replaced = forget_replaced(self.sysfs, &mut locked.state, self.forgets(job))
            .map_err(|e| failed(e.into(), None))?;
        if locked.state.disks != disks {
            locked.save().map_err(|e| failed(e.into(), None))?;
        }
        let forgotten_before = before - locked.state.saved.len();
        let (snap, scope) = self
            .snapshot(job, locked.state.clone(), None)
            .map_err(|e| failed(e.into(), None))?;
        let mut plan = plan_for(job, &snap, &scope).map_err(|e| failed(e, None))?;
        plan.warnings.splice(0..0, replaced);
        match transaction::write(self.sysfs, &mut locked, &plan) {
            Ok(written) => {
                let done: HashSet<&str> = written.changes.iter().map(|w| w.path.as_str()).collect();
                for d in &mut plan.devices {
                    d.changes.retain(|c| done.contains(c.path.as_str()));
                }
                if let Some(e) = &written.unsaved {
                    plan.warnings.push(format!(
                        "the changes below are made, but the state could not be saved after them ({e}); what restore needs was saved before the first"
                    ));
                }
                Ok(Done {
                    plan,
                    vanished: written.vanished,
                    forgotten: written.forgotten + forgotten_before,
                    unsaved: written.unsaved,
                })
            }
            Err(e) => Err(failed(e.into(), Some(plan))),
        }
    }

    /// What a run may take for another disk, and what for the same.
    fn forgets(&self, job: &Job) -> Judge<'_> {
        Judge {
            all: job.forgets_all_replaced(),
            media_change: self.media_change.as_ref(),
        }
    }

    /// Plan without the lock and without writing.
    pub fn preview(&self, job: &Job) -> Result<Preview, Error> {
        self.preview_of(job, None)
    }

    /// [`Engine::preview`] over disks already scanned.
    pub fn preview_on(&self, inventory: Inventory, job: &Job) -> Result<Preview, Error> {
        self.preview_of(job, Some(inventory))
    }

    fn preview_of(&self, job: &Job, inventory: Option<Inventory>) -> Result<Preview, Error> {
        let (state, unreadable) = match job {
            // Restoring is all about the saved state: it must be readable.
            Job::Restore { .. } => (self.state.read()?, Vec::new()),
            // An unreadable state (not root) only hides the values that
            // would go back to their originals.
            Job::Apply { .. } => self.read_state(WITHOUT_STATE)?,
        };
        let mut state = state;
        let replaced = forget_replaced(self.sysfs, &mut state, self.forgets(job))?;
        let (snapshot, scope) = self.snapshot(job, state, inventory)?;
        let mut plan = plan_for(job, &snapshot, &scope)?;
        plan.warnings.splice(0..0, replaced);
        Ok(Preview {
            snapshot,
            plan,
            unreadable,
        })
    }

    /// The saved state for a command that only reads, without the lock. One
    /// it may not read (root's, run as another user) is empty: the command
    /// goes on, warning on stderr what it could not read and what that
    /// leaves out (`left_out`), and returning it for the JSON document. One
    /// that is there but corrupt, forged, oversized or in a directory that
    /// cannot be trusted is an error: going on without it would report
    /// "ok" over values it would have shown wrong.
    pub fn read_state(&self, left_out: &str) -> Result<(State, Vec<Unreadable>), StateError> {
        match self.state.read() {
            Ok(mut state) => {
                state.held = lease_holds(self.state.dir());
                Ok((state, Vec::new()))
            }
            Err(StateError::Io { path, source })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                let e = StateError::Io { path, source };
                let path = self.state.file().display().to_string();
                log::warn!("cannot read the saved state {path} ({e}): {left_out}");
                let note = Unreadable {
                    path,
                    error: e.to_string(),
                };
                Ok((State::default(), vec![note]))
            }
            Err(e) => Err(e),
        }
    }

    /// Scan what the job covers and read what planning it needs. For a
    /// removal, the scope becomes the devices that shared a saved value
    /// with the removed one: nothing in the tree links them to it any more.
    fn snapshot(
        &self,
        job: &Job,
        state: State,
        inventory: Option<Inventory>,
    ) -> Result<(Snapshot, Scope), ScanError> {
        let (profile, mut scope) = match job {
            Job::Apply { profile, scope } => (Some(*profile), scope.clone()),
            Job::Restore { scope, .. } => (None, scope.clone()),
        };
        // identities and flags are read only when a rule matches on one
        let detail = Detail::for_profile(profile);
        // (a restore of a removed disk keeps its scope: that disk's own)
        if let (Job::Apply { .. }, Some(gone)) = (job, &scope.removed) {
            scope.devices = (state.saved.values())
                .filter(|s| s.owners.contains(gone))
                .flat_map(|s| s.owners.iter())
                .filter(|o| *o != gone)
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
        }
        let inventory = match inventory {
            Some(inventory) => inventory,
            None => {
                let restore_all = profile.is_none() && scope.devices.is_empty();
                if restore_all || (scope.removed.is_some() && scope.devices.is_empty()) {
                    // the saved state names every path: no discovery needed
                    Inventory::default()
                } else if scope.devices.is_empty() {
                    discover::scan(self.sysfs, Extent::All, detail)?
                } else {
                    discover::scan(self.sysfs, Extent::Around(&scope.devices), detail)?
                }
            }
        };
        // One that left with it is no longer anyone to plan for. A restore
        // of the removed disk keeps it: emptied, its scope would be
        // everything, and every other disk's entries, not read by this
        // scoped run, would look gone and be forgotten.
        if let (Job::Apply { .. }, Some(_)) = (job, &scope.removed) {
            scope.devices.retain(|d| inventory.get(d).is_some());
        }
        // a scoped run reads the saved values of its own disks only
        let reach: Option<BTreeSet<String>> =
            (!scope.devices.is_empty() || scope.removed.is_some()).then(|| {
                (inventory.devices.iter().map(|d| d.name.clone()))
                    .chain(scope.devices.iter().cloned())
                    .chain(scope.removed.iter().cloned())
                    .collect()
            });
        let snap = Snapshot::take_within(self.sysfs, inventory, state, profile, reach.as_ref());
        Ok((snap, scope))
    }
}

/// How [`forget_replaced`] judges the disks the state names.
pub struct Judge<'a> {
    /// Every disk the state names another one now is forgotten, not
    /// refused (`restore --forget-replaced`).
    pub all: bool,
    pub media_change: Option<&'a MediaChange>,
}

/// A name, the disk it was, the disk it is.
type Renamed = (String, DiskId, DiskId);

/// Names the state saved values for whose disk is another one now (a hot
/// swap, an array made again, its remove not handled yet), and names whose
/// disk has a later diskseq but is the same queue, its media changed.
fn replaced(
    sysfs: &Sysfs,
    state: &State,
    media_change: Option<&MediaChange>,
) -> (Vec<Renamed>, Vec<(Renamed, &'static str)>) {
    let mut replaced = Vec::new();
    let mut changed = Vec::new();
    for (name, was) in &state.disks {
        let Some(now) = DiskId::read(sysfs, name) else {
            continue;
        };
        if now.same_disk(was) {
            continue;
        }
        let it = (name.clone(), was.clone(), now);
        match media_changed(sysfs, state, &it, media_change) {
            Some(why) => changed.push((it, why)),
            None => replaced.push(it),
        }
    }
    (replaced, changed)
}

/// Whether a name's later diskseq is a media change of the same disk, and
/// what says so. The kernel gives a disk a new diskseq when its media
/// change (`disk_force_media_change`: a card swapped, a loop device bound
/// again) and keeps its request queue, with the values blkqos wrote. Only
/// with the same device number and a later diskseq; then either the
/// kernel's event says so for the diskseq there now, or every value saved
/// in the name's own directory (one at least) still reads what blkqos
/// wrote there: a disk made anew starts from the kernel's defaults, and a
/// value someone wrote since is theirs.
fn media_changed(
    sysfs: &Sysfs,
    state: &State,
    (name, was, now): &Renamed,
    media_change: Option<&MediaChange>,
) -> Option<&'static str> {
    let later = matches!((was.diskseq, now.diskseq), (Some(a), Some(b)) if b > a);
    if !later || was.dev != now.dev {
        return None;
    }
    if media_change.is_some_and(|m| m.name == *name && now.diskseq == Some(m.diskseq)) {
        return Some("the kernel reported a media change");
    }
    let own = format!("block/{name}/");
    let mut entries = (state.saved.range(own.clone()..))
        .take_while(|(path, _)| path.starts_with(&own))
        .peekable();
    let holds = entries.peek().is_some()
        && entries.all(|(path, s)| {
            (s.written.as_ref()).is_some_and(|w| {
                sysfs
                    .read(path)
                    .is_ok_and(|v| plan::same_value(path, &v, w))
            })
        });
    holds.then_some("its queue holds what blkqos wrote")
}

/// Every disk the state names (two or more) is another one now: far more
/// likely a state or a tree from elsewhere than every disk swapped.
fn every_disk(replaced: &[Renamed], state: &State) -> bool {
    replaced.len() >= 2 && replaced.len() == state.disks.len()
}

/// What the one before saved under its own directory left with it, and
/// the name's rule is planned afresh, so the new disk's values are its own
/// originals. Values saved on other disks for it (an array's members)
/// stay: they are those disks' originals. One warning per name.
/// Every disk replaced at once is refused, as forgetting cannot be undone,
/// unless asked for (`restore --forget-replaced`). A name whose media
/// changed keeps what was saved for it, under its new diskseq.
pub fn forget_replaced(
    sysfs: &Sysfs,
    state: &mut State,
    judge: Judge,
) -> Result<Vec<String>, PlanError> {
    let (replaced, changed) = replaced(sysfs, state, judge.media_change);
    for ((name, was, now), why) in changed {
        log::info!(
            "{name}: {was} -> {} on the same device number {}, {why}: the same disk, its media changed; what was saved for it is kept",
            now.diskseq.map_or_else(String::new, |s| s.to_string()),
            now.dev
        );
        state.disks.insert(name, now);
    }
    if !judge.all && every_disk(&replaced, state) {
        let names: Vec<&str> = replaced.iter().map(|(n, _, _)| n.as_str()).collect();
        return Err(PlanError::AllReplaced {
            count: names.len(),
            names: names.join(", "),
        });
    }
    let mut warnings = Vec::new();
    for (name, was, now) in replaced {
        let own = format!("block/{name}/");
        let before = state.saved.len();
        state.saved.retain(|path, _| !path.starts_with(&own));
        state.rules.remove(&name);
        state.disks.remove(&name);
        warnings.push(format!(
            "{name}: another disk has the name now ({now}, was {was}): {} value(s) saved for the one before forgotten",
            before - state.saved.len()
        ));
    }
    Ok(warnings)
}

/// For a command that only reads: names whose disk is another one now are
/// shown owned by no rule, one warning each; the state is left as it is
/// for the next run that writes to forget (or, every disk replaced, to
/// refuse, which one more warning says).
pub fn disown_replaced(sysfs: &Sysfs, state: &mut State) -> Vec<String> {
    let (replaced, _) = replaced(sysfs, state, None);
    let all = every_disk(&replaced, state);
    let mut warnings: Vec<String> = (replaced.iter())
        .map(|(name, was, now)| {
            let rule = match state.rules.remove(name) {
                Some(r) => format!("rule \"{r}\" tuned the one before; "),
                None => String::new(),
            };
            let next = match all {
                true => "",
                false => "; the next apply, restore or udev event forgets what was saved for it",
            };
            format!("{name}: another disk has the name now ({now}, was {was}): {rule}shown under no rule{next}")
        })
        .collect();
    if all {
        warnings.push(format!(
            "every disk the state names is another one now ({}): apply, restore and udev events refuse this state, more likely one from another boot or machine than every disk swapped; if they were all swapped (their remove events lost), `blkqos restore --forget-replaced` forgets what was saved for the ones before",
            replaced.len()
        ));
    }
    warnings
}

/// A state directory closed to a user who is not root, or one that is
/// root's (which the trust checks refuse to anyone else), means the
/// command needs root, not that something broke.
fn needs_root(job: &Job, e: StateError) -> Error {
    use std::os::unix::fs::MetadataExt;
    let uid = crate::trust::euid();
    let others = |path: &std::path::Path| std::fs::metadata(path).is_ok_and(|m| m.uid() != uid);
    let denied = match &e {
        StateError::Io { source, .. } => source.kind() == std::io::ErrorKind::PermissionDenied,
        StateError::Untrusted { path, .. } => others(path),
        _ => false,
    };
    if uid == 0 || !denied {
        return e.into();
    }
    Error::NeedsRoot {
        command: match job {
            Job::Apply { .. } => "apply",
            Job::Restore { .. } => "restore",
        },
        cause: e,
    }
}

fn plan_for(job: &Job, snap: &Snapshot, scope: &Scope) -> Result<Plan, Error> {
    let mut plan = match job {
        Job::Apply { profile, .. } => plan::build(profile, snap, scope)?,
        Job::Restore { forget, .. } => plan::restore(snap, scope, forget.missing)?,
    };
    let mut warnings = snap.inventory.warnings.clone();
    warnings.append(&mut plan.warnings);
    plan.warnings = warnings;
    Ok(plan)
}

/// What a running `blkqos lease` on the state directory `dir` holds now,
/// per CPU attribute. The lease publishes under the state lock, so a run
/// holding the lock reads what the CPUs have.
fn lease_holds(dir: &std::path::Path) -> std::collections::BTreeMap<String, String> {
    let Some(p) = crate::lease::published::running(dir) else {
        return Default::default();
    };
    (p.cpus.into_iter())
        .filter_map(|(cpu, c)| {
            let held = c.limit_us?;
            Some((
                crate::lease::cpuqos::attr(cpu),
                crate::abi::resume::encode(Some(held)),
            ))
        })
        .collect()
}
