//! Saved originals under the state directory (default /run/blkqos).
//!
//! The value an attribute had before blkqos first wrote it is saved once, so
//! `restore` can put it back however many applies happened since. Every
//! change to the file happens under an exclusive lock and replaces the file
//! atomically (write a temporary, fsync, rename), so parallel runs (udev
//! workers, the boot unit, Ansible) never see or leave a torn file.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub const SCHEMA: u32 = 1;
const STATE_FILE: &str = "state.json";
const LOCK_FILE: &str = "lock";

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
}

/// The state, held under the exclusive lock until dropped.
pub struct Locked {
    _lock: File,
    file: PathBuf,
    pub state: State,
}

impl StateDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateDir { dir: dir.into() }
    }

    pub fn file(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Take the exclusive lock (waiting for other runs) and load the state.
    pub fn lock(&self) -> Result<Locked, StateError> {
        // Saved originals are root's business: the directory is made 0700 and
        // its files 0600 (an existing directory keeps its mode).
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io_err(&self.dir))?;
        let lock_path = self.dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                log::debug!("waiting for another blkqos run ({})", lock_path.display());
                lock.lock().map_err(io_err(&lock_path))?;
            }
            Err(fs::TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
        }
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
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(State::default()),
            Err(e) => return Err(io_err(&path)(e)),
        };
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
