//! CPU lists ("0-3,8,10-11", blk-mq's "0, 1, 2"): never a panic or a huge
//! allocation, and what is parsed prints back to the same CPUs.
#![no_main]

use blkqos::idle::{format_cpus, parse_cpu_list};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(cpus) = parse_cpu_list(text) {
        assert!(cpus.len() <= 65536);
        assert!(
            cpus.windows(2).all(|w| w[0] < w[1]),
            "sorted, no duplicates"
        );
        let again = parse_cpu_list(&format_cpus(&cpus));
        assert_eq!(again.as_deref(), Some(cpus.as_slice()));
    }
});
