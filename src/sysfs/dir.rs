//! A directory of the sysfs tree held open: its entries listed and read
//! relative to it, no path resolved twice.

use super::*;

/// A directory opened by [`Sysfs::dir`].
#[derive(Debug)]
pub struct Dir<'a> {
    pub(super) sysfs: &'a Sysfs,
    pub(super) rel: String,
    /// `None` without openat2: everything then goes through the root.
    pub(super) fd: Option<OwnedFd>,
}

impl Dir<'_> {
    fn below(&self, sub: &str) -> String {
        format!("{}/{sub}", self.rel)
    }

    /// `sub` below this directory opened for reading, as [`Sysfs::read`]
    /// opens its files; a link that leads out of this
    /// directory is followed from the root (and refused if it leaves that).
    pub fn open(&self, sub: &str) -> io::Result<File> {
        if let Some(fd) = &self.fd {
            match openat2_raw(fd.as_fd(), sub, READ_FLAGS, READ_RESOLVE) {
                Ok(Some(fd)) => {
                    let file = File::from(fd);
                    trust::require_regular(&file)?;
                    return Ok(file);
                }
                Err(e) if Errno::from_io_error(&e) != Some(Errno::XDEV) => return Err(e),
                _ => {}
            }
        }
        self.sysfs
            .open_for_read(&self.sysfs.locate(&self.below(sub)))
    }

    /// Like [`Sysfs::read`], for `sub` below this directory.
    pub fn read(&self, sub: &str) -> io::Result<String> {
        read_text(self.open(sub)?)
    }

    /// Like [`Sysfs::attr`], for `sub` below this directory.
    pub fn attr(&self, sub: &str) -> Option<String> {
        self.read(sub).ok().filter(|v| !v.is_empty())
    }

    /// True when `sub` reads `1`.
    pub fn flag(&self, sub: &str) -> bool {
        self.attr(sub).as_deref() == Some("1")
    }

    /// Whether `sub` is there (its links followed, wherever they lead:
    /// this only looks).
    pub fn exists(&self, sub: &str) -> bool {
        match &self.fd {
            Some(fd) => rustix::fs::statat(fd, sub, rustix::fs::AtFlags::empty()).is_ok(),
            None => self.sysfs.exists(&self.below(sub)),
        }
    }

    /// Names in the directory `sub` below this one, sorted; `None` when
    /// it is not there.
    pub fn list(&self, sub: &str) -> Option<Vec<String>> {
        let Some(fd) = &self.fd else {
            return self.sysfs.list_if_any(&self.below(sub));
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = match openat2_raw(fd.as_fd(), sub, flags, READ_RESOLVE) {
            Ok(Some(d)) => d,
            Err(e) if is_missing(&e) => return None,
            // a link out of this directory, or no openat2: through the root
            Ok(None) => return self.sysfs.list_if_any(&self.below(sub)),
            Err(e) if Errno::from_io_error(&e) == Some(Errno::XDEV) => {
                return self.sysfs.list_if_any(&self.below(sub));
            }
            // there, but not listable: no names
            Err(_) => return Some(Vec::new()),
        };
        let Ok(entries) = rustix::fs::Dir::new(dir) else {
            return Some(Vec::new());
        };
        let mut names = Vec::new();
        // an entry that cannot be read is left out, as `Sysfs::list` does
        for entry in entries.flatten() {
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        names.sort_by(|a, b| natural_cmp(a, b));
        Some(names)
    }

    /// Where this directory is, relative to the root, its links resolved
    /// as [`Sysfs::resolve`] does. A disk's is remembered: see
    /// `Sysfs::located`.
    pub fn canonical(&self) -> io::Result<String> {
        let found = match self.fd {
            // open, so it is there: no need to look again, unless its
            // links are not as the kernel makes them
            Some(_) => match self.sysfs.resolve_lexically(&self.rel)? {
                (at, true) => at,
                (_, false) => self.sysfs.canonical(&self.rel)?,
            },
            None => self.sysfs.resolve(&self.rel)?,
        };
        if let Some(disk) = self.rel.strip_prefix("block/")
            && !disk.contains('/')
        {
            lock(&self.sysfs.located).insert(disk.to_string(), found.clone());
        }
        Ok(found)
    }
}
