//! Output conventions: stdout holds what the command prints (a table or
//! one JSON document, errors included), messages go to stderr, and
//! `verify` exits like diff: 0 same, 1 differs, 2 could not check.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO};

#[test]
fn warnings_go_to_stderr_not_stdout() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"r\"\nmatch = { name = \"zram0\" }\n[rule.queue]\nscheduler = \"none\"\n",
    );
    let r = env.run(&["apply", p.to_str().unwrap(), "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("blkqos: warning: zram0: rule \"r\" sets queue/scheduler");
    assert!(!r.stdout.contains("warning"), "{}", r.stdout);
    let q = env.run(&["-q", "apply", p.to_str().unwrap(), "--dry-run"]);
    assert_eq!(q.stderr, "", "-q: errors only");
}

#[test]
fn json_errors_are_one_document_with_kind_and_location() {
    let env = Env::zoo(Abi::Queue);
    let bad = env.profile("bad.toml", "[[rule]]\nname = \"r\"\ncpu_lat_limt_us = 3\n");
    for args in [
        vec!["apply", bad.to_str().unwrap(), "--json"],
        vec!["apply", bad.to_str().unwrap(), "--json", "--dry-run"],
        vec!["verify", bad.to_str().unwrap(), "--json"],
    ] {
        let r = env.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        let doc = r.json();
        assert_eq!(doc["schema"], 3);
        assert_eq!(doc["command"], args[0]);
        assert_eq!(doc["failure"]["kind"], "profile-invalid", "{doc}");
        assert_eq!(doc["failure"]["file"], bad.to_str().unwrap());
        assert_eq!(doc["failure"]["line"], 3);
        assert_eq!(doc["failure"]["column"], 1);
        assert!(doc["error"].as_str().unwrap().contains("cpu_lat_limt_us"));
        assert_eq!(doc["failure"]["message"], doc["error"]);
    }
    let r = env.run(&["restore", "--json", "--device", "a b"]);
    assert_eq!(r.code, 2);
    assert_eq!(r.json()["failure"]["kind"], "usage");
    // what clap refuses (an unknown option) too
    let r = env.run(&["apply", "--json", "--frobnicate"]);
    assert_eq!(r.code, 2);
    assert_eq!(r.json()["command"], "apply");
    assert_eq!(r.json()["failure"]["kind"], "usage");
    let r = env.run_in(&env.work.join("nowhere"), &["list", "--json"]);
    assert_eq!(r.code, 2);
    assert_eq!(r.json()["failure"]["kind"], "not-sysfs");
}

#[test]
fn verify_exits_0_same_1_differs_2_could_not_check() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    assert_eq!(env.run(&["verify", p]).code, 1, "differs");
    assert_eq!(env.run(&["apply", p]).code, 0);
    assert_eq!(env.run(&["verify", p]).code, 0, "same");
    // an attribute that cannot be read: nothing to compare
    let attr = env.fx.root().join("block/nvme0n1/queue/cpu_lat_limit_us");
    let attr = std::fs::canonicalize(attr).unwrap();
    std::fs::remove_file(&attr).unwrap();
    std::fs::create_dir(&attr).unwrap();
    let r = env.run(&["verify", p, "--json"]);
    assert_eq!(r.code, 2, "could not check: {}", r.stderr);
    assert_eq!(r.json()["failure"]["kind"], "read-failed");
    let missing = env.run(&["verify", &format!("{p}.missing")]);
    assert_eq!(missing.code, 2);
}
