//! One function per command. Each appends what it prints to `out` and
//! returns the exit code; errors go back to `main`, which maps them.

use crate::abi::{Abi, knobs};
use crate::apply;
use crate::conflicts;
use crate::discover::{self, Detail, Device, Inventory};
use crate::error::{EXIT_FAILED, EXIT_USAGE, Error};
use crate::hotplug::{self, Action};
use crate::idle::{self, IdleState, format_cpus};
use crate::plan::{self, Change, DevicePlan, Plan, PlanError, Scope};
use crate::profile::Profile;
use crate::report::{Document, Style, human_size, table, warnings};
use crate::state::{Saved, StateDir};
use crate::sysfs::Sysfs;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::Path;

pub struct Ctx {
    pub sysfs: Sysfs,
    pub state: StateDir,
    pub style: Style,
}

fn scan(ctx: &Ctx) -> Inventory {
    discover::scan(&ctx.sysfs)
}

/// `--device` names go into sysfs paths: only kernel block device names.
fn check_names(only: &[String]) -> Result<(), Error> {
    match only.iter().find(|n| !hotplug::is_kernel_name(n)) {
        Some(bad) => Err(Error::Usage(format!(
            "--device {bad:?}: not a block device name"
        ))),
        None => Ok(()),
    }
}

/// Every disk, or (for `--device` and udev events) only the named ones and
/// the disks stacked with them: the plan for the named ones is the same.
fn scan_for(ctx: &Ctx, only: &[String], detail: Detail) -> Inventory {
    let inv = if only.is_empty() {
        discover::scan_with(&ctx.sysfs, detail)
    } else {
        discover::scan_around_with(&ctx.sysfs, only, detail)
    };
    log::debug!(
        "scanned {} disk(s) ({}) from {}",
        inv.devices.len(),
        inv.devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        inv.source
    );
    inv
}

/// The knob values of a request-based disk, as the kernel reports them.
#[derive(Serialize)]
struct Knobs {
    cpu_lat_limit_us: Option<String>,
    cpu_lat_timeout_ms: Option<String>,
}

fn knobs_of(sysfs: &Sysfs, d: &Device) -> Knobs {
    let read = |p: String| (d.abi != Abi::None).then(|| sysfs.attr(&p)).flatten();
    Knobs {
        cpu_lat_limit_us: read(knobs::limit_path(d.abi, &d.name)),
        cpu_lat_timeout_ms: read(knobs::timeout_path(d.abi, &d.name)),
    }
}

/// Entry point for `list`.
pub fn list(ctx: &Ctx, json: bool, out: &mut String) -> Result<u8, Error> {
    let inv = scan(ctx);
    #[derive(Serialize)]
    struct Row<'a> {
        #[serde(flatten)]
        device: &'a Device,
        #[serde(flatten)]
        knobs: Knobs,
    }
    let rows: Vec<Row> = inv
        .devices
        .iter()
        .map(|d| Row {
            device: d,
            knobs: knobs_of(&ctx.sysfs, d),
        })
        .collect();
    if json {
        out.push_str(&doc("list", false, false, &rows, &inv.warnings, None));
        return Ok(0);
    }
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let d = r.device;
            let lower = if d.targets == [d.name.clone()] {
                "-".into()
            } else {
                d.targets.join(",")
            };
            let note = match (&d.excluded, d.holders.is_empty()) {
                (Some(why), _) => format!("excluded: {why}"),
                (None, false) => format!("under {}", d.holders.join(",")),
                (None, true) => String::new(),
            };
            vec![
                d.name.clone(),
                d.kind.as_str().into(),
                d.transport.to_string(),
                dash(&d.model),
                human_size(d.size_bytes),
                d.abi.describe().into(),
                dash(&r.knobs.cpu_lat_limit_us),
                dash(&r.knobs.cpu_lat_timeout_ms),
                lower,
                note,
            ]
        })
        .collect();
    out.push_str(&table(
        ctx.style,
        &[
            "NAME",
            "KIND",
            "TRANSPORT",
            "MODEL",
            "SIZE",
            "ABI",
            "LIMIT_US",
            "TIMEOUT_MS",
            "QUEUES",
            "NOTE",
        ],
        &body,
    ));
    out.push_str(&warnings(ctx.style, &inv.warnings));
    Ok(0)
}

/// Entry point for `check`.
pub fn check(profile: &Path, out: &mut String) -> Result<u8, Error> {
    let p = Profile::load(profile)?;
    let _ = writeln!(
        out,
        "{}: valid ({} rule(s))",
        profile.display(),
        p.rules.len()
    );
    Ok(0)
}

fn build_plan(
    ctx: &Ctx,
    profile: &Profile,
    saved: &BTreeMap<String, Saved>,
    scope: &Scope,
) -> Result<Plan, Error> {
    // identities are read only when a rule matches on one
    let detail = Detail {
        identity: profile.rules.iter().any(|r| r.matcher.uses_identity()),
    };
    let mut scope = scope.clone();
    let inv = match &scope.removed {
        None => scan_for(ctx, &scope.devices, detail),
        Some(gone) => {
            // The devices that shared a saved value with the removed one are
            // re-planned without it; nothing links them to it any more.
            let sharing: Vec<String> = (saved.values())
                .filter(|s| s.owners.contains(gone))
                .flat_map(|s| s.owners.iter())
                .filter(|o| *o != gone)
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let inv = if sharing.is_empty() {
                Inventory::default()
            } else {
                scan_for(ctx, &sharing, detail)
            };
            scope.devices = sharing
                .into_iter()
                .filter(|d| inv.get(d).is_some())
                .collect();
            inv
        }
    };
    let mut plan = plan::build(profile, &inv, &ctx.sysfs, saved, &scope)?;
    let mut w = inv.warnings.clone();
    w.append(&mut plan.warnings);
    plan.warnings = w;
    Ok(plan)
}

/// A plan that writes nothing (dry run, verify, explain), with the saved
/// state read without the lock. An unreadable state (not root) only hides
/// the values that would go back to their originals, so it is a warning.
fn preview_plan(ctx: &Ctx, profile: &Profile, only: &[String]) -> Result<Plan, Error> {
    let (saved, note) = preview_saved(ctx);
    let mut plan = build_plan(ctx, profile, &saved, &Scope::devices(only))?;
    plan.warnings.extend(note);
    Ok(plan)
}

/// The saved originals for a plan that writes nothing, read without the
/// lock, and a warning when they cannot be read.
fn preview_saved(ctx: &Ctx) -> (BTreeMap<String, Saved>, Option<String>) {
    match ctx.state.read() {
        Ok(state) => (state.saved, None),
        Err(e) => (
            BTreeMap::new(),
            Some(format!(
                "saved state unreadable ({e}): values blkqos set for disks the profile no longer covers are not shown"
            )),
        ),
    }
}

/// Entry point for `apply`.
pub fn apply(
    ctx: &Ctx,
    profile: &Path,
    dry_run: bool,
    json: bool,
    only: &[String],
    out: &mut String,
) -> Result<u8, Error> {
    check_names(only)?;
    if dry_run {
        let plan = preview_plan(ctx, &Profile::load(profile)?, only)?;
        emit_plan(ctx, "apply", &plan, true, json, out);
        return Ok(0);
    }
    // Validated before taking the lock: a bad profile must not touch the state dir.
    let profile = Profile::load_for_writing(profile)?;
    match apply_profile(ctx, &profile, &Scope::devices(only)) {
        Ok(plan) => {
            emit_plan(ctx, "apply", &plan, false, json, out);
            Ok(0)
        }
        Err(failed) => {
            let Failed { error: e, mut plan } = *failed;
            if json && let Some(plan) = plan.as_mut() {
                for d in &mut plan.devices {
                    d.changes.clear();
                }
                out.push_str(&doc(
                    "apply",
                    false,
                    false,
                    &plan.devices,
                    &plan.warnings,
                    Some(e.to_string()),
                ));
            }
            Err(e)
        }
    }
}

/// An apply that failed, with the plan it was writing when it got that far.
struct Failed {
    error: Error,
    plan: Option<Plan>,
}

/// Plan and write under the lock; the plan comes back holding only the
/// changes made. On failure, the plan that was being written, if any.
fn apply_profile(ctx: &Ctx, profile: &Profile, scope: &Scope) -> Result<Plan, Box<Failed>> {
    let failed = |error: Error, plan| Box::new(Failed { error, plan });
    // Planned under the lock so the "before" values are the ones we replace.
    let mut locked = ctx.state.lock().map_err(|e| failed(e.into(), None))?;
    let mut plan =
        build_plan(ctx, profile, &locked.state.saved, scope).map_err(|e| failed(e, None))?;
    match apply::apply(&ctx.sysfs, &mut locked, &plan) {
        Ok(written) => {
            let done: HashSet<&str> = written.changes.iter().map(|w| w.path.as_str()).collect();
            for d in &mut plan.devices {
                d.changes.retain(|c| done.contains(c.path.as_str()));
            }
            plan.warnings.extend(
                written
                    .vanished
                    .iter()
                    .map(|p| format!("{p}: vanished before it was written; skipped")),
            );
            plan.forgotten = written.forgotten;
            Ok(plan)
        }
        Err(e) => Err(failed(e.into(), Some(plan))),
    }
}

fn emit_plan(ctx: &Ctx, command: &str, plan: &Plan, dry_run: bool, json: bool, out: &mut String) {
    if json {
        out.push_str(&doc(
            command,
            !plan.is_empty(),
            dry_run,
            &plan.devices,
            &plan.warnings,
            None,
        ));
        return;
    }
    out.push_str(&plan_table(ctx.style, plan));
    let n = plan.changes().count();
    let verb = match (dry_run, n) {
        (_, 0) => "nothing to change".to_string(),
        (true, _) => format!("{n} change(s) would be made (dry run; nothing written)"),
        (false, _) => format!("{n} change(s) made"),
    };
    let _ = writeln!(out, "{verb}");
    out.push_str(&warnings(ctx.style, &plan.warnings));
}

fn plan_table(style: Style, plan: &Plan) -> String {
    let mut rows = Vec::new();
    let mut untouched = Vec::new();
    for d in &plan.devices {
        let Some(rule) = d.rule.clone() else {
            untouched.push(d.name.as_str());
            continue;
        };
        let limit = d.limit.clone().unwrap_or_else(|| "-".into());
        if d.changes.is_empty() {
            rows.push(vec![
                d.name.clone(),
                rule.clone(),
                limit.clone(),
                style.dim("(no change)"),
                String::new(),
                String::new(),
            ]);
        }
        for c in &d.changes {
            rows.push(vec![
                d.name.clone(),
                rule.clone(),
                limit.clone(),
                c.path.clone(),
                c.before.clone(),
                c.after.clone(),
            ]);
        }
    }
    let mut out = table(
        style,
        &["DEVICE", "RULE", "LIMIT", "PATH", "BEFORE", "AFTER"],
        &rows,
    );
    if !untouched.is_empty() {
        out.push_str(&format!(
            "no rule matches (untouched): {}\n",
            untouched.join(", ")
        ));
    }
    out
}

fn doc<D: Serialize>(
    command: &str,
    changed: bool,
    dry_run: bool,
    devices: D,
    warnings: &[String],
    error: Option<String>,
) -> String {
    Document {
        schema: crate::report::JSON_SCHEMA,
        command,
        changed,
        dry_run,
        devices,
        warnings,
        error,
    }
    .render()
}

/// Entry point for `verify`.
pub fn verify(ctx: &Ctx, profile: &Path, json: bool, out: &mut String) -> Result<u8, Error> {
    let plan = preview_plan(ctx, &Profile::load(profile)?, &[])?;
    let ok = plan.is_empty();
    if json {
        #[derive(Serialize)]
        struct V<'a> {
            #[serde(flatten)]
            d: &'a DevicePlan,
            ok: bool,
        }
        let devices: Vec<V> = plan
            .devices
            .iter()
            .map(|d| V {
                d,
                ok: d.changes.is_empty(),
            })
            .collect();
        out.push_str(&doc("verify", false, false, &devices, &plan.warnings, None));
    } else {
        let rows: Vec<Vec<String>> = plan
            .changes()
            .map(|c| vec![c.path.clone(), c.before.clone(), c.after.clone()])
            .collect();
        if ok {
            let _ = writeln!(
                out,
                "{} live values match {}",
                ctx.style.good("ok:"),
                profile.display()
            );
        } else {
            out.push_str(&table(ctx.style, &["PATH", "LIVE", "WANTED"], &rows));
            let _ = writeln!(
                out,
                "{} {} value(s) differ from {}",
                ctx.style.bad("mismatch:"),
                rows.len(),
                profile.display()
            );
        }
        out.push_str(&warnings(ctx.style, &plan.warnings));
    }
    Ok(if ok { 0 } else { EXIT_FAILED })
}

/// What `restore` put back for one device.
#[derive(Serialize)]
struct RestoredDevice {
    name: String,
    rule: Option<String>,
    changes: Vec<Change>,
}

/// Put back the saved originals (of `only`, all when empty), per device.
fn restore_devices(
    ctx: &Ctx,
    only: &[String],
    dry_run: bool,
) -> Result<(Vec<RestoredDevice>, apply::Restored), Error> {
    // Restoring everything needs no discovery: the state names every path.
    let inv = if only.is_empty() {
        Inventory::default()
    } else {
        scan_for(ctx, only, Detail { identity: false })
    };
    let (rules, mut restored) = if dry_run {
        let state = ctx.state.read()?;
        let (_, planned) = apply::plan_restore(&ctx.sysfs, &state, &inv, only)?;
        (state.rules, planned)
    } else {
        let mut locked = ctx.state.lock()?;
        let rules = locked.state.rules.clone();
        (rules, apply::restore(&ctx.sysfs, &mut locked, &inv, only)?)
    };
    let mut by_device: BTreeMap<String, Vec<Change>> = BTreeMap::new();
    for c in std::mem::take(&mut restored.changes) {
        let owner = c.owners.iter().next().cloned().unwrap_or_default();
        by_device.entry(owner).or_default().push(c);
    }
    let devices = by_device
        .into_iter()
        .map(|(name, changes)| RestoredDevice {
            rule: rules.get(&name).cloned(),
            name,
            changes,
        })
        .collect();
    Ok((devices, restored))
}

/// Entry point for `restore`.
pub fn restore(
    ctx: &Ctx,
    dry_run: bool,
    json: bool,
    only: &[String],
    out: &mut String,
) -> Result<u8, Error> {
    check_names(only)?;
    let (devices, restored) = restore_devices(ctx, only, dry_run)?;
    // Forgetting saved values that already match changes the state file.
    let changed = !devices.is_empty() || restored.forgotten > 0;
    if json {
        out.push_str(&doc(
            "restore",
            changed,
            dry_run,
            &devices,
            &restored.warnings,
            None,
        ));
    } else {
        let rows: Vec<Vec<String>> = devices
            .iter()
            .flat_map(|d| {
                d.changes.iter().map(|c| {
                    vec![
                        d.name.clone(),
                        c.path.clone(),
                        c.before.clone(),
                        c.after.clone(),
                    ]
                })
            })
            .collect();
        if rows.is_empty() {
            let _ = writeln!(out, "nothing to restore");
        } else {
            let head = if dry_run { "WOULD RESTORE" } else { "RESTORED" };
            out.push_str(&table(
                ctx.style,
                &["DEVICE", "PATH", "BEFORE", head],
                &rows,
            ));
        }
        out.push_str(&warnings(ctx.style, &restored.warnings));
    }
    Ok(0)
}

#[derive(Serialize)]
struct CpuStatus {
    cpu: u32,
    /// The per-CPU PM QoS resume latency ("0" = no constraint, "n/a" = none tolerated).
    pm_qos_resume_latency_us: Option<String>,
    states: Vec<IdleState>,
}

#[derive(Serialize)]
struct TargetStatus {
    name: String,
    abi: Abi,
    #[serde(flatten)]
    knobs: Knobs,
    cpus: Vec<u32>,
}

#[derive(Serialize)]
struct DeviceStatus {
    name: String,
    rule: Option<String>,
    targets: Vec<TargetStatus>,
    cpus: Vec<CpuStatus>,
    /// What "auto" would choose for these CPUs.
    auto_limit_us: Option<u64>,
}

/// Entry point for `status`.
pub fn status(ctx: &Ctx, json: bool, out: &mut String) -> Result<u8, Error> {
    let inv = scan(ctx);
    let state = ctx.state.read()?;
    let mut cpu_cache: BTreeMap<u32, Vec<IdleState>> = BTreeMap::new();
    let mut devices = Vec::new();
    for d in inv.visible() {
        let targets: Vec<TargetStatus> = d
            .targets
            .iter()
            .filter_map(|t| inv.get(t))
            .map(|t| TargetStatus {
                name: t.name.clone(),
                abi: t.abi,
                knobs: knobs_of(&ctx.sysfs, t),
                cpus: t.cpus.clone(),
            })
            .collect();
        let mut cpus: Vec<u32> = targets
            .iter()
            .flat_map(|t| t.cpus.iter().copied())
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        let cpu_status: Vec<CpuStatus> = cpus
            .iter()
            .map(|&c| CpuStatus {
                cpu: c,
                pm_qos_resume_latency_us: ctx.sysfs.attr(&idle::cpu_resume_latency_path(c)),
                states: cpu_cache
                    .entry(c)
                    .or_insert_with(|| idle::cpu_states(&ctx.sysfs, c))
                    .clone(),
            })
            .collect();
        devices.push(DeviceStatus {
            name: d.name.clone(),
            rule: state.rules.get(&d.name).cloned(),
            auto_limit_us: plan::auto_limit(&ctx.sysfs, &cpus).map(|(us, _)| us),
            targets,
            cpus: cpu_status,
        });
    }
    let mut warn = inv.warnings.clone();
    let mut found = conflicts::in_sysfs(&ctx.sysfs, &state);
    if ctx.sysfs.is_live() {
        found.extend(conflicts::on_host(
            Path::new("/etc"),
            Path::new("/usr/lib"),
            Path::new("/proc"),
        ));
    }
    warn.extend(found.into_iter().map(|c| format!("conflict: {c}")));
    if json {
        out.push_str(&doc("status", false, false, &devices, &warn, None));
        return Ok(0);
    }
    for d in &devices {
        let _ = writeln!(
            out,
            "{} rule: {}  cpus: {}  auto: {}",
            ctx.style.bold(&d.name),
            d.rule.as_deref().unwrap_or("-"),
            if d.cpus.is_empty() {
                "-".into()
            } else {
                format_cpus(&d.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>())
            },
            d.auto_limit_us.map_or("-".into(), |u| format!("{u} us")),
        );
        let rows: Vec<Vec<String>> = d
            .targets
            .iter()
            .map(|t| {
                vec![
                    format!("  {}", t.name),
                    t.abi.describe().into(),
                    t.knobs
                        .cpu_lat_limit_us
                        .clone()
                        .unwrap_or_else(|| "-".into()),
                    t.knobs
                        .cpu_lat_timeout_ms
                        .clone()
                        .unwrap_or_else(|| "-".into()),
                    format_cpus(&t.cpus),
                ]
            })
            .collect();
        out.push_str(&table(
            ctx.style,
            &["  QUEUE", "ABI", "LIMIT_US", "TIMEOUT_MS", "CPUS"],
            &rows,
        ));
        let per_cpu: Vec<String> = d
            .cpus
            .iter()
            .map(|c| {
                format!(
                    "cpu{}={}",
                    c.cpu,
                    c.pm_qos_resume_latency_us.as_deref().unwrap_or("-")
                )
            })
            .collect();
        if !per_cpu.is_empty() {
            let _ = writeln!(out, "  pm_qos_resume_latency_us: {}", per_cpu.join(" "));
        }
        out.push_str(&residency_table(ctx.style, &d.cpus));
        out.push('\n');
    }
    if !state.saved.is_empty() {
        let _ = writeln!(
            out,
            "{} saved original(s) in {}",
            state.saved.len(),
            ctx.state.file().display()
        );
    }
    out.push_str(&warnings(ctx.style, &warn));
    Ok(0)
}

/// Idle states of a CPU set with each state's share of idle time.
fn residency_table(style: Style, cpus: &[CpuStatus]) -> String {
    let Some(first) = cpus.iter().find(|c| !c.states.is_empty()) else {
        return "  no cpuidle states\n".into();
    };
    let total: u64 = cpus
        .iter()
        .flat_map(|c| c.states.iter())
        .map(|s| s.time_us)
        .sum();
    let rows: Vec<Vec<String>> = first
        .states
        .iter()
        .map(|s| {
            let time: u64 = cpus
                .iter()
                .flat_map(|c| c.states.iter().filter(|x| x.index == s.index))
                .map(|x| x.time_us)
                .sum();
            let share = if total == 0 {
                0.0
            } else {
                100.0 * time as f64 / total as f64
            };
            vec![
                format!("  state{}", s.index),
                s.name.clone(),
                s.latency_us.to_string(),
                s.residency_us.to_string(),
                if s.disabled {
                    "yes".into()
                } else {
                    "no".into()
                },
                format!("{share:.1}%"),
            ]
        })
        .collect();
    table(
        style,
        &[
            "  STATE",
            "NAME",
            "EXIT_US",
            "RESIDENCY_US",
            "DISABLED",
            "IDLE_TIME",
        ],
        &rows,
    )
}

/// Entry point for `explain`.
pub fn explain(
    ctx: &Ctx,
    profile_path: &Path,
    device: &str,
    out: &mut String,
) -> Result<u8, Error> {
    let profile = Profile::load(profile_path)?;
    let inv = scan(ctx);
    let d = inv
        .get(device)
        .ok_or_else(|| Error::Plan(crate::plan::PlanError::NoSuchDevice(device.to_string())))?;
    let st = ctx.style;
    let _ = writeln!(
        out,
        "{} {} ({}, transport {}, model {}, serial {}, wwid {}, driver {}, pci {})",
        st.bold("device"),
        d.name,
        d.kind.as_str(),
        d.transport,
        d.model.as_deref().unwrap_or("-"),
        d.serial.as_deref().unwrap_or("-"),
        d.wwid.as_deref().unwrap_or("-"),
        d.driver.as_deref().unwrap_or("-"),
        if d.pci.is_empty() {
            "-".into()
        } else {
            d.pci.join(",")
        },
    );
    if let Some(why) = &d.excluded {
        let _ = writeln!(out, "not matched by any rule: excluded ({why})");
        return Ok(0);
    }
    let mut owner = None;
    for rule in &profile.rules {
        if owner.is_some() {
            let _ = writeln!(
                out,
                "rule {:?}: {}",
                rule.name,
                st.dim("not evaluated (an earlier rule owns the device)")
            );
            continue;
        }
        let checks = rule.matcher.checks(d);
        let ok = checks.iter().all(|c| c.ok);
        let _ = writeln!(
            out,
            "rule {:?}: {}",
            rule.name,
            if ok {
                st.good("MATCH")
            } else {
                st.bad("no match")
            }
        );
        if checks.is_empty() {
            let _ = writeln!(out, "    (no match keys: matches every device)");
        }
        for c in checks {
            let _ = writeln!(
                out,
                "    {} {}: {}",
                if c.ok { "+" } else { "-" },
                c.key,
                c.detail
            );
        }
        if ok {
            owner = Some(rule);
        }
    }
    let targets: Vec<String> = d
        .targets
        .iter()
        .map(|t| {
            let abi = inv.get(t).map_or(Abi::None, |x| x.abi);
            let cpus = inv.get(t).map(|x| format_cpus(&x.cpus)).unwrap_or_default();
            format!(
                "{t} (knobs: {}, cpus {})",
                abi.describe(),
                if cpus.is_empty() { "-" } else { &cpus }
            )
        })
        .collect();
    let _ = writeln!(out, "resolves to: {}", targets.join(", "));
    let Some(rule) = owner else {
        let _ = writeln!(out, "no rule matches: the device is left untouched");
        return Ok(0);
    };
    let (saved, _) = preview_saved(ctx);
    let plan = plan::build(
        &profile,
        &inv,
        &ctx.sysfs,
        &saved,
        &Scope::devices(std::slice::from_ref(&d.name)),
    )?;
    if let Some(dp) = plan.devices.iter().find(|p| p.name == d.name) {
        let eff = profile.effective(rule);
        let _ = writeln!(
            out,
            "owned by rule {:?}: limit {}, timeout {}",
            rule.name,
            dp.limit.as_deref().unwrap_or("not managed"),
            dp.timeout_ms.map_or("-".to_string(), |t| format!("{t} ms")),
        );
        for (t, b) in &dp.backend {
            let _ = writeln!(out, "    {t}: {b}");
        }
        for a in &dp.auto {
            let _ = writeln!(out, "    auto on {a}");
        }
        if eff.limit.is_none() {
            let _ = writeln!(
                out,
                "    (the rule sets no limit: only its queue attributes are managed)"
            );
        }
    }
    let changes: Vec<&Change> = plan.changes().collect();
    if changes.is_empty() {
        let _ = writeln!(out, "live values already match");
    }
    for c in changes {
        let _ = writeln!(out, "would write {}: {} -> {}", c.path, c.before, c.after);
    }
    out.push_str(&warnings(st, &plan.warnings));
    Ok(0)
}

/// Entry point for `udev`: one event, one disk. It reports through the log
/// (syslog when udev runs it), one line per device it changed.
pub fn udev(
    ctx: &Ctx,
    action: Option<&str>,
    devpath: Option<&str>,
    profile: &Path,
) -> Result<u8, Error> {
    let event = match hotplug::parse(&ctx.sysfs, action, devpath) {
        Ok(Some(event)) => event,
        Ok(None) => {
            log::debug!("ignored: partitions are tuned through their disk");
            return Ok(0);
        }
        Err(e) => {
            log::error!("refused event: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let name = &event.name;
    let scope = match event.action {
        Action::Add | Action::Change => Scope::devices(std::slice::from_ref(name)),
        Action::Remove => Scope {
            devices: Vec::new(),
            removed: Some(name.clone()),
        },
    };
    let result = Profile::load_for_writing(profile)
        .map_err(Error::from)
        .and_then(|p| apply_profile(ctx, &p, &scope).map_err(|f| f.error))
        .map(|plan| match event.action {
            Action::Add | Action::Change => log_plan(&plan),
            Action::Remove => log_removal(name, &plan),
        });
    match result {
        Ok(()) => Ok(0),
        // A disk that is not a candidate (empty, hidden multipath path, RAM disk).
        Err(Error::Plan(PlanError::NoSuchDevice(_))) => {
            log::debug!("{name}: not a disk blkqos manages; ignored");
            Ok(0)
        }
        Err(e) => {
            log::error!("{name}: {} failed: {e}", event.action.as_str());
            Ok(e.exit_code())
        }
    }
}

/// Entry point for `coldplug`: `apply` reporting like the udev path.
pub fn coldplug(ctx: &Ctx, profile: &Path) -> Result<u8, Error> {
    let profile = Profile::load_for_writing(profile)?;
    let plan = apply_profile(ctx, &profile, &Scope::all()).map_err(|f| f.error)?;
    log_plan(&plan);
    log::info!(
        "coldplug: {} disk(s), {} matched a rule, {} value(s) written",
        plan.devices.len(),
        plan.devices.iter().filter(|d| d.rule.is_some()).count(),
        plan.changes().count()
    );
    Ok(0)
}

/// What re-planning without a removed device wrote: originals put back,
/// values the devices still there want instead.
fn log_removal(name: &str, plan: &Plan) {
    for c in plan.changes() {
        if plan.released.contains(&c.path) {
            log::info!("{name}: removed; put back {} = {}", c.path, c.after);
        } else {
            log::info!("{name}: removed; {} {} -> {}", c.path, c.before, c.after);
        }
    }
    // Its attributes left with it: nothing to report but the count.
    for w in &plan.warnings {
        log::debug!("{w}");
    }
    if plan.forgotten > 0 {
        log::info!("{name}: removed; forgot {} saved value(s)", plan.forgotten);
    }
}

/// One line per device: what was written, under which rule.
fn log_plan(plan: &Plan) {
    for d in &plan.devices {
        let rule = match &d.rule {
            Some(r) => format!("rule {r:?}"),
            None => "no rule".to_string(),
        };
        if d.changes.is_empty() {
            log::debug!("{}: {rule}: already as wanted", d.name);
            continue;
        }
        let own = format!("block/{}/", d.name);
        let writes: Vec<String> = d
            .changes
            .iter()
            .map(|c| {
                let path = c.path.strip_prefix(&own).unwrap_or(&c.path);
                format!("{path} {} -> {}", c.before, c.after)
            })
            .collect();
        log::info!("{}: {rule}: {}", d.name, writes.join(", "));
    }
    for w in &plan.warnings {
        log::warn!("{w}");
    }
}
