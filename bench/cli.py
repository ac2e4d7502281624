#!/usr/bin/env python3
"""The command's cost: wall time and peak RSS of blkqos on fake trees of N
NVMe disks, next to the floor of doing the same writes with a shell loop.

Usage: bench/cli.py [N ...] [--runs R] [--json FILE]   (default N: 1 100 1000 10000)

For each N: `apply --dry-run`, the first `apply` (N writes), a no-op second
`apply`, `restore`, one `udev` add and remove event for one disk (with the
other N-1 tuned and their originals saved, as on a running host), and the
floors: `sh` writing the same N attribute files in a loop, and one file.
Each figure is the median wall time of R runs and the largest peak RSS (GNU
time: the parent must be small, since Linux carries the forking process's
RSS into a child's ru_maxrss until exec). Trees live in /dev/shm: /sys is
in memory too. Prints a Markdown table; --json writes the figures.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "blkqos")
MKFIX = os.path.join(ROOT, "target", "release", "examples", "mkfixture")
PROFILE = os.path.join(ROOT, "config", "blkqos.toml")
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else None


def spawn(cmd):
    """Wall seconds and peak RSS (KiB) of one run."""
    with tempfile.NamedTemporaryFile("r") as out:
        t0 = time.perf_counter()
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name, *cmd], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        return wall, int(out.read().split()[-1])


def run_steps(steps):
    for step in steps:
        subprocess.run(step, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# (command, its floor): the ratios bench/README.md reports
RATIOS = [("apply (writes)", "floor: sh loop writing the same files"),
          ("udev add (one event)", "floor: sh writing one file")]


def measure(cases, runs):
    """Each case's median wall time and largest peak RSS over `runs` rounds.
    A round runs every case once, in turn, so that a machine that speeds up
    or slows down over the minutes a size takes moves them all alike: a
    ratio of two cases (a command over its floor) holds still."""
    walls = {name: [] for name, *_ in cases}
    rss = {name: [] for name, *_ in cases}
    for _ in range(runs):
        for name, cmd, reset, after in cases:
            run_steps(reset)
            wall, peak = spawn(cmd)
            run_steps(after)
            walls[name].append(wall)
            rss[name].append(peak)
    rows = {name: {"wall_ms": round(statistics.median(walls[name]) * 1000, 2),
                   "rss_mib": round(max(rss[name]) / 1024, 2)} for name in walls}
    # a command over its floor, round by round (median, and the rounds' range)
    for name, floor in RATIOS:
        if name in walls and floor in walls:
            per_round = [a / f for a, f in zip(walls[name], walls[floor])]
            rows[name]["over_floor"] = round(statistics.median(per_round), 2)
            rows[name]["over_floor_range"] = [round(min(per_round), 2), round(max(per_round), 2)]
    return rows


def measure_size(n, runs):
    with tempfile.TemporaryDirectory(dir=SHM) as tmp:
        sysfs, state = os.path.join(tmp, "sys"), os.path.join(tmp, "run", "blkqos")
        subprocess.run([MKFIX, sysfs, f"nvme:{n}", "queue"], check=True, stdout=subprocess.DEVNULL)
        base = [BIN, "--log", "stderr", "--sysfs", sysfs, "--state-dir", state]
        disk = os.path.realpath(os.path.join(sysfs, "class/block/nvme0n1"))
        devpath = disk[len(os.path.realpath(sysfs)):]

        def udev(action):
            return base + ["udev", "--action", action, "--devpath", devpath, PROFILE]

        apply_, restore = base + ["apply", PROFILE], base + ["restore"]
        link = os.path.join(sysfs, "block", "nvme0n1")
        relink = ["ln", "-sfn", os.readlink(link), link]
        unlink = ["rm", "-f", link]
        # the writes apply makes, by the cheapest means there is; each floor
        # run is followed by the original values written back, so that the
        # next case starts from an untuned tree again
        loop = 'for f in "$0"/block/*/queue/cpu_lat_limit_us; do echo "$1" >"$f"; done'
        one = 'echo "$1" >"$0"/block/nvme0n1/queue/cpu_lat_limit_us'
        with open(os.path.join(link, "queue", "cpu_lat_limit_us")) as f:
            original = f.read().strip()
        cases = [
            ("apply --dry-run", base + ["apply", PROFILE, "--dry-run", "--json"], [restore], []),
            ("apply (writes)", base + ["apply", PROFILE, "--json"], [restore], []),
            ("apply (no-op)", base + ["apply", PROFILE, "--json"], [restore, apply_], []),
            ("restore", base + ["restore", "--json"], [apply_], []),
            ("floor: sh loop writing the same files", ["sh", "-c", loop, sysfs, "4"], [restore],
             [["sh", "-c", loop, sysfs, original]]),
            ("udev add (one event)", udev("add"), [apply_, restore + ["--device", "nvme0n1"]], []),
            # the kernel unlinks block/<disk> before it sends remove (blkqos
            # refuses a remove for a disk still there): tune, then unlink
            ("udev remove (one event)", udev("remove"), [relink, apply_, unlink],
             [relink, ["sh", "-c", one, sysfs, original]]),
            ("floor: sh writing one file", ["sh", "-c", one, sysfs, "4"], [relink, restore],
             [["sh", "-c", one, sysfs, original]]),
        ]
        return measure(cases, runs)


def args(default_sizes):
    """The sizes, --runs and --json of a cost benchmark; builds what it runs."""
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="*", type=int, default=default_sizes)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "blkqos", "--example", "mkfixture"],
                   cwd=ROOT, check=True)
    return a


def report(what, a, measure_size, result, first_rows=()):
    """Print measure_size(n, runs) for each size as a Markdown table (after
    first_rows), add them to result and write it to --json."""
    result.update({"runs": a.runs, "sizes": {}})
    print(f"{what}, median of {a.runs} runs, max peak RSS; nproc={os.cpu_count()}")
    print()
    print("| disks | command | wall (ms) | peak RSS (MiB) |")
    print("|---:|---|---:|---:|")
    for row in first_rows:
        print(row)
    for n in a.sizes:
        rows = measure_size(n, a.runs)
        result["sizes"][str(n)] = rows
        for name, r in rows.items():
            ratio = f" ({r['over_floor']:.2f}x the floor, rounds {r['over_floor_range'][0]:.2f}-" \
                f"{r['over_floor_range'][1]:.2f}x)" if "over_floor" in r else ""
            print(f"| {n} | {name}{ratio} | {r['wall_ms']:.1f} | {r['rss_mib']:.1f} |")
    if a.json:
        result["machine"] = {"nproc": os.cpu_count(), "kernel": platform.release()}
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


def main():
    # udev events would log to syslog or the kernel log of the machine
    os.environ["BLKQOS_LOG"] = "stderr"
    a = args([1, 100, 1000, 10000])
    start = statistics.median(spawn(["true"])[0] for _ in range(max(a.runs, 9))) * 1000
    report("blkqos command cost", a, measure_size, {"process_start_ms": round(start, 2)},
           [f"| - | `true` (starting any process, measured the same way) | {start:.1f} | - |"])


if __name__ == "__main__":
    main()
