#!/usr/bin/env python3
"""What `blkqos lease` costs and holds under trickle, bursty and sustained
I/O, with the trickle rule (--min-ios 2, the default) and without it
(--min-ios 1, the kernel lease's rule), on the machine this runs on.

    bench/hardware/trickle.py OUTDIR --blkqos PATH [--seconds S]

Per workload and rule: the lease process's wake-ups per second and CPU
share, and the share of the CPUs' idle time spent in POLL (the lease at
limit 0 writes "n/a": a held CPU idles in POLL only), next to the same
workload with no lease. Reads a file of its own with O_DIRECT (as
measure.py does where the disk's node cannot be opened).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402


def lease_stats(pid):
    status = measure.read(f"/proc/{pid}/status", "")
    switches = sum(
        int(l.split()[1]) for l in status.splitlines() if "ctxt_switches" in l
    )
    return switches, measure.proc_cpu_s(pid)


def poll_share(before, after):
    poll = other = 0
    for cpu, row in after.items():
        for s, (_, t) in row.items():
            d = t - before.get(cpu, {}).get(s, (0, 0))[1]
            if s == "state0":
                poll += d
            else:
                other += d
    return poll / max(1, poll + other)


def workload(reader, kind, seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        if kind == "trickle":
            time.sleep(0.008)
            reader.one()
            n += 1
        elif kind == "bursty":
            time.sleep(0.020)
            for _ in range(8):
                reader.one()
            n += 8
        else:
            reader.one()
            n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--blkqos", required=True)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--file", default="/var/tmp/blkqos-measure.dat")
    ap.add_argument("--file-mib", type=int, default=512)
    ap.add_argument("--cpu", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    machine = measure.describe()
    disk = machine["root_disk"]
    reader = measure.Reader(disk, a.file, a.file_mib)
    os.sched_setaffinity(0, {a.cpu})
    qos = measure.Cpus()
    rows = []
    try:
        for kind in ("trickle", "bursty", "sustained"):
            for rule in ("none", "1", "2"):
                lease = None
                if rule != "none":
                    work = f"{a.out}/work-{kind}-{rule}"
                    os.makedirs(work, exist_ok=True)
                    prof = f"{work}/p.toml"
                    with open(prof, "w") as f:
                        f.write(
                            "[defaults]\ncpu_lat_timeout_ms = 3\n\n[[rule]]\n"
                            f'name = "t"\nmatch = {{ name = "{disk}" }}\ncpu_lat_limit_us = 0\n'
                        )
                    log = open(f"{work}/lease.log", "w")
                    lease = subprocess.Popen(
                        [a.blkqos, "--state-dir", f"{work}/state", "--log", "stderr",
                         "lease", "--min-ios", rule, prof],
                        stdout=log, stderr=log)
                    time.sleep(1.0)
                    s0, c0 = lease_stats(lease.pid)
                b = measure.idle_counters()
                t0 = time.monotonic()
                n = workload(reader, kind, a.seconds)
                secs = time.monotonic() - t0
                share = poll_share(b, measure.idle_counters())
                row = {"workload": kind, "min_ios": rule, "reads_per_s": n / secs,
                       "poll_share_of_idle": share}
                if lease is not None:
                    s1, c1 = lease_stats(lease.pid)
                    row["lease_wakeups_per_s"] = (s1 - s0) / secs
                    row["lease_cpu_share"] = (c1 - c0) / secs
                    lease.send_signal(signal.SIGTERM)
                    row["lease_exit"] = lease.wait(timeout=10)
                rows.append(row)
                print(json.dumps(row), flush=True)
                bad, same = qos.put_back()
                if bad or not same:
                    raise RuntimeError(f"resume latencies not as found: {bad}")
    finally:
        qos.put_back()
    with open(f"{a.out}/trickle.json", "w") as f:
        json.dump({"machine": {k: machine[k] for k in (
            "uname", "cpu_model", "cpuidle_driver", "cpuidle_governor",
            "idle_table_cpu0", "haltpoll", "cpus")}, "rows": rows}, f, indent=1)
    print(f"\n{'workload':<10} {'min-ios':>7} {'reads/s':>8} {'POLL % idle':>11} "
          f"{'wakeups/s':>9} {'lease CPU %':>11}")
    for r in rows:
        print(f"{r['workload']:<10} {r['min_ios']:>7} {r['reads_per_s']:8.0f} "
              f"{100 * r['poll_share_of_idle']:11.1f} "
              f"{r.get('lease_wakeups_per_s', 0):9.0f} {100 * r.get('lease_cpu_share', 0):11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
