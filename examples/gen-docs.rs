//! Writes the man page and the shell completions, generated from the
//! command-line definitions, into a directory (the Debian package ships
//! them): `cargo run --example gen-docs -- target/gen`.
//!
//! clap_mangen covers the synopsis, options and commands; the sections it
//! has no notion of are appended here, from the same definitions and
//! constants where they exist, so that they follow the CLI as it changes.
//! The profile format's page, blkqos.toml(5), is written by hand in man/.

#![deny(unsafe_code)]

use blkqos::cli::{Cli, DEFAULT_PROFILE};
use blkqos::error::{EXIT_BUSY, EXIT_FAILED, EXIT_USAGE, EXIT_VERIFY_TROUBLE};
use blkqos::profile::DROP_IN_DIR;
use clap::{Command, CommandFactory};
use clap_complete::Shell;
use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let out = PathBuf::from(std::env::args_os().nth(1).ok_or("usage: gen-docs DIR")?);
    fs::create_dir_all(&out)?;
    let cmd = Cli::command();
    for (file, page) in pages()? {
        fs::write(out.join(file), page)?;
    }
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd.clone(), "blkqos", &out)?;
    }
    Ok(())
}

/// Every page: blkqos(8), then one per subcommand (blkqos-apply(8), ...),
/// which blkqos(8)'s SUBCOMMANDS section names.
pub fn pages() -> Result<Vec<(String, String)>, Box<dyn Error>> {
    let mut pages = vec![("blkqos.8".to_string(), man_page()?)];
    let mut cmd = Cli::command();
    // built, as blkqos(8) is rendered: clap's own `help` subcommand, which
    // its SUBCOMMANDS section names too, is there
    cmd.build();
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("blkqos-{}", sub.get_name());
        let mut page = Vec::new();
        // clap names a command by a &'static str (an owned name needs its
        // "string" feature in the binary): this generator runs once, the
        // dozen names it leaks go with it
        let leaked: &'static str = Box::leak(name.clone().into_boxed_str());
        let sub = (sub.clone())
            .name(leaked)
            .bin_name(format!("blkqos {}", sub.get_name()));
        clap_mangen::Man::new(sub)
            .title(name.as_str())
            .section("8")
            .source(format!("blkqos {}", env!("CARGO_PKG_VERSION")))
            .render(&mut page)?;
        let mut page = String::from_utf8(page)?;
        writeln!(
            page,
            ".SH \"SEE ALSO\"\n.BR blkqos (8)\nfor the options every command takes (\\fB\\-\\-sysfs\\fR, \\fB\\-\\-state\\-dir\\fR, ...), the exit status and the files;\n.BR blkqos.toml (5)\nfor the profile."
        )?;
        pages.push((format!("{name}.8"), page));
    }
    Ok(pages)
}

/// blkqos(8).
pub fn man_page() -> Result<String, Box<dyn Error>> {
    let cmd = Cli::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .section("8")
        .render(&mut page)?;
    let mut page = String::from_utf8(page)?;
    page.push_str(&hidden_commands(&cmd)?);
    page.push_str(&extra_sections(&cmd)?);
    Ok(page)
}

/// Subcommands kept out of --help (`udev`, which udev runs, not people)
/// and so out of clap_mangen's SUBCOMMANDS: described here from the same
/// definitions.
fn hidden_commands(cmd: &Command) -> Result<String, std::fmt::Error> {
    let mut s = String::new();
    for sub in cmd.get_subcommands().filter(|c| c.is_hide_set()) {
        let mut sub = sub.clone();
        let usage = sub.render_usage().to_string();
        let usage = usage.trim_start_matches("Usage: ").replacen(
            sub.get_name(),
            &format!("blkqos {}", sub.get_name()),
            1,
        );
        writeln!(s, ".SH \"THE {} COMMAND\"", sub.get_name().to_uppercase())?;
        writeln!(s, ".B {}", roff(&usage))?;
        writeln!(s, ".PP")?;
        let about = (sub.get_long_about().or(sub.get_about()))
            .map(|a| a.to_string())
            .unwrap_or_default();
        writeln!(s, "{}", roff(&about))?;
        for a in sub.get_arguments().filter(|a| a.get_id() != "help") {
            let name = match (a.get_long(), a.get_value_names()) {
                (Some(long), _) => format!("\\-\\-{}", roff(long)),
                (None, Some(names)) => names.iter().map(|n| roff(n)).collect::<Vec<_>>().join(" "),
                (None, None) => roff(a.get_id().as_str()).to_uppercase(),
            };
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            writeln!(s, ".TP\n\\fB{name}\\fR\n{}", roff(&help))?;
        }
    }
    Ok(s)
}

fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(".", |(dir, _)| dir)
}

/// Text as roff: a backslash is an escape and a leading dot or quote a
/// request; `-` is a hyphen, `\-` the minus of options and paths.
fn roff(text: &str) -> String {
    let t = text.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

fn extra_sections(cmd: &Command) -> Result<String, std::fmt::Error> {
    let state_dir = cmd
        .get_arguments()
        .find(|a| a.get_id() == "state_dir")
        .and_then(|a| a.get_default_values().first())
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut s = String::new();
    writeln!(s, ".SH \"EXIT STATUS\"")?;
    for (code, meaning) in [
        (
            0,
            "Success; for \\fBverify\\fR: the live values match the profile.",
        ),
        (
            EXIT_FAILED,
            "An operation failed and everything this run wrote was rolled back; or a partial run: an attribute that could not be read was left alone, the state could not be saved after the writes (they stand), or \\fBrestore\\fR left out untrusted state entries (each said in a warning); or \\fBverify\\fR found a mismatch.",
        ),
        (
            EXIT_USAGE,
            "A usage or profile error, a wrong sysfs root, or no root where root is needed (for \\fBudev\\fR: an event refused as malformed, or a remove for a disk still present; for \\fBrestore\\fR: every device with a saved original gone at once, without \\fB\\-\\-forget\\-missing\\fR; for \\fBapply\\fR, \\fBrestore\\fR, \\fBudev\\fR and \\fBcoldplug\\fR: every disk the saved state names another disk now, which \\fBrestore \\-\\-forget\\-replaced\\fR forgets); nothing was written. For \\fBverify\\fR: any error, it could not check.",
        ),
        (
            EXIT_BUSY,
            "Another run held the lock longer than \\fB\\-\\-lock\\-timeout\\fR (\\fBapply\\fR, \\fBrestore\\fR, \\fBudev\\fR, \\fBcoldplug\\fR); nothing was written: try again.",
        ),
    ] {
        writeln!(s, ".TP\n.B {code}\n{meaning}")?;
    }
    // verify answers as diff and cmp do; its trouble code shares a number
    // with usage errors, so it is said of verify in a paragraph of its own
    writeln!(
        s,
        ".PP\n\\fBverify\\fR exits as \\fBdiff\\fR(1) does: 0 the live values match, {EXIT_FAILED} they differ, {EXIT_VERIFY_TROUBLE} it could not check (any error). It takes no lock, so it never exits {EXIT_BUSY}.",
    )?;

    writeln!(s, ".SH ENVIRONMENT")?;
    let mut seen = Vec::new();
    for c in std::iter::once(cmd).chain(cmd.get_subcommands()) {
        for a in c.get_arguments() {
            let (Some(env), Some(long)) = (a.get_env(), a.get_long()) else {
                continue;
            };
            let env = env.to_string_lossy().into_owned();
            if seen.contains(&env) {
                continue;
            }
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            let scope = if a.is_global_set() {
                String::new()
            } else {
                format!(" (\\fB{}\\fR)", c.get_name())
            };
            let mut help = help.chars();
            let help: String = help
                .next()
                .map(|c| c.to_uppercase().chain(help).collect())
                .unwrap_or_default();
            writeln!(
                s,
                ".TP\n.B {env}\n{}. Sets \\fB\\-\\-{}\\fR{scope} when it is not given.",
                roff(&help),
                roff(long)
            )?;
            seen.push(env);
        }
    }
    writeln!(
        s,
        ".TP\n.B NO_COLOR\nSet and not empty: no colour in the output at a terminal."
    )?;

    writeln!(s, ".SH FILES")?;
    for (path, what) in [
        (
            DEFAULT_PROFILE.to_string(),
            "The profile every command that takes one reads when none is given; see \\fBblkqos.toml\\fR(5). As root, blkqos applies only a profile that only root can change.".to_string(),
        ),
        (
            format!("{}/{DROP_IN_DIR}/*.toml", dir_of(DEFAULT_PROFILE)),
            "Its drop\\-ins, merged in after it in lexical order (for any profile, those in \\fBblkqos.d\\fR beside it); see \\fBblkqos.toml\\fR(5).".to_string(),
        ),
        (
            format!("{state_dir}/state.json"),
            "The original values saved by \\fBapply\\fR, which \\fBrestore\\fR puts back. On a tmpfs: a reboot starts afresh, as sysfs does.".to_string(),
        ),
        (
            format!("{state_dir}/lock"),
            "Taken by every run that changes the state, so that parallel runs (udev workers, the boot unit) take turns.".to_string(),
        ),
        (
            "/usr/lib/udev/rules.d/90-blkqos.rules".to_string(),
            "Runs \\fBblkqos udev\\fR for whole disks on add, change and remove.".to_string(),
        ),
        (
            "/usr/lib/systemd/system/blkqos.service".to_string(),
            "Runs \\fBblkqos coldplug\\fR at boot and \\fBblkqos restore\\fR when stopped.".to_string(),
        ),
        (
            "/usr/lib/systemd/system/blkqos-metrics.timer".to_string(),
            "Runs \\fBblkqos metrics \\-\\-output\\fR every 15 s (\\fBblkqos-metrics.service\\fR) for the node_exporter textfile collector; installed disabled: \\fBsystemctl enable \\-\\-now blkqos-metrics.timer\\fR.".to_string(),
        ),
        (
            "/var/lib/prometheus/node-exporter/blkqos.prom".to_string(),
            "What the timer writes, replaced atomically; the metric reference is in docs/monitoring.md.".to_string(),
        ),
    ] {
        writeln!(s, ".TP\n.I {}\n{what}", roff(&path))?;
    }

    writeln!(s, ".SH \"SEE ALSO\"")?;
    writeln!(
        s,
        "\\fBblkqos.toml\\fR(5), \\fBudevadm\\fR(8), \\fBsystemctl\\fR(1)"
    )?;
    Ok(s)
}
