//! Writes the man page and the shell completions, generated from the
//! command-line definitions, into a directory (the Debian package ships
//! them): `cargo run --example gen-docs -- target/gen`.

use blkqos::cli::Cli;
use clap::CommandFactory;
use clap_complete::Shell;
use std::error::Error;
use std::fs;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let out = PathBuf::from(std::env::args_os().nth(1).ok_or("usage: gen-docs DIR")?);
    fs::create_dir_all(&out)?;
    let cmd = Cli::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .section("8")
        .render(&mut page)?;
    fs::write(out.join("blkqos.8"), page)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd.clone(), "blkqos", &out)?;
    }
    Ok(())
}
