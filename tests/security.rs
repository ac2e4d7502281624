//! blkqos runs as root from udev, at boot and from Ansible: what it refuses.
//! The ownership and mode checks only apply to root; those tests say so and
//! return when run as another user.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO};
use std::fs;
use std::os::unix::fs::{PermissionsExt, chown, symlink};
use std::path::Path;

const LIMIT: &str = "block/nvme0n1/queue/cpu_lat_limit_us";

fn is_root() -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("not root: the root-only checks are not exercised");
    }
    root
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn as_root_a_profile_others_could_change_is_refused_by_apply_check_and_dry_run() {
    if !is_root() {
        return;
    }
    let env = Env::zoo(Abi::Queue);
    let dir = env.work.join("profiles");
    fs::create_dir(&dir).unwrap();
    let p = dir.join("p.toml");
    fs::write(&p, NVME_AUTO).unwrap();
    let before = env.snapshot();
    // check and a dry run say what apply would: the role validates with check
    let apply = |what: &str| {
        let p = p.to_str().unwrap();
        let mut errors = Vec::new();
        for args in [
            vec!["apply", p],
            vec!["apply", p, "--dry-run"],
            vec!["check", p],
        ] {
            let r = env.run(&args);
            assert_eq!(r.code, 2, "{what}, {args:?}: {}", r.stderr);
            assert!(
                r.stderr.contains("refusing a profile"),
                "{what}, {args:?}: {}",
                r.stderr
            );
            assert_eq!(env.snapshot(), before, "{what}: nothing written");
            errors.push(r.stderr);
        }
        assert!(
            errors.iter().all(|e| *e == errors[0]),
            "{what}: the same error: {errors:#?}"
        );
        errors.swap_remove(0)
    };

    chmod(&p, 0o666);
    assert!(apply("file 0666").contains("writable by group or others (mode 666)"));
    chmod(&p, 0o644);
    chmod(&dir, 0o777);
    assert!(apply("directory 0777").contains("which group or others can write to"));
    chmod(&dir, 0o755);
    chown(&p, Some(65534), None).unwrap();
    assert!(apply("owned by nobody").contains("owned by uid 65534"));
    // a temporary copy validated before it is installed (Ansible's
    // validate, as the login user's file) is judged on its contents only
    let r = env.run(&["check", "--no-owner-check", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "check --no-owner-check: {}", r.stderr);
    // verify reports on the machine, whoever could edit the profile
    let r = env.run(&["verify", p.to_str().unwrap()]);
    assert_eq!(r.code, 1, "verify reads it (and finds the mismatch)");
    chown(&p, Some(0), None).unwrap();

    // root's file in a sticky directory (like /tmp) cannot be replaced
    chmod(&dir, 0o1777);
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.get(LIMIT), "4");
}

#[test]
fn a_link_that_leaves_the_sysfs_root_is_never_written_through() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let outside = env.work.join("outside");
    fs::write(&outside, "-1\n").unwrap();
    let attr = env.fx.root().join(LIMIT);
    fs::remove_file(&attr).unwrap();
    symlink(&outside, &attr).unwrap();
    let r = env.run(&["apply", p.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has("outside the sysfs root");
    assert_eq!(fs::read_to_string(&outside).unwrap(), "-1\n", "untouched");
    // refused when it was read: that attribute is left alone, the other
    // disks tuned, the run partial (exit 1)
    assert_eq!(env.get("block/nvme1n1/queue/cpu_lat_limit_us"), "4");
}

#[test]
fn device_names_that_could_leave_the_tree_are_refused() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let before = env.snapshot();
    for bad in ["../../etc", "nvme0n1/..", "a b", "", "x;reboot"] {
        let r = env.run(&["apply", p.to_str().unwrap(), "--device", bad]);
        assert_eq!(r.code, 2, "{bad:?}: {}", r.stderr);
        r.assert_stderr_has("not a block device name");
        let r = env.run(&["restore", "--device", bad]);
        assert_eq!(r.code, 2, "{bad:?}: {}", r.stderr);
    }
    assert_eq!(env.snapshot(), before);
}

#[test]
fn the_state_is_private_to_root() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&env.state), 0o700);
    assert_eq!(mode(&env.state.join("state.json")), 0o600);
    assert_eq!(mode(&env.state.join("lock")), 0o600);
}

#[test]
fn no_shell_is_ever_started() {
    // The command starts no process but itself: `probe` runs `blkqos
    // lease` as its child, through /proc/self/exe (the running binary's
    // inode) with fixed arguments. Nothing else spawns one.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let hold = fs::read_to_string(src.join("probe/hold.rs")).unwrap();
    assert_eq!(hold.matches("Command::new(").count(), 1);
    assert!(hold.contains("Command::new(SELF)"));
    assert!(hold.contains("pub const SELF: &str = \"/proc/self/exe\";"));
    let mut stack = vec![src];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = fs::read_to_string(&path).unwrap();
                if path.ends_with("probe/hold.rs") {
                    for needle in ["libc::system", "execv", "\"sh\"", "/bin/"] {
                        assert!(!text.contains(needle), "{} uses {needle}", path.display());
                    }
                    continue;
                }
                for needle in ["process::Command", "Command::new", "libc::system", "execv"] {
                    assert!(!text.contains(needle), "{} uses {needle}", path.display());
                }
            }
        }
    }
}
