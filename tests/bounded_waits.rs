//! Nothing waits without end (issue 14, bug 8): a run holding the lock makes
//! the others give up after a bounded wait, naming it, with their own exit
//! status; a FIFO where a profile, the lock or the state file belongs is
//! refused, not waited on.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO, run_within};
use rustix::fs::{CWD, Mode, mkfifoat};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// The exit status of a run that gave up waiting for the lock.
const EXIT_BUSY: i32 = 3;

fn mkfifo(p: &Path) {
    mkfifoat(CWD, p, Mode::from_raw_mode(0o600)).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
}

#[test]
fn a_held_lock_makes_apply_restore_and_udev_give_up_naming_the_holder() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    let r = env.run(&["apply", p]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.run(&["restore"]).code, 0);
    // a run that holds the lock: this test, as a stopped apply would
    let holder = std::process::id();
    let lock = hold_lock(&env, &format!("{holder} {}", start_time(holder)));
    let devpath = format!("/{}", env.fx.dir_of("nvme0n1"));
    // a remove is acted on once its disk has gone
    let gone = format!("/{}", env.fx.dir_of("nvme1n1"));
    env.fx.remove_disk("nvme1n1");
    let before = env.snapshot();
    for args in [
        &["apply", p][..],
        &["restore"],
        &["udev", "--action", "add", "--devpath", &devpath, p],
        &["udev", "--action", "remove", "--devpath", &gone, p],
        &["coldplug", p],
    ] {
        let mut c = env.cmd();
        c.env("BLKQOS_LOCK_TIMEOUT", "1").args(args);
        let t = Instant::now();
        let r = run_within(c, Duration::from_secs(15))
            .unwrap_or_else(|| panic!("{args:?} still waiting after 15 s"));
        assert_eq!(r.code, EXIT_BUSY, "{args:?}: {}", r.stderr);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{args:?}: {:?}",
            t.elapsed()
        );
        r.assert_stderr_has(&format!("waiting for another blkqos run (pid {holder})"));
        r.assert_stderr_has(&format!("pid {holder} still holds"));
    }
    assert_eq!(env.snapshot(), before, "nothing written while waiting");
    // read-only commands do not wait at all
    let r = run_within(
        {
            let mut c = env.cmd();
            c.args(["apply", p, "--dry-run"]);
            c
        },
        Duration::from_secs(15),
    )
    .expect("a dry run does not wait");
    assert_eq!(r.code, 0, "{}", r.stderr);
    drop(lock);
    assert_eq!(env.run(&["apply", p]).code, 0, "free again");
}

#[test]
fn the_lock_file_names_the_run_holding_it() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let mut c = env.cmd();
    c.args(["apply", p.to_str().unwrap()]);
    let child = c.spawn().unwrap();
    let pid = child.id();
    // running or a zombie until waited for: /proc still has it
    let started = start_time(pid);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = fs::read_to_string(env.state.join("lock")).unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words, [pid.to_string(), started], "{text:?}");
}

/// The state lock, held by this test (as a stopped run would hold it),
/// the lock file saying `text`.
fn hold_lock(env: &Env, text: &str) -> fs::File {
    let mut lock = fs::OpenOptions::new()
        .write(true)
        .open(env.state.join("lock"))
        .unwrap();
    lock.lock().unwrap();
    lock.set_len(0).unwrap();
    writeln!(lock, "{text}").unwrap();
    lock
}

/// A process's start time as /proc/PID/stat gives it (field 22).
fn start_time(pid: u32) -> String {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
    rest.split_whitespace().nth(19).unwrap_or("0").to_string()
}

#[test]
fn a_fifo_as_profile_lock_or_state_file_is_refused_not_waited_on() {
    let env = Env::zoo(Abi::Queue);
    let good = env.profile("p.toml", NVME_AUTO);
    let fifo = env.work.join("fifo.toml");
    mkfifo(&fifo);
    let run = |args: &[&str]| {
        let mut c = env.cmd();
        c.env("BLKQOS_LOCK_TIMEOUT", "1").args(args);
        run_within(c, Duration::from_secs(10)).unwrap_or_else(|| panic!("{args:?} hangs on a FIFO"))
    };
    let before = env.snapshot();
    for args in [
        &["check", fifo.to_str().unwrap()][..],
        &["apply", fifo.to_str().unwrap()],
        &["apply", fifo.to_str().unwrap(), "--dry-run"],
        &["verify", fifo.to_str().unwrap()],
    ] {
        let r = run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        r.assert_stderr_has("not a regular file");
    }
    assert_eq!(env.snapshot(), before);

    fs::create_dir_all(&env.state).unwrap();
    fs::set_permissions(
        &env.state,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    mkfifo(&env.state.join("lock"));
    for args in [&["apply", good.to_str().unwrap()][..], &["restore"]] {
        let r = run(args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        r.assert_stderr_has("lock: not a regular file");
    }
    assert_eq!(env.snapshot(), before);
    fs::remove_file(env.state.join("lock")).unwrap();

    mkfifo(&env.state.join("state.json"));
    for args in [&["apply", good.to_str().unwrap()][..], &["restore"]] {
        let r = run(args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        r.assert_stderr_has("state.json: not a regular file");
    }
    assert_eq!(env.snapshot(), before);
    // a read-only command does not wait either, and does not go on
    // without a state that is there but cannot be trusted
    let r = run(&["status"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has("state.json: not a regular file");
    let r = run(&["verify", good.to_str().unwrap()]);
    assert_eq!(r.code, 2, "verify could not check: {}", r.stderr);
    r.assert_stderr_has("state.json: not a regular file");
}

/// The attack's finding: a finished run leaves its pid in the lock file;
/// once an unrelated process has that pid, a run waiting for the next
/// holder named it. The file names a run by pid and start time.
#[test]
fn a_pid_reused_by_another_process_is_not_named_as_the_holder() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    assert_eq!(env.run(&["apply", p]).code, 0);
    let text = fs::read_to_string(env.state.join("lock")).unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words.len(), 2, "pid and start time: {text:?}");
    // what that run left, its pid now an unrelated live process's; the
    // start time is in clock ticks (10 ms): one started in the same tick
    // would be that run
    std::thread::sleep(Duration::from_millis(30));
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let lock = hold_lock(&env, &format!("{} {}", other.id(), words[1]));
    let mut c = env.cmd();
    c.env("BLKQOS_LOCK_TIMEOUT", "0.5").args(["apply", p]);
    let r = run_within(c, Duration::from_secs(15)).expect("gave up in time");
    other.kill().unwrap();
    other.wait().unwrap();
    assert_eq!(r.code, EXIT_BUSY, "{}", r.stderr);
    assert!(
        !r.stderr.contains(&format!("pid {}", other.id())),
        "an unrelated process is named: {}",
        r.stderr
    );
    r.assert_stderr_has("another blkqos run (pid unknown) still holds");
    drop(lock);
}

#[test]
fn a_stale_pid_in_the_lock_file_is_not_named_as_the_holder() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    assert_eq!(env.run(&["apply", p]).code, 0);
    // a process that has ended: its pid is what a killed run leaves behind
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let lock = hold_lock(&env, &format!("{dead}"));
    let mut c = env.cmd();
    c.env("BLKQOS_LOCK_TIMEOUT", "0.5").args(["apply", p]);
    let r = run_within(c, Duration::from_secs(15)).expect("gave up in time");
    assert_eq!(r.code, EXIT_BUSY, "{}", r.stderr);
    assert!(
        !r.stderr.contains(&format!("pid {dead}")),
        "a pid no process has is named: {}",
        r.stderr
    );
    r.assert_stderr_has("(pid unknown)");
    r.assert_stderr_has("another blkqos run (pid unknown) still holds");
    drop(lock);
}
