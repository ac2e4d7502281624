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
