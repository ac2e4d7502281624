//! The user-space leases a profile asks for (`blkqos lease`), per queue.

use super::*;

/// One queue's user-space lease (`blkqos lease`): the strictest limit of
/// the devices whose I/O lands on it, the longest of their timeouts, and
/// the CPUs that serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    pub limit_us: u64,
    pub timeout_ms: u64,
    pub cpus: BTreeSet<u32>,
    /// The devices whose rules ask for it (the queue itself, an array on it).
    pub devices: BTreeSet<String>,
}

/// The user-space leases `profile` asks for: one per request queue without
/// the kernel's knobs that a rule's device resolves to. Queues with the
/// knobs are the kernel lease's (apply sets them) and are left out, as are
/// queues with no CPUs to hold (bio-based).
pub fn lease_grants(
    profile: &Profile,
    snap: &Snapshot,
) -> (BTreeMap<String, LeaseGrant>, Vec<String>) {
    let inv = &snap.inventory;
    let mut grants: BTreeMap<String, LeaseGrant> = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut auto_cache: BTreeMap<String, Option<u64>> = BTreeMap::new();
    for d in inv.visible() {
        let Some(rule) = owning_rule(profile, d) else {
            continue;
        };
        let eff = profile.effective(rule);
        for t in &d.targets {
            let Some(td) = inv.get(t) else { continue };
            // apply's static hold: both writing the same CPUs' values would
            // each take the other's for the original
            if eff.fallback == Fallback::CpuResumeLatency && td.abi == Abi::None {
                warnings.push(format!(
                    "{}: rule {:?} sets fallback = \"cpu-resume-latency\" (apply's static hold, for good); blkqos lease leaves it to apply: drop the fallback for a lease",
                    d.name, rule.name
                ));
                continue;
            }
            let us = match eff.limit {
                None | Some(Limit::Off) => continue,
                Some(Limit::Us(n)) => n,
                Some(Limit::Auto) => {
                    let key = format_cpus(&td.cpus);
                    let us = *auto_cache.entry(key).or_insert_with(|| {
                        idle::auto_limit(td.cpus.iter().map(|&c| snap.idle_states(c)))
                            .map(|(us, _)| us)
                    });
                    us.unwrap_or(AUTO_MAX_EXIT_US)
                }
            };
            if td.abi != Abi::None {
                continue;
            }
            if td.cpus.is_empty() {
                warnings.push(format!(
                    "{t}: no hardware queues (bio-based), no CPUs to hold; not leased"
                ));
                continue;
            }
            let g = grants.entry(t.clone()).or_insert_with(|| LeaseGrant {
                limit_us: us,
                timeout_ms: eff.timeout_ms,
                cpus: td.cpus.iter().copied().collect(),
                devices: BTreeSet::new(),
            });
            g.limit_us = g.limit_us.min(us);
            g.timeout_ms = g.timeout_ms.max(eff.timeout_ms);
            g.devices.insert(d.name.clone());
        }
    }
    warnings.dedup();
    (grants, warnings)
}

/// A CPU value as `blkqos lease` leaves it: whether the state has the
/// lease's entry for it, and, where a running lease holds it now (its
/// lease.json, read under the state lock), the value under the hold and
/// the hold. A lease that no longer runs holds nothing: what it left is
/// taken over.
pub struct OnLease<'a> {
    pub entry: bool,
    /// The value under the hold, where the CPU is held.
    pub held: Option<&'a str>,
    hold: Option<&'a str>,
}

impl OnLease<'_> {
    /// What to write for `value` to be the CPU's: on a CPU held, the
    /// stricter of it and the hold, which the lease's lapse ends.
    pub fn write(&self, value: &str) -> String {
        match self.hold {
            Some(h) => resume::encode(resume::strictest(
                resume::decode(value).flatten(),
                resume::decode(h).flatten(),
            )),
            None => value.to_string(),
        }
    }
}

pub fn on_lease<'a>(state: &'a crate::state::State, path: &str, current: &'a str) -> OnLease<'a> {
    let l = state.leases.get(path);
    let hold = state.held.get(path).map(String::as_str);
    OnLease {
        entry: l.is_some(),
        held: hold.map(|_| l.map_or(current, |l| l.original.as_str())),
        hold,
    }
}
