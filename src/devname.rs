//! Block device names as people type them: the kernel name (`nvme0n1`) or
//! a path under /dev (`/dev/nvme0n1`, `/dev/disk/by-id/nvme-...`,
//! `/dev/mapper/vg-lv`), which is mapped to the kernel name it leads to.

use crate::uevent::is_kernel_name;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed at most (udev's by-id, by-path, mapper links are one).
const MAX_LINKS: usize = 8;

/// The kernel name `arg` means, or `None` when it names no block device.
pub fn kernel_name(arg: &str) -> Option<String> {
    kernel_name_in(arg, Path::new("/dev"))
}

/// [`kernel_name`] with the device directory at `dev`.
pub fn kernel_name_in(arg: &str, dev: &Path) -> Option<String> {
    if !arg.starts_with('/') {
        return is_kernel_name(arg).then(|| arg.to_string());
    }
    let mut path = lexical(Path::new(arg));
    // Followed lexically, link by link: the node need not exist here (a
    // dry run on a captured tree) for its name to be known.
    for _ in 0..MAX_LINKS {
        match std::fs::read_link(&path) {
            Ok(target) => {
                let base = path.parent().unwrap_or(Path::new("/"));
                path = lexical(&base.join(target));
            }
            Err(_) => break,
        }
    }
    let rest = path.strip_prefix(dev).ok()?;
    // a name with a '/' (cciss/c0d0) is '!' in the kernel's (cciss!c0d0)
    let parts: Vec<&str> = rest.iter().filter_map(|p| p.to_str()).collect();
    let name = parts.join("!");
    (parts.len() == rest.iter().count() && is_kernel_name(&name)).then_some(name)
}

/// `..` and `.` resolved without looking at the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_paths_and_their_links_map_to_kernel_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dev = dir.path().join("dev");
        std::fs::create_dir_all(dev.join("disk/by-id")).expect("mkdir");
        std::fs::create_dir_all(dev.join("mapper")).expect("mkdir");
        std::os::unix::fs::symlink("../../nvme0n1", dev.join("disk/by-id/nvme-SAMSUNG_X"))
            .expect("ln");
        std::os::unix::fs::symlink("../dm-0", dev.join("mapper/vg0-data")).expect("ln");
        let name = |arg: &str| kernel_name_in(arg, &dev);
        assert_eq!(name("nvme0n1").as_deref(), Some("nvme0n1"));
        let under = |rel: &str| dev.join(rel).to_string_lossy().into_owned();
        assert_eq!(name(&under("nvme0n1")).as_deref(), Some("nvme0n1"));
        assert_eq!(
            name(&under("disk/by-id/nvme-SAMSUNG_X")).as_deref(),
            Some("nvme0n1")
        );
        assert_eq!(name(&under("mapper/vg0-data")).as_deref(), Some("dm-0"));
        assert_eq!(name(&under("cciss/c0d0")).as_deref(), Some("cciss!c0d0"));
        assert_eq!(name("/etc/passwd"), None);
        assert_eq!(name(&under("../etc/passwd")), None);
        assert_eq!(name("a b"), None);
    }
}
