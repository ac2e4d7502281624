#!/usr/bin/env python3
"""Merge bench/cli.py and bench/kernel.py figures into one results file,
draw the plot and print the README tables.

Usage: bench/report.py CLI.json KERNEL.json OUT_PREFIX
Writes OUT_PREFIX.json, OUT_PREFIX.{png,svg} (latency bought against power
kept, per peer) and OUT_PREFIX-cost.{png,svg}; prints Markdown.
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

from kernel import PEERS, find, reference  # noqa: E402  (bench/kernel.py, beside this file)

LABEL = {"baseline": "deep allowed", "floor": "C-states off", "dma": "cpu_dma_latency (TuneD)",
         "resume": "per-CPU resume latency", "psd": "PSD model", "psd_cpu0_floor": "PSD model, CPU0 deep off", "knob10": "knob 10 us",
         "knob0": "knob 0 us", "auto": "knob auto"}
COLOR = {"baseline": "#999999", "floor": "#1f77b4", "dma": "#9467bd", "resume": "#8c564b",
         "psd": "#d62728", "psd_cpu0_floor": "#e377c2", "knob10": "#2ca02c", "knob0": "#ff7f0e", "auto": "#17becf"}
MARK = {("menu", 1): "o", ("menu", 4): "s", ("teo", 1): "^", ("teo", 4): "D"}


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"host_cpu": cpu, "nproc": os.cpu_count(), "host_kernel": platform.release(),
            "guest": "QEMU TCG -icount shift=0,sleep=off, 2 vCPUs, blkqos test idle driver "
                     "(POLL, C1 2 us, DEEP 150 us exit / 600 us residency), HZ=250"}


def lat_points(k):
    return sorted({(p["gov"], p["cus"], p["spread"], p["qd"]) for p in k["latency"]},
                  key=lambda t: (t[0], -t[2], t[1], t[3]))


def completion(cus, spread):
    return f"{cus} us ±{spread}%" if spread else f"{cus} us fixed"


def pct_of(row, cpu):
    v = row[f"cpu{cpu}_pct"]
    return v["median"]


def tables(cli, k):
    out = []
    out.append("Hot path (null_blk, fio psync QD1 4k random reads on the CPU that completes them, "
               f"{k['hotpath'][0].get('ios', 'fixed')} I/Os; mean latency of the kernel without the lease "
               "over this mean latency, 1.0 = free):\n")
    out.append("| completion | lease=n IOPS | lease=n mean | knob off | knob on (10 us) | PSD model |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for irq, name in ((0, "inline (irqmode 0)"), (1, "softirq (irqmode 1)")):
        base = find(k["hotpath"], irq=irq, variant="nopsd")
        r = k["hotpath_ratios"].get(f"irq{irq}", {})
        if base:
            cells = [f"{r[v]['clat']:.4f}" if v in r else "-" for v in ("off", "on", "psdmodel")]
            out.append(f"| {name} | {base['iops']} | {base['mean']:.3f} us | " + " | ".join(cells) + " |")
    peers = [c for c in PEERS if any(p["cfg"] == c for p in k["latency"])]
    reps = max((p["reps"] for p in k["latency"]), default=0)
    for metric, title in (("p99", "p99"), ("max", "maximum")):
        out.append(f"\n{title[0].upper() + title[1:]} completion latency in us, median of {reps} runs "
                   "(in brackets: over the C-states-off median of the same row; after it: the runs' "
                   "min-max where they differ); fio libaio 4k random reads on CPU1, "
                   "completions on CPU0 sent to CPU1 by IPI, every peer on the same completion delays:\n")
        out.append("| governor | completion | QD | " + " | ".join(LABEL[c] for c in peers) + " |")
        out.append("|---|---|---:|" + "---:|" * len(peers))
        for gov, cus, spread, qd in lat_points(k):
            cells = []
            for c in peers:
                p = find(k["latency"], gov=gov, cus=cus, spread=spread, qd=qd, cfg=c)
                floor = reference(k["latency"], c, "floor", gov=gov, cus=cus, spread=spread, qd=qd)
                lo, hi = p[f"{metric}_range"] if p else (0, 0)
                span = f" {lo:g}-{hi:g}" if lo != hi else ""
                if not p:
                    cells.append("-")
                elif floor and floor[metric] and p is not floor:
                    cells.append(f"{p[metric]:g} ({p[metric] / floor[metric]:.2f}){span}")
                else:
                    cells.append(f"{p[metric]:g}{span}")
            out.append(f"| {gov} | {completion(cus, spread)} | {qd} | " + " | ".join(cells) + " |")
    polled = any("poll0_pct" in p for p in k["latency"])
    out.append("\nDeep state's share of CPU0 / CPU1 time while fio ran (QD1, median of the runs, %; "
               "each CPU's state time read on that CPU at both ends"
               + ("; halted only, the exit latency's spin taken out; after the comma: polling's share"
                  if polled else "") + "):\n")
    out.append("| governor | completion | " + " | ".join(LABEL[c] for c in peers) + " |")
    out.append("|---|---|" + "---:|" * len(peers))
    for gov, cus, spread, qd in lat_points(k):
        if qd != 1:
            continue
        cells = []
        for c in peers:
            p = find(k["latency"], gov=gov, cus=cus, spread=spread, qd=qd, cfg=c)
            if not p:
                cells.append("-")
                continue
            cell = f"{p['deep0_pct']:.0f} / {p['deep1_pct']:.0f}"
            if "poll0_pct" in p:
                cell += f", {p['poll0_pct']:.0f} / {p['poll1_pct']:.0f}"
            cells.append(cell)
        out.append(f"| {gov} | {completion(cus, spread)} | " + " | ".join(cells) + " |")
    reps = max((r["cpu0_pct"]["n"] for r in k["power"]), default=0)
    out.append(f"\nPower kept: deep state's share of the second after the last of 200 QD1 reads, CPU0 / CPU1 "
               f"(median of {reps} runs, %; baseline with its min-max), and each CPU's first deep entry "
               "after the last I/O (median, ms):\n")
    out.append("| governor | completion | " + " | ".join(LABEL[c] for c in peers) + " | first deep entry: baseline | knob 10 us | auto |")
    out.append("|---|---|" + "---:|" * (len(peers) + 3))
    for gov, cus, spread in sorted({(p["gov"], p["cus"], p["spread"]) for p in k["power"]},
                                   key=lambda t: (t[0], -t[2], t[1])):
        cells = []
        for c in peers:
            p = find(k["power"], gov=gov, cus=cus, spread=spread, cfg=c)
            if not p:
                cells.append("-")
                continue
            cell = f"{pct_of(p, 0):.1f} / {pct_of(p, 1):.1f}"
            if c == "baseline":
                cell += (f" ({p['cpu0_pct']['min']:.1f}-{p['cpu0_pct']['max']:.1f} / "
                         f"{p['cpu1_pct']['min']:.1f}-{p['cpu1_pct']['max']:.1f})")
            cells.append(cell)
        for c in ("baseline", "knob10", "auto"):
            p = find(k["power"], gov=gov, cus=cus, spread=spread, cfg=c)
            f = [p and p[f"cpu{cpu}_first_us"] for cpu in (0, 1)]
            cells.append(" / ".join(f"{x['median'] / 1000:.1f}" if x else "none" for x in f) if p else "-")
        out.append(f"| {gov} | {completion(cus, spread)} | " + " | ".join(cells) + " |")
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


def plot_peers(k, prefix):
    """One point per configuration: p99 over the C-states-off p99 against
    deep residency, during the I/O (top) and in the second after it
    (bottom); one column per completion time (spread +/- 50 %)."""
    cols = sorted({p["cus"] for p in k["latency"] if p["spread"]})
    fig, ax = plt.subplots(2, len(cols), figsize=(4.2 * len(cols), 8.5), squeeze=False, sharey=True)
    for j, cus in enumerate(cols):
        for i, where in enumerate(("during the I/O", "in the second after")):
            a = ax[i][j]
            for (gov, qd), marker in MARK.items():
                spread = max(p["spread"] for p in k["latency"] if p["cus"] == cus)
                for c in PEERS:
                    p = find(k["latency"], gov=gov, cus=cus, spread=spread, qd=qd, cfg=c)
                    floor = reference(k["latency"], c, "floor", gov=gov, cus=cus, spread=spread, qd=qd)
                    if not p or not floor:
                        continue
                    if i == 0:
                        x = (p["deep0_pct"] + p["deep1_pct"]) / 2
                    else:
                        w = find(k["power"], gov=gov, cus=cus, spread=spread, cfg=c)
                        if not w:
                            continue
                        x = (pct_of(w, 0) + pct_of(w, 1)) / 2
                    a.scatter(x, p["p99"] / floor["p99"], marker=marker, color=COLOR[c], s=36,
                              label=f"{LABEL[c]}" if (gov, qd) == ("menu", 1) else None)
            a.axhline(1.0, color="#1f77b4", lw=0.6, ls=":")
            a.axhline(1.05, color="#2ca02c", lw=0.6, ls="--")
            a.set_title(f"{cus} us ±{spread}%: deep share {where}", fontsize=9)
            a.set_xlabel("deep-state residency, mean of CPU0 and CPU1 (%)", fontsize=8)
            if j == 0:
                a.set_ylabel("p99 / C-states-off p99", fontsize=8)
    handles, labels = ax[0][0].get_legend_handles_labels()
    from matplotlib.lines import Line2D
    handles += [Line2D([], [], marker=m, ls="", color="k", label=f"{g} QD{q}") for (g, q), m in MARK.items()]
    fig.legend(handles=handles, loc="lower center", ncol=6, fontsize=8)
    fig.suptitle("Latency bought against power kept, one point per configuration (" +
                 datetime.date.today().isoformat() + ")")
    fig.tight_layout(rect=(0, 0.07, 1, 0.97))
    fig.savefig(prefix + ".png", dpi=80)
    fig.savefig(prefix + ".svg")


def plot_cost(cli, k, prefix):
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    a = ax[0]
    labels, vals = [], []
    for irq, r in sorted(k["hotpath_ratios"].items()):
        for v in ("off", "on", "psdmodel"):
            if v in r:
                labels.append(f"{irq} {'PSD' if v == 'psdmodel' else 'knob ' + v}")
                vals.append(r[v]["clat"])
    a.bar(range(len(vals)), vals, color="#2ca02c")
    a.set_ylim(min(vals + [0.99]) - 0.002, 1.002)
    a.set_xticks(range(len(vals)), labels, fontsize=8)
    a.set_ylabel("lease=n mean latency / this mean latency")
    a.set_title("Hot-path cost (1.0 = free)")
    a = ax[1]
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
    fig.tight_layout()
    fig.savefig(prefix + "-cost.png", dpi=80)
    fig.savefig(prefix + "-cost.svg")


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
    plot_peers(k, prefix)
    plot_cost(cli, k, prefix)
    print(tables(cli, k))
    return 0


if __name__ == "__main__":
    sys.exit(main())
