//! The commands: each reads what it needs through the engine (or, for the
//! read-only views, a scan and a snapshot), and owns how it prints it: the
//! human table and the versioned JSON document's types. Each appends what
//! it prints to `out` and returns the exit code; errors go back to `main`.

pub mod apply;
pub mod check;
pub mod explain;
pub mod hotplug;
pub mod list;
pub mod restore;
pub mod status;
pub mod verify;

use crate::engine::Engine;
use crate::error::Error;
use crate::hotplug::is_kernel_name;
use crate::report::{Document, JSON_SCHEMA, Style};
use crate::state::StateDir;
use crate::sysfs::Sysfs;
use serde::Serialize;

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
        }
    }
}

/// `--device` names go into sysfs paths: only kernel block device names.
fn check_names(devices: &[String]) -> Result<(), Error> {
    match devices.iter().find(|n| !is_kernel_name(n)) {
        Some(bad) => Err(Error::Usage(format!(
            "--device {bad:?}: not a block device name"
        ))),
        None => Ok(()),
    }
}

/// The versioned JSON document every `--json` command prints.
fn doc<D: Serialize>(
    command: &str,
    changed: bool,
    dry_run: bool,
    devices: D,
    warnings: &[String],
    error: Option<String>,
) -> String {
    Document {
        schema: JSON_SCHEMA,
        command,
        changed,
        dry_run,
        devices,
        warnings,
        error,
    }
    .render()
}
