//! What `restore` puts back: the saved originals within a scope.

use super::*;

/// What restoring the saved originals of `scope` (everything when empty)
/// writes. The devices released are the ones named and the queues they
/// resolve to that no rule of their own owns (a member of md0 without a
/// rule asks for nothing itself). A value another device still wants (an
/// owner outside the release with a rule of its own, as a member of md0
/// with its own rule is, or another array on the same queue) is kept and
/// only let go by the released devices, as a removal keeps it: without the
/// profile restore cannot tell what that device's rule would want instead,
/// so the live value stays until the next apply re-plans it. An original
/// whose attribute is missing is forgotten only when its device left.
pub fn restore(snap: &Snapshot, scope: &Scope, forget_missing: bool) -> Result<Plan, PlanError> {
    let state = &snap.state;
    // A name that is neither here nor saved is a typo, not "nothing to do".
    if let Some(unknown) = scope.devices.iter().find(|d| {
        snap.inventory.get(d).is_none()
            && !state.rules.contains_key(*d)
            && !state.saved.values().any(|s| s.owners.contains(*d))
    }) {
        return Err(match no_such_device(&snap.inventory, unknown) {
            e @ PlanError::Partition { .. } => e,
            _ => PlanError::Unknown(unknown.clone()),
        });
    }
    let in_scope: Option<BTreeSet<String>> = (!scope.devices.is_empty()).then(|| {
        let mut s: BTreeSet<String> = scope.devices.iter().cloned().collect();
        for d in &scope.devices {
            if let Some(dev) = snap.inventory.get(d) {
                s.extend(
                    (dev.targets.iter())
                        .filter(|t| !state.rules.contains_key(*t))
                        .cloned(),
                );
            }
        }
        s
    });
    let mut plan = Plan {
        distrusted: state.distrusted,
        ..Plan::default()
    };
    let mut by_owner: BTreeMap<String, Vec<Change>> = BTreeMap::new();
    for (path, saved) in &state.saved {
        if let Some(s) = &in_scope {
            if saved.owners.is_disjoint(s) {
                continue;
            }
            if let Some((other, rule)) = (saved.owners.iter())
                .filter(|o| !s.contains(*o))
                .find_map(|o| state.rules.get(o).map(|r| (o, r)))
            {
                plan.warnings.push(format!(
                    "{path}: still wanted by {other} (rule {rule:?}); kept, let go by {}",
                    (saved.owners.intersection(s))
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                continue;
            }
        }
        match snap.value(path) {
            Reading::Value(v) => {
                plan.forget.insert(path.clone());
                let current = live_value(path, v);
                // a CPU a lease holds is left to it: its original is what
                // the lease puts back at the lapse
                let lease = on_lease(state, path, &current);
                if !same_value(path, lease.held.unwrap_or(&current), &saved.original) {
                    let owner = saved.owners.iter().next().cloned().unwrap_or_default();
                    by_owner.entry(owner).or_default().push(Change {
                        path: path.clone(),
                        after: lease.write(&saved.original),
                        lease_original: lease.entry.then(|| saved.original.clone()),
                        before: current.clone(),
                        contributors: saved.owners.clone(),
                    });
                }
            }
            Reading::Missing if snap.device_present(path) => plan.warnings.push(format!(
                "{path}: missing although its device is there; its saved original is kept"
            )),
            Reading::Missing => {
                plan.warnings
                    .push(format!("{path}: gone; forgetting its saved value"));
                plan.forget.insert(path.clone());
            }
            Reading::Unreadable(e) => {
                return Err(PlanError::Read {
                    path: path.clone(),
                    reason: e.clone(),
                });
            }
        }
    }
    if !forget_missing {
        refuse_forgetting_every_device(snap, scope, &plan.forget)?;
    }
    match in_scope {
        Some(s) => {
            plan.rules = s.iter().map(|d| (d.clone(), None)).collect();
            plan.disown = s;
        }
        None => plan.forget_all_rules = true,
    }
    plan.devices = by_owner
        .into_iter()
        .map(|(name, mut changes)| DevicePlan {
            rule: state.rules.get(&name).cloned(),
            name,
            targets: Vec::new(),
            backend: BTreeMap::new(),
            limit: None,
            auto: Vec::new(),
            timeout_ms: None,
            changes: {
                scheduler_first(&mut changes);
                changes
            },
        })
        .collect();
    Ok(plan)
}
