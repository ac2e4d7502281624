//! The command's error type and its exit codes, decided in one place.

use crate::discover::ScanError;
use crate::plan::PlanError;
use crate::profile::ProfileError;
use crate::state::StateError;
use crate::sysfs::NotSysfs;
use crate::transaction::WriteError;
use std::path::{Path, PathBuf};

/// Every exit code blkqos has. blkqos(8)'s EXIT STATUS is written from
/// these constants (examples/gen-docs.rs); the exit code table of docs/commands.md
/// says the same and changes with them.
///
/// 0 success; 1 an operation failed (rolled back) or verify found a
/// mismatch; 2 usage or profile error (nothing written); 3 another run held
/// the lock past the lock timeout (nothing written: try again). `verify`
/// follows diff and cmp: 0 same, 1 differs, 2 could not check.
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_VERIFY_TROUBLE: u8 = 2;
pub const EXIT_BUSY: u8 = 3;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    NotSysfs(#[from] NotSysfs),
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error(
        "{command} needs root ({cause}); {} shows the plan without it",
        dry_run_of(command)
    )]
    NeedsRoot {
        command: &'static str,
        cause: StateError,
    },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Probe(#[from] crate::probe::ProbeError),
    #[error("{}: cannot write the metrics: {source}", path.display())]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the terminal: {0}")]
    Terminal(std::io::Error),
}

/// The dry run that shows what `command` would do: its own, or apply's
/// for the hotplug commands, which have none.
fn dry_run_of(command: &str) -> &'static str {
    match command {
        "udev" => "`blkqos apply PROFILE --device NAME --dry-run`",
        "coldplug" => "`blkqos apply PROFILE --dry-run`",
        _ => "--dry-run",
    }
}

impl Error {
    /// The error as `command` ran into it: a hotplug command runs apply's
    /// job, and the hint for a missing root must name a dry run it has.
    pub fn for_command(self, command: &'static str) -> Error {
        match self {
            Error::NeedsRoot { cause, .. } => Error::NeedsRoot { command, cause },
            e => e,
        }
    }
}

/// Where an error points: a file, and a line and column in it.
#[derive(Debug, Default, PartialEq)]
pub struct Location {
    pub file: Option<PathBuf>,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl Error {
    /// A stable name for the kind of error, for the JSON document.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Profile(ProfileError::Read { .. }) => "profile-unreadable",
            Error::Profile(ProfileError::Untrusted { .. }) => "profile-untrusted",
            Error::Profile(ProfileError::Invalid { .. }) => "profile-invalid",
            Error::Plan(
                PlanError::NoSuchDevice(_) | PlanError::Partition { .. } | PlanError::Unknown(_),
            ) => "no-such-device",
            Error::Plan(PlanError::AllGone { .. }) => "all-saved-devices-gone",
            Error::Plan(PlanError::AllReplaced { .. }) => "all-saved-devices-replaced",
            Error::Plan(PlanError::Scheduler { .. }) => "scheduler-not-offered",
            Error::Plan(PlanError::Read { .. }) => "read-failed",
            Error::Write(WriteError::Failed { .. }) => "write-failed",
            Error::State(StateError::Busy { .. })
            | Error::Write(WriteError::State(StateError::Busy { .. })) => "lock-busy",
            Error::State(StateError::Untrusted { .. })
            | Error::Write(WriteError::State(StateError::Untrusted { .. })) => "state-untrusted",
            Error::Write(WriteError::State(_)) | Error::State(_) => "state",
            Error::NotSysfs(_) => "not-sysfs",
            Error::NeedsRoot { .. } => "needs-root",
            Error::Usage(_) => "usage",
            Error::Probe(crate::probe::ProbeError::Refused(_)) => "probe-refused",
            Error::Probe(crate::probe::ProbeError::Failed(_)) => "probe-failed",
            Error::Probe(crate::probe::ProbeError::State(StateError::Busy { .. })) => "lock-busy",
            Error::Probe(crate::probe::ProbeError::State(_)) => "state",
            Error::Output { .. } => "write-failed",
            Error::Scan(_) | Error::Terminal(_) => "internal",
        }
    }

    /// The file (and line and column) the error is about, where there is one.
    pub fn location(&self) -> Location {
        let file = |f: &Path| Location {
            file: Some(f.to_path_buf()),
            ..Location::default()
        };
        match self {
            Error::Profile(ProfileError::Invalid {
                file: f,
                line,
                column,
                ..
            }) => Location {
                file: Some(f.clone()),
                line: Some(*line),
                column: Some(*column),
            },
            Error::Profile(ProfileError::Read { file: f, .. })
            | Error::Profile(ProfileError::Untrusted { file: f, .. }) => file(f),
            Error::State(state)
            | Error::Write(WriteError::State(state))
            | Error::NeedsRoot { cause: state, .. } => file(state.path()),
            Error::Output { path, .. } => file(path),
            _ => Location::default(),
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::State(StateError::Busy { .. })
            | Error::Write(WriteError::State(StateError::Busy { .. }))
            | Error::Probe(crate::probe::ProbeError::State(StateError::Busy { .. })) => EXIT_BUSY,
            Error::Probe(crate::probe::ProbeError::Refused(_)) => EXIT_USAGE,
            Error::Probe(_) => EXIT_FAILED,
            Error::Profile(_)
            | Error::Usage(_)
            | Error::NotSysfs(_)
            | Error::NeedsRoot { .. }
            | Error::Plan(
                PlanError::NoSuchDevice(_)
                | PlanError::Partition { .. }
                | PlanError::Unknown(_)
                | PlanError::AllGone { .. }
                | PlanError::AllReplaced { .. }
                | PlanError::Scheduler { .. },
            ) => EXIT_USAGE,
            Error::Plan(PlanError::Read { .. })
            | Error::Write(_)
            | Error::State(_)
            | Error::Scan(_)
            | Error::Output { .. }
            | Error::Terminal(_) => EXIT_FAILED,
        }
    }
}
