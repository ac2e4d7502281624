//! Opening the files root acts on (profiles, the lock, the saved state)
//! without being steered by someone else: what is checked is the open file
//! itself (fstat), a FIFO or device is refused instead of waited on, and the
//! directories above must be ones only root or the caller can change.

use rustix::fs::OFlags;
use rustix::io::Errno;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The effective user: root for the commands that write.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// `flags` as `OpenOptionsExt::custom_flags` takes them: open(2)'s flags
/// are a C int, and every O_ flag is a bit below its sign bit.
pub fn custom_flags(flags: OFlags) -> i32 {
    flags.bits() as i32
}

/// Open `path` to read it, refusing anything but a regular file. With
/// O_NONBLOCK the open of a FIFO returns at once instead of waiting for a
/// writer, so that fstat can refuse it (reads of a regular file ignore the
/// flag). Unless `follow`, a link as the last component is refused.
pub fn open_regular(path: &Path, follow: bool) -> io::Result<File> {
    let mut flags = OFlags::NONBLOCK;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(custom_flags(flags))
        .open(path)
        .map_err(link_error)?;
    require_regular(&file)?;
    Ok(file)
}

/// The open file's metadata when it is a regular file, an error saying what
/// it is otherwise.
pub fn require_regular(file: &File) -> io::Result<Metadata> {
    let meta = file.metadata()?;
    let ft = meta.file_type();
    let what = if ft.is_file() {
        return Ok(meta);
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_dir() {
        "a directory"
    } else {
        "not a file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({what}); expected a regular file"),
    ))
}

/// O_NOFOLLOW reports a link as ELOOP ("too many levels of symbolic
/// links"), which does not say what is wrong.
pub fn link_error(e: io::Error) -> io::Error {
    if Errno::from_io_error(&e) == Some(Errno::LOOP) {
        io::Error::new(
            e.kind(),
            "a symbolic link, which is not followed here; expected a regular file",
        )
    } else {
        e
    }
}

/// Whether someone other than root or `uid` could replace what `dir`
/// holds, and how: it is theirs, or group or others may write to it. A
/// sticky directory (/tmp) lets each user remove only their own entries.
pub fn untrusted_dir(dir: &Path, meta: &Metadata, uid: u32) -> Option<String> {
    let sticky = meta.mode() & 0o1000 != 0;
    if meta.mode() & 0o022 != 0 && !sticky {
        return Some(format!(
            "in {}, which group or others can write to (mode {:o})",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    if meta.uid() != 0 && meta.uid() != uid {
        return Some(format!("in {}, owned by uid {}", dir.display(), meta.uid()));
    }
    None
}

/// `untrusted_dir` for `dir` (a canonical path) and every directory above
/// it: whoever can write to any of them can rename what lies below and put
/// their own file in its place.
pub fn untrusted_ancestors(dir: &Path, uid: u32) -> io::Result<Option<String>> {
    let chain: Vec<&Path> = dir.ancestors().collect();
    for d in chain.into_iter().rev() {
        let meta = fs::metadata(d)?;
        if let Some(why) = untrusted_dir(d, &meta, uid) {
            return Ok(Some(why));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_directory_others_can_write_to_is_untrusted_unless_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d");
        fs::create_dir(&d).unwrap();
        let uid = euid();
        let check = |mode: u32| {
            fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
            untrusted_dir(&d, &fs::metadata(&d).unwrap(), uid)
        };
        assert_eq!(check(0o755), None);
        assert!(check(0o775).unwrap().contains("mode 775"));
        assert!(check(0o757).is_some());
        assert_eq!(check(0o1777), None);
    }

    #[test]
    fn only_regular_files_open_and_links_only_when_followed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, "x").unwrap();
        std::os::unix::fs::symlink(&f, dir.path().join("l")).unwrap();
        assert!(open_regular(&f, false).is_ok());
        assert!(open_regular(&dir.path().join("l"), true).is_ok());
        let e = open_regular(&dir.path().join("l"), false).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = open_regular(dir.path(), true).unwrap_err();
        assert!(
            e.to_string().contains("not a regular file (a directory)"),
            "{e}"
        );
    }
}
