//! `blkqos metrics` on fake trees: the families and values read from the
//! tree, the kernels without the knobs or the lease, a missing profile, an
//! unreadable state, and `--output`.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, NVME_AUTO, Run, is_root};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::process::CommandExt;

/// Every sample: `name{labels}` -> value; and every family's TYPE.
struct Exposition {
    samples: BTreeMap<String, String>,
    types: BTreeMap<String, String>,
}

fn parse(text: &str) -> Exposition {
    let mut samples = BTreeMap::new();
    let mut types = BTreeMap::new();
    let mut helped = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.push(rest.split(' ').next().unwrap().to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(
                helped.last().map(String::as_str),
                Some(name),
                "HELP before TYPE"
            );
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "{name} twice"
            );
            current = name.to_string();
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let name = series.split('{').next().unwrap();
            assert_eq!(current, name, "{line}: grouped under its TYPE");
            assert!(name.starts_with("blkqos_"), "{line}");
            assert!(
                samples
                    .insert(series.to_string(), value.to_string())
                    .is_none()
            );
        }
    }
    for (name, kind) in &types {
        assert_eq!(
            kind == "counter",
            name.ends_with("_total"),
            "{name} is a {kind}"
        );
    }
    Exposition { samples, types }
}

impl Exposition {
    fn get(&self, series: &str) -> &str {
        self.samples
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in {:#?}", self.samples.keys()))
    }

    fn has_family(&self, prefix: &str) -> bool {
        self.types.keys().any(|n| n.starts_with(prefix))
    }
}

fn metrics(env: &Env, args: &[&str]) -> (Run, Exposition) {
    let mut all = vec!["metrics"];
    all.extend_from_slice(args);
    let r = env.run(&all);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let e = parse(&r.stdout);
    (r, e)
}

#[test]
fn a_patched_kernel_shows_knobs_rules_leases_idle_and_io() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    env.fx.put("block/nvme0n1/queue/cpu_lat_limit_us", "4");
    env.fx.put("block/nvme1n1/queue/cpu_lat_limit_us", "auto");
    env.fx.put("block/nvme0n1/queue/cpu_lat_timeout_ms", "10");
    env.fx.set_lease(1, Some((4, 2500)));
    env.fx.set_stat("nvme0n1", 1000, 250);
    let (r, m) = metrics(&env, &[p.to_str().unwrap()]);
    assert_eq!(r.stderr, "");

    assert_eq!(
        m.get(r#"blkqos_device_info{device="nvme0n1",kind="disk",transport="nvme",abi="queue",rule="nvme"}"#),
        "1"
    );
    assert_eq!(
        m.get(
            r#"blkqos_device_info{device="sdb",kind="disk",transport="sata",abi="queue",rule=""}"#
        ),
        "1"
    );
    // a multipath head's paths hold its knobs, and take its rule
    assert_eq!(
        m.get(r#"blkqos_device_info{device="nvme4c4n1",kind="nvme-path",transport="nvme",abi="queue",rule="nvme"}"#),
        "1"
    );
    let dev = |family: &str, d: &str| format!("{family}{{device=\"{d}\"}}");
    // (family, device, value); None: no sample
    let by_device = [
        (
            "blkqos_device_cpu_lat_limit_seconds",
            "nvme0n1",
            Some("0.000004"),
        ),
        // off is its own gauge, not -1 seconds
        ("blkqos_device_cpu_lat_limit_seconds", "sda", None),
        ("blkqos_device_cpu_lat_limit_off", "sda", Some("1")),
        ("blkqos_device_cpu_lat_limit_off", "nvme0n1", Some("0")),
        ("blkqos_device_cpu_lat_limit_auto", "nvme1n1", Some("1")),
        ("blkqos_device_cpu_lat_limit_seconds", "nvme1n1", None),
        ("blkqos_device_cpu_lat_limit_auto", "nvme0n1", Some("0")),
        (
            "blkqos_device_cpu_lat_timeout_seconds",
            "nvme0n1",
            Some("0.01"),
        ),
        (
            "blkqos_device_cpu_lat_timeout_seconds",
            "sda",
            Some("0.003"),
        ),
        // md0 is bio-based: no knobs, but I/O counters
        ("blkqos_device_cpu_lat_timeout_seconds", "md0", None),
        ("blkqos_device_reads_completed_total", "md0", Some("0")),
        (
            "blkqos_device_reads_completed_total",
            "nvme0n1",
            Some("1000"),
        ),
        (
            "blkqos_device_writes_completed_total",
            "nvme0n1",
            Some("250"),
        ),
        ("blkqos_device_read_bytes_total", "nvme0n1", Some("4096000")),
        (
            "blkqos_device_written_bytes_total",
            "nvme0n1",
            Some("1024000"),
        ),
        (
            "blkqos_device_io_time_seconds_total",
            "nvme0n1",
            Some("1.25"),
        ),
        (
            "blkqos_device_io_time_weighted_seconds_total",
            "nvme0n1",
            Some("1.25"),
        ),
    ];
    let c6 = |family: &str| format!("{family}{{cpu=\"3\",index=\"3\",state=\"C6\"}}");
    let by_cpu = [
        (r#"blkqos_cpu_lease_held{cpu="1"}"#.to_string(), Some("1")),
        (
            r#"blkqos_cpu_lease_limit_seconds{cpu="1"}"#.to_string(),
            Some("0.000004"),
        ),
        (
            r#"blkqos_cpu_lease_remaining_seconds{cpu="1"}"#.to_string(),
            Some("0.0025"),
        ),
        (r#"blkqos_cpu_lease_held{cpu="0"}"#.to_string(), Some("0")),
        (
            r#"blkqos_cpu_lease_limit_seconds{cpu="0"}"#.to_string(),
            None,
        ),
        (c6("blkqos_cpu_idle_state_usage_total"), Some("4000")),
        (c6("blkqos_cpu_idle_state_time_seconds_total"), Some("1")),
        (c6("blkqos_cpu_idle_state_above_total"), Some("30")),
        (c6("blkqos_cpu_idle_state_below_total"), Some("60")),
        (
            c6("blkqos_cpu_idle_state_exit_latency_seconds"),
            Some("0.00017"),
        ),
        (
            c6("blkqos_cpu_idle_state_target_residency_seconds"),
            Some("0.0006"),
        ),
        (c6("blkqos_cpu_idle_state_disabled"), Some("0")),
    ];
    let series = (by_device.iter())
        .map(|(family, d, want)| (dev(family, d), *want))
        .chain(by_cpu);
    for (series, want) in series {
        match want {
            Some(v) => assert_eq!(m.get(&series), v, "{series}"),
            None => assert!(!m.samples.contains_key(&series), "{series} present"),
        }
    }

    for kind in ["idle-state-disabled", "resume-latency"] {
        assert_eq!(m.get(&format!("blkqos_conflicts{{kind=\"{kind}\"}}")), "0");
    }
    // a --sysfs tree is not the host: what is only looked for on the live
    // system is absent, not zero
    for kind in ["cpu-dma-latency", "udev-rule", "tuned"] {
        let series = format!("blkqos_conflicts{{kind=\"{kind}\"}}");
        assert!(!m.samples.contains_key(&series), "{series} on a fake tree");
    }
    assert!(!m.has_family("blkqos_conflicts_unchecked"));
    assert_eq!(m.get("blkqos_state_readable"), "1");
    assert_eq!(m.get("blkqos_saved_originals"), "0");
    assert_eq!(m.get("blkqos_profile_readable"), "1");
    assert_eq!(
        m.get(&format!(
            "blkqos_build_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )),
        "1"
    );
    assert!(
        m.get("blkqos_scrape_duration_seconds")
            .parse::<f64>()
            .unwrap()
            >= 0.0
    );
}

#[test]
fn conflicts_are_counted_by_kind() {
    let env = Env::zoo(Abi::Queue);
    for cpu in [2, 3] {
        env.fx.put(
            &format!("devices/system/cpu/cpu{cpu}/cpuidle/state3/disable"),
            "1",
        );
    }
    env.fx.put(
        "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us",
        "10",
    );
    let (_, m) = metrics(&env, &["/nonexistent/p.toml"]);
    assert_eq!(
        m.get(r#"blkqos_conflicts{kind="idle-state-disabled"}"#),
        "1"
    );
    assert_eq!(m.get(r#"blkqos_conflicts{kind="resume-latency"}"#), "1");
    assert_eq!(
        m.get(r#"blkqos_cpu_idle_state_disabled{cpu="2",index="3",state="C6"}"#),
        "1"
    );
}

#[test]
fn kernels_without_the_series_have_idle_and_io_but_no_knobs_or_lease() {
    for abi in [Abi::None, Abi::Disk] {
        let env = Env::zoo(abi);
        env.fx.set_stat("nvme0n1", 7, 0);
        let (_, m) = metrics(&env, &["/nonexistent/p.toml"]);
        assert!(
            !m.has_family("blkqos_cpu_lease"),
            "{abi:?}: {:?}",
            m.types.keys()
        );
        assert_eq!(
            m.get(r#"blkqos_device_reads_completed_total{device="nvme0n1"}"#),
            "7"
        );
        assert!(m.has_family("blkqos_cpu_idle_state_time_seconds_total"));
        let knobs = m.has_family("blkqos_device_cpu_lat_limit_off");
        // the RFC layout has the knobs on the disk, and no lease
        assert_eq!(knobs, abi == Abi::Disk, "{abi:?}");
    }
}

#[test]
fn a_missing_profile_leaves_the_rule_empty_and_says_why() {
    let env = Env::zoo(Abi::Queue);
    let (r, m) = metrics(&env, &[env.work.join("missing.toml").to_str().unwrap()]);
    r.assert_stderr_has("missing.toml");
    r.assert_stderr_has("rule label is left empty");
    assert_eq!(m.get("blkqos_profile_readable"), "0");
    assert_eq!(
        m.get(r#"blkqos_device_info{device="nvme0n1",kind="disk",transport="nvme",abi="queue",rule=""}"#),
        "1"
    );
    let bad = env.profile("bad.toml", "[[rule]]\nname = 3\n");
    let (r, m) = metrics(&env, &[bad.to_str().unwrap()]);
    r.assert_stderr_has("bad.toml:2");
    assert_eq!(m.get("blkqos_profile_readable"), "0");
}

#[test]
fn an_unreadable_state_is_a_metric_not_a_failure() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    if is_root("apply first, then read as nobody") {
        assert_eq!(env.run(&["apply", p]).code, 0);
        let (_, m) = metrics(&env, &[p]);
        assert_eq!(m.get("blkqos_state_readable"), "1");
        assert!(m.get("blkqos_saved_originals").parse::<u32>().unwrap() > 0);
        fs::set_permissions(&env.work, fs::Permissions::from_mode(0o755)).unwrap();
        let out = env
            .cmd()
            .uid(65534)
            .gid(65534)
            .args(["metrics", p])
            .output()
            .unwrap();
        assert!(out.status.success());
        let m = parse(&String::from_utf8_lossy(&out.stdout));
        assert!(String::from_utf8_lossy(&out.stderr).contains("state.json"));
        assert_eq!(m.get("blkqos_state_readable"), "0");
        assert!(!m.samples.contains_key("blkqos_saved_originals"));
        assert_eq!(m.get(r#"blkqos_cpu_lease_held{cpu="0"}"#), "0");
    } else {
        // a state that is not blkqos's is unreadable to anyone
        fs::create_dir_all(&env.state).unwrap();
        fs::set_permissions(&env.state, fs::Permissions::from_mode(0o700)).unwrap();
        fs::write(env.state.join("state.json"), "not json").unwrap();
        let (r, m) = metrics(&env, &[p]);
        r.assert_stderr_has("state.json");
        assert_eq!(m.get("blkqos_state_readable"), "0");
    }
}

#[test]
fn output_replaces_the_file_whole_and_mode_0644() {
    let env = Env::zoo(Abi::Queue);
    let dir = env.work.join("textfile");
    fs::create_dir(&dir).unwrap();
    let file = dir.join("blkqos.prom");
    fs::write(&file, "old\n").unwrap();
    let r = env.run(&[
        "metrics",
        "/nonexistent.toml",
        "--output",
        file.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "", "written to the file, not stdout");
    let text = fs::read_to_string(&file).unwrap();
    parse(&text);
    assert!(text.contains("blkqos_cpu_lease_held{cpu=\"0\"} 0\n"));
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["blkqos.prom"], "no temporary left");

    let r = env.run(&[
        "metrics",
        "--output",
        dir.join("no/such/dir.prom").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1);
    r.assert_stderr_has("cannot write the metrics");
}

/// The review's repro: the textfile directory's owner swaps the directory
/// for a link to one of root's; root must not write through it.
#[test]
fn output_through_a_directory_swapped_for_a_link_is_refused() {
    let env = Env::zoo(Abi::Queue);
    let parent = env.work.join("pp");
    let victim = env.work.join("victimdir");
    fs::create_dir_all(parent.join("ne")).unwrap();
    fs::create_dir(&victim).unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o700)).unwrap();
    fs::rename(parent.join("ne"), parent.join("ne.old")).unwrap();
    std::os::unix::fs::symlink(&victim, parent.join("ne")).unwrap();
    let out = parent.join("ne/blkqos.prom");
    let r = env.run(&[
        "metrics",
        "/nonexistent.toml",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "wrote through a link: {}", r.stderr);
    r.assert_stderr_has("symbolic link");
    assert_eq!(
        fs::read_dir(&victim).unwrap().count(),
        0,
        "nothing in the victim"
    );
    // a link higher up is refused too
    let up = env.work.join("up");
    std::os::unix::fs::symlink(&parent, &up).unwrap();
    let r = env.run(&[
        "metrics",
        "/nonexistent.toml",
        "--output",
        up.join("ne.old/blkqos.prom").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "wrote through a link: {}", r.stderr);
    assert_eq!(fs::read_dir(parent.join("ne.old")).unwrap().count(), 0);
}

#[test]
fn output_into_a_world_writable_directory_without_sticky_bit_is_refused() {
    let env = Env::zoo(Abi::Queue);
    let dir = env.work.join("open");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    let r = env.run(&[
        "metrics",
        "/nonexistent.toml",
        "--output",
        dir.join("blkqos.prom").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has("others can write");
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    // sticky (like /tmp): each user removes only their own entries
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
    let r = env.run(&[
        "metrics",
        "/nonexistent.toml",
        "--output",
        dir.join("blkqos.prom").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// The attack's finding: a FIFO, a symbolic link or a device node at FILE
/// became a regular file. Only a regular file is replaced; "-" is stdout.
#[test]
fn output_replaces_only_a_regular_file_and_dash_is_stdout() {
    let env = Env::zoo(Abi::Queue);
    let dir = env.work.join("textfile");
    fs::create_dir(&dir).unwrap();
    let fifo = dir.join("fifo.prom");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success());
    let link = dir.join("link.prom");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    for (path, kind) in [(&fifo, "FIFO"), (&link, "symbolic link")] {
        let r = env.run(&[
            "metrics",
            "/nonexistent.toml",
            "--output",
            path.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 1, "{kind} replaced: {}", r.stderr);
        r.assert_stderr_has(kind);
        r.assert_stderr_has("not a regular file");
    }
    let t = fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(t.is_fifo(), "the FIFO is still one");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 2, "no temporary left");

    let r = env.run(&["metrics", "/nonexistent.toml", "--output", "-"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    parse(&r.stdout);
    assert!(r.stdout.contains("blkqos_cpu_lease_held{cpu=\"0\"} 0\n"));
}

#[test]
fn output_naming_a_directory_with_a_trailing_slash_is_an_error() {
    let env = Env::zoo(Abi::Queue);
    let dir = env.work.join("textfile");
    fs::create_dir(&dir).unwrap();
    let named = format!("{}/new/", dir.display());
    let r = env.run(&["metrics", "/nonexistent.toml", "--output", &named]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has("cannot write the metrics");
    r.assert_stderr_has("names a directory");
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "no file called new");
}

#[test]
fn an_unparseable_idle_counter_is_left_out_not_zero() {
    let env = Env::zoo(Abi::Queue);
    let st = "devices/system/cpu/cpu0/cpuidle/state3";
    env.fx.put(&format!("{st}/usage"), "garbage");
    env.fx.put(&format!("{st}/time"), "");
    env.fx.put(&format!("{st}/disable"), "x");
    let (_, m) = metrics(&env, &["/nonexistent/p.toml"]);
    let c6 = |family: &str| format!("{family}{{cpu=\"0\",index=\"3\",state=\"C6\"}}");
    for family in [
        "blkqos_cpu_idle_state_usage_total",
        "blkqos_cpu_idle_state_time_seconds_total",
        "blkqos_cpu_idle_state_disabled",
    ] {
        assert!(!m.samples.contains_key(&c6(family)), "{family} exported");
    }
    // the state itself and the other CPUs' counters are still there
    assert_eq!(
        m.get(&c6("blkqos_cpu_idle_state_exit_latency_seconds")),
        "0.00017"
    );
    assert_eq!(
        m.get(r#"blkqos_cpu_idle_state_usage_total{cpu="2",index="3",state="C6"}"#),
        "4000"
    );
    let r = env.run(&["status"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let st3 = (r.stdout.lines())
        .find(|l| l.trim_start().starts_with("state3"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    let cells: Vec<&str> = st3.split_whitespace().collect();
    assert_eq!(
        cells[4..],
        ["?", "?"],
        "disabled and idle time unknown: {st3}"
    );
    let j = env.run(&["status", "--json"]).json();
    let cpu0 = (j["devices"].as_array().unwrap().iter())
        .flat_map(|d| d["cpus"].as_array().unwrap().iter())
        .find(|c| c["cpu"] == 0)
        .expect("cpu 0 in status");
    let state = &cpu0["states"][3];
    assert!(state["usage"].is_null(), "{state}");
    assert!(state["time_us"].is_null(), "{state}");
    assert!(state["disabled"].is_null(), "{state}");
}

#[test]
fn a_malformed_lease_is_warned_about_naming_the_file() {
    let env = Env::zoo(Abi::Queue);
    env.fx
        .put("devices/system/cpu/cpu1/cpuidle/cpu_lat_lease_left_us", "x");
    let (r, m) = metrics(&env, &["/nonexistent/p.toml"]);
    r.assert_stderr_has("cpu1/cpuidle/cpu_lat_lease_left_us");
    assert!(!m.samples.contains_key(r#"blkqos_cpu_lease_held{cpu="1"}"#));
    assert_eq!(m.get(r#"blkqos_cpu_lease_held{cpu="0"}"#), "0");
    let r = env.run(&["status"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stderr_has("cpu1/cpuidle/cpu_lat_lease_left_us");
    assert_eq!(
        r.stderr.matches("cpu_lat_lease").count(),
        1,
        "warned once: {}",
        r.stderr
    );
    assert!(r.stdout.contains("cpu1=?"), "{}", r.stdout);
}

/// As a user who cannot look into other processes' fds, the
/// /dev/cpu_dma_latency holders are unknown, not none.
#[test]
fn processes_that_cannot_be_inspected_make_dma_latency_unknown() {
    if !is_root("run as nobody on the live /sys") {
        return;
    }
    let env = Env::zoo(Abi::Queue);
    fs::set_permissions(&env.work, fs::Permissions::from_mode(0o755)).unwrap();
    let run = |args: &[&str]| {
        env.bare_cmd()
            .uid(65534)
            .gid(65534)
            .args(["--sysfs", "/sys"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["metrics", "/nonexistent.toml"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = parse(&String::from_utf8_lossy(&out.stdout));
    assert!(
        !m.samples
            .contains_key(r#"blkqos_conflicts{kind="cpu-dma-latency"}"#),
        "a count of holders although pid 1 could not be inspected"
    );
    let n: u64 = m
        .get(r#"blkqos_conflicts_unchecked{kind="cpu-dma-latency"}"#)
        .parse()
        .unwrap();
    assert!(n >= 1, "pid 1 at least");
    // the kinds it could check are counted
    m.get(r#"blkqos_conflicts{kind="udev-rule"}"#);
    let out = run(&["status"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("could not check") && stderr.contains("/dev/cpu_dma_latency"),
        "{stderr}"
    );
}

/// The dashboard's check passes on an idle machine (no lease held, so no
/// `blkqos_cpu_lease_limit_seconds` sample) given the metric reference in docs/monitoring.md.
#[test]
fn the_dashboard_check_passes_on_an_idle_machine() {
    let env = Env::zoo(Abi::Queue);
    let r = env.run(&["metrics", "/nonexistent.toml"]);
    assert_eq!(r.code, 0);
    assert!(!r.stdout.contains("blkqos_cpu_lease_limit_seconds"));
    let prom = env.work.join("idle.prom");
    fs::write(&prom, &r.stdout).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new("python3")
        .arg(format!("{root}/contrib/grafana/check.py"))
        .arg(format!("{root}/contrib/grafana/blkqos.json"))
        .arg(&prom)
        .arg("--documented")
        .arg(format!("{root}/docs/monitoring.md"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A knob value with an escape sequence (a fake or broken sysfs) is printed
/// escaped, not sent to the terminal.
#[test]
fn control_characters_in_knob_values_are_escaped_in_tables() {
    let env = Env::zoo(Abi::Queue);
    env.fx
        .put("block/nvme0n1/queue/cpu_lat_limit_us", "4\x1b[2J");
    env.fx
        .put("block/nvme0n1/queue/cpu_lat_timeout_ms", "3\x07");
    for cmd in ["list", "status"] {
        let r = env.run(&[cmd]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(!r.stdout.contains('\x1b'), "{cmd}: {}", r.stdout);
        assert!(!r.stdout.contains('\x07'), "{cmd}: {}", r.stdout);
        assert!(r.stdout.contains(r"4\x1b[2J"), "{cmd}: {}", r.stdout);
    }
}
