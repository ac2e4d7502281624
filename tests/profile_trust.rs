//! As root, the profile that is checked is the profile that is read, and
//! every directory above it is checked (issue 14, bug 5).

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO, is_root};
use std::fs;
use std::os::unix::fs::{PermissionsExt, chown, symlink};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const LIMIT: &str = "block/nvme0n1/queue/cpu_lat_limit_us";

fn chmod(p: &std::path::Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn as_root_every_directory_above_the_profile_is_checked() {
    if !is_root("the profile checks only apply to root") {
        return;
    }
    let env = Env::zoo(Abi::Queue);
    let a = env.work.join("a");
    let b = a.join("b");
    fs::create_dir_all(&b).unwrap();
    chmod(&a, 0o755);
    chmod(&b, 0o755);
    let p = b.join("p.toml");
    fs::write(&p, NVME_AUTO).unwrap();
    let p = p.to_str().unwrap();
    let before = env.snapshot();
    let refused = |what: &str, needle: &str| {
        let r = env.run(&["apply", p]);
        assert_eq!(r.code, 2, "{what}: {}", r.stderr);
        r.assert_stderr_has("refusing a profile");
        r.assert_stderr_has(needle);
        assert_eq!(env.snapshot(), before, "{what}: nothing written");
    };
    // whoever can write to a/ can rename b/ and put their own b/p.toml there
    chmod(&a, 0o777);
    refused(
        "a/ mode 0777",
        &format!("in {}, which group or others can write to", a.display()),
    );
    chmod(&a, 0o755);
    chown(&a, Some(65534), None).unwrap();
    refused(
        "a/ owned by nobody",
        &format!("in {}, owned by uid 65534", a.display()),
    );
    chown(&a, Some(0), None).unwrap();
    // root's own directory with the sticky bit, like /tmp, is fine
    chmod(&a, 0o1777);
    let r = env.run(&["apply", p]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.get(LIMIT), "4");
}

#[test]
fn as_root_the_profile_checked_is_the_profile_read() {
    if !is_root("the profile checks only apply to root") {
        return;
    }
    let env = Env::zoo(Abi::Queue);
    // a trusted profile and one anybody could have written, same name
    let trusted = env.work.join("trusted");
    let evil = env.work.join("evil");
    for d in [&trusted, &evil] {
        fs::create_dir(d).unwrap();
        chmod(d, 0o755);
    }
    fs::write(trusted.join("p.toml"), NVME_AUTO).unwrap();
    fs::write(
        evil.join("p.toml"),
        NVME_AUTO.replace("cpu_lat_limit_us = \"auto\"", "cpu_lat_limit_us = 0"),
    )
    .unwrap();
    chown(evil.join("p.toml"), Some(65534), None).unwrap();
    // `flip` points at one and then the other, all the time
    let flip = env.work.join("flip");
    symlink(&trusted, &flip).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let tmp = env.work.join("flip.new");
            let mut at_evil = false;
            while !stop.load(Ordering::Relaxed) {
                at_evil = !at_evil;
                let _ = fs::remove_file(&tmp);
                symlink(if at_evil { &evil } else { &trusted }, &tmp).unwrap();
                fs::rename(&tmp, &flip).unwrap();
            }
        });
        let p = flip.join("p.toml");
        let started = Instant::now();
        let (mut applied, mut refused, mut runs) = (0, 0, 0);
        while started.elapsed() < Duration::from_secs(20) && runs < 400 {
            runs += 1;
            let r = env.run(&["apply", p.to_str().unwrap()]);
            match r.code {
                0 => applied += 1,
                2 => refused += 1,
                _ => {}
            }
            let limit = env.get(LIMIT);
            if limit == "0" {
                stop.store(true, Ordering::Relaxed);
                panic!(
                    "run {runs}: the untrusted profile was applied\n{}",
                    r.stderr
                );
            }
            if limit != "-1" {
                assert_eq!(env.run(&["restore"]).code, 0);
            }
        }
        stop.store(true, Ordering::Relaxed);
        eprintln!("{runs} runs: {applied} applied the trusted profile, {refused} refused");
    });
}
