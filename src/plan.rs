//! Desired state versus current state: what `apply` would write, and what
//! `restore` or a device's removal would put back. A pure function of a
//! [`Snapshot`]: it reads nothing itself.
//!
//! Each visible device is owned by the first rule that matches it. A rule's
//! limit lands on the request queues the device resolves to; when several
//! devices land on one queue (or one CPU, for the static fallback) the
//! strictest request wins, as PM QoS aggregates: lowest limit, longest timeout.

use crate::abi::{Abi, knobs, resume};
use crate::discover::Inventory;
use crate::idle::{self, AUTO_MAX_EXIT_US, format_cpus};
use crate::profile::{Fallback, Limit, Profile, owning_rule};
use crate::snapshot::{Reading, Snapshot};
use std::collections::{BTreeMap, BTreeSet, HashMap};

mod lease;
mod restore;
mod scheduler;
pub use lease::{LeaseGrant, OnLease, lease_grants, on_lease};
pub use restore::restore;
pub use scheduler::{is_scheduler, live_value, same_value, scheduler_first};

#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Relative to the sysfs root.
    pub path: String,
    pub before: String,
    pub after: String,
    /// Every device whose settings reach this value (the owner, whose
    /// request won, among them): what `restore --device` goes by.
    pub contributors: BTreeSet<String>,
    /// On a CPU `blkqos lease` has an entry for: the value under its hold
    /// once this change is made (what it puts back at its lapse). The
    /// lease is told through the state, in the same transaction.
    pub lease_original: Option<String>,
}

/// One device's part of a plan. Its changes are those its request won.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicePlan {
    pub name: String,
    pub rule: Option<String>,
    pub targets: Vec<String>,
    /// How each target is constrained: queue, disk, cpu-resume-latency, none.
    pub backend: BTreeMap<String, String>,
    /// The requested limit; for "auto", the strictest value it resolved to.
    pub limit: Option<Requested>,
    /// How "auto" was resolved, per target.
    pub auto: Vec<AutoChoice>,
    pub timeout_ms: Option<u64>,
    pub changes: Vec<Change>,
}

/// A limit as asked for: how it was given and, where there is one, the
/// number of microseconds it comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requested {
    pub mode: LimitMode,
    /// For `us`, the value given; for `auto`, the strictest value chosen
    /// over the targets (each one's in [`DevicePlan::auto`]); none for
    /// `off`, or `auto` with no target.
    pub us: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitMode {
    Us,
    Auto,
    Off,
}

impl LimitMode {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitMode::Us => "us",
            LimitMode::Auto => "auto",
            LimitMode::Off => "off",
        }
    }
}

/// What "auto" chose on one target, and from what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoChoice {
    pub target: String,
    pub us: u64,
    /// The idle state and CPUs it was read from, or why a bound was used.
    pub why: String,
}

impl AutoChoice {
    pub fn describe(&self) -> String {
        format!("{}: {} us ({})", self.target, self.us, self.why)
    }
}

impl DevicePlan {
    /// The limit as the tables show it: "2 us", "off", "auto (4 us, 10 us)".
    pub fn limit_text(&self) -> Option<String> {
        let r = self.limit?;
        Some(match r.mode {
            LimitMode::Off => "off".to_string(),
            LimitMode::Us => format!("{} us", r.us.unwrap_or_default()),
            LimitMode::Auto => {
                let chosen: BTreeSet<u64> = self.auto.iter().map(|a| a.us).collect();
                if chosen.is_empty() {
                    "auto".to_string()
                } else {
                    let shown: Vec<String> = chosen.iter().map(|us| format!("{us} us")).collect();
                    format!("auto ({})", shown.join(", "))
                }
            }
        })
    }
}

/// What to write, and what to change in the saved state once written.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub devices: Vec<DevicePlan>,
    pub warnings: Vec<String>,
    /// Saved originals to drop once the plan is written: put back by it,
    /// already in place, or gone with their device.
    pub forget: BTreeSet<String>,
    /// Devices that no longer contribute to any saved value (removed, or
    /// restored): dropped from every saved entry, and an entry left with
    /// no contributor is dropped too.
    pub disown: BTreeSet<String>,
    /// The rule that owns each planned device now (`None`: no rule).
    pub rules: BTreeMap<String, Option<String>>,
    /// Every saved rule is dropped (restore of everything).
    pub forget_all_rules: bool,
    /// Saved entries left out as untrustworthy (restore cannot put them
    /// back: a partial restore).
    pub distrusted: usize,
    /// Attributes a change was planned for but that could not be read,
    /// with the error: left alone, the rest planned (a partial run).
    pub unread: Vec<(String, String)>,
}

impl Plan {
    /// Whether the plan leaves something out that was asked for: an
    /// attribute it could not read, or saved entries it could not trust.
    pub fn partial(&self) -> bool {
        !self.unread.is_empty() || self.distrusted > 0
    }
}

/// What a plan covers.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The `--device` names and the queues they resolve to; every device
    /// when empty.
    pub devices: Vec<String>,
    /// A device that went away: it asks for nothing any more, so what it
    /// alone wanted goes back to the saved original and what others still
    /// want is re-planned for them. Part of the scope with `devices`.
    pub removed: Option<String>,
}

impl Scope {
    pub fn devices(devices: &[String]) -> Scope {
        Scope {
            devices: devices.to_vec(),
            removed: None,
        }
    }

    pub fn all() -> Scope {
        Scope::default()
    }
}

impl Plan {
    pub fn changes(&self) -> impl Iterator<Item = &Change> {
        self.devices.iter().flat_map(|d| d.changes.iter())
    }

    pub fn is_empty(&self) -> bool {
        self.changes().next().is_none()
    }
}

/// One device's request on one target queue.
#[derive(Debug, Clone)]
struct Request {
    device: String,
    limit: Option<u64>,
    timeout_ms: u64,
    fallback: Fallback,
}

/// A value to hold at a path: the device whose request won and every
/// device whose request reaches it.
struct Desired {
    value: String,
    owner: String,
    contributors: BTreeSet<String>,
    /// The saved original, wanted back because no rule asks for this path.
    release: bool,
}

/// What applying `profile` to the snapshot's machine writes, within `scope`.
pub fn build(profile: &Profile, snap: &Snapshot, scope: &Scope) -> Result<Plan, PlanError> {
    let inv = &snap.inventory;
    let saved = &snap.state.saved;
    let mut warnings = Vec::new();
    let mut devices: Vec<DevicePlan> = Vec::new();
    let mut requests: BTreeMap<String, Vec<Request>> = BTreeMap::new();
    let mut desired: BTreeMap<String, Desired> = BTreeMap::new();
    let mut auto_cache: BTreeMap<String, (u64, String)> = BTreeMap::new();

    for d in inv
        .visible()
        .filter(|d| scope.removed.as_deref() != Some(d.name.as_str()))
    {
        let rule = owning_rule(profile, d);
        let mut dp = DevicePlan {
            name: d.name.clone(),
            rule: rule.map(|r| r.name.clone()),
            targets: d.targets.clone(),
            backend: BTreeMap::new(),
            limit: None,
            auto: Vec::new(),
            timeout_ms: None,
            changes: Vec::new(),
        };
        let Some(rule) = rule else {
            devices.push(dp);
            continue;
        };
        let eff = profile.effective(rule);
        if let Some(limit) = eff.limit {
            let mut resolved = BTreeSet::new();
            for t in &d.targets {
                let Some(td) = inv.get(t) else { continue };
                let us = match limit {
                    Limit::Off => None,
                    Limit::Us(n) => Some(n),
                    Limit::Auto => {
                        let key = format_cpus(&td.cpus);
                        let (us, why) = auto_cache
                            .entry(key.clone())
                            .or_insert_with(|| {
                                let tables = td.cpus.iter().map(|&c| snap.idle_states(c));
                                match idle::auto_limit(tables) {
                                    Some((us, name)) => (us, format!("{name} on CPUs {key}")),
                                    None => (
                                        AUTO_MAX_EXIT_US,
                                        "no idle-state table or no halting state enabled; generic bound".into(),
                                    ),
                                }
                            })
                            .clone();
                        dp.auto.push(AutoChoice {
                            target: t.clone(),
                            us,
                            why,
                        });
                        resolved.insert(us);
                        Some(us)
                    }
                };
                requests.entry(t.clone()).or_default().push(Request {
                    device: d.name.clone(),
                    limit: us,
                    timeout_ms: eff.timeout_ms,
                    fallback: eff.fallback,
                });
            }
            dp.limit = Some(match limit {
                Limit::Off => Requested {
                    mode: LimitMode::Off,
                    us: None,
                },
                Limit::Us(n) => Requested {
                    mode: LimitMode::Us,
                    us: Some(n),
                },
                Limit::Auto => Requested {
                    mode: LimitMode::Auto,
                    us: resolved.first().copied(),
                },
            });
            dp.timeout_ms = (limit != Limit::Off).then_some(eff.timeout_ms);
        }
        for (attr, value) in &rule.queue {
            let path = format!("block/{}/queue/{attr}", d.name);
            if snap.value(&path) != &Reading::Missing {
                desired.insert(
                    path,
                    Desired {
                        value: value.clone(),
                        owner: d.name.clone(),
                        contributors: BTreeSet::from([d.name.clone()]),
                        release: false,
                    },
                );
            } else {
                warnings.push(format!(
                    "{}: rule {:?} sets queue/{attr}, which this device does not have; skipped",
                    d.name, rule.name
                ));
            }
        }
        devices.push(dp);
    }

    // Per-CPU requests for the static fallback: (limit, owner, contributors).
    let mut cpu_requests: BTreeMap<u32, (Option<u64>, String, BTreeSet<String>)> = BTreeMap::new();
    let mut backends: Vec<(String, String, String)> = Vec::new();
    for (target, reqs) in &requests {
        let Some(td) = inv.get(target) else { continue };
        let winner = strictest(reqs);
        let timeout = reqs
            .iter()
            .filter(|r| r.limit.is_some())
            .map(|r| r.timeout_ms)
            .max();
        let mut contributors: BTreeSet<String> = reqs.iter().map(|r| r.device.clone()).collect();
        contributors.insert(target.clone());
        let backend = match td.abi {
            Abi::Queue | Abi::Disk => {
                desired.insert(
                    knobs::limit_path(td.abi, target),
                    Desired {
                        value: knobs::encode_limit(winner.limit),
                        owner: winner.device.clone(),
                        contributors: contributors.clone(),
                        release: false,
                    },
                );
                if let Some(ms) = timeout {
                    desired.insert(
                        knobs::timeout_path(td.abi, target),
                        Desired {
                            value: ms.to_string(),
                            owner: winner.device.clone(),
                            contributors,
                            release: false,
                        },
                    );
                }
                td.abi.describe().to_string()
            }
            Abi::None if winner.fallback == Fallback::CpuResumeLatency => {
                if td.cpus.is_empty() {
                    warnings.push(format!(
                        "{target}: no hardware queues (bio-based), no CPUs to constrain"
                    ));
                    "none".to_string()
                } else {
                    for &cpu in &td.cpus {
                        let entry = cpu_requests.entry(cpu).or_insert_with(|| {
                            (winner.limit, winner.device.clone(), BTreeSet::new())
                        });
                        let merged = resume::strictest(entry.0, winner.limit);
                        if merged != entry.0 {
                            entry.1 = winner.device.clone();
                        }
                        entry.0 = merged;
                        entry.2.extend(contributors.iter().cloned());
                    }
                    "cpu-resume-latency (static, no timeout)".to_string()
                }
            }
            Abi::None => {
                if winner.limit.is_some() {
                    warnings.push(format!(
                        "{target}: kernel has no cpu_lat_limit_us knob; not constrained (set fallback = \"cpu-resume-latency\" for a static per-CPU limit)"
                    ));
                }
                "none".to_string()
            }
        };
        for r in reqs {
            backends.push((r.device.clone(), target.clone(), backend.clone()));
        }
    }
    if !cpu_requests.is_empty() {
        let cpus: Vec<u32> = cpu_requests.keys().copied().collect();
        warnings.push(format!(
            "static fallback: pm_qos_resume_latency_us on CPUs {} holds with the disks idle too (no timeout)",
            format_cpus(&cpus)
        ));
    }
    for (cpu, (limit, owner, contributors)) in cpu_requests {
        desired.insert(
            idle::cpu_resume_latency_path(cpu),
            Desired {
                value: resume::encode(limit),
                owner,
                contributors,
                release: false,
            },
        );
    }
    if let Some(gone) = &scope.removed {
        // What the removed device alone held is reported under its name.
        devices.push(DevicePlan {
            name: gone.clone(),
            rule: None,
            targets: Vec::new(),
            backend: BTreeMap::new(),
            limit: None,
            auto: Vec::new(),
            timeout_ms: None,
            changes: Vec::new(),
        });
    }
    // Device plans by name: looked up once per path, thousands on big hosts.
    let at: HashMap<String, usize> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.clone(), i))
        .collect();
    // What blkqos wrote earlier and no rule asks for now goes back to its
    // original: the profile describes the whole tuning, not additions to it.
    for (path, s) in saved {
        if desired.contains_key(path) {
            continue;
        }
        let present = |o: &&String| at.contains_key(o.as_str());
        let removed = |o: &&String| scope.removed.as_ref() == Some(*o);
        let Some(owner) = (s.owners.iter())
            .find(|o| present(o) && !removed(o))
            .or_else(|| s.owners.iter().find(removed))
        else {
            continue;
        };
        desired.insert(
            path.clone(),
            Desired {
                value: s.original.clone(),
                owner: owner.clone(),
                contributors: s.owners.clone(),
                release: true,
            },
        );
    }
    for (dev, target, backend) in backends {
        if let Some(&i) = at.get(&dev) {
            devices[i].backend.insert(target, backend);
        }
    }

    let in_scope = in_scope(inv, scope)?;
    let mut forget = BTreeSet::new();
    let mut unread = Vec::new();
    // a disk that cannot be judged a candidate is left alone, as an
    // attribute that cannot be read is: not taken for an empty one
    for d in &inv.devices {
        if let Some((attr, e)) = &d.unread
            && in_scope.as_ref().is_none_or(|s| s.contains(&d.name))
        {
            let path = format!("block/{}/{attr}", d.name);
            warnings.push(format!(
                "{path}: cannot read it ({e}); {} left alone",
                d.name
            ));
            unread.push((path, e.clone()));
        }
    }
    for (path, want) in desired {
        if let Some(s) = &in_scope
            && want.contributors.is_disjoint(s)
        {
            continue;
        }
        let (raw, current) = match snap.value(&path) {
            Reading::Value(v) => (v, live_value(&path, v)),
            Reading::Missing => {
                warnings.push(format!("{path}: vanished while planning; skipped"));
                // Only a device that left takes its saved original with it.
                if want.release && !snap.device_present(&path) {
                    forget.insert(path);
                }
                continue;
            }
            // one attribute a driver will not show costs its own change,
            // not every disk's
            Reading::Unreadable(e) => {
                warnings.push(format!("{path}: cannot read it ({e}); left alone"));
                unread.push((path, e.clone()));
                continue;
            }
        };
        if want.release {
            forget.insert(path.clone());
        }
        let lease = on_lease(&snap.state, &path, &current);
        let base = lease.held.unwrap_or(current.as_str()).to_string();
        let mut value = want.value;
        if !want.release && crate::lease::cpuqos::cpu_of(&path).is_some() {
            // the static fallback never loosens what the CPU had before
            // blkqos (an admin's 5, CRI-O's n/a), as the lease does not
            let original = (snap.state.saved.get(&path)).map_or(base.as_str(), |s| &s.original);
            value = resume::encode(resume::strictest(
                resume::decode(original).flatten(),
                resume::decode(&value).flatten(),
            ));
        }
        if same_value(&path, &base, &value) {
            continue;
        }
        // an original going back was the disk's own choice
        if is_scheduler(&path)
            && !want.release
            && let Some(&i) = at.get(&want.owner)
        {
            let rule = devices[i].rule.as_deref().unwrap_or_default();
            warnings.extend(scheduler::check(&want.owner, rule, raw, &value)?);
        }
        // What could not be saved as read could not be put back: the state's
        // own check (that of every read) decides, so what is saved reads back.
        // (an entry saved already keeps its original; its owners grow)
        let original = (snap.state.saved.get(&path)).map_or(base.as_str(), |s| s.original.as_str());
        if let Err(why) = crate::state::check_entry(&path, original, &want.contributors) {
            warnings.push(format!(
                "{path}: left alone: what it holds now could not be saved to put back ({why})"
            ));
            continue;
        }
        let change = Change {
            after: lease.write(&value),
            lease_original: lease.entry.then(|| value.clone()),
            path,
            before: current,
            contributors: want.contributors,
        };
        if let Some(&i) = at.get(&want.owner) {
            devices[i].changes.push(change);
        }
    }
    refuse_forgetting_every_device(snap, scope, &forget)?;
    for d in &mut devices {
        scheduler_first(&mut d.changes);
    }
    if let Some(s) = &in_scope {
        devices.retain(|d| s.contains(&d.name) || !d.changes.is_empty());
    }
    // a name the state could not read back is not saved (its changes
    // were left alone above)
    let rules = (devices.iter())
        .filter(|d| crate::uevent::is_kernel_name(&d.name))
        .map(|d| (d.name.clone(), d.rule.clone()))
        .collect();
    Ok(Plan {
        devices,
        warnings,
        forget,
        disown: scope.removed.iter().cloned().collect(),
        rules,
        forget_all_rules: false,
        distrusted: snap.state.distrusted,
        unread,
    })
}

/// A plan that would forget saved originals because their devices are
/// gone, when every device with a saved original is gone at once (a
/// removed device aside, which is expected to be): far more likely a wrong
/// or half-mounted sysfs tree than every disk unplugged, and forgetting
/// cannot be undone.
fn refuse_forgetting_every_device(
    snap: &Snapshot,
    scope: &Scope,
    forget: &BTreeSet<String>,
) -> Result<(), PlanError> {
    let others: Vec<&String> = (snap.state.saved.iter())
        .filter(|(_, s)| !s.owners.iter().all(|o| scope.removed.as_ref() == Some(o)))
        .map(|(path, _)| path)
        .collect();
    if others.is_empty()
        || !others.iter().all(|p| snap.gone(p))
        || !forget.iter().any(|p| others.contains(&p))
    {
        return Ok(());
    }
    let owners: BTreeSet<&String> = (others.iter())
        .filter_map(|p| snap.state.saved.get(*p))
        .flat_map(|s| s.owners.iter())
        .collect();
    let owners: Vec<&str> = owners.into_iter().map(String::as_str).collect();
    Err(PlanError::AllGone {
        count: others.len(),
        owners: owners.join(", "),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("no block device named {0:?}")]
    NoSuchDevice(String),
    #[error("{name} is a partition of {disk}: blkqos tunes whole disks; name {disk} instead")]
    Partition { name: String, disk: String },
    #[error(
        "no block device named {0:?} here, and nothing saved for it (`blkqos list` shows the disks, `blkqos status` what blkqos set)"
    )]
    Unknown(String),
    #[error(
        "every one of the {count} saved original(s) belongs to a device that is not there ({owners}); refusing to forget them all at once: check --sysfs; if those disks really were all unplugged, `blkqos restore --forget-missing` forgets them"
    )]
    AllGone { count: usize, owners: String },
    #[error(
        "{disk}: rule {rule:?} sets scheduler {wanted:?}, which {disk} does not offer (it offers {offered})"
    )]
    Scheduler {
        disk: String,
        rule: String,
        wanted: String,
        offered: String,
    },
    #[error("{path}: cannot read: {reason}")]
    Read { path: String, reason: String },
    #[error(
        "every one of the {count} disks the saved state names is another disk now ({names}): a state from another boot, or another machine's sysfs tree; refusing to forget their originals: check --sysfs and --state-dir; if those disks really were all replaced (their remove events lost), `blkqos restore --forget-replaced` forgets what was saved for the ones before"
    )]
    AllReplaced { count: usize, names: String },
}

/// The error for a name the scan found no disk by: a partition is said
/// to be one, with its disk.
pub fn no_such_device(inv: &Inventory, name: &str) -> PlanError {
    match inv.partitions.get(name) {
        Some(disk) => PlanError::Partition {
            name: name.to_string(),
            disk: disk.clone(),
        },
        None => PlanError::NoSuchDevice(name.to_string()),
    }
}

/// The devices a scope names and the queues they resolve to; `None` for all.
fn in_scope(inv: &Inventory, scope: &Scope) -> Result<Option<BTreeSet<String>>, PlanError> {
    if scope.devices.is_empty() && scope.removed.is_none() {
        return Ok(None);
    }
    let mut s: BTreeSet<String> = scope.removed.iter().cloned().collect();
    for name in &scope.devices {
        let d = inv.get(name).ok_or_else(|| no_such_device(inv, name))?;
        s.insert(d.name.clone());
        s.extend(d.targets.iter().cloned());
    }
    Ok(Some(s))
}

/// The strictest request: the lowest limit (off counts as no limit), first wins ties.
fn strictest(reqs: &[Request]) -> &Request {
    reqs.iter()
        .reduce(|best, r| match (best.limit, r.limit) {
            (None, Some(_)) => r,
            (Some(b), Some(x)) if x < b => r,
            _ => best,
        })
        .unwrap_or_else(|| unreachable!("a target is only recorded with at least one request"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictest_prefers_any_limit_over_off_then_the_lowest() {
        let r = |device: &str, limit| Request {
            device: device.into(),
            limit,
            timeout_ms: 3,
            fallback: Fallback::None,
        };
        assert_eq!(
            strictest(&[r("a", None), r("b", Some(20)), r("c", Some(5))]).device,
            "c"
        );
        assert_eq!(strictest(&[r("a", Some(5)), r("b", Some(5))]).device, "a");
        assert_eq!(strictest(&[r("a", None), r("b", None)]).device, "a");
    }
}
