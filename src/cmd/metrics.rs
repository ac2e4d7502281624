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
use crate::lease::published;
use crate::metrics::{Family, Type, int, micros, millis, render};
use crate::profile::{Profile, owning_rule};
use crate::state::State;
use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, CString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

pub fn metrics(
    ctx: &Ctx,
    profile: &Path,
    output: Option<&Path>,
    out: &mut String,
) -> Result<u8, Error> {
    let text = collect(ctx, profile)?;
    match output {
        Some(path) if path.as_os_str() == "-" => out.push_str(&text),
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
    let inv = discover::scan(
        &ctx.sysfs,
        Extent::All,
        Detail::for_profile(profile.as_ref()),
    )?;
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
    let seen = conflicts::LeaseSeen::of(ctx.state.dir(), readable_state);
    let mut found = conflicts::in_sysfs(&ctx.sysfs, &state, seen);
    // The kinds looked for: a --sysfs tree is not this host, so what only
    // the host shows is not looked at there, and absent rather than 0.
    let mut checked = vec![Kind::IdleStateDisabled, Kind::ResumeLatency];
    checked.extend(readable_state.then_some(Kind::LeaseLeft));
    let mut unchecked_pids = None;
    if ctx.sysfs.is_live() {
        let host = conflicts::on_host(Path::new("/etc"), Path::new("/usr/lib"), Path::new("/proc"));
        found.extend(host.found);
        checked.extend([Kind::UdevRule, Kind::Tuned]);
        // a count of holders with processes left out would read as "none"
        if host.unchecked_pids == 0 {
            checked.push(Kind::CpuDmaLatency);
        }
        unchecked_pids = Some(host.unchecked_pids);
    }

    let mut families = device_families(ctx, &inv, profile.as_ref());
    families.extend(cpu_families(ctx));

    let mut conflicts = Family::new(
        "blkqos_conflicts",
        Type::Gauge,
        "Settings outside blkqos that work against it, by kind (what `blkqos status` lists).",
    );
    let mut by_kind: BTreeMap<Kind, u64> = checked.iter().map(|&k| (k, 0)).collect();
    for c in &found {
        if let Some(n) = by_kind.get_mut(&c.kind) {
            *n += 1;
        }
    }
    for (kind, n) in by_kind {
        conflicts.add(&[("kind", kind.as_str())], int(n));
    }
    let mut unchecked = Family::new(
        "blkqos_conflicts_unchecked",
        Type::Gauge,
        "Things a conflict kind could not be checked on (cpu-dma-latency: processes whose /proc/PID/fd was refused); while above 0 that kind has no blkqos_conflicts sample.",
    );
    if let Some(n) = unchecked_pids {
        unchecked.add(&[("kind", Kind::CpuDmaLatency.as_str())], int(n as u64));
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
        "Original values blkqos saved, to put back on restore (apply's and blkqos lease's).",
    );
    if readable_state {
        saved.add(&[], int((state.saved.len() + state.leases.len()) as u64));
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
    families.extend([
        conflicts, unchecked, readable, saved, profile_ok, build, took,
    ]);
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
        "cpu_lat_limit_us in seconds: the deepest idle exit latency the disk's CPUs may use while it has I/O; absent when it reads auto or off.",
    );
    let mut off = Family::new(
        "blkqos_device_cpu_lat_limit_off",
        Gauge,
        "1 if cpu_lat_limit_us reads -1 (no limit; then no _seconds sample), 0 if not.",
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
                // off is its own gauge: -1 among seconds would average and
                // compare as a limit
                off.add(&dev, int(u8::from(v == knobs::OFF)));
                if let Ok(us) = v.parse::<u64>() {
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
        off,
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
        "1 while a disk's I/O holds the CPU out of deep idle states (cpuidle/cpu_lat_lease_limit_us), 0 if not.",
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
    let mut user_held = Family::new(
        "blkqos_cpu_user_lease_held",
        Gauge,
        "1 while a running blkqos lease (the lease from user space, through pm_qos_resume_latency_us) holds the CPU for a disk's I/O, 0 if not; absent for CPUs it does not serve.",
    );
    let mut user_limit = Family::new(
        "blkqos_cpu_user_lease_limit_seconds",
        Gauge,
        "The limit blkqos lease holds the CPU at; absent while it does not hold it.",
    );
    let mut user_timeout = Family::new(
        "blkqos_cpu_user_lease_timeout_seconds",
        Gauge,
        "The most time the user-space lease stays after its disks' last I/O (the time left is not published); 0 while it does not hold the CPU.",
    );
    // the state directory is root's: another user's scrape has none of these
    let user = published::running(ctx.state.dir());
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
        let lease = idle::cpu_lease(&ctx.sysfs, cpu).unwrap_or_else(|e| {
            // once per run, and per CPU: each CPU has its own file
            log::warn!("{e}");
            None
        });
        if let Some(lease) = lease {
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
        if let Some(u) = user.as_ref().and_then(|p| p.cpus.get(&cpu)) {
            let at = [("cpu", c.as_str())];
            user_held.add(&at, int(u8::from(u.limit_us.is_some())));
            if let Some(us) = u.limit_us {
                user_limit.add(&at, micros(us));
            }
            user_timeout.add(&at, millis(u.timeout_ms));
        }
        for s in idle::cpu_states(&ctx.sysfs, cpu) {
            let index = s.index.to_string();
            let at = [
                ("cpu", c.as_str()),
                ("index", index.as_str()),
                ("state", s.name.as_str()),
            ];
            // an unparseable counter is left out: a 0 would read as a reset
            if let Some(n) = s.usage {
                usage.add(&at, int(n));
            }
            if let Some(us) = s.time_us {
                time.add(&at, micros(us));
            }
            for (family, name) in [(&mut above, "above"), (&mut below, "below")] {
                if let Some(n) = idle::state_counter(&ctx.sysfs, cpu, s.index, name) {
                    family.add(&at, int(n));
                }
            }
            exit.add(&at, micros(s.latency_us));
            residency.add(&at, micros(s.residency_us));
            if let Some(d) = s.disabled {
                disabled.add(&at, int(u8::from(d)));
            }
        }
    }
    vec![
        held,
        lease_limit,
        left,
        user_held,
        user_limit,
        user_timeout,
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
/// sees the old file or the new one, never part of one, and so that whoever
/// owns the directory (prometheus, on Debian) cannot steer root's write
/// elsewhere: the directory is opened one component at a time without
/// following a link (`open_dir`), and the temporary is created and renamed
/// relative to that open directory, so a link swapped in later changes
/// nothing.
///
/// No fsync, of the file or the directory: the rename alone is what makes
/// the replacement atomic for readers. fsync only buys durability across a
/// crash, which a file regenerated every 15 s does not need (after one the
/// worst is an empty file, no blkqos metrics, until the next run), and on a
/// busy disk it waits for the journal, which would stall a scrape helper.
pub fn write_textfile(path: &Path, text: &str) -> io::Result<()> {
    let bytes = path.as_os_str().as_bytes();
    let name = match path.file_name() {
        // "DIR/" and "DIR/." name the directory, not a file in it
        Some(n) if !bytes.ends_with(b"/") && !bytes.ends_with(b"/.") => n,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "names a directory, not a file (expected DIR/NAME.prom)",
            ));
        }
    };
    let dir = open_dir(match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    })?;
    let name = cstring(name)?;
    refuse_other_than_a_file(&dir, &name)?;
    let (tmp, file) = create_temporary(&dir, name.as_bytes())?;
    let written = (|| {
        let mut file = file;
        // 0644 whatever the umask: the collector runs as another user
        file.set_permissions(fs::Permissions::from_mode(0o644))?;
        file.write_all(text.as_bytes())?;
        rustix::fs::renameat(&dir, tmp.as_c_str(), &dir, name.as_c_str())?;
        Ok(())
    })();
    if written.is_err() {
        // only the temporary this run created (O_EXCL), never one of the
        // same name someone else left
        let _ = rustix::fs::unlinkat(&dir, tmp.as_c_str(), AtFlags::empty());
    }
    written
}

/// Only a regular file at `name` (or nothing) is replaced: the rename would
/// turn a FIFO, a device node, a socket or a symbolic link (`--output
/// /dev/stdout`) into a regular file. The directory is one no one else
/// may write to (open_dir), so what is checked here is what is replaced.
fn refuse_other_than_a_file(dir: &OwnedFd, name: &CStr) -> io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => return Ok(()),
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice | FileType::BlockDevice => "a device node",
        FileType::Socket => "a socket",
        FileType::Directory => "a directory",
        _ => "something",
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "it is {kind}, not a regular file: refusing to replace it (\"-\" writes to stdout)"
        ),
    ))
}

fn cstring(name: &std::ffi::OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the name"))
}

/// `dir` opened (O_PATH) one component at a time from `/` or the working
/// directory, each with O_NOFOLLOW and checked with fstat: a link anywhere
/// in the path is refused, not followed, and so is a directory others may
/// write to without the sticky bit (anyone could replace what it holds).
fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let (start, start_c) = if dir.is_absolute() {
        ("/", c"/")
    } else {
        (".", c".")
    };
    let mut fd = open_at(CWD, start_c, start)?;
    let mut shown = PathBuf::from(start);
    check_dir(&fd, &shown)?;
    for c in dir.components() {
        let part = match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
            Component::ParentDir => std::ffi::OsStr::new(".."),
            Component::Normal(p) => p,
        };
        shown.push(part);
        let name = cstring(part)?;
        fd = open_at(fd.as_fd(), &name, &shown.to_string_lossy())?;
        check_dir(&fd, &shown)?;
    }
    Ok(fd)
}

fn open_at(dirfd: impl AsFd, name: &CStr, shown: &str) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dirfd, name, flags, Mode::empty()).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("{shown}: {e}"))
    })
}

fn check_dir(fd: &OwnedFd, shown: &Path) -> io::Result<()> {
    let st = rustix::fs::fstat(fd)?;
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{}: {why}", shown.display()),
        ))
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => {}
        FileType::Symlink => {
            return refuse(
                "a symbolic link, which is not followed here (name the real directory)".into(),
            );
        }
        _ => return refuse("not a directory".into()),
    }
    if st.st_mode & 0o002 != 0 && st.st_mode & 0o1000 == 0 {
        return refuse(format!(
            "a directory others can write to without the sticky bit (mode {:o})",
            st.st_mode & 0o7777
        ));
    }
    Ok(())
}

/// A new file beside `name` in `dir`, named so that the collector (which
/// reads `*.prom`) skips it and nobody can guess it: O_CREAT|O_EXCL|
/// O_NOFOLLOW, so it is always a file this run created; on the unlikely
/// clash of random names, another name.
fn create_temporary(dir: &OwnedFd, name: &[u8]) -> io::Result<(CString, File)> {
    let mut last = None;
    for _ in 0..8 {
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(name);
        tmp.extend_from_slice(format!(".{:016x}.tmp", random_u64()).as_bytes());
        let tmp = CString::new(tmp)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the name"))?;
        let flags =
            OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::WRONLY | OFlags::CLOEXEC;
        match rustix::fs::openat(dir, tmp.as_c_str(), flags, Mode::from_raw_mode(0o644)) {
            Ok(fd) => return Ok((tmp, File::from(fd))),
            Err(Errno::EXIST) => last = Some(io::Error::from(Errno::EXIST)),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no temporary name")))
}

/// 64 random bits from getrandom(2); should it fail (it does not, for 8
/// bytes, once the pool is ready), the time and pid, which O_EXCL still
/// makes safe, only guessable.
fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    let n = rustix::rand::getrandom(&mut buf, rustix::rand::GetRandomFlags::NONBLOCK);
    if matches!(n, Ok(8)) {
        return u64::from_ne_bytes(buf);
    }
    let nanos = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .map_or(0, |d| d.subsec_nanos());
    (u64::from(std::process::id()) << 32) | u64::from(nanos)
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

    #[test]
    fn a_temporary_someone_else_left_is_neither_used_nor_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("blkqos.prom");
        // the name the old code would pick, taken by someone else
        let theirs = dir
            .path()
            .join(format!(".blkqos.prom.{}.tmp", std::process::id()));
        fs::write(&theirs, "theirs\n").expect("write");
        write_textfile(&target, "new 1\n").expect("written beside it");
        assert_eq!(fs::read_to_string(&target).expect("read"), "new 1\n");
        assert_eq!(
            fs::read_to_string(&theirs).expect("still there"),
            "theirs\n"
        );
        assert_eq!(fs::read_dir(dir.path()).expect("ls").count(), 2);
    }
}
