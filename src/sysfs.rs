//! The only place that touches the sysfs tree. Every path is relative to the
//! root given by `--sysfs`, so a captured or fake tree behaves like `/sys`.

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::trust;

mod dir;
pub use dir::Dir;

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
    /// The root opened as a directory, once: files are opened beneath it.
    root_dir: OnceLock<OwnedFd>,
    /// `block/<disk>` -> the device directory it led to when the disk was
    /// scanned, for one run: later reads and writes of its attributes walk
    /// no link, and reach the directory that was scanned (or nothing, if it
    /// left), not another device directory that took the disk's name since
    /// (one added at the same place, as a loop device or an NVMe rescan
    /// is, is that same directory). A command that runs for long (`top`)
    /// scans through a clone, which forgets it.
    located: Mutex<HashMap<String, String>>,
    /// Paths `resolve` found not to be links, not asked again.
    not_links: Mutex<HashSet<String>>,
}

impl Clone for Sysfs {
    fn clone(&self) -> Self {
        Sysfs::new(&self.root)
    }
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sysfs {
            root: root.into(),
            canonical_root: OnceLock::new(),
            root_dir: OnceLock::new(),
            located: Mutex::new(HashMap::new()),
            not_links: Mutex::new(HashSet::new()),
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
        self.read_bytes(rel).map(|b| trimmed(&b))
    }

    /// An attribute opened for reading, with the checks of [`Sysfs::read`]:
    /// to read again with `pread` at offset 0, where sysfs makes the value
    /// afresh, without a path walk per look.
    pub fn open_attr(&self, rel: &str) -> io::Result<File> {
        self.open_for_read(&self.locate(rel))
    }

    /// An attribute's raw bytes (binary ones: VPD pages), at most
    /// [`MAX_ATTR_BYTES`] more than the first read.
    pub fn read_bytes(&self, rel: &str) -> io::Result<Vec<u8>> {
        read_file(&self.open_for_read(&self.locate(rel))?)
    }

    /// Open `rel` for reading, beneath the root: openat2(2) with
    /// RESOLVE_BENEATH lets the kernel follow the links a sysfs path is
    /// made of (`block/nvme0n1 -> ../devices/...`) in the one path walk an
    /// open costs anyway, and refuses any that leads out of the root (an
    /// absolute link, or `..` past it). Canonicalizing first would cost a
    /// readlink per component of every path, for the thousands of reads a
    /// big host's discovery makes. O_NONBLOCK: a FIFO opens at once, to be
    /// refused by the fstat that follows rather than waited on. Without
    /// openat2: the path is canonicalized (refused when it leaves the
    /// root), then opened with O_NOFOLLOW.
    fn open_for_read(&self, rel: &str) -> io::Result<File> {
        match openat2_beneath(self.root_fd()?, rel, READ_FLAGS, READ_RESOLVE)? {
            Some(f) => Ok(f),
            None => self.open_canonical(rel, OpenOptions::new().read(true)),
        }
    }

    /// Without openat2: `rel` canonicalized (refused when it leaves the
    /// root), opened with `how` and O_NOFOLLOW on its last component, and
    /// refused unless it is a regular file.
    fn open_canonical(&self, rel: &str, how: &mut OpenOptions) -> io::Result<File> {
        let inside = self.canonical(rel)?;
        let file = how
            .custom_flags(trust::custom_flags(OFlags::NOFOLLOW | OFlags::NONBLOCK))
            .open(self.path(&inside))?;
        trust::require_regular(&file)?;
        Ok(file)
    }

    /// Like `read`, but a missing, unreadable or empty attribute is `None`.
    pub fn attr(&self, rel: &str) -> Option<String> {
        self.read(rel).ok().filter(|v| !v.is_empty())
    }

    pub fn exists(&self, rel: &str) -> bool {
        match self.root_fd() {
            Ok(fd) => rustix::fs::statat(fd, rel, rustix::fs::AtFlags::empty()).is_ok(),
            Err(_) => self.path(rel).exists(),
        }
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
        store(&mut self.open_for_write(rel, false)?, value)
    }

    /// [`Sysfs::write`], then what the attribute reads back (the inner
    /// result), through the same open file: a read at offset 0 makes
    /// sysfs show the attribute afresh, as a new open would.
    pub fn write_and_read_back(&self, rel: &str, value: &str) -> io::Result<io::Result<String>> {
        let mut file = self.open_for_write(rel, true)?;
        store(&mut file, value)?;
        Ok(read_file(&file).map(|b| trimmed(&b)))
    }

    /// Open `rel` for writing. A path with no link in it (a disk's
    /// attribute once its disk was scanned, a CPU's) is opened as it
    /// is, in one call; one through a link (`block/sda/...` of a disk
    /// not scanned) is resolved first, inside the root.
    fn open_for_write(&self, rel: &str, read_too: bool) -> io::Result<File> {
        let at = self.locate(rel);
        match self.open_beneath(&at, read_too) {
            Err(e) if Errno::from_io_error(&e) == Some(Errno::LOOP) => {
                self.open_beneath(&self.canonical(&at)?, read_too)
            }
            other => other,
        }
    }

    /// Open `rel`, a path relative to the root, for writing: openat2(2) on
    /// the root's directory with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS,
    /// so no link is followed (ELOOP), none swapped in after the path was
    /// resolved either, and nothing outside the root can be reached.
    /// Without openat2 (Linux before 5.6, or a seccomp filter that
    /// refuses it), the path is canonicalized (refused when it leaves the
    /// root), then opened with O_NOFOLLOW on its last component.
    /// O_NONBLOCK and the fstat: a FIFO or device node planted in the tree
    /// is not written.
    fn open_beneath(&self, rel: &str, read_too: bool) -> io::Result<File> {
        let mode = if read_too {
            OFlags::RDWR
        } else {
            OFlags::WRONLY
        };
        let flags = mode | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match openat2_beneath(self.root_fd()?, rel, flags, resolve)? {
            Some(f) => Ok(f),
            None => self.open_canonical(rel, OpenOptions::new().read(read_too).write(true)),
        }
    }

    /// The root opened as a directory (O_PATH), once.
    fn root_fd(&self) -> io::Result<BorrowedFd<'_>> {
        if let Some(d) = self.root_dir.get() {
            return Ok(d.as_fd());
        }
        let d: OwnedFd = OpenOptions::new()
            .read(true)
            .custom_flags(trust::custom_flags(
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            ))
            .open(&self.root)?
            .into();
        Ok(self.root_dir.get_or_init(|| d).as_fd())
    }

    /// `rel` with a scanned disk's `block/<disk>` replaced by the device
    /// directory it led to then.
    fn locate<'r>(&self, rel: &'r str) -> Cow<'r, str> {
        let Some(tail) = rel.strip_prefix("block/") else {
            return Cow::Borrowed(rel);
        };
        let (disk, rest) = tail.split_once('/').unwrap_or((tail, ""));
        match lock(&self.located).get(disk) {
            Some(dir) if rest.is_empty() => Cow::Owned(dir.clone()),
            Some(dir) => Cow::Owned(format!("{dir}/{rest}")),
            None => Cow::Borrowed(rel),
        }
    }

    /// A directory of the tree, opened once: reads and listings below it
    /// walk only what lies below it, not the whole path and its links
    /// again. For a disk's own attributes and directories (`queue/`,
    /// `mq/`, `holders/`): a link that leads out of it (`device`) is not
    /// followed from it; read those through the root.
    pub fn dir(&self, rel: &str) -> io::Result<Dir<'_>> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = match openat2_raw(self.root_fd()?, rel, flags, READ_RESOLVE).map_err(outside)? {
            Some(fd) => Some(fd),
            None if self.path(&self.canonical(rel)?).is_dir() => None,
            None => return Err(Errno::NOTDIR.into()),
        };
        Ok(Dir {
            sysfs: self,
            rel: rel.to_string(),
            fd,
        })
    }

    /// Names in a directory, sorted; a missing directory is empty.
    pub fn list(&self, rel: &str) -> Vec<String> {
        self.list_if_any(rel).unwrap_or_default()
    }

    /// Names in a directory, sorted; `None` when it is not there.
    fn list_if_any(&self, rel: &str) -> Option<Vec<String>> {
        let entries = match fs::read_dir(self.path(rel)) {
            Ok(entries) => entries,
            Err(e) if is_missing(&e) => return None,
            // there, but not listable: no names
            Err(_) => return Some(Vec::new()),
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_by(|a, b| natural_cmp(a, b));
        Some(names)
    }

    /// The root's canonical path, resolved once.
    fn canonical_root(&self) -> io::Result<&Path> {
        if let Some(r) = self.canonical_root.get() {
            return Ok(r);
        }
        let r = fs::canonicalize(&self.root)?;
        Ok(self.canonical_root.get_or_init(|| r))
    }

    /// The canonical location of `rel` as a path relative to the root, or an
    /// error when it resolves outside the tree.
    pub fn canonical(&self, rel: &str) -> io::Result<String> {
        let root = self.canonical_root()?;
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
        let (at, _) = self.resolve_lexically(rel)?;
        // a dangling link resolves lexically; it does not lead anywhere
        fs::metadata(self.path(&at))?;
        Ok(at)
    }

    /// [`Sysfs::resolve`] without looking whether the result is there (a
    /// prefix found not to be a link, `block`, is not asked again), and
    /// whether the kernel would reach the same place: true unless a link's target has a `..` after a name (the
    /// kernel takes that `..` from wherever the name leads, if it is a
    /// link; kernel links are `../..` then names).
    fn resolve_lexically(&self, rel: &str) -> io::Result<(String, bool)> {
        let mut plain = true;
        let mut at: Vec<String> = Vec::new();
        for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
            if part == ".." {
                at.pop();
                continue;
            }
            at.push(part.to_string());
            let prefix = at.join("/");
            if lock(&self.not_links).contains(&prefix) {
                continue;
            }
            match self.read_link(&prefix) {
                Ok(target) => {
                    at.pop();
                    let mut named = false;
                    for t in target.split('/') {
                        match t {
                            "" | "." => {}
                            ".." => {
                                plain &= !named;
                                at.pop();
                            }
                            t => {
                                named = true;
                                at.push(t.to_string());
                            }
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                    lock(&self.not_links).insert(prefix);
                }
                Err(e) => return Err(e),
            }
        }
        Ok((at.join("/"), plain))
    }

    /// A link's target, read beneath the root's directory (a walk of
    /// `rel` alone, not of the root's path too).
    fn read_link(&self, rel: &str) -> io::Result<String> {
        let target = match self.root_fd() {
            Ok(fd) => rustix::fs::readlinkat(fd, rel, Vec::new())?.into_bytes(),
            Err(_) => fs::read_link(self.path(rel))?
                .into_os_string()
                .into_encoded_bytes(),
        };
        Ok(String::from_utf8_lossy(&target).into_owned())
    }

    /// The last component of a symlink's target (`driver` -> `nvme`).
    pub fn link_name(&self, rel: &str) -> Option<String> {
        let target = fs::read_link(self.path(rel)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }
}

/// An attribute as it was found.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// Its value, trailing blanks removed.
    Value(String),
    /// Not there (never was, or its device went away).
    Missing,
    /// There but unreadable.
    Unreadable(String),
}

impl Reading {
    pub fn of(read: io::Result<String>) -> Reading {
        match read {
            Ok(v) => Reading::Value(v),
            Err(e) if is_vanished(&e) => Reading::Missing,
            Err(e) => Reading::Unreadable(e.to_string()),
        }
    }
}

/// How attributes are opened for reading (see `Sysfs::open_for_read`).
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK);
const READ_RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// A memo's lock. One a reader panicked holding is used as it is: each
/// change to a memo is a single insert, so it is never half-made.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// openat2(2) of `rel` beneath `dir`; `None` where the kernel has no
/// openat2 or a seccomp filter refuses it (ENOSYS, EPERM), for the
/// caller's fallback. EAGAIN (a rename raced a `..` the kernel had to
/// check) is retried, as openat2(2) advises.
fn openat2_raw(
    dir: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    resolve: ResolveFlags,
) -> io::Result<Option<OwnedFd>> {
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let path = CString::new(rel).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut attempts = 0;
    loop {
        match rustix::fs::openat2(dir, path.as_c_str(), flags, Mode::empty(), resolve) {
            Ok(fd) => return Ok(Some(fd)),
            Err(Errno::NOSYS) => {
                NO_OPENAT2.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            // a seccomp filter's answer, or this one file's: not cached
            Err(Errno::PERM) => return Ok(None),
            Err(Errno::AGAIN) if attempts < 3 => attempts += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

/// [`openat2_raw`] of a regular file; a link out of `dir` is refused
/// with an error that says so.
fn openat2_beneath(
    dir: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    resolve: ResolveFlags,
) -> io::Result<Option<File>> {
    match openat2_raw(dir, rel, flags, resolve) {
        Ok(Some(fd)) => {
            let file = File::from(fd);
            trust::require_regular(&file)?;
            Ok(Some(file))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(outside(e)),
    }
}

/// EXDEV from RESOLVE_BENEATH, said as what it means.
fn outside(e: io::Error) -> io::Error {
    if Errno::from_io_error(&e) == Some(Errno::XDEV) {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a link that leads outside the sysfs root; not read",
        )
    } else {
        e
    }
}

/// Not there: nothing at the path, or not a directory where one was named.
fn is_missing(e: &io::Error) -> bool {
    matches!(Errno::from_io_error(e), Some(Errno::NOENT | Errno::NOTDIR))
}

/// An attribute's text, as [`Sysfs::read`] gives it.
pub fn read_text(file: File) -> io::Result<String> {
    read_file(&file).map(|b| trimmed(&b))
}

/// A whole attribute: one read returns it; only a full buffer asks for
/// more, at most [`MAX_ATTR_BYTES`]. Read from offset 0 with pread(2),
/// wherever the file's position is: after a write through the same
/// descriptor too, sysfs shows the attribute afresh for a read at 0 of a
/// file not read before.
fn read_file(file: &File) -> io::Result<Vec<u8>> {
    let mut first = [0u8; FIRST_READ];
    let n = file.read_at(&mut first, 0)?;
    let mut buf = first[..n].to_vec();
    if n == FIRST_READ {
        let mut rest = file;
        rest.seek(io::SeekFrom::Start(n as u64))?;
        rest.take(MAX_ATTR_BYTES).read_to_end(&mut buf)?;
    }
    Ok(buf)
}

/// One write(2) of `value`, then the file cut to it (see [`Sysfs::write`]).
fn store(file: &mut File, value: &str) -> io::Result<()> {
    let n = file.write(value.as_bytes())?;
    if n != value.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write ({n} of {} bytes)", value.len()),
        ));
    }
    file.set_len(n as u64)
}

/// An attribute's text without the trailing newline and blanks (SCSI
/// model strings are blank-padded).
fn trimmed(buf: &[u8]) -> String {
    let text = String::from_utf8_lossy(buf);
    text.trim_end_matches(['\n', ' ', '\t', '\0']).to_string()
}

/// Order `nvme2n1` before `nvme10n1` and `cpu2` before `cpu10`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    /// The next run of digits or of other bytes at the start of `s`.
    /// `s` is not empty: the loop below calls it only then.
    fn chunk(s: &[u8]) -> (bool, &[u8]) {
        let digit = s[0].is_ascii_digit();
        let len = s
            .iter()
            .position(|c| c.is_ascii_digit() != digit)
            .unwrap_or(s.len());
        (digit, &s[..len])
    }
    let (mut xa, mut xb) = (a.as_bytes(), b.as_bytes());
    while !xa.is_empty() && !xb.is_empty() {
        let ((da, ca), (db, cb)) = (chunk(xa), chunk(xb));
        let ord = if da && db {
            let strip = |c: &[u8]| -> usize { c.iter().take_while(|&&d| d == b'0').count() };
            let (ta, tb) = (&ca[strip(ca)..], &cb[strip(cb)..]);
            ta.len().cmp(&tb.len()).then_with(|| ta.cmp(tb))
        } else {
            ca.cmp(cb)
        };
        if ord.is_ne() {
            return ord;
        }
        xa = &xa[ca.len()..];
        xb = &xb[cb.len()..];
    }
    xa.len().cmp(&xb.len()).then_with(|| a.cmp(b))
}

/// True for the errors that mean "the device went away": not a failure of
/// ours, and nothing to roll back for it.
pub fn is_vanished(err: &io::Error) -> bool {
    const ENODEV: i32 = 19;
    const ENXIO: i32 = 6;
    err.kind() == io::ErrorKind::NotFound || matches!(err.raw_os_error(), Some(ENODEV | ENXIO))
}

#[cfg(test)]
mod tests;
