#!/usr/bin/env python3
"""Merge bench/cli.py and bench/kernel.py figures into one results file,
draw the plot and print the README tables.

Usage: bench/report.py CLI.json KERNEL.json OUT_PREFIX
Writes OUT_PREFIX.json, OUT_PREFIX.png and OUT_PREFIX.svg; prints Markdown.
Either input may be an earlier results file (its "cli" or "kernel" part).
"""
import datetime
import json
import os
import platform
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CFGS = ["baseline", "floor", "limit10", "limit0"]
LABEL = {"baseline": "deep allowed, knob off", "floor": "deep disabled (C-states off)",
         "limit10": "knob 10 us", "limit0": "knob 0 us"}
COLOR = {"baseline": "#999999", "floor": "#1f77b4", "limit10": "#2ca02c", "limit0": "#ff7f0e"}


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"host_cpu": cpu, "nproc": os.cpu_count(), "host_kernel": platform.release(),
            "guest": "QEMU TCG -icount shift=0,sleep=off, 2 vCPUs, blkqos test idle driver "
                     "(POLL, C1 2 us, DEEP 150 us exit / 600 us residency)"}


def lat_points(k):
    return sorted({(p["gov"], p["cnsec"], p["qd"]) for p in k["latency"]})


def find(rows, **want):
    for r in rows:
        if all(r.get(key) == v for key, v in want.items()):
            return r
    return None


def tables(cli, k):
    out = []
    out.append("Hot path (null_blk, fio psync QD1 4k random reads, "
               f"{k['hotpath'][0].get('ios', 'fixed')} I/Os; ratio to the option off, 1.0 = free):\n")
    out.append("| completion | PSD=n IOPS | PSD=n mean | knob off IOPS / latency ratio | knob on IOPS / latency ratio |")
    out.append("|---|---:|---:|---:|---:|")
    for irq, name in ((0, "inline (irqmode 0)"), (1, "softirq (irqmode 1)")):
        base = find(k["hotpath"], irq=irq, variant="nopsd")
        r = k["hotpath_ratios"].get(f"irq{irq}")
        if base and r:
            out.append(f"| {name} | {base['iops']} | {base['mean']:.3f} us | "
                       f"{r['off']['iops']:.4f} / {r['off']['clat']:.4f} | {r['on']['iops']:.4f} / {r['on']['clat']:.4f} |")
    out.append("\nLatency bought (null_blk timer completions, libaio 4k random reads on one CPU; "
               "latencies in us; p99 vs floor in the last column):\n")
    out.append("| governor | completion | QD | configuration | IOPS | mean | p99 | p99.9 | max | p99 / floor p99 |")
    out.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for gov, cns, qd in lat_points(k):
        floor = find(k["latency"], gov=gov, cnsec=cns, qd=qd, cfg="floor")
        for cfg in CFGS:
            p = find(k["latency"], gov=gov, cnsec=cns, qd=qd, cfg=cfg)
            if not p:
                continue
            rel = f"{p['p99'] / floor['p99']:.2f}" if floor and floor["p99"] else "-"
            out.append(f"| {gov} | {cns // 1000} us | {qd} | {LABEL[cfg]} | {p['iops']} | {p['mean']:.1f} | "
                       f"{p['p99']} | {p['p999']} | {p['max']} | {rel} |")
    out.append("\nPower kept (after the last of 200 QD1 reads: time to the first deep-state entry, "
               "and the deep state's share of the following second on the I/O CPU):\n")
    out.append("| governor | completion | configuration | first deep entry | deep residency | vs baseline |")
    out.append("|---|---:|---|---:|---:|---:|")
    for gov, cns in sorted({(p["gov"], p["cnsec"]) for p in k["power"]}):
        base = find(k["power"], gov=gov, cnsec=cns, cfg="baseline")
        for cfg in CFGS:
            p = find(k["power"], gov=gov, cnsec=cns, cfg=cfg)
            if not p:
                continue
            first = "never (within 50 ms)" if p["first_us"] < 0 else f"{p['first_us'] / 1000:.2f} ms"
            rel = f"{p['pct'] / base['pct']:.3f}" if base and base["pct"] else "-"
            out.append(f"| {gov} | {cns // 1000} us | {LABEL[cfg]} | {first} | {p['pct']:.1f}% | {rel} |")
    out.append("\nThe command (fake trees of N NVMe disks on tmpfs; median wall, max peak RSS; "
               f"starting any process costs {cli['process_start_ms']:.1f} ms in this measurement):\n")
    out.append("| disks | apply (writes) | apply (no-op) | floor: sh loop | apply / floor | udev event (add) | udev RSS | restore |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, rows in sorted(cli["sizes"].items(), key=lambda kv: int(kv[0])):
        a, f = rows["apply (writes)"], rows["floor: sh loop writing the same files"]
        u = rows["udev add (one event)"]
        out.append(f"| {n} | {a['wall_ms']:.1f} ms | {rows['apply (no-op)']['wall_ms']:.1f} ms | {f['wall_ms']:.1f} ms | "
                   f"{a['wall_ms'] / f['wall_ms']:.1f}x | {u['wall_ms']:.1f} ms | {u['rss_mib']:.1f} MiB | "
                   f"{rows['restore']['wall_ms']:.1f} ms |")
    return "\n".join(out)


def plot(cli, k, prefix):
    fig, ax = plt.subplots(2, 2, figsize=(13, 9))
    # p99 per point and configuration
    pts = lat_points(k)
    a = ax[0][0]
    w = 0.2
    for i, cfg in enumerate(CFGS):
        ys = [(find(k["latency"], gov=g, cnsec=c, qd=q, cfg=cfg) or {}).get("p99", 0) for g, c, q in pts]
        a.bar([x + (i - 1.5) * w for x in range(len(pts))], ys, w, label=LABEL[cfg], color=COLOR[cfg])
    a.set_xticks(range(len(pts)), [f"{g}\n{c // 1000}us\nQD{q}" for g, c, q in pts], fontsize=7)
    a.set_ylabel("p99 completion latency (us)")
    a.set_title("Latency bought: p99")
    a.legend(fontsize=7)
    # deep residency after the I/O
    a = ax[0][1]
    ppts = sorted({(p["gov"], p["cnsec"]) for p in k["power"]})
    for i, cfg in enumerate(CFGS):
        ys = [(find(k["power"], gov=g, cnsec=c, cfg=cfg) or {}).get("pct", 0) for g, c in ppts]
        a.bar([x + (i - 1.5) * w for x in range(len(ppts))], ys, w, label=LABEL[cfg], color=COLOR[cfg])
    a.set_xticks(range(len(ppts)), [f"{g} {c // 1000}us" for g, c in ppts], fontsize=8)
    a.set_ylabel("deep-state residency, 1 s after the last I/O (%)")
    a.set_title("Power kept")
    # hot path: latency ratio (ns-exact under icount; fio's IOPS has 1 ms runtime resolution)
    a = ax[1][0]
    labels, vals, colors = [], [], []
    for irq, r in sorted(k["hotpath_ratios"].items()):
        for v, target in (("off", 0.999), ("on", 0.998)):
            labels.append(f"{irq} knob {v}")
            vals.append(r[v]["clat"])
            colors.append("#2ca02c" if r[v]["clat"] >= target else "#d62728")
    a.bar(range(len(vals)), vals, color=colors)
    a.axhline(0.999, ls="--", color="#555", lw=0.8, label="targets 0.999 (off) / 0.998 (on)")
    a.axhline(0.998, ls=":", color="#555", lw=0.8)
    a.set_ylim(min(vals + [0.99]) - 0.002, 1.002)
    a.set_xticks(range(len(vals)), labels, fontsize=8)
    a.set_ylabel("PSD=n mean latency / this mean latency")
    a.set_title("Hot-path cost (1.0 = free)")
    a.legend(fontsize=7)
    # command cost
    a = ax[1][1]
    sizes = sorted(cli["sizes"], key=int)
    xs = [int(n) for n in sizes]
    for name, style in (("apply (writes)", "o-"), ("apply (no-op)", "s-"),
                        ("floor: sh loop writing the same files", "k--"), ("udev add (one event)", "^-")):
        a.plot(xs, [cli["sizes"][n][name]["wall_ms"] for n in sizes], style, label=name)
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("disks")
    a.set_ylabel("wall time (ms)")
    a.set_title("The command")
    a.legend(fontsize=7)
    fig.suptitle("blkqos benchmarks (" + datetime.date.today().isoformat() + ")")
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=90)
    fig.savefig(prefix + ".svg")


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    # either file may also be an earlier results file, to redo one half
    with open(sys.argv[1]) as f:
        cli = json.load(f)
        cli = cli.get("cli", cli)
    with open(sys.argv[2]) as f:
        k = json.load(f)
        k = k.get("kernel", k)
    prefix = sys.argv[3]
    result = {"date": datetime.date.today().isoformat(), "machine": machine(), "cli": cli, "kernel": k}
    with open(prefix + ".json", "w") as f:
        json.dump(result, f, indent=1)
    plot(cli, k, prefix)
    print(tables(cli, k))
    return 0


if __name__ == "__main__":
    sys.exit(main())
