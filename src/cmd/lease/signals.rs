//! The lease's wake-ups besides I/O: signals through a self-pipe, and udev's
//! hotplug events.

use super::*;

/// SIGTERM and SIGINT end the run, SIGHUP reloads: each writes a byte to
/// its socket, which the poll loop watches.
pub(super) struct Signals {
    pub(super) term: UnixStream,
    pub(super) hup: UnixStream,
    pub(super) _writers: [UnixStream; 2],
}

impl Signals {
    pub(super) fn new() -> std::io::Result<Signals> {
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
pub(super) fn drain(mut s: &UnixStream) -> bool {
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
pub(super) fn hotplug_monitor() -> Option<udev::MonitorSocket> {
    let m = udev::MonitorBuilder::new()
        .and_then(|b| b.match_subsystem("block"))
        // a CPU that comes online gets its events and its saved original
        .and_then(|b| b.match_subsystem("cpu"))
        .and_then(|b| b.listen());
    match m {
        Ok(m) => Some(m),
        Err(e) => {
            log::warn!(
                "cannot listen to udev ({e}): disks and CPUs that come or go are taken at SIGHUP"
            );
            None
        }
    }
}

#[cfg(not(feature = "udev"))]
pub(super) fn hotplug_monitor() -> Option<NoMonitor> {
    log::info!("built without udev: disks that come or go are taken at SIGHUP");
    None
}

/// No monitor: none is ever made, so it has no values.
#[cfg(not(feature = "udev"))]
pub(super) enum NoMonitor {}

#[cfg(not(feature = "udev"))]
impl NoMonitor {
    pub(super) fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match *self {}
    }
    pub(super) fn iter(&self) -> std::iter::Empty<()> {
        match *self {}
    }
}
