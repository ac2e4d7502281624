//! Saved originals under the state directory (default /run/blkqos).
//!
//! The value an attribute had before blkqos first wrote it is saved once, so
//! `restore` can put it back however many applies happened since. Every
//! change to the file happens under an exclusive lock and replaces the file
//! atomically (write a temporary, fsync, rename), so parallel runs (udev
//! workers, the boot unit, Ansible) never see or leave a torn file.
//!
//! Nothing here is taken on trust: the directory must be one only its owner
//! (the caller) can change, its files are opened without following links
//! or waiting on a FIFO, and a state file may only name the attributes
//! blkqos writes, with values the kernel could have reported for them.

use crate::abi::knobs::{LIMIT_MAX_US, TIMEOUT_MAX_MS};
use crate::disk_id::DiskId;
use crate::profile::is_queue_attr_name;
use crate::trust;
use crate::uevent::is_kernel_name;
use rustix::fs::OFlags;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod check;
pub use check::check_entry;
use check::*;

pub const SCHEMA: u32 = 1;
const STATE_FILE: &str = "state.json";
const LOCK_FILE: &str = "lock";
const LEASE_LOCK_FILE: &str = "lease.lock";
const PROBE_LOCK_FILE: &str = "probe.lock";
/// How long a run waits for another one's lock unless told otherwise
/// (`--lock-timeout`): an apply takes milliseconds, one stuck in a kernel
/// write or stopped must not hold every udev event and the boot unit.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// The state of 10000 disks is a few MiB; a bigger file is not one blkqos
/// wrote, and reading it would cost seconds and gigabytes on every run.
pub const MAX_STATE_BYTES: u64 = 16 << 20;
/// A sysfs attribute is at most a page.
const MAX_ATTR_VALUE: usize = 4096;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Saved {
    pub original: String,
    /// Devices whose settings this value serves.
    pub owners: BTreeSet<String>,
    /// What blkqos last wrote there: a queue that still holds it under a
    /// later diskseq is the same queue, its media changed (engine.rs).
    /// None in a state saved before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    pub schema: u32,
    /// Attribute path (relative to the sysfs root) -> original value.
    #[serde(default)]
    pub saved: BTreeMap<String, Saved>,
    /// Device -> the rule that owned it at the last apply.
    #[serde(default)]
    pub rules: BTreeMap<String, String>,
    /// Device -> which disk the name stood for when values were saved for
    /// it (names are reused: see disk_id).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disks: BTreeMap<String, DiskId>,
    /// CPU attribute path -> what `blkqos lease` puts back there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub leases: BTreeMap<String, LeaseSaved>,
    /// Entries of the file read that could not be trusted and were left
    /// out (each said in a warning); the next save drops them.
    #[serde(skip)]
    pub distrusted: usize,
    /// CPU attribute path -> the value a running `blkqos lease` holds
    /// there now (from its lease.json, read with the state): what `apply`
    /// and `restore` must not loosen until the lease's lapse (filled in
    /// by the engine).
    #[serde(skip)]
    pub held: BTreeMap<String, String>,
}

/// A CPU a user-space lease may hold: its original, and the limits its
/// leases may write over it, so that the values a killed run left can be
/// told from someone else's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaseSaved {
    pub original: String,
    pub limits: BTreeSet<u64>,
}

impl Default for State {
    fn default() -> Self {
        State {
            schema: SCHEMA,
            saved: BTreeMap::new(),
            rules: BTreeMap::new(),
            disks: BTreeMap::new(),
            leases: BTreeMap::new(),
            distrusted: 0,
            held: BTreeMap::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: corrupt state file ({reason}); move it away to start over", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{}: {count} untrusted saved entr{} left out (said above): what {} cannot be checked", path.display(), if *count == 1 { "y" } else { "ies" }, if *count == 1 { "it holds" } else { "they hold" })]
    Distrusted { path: PathBuf, count: usize },
    #[error("{}: refusing the state directory: it is {why}; expected a directory only its owner, this user, can change", path.display())]
    Untrusted { path: PathBuf, why: String },
    #[error("{}: {size} bytes, larger than 16 MiB; expected the state blkqos saved (a few MiB for 10000 disks); move it away to start over", path.display())]
    TooLarge { path: PathBuf, size: u64 },
    #[error("{}: {} still holds the lock after {:.1} s; gave up (--lock-timeout or BLKQOS_LOCK_TIMEOUT sets how many seconds to wait)", path.display(), holder_name(*holder), waited.as_secs_f64())]
    Busy {
        path: PathBuf,
        holder: Option<u32>,
        waited: Duration,
    },
}

impl StateError {
    /// The file or directory the error is about.
    pub fn path(&self) -> &Path {
        match self {
            StateError::Io { path, .. }
            | StateError::Corrupt { path, .. }
            | StateError::Distrusted { path, .. }
            | StateError::Untrusted { path, .. }
            | StateError::TooLarge { path, .. }
            | StateError::Busy { path, .. } => path,
        }
    }
}

fn holder_name(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("the blkqos run with pid {pid}"),
        None => "another blkqos run (pid unknown)".to_string(),
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
    lock_timeout: Duration,
}

/// The state, held under the exclusive lock until dropped.
pub struct Locked {
    _lock: File,
    /// The state directory, checked and resolved.
    dir: PathBuf,
    pub state: State,
}

impl StateDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateDir {
            dir: dir.into(),
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
    }

    /// How long `lock` waits for another run before it gives up.
    pub fn with_lock_timeout(self, lock_timeout: Duration) -> Self {
        StateDir {
            lock_timeout,
            ..self
        }
    }

    pub fn file(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// The directory itself, as given (checked where a lock is taken).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Take the exclusive lock (waiting for other runs up to the lock
    /// timeout) and load the state.
    pub fn lock(&self) -> Result<Locked, StateError> {
        self.lock_waiting(true)
    }

    /// [`StateDir::lock`] without waiting: busy at once when another run
    /// holds the lock (for a loop that tries again later).
    pub fn lock_now(&self) -> Result<Locked, StateError> {
        self.lock_waiting(false)
    }

    fn lock_waiting(&self, wait: bool) -> Result<Locked, StateError> {
        let (dir, lock, lock_path) = self.open_lock_file(LOCK_FILE)?;
        if wait {
            wait_for_lock(&lock, &lock_path, self.lock_timeout)?;
        } else {
            match lock.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(StateError::Busy {
                        holder: holder_pid(&lock),
                        path: lock_path,
                        waited: Duration::ZERO,
                    });
                }
                Err(fs::TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
            }
        }
        // Name this run as the holder for the runs that wait for it: its
        // pid and start time, so that a pid reused by another process once
        // this run has ended names no one.
        let me = std::process::id();
        let pid = match start_time(me) {
            Some(t) => format!("{me} {t}\n"),
            None => format!("{me}\n"),
        };
        lock.set_len(0)
            .and_then(|()| lock.write_all_at(pid.as_bytes(), 0))
            .map_err(io_err(&lock_path))?;
        remove_stale_temporaries(&dir);
        let state = read_state(&dir.join(STATE_FILE))?;
        Ok(Locked {
            _lock: lock,
            dir,
            state,
        })
    }

    /// The lock a running `blkqos lease` holds for its whole life, taken
    /// without waiting: `None` when another process holds it. While it is
    /// held, the state's `leases` are that process's: no other run puts
    /// them back.
    pub fn try_lease_lock(&self) -> Result<Option<File>, StateError> {
        self.try_lock_file(LEASE_LOCK_FILE)
    }

    /// The lock a running `blkqos probe` holds for its whole life, taken
    /// without waiting: `None` when another probe holds it (two probes
    /// would each take the other's holds for what they found).
    pub fn try_probe_lock(&self) -> Result<Option<File>, StateError> {
        self.try_lock_file(PROBE_LOCK_FILE)
    }

    /// The lock file `name`, locked without waiting; `None` when another
    /// process holds it.
    fn try_lock_file(&self, name: &str) -> Result<Option<File>, StateError> {
        let (_, lock, path) = self.open_lock_file(name)?;
        match lock.try_lock() {
            Ok(()) => Ok(Some(lock)),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(io_err(&path)(e)),
        }
    }

    /// The state directory, made if missing and trusted, and the lock file
    /// `name` in it, opened (not locked).
    fn open_lock_file(&self, name: &str) -> Result<(PathBuf, File, PathBuf), StateError> {
        let dir = self.checked_dir()?;
        let path = dir.join(name);
        // Read and write: the pid is written into it; O_NONBLOCK: a FIFO
        // planted as the lock opens at once and is refused below;
        // O_NOFOLLOW: nor is a link planted there followed.
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(trust::custom_flags(OFlags::NONBLOCK | OFlags::NOFOLLOW))
            .open(&path)
            .map_err(|e| io_err(&path)(trust::link_error(e)))?;
        trust::require_regular(&lock).map_err(io_err(&path))?;
        Ok((dir, lock, path))
    }

    /// The state directory, made if missing, checked and resolved: where
    /// root writes files, with no link of anyone else's in its path.
    pub fn checked_dir(&self) -> Result<PathBuf, StateError> {
        self.refuse_links()?;
        self.check_where_created()?;
        // Saved originals are root's business: the directory is made 0700 and
        // its files 0600 (an existing directory keeps its mode).
        match fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
        {
            // something that is no directory is there: trusted_dir says
            // so, as it does to the readers, rather than "File exists"
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(io_err(&self.dir)(e)),
            _ => {}
        }
        self.trusted_dir(true)
    }

    /// Before the state directory (and any missing directory above it) is
    /// made: the nearest directory that exists, and every one above it,
    /// must be one only root or the caller can change, or someone else
    /// could swap what is made for their own (`trusted_dir` would refuse
    /// it afterwards, but only once made).
    fn check_where_created(&self) -> Result<(), StateError> {
        // a relative path's last ancestor is "", the working directory
        let Some(existing) = (self.dir.ancestors())
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .find(|d| fs::symlink_metadata(d).is_ok())
        else {
            return Ok(());
        };
        if existing == self.dir {
            return Ok(());
        }
        let real = fs::canonicalize(existing).map_err(io_err(&self.dir))?;
        match trust::untrusted_ancestors(&real, trust::euid()).map_err(io_err(&self.dir))? {
            Some(why) => Err(StateError::Untrusted {
                path: self.dir.clone(),
                why,
            }),
            None => Ok(()),
        }
    }

    /// The directory as named is no link, and no link above it is anyone's
    /// but root's or the caller's (/var/run is root's): a link planted
    /// where others can write (/tmp) would lead root's files elsewhere.
    fn refuse_links(&self) -> Result<(), StateError> {
        let untrusted = |why: String| StateError::Untrusted {
            path: self.dir.clone(),
            why,
        };
        // "/tmp/x/" would have lstat follow x: the path without it
        let dir: PathBuf = self.dir.components().collect();
        if fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(untrusted(
                "a symbolic link (name the directory itself)".to_string(),
            ));
        }
        let uid = trust::euid();
        for a in dir.ancestors().skip(1) {
            if let Ok(m) = fs::symlink_metadata(a)
                && m.file_type().is_symlink()
                && m.uid() != 0
                && m.uid() != uid
            {
                return Err(untrusted(format!(
                    "below {}, a symbolic link owned by uid {}",
                    a.display(),
                    m.uid()
                )));
            }
        }
        Ok(())
    }

    /// The state directory resolved, when nobody but its owner (and root)
    /// can change it or anything above it: the caller must own it to write
    /// there (`writer`), root or the caller to read from it.
    fn trusted_dir(&self, writer: bool) -> Result<PathBuf, StateError> {
        let untrusted = |why: String| StateError::Untrusted {
            path: self.dir.clone(),
            why,
        };
        self.refuse_links()?;
        let real = fs::canonicalize(&self.dir).map_err(io_err(&self.dir))?;
        if real.parent().is_none() {
            return Err(untrusted(
                "the root directory, where blkqos would make and remove its files among the system's"
                    .to_string(),
            ));
        }
        let meta = fs::symlink_metadata(&real).map_err(io_err(&self.dir))?;
        if !meta.is_dir() {
            return Err(untrusted("not a directory".to_string()));
        }
        let uid = trust::euid();
        if meta.uid() != uid && (writer || meta.uid() != 0) {
            return Err(untrusted(format!("owned by uid {}", meta.uid())));
        }
        // Sticky or not: others could create the state file before us.
        if meta.mode() & 0o022 != 0 {
            return Err(untrusted(format!(
                "writable by group or others (mode {:o})",
                meta.mode() & 0o7777
            )));
        }
        if let Some(parent) = real.parent()
            && let Some(why) = trust::untrusted_ancestors(parent, uid).map_err(io_err(&self.dir))?
        {
            return Err(untrusted(why));
        }
        Ok(real)
    }

    /// The state as last saved; no state file is an empty state. Readers do
    /// not need the lock: the file is only ever replaced whole.
    pub fn read(&self) -> Result<State, StateError> {
        match self.trusted_dir(false) {
            Ok(dir) => read_state(&dir.join(STATE_FILE)),
            Err(StateError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(State::default())
            }
            Err(e) => Err(e),
        }
    }
}

/// Read and check a state file; none is an empty state.
fn read_state(path: &Path) -> Result<State, StateError> {
    let file = match trust::open_regular(path, false) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(State::default()),
        Err(e) => return Err(io_err(path)(e)),
    };
    let too_large = |size| StateError::TooLarge {
        path: path.to_path_buf(),
        size,
    };
    let size = file.metadata().map_err(io_err(path))?.len();
    if size > MAX_STATE_BYTES {
        return Err(too_large(size));
    }
    let mut text = String::new();
    file.take(MAX_STATE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io_err(path))?;
    if text.len() as u64 > MAX_STATE_BYTES {
        return Err(too_large(text.len() as u64));
    }
    let corrupt = |reason: String| StateError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let mut state: State = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    if state.schema != SCHEMA {
        return Err(corrupt(format!("schema {} is not {SCHEMA}", state.schema)));
    }
    for why in prune(&mut state) {
        log::warn!(
            "{}: {why}: that entry is left out (the others are used)",
            path.display()
        );
        state.distrusted += 1;
    }
    Ok(state)
}

/// Take the lock, waiting for it at most `timeout` and saying once what it
/// waits for. The wait is a blocking flock in a helper thread, woken as
/// soon as the holder lets go (polling loses to the other waiters when
/// hundreds of udev events queue up); it locks a duplicate of the same open
/// file, and a lock it gets too late goes with that duplicate.
fn wait_for_lock(lock: &File, path: &Path, timeout: Duration) -> Result<(), StateError> {
    match lock.try_lock() {
        Ok(()) => return Ok(()),
        Err(fs::TryLockError::WouldBlock) => {}
        Err(fs::TryLockError::Error(e)) => return Err(io_err(path)(e)),
    }
    let holder = holder_pid(lock).map_or("unknown".to_string(), |p| p.to_string());
    log::info!(
        "waiting for another blkqos run (pid {holder}) to release {}, up to {:.1} s",
        path.display(),
        timeout.as_secs_f64()
    );
    let start = Instant::now();
    let waiter = lock.try_clone().map_err(io_err(path))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(waiter.lock());
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(io_err(path)(e)),
        Err(_) => Err(StateError::Busy {
            path: path.to_path_buf(),
            holder: holder_pid(lock),
            waited: start.elapsed(),
        }),
    }
}

/// The pid the holder wrote into the lock file, if it did yet and that
/// process, started when it says, still runs. Every run leaves its pid
/// behind, and the lock is then held by a run that has not written its
/// own yet (or by something else): the pid alone, reused by an unrelated
/// process, would name that one.
fn holder_pid(lock: &File) -> Option<u32> {
    let mut buf = [0u8; 48];
    let n = lock.read_at(&mut buf, 0).ok()?;
    let mut words = std::str::from_utf8(&buf[..n]).ok()?.split_whitespace();
    let pid: u32 = words.next()?.parse().ok()?;
    let started: u64 = words.next()?.parse().ok()?;
    (pid > 0 && start_time(pid) == Some(started)).then_some(pid)
}

/// When a process started, in clock ticks after boot (field 22 of
/// /proc/PID/stat, after the command name, which may hold blanks and
/// parentheses); None when it does not exist.
fn start_time(pid: u32) -> Option<u64> {
    proc_stat(&pid.to_string())?.get(19)?.parse().ok()
}

/// The fields of `/proc/WHO/stat` after the command name (which may hold
/// spaces and parentheses): field 3 of proc(5) is the first.
pub fn proc_stat(who: &str) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{who}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Temporary files of runs killed while saving. Only the holder of the
/// lock saves, so under the lock none is in use.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{STATE_FILE}.");
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            log::debug!("removing {}, left by a killed run", e.path().display());
            let _ = fs::remove_file(e.path());
        }
    }
}

/// A new file of this run's own in `dir`: O_EXCL fails on any name that
/// exists, a planted link included (O_NOFOLLOW says so explicitly), so
/// nothing but this file is written; the name is unique, so there is no
/// need to remove anything first.
fn create_temporary(dir: &Path) -> io::Result<(PathBuf, File)> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for attempt in 0..16u32 {
        let name = format!(
            ".{STATE_FILE}.{}.{:08x}",
            std::process::id(),
            stamp.wrapping_add(attempt)
        );
        let path = dir.join(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(trust::custom_flags(OFlags::NOFOLLOW))
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)))
}

impl Locked {
    pub fn save(&self) -> Result<(), StateError> {
        let file = self.dir.join(STATE_FILE);
        let mut text =
            serde_json::to_string_pretty(&self.state).map_err(|e| StateError::Corrupt {
                path: file.clone(),
                reason: e.to_string(),
            })?;
        text.push('\n');
        let (tmp, mut f) = create_temporary(&self.dir).map_err(io_err(&file))?;
        let mut write = || -> io::Result<()> {
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &file)?;
            File::open(&self.dir)?.sync_all()
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io_err(&file)(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_missing_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let sd = StateDir::new(dir.path().join("run"));
        assert_eq!(sd.read().unwrap(), State::default());
        let mut l = sd.lock().unwrap();
        l.state.saved.insert(
            "block/sda/queue/cpu_lat_limit_us".into(),
            Saved {
                original: "-1".into(),
                owners: BTreeSet::from(["sda".into()]),
                written: Some("4".into()),
            },
        );
        l.save().unwrap();
        drop(l);
        assert_eq!(sd.read().unwrap().saved.len(), 1);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: PathBuf| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(dir.path().join("run")), 0o700);
        assert_eq!(mode(sd.file()), 0o600);
        assert_eq!(mode(dir.path().join("run/lock")), 0o600);
    }

    #[test]
    fn a_corrupt_state_file_is_an_error_not_an_empty_state() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(STATE_FILE), "{ not json").unwrap();
        let err = StateDir::new(dir.path()).read().unwrap_err();
        assert!(err.to_string().contains("corrupt state file"), "{err}");
    }

    #[test]
    fn only_what_blkqos_writes_may_be_saved() {
        for (path, value) in [
            ("block/sda/cpu_lat_limit_us", "auto"),
            ("block/sda/queue/cpu_lat_limit_us", "100000"),
            ("block/sda/cpu_lat_timeout_ms", "1"),
            ("block/sda/queue/scheduler", "mq-deadline"),
            ("block/md0/queue/read_ahead_kb", ""),
            (
                "devices/system/cpu/cpu12/power/pm_qos_resume_latency_us",
                "n/a",
            ),
        ] {
            assert_eq!(check_saved(path, value), Ok(()), "{path} = {value}");
        }
        for (path, value) in [
            ("block/sda/cpu_lat_limit_us", "-2"),
            ("block/sda/queue/cpu_lat_timeout_ms", "60001"),
            ("block/sda/queue/Scheduler", "none"),
            ("block/sda/device/delete", "1"),
            ("block/sda/queue/scheduler/x", "none"),
            ("block/../queue/scheduler", "none"),
            ("devices/system/cpu/cpu/power/pm_qos_resume_latency_us", "0"),
            (
                "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us",
                "2147483648",
            ),
            (
                "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us",
                "010",
            ),
            ("devices/system/cpu/cpu1/online", "0"),
            ("/block/sda/queue/scheduler", "none"),
        ] {
            assert!(check_saved(path, value).is_err(), "{path} = {value}");
        }
    }
}
