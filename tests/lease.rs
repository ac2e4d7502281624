//! `blkqos lease` on a fake tree of a kernel without the queue knobs: the
//! real binary, driven through the disks' `stat` files and signals, its
//! effect read back from the CPUs' resume latencies.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::Env;
use common::fixture::Fixture;
use rustix::fs::{FlockOperation, flock};
use rustix::process::{Pid, Signal, kill_process};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PROFILE: &str = r#"
[[rule]]
name = "nvme"
match = { transport = "nvme" }
cpu_lat_limit_us = 10
cpu_lat_timeout_ms = 300
"#;

fn resume(cpu: u32) -> String {
    format!("devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")
}

fn env() -> (Env, String) {
    let mut disk = String::new();
    let env = Env::with(|root| {
        let mut fx = Fixture::new(root, 3, Abi::None);
        fx.nvme(0, "Fake NVMe", "S0");
        disk = fx.nvme_ns(0, 1);
        fx
    });
    env.fx.set_stat(&disk, 0, 0);
    (env, disk)
}

/// The CPUs' values, in order.
fn values(env: &Env) -> Vec<String> {
    (0..3).map(|c| env.get(&resume(c))).collect()
}

/// Wait (at most 10 s) until `ok` holds; false if it never did.
fn until(mut ok: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    ok()
}

/// `blkqos lease` on `profile` through `cmd`, seeing I/O in `stat`.
fn spawn(mut cmd: Command, profile: &std::path::Path) -> Child {
    // every first I/O holds (the kernel's rule): the tests drive one I/O
    // at a time; the trickle rule has its own test
    cmd.args([
        "lease",
        "--detect",
        "stat",
        "--idle-look",
        "0.1",
        "--min-ios",
        "1",
    ])
    .arg(profile)
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

/// Wait until a run saved the originals of `n` CPUs: it is running.
fn wait_saved(env: &Env, n: usize) {
    assert!(
        until(|| env.state.join("state.json").exists()
            && env.state_json()["leases"]
                .as_object()
                .is_some_and(|l| l.len() == n)),
        "no originals of {n} CPUs saved"
    );
}

fn start(env: &Env, profile: &std::path::Path) -> Child {
    let child = spawn(env.cmd(), profile);
    wait_saved(env, 3);
    child
}

/// `start`, then I/O on `disk` until every CPU is held at the profile's 10 us
fn start_held(env: &Env, disk: &str, profile: &std::path::Path) -> Child {
    let child = start(env, profile);
    env.fx.set_stat(disk, 1, 0);
    assert!(
        until(|| values(env) == ["10", "10", "10"]),
        "{:?}",
        values(env)
    );
    child
}

/// kill(2) on the child's pid, which has not been waited for.
fn signal(child: &Child, sig: Signal) {
    kill_process(Pid::from_child(child), sig).unwrap();
}

/// Stops the child; its standard error, unless `stderr_lines` took it.
fn stop(mut child: Child, sig: Signal) -> (i32, String) {
    signal(&child, sig);
    let status = child.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (status.code().unwrap_or(-1), err)
}

/// The child's standard error, a line at a time as it is written (until
/// it exits).
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let e = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in e.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Wait (as `until`) for a line containing `want`; every line read is
/// added to `seen`.
fn until_line(lines: &mpsc::Receiver<String>, seen: &mut String, want: &str) -> bool {
    until(|| {
        lines.try_iter().any(|line| {
            seen.push_str(&line);
            seen.push('\n');
            line.contains(want)
        })
    })
}

#[test]
fn io_holds_the_cpus_at_the_limit_until_the_timeout_after_the_last_io() {
    let (env, disk) = env();
    // an admin's stricter value on cpu1
    env.fx.put(&resume(1), "5");
    let p = env.profile("p.toml", PROFILE);
    let child = start(&env, &p);
    assert_eq!(values(&env), ["0", "5", "0"], "nothing held before I/O");
    env.fx.set_stat(&disk, 1, 0);
    assert!(
        until(|| values(&env) == ["10", "5", "10"]),
        "{:?}",
        values(&env)
    );
    // I/O that goes on keeps the lease (each look sees more)
    for n in 2..8 {
        env.fx.set_stat(&disk, n, 0);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(values(&env), ["10", "5", "10"], "renewed by I/O {n}");
    }
    assert!(
        until(|| values(&env) == ["0", "5", "0"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("CPUs 0-2 held at 10 us"), "{err}");
    // what it found and what it put back are said, and the clean stop
    assert!(
        err.contains("CPUs 1 have pm_qos_resume_latency_us = 5 (someone else's"),
        "{err}"
    );
    assert!(err.contains("lapse: put back cpu0=0 cpu2=0\n"), "{err}");
    assert!(
        err.contains("stopped: every CPU it held is put back"),
        "{err}"
    );
    assert!(env.state_json().get("leases").is_none(), "leases dropped");
}

#[test]
fn someone_elses_change_while_held_is_reported_and_kept_after_the_lapse() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let child = start_held(&env, &disk, &p);
    env.fx.put(&resume(2), "50");
    env.fx.set_stat(&disk, 2, 0);
    // the lease holds on (the stricter 10), then lets 50 stand
    assert!(
        until(|| values(&env) == ["0", "0", "50"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("cpu2: pm_qos_resume_latency_us was changed to \"50\" by someone else"),
        "{err}"
    );
}

#[test]
fn sighup_with_a_bad_profile_keeps_the_old_one_and_a_good_one_is_taken() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let mut child = start(&env, &p);
    let err_lines = stderr_lines(&mut child);
    let mut err = String::new();
    std::fs::write(&p, "[[rule]]\nname = 1\n").unwrap();
    signal(&child, Signal::HUP);
    // the refusal is read before the next profile is written: a reload
    // still pending then read the good profile, or an empty file in the
    // middle of its write ("p.toml:1:1: no [[rule]]", seen in a cold CI
    // run on a loaded host), and this test failed
    let refused = until_line(&err_lines, &mut err, "keeping the profile read before");
    env.fx.set_stat(&disk, 1, 0);
    if !refused || !until(|| values(&env) == ["10", "10", "10"]) {
        let (code, rest) = stop(child, Signal::KILL);
        panic!(
            "the old profile no longer leases: {:?} exit {code}: {err}{rest}",
            values(&env)
        );
    }
    std::fs::write(&p, PROFILE.replace("= 10", "= 20")).unwrap();
    signal(&child, Signal::HUP);
    env.fx.set_stat(&disk, 2, 0);
    assert!(
        until(|| values(&env) == ["20", "20", "20"]),
        "{:?}",
        values(&env)
    );
    let (code, _) = stop(child, Signal::INT);
    err.extend(err_lines.iter().map(|l| l + "\n"));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("p.toml:2"),
        "where the profile is wrong: {err}"
    );
    assert_eq!(values(&env), ["0", "0", "0"], "put back at the end");
}

#[test]
fn a_killed_runs_values_are_put_back_by_the_stop_step_and_someone_elses_kept() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("300", "60000").as_str());
    let child = start_held(&env, &disk, &p);
    let (code, _) = stop(child, Signal::KILL);
    assert_eq!(code, -1, "killed");
    assert_eq!(values(&env), ["10", "10", "10"], "left held");
    env.fx.put(&resume(1), "70");
    let r = env.run(&["lease", "--put-back", p.to_str().unwrap()]);
    assert_eq!(
        r.code, 0,
        "someone else's value is reported, not a failure: {}",
        r.stderr
    );
    assert_eq!(values(&env), ["0", "70", "0"]);
    r.assert_stderr_has("cpu1/power/pm_qos_resume_latency_us reads \"70\"");
    assert!(env.state_json().get("leases").is_none());
    let r = env.run(&["lease", "--put-back", p.to_str().unwrap()]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "nothing left");
}

#[test]
fn restore_puts_back_what_a_killed_lease_left() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("300", "60000").as_str());
    let child = start_held(&env, &disk, &p);
    stop(child, Signal::KILL);
    // a dry run says what it would put back, and writes nothing
    let r = env.run(&["restore", "--dry-run", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["changed"], true, "{doc:#}");
    let lease = common::device(&doc, "blkqos lease");
    assert_eq!(lease["changes"].as_array().unwrap().len(), 3, "{doc:#}");
    assert_eq!(lease["changes"][0]["before"], "10", "{doc:#}");
    assert_eq!(lease["changes"][0]["after"], "0", "{doc:#}");
    assert_eq!(values(&env), ["10", "10", "10"]);
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("blkqos lease")
            && r.stdout
                .contains("devices/system/cpu/cpu1/power/pm_qos_resume_latency_us")
            && !r.stdout.contains("nothing to restore"),
        "{}",
        r.stdout
    );
    assert_eq!(values(&env), ["0", "0", "0"]);
    assert!(env.state_json().get("leases").is_none());
}

#[test]
fn a_second_lease_is_refused_and_restore_leaves_a_running_ones_cpus() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("300", "60000").as_str());
    let child = start_held(&env, &disk, &p);
    let r = env.run(&["lease", "--detect", "stat", p.to_str().unwrap()]);
    assert_ne!(r.code, 0, "a second lease runs: {}", r.stderr);
    r.assert_stderr_has("another blkqos lease is running");
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("a blkqos lease is running");
    assert_eq!(
        values(&env),
        ["10", "10", "10"],
        "still the running lease's"
    );
    assert_eq!(
        env.state_json()["leases"].as_object().map(|l| l.len()),
        Some(3),
        "its originals kept"
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert_eq!(values(&env), ["0", "0", "0"]);
}

/// Neither `status` nor `metrics` shows a user-space lease.
fn shows_no_user_lease(env: &Env) {
    let doc = env.run(&["status", "--json"]).json();
    let cpus = common::device(&doc, "nvme0n1")["cpus"]
        .as_array()
        .unwrap()
        .clone();
    assert!(cpus.iter().all(|c| c["user_lease"].is_null()), "{doc:#}");
    assert!(
        !env.run(&["metrics"])
            .stdout
            .contains("blkqos_cpu_user_lease")
    );
}

#[test]
fn status_and_metrics_show_what_a_running_lease_holds_and_nothing_once_it_stopped() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let child = start_held(&env, &disk, &p);
    // published once the values are written
    assert!(until(|| env.state.join("lease.json").exists()));
    let doc = env.run(&["status", "--json"]).json();
    let cpus = common::device(&doc, "nvme0n1")["cpus"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(cpus.len(), 3, "{doc:#}");
    for c in &cpus {
        let u = &c["user_lease"];
        assert_eq!(u["mechanism"], "blkqos lease", "{c:#}");
        assert_eq!(u["held"], true, "{c:#}");
        assert_eq!(u["limit_us"], 10, "{c:#}");
        assert_eq!(u["timeout_ms"], 300, "{c:#}");
        assert_eq!(u["detect"], "stat", "{c:#}");
        assert_eq!(u["disks"], serde_json::json!(["nvme0n1"]), "{c:#}");
        assert_eq!(u["pid"], child.id(), "{c:#}");
    }
    // the lease's own values are not someone else's static limits
    assert!(
        !doc.to_string().contains("was set outside blkqos"),
        "{doc:#}"
    );
    let text = env.run(&["status"]).stdout;
    assert!(
        text.contains(&format!(
            "blkqos lease (pid {}, stat; limit/timeout): cpu0=10us/<=300ms",
            child.id()
        )),
        "{text}"
    );
    let m = env.run(&["metrics"]).stdout;
    for c in 0..3 {
        for line in [
            format!("blkqos_cpu_user_lease_held{{cpu=\"{c}\"}} 1"),
            format!("blkqos_cpu_user_lease_limit_seconds{{cpu=\"{c}\"}} 0.00001"),
            format!("blkqos_cpu_user_lease_timeout_seconds{{cpu=\"{c}\"}} 0.3"),
        ] {
            assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
        }
    }
    // lapsed: served, not held
    assert!(until(|| values(&env) == ["0", "0", "0"]));
    assert!(until(|| {
        let m = env.run(&["metrics"]).stdout;
        m.lines()
            .any(|l| l == "blkqos_cpu_user_lease_held{cpu=\"0\"} 0")
            && !m.contains("blkqos_cpu_user_lease_limit_seconds{")
    }));
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(
        !env.state.join("lease.json").exists(),
        "removed at the stop"
    );
    shows_no_user_lease(&env);
}

#[test]
fn what_a_killed_lease_published_is_not_shown() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let child = start(&env, &p);
    env.fx.set_stat(&disk, 1, 0);
    assert!(until(
        || env.state.join("lease.json").exists() && values(&env) == ["10", "10", "10"]
    ));
    stop(child, Signal::KILL);
    // the file stays, its writer is gone
    assert!(env.state.join("lease.json").exists());
    shows_no_user_lease(&env);
    // what it left is flagged, with the command that puts it back
    let r = env.run(&["status"]);
    assert!(
        r.stderr
            .contains("left by a blkqos lease that is not running")
            && r.stderr.contains("blkqos lease --put-back"),
        "{}",
        r.stderr
    );
    let m = env.run(&["metrics", p.to_str().unwrap()]).stdout;
    assert!(m.contains("blkqos_conflicts{kind=\"lease-left\"} 3"), "{m}");
    assert!(m.contains("blkqos_saved_originals 3"), "{m}");
    // and the stop step removes it with the values
    let r = env.run(&["lease", "--put-back", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!env.state.join("lease.json").exists());
    assert_eq!(values(&env), ["0", "0", "0"]);
}

#[test]
fn the_units_condition_says_whether_the_kernel_has_its_own_lease() {
    let (stock, _) = env();
    let r = stock.run(&["lease", "--unless-kernel-lease"]);
    assert_eq!(r.code, 0, "no knobs: the lease is needed\n{}", r.stderr);
    let patched = Env::with(|root| {
        let mut fx = Fixture::new(root, 2, Abi::Queue);
        fx.nvme(0, "Fake NVMe", "S0");
        fx
    });
    let r = patched.run(&["lease", "--unless-kernel-lease"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("the kernel has its own lease"),
        "{}",
        r.stderr
    );
    // nothing written, not even the state directory
    assert!(!patched.state.exists());
}

#[test]
fn a_rule_with_the_static_fallback_is_left_to_apply() {
    let (env, disk) = env();
    let p = env.profile(
        "p.toml",
        &format!("{PROFILE}fallback = \"cpu-resume-latency\"\n"),
    );
    let child = spawn(env.cmd(), &p);
    env.fx.set_stat(&disk, 1, 0);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(values(&env), ["0", "0", "0"], "not held by the lease");
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("blkqos lease leaves it to apply"), "{err}");
}

#[test]
fn a_cpu_that_could_not_be_put_back_keeps_its_original_and_the_next_run_tries_again() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("300", "60000").as_str());
    let child = start_held(&env, &disk, &p);
    stop(child, Signal::KILL);
    // the next run's put-back of cpu0 fails once
    let child = spawn(
        env.faulty_cmd("cpu0/power/pm_qos_resume_latency_us", "1", libc::EBUSY),
        &p,
    );
    // its saved original, not the value left, is what it writes again
    assert!(
        until(|| values(&env) == ["0", "0", "0"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("kept in the state for the next try"), "{err}");
    assert!(
        env.state_json().get("leases").is_none(),
        "{}",
        env.state_json()
    );
}

#[test]
fn a_change_the_state_cannot_save_holds_no_cpu_until_it_is_saved() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let mut cmd = env.cmd();
    cmd.args(["--lock-timeout", "0.2"]);
    let child = spawn(cmd, &p);
    wait_saved(&env, 3);
    // someone holds the state lock while the profile's limit changes
    let lock = std::fs::File::open(env.state.join("lock")).unwrap();
    flock(&lock, FlockOperation::LockExclusive).unwrap();
    env.profile("p.toml", PROFILE.replace("= 10", "= 5").as_str());
    signal(&child, Signal::HUP);
    std::thread::sleep(Duration::from_millis(500));
    for n in 1..6 {
        env.fx.set_stat(&disk, n, 0);
        std::thread::sleep(Duration::from_millis(150));
        // 5 is not in the state: a SIGKILL now would leave it for good
        assert!(
            !values(&env).contains(&"5".to_string()),
            "{:?} with the state unsaved",
            values(&env)
        );
    }
    drop(lock);
    env.fx.set_stat(&disk, 6, 0);
    assert!(
        until(|| values(&env) == ["5", "5", "5"]),
        "{:?}",
        values(&env)
    );
    let limits = &env.state_json()["leases"][resume(0)]["limits"];
    assert_eq!(limits, &serde_json::json!([5, 10]), "{}", env.state_json());
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert_eq!(values(&env), ["0", "0", "0"]);
}

#[test]
fn apply_while_a_lease_holds_saves_the_value_from_before_the_lease() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("300", "60000").as_str());
    let child = start_held(&env, &disk, &p);
    let s = env.profile(
        "static.toml",
        &format!(
            "{}fallback = \"cpu-resume-latency\"\n",
            PROFILE.replace("= 10", "= 50")
        ),
    );
    let r = env.run(&["apply", s.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // never looser than the hold: apply's 50 is what the lapse puts back
    assert_eq!(values(&env), ["10", "10", "10"]);
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("by someone else"), "{err}");
    assert_eq!(values(&env), ["50", "50", "50"]);
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(values(&env), ["0", "0", "0"], "not the lease's 10");
}

#[test]
fn a_profile_others_can_write_is_refused_at_the_start_and_on_sighup() {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() {
        return; // only root refuses such a profile
    }
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut refused = spawn(env.cmd(), &p);
    let exited = until(|| refused.try_wait().unwrap().is_some());
    if !exited {
        signal(&refused, Signal::KILL);
    }
    let code = refused.wait().unwrap().code().unwrap_or(-1);
    let mut err = String::new();
    refused
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(exited, "still running on a profile others can write: {err}");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("writable by group or others"), "{err}");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let child = start(&env, &p);
    env.profile("p.toml", PROFILE.replace("= 10", "= 0").as_str());
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    signal(&child, Signal::HUP);
    std::thread::sleep(Duration::from_millis(300));
    env.fx.set_stat(&disk, 1, 0);
    assert!(
        until(|| values(&env) == ["10", "10", "10"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("keeping the profile read before"), "{err}");
}

#[test]
fn cpus_held_at_n_a_are_shown_held() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("= 10", "= 0").as_str());
    let child = start(&env, &p);
    env.fx.set_stat(&disk, 1, 0);
    assert!(
        until(|| values(&env) == ["n/a", "n/a", "n/a"]),
        "{:?}",
        values(&env)
    );
    assert!(
        until(|| {
            let m = env.run(&["metrics"]).stdout;
            (0..3).all(|c| {
                m.lines()
                    .any(|l| l == format!("blkqos_cpu_user_lease_held{{cpu=\"{c}\"}} 1"))
            })
        }),
        "{}",
        env.run(&["metrics"]).stdout
    );
    let doc = env.run(&["status", "--json"]).json();
    let u = &common::device(&doc, "nvme0n1")["cpus"][0]["user_lease"];
    assert_eq!(u["held"], true, "{u:#}");
    assert_eq!(u["limit_us"], 0, "{u:#}");
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_value_the_kernel_would_not_print_is_not_taken_for_an_original() {
    let (env, disk) = env();
    // octal to the kernel's parser; blkqos's state file refuses it
    env.fx.put(&resume(1), "010");
    let p = env.profile("p.toml", PROFILE);
    let child = spawn(env.cmd(), &p);
    wait_saved(&env, 2);
    env.fx.set_stat(&disk, 1, 0);
    assert!(
        until(|| values(&env) == ["10", "010", "10"]),
        "{:?}",
        values(&env)
    );
    let r = env.run(&["status"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("cpu1"), "{err}");
    assert_eq!(values(&env), ["0", "010", "0"]);
}

#[test]
fn a_cpu_that_cannot_be_written_is_reported_once_not_at_every_step() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let every: Vec<String> = (1..=500).map(|n| n.to_string()).collect();
    let child = spawn(
        env.faulty_cmd(
            "cpu1/power/pm_qos_resume_latency_us",
            &every.join(","),
            libc::EBUSY,
        ),
        &p,
    );
    wait_saved(&env, 3);
    // two seconds of I/O: a dozen steps, each trying cpu1 again
    for n in 1..=20 {
        env.fx.set_stat(&disk, n, 0);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(values(&env), ["10", "0", "10"]);
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    let reports = err.lines().filter(|l| l.contains("cannot write")).count();
    assert_eq!(reports, 1, "{err}");
}

#[test]
fn a_busy_state_lock_defers_the_lapse_until_it_is_free_and_is_reported_once() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let mut cmd = env.cmd();
    // longer than the test: a step that waited for the lock would hang it
    cmd.args(["--lock-timeout", "60"]);
    let child = spawn(cmd, &p);
    wait_saved(&env, 3);
    env.fx.set_stat(&disk, 1, 0);
    assert!(until(|| values(&env) == ["10", "10", "10"]));
    let lock = std::fs::File::open(env.state.join("lock")).unwrap();
    flock(&lock, FlockOperation::LockExclusive).unwrap();
    env.profile("p.toml", PROFILE.replace("= 10", "= 5").as_str());
    signal(&child, Signal::HUP);
    // the lapse (300 ms after the last I/O) waits for the lock: apply or
    // restore may be writing these CPUs under it
    stays(&env, ["10", "10", "10"]);
    // I/O while the lock is still busy: tried again, said once
    for n in 2..8 {
        env.fx.set_stat(&disk, n, 0);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(values(&env), ["10", "10", "10"]);
    drop(lock);
    env.fx.set_stat(&disk, 9, 0);
    assert!(
        until(|| values(&env) == ["5", "5", "5"]),
        "{:?}",
        values(&env)
    );
    assert!(
        until(|| values(&env) == ["0", "0", "0"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    let said = err.matches("until the state can be saved").count();
    assert_eq!(said, 1, "{err}");
}

#[test]
fn cpus_possible_but_not_present_are_not_leased() {
    // blk-mq maps every possible CPU to a queue; a CPU that may be
    // hot-added later has no directory, hence no resume latency to hold
    let (env, disk) = env();
    env.fx.put("devices/system/cpu/possible", "0-3");
    env.fx.put("devices/system/cpu/present", "0-2");
    let p = env.profile("p.toml", PROFILE);
    let child = start_held(&env, &disk, &p);
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("CPUs 0-2 held at 10 us"), "{err}");
    assert!(!err.contains("cpu3"), "{err}");
}

/// `apply` of `profile` with the static fallback at `limit_us` on the disk.
fn static_profile(env: &Env, limit_us: u32) -> std::path::PathBuf {
    env.profile(
        "static.toml",
        &format!(
            "{}fallback = \"cpu-resume-latency\"\n",
            PROFILE.replace("= 10", &format!("= {limit_us}"))
        ),
    )
}

/// That `values` stay `want` for a second (a lease sees I/O within one
/// 0.1 s look).
fn stays(env: &Env, want: [&str; 3]) {
    stays_for(env, want, Duration::from_secs(1), "");
}

/// That `values` stay `want` for `dur`, looked at every 5 ms.
fn stays_for(env: &Env, want: [&str; 3], dur: Duration, what: &str) {
    let end = Instant::now() + dur;
    while Instant::now() < end {
        assert_eq!(values(env), want, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_lease_writes_nothing_while_restore_holds_the_state_and_leaves_it_the_original() {
    let (env, disk) = env();
    let s = static_profile(&env, 20);
    let r = env.run(&["apply", s.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let p = env.profile("p.toml", PROFILE);
    let child = start(&env, &p);
    assert_eq!(values(&env), ["20", "20", "20"]);
    // restore, held inside its first CPU write: it holds the state lock,
    // and has read the CPUs' values
    let gate = env.state.parent().unwrap().join("gate");
    let restore = env
        .held_cmd("pm_qos_resume_latency_us", "1", &gate)
        .arg("restore")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(until(|| gate.with_extension("held").exists()));
    // I/O now: the lease must not write from what it reads before restore
    // is done
    env.fx.set_stat(&disk, 1, 0);
    stays(&env, ["20", "20", "20"]);
    std::fs::remove_file(&gate).unwrap();
    let out = restore.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // the lease then holds over the original restore gave back, and puts
    // that back at the lapse: nothing of apply's 20 is left
    assert!(
        until(|| values(&env) == ["0", "0", "0"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert_eq!(values(&env), ["0", "0", "0"]);
    assert!(env.state_json()["saved"].as_object().unwrap().is_empty());
}

#[test]
fn apply_of_the_value_a_lease_holds_is_kept_at_the_lapse_and_restored_after() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let child = start_held(&env, &disk, &p);
    let s = static_profile(&env, 10);
    let r = env.run(&["apply", s.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let saved = env.state_json()["saved"].clone();
    assert_eq!(saved.as_object().map(|s| s.len()), Some(3), "{saved}");
    assert_eq!(saved[resume(1)]["original"], "0", "{saved}");
    // no more I/O: the lapse leaves apply's 10
    stays(&env, ["10", "10", "10"]);
    let r = env.run(&["verify", s.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert_eq!(values(&env), ["10", "10", "10"]);
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(values(&env), ["0", "0", "0"]);
}

#[test]
fn restore_while_a_lease_holds_leaves_the_hold_to_it_and_the_lapse_puts_back_the_original() {
    let (env, disk) = env();
    let s = static_profile(&env, 20);
    assert_eq!(env.run(&["apply", s.to_str().unwrap()]).code, 0);
    let p = env.profile("p.toml", PROFILE);
    let child = start_held(&env, &disk, &p);
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        until(|| values(&env) == ["0", "0", "0"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("by someone else"), "{err}");
}

#[test]
fn a_cpu_that_left_the_tree_while_held_is_forgotten_with_a_warning() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("300", "60000").as_str());
    let child = start_held(&env, &disk, &p);
    std::fs::remove_dir_all(env.fx.root().join("devices/system/cpu/cpu2")).unwrap();
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("cpu2: gone from"), "{err}");
    assert_eq!(env.get(&resume(0)), "0");
    assert!(
        env.state_json().get("leases").is_none(),
        "{}",
        env.state_json()
    );
    let r = env.run(&["lease", "--put-back", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn a_killed_leases_cpu_that_left_the_tree_is_forgotten_by_the_put_back() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("300", "60000").as_str());
    let child = start_held(&env, &disk, &p);
    stop(child, Signal::KILL);
    std::fs::remove_dir_all(env.fx.root().join("devices/system/cpu/cpu2")).unwrap();
    let r = env.run(&["lease", "--put-back", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("its CPU is gone"), "{}", r.stderr);
    assert_eq!(env.get(&resume(0)), "0");
    assert!(env.state_json().get("leases").is_none());
}

/// An apply/restore loop against a running lease with I/O leaves every
/// value as found ($BLKQOS_RACE_ROUNDS rounds, 20 unless set).
#[test]
fn apply_and_restore_in_a_loop_against_a_lease_with_io_leave_every_value_as_found() {
    let (env, disk) = env();
    // originals of every kind: free, an admin's 5, CRI-O's n/a
    env.fx.put(&resume(1), "5");
    env.fx.put(&resume(2), "n/a");
    let p = env.profile("p.toml", PROFILE.replace("300", "5").as_str());
    let child = start(&env, &p);
    let s = static_profile(&env, 20);
    let rounds: u64 = std::env::var("BLKQOS_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let stop_io = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let io = {
        let (stop_io, fx_disk) = (stop_io.clone(), disk.clone());
        let root = env.fx.root().to_path_buf();
        std::thread::spawn(move || {
            let mut n = 1;
            while !stop_io.load(std::sync::atomic::Ordering::Relaxed) {
                let stat = format!("{n} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
                let _ = std::fs::write(root.join(format!("block/{fx_disk}/stat")), stat);
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    for round in 0..rounds {
        let r = env.run(&["apply", s.to_str().unwrap()]);
        assert_eq!(r.code, 0, "round {round}: {}", r.stderr);
        let r = env.run(&["restore"]);
        assert_eq!(r.code, 0, "round {round}: {}", r.stderr);
    }
    stop_io.store(true, std::sync::atomic::Ordering::Relaxed);
    io.join().unwrap();
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert_eq!(values(&env), ["0", "5", "n/a"], "{err}");
    let state = env.state_json();
    assert!(state["saved"].as_object().unwrap().is_empty(), "{state}");
    assert!(state.get("leases").is_none(), "{state}");
}

#[test]
fn the_static_fallback_never_loosens_a_stricter_value() {
    let (env, _) = env();
    env.fx.put(&resume(1), "5");
    env.fx.put(&resume(2), "n/a");
    let s = static_profile(&env, 20);
    let r = env.run(&["apply", s.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(values(&env), ["20", "5", "n/a"]);
    let r = env.run(&["verify", s.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(values(&env), ["0", "5", "n/a"]);
}

/// Without tracefs (none in the tree, and a tree not the live /sys is never
/// mounted on), `--detect tracepoint` refuses to start, naming tracefs and
/// how to mount it rather than a bare "No such file or directory".
#[test]
fn detect_tracepoint_without_tracefs_names_tracefs_and_the_mount_command() {
    let (env, _) = env();
    let p = env.profile("p.toml", PROFILE);
    let r = env.run(&["lease", "--detect", "tracepoint", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("tracefs is not mounted");
    r.assert_stderr_has("`mount -t tracefs nodev /sys/kernel/tracing`");
    assert_eq!(values(&env), ["0", "0", "0"], "nothing held");
    assert!(!env.fx.root().join("kernel/tracing/events").exists());
    // auto falls back to the stat, and says why in the same words
    let child = env
        .cmd()
        .args(["lease", "--idle-look", "0.1"])
        .arg(&p)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_saved(&env, 3);
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("tracepoint cannot be used (tracefs is not mounted")
            && err.contains(
                "`mount -t tracefs nodev /sys/kernel/tracing`); reading each disk's stat"
            ),
        "{err}"
    );
}

#[test]
fn trickle_io_holds_the_cpus_once_then_not_at_every_io_and_a_burst_holds_again() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE.replace("300", "100").as_str());
    let child = env
        .cmd()
        .args(["lease", "--detect", "stat", "--idle-look", "0.1"])
        .arg(&p)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_saved(&env, 3);
    // the first I/O holds (nothing known of the disk), and that hold
    // sees no other
    env.fx.set_stat(&disk, 1, 0);
    assert!(until(|| values(&env) == ["10", "10", "10"]));
    assert!(until(|| values(&env) == ["0", "0", "0"]));
    // one I/O at a time, further apart than the timeout: never held
    for n in 2..6 {
        env.fx.set_stat(&disk, n, 0);
        stays_for(
            &env,
            ["0", "0", "0"],
            Duration::from_millis(300),
            &format!("I/O {n}"),
        );
    }
    // several I/Os at one look: held
    env.fx.set_stat(&disk, 20, 0);
    assert!(
        until(|| values(&env) == ["10", "10", "10"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert_eq!(values(&env), ["0", "0", "0"]);
}

/// I/O on `disk` every 100 ms (within the 300 ms timeout), `values` as
/// `want` throughout.
fn held_through_io(env: &Env, disk: &str, from: u64, want: [&str; 3]) {
    for n in from..from + 5 {
        env.fx.set_stat(disk, n, 0);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(values(env), want, "I/O {n}");
    }
}

#[test]
fn apply_of_the_hold_then_a_looser_one_keeps_the_hold_until_the_lapse() {
    let (env, disk) = env();
    let p = env.profile("p.toml", PROFILE);
    let child = start_held(&env, &disk, &p);
    for limit in [10, 50] {
        let r = env.run(&["apply", static_profile(&env, limit).to_str().unwrap()]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        held_through_io(&env, &disk, 10 * u64::from(limit), ["10", "10", "10"]);
    }
    // the lapse puts back apply's 50
    assert!(
        until(|| values(&env) == ["50", "50", "50"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("someone else's"), "{err}");
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(values(&env), ["0", "0", "0"]);
}

#[test]
fn restore_while_held_over_apply_of_the_same_value_keeps_the_hold_until_the_lapse() {
    let (env, disk) = env();
    assert_eq!(
        env.run(&["apply", static_profile(&env, 10).to_str().unwrap()])
            .code,
        0
    );
    let p = env.profile("p.toml", PROFILE);
    let child = start(&env, &p);
    env.fx.set_stat(&disk, 1, 0);
    std::thread::sleep(Duration::from_millis(200));
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    held_through_io(&env, &disk, 2, ["10", "10", "10"]);
    assert!(
        until(|| values(&env) == ["0", "0", "0"]),
        "{:?}",
        values(&env)
    );
    let (code, err) = stop(child, Signal::TERM);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_killed_leases_hold_is_flagged_over_apply_and_apply_takes_it_over() {
    let (env, disk) = env();
    let s = static_profile(&env, 50);
    assert_eq!(env.run(&["apply", s.to_str().unwrap()]).code, 0);
    let p = env.profile("p.toml", PROFILE.replace("300", "60000").as_str());
    let child = start_held(&env, &disk, &p);
    stop(child, Signal::KILL);
    // its 10 over apply's 50 is flagged
    let r = env.run(&["status"]);
    assert_eq!(
        r.stderr.matches("left by a blkqos lease").count(),
        3,
        "{}",
        r.stderr
    );
    // apply takes the CPUs over: no dead hold is kept
    let r = env.run(&["apply", s.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(values(&env), ["50", "50", "50"]);
    let r = env.run(&["status"]);
    assert!(!r.stderr.contains("left by a blkqos lease"), "{}", r.stderr);
    assert_eq!(env.run(&["restore"]).code, 0);
    assert_eq!(values(&env), ["0", "0", "0"]);
}
