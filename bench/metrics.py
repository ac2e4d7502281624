#!/usr/bin/env python3
"""The cost of one `blkqos metrics` run (what blkqos-metrics.timer starts
every 15 s): wall time and peak RSS on a fake tree of N NVMe disks on 8
CPUs of the patched kernel, leases live on half of them, to stdout and with
--output (the atomic textfile write).

Usage: bench/metrics.py [N ...] [--runs R] [--json FILE]   (default N: 1000)

Measured as bench/cli.py measures (GNU time, median wall of R runs, largest
peak RSS; trees in /dev/shm). Prints a Markdown table.
"""
import os
import subprocess
import tempfile

from cli import BIN, MKFIX, PROFILE, SHM, args, measure, report


def measure_size(n, runs):
    with tempfile.TemporaryDirectory(dir=SHM) as tmp:
        sysfs = os.path.join(tmp, "sys")
        subprocess.run([MKFIX, sysfs, f"nvme:{n}", "queue"], check=True, stdout=subprocess.DEVNULL)
        for cpu in range(0, 8, 2):
            for name, value in (("limit_us", "4"), ("left_us", "2500")):
                with open(os.path.join(sysfs, f"devices/system/cpu/cpu{cpu}/cpuidle/cpu_lat_lease_{name}"), "w") as f:
                    f.write(value + "\n")
        base = [BIN, "--log", "stderr", "--sysfs", sysfs, "--state-dir", os.path.join(tmp, "state")]
        out = os.path.join(tmp, "textfile", "blkqos.prom")
        os.mkdir(os.path.dirname(out))
        return measure([
            ("metrics (stdout)", base + ["metrics", PROFILE], [], []),
            ("metrics --output FILE", base + ["metrics", PROFILE, "--output", out], [], []),
        ], runs)


def main():
    report("blkqos metrics cost", args([1000]), measure_size, {})


if __name__ == "__main__":
    main()
