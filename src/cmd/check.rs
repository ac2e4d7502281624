//! `check`: validate a profile and its drop-ins.

use super::doc;
use crate::error::Error;
use crate::profile::Profile;
use crate::report::escape_control;
use std::fmt::Write as _;
use std::path::Path;

/// Entry point of `blkqos check`. `trusted`: refuse, as root, a profile
/// others could have changed, as `apply` does.
pub fn check(profile: &Path, json: bool, trusted: bool, out: &mut String) -> Result<u8, Error> {
    let p = if trusted {
        Profile::load_trusted(profile)?
    } else {
        Profile::load(profile)?
    };
    if json {
        let mut d = doc("check", false, false, [(); 0], &[], &[], None);
        d.files = super::file_names(&p);
        out.push_str(&d.render());
        return Ok(0);
    }
    let shown = |f: &Path| escape_control(&f.display().to_string()).into_owned();
    let _ = writeln!(out, "{}: valid ({} rule(s))", shown(profile), p.rules.len());
    for f in &p.files {
        let _ = writeln!(out, "read {}", shown(f));
    }
    Ok(0)
}
