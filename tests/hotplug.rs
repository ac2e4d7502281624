//! `blkqos udev` (one event, from udev's environment) and `blkqos coldplug`.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO, Run, device};
use serde_json::Value;
use std::path::Path;

fn devpath(env: &Env, name: &str) -> String {
    format!("/{}", env.fx.dir_of(name))
}

const LIMIT: &str = "queue/cpu_lat_limit_us";

/// md arrays at 2 us: their members take the limit.
const RAID: &str = r#"
[[rule]]
name = "raid"
match = { name = "md*" }
cpu_lat_limit_us = 2
"#;

/// One `blkqos udev` event, given by flags.
fn udev(env: &Env, action: &str, devpath: &str, profile: &Path) -> Run {
    env.run(&[
        "udev",
        "--action",
        action,
        "--devpath",
        devpath,
        profile.to_str().unwrap(),
    ])
}

fn limit(env: &Env, disk: &str) -> String {
    env.get(&format!("block/{disk}/{LIMIT}"))
}

#[test]
fn add_event_from_udev_environment_tunes_that_disk_only() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let out = env
        .cmd()
        .args(["udev", p.to_str().unwrap()])
        .env("ACTION", "add")
        .env("DEVPATH", devpath(&env, "nvme1n1"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(limit(&env, "nvme1n1"), "4");
    assert_eq!(
        limit(&env, "nvme0n1"),
        "-1",
        "other disks wait for their own event"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "blkqos: nvme1n1: rule \"nvme\": queue/cpu_lat_limit_us -1 -> 4\n",
        "one line naming the disk"
    );
    let state = env.state_json();
    assert_eq!(state["rules"]["nvme1n1"], "nvme");
    assert_eq!(state["saved"].as_object().unwrap().len(), 1);
}

#[test]
fn stacked_disk_event_tunes_its_members_and_remove_puts_them_back() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", RAID);
    let dp = devpath(&env, "md0");
    let r = udev(&env, "add", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(limit(&env, "nvme2n1"), "2");
    assert_eq!(limit(&env, "nvme3n1"), "2");

    env.fx.remove_disk("md0");
    let r = udev(&env, "remove", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("md0: removed; put back block/nvme2n1/queue/cpu_lat_limit_us = -1");
    assert_eq!(limit(&env, "nvme2n1"), "-1");
    assert_eq!(limit(&env, "nvme3n1"), "-1");
    let state = env.state_json();
    assert!(state["saved"].as_object().unwrap().is_empty(), "{state}");
    assert!(state["rules"].as_object().unwrap().is_empty(), "{state}");
}

#[test]
fn remove_of_a_vanished_disk_forgets_its_saved_values() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let dp = devpath(&env, "nvme0n1");
    let r = udev(&env, "change", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::remove_dir_all(env.fx.root().join(env.fx.dir_of("nvme0n1"))).unwrap();
    std::fs::remove_file(env.fx.root().join("block/nvme0n1")).unwrap();
    let r = udev(&env, "remove", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stderr,
        "blkqos: nvme0n1: removed; forgot 1 saved value(s)\n"
    );
    assert!(env.state_json()["saved"].as_object().unwrap().is_empty());
}

#[test]
fn remove_of_a_disk_still_present_is_refused_and_forgets_nothing() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let dp = devpath(&env, "nvme0n1");
    assert_eq!(udev(&env, "add", &dp, &p).code, 0);
    let state = std::fs::read(env.state.join("state.json")).unwrap();
    let before = env.snapshot();
    // `udevadm trigger -c remove`, or a forged DEVPATH naming a disk that is there
    for devpath in [dp.clone(), "/devices/virtual/block/nvme0n1".to_string()] {
        let r = udev(&env, "remove", &devpath, &p);
        assert_eq!(r.code, 2, "{devpath}: {}", r.stderr);
        r.assert_stderr_has("nvme0n1 is still present");
        assert_eq!(env.snapshot(), before, "{devpath}: nothing written");
        assert_eq!(
            std::fs::read(env.state.join("state.json")).unwrap(),
            state,
            "{devpath}: no original forgotten"
        );
    }
    assert_eq!(limit(&env, "nvme0n1"), "4");
}

#[test]
fn partitions_are_ignored_and_hostile_events_refused_without_writing() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let before = env.snapshot();
    let part = devpath(&env, "sda1");
    let r = udev(&env, "add", &part, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "a partition is not worth a log line");
    let r = env.run(&[
        "-v",
        "udev",
        "--action=add",
        "--devpath",
        &part,
        p.to_str().unwrap(),
    ]);
    r.assert_stderr_has("debug: ignored: partitions");

    let outside = format!("{}/../../../../../etc", devpath(&env, "nvme0n1"));
    for (action, dp) in [
        ("add", "/devices/../../etc"),
        ("add", outside.as_str()),
        ("add", "/sys/block/nvme0n1"),
        ("bind", part.as_str()),
        ("remove", "/devices/virtual/block/$(reboot)"),
    ] {
        let r = udev(&env, action, dp, &p);
        assert_eq!(r.code, 2, "{action} {dp}: {}", r.stderr);
        assert!(
            r.stderr.starts_with("blkqos: error: refused event: "),
            "{}",
            r.stderr
        );
    }
    assert_eq!(env.snapshot(), before, "nothing written");
    assert!(!env.state.exists(), "no state created");
}

#[test]
fn coldplug_tunes_every_present_disk() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let r = env.run(&["coldplug", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "", "coldplug reports through the log");
    for d in ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"] {
        assert_eq!(limit(&env, d), "4", "{d}");
        let line = format!("blkqos: {d}: rule \"nvme\": queue/cpu_lat_limit_us -1 -> 4\n");
        r.assert_stderr_has(&line);
    }
    assert!(
        r.stderr
            .ends_with("coldplug: 14 disk(s), 5 matched a rule, 6 value(s) written\n"),
        "{}",
        r.stderr
    );
    let again = env.run(&["coldplug", p.to_str().unwrap()]);
    assert!(
        again.stderr.ends_with("0 value(s) written\n"),
        "{}",
        again.stderr
    );
}

/// Removing a stacked device releases only what nobody else still wants: a
/// member that its own rule tunes keeps that rule's value and the original
/// saved for it.
#[test]
fn removing_a_stacked_device_keeps_what_its_members_own_rules_want() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile(
        "p.toml",
        r#"
[[rule]]
name = "raid"
match = { name = "md*" }
cpu_lat_limit_us = 2

[[rule]]
name = "nvme"
match = { transport = "nvme" }
cpu_lat_limit_us = "auto"
"#,
    );
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        limit(&env, "nvme2n1"),
        "2",
        "md0's request is the strictest"
    );
    let dp = devpath(&env, "md0");
    env.fx.remove_disk("md0");

    let r = udev(&env, "remove", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for member in ["nvme2n1", "nvme3n1"] {
        assert_eq!(
            limit(&env, member),
            "4",
            "{member}: its own rule's auto value"
        );
    }
    let state = env.state_json();
    let saved = &state["saved"]["block/nvme2n1/queue/cpu_lat_limit_us"];
    assert_eq!(saved["original"], "-1", "the original stays saved: {state}");
    assert!(
        !saved["owners"].as_array().unwrap().contains(&"md0".into()),
        "md0 no longer owns it: {state}"
    );
    assert!(state["rules"].get("md0").is_none(), "{state}");
    let v = env.run(&["verify", p.to_str().unwrap()]);
    assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        limit(&env, "nvme2n1"),
        "-1",
        "restore still finds the original"
    );
}

/// The udev rule runs remove with no profile installed ("putting back what
/// was saved needs no profile"): what the removed disk alone held goes
/// back, from the state only; what another tuned disk shares stays.
#[test]
fn remove_without_a_profile_puts_back_what_the_disk_alone_held() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", RAID);
    let dp = devpath(&env, "md0");
    assert_eq!(udev(&env, "add", &dp, &p).code, 0);
    assert_eq!(limit(&env, "nvme2n1"), "2");
    std::fs::remove_file(&p).unwrap();
    env.fx.remove_disk("md0");
    let r = udev(&env, "remove", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("no profile");
    assert_eq!(limit(&env, "nvme2n1"), "-1");
    assert_eq!(limit(&env, "nvme3n1"), "-1");
    let state = env.state_json();
    assert!(state["saved"].as_object().unwrap().is_empty(), "{state}");
    assert!(state["rules"].get("md0").is_none(), "{state}");
    // a disk blkqos never tuned: nothing to put back, no error
    let dp = devpath(&env, "nvme0n1");
    env.fx.remove_disk("nvme0n1");
    let before = std::fs::read(env.state.join("state.json")).unwrap();
    let r = udev(&env, "remove", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(env.state.join("state.json")).unwrap(), before);
}

/// The same for a lone disk, whose entries were the last saved: they are
/// its own, forgotten, not "every saved device gone".
#[test]
fn remove_without_a_profile_of_the_last_tuned_disk_forgets_its_entries() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", common::NVME0_ONLY);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    std::fs::remove_file(&p).unwrap();
    let dp = devpath(&env, "nvme0n1");
    env.fx.remove_disk("nvme0n1");
    let r = udev(&env, "remove", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let state = env.state_json();
    assert!(state["saved"].as_object().unwrap().is_empty(), "{state}");
}

/// A remove is planned with the profile too: a bad one is refused and
/// changes nothing, the saved originals included.
#[test]
fn remove_with_a_bad_profile_changes_nothing() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let dp = devpath(&env, "nvme0n1");
    env.fx.remove_disk("nvme0n1");
    let state = std::fs::read(env.state.join("state.json")).unwrap();
    let before = env.snapshot();
    let bad = env.profile("bad.toml", "[[rule]]\nname = 1\n");
    let r = udev(&env, "remove", &dp, &bad);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("nvme0n1: remove failed: ");
    r.assert_stderr_has("bad.toml:2:8");
    assert_eq!(env.snapshot(), before);
    assert_eq!(std::fs::read(env.state.join("state.json")).unwrap(), state);
}

/// A remove event as udev sends it, DISKSEQ included: the disk it was for.
fn late_remove(env: &Env, devpath: &str, diskseq: &str, profile: &Path) -> Run {
    let out = env
        .cmd()
        .args(["udev", profile.to_str().unwrap()])
        .env("ACTION", "remove")
        .env("DEVPATH", devpath)
        .env("DISKSEQ", diskseq)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// nvme0n1 taken away without its remove being handled yet, and another
/// disk given the name (an NVMe hot swap, an md array made again), whose
/// limit someone set to 25: returns the new disk's diskseq and the old one's.
fn reuse_nvme0n1(env: &mut Env, p: &Path) -> (String, String) {
    let dp = devpath(env, "nvme0n1");
    assert_eq!(udev(env, "add", &dp, p).code, 0);
    let old = env.get("block/nvme0n1/diskseq");
    env.fx.remove_disk("nvme0n1");
    assert_eq!(env.fx.nvme_ns(0, 1), "nvme0n1");
    env.fx.put(&format!("block/nvme0n1/{LIMIT}"), "25");
    let new = env.get("block/nvme0n1/diskseq");
    assert_ne!(old, new);
    (new, old)
}

#[test]
fn a_disk_given_a_name_used_before_keeps_its_own_originals() {
    let mut env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    reuse_nvme0n1(&mut env, &p);
    let add = udev(&env, "add", &devpath(&env, "nvme0n1"), &p);
    assert_eq!(add.code, 0, "{}", add.stderr);
    assert_eq!(limit(&env, "nvme0n1"), "4");
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        limit(&env, "nvme0n1"),
        "25",
        "the new disk's value, not the old one's -1"
    );
    add.assert_stderr_has("nvme0n1: another disk has the name now");
}

/// The old disk's remove handled after the new disk came: acted on (not
/// refused as a disk still present), and the new disk keeps its tuning and
/// its saved original.
#[test]
fn the_late_remove_of_a_disk_whose_name_was_reused_leaves_the_new_disk_alone() {
    let mut env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let (_, old) = reuse_nvme0n1(&mut env, &p);
    let old_devpath = devpath(&env, "nvme0n1");
    assert_eq!(udev(&env, "add", &old_devpath, &p).code, 0);
    let r = late_remove(&env, &old_devpath, &old, &p);
    let stderr = &r.stderr;
    assert_eq!(r.code, 0, "{stderr}");
    assert!(stderr.contains("an earlier disk"), "{stderr}");
    assert_eq!(limit(&env, "nvme0n1"), "4");
    let saved = &env.state_json()["saved"][format!("block/nvme0n1/{LIMIT}")];
    assert_eq!(saved["original"], "25", "{saved}");
}

/// An md array's remove handled after an array of the same name was made
/// again (empty, as opening /dev/md0 makes one; the rule skips its add):
/// what the earlier array held on its members goes back, as a remove on
/// time does.
#[test]
fn the_late_remove_of_an_array_puts_its_members_back() {
    let mut env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", RAID);
    let dp = devpath(&env, "md0");
    assert_eq!(udev(&env, "add", &dp, &p).code, 0);
    assert_eq!(limit(&env, "nvme2n1"), "2");
    let old = env.get("block/md0/diskseq");
    env.fx.remove_disk("md0");
    env.fx.md_raid0("md0", &[]);
    let r = late_remove(&env, &dp, &old, &p);
    let stderr = &r.stderr;
    assert_eq!(r.code, 0, "{stderr}");
    assert_eq!(limit(&env, "nvme2n1"), "-1", "{stderr}");
    assert_eq!(limit(&env, "nvme3n1"), "-1", "{stderr}");
    assert_eq!(env.state_json()["saved"], serde_json::json!({}));
}

/// A device number used again, a new diskseq (the case diskseq is for):
/// another disk.
#[test]
fn a_new_diskseq_on_the_same_device_number_is_another_disk() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let dp = devpath(&env, "nvme0n1");
    assert_eq!(udev(&env, "add", &dp, &p).code, 0);
    env.fx.put("block/nvme0n1/diskseq", "900");
    env.fx.put(&format!("block/nvme0n1/{LIMIT}"), "25");
    let r = udev(&env, "add", &dp, &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("nvme0n1: another disk has the name now (diskseq 900");
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(limit(&env, "nvme0n1"), "25");
}

/// Every disk the state names made anew under its name: a later diskseq
/// on each, whose limit reads `limit` (the new disk's, not what blkqos
/// wrote: a media change keeps that). Returns each name with the diskseq
/// it had and the one it has.
fn replace_every_saved_disk(env: &Env, limit: &str) -> Vec<(String, String, String)> {
    let disks = env.state_json()["disks"].as_object().unwrap().clone();
    let mut was = Vec::new();
    for (i, d) in disks.keys().enumerate() {
        let new = (1000 + i).to_string();
        was.push((
            d.clone(),
            env.get(&format!("block/{d}/diskseq")),
            new.clone(),
        ));
        env.fx.put(&format!("block/{d}/diskseq"), &new);
        if env.fx.root().join(format!("block/{d}/{LIMIT}")).exists() {
            env.fx.put(&format!("block/{d}/{LIMIT}"), limit);
        }
    }
    was
}

/// Every disk the state names replaced at once: another boot's state or
/// another machine's tree, not a hot swap of each; nothing is forgotten.
#[test]
fn every_saved_disk_replaced_at_once_is_refused() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let state = std::fs::read(env.state.join("state.json")).unwrap();
    assert!(replace_every_saved_disk(&env, "-1").len() >= 2);
    for args in [vec!["restore"], vec!["apply", p.to_str().unwrap()]] {
        let r = env.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        r.assert_stderr_has("is another disk now");
        assert_eq!(
            std::fs::read(env.state.join("state.json")).unwrap(),
            state,
            "{args:?}: nothing forgotten"
        );
    }
    let r = env.run(&["status"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("every disk the state names is another one now");
    assert_eq!(std::fs::read(env.state.join("state.json")).unwrap(), state);
}

/// The refusal as a JSON error document, its kind in the schema.
#[test]
fn every_saved_disk_replaced_is_an_error_document_of_its_own_kind() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    replace_every_saved_disk(&env, "-1");
    let r = env.run(&["restore", "--json"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect(&r.stdout);
    assert_eq!(
        doc["failure"]["kind"], "all-saved-devices-replaced",
        "{doc}"
    );
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schemas/restore.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert!(
        jsonschema::draft202012::new(&schema)
            .unwrap()
            .is_valid(&doc),
        "{doc}"
    );
}

/// A name whose disk is another one now, its remove not handled yet:
/// status does not show the new disk under the rule that tuned the one
/// before, and says why (as the next apply will, when it forgets it).
#[test]
fn status_shows_a_replaced_disk_without_the_rule_of_the_one_before() {
    let mut env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let (new, old) = reuse_nvme0n1(&mut env, &p);
    let why = format!("nvme0n1: another disk has the name now (diskseq {new}, was diskseq {old})");
    let r = env.run(&["status", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(device(&doc, "nvme0n1")["rule"], Value::Null, "{}", r.stdout);
    let warned = doc["warnings"].as_array().expect("warnings");
    let told = format!("{why}: rule \"nvme\" tuned the one before; shown under no rule");
    assert!(
        warned
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.starts_with(&told))),
        "{doc}"
    );
    let r = env.run(&["status"]);
    assert!(r.stdout.contains("nvme0n1 rule: -"), "{}", r.stdout);
    r.assert_stderr_has(&why);
    // nothing forgotten by a command that only reads
    assert_eq!(env.state_json()["rules"]["nvme0n1"], "nvme");
}

/// Three NVMe disks at limit 7 and 64 requests (nvme2n1 an md0 member
/// without a rule of its own there).
const THREE_NVME: &str = r#"
[[rule]]
name = "three"
match = { name = ["nvme0n1", "nvme1n1", "nvme2n1"] }
cpu_lat_limit_us = 7
[rule.queue]
nr_requests = "64"
"#;

/// The udev rule runs remove whether or not a profile is installed: one
/// disk's remove without a profile forgets that disk's entries and no
/// other's, and `restore` still puts the others back.
#[test]
fn remove_without_a_profile_forgets_only_the_removed_disks_entries() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", THREE_NVME);
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seq = env.get("block/nvme1n1/diskseq");
    let dp = devpath(&env, "nvme1n1");
    env.fx.remove_disk("nvme1n1");
    let r = late_remove(&env, &dp, &seq, Path::new("/nonexistent/blkqos.toml"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    r.assert_stderr_has("nvme1n1: removed; forgot 2 saved value(s)");
    let state = env.state_json();
    let saved: Vec<&String> = state["saved"].as_object().unwrap().keys().collect();
    for d in ["nvme0n1", "nvme2n1"] {
        for attr in [LIMIT, "queue/nr_requests"] {
            let path = format!("block/{d}/{attr}");
            assert!(saved.contains(&&path), "{path} kept: {state}");
        }
        assert_eq!(state["rules"][d], "three", "{state}");
    }
    assert!(
        !saved.iter().any(|p| p.starts_with("block/nvme1n1/")),
        "{state}"
    );
    assert!(state["rules"].get("nvme1n1").is_none(), "{state}");
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for d in ["nvme0n1", "nvme2n1"] {
        assert_eq!(limit(&env, d), "-1", "{d}: {}", r.stdout);
        assert_eq!(env.get(&format!("block/{d}/queue/nr_requests")), "1023");
    }
}

/// The way out of "every saved disk replaced" (remove events lost, say to
/// a lock timeout): the refusal names `restore --forget-replaced`, which
/// forgets what was saved for the disks before, one warning each naming
/// the disk it was and the one it is; apply then tunes the new disks.
#[test]
fn restore_forget_replaced_is_the_way_out_of_every_disk_replaced() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let was = replace_every_saved_disk(&env, "25");
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("`blkqos restore --forget-replaced`");
    let r = env.run(&["restore", "--forget-replaced"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for (d, old, new) in &was {
        r.assert_stderr_has(&format!(
            "{d}: another disk has the name now (diskseq {new}, was diskseq {old})"
        ));
    }
    for d in ["nvme0n1", "nvme1n1"] {
        assert_eq!(limit(&env, d), "25", "{d}: the new disk's own value");
    }
    let state = env.state_json();
    assert_eq!(state["saved"], serde_json::json!({}), "{state}");
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(limit(&env, "nvme0n1"), "4");
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(
        limit(&env, "nvme0n1"),
        "25",
        "its original is the new disk's"
    );
}

/// loop0 at limit 50 and 64 requests.
const LOOP0: &str = r#"
[[rule]]
name = "loop"
match = { name = "loop0" }
cpu_lat_limit_us = 50
[rule.queue]
nr_requests = "64"
"#;

/// A change event as udev sends it for a media change (`losetup`, a card
/// swapped in a reader): the kernel's new DISKSEQ and DISK_MEDIA_CHANGE.
fn media_change(env: &Env, name: &str, diskseq: &str, profile: &Path) -> Run {
    let out = env
        .cmd()
        .args(["udev", profile.to_str().unwrap()])
        .env("ACTION", "change")
        .env("DEVPATH", devpath(env, name))
        .env("DISKSEQ", diskseq)
        .env("DISK_MEDIA_CHANGE", "1")
        .output()
        .unwrap();
    Run::from(out)
}

/// The kernel gives a disk a new diskseq on a media change, but the queue,
/// and what blkqos wrote to it, stay: the same disk, its originals kept.
#[test]
fn a_media_change_keeps_the_originals() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", LOOP0);
    let r = udev(&env, "add", &devpath(&env, "loop0"), &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(limit(&env, "loop0"), "50");
    let old = env.get("block/loop0/diskseq");
    env.fx.put("block/loop0/diskseq", "900");
    let r = media_change(&env, "loop0", "900", &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("another disk"), "{}", r.stderr);
    r.assert_stderr_has(&format!("loop0: diskseq {old} -> 900"));
    let state = env.state_json();
    assert_eq!(state["disks"]["loop0"]["diskseq"], 900, "{state}");
    assert_eq!(
        state["saved"][format!("block/loop0/{LIMIT}")]["original"],
        "-1"
    );
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(limit(&env, "loop0"), "-1", "{}", r.stdout);
    assert_eq!(env.get("block/loop0/queue/nr_requests"), "1023");
}

/// The same media change seen first by apply or restore (its change event
/// not handled yet, or lost): the same name and device number, a later
/// diskseq, and the queue still holding what blkqos wrote are the same
/// queue. A value someone else wrote since is another disk's
/// (a_new_diskseq_on_the_same_device_number_is_another_disk).
#[test]
fn a_later_diskseq_on_a_queue_holding_what_blkqos_wrote_is_the_same_disk() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", LOOP0);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    env.fx.put("block/loop0/diskseq", "900");
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("another disk"), "{}", r.stderr);
    env.fx.put("block/loop0/diskseq", "901");
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("another disk"), "{}", r.stderr);
    assert_eq!(limit(&env, "loop0"), "-1", "{}", r.stdout);
    assert_eq!(env.get("block/loop0/queue/nr_requests"), "1023");
}

/// A state saved before blkqos kept what it wrote cannot tell a media
/// change by the values; the event tells it.
#[test]
fn a_media_change_event_keeps_the_originals_of_a_state_without_written_values() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", LOOP0);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let mut state = env.state_json();
    for saved in state["saved"].as_object_mut().unwrap().values_mut() {
        saved.as_object_mut().unwrap().remove("written");
    }
    std::fs::write(env.state.join("state.json"), state.to_string()).unwrap();
    env.fx.put("block/loop0/diskseq", "900");
    let r = media_change(&env, "loop0", "900", &p);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("another disk"), "{}", r.stderr);
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(limit(&env, "loop0"), "-1");
}
