//! The only place that touches the sysfs tree. Every path is relative to the
//! root given by `--sysfs`, so a captured or fake tree behaves like `/sys`.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::trust;

/// sysfs attributes are at most one page; anything longer is not an attribute
/// (a fake tree pointing at /dev/zero, say) and must not make us read forever.
const MAX_ATTR_BYTES: u64 = 64 * 1024;
/// Most attributes are a number or a name; a longer one takes a second read.
const FIRST_READ: usize = 256;
/// Set once openat2 is found missing (ENOSYS): every later open goes
/// straight to the fallback instead of failing the syscall again.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

#[derive(Debug, thiserror::Error)]
#[error("{}: not a sysfs tree (no {missing} there); check --sysfs or BLKQOS_SYSFS", root.display())]
pub struct NotSysfs {
    root: PathBuf,
    missing: &'static str,
}

#[derive(Debug)]
pub struct Sysfs {
    root: PathBuf,
    /// The root's canonical path, resolved once.
    canonical_root: OnceLock<PathBuf>,
    /// The root opened as a directory, once: writes open files beneath it.
    root_dir: OnceLock<OwnedFd>,
}

impl Clone for Sysfs {
    fn clone(&self) -> Self {
        Sysfs::new(&self.root)
    }
}

/// `struct open_how` of openat2(2) (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sysfs {
            root: root.into(),
            canonical_root: OnceLock::new(),
            root_dir: OnceLock::new(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Refuse a root that is not a sysfs tree: a wrong `--sysfs`, `/`, or an
    /// unmounted `/sys` would otherwise look like a machine without disks,
    /// where everything matches and every saved original looks gone.
    pub fn check_tree(&self) -> Result<(), NotSysfs> {
        let missing = if !self.root.is_dir() {
            "directory"
        } else if !self.path("block").is_dir() && !self.path("class/block").is_dir() {
            "block/ or class/block/"
        } else if !self.path("devices/system/cpu").is_dir() {
            "devices/system/cpu/"
        } else if !self.list("devices/system/cpu").iter().any(|c| {
            c.strip_prefix("cpu")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        }) {
            // every machine has a CPU: a tree without one is a wrong root
            "devices/system/cpu/cpuN"
        } else {
            return Ok(());
        };
        Err(NotSysfs {
            root: self.root.clone(),
            missing,
        })
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
        let buf = self.read_bytes(rel)?;
        let text = String::from_utf8_lossy(&buf);
        Ok(text.trim_end_matches(['\n', ' ', '\t', '\0']).to_string())
    }

    /// An attribute's raw bytes (binary ones: VPD pages), at most
    /// [`MAX_ATTR_BYTES`] more than the first read.
    pub fn read_bytes(&self, rel: &str) -> io::Result<Vec<u8>> {
        let mut file = self.open_for_read(rel)?;
        // One read(2) returns a whole attribute; only a full buffer asks for more.
        let mut first = [0u8; FIRST_READ];
        let n = file.read(&mut first)?;
        let mut buf = first[..n].to_vec();
        if n == FIRST_READ {
            file.take(MAX_ATTR_BYTES).read_to_end(&mut buf)?;
        }
        Ok(buf)
    }

    /// Open `rel` for reading, beneath the root: openat2(2) with
    /// RESOLVE_BENEATH lets the kernel follow the links a sysfs path is
    /// made of (`block/nvme0n1 -> ../devices/...`) in the one path walk an
    /// open costs anyway, and refuses any that leads out of the root (an
    /// absolute link, or `..` past it). Canonicalizing first, as writes do,
    /// would cost a readlink per component of every path, for the
    /// thousands of reads a big host's discovery makes. O_NONBLOCK: a FIFO
    /// opens at once, to be refused by the fstat that follows rather than
    /// waited on. Without openat2: the path is canonicalized (refused when
    /// it leaves the root), then opened with O_NOFOLLOW.
    fn open_for_read(&self, rel: &str) -> io::Result<File> {
        let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK;
        let file = match self.openat2(
            rel,
            flags,
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
        ) {
            Ok(Some(f)) => f,
            Ok(None) => {
                let inside = self.canonical(rel)?;
                OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                    .open(self.path(&inside))?
            }
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "a link that leads outside the sysfs root; not read",
                ));
            }
            Err(e) => return Err(e),
        };
        trust::require_regular(&file)?;
        Ok(file)
    }

    /// Like `read`, but a missing, unreadable or empty attribute is `None`.
    pub fn attr(&self, rel: &str) -> Option<String> {
        self.read(rel).ok().filter(|v| !v.is_empty())
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// Store a value with a single write(2): sysfs takes one write per value.
    /// The file written is the one `rel` resolves to, and only if that lies
    /// inside the root: a link planted in a tree (a copy, a fixture, a bind
    /// mount) must not make root write elsewhere.
    ///
    /// Not opened with O_TRUNC: a plain file (a copied tree) would lose its
    /// value before a failed write. It is cut to the new value after a
    /// successful one instead; sysfs ignores size changes, as it ignores
    /// O_TRUNC.
    pub fn write(&self, rel: &str, value: &str) -> io::Result<()> {
        let inside = self.canonical(rel)?;
        let mut file = self.open_beneath(&inside)?;
        let n = file.write(value.as_bytes())?;
        if n != value.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write ({n} of {} bytes)", value.len()),
            ));
        }
        file.set_len(n as u64)
    }

    /// Open `rel`, a canonical path relative to the root, for writing:
    /// openat2(2) on the root's directory with RESOLVE_BENEATH and
    /// RESOLVE_NO_SYMLINKS, so a link swapped into the path after
    /// `canonical` looked is refused (ELOOP) rather than followed, and
    /// nothing outside the root can be reached. Without openat2 (Linux
    /// before 5.6, or a seccomp filter that refuses it), the path is
    /// opened with O_NOFOLLOW on its last component. O_NONBLOCK and the
    /// fstat: a FIFO or device node planted in the tree is not written.
    fn open_beneath(&self, rel: &str) -> io::Result<File> {
        let flags = libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let resolve =
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        let file = match self.openat2(rel, flags, resolve)? {
            Some(f) => f,
            None => OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(self.path(rel))?,
        };
        trust::require_regular(&file)?;
        Ok(file)
    }

    /// openat2(2) of `rel` on the root's directory; `None` where the
    /// kernel has no openat2 or a seccomp filter refuses it (ENOSYS,
    /// EPERM), for the caller's fallback. EAGAIN (a rename raced a `..`
    /// the kernel had to check) is retried, as openat2(2) advises.
    fn openat2(&self, rel: &str, flags: i32, resolve: u64) -> io::Result<Option<File>> {
        if NO_OPENAT2.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let dir = match self.root_dir.get() {
            Some(d) => d,
            None => {
                let d: OwnedFd = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
                    .open(&self.root)?
                    .into();
                self.root_dir.get_or_init(|| d)
            }
        };
        let path = CString::new(rel).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let how = OpenHow {
            // open flags are non-negative
            flags: flags as u64,
            mode: 0,
            resolve,
        };
        let mut attempts = 0;
        let fd = loop {
            // SAFETY: `dir` is an open descriptor that outlives the call,
            // `path` a NUL-terminated string and `how` an open_how of the
            // size passed; the kernel reads them and writes nothing back.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    dir.as_raw_fd(),
                    path.as_ptr(),
                    &how as *const OpenHow,
                    std::mem::size_of::<OpenHow>(),
                )
            };
            if fd >= 0 {
                break fd;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    return Ok(None);
                }
                // a seccomp filter's answer, or this one file's: not cached
                Some(libc::EPERM) => return Ok(None),
                Some(libc::EAGAIN) if attempts < 3 => attempts += 1,
                _ => return Err(e),
            }
        };
        // The kernel returns a descriptor in c_int range on success.
        let fd = i32::try_from(fd).map_err(|_| io::Error::other("openat2: bad descriptor"))?;
        // SAFETY: a descriptor openat2 just returned, owned by nothing else.
        Ok(Some(unsafe { File::from_raw_fd(fd) }))
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
        let root = match self.canonical_root.get() {
            Some(r) => r,
            None => {
                let r = fs::canonicalize(&self.root)?;
                self.canonical_root.get_or_init(|| r)
            }
        };
        let full = fs::canonicalize(self.path(rel))?;
        full.strip_prefix(root)
            .map(|p| p.to_string_lossy().into_owned())
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{} is outside the sysfs root", full.display()),
                )
            })
    }

    /// Where `rel` leads, relative to the root, resolving the links along it
    /// but trusting each link's target to be made of real directories, as
    /// sysfs links are: a readlink per component of `rel` instead of one per
    /// component of every path `canonical` walks. For naming and topology
    /// only; whether a path escapes the root is `canonical`'s to decide.
    pub fn resolve(&self, rel: &str) -> io::Result<String> {
        let mut at: Vec<String> = Vec::new();
        for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
            if part == ".." {
                at.pop();
                continue;
            }
            at.push(part.to_string());
            match fs::read_link(self.path(&at.join("/"))) {
                Ok(target) => {
                    at.pop();
                    for t in target.to_string_lossy().split('/') {
                        match t {
                            "" | "." => {}
                            ".." => {
                                at.pop();
                            }
                            t => at.push(t.to_string()),
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                Err(e) => return Err(e),
            }
        }
        let at = at.join("/");
        // a dangling link resolves lexically; it does not lead anywhere
        fs::metadata(self.path(&at))?;
        Ok(at)
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
    fn resolve_follows_links_like_canonical_for_sysfs_layouts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        fs::create_dir_all(r.join("devices/pci0/nvme/nvme0/nvme0n1/nvme0n1p1")).expect("mkdir");
        fs::create_dir_all(r.join("block")).expect("mkdir");
        fs::create_dir_all(r.join("class/block")).expect("mkdir");
        let link = |target: &str, at: &str| {
            std::os::unix::fs::symlink(target, r.join(at)).expect("symlink")
        };
        link("../devices/pci0/nvme/nvme0/nvme0n1", "block/nvme0n1");
        link(
            "../../devices/pci0/nvme/nvme0/nvme0n1/nvme0n1p1",
            "class/block/nvme0n1p1",
        );
        link(
            "../../../nvme/nvme0",
            "devices/pci0/nvme/nvme0/nvme0n1/device",
        );
        link("../devices/gone", "block/gone");
        let sysfs = Sysfs::new(r);
        for rel in [
            "block/nvme0n1",
            "class/block/nvme0n1p1",
            "block/nvme0n1/device",
            "block",
        ] {
            assert_eq!(
                sysfs.resolve(rel).expect(rel),
                sysfs.canonical(rel).expect(rel),
                "{rel}"
            );
        }
        assert!(sysfs.resolve("block/gone").is_err(), "dangling");
        assert!(sysfs.resolve("block/none").is_err(), "missing");
    }

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
    fn writes_follow_no_link_and_stay_beneath_the_root() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("root/a/b")).unwrap();
        fs::write(dir.path().join("root/a/b/v"), "1\n").unwrap();
        fs::write(dir.path().join("outside"), "1\n").unwrap();
        std::os::unix::fs::symlink("b", dir.path().join("root/a/link")).unwrap();
        let s = Sysfs::new(dir.path().join("root"));
        assert!(s.open_beneath("a/b/v").is_ok());
        // a link where `canonical` saw a directory (swapped in since)
        let e = s.open_beneath("a/link/v").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        assert!(s.open_beneath("../outside").is_err());
        assert!(s.open_beneath("a/b/v\0x").is_err());
        // and through `write`, the link is resolved first, inside the root
        s.write("a/link/v", "2").unwrap();
        assert_eq!(s.read("a/b/v").unwrap(), "2");
    }

    #[test]
    fn reads_follow_links_inside_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("root");
        fs::create_dir_all(r.join("devices/d")).unwrap();
        fs::create_dir_all(r.join("block")).unwrap();
        fs::write(r.join("devices/d/size"), "8\n").unwrap();
        fs::write(dir.path().join("secret"), "s\n").unwrap();
        std::os::unix::fs::symlink("../devices/d", r.join("block/d")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), r.join("devices/d/abs")).unwrap();
        std::os::unix::fs::symlink("../../../secret", r.join("devices/d/rel")).unwrap();
        let s = Sysfs::new(&r);
        assert_eq!(s.read("block/d/size").unwrap(), "8");
        for rel in ["block/d/abs", "block/d/rel", "devices/d/abs", "../secret"] {
            let e = s.read(rel).unwrap_err();
            assert!(
                e.to_string().contains("outside the sysfs root"),
                "{rel}: {e}"
            );
            assert!(!is_vanished(&e), "{rel}");
        }
    }

    #[test]
    fn a_fifo_or_directory_is_refused_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = CString::new(dir.path().join("f").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo reads it and nothing else.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        fs::create_dir(dir.path().join("d")).unwrap();
        let s = Sysfs::new(dir.path());
        let e = s.read("f").unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        assert!(s.write("f", "1").is_err());
        let e = s.read("d").unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
    }

    #[test]
    fn canonical_refuses_paths_outside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/tmp", dir.path().join("escape")).unwrap();
        let s = Sysfs::new(dir.path());
        assert!(s.canonical("escape").is_err());
    }
}
