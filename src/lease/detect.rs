//! How `blkqos lease` sees that a device has I/O.
//!
//! - [`StatPoll`] reads each disk's `stat` (Documentation/block/stat.rst):
//!   I/O completed since the last look, or in flight now. It costs the I/O
//!   path nothing and works on every kernel, but sees a burst only at its
//!   next look: a lease renewed by it lapses up to one look late, and one
//!   that lapsed starts up to one look after the burst's first I/O.
//! - [`crate::lease::tracepoint::IssueWatch`] arms the `block:block_rq_issue`
//!   tracepoint for a device whose lease lapsed, so that the first I/O of the
//!   next burst wakes the process; it is disarmed again while the lease
//!   holds, when `StatPoll` renews it at no cost to the I/O path.

use crate::sysfs::Sysfs;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt as _;

/// The counters that say a disk had I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// Requests completed: reads, writes, discards and flushes (the last
    /// two where the kernel counts them).
    done: u64,
    in_flight: u64,
}

/// `stat`'s fields: reads completed (0), writes completed (4), in flight
/// (8), discards completed (11, since 4.18), flushes completed (15, 5.5).
fn parse(text: &str) -> Option<Counts> {
    let f: Vec<u64> = (text.split_ascii_whitespace())
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    if f.len() < 11 {
        return None;
    }
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    Some(Counts {
        done: at(0)
            .wrapping_add(at(4))
            .wrapping_add(at(11))
            .wrapping_add(at(15)),
        in_flight: at(8),
    })
}

/// Each device's counters at the last look, and its `stat` kept open: a
/// look while a lease holds (twice a timeout) is one `pread`.
#[derive(Debug, Default)]
pub struct StatPoll {
    last: BTreeMap<String, Counts>,
    files: BTreeMap<String, File>,
}

impl StatPoll {
    /// How many I/Os `device` had since the last look: those completed,
    /// and those in flight now (a request in flight at two looks counts
    /// at both: a lower bound would hold later, not wrongly). The first
    /// look at a device counts only what is in flight. An unreadable
    /// `stat` (the disk going away) is none, and the next look compares
    /// with the last one read.
    pub fn ios(&mut self, sysfs: &Sysfs, device: &str) -> u64 {
        let Some(now) = self.read(sysfs, device).and_then(|t| parse(&t)) else {
            return 0;
        };
        let before = self.last.insert(device.to_string(), now);
        let done = before.map_or(0, |b| now.done.wrapping_sub(b.done));
        done.saturating_add(now.in_flight)
    }

    /// Forget a device that went.
    pub fn forget(&mut self, device: &str) {
        self.last.remove(device);
        self.files.remove(device);
    }

    /// `stat` as it reads now; a file that fails is opened again at the
    /// next look (a disk that went and came back under its name).
    fn read(&mut self, sysfs: &Sysfs, device: &str) -> Option<String> {
        if !self.files.contains_key(device) {
            let f = sysfs.open_attr(&format!("block/{device}/stat")).ok()?;
            self.files.insert(device.to_string(), f);
        }
        // 17 counters of at most 20 digits
        let mut buf = [0u8; 1024];
        match self.files.get(device)?.read_at(&mut buf, 0) {
            Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(_) => {
                self.files.remove(device);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn completions_or_requests_in_flight_are_io_and_a_quiet_disk_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("block/sda/stat");
        fs::create_dir_all(stat.parent().unwrap()).unwrap();
        let sysfs = Sysfs::new(dir.path());
        let set = |line: &str| fs::write(&stat, line).unwrap();
        let mut p = StatPoll::default();
        // a 6.12 line: 17 fields
        set("  100 0 800 5   20 0 160 3   0  9 8   0 0 0 0   4 1\n");
        assert_eq!(p.ios(&sysfs, "sda"), 0, "first look, nothing in flight");
        assert_eq!(p.ios(&sysfs, "sda"), 0, "nothing since");
        set("  101 0 808 5   20 0 160 3   0  9 8   0 0 0 0   4 1\n");
        assert!(p.ios(&sysfs, "sda") > 0, "a read completed");
        set("  101 0 808 5   20 0 160 3   1  9 8   0 0 0 0   4 1\n");
        assert!(p.ios(&sysfs, "sda") > 0, "one in flight");
        set("  101 0 808 5   20 0 160 3   0  9 8   0 0 0 0   5 1\n");
        assert!(p.ios(&sysfs, "sda") > 0, "a flush completed");
        // an old kernel's 11 fields
        let mut p = StatPoll::default();
        set("101 0 808 5 20 0 160 3 0 9 8\n");
        assert_eq!(p.ios(&sysfs, "sda"), 0);
        set("101 0 808 5 21 0 168 3 0 9 8\n");
        assert!(p.ios(&sysfs, "sda") > 0, "a write completed");
        assert_eq!(p.ios(&sysfs, "sda"), 0);
        set("");
        assert_eq!(p.ios(&sysfs, "sda"), 0);
        set("101 0 808 5 22 0 176 3 0 9 8\n");
        assert!(p.ios(&sysfs, "sda") > 0, "against the last line read");
        assert_eq!(p.ios(&sysfs, "nvme9n1"), 0, "no such disk");
    }
}
