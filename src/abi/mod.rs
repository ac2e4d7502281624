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

use crate::sysfs::{Dir, Reading, is_vanished, read_text};

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
    /// The layout of the knobs in `dir`, the directory of `disk`
    /// (`block/<disk>`), and their values by path: the layout is the
    /// first whose limit is there.
    pub fn probe(dir: &Dir<'_>, disk: &str) -> (Abi, Vec<(String, Reading)>) {
        for abi in [Abi::Queue, Abi::Disk] {
            // the layout is the one whose limit opens; a read that fails
            // after (the disk going away) is the reading's, not the layout's
            let limit = match dir.open(&knobs::within_disk(abi, knobs::LIMIT)) {
                Err(e) if is_vanished(&e) => continue,
                opened => Reading::of(opened.and_then(read_text)),
            };
            let timeout = Reading::of(dir.read(&knobs::within_disk(abi, knobs::TIMEOUT)));
            let found = vec![
                (knobs::limit_path(abi, disk), limit),
                (knobs::timeout_path(abi, disk), timeout),
            ];
            return (abi, found);
        }
        (Abi::None, Vec::new())
    }

    pub fn describe(self) -> &'static str {
        match self {
            Abi::Queue => "queue",
            Abi::Disk => "disk",
            Abi::None => "none",
        }
    }
}
