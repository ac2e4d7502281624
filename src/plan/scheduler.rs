//! Whether a disk takes the scheduler a rule asks for: it lists the ones
//! it offers in `queue/scheduler`, and the kernel refuses any other name
//! with EINVAL at every apply.

use super::PlanError;

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

#[cfg(test)]
mod tests {
    use super::*;

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
