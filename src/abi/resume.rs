//! Static fallback: `devices/system/cpu/cpuN/power/pm_qos_resume_latency_us`.
//!
//! The kernel's encoding is inverted at zero: `0` means *no constraint* and
//! `n/a` means *no latency tolerated*. There is no timeout: the limit holds
//! until it is changed, whether the device has I/O or not.

/// What to write for a limit; `None` is off.
pub fn encode(limit: Option<u64>) -> String {
    match limit {
        None => "0".to_string(),
        Some(0) => "n/a".to_string(),
        Some(us) => us.to_string(),
    }
}

/// Merge two requests for one CPU the way PM QoS does: the strictest wins.
pub fn strictest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_off_use_the_kernels_inverted_encoding() {
        assert_eq!(encode(None), "0");
        assert_eq!(encode(Some(0)), "n/a");
        assert_eq!(encode(Some(10)), "10");
        assert_eq!(strictest(None, Some(5)), Some(5));
        assert_eq!(strictest(Some(2), Some(5)), Some(2));
        assert_eq!(strictest(None, None), None);
    }
}
