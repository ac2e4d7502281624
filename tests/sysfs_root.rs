//! A sysfs root that is not a sysfs tree (missing, a file, `/`, an
//! unmounted `/sys`) is an error, not an empty machine: nothing is
//! reported as matching and no saved original is forgotten.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO};

#[test]
fn a_root_without_the_block_and_cpu_trees_is_refused_and_forgets_nothing() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    let r = env.run(&["apply", p]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let state = std::fs::read(env.state.join("state.json")).unwrap();
    let empty = env.work.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let file = env.work.join("p.toml");
    let missing = env.work.join("missing");
    for root in [
        empty.as_path(),
        file.as_path(),
        missing.as_path(),
        "/".as_ref(),
    ] {
        for args in [
            vec!["verify", p],
            vec!["restore"],
            vec!["restore", "--device", "nvme0n1"],
            vec!["list"],
            vec!["status"],
            vec!["apply", p, "--dry-run"],
        ] {
            // the environment variable as well as the flag
            let out = env
                .bare_cmd()
                .env("BLKQOS_SYSFS", root)
                .args(&args)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{root:?} {args:?}: {stderr}");
            assert!(
                stderr.contains("not a sysfs tree"),
                "{root:?} {args:?}: {stderr}"
            );
        }
        let r = env.run_in(root, &["restore"]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert_eq!(
            std::fs::read(env.state.join("state.json")).unwrap(),
            state,
            "{root:?}: saved originals kept"
        );
    }
}

#[test]
fn restore_forgets_an_original_only_when_its_device_is_gone() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // the attribute is missing but its disk is still there
    std::fs::remove_file(
        std::fs::canonicalize(env.fx.root().join("block/nvme0n1/queue/cpu_lat_limit_us")).unwrap(),
    )
    .unwrap();
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let state = env.state_json();
    let saved = state["saved"].as_object().unwrap();
    assert_eq!(
        saved.keys().collect::<Vec<_>>(),
        ["block/nvme0n1/queue/cpu_lat_limit_us"],
        "kept, the others restored"
    );
    // the disk itself leaves: its original is the last one saved, so all
    // of them would go at once; that takes --forget-missing
    env.fx.remove_disk("nvme0n1");
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(env.state_json()["saved"].as_object().unwrap().len(), 1);
    let r = env.run(&["restore", "--forget-missing"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(env.state_json()["saved"].as_object().unwrap().is_empty());
}

#[test]
fn a_root_whose_saved_devices_are_all_gone_forgets_nothing_unless_told() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    assert_eq!(env.run(&["apply", p]).code, 0);
    let state = std::fs::read(env.state.join("state.json")).unwrap();
    let kept = |what: &str| {
        assert_eq!(
            std::fs::read(env.state.join("state.json")).unwrap(),
            state,
            "{what}: saved originals kept"
        );
    };
    // the directories of a sysfs tree, but no CPU in it: not one
    let root = env.work.join("hollow");
    for d in ["block", "class/block", "devices/system/cpu"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let r = env.run_in(&root, &["restore"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("not a sysfs tree (no devices/system/cpu/cpuN there)");
    kept("no cpuN");
    // a CPU, but none of the disks whose originals are saved
    std::fs::create_dir_all(root.join("devices/system/cpu/cpu0")).unwrap();
    for args in [
        vec!["restore"],
        vec!["restore", "--dry-run"],
        vec!["restore", "--json"],
    ] {
        let r = env.run_in(&root, &args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        r.assert_stderr_has("saved original(s) belongs to a device that is not there");
        r.assert_stderr_has("restore --forget-missing");
        kept(&format!("{args:?}"));
    }
    // the same for a run scoped to one of the disks: it does not read the
    // others' values, but knows they are all gone too
    let r = env.run_in(&root, &["restore", "--device", "nvme1n1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("saved original(s) belongs to a device that is not there");
    kept("restore --device");
    // apply forgets only what a device still there no longer wants
    let r = env.run_in(&root, &["apply", p]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    kept("apply");
    // the disks really are all gone: told so, restore forgets them
    let r = env.run_in(&root, &["restore", "--forget-missing"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(env.state_json()["saved"].as_object().unwrap().is_empty());
}
