#!/usr/bin/env python3
"""Benchmark v4: the smallest honest matrix (bench/README.md, "v4").

  v4.py specs [--stage N]   the guests of a stage, one per line (the file
                            kernel-patch/test/run's BLKQOS_BENCH_SPECS reads)
  v4.py run                 every stage: boots what is not kept yet, looks at
                            the runs after each stage, stops a peer once its
                            verdicts are decided (at most 3 looks)
  v4.py report [--json F]   the claims from the kept guests, each with its
                            bootstrap interval and verdict

Guests are kept, xz, with their stamps (host CPU seconds, build) under
bench/results/v4/guests: a cut run resumes from there, and the report reads
only the logs the stages name, so logs of other settings never pool.

Statistics (why, in bench/README.md): the unit is a run (the I/Os of a run
are correlated); every ratio is resampled over runs, 2,000 times with a
fixed seed. Latency claims use the pooled p99 (every I/O of every run of
the peer: what a user sees over time, bimodal runs included); the median
of the runs' p99 is shown beside it. A verdict is "met" when the whole
interval is on the target's side, "not met" when it is wholly on the other
side, "undecided" otherwise.
"""

import argparse
import functools
import json
import lzma
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "results", "v4")
KEEP = os.path.join(OUT, "guests")
CACHE = os.environ.get("BLKQOS_KERNEL_CACHE", "/var/cache/blkqos-kernel")
MEASURE = re.compile(r"^BLKQOS-MEASURE (\S+) (.*)$")
TEXT = {"kernel", "idle", "build", "dev", "shape", "gov", "cfg", "variant", "h", "firsts", "rests", "v4"}

# the matrix's settings (the issue's): Ice Lake table, HZ 250, menu, 50 us
# +/- 50 %, 10,000 I/Os a sustained run, bursts of 8 reads, 200 a run
IOS = 10000
SPREAD = 50
BURST, BURSTS, GAPS = 8, 200, (2, 16, 64)
HZ = 250
TIMEOUT_MS = 3       # the lease's timeout (knob10, auto, ulease)
RUNS, RUNS_DEEP = 6, 20
LOOKS = (6, 12, 20)  # the 20-run peers' looks: 99 % intervals but at the last
HOT_IOS, HOT_REPS = 20000, 15
NVME_US, NVME_RUNS, NVME_IOS = 50, 3, 2000
# the peers with 20 runs (their runs spread widely: deep allowed's per-run
# p99 fell in three modes in v3), where a target rests on them; where deep
# allowed is only shown (calibration, the database) it has 6
MANY = {"deep", "psd"}
MANY_PARTS = {"sustained", "stock", "epyc", "bursts"}
# the block RFC's Ice Lake Xeon (cover letter, 2024-08-29): completion
# latency of two 2-minute runs each, us; its "C6 off" is our c1e
RFC = {"c1e": {"max": (98.292, 93.409), "mean": (22.186, 22.583)},
       "deep": {"max": (242.706, 241.880), "mean": (23.767, 23.546)},
       "knob10": {"max": (103.628, 115.739), "mean": (22.489, 22.240)}}
IO_CPUS = {"cross": (0, 1), "local": (1,)}


def guest(kernel, name, idle="icx", ios=IOS, nvme=None, **v4):
    args = [f"blkqos_test.idle={idle}", f"blkqos.bench_ios={ios}", f"blkqos.bench_spread={SPREAD}"]
    args += [f"blkqos.{k}={v}" for k, v in v4.items()]
    return {"kernel": kernel, "name": name, "args": " ".join(args), "nvme": nvme}


def cfgs(peers, lo, hi, part):
    """blkqos.v4_cfgs for runs lo..hi of each peer (MANY's up to hi where
    the part has them, the others up to RUNS)"""
    out = []
    for p in peers:
        top = hi if p in many(part) else min(hi, RUNS)
        if lo <= top:
            out.append(f"{p}:{lo}-{top}")
    return ",".join(out)


def many(part):
    return MANY if part in MANY_PARTS else set()


def matrix():
    """Every point of the matrix: (part, kernel, kind, shape, idle, cus,
    qds, peers, extra), one guest each per stage (split by QD)."""
    lease_lat = ["deep", "c1e", "c1", "dma", "static", "knob10", "auto"]
    pts = []
    # QD4 where v3 saw the lease furthest from the floor (1.13x); the
    # stock kernel and the EPYC table at QD1 only (the host's budget)
    for qd in (1, 4):
        pts.append(("sustained", "lease", "lat", "cross", "icx", 50, qd, lease_lat))
        pts.append(("sustained", "psdmodel", "lat", "cross", "icx", 50, qd, ["psd", "deep", "c1"]))
    pts.append(("stock", "stock", "lat", "cross", "icx", 50, 1, ["deep", "c1e", "c1", "static", "ulease"]))
    pts.append(("epyc", "lease", "lat", "cross", "epyc", 50, 1, ["deep", "c1", "auto"]))
    for idle in ("icx", "spr"):
        pts.append(("calibration", "lease", "lat", "local", idle, 20, 1, ["deep", "c1e", "c1", "knob10"]))
    for shape in ("cross", "local"):
        pts.append(("bursts", "lease", "burst", shape, "icx", 50, None, ["deep", "c1", "static", "knob10", "auto"]))
    pts.append(("bursts", "stock", "burst", "cross", "icx", 50, None, ["deep", "c1", "ulease"]))
    pts.append(("db", "lease", "db", "cross", "icx", 50, None, ["deep", "c1", "knob10"]))
    pts.append(("db", "stock", "db", "cross", "icx", 50, None, ["deep", "c1", "ulease"]))
    return pts


def point_name(p):
    part, kernel, kind, shape, idle, cus, qd, _ = p
    return f"{part}-{kernel}-{shape}-{idle}-{cus}" + (f"-qd{qd}" if qd else "")


def specs(stage, stopped=()):
    """The guests of stage 1, 2 or 3: stage 1 runs every peer's first 6
    runs and the hot path and NVMe; stages 2 and 3 the MANY peers' next
    runs, where a peer is not stopped ((point name, peer) in stopped)."""
    lo, hi = {1: (1, LOOKS[0]), 2: (LOOKS[0] + 1, LOOKS[1]), 3: (LOOKS[1] + 1, LOOKS[2])}[stage]
    out = []
    for p in matrix():
        part, kernel, kind, shape, idle, cus, qd, peers = p
        name = point_name(p)
        live = [x for x in peers if (name, x) not in stopped]
        c = cfgs(live, lo, hi, part)
        if not c:
            continue
        v4 = {"bench_part": "v4", "v4_kind": kind, "v4_shape": shape, "v4_cus": cus, "v4_cfgs": c}
        if qd:
            v4["v4_qds"] = qd
        if kind == "burst":
            v4.update(v4_burst=BURST, v4_bursts=BURSTS, v4_gaps=",".join(map(str, GAPS)))
        out.append(guest(kernel, f"{name}-s{stage}", idle=idle, **v4))
    if stage == 1:
        for kernel in ("lease", "nolease", "psdmodel"):
            out.append(guest(kernel, f"hotpath-{kernel}", bench_part="hotpath",
                             hotpath_ios=HOT_IOS, hotpath_reps=HOT_REPS))
        out.append(guest("lease", "nvme-lease-cross", ios=NVME_IOS, nvme=f"nvme:{NVME_US}",
                         bench_part="v4", v4_kind="lat", v4_shape="cross", v4_cus=NVME_US,
                         v4_qds=1, v4_cfgs=",".join(f"{p}:1-{NVME_RUNS}" for p in
                                                    ("deep", "c1", "static", "knob10", "auto"))))
    return out


def spec_lines(gs):
    return "".join(f"{g['kernel']}|{g['name']}|{g['args']}" + (f"|{g['nvme']}" if g["nvme"] else "") + "\n"
                   for g in gs)


# ---- parsing

def num(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def parse_text(text):
    out = []
    for line in text.splitlines():
        m = MEASURE.match(line.strip())
        if not m:
            continue
        kind, rest = m.groups()
        f = {}
        for word in rest.split():
            if "=" in word:
                k, v = word.split("=", 1)
                f[k] = v if k in TEXT else num(v)
            elif kind in ("hotpath", "hotpath32"):  # iops,clat_mean_us,p99_us,max_us
                iops, mean, p99, mx = word.split(",")
                f.update(iops=num(iops), mean=num(mean), p99=num(p99), max=num(mx))
        out.append((kind, f))
    return out


def pairs(text):
    """"gap:count,..." (bins as distances from the previous one) into
    [(bin, count)] sorted by bin"""
    out, b = [], 0
    if not text:
        return out
    for item in text.split(","):
        gap, count = item.split(":")
        b += int(gap)
        out.append((b, int(count)))
    return out


def read_log(name):
    """A guest's console: the cache's if finished there, else the kept xz"""
    kept = os.path.join(KEEP, f"console-bench-v4-{name}.log.xz")
    if os.path.exists(kept):
        with lzma.open(kept, "rt", errors="replace") as f:
            return f.read()
    return None


def done_record(name):
    out = {}
    try:
        with open(os.path.join(KEEP, f"console-bench-v4-{name}.log.done")) as f:
            for line in f.read().splitlines()[1:]:
                k, _, v = line.partition(" ")
                out[k] = num(v) if k.startswith("host_") else v
    except OSError:
        pass
    return out


class Runs:
    """The runs of one row: a key (kernel, idle, build, shape, cus, qd or
    burst/gap, cfg) and its records"""

    def __init__(self):
        self.rows = {}

    def add(self, key, rec):
        self.rows.setdefault(key, []).append(rec)


def row_key(kind, f):
    base = (kind, f["kernel"], f["idle"], f["build"].split("-", 2)[0] + "-" + f["build"].split("-", 2)[1],
            f.get("dev", "null_blk"), f["shape"], f["cus"])
    if kind == "v4lat":
        return base + (f["qd"], f["cfg"])
    if kind == "v4burst":
        return base + (f["gap_ms"], f["cfg"])
    return base + (None, f["cfg"])


def stamp_of(name):
    try:
        with open(os.path.join(KEEP, f"console-bench-v4-{name}.log.done")) as f:
            return f.readline()
    except OSError:
        return ""


def wanted_reps(args):
    """{peer: set of runs} that a guest's blkqos.v4_cfgs names"""
    m = re.search(r"blkqos\.v4_cfgs=(\S+)", args)
    out = {}
    for item in (m.group(1).split(",") if m else []):
        peer, rng = item.split(":")
        lo, hi = map(int, rng.split("-"))
        out[peer] = set(range(lo, hi + 1))
    return out


class BadLog(SystemExit):
    pass


def check_record(g, kind, f, idle):
    if f["kernel"] != g["kernel"] or f["idle"] != idle:
        raise BadLog(f"v4: {g['name']}: a record of {f['kernel']}/{f['idle']}")
    # the device's CPU never went deeper than C1 (no exit spun, no deep)
    if f.get("dev", "null_blk") == "null_blk" and (f.get("spin2_pct", 0) or f.get("deep2_pct", 0)):
        raise BadLog(f"v4: {g['name']}: CPU2 left POLL and C1 in {f['cfg']} run {f['rep']}")
    # the latency log's unit: fio's own clat mean (us) against the log's (ns)
    if kind == "v4lat" and abs(f["mean_ns"] / 1000 - f["fio_clat_mean_us"]) > 0.02 * f["fio_clat_mean_us"] + 0.5:
        raise BadLog(f"v4: {g['name']}: log mean {f['mean_ns']} ns, fio's {f['fio_clat_mean_us']} us")


def collect(stages):
    """Every record of the guests the stages name, per row: a guest's log
    only where its stamp is for this guest's arguments, every run its
    peers' ranges name present once (per QD and gap), records of its
    kernel and table only"""
    rows, hot, guests, missing = {}, [], [], []
    for stage, gs in stages:
        for g in gs:
            text = read_log(g["name"])
            if text is None or g["args"] not in stamp_of(g["name"]):
                missing.append(g["name"])
                continue
            guests.append({"name": g["name"], "stage": stage, **done_record(g["name"])})
            idle = re.search(r"blkqos_test\.idle=(\w+)", g["args"]).group(1)
            seen = {}
            records = parse_text(text)
            for kind, f in records:
                if kind in ("v4lat", "v4burst", "v4db"):
                    check_record(g, kind, f, idle)
                    seen.setdefault((kind, f.get("qd"), f.get("gap_ms"), f["cfg"]), []).append(f["rep"])
            for (kind, qd, gap, cfg), reps in seen.items():
                if sorted(reps) != sorted(wanted_reps(g["args"]).get(cfg, ())):
                    raise BadLog(f"v4: {g['name']}: {cfg} qd{qd} gap{gap}: runs {sorted(reps)}, "
                                 f"not those asked")
            kinds = {k[0] for k in seen}
            if "v4_kind" in g["args"] and not kinds:
                raise BadLog(f"v4: {g['name']}: no records")
            for kind, f in records:
                if kind in ("hotpath", "hotpath32"):
                    f["qd"] = 32 if kind == "hotpath32" else 1
                    f["kernel"] = g["kernel"]
                    hot.append(f)
                    continue
                if kind not in ("v4lat", "v4burst", "v4db"):
                    continue
                rows.setdefault(row_key(kind, f), []).append(f)
    for key, recs in rows.items():
        builds = {r["build"] for r in recs}
        ios = {r.get("ios") for r in recs}
        if len(builds) > 1 or len(ios) > 1:
            raise SystemExit(f"v4: row {key} mixes builds {builds} or I/O counts {ios}")
    return rows, hot, guests, missing


# ---- statistics

def pct_rank(n, p):
    """nearest rank of the p-th percentile (p in per mille) of n values"""
    return max(1, -(-n * p // 1000))


class Tail:
    """Runs' latency histograms on one grid, for the pooled percentile of
    any resample of the runs: per run, the cumulative count at each bin"""

    def __init__(self, hists, scale):
        self.scale = scale
        self.grid = sorted({b for h in hists for b, _ in h})
        index = {b: i for i, b in enumerate(self.grid)}
        self.cum, self.n = [], []
        for h in hists:
            c = [0] * len(self.grid)
            for b, k in h:
                c[index[b]] += k
            for i in range(1, len(c)):
                c[i] += c[i - 1]
            self.cum.append(c)
            self.n.append(c[-1] if c else 0)

    def pct(self, runs, p):
        """pooled p-th percentile (per mille) over the runs (indices, with
        repeats): the first bin where the pooled count reaches the rank"""
        rank = pct_rank(sum(self.n[r] for r in runs), p)
        lo, hi = 0, len(self.grid) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if sum(self.cum[r][mid] for r in runs) >= rank:
                hi = mid
            else:
                lo = mid + 1
        return (self.grid[lo] + 0.5) * self.scale

    def mean(self, runs, means):
        return sum(means[r] * self.n[r] for r in runs) / sum(self.n[r] for r in runs)


def quantile(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, max(0, int(q * len(sorted_vals))))]


def t_cdf(t, df):
    """Student's t distribution function (Simpson's rule on the density)"""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    steps = 2000
    h = abs(t) / steps
    f = [c * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
    area = h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))
    return 0.5 + area if t >= 0 else 0.5 - area


def t_quantile(p, df):
    lo, hi = 0.0, 100.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@functools.lru_cache(maxsize=None)
def expanded_tail(level, n):
    """The bootstrap quantile that an interval of this level takes with n
    runs: the percentile interval undercovers with few runs (6 against 6
    gave 91 % for "95 %" in a simulation), so it is widened as
    Hesterberg's expanded percentile interval does: alpha'/2 =
    Phi(-sqrt(n / (n - 1)) t(alpha/2, n - 1))"""
    if n < 2:
        return 0.0
    t = t_quantile(1 - (1 - level) / 2, n - 1)
    return statistics.NormalDist().cdf(-math.sqrt(n / (n - 1)) * t)


class NoInterval(Exception):
    pass


def boot(stat_a, na, stat_b, nb, combine, level=0.95, n=2000, seed=42):
    """Bootstrap interval of combine(stat_a(runs of a), stat_b(runs of b)),
    each resampled over its own runs, expanded for the smaller sample; at
    levels beyond what n resamples resolve, their extremes. A sample of
    one run has no spread to resample: no interval ([None, None])"""
    if min(na, nb) < 2:
        return [None, None]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a = stat_a([rng.randrange(na) for _ in range(na)])
        b = stat_b([rng.randrange(nb) for _ in range(nb)])
        v = combine(a, b)
        if v is None:
            raise NoInterval("a resample without a value (a reference of 0)")
        out.append(v)
    out.sort()
    tail = expanded_tail(level, min(na, nb))
    return [round(quantile(out, tail), 4), round(quantile(out, 1 - tail), 4)]


def verdict(ci, target, side):
    """met / not met / undecided for "value <= target" (side "<=") or
    ">=", from the interval's bounds; side "info": whether a ratio shows a
    difference at all (informative when its interval is above 1)"""
    lo, hi = ci
    if lo is None:
        return "undecided"
    if side == "info":
        return "informative" if lo > 1 else "not informative" if hi <= 1 else "undecided"
    if side == "<=":
        return "met" if hi <= target else "not met" if lo > target else "undecided"
    return "met" if lo >= target else "not met" if hi < target else "undecided"


def ratio(a, b):
    return a / b if b else None


# ---- the claims

def groups_of(rows, kind):
    """the rows of one kind by point: {point key: {peer: records}}"""
    groups = {}
    for key, recs in rows.items():
        if key[0] == kind:
            groups.setdefault(key[:-1], {})[key[-1]] = recs
    return groups


def lat_stats(recs):
    tail = Tail([pairs(r["h"]) for r in recs], 100)
    runs = list(range(len(recs)))
    return {"tail": tail, "recs": recs, "means": [r["mean_ns"] for r in recs],
            "p99_us": round(tail.pct(runs, 990) / 1000, 2),
            "p99_median_of_runs_us": round(statistics.median(r["p99_ns"] for r in recs) / 1000, 2),
            "p99_runs_us": [round(r["p99_ns"] / 1000, 1) for r in recs],
            "max_us": round(max(r["max_ns"] for r in recs) / 1000, 1),
            "mean_us": round(statistics.mean(r["mean_ns"] for r in recs) / 1000, 3),
            "runs": len(recs)}


def lat_ratio(a, b, level=0.95, p=990):
    """pooled p-th percentile of a over b's, with its interval"""
    ta, tb = a["tail"], b["tail"]
    na, nb = len(ta.n), len(tb.n)
    point = ta.pct(range(na), p) / tb.pct(range(nb), p)
    ci = boot(lambda r: ta.pct(r, p), na, lambda r: tb.pct(r, p), nb, ratio, level)
    return round(point, 4), ci


def median_ratio(a, b, level=0.95):
    """the median of a's runs' p99 over b's, with its interval"""
    va, vb = [r["p99_ns"] for r in a["recs"]], [r["p99_ns"] for r in b["recs"]]
    point = statistics.median(va) / statistics.median(vb)
    ci = boot(lambda r: statistics.median(va[i] for i in r), len(va),
              lambda r: statistics.median(vb[i] for i in r), len(vb), ratio, level)
    return round(point, 4), ci


def shares(recs, cpus, what="deep"):
    return round(statistics.mean(statistics.mean(r[f"{what}{c}_pct"] for c in cpus) for r in recs), 2)


def claim(name, part, statistic, point, ci, target, side, level=0.95, peers=(), **extra):
    """side "<=" or ">=" with a target; "info" (is there a difference);
    "shown" (an interval, no verdict). peers: every peer whose runs the
    claim uses (the early stop looks at them)"""
    out = {"claim": name, "part": part, "statistic": statistic, "value": point, "ci": ci,
           "level": level, "target": target, "side": side, "peers": sorted(peers)}
    out["verdict"] = "shown" if side == "shown" else verdict(ci, target, side)
    out.update(extra)
    return out


def lat_claims(rows, level=0.95):
    """Sustained, calibration and EPYC points: ratios over c1 of the same
    kernel, table, build and point"""
    out = []
    groups = groups_of(rows, "v4lat")
    for gkey, peers in sorted(groups.items(), key=str):
        _, kernel, idle, build, dev, shape, cus, qd = gkey
        if "c1" not in peers:
            continue
        st = {p: lat_stats(r) for p, r in peers.items()}
        c1 = st["c1"]
        where = dict(kernel=kernel, idle=idle, build=build, dev=dev, shape=shape, cus=cus, qd=qd)
        part = "nvme" if dev == "nvme" else "calibration" if shape == "local" else "epyc" if idle == "epyc" else (
            "stock" if kernel == "stock" else "sustained")
        rows_out = {p: {k: v for k, v in s.items() if k not in ("tail", "recs", "means")} for p, s in st.items()}
        for p, s in st.items():
            # QEMU's NVMe: the vector's CPU and fio's, as each run found them
            cpus = IO_CPUS[shape] if dev == "null_blk" else tuple(
                sorted({r["irq_cpu"] for r in s["recs"]} | {r["sub_cpu"] for r in s["recs"]}))
            rows_out[p]["deep_io_pct"] = shares(s["recs"], cpus)
            rows_out[p]["device_cpu_c1_pct"] = shares(s["recs"], (2,), "c1_") if dev == "null_blk" else None
            rows_out[p]["irq_cpus"] = sorted({r["irq_cpu"] for r in s["recs"]})
            rows_out[p]["sub_cpus"] = sorted({r["sub_cpu"] for r in s["recs"]})
        if dev == "nvme":
            out.append({"claim": "nvme placement and CPUs held (latency: emulator noise, no claim)",
                        "part": part, **where, "rows": rows_out, "verdict": "shown"})
            continue
        for p in st:
            if p == "c1":
                continue
            v, ci = lat_ratio(st[p], c1, level)
            med, mci = median_ratio(st[p], c1, level)
            if p == "deep":
                target, side, name = (1.3, ">=", "phenomenon: deep allowed p99 / c1") if (
                    part == "sustained" and kernel == "lease") else (None, "info", "deep allowed p99 / c1")
            elif p in ("knob10", "auto", "ulease") and part != "calibration":
                target, side, name = 1.05, "<=", f"latency bought: {p} p99 / c1"
            else:
                target, side, name = None, "shown", f"{p} p99 / c1"
            c = claim(name, part, "pooled p99 ratio", v, ci, target, side, level, peers=(p, "c1"), **where,
                      cfg=p, median_of_runs_ratio=med, median_of_runs_ci=mci, runs=st[p]["runs"],
                      ref_runs=c1["runs"])
            # decided only where both statistics decide alike
            if side != "shown" and c["verdict"] != "undecided" and verdict(mci, target, side) != c["verdict"]:
                c["verdict"] = "undecided (statistic)"
            out.append(c)
        out.append({"claim": "rows", "part": part, **where, "rows": rows_out, "verdict": "shown"})
        if part == "calibration":
            cal = {"claim": "calibration beside the block RFC (its C6 off = c1e; its runs 2 minutes, ours 10,000 I/Os)",
                   "part": part, **where, "verdict": "shown", "peers": {}}
            # the RFC measured Ice Lake: its figures only beside icx's
            rfc_here = RFC if idle == "icx" else {}
            for p in ("deep", "c1e", "knob10", "c1"):
                if p in st:
                    cal["peers"][p] = {"max_us": st[p]["max_us"], "mean_us": st[p]["mean_us"],
                                       "p99_us": st[p]["p99_us"], "rfc": rfc_here.get(p)}
            if "c1e" in st:
                for p in ("deep", "knob10"):
                    if p in st:
                        # a maximum has no bootstrap interval worth the name
                        # (the resamples' maxima are the observed ones), and
                        # the RFC's covers 2-minute runs: shown, no interval
                        mx = st[p]["max_us"] / st["c1e"]["max_us"]
                        cal["peers"][p]["max_over_c1e"] = {"value": round(mx, 3), "rfc": [
                            round(RFC[p]["max"][i] / RFC["c1e"]["max"][i], 3) for i in (0, 1)] if rfc_here else None}
                        v, ci = lat_ratio(st[p], st["c1e"], level, p=999)
                        cal["peers"][p]["p999_over_c1e"] = {"value": v, "ci": ci}
                        ta, tb = st[p]["tail"], st["c1e"]["tail"]
                        ma, mb = st[p]["means"], st["c1e"]["means"]
                        mv = ta.mean(range(len(ma)), ma) / tb.mean(range(len(mb)), mb)
                        mci = boot(lambda r: ta.mean(r, ma), len(ma), lambda r: tb.mean(r, mb), len(mb), ratio, level)
                        rfc = [round(RFC[p]["mean"][i] / RFC["c1e"]["mean"][i], 3) for i in (0, 1)]
                        cal["peers"][p]["mean_over_c1e"] = {"value": round(mv, 4), "ci": mci,
                                                            "rfc": rfc if rfc_here else None}
            out.append(cal)
    # PSD against the lease, each over its own kernel's c1
    for qd in (1, 4):
        lk = [k for k in groups if k[1] == "lease" and k[2] == "icx" and k[5] == "cross" and k[7] == qd and k[4] == "null_blk"]
        pk = [k for k in groups if k[1] == "psdmodel" and k[5] == "cross" and k[7] == qd]
        if not lk or not pk or "psd" not in groups[pk[0]] or "c1" not in groups[pk[0]]:
            continue
        L, P = groups[lk[0]], groups[pk[0]]
        psd, pc1 = lat_stats(P["psd"]), lat_stats(P["c1"])
        lc1 = lat_stats(L["c1"])
        for p in ("knob10", "auto"):
            if p not in L:
                continue
            s = lat_stats(L[p])
            tl, tc, tp, tq = s["tail"], lc1["tail"], psd["tail"], pc1["tail"]
            rng = random.Random(7)
            vals = []
            for _ in range(2000):
                def rs(t):
                    return [rng.randrange(len(t.n)) for _ in t.n]
                vals.append((tl.pct(rs(tl), 990) / tc.pct(rs(tc), 990)) /
                            (tp.pct(rs(tp), 990) / tq.pct(rs(tq), 990)))
            vals.sort()
            point = (tl.pct(range(len(tl.n)), 990) / tc.pct(range(len(tc.n)), 990)) / (
                tp.pct(range(len(tp.n)), 990) / tq.pct(range(len(tq.n)), 990))
            small = min(len(tl.n), len(tc.n), len(tp.n), len(tq.n))
            tail = expanded_tail(level, small)
            ci = [round(quantile(vals, tail), 4), round(quantile(vals, 1 - tail), 4)] if small > 1 else [None, None]
            # within 5 % of PSD or better (non-inferiority, the margin of
            # the other latency targets); one boot per kernel: the
            # interval has no boot-to-boot variation in it
            out.append(claim(f"vs PSD: ({p} / c1) / (psd / c1 of its kernel)", "sustained", "pooled p99 ratio",
                             round(point, 4), ci, 1.05, "<=", level, peers=(p, "c1", "psd"), kernel="lease",
                             kernels=["lease", "psdmodel"],
                             shape="cross", idle="icx", qd=qd, cfg=p))
    return out


def burst_stats(recs, cpus):
    firsts = [[int(x) for x in r["firsts"].split(",")] for r in recs]
    tf = Tail([[(v, 1) for v in f] for f in firsts], 1)
    tr = Tail([pairs(r["rests"]) for r in recs], 1)
    return {"first": tf, "rest": tr, "recs": recs,
            "gapdeep": [statistics.mean(r[f"gapdeep{c}_pct"] for c in cpus) for r in recs],
            "n_first": sum(len(f) for f in firsts)}


def burst_claims(rows, level=0.95):
    out = []
    groups = groups_of(rows, "v4burst")
    tick_ms = 1000 / HZ
    # by kernel, shape, then gap in ms (not as text: 2 before 16)
    for gkey, peers in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][5], kv[0][7])):
        _, kernel, idle, build, dev, shape, cus, gap = gkey
        if "c1" not in peers or "deep" not in peers:
            continue
        cpus = IO_CPUS[shape]
        st = {p: burst_stats(r, cpus) for p, r in peers.items()}
        c1, deep = st["c1"], st["deep"]
        # the lease lapses at most timeout + 2 ticks after the last I/O
        where = dict(kernel=kernel, idle=idle, build=build, shape=shape, cus=cus, gap_ms=gap,
                     lease_outlives_gap=gap < TIMEOUT_MS + 2 * tick_ms)
        rows_out = {}
        for p, s in st.items():
            nr = len(s["first"].n)
            rows_out[p] = {"runs": nr, "first_p99_us": s["first"].pct(range(nr), 990) - 0.5,
                           "first_p99_of": s["n_first"],
                           "rest_p99_us": s["rest"].pct(range(nr), 990) - 0.5,
                           "gap_deep_pct": round(statistics.mean(s["gapdeep"]), 2)}
        out.append({"claim": "rows", "part": "bursts", **where, "rows": rows_out, "verdict": "shown"})
        for p, s in st.items():
            if p == "c1":
                continue
            tf, tc = s["first"], c1["first"]
            nf, nc = len(tf.n), len(tc.n)
            if shape == "cross" and p != "deep":
                # first read within 10 us of c1's: the difference
                v = tf.pct(range(nf), 990) - tc.pct(range(nc), 990)
                ci = boot(lambda r: tf.pct(r, 990), nf, lambda r: tc.pct(r, 990), nc, lambda a, b: a - b, level)
                out.append(claim(f"bursts: {p} first-read p99 - c1's (us)", "bursts", "pooled first-of-burst p99",
                                 v, ci, 10, "<=", level, peers=(p, "c1"), **where, cfg=p))
            else:
                for what in ("first", "rest"):
                    ta, tb = s[what], c1[what]
                    v = ta.pct(range(nf), 990) / tb.pct(range(nc), 990)
                    ci = boot(lambda r: ta.pct(r, 990), nf, lambda r: tb.pct(r, 990), nc, ratio, level)
                    tgt = None if p == "deep" else 1.05
                    out.append(claim(f"bursts: {p} {what}-read p99 / c1", "bursts", f"pooled {what} p99 ratio",
                                     round(v, 4), ci, tgt, "<=" if tgt else "info", level, peers=(p, "c1"),
                                     **where, cfg=p))
            if p in ("deep",):
                continue
            ga, gd = s["gapdeep"], deep["gapdeep"]
            v = statistics.mean(ga) / statistics.mean(gd) if statistics.mean(gd) else None
            if v is None:
                continue
            ci = boot(lambda r: statistics.mean(ga[i] for i in r), len(ga),
                      lambda r: statistics.mean(gd[i] for i in r), len(gd), ratio, level)
            out.append(claim(f"bursts: {p} deep residency between bursts / deep's", "bursts",
                             "mean of runs' share", round(v, 4), ci, 0.90, ">=", level, peers=(p, "deep"),
                             **where, cfg=p))
    return out


def db_claims(rows, level=0.95):
    out = []
    groups = groups_of(rows, "v4db")
    for gkey, peers in sorted(groups.items(), key=str):
        _, kernel, idle, build, dev, shape, cus, _ = gkey
        if "c1" not in peers:
            continue
        c1 = [r["p99"] for r in peers["c1"]]
        for p, recs in peers.items():
            if p == "c1":
                continue
            vals = [r["p99"] for r in recs]
            v = statistics.median(vals) / statistics.median(c1)
            ci = boot(lambda r: statistics.median(vals[i] for i in r), len(vals),
                      lambda r: statistics.median(c1[i] for i in r), len(c1), ratio, level)
            tgt = None if p == "deep" else 1.05
            out.append(claim(f"SQLite: {p} query p99 / c1", "db", "median of runs' p99 (per-query p99 per run)",
                             round(v, 4), ci, tgt, "<=" if tgt else "info", level, peers=(p, "c1"), kernel=kernel,
                             idle=idle, shape=shape, cfg=p, runs=len(vals),
                             deep_io_pct=shares(recs, IO_CPUS[shape])))
    return out


def hot_claims(hot):
    """The knob's cost on the hot path as the mean completion latency (us,
    fio's clat mean: fio's IOPS comes from a runtime in whole ms, 1 %
    steps for a 20,000-I/O run of ~110 ms, too coarse for a 1 % target),
    as a throughput ratio (the reference's latency over the variant's,
    >= 0.99). Knob on over off is paired (run n of each ran back to back
    in one guest); the kernels against the one without the lease are
    unpaired, one boot each (no boot-to-boot variation in the interval:
    said with the claim)"""
    out = []
    for irq, qd in sorted({(h["irq"], h["qd"]) for h in hot}):
        hp = [h for h in hot if h["irq"] == irq and h["qd"] == qd]
        by, runs = {}, {}
        for h in hp:
            v = h["variant"] if h["kernel"] == "lease" else h["kernel"]
            by.setdefault(v, []).append(h["mean"])
            runs.setdefault(v, {})[h["run"]] = h["mean"]
        if "on" in runs and "off" in runs:
            pr = [runs["off"][n] / runs["on"][n] for n in sorted(runs["on"]) if n in runs["off"]]
            ci = boot(lambda r: statistics.median(pr[i] for i in r), len(pr), lambda r: 1, len(pr),
                      lambda a, b: a)
            out.append(claim("hot path: clat mean, knob off / on (paired)", "hotpath",
                             "median of paired runs' ratio", round(statistics.median(pr), 4), ci, 0.99, ">=",
                             peers=("on", "off"), irq=irq, qd=qd, runs=len(pr)))
        for v, base in (("off", "nolease"), ("on", "nolease"), ("psdmodel", "nolease")):
            if v in by and base in by:
                a, b = by[base], by[v]
                val = statistics.median(a) / statistics.median(b)
                ci = boot(lambda r: statistics.median(a[i] for i in r), len(a),
                          lambda r: statistics.median(b[i] for i in r), len(b), ratio)
                out.append(claim(f"hot path: clat mean, {base} / {v} (one boot each)", "hotpath",
                                 "median of runs' clat mean", round(val, 4), ci, 0.99, ">=", peers=(v, base),
                                 irq=irq, qd=qd, runs=len(b)))
    return out


def claims(rows, hot, level=0.95):
    return lat_claims(rows, level) + burst_claims(rows, level) + db_claims(rows, level) + hot_claims(hot)


INTERIM = 0.999  # the level of an interim look (Haybittle-Peto)


def decided_stops(rows, stage):
    """(point, peer) of the MANY peers whose every claim (as the peer
    measured or as a reference) is decided at the interim level after
    this stage's look: a stop at 99.9 % keeps the final 95 % honest"""
    stops = set()
    cl = claims(rows, [], level=INTERIM)
    for p in matrix():
        name = point_name(p)
        for peer in set(p[7]) & many(p[0]):
            mine = [c for c in cl if peer in c.get("peers", ()) and p[1] in c.get("kernels", [c.get("kernel")])
                    and c.get("shape") == p[3] and c.get("idle") == p[4]
                    and c.get("qd") == p[6] and c["part"] == p[0] and c["side"] != "shown"]
            if mine and all(c["verdict"] not in ("undecided", "undecided (statistic)") for c in mine):
                stops.add((name, peer))
    return stops


def stages_run(do_boot):
    """Every stage, booting (do_boot) what is not kept; the stops follow
    from the kept logs alone, so a rerun derives the same stages"""
    done, stopped = [], set()
    for stage in (1, 2, 3):
        gs = specs(stage, stopped)
        if not gs:
            break
        with open(os.path.join(OUT, f"specs-stage{stage}.txt"), "w") as f:
            f.write(spec_lines(gs))
        if do_boot:
            boot_stage(stage)
        done.append((stage, gs))
        rows, _, _, missing = collect(done)
        if missing:
            return done, stopped, missing
        # a stop after the last look stops nothing: not recorded as one
        if stage < len(LOOKS):
            stopped |= decided_stops(rows, stage)
    return done, stopped, []


def boot_stage(stage):
    env = dict(os.environ, BLKQOS_BENCH_SPECS=os.path.join(OUT, f"specs-stage{stage}.txt"),
               BLKQOS_BENCH_KEEP=KEEP, BLKQOS_BENCH_OPT="speed", BLKQOS_BENCH_HZ=str(HZ),
               BLKQOS_BENCH_JOBS=os.environ.get("BLKQOS_BENCH_JOBS", "2"))
    t0 = time.time()
    rc = subprocess.call([os.path.join(ROOT, "kernel-patch", "test", "run"), "--bench"], env=env)
    print(f"v4: stage {stage} took {time.time() - t0:.0f} s (rc {rc})", file=sys.stderr)


def report(done, stopped, missing):
    rows, hot, guests, _ = collect(done)
    cl = claims(rows, hot)
    cpu = sum(g.get("host_cpu_seconds", 0) for g in guests)
    return {"settings": {"ios": IOS, "spread_pct": SPREAD, "burst": BURST, "bursts": BURSTS, "gaps_ms": GAPS,
                         "hz": HZ, "runs": RUNS, "runs_deep": RUNS_DEEP, "looks": LOOKS},
            "guests": guests, "missing": missing, "stopped": sorted(map(list, stopped)),
            "host_cpu_seconds": round(cpu, 1), "host_core_hours": round(cpu / 3600, 2),
            "claims": cl}


def fmt(c):
    v = c["value"]
    ci = c["ci"]
    if ci[0] is None:
        return f"{v:.3f} (one run: no interval)"
    if isinstance(v, float) and abs(v) < 20:
        return f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{v:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"


def where_of(c):
    bits = [c.get("kernel", ""), c.get("idle", ""), c.get("shape", "")]
    if c.get("cus") not in (None, 50):
        bits.append(f"{c['cus']} us")
    if c.get("qd"):
        bits.append(f"QD{c['qd']}")
    if c.get("gap_ms") is not None:
        bits.append(f"G={c['gap_ms']} ms" + (" (lease outlives gap)" if c.get("lease_outlives_gap") else ""))
    if c["part"] == "hotpath":
        bits = [f"irqmode {c['irq']}", f"QD{c['qd']}"]
    return ", ".join(b for b in bits if b)


def markdown(r):
    """the claims table: every claim with its interval and verdict"""
    lines = ["| claim | where | statistic | value [95 % interval] | target | verdict |",
             "|---|---|---|---|---|---|"]
    for c in r["claims"]:
        if "value" not in c:
            continue
        tgt = f"{c['side']} {c['target']}" if c["target"] is not None else "-"
        lines.append(f"| {c['claim']} | {where_of(c)} | {c['statistic']} | {fmt(c)} | {tgt} | {c['verdict']} |")
    counts = {}
    for c in r["claims"]:
        if c.get("target") is not None:
            counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    lines.append("")
    lines.append("Targets: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) +
                 f". Host: {r['host_core_hours']} core-hours of QEMU CPU time over {len(r['guests'])} guests.")
    return "\n".join(lines) + "\n"


def cell(c):
    v, (lo, hi) = c["value"], c["ci"]
    if lo is None:
        return f"{v} (1 run)"
    # ratios to 3 decimals (1.100 and 1.096 differ); microseconds whole,
    # as idle-watch takes them
    f = ".0f" if "(us)" in c["claim"] else ".3f"
    return f"{v:{f}} [{lo:{f}}, {hi:{f}}] **{c['verdict']}**"


def summary(r):
    """the README's one screen: the claims that carry the project's
    case, each point's value, 95 % interval and verdict"""
    cl = [c for c in r["claims"] if "value" in c]

    def pick(name, **where):
        return [c for c in cl if c["claim"].startswith(name) and all(c.get(k) == v for k, v in where.items())]

    lines = ["| claim (target) | where | value [95 % interval] verdict |", "|---|---|---|"]

    def row(label, cs, key):
        if cs:
            lines.append(f"| {label} | " + "; ".join(f"{key(c)}" for c in cs) + " | " +
                         "; ".join(cell(c) for c in cs) + " |")
    qd = lambda c: f"QD{c['qd']}"  # noqa: E731
    gap = lambda c: f"{c['shape']} G={c['gap_ms']}"  # noqa: E731
    row("deep allowed p99 / c1, lease kernel (>= 1.3: something to buy)", pick("phenomenon", idle="icx"), qd)
    for p in ("knob10", "auto"):
        row(f"{p} p99 / c1 (<= 1.05)", pick(f"latency bought: {p}", kernel="lease", idle="icx"), qd)
    for p, what in (("c1e", "C-states off as set"), ("dma", "cpu_dma_latency"), ("static", "resume latency")):
        row(f"{p} p99 / c1 ({what}; shown)", pick(f"{p} p99", kernel="lease", idle="icx", part="sustained"), qd)
    row("(knob10 / c1) / (psd / c1) (<= 1.05)", pick("vs PSD: (knob10"), qd)
    row("ulease p99 / c1, stock kernel (<= 1.05)", pick("latency bought: ulease"), qd)
    row("auto p99 / c1, EPYC table (<= 1.05)", pick("latency bought: auto", idle="epyc"), qd)
    for p, k in (("knob10", "lease"), ("ulease", "stock")):
        row(f"{p}: first read p99 - c1's, us (<= 10)", pick(f"bursts: {p} first-read p99 -", kernel=k), gap)
        row(f"{p}: first read p99 / c1 (<= 1.05)", pick(f"bursts: {p} first-read p99 /", kernel=k), gap)
        row(f"{p}: deep residency between bursts / deep's (>= 0.90)",
            pick(f"bursts: {p} deep residency", kernel=k), gap)
    row("SQLite query p99 / c1 (<= 1.05)", [c for c in pick("SQLite") if c["cfg"] != "deep"],
        lambda c: f"{c['cfg']} ({c['kernel']})")
    row("hot path: reference's clat mean / variant's (>= 0.99)", pick("hot path"),
        lambda c: c["claim"].split("mean, ")[1].split(" (")[0] + f" irq{c['irq']} QD{c['qd']}")
    counts = {}
    for c in cl:
        if c.get("target") is not None:
            counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    lines.append("")
    lines.append(f"Every target of the run ({len([c for c in cl if c.get('target') is not None])}): " +
                 ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) +
                 f"; {r['host_core_hours']} host core-hours of QEMU CPU time, {len(r['guests'])} guests "
                 f"(`results/v4/claims.md` has every claim).")
    return "\n".join(lines) + "\n"


def plot(r, path):
    """latency bought against deep residency kept, on the bursts: x the
    I/O CPUs' deep residency between bursts, y first- and rest-of-burst
    p99 over c1's"""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colors = {"deep": "#888888", "c1": "#000000", "static": "#9467bd", "knob10": "#1f77b4",
              "auto": "#2ca02c", "ulease": "#ff7f0e"}
    markers = {"deep": "o", "c1": "s", "static": "D", "knob10": "o", "auto": "o", "ulease": "^"}
    for c in r["claims"]:
        if c["part"] != "bursts" or c["claim"] != "rows":
            continue
        c1 = c["rows"]["c1"]
        for peer, row in c["rows"].items():
            for ax, what in ((axes[0], "first_p99_us"), (axes[1], "rest_p99_us")):
                # peers that coincide (auto and knob10, static and c1)
                # stay visible: a marker each, the stock kernel's hollow
                stock = c["kernel"] == "stock"
                ax.scatter(row["gap_deep_pct"], row[what] / c1[what], marker=markers.get(peer, "o"),
                           s=(70 if peer in ("auto", "static") else 30), linewidths=1.2,
                           facecolors="none" if stock or peer in ("auto", "static") else colors.get(peer, "red"),
                           edgecolors=colors.get(peer, "red"),
                           label=f"{peer} (stock kernel)" if stock else peer)
                ax.annotate(f"{c['shape'][0]}{c['gap_ms']}", (row["gap_deep_pct"], row[what] / c1[what]),
                            fontsize=6, alpha=0.6)
    for ax, title in ((axes[0], "first read of a burst"), (axes[1], "the other reads")):
        ax.set_xlabel("deep residency of the I/O CPUs between bursts (%)")
        ax.set_title(title + ": p99 / c1's")
        ax.axhline(1.05, color="#cccccc", linestyle=":")
        h, lab = ax.get_legend_handles_labels()
        seen = {}
        for hh, ll in zip(h, lab):
            seen.setdefault(ll, hh)
        ax.legend(seen.values(), seen.keys(), fontsize=7)
    axes[0].set_ylabel("p99 over c1 (C-states off to C1)")
    fig.suptitle("bursts of 8 reads after G ms (c/l: cross/local shape, G in ms)", fontsize=9)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{path}.{ext}", dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("specs", "run", "report"))
    ap.add_argument("--stage", type=int, default=1)
    ap.add_argument("--json", default=os.path.join(OUT, "v4.json"))
    a = ap.parse_args()
    if a.what == "specs":
        sys.stdout.write(spec_lines(specs(a.stage)))
        return 0
    os.makedirs(KEEP, exist_ok=True)
    done, stopped, missing = stages_run(a.what == "run")
    r = report(done, stopped, missing)
    with open(a.json, "w") as f:
        json.dump(r, f, indent=1)
    with open(os.path.join(OUT, "claims.md"), "w") as f:
        f.write(markdown(r))
    with open(os.path.join(OUT, "summary.md"), "w") as f:
        f.write(summary(r))
    try:
        plot(r, os.path.join(OUT, "bursts"))
    except ImportError:
        print("v4: no matplotlib here: no plot (bench/run's venv has it)", file=sys.stderr)
    for c in r["claims"]:
        if c["claim"] != "rows" and "value" in c:
            print(f"{c['verdict']:>22}  {c['claim']}  {c['value']} {c['ci']}  "
                  f"{c.get('shape', '')} qd{c.get('qd', '')} gap{c.get('gap_ms', '')} {c.get('idle', '')}")
    if missing:
        print(f"v4: {len(missing)} guests not kept yet: {' '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
