"""bench/v4.py: parsing, the pooled statistics, verdicts, the stages and
the guest's latency encoding (python3 -m unittest discover -s bench/tests)"""

import lzma
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import v4  # noqa: E402

BENCH_SH = os.path.join(v4.ROOT, "kernel-patch", "test", "guest", "bench.sh")


def hist(values, width):
    """values into v4's "gap:count" encoding, bins of width"""
    counts = {}
    for x in values:
        counts[x // width] = counts.get(x // width, 0) + 1
    out, prev = [], 0
    for b in sorted(counts):
        out.append(f"{b - prev}:{counts[b]}")
        prev = b
    return ",".join(out)


def lat_record(kernel, cfg, rep, values, build="speed-hz250-aaaa", qd=1, idle="icx", spin2=0):
    s = sorted(values)
    n = len(s)
    return (f"BLKQOS-MEASURE v4lat kernel={kernel} idle={idle} build={build} dev=null_blk irq_cpu=0 sub_cpu=1 "
            f"shape=cross gov=menu cus=50 spread=50 cfg={cfg} rep={rep} qd={qd} ios={n} iops=1 "
            f"fio_clat_mean_us={sum(s) / n / 1000:.3f} n={n} mean_ns={sum(s) // n} p50_ns={s[v4.pct_rank(n, 500) - 1]} "
            f"p99_ns={s[v4.pct_rank(n, 990) - 1]} p999_ns={s[v4.pct_rank(n, 999) - 1]} max_ns={s[-1]} "
            f"h={hist(s, 100)} deep0_pct=1.0 spin0_pct=0 c1_0_pct=0 poll0_pct=0 deep1_pct=2.0 spin1_pct=0 "
            f"c1_1_pct=0 poll1_pct=0 deep2_pct=0 spin2_pct={spin2} c1_2_pct=90.0 poll2_pct=0\n")


class Keep:
    """a kept-guests folder of xz logs, v4.KEEP pointed at it"""

    def __enter__(self):
        self.dir = tempfile.TemporaryDirectory()
        self.old = v4.KEEP
        v4.KEEP = self.dir.name
        return self

    def put(self, name, text, args="blkqos_test.idle=icx"):
        """a kept log and its stamp (the guest's arguments on its first line)"""
        with lzma.open(os.path.join(self.dir.name, f"console-bench-v4-{name}.log.xz"), "wt") as f:
            f.write(text)
        with open(os.path.join(self.dir.name, f"console-bench-v4-{name}.log.done"), "w") as f:
            f.write(f"key inputs psd {args} blkqos.v4_build=x\nhost_cpu_seconds 12.5\n")

    def __exit__(self, *a):
        v4.KEEP = self.old
        self.dir.cleanup()


def guest(name, kernel="lease", idle="icx", cfgs="c1:1-1"):
    return {"name": name, "kernel": kernel, "args": f"blkqos_test.idle={idle} blkqos.v4_kind=lat blkqos.v4_cfgs={cfgs}",
            "nvme": None}


class Statistics(unittest.TestCase):
    def test_pooled_percentile_is_the_sorted_values(self):
        rng = random.Random(1)
        runs = [[rng.randrange(50, 400) for _ in range(rng.randrange(50, 300))] for _ in range(5)]
        tail = v4.Tail([[(x, 1) for x in r] for r in runs], 1)
        for pick in ([0, 1, 2, 3, 4], [0, 0, 3], [4]):
            pooled = sorted(x for i in pick for x in runs[i])
            for p in (500, 990, 999, 1000):
                self.assertEqual(tail.pct(pick, p) - 0.5, pooled[v4.pct_rank(len(pooled), p) - 1])

    def test_histogram_encoding_round_trip(self):
        values = [120, 180, 99, 250, 250, 12000]
        self.assertEqual(v4.pairs(hist(values, 100)), [(0, 1), (1, 2), (2, 2), (120, 1)])

    def test_verdicts(self):
        self.assertEqual(v4.verdict([0.98, 1.04], 1.05, "<="), "met")
        self.assertEqual(v4.verdict([1.06, 1.2], 1.05, "<="), "not met")
        self.assertEqual(v4.verdict([1.0, 1.1], 1.05, "<="), "undecided")
        self.assertEqual(v4.verdict([1.31, 2], 1.3, ">="), "met")
        self.assertEqual(v4.verdict([1.0, 1.29], 1.3, ">="), "not met")
        self.assertEqual(v4.verdict([1.2, 1.4], 1.3, ">="), "undecided")

    def test_info_verdicts(self):
        self.assertEqual(v4.verdict([1.01, 1.4], None, "info"), "informative")
        self.assertEqual(v4.verdict([0.9, 1.0], None, "info"), "not informative")
        self.assertEqual(v4.verdict([0.99, 1.1], None, "info"), "undecided")

    def test_few_runs_widen_the_interval(self):
        self.assertLess(v4.expanded_tail(0.95, 6), v4.expanded_tail(0.95, 20))
        self.assertLess(v4.expanded_tail(0.95, 20), 0.025)
        self.assertAlmostEqual(v4.t_quantile(0.975, 5), 2.5706, places=3)

    def test_bootstrap_is_deterministic_and_covers_the_point(self):
        a, b = [10, 11, 12, 30], [10, 10, 11, 11]

        def run():
            return v4.boot(lambda r: sum(a[i] for i in r), 4, lambda r: sum(b[i] for i in r), 4, v4.ratio)
        self.assertEqual(run(), run())
        lo, hi = run()
        self.assertLessEqual(lo, sum(a) / sum(b))
        self.assertGreaterEqual(hi, sum(a) / sum(b))


class Collect(unittest.TestCase):
    def test_rows_and_claims(self):
        rng = random.Random(2)
        with Keep() as k:
            text = ""
            for rep in range(1, 7):
                text += lat_record("lease", "c1", rep, [rng.randrange(60000, 80000) for _ in range(300)])
                text += lat_record("lease", "knob10", rep, [rng.randrange(60000, 80000) for _ in range(300)])
                text += lat_record("lease", "deep", rep, [rng.randrange(60000, 300000) for _ in range(300)])
            g = guest("g", cfgs="c1:1-6,knob10:1-6,deep:1-6")
            k.put("g", text, g["args"])
            rows, hot, guests, missing = v4.collect([(1, [g, guest("absent")])])
            self.assertEqual(missing, ["absent"])
            self.assertEqual(guests[0]["host_cpu_seconds"], 12.5)
            self.assertEqual(len(rows), 3)
            cl = {c["cfg"]: c for c in v4.lat_claims(rows) if c["claim"] != "rows" and "cfg" in c}
            self.assertEqual(cl["deep"]["verdict"], "met")            # deep >= 1.3 x c1
            self.assertEqual(cl["knob10"]["verdict"], "met")
            self.assertLess(cl["knob10"]["ci"][1], 1.05)

    def test_a_log_of_other_arguments_is_not_read(self):
        with Keep() as k:
            k.put("a", lat_record("lease", "c1", 1, [70000] * 10), "blkqos_test.idle=icx older args")
            rows, _, _, missing = v4.collect([(1, [guest("a")])])
            self.assertEqual((rows, missing), ({}, ["a"]))

    def test_a_run_missing_or_repeated_is_refused(self):
        for reps in ((1,), (1, 2, 2)):
            with Keep() as k:
                g = guest("a", cfgs="c1:1-2")
                k.put("a", "".join(lat_record("lease", "c1", r, [70000] * 10) for r in reps), g["args"])
                with self.assertRaises(SystemExit):
                    v4.collect([(1, [g])])

    def test_the_device_cpu_leaving_c1_is_refused(self):
        with Keep() as k:
            g = guest("a")
            k.put("a", lat_record("lease", "c1", 1, [70000] * 10, spin2=0.3), g["args"])
            with self.assertRaises(SystemExit):
                v4.collect([(1, [g])])

    def test_a_log_in_another_unit_is_refused(self):
        with Keep() as k:
            g = guest("a")
            k.put("a", lat_record("lease", "c1", 1, [70000] * 10).replace("fio_clat_mean_us=70.000",
                                                                          "fio_clat_mean_us=0.070"), g["args"])
            with self.assertRaises(SystemExit):
                v4.collect([(1, [g])])

    def test_a_row_never_mixes_builds(self):
        with Keep() as k:
            a, b = guest("a"), guest("b", cfgs="c1:2-2")
            k.put("a", lat_record("lease", "c1", 1, [70000] * 10, build="speed-hz250-aaaa"), a["args"])
            k.put("b", lat_record("lease", "c1", 2, [70000] * 10, build="speed-hz250-bbbb"), b["args"])
            with self.assertRaises(SystemExit):
                v4.collect([(1, [a, b])])

    def test_other_tables_and_hz_are_other_rows(self):
        with Keep() as k:
            g = guest("a")
            k.put("a", lat_record("lease", "c1", 1, [70000] * 10), g["args"])
            k.put("b", lat_record("lease", "c1", 1, [70000] * 10, build="speed-hz1000-aaaa"), g["args"])
            rows, *_ = v4.collect([(1, [g, dict(g, name="b")])])
            self.assertEqual(len(rows), 2)

    def test_a_record_of_another_kernel_is_refused(self):
        with Keep() as k:
            g = guest("a", kernel="lease")
            k.put("a", lat_record("stock", "c1", 1, [70000] * 10), g["args"])
            with self.assertRaises(SystemExit):
                v4.collect([(1, [g])])


class Stages(unittest.TestCase):
    def test_every_part_in_stage_one(self):
        names = " ".join(g["name"] for g in v4.specs(1))
        for part in ("sustained-lease", "sustained-psdmodel", "stock-stock", "bursts-lease-cross",
                     "bursts-lease-local", "bursts-stock-cross", "calibration-lease-local-icx",
                     "calibration-lease-local-spr", "epyc-lease", "hotpath-lease", "hotpath-nolease",
                     "hotpath-psdmodel", "nvme-lease", "db-lease", "db-stock"):
            self.assertIn(part, names)

    def test_no_c1e_where_the_table_has_none(self):
        for stage in (1, 2, 3):
            for g in v4.specs(stage):
                if "idle=epyc" in g["args"] or "idle=model" in g["args"]:
                    self.assertNotIn("c1e:", g["args"])

    def test_later_stages_only_the_twenty_run_peers(self):
        for stage in (2, 3):
            for g in v4.specs(stage):
                cfgs = g["args"].split("v4_cfgs=")[1].split()[0]
                self.assertTrue(all(c.split(":")[0] in v4.MANY for c in cfgs.split(",")), cfgs)
                self.assertFalse(g["name"].startswith(("db-", "calibration-")), g["name"])
        self.assertIn("deep:13-20", v4.specs(3)[0]["args"])

    def test_a_stopped_peer_is_not_run_again(self):
        name = v4.point_name(v4.matrix()[0])
        g = [g for g in v4.specs(2, {(name, "deep")}) if g["name"].startswith(name)]
        self.assertEqual(g, [])


class GuestEncoding(unittest.TestCase):
    @unittest.skipUnless(shutil.which("gcc"), "no gcc")
    def test_idle_watch_burst_record_parses(self):
        """idle-watch burst ... v4 (the guest's tool, built here, reading a
        file on disk and a deep-time file of the debugfs lines) into a
        v4burst record that v4.py's burst statistics read"""
        with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(__file__))) as d:
            iw, data, deep = (os.path.join(d, n) for n in ("iw", "data", "deep"))
            subprocess.run(["gcc", "-O2", "-o", iw, os.path.join(v4.ROOT, "kernel-patch", "test", "idle-watch.c")],
                           check=True)
            with open(data, "wb") as f:
                f.truncate(64 << 20)
            with open(deep, "w") as f:
                f.write("cpu0 1000\ncpu1 2000\n")
            out = subprocess.run([iw, "burst", data, "0", "8", "1000", "5", "v4"], capture_output=True, text=True,
                                 env=dict(os.environ, IDLE_WATCH_DEEP=deep), check=True).stdout
        rec = ("BLKQOS-MEASURE v4burst kernel=lease idle=icx build=speed-hz250-a dev=null_blk irq_cpu=0 sub_cpu=1 "
               "shape=cross gov=menu cus=50 spread=50 cfg=c1 rep=1 burst=8 gap_ms=2 bursts=5 " + out.strip())
        (kind, f), = v4.parse_text(rec)
        self.assertEqual((kind, f["gap_ms"], f["gapdeep0_pct"], f["gapdeep1_pct"]), ("v4burst", 2, 0.0, 0.0))
        self.assertGreater(f["gap_sum_ms"], 4.5)
        st = v4.burst_stats([f], (0, 1))
        self.assertEqual(st["n_first"], 5)
        self.assertEqual(sum(st["rest"].n), 35)
        self.assertEqual(st["rest"].pct([0], 1000) - 0.5, f["rest_max"])
        self.assertEqual(st["first"].pct([0], 1000) - 0.5, f["first_max"])

    @unittest.skipUnless(shutil.which("busybox"), "no busybox (kernel-patch/test/run installs it)")
    def test_guest_stats_match_the_host_decoding(self):
        """bench.sh's v4_lat_stats (the guest's awk) against v4.py"""
        rng = random.Random(3)
        values = [rng.randrange(40000, 400000) for _ in range(1000)]
        with tempfile.NamedTemporaryFile("w", suffix=".log") as f:
            for i, v in enumerate(values):
                f.write(f"{i}, {v}, 0, 4096, 0\n")
            f.flush()
            out = subprocess.run(["busybox", "sh", "-c", f'f() {{ :; }}; eval "$(sed -n "/^v4_lat_stats()/,/^}}/p" {BENCH_SH})"; '
                                  f'v4_lat_stats {f.name}'], capture_output=True, text=True, check=True).stdout
        rec = dict(w.split("=", 1) for w in out.split())
        s = sorted(values)
        self.assertEqual(int(rec["n"]), 1000)
        self.assertEqual(int(rec["p99_ns"]), s[989])
        self.assertEqual(int(rec["max_ns"]), s[-1])
        tail = v4.Tail([v4.pairs(rec["h"])], 100)
        self.assertEqual(tail.pct([0], 990), (s[989] // 100 + 0.5) * 100)


if __name__ == "__main__":
    unittest.main()
