//! blkqos: per-device, time-limited CPU idle-latency constraints for block
//! devices. The pipeline: discover -> profile/match -> plan -> apply.

pub mod abi;
pub mod apply;
pub mod cli;
pub mod commands;
pub mod conflicts;
pub mod discover;
pub mod error;
pub mod fixture;
pub mod hotplug;
pub mod idle;
pub mod logging;
pub mod matcher;
pub mod plan;
pub mod profile;
pub mod report;
pub mod state;
pub mod sysfs;
mod udevdb;
