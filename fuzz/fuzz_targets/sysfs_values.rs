//! Values read from sysfs: scheduler lists and idle-state tables, as a
//! kernel (or a fake tree) might print them. Never a panic; "auto" picks an
//! enabled state of the table.
#![no_main]

use blkqos::idle::{auto_choice, parse_state};
use blkqos::plan::live_value;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = live_value("block/sda/queue/scheduler", text);
    // lines of "stateN name latency residency disable", one state each
    let states: Vec<_> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            parse_state(f.first()?, |attr| {
                let i = ["name", "latency", "residency", "disable", "usage", "time"]
                    .iter()
                    .position(|a| *a == attr)?;
                f.get(i + 1).map(|v| v.to_string())
            })
        })
        .collect();
    if let Some(s) = auto_choice(&states) {
        assert!(s.disabled != Some(true));
        assert!(states.iter().any(|t| t.index == s.index));
    }
});
