//! Which disk a name stands for. Names are reused (an NVMe namespace hot
//! swapped, an md or dm device made again), so the state keeps, beside
//! each name it saved values for, the disk's `diskseq` (a count the kernel
//! never repeats until reboot, 5.15+) and its device number; a name whose
//! disk is another one now no longer owns what the one before saved.

use crate::sysfs::Sysfs;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DiskId {
    /// `MAJOR:MINOR`, as `dev` reads.
    pub dev: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diskseq: Option<u64>,
}

impl DiskId {
    /// The disk `block/NAME` is now, if it is there.
    pub fn read(sysfs: &Sysfs, name: &str) -> Option<DiskId> {
        let id = DiskId {
            dev: sysfs.attr(&format!("block/{name}/dev"))?,
            diskseq: (sysfs.attr(&format!("block/{name}/diskseq"))).and_then(|s| s.parse().ok()),
        };
        id.is_valid().then_some(id)
    }

    /// `MAJOR:MINOR`, both numbers.
    pub fn is_valid(&self) -> bool {
        let number =
            |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
        self.dev
            .split_once(':')
            .is_some_and(|(a, b)| number(a) && number(b))
    }

    /// Whether two readings are the same disk: by diskseq where both have
    /// one (device numbers are reused as soon as they are freed), by the
    /// device number on older kernels.
    pub fn same_disk(&self, other: &DiskId) -> bool {
        match (self.diskseq, other.diskseq) {
            (Some(a), Some(b)) => a == b,
            _ => !self.dev.is_empty() && self.dev == other.dev,
        }
    }
}

impl std::fmt::Display for DiskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.diskseq {
            Some(seq) => write!(f, "diskseq {seq}"),
            None => write!(f, "device {}", self.dev),
        }
    }
}
