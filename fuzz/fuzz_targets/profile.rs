//! The profile parser: any bytes give a profile or a positioned error,
//! never a panic; an error's line and column lie inside the text.
#![no_main]

use blkqos::profile::{Profile, ProfileError};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Profile::parse(Path::new("fuzz.toml"), text) {
        Ok(p) => assert!(!p.rules.is_empty()),
        Err(ProfileError::Invalid { line, column, .. }) => {
            assert!(line >= 1 && column >= 1);
            assert!(line <= text.matches('\n').count() + 1);
        }
        Err(e) => panic!("parse gave a non-positional error: {e}"),
    }
});
