//! Reads of the sysfs tree get the treatment writes get: a FIFO planted as
//! an attribute is refused instead of waited on, and a link that leads out
//! of the root is not followed, whoever runs the command.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::fixture::Fixture;
use common::{Env, NVME_AUTO, run_within};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

const MODEL: &str = "block/nvme0n1/device/model";
const LIMIT: &str = "block/nvme0n1/queue/cpu_lat_limit_us";

fn two_nvme() -> Env {
    Env::with(|root| {
        let mut f = Fixture::new(root, 2, Abi::Queue);
        f.nvme(0, "Test NVMe", "S0");
        f.nvme(1, "Test NVMe", "S1");
        f
    })
}

fn mkfifo(p: &Path) {
    fs::remove_file(p).unwrap();
    let mode = rustix::fs::Mode::from_raw_mode(0o600);
    rustix::fs::mkfifoat(rustix::fs::CWD, p, mode).expect("mkfifo");
}

#[test]
fn a_fifo_as_an_attribute_hangs_no_command() {
    let env = two_nvme();
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    mkfifo(&env.fx.root().join(MODEL));
    mkfifo(&env.fx.root().join(LIMIT));
    let before = env.snapshot();
    for (args, code) in [
        (vec!["list"], 0),
        (vec!["list", "--json"], 0),
        (vec!["status"], 0),
        (vec!["explain", p, "nvme1n1"], 0),
        // the FIFO is a value the plan depends on: named, and left alone
        (vec!["verify", p], 2),
        (vec!["apply", p, "--dry-run"], 1),
    ] {
        let mut cmd = env.cmd();
        cmd.args(&args);
        let r = run_within(cmd, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{args:?} hung on a FIFO attribute"));
        assert_eq!(r.code, code, "{args:?}: {}{}", r.stdout, r.stderr);
        if code != 0 {
            r.assert_stderr_has(LIMIT);
            r.assert_stderr_has("FIFO");
        }
        assert_eq!(env.snapshot(), before, "{args:?}: nothing written");
    }
    // apply leaves the FIFO alone and tunes the other disk: a partial run
    let mut cmd = env.cmd();
    cmd.args(["apply", p]);
    let r = run_within(cmd, Duration::from_secs(20)).expect("apply hung on a FIFO attribute");
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has(LIMIT);
    r.assert_stderr_has("FIFO");
    assert_eq!(env.get("block/nvme1n1/queue/cpu_lat_limit_us"), "4");
}

#[test]
fn a_link_out_of_the_root_is_not_read() {
    let env = two_nvme();
    let p = env.profile("p.toml", NVME_AUTO);
    let p = p.to_str().unwrap();
    let secret = env.work.join("secret");
    fs::write(&secret, "TOP-SECRET-MODEL\n").unwrap();
    let limit = env.work.join("limit");
    fs::write(&limit, "31337\n").unwrap();
    let model = env.fx.root().join(MODEL);
    fs::remove_file(&model).unwrap();
    symlink(&secret, &model).unwrap();
    // relative, climbing out with ..: as far out as an absolute one
    let serial = env.fx.root().join("block/nvme0n1/device/serial");
    fs::remove_file(&serial).unwrap();
    let depth = fs::canonicalize(serial.parent().unwrap())
        .unwrap()
        .components()
        .count();
    symlink(
        format!("{}{}", "../".repeat(depth), secret.display()),
        &serial,
    )
    .unwrap();
    let knob = env.fx.root().join(LIMIT);
    fs::remove_file(&knob).unwrap();
    symlink(&limit, &knob).unwrap();
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["status", "--json"],
        vec!["explain", p, "nvme0n1", "--json"],
        vec!["apply", p, "--dry-run", "--json"],
        vec!["verify", p, "--json"],
    ] {
        let r = env.run(&args);
        for leaked in ["TOP-SECRET-MODEL", "31337"] {
            assert!(
                !r.stdout.contains(leaked) && !r.stderr.contains(leaked),
                "{args:?} read {leaked} from outside the root: {}{}",
                r.stdout,
                r.stderr
            );
        }
    }
    // the knob is a value the plan needs: refused, and said why
    let r = env.run(&["apply", p, "--dry-run"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_stderr_has(LIMIT);
    r.assert_stderr_has("outside the sysfs root");
    assert_eq!(fs::read_to_string(&limit).unwrap(), "31337\n");
}
