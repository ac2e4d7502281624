//! What a running `blkqos lease` holds, for `status`, `metrics` and `top`:
//! `lease.json` in the state directory, written (to a temporary, then
//! renamed) each time the set of CPUs it holds or their limits change, and
//! removed when it stops. A renewal writes nothing: the time left is not
//! in it, only the timeout that bounds it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

pub const FILE: &str = "lease.json";

/// Larger than any real one (a few hundred bytes per CPU): a bigger file
/// is not read.
const MAX_BYTES: u64 = 4 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    pub pid: u32,
    /// How it sees the first I/O after a lapse: "tracepoint" or "stat".
    pub detect: String,
    /// Every CPU a disk's lease may hold, held or not.
    pub cpus: BTreeMap<u32, CpuLease>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuLease {
    /// The limit written while held; null while no lease holds the CPU.
    pub limit_us: Option<u64>,
    /// The longest timeout of the disks holding it: the most time left
    /// after their last I/O (0 while none holds).
    pub timeout_ms: u64,
    /// The disks whose I/O holds it now.
    pub disks: Vec<String>,
}

/// Write `p` as `dir`'s lease file, replacing it at once.
pub fn write(dir: &Path, p: &Published) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{FILE}.{}", std::process::id()));
    let body = serde_json::to_vec_pretty(p).map_err(std::io::Error::other)?;
    // `dir` is the checked state directory; a name planted there is still
    // neither followed nor reused
    let _ = fs::remove_file(&tmp);
    let done = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(crate::trust::custom_flags(rustix::fs::OFlags::NOFOLLOW))
            .open(&tmp)?;
        f.write_all(&body)?;
        fs::rename(&tmp, dir.join(FILE))
    })();
    if done.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    done
}

pub fn remove(dir: &Path) {
    let _ = fs::remove_file(dir.join(FILE));
}

/// The lease file of `dir` if the process that wrote it still runs
/// (`alive`); `None` when there is none, it does not parse, or its writer
/// is gone (a SIGKILL leaves the file: what it says no longer holds).
pub fn read(dir: &Path, alive: impl Fn(u32) -> bool) -> Option<Published> {
    let path = dir.join(FILE);
    let meta = fs::symlink_metadata(&path).ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_BYTES {
        return None;
    }
    let p: Published = serde_json::from_slice(&fs::read(&path).ok()?).ok()?;
    alive(p.pid).then_some(p)
}

/// What a running `blkqos lease` publishes in `dir`, for the readers.
pub fn running(dir: &Path) -> Option<Published> {
    read(dir, blkqos_runs)
}

/// Whether `pid` is a running blkqos (its command name, which any user
/// may read): a pid reused by another program is not a lease.
pub fn blkqos_runs(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == "blkqos")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(pid: u32) -> Published {
        Published {
            pid,
            detect: "tracepoint".into(),
            cpus: BTreeMap::from([
                (
                    0,
                    CpuLease {
                        limit_us: Some(10),
                        timeout_ms: 3,
                        disks: vec!["nvme0n1".into()],
                    },
                ),
                (
                    1,
                    CpuLease {
                        limit_us: None,
                        timeout_ms: 0,
                        disks: vec![],
                    },
                ),
            ]),
        }
    }

    #[test]
    fn a_written_file_reads_back_while_its_writer_runs_and_not_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), &sample(42)).expect("write");
        assert_eq!(read(dir.path(), |p| p == 42), Some(sample(42)));
        assert_eq!(read(dir.path(), |_| false), None);
        // no temporary left beside it
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, [FILE]);
        remove(dir.path());
        assert_eq!(read(dir.path(), |_| true), None);
    }

    #[test]
    fn a_file_that_is_not_a_lease_file_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE), "{\"pid\": 1}").expect("write");
        assert_eq!(read(dir.path(), |_| true), None);
        fs::remove_file(dir.path().join(FILE)).expect("rm");
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join(FILE)).expect("symlink");
        assert_eq!(read(dir.path(), |_| true), None);
    }

    #[test]
    fn this_test_process_is_not_a_running_blkqos() {
        assert!(!blkqos_runs(std::process::id()));
        assert!(!blkqos_runs(u32::MAX));
    }
}
