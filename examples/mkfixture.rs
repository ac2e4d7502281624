//! Build a fake sysfs tree: `cargo run --example mkfixture -- DIR [zoo|nvme:N] [queue|disk|none]`.
//! Used by the benchmarks and the Ansible role's tests.

use blkqos::abi::Abi;
#[path = "../tests/support/fixture.rs"]
#[allow(dead_code)]
mod fixture;

use fixture::Fixture;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: mkfixture DIR [zoo|nvme:N] [queue|disk|none]");
        return ExitCode::from(2);
    };
    let abi = match args.get(2).map(String::as_str).unwrap_or("queue") {
        "queue" => Abi::Queue,
        "disk" => Abi::Disk,
        "none" => Abi::None,
        other => {
            eprintln!("mkfixture: unknown kernel ABI {other:?}");
            return ExitCode::from(2);
        }
    };
    match args.get(1).map(String::as_str).unwrap_or("zoo") {
        "zoo" => {
            Fixture::zoo(dir, abi);
        }
        spec => {
            let Some(n) = spec
                .strip_prefix("nvme:")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                eprintln!("mkfixture: expected zoo or nvme:N, got {spec:?}");
                return ExitCode::from(2);
            };
            let mut f = Fixture::new(dir, 8, abi);
            for i in 0..n {
                f.nvme(i, "SAMSUNG MZQL21T9HCJR-00A07", &format!("S64GNE0R{i:06}"));
            }
        }
    }
    ExitCode::SUCCESS
}
