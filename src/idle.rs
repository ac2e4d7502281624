//! CPU idle-state tables and CPU lists, and the "auto" limit choice.

use crate::sysfs::Sysfs;

/// How far above the shallowest halting state's exit latency "auto" reaches
/// (the patched kernel's `CPU_LATENCY_LEASE_AUTO_SPAN_US`): C1E is within
/// 10 us of C1 in every intel_idle table but Snow Ridge's (15 against 2),
/// and an EPYC's C2 is not (18 against 1).
pub const AUTO_SPAN_US: u64 = 10;

/// What "auto" stands for where a CPU has no idle-state table (no cpuidle
/// driver) or no halting state enabled: a bound that, with nothing to rule
/// out, constrains nothing; written as any limit is (the queue knob, or
/// the resume latency of the fallback).
pub const AUTO_MAX_EXIT_US: u64 = 20;

/// Whether a state of this name is a polling one: the kernel's own
/// (`POLL`, poll_state.c: acpi_idle, intel_idle, haltpoll) or powerpc's
/// `snooze`, the only states its drivers flag `CPUIDLE_FLAG_POLLING`;
/// sysfs does not show the flag.
pub fn is_polling(name: &str) -> bool {
    name == "POLL" || name == "snooze"
}

#[derive(Debug, Clone, PartialEq)]
pub struct IdleState {
    pub index: u32,
    pub name: String,
    /// Exit latency in microseconds.
    pub latency_us: u64,
    /// Target residency in microseconds.
    pub residency_us: u64,
    /// `None` where the kernel's value does not parse: unknown, which a 0
    /// would misreport (a counter reset to `rate()`, a state enabled).
    pub disabled: Option<bool>,
    pub usage: Option<u64>,
    pub time_us: Option<u64>,
}

/// The idle states of one CPU in index order; empty when no cpuidle driver.
pub fn cpu_states(sysfs: &Sysfs, cpu: u32) -> Vec<IdleState> {
    let dir = format!("devices/system/cpu/cpu{cpu}/cpuidle");
    let mut states: Vec<IdleState> = sysfs
        .list(&dir)
        .into_iter()
        .filter_map(|entry| {
            let base = format!("{dir}/{entry}");
            parse_state(&entry, |attr| sysfs.attr(&format!("{base}/{attr}")))
        })
        .collect();
    states.sort_by_key(|s| s.index);
    states
}

/// One `cpuidle/stateN` directory, its attributes read through `attr`;
/// `None` for an entry that is not a state or has no usable exit latency.
pub fn parse_state(entry: &str, attr: impl Fn(&str) -> Option<String>) -> Option<IdleState> {
    let index: u32 = entry.strip_prefix("state")?.parse().ok()?;
    let num = |name: &str| attr(name).and_then(|v| v.trim().parse::<u64>().ok());
    Some(IdleState {
        index,
        name: attr("name").unwrap_or_default(),
        latency_us: num("latency")?,
        residency_us: num("residency").unwrap_or(0),
        disabled: num("disable").map(|d| d != 0),
        usage: num("usage"),
        time_us: num("time"),
    })
}

/// The state "auto" stands for on one CPU, by the rule the patched kernel
/// resolves it with: the deepest enabled halting state whose exit latency
/// is at most `AUTO_SPAN_US` above the shallowest enabled halting state's.
/// A polling state never counts ("auto" never polls), so a CPU with one
/// halting state left keeps it. `None` when no halting state is enabled
/// (nothing to rule out) or there is no table.
pub fn auto_choice(states: &[IdleState]) -> Option<&IdleState> {
    // a state whose flag does not parse counts as enabled, as the kernel
    // would only print 0 or 1
    let halting = || {
        states
            .iter()
            .filter(|s| s.disabled != Some(true) && !is_polling(&s.name))
    };
    let shallowest = halting().map(|s| s.latency_us).min()?;
    halting()
        .filter(|s| s.latency_us <= shallowest.saturating_add(AUTO_SPAN_US))
        .max_by_key(|s| (s.latency_us, s.index))
}

/// The limit "auto" means for a set of CPUs, given their idle-state tables:
/// the strictest per-CPU choice, with the chosen state's name, and at
/// least 1 us (a limit of 0 polls, also where a halt reports an exit
/// latency of 0, as acpi_idle's default C1 does); `None` when no CPU has a
/// halting state enabled.
pub fn auto_limit<'a>(tables: impl IntoIterator<Item = &'a [IdleState]>) -> Option<(u64, String)> {
    tables
        .into_iter()
        .filter_map(|t| auto_choice(t).map(|s| (s.latency_us.max(1), s.name.clone())))
        .min_by_key(|(lat, _)| *lat)
}

/// A CPU's idle-latency lease as the patched kernel reports it in
/// `cpuidle/cpu_lat_lease_limit_us` and `cpu_lat_lease_left_us`: the lease
/// renewed by every I/O of a device with a limit, lapsing its timeout
/// after the last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// No lease holds: the CPU may enter any enabled state.
    Free,
    /// States deeper than `limit_us` stay off for `left_us` more.
    Held { limit_us: u64, left_us: u64 },
}

/// The file with the limit in force on a CPU (-1: none); the time it has
/// left is beside it, in [`cpu_lease_left_path`].
pub fn cpu_lease_path(cpu: u32) -> String {
    format!("devices/system/cpu/cpu{cpu}/cpuidle/cpu_lat_lease_limit_us")
}

pub fn cpu_lease_left_path(cpu: u32) -> String {
    format!("devices/system/cpu/cpu{cpu}/cpuidle/cpu_lat_lease_left_us")
}

/// A lease file that does not read as the kernel writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {text:?} is not {expected}; that CPU's lease is left out")]
pub struct BadLease {
    pub path: String,
    pub text: String,
    pub expected: &'static str,
}

/// Reads of the pair before a lease that keeps changing between them is
/// taken as last read: each try is three small reads, and a lease changes
/// at most once a tick.
const LEASE_TRIES: usize = 3;

/// The CPU's lease; `Ok(None)` on a kernel without the attributes (one
/// without the series, or no cpuidle driver), an error naming the file
/// when it reads as something else (so that it is not silently absent).
/// The two files are two readings: the limit is read again after the
/// time, and the pair again when the limit changed in between, so that a
/// limit is not shown with the time of another.
pub fn cpu_lease(sysfs: &Sysfs, cpu: u32) -> Result<Option<Lease>, BadLease> {
    const LIMIT: &str = "a limit in microseconds or -1";
    const LEFT: &str = "microseconds left";
    let (limit_rel, left_rel) = (cpu_lease_path(cpu), cpu_lease_left_path(cpu));
    let mut lease = None;
    for _ in 0..LEASE_TRIES {
        let (Some(limit), Some(left_us)) = (
            lease_file(sysfs, &limit_rel, LIMIT, parse_limit),
            lease_file(sysfs, &left_rel, LEFT, parse_left),
        ) else {
            return Ok(None);
        };
        let (limit, left_us) = (limit?, left_us?);
        lease = Some(lease_of(limit, left_us));
        match lease_file(sysfs, &limit_rel, LIMIT, parse_limit).transpose()? {
            Some(again) if again == limit => break,
            Some(_) => {}
            None => return Ok(None),
        }
    }
    Ok(lease)
}

/// One of a CPU's two lease files, parsed; `None` where it is absent.
fn lease_file<T>(
    sysfs: &Sysfs,
    rel: &str,
    expected: &'static str,
    parse: fn(&str) -> Option<T>,
) -> Option<Result<T, BadLease>> {
    let text = sysfs.attr(rel)?;
    Some(parse(&text).ok_or_else(|| BadLease {
        path: sysfs.path(rel).display().to_string(),
        text,
        expected,
    }))
}

/// `cpu_lat_lease_limit_us`: `None` for -1 (no lease), else the limit.
fn parse_limit(text: &str) -> Option<Option<u64>> {
    match text.trim() {
        "-1" => Some(None),
        t => t.parse().ok().map(Some),
    }
}

fn parse_left(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

fn lease_of(limit: Option<u64>, left_us: u64) -> Lease {
    match limit {
        None => Lease::Free,
        Some(limit_us) => Lease::Held { limit_us, left_us },
    }
}

/// The two files' values: `-1` (and any time) when no lease holds.
pub fn parse_lease(limit: &str, left: &str) -> Option<Lease> {
    let left_us = parse_left(left)?;
    Some(lease_of(parse_limit(limit)?, left_us))
}

/// A counter of one idle state that `IdleState` does not carry (`above`,
/// `below`: entries that were too shallow or too deep for the idle period,
/// what a limit trades); `None` where the kernel does not report it.
pub fn state_counter(sysfs: &Sysfs, cpu: u32, index: u32, name: &str) -> Option<u64> {
    (sysfs.attr(&format!(
        "devices/system/cpu/cpu{cpu}/cpuidle/state{index}/{name}"
    )))?
    .trim()
    .parse()
    .ok()
}

/// Every CPU directory in the tree (`cpuN`), in order.
pub fn present_cpus(sysfs: &Sysfs) -> Vec<u32> {
    let mut cpus: Vec<u32> = (sysfs.list("devices/system/cpu").iter())
        .filter_map(|d| d.strip_prefix("cpu")?.parse().ok())
        .collect();
    cpus.sort_unstable();
    cpus
}

/// Linux's NR_CPUS tops out at 8192; leave room.
const MAX_CPUS: u32 = 65536;

/// Parse a CPU list as blk-mq prints it ("0, 1, 2") or as cpulist does ("0-3,8").
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.split([',', ' ', '\n']).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > MAX_CPUS {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
        // a list naming more CPUs than Linux supports is not a CPU list (and
        // many big ranges would otherwise take gigabytes)
        if cpus.len() > MAX_CPUS as usize {
            return None;
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

pub fn cpu_resume_latency_path(cpu: u32) -> String {
    format!("devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")
}

/// Format a CPU set compactly: 0-3,8.
pub fn format_cpus(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(index: u32, name: &str, latency_us: u64, disabled: bool) -> IdleState {
        IdleState {
            index,
            name: name.into(),
            latency_us,
            residency_us: latency_us * 3,
            disabled: Some(disabled),
            usage: Some(0),
            time_us: Some(0),
        }
    }

    /// A table after POLL, every state enabled: (name, exit latency).
    fn table(states: &[(&str, u64)]) -> Vec<IdleState> {
        let mut t = vec![st(0, "POLL", 0, false)];
        for (i, (name, us)) in states.iter().enumerate() {
            t.push(st(i as u32 + 1, name, *us, false));
        }
        t
    }

    fn auto_of(t: &[IdleState]) -> Option<(&str, u64)> {
        auto_choice(t).map(|s| (s.name.as_str(), s.latency_us))
    }

    // The test idle driver's tables (kernel-patch/test) and two more of
    // intel_idle's: "auto" keeps C1E and rules out the power-gated states,
    // also where they are shallower than 20 us (an EPYC's C2 at 18).
    #[test]
    fn auto_keeps_the_states_within_the_span_of_the_shallowest_halt() {
        let icx = table(&[("C1", 1), ("C1E", 4), ("C6", 170)]);
        let spr = table(&[("C1", 1), ("C1E", 2), ("C6", 290)]);
        let epyc = table(&[("C1", 1), ("C2", 18)]);
        let hsw = table(&[("C1", 2), ("C1E", 10), ("C3", 33), ("C6", 133)]);
        let nhm = table(&[("C1", 3), ("C1E", 10), ("C3", 20), ("C6", 200)]);
        let atom = table(&[("C1E", 10), ("C2", 20), ("C4", 100), ("C6", 140)]);
        let haltpoll = table(&[("haltpoll idle", 1)]);
        assert_eq!(auto_of(&icx), Some(("C1E", 4)));
        assert_eq!(auto_of(&spr), Some(("C1E", 2)));
        assert_eq!(auto_of(&epyc), Some(("C1", 1)));
        assert_eq!(auto_of(&hsw), Some(("C1E", 10)));
        assert_eq!(auto_of(&nhm), Some(("C1E", 10)));
        // the span counts from the shallowest halt, its bound included
        assert_eq!(auto_of(&atom), Some(("C2", 20)));
        // one halting state: it, never polling
        assert_eq!(auto_of(&haltpoll), Some(("haltpoll idle", 1)));
        assert!(auto_choice(&[]).is_none());
    }

    #[test]
    fn auto_is_never_a_limit_that_polls() {
        // acpi_idle's default C1 reports no exit latency: 1 us, not 0
        let hlt = table(&[("C1", 0), ("C2", 18)]);
        assert_eq!(auto_limit([hlt.as_slice()]), Some((1, "C1".into())));
        // powerpc's polling state is snooze, not POLL
        let mut pseries = vec![st(0, "snooze", 0, false), st(1, "CEDE", 12, false)];
        assert_eq!(auto_of(&pseries), Some(("CEDE", 12)));
        pseries[1].disabled = Some(true);
        assert_eq!(auto_limit([pseries.as_slice()]), None);
    }

    #[test]
    fn auto_counts_only_enabled_halting_states() {
        let mut icx = table(&[("C1", 1), ("C1E", 4), ("C6", 170)]);
        icx[2].disabled = Some(true);
        assert_eq!(auto_of(&icx), Some(("C1", 1)));
        // C1 off: the span starts at C1E
        icx[1].disabled = Some(true);
        icx[2].disabled = Some(false);
        assert_eq!(auto_of(&icx), Some(("C1E", 4)));
        // every halt but C6 off: C6 stays allowed rather than polling
        icx[2].disabled = Some(true);
        assert_eq!(auto_of(&icx), Some(("C6", 170)));
        // nothing halts: nothing to rule out
        icx[3].disabled = Some(true);
        assert_eq!(auto_of(&icx), None);
    }

    #[test]
    fn leases_as_the_kernel_prints_them() {
        assert_eq!(parse_lease("-1\n", "0\n"), Some(Lease::Free));
        assert_eq!(
            parse_lease("4\n", "2875\n"),
            Some(Lease::Held {
                limit_us: 4,
                left_us: 2875
            })
        );
        for (limit, left) in [
            ("", "0"),
            ("4", ""),
            ("4", "x"),
            ("x", "0"),
            ("4 1", "2"),
            ("-2", "0"),
        ] {
            assert_eq!(parse_lease(limit, left), None, "{limit:?} {left:?}");
        }
    }

    /// A tree laid out as the kernel's: the lease of CPU 1 in its two files.
    fn lease_tree(limit: &str, left: Option<&str>) -> (tempfile::TempDir, Sysfs) {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("devices/system/cpu/cpu1/cpuidle");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("cpu_lat_lease_limit_us"), limit).expect("write");
        if let Some(left) = left {
            std::fs::write(d.join("cpu_lat_lease_left_us"), left).expect("write");
        }
        let sysfs = Sysfs::new(dir.path());
        (dir, sysfs)
    }

    #[test]
    fn a_cpu_lease_is_read_from_its_two_files_and_a_bad_one_is_named() {
        let (_d, sysfs) = lease_tree("10\n", Some("4000\n"));
        assert_eq!(
            cpu_lease(&sysfs, 1),
            Ok(Some(Lease::Held {
                limit_us: 10,
                left_us: 4000
            }))
        );
        assert_eq!(cpu_lease(&sysfs, 0), Ok(None), "no cpuidle directory");
        let (_d, sysfs) = lease_tree("-1\n", None);
        assert_eq!(cpu_lease(&sysfs, 1), Ok(None), "half a lease is none");
        let (_d, sysfs) = lease_tree("10 4000\n", Some("0\n"));
        let e = cpu_lease(&sysfs, 1).expect_err("v3's one file");
        assert!(
            e.path.ends_with("cpu1/cpuidle/cpu_lat_lease_limit_us"),
            "{e}"
        );
        assert!(
            e.to_string().contains("a limit in microseconds or -1"),
            "{e}"
        );
        let (_d, sysfs) = lease_tree("10\n", Some("soon\n"));
        let e = cpu_lease(&sysfs, 1).expect_err("bad time");
        assert!(e.path.ends_with("cpu_lat_lease_left_us"), "{e}");
    }

    #[test]
    fn cpu_lists_in_both_kernel_formats() {
        assert_eq!(parse_cpu_list("0, 1, 2").unwrap(), [0, 1, 2]);
        assert_eq!(parse_cpu_list("0-2,8\n").unwrap(), [0, 1, 2, 8]);
        assert!(parse_cpu_list("x").is_none());
        assert!(parse_cpu_list("3-1").is_none());
        // found while writing the fuzz target: many big ranges once took gigabytes
        let many = vec!["0-65535"; 4000].join(",");
        assert!(parse_cpu_list(&many).is_none());
        assert_eq!(parse_cpu_list("0-65535").map(|c| c.len()), Some(65536));
        assert_eq!(format_cpus(&[8, 0, 1, 2, 4]), "0-2,4,8");
    }
}
