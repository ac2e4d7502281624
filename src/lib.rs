//! blkqos: per-device, time-limited CPU idle-latency constraints for block
//! devices. The pipeline: discover -> snapshot -> plan -> transaction, run
//! by the engine; the commands (`cmd/`) present what it did.

#![deny(unsafe_code)]

pub mod abi;
pub mod cli;
pub mod cmd;
pub mod conflicts;
pub mod devname;
pub mod discover;
pub mod disk_id;
pub mod engine;
pub mod error;
pub mod idle;
pub mod iostat;
pub mod lease;
pub mod logging;
pub mod matcher;
pub mod metrics;
pub mod parallel;
pub mod plan;
pub mod probe;
pub mod profile;
pub mod report;
pub mod snapshot;
pub mod state;
pub mod sysfs;
pub mod transaction;
pub mod transport;
pub mod trust;
pub mod udevdb;
pub mod uevent;

// The fixture (tests/support/fixture.rs) names the library `blkqos`, as the
// integration tests and the example that include it see it.
#[cfg(test)]
extern crate self as blkqos;
#[cfg(test)]
#[path = "../tests/support/fixture.rs"]
#[allow(dead_code)]
mod fixture;
