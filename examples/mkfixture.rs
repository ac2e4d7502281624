//! Build a fake sysfs tree: `cargo run --example mkfixture -- DIR [zoo|nvme:N] [queue|disk|none]`.
//! Used by the benchmarks and the Ansible role's tests.

#![deny(unsafe_code)]

use blkqos::abi::Abi;
#[path = "../tests/support/fixture.rs"]
#[allow(dead_code)]
mod fixture;

use fixture::Fixture;
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "usage: mkfixture DIR [zoo|nvme:N] [queue|disk|none]

Builds a fake sysfs tree in DIR, laid out as Linux 6.12 lays it out:
  zoo      NVMe, NVMe multipath, SATA, SAS, USB, virtio, md, dm, loop, zram
           (the default)
  nvme:N   N plain NVMe disks
with the block queue knobs in queue/ (queue, the default), beside the
disk (disk), or none. Use -- before a DIR that starts with -.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    ExitCode::from(run(&args, &mut std::io::stdout(), &mut std::io::stderr()))
}

/// The command with its arguments; what it prints goes to `out` and `err`.
/// Its messages are best-effort: a closed stdout or stderr must not turn
/// into a panic in a helper that only builds test trees.
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let mut words: Vec<&str> = Vec::new();
    let mut options = true;
    for a in args {
        match a.as_str() {
            "--" if options => options = false,
            "-h" | "--help" if options => {
                let _ = writeln!(out, "{USAGE}");
                return 0;
            }
            // an option is not a directory to build a tree in
            o if options && o.starts_with('-') && o.len() > 1 => {
                let _ = writeln!(err, "mkfixture: unknown option {o:?}\n{USAGE}");
                return 2;
            }
            w => words.push(w),
        }
    }
    let (dir, shape, abi) = match words.as_slice() {
        [dir] => (*dir, "zoo", "queue"),
        [dir, shape] => (*dir, *shape, "queue"),
        [dir, shape, abi] => (*dir, *shape, *abi),
        _ => {
            let _ = writeln!(err, "{USAGE}");
            return 2;
        }
    };
    let abi = match abi {
        "queue" => Abi::Queue,
        "disk" => Abi::Disk,
        "none" => Abi::None,
        other => {
            let _ = writeln!(
                err,
                "mkfixture: unknown kernel ABI {other:?}; expected queue, disk or none"
            );
            return 2;
        }
    };
    match shape {
        "zoo" => {
            Fixture::zoo(dir, abi);
        }
        spec => {
            let Some(n) = spec
                .strip_prefix("nvme:")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                let _ = writeln!(err, "mkfixture: expected zoo or nvme:N, got {spec:?}");
                return 2;
            };
            let mut f = Fixture::new(dir, 8, abi);
            for i in 0..n {
                f.nvme(i, "SAMSUNG MZQL21T9HCJR-00A07", &format!("S64GNE0R{i:06}"));
            }
        }
    }
    0
}
