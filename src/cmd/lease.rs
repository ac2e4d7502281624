//! `lease`: the per-device, time-limited lease from user space, for kernels
//! without the queue knobs. Runs in the foreground until SIGTERM or SIGINT;
//! SIGHUP reads the profile again (a bad one keeps the old); disks that
//! come and go are followed through udev.

use super::Ctx;
use crate::discover::{self, Detail, Extent};
use crate::error::Error;
use crate::lease::cpuqos::{self, CpuQos};
use crate::lease::detect::StatPoll;
use crate::lease::policy::{Grant, Leases};
use crate::lease::published::{self, CpuLease, Published};
use crate::lease::tracepoint::IssueWatch;
use crate::plan::{self, LeaseGrant};
use crate::profile::Profile;
use crate::snapshot::Snapshot;
use crate::state::{LeaseSaved, State};
use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod lapse;
mod put_back;
mod signals;
use lapse::*;
use put_back::*;
pub use put_back::{LeftPutBack, put_back_left};
use signals::*;

/// How the first I/O after a lapse is seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Detect {
    /// The issue tracepoint where it can be opened, else `stat`.
    Auto,
    /// The block:block_rq_issue tracepoint (perf_event_open).
    Tracepoint,
    /// Each disk's `stat`, read every --idle-look.
    Stat,
}

pub struct Options<'a> {
    pub profile: &'a Path,
    pub detect: Detect,
    /// How often `stat` is read while no lease holds (stat detection).
    pub idle_look: Duration,
    /// I/Os a lapsed disk shows within one timeout before it holds.
    pub min_ios: u64,
    /// Put back what a killed run left and exit.
    pub put_back: bool,
    /// Only say whether the kernel has its own lease (exit 1) or not (0).
    pub unless_kernel_lease: bool,
    /// The process that started this one: its end stops this one.
    pub with_parent: Option<u32>,
}

/// Whether the kernel has the lease of the series: its cpuidle attribute
/// on a CPU, or a request queue's knob.
pub fn kernel_has_lease(sysfs: &crate::sysfs::Sysfs) -> bool {
    let cpus = sysfs.list("devices/system/cpu");
    let disks = sysfs.list("block");
    (cpus.iter())
        .filter(|c| {
            c.strip_prefix("cpu")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .any(|c| {
            sysfs.exists(&format!(
                "devices/system/cpu/{c}/cpuidle/cpu_lat_lease_limit_us"
            ))
        })
        || (disks.iter()).any(|d| sysfs.exists(&format!("block/{d}/queue/cpu_lat_limit_us")))
}

/// How soon a step that could not take the state lock tries again: a
/// lapse waits for `apply` or `restore` (milliseconds) rather than write
/// over what they are writing.
const LOCK_RETRY: Duration = Duration::from_millis(10);

/// Put back what a killed run left, then run until told to stop.
pub fn lease(ctx: &Ctx, opts: &Options) -> Result<u8, Error> {
    if opts.unless_kernel_lease {
        if kernel_has_lease(&ctx.sysfs) {
            log::info!(
                "the kernel has its own lease (the queue knobs): blkqos lease is not needed"
            );
            return Ok(1);
        }
        return Ok(0);
    }
    if let Some(parent) = opts.with_parent {
        // a SIGTERM at the parent's death, handled as any other: the CPUs
        // go back; a parent already gone is not waited for
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
            .map_err(|e| Error::Usage(format!("cannot follow process {parent}: {e}")))?;
        // started through /proc/self/exe, its command name is "exe":
        // apply, restore and status know a running lease by "blkqos"
        rustix::thread::set_name(c"blkqos")
            .map_err(|e| Error::Usage(format!("cannot name this process: {e}")))?;
        let ppid = rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
        if ppid != Some(parent) {
            return Err(Error::Usage(format!(
                "process {parent}, which started this lease, is gone"
            )));
        }
    }
    // one lease at a time, and no put-back of a running one's CPUs
    let Some(_lease_lock) = ctx.state.try_lease_lock()? else {
        return Err(Error::Usage(
            "another blkqos lease is running on this state directory; it puts its CPUs back when it stops".to_string(),
        ));
    };
    // caught from here on: a SIGHUP (a reload) while the put-back waits
    // for the state lock must not end the run
    let signals = Signals::new().map_err(|e| Error::Usage(format!("cannot catch signals: {e}")))?;
    // what a killed run published no longer holds
    published::remove(&ctx.state.checked_dir()?);
    let left = put_back(ctx)?;
    if opts.put_back {
        return Ok(if left.is_empty() {
            0
        } else {
            crate::error::EXIT_FAILED
        });
    }
    let profile = Profile::load_trusted(opts.profile)?;
    let mut run = Run::new(ctx, opts, profile)?;
    run.take_over(&left);
    run.regrant()?;
    if opts.detect == Detect::Tracepoint && !run.all_watched() {
        run.release()?;
        return Err(Error::Usage(
            "--detect tracepoint: the tracepoint's events cannot be opened for every disk (see above)".to_string(),
        ));
    }
    let monitor = hotplug_monitor();
    loop {
        let sleep = run.step();
        let watched: Vec<(BorrowedFd<'_>, &str)> =
            run.watch.iter().flat_map(|w| w.armed_fds()).collect();
        let mut fds: Vec<PollFd<'_>> = [signals.term.as_fd(), signals.hup.as_fd()]
            .into_iter()
            .chain(monitor.as_ref().map(|m| m.as_fd()))
            .chain(watched.iter().map(|(fd, _)| *fd))
            .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
            .collect();
        // never 0, which would spin: a look 0.1 ms late keeps a lease
        // that much longer
        let timeout = sleep.map(|d| d.max(Duration::from_micros(100)));
        match super::poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(e) => return Err(Error::Usage(format!("poll: {e}"))),
        }
        let revents: Vec<PollFlags> = fds.iter().map(|p| p.revents()).collect();
        // an event that fails (its CPU went offline) would wake the loop
        // for ever: its disk goes back to its stat
        let failed: Vec<String> = (revents[revents.len() - watched.len()..].iter())
            .zip(&watched)
            .filter(|(r, _)| r.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL))
            .map(|(_, (_, d))| d.to_string())
            .collect();
        for d in &failed {
            log::warn!("{d}: its tracepoint events failed; reading its stat instead");
            run.unwatch(d);
        }
        // a socket is read only when poll said so: a look while a lease
        // holds costs its stat reads and nothing else
        let ready = |i: usize| !revents[i].is_empty();
        if ready(0) && drain(&signals.term) {
            break;
        }
        if ready(1) && drain(&signals.hup) {
            match Profile::load_trusted(opts.profile) {
                Ok(p) => {
                    log::info!("{}: read again", opts.profile.display());
                    run.profile = p;
                    run.regrant_or_log();
                }
                Err(e) => log::error!("{e}; keeping the profile read before"),
            }
        }
        if let Some(m) = &monitor
            && ready(2)
            && m.iter().count() > 0
        {
            run.regrant_or_log();
        }
    }
    run.release()
}

struct Run<'a> {
    ctx: &'a Ctx,
    profile: Profile,
    idle_look: Duration,
    profile_path: PathBuf,
    grants: BTreeMap<String, LeaseGrant>,
    leases: Leases,
    qos: CpuQos,
    stat: StatPoll,
    watch: Option<IssueWatch>,
    /// Every limit a grant gave each CPU during the run: the values the
    /// run may have written there, which a put-back recognises.
    limits: BTreeMap<u32, BTreeSet<u64>>,
    start: Instant,
    /// What `lease.json` says now; a failed write is warned about once.
    published: Option<(&'static str, BTreeMap<u32, CpuLease>)>,
    /// A rescan may have changed what the state must hold, and it is not
    /// saved yet: until it is, no CPU is newly held or held at another
    /// limit (a SIGKILL would leave values no put-back knows); letting
    /// go is not held back. Tried again at the next step, without
    /// waiting for the lock.
    unsaved: bool,
    /// What the lapses put back, said at a bounded rate.
    lapse_log: LapseLog,
    /// A busy lock or a failed save is logged once, until one succeeds.
    save_failed: bool,
    /// The state directory, checked and resolved: where `lease.json` goes.
    dir: PathBuf,
    publish_failed: bool,
}

impl<'a> Run<'a> {
    fn new(ctx: &'a Ctx, opts: &Options, profile: Profile) -> Result<Run<'a>, Error> {
        let watch = match opts.detect {
            Detect::Stat => None,
            Detect::Tracepoint => Some(IssueWatch::new(ctx.sysfs.root()).map_err(|e| {
                Error::Usage(format!(
                    "--detect tracepoint: block:block_rq_issue cannot be used: {e}"
                ))
            })?),
            Detect::Auto => match IssueWatch::new(ctx.sysfs.root()) {
                Ok(w) => Some(w),
                Err(e) => {
                    log::warn!(
                        "the block:block_rq_issue tracepoint cannot be used ({e}); reading each disk's stat every {:.1} s instead",
                        opts.idle_look.as_secs_f64()
                    );
                    None
                }
            },
        };
        match &watch {
            Some(_) => log::info!(
                "the first I/O after a lapse is seen through the block:block_rq_issue tracepoint"
            ),
            None => log::info!(
                "the first I/O after a lapse is seen in each disk's stat, read every {:.1} s",
                opts.idle_look.as_secs_f64()
            ),
        }
        Ok(Run {
            ctx,
            profile,
            idle_look: opts.idle_look,
            profile_path: opts.profile.to_path_buf(),
            grants: BTreeMap::new(),
            leases: Leases::with_min_ios(opts.min_ios),
            qos: CpuQos::default(),
            stat: StatPoll::default(),
            watch,
            limits: BTreeMap::new(),
            start: Instant::now(),
            published: None,
            publish_failed: false,
            unsaved: false,
            save_failed: false,
            lapse_log: LapseLog::default(),
            dir: ctx.state.checked_dir()?,
        })
    }

    /// What a killed run left that could not be put back keeps its saved
    /// original, and this run tries again, rather than take the value
    /// left for an original.
    fn take_over(&mut self, left: &BTreeMap<String, LeaseSaved>) {
        self.qos.take_over(&self.ctx.sysfs, left);
        for (path, s) in left {
            if let Some(cpu) = cpuqos::cpu_of(path) {
                self.limits.entry(cpu).or_default().extend(&s.limits);
            }
        }
    }

    /// A rescan that fails (the state lock busy, a scan error) keeps the
    /// leases as they were, and the run goes on.
    fn regrant_or_log(&mut self) {
        if let Err(e) = self.regrant() {
            log::error!("{e}; the disks and rules of the last scan stay in force");
        }
    }

    /// A disk whose tracepoint events failed: its stat is read instead.
    fn unwatch(&mut self, disk: &str) {
        if let Some(w) = &mut self.watch {
            w.remove(disk);
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Scan the disks and take the profile's leases for them; save the
    /// originals of every CPU they may hold before any is written.
    fn regrant(&mut self) -> Result<(), Error> {
        let sysfs = &self.ctx.sysfs;
        let inv = discover::scan(sysfs, Extent::All, Detail::for_profile(Some(&self.profile)))?;
        let snap = Snapshot::take(sysfs, inv, State::default(), Some(&self.profile));
        let (mut grants, warnings) = plan::lease_grants(&self.profile, &snap);
        for w in &warnings {
            log::warn!("{w}");
        }
        // blk-mq maps every possible CPU; one not present (hot-added later,
        // then a udev cpu event regrants) has no resume latency to hold
        if let Some(present) = sysfs
            .attr("devices/system/cpu/present")
            .and_then(|l| crate::idle::parse_cpu_list(&l))
        {
            for g in grants.values_mut() {
                g.cpus.retain(|c| present.contains(c));
            }
        }
        let now = self.now();
        for gone in self.grants.keys().filter(|d| !grants.contains_key(*d)) {
            log::info!("{gone}: no longer leased");
            self.leases.remove(gone);
            self.stat.forget(gone);
            if let Some(w) = &mut self.watch {
                w.remove(gone);
            }
        }
        for (d, g) in &grants {
            let grant = Grant {
                limit_us: g.limit_us,
                timeout: Duration::from_millis(g.timeout_ms),
                cpus: g.cpus.clone(),
            };
            if self.leases.grant(d) != Some(&grant) {
                log::info!(
                    "{d}: CPUs {} held at {} us while it has I/O, {} ms after the last",
                    crate::idle::format_cpus(&g.cpus.iter().copied().collect::<Vec<_>>()),
                    g.limit_us,
                    g.timeout_ms
                );
            }
            let fresh = self.leases.grant(d).is_none();
            self.leases.set(d, grant, now);
            // a new disk's counters, which the first look compares with,
            // read before the state says the run has started; a request
            // in flight now already counts
            if fresh {
                let ios = self.stat.ios(sysfs, d);
                if ios > 0 {
                    self.leases.saw_io(d, now, ios);
                }
            }
            // a disk whose number or online CPUs changed (it came back,
            // a CPU came online) gets new events
            if let Some(w) = &mut self.watch
                && let Err(e) = watch(w, sysfs, d, g)
            {
                log::warn!(
                    "{d}: cannot watch its I/O through the tracepoint ({e}); reading its stat instead"
                );
            }
        }
        if self.grants.is_empty() && grants.is_empty() {
            log::info!(
                "{}: no rule leases a disk without the kernel's knobs; waiting for disks or SIGHUP",
                self.profile_path.display()
            );
        }
        self.grants = grants;
        let known: BTreeSet<u32> = self.qos.originals().map(|(c, _)| c).collect();
        let (notes, _) = self.qos.adopt(
            sysfs,
            self.grants.values().flat_map(|g| g.cpus.iter().copied()),
        );
        for n in notes {
            log::warn!("{n}");
        }
        // someone else's value found: say once which wins, and when
        let mut theirs: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for (c, v) in self
            .qos
            .originals()
            .filter(|(c, v)| !known.contains(c) && *v != "0")
        {
            theirs.entry(v).or_default().push(c);
        }
        for (v, cpus) in theirs {
            log::info!(
                "CPUs {} have pm_qos_resume_latency_us = {v} (someone else's: an admin's, TuneD's pmqos_resume_latency, CRI-O's): held at the stricter of it and the limit, and {v} is put back at each lapse",
                crate::idle::format_cpus(&cpus)
            );
        }
        // not waiting for the lock: the steps try again
        self.unsaved = true;
        let now = self.now();
        self.sync(None, now);
        Ok(())
    }

    /// The state file's leases: every CPU a grant may hold, with its
    /// original and every limit the run may have written over it.
    fn leases_saved(&mut self) -> BTreeMap<String, LeaseSaved> {
        for g in self.grants.values() {
            for &c in &g.cpus {
                self.limits.entry(c).or_default().insert(g.limit_us);
            }
        }
        (self.qos.originals())
            .map(|(cpu, original)| {
                (
                    cpuqos::attr(cpu),
                    LeaseSaved {
                        original: original.to_string(),
                        limits: self.limits.get(&cpu).cloned().unwrap_or_default(),
                    },
                )
            })
            .collect()
    }

    /// Bring the CPUs to `wanted` (with `None`, only save the originals)
    /// under the state lock, taken without waiting: what `apply` and
    /// `restore` told the lease through the state is taken in first, each
    /// value to change is read under the lock, the originals are saved
    /// before a value is written over them, and the writes are made
    /// before the lock is let go, so that no other run's value is undone
    /// by a write planned from a value read before it. False when the
    /// lock was busy or the state could not be saved: nothing that holds
    /// was written, and the caller tries again soon.
    fn sync(&mut self, wanted: Option<&BTreeMap<u32, u64>>, now: Duration) -> bool {
        let sysfs = &self.ctx.sysfs;
        let mut locked = match self.ctx.state.lock_now() {
            Ok(l) => l,
            Err(e) => {
                self.failed_once(&e.to_string());
                return false;
            }
        };
        self.qos.resync(sysfs, &locked.state.leases);
        let mut plan = match wanted {
            Some(w) => self.qos.plan(sysfs, w),
            None => cpuqos::Plan::default(),
        };
        for n in &plan.notes {
            log::warn!("{n}");
        }
        let leases = self.leases_saved();
        let mut saved = true;
        if locked.state.leases != leases {
            locked.state.leases = leases;
            if let Err(e) = locked.save() {
                self.failed_once(&e.to_string());
                saved = false;
                // letting go is still safe; a new hold needs its original saved
                plan.writes.retain(|(_, _, hold)| !hold);
            }
        }
        if wanted.is_some() {
            self.lapse_log.note(&plan.writes, Instant::now());
        }
        for n in self.qos.write(&self.ctx.sysfs, plan.writes) {
            log::warn!("{n}");
        }
        // published before the lock is let go: apply and restore read
        // what the lease holds from it, under the same lock
        self.publish(now);
        drop(locked);
        if saved {
            self.save_failed = false;
            self.unsaved = false;
        }
        saved
    }

    /// Say once that the state cannot be had, until it can again.
    fn failed_once(&mut self, e: &str) {
        if !self.save_failed {
            log::error!(
                "{e}; no CPU's value is changed until the state can be saved (tried again every {} ms)",
                LOCK_RETRY.as_millis()
            );
        }
        self.save_failed = true;
    }

    /// Take in the I/O seen since the last step, bring the CPUs to what the
    /// leases want now, and say how long to sleep (`None`: until woken).
    fn step(&mut self) -> Option<Duration> {
        let sysfs = &self.ctx.sysfs;
        let now = self.now();
        if let Some(w) = &mut self.watch {
            for d in w.fired() {
                self.leases.saw_io(&d, now, 1);
            }
        }
        let mut looked = Vec::new();
        for d in self.grants.keys() {
            let live = self.leases.live(d, now);
            // a lapsed device the tracepoint watches costs no look, but for
            // the one at its lapse: its events armed first, then its stat
            // read, so that I/O since the last look or in flight keeps the
            // lease, and none falls between the look and the arming
            let look = match &mut self.watch {
                Some(w) if w.watches(d) && !live && !w.armed(d) => match w.arm(d, true) {
                    Ok(()) => true,
                    Err(e) => {
                        log::warn!(
                            "{d}: cannot arm its tracepoint ({e}); reading its stat instead"
                        );
                        w.remove(d);
                        true
                    }
                },
                Some(w) if w.watches(d) => live,
                _ => true,
            };
            let ios = if look { self.stat.ios(sysfs, d) } else { 0 };
            if ios > 0 {
                looked.push((d.clone(), ios));
            }
        }
        for (d, ios) in looked {
            self.leases.saw_io(&d, now, ios);
        }
        let wanted = self.leases.wanted(now);
        // a renewal that changes nothing takes no lock and reads nothing
        let retry = (self.qos.needs(&wanted) || self.unsaved) && !self.sync(Some(&wanted), now);
        self.publish(now);
        let mut look: Option<Duration> = None;
        let mut shorter = |d: Duration| look = Some(look.map_or(d, |l| l.min(d)));
        for (d, g) in &self.grants {
            let live = self.leases.live(d, now);
            if let Some(w) = &mut self.watch
                && w.watches(d)
            {
                match w.arm(d, !live) {
                    Err(e) => {
                        log::warn!(
                            "{d}: cannot arm its tracepoint ({e}); reading its stat instead"
                        );
                        w.remove(d);
                    }
                    Ok(()) if !live => continue,
                    Ok(()) => {}
                }
            }
            if live {
                // a renewal needs one look within the timeout
                shorter((Duration::from_millis(g.timeout_ms) / 2).max(Duration::from_micros(250)));
            } else {
                shorter(self.idle_look);
            }
        }
        if let Some(lapse) = self.leases.next_lapse(now) {
            shorter(lapse - now);
        }
        if retry {
            shorter(LOCK_RETRY);
        }
        look
    }

    /// Whether the tracepoint sees the first I/O of every leased disk
    /// (else some disk's is seen in its stat).
    fn all_watched(&self) -> bool {
        (self.watch.as_ref()).is_some_and(|w| self.grants.keys().all(|d| w.watches(d)))
    }

    /// Publish what the run holds, when it changed: each CPU a grant
    /// serves, the limit written there and the live disks holding it.
    fn publish(&mut self, now: Duration) {
        let mut cpus: BTreeMap<u32, CpuLease> = BTreeMap::new();
        for g in self.grants.values() {
            for &c in &g.cpus {
                cpus.entry(c).or_insert(CpuLease {
                    limit_us: None,
                    timeout_ms: 0,
                    disks: Vec::new(),
                });
            }
        }
        for (c, v) in self.qos.held() {
            if let Some(e) = cpus.get_mut(&c) {
                e.limit_us = crate::abi::resume::decode(v).flatten();
            }
        }
        for (d, g) in &self.grants {
            if !self.leases.live(d, now) {
                continue;
            }
            for c in &g.cpus {
                if let Some(e) = cpus.get_mut(c).filter(|e| e.limit_us.is_some()) {
                    e.disks.push(d.clone());
                    e.timeout_ms = e.timeout_ms.max(g.timeout_ms);
                }
            }
        }
        let detect = if self.all_watched() {
            "tracepoint"
        } else {
            "stat"
        };
        if self
            .published
            .as_ref()
            .is_some_and(|(d, c)| *d == detect && *c == cpus)
        {
            return;
        }
        let p = Published {
            pid: std::process::id(),
            detect: detect.into(),
            cpus,
        };
        match published::write(&self.dir, &p) {
            Ok(()) => self.published = Some((detect, p.cpus)),
            Err(e) if !self.publish_failed => {
                self.publish_failed = true;
                log::warn!(
                    "cannot write {}: {e}; status, metrics and top do not show this run's leases",
                    self.dir.join(published::FILE).display()
                );
            }
            Err(_) => {}
        }
    }

    /// Let every CPU go: the originals back, the state's leases dropped
    /// but for the CPUs that could not be put back.
    fn release(&mut self) -> Result<u8, Error> {
        published::remove(&self.dir);
        let sysfs = &self.ctx.sysfs;
        // waiting this time (a stop may wait the lock timeout): a CPU put
        // back under the lock never undoes what apply or restore wrote
        let locked = match self.ctx.state.lock() {
            Ok(l) => Some(l),
            Err(e) => {
                log::warn!("{e}; putting the CPUs back without the state lock");
                None
            }
        };
        if let Some(l) = &locked {
            self.qos.resync(sysfs, &l.state.leases);
        }
        let plan = self.qos.plan(sysfs, &BTreeMap::new());
        let mut notes = plan.notes;
        notes.extend(self.qos.write(sysfs, plan.writes));
        for n in &notes {
            log::warn!("{n}");
        }
        let still: BTreeSet<u32> = self.qos.held().map(|(c, _)| c).collect();
        let mut locked = match locked {
            Some(l) => l,
            None => self.ctx.state.lock()?,
        };
        locked
            .state
            .leases
            .retain(|path, _| still.iter().any(|&c| cpuqos::attr(c) == *path));
        locked.save()?;
        if still.is_empty() {
            log::info!("stopped: every CPU it held is put back");
        } else {
            log::error!(
                "CPUs {} could not be put back; kept in the state for `blkqos restore`",
                crate::idle::format_cpus(&still.into_iter().collect::<Vec<_>>())
            );
            return Ok(crate::error::EXIT_FAILED);
        }
        Ok(0)
    }
}
