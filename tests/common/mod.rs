//! Shared helpers: a fake sysfs tree plus a way to run the real binary on it.
#![allow(dead_code)]

use blkqos::abi::Abi;
#[path = "../support/fixture.rs"]
pub mod fixture;

use fixture::Fixture;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Env {
    _dir: tempfile::TempDir,
    pub fx: Fixture,
    pub state: PathBuf,
    pub work: PathBuf,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Assert that stderr holds `needle`, showing all of stderr when not.
    pub fn assert_stderr_has(&self, needle: &str) {
        assert!(
            self.stderr.contains(needle),
            "{needle:?} not in stderr:\n{}",
            self.stderr
        );
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

impl Env {
    pub fn zoo(abi: Abi) -> Env {
        Env::with(|root| Fixture::zoo(root, abi))
    }

    pub fn with(build: impl FnOnce(&Path) -> Fixture) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let fx = build(&dir.path().join("sys"));
        let state = dir.path().join("run/blkqos");
        let work = dir.path().to_path_buf();
        Env {
            _dir: dir,
            fx,
            state,
            work,
        }
    }

    pub fn profile(&self, name: &str, text: &str) -> PathBuf {
        let p = self.work.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn cmd(&self) -> Command {
        let mut c = self.bare_cmd();
        c.arg("--sysfs").arg(self.fx.root());
        c
    }

    /// The binary on this state directory, the sysfs root left to the caller.
    pub fn bare_cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_blkqos"));
        c.arg("--state-dir").arg(&self.state);
        c.env_remove("BLKQOS_SYSFS")
            .env_remove("BLKQOS_STATE_DIR")
            .env("BLKQOS_LOG", "stderr")
            .env("NO_COLOR", "1");
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let out: Output = self.cmd().args(args).output().unwrap();
        Run::from(out)
    }

    /// The binary with the LD_PRELOAD shim (tests/faults/inject.c) failing
    /// the writes numbered in `at` ("3,5") with `errno`, counting the
    /// writes to files whose path holds one of the `|`-separated `matches`:
    /// a real failed write(2), on a tree that reads as sysfs does.
    pub fn faulty_cmd(&self, matches: &str, at: &str, errno: i32) -> Command {
        let mut c = self.cmd();
        c.env("LD_PRELOAD", fault_shim())
            .env("BLKQOS_FAULT_MATCH", matches)
            .env("BLKQOS_FAULT_AT", at)
            .env("BLKQOS_FAULT_ERRNO", errno.to_string());
        c
    }

    /// The binary with the shim holding the writes numbered in `at` to a
    /// file whose path holds `matches`, until `gate` is removed (the shim
    /// creates `gate.held` when it holds one): another run goes on while
    /// this one is inside its write, with its locks taken.
    pub fn held_cmd(&self, matches: &str, at: &str, gate: &Path) -> Command {
        std::fs::write(gate, "").unwrap();
        let mut c = self.cmd();
        c.env("LD_PRELOAD", fault_shim())
            .env("BLKQOS_FAULT_MATCH", matches)
            .env("BLKQOS_FAULT_AT", at)
            .env("BLKQOS_FAULT_HOLD", gate);
        c
    }

    /// Run with `--sysfs root` instead of the fixture's tree.
    pub fn run_in(&self, root: &Path, args: &[&str]) -> Run {
        let out: Output = self
            .bare_cmd()
            .arg("--sysfs")
            .arg(root)
            .args(args)
            .output()
            .unwrap();
        Run::from(out)
    }
}

/// The fault injection shim, built once per test binary.
pub fn fault_shim() -> &'static PathBuf {
    static SHIM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SHIM.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("inject-{}.so", std::process::id()));
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/faults/inject.c");
        let status = Command::new("gcc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
            .arg(&out)
            .arg(src)
            .arg("-ldl")
            .status()
            .expect("gcc (the fault injection shim is C)");
        assert!(status.success(), "building the shim failed");
        out
    })
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Env {
    /// The saved state the binary wrote.
    pub fn state_json(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.state.join("state.json")).unwrap())
            .unwrap()
    }

    pub fn get(&self, rel: &str) -> String {
        self.fx.get(rel)
    }

    /// Every regular file under the tree with its content: to prove nothing changed.
    pub fn snapshot(&self) -> Vec<(PathBuf, Vec<u8>)> {
        fn walk(p: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            for e in std::fs::read_dir(p).unwrap() {
                let e = e.unwrap();
                let ft = e.file_type().unwrap();
                if ft.is_dir() {
                    walk(&e.path(), out);
                } else if ft.is_file() {
                    out.push((e.path(), std::fs::read(e.path()).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(self.fx.root(), &mut out);
        out.sort();
        out
    }
}

/// The device named `name` in a `list --json` document.
pub fn device<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed"))
}

/// Paths of all changes in an apply/restore/verify JSON document.
pub fn change_paths(doc: &Value) -> Vec<String> {
    let mut v: Vec<String> = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| {
            d["changes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["path"].as_str().unwrap().to_string())
        })
        .collect();
    v.sort();
    v
}

/// One rule for nvme0n1 alone, at 10 us.
pub const NVME0_ONLY: &str =
    "[[rule]]\nname = \"one\"\nmatch = { name = \"nvme0n1\" }\ncpu_lat_limit_us = 10\n";

pub const NVME_AUTO: &str = r#"
[defaults]
cpu_lat_timeout_ms = 3

[[rule]]
name = "nvme"
match = { transport = "nvme" }
cpu_lat_limit_us = "auto"
"#;

/// NVMe "auto" with a queue attribute, md arrays at 2 us, SATA/SAS SSDs at 20 us.
pub const MIXED: &str = r#"
[defaults]
cpu_lat_timeout_ms = 3

[[rule]]
name = "raid"
match = { name = "md*" }
cpu_lat_limit_us = 2
cpu_lat_timeout_ms = 10

[[rule]]
name = "nvme"
match = { transport = "nvme" }
cpu_lat_limit_us = "auto"

[rule.queue]
read_ahead_kb = 256

[[rule]]
name = "ssd"
match = { transport = ["sata", "sas"], rotational = false }
cpu_lat_limit_us = 20
"#;

/// Runs that could hang (a held lock, a FIFO) are bounded here so that a
/// regression fails the test instead of hanging it: `None` when `cmd` had
/// not ended after `limit` (it is killed then).
pub fn run_within(mut cmd: Command, limit: std::time::Duration) -> Option<Run> {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Some(Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// True when running as root; tests of root-only behaviour say why they skip.
pub fn is_root(why: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("skipped: not root, so {why}");
    }
    root
}
