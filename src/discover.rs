//! Discover whole disks and resolve each to the request queues that do its I/O.
//!
//! Structure (stacking, queues, CPUs) always comes from sysfs; enumeration and
//! udev properties come from libudev when the tree is the live one and a udev
//! database exists.

use crate::abi::Abi;
use crate::idle::parse_cpu_list;
use crate::sysfs::{Reading, Sysfs, natural_cmp};
use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

mod nvme;
pub use crate::transport::{Kind, Transport};
use nvme::*;

#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub name: String,
    /// Canonical location relative to the sysfs root (`devices/...`).
    pub syspath: String,
    pub kind: Kind,
    pub transport: Transport,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub wwid: Option<String>,
    pub driver: Option<String>,
    /// PCI functions the device sits behind (several for a multipath head).
    pub pci: Vec<String>,
    pub rotational: bool,
    pub removable: bool,
    pub size_bytes: u64,
    /// CPUs that submit to (and, with managed IRQs, complete) this queue.
    pub cpus: Vec<u32>,
    pub hw_queues: usize,
    pub slaves: Vec<String>,
    pub holders: Vec<String>,
    /// Path disks of an NVMe multipath head.
    pub paths: Vec<String>,
    /// The head of a hidden path disk.
    pub head: Option<String>,
    pub abi: Abi,
    /// The knobs' values (by path, as `abi` lays them out), read with the
    /// rest of the disk.
    pub knobs: Vec<(String, Reading)>,
    /// Request queues that really do this device's I/O (itself for a disk).
    pub targets: Vec<String>,
    pub properties: BTreeMap<String, String>,
    /// Why the device is not a candidate for rules, as lsblk would hide it.
    pub excluded: Option<String>,
    /// An attribute that decides whether it is a candidate (`size`) and
    /// could not be read, with the error: a disk that cannot be judged is
    /// left alone, and the run reports it as it does an unreadable knob.
    pub unread: Option<(String, String)>,
}

#[derive(Debug, Default, Clone)]
pub struct Inventory {
    pub devices: Vec<Device>,
    pub warnings: Vec<String>,
    /// "udev" or "sysfs": where the list of disks came from.
    pub source: &'static str,
    /// Partition -> its disk, for the partitions the scan came across: a
    /// name someone gives that is one is told so, not "no such device".
    pub partitions: BTreeMap<String, String>,
    /// Name -> position in `devices`, built on the first lookup: plans look
    /// devices up by name once per target, thousands of times on big hosts.
    index: OnceCell<HashMap<String, usize>>,
}

impl Inventory {
    pub fn get(&self, name: &str) -> Option<&Device> {
        let index = self.index.get_or_init(|| {
            self.devices
                .iter()
                .enumerate()
                .map(|(i, d)| (d.name.clone(), i))
                .collect()
        });
        index.get(name).map(|&i| &self.devices[i])
    }

    /// Devices that rules may match: whole, visible, non-empty disks.
    pub fn visible(&self) -> impl Iterator<Item = &Device> {
        self.devices.iter().filter(|d| d.excluded.is_none())
    }
}

/// How much to read about each disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// Model, serial, WWID and driver: what `list` shows and what rules
    /// may match on, a third of the reads per disk; a plan whose rules do
    /// not match on them does without.
    pub identity: bool,
    /// `queue/rotational` and `removable`: also shown by `list`, and read
    /// for a plan only when a rule matches on them.
    pub flags: bool,
    /// The hardware queues counted (`mq/` listed): shown by `list`. A
    /// plan needs only whether there are any, when the possible CPUs are
    /// known: blk-mq maps all of them to a disk's queues.
    pub queues: bool,
}

impl Detail {
    pub const FULL: Detail = Detail {
        identity: true,
        flags: true,
        queues: true,
    };
}

/// Which disks a scan reads.
#[derive(Debug, Clone, Copy)]
pub enum Extent<'a> {
    /// Every disk.
    All,
    /// Only these disks and the disks stacked with them, transitively: what
    /// their I/O resolves to, what sits on top of them (whose rules also
    /// land on their queues) and those devices' other members. For these
    /// devices the result equals what [`Extent::All`] finds; one udev event
    /// needs no more, and on a host with a thousand disks reading them all
    /// costs about forty times as much.
    Around(&'a [String]),
}

/// The one way to read the disks: those of `extent`, with what `detail` asks for.
pub fn scan(sysfs: &Sysfs, extent: Extent, detail: Detail) -> Result<Inventory, ScanError> {
    let inv = match extent {
        Extent::All => scan_all(sysfs, detail),
        Extent::Around(roots) => scan_around(sysfs, roots, detail),
    }?;
    log::debug!(
        "scanned {} disk(s) ({}) from {}",
        inv.devices.len(),
        inv.devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        inv.source
    );
    Ok(inv)
}

fn scan_all(sysfs: &Sysfs, detail: Detail) -> Result<Inventory, ScanError> {
    let mut warnings = Vec::new();
    let (mut names, properties, source) = match crate::udevdb::enumerate(sysfs) {
        Ok(Some(found)) => (found.names, found.properties, "udev"),
        Ok(None) => (Vec::new(), BTreeMap::new(), "sysfs"),
        Err(e) => {
            warnings.push(format!("udev enumeration failed ({e}); using sysfs"));
            (Vec::new(), BTreeMap::new(), "sysfs")
        }
    };
    // udev may not have processed every disk yet (early boot); sysfs is the
    // authority on what exists, udev only adds names and properties.
    let known: std::collections::HashSet<String> = names.iter().cloned().collect();
    let disks = sysfs.list("block");
    let partitions = partition_parents(sysfs, &disks);
    for name in disks {
        if !known.contains(&name) {
            names.push(name);
        }
    }
    assemble(
        sysfs,
        Candidates {
            names,
            properties,
            partitions,
            source,
            warnings,
        },
        detail,
    )
}

fn scan_around(sysfs: &Sysfs, roots: &[String], detail: Detail) -> Result<Inventory, ScanError> {
    let mut warnings = Vec::new();
    let mut partitions = BTreeMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut todo: Vec<String> = roots
        .iter()
        .map(|r| disk_of(sysfs, r, &mut partitions))
        .collect();
    while let Some(name) = todo.pop() {
        let base = format!("block/{name}");
        if names.contains(&name) || !sysfs.exists(&base) {
            continue;
        }
        let mut next = sysfs.list(&format!("{base}/slaves"));
        next.extend(sysfs.list(&format!("{base}/holders")));
        next.extend(nvme_paths(sysfs, &name));
        for entry in sysfs.list(&base) {
            if sysfs.exists(&format!("{base}/{entry}/partition")) {
                next.extend(sysfs.list(&format!("{base}/{entry}/holders")));
            }
        }
        if let Some(head) = nvme_head_of(sysfs, &name) {
            next.push(head);
        }
        todo.extend(next.iter().map(|n| disk_of(sysfs, n, &mut partitions)));
        names.push(name);
    }
    let (properties, source) = match crate::udevdb::properties_of(sysfs, &names) {
        Ok(Some(found)) => (found, "udev"),
        Ok(None) => (BTreeMap::new(), "sysfs"),
        Err(e) => {
            warnings.push(format!("udev database unreadable ({e}); using sysfs"));
            (BTreeMap::new(), "sysfs")
        }
    };
    assemble(
        sysfs,
        Candidates {
            names,
            properties,
            partitions,
            source,
            warnings,
        },
        detail,
    )
}

/// The whole disk a block device name belongs to (itself unless it is a
/// partition), remembering partitions for [`resolve`].
fn disk_of(sysfs: &Sysfs, name: &str, partitions: &mut BTreeMap<String, String>) -> String {
    if let Some(disk) = partitions.get(name) {
        return disk.clone();
    }
    match partition_parent(sysfs, name) {
        Some(disk) => {
            partitions.insert(name.to_string(), disk.clone());
            disk
        }
        None => name.to_string(),
    }
}

/// What a scan found out before reading each disk.
struct Candidates {
    names: Vec<String>,
    properties: crate::udevdb::Props,
    /// Partition name -> whole-disk name.
    partitions: BTreeMap<String, String>,
    source: &'static str,
    warnings: Vec<String>,
}

fn assemble(sysfs: &Sysfs, candidates: Candidates, detail: Detail) -> Result<Inventory, ScanError> {
    let Candidates {
        mut names,
        mut properties,
        partitions,
        source,
        mut warnings,
    } = candidates;
    names.sort_by(|a, b| natural_cmp(a, b));
    let work: Vec<(String, BTreeMap<String, String>)> = names
        .into_iter()
        .map(|n| {
            let props = properties.remove(&n).unwrap_or_default();
            (n, props)
        })
        .collect();
    let mut devices = Vec::with_capacity(work.len());
    for (found, mut w) in read_devices(sysfs, work, detail)? {
        devices.extend(found);
        warnings.append(&mut w);
    }

    link_multipath(&mut devices);
    fill_holders(&mut devices);
    let by_name: HashMap<&str, &Device> = devices.iter().map(|d| (d.name.as_str(), d)).collect();
    let targets: Vec<Vec<String>> = devices
        .iter()
        .map(|d| resolve(&by_name, &partitions, &d.name, &mut warnings))
        .collect();
    for (d, t) in devices.iter_mut().zip(targets) {
        d.targets = t;
    }
    for d in &mut devices {
        d.excluded = exclusion(d);
    }
    Ok(Inventory {
        devices,
        warnings,
        source,
        partitions,
        index: OnceCell::new(),
    })
}

/// A disk's holders are the devices whose slaves name it: the kernel
/// makes both links together (bd_link_disk_holder), so the slaves read
/// serve both sides. A holder of a partition is not the disk's (the
/// kernel lists it in the partition's holders/ only): no disk is named
/// by that slave.
fn fill_holders(devices: &mut [Device]) {
    let mut holders: HashMap<String, Vec<String>> = HashMap::new();
    for d in devices.iter() {
        for s in &d.slaves {
            holders.entry(s.clone()).or_default().push(d.name.clone());
        }
    }
    for d in devices.iter_mut() {
        if let Some(h) = holders.remove(&d.name) {
            d.holders = h;
        }
    }
}

/// Partition name -> whole-disk name, from `class/block/*/partition`;
/// the names `block/` lists (`disks`, sorted) are whole disks.
fn partition_parents(sysfs: &Sysfs, disks: &[String]) -> BTreeMap<String, String> {
    sysfs
        .list("class/block")
        .into_iter()
        .filter(|p| disks.binary_search_by(|d| natural_cmp(d, p)).is_err())
        .filter_map(|p| Some((p.clone(), partition_parent(sysfs, &p)?)))
        .collect()
}

fn partition_parent(sysfs: &Sysfs, name: &str) -> Option<String> {
    if !sysfs.exists(&format!("class/block/{name}/partition")) {
        return None;
    }
    let canon = sysfs.resolve(&format!("class/block/{name}")).ok()?;
    Some(canon.rsplit('/').nth(1)?.to_string())
}

/// One disk read: the device (none if it could not be read) and warnings.
type DeviceRead = (Option<Device>, Vec<String>);

/// Disks read in parallel: reading one is a few dozen small syscalls, and
/// a host with a thousand disks otherwise waits on them one after another.
/// Results come back in the order given.
fn read_devices(
    sysfs: &Sysfs,
    work: Vec<(String, BTreeMap<String, String>)>,
    detail: Detail,
) -> Result<Vec<DeviceRead>, ScanError> {
    let possible = sysfs
        .attr("devices/system/cpu/possible")
        .and_then(|l| parse_cpu_list(&l));
    let possible = possible.as_deref();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    crate::parallel::map(work, threads, |(name, props)| {
        let mut w = Vec::new();
        (
            read_device(sysfs, possible, detail, &name, props, &mut w),
            w,
        )
    })
    .map_err(|p| ScanError(p.0))
}

/// A panic while reading the disks: a bug, reported as an error rather
/// than taking down the run (a udev worker's included) with it.
#[derive(Debug, thiserror::Error)]
#[error("internal error while reading the disks: {0}")]
pub struct ScanError(String);

fn read_device(
    sysfs: &Sysfs,
    possible: Option<&[u32]>,
    detail: Detail,
    name: &str,
    properties: BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Option<Device> {
    let base = format!("block/{name}");
    // the disk's directory, opened once: its own attributes are read
    // beneath it, without walking the link to it again for each
    let (syspath, dir) = match sysfs.dir(&base).and_then(|d| Ok((d.canonical()?, d))) {
        Ok(found) => found,
        Err(e) => {
            warnings.push(format!("{name}: cannot resolve {base}: {e}"));
            return None;
        }
    };
    let counted = detail.queues || possible.is_none();
    let (request_based, queues) = if counted {
        let queues = dir.list("mq");
        (queues.is_some(), queues.unwrap_or_default())
    } else {
        (dir.exists("mq"), Vec::new())
    };
    let cpus = match possible {
        // blk-mq maps every possible CPU to one of a disk's hardware queues,
        // so their cpu_lists (one per CPU on NVMe) add up to `possible`
        // (an mq/ still empty, being registered, serves them as it will)
        Some(all) if request_based => all.to_vec(),
        _ => {
            let mut cpus = BTreeSet::new();
            for q in &queues {
                let list = dir.attr(&format!("mq/{q}/cpu_list")).unwrap_or_default();
                match parse_cpu_list(&list) {
                    Some(c) => cpus.extend(c),
                    None => warnings.push(format!("{name}: unreadable mq/{q}/cpu_list {list:?}")),
                }
            }
            cpus.into_iter().collect()
        }
    };
    let parent_dir = syspath.rsplit('/').nth(1).unwrap_or("");
    let grandparent = syspath.rsplit('/').nth(2).unwrap_or("");
    let kind = if grandparent == "nvme-subsystem" || parent_dir.starts_with("nvme-subsys") {
        Kind::NvmeHead
    } else if is_nvme_path_name(name) && dir.flag("hidden") {
        Kind::NvmePath
    } else if !request_based && dir.exists("md") {
        // md arrays are bio-based: a queue with blk-mq hardware queues is not one
        Kind::Md
    } else if dir.exists("dm") {
        Kind::Dm
    } else if request_based {
        Kind::Disk
    } else {
        Kind::BioBased
    };
    let transport = transport_of(&syspath, kind);
    let dev_attr = |attr: &str| sysfs.attr(&format!("{base}/device/{attr}"));
    let prop = |key: &str| {
        properties
            .get(key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let identity = || {
        let model = prop("ID_MODEL_ENC")
            .map(|v| crate::udevdb::decode_escapes(&v).trim().to_string())
            .or_else(|| prop("ID_MODEL"))
            .or_else(|| dev_attr("model"))
            .or_else(|| dev_attr("name"));
        let serial = prop("ID_SERIAL_SHORT")
            .or_else(|| dir.attr("serial"))
            .or_else(|| dev_attr("serial"))
            .or_else(|| vpd_serial(sysfs, &format!("{base}/device/vpd_pg80")));
        let wwid = prop("ID_WWN")
            .or_else(|| dir.attr("wwid"))
            .or_else(|| dev_attr("wwid"));
        let driver = sysfs
            .resolve(&format!("{base}/device"))
            .ok()
            .and_then(|p| nearest_driver(sysfs, &p));
        (model, serial, wwid, driver)
    };
    let (model, serial, wwid, driver) = if detail.identity {
        identity()
    } else {
        (None, None, None, None)
    };
    // in 512-byte sectors; an empty one reads 0, not an error
    let size = dir.read("size").map_err(|e| e.to_string()).and_then(|s| {
        s.parse::<u64>()
            .map_err(|_| format!("{s:?} is not a number of sectors"))
    });
    let (abi, knobs) = Abi::probe(&dir, name);
    let pci: Vec<String> = syspath
        .split('/')
        .rfind(|c| is_pci_address(c))
        .map(|c| vec![c.to_string()])
        .unwrap_or_default();
    Some(Device {
        name: name.to_string(),
        kind,
        transport,
        model,
        serial,
        wwid,
        driver,
        pci,
        rotational: detail.flags && dir.flag("queue/rotational"),
        removable: detail.flags && dir.flag("removable"),
        size_bytes: size.as_ref().map_or(0, |n| n.saturating_mul(512)),
        cpus,
        hw_queues: queues.len(),
        // Only stacking drivers link lower devices in (bd_link_disk_holder:
        // md, dm, bcache, drbd), and all of them but dm are bio-based: a
        // request-based disk's slaves/ is empty, not worth two getdents.
        slaves: if !request_based || kind == Kind::Dm {
            dir.list("slaves").unwrap_or_default()
        } else {
            Vec::new()
        },
        // from the other side, once every device is read (fill_holders)
        holders: Vec::new(),
        paths: if kind == Kind::NvmeHead {
            nvme_paths(sysfs, name)
        } else {
            Vec::new()
        },
        head: None,
        abi,
        knobs,
        targets: Vec::new(),
        properties,
        excluded: None,
        unread: size.err().map(|e| ("size".to_string(), e)),
        syspath,
    })
}

/// The request queues a device's I/O ends up on, following multipath links and
/// `slaves/` (a partition counts as its disk), recursively.
fn resolve(
    devices: &HashMap<&str, &Device>,
    partitions: &BTreeMap<String, String>,
    name: &str,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    fn walk(
        devices: &HashMap<&str, &Device>,
        partitions: &BTreeMap<String, String>,
        name: &str,
        seen: &mut BTreeSet<String>,
        out: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) {
        let name = partitions.get(name).map_or(name, String::as_str);
        if !seen.insert(name.to_string()) {
            return;
        }
        let Some(d) = devices.get(name) else {
            warnings.push(format!(
                "{name}: listed as a lower device but not found under block/"
            ));
            return;
        };
        let lower: &[String] = if !d.paths.is_empty() {
            &d.paths
        } else {
            &d.slaves
        };
        if lower.is_empty() {
            if !out.contains(&d.name) {
                out.push(d.name.clone());
            }
            return;
        }
        for l in lower {
            walk(devices, partitions, l, seen, out, warnings);
        }
    }
    let mut out = Vec::new();
    walk(
        devices,
        partitions,
        name,
        &mut BTreeSet::new(),
        &mut out,
        warnings,
    );
    out.sort_by(|a, b| natural_cmp(a, b));
    out
}

/// Why `d` is no candidate for rules; it forgets what `d` could not read
/// where that does not matter (a hidden path or a RAM disk is none,
/// whatever its size).
fn exclusion(d: &mut Device) -> Option<String> {
    if d.kind == Kind::NvmePath {
        d.unread = None;
        return Some(match &d.head {
            Some(h) => format!("hidden NVMe multipath path of {h}"),
            None => "hidden NVMe multipath path".to_string(),
        });
    }
    if d.name.starts_with("ram") && d.kind == Kind::BioBased {
        d.unread = None;
        return Some("RAM disk".to_string());
    }
    if let Some((attr, e)) = &d.unread {
        return Some(format!("{attr} unreadable ({e})"));
    }
    if d.size_bytes == 0 {
        return Some("empty (size 0)".to_string());
    }
    None
}

pub fn is_pci_address(c: &str) -> bool {
    let b = c.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && c.char_indices()
            .all(|(i, ch)| matches!(i, 4 | 7 | 10) || ch.is_ascii_hexdigit())
}

fn transport_of(syspath: &str, kind: Kind) -> Transport {
    if kind == Kind::NvmeHead {
        return Transport::Nvme;
    }
    let parts: Vec<&str> = syspath.split('/').collect();
    let any = |f: &dyn Fn(&str) -> bool| parts.iter().any(|p| f(p));
    let numbered = |p: &str, prefix: &str| p.strip_prefix(prefix).is_some_and(is_number);
    if any(&|p| p == "nvme" || p == "nvme-fabrics") {
        Transport::Nvme
    } else if any(&|p| numbered(p, "usb")) {
        Transport::Usb
    } else if any(&|p| numbered(p, "ata")) {
        Transport::Sata
    } else if any(&|p| {
        p.starts_with("end_device-") || p.starts_with("port-") || p.starts_with("expander-")
    }) {
        Transport::Sas
    } else if any(&|p| p == "mmc_host") {
        Transport::Mmc
    } else if any(&|p| p.starts_with("target") && p.contains(':')) {
        Transport::Scsi
    } else if any(&|p| numbered(p, "virtio")) {
        Transport::Virtio
    } else if syspath.starts_with("devices/virtual/") {
        Transport::Virtual
    } else {
        Transport::Unknown
    }
}

fn nearest_driver(sysfs: &Sysfs, device_path: &str) -> Option<String> {
    let mut p = device_path;
    loop {
        if let Some(d) = sysfs.link_name(&format!("{p}/driver")) {
            return Some(d);
        }
        p = p.rsplit_once('/')?.0;
        if !p.contains('/') {
            return None;
        }
    }
}

/// SCSI unit serial number VPD page: a 4-byte header, then the serial.
fn vpd_serial(sysfs: &Sysfs, rel: &str) -> Option<String> {
    let raw = sysfs.read_bytes(rel).ok()?;
    if raw.len() < 4 || raw[1] != 0x80 {
        return None;
    }
    let len = usize::from(raw[3]).min(raw.len() - 4);
    let s = String::from_utf8_lossy(&raw[4..4 + len]).trim().to_string();
    (!s.is_empty()).then_some(s)
}

#[cfg(test)]
mod tests;
