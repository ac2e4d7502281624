#!/usr/bin/env python3
"""The collection, built and installed, rolled out over real SSH to a fleet.

Builds the collection tarball with ansible-galaxy, installs it into a
temporary collections path, starts an sshd of its own on 127.0.0.1 (its own
config, host key, authorized key and known_hosts in a temporary directory,
a free port, UsePAM no; stopped at the end whatever happens) and runs the
example playbook through it with the ssh connection plugin against 22
inventory hosts, each with its own fake sysfs tree and state directory:

  patched-NN   the project's kernel knobs (queue ABI), 14 hosts
  rfc-NN       the earlier RFC's knobs in the disk directory, 2 hosts
  plain-NN     no knobs, profile fallback "none" (nothing to do), 2 hosts
  resume-NN    no knobs, fallback "cpu-resume-latency" (per-CPU PM QoS), 2
  faulty-01    every blkqos run there has its 2nd knob write fail with EIO
               (the LD_PRELOAD shim of tests/faults/), so apply rolls back
  gone-01      a port nobody listens on: unreachable

Then: a rollout in serial batches of 6 with max_fail_percentage 20 (faulty
and gone fail alone in their batches; the rest converge), a second run that
changes nothing, --check --diff that writes nothing, the fleet report after
drifting one knob by hand, and max_fail_percentage 0 stopping the rollout
after the first batch. Prints the wall time of the apply and of the
no-change run. Exits 1 on any failure.

Usage: ansible/tests/test_fleet.py [TARBALL]   (without one, builds it with
ansible/build-collection; ansible-playbook, ansible-galaxy on
PATH; release binary and mkfixture built; sshd and gcc installed)
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE = os.path.join(ROOT, "ansible")
BIN = os.path.join(ROOT, "target", "release", "blkqos")
MKFIXTURE = os.path.join(ROOT, "target", "debug", "examples", "mkfixture")
INJECT = os.path.join(ROOT, "tests", "faults", "inject.c")
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
SERIAL = 6
FORKS = 25

failures = []


def check(name, ok, detail=""):
    print(f"ansible: {'PASS' if ok else 'FAIL'} {name}" + ("" if ok else f"\n{detail}"))
    if not ok:
        failures.append(name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    """Pids whose parent is pid (sshd's per-connection processes)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


class Sshd:
    """An sshd on 127.0.0.1 with everything it needs in dir; a context manager."""

    def __init__(self, dir):
        self.dir = dir
        os.makedirs(dir, mode=0o700)
        self.port = free_port()
        self.host_key = os.path.join(dir, "host_ed25519")
        self.client_key = os.path.join(dir, "id_ed25519")
        self.known_hosts = os.path.join(dir, "known_hosts")
        self.config = os.path.join(dir, "sshd_config")
        self.log = os.path.join(dir, "sshd.log")
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "blkqos-fleet-test", "-f", key],
                           check=True)
        shutil.copy(self.client_key + ".pub", os.path.join(dir, "authorized_keys"))
        with open(self.host_key + ".pub") as f:
            host_pub = " ".join(f.read().split()[:2])
        with open(self.known_hosts, "w") as f:
            f.write(f"[127.0.0.1]:{self.port} {host_pub}\n")
        with open(self.config, "w") as f:
            f.write(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.host_key}
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
# every inventory host is this one sshd: room for all forks at once
MaxStartups 200
MaxSessions 200
LogLevel ERROR
Subsystem sftp internal-sftp
""")
        self.proc = None

    def __enter__(self):
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation directory
        subprocess.run([SSHD, "-t", "-f", self.config], check=True)
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", self.config], stdout=self.logf,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {self.proc.returncode}: {open(self.log).read()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("sshd did not listen within 15 s")

    def __exit__(self, *exc):
        if self.proc is None:
            return
        # per-connection sshd processes live in sessions of their own: note
        # them before the listener goes, then end them by pid
        conns = children(self.proc.pid)
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pid in conns:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        self.logf.close()
        print(f"ansible: sshd on port {self.port} stopped")


class Fleet:
    def __init__(self, tmp, sshd, collections):
        self.tmp = tmp
        self.sshd = sshd
        self.collections = collections
        self.inventory = os.path.join(tmp, "inventory")
        self.hosts = {}  # name -> directory
        os.makedirs(os.path.join(self.inventory, "host_vars"))
        os.makedirs(os.path.join(self.inventory, "group_vars"))
        # the example playbook, away from the in-tree collection (ansible
        # finds a collections/ directory beside a playbook first)
        self.playbook = os.path.join(tmp, "playbook.yml")
        shutil.copy(os.path.join(ANSIBLE, "playbook.yml"), self.playbook)
        with open(os.path.join(ANSIBLE, "group_vars", "storage.yml")) as f:
            group_vars = f.read()
        with open(os.path.join(self.inventory, "group_vars", "storage.yml"), "w") as f:
            f.write(group_vars)
        self.profile = yaml.safe_load(group_vars)["blkqos_profile"]

        inject = os.path.join(tmp, "inject.so")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", inject, INJECT, "-ldl"], check=True)
        self.faulty_bin = os.path.join(tmp, "faulty-blkqos")
        with open(self.faulty_bin, "w") as f:
            f.write("#!/bin/sh\n# the 2nd write to a cpu_lat knob of every run fails with EIO\n"
                    f"export LD_PRELOAD={inject} BLKQOS_FAULT_MATCH=cpu_lat BLKQOS_FAULT_AT=2 BLKQOS_FAULT_ERRNO=5\n"
                    f'exec {BIN} "$@"\n')
        os.chmod(self.faulty_bin, 0o755)

        spec = ([(f"patched-{i:02}", "queue", None) for i in range(1, 3)] + [("faulty-01", "queue", None)]
                + [(f"patched-{i:02}", "queue", None) for i in range(3, 9)] + [("gone-01", "queue", None)]
                + [(f"patched-{i:02}", "queue", None) for i in range(9, 15)]
                + [("rfc-01", "disk", None), ("rfc-02", "disk", None),
                   ("plain-01", "none", "none"), ("plain-02", "none", "none"),
                   ("resume-01", "none", "cpu-resume-latency"), ("resume-02", "none", "cpu-resume-latency")])
        dead_port = free_port()
        lines = ["[storage]"]
        for name, abi, fallback in spec:
            d = os.path.join(tmp, "hosts", name)
            os.makedirs(os.path.join(d, "bin"))
            subprocess.run([MKFIXTURE, os.path.join(d, "sys"), "zoo", abi], check=True, stdout=subprocess.DEVNULL)
            self.hosts[name] = d
            hv = {
                # the binary alone: blkqos_package follows (no "" needed)
                "blkqos_binary_src": self.faulty_bin if name.startswith("faulty") else BIN,
                "blkqos_binary": os.path.join(d, "bin", "blkqos"),
                "blkqos_profile_path": os.path.join(d, "etc", "blkqos", "blkqos.toml"),
                "blkqos_sysfs": os.path.join(d, "sys"),
                "blkqos_state_dir": os.path.join(d, "run", "blkqos"),
                "blkqos_udev_rule": False,
                "blkqos_boot_unit": False,
                "ansible_become": False,
            }
            if name.startswith("faulty"):
                # a previous profile, which the failed rollout must leave in place
                os.makedirs(os.path.join(d, "etc", "blkqos"))
                shutil.copy(os.path.join(ROOT, "config", "blkqos.toml"), os.path.join(d, "etc", "blkqos", "blkqos.toml"))
            if fallback:
                hv["blkqos_profile"] = dict(self.profile, defaults=dict(self.profile["defaults"], fallback=fallback))
            with open(os.path.join(self.inventory, "host_vars", name + ".yml"), "w") as f:
                json.dump(hv, f)  # JSON is YAML
            port = dead_port if name.startswith("gone") else sshd.port
            lines.append(f"{name} ansible_host=127.0.0.1 ansible_port={port}")
        with open(os.path.join(self.inventory, "hosts.ini"), "w") as f:
            f.write("\n".join(lines) + "\n\n[storage:vars]\nansible_user=root\n"
                    f"ansible_ssh_private_key_file={sshd.client_key}\n"
                    "ansible_python_interpreter=/usr/bin/python3\n")

        os.makedirs(os.path.join(tmp, "cp"))
        self.cfg = os.path.join(tmp, "ansible.cfg")
        with open(self.cfg, "w") as f:
            f.write(f"""[defaults]
forks = {FORKS}
# passed to ssh as ConnectTimeout
timeout = 10
collections_path = {collections}
local_tmp = {tmp}/ansible-local
remote_tmp = {tmp}/ansible-remote
host_key_checking = True

[ssh_connection]
pipelining = True
control_path_dir = {tmp}/cp
ssh_args = -F /dev/null -o ControlMaster=auto -o ControlPersist=30s -o BatchMode=yes -o IdentitiesOnly=yes -o UserKnownHostsFile={sshd.known_hosts} -o StrictHostKeyChecking=yes
""")

    def run(self, *args, playbook=None):
        env = dict(os.environ, ANSIBLE_CONFIG=self.cfg, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                   ANSIBLE_COLLECTIONS_PATH=self.collections)
        env.pop("SSH_AUTH_SOCK", None)  # the test's key only
        cmd = ["ansible-playbook", "-i", self.inventory, playbook or self.playbook, *args]
        t0 = time.monotonic()
        r = subprocess.run(cmd, cwd=self.tmp, env=env, capture_output=True, text=True)
        elapsed = time.monotonic() - t0
        print(f"ansible: ({elapsed:.0f} s) ansible-playbook {' '.join(args)} {playbook or 'playbook.yml'}")
        recap = {m[0]: dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m[1:])))
                 for m in RECAP.findall(r.stdout)}
        return r.returncode, r.stdout + r.stderr, recap, elapsed

    def close_masters(self):
        """End the ControlPersist masters the runs left behind."""
        cp = os.path.join(self.tmp, "cp")
        for s in os.listdir(cp) if os.path.isdir(cp) else []:
            subprocess.run(["ssh", "-F", "/dev/null", "-S", os.path.join(cp, s), "-O", "exit", "127.0.0.1"],
                           capture_output=True)

    def attr(self, host, rel):
        with open(os.path.join(self.hosts[host], "sys", rel)) as f:
            return f.read().strip()

    def snapshot(self, host, only_sys=False):
        """Every file under the host's directory (its tree, profile, state) but the binary."""
        base = self.hosts[host]
        top = os.path.join(base, "sys") if only_sys else base
        out = {}
        for d, dirs, files in os.walk(top):
            for n in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
                p = os.path.join(d, n)
                # the lock file holds the pid of the last run that took it
                if p.startswith(os.path.join(base, "bin")) or p == os.path.join(base, "run", "blkqos", "lock"):
                    continue
                out[p] = os.readlink(p) if os.path.islink(p) else open(p, "rb").read().strip()
        return out

    def snapshot_all(self):
        return {h: self.snapshot(h) for h in self.hosts}


PATCHED_VALUES = {  # what the storage profile gives the zoo (see test_role.py)
    "block/nvme0n1/queue/cpu_lat_limit_us": "4",
    "block/nvme2n1/queue/cpu_lat_limit_us": "4",
    "block/nvme2n1/queue/cpu_lat_timeout_ms": "5",
    "block/sda/queue/cpu_lat_limit_us": "-1",
}


def test_build_and_install(tmp, tarball):
    if tarball is None:
        out = subprocess.run([os.path.join(ANSIBLE, "build-collection"), tmp], capture_output=True, text=True)
        tarball = os.path.join(tmp, "blkqos-blkqos-1.0.0.tar.gz")
        check("ansible/build-collection (ansible-galaxy collection build) makes the tarball",
              out.returncode == 0 and os.path.exists(tarball), out.stdout + out.stderr)
    listing = subprocess.run(["tar", "tzf", tarball], capture_output=True, text=True).stdout.split()
    check("the tarball holds the role, the module, the report playbook, not ansible-test's output",
          {"roles/blkqos/tasks/main.yml", "plugins/modules/blkqos_apply.py", "playbooks/fleet_report.yml",
           "meta/runtime.yml", "CHANGELOG.rst"} <= set(listing)
          and not any(p.startswith("tests/output") for p in listing), "\n".join(listing))
    collections = os.path.join(tmp, "collections")
    out = subprocess.run(["ansible-galaxy", "collection", "install", tarball, "-p", collections],
                         capture_output=True, text=True)
    manifest = os.path.join(collections, "ansible_collections", "blkqos", "blkqos", "MANIFEST.json")
    check("ansible-galaxy collection install of the tarball", out.returncode == 0 and os.path.exists(manifest),
          out.stdout + out.stderr)
    doc = subprocess.run(["ansible-doc", "blkqos.blkqos.blkqos_apply"], capture_output=True, text=True,
                         env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections))
    check("ansible-doc reads the installed module's documentation", doc.returncode == 0 and "state_dir" in doc.stdout,
          doc.stdout + doc.stderr)
    return collections


def test_fleet(tmp, collections):
    with Sshd(os.path.join(tmp, "ssh")) as sshd:
        fleet = Fleet(tmp, sshd, collections)
        try:
            fleet_checks(fleet)
        finally:
            fleet.close_masters()


def fleet_checks(fleet):
    hosts = list(fleet.hosts)
    reachable = [h for h in hosts if h != "gone-01"]
    good = [h for h in reachable if h != "faulty-01"]
    print(f"ansible: fleet of {len(hosts)} hosts over ssh to 127.0.0.1:{fleet.sshd.port}, "
          f"{len(good)} that can converge")
    initial = fleet.snapshot_all()

    # 1. the rollout
    serial = ["-e", f"blkqos_serial={SERIAL}", "-e", "blkqos_max_fail_percentage=20"]
    rc, out, recap, t_apply = fleet.run(*serial)
    check("rollout: every host in the recap", set(recap) == set(hosts), out)
    check("rollout: exit status says some hosts failed (2) or were unreachable (4)", rc in (2, 4), f"rc={rc}\n{out}")
    check("rollout: gone-01 found unreachable and counted as failed (the play's reachability gate)",
          recap.get("gone-01", {}).get("failed") == 1
          and re.search(r"fatal: \[gone-01\]: FAILED! => .*unreachable: ", out) is not None, out)
    check("rollout: faulty-01 reported failed, at the apply, with blkqos's error",
          recap.get("faulty-01", {}).get("failed") == 1
          and re.search(r"fatal: \[faulty-01\].*blkqos failed \(exit 1\)", out) is not None, out)
    check("rollout: faulty-01's tree is as it was (blkqos rolled back its first write)",
          fleet.snapshot("faulty-01", only_sys=True) == {p: v for p, v in initial["faulty-01"].items()
                                                         if p.startswith(os.path.join(fleet.hosts["faulty-01"], "sys"))})
    check("rollout: faulty-01's profile file is the previous one (the failed profile was taken back)",
          os.listdir(os.path.join(fleet.hosts["faulty-01"], "etc", "blkqos")) == ["blkqos.toml"]
          and open(os.path.join(fleet.hosts["faulty-01"], "etc", "blkqos", "blkqos.toml"), "rb").read()
          == open(os.path.join(ROOT, "config", "blkqos.toml"), "rb").read(), out)
    check("rollout: gone-01 untouched", fleet.snapshot("gone-01") == initial["gone-01"])
    check("rollout: every other host ok, failed=0, changed",
          all(recap.get(h, {}).get("failed") == 0 and recap[h]["unreachable"] == 0 and recap[h]["changed"] > 0
              for h in good), json.dumps(recap, indent=1))
    wrong = {h: {p: fleet.attr(h, p) for p, v in PATCHED_VALUES.items() if fleet.attr(h, p) != v}
             for h in good if h.startswith("patched")}
    wrong = {h: w for h, w in wrong.items() if w}
    check("rollout: the 14 patched hosts hold the profile's values", not wrong, json.dumps(wrong))
    rfc = {h: fleet.attr(h, "block/nvme0n1/cpu_lat_limit_us") for h in ("rfc-01", "rfc-02")}
    check("rollout: the RFC-layout hosts got the limit in the disk directory", set(rfc.values()) == {"4"}, str(rfc))
    plain = [h for h in ("plain-01", "plain-02") if fleet.snapshot(h, only_sys=True)
             != {p: v for p, v in initial[h].items() if p.startswith(os.path.join(fleet.hosts[h], "sys"))}]
    check("rollout: fallback none leaves the unpatched hosts' trees alone", not plain, str(plain))
    resume = {h: fleet.attr(h, "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us")
              for h in ("resume-01", "resume-02")}
    check("rollout: fallback cpu-resume-latency sets the CPUs' resume latency", set(resume.values()) == {"4"},
          str(resume))
    for h in good:
        v = subprocess.run([BIN, "--sysfs", os.path.join(fleet.hosts[h], "sys"),
                            "--state-dir", os.path.join(fleet.hosts[h], "run", "blkqos"), "verify",
                            os.path.join(fleet.hosts[h], "etc", "blkqos", "blkqos.toml")], capture_output=True)
        if v.returncode != 0:
            check(f"rollout: blkqos verify passes on {h}", False, v.stderr.decode())

    # 2. nothing left to do
    converged = fleet.snapshot_all()
    rc, out, recap, t_noop = fleet.run(*serial)
    # faulty-01 deploys the profile and puts the previous one back again each run
    check("second run: changed=0 on every host but faulty-01",
          set(recap) == set(hosts) and all(r["changed"] == 0 for h, r in recap.items() if h != "faulty-01"),
          json.dumps(recap, indent=1))
    check("second run: the same hosts fail", [h for h in hosts if recap.get(h, {}).get("failed")
                                              or recap.get(h, {}).get("unreachable")] == ["faulty-01", "gone-01"],
          json.dumps(recap, indent=1))
    check("second run: nothing written", fleet.snapshot_all() == converged)
    print(f"ansible: TIME {len(hosts)}-host apply over ssh: {t_apply:.1f} s; no-change run: {t_noop:.1f} s "
          f"(forks={FORKS}, pipelining=True, ControlPersist, serial {SERIAL})")

    # 3. drift one knob by hand; check mode sees it and writes nothing
    drifted, knob = "patched-09", "block/nvme0n1/queue/cpu_lat_limit_us"
    with open(os.path.join(fleet.hosts[drifted], "sys", knob), "w") as f:
        f.write("100\n")
    before = fleet.snapshot_all()
    rc, out, recap, _ = fleet.run("--check", "--diff", *serial)
    check("check --diff: writes nothing on any host", fleet.snapshot_all() == before)
    check("check --diff: only the drifted host and faulty-01 (rolled back) would change, none failed "
          "but the unreachable gone-01",
          sorted(h for h, r in recap.items() if r["changed"]) == ["faulty-01", drifted]
          and [h for h, r in recap.items() if r["failed"]] == ["gone-01"], json.dumps(recap, indent=1))
    check("check --diff: the diff shows the knob going back",
          f"-{knob} = 100\n" in out and f"+{knob} = 4\n" in out, out)

    # 4. the fleet report
    report_path = os.path.join(fleet.tmp, "fleet-report.json")
    rc, out, recap, _ = fleet.run("-e", f"blkqos_report_path={report_path}", playbook="blkqos.blkqos.fleet_report")
    try:
        report = json.load(open(report_path))
    except (OSError, ValueError) as e:
        report = {"hosts": {}, "error": str(e)}
    status = {h: r.get("status") for h, r in report["hosts"].items()}
    check("report: one entry per host", set(status) == set(hosts), out)
    check("report: the drifted host differs, naming device and attribute with live and wanted values",
          status.get(drifted) == "differs"
          and report["hosts"][drifted]["differences"] == [{"path": knob, "before": "100", "after": "4"}]
          and report["hosts"][drifted]["devices"] == ["nvme0n1"], json.dumps(report.get("hosts", {}).get(drifted)))
    check("report: gone-01 could not be checked, and why",
          status.get("gone-01") == "could not check"
          and "unreachable" in report["hosts"]["gone-01"]["reason"], json.dumps(report.get("hosts", {}).get("gone-01")))
    check("report: faulty-01 differs (its apply was rolled back)", status.get("faulty-01") == "differs")
    resume, plain = ("resume-01", "resume-02"), ("plain-01", "plain-02")
    check("report: the static-fallback hosts are ok (warnings), with blkqos's warning listed",
          all(status.get(h) == "ok (warnings)"
              and any("static fallback" in w for w in report["hosts"][h]["warnings"]) for h in resume),
          json.dumps({h: report["hosts"].get(h) for h in resume}, indent=1))
    check("report: the hosts without knobs (fallback none) are ok (warnings): not constrained",
          all(status.get(h) == "ok (warnings)"
              and any("not constrained" in w for w in report["hosts"][h]["warnings"]) for h in plain),
          json.dumps({h: report["hosts"].get(h) for h in plain}, indent=1))
    check("report: every other host ok",
          all(status.get(h) == "ok" for h in good if h != drifted and h not in resume + plain),
          json.dumps(status, indent=1))
    check("report: summary counts", report.get("summary") == {"ok": len(good) - 5, "ok_with_warnings": 4,
                                                              "differs": 2, "could_not_check": 1},
          json.dumps(report.get("summary")))
    table = open(report_path[:-5] + ".txt").read()
    check("report: the table, written and printed, names the drifted attribute",
          re.search(rf"^{drifted}\s+differs\s+{re.escape(knob)} live 100 wanted 4$", table, re.M) is not None
          and re.search(r"^gone-01\s+could not check\s+unreachable", table, re.M) is not None
          and re.search(r"^resume-01\s+ok \(warnings\)\s+warning: static fallback", table, re.M) is not None
          and f"{drifted}" in out and "could not check" in out, table + out)
    print("ansible: fleet report table:\n" + table.rstrip())

    # 5. an unreachable host counts as failed: gone-01 alone in the first
    #    batch, the drifted host in the second, which must not be reached
    rc, out, recap, _ = fleet.run("--limit", f"gone-01,{drifted}", "-e", "blkqos_serial=1",
                                  "-e", "blkqos_max_fail_percentage=0")
    check("max_fail_percentage 0: an unreachable host in the first batch stops the play",
          rc != 0 and set(recap) == {"gone-01"} and fleet.attr(drifted, knob) == "100",
          json.dumps(recap, indent=1) + out[-3000:])

    # 6. a bad batch stops the rollout: faulty-01 is in the first batch, the
    #    drifted host in the second, which must not be reached
    rc, out, recap, _ = fleet.run("-e", f"blkqos_serial={SERIAL}", "-e", "blkqos_max_fail_percentage=0")
    first = hosts[:SERIAL]
    check("max_fail_percentage 0: the play stops after the first batch",
          rc != 0 and set(recap) == set(first), json.dumps(recap, indent=1) + out[-3000:])
    check("max_fail_percentage 0: later batches untouched (the drift is still there)",
          fleet.attr(drifted, knob) == "100")
    # 7. the rollout again, over the drifted host's batch: the other
    #    batches converged in 1 and changed nothing in 2 (a full run
    #    costs a minute of both cores, a fifth of the CI run's Ansible).
    #    Of the batch, only a host that cannot converge (gone-01 is in it)
    #    may fail
    batch = hosts[hosts.index(drifted) // SERIAL * SERIAL:][:SERIAL]
    rc, out, recap, _ = fleet.run("--limit", ",".join(batch), *serial)
    check(f"the rollout again over the drifted host's batch ({', '.join(batch)}) fixes the drift, "
          "changes that host only, and fails only where a host cannot converge",
          set(recap) == set(batch) and [h for h, r in recap.items() if r["changed"]] == [drifted]
          and sorted(h for h, r in recap.items() if r["failed"]) == sorted(h for h in batch if h not in good)
          and fleet.attr(drifted, knob) == "4",
          json.dumps(recap, indent=1) + out[-3000:])


def main():
    # a SIGTERM from outside still stops sshd (finally blocks run)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="blkqos-fleet.") as tmp:
        # away from ansible/ansible.cfg, which points at the in-tree collection
        os.chdir(tmp)
        print("ansible: == collection build and install")
        collections = test_build_and_install(tmp, sys.argv[1] if len(sys.argv) > 1 else None)
        if failures:
            print("ansible: no installed collection, no fleet test")
        else:
            print("ansible: == fleet over ssh")
            test_fleet(tmp, collections)
    if failures:
        print(f"ansible: {len(failures)} fleet check(s) failed: {', '.join(failures)}")
        return 1
    print("ansible: fleet checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
