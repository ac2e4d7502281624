//! Rule matching against discovered devices (library level, so udev
//! properties can be supplied the way libudev would).

#![deny(unsafe_code)]

use blkqos::abi::Abi;
use blkqos::discover::{Detail, Extent, scan};
mod common;
use blkqos::profile::Profile;
use blkqos::profile::owning_rule;
use blkqos::sysfs::Sysfs;
use common::fixture::Fixture;
use std::path::Path;

fn profile(text: &str) -> Profile {
    Profile::parse(Path::new("t.toml"), text).unwrap()
}

#[test]
fn every_match_key_selects_the_right_devices() {
    let dir = tempfile::tempdir().unwrap();
    Fixture::zoo(dir.path(), Abi::Queue);
    let inv = scan(&Sysfs::new(dir.path()), Extent::All, Detail::FULL).unwrap();
    let owners = |text: &str| -> Vec<String> {
        let p = profile(text);
        inv.visible()
            .filter(|d| owning_rule(&p, d).is_some())
            .map(|d| d.name.clone())
            .collect()
    };
    let rule = |m: &str| format!("[[rule]]\nname = \"r\"\nmatch = {{ {m} }}\n");
    assert_eq!(
        owners(&rule("model = \"SAMSUNG MZQL2*\"")),
        ["nvme0n1", "nvme1n1"]
    );
    assert_eq!(
        owners(&rule("name = [\"nvme*\", \"!nvme1n1\"]")),
        ["nvme0n1", "nvme2n1", "nvme3n1", "nvme4n1"]
    );
    assert_eq!(owners(&rule("serial = \"PHLJ*5\"")), ["nvme3n1"]);
    assert_eq!(
        owners(&rule("wwid = \"naa.*\"")),
        ["sda", "sdb", "sdc", "sdd"]
    );
    assert_eq!(owners(&rule("driver = \"virtio_blk\"")), ["vda"]);
    assert_eq!(
        owners(&rule("transport = \"sata\", rotational = true")),
        ["sdb"]
    );
    assert_eq!(owners(&rule("removable = true")), ["sdd"]);
    assert_eq!(
        owners(&rule("transport = \"virtual\"")),
        ["dm-0", "loop0", "md0", "zram0"]
    );
    let nvme0_pci = inv.get("nvme0n1").unwrap().pci[0].clone();
    assert_eq!(
        owners(&rule(&format!("pci = \"{nvme0_pci}\""))),
        ["nvme0n1"]
    );
    let head_pci = inv.get("nvme4n1").unwrap().pci[1].clone();
    assert_eq!(
        owners(&rule(&format!("pci = \"{head_pci}\""))),
        ["nvme4n1"],
        "a head matches any path's PCI function"
    );
}

#[test]
fn udev_properties_match_by_regex_and_the_first_rule_wins() {
    let dir = tempfile::tempdir().unwrap();
    Fixture::zoo(dir.path(), Abi::Queue);
    let mut inv = scan(&Sysfs::new(dir.path()), Extent::All, Detail::FULL).unwrap();
    for d in &mut inv.devices {
        if d.name == "nvme1n1" {
            d.properties
                .insert("ID_PATH".into(), "pci-0000:5e:00.0-nvme-1".into());
        }
    }
    let p = profile(
        r#"
[[rule]]
name = "by-path"
match = { property = { ID_PATH = "^pci-0000:5e:" } }
[[rule]]
name = "nvme"
match = { transport = "nvme" }
"#,
    );
    let rule_of = |n: &str| owning_rule(&p, inv.get(n).unwrap()).map(|r| r.name.clone());
    assert_eq!(rule_of("nvme1n1").as_deref(), Some("by-path"));
    assert_eq!(
        rule_of("nvme0n1").as_deref(),
        Some("nvme"),
        "no such property: the next rule"
    );
    assert_eq!(rule_of("sda"), None);
    let checks = p.rules[0].matcher.checks(inv.get("nvme0n1").unwrap());
    assert!(checks[0].detail.contains("not set"), "{:?}", checks);
}
