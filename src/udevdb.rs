//! Enumeration and properties from libudev, used only for the live tree and
//! only when a udev database exists (containers and initramfs often have none).

use crate::sysfs::Sysfs;
use std::collections::BTreeMap;

pub struct Found {
    pub names: Vec<String>,
    /// Device name -> udev properties.
    pub properties: BTreeMap<String, BTreeMap<String, String>>,
}

fn has_database(sysfs: &Sysfs) -> bool {
    sysfs.is_live() && std::path::Path::new("/run/udev/data").is_dir()
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
        let props = dev
            .properties()
            .map(|p| {
                (
                    p.name().to_string_lossy().into_owned(),
                    p.value().to_string_lossy().into_owned(),
                )
            })
            .collect();
        found.properties.insert(name.clone(), props);
        found.names.push(name);
    }
    Ok(Some(found))
}

#[cfg(not(feature = "udev"))]
pub fn enumerate(sysfs: &Sysfs) -> std::io::Result<Option<Found>> {
    let _ = has_database(sysfs);
    Ok(None)
}
