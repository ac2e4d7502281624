//! The state directory and what is in it are not taken on trust (issue 14,
//! bug 7): a directory others control is refused, no file is created
//! through a planted link, and a forged `state.json` cannot make `restore`
//! write anything blkqos does not manage.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO, is_root};
use rustix::process::{Resource, Rlimit, setrlimit};
use std::fs;
use std::os::unix::fs::{PermissionsExt, chown, symlink};

const LIMIT: &str = "block/nvme0n1/queue/cpu_lat_limit_us";

fn chmod(p: &std::path::Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_state_directory_others_can_write_to_or_own_is_refused() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    fs::create_dir_all(&env.state).unwrap();
    let before = env.snapshot();
    let refused = |what: &str, needle: &str| {
        for args in [&["apply", p][..], &["restore"]] {
            let r = env.run(args);
            assert_eq!(r.code, 1, "{what}, {args:?}: {}", r.stderr);
            r.assert_stderr_has("refusing the state directory");
            r.assert_stderr_has(needle);
        }
        assert_eq!(env.snapshot(), before, "{what}: nothing written");
        assert!(!env.state.join("state.json").exists(), "{what}");
    };
    chmod(&env.state, 0o777);
    refused("mode 0777", "writable by group or others (mode 777)");
    chmod(&env.state, 0o1777);
    refused("mode 1777", "writable by group or others (mode 1777)");
    chmod(&env.state, 0o700);
    // an ancestor others can write to lets them replace the directory
    let parent = env.state.parent().unwrap();
    chmod(parent, 0o777);
    refused("parent 0777", "which group or others can write to");
    chmod(parent, 0o700);
    if is_root("a directory owned by someone else cannot be made") {
        chown(&env.state, Some(65534), None).unwrap();
        refused("owned by nobody", "owned by uid 65534");
        chown(&env.state, Some(0), None).unwrap();
    }
    let r = env.run(&["apply", p]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.get(LIMIT), "4");
}

/// A state directory that is a file: the dry runs said "not a directory",
/// the real runs "File exists (os error 17)". Each says what is wrong
/// with it, and the file is left as it was.
#[test]
fn a_state_directory_that_is_a_file_is_refused_as_not_a_directory() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    fs::create_dir_all(env.state.parent().unwrap()).unwrap();
    fs::write(&env.state, "not a directory\n").unwrap();
    let before = env.snapshot();
    for args in [
        &["restore"][..],
        &["restore", "--dry-run"],
        &["apply", p],
        &["apply", p, "--dry-run"],
    ] {
        let r = env.run(args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        r.assert_stderr_has("refusing the state directory: it is not a directory");
        assert!(!r.stderr.contains("os error"), "{args:?}: {}", r.stderr);
    }
    assert_eq!(env.snapshot(), before, "nothing written");
    assert_eq!(fs::read_to_string(&env.state).unwrap(), "not a directory\n");
}

/// The attack's finding: a state directory that is a link (planted in /tmp
/// by another user, where protected_symlinks is off) was followed, and root
/// wrote its lock and state where it led, deleting `.state.json.*` there;
/// `--state-dir /` was taken too.
#[test]
fn a_state_directory_that_is_a_link_or_the_root_is_refused() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    let victim = env.work.join("victimdir");
    fs::create_dir(&victim).unwrap();
    chmod(&victim, 0o700);
    fs::write(victim.join(".state.json.1"), "precious\n").unwrap();
    let link = env.work.join("statelink");
    symlink(&victim, &link).unwrap();
    let before = env.snapshot();
    let slash = format!("{}/", link.display());
    for dir in [link.to_str().unwrap(), slash.as_str(), "/"] {
        for args in [&["apply", p][..], &["restore"]] {
            let r = std::process::Command::new(env!("CARGO_BIN_EXE_blkqos"))
                .arg("--sysfs")
                .arg(env.fx.root())
                .args(["--state-dir", dir])
                .env("BLKQOS_LOG", "stderr")
                .args(args)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(1), "{dir} {args:?}: {stderr}");
            assert!(stderr.contains("refusing the state directory"), "{stderr}");
        }
    }
    assert_eq!(env.snapshot(), before, "nothing written");
    let names: Vec<_> = fs::read_dir(&victim)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        [".state.json.1"],
        "nothing made or removed through the link"
    );
    assert!(
        !std::path::Path::new("/lock").exists() && !std::path::Path::new("/state.json").exists()
    );
}

#[test]
fn links_planted_in_the_state_directory_are_not_followed() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    let victim = env.work.join("victim");
    fs::write(&victim, "precious\n").unwrap();
    fs::create_dir_all(&env.state).unwrap();
    chmod(&env.state, 0o700);

    // the lock file
    symlink(&victim, env.state.join("lock")).unwrap();
    let r = env.run(&["apply", p]);
    assert_eq!(r.code, 1, "a linked lock file: {}", r.stderr);
    r.assert_stderr_has("lock");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(env.get(LIMIT), "-1", "nothing written");
    fs::remove_file(env.state.join("lock")).unwrap();

    // the temporary state file: its name used to be predictable (the pid)
    let mut probe = env.cmd();
    let mut probe = probe
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let from = probe.id() + 1;
    assert!(probe.wait().unwrap().success());
    for pid in from..from + 400 {
        symlink(&victim, env.state.join(format!(".state.json.{pid}"))).unwrap();
    }
    let r = env.run(&["apply", p]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(env.get(LIMIT), "4");
    assert!(
        fs::symlink_metadata(env.state.join("state.json"))
            .unwrap()
            .file_type()
            .is_file(),
        "state.json is a file of its own"
    );

    // the state file itself is not read through a link
    fs::remove_file(env.state.join("state.json")).unwrap();
    symlink(&victim, env.state.join("state.json")).unwrap();
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has("state.json");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
}

/// A state file naming `path` with `original`, as a forger would write it.
fn forged(path: &str, original: &str) -> String {
    serde_json::json!({
        "schema": 1,
        "saved": { path: { "original": original, "owners": ["nvme0n1"] } },
        "rules": { "nvme0n1": "nvme" }
    })
    .to_string()
}

#[test]
fn a_forged_state_file_cannot_make_restore_write_what_blkqos_does_not_manage() {
    let env = Env::zoo(Abi::Queue);
    fs::create_dir_all(env.fx.root().join("power")).unwrap();
    fs::write(env.fx.root().join("power/state"), "freeze mem disk\n").unwrap();
    fs::create_dir_all(&env.state).unwrap();
    chmod(&env.state, 0o700);
    let before = env.snapshot();
    let resume = "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us";
    for (path, original, why) in [
        ("power/state", "mem", "not an attribute blkqos manages"),
        (
            "block/../power/state",
            "mem",
            "not an attribute blkqos manages",
        ),
        (
            "block/nvme0n1/queue/../../../power/state",
            "mem",
            "not an attribute blkqos manages",
        ),
        (
            "devices/system/cpu/cpu0/power/control",
            "on",
            "not an attribute",
        ),
        (LIMIT, "100001", "expected"),
        (LIMIT, "fast", "expected"),
        ("block/nvme0n1/queue/cpu_lat_timeout_ms", "-1", "expected"),
        (resume, "-5", "expected"),
        (
            "block/nvme0n1/queue/scheduler",
            "none\nmq-deadline",
            "expected",
        ),
    ] {
        for args in [&["restore"][..], &["restore", "--dry-run"]] {
            // the run that writes drops what it left out: forged again
            fs::write(env.state.join("state.json"), forged(path, original)).unwrap();
            let r = env.run(args);
            assert_eq!(r.code, 1, "{path} = {original:?}, {args:?}: {}", r.stderr);
            r.assert_stderr_has("state.json");
            r.assert_stderr_has(why);
        }
        assert_eq!(
            env.snapshot(),
            before,
            "{path} = {original:?}: nothing written"
        );
    }
    // what blkqos does write is accepted and put back
    for (path, original) in [
        (LIMIT, "auto"),
        (LIMIT, "-1"),
        ("block/nvme0n1/queue/cpu_lat_timeout_ms", "60000"),
        // no timeout blkqos writes, but one a kernel may report
        ("block/nvme0n1/queue/cpu_lat_timeout_ms", "0"),
        (resume, "n/a"),
        (resume, "0"),
        ("block/nvme0n1/queue/read_ahead_kb", "256"),
    ] {
        fs::write(env.state.join("state.json"), forged(path, original)).unwrap();
        let r = env.run(&["restore"]);
        assert_eq!(r.code, 0, "{path} = {original:?}: {}", r.stderr);
        assert_eq!(env.get(path), original);
    }
}

/// The attack's finding: apply saved a live value its own reader then
/// called corrupt (a timeout the kernel reported as 0), after which every
/// command refused the whole state. What the kernel reports round-trips;
/// an entry that cannot be trusted costs that entry, never the others.
#[test]
fn what_apply_saves_reads_back_and_a_bad_entry_costs_only_itself() {
    let env = Env::zoo(Abi::Queue);
    let timeout = "block/nvme0n1/queue/cpu_lat_timeout_ms";
    env.fx.put(timeout, "0");
    let p = env.profile(
        "p.toml",
        "[[rule]]\nname = \"nvme\"\nmatch = { transport = \"nvme\" }\ncpu_lat_limit_us = 10\ncpu_lat_timeout_ms = 5\n",
    );
    let p = p.to_str().unwrap();
    let r = env.run(&["apply", p]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.get(timeout), "5");
    for args in [&["status"][..], &["verify", p], &["explain", p, "nvme0n1"]] {
        let r = env.run(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    }
    // one entry a forger added beside what apply saved
    let path = env.state.join("state.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    doc["saved"]["power/state"] = serde_json::json!({ "original": "mem", "owners": ["nvme0n1"] });
    fs::write(&path, doc.to_string()).unwrap();
    let r = env.run(&["status"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("power/state");
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 1, "one entry left out: {}", r.stderr);
    r.assert_stderr_has("power/state");
    assert_eq!(env.get(timeout), "0", "the others put back");
    assert_eq!(env.get(LIMIT), "-1");
}

/// The child's data segment limited to 64 MiB (RLIMIT_DATA) before it
/// runs. Unsafe code allowed here (tests/source_layout.rs lists it):
/// `CommandExt::pre_exec` is itself unsafe.
#[allow(unsafe_code)]
fn limit_data_to_64_mib(c: &mut std::process::Command) {
    // SAFETY: pre_exec is unsafe to call; the closure makes one system
    // call (rustix's setrlimit is prlimit64(2), async-signal-safe),
    // allocates nothing and touches no memory of the parent's.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(c, || {
            let data = Rlimit {
                current: Some(64 << 20),
                maximum: Some(64 << 20),
            };
            setrlimit(Resource::Data, data).map_err(std::io::Error::from)
        });
    }
}

#[test]
fn an_oversized_state_file_is_refused_without_reading_it() {
    let env = Env::zoo(Abi::Queue);
    fs::create_dir_all(&env.state).unwrap();
    chmod(&env.state, 0o700);
    let f = fs::File::create(env.state.join("state.json")).unwrap();
    // sparse: costs nothing to make, 200 MB to read
    f.set_len(200 << 20).unwrap();
    for args in [&["restore"][..], &["status"]] {
        let mut c = env.cmd();
        c.args(args);
        // Not a time but what a run that read the file would need: its
        // 200 MB. With its data limited to 64 MiB such a run fails to, and
        // says so. (Not the child's ru_maxrss from wait4: after
        // posix_spawn that counts this process's own peak too.)
        limit_data_to_64_mib(&mut c);
        let r = common::Run::from(c.output().unwrap());
        // the size as stat(2) gave it, refused before a read: a bounded
        // read would say 16777217 bytes
        r.assert_stderr_has("209715200 bytes, larger than 16 MiB");
        if args == ["restore"] {
            assert_eq!(r.code, 1, "{}", r.stderr);
        }
    }
}

#[test]
fn a_state_file_that_cannot_be_trusted_makes_verify_say_it_could_not_check() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    // a profile that covers nothing: what blkqos set should go back
    let none = env.profile(
        "none.toml",
        "[[rule]]\nname = \"x\"\nmatch = { name = \"zz*\" }\ncpu_lat_limit_us = 5\n",
    );
    let none = none.to_str().unwrap();
    let r = env.run(&["verify", none]);
    assert_eq!(
        r.code, 1,
        "the mismatch, with the state readable: {}",
        r.stderr
    );
    for (text, why) in [
        ("{ not json".to_string(), "corrupt state file"),
        (
            forged("power/state", "mem"),
            "not an attribute blkqos manages",
        ),
    ] {
        fs::write(env.state.join("state.json"), &text).unwrap();
        for args in [vec!["verify", none], vec!["verify", none, "--json"]] {
            let r = env.run(&args);
            assert_eq!(r.code, 2, "{why}, {args:?}: {}{}", r.stdout, r.stderr);
            r.assert_stderr_has("state.json");
            r.assert_stderr_has(why);
            assert!(!r.stdout.contains("ok:"), "{args:?}: {}", r.stdout);
        }
        let doc = env.run(&["verify", none, "--json"]).json();
        assert_eq!(doc["failure"]["kind"], "state", "{doc}");
    }
}

#[test]
fn a_state_directory_is_not_created_below_one_others_can_write_to() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let open = env.work.join("open");
    fs::create_dir(&open).unwrap();
    chmod(&open, 0o777);
    let state = open.join("run/blkqos");
    let before = env.snapshot();
    for args in [vec!["apply", p.to_str().unwrap()], vec!["restore"]] {
        let r = common::Run::from(
            std::process::Command::new(env!("CARGO_BIN_EXE_blkqos"))
                .arg("--sysfs")
                .arg(env.fx.root())
                .arg("--state-dir")
                .arg(&state)
                .env("BLKQOS_LOG", "stderr")
                .args(&args)
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        r.assert_stderr_has("refusing the state directory");
        r.assert_stderr_has("which group or others can write to");
        assert!(
            !open.join("run").exists(),
            "{args:?}: created before judging"
        );
        assert_eq!(env.snapshot(), before, "{args:?}");
    }
}
