//! What a state file may hold, entry by entry: the one check of every read
//! and of every original the planner would save.

use super::*;

/// What blkqos writes, and so all a state file may name: the knobs of a
/// disk (either layout), its other queue attributes and the per-CPU resume
/// latency, each with a value the kernel could have reported for it. A
/// forged file could otherwise make `restore` write anything in sysfs.
/// Each entry is checked on its own: one that fails is taken out (and
/// said why), the others kept. The planner checks what it would save with
/// the same rules ([`check_entry`]), so what apply saves reads back.
pub(super) fn prune(state: &mut State) -> Vec<String> {
    let mut out = Vec::new();
    state.saved.retain(|path, saved| {
        let ok = check_entry(path, &saved.original, &saved.owners);
        ok.map_err(|e| out.push(e)).is_ok()
    });
    // what was written only tells a media change from another disk: one
    // that cannot be trusted costs that, not the original (no count)
    for (path, saved) in &mut state.saved {
        if let Some(w) = &saved.written
            && let Err(e) = check_saved(path, w)
        {
            log::warn!("saved state: written value: {e}: left out");
            saved.written = None;
        }
    }
    state.leases.retain(|path, l| {
        let ok = check_saved(path, &l.original).and_then(|()| {
            if !path.starts_with("devices/system/cpu/") {
                return Err(format!(
                    "a lease names {path:?}; expected devices/system/cpu/cpuN/power/pm_qos_resume_latency_us"
                ));
            }
            match l.limits.iter().find(|&&v| v > LIMIT_MAX_US) {
                Some(bad) => Err(format!(
                    "{path}: lease limit {bad}; expected at most {LIMIT_MAX_US}"
                )),
                None => Ok(()),
            }
        });
        ok.map_err(|e| out.push(e)).is_ok()
    });
    state.rules.retain(|d, _| {
        let ok = is_kernel_name(d);
        if !ok {
            out.push(format!("a rule owns {d:?}; expected block device names"));
        }
        ok
    });
    // which disk a name was only guards against a name reused: one that
    // cannot be trusted costs that guard, not an original (no count)
    state.disks.retain(|d, id| {
        let ok = is_kernel_name(d) && id.is_valid();
        if !ok {
            log::warn!(
                "saved state: disk {d:?} is {:?}; expected a block device name and MAJOR:MINOR: left out",
                id.dev
            );
        }
        ok
    });
    out
}

/// Whether a saved original for `path`, held for `owners`, is one the
/// state may keep: the check of every entry read, and of every entry the
/// planner would save.
pub fn check_entry(
    path: &str,
    original: &str,
    owners: &std::collections::BTreeSet<String>,
) -> Result<(), String> {
    check_saved(path, original)?;
    match owners.iter().find(|o| !is_kernel_name(o)) {
        Some(bad) => Err(format!(
            "{path:?} is owned by {bad:?}; expected block device names"
        )),
        None => Ok(()),
    }
}

pub(super) fn check_saved(path: &str, value: &str) -> Result<(), String> {
    let int_in = |range: std::ops::RangeInclusive<i64>| {
        value.parse::<i64>().is_ok_and(|n| range.contains(&n))
    };
    let parts: Vec<&str> = path.split('/').collect();
    let (ok, expected) = match parts.as_slice() {
        ["block", disk, knob] | ["block", disk, "queue", knob]
            if is_kernel_name(disk) && *knob == "cpu_lat_limit_us" =>
        {
            (
                value == "auto" || int_in(-1..=LIMIT_MAX_US as i64),
                format!("\"auto\" or an integer from -1 to {LIMIT_MAX_US}"),
            )
        }
        ["block", disk, knob] | ["block", disk, "queue", knob]
            if is_kernel_name(disk) && *knob == "cpu_lat_timeout_ms" =>
        {
            // 0 is no timeout blkqos writes, but a kernel may report it
            (
                int_in(0..=TIMEOUT_MAX_MS as i64),
                format!("an integer from 0 to {TIMEOUT_MAX_MS}"),
            )
        }
        ["block", disk, "queue", attr] if is_kernel_name(disk) && is_queue_attr_name(attr) => (
            value.len() <= MAX_ATTR_VALUE && !value.chars().any(char::is_control),
            format!("one line of at most {MAX_ATTR_VALUE} bytes"),
        ),
        [
            "devices",
            "system",
            "cpu",
            cpu,
            "power",
            "pm_qos_resume_latency_us",
        ] if cpu.strip_prefix("cpu").is_some_and(|n| {
            !n.is_empty() && n.len() <= 5 && n.bytes().all(|b| b.is_ascii_digit())
        }) =>
        {
            (
                // as the kernel prints it: a leading zero would be octal
                // to its parser
                value.trim() == value && crate::abi::resume::decode(value).is_some(),
                "\"n/a\" or an integer from 0 to 2147483647 without leading zeros".to_string(),
            )
        }
        _ => {
            return Err(format!(
                "{path:?} is not an attribute blkqos manages; expected block/<disk>/queue/<attribute>, block/<disk>/cpu_lat_* or devices/system/cpu/cpuN/power/pm_qos_resume_latency_us"
            ));
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{path}: saved value {value:?}; expected {expected}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A written value that could not be trusted only costs telling a
    /// media change: the original stays, and nothing counts as distrusted.
    #[test]
    fn an_untrusted_written_value_is_dropped_and_the_original_kept() {
        let mut state = State::default();
        for (disk, written) in [("sda", "99999999"), ("sdb", "7")] {
            state.saved.insert(
                format!("block/{disk}/queue/cpu_lat_limit_us"),
                Saved {
                    original: "-1".into(),
                    owners: BTreeSet::from([disk.to_string()]),
                    written: Some(written.into()),
                },
            );
        }
        assert!(prune(&mut state).is_empty());
        let written = |d: &str| {
            let path = format!("block/{d}/queue/cpu_lat_limit_us");
            state.saved[&path].written.clone()
        };
        assert_eq!(written("sda"), None);
        assert_eq!(written("sdb").as_deref(), Some("7"));
    }
}
