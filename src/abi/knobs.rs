//! The per-device knobs: `cpu_lat_limit_us` (-1 off, 0 polling only, N us)
//! and `cpu_lat_timeout_ms` (how long after the last I/O the limit holds).
//! Both kernel layouts share the encoding; only the directory differs.

use super::Abi;

/// The limit a queue gets when it is not constrained.
pub const OFF: &str = "-1";
/// Kernel bounds of the knobs (kernel-patch/0002); the profile checks them so
/// a bad value is a profile error, not a failed write.
pub const LIMIT_MAX_US: u64 = 100_000;
pub const TIMEOUT_MIN_MS: u64 = 1;
pub const TIMEOUT_MAX_MS: u64 = 60_000;
/// The kernel's default window.
pub const TIMEOUT_DEFAULT_MS: u64 = 3;

/// The knobs' file names.
pub const LIMIT: &str = "cpu_lat_limit_us";
pub const TIMEOUT: &str = "cpu_lat_timeout_ms";

/// Where a knob is, relative to its disk's directory.
pub fn within_disk(abi: Abi, knob: &str) -> String {
    match abi {
        Abi::Queue => format!("queue/{knob}"),
        Abi::Disk | Abi::None => knob.to_string(),
    }
}

pub fn limit_path(abi: Abi, disk: &str) -> String {
    format!("block/{disk}/{}", within_disk(abi, LIMIT))
}

pub fn timeout_path(abi: Abi, disk: &str) -> String {
    format!("block/{disk}/{}", within_disk(abi, TIMEOUT))
}

/// Encode a limit: `None` is off.
pub fn encode_limit(limit: Option<u64>) -> String {
    limit.map_or_else(|| OFF.to_string(), |us| us.to_string())
}
