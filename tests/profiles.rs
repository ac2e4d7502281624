//! The shipped profiles are valid and do what their comments say on a zoo tree.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::Env;

#[test]
fn every_shipped_profile_passes_check() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config");
    let mut profiles = vec![format!("{dir}/blkqos.toml")];
    for e in std::fs::read_dir(format!("{dir}/profiles")).unwrap() {
        profiles.push(e.unwrap().path().to_string_lossy().into_owned());
    }
    assert!(profiles.len() >= 4);
    let env = Env::zoo(Abi::Queue);
    for p in &profiles {
        let r = env.run(&["check", p]);
        assert_eq!(r.code, 0, "{p}: {}", r.stderr);
        let dry = env.run(&["apply", p, "--dry-run", "--json"]);
        assert_eq!(dry.code, 0, "{p}: {}", dry.stderr);
    }
}

#[test]
fn the_default_profile_tunes_nvme_only() {
    let env = Env::zoo(Abi::Queue);
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/config/blkqos.toml");
    let r = env.run(&["apply", p, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let paths = common::change_paths(&r.json());
    assert!(!paths.is_empty());
    assert!(paths.iter().all(|p| p.contains("/nvme")), "{paths:?}");
    assert_eq!(env.get("block/nvme4c5n1/queue/cpu_lat_limit_us"), "4");
    assert_eq!(env.get("block/sda/queue/cpu_lat_limit_us"), "-1");
}

#[test]
fn the_kvm_guest_profile_polls_for_guest_disks_only() {
    let env = Env::zoo(Abi::Queue);
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/profiles/kvm-guest.toml"
    );
    let r = env.run(&["apply", p, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for disk in ["vda", "nvme0n1", "nvme2n1"] {
        assert_eq!(
            env.get(&format!("block/{disk}/queue/cpu_lat_limit_us")),
            "0",
            "{disk}"
        );
        assert_eq!(
            env.get(&format!("block/{disk}/queue/cpu_lat_timeout_ms")),
            "3",
            "{disk}"
        );
    }
    // SATA, SAS and USB disks are not a guest's paravirtual or NVMe disks
    for disk in ["sda", "sdc", "sdd"] {
        assert_eq!(
            env.get(&format!("block/{disk}/queue/cpu_lat_limit_us")),
            "-1",
            "{disk}"
        );
    }
}

/// `n` bytes or more of rules, each naming one disk.
fn rules_of(n: usize, prefix: &str) -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < n {
        text += &format!(
            "[[rule]]\nname = \"{prefix}{i}\"\nmatch = {{ name = \"nvme{i}n1\" }}\ncpu_lat_limit_us = 10\n\n"
        );
        i += 1;
    }
    text
}

/// The attack's finding: a 1 MiB profile cost ~256 MB and 0.6 s a run,
/// paid again by every udev event. The profile and its drop-ins together
/// are bounded (256 KiB, thousands of rules) and one past it is refused.
#[test]
fn a_profile_past_the_size_bound_is_refused_drop_ins_counted() {
    let env = Env::zoo(Abi::Queue);
    let big = env.profile("big.toml", &rules_of(300 * 1024, "r"));
    let r = env.run(&["check", big.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("262144 bytes");
    let fits = env.profile("fits.toml", &rules_of(150 * 1024, "r"));
    let r = env.run(&["check", fits.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // a drop-in that takes the whole past the bound
    let dir = env.work.join("blkqos.d");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("10-more.toml"), rules_of(150 * 1024, "d")).unwrap();
    let r = env.run(&["check", fits.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("10-more.toml");
    r.assert_stderr_has("262144 bytes");
}
