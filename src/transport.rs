//! What kind of block device a disk is and how it is attached: the words a
//! scan reports and a profile's match takes, below both.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Nvme,
    Sata,
    Sas,
    Scsi,
    Usb,
    Virtio,
    Mmc,
    Virtual,
    Unknown,
}

impl Transport {
    pub const NAMES: [&'static str; 8] = [
        "nvme", "sata", "sas", "scsi", "usb", "virtio", "mmc", "virtual",
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Nvme => "nvme",
            Transport::Sata => "sata",
            Transport::Sas => "sas",
            Transport::Scsi => "scsi",
            Transport::Usb => "usb",
            Transport::Virtio => "virtio",
            Transport::Mmc => "mmc",
            Transport::Virtual => "virtual",
            Transport::Unknown => "unknown",
        }
    }
}

impl FromStr for Transport {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s {
            "nvme" => Transport::Nvme,
            "sata" => Transport::Sata,
            "sas" => Transport::Sas,
            "scsi" => Transport::Scsi,
            "usb" => Transport::Usb,
            "virtio" => Transport::Virtio,
            "mmc" => Transport::Mmc,
            "virtual" => Transport::Virtual,
            _ => return Err(()),
        })
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a disk does its I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A blk-mq (request-based) disk: it has hardware queues and the knobs.
    Disk,
    /// NVMe native-multipath head (bio-based), I/O goes to its path disks.
    NvmeHead,
    /// A hidden NVMe multipath path disk (`nvmeXcYnZ`).
    NvmePath,
    Md,
    Dm,
    /// Any other bio-based disk (zram, brd, ...): no hardware queues.
    BioBased,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Disk => "disk",
            Kind::NvmeHead => "nvme-head",
            Kind::NvmePath => "nvme-path",
            Kind::Md => "md",
            Kind::Dm => "dm",
            Kind::BioBased => "bio-based",
        }
    }
}
