#!/usr/bin/env python3
"""Merge bench/cli.py and bench/kernel.py figures into one results file,
draw the plot and print the tables of bench/README.md.

Usage: bench/report.py CLI.json KERNEL.json OUT_PREFIX
Writes OUT_PREFIX.json, OUT_PREFIX.{png,svg} (latency bought against power
kept, per peer), OUT_PREFIX-bursts.{png,svg} (the same on the bursty
sweep) and OUT_PREFIX-cost.{png,svg}; prints Markdown.
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

from kernel import IO_CPUS, PEERS, find, reference  # noqa: E402  (bench/kernel.py, beside this file)

LABEL = {"baseline": "deep allowed", "floor": "C-states off", "dma": "cpu_dma_latency (TuneD)",
         "resume": "per-CPU resume latency", "psd": "PSD model", "psd_cpu0_floor": "PSD model, interrupt CPU deep off", "knob10": "knob 10 us",
         "knob0": "knob 0 us", "auto": "knob auto", "stock_resume": "per-CPU resume latency (stock kernel)",
         "ulease": "blkqos lease 10 us (stock kernel)",
         "psd_baseline": "deep allowed (PSD kernel, model off)", "psd_floor": "C-states off (PSD kernel)",
         "stock_baseline": "deep allowed (stock kernel)", "stock_floor": "C-states off (stock kernel)"}
COLOR = {"baseline": "#999999", "floor": "#1f77b4", "dma": "#9467bd", "resume": "#8c564b",
         "psd": "#d62728", "psd_cpu0_floor": "#e377c2", "knob10": "#2ca02c", "knob0": "#ff7f0e", "auto": "#17becf",
         "stock_resume": "#c49c94", "ulease": "#bcbd22"}
MARK = {("menu", 1): "o", ("menu", 4): "s", ("teo", 1): "^", ("teo", 4): "D"}


def machine(build):
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"host_cpu": cpu, "nproc": os.cpu_count(), "host_kernel": platform.release(),
            "guest": "QEMU TCG -icount shift=0,sleep=off, 3 vCPUs (CPU2 the device), blkqos test "
                     f"idle driver, table {build.get('idle', 'model')} ({IDLE_TEXT[build.get('idle', 'model')]}); "
                     "QEMU's NVMe runs (shapes nvme-*) without -icount, in host time, "
                     f"HZ={build.get('hz', 250)}, kernels built "
                     f"{'-O2' if build.get('opt') == 'speed' else '-Os'}"}


IDLE_TEXT = {"model": "POLL, C1 2 us, DEEP 150 us exit / 600 us residency",
             "icx": "Ice Lake server: POLL, C1 1/1, C1E 4/4, C6 170/600 us",
             "spr": "Sapphire Rapids: POLL, C1 1/1, C1E 2/4, C6 290/800 us",
             "epyc": "EPYC through acpi_idle: POLL, C1 1/2, C2 18/36 us"}
SHAPES = ("cross", "local", "nvme-cross", "nvme-local")
SHAPE_TEXT = {
    "cross": "cross-CPU shape: the device (CPU2) interrupts CPU0, blk-mq sends the completion "
             "to CPU1, the submitter, by IPI",
    "local": "local shape: the device (CPU2) interrupts CPU1, the submitter",
    "nvme-cross": "QEMU's NVMe, one I/O queue: its MSI-X vector lands on one CPU, fio submits on "
                  "another, blk-mq sends the completion back by IPI; null-co latency, host time",
    "nvme-local": "QEMU's NVMe, a queue per CPU: the vector of fio's queue lands on fio's CPU; "
                  "null-co latency, host time",
}


def io_of(k, shape):
    """The I/O CPUs of a shape: on QEMU's NVMe, as its power runs name them."""
    row = next((p for p in k["power"] if p["shape"] == shape and p.get("io_cpus")), None)
    return row["io_cpus"] if row else IO_CPUS.get(shape, (0, 1))


def shapes(k):
    return [s for s in SHAPES if any(p["shape"] == s for p in k["latency"])]


def lat_points(k, shape):
    return sorted({(p["gov"], p["cus"], p["spread"], p["qd"]) for p in k["latency"]
                   if p["shape"] == shape},
                  key=lambda t: (t[0], -t[2], t[1], t[3]))


def completion(cus, spread):
    return f"{cus} us ±{spread}%" if spread else f"{cus} us fixed"


def pct_of(row, cpu):
    v = row[f"cpu{cpu}_pct"]
    return v["median"]


def tables(cli, k):
    out = []
    if not k.get("hotpath"):
        out.append("Hot path: not measured in this run.\n")
    carried = (f" Carried over from {k['hotpath_carried_from']}, not measured in this run."
               if k.get("hotpath_carried_from") else "")
    out.append("Hot path (null_blk, fio psync QD1 4k random reads on the CPU that completes them, "
               "fixed I/Os; mean latency of the kernel without the lease "
               f"over this mean latency, 1.0 = free).{carried}\n")
    out.append("| completion | lease=n IOPS | lease=n mean | knob off | knob on (10 us) | PSD model |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for irq, name in ((0, "inline (irqmode 0)"), (1, "softirq (irqmode 1)")):
        base = find(k["hotpath"], irq=irq, variant="nopsd", qd=1) or find(k["hotpath"], irq=irq, variant="nopsd")
        r = k["hotpath_ratios"].get(f"irq{irq}", {})
        if base:
            cells = [f"{r[v]['clat']:.4f}" + (f" ±{r[v]['clat_ci_halfwidth_points']:.2f}"
                                               if r[v].get("clat_ci_halfwidth_points") is not None else "")
                     if v in r else "-" for v in ("off", "on", "psdmodel")]
            out.append(f"| {name} | {base['iops']} | {base['mean']:.3f} us | " + " | ".join(cells) + " |")
    for key, r in sorted(k["hotpath_ratios"].items()):
        x = r.get("on_over_off")
        if x:
            out.append(f"\nKnob on over knob off in the same guest, {key} ({x['runs']} runs each): IOPS "
                       f"{x['iops']} (95 % {x['iops_ci95']}), mean latency {x['clat']} (95 % {x['clat_ci95']},"
                       f" half-width {x['clat_ci_halfwidth_points']} points).")
    for shape in shapes(k):
        out.append(shape_tables(k, shape))
    out.append("\nThe command (fake trees of N NVMe disks on tmpfs; median wall, max peak RSS; "
               f"starting any process costs {cli['process_start_ms']:.1f} ms in this measurement):\n")
    out.append("| disks | apply (writes) | apply (no-op) | floor: sh loop | apply / floor | "
               "per round (median, range) | udev event (add) | udev RSS | restore |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, rows in sorted(cli["sizes"].items(), key=lambda kv: int(kv[0])):
        a, f = rows["apply (writes)"], rows["floor: sh loop writing the same files"]
        u = rows["udev add (one event)"]
        # runs of bench/cli.py before the rounds have no per-round ratio
        per_round = (f"{a['over_floor']:.2f}x ({a['over_floor_range'][0]:.2f}-{a['over_floor_range'][1]:.2f}x)"
                     if "over_floor" in a else "-")
        out.append(f"| {n} | {a['wall_ms']:.1f} ms | {rows['apply (no-op)']['wall_ms']:.1f} ms | {f['wall_ms']:.1f} ms | "
                   f"{a['wall_ms'] / f['wall_ms']:.1f}x | {per_round} | {u['wall_ms']:.1f} ms | {u['rss_mib']:.1f} MiB | "
                   f"{rows['restore']['wall_ms']:.1f} ms |")
    return "\n".join(out)


def shape_tables(k, shape):
    out = []
    lat = [p for p in k["latency"] if p["shape"] == shape]
    power = [p for p in k["power"] if p["shape"] == shape]
    peers = [c for c in PEERS if any(p["cfg"] == c for p in lat)]
    reps = max((p["reps"] for p in lat), default=0)
    for metric, title in (("p99", "p99"), ("max", "maximum")):
        out.append(f"\n**{shape}** — {title[0].upper() + title[1:]} completion latency in us, median of "
                   f"{reps} runs (in brackets: over the C-states-off median of the same row; after it: "
                   "the runs' min-max where they differ); fio libaio 4k random reads on CPU1, "
                   f"{SHAPE_TEXT[shape]}, every peer on the same completion delays:\n")
        out.append("| governor | completion | QD | " + " | ".join(LABEL[c] for c in peers) + " |")
        out.append("|---|---|---:|" + "---:|" * len(peers))
        for gov, cus, spread, qd in lat_points(k, shape):
            where = dict(shape=shape, gov=gov, cus=cus, spread=spread, qd=qd)
            cells = []
            for c in peers:
                p = find(lat, **where, cfg=c)
                floor = reference(lat, c, "floor", **where)
                lo, hi = p[f"{metric}_range"] if p else (0, 0)
                span = f" {lo:g}-{hi:g}" if lo != hi else ""
                if not p:
                    cells.append("-")
                elif floor and floor[metric] and p is not floor:
                    cells.append(f"{p[metric]:g} ({p[metric] / floor[metric]:.2f}){span}")
                else:
                    cells.append(f"{p[metric]:g}{span}")
            out.append(f"| {gov} | {completion(cus, spread)} | {qd} | " + " | ".join(cells) + " |")
    out.append(f"\n**{shape}** — deep state's share of CPU0 / CPU1 time while fio ran (QD1, median of "
               "the runs, %; each CPU's state time read on that CPU at both ends; halted only, the exit "
               "latency's spin taken out; after the comma: polling's share; CPU2, the device, has its "
               "deep state off throughout):\n")
    out.append("| governor | completion | " + " | ".join(LABEL[c] for c in peers) + " |")
    out.append("|---|---|" + "---:|" * len(peers))
    for gov, cus, spread, qd in lat_points(k, shape):
        if qd != 1:
            continue
        cells = []
        for c in peers:
            p = find(lat, gov=gov, cus=cus, spread=spread, qd=qd, cfg=c)
            if not p:
                cells.append("-")
                continue
            cells.append(f"{p['deep0_pct']:.0f} / {p['deep1_pct']:.0f}, "
                         f"{p['poll0_pct']:.0f} / {p['poll1_pct']:.0f}")
        out.append(f"| {gov} | {completion(cus, spread)} | " + " | ".join(cells) + " |")
    reps = max((r["cpu0_pct"]["n"] for r in power), default=0)
    io = " and ".join(f"CPU{c}" for c in io_of(k, shape))
    out.append(f"\n**{shape}** — power kept: deep state's share of the second after the last of 200 QD1 "
               f"reads, CPU0 / CPU1 (median of {reps} runs, %; baseline with its min-max; the I/O CPUs "
               f"here: {io}), and each CPU's first deep entry after the last I/O (median, ms):\n")
    out.append("| governor | completion | " + " | ".join(LABEL[c] for c in peers)
               + " | first deep entry: baseline | knob 10 us | auto |")
    out.append("|---|---|" + "---:|" * (len(peers) + 3))
    for gov, cus, spread in sorted({(p["gov"], p["cus"], p["spread"]) for p in power},
                                   key=lambda t: (t[0], -t[2], t[1])):
        cells = []
        for c in peers:
            p = find(power, gov=gov, cus=cus, spread=spread, cfg=c)
            if not p:
                cells.append("-")
                continue
            cell = f"{pct_of(p, 0):.1f} / {pct_of(p, 1):.1f}"
            if c == "baseline":
                cell += (f" ({p['cpu0_pct']['min']:.1f}-{p['cpu0_pct']['max']:.1f} / "
                         f"{p['cpu1_pct']['min']:.1f}-{p['cpu1_pct']['max']:.1f})")
            cells.append(cell)
        for c in ("baseline", "knob10", "auto"):
            p = find(power, gov=gov, cus=cus, spread=spread, cfg=c)
            f = [p and p[f"cpu{cpu}_first_us"] for cpu in (0, 1)]
            cells.append(" / ".join(f"{x['median'] / 1000:.1f}" if x else "none" for x in f) if p else "-")
        out.append(f"| {gov} | {completion(cus, spread)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def burst_tables(k):
    """Per shape: each peer's first-of-burst and rest-of-burst p99 and the
    I/O CPUs' deep residency over the whole run, per burst size and gap."""
    rows = k.get("bursts") or []
    out = []
    for shape in [s for s in SHAPES if any(r["shape"] == s for r in rows)]:
        mine = [r for r in rows if r["shape"] == shape]
        peers = [c for c in PEERS if find(mine, cfg=c)]
        peers += [c for c in ("psd_baseline", "psd_floor", "stock_baseline", "stock_floor")
                  if find(mine, cfg=c) and c not in peers]
        reps = max((r["reps"] for r in mine), default=0)
        io = " and ".join(f"CPU{c}" for c in IO_CPUS[shape])
        out.append(f"\n**{shape} bursts** — first read of a burst p99 / the others' p99 in us, and the "
                   f"deep state's share of {io} over the whole run (%), median of {reps} runs (an A/A "
                   "pair each repeat; in brackets: the pair's spread of the first read's p99, %); "
                   f"QD1 4k reads on CPU1, 50 us completions, {SHAPE_TEXT[shape]}:\n")
        out.append("| burst | gap ms | " + " | ".join(LABEL.get(c, c) for c in peers) + " |")
        out.append("|---:|---:|" + "---:|" * len(peers))
        for b, g in sorted({(r["burst"], r["gap_ms"]) for r in mine}):
            cells = []
            for c in peers:
                r = find(mine, burst=b, gap_ms=g, cfg=c)
                if not r:
                    cells.append("-")
                    continue
                deep = sum(r[f"deep{cpu}_pct"] for cpu in IO_CPUS[shape]) / len(IO_CPUS[shape])
                rest = f"{r['rest_p99']:g}" if r["rest_p99"] >= 0 else "-"
                aa = r.get("first_p99_aa")
                cells.append(f"{r['first_p99']:g} / {rest}, {deep:.0f}%"
                             + (f" ({100 * aa:.0f})" if aa is not None else ""))
            out.append(f"| {b} | {g} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def burst_summary(k):
    """The bursts' targets per shape and peer: met, missed, and how many
    of the points are informative (deep allowed's first read is slower
    than C-states off's beyond the A/A spreads: something to buy)."""
    out = []
    rows = k["targets"].get("bursts") or []
    for shape in SHAPES:
        for cfg in PEERS:
            # a point with nothing measured (met_latency None) is not counted
            mine = [r for r in rows if r["shape"] == shape and r["cfg"] == cfg
                    and r["met_latency"] is not None]
            if not mine:
                continue
            info = [r for r in mine if r["informative"]]
            lat_miss = [f"B{r['burst']}/G{r['gap_ms']} {r.get('first_p99_over_floor')} "
                        f"(95 % {r.get('first_p99_ci95')})" for r in mine if not r["met_latency"]]
            power = [r for r in mine if r["power_target_applies"]]
            pw_miss = [f"B{r['burst']}/G{r['gap_ms']} {r['deep_over_baseline']}" for r in power
                       if not r["met_power"]]
            what = "p99 <= 1.05x C-states off" if shape == "local" else \
                "first-of-burst p99 <= C-states off + 10 us"
            out.append(f"- bursts {shape} {cfg}: {what} at {len(mine) - len(lat_miss)}/{len(mine)} points "
                       f"({sum(r['met_latency'] for r in info)}/{len(info)} informative); deep >= 0.90x "
                       f"deep allowed where the gap allows it: {len(power) - len(pw_miss)}/{len(power)}; "
                       f"misses: {', '.join(lat_miss + pw_miss) or 'none'}")
    return "\n".join(out)


def plot_bursts(k, prefix):
    """Latency bought against power kept on the bursty sweep: per peer and
    point, the first read's p99 over C-states off's (y) against the I/O
    CPUs' deep residency as a share of deep allowed's (x)."""
    rows = k["targets"].get("bursts") or []
    if not rows:
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), squeeze=False)
    for ax, shape in zip(axes[0], SHAPES):
        for cfg in PEERS:
            pts = [r for r in rows if r["shape"] == shape and r["cfg"] == cfg
                   and r.get("first_p99_over_floor") and r["deep_over_baseline"] is not None]
            if pts:
                ax.scatter([100 * r["deep_over_baseline"] for r in pts],
                           [r["first_p99_over_floor"] for r in pts], s=18,
                           color=COLOR.get(cfg, "#000000"), label=LABEL.get(cfg, cfg))
        ax.axhline(1.0, color="#1f77b4", lw=0.8, ls=":")
        ax.set_title(f"bursts, {shape} shape")
        ax.set_xlabel("deep residency of the I/O CPUs, % of deep allowed's (power kept)")
        ax.set_ylabel("first read of a burst p99 / C-states off's (latency, 1 = bought)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{prefix}-bursts.{ext}")
    plt.close(fig)


def db_tables(k):
    """The database per shape: each peer's rate and every query's p99."""
    rows = k.get("db") or []
    out = []
    for shape in [s for s in SHAPES if any(r["shape"] == s for r in rows)]:
        mine = [r for r in rows if r["shape"] == shape]
        peers = [c for c in PEERS + ["psd_baseline", "psd_floor", "stock_baseline", "stock_floor"]
                 if find(mine, cfg=c)]
        reps = max((r["reps"] for r in mine), default=0)
        out.append(f"\n**{shape} database** — SQLite on ext4 (bench/README.md): queries per second, "
                   f"p99 of every query / of the reads / of the updates in us, median of {reps} runs "
                   f"(an A/A pair each repeat; in brackets: the pair's spread of the p99, %); {SHAPE_TEXT[shape]}:\n")
        out.append("| peer | qps | p99 | read p99 | update p99 | deep % of the I/O CPUs |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for c in peers:
            r = find(mine, cfg=c)
            deep = sum(r[f"deep{cpu}_pct"] for cpu in IO_CPUS[shape]) / len(IO_CPUS[shape])
            aa = r.get("p99_aa")
            out.append(f"| {LABEL.get(c, c)} | {r['qps']:g} | {r['p99']:g}"
                       + (f" ({100 * aa:.0f})" if aa is not None else "")
                       + f" | {r['read_p99']:g} | {r['write_p99']:g} | {deep:.0f} |")
    cal = k.get("targets", {}).get("calibration") or []
    if cal:
        out.append("\n**Calibration** against the block RFC's Icelake Xeon (fio random reads, C6 on and "
                   "off, the knobs at 10 us / 3 ms): completion latency over C-states off's, 20 us "
                   "completions, QD1, menu (95 % bootstrap interval):\n")
        out.append("| idle table | shape | peer | max / off | RFC | mean / off | RFC |")
        out.append("|---|---|---|---:|---:|---:|---:|")
        for r in cal:
            out.append(f"| {r['idle']} | {r['shape']} | {LABEL.get(r['cfg'], r['cfg'])} | "
                       f"{r['max_over_floor']} {r['max_ci95']} | {r['rfc_max_over_floor']} | "
                       f"{r['mean_over_floor']} {r['mean_ci95']} | {r['rfc_mean_over_floor']} |")
    return "\n".join(out)


def summary(k):
    """The targets of bench/kernel.py, one line each (figures, met or not)."""
    t = k["targets"]
    out = ["\nTargets (computed by bench/kernel.py, never asserted):\n"]
    for r in t["phenomenon"] + t["phenomenon_fixed_delay"]:
        out.append(f"- phenomenon {r['shape']} {r['gov']} 50 us {'±%d%%' % r['spread'] if r['spread'] else 'fixed'}"
                   f" QD{r['qd']}: deep allowed p99 / C-states off p99 = {r['baseline_p99_over_floor']}"
                   f" (runs {r['range']}) {'met' if r['met'] else 'NOT met'}")
    for shape in shapes(k):
        for cfg in ("knob10", "auto", "ulease"):
            rows = [r for r in t["latency_bought"] if r["shape"] == shape and r["cfg"] == cfg
                    and r["p99_over_floor"] is not None]
            miss = [f"{r['gov']} {r['cus']}{'' if r['spread'] else 'f'} QD{r['qd']} {r['p99_over_floor']}"
                    + (f" (95 % {r['ci95']})" if r.get("ci95") else "")
                    for r in rows if not r["met"]]
            worst = max((r["p99_over_floor"] for r in rows), default=None)
            info = [r for r in rows if r.get("informative")]
            out.append(f"- latency bought {shape} {cfg}: {len(rows) - len(miss)}/{len(rows)} points <= 1.05x"
                       f" ({sum(r['met'] for r in info)}/{len(info)} where deep allowed is slower than"
                       f" C-states off beyond the A/A spreads), worst {worst}; misses: {', '.join(miss) or 'none'}")
        for cfg in [c for c in PEERS if c not in ("baseline", "psd_baseline")]:
            rows = [r for r in t["power_kept"] if r["shape"] == shape and r["cfg"] == cfg]
            if not rows:
                continue
            ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
            out.append(f"- power kept (shown, not a target) {shape} {cfg}: {sum(r.get('kept', r.get('met', False)) for r in rows)}/{len(rows)}"
                       f" CPU-points >= 0.95 of baseline in the second after the I/O, ratio"
                       f" {min(ratios, default=0):.3f}-{max(ratios, default=0):.3f}")
        base = [r for r in t["power_kept"] if r["shape"] == shape and r["cfg"] == "knob10"]
        if base:
            widths = [r["baseline_range"][1] - r["baseline_range"][0] for r in base]
            lows = [r["baseline_range"][0] for r in base]
            out.append(f"- baseline spread {shape}: min-max width {min(widths):.1f}-{max(widths):.1f} points,"
                       f" lowest run {min(lows):.1f} %")
        for cfg in ("knob10", "knob0", "auto"):
            rows = [r for r in t["vs_psd"] if r["shape"] == shape and r["cfg"] == cfg]
            if not rows:
                continue
            act = [r for r in rows if not r["psd_inactive"]]
            miss = [f"{r['gov']} {r['cus']}{'' if r['spread'] else 'f'} QD{r['qd']} "
                    f"{r['p99_over_floor']} vs {r['psd_p99_over_floor']}" for r in rows if not r["met"]]
            out.append(f"- vs PSD {shape} {cfg}: p99 at or under PSD's at {sum(r['met'] for r in rows)}/{len(rows)}"
                       f" points ({sum(r['met'] for r in act)}/{len(act)} under menu, where PSD acts;"
                       f" separated by the runs' ranges at {sum(r['separated'] and r['met'] for r in rows)});"
                       f" misses: {', '.join(miss) or 'none'}")
    secs = [g["host_seconds"] for g in k.get("guests", []) if g.get("host_seconds") is not None]
    if secs:
        out.append(f"- duration: {len(k['guests'])} guests, {len(secs)} with their host time:"
                   f" {sum(secs) / 3600:.1f} h in all (side by side on {os.cpu_count()} cores, the wall"
                   f" time is less), the longest {max(secs) / 60:.0f} min")
    for r in t.get("db") or []:
        out.append(f"- database {r['shape']} {r['cfg']}: p99 {r['p99']} us = {r['p99_over_floor']}x "
                   f"C-states off (95 % {r['p99_ci95']}, A/A {r['p99_aa']}), qps {r['qps_over_floor']}x; "
                   f"{'met' if r['met_latency'] else 'NOT met'} (<= 1.05x)")
    return "\n".join(out)


def kept(k, shape, cfg, **where):
    """Deep residency of the shape's I/O CPUs in the second after the last
    I/O, mean, as a share of its baseline's (PSD: its own kernel's)."""
    rows = [p for p in k["power"] if p["shape"] == shape]
    w = find(rows, **where, cfg=cfg)
    b = reference(rows, cfg, "baseline", **where)
    if not w or not b:
        return None
    cpus = io_of(k, shape)
    base = sum(pct_of(b, c) for c in cpus)
    return 100 * sum(pct_of(w, c) for c in cpus) / base if base else None


def plot_peers(k, prefix):
    """One point per configuration: latency bought (p99 over the
    C-states-off p99) against power kept (deep residency of the I/O CPUs
    in the second after the last I/O, % of deep allowed's); one row per
    shape, one column per completion time (spread +/- 50 %)."""
    rows = shapes(k)
    cols = sorted({p["cus"] for p in k["latency"] if p["spread"]})
    fig, ax = plt.subplots(len(rows), len(cols), figsize=(4.2 * len(cols), 4.3 * len(rows) + 0.8),
                           squeeze=False, sharey=True)
    for i, shape in enumerate(rows):
        lat = [p for p in k["latency"] if p["shape"] == shape]
        for j, cus in enumerate(cols):
            a = ax[i][j]
            spreads = [p["spread"] for p in lat if p["cus"] == cus and p["spread"]]
            if not spreads:
                a.set_visible(False)
                continue
            spread = max(spreads)
            for (gov, qd), marker in MARK.items():
                where = dict(gov=gov, cus=cus, spread=spread)
                for c in PEERS:
                    p = find(lat, **where, qd=qd, cfg=c)
                    floor = reference(lat, c, "floor", **where, qd=qd)
                    x = kept(k, shape, c, **where)
                    if not p or not floor or x is None:
                        continue
                    a.scatter(x, p["p99"] / floor["p99"], marker=marker, color=COLOR[c], s=36,
                              label=f"{LABEL[c]}" if (gov, qd) == ("menu", 1) else None)
            a.axhline(1.0, color="#1f77b4", lw=0.6, ls=":")
            a.axhline(1.05, color="#2ca02c", lw=0.6, ls="--")
            a.axvline(95, color="#2ca02c", lw=0.6, ls="--")
            a.set_title(f"{shape}, {cus} us ±{spread}%", fontsize=9)
            a.set_xlabel("power kept: I/O CPUs' deep share in the second after, % of deep allowed",
                         fontsize=7)
            # a shape may lack the first columns' points: label every panel
            a.tick_params(labelleft=True)
            a.set_ylabel("latency bought: p99 / C-states-off p99", fontsize=8)
    handles, labels = {}, {}
    for a in ax.flat:
        for h, l in zip(*a.get_legend_handles_labels()):
            handles.setdefault(l, h)
    from matplotlib.lines import Line2D
    hs = list(handles.values())
    hs += [Line2D([], [], marker=m, ls="", color="k", label=f"{g} QD{q}") for (g, q), m in MARK.items()]
    fig.legend(handles=hs, loc="lower center", ncol=7, fontsize=8)
    fig.suptitle("Latency bought against power kept, one point per configuration, 3-vCPU device model ("
                 + datetime.date.today().isoformat() + ")")
    fig.tight_layout(rect=(0, 0.08, 1, 0.97))
    fig.savefig(prefix + ".png", dpi=80)
    fig.savefig(prefix + ".svg")


def plot_cost(cli, k, prefix):
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    a = ax[0]
    labels, vals = [], []
    for irq, r in sorted(k["hotpath_ratios"].items()):
        for v in ("off", "on", "psdmodel"):
            if v in r and "clat" in r[v]:
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
    carry = os.environ.get("BLKQOS_BENCH_CARRY")
    if not k.get("hotpath") and carry:
        # a run without the hot path (BLKQOS_BENCH_HOTPATH=0) shows an
        # earlier run's, and says so
        with open(carry) as f:
            old = json.load(f)
            old = old.get("kernel", old)
        k["hotpath"], k["hotpath_ratios"] = old.get("hotpath", []), old.get("hotpath_ratios", {})
        k["hotpath_carried_from"] = os.path.basename(carry)
    result = {"date": datetime.date.today().isoformat(), "machine": machine(k.get("build", {})), "cli": cli, "kernel": k}
    with open(prefix + ".json", "w") as f:
        json.dump(result, f, indent=1)
    plot_peers(k, prefix)
    plot_cost(cli, k, prefix)
    plot_bursts(k, prefix)
    print(tables(cli, k))
    print(burst_tables(k))
    print(db_tables(k))
    print(summary(k))
    print(burst_summary(k))
    return 0


if __name__ == "__main__":
    sys.exit(main())
