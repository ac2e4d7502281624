#!/usr/bin/env python3
"""The cost of one `blkqos metrics` run (what blkqos-metrics.timer starts
every 15 s): wall time and peak RSS on a fake tree of N NVMe disks on 8
CPUs of the patched kernel, leases live on half of them, to stdout and with
--output (the atomic textfile write).

Usage: bench/metrics.py [N ...] [--runs R] [--json FILE]   (default N: 1000)

Measured as bench/cli.py measures (GNU time, median wall of R runs, largest
peak RSS; trees in /dev/shm). Prints a Markdown table.
"""
import argparse
import json
import os
import platform
import subprocess
import tempfile

from cli import BIN, MKFIX, PROFILE, ROOT, SHM, measure


def measure_size(n, runs):
    with tempfile.TemporaryDirectory(dir=SHM) as tmp:
        sysfs = os.path.join(tmp, "sys")
        subprocess.run([MKFIX, sysfs, f"nvme:{n}", "queue"], check=True, stdout=subprocess.DEVNULL)
        for cpu in range(0, 8, 2):
            with open(os.path.join(sysfs, f"devices/system/cpu/cpu{cpu}/cpuidle/cpu_lat_lease"), "w") as f:
                f.write("4 2500\n")
        base = [BIN, "--log", "stderr", "--sysfs", sysfs, "--state-dir", os.path.join(tmp, "state")]
        out = os.path.join(tmp, "textfile", "blkqos.prom")
        os.mkdir(os.path.dirname(out))
        return {
            "metrics (stdout)": measure(base + ["metrics", PROFILE], [], runs),
            "metrics --output FILE": measure(base + ["metrics", PROFILE, "--output", out], [], runs),
        }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="*", type=int, default=[1000])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "blkqos", "--example", "mkfixture"],
                   cwd=ROOT, check=True)
    result = {"runs": a.runs, "sizes": {}}
    print(f"blkqos metrics cost, median of {a.runs} runs, max peak RSS; nproc={os.cpu_count()}")
    print()
    print("| disks | command | wall (ms) | peak RSS (MiB) |")
    print("|---:|---|---:|---:|")
    for n in a.sizes:
        rows = measure_size(n, a.runs)
        result["sizes"][str(n)] = rows
        for name, r in rows.items():
            print(f"| {n} | {name} | {r['wall_ms']:.1f} | {r['rss_mib']:.1f} |")
    if a.json:
        result["machine"] = {"nproc": os.cpu_count(), "kernel": platform.release()}
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
