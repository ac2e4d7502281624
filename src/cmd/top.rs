//! `top`: a live view, redrawn every interval: per disk the IOPS (from
//! `stat` deltas) and the limit in force, per CPU the share of the interval
//! spent in each idle state (from cpuidle `time` deltas) and the lease.
//! The terminal is put back on every way out but SIGKILL (which cannot be
//! caught): `q`, Ctrl-C, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
//! SIGUSR2, an error (a failed start included) or a panic.

use super::Ctx;
use crate::abi::{Abi, knobs};
use crate::discover::{self, Detail, Extent};
use crate::error::Error;
use crate::idle::{self, IdleState, Lease};
use crate::iostat::{self, DiskStat};
use crate::lease::published::{self, Published};
use crate::report::{Style, escape_control, table};
use crossterm::{cursor, queue, terminal};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What the view shows: the disks and CPUs, scanned again every frame
/// (disks and CPUs come and go while it runs).
pub struct View {
    pub disks: Vec<Disk>,
    pub cpus: Vec<u32>,
}

pub struct Disk {
    pub name: String,
    /// The queues that hold its knobs, with their ABI.
    pub targets: Vec<(String, Abi)>,
}

/// One reading of every counter the view shows, each named, so that a
/// frame matches two readings across a rescan.
pub struct Sample {
    pub at: Instant,
    pub disks: Vec<DiskSample>,
    /// Per CPU: its number, idle states and lease.
    pub cpus: Vec<(u32, Vec<IdleState>, Option<LeaseRead>)>,
    /// What a running `blkqos lease` holds (the lease from user space).
    pub user: Option<Published>,
}

pub struct DiskSample {
    pub name: String,
    pub stat: Option<DiskStat>,
    /// The limit and timeout cells.
    pub limit: String,
    pub timeout: String,
}

/// A CPU's lease as read: the lease, or the text that did not parse.
pub type LeaseRead = Result<Lease, idle::BadLease>;

impl View {
    pub fn scan(ctx: &Ctx) -> Result<View, Error> {
        // through a clone: where a scan found each disk is for one run,
        // and top reads the disks it shows for as long as it runs
        let sysfs = ctx.sysfs.clone();
        let inv = discover::scan(&sysfs, Extent::All, Detail::for_profile(None))?;
        let disks = (inv.visible())
            .map(|d| {
                let targets = (d.targets.iter())
                    .filter_map(|t| inv.get(t))
                    .map(|t| (t.name.clone(), t.abi))
                    .collect();
                Disk {
                    name: d.name.clone(),
                    targets,
                }
            })
            .collect();
        Ok(View {
            disks,
            cpus: idle::present_cpus(&ctx.sysfs),
        })
    }

    pub fn sample(&self, ctx: &Ctx) -> Sample {
        let knob = |path: fn(Abi, &str) -> String, targets: &[(String, Abi)]| {
            let mut values: Vec<String> = (targets.iter())
                .filter(|(_, abi)| *abi != Abi::None)
                .filter_map(|(t, abi)| ctx.sysfs.attr(&path(*abi, t)))
                // the kernel's text on the terminal: no control sequences
                .map(|v| escape_control(&v).into_owned())
                .collect();
            values.dedup();
            values
        };
        let disks = (self.disks.iter())
            .map(|Disk { name, targets }| {
                let limit = knob(knobs::limit_path, targets);
                let limit = limit
                    .iter()
                    .map(|v| match v.as_str() {
                        knobs::OFF => "off".to_string(),
                        "auto" => "auto".to_string(),
                        us => format!("{us} us"),
                    })
                    .collect::<Vec<_>>();
                let timeout: Vec<String> = (knob(knobs::timeout_path, targets).iter())
                    .map(|ms| format!("{ms} ms"))
                    .collect();
                DiskSample {
                    name: name.clone(),
                    stat: iostat::read(&ctx.sysfs, name),
                    limit: joined(&limit),
                    timeout: joined(&timeout),
                }
            })
            .collect();
        let cpus = (self.cpus.iter())
            .map(|&c| {
                (
                    c,
                    idle::cpu_states(&ctx.sysfs, c),
                    // `top` cannot print a warning under its screen: the
                    // cell says `?` (`Some(Err)`)
                    idle::cpu_lease(&ctx.sysfs, c).transpose(),
                )
            })
            .collect();
        Sample {
            at: Instant::now(),
            disks,
            cpus,
            user: published::running(ctx.state.dir()),
        }
    }
}

/// Several queues' values as one cell: `-` when there is none.
fn joined(values: &[String]) -> String {
    if values.is_empty() {
        "-".into()
    } else {
        values.join(",")
    }
}

/// The screen's lines for the interval from `prev` to `cur` (the same
/// sample on the first frame: no rates yet). What `cur` has is shown; a
/// disk or CPU `prev` lacks (just added) has no rates yet.
pub fn frame(style: Style, header: &str, prev: &Sample, cur: &Sample) -> Vec<String> {
    let secs = cur.at.duration_since(prev.at).as_secs_f64();
    let rate = |a: u64, b: u64| {
        if secs > 0.0 {
            format!("{:.0}", b.saturating_sub(a) as f64 / secs)
        } else {
            "-".into()
        }
    };
    let mut lines = vec![header.to_string(), String::new()];
    // limit and timeout cells are the kernel's text: escaped in `sample`
    let rows: Vec<Vec<String>> = (cur.disks.iter())
        .map(|now| {
            let before = (prev.disks.iter())
                .find(|d| d.name == now.name)
                .and_then(|d| d.stat.as_ref());
            let (r, w) = match (before, &now.stat) {
                (Some(a), Some(b)) => (rate(a.reads, b.reads), rate(a.writes, b.writes)),
                _ => ("-".into(), "-".into()),
            };
            // a disk without the knobs that blkqos lease holds now
            let leased = (cur.user.iter())
                .flat_map(|p| p.cpus.values())
                .filter(|c| c.disks.contains(&now.name))
                .filter_map(|c| c.limit_us.map(|l| (l, c.timeout_ms)))
                .min();
            let (limit, timeout) = match leased {
                Some((l, t)) if now.limit.is_empty() || now.limit == "-" => {
                    (format!("{l} us (lease)"), format!("{t} ms"))
                }
                _ => (now.limit.clone(), now.timeout.clone()),
            };
            vec![now.name.clone(), r, w, limit, timeout]
        })
        .collect();
    let disks = table(
        style,
        &["DEVICE", "READ/S", "WRITE/S", "LIMIT", "TIMEOUT"],
        &rows,
    );
    lines.extend(disks.lines().map(str::to_string));
    lines.push(String::new());

    // the columns are the first table's states; other CPUs are matched by index
    let states: Vec<(u32, String)> = (cur.cpus.iter())
        .find(|(_, t, _)| !t.is_empty())
        .map(|(_, t, _)| {
            (t.iter())
                .map(|s| (s.index, escape_control(&s.name).into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let mut header: Vec<&str> = vec!["CPU"];
    header.extend(states.iter().map(|(_, n)| n.as_str()));
    header.push("LEASE");
    let rows: Vec<Vec<String>> = (cur.cpus.iter())
        .map(|(cpu, now, lease)| {
            let mut row = vec![format!("cpu{cpu}")];
            let before = (prev.cpus.iter())
                .find(|(c, _, _)| c == cpu)
                .map_or(&[][..], |(_, t, _)| t);
            for (index, _) in &states {
                let time =
                    |t: &[IdleState]| t.iter().find(|s| s.index == *index).map(|s| s.time_us);
                row.push(match (time(before), time(now)) {
                    (Some(Some(a)), Some(Some(b))) if secs > 0.0 => {
                        let share = b.saturating_sub(a) as f64 / (secs * 1e6) * 100.0;
                        format!("{:.1}%", share.min(100.0))
                    }
                    (Some(Some(_)), Some(Some(_))) => "-".into(),
                    // the state is there, its time does not parse
                    (Some(_), Some(_)) => "?".into(),
                    _ => "n/a".into(),
                });
            }
            let user = (cur.user.as_ref())
                .and_then(|p| p.cpus.get(cpu))
                .map(|c| c.limit_us);
            row.push(match (lease, user) {
                // the kernel's lease first: user space does not hold
                // CPUs that the kernel's knobs serve
                (Some(Ok(Lease::Held { .. })), _) | (_, None) => kernel_lease(lease),
                (_, Some(Some(limit_us))) => format!("held {limit_us} us (blkqos lease)"),
                (_, Some(None)) => "none (blkqos lease)".into(),
            });
            row
        })
        .collect();
    let cpus = table(style, &header, &rows);
    lines.extend(cpus.lines().map(str::to_string));
    lines
}

/// The LEASE cell of the kernel's lease.
fn kernel_lease(lease: &Option<LeaseRead>) -> String {
    match lease {
        None => "-".into(),
        Some(Err(_)) => "?".into(),
        Some(Ok(Lease::Free)) => "none".into(),
        Some(Ok(Lease::Held { limit_us, left_us })) => {
            format!(
                "held {limit_us} us, {:.1} ms left",
                *left_us as f64 / 1000.0
            )
        }
    }
}

/// Raw mode, the alternate screen, no cursor and no line wrap while it
/// lives; [`restore`] puts them back, once.
struct Screen;

static ACTIVE: AtomicBool = AtomicBool::new(false);

impl Screen {
    fn enter() -> std::io::Result<Screen> {
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        // from here a failure returns early and drops `screen`, which puts
        // raw mode (and whatever part of the rest was sent) back
        let screen = Screen;
        let mut out = std::io::stdout();
        queue!(
            out,
            terminal::EnterAlternateScreen,
            terminal::DisableLineWrap,
            cursor::Hide
        )?;
        out.flush()?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = std::io::stdout();
        let _ = queue!(
            out,
            cursor::Show,
            terminal::EnableLineWrap,
            terminal::LeaveAlternateScreen
        );
        let _ = out.flush();
        let _ = terminal::disable_raw_mode();
    }
}

fn draw(lines: &[String]) -> std::io::Result<()> {
    let mut out = std::io::stdout();
    let (_, height) = terminal::size().unwrap_or((80, 24));
    for (row, line) in lines.iter().take(usize::from(height)).enumerate() {
        // `row` < the terminal's height, a u16
        let row = u16::try_from(row).unwrap_or(u16::MAX);
        queue!(
            out,
            cursor::MoveTo(0, row),
            crossterm::style::Print(line),
            terminal::Clear(terminal::ClearType::UntilNewLine)
        )?;
    }
    queue!(out, terminal::Clear(terminal::ClearType::FromCursorDown))?;
    out.flush()
}

/// Whether what the terminal sent ends the view: q, Escape, Ctrl-C (raw
/// mode turns Ctrl-C into a byte instead of a SIGINT). The bytes of an
/// escape sequence (an arrow key, Alt with a key) are not keys: a lone
/// Escape is one only when nothing follows it in the same read, as a
/// terminal sends a sequence in one write.
fn quits(bytes: &[u8]) -> bool {
    const ESC: u8 = 0x1b;
    let mut rest = bytes;
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            b'q' | b'Q' | 0x03 => return true,
            ESC => match rest.split_first() {
                None => return true,
                // CSI: parameters and intermediates up to a final byte
                Some((b'[', tail)) => {
                    let end = tail.iter().position(|c| (0x40..=0x7e).contains(c));
                    rest = end.map_or(&[][..], |i| &tail[i + 1..]);
                }
                // SS3 (F1 to F4, keypad keys): one byte more
                Some((b'O', tail)) => rest = tail.get(1..).unwrap_or(&[]),
                // Alt with a key
                Some((_, tail)) => rest = tail,
            },
            _ => {}
        }
    }
    false
}

/// How often a wait for a key looks at the signal flag: a signal ends the
/// view within this, whatever the interval.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

#[derive(PartialEq)]
enum Input {
    /// No key that quits, or the time ran out, or a signal came.
    Nothing,
    Quit,
    /// The terminal is gone: its reads give end-of-file from now on.
    HungUp,
}

/// Wait on the terminal (standard input, which `top` checked is one) for
/// up to `timeout` and read what it sent. The keys are read here, not by
/// crossterm: its reader reads end-of-file in a loop, for ever, once the
/// terminal hangs up under it.
fn wait_for_input(timeout: Duration) -> std::io::Result<Input> {
    use rustix::event::{PollFd, PollFlags};
    use rustix::io::Errno;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
    // whole milliseconds, rounded up, or the last millisecond is a spin; at
    // most SIGNAL_CHECK, which any Timespec holds
    let ms = u64::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
    match super::poll(&mut fds, Some(Duration::from_millis(ms))) {
        Ok(_) => {}
        // a signal: the caller looks at its flags
        Err(Errno::INTR) => return Ok(Input::Nothing),
        Err(e) => return Err(e.into()),
    }
    let revents = fds[0].revents();
    if revents.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
        return Ok(Input::HungUp);
    }
    if !revents.contains(PollFlags::IN) {
        return Ok(Input::Nothing);
    }
    // raw mode reads what is there, at least a byte, which poll says is
    let mut buf = [0u8; 256];
    match rustix::io::read(&stdin, &mut buf) {
        Ok(0) | Err(Errno::IO) => Ok(Input::HungUp),
        Ok(n) if quits(&buf[..n]) => Ok(Input::Quit),
        Ok(_) | Err(Errno::INTR | Errno::AGAIN) => Ok(Input::Nothing),
        Err(e) => Err(e.into()),
    }
}

/// The log level to put back when the screen goes, on every way out (an
/// error is logged after).
struct Quiet(log::LevelFilter);

impl Drop for Quiet {
    fn drop(&mut self) {
        log::set_max_level(self.0);
    }
}

/// The exit status when the terminal hung up: as a shell reports a
/// process SIGHUP ended.
const HUNG_UP: u8 = 128 + signal_hook::consts::SIGHUP as u8;

/// Draw; a write the terminal refuses with EIO is a hang-up the poll has
/// not seen yet, not an error.
fn drawn(lines: &[String]) -> Result<Input, Error> {
    match draw(lines) {
        Ok(()) => Ok(Input::Nothing),
        Err(e) if rustix::io::Errno::from_io_error(&e) == Some(rustix::io::Errno::IO) => {
            Ok(Input::HungUp)
        }
        Err(e) => Err(Error::Terminal(e)),
    }
}

pub fn top(ctx: &Ctx, interval: Duration) -> Result<u8, Error> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "top draws on a terminal; `blkqos status` or `blkqos metrics` print one reading".into(),
        ));
    }
    let mut view = View::scan(ctx)?;
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        // would dump core (SIGQUIT) or end the process (SIGUSR1/2) with
        // the terminal left raw; SIGPIPE is ignored by the Rust runtime and
        // a failed write is an error, which restores too
        signal_hook::consts::SIGQUIT,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGUSR2,
    ] {
        // the signal's number, so the exit status can say which (128 + n)
        signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)
            .map_err(Error::Terminal)?;
    }
    // a new size is drawn at once, not at the next interval
    let resized = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGWINCH, Arc::clone(&resized))
        .map_err(Error::Terminal)?;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // before the message, or it is printed on the alternate screen and lost
        restore();
        hook(info);
    }));
    let header = format!(
        "blkqos top  every {:.1} s  {}  q quits",
        interval.as_secs_f64(),
        ctx.sysfs.root().display()
    );
    let screen = Screen::enter().map_err(Error::Terminal)?;
    // what the rescans would log (-v) would land on the screen, raw
    let quiet = Quiet(log::max_level());
    log::set_max_level(log::LevelFilter::Off);
    let mut prev = view.sample(ctx);
    let mut lines = frame(ctx.style, &header, &prev, &prev);
    let hung_up = drawn(&lines)? == Input::HungUp;
    let code = 'run: loop {
        if hung_up {
            break 'run HUNG_UP;
        }
        let deadline = Instant::now() + interval;
        loop {
            let sig = signal.load(Ordering::SeqCst);
            if sig != 0 {
                break 'run 128 + u8::try_from(sig).unwrap_or(0);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match wait_for_input(left.min(SIGNAL_CHECK)).map_err(Error::Terminal)? {
                Input::Quit => break 'run 0,
                Input::HungUp => break 'run HUNG_UP,
                Input::Nothing => {}
            }
            if resized.swap(false, Ordering::SeqCst) && drawn(&lines)? == Input::HungUp {
                break 'run HUNG_UP;
            }
        }
        // a failed rescan (a disk half gone) keeps the last view; the
        // next frame tries again
        if let Ok(v) = View::scan(ctx) {
            view = v;
        }
        let cur = view.sample(ctx);
        lines = frame(ctx.style, &header, &prev, &cur);
        if drawn(&lines)? == Input::HungUp {
            break 'run HUNG_UP;
        }
        prev = cur;
    };
    drop(quiet);
    drop(screen);
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Ctx;
    use crate::fixture::Fixture;
    use crate::state::StateDir;
    use crate::sysfs::Sysfs;

    #[test]
    fn q_escape_and_ctrl_c_quit_and_escape_sequences_do_not() {
        for keys in [&b"q"[..], b"Q", b"\x03", b"\x1b", b"xyq", b"\x1b[Aq"] {
            assert!(quits(keys), "{keys:?}");
        }
        // arrows, F1 (SS3), F5 and Shift-Up (CSI with parameters), Alt-q,
        // a sequence cut short: none is a key that quits
        for keys in [
            &b"x"[..],
            b"\x1b[A",
            b"\x1bOP",
            b"\x1bOq",
            b"\x1b[15~",
            b"\x1b[1;2A",
            b"\x1bq",
            b"\x1b[1;",
            b"",
        ] {
            assert!(!quits(keys), "{keys:?}");
        }
    }

    #[test]
    fn a_frame_shows_rates_limits_residency_and_leases() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut f = Fixture::new(dir.path(), 2, Abi::Queue);
        let disk = f.nvme(0, "SAMSUNG MZQL21T9HCJR-00A07", "S64GNE0R100001");
        f.put(&format!("block/{disk}/queue/cpu_lat_limit_us"), "4");
        f.set_lease(1, Some((4, 2500)));
        let ctx = Ctx {
            sysfs: Sysfs::new(dir.path()),
            state: StateDir::new(dir.path().join("state")),
            style: Style::detect(),
        };
        let view = View::scan(&ctx).expect("scan");
        let before = view.sample(&ctx);
        f.set_stat(&disk, 500, 0);
        f.put("devices/system/cpu/cpu0/cpuidle/state3/time", "1500000");
        let mut after = view.sample(&ctx);
        after.at = before.at + Duration::from_secs(1);

        let first = frame(ctx.style, "h", &before, &before).join("\n");
        assert!(
            first.contains("nvme0n1  -       -        4 us   3 ms"),
            "{first}"
        );
        let text = frame(ctx.style, "h", &before, &after).join("\n");
        assert!(
            text.contains("nvme0n1  500     0        4 us   3 ms"),
            "{text}"
        );
        // C6's time went from 1 000 000 us (the fixture's) to 1 500 000 in 1 s
        let cpu0 = text.lines().find(|l| l.starts_with("cpu0")).expect("cpu0");
        assert!(cpu0.contains("50.0%") && cpu0.ends_with("none"), "{cpu0}");
        let cpu1 = text.lines().find(|l| l.starts_with("cpu1")).expect("cpu1");
        assert!(cpu1.ends_with("held 4 us, 2.5 ms left"), "{cpu1}");
        assert!(
            text.contains("CPU   POLL  C1    C1E   C6     LEASE"),
            "{text}"
        );
    }

    #[test]
    fn a_frame_names_the_user_space_lease_where_the_kernel_has_none() {
        use crate::lease::published::CpuLease;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut f = Fixture::new(dir.path(), 3, Abi::None);
        f.nvme(0, "M", "S");
        let ctx = Ctx {
            sysfs: Sysfs::new(dir.path()),
            state: StateDir::new(dir.path().join("state")),
            style: Style::detect(),
        };
        let view = View::scan(&ctx).expect("scan");
        let mut s = view.sample(&ctx);
        assert!(s.user.is_none(), "no blkqos lease runs");
        let cpu = |limit_us| CpuLease {
            limit_us,
            timeout_ms: 3,
            disks: vec![],
        };
        s.user = Some(Published {
            pid: 1,
            detect: "tracepoint".into(),
            cpus: [(0, cpu(Some(10))), (1, cpu(None))].into(),
        });
        s.user
            .as_mut()
            .expect("set")
            .cpus
            .get_mut(&0)
            .expect("cpu0")
            .disks = vec!["nvme0n1".into()];
        let text = frame(ctx.style, "h", &s, &s).join("\n");
        let row = |c: &str| {
            text.lines()
                .find(|l| l.starts_with(c))
                .expect(c)
                .to_string()
        };
        assert!(row("cpu0").ends_with("held 10 us (blkqos lease)"), "{text}");
        assert!(row("cpu1").ends_with("none (blkqos lease)"), "{text}");
        assert!(row("cpu2").ends_with(" -"), "{text}");
        // the disk it holds shows the lease's limit and timeout, not "-"
        let disk = row("nvme0n1");
        assert!(
            disk.contains("10 us (lease)") && disk.ends_with("3 ms"),
            "{text}"
        );
    }

    #[test]
    fn control_characters_in_knob_values_are_escaped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut f = Fixture::new(dir.path(), 1, Abi::Queue);
        let disk = f.nvme(0, "M", "S");
        f.put(&format!("block/{disk}/queue/cpu_lat_limit_us"), "\x1b[2J");
        f.put(&format!("block/{disk}/queue/cpu_lat_timeout_ms"), "3\x07");
        let ctx = Ctx {
            sysfs: Sysfs::new(dir.path()),
            state: StateDir::new(dir.path().join("state")),
            style: Style::detect(),
        };
        let view = View::scan(&ctx).expect("scan");
        let s = view.sample(&ctx);
        let text = frame(ctx.style, "h", &s, &s).join("\n");
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
        assert!(
            text.contains(r"\x1b[2J us") && text.contains(r"3\x07 ms"),
            "{text}"
        );
    }
}
