//! The udev event a `blkqos udev` run was started for, checked before use.
//!
//! ACTION and DEVPATH come from the environment udev sets, which is input
//! like any other: the device path must name a whole disk of the block
//! subsystem inside the sysfs root, or the event is refused.

use crate::disk_id::DiskId;
use crate::sysfs::Sysfs;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Add,
    Change,
    Remove,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Add => "add",
            Action::Change => "change",
            Action::Remove => "remove",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub action: Action,
    /// Kernel name of the whole disk (`nvme0n1`).
    pub name: String,
    /// A remove of an earlier disk of that name: another disk has it now
    /// (the diskseq it had).
    pub earlier: Option<u64>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HotplugError {
    #[error("no {0} given (set by udev, or pass --{1})")]
    Missing(&'static str, &'static str),
    #[error("ACTION {0:?}: expected add, change or remove")]
    Action(String),
    #[error("DEVPATH {0:?}: {1}")]
    Devpath(String, &'static str),
    #[error(
        "remove: {0} is still present (block/{0} is there); a remove is acted on once the disk has gone, nothing written"
    )]
    StillPresent(String),
}

/// What to do for an event: a disk to tune or forget, or nothing (a
/// partition, which the kernel tunes through its disk).
pub fn parse(
    sysfs: &Sysfs,
    action: Option<&str>,
    devpath: Option<&str>,
    diskseq: Option<u64>,
) -> Result<Option<Event>, HotplugError> {
    let action = match action.ok_or(HotplugError::Missing("ACTION", "action"))? {
        "add" => Action::Add,
        "change" => Action::Change,
        "remove" => Action::Remove,
        other => return Err(HotplugError::Action(other.to_string())),
    };
    let devpath = devpath.ok_or(HotplugError::Missing("DEVPATH", "devpath"))?;
    let bad = |why| HotplugError::Devpath(devpath.to_string(), why);
    let rel = devpath
        .strip_prefix("/devices/")
        .ok_or_else(|| bad("must start with /devices/"))?;
    if devpath.len() > 4096 {
        return Err(bad("too long"));
    }
    for part in rel.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(bad("empty, '.' or '..' component"));
        }
        if !part.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') {
            return Err(bad("unexpected character"));
        }
    }
    // split() yields at least one part and none is empty (checked above)
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if !is_kernel_name(name) {
        return Err(bad("not a block device name"));
    }
    let mut event = Event {
        action,
        name: name.to_string(),
        earlier: None,
    };
    // A removed device has left sysfs: only its name can be checked. The
    // kernel unlinks block/<name> before it sends remove (del_gendisk), so
    // a remove while it is there is synthetic (`udevadm trigger -c
    // remove`) or forged, whatever DEVPATH says: acting on it would put
    // back the values of a disk still in use and forget its originals.
    // Unless the event says which disk it was for (DISKSEQ) and the disk
    // there now is another one: the name was given again before this
    // remove was handled.
    if action == Action::Remove {
        if sysfs.exists(&format!("block/{name}")) {
            let now = DiskId::read(sysfs, name).and_then(|id| id.diskseq);
            return match (diskseq, now) {
                (Some(gone), Some(now)) if gone != now => {
                    event.earlier = Some(gone);
                    Ok(Some(event))
                }
                _ => Err(HotplugError::StillPresent(name.to_string())),
            };
        }
        return Ok(Some(event));
    }
    let dir = format!("devices/{rel}");
    let canonical = sysfs
        .canonical(&dir)
        .map_err(|_| bad("not present under the sysfs root"))?;
    if canonical != dir {
        return Err(bad("resolves elsewhere (a link)"));
    }
    if sysfs.link_name(&format!("{dir}/subsystem")).as_deref() != Some("block") {
        return Err(bad("not a block device"));
    }
    if sysfs.exists(&format!("{dir}/partition")) {
        return Ok(None);
    }
    match sysfs.canonical(&format!("block/{name}")) {
        Ok(disk) if disk == dir => Ok(Some(event)),
        _ => Err(bad("not a whole disk listed in block/")),
    }
}

/// Names the kernel gives block devices: `sda`, `nvme0n1`, `md127`, `dm-0`,
/// `cciss!c0d0` (a `/` in the driver's name becomes `!` in sysfs).
pub fn is_kernel_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:!+".contains(&b))
        && name != "."
        && name != ".."
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Abi;
    use crate::fixture::Fixture;

    fn tree() -> (tempfile::TempDir, Sysfs, String, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut f = Fixture::new(dir.path(), 2, Abi::Queue);
        let disk = f.nvme(0, "Test NVMe", "S1");
        let part = f.partition(&f.dir_of(&disk), 1);
        let sysfs = Sysfs::new(dir.path());
        let dp = |n: &str| {
            format!(
                "/{}",
                sysfs.canonical(&format!("class/block/{n}")).expect("canon")
            )
        };
        let (d, p) = (dp(&disk), dp(&part));
        (dir, sysfs, d, p)
    }

    #[test]
    fn whole_disk_is_accepted_partition_ignored() {
        let (_t, sysfs, disk, part) = tree();
        let e = parse(&sysfs, Some("add"), Some(&disk), None).expect("ok");
        assert_eq!(
            e,
            Some(Event {
                action: Action::Add,
                name: "nvme0n1".into(),
                earlier: None,
            })
        );
        assert_eq!(parse(&sysfs, Some("change"), Some(&part), None), Ok(None));
    }

    #[test]
    fn remove_needs_only_a_valid_name() {
        let (_t, sysfs, _, _) = tree();
        let e = parse(
            &sysfs,
            Some("remove"),
            Some("/devices/virtual/block/nb7"),
            None,
        );
        assert_eq!(e.expect("ok").map(|e| e.name), Some("nb7".into()));
    }

    #[test]
    fn hostile_input_is_refused() {
        let (_t, sysfs, disk, _) = tree();
        let up = format!("{disk}/../../../..");
        for (action, devpath) in [
            (Some("add"), None),
            (None, Some(disk.as_str())),
            (Some("bind"), Some(disk.as_str())),
            (Some("add"), Some("/etc/passwd")),
            (Some("add"), Some("devices/virtual/block/x")),
            (Some("add"), Some(up.as_str())),
            (Some("remove"), Some("/devices/virtual/block/..")),
            (Some("remove"), Some("/devices/virtual/block/a b")),
            (Some("remove"), Some("/devices/virtual/block/x;rm")),
            (Some("add"), Some("/devices/virtual/block/nosuch")),
            (Some("add"), Some("/devices/system/cpu/cpu0")),
            (Some("remove"), Some(disk.as_str())),
            (Some("remove"), Some("/devices/virtual/block/nvme0n1")),
        ] {
            assert!(
                parse(&sysfs, action, devpath, None).is_err(),
                "{action:?} {devpath:?} was accepted"
            );
        }
    }
}
