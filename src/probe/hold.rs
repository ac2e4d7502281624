//! How a configuration holds the CPUs that serve the probed disk, and how
//! it lets them go: through the queue knobs where the kernel has its own
//! lease, else through `blkqos lease` itself, run as a child with a
//! profile of one rule (the code users run, its put-back included: a
//! SIGTERM, its parent's death, or the next `restore` or lease after a
//! SIGKILL puts the CPUs back).

use super::ProbeError;
use super::sample::Config;
use crate::abi::{Abi, knobs};
use crate::lease::published;
use crate::state::{Saved, StateDir};
use crate::sysfs::Sysfs;
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The lease child's program: the running binary itself.
pub const SELF: &str = "/proc/self/exe";

/// The lease child's profile, in the state directory.
const PROFILE: &str = "probe-profile.toml";

/// How long a lease child gets to put its CPUs back after SIGTERM.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// What holds the CPUs during a configuration.
pub enum Holder<'a> {
    /// The kernel's lease: the queues' knobs, and the values found there
    /// (written back after each configuration).
    Knobs {
        sysfs: &'a Sysfs,
        found: Vec<(String, String)>,
        /// The found values are back (after the last `end`): only then
        /// are the saved entries dropped.
        back: bool,
    },
    /// `blkqos lease`, started for each configuration and stopped after.
    Lease {
        sysfs: &'a Sysfs,
        state: &'a StateDir,
        disk: String,
        cpus: Vec<u32>,
        child: Option<Child>,
        dir: PathBuf,
    },
}

/// The knob paths of the queues `queues` (kernel names, with their ABI).
pub fn knob_paths(queues: &[(String, Abi)]) -> Vec<String> {
    (queues.iter())
        .filter(|(_, abi)| *abi != Abi::None)
        .flat_map(|(q, abi)| [knobs::limit_path(*abi, q), knobs::timeout_path(*abi, q)])
        .collect()
}

impl<'a> Holder<'a> {
    /// The knobs of `paths`: their values are saved in the state (for
    /// `restore`, should the probe be killed) before anything is written.
    /// The caller has refused a disk whose knobs are someone's already
    /// (a saved entry, a limit on).
    pub fn knobs(
        sysfs: &'a Sysfs,
        state: &StateDir,
        disk: &str,
        paths: &[String],
    ) -> Result<Holder<'a>, ProbeError> {
        let mut found = Vec::new();
        for p in paths {
            let v = sysfs
                .read(p)
                .map_err(|e| ProbeError::Failed(format!("{p}: cannot read: {e}")))?;
            found.push((p.clone(), v));
        }
        let mut locked = state.lock()?;
        for (p, v) in &found {
            locked.state.saved.insert(
                p.clone(),
                Saved {
                    original: v.clone(),
                    owners: BTreeSet::from([disk.to_string()]),
                    written: None,
                },
            );
        }
        locked.save()?;
        Ok(Holder::Knobs {
            sysfs,
            found,
            back: true,
        })
    }

    pub fn lease(
        sysfs: &'a Sysfs,
        state: &'a StateDir,
        disk: &str,
        cpus: &[u32],
    ) -> Result<Holder<'a>, ProbeError> {
        Ok(Holder::Lease {
            sysfs,
            state,
            disk: disk.to_string(),
            cpus: cpus.to_vec(),
            child: None,
            dir: state.checked_dir()?,
        })
    }

    /// Hold as `config` says; `warm` reads for a while (the lease holds
    /// only once it sees I/O). Whether the hold was seen: a lease that
    /// did not hold within 5 s of reads is measured as it is, and said.
    pub fn begin(
        &mut self,
        config: &Config,
        mut warm: impl FnMut() -> Result<(), ProbeError>,
    ) -> Result<bool, ProbeError> {
        let (limit, timeout) = match *config {
            Config::Deep => return warm().map(|()| true),
            // held for the run: the longest gap between reads is 32 ms
            Config::C1 { limit_us } => (limit_us, 1000),
            Config::Lease {
                limit_us,
                timeout_ms,
                ..
            } => (limit_us, timeout_ms),
        };
        match self {
            Holder::Knobs { sysfs, found, back } => {
                *back = false;
                for (p, _) in found.iter() {
                    let v = match p.ends_with(knobs::LIMIT) {
                        true => limit.to_string(),
                        false => timeout.to_string(),
                    };
                    sysfs
                        .write(p, &v)
                        .map_err(|e| ProbeError::Failed(format!("{p}: cannot write {v}: {e}")))?;
                }
                warm().map(|()| true)
            }
            Holder::Lease {
                state,
                disk,
                cpus,
                child,
                dir,
                sysfs,
            } => {
                let profile = dir.join(PROFILE);
                write_profile(&profile, disk, limit, timeout)?;
                let log = dir.join("probe-lease.log");
                let out = fs::File::create(&log)
                    .map_err(|e| ProbeError::Failed(format!("{}: {e}", log.display())))?;
                // this very binary (its inode, even if a package upgrade
                // replaced the file at its path), never a shell
                let spawned = Command::new(SELF)
                    .arg("--sysfs")
                    .arg(sysfs.root())
                    .arg("--state-dir")
                    .arg(state.dir())
                    .args(["--log", "stderr", "lease"])
                    .arg(&profile)
                    .arg("--with-parent")
                    .arg(std::process::id().to_string())
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(out)
                    .spawn()
                    .map_err(|e| ProbeError::Failed(format!("cannot start blkqos lease: {e}")))?;
                let pid = spawned.id();
                *child = Some(spawned);
                // the lease holds once it has seen I/O: read until it says so
                let start = Instant::now();
                loop {
                    warm()?;
                    let holds = published::read(dir, |p| p == pid).is_some_and(|p| {
                        cpus.iter()
                            .any(|c| p.cpus.get(c).is_some_and(|l| l.limit_us == Some(limit)))
                    });
                    if holds {
                        return Ok(true);
                    }
                    if let Some(c) = child.as_mut()
                        && let Ok(Some(status)) = c.try_wait()
                    {
                        *child = None;
                        return Err(ProbeError::Failed(format!(
                            "blkqos lease stopped ({status}): {}",
                            tail(&log)
                        )));
                    }
                    if start.elapsed() > Duration::from_secs(5) {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// Let go: the values found written back, or the lease stopped (it
    /// puts its CPUs back).
    pub fn end(&mut self) -> Result<(), ProbeError> {
        match self {
            Holder::Knobs { sysfs, found, back } => {
                let mut failed = Vec::new();
                // the timeout first: a limit put back to off must not
                // meet a timeout still at the probe's
                for (p, v) in found.iter().rev() {
                    if let Err(e) = sysfs.write(p, v) {
                        failed.push(format!("{p}: cannot put {v:?} back: {e}"));
                    }
                }
                *back = failed.is_empty();
                match failed.is_empty() {
                    true => Ok(()),
                    false => Err(ProbeError::Failed(format!(
                        "{}; their originals stay saved: `blkqos restore` puts them back",
                        failed.join("; ")
                    ))),
                }
            }
            Holder::Lease { child, dir, .. } => {
                let Some(mut c) = child.take() else {
                    return Ok(());
                };
                let pid = rustix::process::Pid::from_raw(c.id() as i32);
                if let Some(pid) = pid {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                }
                let start = Instant::now();
                loop {
                    match c.try_wait() {
                        Ok(Some(s)) if s.success() => return Ok(()),
                        Ok(Some(s)) => {
                            return Err(ProbeError::Failed(format!(
                                "blkqos lease stopped with {s}: {}",
                                tail(&dir.join("probe-lease.log"))
                            )));
                        }
                        Ok(None) if start.elapsed() < STOP_WAIT => {
                            std::thread::sleep(Duration::from_millis(5))
                        }
                        _ => {
                            let _ = c.kill();
                            let _ = c.wait();
                            return Err(ProbeError::Failed(
                                "blkqos lease did not stop within 10 s of SIGTERM: killed; `blkqos restore` puts its CPUs back".to_string(),
                            ));
                        }
                    }
                }
            }
        }
    }

    /// After the last configuration: the knobs' saved entries the probe
    /// made are dropped (their values are back), the lease's files removed.
    pub fn finish(self, state: &StateDir, disk: &str) -> Result<(), ProbeError> {
        match self {
            // a value not put back keeps its entry, for `restore`
            Holder::Knobs { found, back, .. } => {
                if !back {
                    return Ok(());
                }
                let mut locked = state.lock()?;
                for (p, v) in &found {
                    let ours = locked.state.saved.get(p).is_some_and(|s| {
                        s.original == *v && s.owners.len() == 1 && s.owners.contains(disk)
                    });
                    if ours {
                        locked.state.saved.remove(p);
                    }
                }
                locked.save()?;
                Ok(())
            }
            Holder::Lease { dir, .. } => {
                let _ = fs::remove_file(dir.join(PROFILE));
                let _ = fs::remove_file(dir.join("probe-lease.log"));
                Ok(())
            }
        }
    }
}

/// The profile of one rule the lease child runs.
fn write_profile(path: &Path, disk: &str, limit: u64, timeout: u64) -> Result<(), ProbeError> {
    let text = format!(
        "# written by blkqos probe for one configuration; removed after the run\n\
         [defaults]\nfallback = \"none\"\n\n[[rule]]\nname = \"probe\"\n\
         match = {{ name = \"{disk}\" }}\ncpu_lat_limit_us = {limit}\ncpu_lat_timeout_ms = {timeout}\n"
    );
    // a run killed before it removed its profile left it; anything else
    // there is not the probe's to remove
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {
            let _ = fs::remove_file(path);
        }
        Ok(_) => {
            return Err(ProbeError::Failed(format!(
                "{}: not a regular file; the probe writes its lease's profile there: remove it",
                path.display()
            )));
        }
        Err(_) => {}
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .map_err(|e| ProbeError::Failed(format!("{}: {e}", path.display())))
}

/// The last lines of a child's log, for an error.
fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" / ")
}
