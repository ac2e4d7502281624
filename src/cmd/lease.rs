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
use crate::lease::tracepoint::IssueWatch;
use crate::plan::{self, LeaseGrant};
use crate::profile::Profile;
use crate::snapshot::Snapshot;
use crate::state::{LeaseSaved, State};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// Put back what a killed run left and exit.
    pub put_back: bool,
}

/// Put back what a killed run left, then run until told to stop.
pub fn lease(ctx: &Ctx, opts: &Options) -> Result<u8, Error> {
    let left = put_back(ctx)?;
    if opts.put_back {
        return Ok(if left { crate::error::EXIT_FAILED } else { 0 });
    }
    let signals = Signals::new().map_err(|e| Error::Usage(format!("cannot catch signals: {e}")))?;
    let profile = Profile::load(opts.profile)?;
    let mut run = Run::new(ctx, opts, profile);
    run.regrant()?;
    let monitor = hotplug_monitor();
    loop {
        let sleep = run.step();
        let mut fds: Vec<libc::pollfd> = [signals.term.as_raw_fd(), signals.hup.as_raw_fd()]
            .into_iter()
            .chain(monitor.as_ref().map(|m| m.as_raw_fd()))
            .chain(
                run.watch
                    .iter()
                    .flat_map(|w| w.armed_fds().into_iter().map(|(fd, _)| fd)),
            )
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let timeout = sleep.map_or(-1, |d| {
            i32::try_from(d.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
        });
        // SAFETY: fds is a live, correctly sized array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(Error::Usage(format!("poll: {e}")));
            }
            continue;
        }
        if drain(&signals.term) {
            break;
        }
        if drain(&signals.hup) {
            match Profile::load(opts.profile) {
                Ok(p) => {
                    log::info!("{}: read again", opts.profile.display());
                    run.profile = p;
                    run.regrant()?;
                }
                Err(e) => log::error!("{e}; keeping the profile read before"),
            }
        }
        if let Some(m) = &monitor
            && m.iter().count() > 0
        {
            run.regrant()?;
        }
    }
    run.release()
}

/// Put back what a killed run left (`restore` does too); returns what
/// could not be put back, and is left as it is.
pub fn put_back_left(ctx: &Ctx) -> Result<Vec<String>, Error> {
    if ctx.state.read()?.leases.is_empty() {
        return Ok(Vec::new());
    }
    let mut locked = ctx.state.lock()?;
    let notes = cpuqos::put_back(&ctx.sysfs, &locked.state.leases);
    locked.state.leases.clear();
    locked.save()?;
    Ok(notes)
}

fn put_back(ctx: &Ctx) -> Result<bool, Error> {
    let notes = put_back_left(ctx)?;
    for n in &notes {
        log::warn!("{n}");
    }
    Ok(!notes.is_empty())
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
    start: Instant,
}

impl<'a> Run<'a> {
    fn new(ctx: &'a Ctx, opts: &Options, profile: Profile) -> Run<'a> {
        let watch = match opts.detect {
            Detect::Stat => None,
            Detect::Auto | Detect::Tracepoint => match IssueWatch::new() {
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
        Run {
            ctx,
            profile,
            idle_look: opts.idle_look,
            profile_path: opts.profile.to_path_buf(),
            grants: BTreeMap::new(),
            leases: Leases::default(),
            qos: CpuQos::default(),
            stat: StatPoll::default(),
            watch,
            start: Instant::now(),
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
        let (grants, warnings) = plan::lease_grants(&self.profile, &snap);
        for w in &warnings {
            log::warn!("{w}");
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
            if fresh && self.stat.had_io(sysfs, d) {
                self.leases.saw_io(d, now);
            }
            if let Some(w) = &mut self.watch
                && !w.watches(d)
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
        let (notes, _) = self.qos.adopt(
            sysfs,
            self.grants.values().flat_map(|g| g.cpus.iter().copied()),
        );
        for n in notes {
            log::warn!("{n}");
        }
        self.save()
    }

    /// The state file's leases: every CPU a grant may hold, with its
    /// original and the limits that may be written over it.
    fn save(&self) -> Result<(), Error> {
        let mut limits: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
        for g in self.grants.values() {
            for &c in &g.cpus {
                limits.entry(c).or_default().insert(g.limit_us);
            }
        }
        let leases: BTreeMap<String, LeaseSaved> = (self.qos.originals())
            .map(|(cpu, original)| {
                (
                    cpuqos::attr(cpu),
                    LeaseSaved {
                        original: original.to_string(),
                        limits: limits.remove(&cpu).unwrap_or_default(),
                    },
                )
            })
            .collect();
        let mut locked = self.ctx.state.lock()?;
        if locked.state.leases != leases {
            locked.state.leases = leases;
            locked.save()?;
        }
        Ok(())
    }

    /// Take in the I/O seen since the last step, bring the CPUs to what the
    /// leases want now, and say how long to sleep (`None`: until woken).
    fn step(&mut self) -> Option<Duration> {
        let sysfs = &self.ctx.sysfs;
        let now = self.now();
        if let Some(w) = &mut self.watch {
            for d in w.fired() {
                self.leases.saw_io(&d, now);
            }
        }
        let watched = |d: &str| self.watch.as_ref().is_some_and(|w| w.watches(d));
        let mut looked = Vec::new();
        for d in self.grants.keys() {
            // a lapsed device the tracepoint watches costs no look
            if (self.leases.live(d, now) || !watched(d)) && self.stat.had_io(sysfs, d) {
                looked.push(d.clone());
            }
        }
        for d in looked {
            self.leases.saw_io(&d, now);
        }
        let wanted = self.leases.wanted(now);
        let (notes, changed) = self.qos.sync(sysfs, &wanted);
        for n in notes {
            log::warn!("{n}");
        }
        if changed && let Err(e) = self.save() {
            log::error!("{e}");
        }
        let mut look: Option<Duration> = None;
        let mut shorter = |d: Duration| look = Some(look.map_or(d, |l| l.min(d)));
        for (d, g) in &self.grants {
            let live = self.leases.live(d, now);
            if let Some(w) = &mut self.watch
                && w.watches(d)
            {
                if let Err(e) = w.arm(d, !live) {
                    log::warn!("{d}: cannot arm its tracepoint: {e}");
                }
                if !live {
                    continue;
                }
            }
            if live {
                // a renewal needs one look within the timeout
                shorter((Duration::from_millis(g.timeout_ms) / 2).max(Duration::from_millis(1)));
            } else {
                shorter(self.idle_look);
            }
        }
        if let Some(lapse) = self.leases.next_lapse(now) {
            shorter(lapse - now);
        }
        look
    }

    /// Let every CPU go: the originals back, the state's leases dropped.
    fn release(&mut self) -> Result<u8, Error> {
        let (notes, _) = self.qos.sync(&self.ctx.sysfs, &BTreeMap::new());
        let failed = !notes.is_empty();
        for n in notes {
            log::warn!("{n}");
        }
        let mut locked = self.ctx.state.lock()?;
        locked.state.leases.clear();
        locked.save()?;
        Ok(if failed { crate::error::EXIT_FAILED } else { 0 })
    }
}

/// Watch a disk's issue tracepoint on the CPUs of its grant.
fn watch(
    w: &mut IssueWatch,
    sysfs: &crate::sysfs::Sysfs,
    disk: &str,
    g: &LeaseGrant,
) -> std::io::Result<()> {
    let dev = sysfs.read(&format!("block/{disk}/dev"))?;
    let (major, minor) = dev
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| std::io::Error::other(format!("block/{disk}/dev reads {dev:?}")))?;
    // an offline CPU issues nothing, and has no events to open
    let online = sysfs
        .attr("devices/system/cpu/online")
        .and_then(|l| crate::idle::parse_cpu_list(&l));
    let cpus: Vec<u32> = (g.cpus.iter().copied())
        .filter(|c| online.as_ref().is_none_or(|o| o.contains(c)))
        .collect();
    w.add(disk, major, minor, &cpus)
}

/// SIGTERM and SIGINT end the run, SIGHUP reloads: each writes a byte to
/// its socket, which the poll loop watches.
struct Signals {
    term: UnixStream,
    hup: UnixStream,
    _writers: [UnixStream; 2],
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        use signal_hook::low_level::pipe;
        let (term, term_w) = UnixStream::pair()?;
        let (hup, hup_w) = UnixStream::pair()?;
        for s in [&term, &hup] {
            s.set_nonblocking(true)?;
        }
        pipe::register(SIGTERM, term_w.try_clone()?)?;
        pipe::register(SIGINT, term_w.try_clone()?)?;
        pipe::register(SIGHUP, hup_w.try_clone()?)?;
        Ok(Signals {
            term,
            hup,
            _writers: [term_w, hup_w],
        })
    }
}

/// Whether a signal's socket had bytes; they are read.
fn drain(mut s: &UnixStream) -> bool {
    let mut buf = [0u8; 64];
    let mut any = false;
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        any = true;
    }
    any
}

#[cfg(feature = "udev")]
fn hotplug_monitor() -> Option<udev::MonitorSocket> {
    let m = udev::MonitorBuilder::new()
        .and_then(|b| b.match_subsystem("block"))
        .and_then(|b| b.listen());
    match m {
        Ok(m) => Some(m),
        Err(e) => {
            log::warn!("cannot listen to udev ({e}): disks that come or go are taken at SIGHUP");
            None
        }
    }
}

#[cfg(not(feature = "udev"))]
fn hotplug_monitor() -> Option<NoMonitor> {
    log::info!("built without udev: disks that come or go are taken at SIGHUP");
    None
}

#[cfg(not(feature = "udev"))]
struct NoMonitor;

#[cfg(not(feature = "udev"))]
impl NoMonitor {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        -1
    }
    fn iter(&self) -> std::iter::Empty<()> {
        std::iter::empty()
    }
}
