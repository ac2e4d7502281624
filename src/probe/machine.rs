//! What the measurement depends on besides the disk: the idle driver and
//! governor, the guest halt-polling setting, the hypervisor, and the idle
//! table of the serving CPUs.

use super::sample::TableState;
use crate::idle;
use crate::sysfs::Sysfs;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// `cpuidle/current_driver`: `none` (or absent) where no driver runs,
    /// and a limit rules nothing out.
    pub cpuidle_driver: Option<String>,
    pub cpuidle_governor: Option<String>,
    /// The haltpoll governor's polling before a halt, in a KVM guest: 0
    /// leaves polling to whoever holds the CPUs (the lease at limit 0).
    pub guest_halt_poll_ns: Option<u64>,
    /// A hypervisor's name when the CPU says it runs under one.
    pub virtualized: Option<String>,
}

impl Machine {
    pub fn read(sysfs: &Sysfs) -> Machine {
        let attr = |rel: &str| sysfs.attr(rel).filter(|v| !v.is_empty());
        let governor = attr("devices/system/cpu/cpuidle/current_governor")
            .or_else(|| attr("devices/system/cpu/cpuidle/current_governor_ro"));
        Machine {
            cpuidle_driver: attr("devices/system/cpu/cpuidle/current_driver"),
            cpuidle_governor: governor,
            guest_halt_poll_ns: attr("module/haltpoll/parameters/guest_halt_poll_ns")
                .and_then(|v| v.parse().ok()),
            virtualized: hypervisor(sysfs),
        }
    }

    /// Why a limit cannot matter here, if it cannot.
    pub fn nothing_to_hold(&self, table: &[TableState]) -> Option<String> {
        if table.is_empty() || self.cpuidle_driver.as_deref().is_none_or(|d| d == "none") {
            return Some(format!(
                "no cpuidle driver (current_driver: {}): the CPUs idle in the architecture's default (a halt) whatever the limit, so a lease rules nothing out",
                self.cpuidle_driver.as_deref().unwrap_or("absent")
            ));
        }
        if table.iter().filter(|s| !s.disabled).count() < 2 {
            return Some(
                "one idle state enabled: a limit has nothing to choose between".to_string(),
            );
        }
        None
    }
}

/// The hypervisor, from `/sys/hypervisor/type` (Xen) or the DMI vendor;
/// `Some("unknown")` where only the CPU's hypervisor flag says so.
fn hypervisor(sysfs: &Sysfs) -> Option<String> {
    if let Some(t) = sysfs.attr("hypervisor/type") {
        return Some(t);
    }
    let flagged = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
        c.lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
    });
    let vendor = sysfs
        .attr("class/dmi/id/sys_vendor")
        .filter(|v| !v.is_empty());
    match (flagged, vendor) {
        (true, Some(v)) => Some(v),
        (true, None) => Some("unknown".to_string()),
        (false, _) => None,
    }
}

/// The idle table of `cpus`: the first CPU's states, each disabled if it
/// is on any of them.
pub fn table(sysfs: &Sysfs, cpus: &[u32]) -> Vec<TableState> {
    let Some(&first) = cpus.first() else {
        return Vec::new();
    };
    let mut out: Vec<TableState> = (idle::cpu_states(sysfs, first).into_iter())
        .map(|s| TableState {
            index: s.index,
            name: s.name,
            exit_latency_us: s.latency_us,
            target_residency_us: s.residency_us,
            disabled: s.disabled == Some(true),
        })
        .collect();
    for &cpu in &cpus[1..] {
        for s in idle::cpu_states(sysfs, cpu) {
            if s.disabled == Some(true)
                && let Some(t) = out.iter_mut().find(|t| t.index == s.index)
            {
                t.disabled = true;
            }
        }
    }
    out
}

/// The exit latency of the shallowest enabled halting state: a polling
/// state is not one (`idle::is_polling`: POLL, powerpc's snooze), nor a
/// state of exit 0.
pub fn c1_limit(table: &[TableState]) -> Option<u64> {
    (table.iter())
        .filter(|s| !s.disabled && !crate::idle::is_polling(&s.name) && s.exit_latency_us > 0)
        .map(|s| s.exit_latency_us)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(index: u32, name: &str, exit: u64) -> TableState {
        TableState {
            index,
            name: name.to_string(),
            exit_latency_us: exit,
            target_residency_us: exit * 3,
            disabled: false,
        }
    }

    #[test]
    fn c1_is_the_shallowest_halt_not_poll() {
        let icx = [
            state(0, "POLL", 0),
            state(1, "C1", 1),
            state(2, "C1E", 4),
            state(3, "C6", 170),
        ];
        assert_eq!(c1_limit(&icx), Some(1));
        let mut off = icx.clone();
        off[1].disabled = true;
        assert_eq!(c1_limit(&off), Some(4));
        assert_eq!(c1_limit(&[state(0, "POLL", 0)]), None);
    }

    #[test]
    fn no_driver_or_one_state_holds_nothing() {
        let m = |d: Option<&str>| Machine {
            cpuidle_driver: d.map(str::to_string),
            cpuidle_governor: None,
            guest_halt_poll_ns: None,
            virtualized: None,
        };
        let halt = [state(0, "POLL", 0), state(1, "haltpoll idle", 1)];
        assert!(
            m(Some("none"))
                .nothing_to_hold(&halt)
                .unwrap()
                .contains("no cpuidle driver")
        );
        assert!(m(None).nothing_to_hold(&halt).is_some());
        assert!(m(Some("haltpoll")).nothing_to_hold(&[]).is_some());
        assert!(m(Some("haltpoll")).nothing_to_hold(&halt[..1]).is_some());
        assert_eq!(m(Some("haltpoll")).nothing_to_hold(&halt), None);
    }
}
