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

/// What a CPU's attribute reads, as the kernel prints it: `Some(None)` is
/// no constraint (`0`), `Some(Some(0))` no latency tolerated (`n/a`),
/// `Some(Some(us))` a limit up to `i32::MAX`; `None` for anything else (a
/// sign, a leading zero, which the kernel's parser would take as octal).
pub fn decode(text: &str) -> Option<Option<u64>> {
    match text.trim() {
        "0" => Some(None),
        "n/a" => Some(Some(0)),
        t if !t.starts_with('0') && t.bytes().all(|b| b.is_ascii_digit()) => {
            t.parse::<i32>().ok().map(|v| Some(v.unsigned_abs().into()))
        }
        _ => None,
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

    #[test]
    fn decode_takes_what_the_kernel_prints_and_nothing_else() {
        assert_eq!(decode("0\n"), Some(None));
        assert_eq!(decode("n/a"), Some(Some(0)));
        assert_eq!(decode("10"), Some(Some(10)));
        assert_eq!(decode("2147483647"), Some(Some(2_147_483_647)));
        for bad in ["010", "+7", "-1", "2147483648", "", "1e3", " ", "N/A"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
