//! Drop-ins: `<dir of PROFILE>/blkqos.d/*.toml`, merged in lexical order
//! after the profile: rules appended, `[defaults]` overridden key by key.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO, is_root};
use serde_json::Value;
use std::fs;
use std::os::unix::fs::chown;
use std::path::PathBuf;

fn drop_in(env: &Env, name: &str, text: &str) -> PathBuf {
    let dir = env.work.join("blkqos.d");
    fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

fn device<'a>(doc: &'a Value, name: &str) -> &'a Value {
    (doc["devices"].as_array().unwrap().iter())
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {doc}"))
}

#[test]
fn drop_ins_merge_in_lexical_order_after_the_profile() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("blkqos.toml", NVME_AUTO);
    // written out of order: the order read is the names'
    let b = drop_in(&env, "20-b.toml", "[defaults]\ncpu_lat_timeout_ms = 20\n");
    let a = drop_in(
        &env,
        "10-a.toml",
        "[defaults]\ncpu_lat_timeout_ms = 10\n\n[[rule]]\nname = \"sata\"\nmatch = { transport = \"sata\" }\ncpu_lat_limit_us = 7\n",
    );
    drop_in(&env, "30-not-toml.conf", "this is not read");
    drop_in(&env, ".40-hidden.toml", "nor is this");
    let p = p.to_str().unwrap();

    let check = env.run(&["check", p, "--json"]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    let files: Vec<String> = (check.json()["files"].as_array().unwrap().iter())
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = [PathBuf::from(p), a, b]
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    assert_eq!(files, want);
    let text = env.run(&["check", p]);
    assert!(text.stdout.contains("valid (2 rule(s))"), "{}", text.stdout);
    assert!(text.stdout.contains("20-b.toml"), "{}", text.stdout);

    let plan = env.run(&["apply", p, "--dry-run", "--json"]).json();
    // the rule from the drop-in is appended; the last drop-in's default wins
    assert_eq!(device(&plan, "nvme0n1")["rule"], "nvme");
    assert_eq!(device(&plan, "nvme0n1")["timeout_ms"], 20);
    assert_eq!(device(&plan, "sda")["rule"], "sata");
    assert_eq!(plan["files"].as_array().unwrap().len(), 3);

    let explain = env.run(&["explain", p, "sda"]);
    assert_eq!(explain.code, 0, "{}", explain.stderr);
    assert!(explain.stdout.contains("10-a.toml"), "{}", explain.stdout);
    assert!(
        explain.stdout.contains("rule \"sata\": MATCH"),
        "{}",
        explain.stdout
    );
}

#[test]
fn a_rule_in_a_drop_in_keeps_the_profile_defaults_it_does_not_override() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("blkqos.toml", NVME_AUTO);
    drop_in(
        &env,
        "10-fallback.toml",
        "[defaults]\nfallback = \"cpu-resume-latency\"\n",
    );
    let plan = env
        .run(&["apply", p.to_str().unwrap(), "--dry-run", "--json"])
        .json();
    // cpu_lat_timeout_ms = 3 from the profile stays
    assert_eq!(device(&plan, "nvme0n1")["timeout_ms"], 3);
}

#[test]
fn an_error_in_a_drop_in_names_the_drop_in_line_and_column() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("blkqos.toml", NVME_AUTO);
    let bad = drop_in(
        &env,
        "10-bad.toml",
        "[[rule]]\nname = \"x\"\ncpu_lat_limt_us = 10\n",
    );
    let before = env.snapshot();
    let p = p.to_str().unwrap();
    let r = env.run(&["check", p]);
    assert_eq!(r.code, 2);
    r.assert_stderr_has(&format!("{}:3:1:", bad.display()));
    let doc = env.run(&["check", p, "--json"]).json();
    assert_eq!(doc["failure"]["kind"], "profile-invalid");
    assert_eq!(doc["failure"]["file"], bad.display().to_string());
    assert_eq!(doc["failure"]["line"], 3);
    assert_eq!(doc["failure"]["column"], 1);
    assert_eq!(env.run(&["apply", p]).code, 2);
    assert_eq!(env.snapshot(), before, "nothing written");
}

#[test]
fn a_rule_name_used_again_in_a_drop_in_names_both_files() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("blkqos.toml", NVME_AUTO);
    let again = drop_in(&env, "10-again.toml", "\n[[rule]]\nname = \"nvme\"\n");
    let r = env.run(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    r.assert_stderr_has(&format!(
        "{}:3:8: duplicate rule name \"nvme\"",
        again.display()
    ));
    // NVME_AUTO names its rule on line 6
    r.assert_stderr_has(&format!("first named in {} on line 6", p.display()));
}

#[test]
fn drop_ins_alone_may_hold_every_rule() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("blkqos.toml", "[defaults]\ncpu_lat_timeout_ms = 3\n");
    let r = env.run(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "no rule anywhere");
    r.assert_stderr_has("no [[rule]]");
    drop_in(
        &env,
        "10-nvme.toml",
        &NVME_AUTO.replace("[defaults]\ncpu_lat_timeout_ms = 3\n", ""),
    );
    assert_eq!(env.run(&["check", p.to_str().unwrap()]).code, 0);
}

#[test]
fn as_root_an_untrusted_drop_in_is_refused() {
    if !is_root("the profile checks only apply to root") {
        return;
    }
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("blkqos.toml", NVME_AUTO);
    let evil = drop_in(
        &env,
        "10-evil.toml",
        "[[rule]]\nname = \"sata\"\nmatch = { transport = \"sata\" }\ncpu_lat_limit_us = 0\n",
    );
    chown(&evil, Some(65534), None).unwrap();
    let before = env.snapshot();
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("refusing a profile");
    r.assert_stderr_has("10-evil.toml");
    assert_eq!(
        env.snapshot(),
        before,
        "nothing written, not even the profile's own rules"
    );
    chown(&evil, Some(0), None).unwrap();
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn drop_in_and_rule_names_are_printed_with_control_characters_escaped() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("blkqos.toml", "");
    drop_in(
        &env,
        "10-evil\x1b[2J\x07.toml",
        "[[rule]]\nname = \"nvme\\u001b]0;pwned\\u0007\"\nmatch = { transport = \"nvme\" }\ncpu_lat_limit_us = 7\n",
    );
    let p = p.to_str().unwrap();
    for args in [
        vec!["check", p],
        vec!["apply", p, "--dry-run"],
        vec!["apply", p],
        vec!["apply", p],
        vec!["status"],
    ] {
        let r = env.run(&args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(
            !r.stdout.contains(['\x1b', '\x07']),
            "{args:?}: raw control characters in {:?}",
            r.stdout
        );
    }
    let check = env.run(&["check", p]).stdout;
    assert!(check.contains(r"10-evil\x1b[2J\x07.toml"), "{check}");
    let dry = env.run(&["restore", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let plan = env.run(&["apply", p, "--dry-run"]).stdout;
    assert!(plan.contains(r"nvme\x1b]0;pwned\x07"), "{plan}");
}
