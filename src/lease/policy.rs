//! The rule a user-space lease follows, the kernel lease's: a device that
//! has I/O holds the CPUs that serve it at its limit until its timeout
//! after its last I/O; on a CPU that several devices hold, the strictest
//! limit still live wins, and a strict device that stops gives the looser
//! one's limit back when its own lapses.
//!
//! One difference, for what user space pays per hold: a hold that saw a
//! single I/O bought nothing (the I/O was issued before the hold), so
//! after one, the device holds again only once it shows `min_ios` I/Os
//! within one timeout (2 by default). A disk with trickle I/O (a log
//! flush every few ms, further apart than the timeout) would otherwise
//! hold and lapse at each I/O, keeping the CPUs shallow for good at the
//! cost of a wake-up and a write per CPU each time. A burst still holds
//! from its first I/O when the hold before saw more than one; after a
//! trickle, from its second.
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
    /// While lapsed: when the I/Os counted towards a hold began, and how
    /// many were seen since.
    pending: Option<(Instant, u64)>,
    /// The I/Os seen during the current (or last) hold.
    held_ios: u64,
}

/// The I/Os a lapsed device shows within one timeout before it holds,
/// unless told otherwise.
pub const MIN_IOS: u64 = 2;

/// Every device's lease.
#[derive(Debug, Clone)]
pub struct Leases {
    devices: BTreeMap<String, Held>,
    min_ios: u64,
}

impl Default for Leases {
    fn default() -> Self {
        Leases::with_min_ios(MIN_IOS)
    }
}

impl Leases {
    /// Leases that hold once a lapsed device shows `min_ios` I/Os within
    /// one timeout (at least 1: the first I/O, the kernel lease's rule).
    pub fn with_min_ios(min_ios: u64) -> Self {
        Leases {
            devices: BTreeMap::new(),
            min_ios: min_ios.max(1),
        }
    }

    /// Take a device's grant, or a changed one (profile reload, hotplug).
    /// A lease in force keeps its deadline, cut to the new timeout.
    /// What the device showed before (a lapsed lease, I/Os counted
    /// towards the next hold, the last hold's I/Os) is kept: a rescan
    /// (SIGHUP, any block or cpu uevent) must not let trickle I/O hold.
    pub fn set(&mut self, device: &str, grant: Grant, now: Instant) {
        let before = self.devices.get(device);
        let until = (before.and_then(|h| h.until)).map(|u| {
            if u > now {
                u.min(now + grant.timeout)
            } else {
                u
            }
        });
        let pending = before.and_then(|h| h.pending);
        let held_ios = before.map_or(0, |h| h.held_ios);
        self.devices.insert(
            device.to_string(),
            Held {
                grant,
                until,
                pending,
                held_ios,
            },
        );
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

    /// The device had `ios` I/Os (at least one) seen at `at`: a live
    /// lease holds until its timeout after; a lapsed one holds at once,
    /// unless its last hold saw a single I/O: then once the I/Os seen
    /// within one timeout reach `min_ios`. Observations may come late and
    /// out of order; none moves a deadline back.
    pub fn saw_io(&mut self, device: &str, at: Instant, ios: u64) {
        let min_ios = self.min_ios;
        let Some(h) = self.devices.get_mut(device) else {
            return;
        };
        let ios = ios.max(1);
        let until = at + h.grant.timeout;
        if h.until.is_some_and(|u| u > at) {
            h.held_ios = h.held_ios.saturating_add(ios);
        } else {
            let (since, n) = match h.pending {
                Some((since, n)) if at <= since + h.grant.timeout => (since, n + ios),
                _ => (at, ios),
            };
            let need = match h.until {
                Some(_) if h.held_ios <= 1 => min_ios,
                _ => 1,
            };
            if n < need {
                h.pending = Some((since, n));
                return;
            }
            h.held_ios = n;
        }
        h.pending = None;
        if h.until.is_none_or(|u| u < until) {
            h.until = Some(until);
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

    impl Leases {
        /// One I/O seen at `at`, on the kernel's rule (the first holds).
        fn saw_io_at(&mut self, device: &str, at: Instant) {
            self.min_ios = 1;
            self.saw_io(device, at, 1);
        }
    }

    fn wanted(l: &Leases, at: u64) -> Vec<(u32, u64)> {
        l.wanted(ms(at)).into_iter().collect()
    }

    #[test]
    fn after_a_hold_of_one_io_a_device_holds_again_only_once_it_shows_min_ios() {
        let mut l = Leases::with_min_ios(2);
        l.set("sda", grant(10, 3, &[0]), ms(0));
        // the first I/O holds: nothing is known of the disk yet
        l.saw_io("sda", ms(0), 1);
        assert_eq!(wanted(&l, 0), [(0, 10)]);
        // that hold saw one I/O: trickle, one every 8 ms, holds no more
        for t in [8, 16, 24] {
            l.saw_io("sda", ms(t), 1);
            assert_eq!(wanted(&l, t), [], "at {t} ms");
        }
        // a burst holds from its second I/O within the timeout
        l.saw_io("sda", ms(30), 1);
        assert_eq!(wanted(&l, 30), []);
        l.saw_io("sda", ms(32), 1);
        assert_eq!(wanted(&l, 32), [(0, 10)]);
        assert_eq!(l.next_lapse(ms(32)), Some(ms(35)));
        l.saw_io("sda", ms(34), 1);
        assert_eq!(l.next_lapse(ms(34)), Some(ms(37)));
        assert_eq!(wanted(&l, 37), []);
        // that hold saw three: the next burst holds from its first I/O
        l.saw_io("sda", ms(50), 1);
        assert_eq!(wanted(&l, 50), [(0, 10)]);
        // one look that saw several I/Os (a stat look) holds at once
        l.saw_io("sda", ms(60), 1);
        assert_eq!(wanted(&l, 60), [], "after a hold of one I/O");
        l.saw_io("sda", ms(70), 5);
        assert_eq!(wanted(&l, 70), [(0, 10)]);
        // a rescan (the same grant set again) keeps what was seen
        l.saw_io("sda", ms(80), 1);
        assert!(l.live("sda", ms(80)));
        assert_eq!(wanted(&l, 100), []);
        l.set("sda", grant(10, 3, &[0]), ms(100));
        l.saw_io("sda", ms(101), 1);
        assert_eq!(wanted(&l, 101), [], "trickle after a rescan");
        // min_ios 1 is the kernel's rule: every first I/O holds
        let mut k = Leases::with_min_ios(1);
        k.set("sda", grant(10, 3, &[0]), ms(0));
        for t in [1, 10, 20] {
            k.saw_io("sda", ms(t), 1);
            assert_eq!(wanted(&k, t), [(0, 10)]);
        }
    }

    #[test]
    fn a_device_holds_its_cpus_from_its_io_to_its_timeout_after_the_last() {
        let mut l = Leases::default();
        l.set("nvme0n1", grant(10, 3, &[0, 1]), ms(0));
        assert_eq!(wanted(&l, 0), [], "nothing held before the first I/O");
        assert_eq!(l.next_lapse(ms(0)), None);
        l.saw_io_at("nvme0n1", ms(5));
        l.saw_io_at("nvme0n1", ms(6));
        assert_eq!(wanted(&l, 6), [(0, 10), (1, 10)]);
        assert_eq!(l.next_lapse(ms(6)), Some(ms(9)));
        assert_eq!(l.left("nvme0n1", ms(8)), ms(1));
        assert!(l.live("nvme0n1", ms(8)));
        assert_eq!(wanted(&l, 9), [], "lapsed at the timeout");
        assert!(!l.live("nvme0n1", ms(9)));
        assert_eq!(l.left("nvme0n1", ms(20)), Duration::ZERO);
        // a late report of an earlier I/O does not cut the lease short
        l.saw_io_at("nvme0n1", ms(20));
        l.saw_io_at("nvme0n1", ms(19));
        assert_eq!(l.next_lapse(ms(20)), Some(ms(23)));
    }

    #[test]
    fn the_strictest_live_limit_wins_and_a_stopped_strict_device_gives_back() {
        let mut l = Leases::default();
        l.set("nvme0n1", grant(5, 2, &[0, 1]), ms(0));
        l.set("sda", grant(50, 10, &[1, 2]), ms(0));
        l.saw_io_at("nvme0n1", ms(0));
        l.saw_io_at("sda", ms(0));
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
        l.saw_io_at("nvme0n1", ms(0));
        l.set("nvme0n1", grant(20, 5, &[0, 3]), ms(1));
        assert_eq!(wanted(&l, 1), [(0, 20), (3, 20)]);
        assert_eq!(l.next_lapse(ms(1)), Some(ms(6)), "cut to the new timeout");
        l.remove("nvme0n1");
        assert_eq!(wanted(&l, 2), []);
        assert_eq!(l.grant("nvme0n1"), None);
        // I/O of a device without a grant holds nothing
        l.saw_io_at("nvme0n1", ms(3));
        assert_eq!(wanted(&l, 3), []);
    }
}
