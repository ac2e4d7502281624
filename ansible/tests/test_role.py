#!/usr/bin/env python3
"""The blkqos role, run for real: ansible-playbook on localhost (-c local)
with the example playbook, the role pointed at fake sysfs trees built by the
project's fixture builder. Prints one line per check; exits 1 on any failure.

Usage: ansible/tests/test_role.py   (ansible-playbook on PATH; release
binary and mkfixture built: cargo build --release --bins && cargo build --examples)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import fcntl
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE = os.path.join(ROOT, "ansible")
BIN = os.path.join(ROOT, "target", "release", "blkqos")
MKFIXTURE = os.path.join(ROOT, "target", "debug", "examples", "mkfixture")
RECAP = re.compile(r"^localhost\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
LIMIT = "block/{}/queue/cpu_lat_limit_us"
TIMEOUT = "block/{}/queue/cpu_lat_timeout_ms"

failures = []


def check(name, ok, detail=""):
    print(f"ansible: {'PASS' if ok else 'FAIL'} {name}" + ("" if ok else f"\n{detail}"))
    if not ok:
        failures.append(name)


class Host:
    """A fake host: a sysfs tree, and where the role puts binary, profile, state."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.sys = os.path.join(tmp, "sys")
        self.profile = os.path.join(tmp, "etc", "blkqos", "blkqos.toml")
        self.state = os.path.join(tmp, "run", "blkqos")
        subprocess.run([MKFIXTURE, self.sys, "zoo", "queue"], check=True, stdout=subprocess.DEVNULL)
        self.vars = os.path.join(tmp, "vars.json")
        with open(self.vars, "w") as f:
            json.dump(
                {
                    # the binary alone: blkqos_package follows it to ""
                    "blkqos_binary_src": BIN,
                    "blkqos_binary": os.path.join(tmp, "bin", "blkqos"),
                    "blkqos_profile_path": self.profile,
                    "blkqos_sysfs": self.sys,
                    "blkqos_state_dir": self.state,
                    "blkqos_udev_rule": False,
                    "blkqos_boot_unit": False,
                    "ansible_become": False,
                },
                f,
            )
        os.makedirs(os.path.join(tmp, "bin"))
        self.inventory = os.path.join(tmp, "hosts.ini")
        with open(self.inventory, "w") as f:
            f.write("[storage]\nlocalhost ansible_connection=local "
                    "ansible_python_interpreter='{{ ansible_playbook_python }}'\n")

    def play(self, *args, extra=None):
        cmd = ["ansible-playbook", "-i", self.inventory, "-c", "local", "playbook.yml", "-e", "@" + self.vars, *args]
        if extra is not None:
            cmd += ["-e", json.dumps(extra)]
        env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
        r = subprocess.run(cmd, cwd=ANSIBLE, env=env, capture_output=True, text=True)
        m = RECAP.search(r.stdout)
        recap = dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups()))) if m else {}
        return r.returncode, r.stdout + r.stderr, recap

    def attr(self, rel):
        with open(os.path.join(self.sys, rel)) as f:
            return f.read().strip()

    def snapshot(self):
        """Every file and link under the host's directory but the binary."""
        out = {}
        for d, dirs, files in os.walk(self.tmp):
            for n in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
                p = os.path.join(d, n)
                if p.startswith(os.path.join(self.tmp, "bin")):
                    continue
                out[p] = os.readlink(p) if os.path.islink(p) else open(p, "rb").read()
        return out


def task_result(out, task):
    """The status line (ok/changed/failed/skipping) of a task in the output."""
    m = re.search(r"TASK \[(?:blkqos\.blkqos\.)?blkqos : " + re.escape(task) + r"\].*?\n(?:.*\n)*?(ok|changed|fatal|failed|skipping):", out)
    return m.group(1) if m else None


def test_apply_then_idempotent(tmp):
    h = Host(tmp)
    rc, out, recap = h.play()
    check("first run succeeds", rc == 0, out)
    check("first run reports changes", recap.get("changed", 0) > 0, out)
    check("apply task changed", task_result(out, "Apply the profile") == "changed", out)
    check(
        "knobs follow the profile (nvme auto 4 us; md0 members strictest 4, longest timeout 5)",
        [h.attr(LIMIT.format("nvme0n1")), h.attr(LIMIT.format("nvme2n1")), h.attr(TIMEOUT.format("nvme2n1")),
         h.attr(LIMIT.format("sda"))] == ["4", "4", "5", "-1"],
        out,
    )
    check("state file holds the originals", len(json.load(open(os.path.join(h.state, "state.json")))["saved"]) == 8)
    rc, out, recap = h.play()
    check("second run changed=0", rc == 0 and recap.get("changed") == 0, out)


def test_check_and_diff_mode_change_nothing(tmp):
    h = Host(tmp)
    # a host where blkqos is installed and the tree untouched
    shutil.copy(BIN, os.path.join(tmp, "bin", "blkqos"))
    before = h.snapshot()
    rc, out, recap = h.play("--check", "--diff")
    check("check mode succeeds", rc == 0, out)
    check("check mode reports what would change", task_result(out, "Apply the profile") == "changed", out)
    check("check mode writes no file (tree, profile, state)", h.snapshot() == before, out)
    check("check mode creates no state dir", not os.path.exists(h.state))
    check(
        "diff mode shows each attribute before and after",
        "-block/nvme0n1/queue/cpu_lat_limit_us = -1\n" in out
        and "+block/nvme0n1/queue/cpu_lat_limit_us = 4\n" in out
        and "+block/nvme2n1/queue/cpu_lat_timeout_ms = 5\n" in out,
        out,
    )
    check("diff mode shows the profile", '+match = { transport = "nvme" }' in out, out)


def test_restored_puts_everything_back(tmp):
    h = Host(tmp)
    original = h.snapshot()
    rc, out, _ = h.play()
    check("apply before restore", rc == 0, out)
    rc, out, recap = h.play("--check", extra={"blkqos_state": "restored"})
    check("restored in check mode reports a change", rc == 0 and task_result(out, "Restore the saved values") == "changed", out)
    rc, out, recap = h.play("--diff", extra={"blkqos_state": "restored"})
    check("restored run succeeds", rc == 0 and recap.get("changed", 0) > 0, out)
    check("restored diff shows the original coming back", "+block/nvme0n1/queue/cpu_lat_limit_us = -1\n" in out, out)
    def values(snap):  # a fake attribute file keeps the newline the kernel would add
        return {p: v.strip() for p, v in snap.items() if p.startswith(h.sys)}
    check("every attribute is back to its original", values(h.snapshot()) == values(original))
    check("no saved values remain", json.load(open(os.path.join(h.state, "state.json")))["saved"] == {})
    rc, out, recap = h.play(extra={"blkqos_state": "restored"})
    check("restored twice changed=0", rc == 0 and recap.get("changed") == 0, out)


def test_invalid_profile_fails_before_writing(tmp):
    h = Host(tmp)
    rc, out, _ = h.play()
    check("valid profile applied first", rc == 0, out)
    before = h.snapshot()
    bad = {"blkqos_profile": {"rule": [{"name": "nvme", "match": {"transport": "nvme"}, "cpu_lat_limit_us": 100001}]}}
    rc, out, recap = h.play(extra=bad)
    check("invalid profile fails the play", rc != 0 and recap.get("failed") == 1, out)
    check("the failure is the validation, with position and expectation",
          task_result(out, "Deploy the profile") == "fatal" and re.search(r":\d+:\d+: .*100000", out) is not None, out)
    check("nothing applied after the failure", task_result(out, "Apply the profile") is None, out)
    check("tree, profile and state unchanged", h.snapshot() == before, out)
    rc, out, _ = h.play("--check", extra=bad)
    check("invalid profile fails check mode too", rc != 0 and "100000" in out, out)
    check("and check mode wrote nothing", h.snapshot() == before, out)


def test_profile_src_and_rendering(tmp):
    h = Host(tmp)
    rc, out, recap = h.play(extra={"blkqos_profile": {}, "blkqos_profile_src": os.path.join(ROOT, "config", "blkqos.toml")})
    check("profile from a file deploys and applies", rc == 0 and h.attr(LIMIT.format("nvme0n1")) == "4", out)
    with open(os.path.join(ROOT, "config", "blkqos.toml"), "rb") as f:
        shipped = tomllib.load(f)
    with open(h.profile, "rb") as f:
        check("deployed file parses as the shipped profile", tomllib.load(f) == shipped)
    # every kind of value a profile has, with characters TOML must escape
    tricky = {
        "defaults": {"cpu_lat_timeout_ms": 4, "fallback": "none"},
        "rule": [
            {"name": 'quote " back \\ slash é', "match": {"transport": ["sata", "sas"], "rotational": False,
                                                         "property": {"ID_MODEL": "^Samsung.*\\d$"}},
             "cpu_lat_limit_us": "off", "queue": {"read_ahead_kb": "256"}},
            {"name": "nvme", "match": {"name": ["nvme*", "!nvme1n1"]}, "cpu_lat_limit_us": 0},
        ],
    }
    rc, out, _ = h.play(extra={"blkqos_profile": tricky})
    check("a profile with every value kind renders, validates and applies", rc == 0, out)
    with open(h.profile, "rb") as f:
        check("rendered TOML reads back as the dict given", tomllib.load(f) == tricky, open(h.profile).read())
    check("rule with limit 0 applied", h.attr(LIMIT.format("nvme0n1")) == "0" and h.attr(LIMIT.format("nvme1n1")) == "-1")


def test_verify_lists_mismatches(tmp):
    h = Host(tmp)
    # Fault injection: an installed blkqos whose apply writes nothing, so the
    # live values differ from the profile when the role verifies them.
    wrapper = os.path.join(tmp, "bin", "blkqos")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\ncase " $* " in *" apply "*)\n'
                '  echo \'{"schema":3,"command":"apply","changed":false,"dry_run":false,"devices":[],"warnings":[]}\'\n'
                f'  exit 0;;\nesac\nexec {BIN} "$@"\n')
    os.chmod(wrapper, 0o755)
    rc, out, recap = h.play(extra={"blkqos_binary_src": "", "blkqos_package": ""})
    check("a mismatch after apply fails the play", rc != 0 and recap.get("failed") == 1, out)
    check("the failure lists every mismatch",
          "blkqos verify: 8 value(s) differ" in out
          and "block/nvme0n1/queue/cpu_lat_limit_us: live -1, wanted 4" in out
          and "block/nvme2n1/queue/cpu_lat_timeout_ms: live 3, wanted 5" in out, out)
    rc, out, recap = h.play(extra={"blkqos_binary_src": "", "blkqos_package": "", "blkqos_verify": False})
    check("blkqos_verify: false skips the check", rc == 0, out)


def test_install_variables_do_what_they_say(tmp):
    h = Host(tmp)
    rc, out, _ = h.play()
    check("blkqos_binary_src alone installs that binary (no blkqos_package: \"\" needed)",
          rc == 0 and task_result(out, "Install blkqos from the package repositories") == "skipping"
          and open(os.path.join(tmp, "bin", "blkqos"), "rb").read() == open(BIN, "rb").read(), out)
    rc, out, _ = h.play("--check", extra={"blkqos_package": "blkqos"})
    check("blkqos_package and blkqos_binary_src both set is refused, saying why",
          rc != 0 and "at most one of blkqos_package and" in out, out)
    rc, out, _ = h.play("--check", extra={"blkqos_binary_src": ""})
    check("without blkqos_binary_src the package blkqos is installed",
          task_result(out, "Install blkqos from the package repositories") not in (None, "skipping"), out)
    # the udev rule and the boot unit get --sysfs and --state-dir when the
    # role's are not the defaults: one state directory for rule, unit, role
    rule = os.path.join(tmp, "90-blkqos.rules")
    rc, out, _ = h.play("--check", "--diff", extra={"blkqos_udev_rule": True, "__blkqos_udev_rule_path": rule})
    check("the udev rule runs blkqos with the role's --sysfs and --state-dir",
          rc == 0 and f'+RUN+="{tmp}/bin/blkqos --sysfs {h.sys} --state-dir {h.state} udev {h.profile}"' in out
          and not os.path.exists(rule), out)


def fault_wrapper(path, on, reply, rc):
    """A blkqos that answers `on` (apply, verify) with reply and exit rc."""
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\ncase " $* " in *" {on} "*)\n  echo \'{reply}\'\n  exit {rc};;\nesac\nexec {BIN} "$@"\n')
    os.chmod(path, 0o755)
    return path


def test_empty_profile_keeps_the_host_profile(tmp):
    h = Host(tmp)
    rc, out, _ = h.play()
    check("apply before an empty blkqos_profile", rc == 0, out)
    deployed = open(h.profile, "rb").read()
    rc, out, recap = h.play(extra={"blkqos_profile": {}})
    check("blkqos_profile {} keeps the profile on the host (not an empty file), changed=0",
          rc == 0 and open(h.profile, "rb").read() == deployed and recap.get("changed") == 0
          and task_result(out, "Deploy the profile") == "skipping", out)


def test_failed_apply_puts_the_profile_back(tmp):
    h = Host(tmp)
    failing = fault_wrapper(os.path.join(tmp, "failing-blkqos"), "apply",
                            '{"error":"injected apply failure"}', 1)
    # a fresh host: the profile that failed is removed again
    rc, out, _ = h.play(extra={"blkqos_binary_src": failing})
    check("a failed apply on a fresh host fails the play with blkqos's error",
          rc != 0 and "injected apply failure" in out, out)
    check("and leaves no profile file behind", not os.path.exists(h.profile), out)
    rc, out, _ = h.play()
    check("a good run after it", rc == 0, out)
    previous = open(h.profile, "rb").read()
    other = {"rule": [{"name": "nvme", "match": {"transport": "nvme"}, "cpu_lat_limit_us": 10}]}
    rc, out, _ = h.play(extra={"blkqos_binary_src": failing, "blkqos_profile": other})
    check("a failed apply of a new profile fails the play", rc != 0 and "injected apply failure" in out, out)
    check("the profile file is the previous one again, no backup left",
          open(h.profile, "rb").read() == previous and os.listdir(os.path.dirname(h.profile)) == ["blkqos.toml"],
          out + str(os.listdir(os.path.dirname(h.profile))))
    trouble = fault_wrapper(os.path.join(tmp, "trouble-blkqos"), "verify",
                            '{"schema":1,"error":"injected verify trouble"}', 2)
    rc, out, _ = h.play(extra={"blkqos_binary_src": trouble, "blkqos_profile": other})
    check("verify exit 2 fails with blkqos's error message, and the profile goes back",
          rc != 0 and "blkqos verify could not check (exit 2): injected verify trouble" in out
          and open(h.profile, "rb").read() == previous, out)


def test_check_mode_on_a_fresh_host_with_the_boot_unit(tmp):
    h = Host(tmp)
    unit = os.path.join(tmp, "blkqos.service")
    extra = {"blkqos_boot_unit": True, "__blkqos_unit_path": unit}
    rc, out, _ = h.play("--check", extra=extra)
    check("check mode with the boot unit on a fresh host succeeds, enable skipped",
          rc == 0 and task_result(out, "Enable the boot unit") == "skipping" and not os.path.exists(unit), out)
    rc, out, _ = h.play("--check", extra=dict(extra, blkqos_state="restored"))
    check("restored (check mode) on a host that never had the unit: disable skipped",
          rc == 0 and task_result(out, "Disable the boot unit") == "skipping", out)


def test_the_lease_unit_by_mode(tmp):
    h = Host(tmp)
    binary = os.path.join(tmp, "bin", "blkqos")
    lease_unit = os.path.join(tmp, "blkqos-lease.service")
    base = {"blkqos_boot_unit": True, "__blkqos_unit_path": os.path.join(tmp, "blkqos.service"),
            "__blkqos_lease_unit_path": lease_unit}
    # check mode with --diff shows the unit the role would write
    rc, out, _ = h.play("--check", "--diff", extra=base)
    check("lease auto: the unit keeps its ExecCondition, with the role's paths",
          rc == 0 and task_result(out, "Install the lease unit") == "changed"
          and f"+ExecCondition={binary} --sysfs {h.sys} --state-dir {h.state} lease --unless-kernel-lease" in out
          and f"+ExecStart={binary} --sysfs {h.sys} --state-dir {h.state} lease {h.profile}" in out
          and task_result(out, "Enable and start the lease unit, or stop and disable it") == "skipping", out)
    rc, out, _ = h.play("--check", "--diff", extra=dict(base, blkqos_lease=True))
    check("lease true: the unit runs whatever the kernel (no ExecCondition)",
          rc == 0 and "+ExecStart=" in out and "+ExecCondition=" not in out, out)
    rc, out, _ = h.play("--check", extra=dict(base, blkqos_lease="false"))
    check("lease false (as a string): no unit written",
          rc == 0 and task_result(out, "Install the lease unit") == "skipping", out)
    rc, out, _ = h.play("--check", extra=dict(base, blkqos_lease="static"))
    check("lease static: refused by the variable check", rc != 0 and "blkqos_lease one of auto, true, false" in out, out)


def test_paths_the_unit_and_rule_cannot_take(tmp):
    h = Host(tmp)
    spaced = os.path.join(tmp, "my bin", "blkqos")
    os.makedirs(os.path.dirname(spaced))
    rc, out, _ = h.play(extra={"blkqos_binary": spaced})
    check("a binary path with a space works without rule and unit (validate quotes it)",
          rc == 0 and h.attr(LIMIT.format("nvme0n1")) == "4", out)
    for bad in (os.path.join(tmp, "a b.toml"), os.path.join(tmp, "50%.toml"), os.path.join(tmp, "$x.toml")):
        rc, out, _ = h.play("--check", extra={"blkqos_boot_unit": True, "blkqos_profile_path": bad})
        check(f"the boot unit refuses the profile path {os.path.basename(bad)!r}, saying why",
              rc != 0 and "blkqos_profile_path: the udev rule and the boot" in out, out)


def test_lock_busy(tmp):
    h = Host(tmp)
    rc, out, _ = h.play()
    check("apply before the lock test", rc == 0, out)
    with open(os.path.join(h.state, "lock"), "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.truncate(0)
        # as a run names itself: its pid and start time (field 22 of its stat)
        with open("/proc/self/stat") as stat:
            started = stat.read().rsplit(")", 1)[1].split()[19]
        lock.write("%d %s\n" % (os.getpid(), started))
        lock.flush()
        rc, out, _ = h.play(extra={"blkqos_lock_timeout": 0.2, "blkqos_verify": False})
    check("a held state lock fails the apply as busy, naming the holder",
          rc != 0 and f"busy: another blkqos run holds the state lock (pid {os.getpid()})" in out, out)


def test_restored_without_blkqos(tmp):
    h = Host(tmp)
    rc, out, _ = h.play(extra={"blkqos_state": "restored"})
    check("restored on a host without blkqos succeeds, says the restore was skipped, installs nothing",
          rc == 0 and "restore skipped" in out and not os.path.exists(os.path.join(tmp, "bin", "blkqos"))
          and task_result(out, "Install the blkqos binary") is None, out)


def main():
    for test in (test_apply_then_idempotent, test_check_and_diff_mode_change_nothing,
                 test_restored_puts_everything_back, test_invalid_profile_fails_before_writing,
                 test_profile_src_and_rendering, test_verify_lists_mismatches,
                 test_install_variables_do_what_they_say, test_empty_profile_keeps_the_host_profile,
                 test_failed_apply_puts_the_profile_back, test_check_mode_on_a_fresh_host_with_the_boot_unit, test_the_lease_unit_by_mode,
                 test_paths_the_unit_and_rule_cannot_take, test_lock_busy, test_restored_without_blkqos):
        if len(sys.argv) > 1 and test.__name__ not in sys.argv[1:]:
            continue
        print(f"ansible: == {test.__name__}")
        with tempfile.TemporaryDirectory() as tmp:
            test(tmp)
    if failures:
        print(f"ansible: {len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("ansible: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
