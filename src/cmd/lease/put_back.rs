//! What a killed `blkqos lease` left on the CPUs, put back (by restore and
//! by the unit's stop step).

use super::*;

/// What [`put_back_left`] did: the CPUs' values put back (path, found,
/// original), and what is reported: someone else's values kept, CPUs
/// that could not be put back (their entries stay for the next try).
#[derive(Default)]
pub struct LeftPutBack {
    pub restored: Vec<(String, String, String)>,
    pub warnings: Vec<String>,
}

/// Put back what a killed `blkqos lease` left, unless one is running (its
/// leases are its own): `restore` does it too. A dry run writes nothing
/// and says what would be put back.
pub fn put_back_left(ctx: &Ctx, dry_run: bool) -> Result<LeftPutBack, Error> {
    let state = ctx.state.read()?;
    if state.leases.is_empty() {
        return Ok(LeftPutBack::default());
    }
    let Some(_lease_lock) = ctx.state.try_lease_lock()? else {
        return Ok(LeftPutBack {
            restored: Vec::new(),
            warnings: vec![
                "a blkqos lease is running: the CPUs it holds are left to it (stop it to put them back)".to_string(),
            ],
        });
    };
    let out = if dry_run {
        cpuqos::put_back(&ctx.sysfs, &state.leases, true)
    } else {
        published::remove(&ctx.state.checked_dir()?);
        put_back_entries(ctx)?
    };
    Ok(LeftPutBack {
        restored: out.restored,
        warnings: (out.kept.into_iter())
            .chain(out.failed.into_values().map(|(_, why)| why))
            .collect(),
    })
}

/// [`put_back_left`] with the lease lock already held.
pub(super) fn put_back_entries(ctx: &Ctx) -> Result<cpuqos::PutBack, Error> {
    let mut locked = ctx.state.lock()?;
    let out = cpuqos::put_back(&ctx.sysfs, &locked.state.leases, false);
    locked.state.leases = (out.failed.iter())
        .map(|(p, (s, _))| (p.clone(), s.clone()))
        .collect();
    locked.save()?;
    Ok(out)
}

/// At start and for `--put-back`: the saved entries of the CPUs that
/// could not be put back (they stay in the state).
pub(super) fn put_back(ctx: &Ctx) -> Result<BTreeMap<String, LeaseSaved>, Error> {
    if ctx.state.read()?.leases.is_empty() {
        return Ok(BTreeMap::new());
    }
    let out = put_back_entries(ctx)?;
    for n in &out.kept {
        log::warn!("{n}");
    }
    Ok((out.failed.into_iter())
        .map(|(path, (saved, why))| {
            log::error!("{why}; kept in the state for the next try");
            (path, saved)
        })
        .collect())
}
