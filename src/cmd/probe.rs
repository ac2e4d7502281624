//! `probe`: what the lease buys on this machine, measured here. Reads
//! only; every value it writes is saved before and put back after each
//! configuration, on SIGINT and SIGTERM, and by `restore` (or the next
//! lease) after a SIGKILL.

use super::{Ctx, doc};
use crate::discover::{self, Detail, Extent};
use crate::error::Error;
use crate::idle;
use crate::probe::hold::{self, Holder};
use crate::probe::machine::{self, Machine};
use crate::probe::sample::{Config, Run, TableState};
use crate::probe::target::{self, Target};
use crate::probe::workload::{self, ReadError, Reader};
use crate::probe::{Analysis, analyze, render_table, rule_snippet};
use crate::probe::{ProbeError, plot};
use crate::profile::{Profile, owning_rule};
use serde::Serialize;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Rounds at the least, whatever the duration.
pub const MIN_ROUNDS: u32 = 5;
/// Each configuration's runs per round: the A/A pair.
const REPS: u32 = 2;
/// Reads before each run's measurement, not kept.
const WARM: Duration = Duration::from_millis(100);

pub struct Options<'a> {
    pub devices: &'a [String],
    pub profile: &'a Path,
    pub duration: Duration,
    /// `None` stands for "auto".
    pub limits: &'a [Option<u64>],
    pub timeout_ms: u64,
    pub json: bool,
    pub plot: Option<&'a Path>,
    /// The CPU the reads are issued from; `None`: the last serving CPU.
    pub cpu: Option<u32>,
}

/// One disk's probe, as `--json` prints it.
#[derive(Serialize)]
struct Probed {
    name: String,
    path: String,
    kernel_knobs: bool,
    cpus: Vec<u32>,
    /// The serving CPU the reads are issued from.
    reader_cpu: Option<u32>,
    machine: Machine,
    table: Vec<TableState>,
    configs: Vec<Config>,
    rounds: u32,
    run_secs: f64,
    duration_secs: f64,
    cpu_secs: f64,
    /// Why nothing was measured, where a limit cannot matter.
    skipped: Option<String>,
    analysis: Option<Analysis>,
    /// The rule to paste into the profile, where there is one.
    rule: Option<String>,
}

pub fn probe(ctx: &Ctx, opts: &Options, out: &mut String) -> Result<u8, Error> {
    if crate::trust::euid() != 0 {
        return Err(ProbeError::Refused(
            "blkqos probe needs root: it writes the serving CPUs' resume latency (or the disk's queue knobs), runs blkqos lease, and reads the disk with O_DIRECT".to_string(),
        )
        .into());
    }
    ctx.sysfs.check_tree()?;
    let Some(_probe_lock) = ctx.state.try_probe_lock()? else {
        return Err(ProbeError::Refused(format!(
            "another blkqos probe is running on {}: each would take the other's holds for what it found",
            ctx.state.dir().display()
        ))
        .into());
    };
    // a plot that cannot be written is said before the measurement, not
    // after it (its content comes at the end)
    let mut plot_file = match opts.plot {
        Some(file) => Some(PlotFile::check(file)?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| Error::Usage(format!("cannot catch signals: {e}")))?;
    }
    let paths = paths(ctx, opts)?;
    let mut probed = Vec::new();
    let mut warnings = Vec::new();
    for path in &paths {
        let t = target::open(path, |ma, mi| target::disk_of(&ctx.sysfs, ma, mi))
            .map_err(|e| ProbeError::Refused(e.to_string()))?;
        probed.push(probe_one(ctx, opts, &t, &stop, &mut warnings)?);
    }
    let measured = probed.iter().find(|p| p.analysis.is_some());
    if let (Some(file), None) = (&plot_file, measured) {
        warnings.push(format!(
            "--plot {}: not written: no device was measured",
            file.path.display()
        ));
    }
    if opts.json {
        let d = doc("probe", false, false, &probed, &warnings, &[], None);
        out.push_str(&d.render());
    } else {
        for p in &probed {
            human(p, out);
        }
        // the JSON document carries them; a reader of the text needs
        // them as much (a noisy machine, runs the lease did not hold)
        for w in &warnings {
            log::warn!("{w}");
        }
    }
    if let (Some(file), Some(p)) = (&mut plot_file, measured)
        && let Some(a) = &p.analysis
    {
        let title = format!("blkqos probe: {} ({})", p.name, p.path);
        file.write(&plot::svg(a, &title))?;
    }
    Ok(0)
}

/// The plot's file, checked before the measurement (a path that cannot
/// be written is said before a minute is spent); one made for the check
/// and never written is removed again.
struct PlotFile {
    path: PathBuf,
    made: bool,
    written: bool,
}

impl PlotFile {
    fn check(path: &Path) -> Result<PlotFile, ProbeError> {
        let made = !path.exists();
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| ProbeError::Refused(format!("--plot {}: {e}", path.display())))?;
        Ok(PlotFile {
            path: path.to_path_buf(),
            made,
            written: false,
        })
    }

    fn write(&mut self, svg: &str) -> Result<(), ProbeError> {
        std::fs::write(&self.path, svg)
            .map_err(|e| ProbeError::Failed(format!("--plot {}: {e}", self.path.display())))?;
        self.written = true;
        Ok(())
    }
}

impl Drop for PlotFile {
    fn drop(&mut self) {
        if self.made && !self.written {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What to read: the named devices or files, else each disk the
/// profile's rules match (its /dev node).
fn paths(ctx: &Ctx, opts: &Options) -> Result<Vec<PathBuf>, Error> {
    if !opts.devices.is_empty() {
        return Ok((opts.devices.iter())
            .map(|d| match d.starts_with('/') {
                true => PathBuf::from(d),
                false => PathBuf::from(format!("/dev/{}", d.replace('!', "/"))),
            })
            .collect());
    }
    let profile = Profile::load_trusted(opts.profile)?;
    let inv = discover::scan(&ctx.sysfs, Extent::All, Detail::for_profile(Some(&profile)))?;
    let found: Vec<PathBuf> = (inv.visible())
        .filter(|d| owning_rule(&profile, d).is_some())
        .map(|d| PathBuf::from(format!("/dev/{}", d.name.replace('!', "/"))))
        .collect();
    if found.is_empty() {
        return Err(ProbeError::Refused(format!(
            "no disk matches a rule of {}: name a disk or a large file on it (blkqos probe /dev/vda, blkqos probe /var/tmp/probe.dat)",
            opts.profile.display()
        ))
        .into());
    }
    Ok(found)
}

fn probe_one(
    ctx: &Ctx,
    opts: &Options,
    t: &Target,
    stop: &AtomicBool,
    warnings: &mut Vec<String>,
) -> Result<Probed, Error> {
    let inv = discover::scan(
        &ctx.sysfs,
        Extent::Around(std::slice::from_ref(&t.disk)),
        Detail::for_profile(None),
    )?;
    let dev = inv
        .get(&t.disk)
        .ok_or_else(|| ProbeError::Refused(format!("{}: no such disk in sysfs", t.disk)))?;
    let mut queues = Vec::new();
    let mut cpus: Vec<u32> = Vec::new();
    for q in &dev.targets {
        if let Some(qd) = inv.get(q) {
            queues.push((qd.name.clone(), qd.abi));
            cpus.extend(&qd.cpus);
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    let knob_paths = hold::knob_paths(&queues);
    let kernel_knobs = !knob_paths.is_empty();
    let machine = Machine::read(&ctx.sysfs);
    let table = machine::table(&ctx.sysfs, &cpus);
    let mut probed = Probed {
        name: t.disk.clone(),
        path: t.path.display().to_string(),
        kernel_knobs,
        cpus: cpus.clone(),
        reader_cpu: None,
        machine,
        table,
        configs: Vec::new(),
        rounds: 0,
        run_secs: 0.0,
        duration_secs: 0.0,
        cpu_secs: 0.0,
        skipped: None,
        analysis: None,
        rule: None,
    };
    if cpus.is_empty() {
        probed.skipped = Some(format!(
            "{}: no CPUs serve it (a bio-based device): nothing to hold",
            t.disk
        ));
        return Ok(probed);
    }
    if let Some(why) = probed.machine.nothing_to_hold(&probed.table) {
        probed.skipped = Some(format!("nothing to buy here: {why}"));
        return Ok(probed);
    }
    let reader_cpu = match opts.cpu {
        Some(c) if !cpus.contains(&c) => {
            return Err(ProbeError::Refused(format!(
                "--cpu {c}: not a CPU that serves {} (those are {})",
                t.disk,
                idle::format_cpus(&cpus)
            ))
            .into());
        }
        Some(c) => c,
        // CPU 0 takes most of the machine's housekeeping
        None => cpus[cpus.len() - 1],
    };
    probed.reader_cpu = Some(reader_cpu);
    let pin = Pin::new(reader_cpu)?;
    refuse_holders(ctx, &cpus, &t.disk, &knob_paths)?;
    probed.configs = configs(ctx, opts, &probed.table, &cpus)?;
    let n = probed.configs.len() as u32 * REPS;
    let secs = opts.duration.as_secs_f64();
    let run_secs = (secs / f64::from(MIN_ROUNDS * n)).clamp(0.2, 2.0);
    // a run costs its own time and about its warm-up and the lease's start
    let rounds = ((secs / (f64::from(n) * (run_secs + 0.2))) as u32).max(MIN_ROUNDS);
    probed.rounds = rounds;
    probed.run_secs = run_secs;
    let mut holder = match kernel_knobs {
        true => Holder::knobs(&ctx.sysfs, &ctx.state, &t.disk, &knob_paths)?,
        false => Holder::lease(&ctx.sysfs, &ctx.state, &t.disk, &cpus)?,
    };
    let started = Instant::now();
    let cpu_before = own_cpu_secs();
    let mut rng = fastrand::Rng::with_seed(0x5eed_b10c);
    let mut reader = Reader::new(t, rng.u64(..));
    let mut runs = Vec::new();
    // per configuration: runs whose lease was never seen holding
    let mut unheld = vec![0u32; probed.configs.len()];
    let mut progress = Progress::new(u64::from(rounds * n), opts.json);
    let measured = (|| -> Result<(), Error> {
        for round in 0..rounds {
            let mut order: Vec<(usize, u32)> = (0..probed.configs.len())
                .flat_map(|c| (0..REPS).map(move |r| (c, r)))
                .collect();
            rng.shuffle(&mut order);
            for (c, rep) in order {
                let config = &probed.configs[c];
                // the lease child runs where the scheduler puts it, the
                // reads on the one CPU: as a database thread and its
                // disk's interrupt would
                pin.release()?;
                let held = holder.begin(config, || {
                    pin.hold()?;
                    reader.warm(WARM, stop).map_err(read_error)
                });
                let run = held.and_then(|held| {
                    unheld[c] += u32::from(!held);
                    measure(
                        &ctx.sysfs,
                        &mut reader,
                        &cpus,
                        probed.table.len(),
                        run_secs,
                        stop,
                    )
                    .map_err(read_error)
                });
                // put back before anything else, whatever happened
                let ended = holder.end();
                let mut run = run?;
                ended?;
                run.config = c;
                run.round = round;
                run.rep = rep;
                runs.push(run);
                progress.step(started.elapsed(), &probed.configs[c].label());
            }
        }
        Ok(())
    })();
    progress.done();
    let unpinned = pin.release();
    let finished = holder.finish(&ctx.state, &t.disk);
    unpinned?;
    measured?;
    finished?;
    for (c, n) in unheld.iter().enumerate().filter(|(_, n)| **n > 0) {
        warnings.push(format!(
            "{}: {}: blkqos lease held none of the CPUs in {n} of its {} runs within 5 s of reads (without the block tracepoint it sees I/O only every second): those runs are measured as they are",
            t.disk,
            probed.configs[c].label(),
            rounds * REPS
        ));
    }
    probed.duration_secs = started.elapsed().as_secs_f64();
    probed.cpu_secs = own_cpu_secs() - cpu_before;
    let a = analyze(&probed.configs, &probed.table, &runs);
    probed.rule = rule_snippet(&t.disk, &a.answer, opts.timeout_ms);
    if a.noisy {
        warnings.push(format!(
            "{}: the same configuration measured twice differed by up to {:.0} % in p99: differences below that are not called",
            t.disk,
            a.spread.qd1_p99_pct.unwrap_or(0.0)
        ));
    }
    probed.analysis = Some(a);
    Ok(probed)
}

fn read_error(e: ReadError) -> ProbeError {
    match e {
        ReadError::Stopped => {
            ProbeError::Failed("stopped by a signal; every value it wrote is back".to_string())
        }
        e => ProbeError::Failed(e.to_string()),
    }
}

/// One run: the QD1 phase, then the bursts, each with the serving CPUs'
/// idle residency.
fn measure(
    sysfs: &crate::sysfs::Sysfs,
    reader: &mut Reader,
    cpus: &[u32],
    states: usize,
    run_secs: f64,
    stop: &AtomicBool,
) -> Result<Run, ReadError> {
    let half = Duration::from_secs_f64(run_secs / 2.0);
    let before = workload::idle_time(sysfs, cpus, states);
    let (qd1_ns, qd1_secs) = reader.qd1(half, stop)?;
    let mid = workload::idle_time(sysfs, cpus, states);
    let t = Instant::now();
    let (first_ns, rest_ns) = reader.bursts(half, stop)?;
    let burst_secs = t.elapsed().as_secs_f64();
    let after = workload::idle_time(sysfs, cpus, states);
    Ok(Run {
        config: 0,
        round: 0,
        rep: 0,
        qd1_residency: workload::residency(&before, &mid, cpus.len(), qd1_secs),
        burst_residency: workload::residency(&mid, &after, cpus.len(), burst_secs),
        qd1_ns,
        qd1_secs,
        first_ns,
        rest_ns,
    })
}

/// A running lease, apply's static fallback on the same CPUs, or queue
/// knobs someone holds would be measured instead of the configuration,
/// and would see their values changed under them: the probe does not
/// start, and says how to stop what holds.
fn refuse_holders(ctx: &Ctx, cpus: &[u32], disk: &str, knob_paths: &[String]) -> Result<(), Error> {
    let dir = ctx.state.checked_dir()?;
    if let Some(p) = crate::lease::published::running(&dir) {
        let held: Vec<u32> = cpus
            .iter()
            .copied()
            .filter(|c| p.cpus.contains_key(c))
            .collect();
        let what = match held.is_empty() {
            true => "runs on this state directory (one lease at a time)".to_string(),
            false => format!("holds CPUs {} of {disk}", idle::format_cpus(&held)),
        };
        return Err(ProbeError::Refused(format!(
            "blkqos lease (pid {}) {what}: stop it first (systemctl stop blkqos-lease, or kill {}); it puts its CPUs back",
            p.pid, p.pid
        ))
        .into());
    }
    let state = ctx.state.read()?;
    let fixed: Vec<&str> = (state.saved.keys())
        .filter(|p| crate::lease::cpuqos::cpu_of(p).is_some_and(|c| cpus.contains(&c)))
        .map(String::as_str)
        .collect();
    if !fixed.is_empty() {
        return Err(ProbeError::Refused(format!(
            "apply's static fallback holds {}: `blkqos restore` first (then apply again)",
            fixed.join(", ")
        ))
        .into());
    }
    // the kernel's lease at someone's limit: "deep" would not be deep
    for p in knob_paths {
        if state.saved.contains_key(p) {
            return Err(ProbeError::Refused(format!(
                "{p} is blkqos's (apply set it, or a probe was killed): `blkqos restore --device {disk}` first, and apply again after the probe"
            ))
            .into());
        }
        if p.ends_with(crate::abi::knobs::LIMIT)
            && let Some(v) = ctx.sysfs.attr(p)
            && v != crate::abi::knobs::OFF
        {
            return Err(ProbeError::Refused(format!(
                "{p} is {v}, not {}: the kernel's lease holds {disk}'s CPUs at someone's limit; write {} there first",
                crate::abi::knobs::OFF,
                crate::abi::knobs::OFF
            ))
            .into());
        }
    }
    Ok(())
}

/// deep, c1, and the lease at each limit asked for ("auto" resolved).
fn configs(
    ctx: &Ctx,
    opts: &Options,
    table: &[TableState],
    cpus: &[u32],
) -> Result<Vec<Config>, Error> {
    let mut out = vec![Config::Deep];
    if let Some(limit_us) = machine::c1_limit(table) {
        out.push(Config::C1 { limit_us });
    }
    for l in opts.limits {
        let (limit_us, auto) = match l {
            Some(us) => (*us, false),
            None => {
                let tables: Vec<Vec<idle::IdleState>> = cpus
                    .iter()
                    .map(|&c| idle::cpu_states(&ctx.sysfs, c))
                    .collect();
                match idle::auto_limit(tables.iter().map(Vec::as_slice)) {
                    Some((us, _)) => (us, true),
                    None => continue,
                }
            }
        };
        let c = Config::Lease {
            limit_us,
            timeout_ms: opts.timeout_ms,
            auto,
        };
        if !out.iter().any(|o| o.limit_us() == Some(limit_us)) {
            out.push(c);
        }
    }
    Ok(out)
}

fn human(p: &Probed, out: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "{} ({}): CPUs {}, {} ({}), idle driver {}{}",
        p.name,
        p.path,
        idle::format_cpus(&p.cpus),
        match p.kernel_knobs {
            true => "the kernel's lease (queue knobs)",
            false => "blkqos lease (per-CPU resume latency)",
        },
        p.machine
            .virtualized
            .as_deref()
            .map_or("bare metal".to_string(), |v| format!("guest of {v}")),
        p.machine.cpuidle_driver.as_deref().unwrap_or("none"),
        p.machine
            .guest_halt_poll_ns
            .map_or(String::new(), |n| format!(", guest_halt_poll_ns {n}")),
    );
    if let Some(why) = &p.skipped {
        let _ = writeln!(out, "{why}");
        return;
    }
    let _ = writeln!(
        out,
        "{} rounds of {} runs of {:.2} s in {:.0} s; CPU time {:.1} s (the probe's and its leases')",
        p.rounds,
        p.configs.len() as u32 * REPS,
        p.run_secs,
        p.duration_secs,
        p.cpu_secs
    );
    if let Some(a) = &p.analysis {
        out.push_str(&render_table(a, &p.table));
    }
    if let Some(rule) = &p.rule {
        let _ = writeln!(out, "\nThe rule to paste into the profile:\n\n{rule}");
        let polls = p
            .analysis
            .as_ref()
            .is_some_and(|a| matches!(a.answer, crate::probe::Answer::Limit { limit_us: 0, .. }));
        if polls && p.machine.virtualized.is_some() {
            let _ = writeln!(
                out,
                "On a guest, the profile kvm-guest.toml (/usr/share/doc/blkqos/profiles/) holds this for every virtio and NVMe disk; docs/probe.md says what the polling costs the host."
            );
        }
    }
}

/// The user + system CPU time of this process and of the lease children
/// it waited for, in seconds.
fn own_cpu_secs() -> f64 {
    let f = crate::state::proc_stat("self").unwrap_or_default();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime, stime, cutime, cstime are fields 14 to 17 (11 to 14 after
    // the name), in USER_HZ, which is 100 on Linux
    (11..=14).map(ticks).sum::<f64>() / 100.0
}

/// The reading thread's CPU: held to one during the reads, given its
/// whole set back before a child is started (a child inherits it).
struct Pin {
    one: rustix::thread::CpuSet,
    all: rustix::thread::CpuSet,
}

impl Pin {
    fn new(cpu: u32) -> Result<Pin, ProbeError> {
        let all = rustix::thread::sched_getaffinity(None)
            .map_err(|e| ProbeError::Failed(format!("sched_getaffinity: {e}")))?;
        let mut one = rustix::thread::CpuSet::new();
        let n = cpu as usize;
        if n >= rustix::thread::CpuSet::MAX_CPU || !all.is_set(n) {
            return Err(ProbeError::Refused(format!(
                "CPU {cpu} is not one this process may run on (taskset, a cgroup's cpuset?): name one with --cpu"
            )));
        }
        one.set(n);
        Ok(Pin { one, all })
    }

    fn hold(&self) -> Result<(), ProbeError> {
        rustix::thread::sched_setaffinity(None, &self.one)
            .map_err(|e| ProbeError::Failed(format!("sched_setaffinity: {e}")))
    }

    fn release(&self) -> Result<(), ProbeError> {
        rustix::thread::sched_setaffinity(None, &self.all)
            .map_err(|e| ProbeError::Failed(format!("sched_setaffinity: {e}")))
    }
}

/// A progress bar with the time left, on a terminal only.
struct Progress {
    total: u64,
    done: u64,
    on: bool,
}

impl Progress {
    fn new(total: u64, json: bool) -> Progress {
        Progress {
            total,
            done: 0,
            on: !json && std::io::stderr().is_terminal(),
        }
    }

    fn step(&mut self, elapsed: Duration, label: &str) {
        self.done += 1;
        if !self.on {
            return;
        }
        let share = self.done as f64 / self.total.max(1) as f64;
        let left = elapsed.as_secs_f64() * (1.0 - share) / share.max(1e-9);
        let bar = (share * 30.0) as usize;
        let _ = write!(
            std::io::stderr(),
            "\r[{}{}] {}/{} runs, {:.0} s left ({label})\x1b[K",
            "#".repeat(bar),
            " ".repeat(30 - bar.min(30)),
            self.done,
            self.total,
            left
        );
    }

    fn done(&self) {
        if self.on {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}
