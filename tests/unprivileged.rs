//! Read-only commands run by a user who cannot read root's saved state
//! (issue 14, bug 3): they work, and say what they could not read.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO, is_root};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;

const NOBODY: u32 = 65534;

/// As root: the zoo with its profile applied, the work directory open to
/// others (the user may read the tree and the profile, not root's state,
/// 0700); None when not root.
fn tuned_zoo() -> Option<(Env, String)> {
    if !is_root("no other user to drop to") {
        return None;
    }
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap().to_string();
    assert_eq!(env.run(&["apply", &p]).code, 0);
    fs::set_permissions(&env.work, fs::Permissions::from_mode(0o755)).unwrap();
    Some((env, p))
}

#[test]
fn read_only_commands_work_unprivileged_and_name_what_they_could_not_read() {
    let Some((env, p)) = tuned_zoo() else {
        return;
    };
    let p = p.as_str();
    let state_file = env.state.join("state.json");
    let as_nobody = |args: &[&str]| {
        let mut c = env.cmd();
        c.uid(NOBODY).gid(NOBODY).args(args);
        let out = c.output().unwrap();
        common::Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    let unreadable_in = |r: &common::Run, what: &str| {
        let doc = r.json();
        let list = doc["unreadable"]
            .as_array()
            .unwrap_or_else(|| panic!("{what}: no \"unreadable\" field: {}", r.stdout));
        assert!(
            list.iter()
                .any(|u| u["path"] == state_file.to_str().unwrap()
                    && u["error"].as_str().is_some_and(|e| !e.is_empty())),
            "{what}: state file not listed as unreadable: {}",
            r.stdout
        );
        assert!(
            r.stderr.contains("state.json"),
            "{what}: stderr does not say what it could not read:\n{}",
            r.stderr
        );
    };

    let r = as_nobody(&["status", "--json"]);
    assert_eq!(r.code, 0, "status --json: {}", r.stderr);
    unreadable_in(&r, "status --json");
    let r = as_nobody(&["status"]);
    assert_eq!(r.code, 0, "status: {}", r.stderr);
    r.assert_stderr_has("state.json");
    assert!(r.stdout.contains("nvme0n1"), "{}", r.stdout);
    // a CPU value the user cannot tell from a running lease's is not
    // called someone else's (issue 39 item 14)
    env.fx.put(
        "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us",
        "10",
    );
    let r = as_nobody(&["status"]);
    r.assert_stderr_has("was set outside blkqos or by a running blkqos lease");
    env.fx.put(
        "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us",
        "0",
    );

    let r = as_nobody(&["verify", p, "--json"]);
    assert_eq!(r.code, 0, "verify: live values match: {}", r.stderr);
    unreadable_in(&r, "verify --json");

    let r = as_nobody(&["apply", p, "--dry-run", "--json"]);
    assert_eq!(r.code, 0, "apply --dry-run: {}", r.stderr);
    unreadable_in(&r, "apply --dry-run --json");

    let r = as_nobody(&["explain", p, "nvme0n1"]);
    assert_eq!(r.code, 0, "explain: {}", r.stderr);
    r.assert_stderr_has("state.json");

    for args in [&["list", "--json"][..], &["check", p]] {
        let r = as_nobody(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    }
    // and nothing of root's was changed or created by the user's runs
    let owner = |path: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(path).unwrap().uid()
    };
    assert_eq!(owner(&state_file), 0);
}

#[test]
fn the_needs_root_hint_names_a_dry_run_each_command_has() {
    let Some((env, p)) = tuned_zoo() else {
        return;
    };
    let p = p.as_str();
    let devpath = format!("/{}", env.fx.dir_of("nvme0n1"));
    for (args, hint) in [
        (vec!["apply", p], "; --dry-run shows the plan without it"),
        (vec!["restore"], "; --dry-run shows the plan without it"),
        (
            vec!["coldplug", p],
            "; `blkqos apply PROFILE --dry-run` shows the plan without it",
        ),
        (
            vec!["udev", "--action", "add", "--devpath", &devpath, p],
            "; `blkqos apply PROFILE --device NAME --dry-run` shows the plan without it",
        ),
    ] {
        let mut c = env.cmd();
        c.uid(NOBODY).gid(NOBODY).args(&args);
        let r = common::Run::from(c.output().unwrap());
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        r.assert_stderr_has(&format!("{} needs root", args[0]));
        r.assert_stderr_has(hint);
    }
}
