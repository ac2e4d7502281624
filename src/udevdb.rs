//! Enumeration and properties from libudev, used only for the live tree and
//! only when a udev database exists (containers and initramfs often have none).

use crate::sysfs::Sysfs;
use std::collections::BTreeMap;

/// Device name -> udev properties.
pub type Props = BTreeMap<String, BTreeMap<String, String>>;

pub struct Found {
    pub names: Vec<String>,
    pub properties: Props,
}

fn has_database(sysfs: &Sysfs) -> bool {
    sysfs.is_live() && std::path::Path::new("/run/udev/data").is_dir()
}

#[cfg(feature = "udev")]
fn properties(dev: &udev::Device) -> BTreeMap<String, String> {
    dev.properties()
        .map(|p| {
            (
                p.name().to_string_lossy().into_owned(),
                p.value().to_string_lossy().into_owned(),
            )
        })
        .collect()
}

#[cfg(feature = "udev")]
pub fn enumerate(sysfs: &Sysfs) -> std::io::Result<Option<Found>> {
    if !has_database(sysfs) {
        return Ok(None);
    }
    let mut e = udev::Enumerator::new()?;
    e.match_subsystem("block")?;
    e.match_property("DEVTYPE", "disk")?;
    let mut found = Found {
        names: Vec::new(),
        properties: BTreeMap::new(),
    };
    for dev in e.scan_devices()? {
        let name = dev.sysname().to_string_lossy().into_owned();
        found.properties.insert(name.clone(), properties(&dev));
        found.names.push(name);
    }
    Ok(Some(found))
}

/// Properties of the named disks only; a disk udev has not seen has none.
#[cfg(feature = "udev")]
pub fn properties_of(sysfs: &Sysfs, names: &[String]) -> std::io::Result<Option<Props>> {
    if !has_database(sysfs) {
        return Ok(None);
    }
    let mut out = Props::new();
    for name in names {
        if let Ok(dev) = udev::Device::from_subsystem_sysname("block".into(), name.clone()) {
            out.insert(name.clone(), properties(&dev));
        }
    }
    Ok(Some(out))
}

#[cfg(not(feature = "udev"))]
pub fn enumerate(sysfs: &Sysfs) -> std::io::Result<Option<Found>> {
    let _ = has_database(sysfs);
    Ok(None)
}

#[cfg(not(feature = "udev"))]
pub fn properties_of(sysfs: &Sysfs, _names: &[String]) -> std::io::Result<Option<Props>> {
    let _ = has_database(sysfs);
    Ok(None)
}

/// udev's `\x20`-style escapes in *_ENC properties, decoded byte by byte.
/// An escape is `\x` and exactly two hex digits; anything else (`\x4` at
/// the end, `\xzz`, a sign, a multi-byte character) is kept as written:
/// the value is only shown and matched, and a literal backslash is nearer
/// what the device reported than an error that would hide the disk's model.
/// Decoded bytes that are not UTF-8 become U+FFFD.
pub fn decode_escapes(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if let [b'\\', b'x', hi, lo, ..] = b[i..]
            && let (Some(hi), Some(lo)) = (hex_digit(hi), hex_digit(lo))
        {
            out.push(hi << 4 | lo);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::decode_escapes;

    #[test]
    fn escapes_decode_to_their_bytes() {
        assert_eq!(decode_escapes("Samsung\\x20SSD"), "Samsung SSD");
        assert_eq!(decode_escapes("\\x41\\x42"), "AB");
        assert_eq!(decode_escapes("trailing\\x2f"), "trailing/");
        // two escaped bytes that together are one UTF-8 character
        assert_eq!(decode_escapes("\\xc3\\xa9"), "é");
    }

    #[test]
    fn an_escape_cut_by_a_multibyte_character_is_kept_literally() {
        assert_eq!(decode_escapes("\\xé"), "\\xé");
        assert_eq!(decode_escapes("\\x4é"), "\\x4é");
        assert_eq!(decode_escapes("a\\x€b"), "a\\x€b");
    }

    #[test]
    fn invalid_and_truncated_escapes_are_kept_literally() {
        assert_eq!(decode_escapes("\\x4"), "\\x4");
        assert_eq!(decode_escapes("\\x"), "\\x");
        assert_eq!(decode_escapes("\\"), "\\");
        assert_eq!(decode_escapes("\\xzz"), "\\xzz");
        // from_str_radix would take a sign as part of the number
        assert_eq!(decode_escapes("\\x+1"), "\\x+1");
        assert_eq!(decode_escapes("\\x-1"), "\\x-1");
    }

    #[test]
    fn a_byte_that_is_not_utf8_becomes_the_replacement_character() {
        assert_eq!(decode_escapes("a\\xffb"), "a\u{fffd}b");
    }
}
