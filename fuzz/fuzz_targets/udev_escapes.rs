//! udev's `\xHH` escapes (ID_MODEL_ENC and the like) from any property
//! value: never a panic; text without a backslash comes back unchanged;
//! any bytes, escaped the way udev escapes them, decode to those bytes.
#![no_main]

use blkqos::udevdb::decode_escapes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let decoded = decode_escapes(text);
        if !text.contains('\\') {
            assert_eq!(decoded, text);
        }
    }
    let escaped: String = data.iter().map(|b| format!("\\x{b:02x}")).collect();
    assert_eq!(decode_escapes(&escaped), String::from_utf8_lossy(data));
});
