#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-2.0-only
"""Ansible module: run blkqos apply or restore and report what changed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: blkqos_apply
short_description: Apply a blkqos profile, or restore what blkqos saved
version_added: 1.0.0
description:
  - Runs C(blkqos apply --json) or C(blkqos restore --json) and reports
    C(changed) from blkqos's own JSON, so a second run reports no change.
  - In check mode runs the same command with C(--dry-run) and reports what
    would change; nothing on the host is written.
  - In diff mode shows each attribute's value before and after.
options:
  binary:
    description: The blkqos command.
    type: path
    default: /usr/sbin/blkqos
  profile:
    description: Profile path on the host (state=present).
    type: path
  profile_content:
    description:
      - Profile text to use instead of I(profile) in check mode, when the
        profile file has not been written yet (written to a temporary file
        of the module's, removed when it exits).
    type: str
  state:
    description: C(present) applies the profile, C(restored) puts back the originals.
    type: str
    choices: [present, restored]
    default: present
  sysfs:
    description: Passed to C(--sysfs).
    type: path
    default: /sys
  state_dir:
    description: Passed to C(--state-dir).
    type: path
    default: /run/blkqos
  lock_timeout:
    description:
      - Seconds to wait for another blkqos run holding the state lock,
        passed to C(--lock-timeout). Unset, blkqos's default (10 s).
      - When it gives up (blkqos exit 3) the task fails with a message
        starting C(busy:) and naming the holder's pid.
    type: float
requirements:
  - blkqos on the host (the C(blkqos.blkqos.blkqos) role installs it)
notes:
  - Never starts a second blkqos while one runs; blkqos takes its own state
    lock and waits up to I(lock_timeout) seconds for it.
attributes:
  check_mode:
    support: full
    description: Runs blkqos with C(--dry-run); nothing on the host is written.
  diff_mode:
    support: full
    description: Each attribute's value before and after, one per line.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with sysfs; any Linux host for a fake tree.
author:
  - blkqos developers (@blkqos)
"""

EXAMPLES = r"""
- name: Apply the profile
  blkqos.blkqos.blkqos_apply:
    profile: /etc/blkqos/blkqos.toml

- name: Put back every value blkqos saved
  blkqos.blkqos.blkqos_apply:
    state: restored

- name: Apply to a copied sysfs tree, keeping the originals elsewhere
  blkqos.blkqos.blkqos_apply:
    profile: /srv/test/blkqos.toml
    sysfs: /srv/test/sys
    state_dir: /srv/test/state
"""

RETURN = r"""
devices:
  description: Per device, the rule that owns it and the changes made (or that would be).
  returned: success
  type: list
  elements: dict
  sample:
    - name: nvme0n1
      rule: nvme
      changes:
        - path: block/nvme0n1/queue/cpu_lat_limit_us
          before: "-1"
          after: "4"
changes:
  description: Number of attribute values written (or that would be).
  returned: success
  type: int
  sample: 2
"""

import json
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule


# blkqos's exit status when it gave up waiting for the state lock.
EXIT_BUSY = 3


def attribute_lines(changes, side):
    return "".join("%s = %s\n" % (c["path"], c[side]) for c in changes)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            binary=dict(type="path", default="/usr/sbin/blkqos"),
            profile=dict(type="path"),
            profile_content=dict(type="str"),
            state=dict(type="str", choices=["present", "restored"], default="present"),
            sysfs=dict(type="path", default="/sys"),
            state_dir=dict(type="path", default="/run/blkqos"),
            lock_timeout=dict(type="float"),
        ),
        required_if=[("state", "present", ("profile",))],
        supports_check_mode=True,
    )
    p = module.params
    argv = [p["binary"], "--log", "stderr", "--sysfs", p["sysfs"], "--state-dir", p["state_dir"]]
    if p["lock_timeout"] is not None:
        argv += ["--lock-timeout", "%g" % p["lock_timeout"]]
    if p["state"] == "present":
        profile = p["profile"]
        if module.check_mode and p["profile_content"]:
            # the task that writes the profile only pretended to: a regular
            # file of the module's own (blkqos refuses a pipe as a profile),
            # removed when the module exits
            fd, profile = tempfile.mkstemp(prefix="blkqos-profile.", suffix=".toml", dir=module.tmpdir)
            with os.fdopen(fd, "w") as f:
                f.write(p["profile_content"])
        argv += ["apply", profile]
    else:
        argv += ["restore"]
    argv.append("--json")
    if module.check_mode:
        argv.append("--dry-run")

    rc, out, err = module.run_command(argv)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    if rc != 0 or doc is None:
        doc = doc or {}
        # a partial run (exit 1 without "error": an attribute left alone
        # unread, the state not saved after the writes) says why in its
        # warnings, and what it wrote is changed all the same
        error = (doc.get("error") or (doc.get("failure") or {}).get("message")
                 or "; ".join(doc.get("warnings", [])) or err.strip() or out.strip())
        if rc == EXIT_BUSY:
            m = re.search(r"pid (\d+)", error)
            module.fail_json(
                msg="busy: another blkqos run holds the state lock (pid %s); gave up waiting: %s"
                % (m.group(1) if m else "unknown", error),
                rc=rc, stdout=out, stderr=err)
        module.fail_json(msg="blkqos failed (exit %d): %s" % (rc, error), rc=rc, stdout=out, stderr=err,
                         changed=bool(doc.get("changed")))

    for w in doc.get("warnings", []):
        module.warn(w)
    changes = [c for d in doc.get("devices", []) for c in d.get("changes", [])]
    module.exit_json(
        changed=bool(doc.get("changed")),
        devices=doc.get("devices", []),
        changes=len(changes),
        diff=dict(
            before_header="%s (before)" % p["sysfs"],
            after_header="%s (after)" % p["sysfs"],
            before=attribute_lines(changes, "before"),
            after=attribute_lines(changes, "after"),
        ),
    )


if __name__ == "__main__":
    main()
