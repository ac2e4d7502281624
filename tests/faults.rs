//! Fault injection: for a plan of N writes, write k fails (k = 1..=N) with
//! each errno a sysfs store can return, through an LD_PRELOAD shim
//! (tests/faults/inject.c) around the real binary's write(2).

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, MIXED, Run};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The paths apply writes, in the order it writes them: the plan's, device
/// by device.
fn write_order(env: &Env, profile: &str) -> Vec<String> {
    let doc = env.run(&["apply", profile, "--dry-run", "--json"]).json();
    doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["changes"].as_array().unwrap().clone())
        .map(|c| c["path"].as_str().unwrap().to_string())
        .collect()
}

fn apply_failing(env: &Env, profile: &str, k: usize, errno: i32) -> Run {
    apply_faulty(env, profile, "/queue/", &k.to_string(), errno)
}

/// `apply` with the writes numbered in `at` ("3,5") failing, counting the
/// writes to files whose path holds one of the `|`-separated `matches`.
fn apply_faulty(env: &Env, profile: &str, matches: &str, at: &str, errno: i32) -> Run {
    let out = env
        .faulty_cmd(matches, at, errno)
        .args(["apply", profile])
        .output()
        .unwrap();
    Run::from(out)
}

/// Attribute values (trailing newline aside: a fake file keeps whatever
/// was written, the kernel would print it back with one).
fn values(env: &Env) -> BTreeMap<PathBuf, String> {
    env.snapshot()
        .into_iter()
        .map(|(p, v)| (p, String::from_utf8_lossy(&v).trim_end().to_string()))
        .collect()
}

fn saved(env: &Env) -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(env.state.join("state.json")).unwrap();
    let state: Value = serde_json::from_str(&text).expect("the state file is valid JSON");
    state["saved"].as_object().unwrap().clone()
}

#[test]
fn a_failed_write_at_any_point_leaves_the_tree_as_it_was() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let p = p.to_str().unwrap();
    let n = write_order(&env, p).len();
    assert!(n >= 10, "a plan of {n} writes");
    let before = values(&env);
    let mut cases = 0;
    for (errno, name) in [(22, "EINVAL"), (13, "EACCES"), (5, "EIO")] {
        for k in 1..=n {
            let r = apply_failing(&env, p, k, errno);
            assert_eq!(r.code, 1, "{name} at write {k}/{n}: {}", r.stderr);
            r.assert_stderr_has(&format!("rolled back {} write(s)", k - 1));
            assert!(!r.stderr.contains("ROLLBACK INCOMPLETE"), "{}", r.stderr);
            assert!(
                values(&env) == before,
                "{name} at write {k}/{n}: tree changed"
            );
            assert!(saved(&env).is_empty(), "{name} at {k}: nothing stays saved");
            cases += 1;
        }
    }
    assert_eq!(cases, 3 * n);
}

#[test]
fn a_device_vanishing_at_any_write_is_skipped_and_the_rest_applied() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let p = p.to_str().unwrap();
    let order = write_order(&env, p);
    let before = values(&env);
    for (errno, name) in [(2, "ENOENT"), (19, "ENODEV")] {
        for (i, gone) in order.iter().enumerate() {
            let r = apply_failing(&env, p, i + 1, errno);
            assert_eq!(r.code, 0, "{name} at {gone}: {}", r.stderr);
            let warning = format!("{gone}: vanished before it was written; skipped");
            r.assert_stderr_has(&warning);
            let state = saved(&env);
            assert!(!state.contains_key(gone), "{gone} is not saved: {state:?}");
            assert_eq!(state.len(), order.len() - 1);
            // the tree's files by their real path, as the snapshot lists them
            let file = |rel: &str| std::fs::canonicalize(env.fx.root().join(rel)).unwrap();
            let now = values(&env);
            assert_eq!(now[&file(gone)], before[&file(gone)], "{gone} untouched");
            for other in order.iter().filter(|o| *o != gone) {
                assert_ne!(now[&file(other)], before[&file(other)], "{other} applied");
            }
            let r = env.run(&["restore"]);
            assert_eq!(r.code, 0, "{}", r.stderr);
            assert!(
                values(&env) == before,
                "restore after {name} at {gone}: tree changed"
            );
        }
    }
}

/// A write that cannot be rolled back keeps its saved original: `restore`
/// must still be able to put it back.
#[test]
fn a_failed_rollback_keeps_the_original_of_what_it_could_not_undo() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let p = p.to_str().unwrap();
    let order = write_order(&env, p);
    let before = values(&env);
    // write 3 fails; the rollback then writes 2 (the 4th write) and 1
    let r = apply_faulty(&env, p, "/queue/", "3,4", 5);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has("ROLLBACK INCOMPLETE");
    r.assert_stderr_has(&format!("{}: cannot restore", order[1]));
    let state = saved(&env);
    assert_eq!(
        state.len(),
        1,
        "only the path left changed stays saved: {state:?}"
    );
    let file = |rel: &str| std::fs::canonicalize(env.fx.root().join(rel)).unwrap();
    assert_eq!(
        state[&order[1]]["original"].as_str(),
        Some(before[&file(&order[1])].as_str()),
        "{state:?}"
    );
    assert_ne!(values(&env)[&file(&order[1])], before[&file(&order[1])]);
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(values(&env) == before, "restore put the original back");
}

/// A state file that cannot be saved after a failed apply is reported
/// together with the failure, not instead of it.
#[test]
fn a_failed_save_after_a_failed_apply_reports_both() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let p = p.to_str().unwrap();
    let order = write_order(&env, p);
    // 1: the state saved before writing; 2, 3: the first two values (3
    // fails); 4: the rollback of the first; 5: the state saved after it.
    let r = apply_faulty(&env, p, "/queue/|state.json", "3,5", 5);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has(&format!("{}: cannot write", order[1]));
    r.assert_stderr_has("rolled back 1 write(s)");
    r.assert_stderr_has("state.json");
}

/// The attack's finding: the state saved before the writes, the writes
/// made, then the save after them failing (ENOSPC) made apply exit 1 with
/// `changed: false` and nothing rolled back: the Ansible module was told
/// nothing changed. What was written is reported as made, with the error.
#[test]
fn a_failed_save_after_the_writes_reports_them_as_made() {
    let env = Env::zoo(Abi::Queue);
    let first = env.profile("first.toml", common::NVME_AUTO);
    let original = values(&env);
    assert_eq!(env.run(&["apply", first.to_str().unwrap()]).code, 0);
    // nvme0n1 gets a new value (its original saved before the writes), the
    // other NVMe disks their originals back (forgotten in the save after)
    let p = env.profile("p.toml", common::NVME0_ONLY);
    let p = p.to_str().unwrap();
    let before = values(&env);
    let out = env
        .faulty_cmd("state.json", "2", 28)
        .args(["apply", p, "--json"])
        .output()
        .unwrap();
    let r = Run::from(out);
    let now = values(&env);
    let doc = r.json();
    let file = |rel: &str| std::fs::canonicalize(env.fx.root().join(rel)).unwrap();
    let paths = common::change_paths(&doc);
    if now == before {
        assert_eq!(doc["changed"], false, "{doc}");
    } else {
        assert_eq!(
            doc["changed"], true,
            "written but reported unchanged: {doc}"
        );
        assert!(!paths.is_empty(), "{doc}");
        for path in &paths {
            assert_ne!(now[&file(path)], before[&file(path)], "{path}");
        }
        // what restore needs was saved before the first write
        assert_eq!(env.run(&["restore"]).code, 0);
        assert!(values(&env) == original, "restore put the originals back");
    }
    assert_eq!(r.code, 1, "the save failed: {}", r.stderr);
    assert!(doc["warnings"].to_string().contains("state.json"), "{doc}");
}
