//! Runs killed half-way and runs racing each other: the state file stays
//! valid, restore finds the true originals, racing runs end where one run
//! would have.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::fixture::Fixture;
use common::{Env, NVME_AUTO};
use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn many_nvme(n: u32) -> Env {
    Env::with(|root| {
        let mut f = Fixture::new(root, 4, Abi::Queue);
        for i in 0..n {
            f.nvme(i, "SAMSUNG MZQL21T9HCJR-00A07", &format!("S64GNE0R{i:06}"));
        }
        f
    })
}

/// Every knob value of the tree, by disk.
fn knobs(env: &Env, n: u32) -> BTreeMap<String, (String, String)> {
    (0..n)
        .map(|i| {
            let d = format!("nvme{i}n1");
            let v = |k: &str| env.get(&format!("block/{d}/queue/{k}"));
            let pair = (v("cpu_lat_limit_us"), v("cpu_lat_timeout_ms"));
            (d, pair)
        })
        .collect()
}

fn quiet(mut c: std::process::Command) -> Child {
    // Hundreds of runs queue for the lock here; on a loaded machine the last
    // may wait longer than the default 10 s and give up (exit 3) by design.
    c.env("BLKQOS_LOCK_TIMEOUT", "300")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn an_apply_killed_at_any_point_leaves_a_valid_state_that_restore_undoes() {
    const DISKS: u32 = 300;
    let env = many_nvme(DISKS);
    let p = env.profile("p.toml", NVME_AUTO);
    let before = knobs(&env, DISKS);
    // The kills are spread over a window that adapts to how long a run
    // takes right now: the other tests of this binary load the machine at
    // first and then finish, so one timing taken up front would send most
    // kills after the end of the run (CI did: 8 of 40 landed).
    let t = Instant::now();
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let mut window = t.elapsed();
    assert_eq!(env.run(&["restore"]).code, 0);
    let mut seed: u64 = 0x5eed;
    let (mut mid_run, mut half_tuned) = (0, 0);
    // The latest delays seen to leave the tree untouched and fully tuned:
    // every other kill is aimed between them, where the writes are, so a
    // write phase short against the whole run is still hit.
    let (mut untouched, mut tuned) = (Duration::ZERO, window);
    let mut round = 0;
    // at least 40 kill points, whatever the targets' pace
    while (round < 40 || mid_run < 10 || half_tuned < 3) && round < 300 {
        round += 1;
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (seed >> 11) as f64 / (1u64 << 53) as f64;
        let delay = if round % 2 == 1 {
            window.mul_f64(u)
        } else {
            let (a, b) = (untouched.min(tuned), untouched.max(tuned));
            a + (b - a).mul_f64(u)
        };
        let mut c = env.cmd();
        c.args(["apply", p.to_str().unwrap()]);
        let mut child = quiet(c);
        std::thread::sleep(delay);
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap();
        child.wait().unwrap();
        if finished {
            window = window.mul_f64(0.8);
        } else {
            mid_run += 1;
            window = window.mul_f64(1.05);
        }
        let now = knobs(&env, DISKS);
        let changed = now.iter().filter(|(d, v)| before[*d] != **v).count();
        match changed {
            0 if !finished => untouched = delay,
            0 => {}
            n if n == DISKS as usize => tuned = delay,
            _ => half_tuned += 1,
        }
        let state = env.state.join("state.json");
        if state.exists() {
            let text = std::fs::read_to_string(&state).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("round {round}: state not JSON ({e})"));
            for (path, saved) in v["saved"].as_object().unwrap() {
                let want = if path.ends_with("limit_us") {
                    "-1"
                } else {
                    "3"
                };
                assert_eq!(saved["original"], want, "round {round}: {path}");
            }
        }
        let r = env.run(&["restore"]);
        assert_eq!(r.code, 0, "round {round}: {}", r.stderr);
        assert!(knobs(&env, DISKS) == before, "round {round}: not restored");
    }
    assert!(
        mid_run >= 10 && half_tuned >= 3,
        "in {round} rounds {mid_run} kills landed mid-run, {half_tuned} mid-write"
    );
}

#[test]
fn two_hundred_udev_events_and_five_applies_at_once_end_as_one_apply() {
    const DISKS: u32 = 200;
    let env = many_nvme(DISKS);
    let serial = many_nvme(DISKS);
    let p = env.profile("p.toml", NVME_AUTO);
    let sp = serial.profile("p.toml", NVME_AUTO);
    assert_eq!(serial.run(&["apply", sp.to_str().unwrap()]).code, 0);

    let mut children: Vec<Child> = Vec::new();
    for i in 0..DISKS {
        let devpath = format!("/{}", env.fx.dir_of(&format!("nvme{i}n1")));
        let mut c = env.cmd();
        c.args([
            "udev",
            "--action",
            "add",
            "--devpath",
            &devpath,
            p.to_str().unwrap(),
        ]);
        children.push(quiet(c));
        if i % 40 == 0 {
            let mut c = env.cmd();
            c.args(["apply", p.to_str().unwrap()]);
            children.push(quiet(c));
        }
    }
    assert_eq!(children.len(), 205);
    let deadline = Instant::now() + Duration::from_secs(300);
    for mut c in children {
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                assert!(status.success(), "a run failed: {status}");
                break;
            }
            assert!(Instant::now() < deadline, "runs did not finish");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(knobs(&env, DISKS), knobs(&serial, DISKS));
    let state = env.state_json();
    let saved = state["saved"].as_object().unwrap();
    assert_eq!(saved.len(), DISKS as usize, "one original per disk");
    assert!(
        saved.values().all(|s| s["original"] == "-1"),
        "the true originals, not a value another run wrote"
    );
    assert_eq!(env.run(&["restore"]).code, 0);
    assert!(
        knobs(&env, DISKS)
            .values()
            .all(|(l, t)| l == "-1" && t == "3")
    );
}
