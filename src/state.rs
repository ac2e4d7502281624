//! Saved originals under the state directory (default /run/blkqos).
//!
//! The value an attribute had before blkqos first wrote it is saved once, so
//! `restore` can put it back however many applies happened since. Every
//! change to the file happens under an exclusive lock and replaces the file
//! atomically (write a temporary, fsync, rename), so parallel runs (udev
//! workers, the boot unit, Ansible) never see or leave a torn file.

use crate::trust;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const SCHEMA: u32 = 1;
const STATE_FILE: &str = "state.json";
const LOCK_FILE: &str = "lock";
/// How long a run waits for another one's lock unless told otherwise
/// (`--lock-timeout`): an apply takes milliseconds, one stuck in a kernel
/// write or stopped must not hold every udev event and the boot unit.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Saved {
    pub original: String,
    /// Devices whose settings this value serves.
    pub owners: BTreeSet<String>,
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
}

impl Default for State {
    fn default() -> Self {
        State {
            schema: SCHEMA,
            saved: BTreeMap::new(),
            rules: BTreeMap::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: corrupt state file ({reason}); move it away to start over", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{}: {} still holds the lock after {:.1} s; gave up (--lock-timeout or BLKQOS_LOCK_TIMEOUT sets how many seconds to wait)", path.display(), holder_name(*holder), waited.as_secs_f64())]
    Busy {
        path: PathBuf,
        holder: Option<u32>,
        waited: Duration,
    },
}

fn holder_name(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("the blkqos run with pid {pid}"),
        None => "another blkqos run".to_string(),
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
    file: PathBuf,
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

    /// Take the exclusive lock (waiting for other runs up to the lock
    /// timeout) and load the state.
    pub fn lock(&self) -> Result<Locked, StateError> {
        // Saved originals are root's business: the directory is made 0700 and
        // its files 0600 (an existing directory keeps its mode).
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io_err(&self.dir))?;
        let lock_path = self.dir.join(LOCK_FILE);
        // Read and write: the pid is written into it; O_NONBLOCK: a FIFO
        // planted as the lock opens at once and is refused below.
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        trust::require_regular(&lock).map_err(io_err(&lock_path))?;
        wait_for_lock(&lock, &lock_path, self.lock_timeout)?;
        // Name this run as the holder for the runs that wait for it.
        let pid = format!("{}\n", std::process::id());
        lock.set_len(0)
            .and_then(|()| lock.write_all_at(pid.as_bytes(), 0))
            .map_err(io_err(&lock_path))?;
        let state = self.read()?;
        Ok(Locked {
            _lock: lock,
            file: self.file(),
            state,
        })
    }

    /// The state as last saved; no state file is an empty state. Readers do
    /// not need the lock: the file is only ever replaced whole.
    pub fn read(&self) -> Result<State, StateError> {
        let path = self.file();
        let file = match trust::open_regular(&path, true) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(State::default()),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let mut text = String::new();
        (&file).read_to_string(&mut text).map_err(io_err(&path))?;
        let state: State = serde_json::from_str(&text).map_err(|e| StateError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if state.schema != SCHEMA {
            return Err(StateError::Corrupt {
                path,
                reason: format!("schema {} is not {SCHEMA}", state.schema),
            });
        }
        Ok(state)
    }
}

/// Try the lock until it is free or `timeout` has passed, saying once what
/// it waits for.
fn wait_for_lock(lock: &File, path: &Path, timeout: Duration) -> Result<(), StateError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    let mut said = false;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) => {}
            Err(fs::TryLockError::Error(e)) => return Err(io_err(path)(e)),
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(StateError::Busy {
                path: path.to_path_buf(),
                holder: holder_pid(lock),
                waited,
            });
        }
        if !said {
            let holder = holder_pid(lock).map_or("unknown".to_string(), |p| p.to_string());
            log::info!(
                "waiting for another blkqos run (pid {holder}) to release {}, up to {:.1} s",
                path.display(),
                timeout.as_secs_f64()
            );
            said = true;
        }
        std::thread::sleep(pause.min(timeout - waited));
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// The pid the holder wrote into the lock file, if it did yet.
fn holder_pid(lock: &File) -> Option<u32> {
    let mut buf = [0u8; 16];
    let n = lock.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n])
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&pid| pid != 0)
}

impl Locked {
    pub fn save(&self) -> Result<(), StateError> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        let tmp = dir.join(format!(".{STATE_FILE}.{}", std::process::id()));
        let mut text =
            serde_json::to_string_pretty(&self.state).map_err(|e| StateError::Corrupt {
                path: self.file.clone(),
                reason: e.to_string(),
            })?;
        text.push('\n');
        let write = || -> io::Result<()> {
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &self.file)?;
            File::open(dir)?.sync_all()
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io_err(&self.file)(e)
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
}
