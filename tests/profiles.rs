//! The shipped profiles are valid and do what their comments say on a zoo tree.

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
