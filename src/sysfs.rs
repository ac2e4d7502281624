//! The only place that touches the sysfs tree. Every path is relative to the
//! root given by `--sysfs`, so a captured or fake tree behaves like `/sys`.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// sysfs attributes are at most one page; anything longer is not an attribute
/// (a fake tree pointing at /dev/zero, say) and must not make us read forever.
const MAX_ATTR_BYTES: u64 = 64 * 1024;

#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when this is the live /sys (libudev only describes that one).
    pub fn is_live(&self) -> bool {
        fs::canonicalize(&self.root).is_ok_and(|p| p == Path::new("/sys"))
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// An attribute's value with the trailing newline and blanks removed
    /// (SCSI model strings are blank-padded).
    pub fn read(&self, rel: &str) -> io::Result<String> {
        let mut buf = Vec::new();
        fs::File::open(self.path(rel))?
            .take(MAX_ATTR_BYTES)
            .read_to_end(&mut buf)?;
        let text = String::from_utf8_lossy(&buf);
        Ok(text.trim_end_matches(['\n', ' ', '\t', '\0']).to_string())
    }

    /// Like `read`, but a missing, unreadable or empty attribute is `None`.
    pub fn attr(&self, rel: &str) -> Option<String> {
        self.read(rel).ok().filter(|v| !v.is_empty())
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// Store a value with a single write(2): sysfs takes one write per value.
    pub fn write(&self, rel: &str, value: &str) -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.path(rel))?;
        let n = file.write(value.as_bytes())?;
        if n != value.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write ({n} of {} bytes)", value.len()),
            ));
        }
        Ok(())
    }

    /// Names in a directory, sorted; a missing directory is empty.
    pub fn list(&self, rel: &str) -> Vec<String> {
        let mut names: Vec<String> = match fs::read_dir(self.path(rel)) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort_by(|a, b| natural_cmp(a, b));
        names
    }

    /// The canonical location of `rel` as a path relative to the root, or an
    /// error when it resolves outside the tree.
    pub fn canonical(&self, rel: &str) -> io::Result<String> {
        let root = fs::canonicalize(&self.root)?;
        let full = fs::canonicalize(self.path(rel))?;
        full.strip_prefix(&root)
            .map(|p| p.to_string_lossy().into_owned())
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is outside the sysfs root", full.display()),
                )
            })
    }

    /// The last component of a symlink's target (`driver` -> `nvme`).
    pub fn link_name(&self, rel: &str) -> Option<String> {
        let target = fs::read_link(self.path(rel)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }
}

/// Order `nvme2n1` before `nvme10n1` and `cpu2` before `cpu10`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for ((da, xa), (db, xb)) in ca.iter().zip(cb.iter()) {
        let ord = if *da && *db {
            let (ta, tb) = (xa.trim_start_matches('0'), xb.trim_start_matches('0'));
            ta.len().cmp(&tb.len()).then_with(|| ta.cmp(tb))
        } else {
            xa.cmp(xb)
        };
        if ord.is_ne() {
            return ord;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

/// True for the errors that mean "the device went away": not a failure of
/// ours, and nothing to roll back for it.
pub fn is_vanished(err: &io::Error) -> bool {
    const ENODEV: i32 = 19;
    const ENXIO: i32 = 6;
    err.kind() == io::ErrorKind::NotFound || matches!(err.raw_os_error(), Some(ENODEV | ENXIO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_sorts_numbers_by_value() {
        let mut v = vec!["nvme10n1", "nvme2n1", "nvme1n1", "cpu10", "cpu9"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["cpu9", "cpu10", "nvme1n1", "nvme2n1", "nvme10n1"]);
    }

    #[test]
    fn read_trims_padding_and_write_replaces_the_value() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("model"), "ST4000NM0035-1V4  \n").unwrap();
        fs::write(dir.path().join("v"), "-1\n").unwrap();
        let s = Sysfs::new(dir.path());
        assert_eq!(s.read("model").unwrap(), "ST4000NM0035-1V4");
        s.write("v", "3").unwrap();
        assert_eq!(s.read("v").unwrap(), "3");
        assert!(s.attr("missing").is_none());
    }

    #[test]
    fn canonical_refuses_paths_outside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/tmp", dir.path().join("escape")).unwrap();
        let s = Sysfs::new(dir.path());
        assert!(s.canonical("escape").is_err());
    }
}
