//! The commands: each reads what it needs through the engine (or, for the
//! read-only views, a scan and a snapshot), and owns how it prints it: the
//! human table and the versioned JSON document's types. Each appends what
//! it prints to `out` and returns the exit code; errors go back to `main`.

pub mod apply;
pub mod check;
pub mod explain;
pub mod hotplug;
pub mod lease;
pub mod list;
pub mod metrics;
pub mod probe;
pub mod restore;
pub mod status;
pub mod top;
pub mod verify;

use crate::devname;
use crate::engine::Engine;
use crate::error::Error;
use crate::report::{Document, Failure, JSON_SCHEMA, Style, Unreadable};
use crate::state::StateDir;
use crate::sysfs::Sysfs;
use serde::Serialize;
use std::time::Duration;

/// poll(2) on `fds` for up to `timeout` (`None`: until an event); a
/// timeout longer than a timespec holds waits as long as one can.
pub(crate) fn poll(
    fds: &mut [rustix::event::PollFd<'_>],
    timeout: Option<Duration>,
) -> rustix::io::Result<usize> {
    use rustix::event::Timespec;
    let at = timeout.map(|d| {
        Timespec::try_from(d).unwrap_or(Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        })
    });
    rustix::event::poll(fds, at.as_ref())
}

pub struct Ctx {
    pub sysfs: Sysfs,
    pub state: StateDir,
    pub style: Style,
}

impl Ctx {
    pub fn engine(&self) -> Engine<'_> {
        Engine {
            sysfs: &self.sysfs,
            state: &self.state,
            media_change: None,
        }
    }
}

/// The kernel names of `--device` arguments, given as names or /dev
/// paths; they go into sysfs paths, so anything else is refused.
fn kernel_names(devices: &[String]) -> Result<Vec<String>, Error> {
    devices.iter().map(|d| kernel_name(d)).collect()
}

/// The kernel name of one device argument.
fn kernel_name(arg: &str) -> Result<String, Error> {
    devname::kernel_name(arg)
        .ok_or_else(|| Error::Usage(format!("{arg:?}: not a block device name or /dev path")))
}

/// The files a profile was read from, for the JSON document's `files`.
fn file_names(p: &crate::profile::Profile) -> Vec<String> {
    p.files.iter().map(|f| f.display().to_string()).collect()
}

/// The versioned JSON document every `--json` command prints.
fn doc<'a, D: Serialize>(
    command: &'a str,
    changed: bool,
    dry_run: bool,
    devices: D,
    warnings: &'a [String],
    unreadable: &'a [Unreadable],
    error: Option<&Error>,
) -> Document<'a, D> {
    Document {
        schema: JSON_SCHEMA,
        command,
        changed,
        dry_run,
        devices,
        warnings,
        unreadable,
        error: error.map(|e| e.to_string()),
        failure: error.map(failure),
        files: Vec::new(),
    }
}

/// The document of a command that failed before it had anything to show.
pub fn error_doc(command: &str, dry_run: bool, error: &Error) -> String {
    doc(command, false, dry_run, [(); 0], &[], &[], Some(error)).render()
}

fn failure(e: &Error) -> Failure {
    let at = e.location();
    Failure {
        kind: e.kind(),
        message: e.to_string(),
        file: at.file.map(|f| f.display().to_string()),
        line: at.line,
        column: at.column,
    }
}
