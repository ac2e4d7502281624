#![deny(unsafe_code)]

use blkqos::cli::{Cli, Command};
use blkqos::cmd::{self, Ctx};
use blkqos::error::{EXIT_FAILED, EXIT_VERIFY_TROUBLE, Error};
use blkqos::report::Style;
use blkqos::state::StateDir;
use blkqos::sysfs::Sysfs;
use clap::Parser;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => refuse_arguments(e),
    };
    let to_syslog = cli.logs_to_syslog(std::io::stderr().is_terminal());
    blkqos::logging::init(to_syslog, cli.log_level());
    let ctx = Ctx {
        sysfs: Sysfs::new(&cli.sysfs),
        state: StateDir::new(&cli.state_dir).with_lock_timeout(cli.lock_timeout),
        style: Style::detect(),
    };
    let mut out = String::new();
    let result = run(&ctx, &cli.command, &mut out);
    let json = wants_json(&cli.command);
    if let (Err(e), Some(dry_run)) = (&result, json)
        && out.is_empty()
    {
        // --json prints one document, also when the command failed
        out = cmd::error_doc(cli.command.name(), dry_run, e);
    }
    if cli.quiet && json.is_none() {
        out.clear();
    }
    // A closed pipe (`blkqos list | head`) is a normal end, not an error.
    let printed = std::io::stdout().lock().write_all(out.as_bytes());
    if printed
        .as_ref()
        .is_err_and(|e| e.kind() != std::io::ErrorKind::BrokenPipe)
    {
        return ExitCode::from(EXIT_FAILED);
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            log::error!("{e}");
            ExitCode::from(match cli.command {
                // like diff and cmp: 0 same, 1 differs, 2 could not check
                Command::Verify { .. } => EXIT_VERIFY_TROUBLE,
                _ => e.exit_code(),
            })
        }
    }
}

/// Arguments clap refuses: with --json, the error is a JSON document on
/// stdout too; clap prints its message and usage to stderr either way.
fn refuse_arguments(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let is_help = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if !is_help && args.iter().any(|a| a == "--json") {
        let command = (args.iter())
            .find_map(|a| Command::NAMES.iter().find(|n| **n == a))
            .copied()
            .unwrap_or("blkqos");
        let dry_run = args.iter().any(|a| a == "--dry-run");
        let message = e.kind().as_str().unwrap_or("invalid arguments").to_string();
        let doc = cmd::error_doc(command, dry_run, &Error::Usage(message));
        let _ = std::io::stdout().lock().write_all(doc.as_bytes());
    }
    e.exit()
}

fn run(ctx: &Ctx, command: &Command, out: &mut String) -> Result<u8, Error> {
    if !matches!(command, Command::Check { .. }) {
        ctx.sysfs.check_tree()?;
    }
    match command {
        Command::List { json } => cmd::list::list(ctx, *json, out),
        Command::Check {
            profile,
            json,
            no_owner_check,
        } => cmd::check::check(profile, *json, !*no_owner_check, out),
        Command::Apply {
            profile,
            dry_run,
            json,
            devices,
        } => cmd::apply::apply(ctx, profile, *dry_run, *json, devices, out),
        Command::Verify { profile, json } => cmd::verify::verify(ctx, profile, *json, out),
        Command::Restore {
            dry_run,
            json,
            devices,
            forget_missing,
            forget_replaced,
        } => {
            let forget = blkqos::engine::Forget {
                missing: *forget_missing,
                replaced: *forget_replaced,
            };
            cmd::restore::restore(ctx, *dry_run, *json, devices, forget, out)
        }
        Command::Status { json } => cmd::status::status(ctx, *json, out),
        Command::Explain { args, json } => {
            let (profile, device) = Command::explain_args(args);
            cmd::explain::explain(ctx, &profile, device, *json, out)
        }
        Command::Udev {
            action,
            devpath,
            diskseq,
            disk_media_change,
            profile,
        } => cmd::hotplug::udev(
            ctx,
            &cmd::hotplug::Env {
                action: action.as_deref(),
                devpath: devpath.as_deref(),
                diskseq: *diskseq,
                media_change: *disk_media_change,
            },
            profile,
        ),
        Command::Coldplug { profile } => cmd::hotplug::coldplug(ctx, profile),
        Command::Metrics {
            profile, output, ..
        } => cmd::metrics::metrics(ctx, profile, output.as_deref(), out),
        Command::Lease {
            profile,
            detect,
            idle_look,
            min_ios,
            put_back,
            unless_kernel_lease,
            with_parent,
        } => cmd::lease::lease(
            ctx,
            &cmd::lease::Options {
                profile,
                detect: *detect,
                idle_look: *idle_look,
                min_ios: *min_ios,
                put_back: *put_back,
                unless_kernel_lease: *unless_kernel_lease,
                with_parent: *with_parent,
            },
        ),
        Command::Probe {
            devices,
            profile,
            duration,
            limits,
            timeout,
            json,
            plot,
            cpu,
            ..
        } => cmd::probe::probe(
            ctx,
            &cmd::probe::Options {
                devices,
                profile,
                duration: *duration,
                limits,
                timeout_ms: *timeout,
                json: *json,
                plot: plot.as_deref(),
                cpu: *cpu,
            },
            out,
        ),
        Command::Top { interval, .. } => cmd::top::top(ctx, *interval),
    }
}

/// With --json, whether it is a dry run; `None` without --json.
fn wants_json(c: &Command) -> Option<bool> {
    match c {
        Command::List { json }
        | Command::Verify { json, .. }
        | Command::Status { json }
        | Command::Check { json, .. }
        | Command::Explain { json, .. } => json.then_some(false),
        Command::Apply { json, dry_run, .. } | Command::Restore { json, dry_run, .. } => {
            json.then_some(*dry_run)
        }
        Command::Udev { .. }
        | Command::Coldplug { .. }
        | Command::Metrics { .. }
        | Command::Lease { .. }
        | Command::Top { .. } => None,
        Command::Probe { json, .. } => json.then_some(false),
    }
}
