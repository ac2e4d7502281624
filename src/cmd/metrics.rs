//! `metrics`: what blkqos set and what it bought, as Prometheus text for the
//! node_exporter textfile collector: per disk the knobs, the owning rule and
//! the I/O counters; per CPU the live lease and each idle state's counters;
//! conflicts and saved originals. Reads only, so it works unprivileged and
//! on any kernel: families the kernel lacks (the knobs, the lease) are
//! absent, not zero.

use super::Ctx;
use crate::abi::{Abi, knobs};
use crate::conflicts::{self, Kind};
use crate::discover::{self, Detail, Device, Extent, Inventory};
use crate::error::Error;
use crate::idle::{self, Lease};
use crate::iostat::{self, SECTOR_BYTES};
use crate::metrics::{Family, Type, int, micros, millis, render};
use crate::plan::owning_rule;
use crate::profile::Profile;
use crate::state::State;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::Instant;

pub fn metrics(
    ctx: &Ctx,
    profile: &Path,
    output: Option<&Path>,
    out: &mut String,
) -> Result<u8, Error> {
    let text = collect(ctx, profile)?;
    match output {
        Some(path) => write_textfile(path, &text).map_err(|source| Error::Output {
            path: path.to_path_buf(),
            source,
        })?,
        None => out.push_str(&text),
    }
    Ok(0)
}

/// The exposition of this machine's state, now.
pub fn collect(ctx: &Ctx, profile_path: &Path) -> Result<String, Error> {
    let start = Instant::now();
    // Read-only use: the rule label is the one thing taken from it, so the
    // trust checks of a profile root applies do not apply here.
    let profile = match Profile::load(profile_path) {
        Ok(p) => Some(p),
        Err(e) => {
            log::warn!("{e}: the rule label is left empty");
            None
        }
    };
    let identity = (profile.iter()).any(|p| p.rules.iter().any(|r| r.matcher.uses_identity()));
    let inv = discover::scan(&ctx.sysfs, Extent::All, Detail { identity })?;
    // A state that cannot be trusted is reported as unreadable: metrics
    // describe the machine, and a scrape must not fail for it.
    let (state, readable_state) = match ctx
        .engine()
        .read_state("blkqos_saved_originals is left out")
    {
        Ok((state, unreadable)) => (state, unreadable.is_empty()),
        Err(e) => {
            log::warn!("{e}: blkqos_saved_originals is left out");
            (State::default(), false)
        }
    };
    let mut found = conflicts::in_sysfs(&ctx.sysfs, &state);
    if ctx.sysfs.is_live() {
        found.extend(conflicts::on_host(
            Path::new("/etc"),
            Path::new("/usr/lib"),
            Path::new("/proc"),
        ));
    }

    let mut families = device_families(ctx, &inv, profile.as_ref());
    families.extend(cpu_families(ctx));

    let mut conflicts = Family::new(
        "blkqos_conflicts",
        Type::Gauge,
        "Settings outside blkqos that work against it, by kind (what `blkqos status` lists).",
    );
    let mut by_kind: BTreeMap<Kind, u64> = Kind::ALL.iter().map(|&k| (k, 0)).collect();
    for c in &found {
        *by_kind.entry(c.kind).or_default() += 1;
    }
    for (kind, n) in by_kind {
        conflicts.add(&[("kind", kind.as_str())], int(n));
    }
    let mut readable = Family::new(
        "blkqos_state_readable",
        Type::Gauge,
        "1 if the saved state could be read, 0 if not (root's, read by another user).",
    );
    readable.add(&[], int(u8::from(readable_state)));
    let mut saved = Family::new(
        "blkqos_saved_originals",
        Type::Gauge,
        "Original values blkqos saved, to put back on restore.",
    );
    if readable_state {
        saved.add(&[], int(state.saved.len() as u64));
    }
    let mut profile_ok = Family::new(
        "blkqos_profile_readable",
        Type::Gauge,
        "1 if the profile could be read and is valid (the rule label comes from it), 0 if not.",
    );
    profile_ok.add(&[], int(u8::from(profile.is_some())));
    let mut build = Family::new(
        "blkqos_build_info",
        Type::Gauge,
        "The blkqos that wrote these metrics.",
    );
    build.add(&[("version", env!("CARGO_PKG_VERSION"))], "1");
    let mut took = Family::new(
        "blkqos_scrape_duration_seconds",
        Type::Gauge,
        "How long reading everything above took.",
    );
    took.add(&[], micros(start.elapsed().as_micros() as u64));
    families.extend([conflicts, readable, saved, profile_ok, build, took]);
    Ok(render(&families))
}

/// The disks reported: every one rules may match, and the hidden NVMe
/// multipath paths, whose queues hold their head's knobs; each with the
/// device whose rule owns it (the head, for a path).
fn reported(inv: &Inventory) -> Vec<(&Device, &Device)> {
    let visible: BTreeSet<&str> = inv.visible().map(|d| d.name.as_str()).collect();
    (inv.devices.iter())
        .filter_map(|d| {
            if d.excluded.is_none() {
                return Some((d, d));
            }
            let head = inv.get(d.head.as_deref()?)?;
            visible.contains(head.name.as_str()).then_some((d, head))
        })
        .collect()
}

fn device_families(ctx: &Ctx, inv: &Inventory, profile: Option<&Profile>) -> Vec<Family> {
    use Type::{Counter, Gauge};
    let mut info = Family::new(
        "blkqos_device_info",
        Gauge,
        "A disk blkqos sees, with the profile rule that owns it (empty: none, or no profile).",
    );
    let mut limit = Family::new(
        "blkqos_device_cpu_lat_limit_seconds",
        Gauge,
        "cpu_lat_limit_us in seconds: the deepest idle exit latency the disk's CPUs may use while it has I/O; -1 off; absent when it reads auto.",
    );
    let mut auto = Family::new(
        "blkqos_device_cpu_lat_limit_auto",
        Gauge,
        "1 if cpu_lat_limit_us reads auto (the kernel chooses from the idle table), 0 if not.",
    );
    let mut timeout = Family::new(
        "blkqos_device_cpu_lat_timeout_seconds",
        Gauge,
        "cpu_lat_timeout_ms in seconds: how long the limit holds after the disk's last I/O.",
    );
    let mut reads = Family::new(
        "blkqos_device_reads_completed_total",
        Counter,
        "Reads completed (stat field 1).",
    );
    let mut writes = Family::new(
        "blkqos_device_writes_completed_total",
        Counter,
        "Writes completed (stat field 5).",
    );
    let mut read_bytes = Family::new(
        "blkqos_device_read_bytes_total",
        Counter,
        "Bytes read (stat sectors of 512 bytes).",
    );
    let mut written_bytes = Family::new(
        "blkqos_device_written_bytes_total",
        Counter,
        "Bytes written (stat sectors of 512 bytes).",
    );
    let mut io_time = Family::new(
        "blkqos_device_io_time_seconds_total",
        Counter,
        "Time the disk had I/O in flight (stat io_ticks).",
    );
    let mut queue_time = Family::new(
        "blkqos_device_io_time_weighted_seconds_total",
        Counter,
        "Time in queue: I/O time weighted by the I/Os in flight (stat time_in_queue).",
    );
    for (d, owner) in reported(inv) {
        let rule = profile
            .and_then(|p| owning_rule(p, owner))
            .map_or("", |r| r.name.as_str());
        let dev = [("device", d.name.as_str())];
        info.add(
            &[
                ("device", &d.name),
                ("kind", d.kind.as_str()),
                ("transport", d.transport.as_str()),
                ("abi", d.abi.describe()),
                ("rule", rule),
            ],
            "1",
        );
        if d.abi != Abi::None {
            if let Some(v) = ctx.sysfs.attr(&knobs::limit_path(d.abi, &d.name)) {
                let v = v.trim();
                auto.add(&dev, int(u8::from(v == "auto")));
                if v == knobs::OFF {
                    limit.add(&dev, "-1");
                } else if let Ok(us) = v.parse::<u64>() {
                    limit.add(&dev, micros(us));
                }
            }
            if let Some(ms) = (ctx.sysfs.attr(&knobs::timeout_path(d.abi, &d.name)))
                .and_then(|v| v.trim().parse::<u64>().ok())
            {
                timeout.add(&dev, millis(ms));
            }
        }
        if let Some(s) = iostat::read(&ctx.sysfs, &d.name) {
            reads.add(&dev, int(s.reads));
            writes.add(&dev, int(s.writes));
            read_bytes.add(&dev, int(s.read_sectors.saturating_mul(SECTOR_BYTES)));
            written_bytes.add(&dev, int(s.write_sectors.saturating_mul(SECTOR_BYTES)));
            io_time.add(&dev, millis(s.io_ms));
            queue_time.add(&dev, millis(s.queue_ms));
        }
    }
    vec![
        info,
        limit,
        auto,
        timeout,
        reads,
        writes,
        read_bytes,
        written_bytes,
        io_time,
        queue_time,
    ]
}

fn cpu_families(ctx: &Ctx) -> Vec<Family> {
    use Type::{Counter, Gauge};
    let mut held = Family::new(
        "blkqos_cpu_lease_held",
        Gauge,
        "1 while a disk's I/O holds the CPU out of deep idle states (cpuidle/cpu_lat_lease), 0 if not.",
    );
    let mut lease_limit = Family::new(
        "blkqos_cpu_lease_limit_seconds",
        Gauge,
        "The held lease's exit-latency limit in seconds; absent while no lease holds.",
    );
    let mut left = Family::new(
        "blkqos_cpu_lease_remaining_seconds",
        Gauge,
        "Seconds until the lease lapses unless I/O renews it; 0 while none holds.",
    );
    let mut usage = Family::new(
        "blkqos_cpu_idle_state_usage_total",
        Counter,
        "Times the CPU entered the idle state.",
    );
    let mut time = Family::new(
        "blkqos_cpu_idle_state_time_seconds_total",
        Counter,
        "Time the CPU spent in the idle state.",
    );
    let mut above = Family::new(
        "blkqos_cpu_idle_state_above_total",
        Counter,
        "Entries whose idle period was too short for the state (a shallower one was better).",
    );
    let mut below = Family::new(
        "blkqos_cpu_idle_state_below_total",
        Counter,
        "Entries whose idle period was long enough for a deeper state.",
    );
    let mut exit = Family::new(
        "blkqos_cpu_idle_state_exit_latency_seconds",
        Gauge,
        "The idle state's exit latency.",
    );
    let mut residency = Family::new(
        "blkqos_cpu_idle_state_target_residency_seconds",
        Gauge,
        "The idle state's target residency.",
    );
    let mut disabled = Family::new(
        "blkqos_cpu_idle_state_disabled",
        Gauge,
        "1 if the idle state is disabled (cpuidle stateN/disable), 0 if not.",
    );
    for cpu in idle::present_cpus(&ctx.sysfs) {
        let c = cpu.to_string();
        if let Some(lease) = idle::cpu_lease(&ctx.sysfs, cpu) {
            let at = [("cpu", c.as_str())];
            match lease {
                Lease::Free => {
                    held.add(&at, "0");
                    left.add(&at, "0");
                }
                Lease::Held { limit_us, left_us } => {
                    held.add(&at, "1");
                    lease_limit.add(&at, micros(limit_us));
                    left.add(&at, micros(left_us));
                }
            }
        }
        for s in idle::cpu_states(&ctx.sysfs, cpu) {
            let index = s.index.to_string();
            let at = [
                ("cpu", c.as_str()),
                ("index", index.as_str()),
                ("state", s.name.as_str()),
            ];
            usage.add(&at, int(s.usage));
            time.add(&at, micros(s.time_us));
            for (family, name) in [(&mut above, "above"), (&mut below, "below")] {
                if let Some(n) = idle::state_counter(&ctx.sysfs, cpu, s.index, name) {
                    family.add(&at, int(n));
                }
            }
            exit.add(&at, micros(s.latency_us));
            residency.add(&at, micros(s.residency_us));
            disabled.add(&at, int(u8::from(s.disabled)));
        }
    }
    vec![
        held,
        lease_limit,
        left,
        usage,
        time,
        above,
        below,
        exit,
        residency,
        disabled,
    ]
}

/// Replace `path` with `text` so that a reader (the textfile collector)
/// sees the old file or the new one, never part of one: a temporary in the
/// same directory (named so the collector, which reads `*.prom`, skips
/// it), fsync, rename, fsync the directory. The temporary goes on failure.
pub fn write_textfile(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        // 0644 whatever the umask: the collector runs as another user
        f.set_permissions(fs::Permissions::from_mode(0o644))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_no_temporary_and_a_good_one_is_0644() {
        let dir = tempfile::tempdir().expect("tempdir");
        // renaming a file over a directory fails after the temporary is written
        let target = dir.path().join("blkqos.prom");
        fs::create_dir(&target).expect("mkdir");
        assert!(write_textfile(&target, "x 1\n").is_err());
        let names: Vec<_> = (fs::read_dir(dir.path()).expect("ls"))
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["blkqos.prom"], "only the directory is left");

        fs::remove_dir(&target).expect("rmdir");
        fs::write(&target, "old 1\n").expect("write");
        write_textfile(&target, "new 1\n").expect("written");
        assert_eq!(fs::read_to_string(&target).expect("read"), "new 1\n");
        let mode = fs::metadata(&target).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(fs::read_dir(dir.path()).expect("ls").count(), 1);
    }
}
