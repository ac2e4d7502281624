//! Everything a plan is computed from, read once: the disks, the current
//! value of every attribute a plan may write or put back, the idle-state
//! tables "auto" chooses from, and the saved state. The planner reads
//! nothing else, so a plan is a function of a snapshot.

use crate::abi::{Abi, knobs};
use crate::discover::Inventory;
use crate::idle::{self, IdleState};
use crate::plan::owning_rule;
use crate::profile::{Limit, Profile};
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
        let mut paths: BTreeSet<String> = state.saved.keys().cloned().collect();
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
}

/// The directory of the disk or CPU an attribute path belongs to.
fn device_dir(path: &str) -> Option<String> {
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
}
