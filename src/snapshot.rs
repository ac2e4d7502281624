//! Everything a plan is computed from, read once: the disks, the current
//! value of every attribute a plan may write or put back, the idle-state
//! tables "auto" chooses from, and the saved state. The planner reads
//! nothing else, so a plan is a function of a snapshot.

use crate::abi::{Abi, knobs};
use crate::discover::Inventory;
use crate::idle::{self, IdleState};
use crate::profile::{Limit, Profile, owning_rule};
use crate::state::State;
pub use crate::sysfs::Reading;
use crate::sysfs::Sysfs;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub struct Snapshot {
    pub inventory: Inventory,
    pub state: State,
    values: BTreeMap<String, Reading>,
    idle: BTreeMap<u32, Vec<IdleState>>,
    /// Device directories (`block/sda`, `devices/system/cpu/cpu3`) of
    /// missing saved attributes that are still there.
    present: BTreeSet<String>,
    /// Saved attributes of disks outside a scoped run's reach: not read.
    unread: BTreeSet<String>,
    /// Whether the disk of any unread attribute is still there.
    unread_present: bool,
}

impl Snapshot {
    fn new(inventory: Inventory, state: State) -> Snapshot {
        Snapshot {
            inventory,
            state,
            ..Snapshot::default()
        }
    }

    fn set(&mut self, path: &str, reading: Reading) {
        self.values.insert(path.to_string(), reading);
    }

    fn set_idle(&mut self, cpu: u32, states: Vec<IdleState>) {
        self.idle.insert(cpu, states);
    }

    /// Read what planning `profile` (or, without one, restoring `state`)
    /// over `inventory` needs.
    pub fn take(
        sysfs: &Sysfs,
        inventory: Inventory,
        state: State,
        profile: Option<&Profile>,
    ) -> Snapshot {
        Snapshot::take_within(sysfs, inventory, state, profile, None)
    }

    /// [`Snapshot::take`] for a run scoped to the disks of `reach` (a udev
    /// event, `--device`): a saved attribute of another disk, one none of
    /// them shares, is not read (on a host with ten thousand disks tuned,
    /// one event would otherwise read them all). All the plan needs to
    /// know of those is whether every one of their disks is gone, and one
    /// that is still there answers that.
    pub fn take_within(
        sysfs: &Sysfs,
        inventory: Inventory,
        state: State,
        profile: Option<&Profile>,
        reach: Option<&BTreeSet<String>>,
    ) -> Snapshot {
        let mut paths = BTreeSet::new();
        let mut unread = BTreeSet::new();
        for (path, saved) in &state.saved {
            let within = |r: &BTreeSet<String>| {
                disk_of(path).is_none_or(|d| r.contains(d))
                    || saved.owners.iter().any(|o| r.contains(o))
            };
            if reach.is_none_or(within) {
                paths.insert(path.clone());
            } else {
                unread.insert(path.clone());
            }
        }
        let mut cpus = BTreeSet::new();
        for d in &inventory.devices {
            if d.abi != Abi::None {
                paths.insert(knobs::limit_path(d.abi, &d.name));
                paths.insert(knobs::timeout_path(d.abi, &d.name));
            } else {
                // where the static fallback would go
                paths.extend(d.cpus.iter().map(|&c| idle::cpu_resume_latency_path(c)));
            }
            cpus.extend(d.cpus.iter().copied());
        }
        if let Some(profile) = profile {
            for d in inventory.visible() {
                if let Some(rule) = owning_rule(profile, d) {
                    paths.extend(
                        (rule.queue.iter())
                            .map(|(attr, _)| format!("block/{}/queue/{attr}", d.name)),
                    );
                }
            }
        }
        let wants_auto = profile
            .is_some_and(|p| (p.rules.iter()).any(|r| p.effective(r).limit == Some(Limit::Auto)));
        let mut snap = Snapshot::new(inventory, state);
        snap.unread_present = (unread.iter())
            .filter_map(|p| device_dir(p))
            .any(|d| sysfs.exists(&d));
        snap.unread = unread;
        if wants_auto {
            for cpu in cpus {
                snap.set_idle(cpu, idle::cpu_states(sysfs, cpu));
            }
        }
        // the knobs, read while their disks were scanned
        let mut read = Vec::new();
        for d in &snap.inventory.devices {
            for (path, reading) in &d.knobs {
                if paths.remove(path) {
                    read.push((path.clone(), reading.clone()));
                }
            }
        }
        read.extend(paths.into_iter().map(|p| {
            let r = Reading::of(sysfs.read(&p));
            (p, r)
        }));
        for (path, reading) in read {
            if reading == Reading::Missing
                && snap.state.saved.contains_key(&path)
                && let Some(dir) = device_dir(&path)
                && sysfs.exists(&dir)
            {
                snap.present.insert(dir);
            }
            snap.set(&path, reading);
        }
        snap
    }

    /// The reading of an attribute; one the snapshot did not read is missing.
    pub fn value(&self, path: &str) -> &Reading {
        self.values.get(path).unwrap_or(&Reading::Missing)
    }

    /// The value of an attribute, when it has one.
    pub fn attr(&self, path: &str) -> Option<&str> {
        match self.value(path) {
            Reading::Value(v) if !v.is_empty() => Some(v),
            _ => None,
        }
    }

    /// A CPU's idle states (empty when it has no table or none was read).
    pub fn idle_states(&self, cpu: u32) -> &[IdleState] {
        self.idle.get(&cpu).map_or(&[], |s| s.as_slice())
    }

    /// Whether the disk or CPU a missing attribute belongs to is still
    /// there: only a device that left takes its saved original with it.
    pub fn device_present(&self, path: &str) -> bool {
        device_dir(path).is_some_and(|d| self.present.contains(&d))
    }

    /// Whether a saved attribute's device is gone. One not read (outside
    /// the run's reach) counts as gone only when every such one is.
    pub fn gone(&self, path: &str) -> bool {
        if self.unread.contains(path) {
            return !self.unread_present;
        }
        self.value(path) == &Reading::Missing && !self.device_present(path)
    }
}

/// The disk a `block/<disk>/...` attribute belongs to.
fn disk_of(path: &str) -> Option<&str> {
    path.strip_prefix("block/")?.split('/').next()
}

/// The directory of the disk or CPU an attribute path belongs to.
pub(crate) fn device_dir(path: &str) -> Option<String> {
    let depth = if path.starts_with("devices/system/cpu/") {
        4
    } else if path.starts_with("block/") {
        2
    } else {
        return None;
    };
    let parts: Vec<&str> = path.split('/').take(depth).collect();
    (parts.len() == depth).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attribute_belongs_to_its_disk_or_cpu() {
        assert_eq!(
            device_dir("block/sda/queue/cpu_lat_limit_us").as_deref(),
            Some("block/sda")
        );
        assert_eq!(
            device_dir("devices/system/cpu/cpu3/power/pm_qos_resume_latency_us").as_deref(),
            Some("devices/system/cpu/cpu3")
        );
        assert_eq!(device_dir("class/x"), None);
    }

    /// A scoped run reads the saved values of its own disks, and of the
    /// others only whether any of them is still there.
    #[test]
    fn a_scoped_snapshot_reads_its_own_disks_saved_values_only() {
        use crate::state::Saved;
        let dir = tempfile::tempdir().unwrap();
        let mut state = State::default();
        for d in ["a", "b", "c"] {
            std::fs::create_dir_all(dir.path().join(format!("block/{d}/queue"))).unwrap();
            std::fs::write(dir.path().join(format!("block/{d}/queue/x")), "5\n").unwrap();
            let owners = BTreeSet::from([d.to_string()]);
            let original = "-1".to_string();
            state.saved.insert(
                format!("block/{d}/queue/x"),
                Saved {
                    original,
                    owners,
                    written: None,
                },
            );
        }
        // c's value is shared with a: a's run reads it
        (state.saved.get_mut("block/c/queue/x").unwrap().owners).insert("a".into());
        let reach = BTreeSet::from(["a".to_string()]);
        let sysfs = Sysfs::new(dir.path());
        let take = |s: &State| {
            let inv = Inventory::default();
            Snapshot::take_within(&sysfs, inv, s.clone(), None, Some(&reach))
        };
        let snap = take(&state);
        assert_eq!(snap.value("block/a/queue/x"), &Reading::Value("5".into()));
        assert_eq!(snap.value("block/c/queue/x"), &Reading::Value("5".into()));
        assert_eq!(snap.value("block/b/queue/x"), &Reading::Missing, "not read");
        assert!(!snap.gone("block/b/queue/x"), "b is still there");
        std::fs::remove_dir_all(dir.path().join("block/b")).unwrap();
        assert!(take(&state).gone("block/b/queue/x"));
        // unscoped, everything is read
        let all = Snapshot::take(&sysfs, Inventory::default(), state, None);
        assert!(all.gone("block/b/queue/x"));
        assert_eq!(all.value("block/c/queue/x"), &Reading::Value("5".into()));
    }
}
