//! The scheduler among a disk's attributes: what it offers (the kernel
//! refuses any other name with EINVAL at every apply), the active one as
//! its value, and its place first among a disk's writes.

use super::{Change, PlanError};

/// The kernel's own schedulers, which a distribution may build as modules
/// (`<name>-iosched`): a disk lists only those loaded, and the write of
/// one not loaded yet loads it.
const MODULES: [&str; 3] = ["mq-deadline", "kyber", "bfq"];

/// Whether `disk`, whose `queue/scheduler` reads `raw`, takes `wanted`
/// (asked for by `rule`); a warning when only loading its module can tell.
pub(super) fn check(
    disk: &str,
    rule: &str,
    raw: &str,
    wanted: &str,
) -> Result<Option<String>, PlanError> {
    let offered: Vec<&str> = raw
        .split_whitespace()
        .map(|w| w.trim_start_matches('[').trim_end_matches(']'))
        .collect();
    if offered.contains(&wanted) {
        return Ok(None);
    }
    // the active one in brackets: a queue that takes a scheduler at all
    // (one that cannot reads a bare "none")
    let takes_one = raw.split_whitespace().any(|w| w.starts_with('['));
    if takes_one && MODULES.contains(&wanted) {
        return Ok(Some(format!(
            "{disk}: rule {rule:?} sets scheduler {wanted:?}, which {disk} does not list ({}): the write loads the {wanted}-iosched module, and fails if the kernel has none",
            offered.join(", ")
        )));
    }
    Err(PlanError::Scheduler {
        disk: disk.to_string(),
        rule: rule.to_string(),
        wanted: wanted.to_string(),
        offered: offered.join(", "),
    })
}

/// A disk's scheduler is written before its other attributes, forwards
/// and back: switching it resets nr_requests, and bfq turns write-back
/// throttling off. Otherwise the order is kept.
pub fn scheduler_first(changes: &mut [Change]) {
    changes.sort_by_key(|c| !is_scheduler(&c.path));
}

pub fn is_scheduler(path: &str) -> bool {
    path.ends_with("/queue/scheduler")
}

/// A live value as it can be written back: `scheduler` lists every choice
/// with the active one in brackets; the active one is the value.
pub fn live_value(path: &str, raw: &str) -> String {
    if path.ends_with("/queue/scheduler")
        && let Some(active) = raw
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
    {
        return active.to_string();
    }
    raw.trim().to_string()
}

/// Does the live (raw) value already hold what is wanted?
pub fn same_value(path: &str, raw: &str, want: &str) -> bool {
    live_value(path, raw) == want.trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selected_scheduler_is_the_bracketed_one() {
        assert!(same_value(
            "block/sda/queue/scheduler",
            "none [mq-deadline] kyber",
            "mq-deadline"
        ));
        assert!(!same_value(
            "block/sda/queue/scheduler",
            "[none] mq-deadline",
            "mq-deadline"
        ));
        assert!(same_value("block/sda/queue/read_ahead_kb", "128", "128"));
        assert_eq!(
            live_value("block/sda/queue/scheduler", "none [mq-deadline] kyber"),
            "mq-deadline"
        );
    }

    #[test]
    fn an_offered_scheduler_passes_and_another_is_refused() {
        let raw = "[none] mq-deadline kyber bfq";
        assert!(matches!(check("sda", "r", raw, "kyber"), Ok(None)));
        assert!(matches!(check("sda", "r", raw, "none"), Ok(None)));
        let e = check("sda", "r", raw, "bogus").unwrap_err().to_string();
        assert_eq!(
            e,
            "sda: rule \"r\" sets scheduler \"bogus\", which sda does not offer (it offers none, mq-deadline, kyber, bfq)"
        );
    }

    #[test]
    fn a_modular_scheduler_not_loaded_yet_is_a_warning_where_the_queue_takes_one() {
        let warned = check("sda", "r", "[mq-deadline] none", "bfq").unwrap();
        assert!(warned.is_some_and(|w| w.contains("bfq-iosched")));
        // a bio-based queue reads a bare "none": no module helps
        assert!(check("md0", "r", "none", "bfq").is_err());
    }
}
