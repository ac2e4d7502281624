#!/usr/bin/env python3
"""CLI apply cost: wall time and peak RSS of blkqos on fake trees of N NVMe disks.

Usage: bench/apply_cost.py [N ...]   (default: 1 1000)
Needs GNU time (apt-get install time). Builds the release binary and the fixture tool, then for each N times
`apply --dry-run`, the first `apply` (N writes), a no-op second `apply`,
`restore`, and one `udev` add and remove event for one of the N disks (with
the other N-1 tuned and their originals saved, as on a running host), each
the median of --runs runs. Prints a Markdown table.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "blkqos")
MKFIX = os.path.join(ROOT, "target", "release", "examples", "mkfixture")
PROFILE = os.path.join(ROOT, "config", "blkqos.toml")


def spawn(cmd):
    """Wall seconds and peak RSS (KiB) of one run, from GNU time: Linux carries
    the pre-exec RSS of the forking process into ru_maxrss, so the parent must
    be small (GNU time), not this interpreter."""
    with tempfile.NamedTemporaryFile("r") as out:
        t0 = time.perf_counter()
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name, *cmd], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        return wall, int(out.read().split()[-1])


def split_and(cmd):
    """["a", "&&", "b"] -> [["a"], ["b"]]: reset steps run in order."""
    steps, cur = [], []
    for word in cmd:
        if word == "&&":
            steps.append(cur)
            cur = []
        else:
            cur.append(word)
    return steps + [cur] if cur else steps


def measure_case(n, runs):
    rows = []
    # The state lives on tmpfs like /run/blkqos (its fsyncs cost nothing there).
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=shm) as run:
        sysfs, state = os.path.join(tmp, "sys"), os.path.join(run, "blkqos")
        subprocess.run([MKFIX, sysfs, f"nvme:{n}", "queue"], check=True)
        base = [BIN, "--sysfs", sysfs, "--state-dir", state]
        devpath = os.path.realpath(os.path.join(sysfs, "class/block/nvme0n1"))[len(os.path.realpath(sysfs)):]

        def udev(action):
            return base + ["udev", "--action", action, "--devpath", devpath, PROFILE]

        cases = [
            ("apply --dry-run", base + ["apply", PROFILE, "--dry-run", "--json"], None),
            ("apply (writes)", base + ["apply", PROFILE, "--json"], base + ["restore"]),
            ("apply (no-op)", base + ["apply", PROFILE, "--json"], None),
            ("restore", base + ["restore", "--json"], base + ["apply", PROFILE]),
            # as on a running host: every other disk tuned, its originals saved
            ("udev add (one event)", udev("add"), [*base, "apply", PROFILE, "&&", *base, "restore", "--device", "nvme0n1"]),
            ("udev remove (one event)", udev("remove"), udev("add")),
        ]
        for name, cmd, reset in cases:
            walls, rss = [], []
            for _ in range(runs):
                for step in split_and(reset or []):
                    subprocess.run(step, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wall, peak_kib = spawn(cmd)
                walls.append(wall)
                rss.append(peak_kib)
            rows.append((n, name, statistics.median(walls) * 1000, max(rss) / 1024))
    return rows


def main():
    # udev events would log to syslog or the kernel log of the machine
    os.environ["BLKQOS_LOG"] = "stderr"
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="*", type=int, default=[1, 1000])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "blkqos", "--example", "mkfixture"], cwd=ROOT, check=True)
    print(f"blkqos apply cost, {a.runs} runs each (median wall, max peak RSS); nproc={os.cpu_count()}")
    print()
    print("| disks | command | wall (ms) | peak RSS (MiB) |")
    print("|---:|---|---:|---:|")
    floor = statistics.median(spawn(["true"])[0] for _ in range(max(a.runs, 9))) * 1000
    print(f"| - | `true` (the cost of starting any process here) | {floor:.1f} | - |")
    for n in a.sizes:
        for disks, name, wall_ms, rss_mib in measure_case(n, a.runs):
            print(f"| {disks} | {name} | {wall_ms:.1f} | {rss_mib:.1f} |")


if __name__ == "__main__":
    main()
