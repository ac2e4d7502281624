//! `check`: validate a profile.

use crate::error::Error;
use crate::profile::Profile;
use std::fmt::Write as _;
use std::path::Path;

pub fn check(profile: &Path, out: &mut String) -> Result<u8, Error> {
    let p = Profile::load(profile)?;
    let _ = writeln!(
        out,
        "{}: valid ({} rule(s))",
        profile.display(),
        p.rules.len()
    );
    Ok(0)
}
