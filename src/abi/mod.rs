//! Kernel ABIs that carry a device's CPU-latency constraint: where their
//! attributes are (path builders) and how values are written (encoders).
//!
//! Probed per request queue, in order of preference:
//! 1. `queue/cpu_lat_limit_us` + `queue/cpu_lat_timeout_ms` (this project's patch),
//! 2. `cpu_lat_limit_us` + `cpu_lat_timeout_ms` in the disk directory (the
//!    layout of the earlier public RFC series, same semantics),
//! 3. neither: optionally a static per-CPU resume-latency limit (`resume`).

pub mod knobs;
pub mod resume;

use crate::sysfs::Sysfs;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abi {
    /// `/sys/block/<disk>/queue/cpu_lat_*`.
    Queue,
    /// `/sys/block/<disk>/cpu_lat_*`.
    Disk,
    /// No per-device knobs on this queue.
    None,
}

impl Abi {
    pub fn probe(sysfs: &Sysfs, disk: &str) -> Abi {
        if sysfs.exists(&knobs::limit_path(Abi::Queue, disk)) {
            Abi::Queue
        } else if sysfs.exists(&knobs::limit_path(Abi::Disk, disk)) {
            Abi::Disk
        } else {
            Abi::None
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Abi::Queue => "queue",
            Abi::Disk => "disk",
            Abi::None => "none",
        }
    }
}
