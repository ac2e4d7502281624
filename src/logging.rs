//! Where messages go: stderr for a person at a terminal, syslog (which the
//! journal collects) when udev or systemd started the command.
//!
//! udev keeps a RUN program's stdout and stderr only in its own debug log,
//! so an event that went wrong would leave no trace anywhere an
//! administrator looks; hence `/dev/log`, and `/dev/kmsg` in early boot
//! before any syslog socket exists. Every message about one device starts
//! with the device's kernel name.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::Mutex;

/// The syslog socket; journald serves it on systemd hosts.
pub const SYSLOG_SOCKET: &str = "/dev/log";
const KMSG: &str = "/dev/kmsg";
/// syslog facility LOG_DAEMON, already shifted (RFC 5424: facility * 8).
const FACILITY_DAEMON: u8 = 3 << 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// syslog for `udev` and `coldplug` when stderr is not a terminal, else stderr
    Auto,
    Stderr,
    /// /dev/log, falling back to /dev/kmsg, then stderr
    Syslog,
}

enum Sink {
    Stderr,
    Socket(UnixDatagram),
    Kmsg(File),
}

struct Logger {
    level: LevelFilter,
    sink: Mutex<Sink>,
}

impl Sink {
    fn syslog(socket: &Path) -> Sink {
        if let Ok(s) = UnixDatagram::unbound()
            && s.connect(socket).is_ok()
        {
            return Sink::Socket(s);
        }
        match OpenOptions::new().write(true).open(KMSG) {
            Ok(f) => Sink::Kmsg(f),
            Err(_) => Sink::Stderr,
        }
    }

    fn emit(&mut self, level: Level, msg: &str) {
        // A message is one record: a newline from a sysfs value or an error
        // text would otherwise start a forged record of its own, and an
        // escape sequence would reach the terminal of whoever reads it.
        let msg = crate::report::escape_control(msg).into_owned();
        let sent = match self {
            Sink::Stderr => {
                let prefix = match level {
                    Level::Error => "error: ",
                    Level::Warn => "warning: ",
                    Level::Debug | Level::Trace => "debug: ",
                    Level::Info => "",
                };
                writeln!(std::io::stderr().lock(), "blkqos: {prefix}{msg}")
            }
            Sink::Socket(s) => s.send(syslog_line(level, &msg).as_bytes()).map(drop),
            // Without the newline the kernel holds the record open for a
            // continuation and dmesg does not show it yet.
            Sink::Kmsg(f) => f.write_all(format!("{}\n", syslog_line(level, &msg)).as_bytes()),
        };
        // Losing the syslog daemon mid-run must not lose the message.
        if sent.is_err() && !matches!(self, Sink::Stderr) {
            *self = Sink::Stderr;
            self.emit(level, &msg);
        }
    }
}

/// `<PRI>blkqos[PID]: message`: the form both syslog daemons and the
/// kernel log take; the receiver adds the time and host.
pub fn syslog_line(level: Level, msg: &str) -> String {
    let severity = match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    };
    format!(
        "<{}>blkqos[{}]: {msg}",
        FACILITY_DAEMON + severity,
        std::process::id()
    )
}

impl Log for Logger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= self.level
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        // A poisoned lock only means another thread panicked mid-message.
        let mut sink = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        sink.emit(r.level(), &r.args().to_string());
    }

    fn flush(&self) {}
}

/// Install the logger; `to_syslog` is what `Target::Auto` resolved to.
pub fn init(to_syslog: bool, level: LevelFilter) {
    let sink = if to_syslog {
        Sink::syslog(Path::new(SYSLOG_SOCKET))
    } else {
        Sink::Stderr
    };
    // Only fails when a logger is already set, which main does once.
    let _ = log::set_boxed_logger(Box::new(Logger {
        level,
        sink: Mutex::new(sink),
    }));
    log::set_max_level(level);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_records_carry_priority_tag_and_one_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let server = UnixDatagram::bind(&path).expect("bind");
        let mut sink = Sink::syslog(&path);
        assert!(matches!(sink, Sink::Socket(_)));
        sink.emit(Level::Warn, "nvme0n1: x\nforged");
        let mut buf = [0u8; 256];
        let n = server.recv(&mut buf).expect("recv");
        let got = String::from_utf8_lossy(&buf[..n]).into_owned();
        let pid = std::process::id();
        assert_eq!(got, format!("<28>blkqos[{pid}]: nvme0n1: x\\nforged"));
        assert!(syslog_line(Level::Error, "e").starts_with("<27>"));
        assert!(syslog_line(Level::Info, "i").starts_with("<30>"));
    }
}
