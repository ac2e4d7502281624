#!/usr/bin/env python3
"""What holding the CPUs shallow buys on the machine this runs on.

    bench/hardware/measure.py OUTDIR [--blkqos PATH] [--seconds S] [--rounds N]

Writes OUTDIR/machine.json (kernel, CPU, idle driver and governor, every
CPU's idle table, haltpoll's parameters, the disks) and OUTDIR/result.json
(per configuration: QD1 4 KiB random read latency, sustained and in bursts,
idle residency of every CPU, the lease's own CPU time), and prints a table.

Read-only on the disk (O_RDONLY | O_DIRECT). The configurations, run in a
random order in each round so that drift in the host spreads over all:

  deep    the machine as found
  poll    every CPU's pm_qos_resume_latency_us "n/a" (no idle state but
          polling) for the configuration: "C-states off" at its strictest
  c1      every CPU held at the exit latency of the shallowest halting
          state: only where deeper states exist (else it is deep)
  lease0  `blkqos lease` at limit 0 on the disk (polling while it has I/O)

It is the stepping stone of `blkqos probe` (issue 40): the same questions,
asked with the tools a bare machine has (Python, no fio). Every per-CPU
value is saved before the first write and put back after each
configuration, on SIGTERM/SIGINT and at exit.
"""

import argparse
import json
import mmap
import os
import platform
import random
import signal
import subprocess
import sys
import time

SYS_CPU = "/sys/devices/system/cpu"
BLOCK = 4096


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return default if default is not None else f"<{e.strerror}>"


def cpus():
    out = []
    for name in os.listdir(SYS_CPU):
        if name.startswith("cpu") and name[3:].isdigit():
            out.append(int(name[3:]))
    return sorted(out)


def idle_table(cpu):
    base = f"{SYS_CPU}/cpu{cpu}/cpuidle"
    if not os.path.isdir(base):
        return []
    states = sorted(
        (s for s in os.listdir(base) if s.startswith("state")), key=lambda s: int(s[5:])
    )
    table = []
    for s in states:
        d = f"{base}/{s}"
        table.append(
            {
                "state": s,
                "name": read(f"{d}/name"),
                "desc": read(f"{d}/desc"),
                "latency_us": read(f"{d}/latency"),
                "residency_us": read(f"{d}/residency"),
                "disable": read(f"{d}/disable"),
                "default_status": read(f"{d}/default_status", ""),
            }
        )
    return table


def idle_counters():
    """Per CPU, per state: (usage, time_us)."""
    out = {}
    for cpu in cpus():
        base = f"{SYS_CPU}/cpu{cpu}/cpuidle"
        if not os.path.isdir(base):
            continue
        row = {}
        for s in os.listdir(base):
            if s.startswith("state"):
                try:
                    row[s] = (
                        int(read(f"{base}/{s}/usage", "0")),
                        int(read(f"{base}/{s}/time", "0")),
                    )
                except ValueError:
                    pass
        out[cpu] = row
    return out


def params(module):
    d = f"/sys/module/{module}/parameters"
    if not os.path.isdir(d):
        return None
    return {p: read(f"{d}/{p}") for p in sorted(os.listdir(d))}


def disk_of_root():
    """The whole disk under / (a partition's parent)."""
    dev = os.stat("/").st_dev
    link = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    if os.path.exists(link):
        real = os.path.realpath(link)
        if os.path.exists(f"{real}/partition"):
            real = os.path.dirname(real)
        return os.path.basename(real)
    return None


def disks():
    out = {}
    for name in sorted(os.listdir("/sys/block")):
        if name.startswith(("loop", "ram", "zram", "dm-")):
            continue
        q = f"/sys/block/{name}/queue"
        out[name] = {
            "size_bytes": int(read(f"/sys/block/{name}/size", "0")) * 512,
            "dev": read(f"/sys/block/{name}/dev"),
            "driver": os.path.basename(
                os.path.realpath(f"/sys/block/{name}/device/driver")
            )
            if os.path.exists(f"/sys/block/{name}/device/driver")
            else None,
            "model": read(f"/sys/block/{name}/device/model", ""),
            "scheduler": read(f"{q}/scheduler"),
            "nr_requests": read(f"{q}/nr_requests"),
            "rotational": read(f"{q}/rotational"),
            "logical_block_size": read(f"{q}/logical_block_size"),
            "cpu_lat_limit_us": read(f"{q}/cpu_lat_limit_us", "absent"),
            "mq": sorted(os.listdir(f"/sys/block/{name}/mq"))
            if os.path.isdir(f"/sys/block/{name}/mq")
            else [],
        }
    return out


def describe():
    cpuinfo = read("/proc/cpuinfo", "")
    model = next(
        (l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("model name")),
        None,
    )
    flags = next((l.split(":", 1)[1].split() for l in cpuinfo.splitlines() if l.startswith("flags")), [])
    tables = {cpu: idle_table(cpu) for cpu in cpus()}
    first = next(iter(tables.values()), [])
    same = all(t == first for t in tables.values())
    return {
        "uname": platform.uname()._asdict(),
        "cmdline": read("/proc/cmdline"),
        "cpu_model": model,
        "hypervisor": "hypervisor" in flags,
        "cpus": cpus(),
        "online": read(f"{SYS_CPU}/online"),
        "cpuidle_driver": read(f"{SYS_CPU}/cpuidle/current_driver"),
        "cpuidle_governor": read(
            f"{SYS_CPU}/cpuidle/current_governor",
            read(f"{SYS_CPU}/cpuidle/current_governor_ro"),
        ),
        "available_governors": read(f"{SYS_CPU}/cpuidle/available_governors"),
        "idle_table_cpu0": first,
        "idle_tables_identical": same,
        "idle_tables": None if same else tables,
        "haltpoll": params("haltpoll"),
        "cpuidle_haltpoll": params("cpuidle_haltpoll"),
        "cpu_dma_latency_holders": None,
        "resume_latency": {
            cpu: read(f"{SYS_CPU}/cpu{cpu}/power/pm_qos_resume_latency_us") for cpu in cpus()
        },
        "resume_latency_writable": os.access(
            f"{SYS_CPU}/cpu0/power/pm_qos_resume_latency_us", os.W_OK
        ),
        "root_disk": disk_of_root(),
        "disks": disks(),
        "euid": os.geteuid(),
        "cpufreq_governor": read(f"{SYS_CPU}/cpu0/cpufreq/scaling_governor"),
    }


class Cpus:
    """The per-CPU resume latencies: saved once, put back after each use."""

    def __init__(self):
        self.saved = {
            cpu: read(f"{SYS_CPU}/cpu{cpu}/power/pm_qos_resume_latency_us") for cpu in cpus()
        }

    def set_all(self, value):
        for cpu in self.saved:
            with open(f"{SYS_CPU}/cpu{cpu}/power/pm_qos_resume_latency_us", "w") as f:
                f.write(value)

    def put_back(self):
        bad = []
        for cpu, v in self.saved.items():
            try:
                with open(f"{SYS_CPU}/cpu{cpu}/power/pm_qos_resume_latency_us", "w") as f:
                    f.write(v)
            except OSError as e:
                bad.append((cpu, str(e)))
        now = {cpu: read(f"{SYS_CPU}/cpu{cpu}/power/pm_qos_resume_latency_us") for cpu in self.saved}
        return bad, now == self.saved


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    k = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def summary(lat_ns):
    s = sorted(lat_ns)
    return {
        "n": len(s),
        "p50_us": pct(s, 50) / 1e3 if s else None,
        "p99_us": pct(s, 99) / 1e3 if s else None,
        "p999_us": pct(s, 99.9) / 1e3 if s else None,
        "max_us": s[-1] / 1e3 if s else None,
    }


class Reader:
    """Reads the disk itself where the container lets it open the node,
    else a file of its own on the disk's file system (written once, so
    that every read reaches the disk: an unwritten extent reads as zeros
    without I/O)."""

    def __init__(self, disk, fallback_file, file_mib):
        self.path = f"/dev/{disk}"
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
            size = int(read(f"/sys/block/{disk}/size", "0")) * 512
        except OSError as e:
            self.refused = f"{self.path}: {e.strerror}"
            self.path = fallback_file
            size = file_mib << 20
            if not os.path.exists(fallback_file) or os.path.getsize(fallback_file) < size:
                with open(fallback_file, "wb") as f:
                    chunk = os.urandom(1 << 20)
                    for i in range(file_mib):
                        f.write(chunk[i % 4096:] + chunk[: i % 4096])
                    f.flush()
                    os.fsync(f.fileno())
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
        else:
            self.refused = None
        self.buf = mmap.mmap(-1, BLOCK)
        self.blocks = max(1, min(size, 32 << 30) // BLOCK)
        self.rng = random.Random(12345)

    def one(self):
        off = self.rng.randrange(self.blocks) * BLOCK
        t0 = time.perf_counter_ns()
        os.preadv(self.fd, [self.buf], off)
        return time.perf_counter_ns() - t0

    def sustained(self, seconds):
        lat = []
        end = time.monotonic() + seconds
        t0 = time.monotonic()
        while time.monotonic() < end:
            lat.append(self.one())
        return lat, len(lat) / (time.monotonic() - t0)

    def bursts(self, gap_ms, count, size=8):
        first, rest = [], []
        for _ in range(count):
            time.sleep(gap_ms / 1e3)
            first.append(self.one())
            for _ in range(size - 1):
                rest.append(self.one())
        return first, rest


def lease_start(blkqos, disk, workdir):
    prof = f"{workdir}/lease.toml"
    with open(prof, "w") as f:
        f.write(
            "[defaults]\ncpu_lat_timeout_ms = 3\n\n[[rule]]\n"
            f'name = "probe"\nmatch = {{ name = "{disk}" }}\ncpu_lat_limit_us = 0\n'
        )
    state = f"{workdir}/state"
    os.makedirs(state, mode=0o700, exist_ok=True)
    log = open(f"{workdir}/lease.log", "a")
    p = subprocess.Popen(
        [blkqos, "--state-dir", state, "--log", "stderr", "lease", prof],
        stdout=log,
        stderr=log,
    )
    time.sleep(1.0)
    if p.poll() is not None:
        raise RuntimeError(f"blkqos lease exited {p.returncode}: see {workdir}/lease.log")
    return p


def proc_cpu_s(pid):
    fields = read(f"/proc/{pid}/stat", "").rsplit(")", 1)[-1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tck if len(fields) > 12 else None


def residency(before, after, seconds):
    """Share of wall time each CPU spent in each state, averaged over CPUs."""
    total = {}
    for cpu, row in after.items():
        for s, (u, t) in row.items():
            u0, t0 = before.get(cpu, {}).get(s, (0, 0))
            acc = total.setdefault(s, [0, 0])
            acc[0] += u - u0
            acc[1] += t - t0
    n = max(1, len(after))
    return {
        s: {"entries_per_s": v[0] / n / seconds, "share": v[1] / 1e6 / n / seconds}
        for s, v in sorted(total.items())
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--blkqos")
    ap.add_argument("--disk")
    ap.add_argument("--work", help="the lease's profile, state and log (default OUT/work)")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--bursts", type=int, default=30)
    ap.add_argument("--file", default="/var/tmp/blkqos-measure.dat",
                    help="read where the disk's node cannot be opened")
    ap.add_argument("--file-mib", type=int, default=2048)
    ap.add_argument("--cpu", type=int, default=1, help="the CPU the reader runs on")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    machine = describe()
    with open(f"{a.out}/machine.json", "w") as f:
        json.dump(machine, f, indent=1)
    disk = a.disk or machine["root_disk"]
    print(f"machine: {machine['cpu_model']}, {len(machine['cpus'])} CPUs, "
          f"{machine['uname']['release']}, idle {machine['cpuidle_driver']}/"
          f"{machine['cpuidle_governor']}, disk {disk}", flush=True)
    for st in machine["idle_table_cpu0"]:
        print(f"  {st['state']} {st['name']:<10} exit {st['latency_us']:>5} us  "
              f"residency {st['residency_us']:>5} us  disable {st['disable']}", flush=True)
    if not disk:
        print("no disk under / found; pass --disk", file=sys.stderr)
        return 2

    table = machine["idle_table_cpu0"]
    halting = [s for s in table if s["name"] != "POLL"]
    configs = ["deep", "poll"]
    c1_value = None
    if len(halting) >= 2:
        c1_value = halting[0]["latency_us"]
        configs.append("c1")
    if a.blkqos:
        configs.append("lease0")

    qos = Cpus()
    skipped = {}
    if not machine["resume_latency_writable"]:
        skipped = {c: "pm_qos_resume_latency_us not writable" for c in configs if c != "deep"}
        configs = ["deep"]

    def on_signal(signum, _frame):
        qos.put_back()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        os.sched_setaffinity(0, {a.cpu})
    except OSError:
        pass

    reader = Reader(disk, a.file, a.file_mib)
    if reader.refused:
        print(f"{reader.refused}; reading {reader.path} ({a.file_mib} MiB) instead", flush=True)
    rounds = {c: [] for c in configs}
    workdir = a.work or f"{a.out}/work"
    os.makedirs(workdir, exist_ok=True)
    order_rng = random.Random(7)
    lease_cost = []
    t_start = time.monotonic()
    try:
        for r in range(a.rounds):
            order = configs[:]
            order_rng.shuffle(order)
            for c in order:
                lease = None
                if c == "poll":
                    qos.set_all("n/a")
                elif c == "c1":
                    qos.set_all(c1_value)
                elif c == "lease0":
                    lease = lease_start(a.blkqos, disk, workdir)
                    cpu0 = proc_cpu_s(lease.pid)
                time.sleep(0.2)
                before = idle_counters()
                w0 = time.monotonic()
                lat, iops = reader.sustained(a.seconds)
                w1 = time.monotonic()
                mid = idle_counters()
                gaps = {}
                for g in (2, 8, 32):
                    b0 = idle_counters()
                    gb = time.monotonic()
                    first, rest = reader.bursts(g, a.bursts)
                    gaps[g] = {
                        "first": first,
                        "rest": rest,
                        "residency": residency(b0, idle_counters(), time.monotonic() - gb),
                    }
                if lease is not None:
                    cpu1 = proc_cpu_s(lease.pid)
                    lease.send_signal(signal.SIGTERM)
                    lease.wait(timeout=10)
                    lease_cost.append({"cpu_s": cpu1 - cpu0, "reads": len(lat) + 3 * 8 * a.bursts,
                                       "exit": lease.returncode})
                bad, same = qos.put_back()
                if bad or not same:
                    raise RuntimeError(f"resume latencies not as found after {c}: {bad}")
                rounds[c].append({
                    "lat": lat,
                    "iops": iops,
                    "residency": residency(before, mid, w1 - w0),
                    "gaps": gaps,
                })
                print(f"round {r} {c:<7} iops {iops:8.0f}  p50 {summary(lat)['p50_us']:7.1f}  "
                      f"p99 {summary(lat)['p99_us']:7.1f} us", flush=True)
    finally:
        bad, same = qos.put_back()
        print(f"put back: {'as found' if same and not bad else bad}", flush=True)

    result = {"disk": disk, "read": reader.path, "refused": reader.refused, "reader_cpu": a.cpu, "seconds": a.seconds, "rounds": a.rounds,
              "skipped": skipped, "wall_s": time.monotonic() - t_start,
              "lease_cost": lease_cost, "configs": {}}
    for c, rs in rounds.items():
        pooled = [x for r in rs for x in r["lat"]]
        res = {
            "sustained": summary(pooled),
            "iops_per_round": [r["iops"] for r in rs],
            "p99_us_per_round": [summary(r["lat"])["p99_us"] for r in rs],
            "p50_us_per_round": [summary(r["lat"])["p50_us"] for r in rs],
            "residency_per_round": [r["residency"] for r in rs],
            "bursts": {},
        }
        for g in (2, 8, 32):
            first = [x for r in rs for x in r["gaps"][g]["first"]]
            rest = [x for r in rs for x in r["gaps"][g]["rest"]]
            res["bursts"][f"{g}ms"] = {
                "first": summary(first),
                "rest": summary(rest),
                "residency_per_round": [r["gaps"][g]["residency"] for r in rs],
            }
        result["configs"][c] = res
    with open(f"{a.out}/result.json", "w") as f:
        json.dump(result, f, indent=1)

    print(f"\n{'config':<8} {'IOPS':>8} {'p50':>7} {'p99':>7} {'p99.9':>7} "
          f"{'p99 A/A range':>16} {'first@2ms':>9} {'first@8':>8} {'first@32':>8}")
    for c, res in result["configs"].items():
        s = res["sustained"]
        pr = res["p99_us_per_round"]
        iops = sorted(res["iops_per_round"])[len(pr) // 2]
        print(f"{c:<8} {iops:8.0f} {s['p50_us']:7.1f} {s['p99_us']:7.1f} {s['p999_us']:7.1f} "
              f"{min(pr):7.1f}-{max(pr):<7.1f} "
              + " ".join(f"{res['bursts'][g]['first']['p50_us']:8.1f}" for g in ("2ms", "8ms", "32ms")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
