//! What the probe reads: a block device or a regular file, opened for
//! direct reads only, and the disk whose CPUs serve it.

use rustix::fs::{FileType, Mode, OFlags};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The read size, and the alignment O_DIRECT wants of offsets and buffers.
pub const BLOCK: usize = 4096;

/// The smallest target: random reads over less hit the disk's (or a
/// host's) cache, not its media.
pub const MIN_SIZE: u64 = 1 << 20;

/// An opened target.
pub struct Target {
    pub path: PathBuf,
    pub fd: OwnedFd,
    /// Bytes that can be read: offsets are drawn below it.
    pub size: u64,
    /// The whole disk (kernel name) the reads reach.
    pub disk: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{}: {what}", path.display())]
    Refused { path: PathBuf, what: String },
}

fn refused(path: &Path, what: impl Into<String>) -> TargetError {
    TargetError::Refused {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// Opens `path` read-only for direct I/O; `sysfs_disk` maps the device
/// number it lives on (a block device's own, a file's file system's) to
/// the whole disk's kernel name.
pub fn open(
    path: &Path,
    sysfs_disk: impl Fn(u32, u32) -> Option<String>,
) -> Result<Target, TargetError> {
    // what it is, before an open that may mean something else for it (a
    // FIFO's open blocks, a directory refuses O_DIRECT)
    let kind = rustix::fs::stat(path)
        .map(|st| FileType::from_raw_mode(st.st_mode))
        .map_err(|e| refused(path, format!("cannot be read: {e}")))?;
    if !matches!(kind, FileType::BlockDevice | FileType::RegularFile) {
        return Err(refused(
            path,
            format!(
                "is a {}, not a block device or a regular file",
                kind_name(kind)
            ),
        ));
    }
    // Never O_WRONLY or O_RDWR: the probe only reads. O_NOFOLLOW is not
    // wanted: /dev/disk/by-id links are how people name disks.
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::INVAL => refused(
            path,
            "cannot be opened for direct I/O (O_DIRECT): its file system does not offer it (tmpfs?)",
        ),
        rustix::io::Errno::PERM | rustix::io::Errno::ACCESS => refused(
            path,
            format!(
                "cannot be opened for reading: {e} (a container may deny the disk: name a large file on it instead)"
            ),
        ),
        _ => refused(path, format!("cannot be opened for reading: {e}")),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| refused(path, format!("fstat: {e}")))?;
    let (size, major, minor) = match FileType::from_raw_mode(st.st_mode) {
        FileType::BlockDevice => {
            let size = rustix::fs::seek(&fd, rustix::fs::SeekFrom::End(0))
                .map_err(|e| refused(path, format!("its size: {e}")))?;
            let dev = st.st_rdev;
            (size, rustix::fs::major(dev), rustix::fs::minor(dev))
        }
        FileType::RegularFile => {
            // st_size is i64 and never negative for a regular file
            let size = u64::try_from(st.st_size).unwrap_or(0);
            // a hole or an unwritten (fallocated) extent reads as zeros
            // without any I/O: the probe would time the page allocator
            if let Ok(hole) = rustix::fs::seek(&fd, rustix::fs::SeekFrom::Hole(0))
                && hole < size
            {
                return Err(refused(
                    path,
                    format!(
                        "has a hole or an unwritten (fallocated) extent at byte {hole}: reads there return zeros without I/O; write it for real first (dd if=/dev/urandom of={} bs=1M count=256 oflag=direct)",
                        path.display()
                    ),
                ));
            }
            (
                size,
                rustix::fs::major(st.st_dev),
                rustix::fs::minor(st.st_dev),
            )
        }
        other => {
            return Err(refused(
                path,
                format!(
                    "is a {}, not a block device or a regular file",
                    kind_name(other)
                ),
            ));
        }
    };
    let size = size - size % BLOCK as u64;
    if size < MIN_SIZE {
        return Err(refused(
            path,
            format!(
                "has {size} bytes; the probe wants at least {MIN_SIZE} to read at random (a small file is served from the disk's cache)"
            ),
        ));
    }
    let disk = sysfs_disk(major, minor).ok_or_else(|| {
        let fs = match major {
            0 => "a file system without a disk: tmpfs, overlay, a network file system",
            _ => "no disk in /sys/dev/block",
        };
        refused(
            path,
            format!("lives on device {major}:{minor} ({fs}): name a file on a disk's file system"),
        )
    })?;
    Ok(Target {
        path: path.to_path_buf(),
        fd,
        size,
        disk,
    })
}

/// The whole disk behind `major:minor`, through `dev/block/M:m`: a
/// partition's parent, else the device itself.
pub fn disk_of(sysfs: &crate::sysfs::Sysfs, major: u32, minor: u32) -> Option<String> {
    let rel = format!("dev/block/{major}:{minor}");
    let name = sysfs.link_name(&rel)?;
    if sysfs.exists(&format!("{rel}/partition")) {
        let parent = sysfs.canonical(&format!("{rel}/.."));
        return parent
            .ok()
            .and_then(|p| p.rsplit('/').next().map(str::to_string));
    }
    Some(name)
}

fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::Directory => "directory",
        FileType::CharacterDevice => "character device",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::Symlink => "symbolic link",
        _ => "file of another kind",
    }
}
