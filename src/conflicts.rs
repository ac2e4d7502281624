//! Settings outside blkqos that fight or override it, reported by `status`:
//! idle states disabled by hand, per-CPU resume latencies blkqos did not
//! write, holders of /dev/cpu_dma_latency, and udev rules or a TuneD
//! profile that set the same things.

use crate::idle;
use crate::state::State;
use crate::sysfs::Sysfs;
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::Path;

/// What kind of thing works against blkqos, for counting (`metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    IdleStateDisabled,
    ResumeLatency,
    CpuDmaLatency,
    UdevRule,
    Tuned,
    /// Values a `blkqos lease` that no longer runs left on the CPUs.
    LeaseLeft,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::IdleStateDisabled => "idle-state-disabled",
            Kind::ResumeLatency => "resume-latency",
            Kind::CpuDmaLatency => "cpu-dma-latency",
            Kind::UdevRule => "udev-rule",
            Kind::Tuned => "tuned",
            Kind::LeaseLeft => "lease-left",
        }
    }
}

/// One finding: its kind, and the sentence `status` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub kind: Kind,
    pub message: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn conflict(kind: Kind, message: String) -> Conflict {
    Conflict { kind, message }
}

/// Attributes another tool might set too.
const WATCHED: [&str; 3] = [
    "cpu_lat_limit_us",
    "cpu_lat_timeout_ms",
    "pm_qos_resume_latency_us",
];

/// Whether a `blkqos lease` runs on the state directory read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseSeen {
    Running,
    NotRunning,
    /// The state could not be read (root's, read by another user): a
    /// value could be a lease's or anyone's.
    Unknown,
}

impl LeaseSeen {
    /// What the readers (status, metrics) can tell of the lease on the
    /// state directory `dir`, the state read or not.
    pub fn of(dir: &Path, state_readable: bool) -> LeaseSeen {
        match (crate::lease::published::running(dir), state_readable) {
            (Some(_), _) => LeaseSeen::Running,
            (None, true) => LeaseSeen::NotRunning,
            (None, false) => LeaseSeen::Unknown,
        }
    }
}

/// What the sysfs tree shows: idle states switched off, per-CPU resume
/// latencies that are not blkqos's own, and those a lease that no longer
/// runs left.
pub fn in_sysfs(sysfs: &Sysfs, state: &State, lease: LeaseSeen) -> Vec<Conflict> {
    let mut disabled: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut found = Vec::new();
    for cpu_dir in sysfs.list("devices/system/cpu") {
        let Some(cpu) = cpu_dir
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        for s in idle::cpu_states(sysfs, cpu) {
            if s.disabled == Some(true) {
                disabled.entry(s.name.clone()).or_default().push(cpu);
            }
        }
        let path = idle::cpu_resume_latency_path(cpu);
        // a value blkqos lease writes there is its own; the original it
        // saved, when not "0", is still someone else's
        let leased = |v: &str| {
            (state.leases.get(&path))
                .is_some_and(|s| v != s.original && crate::lease::cpuqos::ours(s, v))
        };
        let Some(v) = sysfs.attr(&path).filter(|v| v != "0") else {
            continue;
        };
        // before apply's own values: a dead lease's hold over one of
        // them is flagged too
        if leased(&v) {
            if lease == LeaseSeen::NotRunning
                && let Some(s) = state.leases.get(&path)
            {
                found.push(conflict(
                    Kind::LeaseLeft,
                    format!(
                        "cpu{cpu}: pm_qos_resume_latency_us = {v} was left by a blkqos lease \
                         that is not running (killed?); `blkqos lease --put-back` or \
                         `blkqos restore` puts back {:?}",
                        s.original
                    ),
                ));
            }
            continue;
        }
        if state.saved.contains_key(&path) {
            continue;
        }
        let whose = match lease {
            LeaseSeen::Unknown => {
                "was set outside blkqos or by a running blkqos lease (the state \
                 directory cannot be read to tell: run as root)"
            }
            _ => "was set outside blkqos",
        };
        found.push(conflict(
            Kind::ResumeLatency,
            format!(
                "cpu{cpu}: pm_qos_resume_latency_us = {v} {whose} (a static limit on that CPU)"
            ),
        ));
    }
    for (name, cpus) in disabled {
        found.insert(
            0,
            conflict(
                Kind::IdleStateDisabled,
                format!(
                    "idle state {name} is disabled by hand on cpu {}: those CPUs never \
                     enter it, whatever blkqos sets",
                    idle::format_cpus(&cpus)
                ),
            ),
        );
    }
    found
}

/// What `on_host` found, and how many processes it could not look into:
/// without CAP_SYS_PTRACE (the metrics unit has no capabilities) the kernel
/// refuses /proc/PID/fd of other users' processes and of those with more
/// capabilities, so for those whether they hold /dev/cpu_dma_latency is
/// unknown, not "no".
#[derive(Debug, Default)]
pub struct HostFindings {
    pub found: Vec<Conflict>,
    pub unchecked_pids: usize,
    /// The first few of them, to name.
    pub unchecked: Vec<String>,
}

/// What the host shows: processes holding /dev/cpu_dma_latency (a global
/// limit for as long as they keep it open), other udev rules that write the
/// watched attributes, and a TuneD profile that forces a latency.
pub fn on_host(etc: &Path, lib: &Path, proc: &Path) -> HostFindings {
    let mut found = Vec::new();
    let mut unchecked_pids = 0;
    let mut unchecked = Vec::new();
    let denied = |e: &std::io::Error| {
        use rustix::io::Errno;
        matches!(Errno::from_io_error(e), Some(Errno::ACCESS | Errno::PERM))
    };
    for entry in read_dir(proc) {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let fds = match fs::read_dir(entry.path().join("fd")) {
            Ok(d) => d,
            Err(e) if denied(&e) => {
                unchecked_pids += 1;
                if unchecked.len() < 5 {
                    unchecked.push(pid);
                }
                continue;
            }
            // gone meanwhile (ENOENT, ESRCH) or a kernel thread: not a holder
            Err(_) => continue,
        };
        let mut holds = false;
        let mut refused = false;
        for fd in fds.flatten() {
            match fs::read_link(fd.path()) {
                Ok(t) if t == Path::new("/dev/cpu_dma_latency") => holds = true,
                Ok(_) => {}
                Err(e) if denied(&e) => refused = true,
                Err(_) => {}
            }
        }
        if refused && !holds {
            unchecked_pids += 1;
            if unchecked.len() < 5 {
                unchecked.push(pid.clone());
            }
        }
        if holds {
            let comm = fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            found.push(conflict(
                Kind::CpuDmaLatency,
                format!(
                    "pid {pid} ({}) holds /dev/cpu_dma_latency: a global limit on every CPU \
                     while it stays open",
                    comm.trim()
                ),
            ));
        }
    }
    for dir in [etc.join("udev/rules.d"), lib.join("udev/rules.d")] {
        for rule in read_dir(&dir) {
            let name = rule.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".rules") || name == "90-blkqos.rules" {
                continue;
            }
            let text = fs::read_to_string(rule.path()).unwrap_or_default();
            for attr in WATCHED.iter().filter(|a| text.contains(*a)) {
                found.push(conflict(
                    Kind::UdevRule,
                    format!("{}: another udev rule sets {attr}", rule.path().display()),
                ));
            }
        }
    }
    if let Ok(active) = fs::read_to_string(etc.join("tuned/active_profile")) {
        for profile in active.split_whitespace() {
            let conf = [
                etc.join("tuned").join(profile).join("tuned.conf"),
                lib.join("tuned").join(profile).join("tuned.conf"),
            ]
            .into_iter()
            .find_map(|p| fs::read_to_string(p).ok())
            .unwrap_or_default();
            if conf
                .lines()
                .any(|l| l.trim_start().starts_with("force_latency"))
            {
                found.push(conflict(
                    Kind::Tuned,
                    format!(
                        "TuneD profile {profile} sets force_latency: it holds \
                         /dev/cpu_dma_latency for every CPU"
                    ),
                ));
            }
        }
    }
    HostFindings {
        found,
        unchecked_pids,
        unchecked,
    }
}

fn read_dir(dir: &Path) -> Vec<fs::DirEntry> {
    let mut v: Vec<fs::DirEntry> = fs::read_dir(dir)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    v.sort_by_key(|e| e.file_name());
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Abi;
    use crate::fixture::Fixture;
    use std::os::unix::fs::symlink;

    #[test]
    fn disabled_states_and_foreign_resume_latency_are_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = Fixture::new(dir.path(), 4, Abi::Queue);
        let sysfs = Sysfs::new(dir.path());
        let mut state = State::default();
        assert!(
            in_sysfs(&sysfs, &state, LeaseSeen::NotRunning).is_empty(),
            "a clean tree is clean"
        );

        let states = sysfs.list("devices/system/cpu/cpu2/cpuidle");
        let deepest = states.last().expect("idle states");
        for cpu in [2, 3] {
            f.put(
                &format!("devices/system/cpu/cpu{cpu}/cpuidle/{deepest}/disable"),
                "1",
            );
        }
        let p1 = idle::cpu_resume_latency_path(1);
        let p0 = idle::cpu_resume_latency_path(0);
        f.put(&p1, "10");
        f.put(&p0, "n/a");
        state.saved.insert(
            p0,
            crate::state::Saved {
                original: "0".into(),
                owners: ["nvme0n1".to_string()].into(),
                written: None,
            },
        );
        let found = in_sysfs(&sysfs, &state, LeaseSeen::NotRunning);
        let kinds: Vec<Kind> = found.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [Kind::IdleStateDisabled, Kind::ResumeLatency]);
        let found: Vec<String> = found.into_iter().map(|c| c.message).collect();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].contains("disabled by hand on cpu 2-3"),
            "{found:?}"
        );
        assert!(found[1].starts_with("cpu1: pm_qos_resume_latency_us = 10"));
    }

    #[test]
    fn host_holders_rules_and_tuned_are_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (etc, lib, proc) = (
            dir.path().join("etc"),
            dir.path().join("lib"),
            dir.path().join("proc"),
        );
        let put = |p: &Path, text: &str| {
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(p, text).expect("write");
        };
        assert!(on_host(&etc, &lib, &proc).found.is_empty());

        put(&proc.join("4242/comm"), "latencyd\n");
        fs::create_dir_all(proc.join("4242/fd")).expect("mkdir");
        symlink("/dev/cpu_dma_latency", proc.join("4242/fd/3")).expect("ln");
        put(&proc.join("77/comm"), "bash\n");
        fs::create_dir_all(proc.join("77/fd")).expect("mkdir");
        symlink("/dev/null", proc.join("77/fd/0")).expect("ln");
        put(
            &etc.join("udev/rules.d/60-nvme.rules"),
            "ACTION==\"add\", ATTR{queue/cpu_lat_limit_us}=\"0\"\n",
        );
        put(
            &lib.join("udev/rules.d/90-blkqos.rules"),
            "RUN+=\"blkqos udev\" # cpu_lat_limit_us\n",
        );
        put(&etc.join("tuned/active_profile"), "latency-performance\n");
        put(
            &lib.join("tuned/latency-performance/tuned.conf"),
            "[cpu]\nforce_latency=cstate.id_no_zero:1|3\n",
        );
        let found = on_host(&etc, &lib, &proc).found;
        let kinds: Vec<Kind> = found.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [Kind::CpuDmaLatency, Kind::UdevRule, Kind::Tuned]);
        let found: Vec<String> = found.into_iter().map(|c| c.message).collect();
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("pid 4242 (latencyd) holds"));
        assert!(found[1].contains("60-nvme.rules: another udev rule sets cpu_lat_limit_us"));
        assert!(found[2].starts_with("TuneD profile latency-performance"));
    }
}
