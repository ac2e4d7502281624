//! `blkqos probe` on a fake tree of a kernel without the queue knobs: the
//! real binary reads a real file with O_DIRECT, holds the fake CPUs
//! through `blkqos lease` (its child), and puts every value back.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::Env;
use common::fixture::Fixture;
use rustix::process::{Pid, Signal, kill_process};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn resume(cpu: u32) -> String {
    format!("devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")
}

/// A file the probe can read with O_DIRECT: on the build's file system
/// (not /tmp, which may be tmpfs), 1 MiB written for real.
fn data_file(env: &Env) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!(
        "probe-{}-{}.dat",
        std::process::id(),
        env.work.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&path, vec![0x5a; 1 << 20]).unwrap();
    path
}

/// Two CPUs with the Ice Lake table and a driver, a virtio disk, and the
/// file's device number leading to it, as /sys/dev/block does.
fn env(driver: Option<&str>) -> (Env, PathBuf, String) {
    env_abi(driver, Abi::None)
}

fn env_abi(driver: Option<&str>, abi: Abi) -> (Env, PathBuf, String) {
    let mut disk = String::new();
    let env = Env::with(|root| {
        let mut fx = Fixture::new(root, 2, abi);
        disk = fx.virtio("vda", 0);
        fx
    });
    env.fx.set_stat(&disk, 0, 0);
    if let Some(d) = driver {
        env.fx.put("devices/system/cpu/cpuidle/current_driver", d);
        env.fx
            .put("devices/system/cpu/cpuidle/current_governor", "menu");
    }
    let file = data_file(&env);
    let dev = std::fs::metadata(&file).unwrap().dev();
    let (ma, mi) = (libc::major(dev), libc::minor(dev));
    let dir = env.fx.dir_of(&disk);
    env.fx.link(&format!("dev/block/{ma}:{mi}"), &dir);
    (env, file, disk)
}

/// The fake disk's stat moves while `on`: the lease child, reading it,
/// sees the I/O the real reads do elsewhere.
fn io_ticker(env: &Env, disk: &str) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let on = Arc::new(AtomicBool::new(true));
    let stat = env.fx.root().join(env.fx.dir_of(disk)).join("stat");
    let flag = Arc::clone(&on);
    let h = std::thread::spawn(move || {
        let mut n = 0u64;
        while flag.load(Ordering::Relaxed) {
            n += 1;
            let fields = format!("{n} 0 {} 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", n * 8);
            let _ = std::fs::write(&stat, fields);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    (on, h)
}

/// The run printed a document valid against schemas/probe.schema.json.
fn valid(doc: &serde_json::Value) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/probe.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = jsonschema::draft202012::new(&schema).unwrap();
    let bad: Vec<String> = (v.iter_errors(doc))
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}\n{doc:#}");
}

fn values(env: &Env) -> Vec<String> {
    (0..2).map(|c| env.get(&resume(c))).collect()
}

/// `blkqos probe FILE --duration 1 ARGS... --plot PLOT`: one second a
/// configuration, and a plot asked for.
fn probe_with_plot(
    env: &Env,
    file: &std::path::Path,
    plot: &std::path::Path,
    args: &[&str],
) -> common::Run {
    let mut all = vec!["probe", file.to_str().unwrap(), "--duration", "1"];
    all.extend_from_slice(args);
    all.extend(["--plot", plot.to_str().unwrap()]);
    env.run(&all)
}

#[test]
fn a_probe_measures_every_configuration_and_leaves_every_value_as_found() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, disk) = env(Some("intel_idle"));
    // an admin's value on CPU1: the lease holds over it, and it comes back
    env.fx.put(&resume(1), "500");
    let (on, ticker) = io_ticker(&env, &disk);
    let plot = env.work.join("probe.svg");
    let r = probe_with_plot(&env, &file, &plot, &["--limits", "auto,0", "--json"]);
    on.store(false, Ordering::Relaxed);
    ticker.join().unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    valid(&doc);
    let d = &doc["devices"][0];
    assert_eq!(d["name"], "vda");
    assert_eq!(d["kernel_knobs"], false);
    assert_eq!(d["cpus"], serde_json::json!([0, 1]));
    let labels: Vec<&str> = (d["configs"].as_array().unwrap().iter())
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["deep", "c1", "lease", "lease"], "{d:#}");
    assert_eq!(d["configs"][1]["limit_us"], 1, "C1's exit latency");
    assert_eq!(d["configs"][2]["limit_us"], 4, "auto: C1E");
    assert!(d["rounds"].as_u64().unwrap() >= 5);
    assert!(d["analysis"].is_object(), "{d:#}");
    assert_eq!(values(&env), ["0", "500"]);
    let state = env.state.as_path();
    assert!(!state.join("probe-profile.toml").exists());
    assert!(!state.join("lease.json").exists());
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{svg}");
}

#[test]
fn without_a_cpuidle_driver_there_is_nothing_to_buy_and_nothing_is_written() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env(Some("none"));
    let before = env.snapshot();
    let plot = env.work.join("probe.svg");
    let r = probe_with_plot(&env, &file, &plot, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("nothing to buy here: no cpuidle driver"),
        "{}",
        r.stdout
    );
    assert_eq!(env.snapshot(), before);
    // no plot, and the user who asked for one is told why
    assert!(!plot.exists());
    assert!(
        r.stderr.contains("not written: no device was measured"),
        "{}",
        r.stderr
    );
    let r = probe_with_plot(&env, &file, &plot, &["--json"]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    valid(&doc);
    assert!(!plot.exists());
    let warned = doc["warnings"].as_array().unwrap();
    assert!(
        warned.iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("not written: no device was measured")),
        "{doc:#}"
    );
}

#[test]
fn what_is_not_a_block_device_or_a_regular_file_is_refused() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env(Some("intel_idle"));
    let _ = std::fs::remove_file(&file);
    let r = env.run(&["probe", "/dev/null", "--json"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let doc = r.json();
    valid(&doc);
    assert_eq!(doc["failure"]["kind"], "probe-refused");
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("not a block device or a regular file"),
        "{doc:#}"
    );
    let dir = env.work.clone();
    let r = env.run(&["probe", dir.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn reads_from_a_cpu_that_does_not_serve_the_disk_are_refused_before_any_write() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env(Some("intel_idle"));
    let before = env.snapshot();
    let r = env.run(&["probe", file.to_str().unwrap(), "--cpu", "7"]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("--cpu 7: not a CPU that serves vda (those are 0-1)");
    assert_eq!(env.snapshot(), before);
}

#[test]
fn apply_s_static_fallback_on_the_cpus_is_not_probed_over() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env(Some("intel_idle"));
    env.fx.put(&resume(0), "20");
    saved_for_vda(&env, &resume(0), "0");
    let r = env.run(&["probe", file.to_str().unwrap(), "--duration", "1"]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("apply's static fallback holds");
    r.assert_stderr_has("blkqos restore");
    assert_eq!(values(&env), ["20", "0"]);
}

fn spawn_probe(env: &Env, file: &std::path::Path) -> Child {
    env.cmd()
        .args([
            "probe",
            file.to_str().unwrap(),
            "--duration",
            "60",
            "--limits",
            "0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait (at most `secs`) until `ok` holds; false if it never did.
fn until(secs: u64, mut ok: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Wait (at most 20 s) until a CPU is held; false if none ever was.
fn until_held(env: &Env) -> bool {
    until(20, || values(env) != ["0", "0"])
}

fn until_found(env: &Env) -> bool {
    until(15, || values(env) == ["0", "0"])
}

/// A state file that saved `path`'s original for vda, as apply (or a
/// killed probe) leaves it.
fn saved_for_vda(env: &Env, path: &str, original: &str) {
    std::fs::create_dir_all(&env.state).unwrap();
    let state = serde_json::json!({
        "schema": 1,
        "saved": { path: { "original": original, "owners": ["vda"] } },
        "rules": {}
    });
    std::fs::write(env.state.join("state.json"), state.to_string()).unwrap();
}

#[test]
fn sigterm_during_a_hold_puts_the_cpus_back_and_says_so() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, disk) = env(Some("intel_idle"));
    let (on, ticker) = io_ticker(&env, &disk);
    let child = spawn_probe(&env, &file);
    let held = until_held(&env);
    // its lease is one apply, restore and status know for a running lease
    // (by its command name, though it runs from /proc/self/exe)
    let published: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.state.join("lease.json")).unwrap())
            .unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", published["pid"])).unwrap();
    // on the child's pid, which has not been waited for
    let _ = kill_process(Pid::from_child(&child), Signal::TERM);
    let out = child.wait_with_output().unwrap();
    on.store(false, Ordering::Relaxed);
    ticker.join().unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(held, "no CPU was ever held");
    assert_eq!(comm.trim_end(), "blkqos");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("stopped by a signal"), "{err}");
    assert_eq!(values(&env), ["0", "0"]);
    assert!(
        env.state_json()["leases"]
            .as_object()
            .is_none_or(|l| l.is_empty())
    );
}

#[test]
fn sigkill_of_the_probe_stops_its_lease_which_puts_the_cpus_back() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, disk) = env(Some("intel_idle"));
    let (on, ticker) = io_ticker(&env, &disk);
    let mut child = spawn_probe(&env, &file);
    // held by the lease child (c1 or lease@0): both write through it
    let held = until_held(&env);
    child.kill().unwrap();
    child.wait().unwrap();
    let back = until_found(&env);
    on.store(false, Ordering::Relaxed);
    ticker.join().unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(held, "no CPU was ever held");
    assert!(back, "left: {:?}", values(&env));
}

fn knobs(env: &Env) -> (String, String) {
    (
        env.get("block/vda/queue/cpu_lat_limit_us"),
        env.get("block/vda/queue/cpu_lat_timeout_ms"),
    )
}

#[test]
fn on_a_kernel_with_the_knobs_the_probe_writes_them_and_puts_them_back() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env_abi(Some("intel_idle"), Abi::Queue);
    env.fx.put("block/vda/queue/cpu_lat_timeout_ms", "7");
    let r = env.run(&["probe", file.to_str().unwrap(), "--duration", "1", "--json"]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let d = &r.json()["devices"][0];
    assert_eq!(d["kernel_knobs"], true);
    assert_eq!(knobs(&env), ("-1".to_string(), "7".to_string()));
    assert_eq!(
        values(&env),
        ["0", "0"],
        "the CPUs are the kernel's to hold"
    );
    let saved = env.state_json()["saved"].clone();
    assert!(saved.as_object().unwrap().is_empty(), "{saved:#}");
}

#[test]
fn after_a_sigkill_during_a_knob_hold_restore_puts_the_knobs_back() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env_abi(Some("intel_idle"), Abi::Queue);
    let mut child = env
        .cmd()
        .args(["probe", file.to_str().unwrap(), "--duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until(20, || knobs(&env).0 != "-1");
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_file(&file);
    assert_ne!(knobs(&env).0, "-1", "never held");
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(knobs(&env), ("-1".to_string(), "3".to_string()));
}

/// Knobs someone holds: "deep" would be the kernel's lease at their
/// limit, and the probe's put-back would take their value for the
/// original (two probes at once left the knobs held, with nothing saved).
#[test]
fn knobs_someone_holds_are_not_probed_over() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env_abi(Some("intel_idle"), Abi::Queue);
    let f = file.to_str().unwrap();
    env.fx.put("block/vda/queue/cpu_lat_limit_us", "20");
    let r = env.run(&["probe", f, "--duration", "1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("block/vda/queue/cpu_lat_limit_us is 20, not -1");
    assert_eq!(knobs(&env), ("20".to_string(), "3".to_string()));
    // apply's (or a killed probe's) saved entry: restore first
    env.fx.put("block/vda/queue/cpu_lat_limit_us", "-1");
    saved_for_vda(&env, "block/vda/queue/cpu_lat_limit_us", "-1");
    let r = env.run(&["probe", f, "--duration", "1"]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("`blkqos restore --device vda` first");
}

#[test]
fn a_second_probe_on_the_same_state_is_refused() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env_abi(Some("intel_idle"), Abi::Queue);
    let f = file.to_str().unwrap();
    let mut first = env
        .cmd()
        .args(["probe", f, "--duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until(20, || env.state.join("probe.lock").exists());
    std::thread::sleep(Duration::from_millis(200));
    let r = env.run(&["probe", f, "--duration", "1"]);
    // on the child's pid, which has not been waited for
    let _ = kill_process(Pid::from_child(&first), Signal::TERM);
    first.wait().unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("another blkqos probe is running");
    assert_eq!(knobs(&env), ("-1".to_string(), "3".to_string()));
}

#[test]
fn a_knob_that_cannot_be_put_back_keeps_its_saved_original_for_restore() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env_abi(Some("intel_idle"), Abi::Queue);
    // the second write to the timeout is the first put-back
    let out = env
        .faulty_cmd("cpu_lat_timeout_ms", "2", libc::EIO)
        .args([
            "probe",
            file.to_str().unwrap(),
            "--duration",
            "1",
            "--timeout",
            "9",
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("`blkqos restore` puts them back"), "{err}");
    assert_ne!(
        knobs(&env).1,
        "3",
        "the timeout c1 or the lease wrote is left"
    );
    let saved = env.state_json()["saved"].clone();
    assert_eq!(
        saved["block/vda/queue/cpu_lat_timeout_ms"]["original"], "3",
        "{saved:#}"
    );
    let r = env.run(&["restore"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(knobs(&env), ("-1".to_string(), "3".to_string()));
}

#[test]
fn a_sparse_file_is_refused_it_would_be_read_without_io() {
    if !common::is_root("the probe runs as root") {
        return;
    }
    let (env, file, _) = env(Some("intel_idle"));
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(64 << 20).unwrap();
    drop(f);
    let r = env.run(&["probe", file.to_str().unwrap(), "--duration", "1"]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, 2, "{}", r.stderr);
    r.assert_stderr_has("has a hole or an unwritten (fallocated) extent at byte 1048576");
}
