//! NVMe native multipath: a head and its hidden paths, found and linked.

use super::*;

/// The multipath head a hidden path disk `nvme<S>c<C>n<N>` serves,
/// `nvme<S>n<N>`, if that head exists and reaches the path (see
/// [`nvme_paths`]); the path has no link back.
pub(super) fn nvme_head_of(sysfs: &Sysfs, name: &str) -> Option<String> {
    if !is_nvme_path_name(name) {
        return None;
    }
    let (subsys, rest) = name.strip_prefix("nvme")?.split_once('c')?;
    let ns = rest.split_once('n')?.1;
    let head = format!("nvme{subsys}n{ns}");
    nvme_paths(sysfs, &head)
        .iter()
        .any(|p| p == name)
        .then_some(head)
}

/// The hidden path disks of an NVMe multipath head `nvme<S>n<N>`; empty
/// for any other disk. Linux 6.14 and later link them in the head's
/// `multipath/`. Before that (6.12 included) nothing links a head to its
/// paths: the head's `device` is its subsystem, which links each of its
/// controllers (`nvme<C>`), and path `nvme<S>c<C>n<N>` sits in controller
/// `nvme<C>`'s directory.
pub(super) fn nvme_paths(sysfs: &Sysfs, name: &str) -> Vec<String> {
    let Some((subsys, ns)) = nvme_head_name(name) else {
        return Vec::new();
    };
    let base = format!("block/{name}");
    let linked = sysfs.list(&format!("{base}/multipath"));
    if !linked.is_empty() {
        return linked;
    }
    let subsystem = format!("{base}/device");
    if !sysfs
        .resolve(&subsystem)
        .is_ok_and(|p| p.split('/').any(|c| c == "nvme-subsystem"))
    {
        return Vec::new();
    }
    sysfs
        .list(&subsystem)
        .into_iter()
        .filter_map(|c| {
            let ctrl = c.strip_prefix("nvme").filter(|n| is_number(n))?;
            let path = format!("nvme{subsys}c{ctrl}n{ns}");
            sysfs
                .exists(&format!("{subsystem}/{c}/{path}"))
                .then_some(path)
        })
        .collect()
}

/// `nvme<S>n<N>` -> (S, N).
pub(super) fn nvme_head_name(name: &str) -> Option<(&str, &str)> {
    let (subsys, ns) = name.strip_prefix("nvme")?.split_once('n')?;
    (is_number(subsys) && is_number(ns)).then_some((subsys, ns))
}

/// A non-empty run of ASCII digits, as in kernel device numbers.
pub(super) fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A head has no driver or PCI function of its own: it has those of its paths.
pub(super) fn link_multipath(devices: &mut [Device]) {
    let heads: Vec<(usize, Vec<String>)> = devices
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.paths.is_empty())
        .map(|(i, d)| (i, d.paths.clone()))
        .collect();
    for (head, paths) in heads {
        let head_name = devices[head].name.clone();
        let mut pci = Vec::new();
        let mut driver = None;
        for d in devices.iter_mut().filter(|d| paths.contains(&d.name)) {
            d.head = Some(head_name.clone());
            pci.extend(d.pci.iter().cloned());
            driver = driver.or_else(|| d.driver.clone());
        }
        pci.sort();
        pci.dedup();
        let h = &mut devices[head];
        h.pci = pci;
        h.driver = h.driver.take().or(driver);
    }
}

pub(super) fn is_nvme_path_name(name: &str) -> bool {
    // nvme<subsys>c<ctrl>n<ns>
    let Some(rest) = name.strip_prefix("nvme") else {
        return false;
    };
    let Some((a, rest)) = rest.split_once('c') else {
        return false;
    };
    let Some((b, c)) = rest.split_once('n') else {
        return false;
    };
    [a, b, c].into_iter().all(is_number)
}
