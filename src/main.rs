use blkqos::cli::{Cli, Command};
use blkqos::cmd::{self, Ctx};
use blkqos::report::Style;
use blkqos::state::StateDir;
use blkqos::sysfs::Sysfs;
use clap::Parser;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let to_syslog = cli.logs_to_syslog(std::io::stderr().is_terminal());
    blkqos::logging::init(to_syslog, cli.log_level());
    let ctx = Ctx {
        sysfs: Sysfs::new(&cli.sysfs),
        state: StateDir::new(&cli.state_dir),
        style: Style::detect(),
    };
    let mut out = String::new();
    let result = match &cli.command {
        Command::Check { .. } => Ok(()),
        _ => ctx.sysfs.check_tree(),
    };
    if let Err(e) = result {
        log::error!("{e}");
        return ExitCode::from(blkqos::error::Error::from(e).exit_code());
    }
    let result = match &cli.command {
        Command::List { json } => cmd::list::list(&ctx, *json, &mut out),
        Command::Check { profile } => cmd::check::check(profile, &mut out),
        Command::Apply {
            profile,
            dry_run,
            json,
            devices,
        } => cmd::apply::apply(&ctx, profile, *dry_run, *json, devices, &mut out),
        Command::Verify { profile, json } => cmd::verify::verify(&ctx, profile, *json, &mut out),
        Command::Restore {
            dry_run,
            json,
            devices,
        } => cmd::restore::restore(&ctx, *dry_run, *json, devices, &mut out),
        Command::Status { json } => cmd::status::status(&ctx, *json, &mut out),
        Command::Explain { profile, device } => {
            cmd::explain::explain(&ctx, profile, device, &mut out)
        }
        Command::Udev {
            action,
            devpath,
            profile,
        } => cmd::hotplug::udev(&ctx, action.as_deref(), devpath.as_deref(), profile),
        Command::Coldplug { profile } => cmd::hotplug::coldplug(&ctx, profile),
    };
    if cli.quiet && !wants_json(&cli.command) {
        out.clear();
    }
    // A closed pipe (`blkqos list | head`) is a normal end, not an error.
    let printed = std::io::stdout().lock().write_all(out.as_bytes());
    if printed
        .as_ref()
        .is_err_and(|e| e.kind() != std::io::ErrorKind::BrokenPipe)
    {
        return ExitCode::from(blkqos::error::EXIT_FAILED);
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            log::error!("{e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn wants_json(c: &Command) -> bool {
    match c {
        Command::List { json }
        | Command::Apply { json, .. }
        | Command::Verify { json, .. }
        | Command::Restore { json, .. }
        | Command::Status { json } => *json,
        Command::Check { .. }
        | Command::Explain { .. }
        | Command::Udev { .. }
        | Command::Coldplug { .. } => false,
    }
}
