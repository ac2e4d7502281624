//! `blkqos top` used as a person would: in a real terminal (tmux), read off
//! the screen, counters moved under it, `q` typed; the terminal must come
//! back as it was. Needs tmux (`apt-get install tmux`; .ci/run installs
//! it); BLKQOS_SKIP_TMUX=1 skips them on purpose. BLKQOS_TOP_CAPTURE=FILE
//! saves the screen with moving counters (docs/top.txt).

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::Env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of our own (its own socket), killed when dropped.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "top"])
    }

    fn pane(&self, format: &str) -> String {
        self.cmd(&["display-message", "-p", "-t", "top", format])
            .trim()
            .to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// Wait (bounded) until `ok` holds of the screen, doing `each` between looks.
fn until(tmux: &Tmux, what: &str, mut each: impl FnMut(), ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let screen = tmux.screen();
        if ok(&screen) {
            return screen;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not on the screen after 20 s:\n{screen}"
        );
        each();
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn line<'a>(screen: &'a str, start: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line {start:?} in\n{screen}"))
}

fn has_tmux() -> bool {
    if std::env::var_os("BLKQOS_SKIP_TMUX").is_some() {
        eprintln!("skipped: BLKQOS_SKIP_TMUX is set");
        return false;
    }
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "these tests run blkqos top in tmux: apt-get install tmux (or set BLKQOS_SKIP_TMUX=1)"
    );
    true
}

/// `top` on the zoo in a 110x40 tmux pane, run by a shell that reports its
/// exit status, records the terminal modes and then waits for a line.
struct Session {
    // dropped before env: its kill-server needs the socket in env's
    // directory, which env's drop removes
    tmux: Tmux,
    env: Env,
    stty: PathBuf,
    pid: PathBuf,
}

impl Session {
    fn start() -> Session {
        Session::start_sized(40, "1")
    }

    /// `top --interval interval` in a pane `rows` high.
    fn start_sized(rows: u16, interval: &str) -> Session {
        let env = Env::zoo(Abi::Queue);
        env.fx.put("block/nvme0n1/queue/cpu_lat_limit_us", "4");
        env.fx.set_lease(1, Some((4, 2500)));
        let tmux = Tmux {
            socket: env.work.join("tmux.sock"),
        };
        let (stty, pid) = (env.work.join("stty.after"), env.work.join("top.pid"));
        let quote = |p: &Path| format!("'{}'", p.display());
        let script = format!(
            "sh -c 'echo $$ > \"$0\"; exec \"$@\"' {} {} --sysfs {} --state-dir {} top \
             --interval {interval}; \
             echo \"top exited $?\"; stty -a > {}; read line; echo \"$line\" > {}",
            quote(&pid),
            quote(Path::new(env!("CARGO_BIN_EXE_blkqos"))),
            quote(env.fx.root()),
            quote(&env.state),
            quote(&stty),
            quote(&env.work.join("line.read")),
        );
        tmux.cmd(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "110",
            "-y",
            &rows.to_string(),
            "sh",
            "-c",
            &script,
        ]);
        // keep the pane once the shell ends, to read its status
        tmux.cmd(&["set-option", "-t", "top", "remain-on-exit", "on"]);
        Session {
            tmux,
            env,
            stty,
            pid,
        }
    }

    /// Wait for top's first frame; its pid.
    fn first_frame(&self) -> String {
        until(&self.tmux, "the first frame", || {}, |s| s.contains("cpu3"));
        let pid = std::fs::read_to_string(&self.pid).expect("pid written");
        pid.trim().to_string()
    }

    /// After top ended with `status`: the shell's screen, not top's, the
    /// cursor shown, and the terminal cooked (the shell reads a line).
    fn assert_restored(&self, status: i32) {
        let tmux = &self.tmux;
        let after = until(
            tmux,
            "the shell after top",
            || {},
            |s| s.contains("top exited"),
        );
        assert!(after.contains(&format!("top exited {status}")), "{after}");
        assert!(
            !after.contains("DEVICE"),
            "the alternate screen was left:\n{after}"
        );
        assert_eq!(tmux.pane("#{alternate_on}"), "0");
        assert_eq!(
            tmux.pane("#{cursor_flag}"),
            "1",
            "the cursor is shown again"
        );
        tmux.cmd(&["send-keys", "-t", "top", "done", "Enter"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        // (tmux's pane_dead_status is not always filled in: the shell
        // says what it read instead)
        while tmux.pane("#{pane_dead}") != "1" {
            assert!(
                Instant::now() < deadline,
                "the shell did not read the line and exit:\n{}",
                tmux.screen()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let read = std::fs::read_to_string(self.env.work.join("line.read")).expect("line read");
        assert_eq!(read, "done\n");
        let modes = std::fs::read_to_string(&self.stty).expect("stty ran after top");
        let words: Vec<&str> = modes.split_whitespace().collect();
        for mode in ["icanon", "echo", "isig", "opost", "icrnl"] {
            assert!(
                words.contains(&mode),
                "{mode}: not back to cooked mode: {modes}"
            );
        }
    }
}

#[test]
fn top_in_a_terminal_shows_moving_counters_and_quits_on_q() {
    if !has_tmux() {
        return;
    }
    let session = Session::start();
    let (tmux, env) = (&session.tmux, &session.env);
    let first = until(
        tmux,
        "the first frame",
        || {},
        |s| s.contains("nvme0n1") && s.contains("cpu3"),
    );
    assert!(first.contains("blkqos top"), "{first}");
    assert!(line(&first, "DEVICE").contains("READ/S"), "{first}");
    assert!(line(&first, "nvme0n1 ").contains("4 us"), "{first}");
    assert!(line(&first, "sda ").contains("off"), "{first}");
    assert!(line(&first, "CPU ").contains("C6"), "{first}");
    assert!(
        line(&first, "cpu1 ").ends_with("held 4 us, 2.5 ms left"),
        "{first}"
    );
    assert!(line(&first, "cpu0 ").ends_with("none"), "{first}");
    assert_eq!(
        tmux.pane("#{alternate_on}"),
        "1",
        "top draws on the alternate screen"
    );

    // disk I/O and deep idle time, as the kernel would count them
    let (mut reads, mut c6_us) = (0u64, 1_000_000u64);
    let moving = until(
        tmux,
        "non-zero IOPS and C6 residency",
        || {
            reads += 100;
            c6_us += 50_000;
            env.fx.set_stat("nvme0n1", reads, 0);
            env.fx.put(
                "devices/system/cpu/cpu0/cpuidle/state3/time",
                &c6_us.to_string(),
            );
        },
        |s| {
            let nvme = s.lines().find(|l| l.starts_with("nvme0n1 "));
            let cpu0 = s.lines().find(|l| l.starts_with("cpu0 "));
            let iops = nvme.and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
            let c6 = cpu0.and_then(|l| {
                l.split_whitespace()
                    .nth(4)?
                    .trim_end_matches('%')
                    .parse::<f64>()
                    .ok()
            });
            iops.is_some_and(|n| n > 0) && c6.is_some_and(|p| p > 0.0)
        },
    );
    if let Some(path) = std::env::var_os("BLKQOS_TOP_CAPTURE") {
        std::fs::write(&path, format!("{}\n", moving.trim_end())).expect("capture written");
    }
    tmux.cmd(&["send-keys", "-t", "top", "q"]);
    session.assert_restored(0);
}

/// `top` on its first frame, sent `signal`: the terminal comes back and
/// the shell sees the exit status a process that signal ended has.
fn terminal_back_after(signal: &str, status: i32) {
    if !has_tmux() {
        return;
    }
    let session = Session::start();
    let pid = session.first_frame();
    let killed = Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    session.assert_restored(status);
}

#[test]
fn top_puts_the_terminal_back_on_sigterm() {
    // 128 + SIGTERM, as a shell reports a process the signal ended
    terminal_back_after("TERM", 143);
}

/// SIGQUIT (Ctrl-\\ outside raw mode, or kill -QUIT) would otherwise dump
/// core with the terminal left raw.
#[test]
fn top_puts_the_terminal_back_on_sigquit() {
    terminal_back_after("QUIT", 131);
}

#[test]
fn top_without_a_terminal_says_so_and_draws_nothing() {
    let env = Env::zoo(Abi::Queue);
    let r = env.run(&["top"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    r.assert_stderr_has("top draws on a terminal");
}

/// Whether a process is gone (or a zombie nobody has reaped yet).
fn ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // the state follows the command's closing parenthesis
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// The terminal goes away under top (tmux killed, as an ssh connection
/// that drops): top ends instead of reading end-of-file for ever.
#[test]
fn top_ends_when_its_terminal_hangs_up() {
    if !has_tmux() {
        return;
    }
    let session = Session::start();
    let pid = session.first_frame();
    let pid = pid.as_str();
    session.tmux.cmd(&["kill-server"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ended(pid) {
        if Instant::now() > deadline {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
            panic!("top still runs 10 s after its terminal hung up");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The terminal grows: top draws the rows it could not before at once,
/// not at the next interval (an hour here).
#[test]
fn top_draws_again_when_its_terminal_is_resized() {
    if !has_tmux() {
        return;
    }
    let session = Session::start_sized(8, "3600");
    let small = until(
        &session.tmux,
        "the first frame",
        || {},
        |s| s.contains("blkqos top"),
    );
    assert!(!small.contains("cpu3"), "8 rows hold no cpu3:\n{small}");
    session
        .tmux
        .cmd(&["resize-window", "-t", "top", "-x", "110", "-y", "40"]);
    until(
        &session.tmux,
        "the rows the grown terminal holds",
        || {},
        |s| s.contains("cpu3"),
    );
    session.tmux.cmd(&["send-keys", "-t", "top", "q"]);
    session.assert_restored(0);
}

/// Disks that come and go while top runs (hot-plug, md/dm arrays made and
/// stopped): the view follows.
#[test]
fn top_shows_disks_added_and_drops_disks_removed_while_it_runs() {
    if !has_tmux() {
        return;
    }
    let mut session = Session::start();
    let first = until(
        &session.tmux,
        "the first frame",
        || {},
        |s| s.contains("cpu3"),
    );
    assert!(first.contains("\nsdb "), "{first}");
    assert!(!first.contains("nvme7n1"), "{first}");
    let added = session.env.fx.nvme(7, "HOT ADDED", "S7");
    session.env.fx.remove_disk("sdb");
    let after = until(
        &session.tmux,
        "the added disk, without the removed one",
        || {},
        |s| s.contains(&format!("\n{added} ")) && !s.contains("\nsdb "),
    );
    assert!(line(&after, "nvme0n1 ").contains("4 us"), "{after}");
    session.tmux.cmd(&["send-keys", "-t", "top", "q"]);
    session.assert_restored(0);
}
