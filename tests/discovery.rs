//! `list` and resolution on trees laid out like Linux 6.12.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, device};
use serde_json::Value;

#[test]
fn list_shows_whole_disks_with_identity_and_transport() {
    let env = Env::zoo(Abi::Queue);
    let r = env.run(&["list", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["schema"], 3);
    let names: Vec<&str> = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"sda1"),
        "partitions are not disks: {names:?}"
    );
    let nvme = device(&doc, "nvme0n1");
    assert_eq!(nvme["transport"], "nvme");
    assert_eq!(
        nvme["model"], "SAMSUNG MZQL21T9HCJR-00A07",
        "trailing blanks trimmed"
    );
    assert_eq!(nvme["serial"], "S64GNE0R100001");
    assert_eq!(nvme["driver"], "nvme");
    assert_eq!(nvme["abi"], "queue");
    assert_eq!(nvme["cpu_lat_limit_us"]["mode"], "off");
    assert_eq!(nvme["pci"][0].as_str().unwrap().len(), 12);
    let sda = device(&doc, "sda");
    assert_eq!(sda["transport"], "sata");
    assert_eq!(sda["model"], "Samsung SSD 870");
    assert_eq!(sda["serial"], "S5STNF0T000000", "serial from VPD page 0x80");
    assert_eq!(sda["driver"], "sd");
    assert_eq!(device(&doc, "sdb")["rotational"], true);
    assert_eq!(device(&doc, "sdc")["transport"], "sas");
    assert_eq!(device(&doc, "sdd")["transport"], "usb");
    assert_eq!(device(&doc, "sdd")["removable"], true);
    assert_eq!(device(&doc, "vda")["transport"], "virtio");
    assert_eq!(device(&doc, "vda")["driver"], "virtio_blk");
    assert_eq!(device(&doc, "loop0")["transport"], "virtual");
    assert_eq!(device(&doc, "zram0")["kind"], "bio-based");
    assert_eq!(device(&doc, "zram0")["abi"], "none");
}

#[test]
fn hidden_paths_and_empty_devices_are_listed_with_the_reason() {
    let env = Env::zoo(Abi::Queue);
    let doc = env.run(&["list", "--json"]).json();
    let path = device(&doc, "nvme4c4n1");
    assert_eq!(path["excluded"], "hidden NVMe multipath path of nvme4n1");
    assert_eq!(device(&doc, "loop1")["excluded"], "empty (size 0)");
    assert_eq!(device(&doc, "nvme0n1")["excluded"], Value::Null);
    let human = env.run(&["list"]).stdout;
    assert!(
        human.contains("excluded: hidden NVMe multipath path of nvme4n1"),
        "{human}"
    );
}

#[test]
fn stacked_devices_resolve_to_the_queues_that_do_the_io() {
    let env = Env::zoo(Abi::Queue);
    let doc = env.run(&["list", "--json"]).json();
    let md = device(&doc, "md0");
    assert_eq!(md["kind"], "md");
    assert_eq!(md["targets"], serde_json::json!(["nvme2n1", "nvme3n1"]));
    let head = device(&doc, "nvme4n1");
    assert_eq!(head["kind"], "nvme-head");
    assert_eq!(head["model"], "NETAPP E-Series");
    assert_eq!(head["driver"], "nvme", "a head reports its paths' driver");
    assert_eq!(head["pci"].as_array().unwrap().len(), 2);
    assert_eq!(
        head["targets"],
        serde_json::json!(["nvme4c4n1", "nvme4c5n1"])
    );
    let dm = device(&doc, "dm-0");
    assert_eq!(
        dm["targets"],
        serde_json::json!(["sda"]),
        "a partition resolves to its disk"
    );
    assert_eq!(
        device(&doc, "nvme0n1")["targets"],
        serde_json::json!(["nvme0n1"])
    );
}

#[test]
fn dm_over_md_over_nvme_resolves_recursively() {
    let env = Env::with(|root| {
        let mut f = common::fixture::Fixture::new(root, 2, Abi::Queue);
        f.nvme(0, "M", "S0");
        f.nvme(1, "M", "S1");
        f.md_raid0("md0", &["nvme0n1", "nvme1n1"]);
        f.dm_linear("dm-0", "vg-lv", &["md0"]);
        f
    });
    let doc = env.run(&["list", "--json"]).json();
    assert_eq!(
        device(&doc, "dm-0")["targets"],
        serde_json::json!(["nvme0n1", "nvme1n1"])
    );
}

#[test]
fn a_dangling_disk_link_is_a_warning_not_a_failure() {
    let env = Env::zoo(Abi::Queue);
    std::os::unix::fs::symlink(
        "../devices/virtual/block/gone",
        env.fx.root().join("block/gone"),
    )
    .unwrap();
    let r = env.run(&["list", "--json"]);
    assert_eq!(r.code, 0);
    let w = r.json()["warnings"].to_string();
    assert!(w.contains("gone"), "{w}");
}

#[test]
fn sysfs_root_comes_from_the_environment_too() {
    let env = Env::zoo(Abi::Queue);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blkqos"))
        .args(["list", "--json"])
        .env("BLKQOS_SYSFS", env.fx.root())
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    device(&doc, "md0");
}

/// One udev event scans only the disk and what is stacked with it; for that
/// disk the devices and the plan must be exactly what a full scan gives.
#[test]
fn scanning_around_one_disk_agrees_with_the_full_scan() {
    use blkqos::discover::{Detail, Extent, scan};
    use blkqos::profile::Profile;
    use blkqos::snapshot::Snapshot;
    use blkqos::sysfs::Sysfs;
    let env = Env::zoo(Abi::Queue);
    let sysfs = Sysfs::new(env.fx.root());
    let profile = Profile::parse(
        std::path::Path::new("p.toml"),
        r#"
[[rule]]
name = "raid"
match = { name = ["md*", "dm-*"] }
cpu_lat_limit_us = 2
cpu_lat_timeout_ms = 10
[[rule]]
name = "rest"
match = { name = "*" }
cpu_lat_limit_us = 30
"#,
    )
    .unwrap();
    let scan_around = |only: &[String]| scan(&sysfs, Extent::Around(only), Detail::FULL).unwrap();
    let full = scan(&sysfs, Extent::All, Detail::FULL).unwrap();
    for d in &full.devices {
        let only = [d.name.clone()];
        let around = scan_around(&only);
        let mut needed: Vec<&str> = vec![&d.name];
        needed.extend(d.targets.iter().map(String::as_str));
        needed.extend(d.holders.iter().map(String::as_str));
        for n in needed {
            let (a, f) = (around.get(n), full.get(n));
            assert!(a.is_some(), "{}: {n} not scanned", d.name);
            assert_eq!(a, f, "{}: {n} differs", d.name);
        }
        let plan = |inv: &blkqos::discover::Inventory| {
            let snap = Snapshot::take(&sysfs, inv.clone(), Default::default(), Some(&profile));
            blkqos::plan::build(&profile, &snap, &blkqos::plan::Scope::devices(&only)).unwrap()
        };
        let (a, f) = (plan(&around), plan(&full));
        assert_eq!(a.devices, f.devices, "plan for {}", d.name);
        // The full scan also warns about disks outside the event's stack.
        assert!(a.warnings.iter().all(|w| f.warnings.contains(w)));
    }
    // The member of md0 pulls in md0 (its rule lands on the member's queue)
    // and md0's other member; nothing else.
    let names = |inv: &blkqos::discover::Inventory| -> Vec<String> {
        inv.devices.iter().map(|d| d.name.clone()).collect()
    };
    assert_eq!(
        names(&scan_around(&["nvme2n1".into()])),
        ["md0", "nvme2n1", "nvme3n1"]
    );
    assert_eq!(
        names(&scan_around(&["nvme4c5n1".into()])),
        ["nvme4c4n1", "nvme4c5n1", "nvme4n1"]
    );
    assert_eq!(names(&scan_around(&["sda".into()])), ["dm-0", "sda"]);
    assert!(scan_around(&["gone".into()]).devices.is_empty());
}

/// A plan whose rules match on no identity or flag skips reading them; it
/// must come out the same as with everything read.
#[test]
fn plans_without_identity_reads_are_the_same() {
    use blkqos::discover::{Detail, Extent, scan};
    use blkqos::profile::Profile;
    use blkqos::snapshot::Snapshot;
    use blkqos::sysfs::Sysfs;
    let env = Env::zoo(Abi::Queue);
    let sysfs = Sysfs::new(env.fx.root());
    let full = || scan(&sysfs, Extent::All, Detail::FULL).unwrap();
    // the zoo has a rotational disk: the full scan sees it
    assert!(full().devices.iter().any(|d| d.rotational));
    let no_flags = common::MIXED.replace(", rotational = false", "");
    for (text, flags) in [(common::MIXED, true), (no_flags.as_str(), false)] {
        let profile = Profile::parse(std::path::Path::new("p.toml"), text).unwrap();
        let detail = Detail::for_profile(Some(&profile));
        assert_eq!(
            detail,
            Detail {
                identity: false,
                flags,
                queues: false,
            }
        );
        let lean = scan(&sysfs, Extent::All, detail).unwrap();
        assert!(
            lean.devices
                .iter()
                .all(|d| d.model.is_none() && d.driver.is_none() && d.hw_queues == 0)
        );
        assert_eq!(lean.devices.iter().any(|d| d.rotational), flags);
        // the queues not counted, the CPUs they serve are the same
        let served = |inv: &blkqos::discover::Inventory| -> Vec<_> {
            (inv.devices.iter())
                .map(|d| (d.name.clone(), d.kind, d.cpus.clone()))
                .collect()
        };
        assert_eq!(served(&lean), served(&full()));
        assert!(full().devices.iter().any(|d| d.hw_queues > 0));
        let plan = |inv| {
            let snap = Snapshot::take(&sysfs, inv, Default::default(), Some(&profile));
            blkqos::plan::build(&profile, &snap, &blkqos::plan::Scope::all()).unwrap()
        };
        assert_eq!(plan(lean), plan(full()));
    }
    let by_model = Profile::parse(
        std::path::Path::new("m.toml"),
        "[[rule]]\nname = \"m\"\nmatch = { model = \"X*\" }\n",
    )
    .unwrap();
    assert!(by_model.rules[0].matcher.uses_identity());
    let by_flag = Profile::parse(
        std::path::Path::new("r.toml"),
        "[[rule]]\nname = \"r\"\nmatch = { rotational = true }\n",
    )
    .unwrap();
    assert!(Detail::for_profile(Some(&by_flag)).flags);
}

/// Model and serial strings come from the hardware (INQUIRY, identify
/// data) and may hold escape sequences or newlines: `list` and `explain`
/// print them escaped, never raw to the terminal.
#[test]
fn hardware_strings_are_printed_with_control_characters_escaped() {
    let env = Env::with(|root| {
        let mut f = common::fixture::Fixture::new(root, 2, Abi::Queue);
        f.nvme(0, "EVIL\x1b]0;pwned\x07\x1b[2J", "S1\nforged line");
        f
    });
    let p = env.profile("p.toml", common::NVME_AUTO);
    for args in [
        vec!["list"],
        vec!["explain", p.to_str().unwrap(), "nvme0n1"],
    ] {
        let r = env.run(&args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(
            !r.stdout.contains(['\x1b', '\x07']),
            "{args:?}: raw control characters in {:?}",
            r.stdout
        );
        assert!(
            r.stdout.contains(r"EVIL\x1b]0;pwned\x07\x1b[2J"),
            "{args:?}: {}",
            r.stdout
        );
    }
    let ex = env.run(&["explain", p.to_str().unwrap(), "nvme0n1"]).stdout;
    assert!(ex.contains(r"serial S1\nforged line"), "{ex}");
}

/// A disk's name is the kernel's, but an md array's or a virtual disk's
/// can carry what its creator chose: every command prints it escaped.
#[test]
fn disk_names_are_printed_with_control_characters_escaped() {
    let evil = "vd\x1b]0;pwned\x07\x1b[2J";
    let env = Env::with(|root| {
        let mut f = common::fixture::Fixture::new(root, 2, Abi::Queue);
        f.virtio(evil, 0);
        f
    });
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"all\"\nmatch = { name = \"vd*\" }\ncpu_lat_limit_us = 10\n",
    );
    let p = p.to_str().unwrap();
    for args in [
        vec!["list"],
        vec!["apply", p, "--dry-run"],
        vec!["apply", p],
        vec!["status"],
        vec!["verify", p],
        vec!["restore", "--dry-run"],
        vec!["restore"],
    ] {
        let r = env.run(&args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        for (what, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
            assert!(
                !text.contains(['\x1b', '\x07']),
                "{args:?}: raw control characters in {what}: {text:?}"
            );
        }
        assert!(
            r.stdout.contains(r"vd\x1b]0;pwned\x07\x1b[2J")
                || ["verify", "restore"].contains(&args[0]),
            "{args:?}: {} / {}",
            r.stdout,
            r.stderr
        );
    }
}

/// The planner reads nothing but its snapshot: with the tree gone after
/// the snapshot, the plan is the same.
#[test]
fn the_plan_is_computed_from_the_snapshot_alone() {
    use blkqos::discover::{Detail, Extent, scan};
    use blkqos::plan::{Scope, build};
    use blkqos::profile::Profile;
    use blkqos::snapshot::Snapshot;
    use blkqos::sysfs::Sysfs;
    let env = Env::zoo(Abi::None);
    let sysfs = Sysfs::new(env.fx.root());
    let text = format!(
        "{}\n[defaults]\nfallback = \"cpu-resume-latency\"\n",
        common::MIXED
    )
    .replace("[defaults]\ncpu_lat_timeout_ms = 3\n", "");
    let profile = Profile::parse(std::path::Path::new("p.toml"), &text).unwrap();
    let take = || {
        let inv = scan(&sysfs, Extent::All, Detail::FULL).unwrap();
        Snapshot::take(&sysfs, inv, Default::default(), Some(&profile))
    };
    let (live, snap) = (take(), take());
    let expected = build(&profile, &live, &Scope::all()).unwrap();
    assert!(!expected.is_empty(), "the fallback writes per-CPU values");
    std::fs::remove_dir_all(env.fx.root()).unwrap();
    assert_eq!(build(&profile, &snap, &Scope::all()).unwrap(), expected);
}

/// Holders come from the other side's slaves and slaves are read only on
/// queues a stacking driver can be (bio-based, dm): both must still be
/// what the kernel's holders/ and slaves/ directories list, for every
/// device of the zoo and of a dm over md over NVMe stack.
#[test]
fn holders_and_slaves_are_what_their_directories_list() {
    use blkqos::discover::{Detail, Extent, scan};
    use blkqos::sysfs::{Sysfs, natural_cmp};
    let listed = |root: &std::path::Path, name: &str, sub: &str| {
        let mut names: Vec<String> = std::fs::read_dir(root.join("block").join(name).join(sub))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        names.sort_by(|a, b| natural_cmp(a, b));
        names
    };
    let stack = Env::with(|root| {
        let mut f = common::fixture::Fixture::new(root, 2, Abi::Queue);
        f.nvme(0, "A", "1");
        f.nvme(1, "A", "2");
        f.md_raid0("md0", &["nvme0n1", "nvme1n1"]);
        f.dm_linear("dm-0", "vg-top", &["md0"]);
        f
    });
    for env in [Env::zoo(Abi::Queue), stack] {
        let root = env.fx.root();
        let inv = scan(&Sysfs::new(root), Extent::All, Detail::FULL).unwrap();
        let mut stacked = 0;
        for d in &inv.devices {
            assert_eq!(
                d.holders,
                listed(root, &d.name, "holders"),
                "{} holders",
                d.name
            );
            assert_eq!(
                d.slaves,
                listed(root, &d.name, "slaves"),
                "{} slaves",
                d.name
            );
            stacked += d.holders.len();
        }
        assert!(stacked >= 2, "the tree has no stacked device");
    }
}
