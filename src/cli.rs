//! Command-line definitions: what the user typed. Everything below this
//! module works with the parsed values, never with strings from argv.

use crate::logging::Target;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "blkqos",
    version,
    about = "Keep CPUs out of deep idle states only while a block device has I/O",
    long_about = "blkqos discovers block devices, matches them against the rules of a TOML \
profile and sets their per-device CPU idle-latency limits (cpu_lat_limit_us, cpu_lat_timeout_ms), \
saving the originals so that `restore` can undo it."
)]
pub struct Cli {
    /// sysfs mount point; a copied or fake tree works like the live one
    #[arg(
        long,
        global = true,
        env = "BLKQOS_SYSFS",
        default_value = "/sys",
        value_name = "DIR"
    )]
    pub sysfs: PathBuf,

    /// Where saved originals and the lock live
    #[arg(
        long,
        global = true,
        env = "BLKQOS_STATE_DIR",
        default_value = "/run/blkqos",
        value_name = "DIR"
    )]
    pub state_dir: PathBuf,

    /// How long apply, restore, udev and coldplug wait for another run
    /// holding the lock before they give up with exit status 3
    #[arg(
        long,
        global = true,
        env = "BLKQOS_LOCK_TIMEOUT",
        default_value = "10",
        value_name = "SECONDS",
        value_parser = parse_seconds
    )]
    pub lock_timeout: Duration,

    /// More detail on stderr: each write, what was scanned (-vv: more still)
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,

    /// Print errors only; --json output is still printed
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Where messages go
    #[arg(
        long,
        global = true,
        env = "BLKQOS_LOG",
        value_enum,
        default_value_t = Target::Auto,
        value_name = "TARGET"
    )]
    pub log: Target,

    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    pub fn log_level(&self) -> log::LevelFilter {
        match (self.quiet, self.verbose) {
            (true, _) => log::LevelFilter::Error,
            (false, 0) => log::LevelFilter::Info,
            (false, 1) => log::LevelFilter::Debug,
            (false, _) => log::LevelFilter::Trace,
        }
    }

    /// Whether messages go to syslog: `udev` and `coldplug` run from udev and
    /// systemd, where nobody reads stderr; a person trying them at a
    /// terminal reads it.
    pub fn logs_to_syslog(&self, stderr_is_terminal: bool) -> bool {
        match self.log {
            Target::Stderr => false,
            Target::Syslog => true,
            Target::Auto => {
                matches!(
                    self.command,
                    Command::Udev { .. } | Command::Coldplug { .. }
                ) && !stderr_is_terminal
            }
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List whole disks: identity, transport, stacking, knob ABI, current values
    List {
        /// Print one JSON document instead of the table, errors included
        #[arg(long)]
        json: bool,
    },
    /// Validate a profile and its drop-ins (exit 0 when valid, 2 when not)
    Check {
        /// The profile; drop-ins are read from blkqos.d beside it
        #[arg(default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
        /// Print one JSON document: the files read, or the error
        #[arg(long)]
        json: bool,
        /// Skip the owner and mode checks of the file and its directories:
        /// for a temporary copy checked before it is installed (Ansible's
        /// validate), which apply checks again where it is installed
        #[arg(long)]
        no_owner_check: bool,
    },
    /// Apply a profile: write what differs, read back, roll back on failure
    Apply {
        /// The profile; drop-ins are read from blkqos.d beside it
        #[arg(default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
        /// Show the plan, write nothing
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON document instead of the table, errors included
        #[arg(long)]
        json: bool,
        /// Only this device and the queues it resolves to (repeatable)
        #[arg(long = "device", value_name = "NAME")]
        devices: Vec<String>,
    },
    /// Compare live values with what a profile wants (exit 1 on mismatch, 2 when it cannot check)
    Verify {
        /// The profile; drop-ins are read from blkqos.d beside it
        #[arg(default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
        /// Print one JSON document instead of the table, errors included
        #[arg(long)]
        json: bool,
    },
    /// Put back the original values saved by apply
    Restore {
        /// Show what would be put back, write nothing
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON document instead of the table, errors included
        #[arg(long)]
        json: bool,
        /// Only this device and the queues it resolves to (repeatable)
        #[arg(long = "device", value_name = "NAME")]
        devices: Vec<String>,
        /// Forget the saved originals of devices that are gone even when
        /// all of them are (without it, that is refused as a wrong or
        /// empty sysfs tree); for disks that really were all unplugged
        #[arg(long)]
        forget_missing: bool,
        /// Forget what was saved for disks whose name another disk has now
        /// even when every disk the state names is another one (without
        /// it, that is refused as a state from another boot or machine);
        /// for remove events that were lost
        #[arg(long)]
        forget_replaced: bool,
    },
    /// Per device: knob values, owning rule, per-CPU limits, idle states and residency
    Status {
        /// Print one JSON document instead of the table, errors included
        #[arg(long)]
        json: bool,
    },
    /// Which rule matches a device and why, and which queues it resolves to
    #[command(override_usage = "blkqos explain [PROFILE] <DEVICE> [--json]")]
    Explain {
        /// [PROFILE] DEVICE: the profile, with its drop-ins (default
        /// /etc/blkqos/blkqos.toml), and the device, a kernel name or a /dev path
        #[arg(required = true, num_args = 1..=2, value_names = ["PROFILE", "DEVICE"])]
        args: Vec<String>,
        /// Print one JSON document instead of the explanation, errors included
        #[arg(long)]
        json: bool,
    },
    /// Hotplug entry point for the udev rule: apply PROFILE to the one disk
    /// of the event (add, change), or plan PROFILE again without it
    /// (remove, once the disk has left block/; a remove for a disk still
    /// there is refused): what only it wanted goes back to the saved
    /// originals
    // udev runs it, people do not: kept out of --help, described in blkqos(8)
    #[command(hide = true)]
    Udev {
        /// The event's action; udev sets ACTION
        #[arg(long, env = "ACTION")]
        action: Option<String>,
        /// The event's device path below the sysfs root; udev sets DEVPATH
        #[arg(long, env = "DEVPATH")]
        devpath: Option<String>,
        /// Which disk the event is for (a name is reused, its diskseq
        /// never); udev sets DISKSEQ (kernel 5.15+)
        #[arg(long, env = "DISKSEQ")]
        diskseq: Option<u64>,
        /// A change event for new media in the same disk (a card swapped,
        /// a loop device bound again), whose diskseq the kernel bumps: its
        /// saved originals stay its own; udev sets DISK_MEDIA_CHANGE=1
        #[arg(long, env = "DISK_MEDIA_CHANGE", value_parser = clap::builder::FalseyValueParser::new())]
        disk_media_change: bool,
        /// The profile; drop-ins are read from blkqos.d beside it
        #[arg(default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
    },
    /// Apply PROFILE to every present disk (what the boot unit runs)
    Coldplug {
        /// The profile; drop-ins are read from blkqos.d beside it
        #[arg(default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
    },
    /// Knobs, leases, idle-state and I/O counters as Prometheus text (for
    /// the node_exporter textfile collector)
    Metrics {
        /// The profile the rule labels come from; without a readable one
        /// they are empty (a warning says why) and the rest is printed
        #[arg(default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
        /// Write FILE atomically (mode 0644) instead of printing: a
        /// temporary beside it, renamed over it; no link may be in the
        /// path, and only a regular file is replaced; "-" prints
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        no_lock: NoLock,
    },
    /// Hold the CPUs that serve a disk out of deep idle states while it
    /// has I/O, from user space: for kernels without the queue knobs
    /// (runs in the foreground; SIGHUP reads the profile again)
    Lease {
        /// The profile; drop-ins are read from blkqos.d beside it
        #[arg(default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
        /// How the first I/O after a lapse is seen
        #[arg(long, value_enum, default_value_t = crate::cmd::lease::Detect::Auto)]
        detect: crate::cmd::lease::Detect,
        /// How often each disk's stat is read while no lease holds, when
        /// the tracepoint is not used
        #[arg(long, default_value = "1", value_name = "SECONDS", value_parser = parse_interval)]
        idle_look: Duration,
        /// I/Os within one timeout a disk whose last hold saw a single
        /// I/O must show before its CPUs are held again: 2 keeps trickle
        /// I/O (further apart than the timeout) from holding them at every
        /// I/O; 1 holds at every first I/O, as the kernel lease does
        #[arg(long, default_value_t = crate::lease::policy::MIN_IOS, value_name = "N",
              value_parser = clap::value_parser!(u64).range(1..=1000000))]
        min_ios: u64,
        /// Put back the values a killed run left, then exit (the unit's
        /// stop step)
        #[arg(long)]
        put_back: bool,
        /// Exit at once, status 1, when the kernel has its own lease (the
        /// queue knobs); 0 when it has none: the unit's ExecCondition
        #[arg(long, conflicts_with = "put_back")]
        unless_kernel_lease: bool,
        /// Stop (putting the CPUs back) when process PID, which started
        /// this one, ends: `blkqos probe`'s child
        #[arg(long, hide = true, value_name = "PID")]
        with_parent: Option<u32>,
    },
    /// Measure what the lease buys here: 4 KiB random O_DIRECT reads at
    /// QD1 and in bursts under the machine as found (deep), the CPUs held
    /// at C1, and the lease at each limit, interleaved, each twice a
    /// round; prints the loosest limit as good as C1 as a profile rule.
    /// Reads only; puts back every value it writes
    Probe {
        /// Disks (names or /dev paths) or large regular files on them;
        /// without any, each disk the profile's rules match
        devices: Vec<String>,
        /// The profile whose rules name the disks when none is given
        #[arg(long, default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
        /// Seconds the measurement aims at in all; never fewer than 5
        /// rounds of every configuration twice (runs of 0.2 s at least,
        /// each lease run starting a lease), which may take longer
        #[arg(long, default_value = "60", value_name = "SECONDS", value_parser = parse_duration_probe)]
        duration: Duration,
        /// The lease's limits to try, in us: "auto" is the profile's auto
        #[arg(long, value_delimiter = ',', default_value = "auto,0", value_name = "LIMIT,...", value_parser = parse_probe_limit)]
        limits: Vec<Option<u64>>,
        /// The lease's timeout in ms (the profile's default)
        #[arg(long, default_value_t = crate::abi::knobs::TIMEOUT_DEFAULT_MS, value_name = "MS",
              value_parser = clap::value_parser!(u64).range(1..=60000))]
        timeout: u64,
        /// Print one JSON document (schemas/probe.schema.json)
        #[arg(long)]
        json: bool,
        /// Write the plot (p99 latency against deep residency) as SVG
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// Issue the reads from this CPU, one of those serving the disk
        /// (default: the last of them)
        #[arg(long, value_name = "N")]
        cpu: Option<u32>,
    },
    /// Live view: per disk IOPS and the limit in force, per CPU the share of
    /// time in each idle state and the lease, disks and CPUs scanned again
    /// every interval; q quits, a hang-up of the terminal ends it (129)
    Top {
        /// Seconds between refreshes (0.1 to 3600)
        #[arg(long, default_value = "1", value_name = "SECONDS", value_parser = parse_interval)]
        interval: Duration,
        #[command(flatten)]
        no_lock: NoLock,
    },
}

/// `--lock-timeout` for a command that takes no lock: accepted, as it was
/// when the global option was shown there (scripts pass it to every
/// command), and ignored, but hidden from its help. A local argument with
/// the global's id keeps clap from propagating the global one here.
#[derive(Debug, Clone, clap::Args)]
pub struct NoLock {
    /// Ignored: this command takes no lock
    #[arg(long = "lock-timeout", id = "lock_timeout", hide = true, value_name = "SECONDS", value_parser = parse_seconds)]
    pub lock_timeout: Option<Duration>,
}

impl Command {
    /// `explain`'s profile and device, from its one or two arguments.
    pub fn explain_args(args: &[String]) -> (PathBuf, &str) {
        match args {
            [profile, device] => (PathBuf::from(profile), device),
            [device] => (PathBuf::from(DEFAULT_PROFILE), device),
            // clap takes one or two (num_args); `device` is then empty,
            // which no device is called
            _ => (PathBuf::from(DEFAULT_PROFILE), ""),
        }
    }

    /// Every subcommand's name.
    pub const NAMES: [&'static str; 13] = [
        "list", "check", "apply", "verify", "restore", "status", "explain", "udev", "coldplug",
        "metrics", "lease", "probe", "top",
    ];

    /// The subcommand's name, as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::List { .. } => "list",
            Command::Check { .. } => "check",
            Command::Apply { .. } => "apply",
            Command::Verify { .. } => "verify",
            Command::Restore { .. } => "restore",
            Command::Status { .. } => "status",
            Command::Explain { .. } => "explain",
            Command::Udev { .. } => "udev",
            Command::Coldplug { .. } => "coldplug",
            Command::Metrics { .. } => "metrics",
            Command::Lease { .. } => "lease",
            Command::Probe { .. } => "probe",
            Command::Top { .. } => "top",
        }
    }
}

/// The probe's duration: 1 s to a day.
fn parse_duration_probe(s: &str) -> Result<Duration, String> {
    parse_seconds(s)
        .ok()
        .filter(|d| d.as_secs_f64() >= 1.0)
        .ok_or_else(|| format!("expected seconds from 1 to 86400, found {s:?}"))
}

/// One of the probe's limits: "auto" (None) or microseconds.
fn parse_probe_limit(s: &str) -> Result<Option<u64>, String> {
    match s.trim() {
        "auto" => Ok(None),
        t => t
            .parse::<u64>()
            .ok()
            .filter(|v| *v <= crate::abi::knobs::LIMIT_MAX_US)
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "expected \"auto\" or microseconds from 0 to {}, found {s:?}",
                    crate::abi::knobs::LIMIT_MAX_US
                )
            }),
    }
}

/// A number of seconds, fractions allowed, up to a day.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| (0.0..=86_400.0).contains(v))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?}: expected a number of seconds from 0 to 86400"))
}

/// A refresh interval: long enough not to spin, short enough to watch.
fn parse_interval(s: &str) -> Result<Duration, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| (0.1..=3600.0).contains(v))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{s:?}: expected a number of seconds from 0.1 to 3600"))
}

/// Where the package installs the profile the udev rule and the boot unit use.
pub const DEFAULT_PROFILE: &str = "/etc/blkqos/blkqos.toml";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udev_and_coldplug_log_to_syslog_unless_at_a_terminal() {
        let cli = |args: &[&str]| Cli::try_parse_from(args).expect("parses");
        let udev = cli(&[
            "blkqos",
            "udev",
            "--action",
            "add",
            "--devpath",
            "/devices/x",
        ]);
        assert!(udev.logs_to_syslog(false));
        assert!(!udev.logs_to_syslog(true));
        assert!(cli(&["blkqos", "coldplug"]).logs_to_syslog(false));
        assert!(!cli(&["blkqos", "apply", "p.toml"]).logs_to_syslog(false));
        assert!(!cli(&["blkqos", "--log", "stderr", "coldplug"]).logs_to_syslog(false));
        assert!(cli(&["blkqos", "--log", "syslog", "list"]).logs_to_syslog(true));
        assert_eq!(
            cli(&["blkqos", "-q", "list"]).log_level(),
            log::LevelFilter::Error
        );
        assert_eq!(
            cli(&["blkqos", "-vv", "list"]).log_level(),
            log::LevelFilter::Trace
        );
        assert!(Cli::try_parse_from(["blkqos", "-q", "-v", "list"]).is_err());
        assert_eq!(
            cli(&["blkqos", "list"]).lock_timeout,
            crate::state::DEFAULT_LOCK_TIMEOUT
        );
        assert_eq!(
            cli(&["blkqos", "--lock-timeout", "0.5", "list"]).lock_timeout,
            Duration::from_millis(500)
        );
        for bad in ["-1", "soon", "NaN", "1e9"] {
            assert!(Cli::try_parse_from(["blkqos", "--lock-timeout", bad, "list"]).is_err());
        }
    }

    #[test]
    fn every_command_that_takes_a_profile_defaults_to_the_installed_one() {
        let profile = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).expect("parses");
            match cli.command {
                Command::Check { profile, .. }
                | Command::Apply { profile, .. }
                | Command::Verify { profile, .. }
                | Command::Udev { profile, .. }
                | Command::Coldplug { profile }
                | Command::Metrics { profile, .. } => profile,
                Command::Explain { args, .. } => Command::explain_args(&args).0,
                other => panic!("{} takes no profile", other.name()),
            }
        };
        for cmd in ["check", "apply", "verify", "udev", "coldplug", "metrics"] {
            assert_eq!(profile(&["blkqos", cmd]), PathBuf::from(DEFAULT_PROFILE));
            assert_eq!(
                profile(&["blkqos", cmd, "my.toml"]),
                PathBuf::from("my.toml")
            );
        }
        assert_eq!(
            profile(&["blkqos", "explain", "nvme0n1"]),
            PathBuf::from(DEFAULT_PROFILE)
        );
        assert_eq!(
            profile(&["blkqos", "explain", "my.toml", "nvme0n1"]),
            PathBuf::from("my.toml")
        );
        let explain = Cli::try_parse_from(["blkqos", "explain", "nvme0n1"]).expect("parses");
        let Command::Explain { args, .. } = explain.command else {
            panic!("explain parses as explain")
        };
        assert_eq!(Command::explain_args(&args).1, "nvme0n1");
        assert!(Cli::try_parse_from(["blkqos", "explain"]).is_err());
        assert!(Cli::try_parse_from(["blkqos", "explain", "a", "b", "c"]).is_err());
    }

    #[test]
    fn every_argument_and_subcommand_has_help() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            if cmd.get_about().is_none() {
                missing.push(path.clone());
            }
            for arg in cmd.get_arguments() {
                if arg.get_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &path, missing);
            }
        }
        let mut cli = Cli::command();
        // help and version are added when the command is built
        cli.build();
        let mut missing = Vec::new();
        walk(&cli, "", &mut missing);
        assert!(missing.is_empty(), "without help text: {missing:?}");
    }

    #[test]
    fn udev_is_hidden_from_the_help_but_parses() {
        use clap::CommandFactory;
        let help = Cli::command().render_help().to_string();
        let listed = |name: &str| help.lines().any(|l| l.trim_start().starts_with(name));
        assert!(!listed("udev "), "{help}");
        assert!(listed("coldplug "), "{help}");
        assert!(Cli::try_parse_from(["blkqos", "udev", "--action", "add"]).is_ok());
    }

    #[test]
    fn every_subcommand_has_its_name_listed() {
        use clap::CommandFactory;
        let mut names: Vec<String> = (Cli::command().get_subcommands())
            .map(|c| c.get_name().to_string())
            .collect();
        names.sort();
        let mut listed: Vec<&str> = Command::NAMES.to_vec();
        listed.sort();
        assert_eq!(names, listed);
    }

    #[test]
    fn the_lock_timeout_is_offered_only_where_the_lock_is_taken() {
        let mut cli = <Cli as clap::CommandFactory>::command();
        cli.build();
        // (clap's own `help` subcommand is not given the global options)
        for sub in (cli.get_subcommands_mut()).filter(|s| s.get_name() != "help") {
            let help = sub.render_help().to_string();
            let lock = matches!(sub.get_name(), "metrics" | "top");
            assert_eq!(
                help.contains("--lock-timeout"),
                !lock,
                "{}: {help}",
                sub.get_name()
            );
        }
        // still accepted there, as before (scripts, BLKQOS_LOCK_TIMEOUT)
        assert!(Cli::try_parse_from(["blkqos", "--lock-timeout", "1", "metrics"]).is_ok());
        assert!(Cli::try_parse_from(["blkqos", "metrics", "--lock-timeout", "1"]).is_ok());
    }
}
