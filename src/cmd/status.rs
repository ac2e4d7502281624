//! `status`: per device, knob values, owning rule, per-CPU limits, idle
//! states and residency, and what works against blkqos.

use super::list::Knobs;
use super::{Ctx, doc};
use crate::conflicts;
use crate::discover::{self, Detail, Extent};
use crate::error::Error;
use crate::idle::{self, IdleState, Lease, format_cpus};
use crate::lease::published::{self, Published};
use crate::report::{Style, escape_control, table, warn_all};
use crate::snapshot::Snapshot;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

#[derive(Serialize)]
struct IdleStateOut<'a> {
    index: u32,
    name: &'a str,
    latency_us: u64,
    residency_us: u64,
    /// null where the kernel's value does not parse
    disabled: Option<bool>,
    usage: Option<u64>,
    time_us: Option<u64>,
}

impl<'a> From<&'a IdleState> for IdleStateOut<'a> {
    fn from(s: &'a IdleState) -> Self {
        IdleStateOut {
            index: s.index,
            name: &s.name,
            latency_us: s.latency_us,
            residency_us: s.residency_us,
            disabled: s.disabled,
            usage: s.usage,
            time_us: s.time_us,
        }
    }
}

#[derive(Serialize)]
struct CpuStatus<'a> {
    cpu: u32,
    /// The per-CPU PM QoS resume latency ("0" = no constraint, "n/a" = none tolerated).
    pm_qos_resume_latency_us: Option<String>,
    /// The live lease (`cpuidle/cpu_lat_lease_limit_us`); null on a kernel without
    /// it, or when it does not read as a lease (then a warning says so).
    lease: Option<LeaseOut>,
    /// The attribute is there but does not parse: `cpuN=?` in the table.
    #[serde(skip)]
    lease_bad: bool,
    /// What a running `blkqos lease` holds here; null when none runs or it
    /// does not serve this CPU.
    user_lease: Option<UserLeaseOut>,
    states: Vec<IdleStateOut<'a>>,
}

#[derive(Serialize)]
struct UserLeaseOut {
    mechanism: &'static str,
    pid: u32,
    detect: String,
    held: bool,
    limit_us: Option<u64>,
    timeout_ms: u64,
    disks: Vec<String>,
}

impl UserLeaseOut {
    fn of(p: &Published, cpu: u32) -> Option<UserLeaseOut> {
        let c = p.cpus.get(&cpu)?;
        Some(UserLeaseOut {
            mechanism: "blkqos lease",
            pid: p.pid,
            detect: p.detect.clone(),
            held: c.limit_us.is_some(),
            limit_us: c.limit_us,
            timeout_ms: c.timeout_ms,
            disks: c.disks.clone(),
        })
    }
}

#[derive(Serialize)]
struct LeaseOut {
    held: bool,
    /// The held lease's exit-latency limit; null while none holds.
    limit_us: Option<u64>,
    left_us: u64,
}

impl From<Lease> for LeaseOut {
    fn from(l: Lease) -> Self {
        match l {
            Lease::Free => LeaseOut {
                held: false,
                limit_us: None,
                left_us: 0,
            },
            Lease::Held { limit_us, left_us } => LeaseOut {
                held: true,
                limit_us: Some(limit_us),
                left_us,
            },
        }
    }
}

#[derive(Serialize)]
struct TargetStatus {
    name: String,
    abi: &'static str,
    #[serde(flatten)]
    knobs: Knobs,
    cpus: Vec<u32>,
}

#[derive(Serialize)]
struct DeviceStatus<'a> {
    name: String,
    rule: Option<String>,
    targets: Vec<TargetStatus>,
    cpus: Vec<CpuStatus<'a>>,
    /// What "auto" would choose for these CPUs.
    auto_limit_us: Option<u64>,
}

pub fn status(ctx: &Ctx, json: bool, out: &mut String) -> Result<u8, Error> {
    let inv = discover::scan(&ctx.sysfs, Extent::All, Detail::FULL)?;
    let (state, unreadable) = ctx.engine().read_state(
        "owning rules are not shown, and per-CPU limits blkqos set show as conflicts",
    )?;
    let mut idle_tables: BTreeMap<u32, Vec<IdleState>> = BTreeMap::new();
    for d in inv.visible() {
        for t in d.targets.iter().filter_map(|t| inv.get(t)) {
            for &c in &t.cpus {
                idle_tables
                    .entry(c)
                    .or_insert_with(|| idle::cpu_states(&ctx.sysfs, c));
            }
        }
    }
    let mut state = state;
    let mut warn = inv.warnings.clone();
    warn.extend(crate::engine::disown_replaced(&ctx.sysfs, &mut state));
    // each CPU's lease read once, so a bad one is warned about once however
    // many disks share the CPU
    let mut leases: BTreeMap<u32, Result<Option<Lease>, ()>> = BTreeMap::new();
    for &c in idle_tables.keys() {
        let lease = idle::cpu_lease(&ctx.sysfs, c).map_err(|e| warn.push(e.to_string()));
        leases.insert(c, lease);
    }
    // the state directory is root's: another user sees no user-space lease
    let user = published::running(ctx.state.dir());
    let seen = conflicts::LeaseSeen::of(ctx.state.dir(), unreadable.is_empty());
    let mut found = conflicts::in_sysfs(&ctx.sysfs, &state, seen);
    if ctx.sysfs.is_live() {
        let host = conflicts::on_host(Path::new("/etc"), Path::new("/usr/lib"), Path::new("/proc"));
        found.extend(host.found);
        if host.unchecked_pids > 0 {
            // as root the refusal is not a missing capability: a sandbox,
            // another PID namespace's process or an LSM policy
            let why = match crate::trust::euid() {
                0 => "refused even to root (a sandbox, another PID namespace or an LSM policy)",
                _ => "refused without CAP_SYS_PTRACE (another user's, or with more capabilities)",
            };
            let more = host.unchecked_pids.saturating_sub(host.unchecked.len());
            warn.push(format!(
                "conflict: could not check {} process(es) (pid {}{}) for /dev/cpu_dma_latency: \
                 their /proc/PID/fd is {why}; whether they hold it is unknown",
                host.unchecked_pids,
                host.unchecked.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
    }
    warn.extend(found.into_iter().map(|c| format!("conflict: {c}")));
    let snap = Snapshot::take(&ctx.sysfs, inv, state, None);
    let inv = &snap.inventory;
    let mut devices = Vec::new();
    for d in inv.visible() {
        let targets: Vec<TargetStatus> = (d.targets.iter())
            .filter_map(|t| inv.get(t))
            .map(|t| TargetStatus {
                name: t.name.clone(),
                abi: t.abi.describe(),
                knobs: Knobs::of(&snap, t),
                cpus: t.cpus.clone(),
            })
            .collect();
        let mut cpus: Vec<u32> = (targets.iter())
            .flat_map(|t| t.cpus.iter().copied())
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        let table_of = |c: u32| idle_tables.get(&c).map_or(&[][..], |t| t.as_slice());
        let cpu_status: Vec<CpuStatus> = (cpus.iter())
            .map(|&c| CpuStatus {
                cpu: c,
                pm_qos_resume_latency_us: ctx.sysfs.attr(&idle::cpu_resume_latency_path(c)),
                lease: leases
                    .get(&c)
                    .and_then(|l| l.ok().flatten())
                    .map(LeaseOut::from),
                lease_bad: leases.get(&c).is_some_and(Result::is_err),
                user_lease: user.as_ref().and_then(|p| UserLeaseOut::of(p, c)),
                states: table_of(c).iter().map(IdleStateOut::from).collect(),
            })
            .collect();
        devices.push(DeviceStatus {
            name: d.name.clone(),
            rule: snap.state.rules.get(&d.name).cloned(),
            auto_limit_us: idle::auto_limit(cpus.iter().map(|&c| table_of(c))).map(|(us, _)| us),
            targets,
            cpus: cpu_status,
        });
    }
    if json {
        out.push_str(&doc("status", false, false, &devices, &warn, &unreadable, None).render());
        return Ok(0);
    }
    for d in &devices {
        let _ = writeln!(
            out,
            "{} rule: {}  cpus: {}  auto: {}",
            ctx.style.bold(&escape_control(&d.name)),
            escape_control(d.rule.as_deref().unwrap_or("-")),
            if d.cpus.is_empty() {
                "-".into()
            } else {
                format_cpus(&d.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>())
            },
            d.auto_limit_us.map_or("-".into(), |u| format!("{u} us")),
        );
        let rows: Vec<Vec<String>> = (d.targets.iter())
            .map(|t| {
                vec![
                    format!("  {}", t.name),
                    t.abi.into(),
                    // the kernel's text (table() escapes it)
                    t.knobs.limit_text.as_deref().unwrap_or("-").into(),
                    t.knobs.timeout_text.as_deref().unwrap_or("-").into(),
                    format_cpus(&t.cpus),
                ]
            })
            .collect();
        out.push_str(&table(
            ctx.style,
            &["  QUEUE", "ABI", "LIMIT_US", "TIMEOUT_MS", "CPUS"],
            &rows,
        ));
        let per_cpu: Vec<String> = (d.cpus.iter())
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
        let leases: Vec<String> = (d.cpus.iter())
            .filter_map(|c| {
                if c.lease_bad {
                    return Some(format!("cpu{}=?", c.cpu));
                }
                let l = c.lease.as_ref()?;
                Some(match l.limit_us {
                    Some(us) => format!("cpu{}={us}us/{}us", c.cpu, l.left_us),
                    None => format!("cpu{}=-", c.cpu),
                })
            })
            .collect();
        if !leases.is_empty() {
            let _ = writeln!(out, "  lease (limit/left): {}", leases.join(" "));
        }
        let user_leases: Vec<String> = (d.cpus.iter())
            .filter_map(|c| {
                let l = c.user_lease.as_ref()?;
                Some(match l.limit_us {
                    Some(us) => format!("cpu{}={us}us/<={}ms", c.cpu, l.timeout_ms),
                    None => format!("cpu{}=-", c.cpu),
                })
            })
            .collect();
        if let Some(l) = d.cpus.iter().find_map(|c| c.user_lease.as_ref()) {
            let _ = writeln!(
                out,
                "  blkqos lease (pid {}, {}; limit/timeout): {}",
                l.pid,
                l.detect,
                user_leases.join(" ")
            );
        }
        out.push_str(&residency_table(ctx.style, &d.cpus));
        out.push('\n');
    }
    if !snap.state.saved.is_empty() {
        let _ = writeln!(
            out,
            "{} saved original(s) in {}",
            snap.state.saved.len(),
            ctx.state.file().display()
        );
    }
    warn_all(&warn);
    Ok(0)
}

/// Idle states of a CPU set with each state's share of idle time.
fn residency_table(style: Style, cpus: &[CpuStatus]) -> String {
    let Some(first) = cpus.iter().find(|c| !c.states.is_empty()) else {
        return "  no cpuidle states\n".into();
    };
    // shares of the times that parse; a state with one that does not is `?`
    let total: u64 = (cpus.iter())
        .flat_map(|c| c.states.iter())
        .filter_map(|s| s.time_us)
        .sum();
    let rows: Vec<Vec<String>> = (first.states.iter())
        .map(|s| {
            let time: Option<u64> = (cpus.iter())
                .flat_map(|c| c.states.iter().filter(|x| x.index == s.index))
                .map(|x| x.time_us)
                .sum();
            let share = match time {
                None => "?".to_string(),
                Some(_) if total == 0 => "0.0%".to_string(),
                Some(t) => format!("{:.1}%", 100.0 * t as f64 / total as f64),
            };
            vec![
                format!("  state{}", s.index),
                s.name.to_string(),
                s.latency_us.to_string(),
                s.residency_us.to_string(),
                match s.disabled {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "?".into(),
                },
                share,
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
