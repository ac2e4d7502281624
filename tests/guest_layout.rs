//! The fixture against the real kernel. `kernel-patch/test` boots Linux 6.12
//! under QEMU with emulated NVMe (two plain controllers, one with two
//! namespaces; a subsystem shared by two controllers, hence a multipath head
//! with two hidden paths; md RAID0 over two namespaces; dm-linear on a
//! partition; one more plain controller) and prints every path, link and
//! attribute blkqos reads there; `tests/data/guest-nvme-layout.txt` is that
//! output. Here the same topology is built with the fixture and printed the
//! same way (`nvme_layout_lines` in `kernel-patch/test/guest/nvme.sh`), and
//! the two must agree line by line: the fixture follows the kernel.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::fixture::{Fixture, TEST_IDLE};
use common::{Env, device};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

const REAL: &str = include_str!("data/guest-nvme-layout.txt");

/// One line of the layout, as the guest prints it.
fn line(root: &Path, rel: &str) -> String {
    let p = root.join(rel);
    match fs::symlink_metadata(&p) {
        Ok(m) if m.file_type().is_symlink() => {
            format!("{rel} -> {}", fs::read_link(&p).unwrap().display())
        }
        Ok(_) if p.is_dir() => format!("{rel}/"),
        Ok(_) => {
            let raw = fs::read(&p).unwrap();
            let v = String::from_utf8_lossy(&raw);
            let v = v.trim_end_matches('\n');
            // counters and the live lease: what the checks before left
            let live = rel.contains("/cpuidle/state")
                && (rel.ends_with("/usage") || rel.ends_with("/time"));
            if live || rel.contains("/cpuidle/cpu_lat_lease_") {
                format!("{rel} = '*'")
            } else {
                format!("{rel} = '{v}'")
            }
        }
        Err(_) => format!("{rel} absent"),
    }
}

fn names(root: &Path, rel: &str) -> Vec<String> {
    let mut v: Vec<String> = match fs::read_dir(root.join(rel)) {
        Ok(d) => d
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// `nvme*c*n*`, as the shell's glob matches it.
fn path_glob(name: &str) -> bool {
    name.strip_prefix("nvme")
        .and_then(|r| r.split_once('c'))
        .is_some_and(|(_, r)| r.contains('n'))
}

/// The mirror of `nvme_layout_lines` in guest/nvme.sh, sorted and unique.
fn layout(root: &Path) -> Vec<String> {
    let mut out = BTreeSet::new();
    let mut add = |rel: &str| {
        out.insert(line(root, rel));
    };
    add("devices/system/cpu/possible");
    for c in names(root, "devices/system/cpu") {
        if !c
            .strip_prefix("cpu")
            .is_some_and(|n| n.starts_with(|ch: char| ch.is_ascii_digit()))
        {
            continue;
        }
        let c = format!("devices/system/cpu/{c}");
        add(&format!("{c}/power/pm_qos_resume_latency_us"));
        add(&format!("{c}/cpuidle/cpu_lat_lease_limit_us"));
        add(&format!("{c}/cpuidle/cpu_lat_lease_left_us"));
        for s in names(root, &format!("{c}/cpuidle")) {
            if !s.starts_with("state") {
                continue;
            }
            for a in ["name", "latency", "residency", "disable", "usage", "time"] {
                add(&format!("{c}/cpuidle/{s}/{a}"));
            }
        }
    }
    for d in names(root, "block") {
        if !(d.starts_with("nvme") || d.starts_with("md") || d.starts_with("dm-")) {
            continue;
        }
        let b = format!("block/{d}");
        add(&b);
        add(&format!("class/block/{d}"));
        for a in [
            "subsystem",
            "device",
            "size",
            "removable",
            "hidden",
            "serial",
            "wwid",
            "md",
            "dm",
            "mq",
            "slaves",
            "holders",
            "multipath",
            "queue/rotational",
            "queue/cpu_lat_limit_us",
            "queue/cpu_lat_timeout_ms",
            "cpu_lat_limit_us",
            "cpu_lat_timeout_ms",
            "device/model",
            "device/serial",
            "device/wwid",
            "device/name",
            "device/vpd_pg80",
        ] {
            add(&format!("{b}/{a}"));
        }
        for q in names(root, &format!("{b}/mq")) {
            add(&format!("{b}/mq/{q}/cpu_list"));
        }
        for dir in ["slaves", "holders", "multipath"] {
            for l in names(root, &format!("{b}/{dir}")) {
                add(&format!("{b}/{dir}/{l}"));
            }
        }
        let device = root.join(format!("{b}/device"));
        if fs::symlink_metadata(&device).is_ok_and(|m| m.file_type().is_symlink()) {
            let canon = fs::canonicalize(&device).unwrap();
            let root_canon = fs::canonicalize(root).unwrap();
            let mut dev = canon
                .strip_prefix(&root_canon)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if dev.contains("/nvme-subsystem/") {
                for c in names(root, &dev) {
                    if !c
                        .strip_prefix("nvme")
                        .is_some_and(|n| n.bytes().all(|x| x.is_ascii_digit()))
                    {
                        continue;
                    }
                    add(&format!("{b}/device/{c}"));
                    for x in names(root, &format!("{dev}/{c}")) {
                        if path_glob(&x) {
                            add(&format!("{b}/device/{c}/{x}"));
                        }
                    }
                }
            }
            loop {
                add(&format!("{dev}/driver"));
                let driver = root.join(format!("{dev}/driver"));
                if fs::symlink_metadata(&driver).is_ok_and(|m| m.file_type().is_symlink()) {
                    break;
                }
                match dev.rsplit_once('/') {
                    Some((parent, _)) if parent.contains('/') => dev = parent.to_string(),
                    _ => break,
                }
            }
        }
        for part in names(root, &b) {
            if !root.join(format!("{b}/{part}/partition")).exists() {
                continue;
            }
            add(&format!("class/block/{part}"));
            add(&format!("class/block/{part}/partition"));
            add(&format!("class/block/{part}/subsystem"));
            add(&format!("{b}/{part}/holders"));
            for l in names(root, &format!("{b}/{part}/holders")) {
                add(&format!("{b}/{part}/holders/{l}"));
            }
        }
    }
    out.into_iter().collect()
}

/// QEMU's NVMe namespace WWID: the kernel ignores QEMU's namespace
/// identifiers (NVME_QUIRK_BOGUS_NID) and makes one from the vendor,
/// serial, model and NSID.
fn qemu_wwid(serial: &str, nsid: u32) -> String {
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    format!(
        "nvme.1b36-{}-{}-{nsid:08x}",
        hex(serial),
        hex("QEMU NVMe Ctrl")
    )
}

/// The guest's topology (kernel-patch/test/run, nvme_qemu_args), built with
/// the fixture; the values QEMU and the guest's set-up choose (sizes,
/// WWIDs) set afterwards.
fn guest_topology(root: &Path, multipath_links: bool) -> Fixture {
    let model = "QEMU NVMe Ctrl";
    let mut f = Fixture::new(root, 2, Abi::Queue);
    for c in 0..2 {
        f.cpu(c, TEST_IDLE);
    }
    f.set_multipath_links(multipath_links);
    f.set_pci_slot(4);
    let a1 = f.nvme(0, model, "BLKQOSA");
    let a2 = f.nvme_ns(0, 2);
    let b1 = f.nvme(1, model, "BLKQOSB");
    let head = f.nvme_multipath(2, &[2, 3], model, "BLKQOSMP");
    let e1 = f.nvme(4, model, "BLKQOSE");
    let b1p1 = f.partition(&f.dir_of(&b1), 1);
    f.md_raid0("md0", &[&a1, &a2]);
    f.dm_linear("dm-0", "blkqos-lin", &[&b1p1]);

    let ns_sectors = "131072"; // 64 MiB
    for (disk, serial, nsid) in [
        (a1.as_str(), "BLKQOSA", 1),
        (&a2, "BLKQOSA", 2),
        (&b1, "BLKQOSB", 1),
        (&e1, "BLKQOSE", 1),
        (&head, "BLKQOSMP", 1),
        ("nvme2c2n1", "BLKQOSMP", 1),
        ("nvme2c3n1", "BLKQOSMP", 1),
    ] {
        f.put(&format!("block/{disk}/size"), ns_sectors);
        f.put(&format!("block/{disk}/wwid"), &qemu_wwid(serial, nsid));
    }
    // RAID0 of two 64 MiB members, less md's superblock and 64 KiB chunks;
    // dm-linear over the whole partition (sector 2048 to the end)
    f.put("block/md0/size", "258048");
    f.put("block/dm-0/size", "129024");
    f
}

#[test]
fn the_fixture_lays_out_nvme_multipath_md_and_dm_as_linux_6_12() {
    let dir = tempfile::tempdir().unwrap();
    let f = guest_topology(&dir.path().join("sys"), false);
    let fixture = layout(f.root());
    let real: Vec<String> = REAL.lines().map(str::to_string).collect();
    let split = |l: &str| {
        let key = [" -> ", " = ", " absent"]
            .iter()
            .filter_map(|s| l.find(s))
            .min()
            .unwrap_or(l.len());
        (l[..key].to_string(), l[key..].to_string())
    };
    let real_map: BTreeMap<String, String> = real.iter().map(|l| split(l)).collect();
    let fixture_map: BTreeMap<String, String> = fixture.iter().map(|l| split(l)).collect();
    let mut diffs = Vec::new();
    for (path, value) in &real_map {
        match fixture_map.get(path) {
            None => diffs.push(format!("missing in the fixture: {path}{value}")),
            Some(v) if v != value => {
                diffs.push(format!("{path}: kernel{value}, fixture{v}"));
            }
            Some(_) => {}
        }
    }
    for (path, value) in &fixture_map {
        if !real_map.contains_key(path) {
            diffs.push(format!("not in the kernel's layout: {path}{value}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} difference(s) from tests/data/guest-nvme-layout.txt:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Discovery on the guest's layout, with and without the `multipath/`
/// links of Linux 6.14: the head resolves to its two paths either way.
#[test]
fn a_head_resolves_to_its_paths_with_or_without_multipath_links() {
    for links in [false, true] {
        let env = Env::with(|root| guest_topology(root, links));
        let r = env.run(&["list", "--json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let doc = r.json();
        let head = device(&doc, "nvme2n1");
        assert_eq!(head["kind"], "nvme-head");
        assert_eq!(
            head["paths"],
            serde_json::json!(["nvme2c2n1", "nvme2c3n1"]),
            "links: {links}"
        );
        assert_eq!(
            head["targets"],
            serde_json::json!(["nvme2c2n1", "nvme2c3n1"])
        );
        assert_eq!(
            head["pci"],
            serde_json::json!(["0000:00:06.0", "0000:00:07.0"])
        );
        assert_eq!(head["driver"], "nvme");
        for p in ["nvme2c2n1", "nvme2c3n1"] {
            assert_eq!(device(&doc, p)["head"], "nvme2n1");
            assert_eq!(
                device(&doc, p)["excluded"],
                "hidden NVMe multipath path of nvme2n1"
            );
        }
        assert_eq!(
            device(&doc, "md0")["targets"],
            serde_json::json!(["nvme0n1", "nvme0n2"])
        );
        assert_eq!(
            device(&doc, "dm-0")["targets"],
            serde_json::json!(["nvme1n1"])
        );
    }
}

/// The udev path for the head reaches its paths on the 6.12 layout too.
#[test]
fn a_head_event_tunes_its_paths_without_multipath_links() {
    let env = Env::with(|root| guest_topology(root, false));
    let profile = env.profile(
        "p.toml",
        "[[rule]]\nname = \"nvme\"\nmatch = { transport = \"nvme\" }\ncpu_lat_limit_us = 10\n",
    );
    let r = env.run(&[
        "udev",
        "--action",
        "add",
        "--devpath",
        "/devices/virtual/nvme-subsystem/nvme-subsys2/nvme2n1",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for p in ["nvme2c2n1", "nvme2c3n1"] {
        assert_eq!(
            env.fx.get(&format!("block/{p}/queue/cpu_lat_limit_us")),
            "10"
        );
    }
}
