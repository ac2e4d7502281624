//! The rule a user-space lease follows, the kernel lease's: a device that
//! has I/O holds the CPUs that serve it at its limit until its timeout
//! after its last I/O; on a CPU that several devices hold, the strictest
//! limit still live wins, and a strict device that stops gives the looser
//! one's limit back when its own lapses.
//!
//! Pure: time is passed in, so that the tests drive a fake clock.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// A point on a monotonic clock (CLOCK_MONOTONIC in the process), as the
/// time since an arbitrary origin.
pub type Instant = Duration;

/// What a profile rule asks for one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Highest exit latency allowed while the device has I/O; 0 is "no
    /// exit latency at all" (polling).
    pub limit_us: u64,
    /// How long the CPUs stay held after the device's last I/O.
    pub timeout: Duration,
    /// The CPUs that serve the device: its submitters and the CPUs its
    /// completion interrupts land on.
    pub cpus: BTreeSet<u32>,
}

#[derive(Debug, Clone)]
struct Held {
    grant: Grant,
    /// When the lease lapses; `None` before the device's first I/O.
    until: Option<Instant>,
}

/// Every device's lease.
#[derive(Debug, Clone, Default)]
pub struct Leases {
    devices: BTreeMap<String, Held>,
}

impl Leases {
    /// Take a device's grant, or a changed one (profile reload, hotplug).
    /// A lease in force keeps its deadline, cut to the new timeout.
    pub fn set(&mut self, device: &str, grant: Grant, now: Instant) {
        let until = self.devices.get(device).and_then(|h| h.until);
        let until = until
            .filter(|&u| u > now)
            .map(|u| u.min(now + grant.timeout));
        self.devices
            .insert(device.to_string(), Held { grant, until });
    }

    /// Forget a device: it went, or no rule names it any more. What it
    /// held is given up at once.
    pub fn remove(&mut self, device: &str) {
        self.devices.remove(device);
    }

    pub fn devices(&self) -> impl Iterator<Item = (&str, &Grant)> {
        self.devices.iter().map(|(d, h)| (d.as_str(), &h.grant))
    }

    pub fn grant(&self, device: &str) -> Option<&Grant> {
        self.devices.get(device).map(|h| &h.grant)
    }

    /// The device had I/O at `at`: its lease holds until its timeout after.
    /// Observations may come late and out of order; none moves a deadline
    /// back.
    pub fn saw_io(&mut self, device: &str, at: Instant) {
        if let Some(h) = self.devices.get_mut(device) {
            let until = at + h.grant.timeout;
            if h.until.is_none_or(|u| u < until) {
                h.until = Some(until);
            }
        }
    }

    /// Whether the device's lease holds at `now`.
    pub fn live(&self, device: &str, now: Instant) -> bool {
        self.devices
            .get(device)
            .and_then(|h| h.until)
            .is_some_and(|u| u > now)
    }

    /// The time left of the device's lease at `now`, zero once lapsed.
    pub fn left(&self, device: &str, now: Instant) -> Duration {
        self.devices
            .get(device)
            .and_then(|h| h.until)
            .map_or(Duration::ZERO, |u| u.saturating_sub(now))
    }

    /// The limit each held CPU must have at `now`: the strictest of the
    /// live leases that hold it. A CPU no live lease holds is absent.
    pub fn wanted(&self, now: Instant) -> BTreeMap<u32, u64> {
        let mut cpus = BTreeMap::new();
        for h in self.devices.values() {
            if h.until.is_none_or(|u| u <= now) {
                continue;
            }
            for &cpu in &h.grant.cpus {
                cpus.entry(cpu)
                    .and_modify(|l: &mut u64| *l = (*l).min(h.grant.limit_us))
                    .or_insert(h.grant.limit_us);
            }
        }
        cpus
    }

    /// When the next live lease lapses after `now`: the limits may loosen
    /// then, so the caller looks again.
    pub fn next_lapse(&self, now: Instant) -> Option<Instant> {
        self.devices
            .values()
            .filter_map(|h| h.until)
            .filter(|&u| u > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn grant(limit_us: u64, timeout_ms: u64, cpus: &[u32]) -> Grant {
        Grant {
            limit_us,
            timeout: ms(timeout_ms),
            cpus: cpus.iter().copied().collect(),
        }
    }

    fn wanted(l: &Leases, at: u64) -> Vec<(u32, u64)> {
        l.wanted(ms(at)).into_iter().collect()
    }

    #[test]
    fn a_device_holds_its_cpus_from_its_io_to_its_timeout_after_the_last() {
        let mut l = Leases::default();
        l.set("nvme0n1", grant(10, 3, &[0, 1]), ms(0));
        assert_eq!(wanted(&l, 0), [], "nothing held before the first I/O");
        assert_eq!(l.next_lapse(ms(0)), None);
        l.saw_io("nvme0n1", ms(5));
        l.saw_io("nvme0n1", ms(6));
        assert_eq!(wanted(&l, 6), [(0, 10), (1, 10)]);
        assert_eq!(l.next_lapse(ms(6)), Some(ms(9)));
        assert_eq!(l.left("nvme0n1", ms(8)), ms(1));
        assert!(l.live("nvme0n1", ms(8)));
        assert_eq!(wanted(&l, 9), [], "lapsed at the timeout");
        assert!(!l.live("nvme0n1", ms(9)));
        assert_eq!(l.left("nvme0n1", ms(20)), Duration::ZERO);
        // a late report of an earlier I/O does not cut the lease short
        l.saw_io("nvme0n1", ms(20));
        l.saw_io("nvme0n1", ms(19));
        assert_eq!(l.next_lapse(ms(20)), Some(ms(23)));
    }

    #[test]
    fn the_strictest_live_limit_wins_and_a_stopped_strict_device_gives_back() {
        let mut l = Leases::default();
        l.set("nvme0n1", grant(5, 2, &[0, 1]), ms(0));
        l.set("sda", grant(50, 10, &[1, 2]), ms(0));
        l.saw_io("nvme0n1", ms(0));
        l.saw_io("sda", ms(0));
        assert_eq!(wanted(&l, 1), [(0, 5), (1, 5), (2, 50)]);
        assert_eq!(l.next_lapse(ms(1)), Some(ms(2)));
        // nvme0n1 stopped: CPU1 goes back to sda's looser limit, CPU0 free
        assert_eq!(wanted(&l, 2), [(1, 50), (2, 50)]);
        assert_eq!(l.next_lapse(ms(2)), Some(ms(10)));
        assert_eq!(wanted(&l, 10), []);
    }

    #[test]
    fn a_changed_grant_keeps_a_live_lease_within_its_new_timeout_and_remove_frees() {
        let mut l = Leases::default();
        l.set("nvme0n1", grant(10, 100, &[0]), ms(0));
        l.saw_io("nvme0n1", ms(0));
        l.set("nvme0n1", grant(20, 5, &[0, 3]), ms(1));
        assert_eq!(wanted(&l, 1), [(0, 20), (3, 20)]);
        assert_eq!(l.next_lapse(ms(1)), Some(ms(6)), "cut to the new timeout");
        l.remove("nvme0n1");
        assert_eq!(wanted(&l, 2), []);
        assert_eq!(l.grant("nvme0n1"), None);
        // I/O of a device without a grant holds nothing
        l.saw_io("nvme0n1", ms(3));
        assert_eq!(wanted(&l, 3), []);
    }
}
