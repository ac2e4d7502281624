//! The systemd units as shipped: the lease's unit is sandboxed as the boot
//! unit is, save where it needs more, each such difference named here.

#![deny(unsafe_code)]

use std::collections::BTreeMap;

/// The `[Service]` settings of a unit in systemd/, by key.
fn service(unit: &str) -> BTreeMap<String, String> {
    let path = format!("{}/systemd/{unit}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut section = "";
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[Service]"
            && !line.starts_with('#')
            && let Some((k, v)) = line.split_once('=')
        {
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

/// Whether a `[Service]` key confines the process, rather than saying
/// what it runs.
fn sandboxing(key: &str) -> bool {
    ["Protect", "Private", "Restrict", "Capability", "SystemCall"]
        .iter()
        .any(|p| key.starts_with(p))
        || [
            "NoNewPrivileges",
            "LockPersonality",
            "MemoryDenyWriteExecute",
            "IPAddressDeny",
            "ProcSubset",
            "UMask",
        ]
        .contains(&key)
}

/// `blkqos-lease.service` lacked PrivateMounts=, which blkqos.service has.
#[test]
fn the_lease_unit_is_sandboxed_as_the_boot_unit_is() {
    let boot = service("blkqos.service");
    let lease = service("blkqos-lease.service");
    // what the lease needs besides: perf_event_open on a block tracepoint
    // (CAP_PERFMON, the syscall) and udev's netlink socket, which only the
    // host's network namespace carries
    let differs = [
        "CapabilityBoundingSet",
        "SystemCallFilter",
        "RestrictAddressFamilies",
        "PrivateNetwork",
    ];
    let mut missing = Vec::new();
    for (key, value) in boot.iter().filter(|(k, _)| sandboxing(k)) {
        if differs.contains(&key.as_str()) {
            continue;
        }
        if lease.get(key) != Some(value) {
            missing.push(format!("{key}={value} (lease: {:?})", lease.get(key)));
        }
    }
    assert!(missing.is_empty(), "blkqos-lease.service: {missing:?}");
    assert!(boot.keys().filter(|k| sandboxing(k)).count() >= 15);
}
