//! apply / verify / restore on fake trees: the user-visible contract.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::fixture::{Fixture, INTEL_IDLE};
use common::{Env, MIXED, NVME_AUTO, change_paths};

#[test]
fn apply_writes_what_differs_and_a_second_apply_writes_nothing() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let r = env.run(&["apply", p.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["changed"], true);
    assert_eq!(doc["dry_run"], false);
    assert_eq!(
        change_paths(&doc),
        [
            "block/nvme0n1/queue/cpu_lat_limit_us",
            "block/nvme1n1/queue/cpu_lat_limit_us",
            "block/nvme2n1/queue/cpu_lat_limit_us",
            "block/nvme3n1/queue/cpu_lat_limit_us",
            "block/nvme4c4n1/queue/cpu_lat_limit_us",
            "block/nvme4c5n1/queue/cpu_lat_limit_us",
        ]
    );
    assert_eq!(
        env.get("block/nvme0n1/queue/cpu_lat_limit_us"),
        "4",
        "auto = C1E exit latency"
    );
    assert_eq!(
        env.get("block/sda/queue/cpu_lat_limit_us"),
        "-1",
        "other disks untouched"
    );
    let again = env.run(&["apply", p.to_str().unwrap(), "--json"]).json();
    assert_eq!(again["changed"], false);
    assert!(change_paths(&again).is_empty());
}

/// The attack's finding: values going back to their originals belong to
/// disks no rule matches now, and the table listed those disks as
/// "untouched" while its footer counted their changes.
#[test]
fn the_table_shows_every_change_the_footer_counts() {
    let env = Env::zoo(Abi::Queue);
    let a = env.profile("a.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", a.to_str().unwrap()]).code, 0);
    let b = env.profile("b.toml", common::NVME0_ONLY);
    let json = env
        .run(&["apply", b.to_str().unwrap(), "--dry-run", "--json"])
        .json();
    let n = change_paths(&json).len();
    assert!(n > 1, "{json}");
    let human = env.run(&["apply", b.to_str().unwrap(), "--dry-run"]).stdout;
    assert!(
        human.contains(&format!("{n} change(s) would be made")),
        "{human}"
    );
    for path in change_paths(&json) {
        assert!(human.contains(&path), "{path} not in the table: {human}");
    }
    let untouched = human
        .lines()
        .find(|l| l.contains("untouched"))
        .unwrap_or("");
    assert!(!untouched.contains("nvme1n1"), "{human}");
}

/// The attack's finding: one knob that could not be read (EIO, a driver's
/// fault) made apply write nothing on any disk. The rest is tuned, that
/// disk's knob reported, and the exit says the run was partial.
#[test]
fn an_unreadable_knob_costs_its_disk_only() {
    let env = Env::zoo(Abi::Queue);
    let bad = env
        .fx
        .root()
        .join(env.fx.dir_of("nvme1n1"))
        .join("queue/cpu_lat_limit_us");
    std::fs::remove_file(&bad).unwrap();
    std::fs::create_dir(&bad).unwrap();
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    for args in [vec!["apply", p], vec!["coldplug", p]] {
        let r = env.run(&args);
        assert_eq!(r.code, 1, "{args:?}: partial: {}", r.stderr);
        r.assert_stderr_has("block/nvme1n1/queue/cpu_lat_limit_us");
        assert_eq!(
            env.get("block/nvme0n1/queue/cpu_lat_limit_us"),
            "4",
            "{args:?}"
        );
        assert_eq!(
            env.get("block/nvme2n1/queue/cpu_lat_limit_us"),
            "4",
            "{args:?}"
        );
    }
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "-1");
}

/// A disk whose `size` cannot be read (EIO, a driver's fault) was taken
/// for an empty one and skipped, the run exiting 0. It is left alone and
/// reported like an unreadable knob: the rest is tuned, the exit says the
/// run was partial.
#[test]
fn an_unreadable_size_is_reported_not_taken_for_an_empty_disk() {
    let env = Env::zoo(Abi::Queue);
    let bad = env.fx.root().join(env.fx.dir_of("sda")).join("size");
    std::fs::remove_file(&bad).unwrap();
    std::fs::create_dir(&bad).unwrap();
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"two\"\nmatch = { name = [\"sda\", \"nvme0n1\"] }\ncpu_lat_limit_us = 20\n",
    );
    let p = p.to_str().unwrap();
    for args in [vec!["apply", p, "--dry-run"], vec!["apply", p]] {
        let r = env.run(&args);
        assert_eq!(r.code, 1, "{args:?}: partial: {}", r.stderr);
        r.assert_stderr_has("block/sda/size: cannot read it");
        assert!(!r.stderr.contains("size 0"), "{}", r.stderr);
    }
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "20");
    assert_eq!(env.get("block/sda/queue/cpu_lat_limit_us"), "-1");
    let list = env.run(&["list", "--json"]);
    let sda = common::device(&list.json(), "sda").clone();
    assert!(
        sda["excluded"]
            .as_str()
            .is_some_and(|e| e.starts_with("size unreadable")),
        "{sda}"
    );
}

/// `--device sda1` said "no block device named \"sda1\"": it is there, a
/// partition, which blkqos tunes through its disk. Each command that takes
/// a device says so and names the disk.
#[test]
fn a_partition_named_as_the_device_is_said_to_be_one_of_its_disk() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let p = p.to_str().unwrap();
    let before = env.snapshot();
    for args in [
        &["apply", p, "--device", "sda1", "--dry-run"][..],
        &["apply", p, "--device", "/dev/sda1"],
        &["restore", "--device", "sda1"],
        &["explain", p, "sda1"],
    ] {
        let r = env.run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        r.assert_stderr_has(
            "sda1 is a partition of sda: blkqos tunes whole disks; name sda instead",
        );
    }
    assert_eq!(env.snapshot(), before, "nothing written");
}

/// A plan without a row printed the table's header above "no rule
/// matches": a header over nothing. Without rows there is none.
#[test]
fn a_plan_without_rows_prints_no_table_header() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"none\"\nmatch = { name = \"nosuchdisk*\" }\ncpu_lat_limit_us = 5\n",
    );
    let p = p.to_str().unwrap();
    for args in [
        &["apply", p, "--dry-run"][..],
        &["apply", p],
        &["apply", p, "--device", "sda", "--dry-run"],
    ] {
        let r = env.run(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(!r.stdout.contains("DEVICE"), "{args:?}: {}", r.stdout);
        assert!(
            r.stdout.contains("no rule matches"),
            "{args:?}: {}",
            r.stdout
        );
        assert!(
            r.stdout.contains("nothing to change"),
            "{args:?}: {}",
            r.stdout
        );
    }
    // with a row, the header is there
    let q = env.profile("q.toml", common::NVME0_ONLY);
    let r = env.run(&["apply", q.to_str().unwrap(), "--dry-run"]);
    assert!(r.stdout.starts_with("DEVICE"), "{}", r.stdout);
}

#[test]
fn dry_run_writes_nothing_and_needs_no_state_dir() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let before = env.snapshot();
    let r = env.run(&["apply", p.to_str().unwrap(), "--dry-run", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["dry_run"], true);
    assert_eq!(doc["changed"], true);
    assert_eq!(env.snapshot(), before);
    assert!(!env.state.exists());
    let human = env.run(&["apply", p.to_str().unwrap(), "--dry-run"]).stdout;
    assert!(human.contains("would be made (dry run"), "{human}");
    assert!(!human.contains('\x1b'), "no colour when not a tty");
}

#[test]
fn the_strictest_request_wins_on_a_shared_queue() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    // nvme2n1 is both an md0 member (2 us, 10 ms) and an nvme disk (auto = 4 us, 3 ms).
    assert_eq!(env.get("block/nvme2n1/queue/cpu_lat_limit_us"), "2");
    assert_eq!(env.get("block/nvme2n1/queue/cpu_lat_timeout_ms"), "10");
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "4");
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_timeout_ms"), "3");
    assert_eq!(
        env.get("block/nvme4c5n1/queue/cpu_lat_limit_us"),
        "4",
        "multipath head -> paths"
    );
    assert_eq!(
        env.get("block/nvme4n1/queue/read_ahead_kb"),
        "256",
        "queue attrs on the device itself"
    );
    assert_eq!(env.get("block/sda/queue/cpu_lat_limit_us"), "20");
    assert_eq!(
        env.get("block/sdb/queue/cpu_lat_limit_us"),
        "-1",
        "rotational disk not matched"
    );
}

#[test]
fn auto_follows_the_idle_state_table() {
    let env = Env::zoo(Abi::Queue);
    for cpu in 0..4 {
        env.fx.cpu(
            cpu,
            &[
                ("POLL", 0, 0),
                ("C1", 2, 2),
                ("C2", 18, 50),
                ("C3", 150, 600),
            ],
        );
    }
    let p = env.profile("p.toml", NVME_AUTO);
    let ex = env.run(&["explain", p.to_str().unwrap(), "nvme0n1"]);
    // C2 takes 16 us longer to leave than C1: ruled out, as the kernel
    // rules out an EPYC's C2
    assert!(ex.stdout.contains("2 us (C1 on CPUs 0-3)"), "{}", ex.stdout);
    env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "2");
}

#[test]
fn the_older_per_disk_layout_is_used_when_that_is_what_the_kernel_has() {
    let env = Env::zoo(Abi::Disk);
    let p = env.profile("p.toml", NVME_AUTO);
    let doc = env.run(&["apply", p.to_str().unwrap(), "--json"]).json();
    assert!(change_paths(&doc).contains(&"block/nvme0n1/cpu_lat_limit_us".to_string()));
    assert_eq!(env.get("block/nvme0n1/cpu_lat_limit_us"), "4");
}

#[test]
fn an_unpatched_kernel_without_fallback_changes_nothing_and_warns() {
    let env = Env::zoo(Abi::None);
    let p = env.profile("p.toml", NVME_AUTO);
    let before = env.snapshot();
    let r = env.run(&["apply", p.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["changed"], false);
    assert!(
        doc["warnings"]
            .to_string()
            .contains("no cpu_lat_limit_us knob"),
        "{doc}"
    );
    assert_eq!(env.snapshot(), before);
}

/// `explain` said a disk without the knobs is not constrained and never
/// named `blkqos lease`, which holds its CPUs from user space while it
/// has I/O; with the static fallback, that the lease leaves it to apply.
#[test]
fn explain_names_the_lease_for_a_queue_without_the_knobs() {
    let env = Env::zoo(Abi::None);
    let p = env.profile("p.toml", NVME_AUTO);
    let out = env.run(&["explain", p.to_str().unwrap(), "nvme0n1"]).stdout;
    assert!(
        out.contains("nvme0n1: none (no knobs): `blkqos lease` (blkqos-lease.service) holds its CPUs from user space while the disk has I/O, released 3 ms after the last; see blkqos-lease(8)"),
        "{out}"
    );
    let f = env.profile(
        "f.toml",
        &NVME_AUTO.replace(
            "[defaults]\n",
            "[defaults]\nfallback = \"cpu-resume-latency\"\n",
        ),
    );
    let out = env.run(&["explain", f.to_str().unwrap(), "nvme0n1"]).stdout;
    assert!(
        out.contains("`blkqos lease` leaves it to the static fallback; without the fallback it would hold the CPUs only while the disk has I/O"),
        "{out}"
    );
    // a queue with the knobs needs no process
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let out = env.run(&["explain", p.to_str().unwrap(), "nvme0n1"]).stdout;
    assert!(!out.contains("blkqos lease"), "{out}");
}

#[test]
fn the_static_fallback_writes_per_cpu_resume_latency_with_the_kernels_encoding() {
    let env = Env::with(|root| {
        let mut f = Fixture::new(root, 4, Abi::None);
        f.nvme(0, "M", "S0");
        f.sata("sda", "SSD", false);
        f
    });
    let p = env.profile(
        "p.toml",
        r#"
[defaults]
fallback = "cpu-resume-latency"
[[rule]]
name = "nvme"
match = { transport = "nvme" }
cpu_lat_limit_us = 10
"#,
    );
    let r = env.run(&["apply", p.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for cpu in 0..4 {
        assert_eq!(
            env.get(&format!(
                "devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"
            )),
            "10"
        );
    }
    assert!(r.stdout.contains("static, no timeout"), "{}", r.stdout);
    // A stricter limit of 0 on a disk served by the same CPUs is written as n/a.
    let p0 = env.profile(
        "p0.toml",
        r#"
[defaults]
fallback = "cpu-resume-latency"
[[rule]]
name = "nvme"
match = { transport = "nvme" }
cpu_lat_limit_us = 10
[[rule]]
name = "ssd"
match = { name = "sda" }
cpu_lat_limit_us = 0
"#,
    );
    assert_eq!(env.run(&["apply", p0.to_str().unwrap()]).code, 0);
    assert_eq!(
        env.get("devices/system/cpu/cpu2/power/pm_qos_resume_latency_us"),
        "n/a"
    );
    // "off" is the kernel's 0 (no constraint); restore brings back the original 0 too.
    let off = env.profile("off.toml", "[defaults]\nfallback = \"cpu-resume-latency\"\n[[rule]]\nname = \"all\"\ncpu_lat_limit_us = \"off\"\n");
    assert_eq!(env.run(&["apply", off.to_str().unwrap()]).code, 0);
    assert_eq!(
        env.get("devices/system/cpu/cpu2/power/pm_qos_resume_latency_us"),
        "0"
    );
}

#[test]
fn a_failed_write_rolls_back_everything_this_run_wrote() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let r = common::Run::from(
        env.faulty_cmd("/sda/queue/cpu_lat_limit_us", "1", libc::ENOSPC)
            .args(["apply", p.to_str().unwrap(), "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 1, "stdout {} stderr {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("block/sda/queue/cpu_lat_limit_us"),
        "{}",
        r.stderr
    );
    r.assert_stderr_has("rolled back");
    let doc = r.json();
    assert_eq!(doc["changed"], false);
    assert!(doc["error"].as_str().unwrap().contains("rolled back"));
    for path in [
        "block/nvme0n1/queue/cpu_lat_limit_us",
        "block/nvme2n1/queue/cpu_lat_limit_us",
        "block/nvme4c4n1/queue/cpu_lat_limit_us",
    ] {
        assert_eq!(env.get(path), "-1", "{path} rolled back");
    }
    assert_eq!(env.get("block/nvme2n1/queue/cpu_lat_timeout_ms"), "3");
    assert_eq!(env.get("block/nvme0n1/queue/read_ahead_kb"), "128");
    let state = env.state_json();
    assert_eq!(
        state["saved"],
        serde_json::json!({}),
        "no originals kept for a rolled-back run"
    );
}

#[test]
fn an_invalid_profile_exits_2_and_writes_nothing() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile(
        "bad.toml",
        "[[rule]]\nname = \"nvme\"\ncpu_lat_limt_us = 10\n",
    );
    let before = env.snapshot();
    let check = env.run(&["check", p.to_str().unwrap()]);
    assert_eq!(check.code, 2);
    assert!(
        check.stderr.contains("bad.toml:3:1:") && check.stderr.contains("cpu_lat_limt_us"),
        "{}",
        check.stderr
    );
    for args in [
        vec!["apply"],
        vec!["apply", "--dry-run"],
        vec!["verify"],
        vec!["explain"],
    ] {
        let mut a: Vec<&str> = args.clone();
        a.push(p.to_str().unwrap());
        if args[0] == "explain" {
            a.push("nvme0n1");
        }
        let r = env.run(&a);
        assert_eq!(r.code, 2, "{a:?}: {}", r.stderr);
    }
    assert_eq!(env.snapshot(), before);
    assert!(!env.state.exists(), "not even the state dir is created");
    let missing = env.run(&["check", "/nonexistent/p.toml"]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("cannot read profile"));
    let good = env.profile("good.toml", NVME_AUTO);
    assert_eq!(env.run(&["check", good.to_str().unwrap()]).code, 0);
}

/// A rule that sets a timeout and no limit, with none in [defaults],
/// does nothing: check and apply say so (a warning with its position).
#[test]
fn a_timeout_without_any_limit_is_reported() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"nvme\"\nmatch = { transport = \"nvme\" }\ncpu_lat_timeout_ms = 5\n",
    );
    for args in [vec!["check"], vec!["apply", "--dry-run"]] {
        let mut a = args.clone();
        a.push(p.to_str().unwrap());
        let r = env.run(&a);
        assert_eq!(r.code, 0, "{a:?}: {}", r.stderr);
        r.assert_stderr_has("p.toml:2:8: rule \"nvme\": cpu_lat_timeout_ms does nothing");
    }
    let with_default = env.profile(
        "q.toml",
        "[defaults]\ncpu_lat_limit_us = 10\n[[rule]]\nname = \"nvme\"\ncpu_lat_timeout_ms = 5\n",
    );
    let r = env.run(&["check", with_default.to_str().unwrap()]);
    assert!(!r.stderr.contains("does nothing"), "{}", r.stderr);
}

/// A new user's first run: every command defaults to the installed
/// profile, and a missing one names the file and says what to do.
#[test]
fn a_missing_profile_says_where_one_comes_from() {
    let env = Env::zoo(Abi::Queue);
    let gone = env.work.join("etc/blkqos.toml");
    let r = env.run(&["apply", gone.to_str().unwrap(), "--dry-run"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has(gone.to_str().unwrap());
    r.assert_stderr_has("config/blkqos.toml");
    r.assert_stderr_has("blkqos check");
}

/// On a big host the disks no rule matches made one line of every name:
/// counted, the first few named, all of them with -v.
#[test]
fn untouched_disks_are_counted_and_listed_with_v() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", common::NVME0_ONLY);
    let p = p.to_str().unwrap();
    let r = env.run(&["apply", p, "--dry-run"]);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("untouched"))
        .unwrap_or("")
        .to_string();
    assert!(line.contains("13 disk(s)"), "{}", r.stdout);
    assert!(line.contains("-v"), "{line}");
    assert!(!line.contains("zram0"), "not every name: {line}");
    let r = env.run(&["-v", "apply", p, "--dry-run"]);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("untouched"))
        .unwrap_or("");
    assert!(
        line.contains("zram0") && line.contains("dm-0"),
        "{}",
        r.stdout
    );
}

#[test]
fn usage_errors_exit_2() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["frobnicate"]).code, 2);
    assert_eq!(env.run(&["apply", "--frobnicate"]).code, 2);
    let r = env.run(&["apply", p.to_str().unwrap(), "--device", "nvme99n1"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("nvme99n1"));
    assert_eq!(env.run(&["explain", p.to_str().unwrap(), "nope"]).code, 2);
}

#[test]
fn verify_reports_mismatches_with_exit_1() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let r = env.run(&["verify", p.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 1);
    let doc = r.json();
    assert!(change_paths(&doc).contains(&"block/sda/queue/cpu_lat_limit_us".to_string()));
    let md = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "md0")
        .unwrap();
    assert_eq!(md["ok"], false);
    env.run(&["apply", p.to_str().unwrap()]);
    let ok = env.run(&["verify", p.to_str().unwrap()]);
    assert_eq!(ok.code, 0, "{}", ok.stdout);
    assert!(ok.stdout.contains("match"));
    env.fx.put("block/sda/queue/cpu_lat_limit_us", "-1");
    let drift = env.run(&["verify", p.to_str().unwrap()]);
    assert_eq!(drift.code, 1);
    assert!(drift.stdout.contains("block/sda/queue/cpu_lat_limit_us"));
}

#[test]
fn restore_puts_back_the_first_originals_and_forgets_them() {
    let env = Env::zoo(Abi::Queue);
    let a = env.profile("a.toml", MIXED);
    let b = env.profile(
        "b.toml",
        "[[rule]]\nname = \"all-nvme\"\nmatch = { transport = \"nvme\" }\ncpu_lat_limit_us = 8\n",
    );
    env.run(&["apply", a.to_str().unwrap()]);
    env.run(&["apply", b.to_str().unwrap()]);
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "8");
    let r = env.run(&["restore", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["changed"], true);
    assert_eq!(
        env.get("block/nvme0n1/queue/cpu_lat_limit_us"),
        "-1",
        "the value before blkqos first wrote it"
    );
    assert_eq!(env.get("block/nvme2n1/queue/cpu_lat_timeout_ms"), "3");
    assert_eq!(env.get("block/nvme0n1/queue/read_ahead_kb"), "128");
    assert_eq!(env.get("block/sda/queue/cpu_lat_limit_us"), "-1");
    let again = env.run(&["restore", "--json"]).json();
    assert_eq!(again["changed"], false);
}

#[test]
fn restore_of_one_device_leaves_the_others() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    env.run(&["apply", p.to_str().unwrap()]);
    let r = env.run(&["restore", "--device", "md0", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    // md0's members have a rule of their own ("nvme"): they keep a limit
    assert!(doc["devices"].as_array().unwrap().is_empty(), "{doc}");
    let warnings = doc["warnings"].to_string();
    assert!(warnings.contains("still wanted by nvme2n1"), "{warnings}");
    assert_eq!(env.get("block/nvme2n1/queue/cpu_lat_limit_us"), "2");
    assert!(env.state_json()["rules"].get("md0").is_none());
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "4");
    assert_eq!(env.get("block/sda/queue/cpu_lat_limit_us"), "20");
    env.run(&["restore"]);
    assert_eq!(env.get("block/sda/queue/cpu_lat_limit_us"), "-1");
}

#[test]
fn apply_of_one_device_touches_only_its_queues() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let doc = env
        .run(&["apply", p.to_str().unwrap(), "--device", "md0", "--json"])
        .json();
    assert_eq!(
        change_paths(&doc),
        [
            "block/nvme2n1/queue/cpu_lat_limit_us",
            "block/nvme2n1/queue/cpu_lat_timeout_ms",
            "block/nvme2n1/queue/read_ahead_kb",
            "block/nvme3n1/queue/cpu_lat_limit_us",
            "block/nvme3n1/queue/cpu_lat_timeout_ms",
            "block/nvme3n1/queue/read_ahead_kb",
        ],
        "md0 and everything wanted on the queues it resolves to"
    );
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "-1");
}

#[test]
fn status_shows_rule_knobs_cpus_and_idle_states() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    env.run(&["apply", p.to_str().unwrap()]);
    let doc = env.run(&["status", "--json"]).json();
    let md = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "md0")
        .unwrap()
        .clone();
    assert_eq!(md["rule"], "raid");
    assert_eq!(md["targets"][0]["cpu_lat_limit_us"]["us"], 2);
    assert_eq!(md["cpus"].as_array().unwrap().len(), 4);
    assert_eq!(
        md["cpus"][0]["states"].as_array().unwrap().len(),
        INTEL_IDLE.len()
    );
    assert_eq!(md["cpus"][0]["pm_qos_resume_latency_us"], "0");
    assert_eq!(md["auto_limit_us"], 4);
    let human = env.run(&["status"]).stdout;
    assert!(
        human.contains("C6") && human.contains("IDLE_TIME"),
        "{human}"
    );
}

#[test]
fn explain_says_which_rule_matched_and_why() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let out = env.run(&["explain", p.to_str().unwrap(), "nvme2n1"]).stdout;
    assert!(out.contains("rule \"raid\": no match"), "{out}");
    assert!(
        out.contains("\"nvme2n1\" does not match [\"md*\"]"),
        "{out}"
    );
    assert!(out.contains("rule \"nvme\": MATCH"), "{out}");
    assert!(out.contains("rule \"ssd\": not evaluated"), "{out}");
    let head = env.run(&["explain", p.to_str().unwrap(), "nvme4n1"]).stdout;
    assert!(
        head.contains("resolves to: nvme4c4n1 (knobs: queue"),
        "{head}"
    );
    let path = env
        .run(&["explain", p.to_str().unwrap(), "nvme4c4n1"])
        .stdout;
    assert!(
        path.contains("excluded (hidden NVMe multipath path of nvme4n1)"),
        "{path}"
    );
}

#[test]
fn parallel_applies_keep_one_consistent_state() {
    let env = Env::with(|root| {
        let mut f = Fixture::new(root, 2, Abi::Queue);
        for i in 0..16 {
            f.nvme(i, "M", &format!("S{i}"));
        }
        f
    });
    let p = env.profile("p.toml", NVME_AUTO);
    let children: Vec<_> = (0..16)
        .map(|i| {
            env.cmd()
                .args([
                    "apply",
                    p.to_str().unwrap(),
                    "--device",
                    &format!("nvme{i}n1"),
                    "--json",
                ])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let state = env.state_json();
    let saved = state["saved"].as_object().unwrap();
    assert_eq!(
        saved.len(),
        16,
        "one saved original per queue, none lost: {state}"
    );
    assert!(saved.values().all(|s| s["original"] == "-1"));
    for i in 0..16 {
        assert_eq!(
            env.get(&format!("block/nvme{i}n1/queue/cpu_lat_limit_us")),
            "4"
        );
    }
    assert_eq!(env.run(&["restore"]).code, 0);
    for i in 0..16 {
        assert_eq!(
            env.get(&format!("block/nvme{i}n1/queue/cpu_lat_limit_us")),
            "-1"
        );
    }
}

/// Switching the scheduler resets nr_requests (and bfq turns write-back
/// throttling off): a disk's scheduler is planned, and written, first.
#[test]
fn a_disks_scheduler_is_written_before_its_other_attributes() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"s\"\nmatch = { name = \"sda\" }\ncpu_lat_limit_us = 20\n[rule.queue]\nnr_requests = \"64\"\nscheduler = \"mq-deadline\"\n",
    );
    // the paths of sda's planned changes, in the plan's order
    let planned = |args: &[&str]| -> Vec<String> {
        let doc = env.run(args).json();
        (common::device(&doc, "sda")["changes"]
            .as_array()
            .unwrap()
            .iter())
        .map(|c| c["path"].as_str().unwrap().to_string())
        .collect()
    };
    let paths = planned(&["apply", p.to_str().unwrap(), "--dry-run", "--json"]);
    assert_eq!(paths[0], "block/sda/queue/scheduler", "{paths:?}");
    for attr in ["nr_requests", "cpu_lat_limit_us"] {
        let path = format!("block/sda/queue/{attr}");
        assert!(paths.contains(&path), "{paths:?}");
    }
    // and back: restore puts the scheduler back first too
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let paths = planned(&["restore", "--dry-run", "--json"]);
    assert_eq!(paths.len(), 3, "{paths:?}");
    assert_eq!(paths[0], "block/sda/queue/scheduler", "{paths:?}");
}

/// A scheduler the disk does not offer fails its write with EINVAL at
/// every apply: the plan, shared by the dry run and the apply, refuses it,
/// naming the disk and what it offers, and writes nothing.
#[test]
fn a_scheduler_the_disk_does_not_offer_is_refused_by_the_plan() {
    let env = Env::zoo(Abi::Queue);
    let before = env.snapshot();
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"s\"\nmatch = { name = \"sda\" }\ncpu_lat_limit_us = 20\n[rule.queue]\nscheduler = \"bogus\"\n",
    );
    let p = p.to_str().unwrap();
    for args in [vec!["apply", p, "--dry-run"], vec!["apply", p]] {
        let r = env.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        r.assert_stderr_has(
            "sda: rule \"s\" sets scheduler \"bogus\", which sda does not offer (it offers none, mq-deadline, kyber, bfq)",
        );
    }
    let doc = env.run(&["apply", p, "--dry-run", "--json"]).json();
    assert_eq!(doc["failure"]["kind"], "scheduler-not-offered", "{doc}");
    assert_eq!(env.snapshot(), before, "nothing written");
    assert!(!env.state.join("state.json").exists(), "nothing saved");
    // another disk's run is not held up by it
    let r = env.run(&["apply", p, "--device", "nvme0n1", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // one of the kernel's own schedulers, built as a module not loaded
    // yet, is loaded by the write: planned, with a warning
    std::fs::write(
        env.fx.root().join("block/sda/queue/scheduler"),
        "[mq-deadline] none\n",
    )
    .unwrap();
    let b = env.profile(
        "b.toml",
        "[[rule]]\nname = \"s\"\nmatch = { name = \"sda\" }\n[rule.queue]\nscheduler = \"bfq\"\n",
    );
    let doc = env
        .run(&["apply", b.to_str().unwrap(), "--dry-run", "--json"])
        .json();
    assert_eq!(
        common::change_paths(&doc),
        ["block/sda/queue/scheduler"],
        "{doc}"
    );
    assert!(doc["warnings"].to_string().contains("bfq-iosched"), "{doc}");
}

#[test]
fn a_queue_attribute_the_device_lacks_is_skipped_with_a_warning() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"z\"\nmatch = { name = \"zram*\" }\n[rule.queue]\nscheduler = \"mq-deadline\"\n",
    );
    let r = env.run(&["apply", p.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0);
    assert!(r.json()["warnings"].to_string().contains("does not have"));
    let s = env.profile("s.toml", "[[rule]]\nname = \"s\"\nmatch = { name = \"sda\" }\n[rule.queue]\nscheduler = \"mq-deadline\"\n");
    env.run(&["apply", s.to_str().unwrap()]);
    assert_eq!(env.get("block/sda/queue/scheduler"), "mq-deadline");
    let again = env.run(&["apply", s.to_str().unwrap(), "--json"]).json();
    assert_eq!(again["changed"], false);
    let state = std::fs::read_to_string(env.state.join("state.json")).unwrap();
    assert!(
        state.contains("\"original\": \"none\""),
        "the active scheduler is saved, not the list: {state}"
    );
    env.run(&["restore"]);
    assert_eq!(env.get("block/sda/queue/scheduler"), "none");
}

#[test]
fn quiet_prints_only_errors_and_json_verbose_shows_each_write() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    let r = env.run(&["-q", "apply", p, "--dry-run"]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));
    let r = env.run(&["-q", "apply", p, "--dry-run", "--json"]);
    assert_eq!(r.json()["changed"], true, "asked-for JSON is still printed");
    let r = env.run(&["-v", "apply", p]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("blkqos: debug: write block/nvme0n1/queue/cpu_lat_limit_us = 4 (was -1)\n");
    let bad = env.profile("bad.toml", "[[rule]]\nname = 1\n");
    let r = env.run(&["-q", "apply", bad.to_str().unwrap()]);
    assert_eq!((r.code, r.stdout.as_str()), (2, ""));
    assert!(r.stderr.starts_with("blkqos: error: "), "{}", r.stderr);
}

#[test]
fn restore_dry_run_shows_what_would_be_put_back_and_writes_nothing() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let state_before = std::fs::read(env.state.join("state.json")).unwrap();
    let tree_before = env.snapshot();
    let r = env.run(&["restore", "--dry-run", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(
        (doc["changed"].clone(), doc["dry_run"].clone()),
        (true.into(), true.into())
    );
    let dry = change_paths(&doc);
    assert_eq!(dry.len(), 6, "{dry:?}");
    assert_eq!(env.snapshot(), tree_before, "nothing written");
    assert_eq!(
        std::fs::read(env.state.join("state.json")).unwrap(),
        state_before
    );
    let real = env.run(&["restore", "--json"]).json();
    assert_eq!(
        change_paths(&real),
        dry,
        "the dry run named exactly what restore did"
    );
    let again = env.run(&["restore", "--dry-run", "--json"]).json();
    assert_eq!(again["changed"], false);
}

#[test]
fn a_disk_the_profile_no_longer_covers_goes_back_to_its_original() {
    let env = Env::zoo(Abi::Queue);
    let all = env.profile("all.toml", NVME_AUTO);
    let fewer = env.profile(
        "fewer.toml",
        r#"
[[rule]]
name = "nvme"
match = { name = ["nvme*", "!nvme1n1"] }
cpu_lat_limit_us = 0
"#,
    );
    assert_eq!(env.run(&["apply", all.to_str().unwrap()]).code, 0);
    assert_eq!(env.get("block/nvme1n1/queue/cpu_lat_limit_us"), "4");
    let r = env.run(&["verify", fewer.to_str().unwrap(), "--json"]);
    assert_eq!(
        r.code, 1,
        "a value left over from the old profile is a mismatch"
    );

    let dry = env.run(&["apply", fewer.to_str().unwrap(), "--dry-run", "--json"]);
    assert!(
        change_paths(&dry.json()).contains(&"block/nvme1n1/queue/cpu_lat_limit_us".to_string()),
        "{}",
        dry.stdout
    );
    let r = env.run(&["apply", fewer.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.get("block/nvme1n1/queue/cpu_lat_limit_us"), "-1");
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "0");
    let state = env.state_json();
    assert!(
        state["saved"]
            .get("block/nvme1n1/queue/cpu_lat_limit_us")
            .is_none(),
        "put back, so no longer saved: {state}"
    );
    assert!(state["rules"].get("nvme1n1").is_none(), "{state}");
    assert_eq!(env.run(&["verify", fewer.to_str().unwrap()]).code, 0);
    let again = env
        .run(&["apply", fewer.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(again["changed"], false);
    // restore still brings back the true originals of what remains
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "-1");
    assert!(env.state_json()["saved"].as_object().unwrap().is_empty());
}

/// People type the /dev path: `--device /dev/nvme0n1` and `explain PROFILE
/// /dev/nvme0n1` mean the kernel name.
#[test]
fn device_arguments_take_the_dev_path() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    let by_name = env.run(&["apply", p, "--dry-run", "--json", "--device", "nvme0n1"]);
    let by_path = env.run(&[
        "apply",
        p,
        "--dry-run",
        "--json",
        "--device",
        "/dev/nvme0n1",
    ]);
    assert_eq!(by_path.code, 0, "{}", by_path.stderr);
    assert_eq!(by_path.stdout, by_name.stdout);
    let ex = env.run(&["explain", p, "/dev/nvme0n1"]);
    assert_eq!(ex.code, 0, "{}", ex.stderr);
    assert!(ex.stdout.starts_with("device nvme0n1 "), "{}", ex.stdout);
    let r = env.run(&["restore", "--dry-run", "--device", "/dev/nvme0n1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bad = env.run(&["apply", p, "--dry-run", "--device", "/etc/passwd"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    bad.assert_stderr_has("not a block device");
}

/// Without root, apply says so instead of failing on the state directory.
#[test]
fn apply_without_root_says_root_is_needed() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let open = |path: &std::path::Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    open(&env.work, 0o755);
    open(&p, 0o644);
    // like /run/blkqos: root's, closed to others
    std::fs::create_dir_all(&env.state).unwrap();
    open(env.state.parent().unwrap(), 0o755);
    open(&env.state, 0o700);
    let before = env.snapshot();
    let root = rustix::process::geteuid().is_root();
    let mut cmd = if root {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        c.arg(env!("CARGO_BIN_EXE_blkqos"));
        c
    } else {
        open(&env.state, 0o500);
        std::process::Command::new(env!("CARGO_BIN_EXE_blkqos"))
    };
    let out = cmd
        .arg("--sysfs")
        .arg(env.fx.root())
        .arg("--state-dir")
        .arg(&env.state)
        .args(["apply", p.to_str().unwrap()])
        .env("BLKQOS_LOG", "stderr")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("needs root"), "{stderr}");
    assert!(stderr.contains("--dry-run"), "{stderr}");
    assert_eq!(env.snapshot(), before, "nothing written");
}

#[test]
fn restore_of_a_stacked_device_keeps_what_a_members_own_rule_wants() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"raid\"\nmatch = { name = \"md*\" }\ncpu_lat_limit_us = 2\n\n[[rule]]\nname = \"nvme\"\nmatch = { transport = \"nvme\" }\ncpu_lat_limit_us = \"auto\"\n",
    );
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let member = "block/nvme2n1/queue/cpu_lat_limit_us";
    assert_eq!(env.get(member), "2", "md0's request is the strictest");
    let r = env.run(&["restore", "--device", "md0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for m in ["nvme2n1", "nvme3n1"] {
        let path = format!("block/{m}/queue/cpu_lat_limit_us");
        assert_ne!(
            env.get(&path),
            "-1",
            "{m}: its own rule still wants a limit"
        );
        r.assert_stderr_has(&format!("{path}: still wanted by {m}"));
    }
    let state = env.state_json();
    let saved = &state["saved"][member];
    assert_eq!(saved["original"], "-1", "the original stays saved: {state}");
    let owners = saved["owners"].as_array().unwrap();
    assert!(!owners.contains(&"md0".into()), "md0 let go: {state}");
    assert!(owners.contains(&"nvme2n1".into()), "{state}");
    assert_eq!(state["rules"]["nvme2n1"], "nvme", "{state}");
    assert!(state["rules"].get("md0").is_none(), "{state}");
    // restoring everything still finds the original
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(env.get(member), "-1");
}

#[test]
fn restore_of_a_device_neither_present_nor_saved_is_an_error() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let state = std::fs::read(env.state.join("state.json")).unwrap();
    for args in [
        vec!["restore", "--device", "bogus"],
        vec!["restore", "--device", "bogus", "--dry-run"],
        vec!["restore", "--device", "nvme0n1", "--device", "bogus"],
    ] {
        let r = env.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        r.assert_stderr_has("no block device named \"bogus\"");
        r.assert_stderr_has("nothing saved for it");
        assert_eq!(std::fs::read(env.state.join("state.json")).unwrap(), state);
    }
    assert_eq!(env.get("block/nvme0n1/queue/cpu_lat_limit_us"), "4");
    // gone, but with saved originals: restore forgets them
    env.fx.remove_disk("nvme1n1");
    let r = env.run(&["restore", "--device", "nvme1n1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}
