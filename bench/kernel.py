#!/usr/bin/env python3
"""What the latency lease costs and buys, measured in the QEMU guest.

Usage: bench/kernel.py [--json FILE] [--parse-only]

Runs `kernel-patch/test/run --bench` (the harness's non-debug kernels,
CONFIG_CPU_LATENCY_LEASE=y and =n, booted under TCG with -icount shift=0 so that
guest time is instruction count: repeatable to ~0.1%), then reads the
BLKQOS-MEASURE lines of the two console logs:

  hotpath  null_blk irqmode 0 (inline) and 1 (softirq), fio psync QD1 4k
           random reads: PSD=n, knob off, knob on (10 us)
  lat      null_blk irqmode 2 (timer) with 20 and 50 us completions, libaio
           (and 1 ms, beyond the deep state's target residency), libaio
           QD1 and QD4: baseline (deep state allowed, knob off), floor (deep
           state disabled on every CPU), knob 10 us and 0 us (3 ms timeout),
           under menu and teo
  power    after the last of 200 reads: time to the first deep-state entry
           and the deep state's share of the next second (idle-watch.c),
           three runs each (the median is reported)

--parse-only reads the logs of an earlier run. Environment:
BLKQOS_KERNEL_CACHE (logs), BLKQOS_BENCH_IOS (I/Os per latency point,
default 2000), BLKQOS_HOTPATH_IOS (default 100000).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("BLKQOS_KERNEL_CACHE", "/var/cache/blkqos-kernel")
MEASURE = re.compile(r"^BLKQOS-MEASURE (\S+) (.*)$")


def num(v):
    try:
        return int(v)
    except ValueError:
        return float(v)


def parse(path):
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = MEASURE.match(line.strip())
            if not m:
                continue
            kind, rest = m.groups()
            fields = {}
            for word in rest.split():
                if "=" in word:
                    k, v = word.split("=", 1)
                    fields[k] = v
                elif kind == "hotpath":  # iops,clat_mean_us,p99_us,max_us
                    iops, mean, p99, mx = word.split(",")
                    fields.update(iops=iops, mean=mean, p99=p99, max=mx)
            out.append((kind, {k: (v if k in ("variant", "gov", "cfg") else num(v)) for k, v in fields.items()}))
    return out


def collect():
    records = []
    for mode in ("psd", "nopsd"):
        records += parse(os.path.join(CACHE, f"console-bench-{mode}.log"))
    result = {"hotpath": [], "latency": [], "power": []}
    for kind, f in records:
        if kind == "hotpath":
            result["hotpath"].append(f)
        elif kind == "lat":
            result["latency"].append(f)
        elif kind == "power":
            result["power"].append(f)
    ratios = {}
    for irq in sorted({h["irq"] for h in result["hotpath"]}):
        by = {h["variant"]: h for h in result["hotpath"] if h["irq"] == irq}
        if {"nopsd", "off", "on"} <= by.keys():
            base = by["nopsd"]
            ratios[f"irq{irq}"] = {
                v: {
                    "iops": round(by[v]["iops"] / base["iops"], 4),
                    # lower latency is better: report base/variant so 1.0 = free
                    "clat": round(base["mean"] / by[v]["mean"], 4),
                }
                for v in ("off", "on")
            }
    result["hotpath_ratios"] = ratios
    # one second after the I/O varies with the governors' history: median of the runs
    runs = result.pop("power")
    result["power_runs"] = runs
    result["power"] = []
    for key in sorted({(r["gov"], r["cnsec"], r["cfg"]) for r in runs}):
        reps = [r for r in runs if (r["gov"], r["cnsec"], r["cfg"]) == key]
        firsts = [r["first_us"] for r in reps if r["first_us"] >= 0]
        result["power"].append({
            "gov": key[0], "cnsec": key[1], "cfg": key[2], "runs": len(reps),
            "pct": statistics.median(r["pct"] for r in reps),
            "first_us": statistics.median(firsts) if firsts else -1,
            "first_found": len(firsts),
        })
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--parse-only", action="store_true")
    a = ap.parse_args()
    if not a.parse_only:
        r = subprocess.run([os.path.join(ROOT, "kernel-patch", "test", "run"), "--bench"])
        if r.returncode != 0:
            print("bench/kernel: the guest runs failed; see the console logs in " + CACHE, file=sys.stderr)
            return 1
    result = collect()
    if not result["latency"] or not result["hotpath_ratios"]:
        print("bench/kernel: no figures in the console logs", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
