//! What the lease says of its lapses, and how it watches a disk's
//! tracepoint.

use super::*;

/// The values put back at lapses, logged: the first, then at most once a
/// minute with the count since. A lapse writes over whatever the CPU
/// reads, so a value someone else wrote that equals the hold (which the
/// lease cannot tell from its own) is undone here, and this is where it
/// shows.
#[derive(Default)]
pub(super) struct LapseLog {
    said: Option<Instant>,
    since: u64,
}

impl LapseLog {
    const EVERY: Duration = Duration::from_secs(60);

    pub(super) fn note(&mut self, writes: &[(u32, String, bool)], now: Instant) {
        let back: Vec<String> = (writes.iter())
            .filter(|(_, _, hold)| !hold)
            .map(|(c, v, _)| format!("cpu{c}={v}"))
            .collect();
        if back.is_empty() {
            return;
        }
        self.since += 1;
        if self
            .said
            .is_some_and(|t| now.duration_since(t) < Self::EVERY)
        {
            return;
        }
        let more = match self.since {
            1 => String::new(),
            n => format!(" ({n} lapses since the last said)"),
        };
        log::info!("lapse: put back {}{more}", back.join(" "));
        self.said = Some(now);
        self.since = 0;
    }
}

/// Watch a disk's issue tracepoint on the online CPUs of its grant, unless
/// it already is, as the same number on the same CPUs.
pub(super) fn watch(
    w: &mut IssueWatch,
    sysfs: &crate::sysfs::Sysfs,
    disk: &str,
    g: &LeaseGrant,
) -> std::io::Result<()> {
    let dev = sysfs.read(&format!("block/{disk}/dev"))?;
    let (major, minor) = dev
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| std::io::Error::other(format!("block/{disk}/dev reads {dev:?}")))?;
    // an offline CPU issues nothing, and has no events to open
    let online = sysfs
        .attr("devices/system/cpu/online")
        .and_then(|l| crate::idle::parse_cpu_list(&l));
    let cpus: Vec<u32> = (g.cpus.iter().copied())
        .filter(|c| online.as_ref().is_none_or(|o| o.contains(c)))
        .collect();
    if w.watches_as(disk, major, minor, &cpus) {
        return Ok(());
    }
    w.add(disk, major, minor, &cpus)
}
