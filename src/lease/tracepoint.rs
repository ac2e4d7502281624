//! The first I/O of a burst, seen as it is issued: the `block:block_rq_issue`
//! tracepoint, one perf event per CPU for each watched device, filtered on
//! the device's number, enabled only while the device's lease is lapsed.
//! Its first sample wakes a poll(2) on the event; the caller then disarms
//! it, so that a burst costs the I/O path one sample per CPU that issues
//! before the lease holds, and a lease that holds costs it nothing.
//!
//! Root (or CAP_PERFMON) and tracefs are needed; without them `open` fails
//! and `blkqos lease` reads the disks' `stat` alone. tracefs not mounted
//! on the live system is mounted where it belongs.

// The one module with unsafe code (the crate roots deny it): no safe
// binding of perf_event_open(2) exists, so the call, its ioctls, the
// descriptor it returns and the mmap'd ring buffer are `unsafe` here, each
// with a SAFETY comment. tests/source_layout.rs counts them exactly.
#![allow(unsafe_code)]

use perf_event_open_sys as sys;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where tracefs is, below the sysfs root: its own mount point (4.1+), and
/// inside debugfs, which mounts it there itself (a system that mounts
/// debugfs alone, or a kernel before 4.1).
const TRACEFS: [&str; 2] = ["kernel/tracing", "kernel/debug/tracing"];
const EVENT: &str = "events/block/block_rq_issue/id";
/// What a person runs where blkqos could not mount tracefs.
pub const MOUNT_COMMAND: &str = "mount -t tracefs nodev /sys/kernel/tracing";

/// Why the tracepoint's id cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    #[error(
        "tracefs is not mounted (neither {} nor {} has {EVENT}){}; mount it: `{MOUNT_COMMAND}`",
        .roots[0].display(),
        .roots[1].display(),
        .mount.as_ref().map(|e| format!(" and mounting it at {} failed: {e}", .roots[0].display())).unwrap_or_default()
    )]
    NotMounted {
        roots: [PathBuf; 2],
        /// Why mounting it failed, where it was tried.
        mount: Option<io::Error>,
    },
    #[error("{}: {source} (tracefs is mounted, but the kernel has no block:block_rq_issue tracepoint there)", .path.display())]
    NoEvent { path: PathBuf, source: io::Error },
    #[error("{}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{}: {text:?}; expected a tracepoint id", .path.display())]
    Invalid { path: PathBuf, text: String },
}

/// The tracepoint's id, from tracefs below the sysfs root `sysfs`. Where
/// it is not mounted and `sysfs` is the live `/sys`, tracefs is mounted at
/// `/sys/kernel/tracing` (as systemd's sys-kernel-tracing.mount would);
/// a tree from elsewhere is never mounted on.
pub fn issue_id(sysfs: &Path) -> Result<u64, TracefsError> {
    let live = sysfs == Path::new("/sys");
    find_issue_id(sysfs, live.then_some(&mount_tracefs))
}

fn mount_tracefs(at: &Path) -> io::Result<()> {
    use rustix::mount::{MountFlags, mount};
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    mount("nodev", at, "tracefs", flags, None).map_err(io::Error::from)
}

/// Mounts tracefs at a path (tests pass their own).
type Mount<'a> = &'a dyn Fn(&Path) -> io::Result<()>;

/// [`issue_id`], mounting with `mount` (none: never).
fn find_issue_id(sysfs: &Path, mount: Option<Mount>) -> Result<u64, TracefsError> {
    let roots = TRACEFS.map(|t| sysfs.join(t));
    if let Some(found) = read_id(&roots) {
        return found;
    }
    let mount = mount.map(|m| m(&roots[0]));
    match mount {
        Some(Ok(())) => {
            log::info!(
                "tracefs was not mounted: mounted it at {}",
                roots[0].display()
            );
            read_id(&roots[..1]).unwrap_or_else(|| {
                let path = roots[0].join(EVENT);
                let source = io::Error::from(io::ErrorKind::NotFound);
                Err(TracefsError::NoEvent { path, source })
            })
        }
        Some(Err(e)) => Err(TracefsError::NotMounted {
            roots,
            mount: Some(e),
        }),
        None => Err(TracefsError::NotMounted { roots, mount: None }),
    }
}

/// The id from the first of `roots` where tracefs is; none where it is
/// in none of them.
fn read_id(roots: &[PathBuf]) -> Option<Result<u64, TracefsError>> {
    for root in roots {
        let path = root.join(EVENT);
        match fs::read_to_string(&path) {
            Ok(text) => {
                return Some(match text.trim().parse() {
                    Ok(id) => Ok(id),
                    Err(_) => Err(TracefsError::Invalid { path, text }),
                });
            }
            // tracefs there, without the event: no other place will have it
            Err(source)
                if source.kind() == io::ErrorKind::NotFound && root.join("events").is_dir() =>
            {
                return Some(Err(TracefsError::NoEvent { path, source }));
            }
            Err(source) if source.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Some(Err(TracefsError::Read { path, source })),
        }
    }
    None
}

/// The kernel's own encoding of a device number (`MKDEV`: 12 bits of major
/// above 20 of minor), which tracepoint filters compare `dev` with.
pub fn kernel_dev(major: u32, minor: u32) -> u64 {
    (u64::from(major) << 20) | u64::from(minor & 0xfffff)
}

/// One CPU's event and its ring buffer (one metadata page, one data page:
/// the samples are read for their number only).
struct Event {
    fd: OwnedFd,
    /// Invariant: a live mapping of `len` bytes of `fd`, made in `open`
    /// and unmapped only in `drop`.
    page: NonNull<sys::bindings::perf_event_mmap_page>,
    len: usize,
}

impl Event {
    fn open(id: u64, dev: u64, cpu: u32) -> io::Result<Event> {
        let mut attr = sys::bindings::perf_event_attr {
            type_: sys::bindings::PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
            config: id,
            ..Default::default()
        };
        attr.sample_period = 1;
        attr.wakeup_events = 1;
        attr.set_disabled(1);
        let cpu_arg =
            i32::try_from(cpu).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: attr is a fully initialised perf_event_attr of the size
        // it declares; the call creates a file descriptor and nothing else.
        let fd = unsafe {
            sys::perf_event_open(
                &mut attr,
                -1,
                cpu_arg,
                -1,
                libc::c_ulong::from(sys::bindings::PERF_FLAG_FD_CLOEXEC),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by perf_event_open and is owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let filter = CString::new(format!("dev == {dev}")).map_err(io::Error::other)?;
        // SAFETY: the filter is a NUL-terminated string the kernel copies.
        if unsafe { sys::ioctls::SET_FILTER(fd.as_raw_fd(), filter.as_ptr().cast_mut()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let len = 2 * rustix::param::page_size();
        // SAFETY: a new shared mapping of the event's ring buffer, checked
        // below; nothing else refers to that address range.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let page = NonNull::new(addr.cast()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Event { fd, page, len })
    }

    fn set_enabled(&self, on: bool) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: fd is this event's; the ioctls take no pointer.
        let r = unsafe {
            if on {
                sys::ioctls::ENABLE(fd, 0)
            } else {
                sys::ioctls::DISABLE(fd, 0)
            }
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether samples arrived since the last call; they are dropped.
    fn take(&self) -> bool {
        // SAFETY: page is the live mapping (see the field); data_head and
        // data_tail are naturally aligned u64s the kernel and this process
        // share, accessed atomically as perf_event_open(2) prescribes.
        let (head, tail) = unsafe {
            let p = self.page.as_ptr();
            (
                AtomicU64::from_ptr(&raw mut (*p).data_head),
                AtomicU64::from_ptr(&raw mut (*p).data_tail),
            )
        };
        let h = head.load(Ordering::Acquire);
        let seen = h != tail.load(Ordering::Relaxed);
        tail.store(h, Ordering::Release);
        seen
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, unmapped once, here.
        unsafe {
            libc::munmap(self.page.as_ptr().cast(), self.len);
        }
    }
}

/// The issue events of each watched device, and which are armed.
pub struct IssueWatch {
    id: u64,
    devices: BTreeMap<String, (Vec<Event>, bool)>,
    /// The number and the CPUs each device's events were opened for.
    opened_for: BTreeMap<String, (u64, Vec<u32>)>,
}

impl IssueWatch {
    /// Watch nothing yet; fails where the tracepoint cannot be found below
    /// the sysfs root `sysfs` (see [`issue_id`]).
    pub fn new(sysfs: &Path) -> Result<IssueWatch, TracefsError> {
        Ok(IssueWatch {
            id: issue_id(sysfs)?,
            devices: BTreeMap::new(),
            opened_for: BTreeMap::new(),
        })
    }

    /// Watch `device` (number `major:minor`) on `cpus`, disarmed; its
    /// events of before, if any, closed.
    pub fn add(&mut self, device: &str, major: u32, minor: u32, cpus: &[u32]) -> io::Result<()> {
        self.remove(device);
        let dev = kernel_dev(major, minor);
        let events = (cpus.iter())
            .map(|&c| Event::open(self.id, dev, c))
            .collect::<io::Result<Vec<_>>>()?;
        self.devices.insert(device.to_string(), (events, false));
        self.opened_for
            .insert(device.to_string(), (dev, cpus.to_vec()));
        Ok(())
    }

    pub fn remove(&mut self, device: &str) {
        self.devices.remove(device);
        self.opened_for.remove(device);
    }

    /// Whether `device` is watched as `major:minor` on exactly `cpus`.
    pub fn watches_as(&self, device: &str, major: u32, minor: u32, cpus: &[u32]) -> bool {
        (self.opened_for.get(device))
            .is_some_and(|(dev, on)| *dev == kernel_dev(major, minor) && on == cpus)
    }

    pub fn watches(&self, device: &str) -> bool {
        self.devices.contains_key(device)
    }

    pub fn armed(&self, device: &str) -> bool {
        self.devices.get(device).is_some_and(|(_, armed)| *armed)
    }

    /// Arm (`on`) or disarm a device's events; a no-op when they already are.
    pub fn arm(&mut self, device: &str, on: bool) -> io::Result<()> {
        let Some((events, armed)) = self.devices.get_mut(device) else {
            return Ok(());
        };
        if *armed == on {
            return Ok(());
        }
        for e in events.iter() {
            if on {
                // a sample left from the last arming would wake at once
                e.take();
            }
            e.set_enabled(on)?;
        }
        *armed = on;
        Ok(())
    }

    /// The armed events' descriptors with their device, to poll for input.
    pub fn armed_fds(&self) -> Vec<(BorrowedFd<'_>, &str)> {
        (self.devices.iter())
            .filter(|(_, (_, armed))| *armed)
            .flat_map(|(d, (events, _))| events.iter().map(move |e| (e.fd.as_fd(), d.as_str())))
            .collect()
    }

    /// The armed devices whose events fired since the last look.
    pub fn fired(&mut self) -> Vec<String> {
        (self.devices.iter())
            .filter(|(_, (_, armed))| *armed)
            // every event's samples are dropped, not only the first's
            .filter(|(_, (events, _))| events.iter().filter(|e| e.take()).count() > 0)
            .map(|(d, _)| d.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn the_id_is_read_from_tracefs_or_from_inside_debugfs() {
        let dir = tempfile::tempdir().unwrap();
        let never = |_: &Path| -> io::Result<()> { panic!("mounted with tracefs there") };
        put(
            dir.path(),
            &format!("kernel/debug/tracing/{EVENT}"),
            "1234\n",
        );
        assert_eq!(find_issue_id(dir.path(), Some(&never)).unwrap(), 1234);
        put(dir.path(), &format!("kernel/tracing/{EVENT}"), "1500\n");
        assert_eq!(find_issue_id(dir.path(), Some(&never)).unwrap(), 1500);
    }

    #[test]
    fn tracefs_missing_is_mounted_where_it_may_be_and_named_where_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let e = find_issue_id(root, None).unwrap_err().to_string();
        let tracing = root.join("kernel/tracing").display().to_string();
        assert!(e.starts_with("tracefs is not mounted"), "{e}");
        assert!(e.contains(&tracing), "{e}");
        assert!(e.contains("kernel/debug/tracing"), "{e}");
        assert!(
            e.ends_with("mount it: `mount -t tracefs nodev /sys/kernel/tracing`"),
            "{e}"
        );
        let refused = |_: &Path| Err(io::Error::from_raw_os_error(libc::EPERM));
        let e = find_issue_id(root, Some(&refused)).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "and mounting it at {tracing} failed: Operation not permitted"
            )),
            "{e}"
        );
        assert!(e.contains(MOUNT_COMMAND), "{e}");
        let mounted = std::cell::RefCell::new(Vec::new());
        let mount = |at: &Path| {
            mounted.borrow_mut().push(at.to_path_buf());
            put(at, EVENT, "77\n");
            Ok(())
        };
        assert_eq!(find_issue_id(root, Some(&mount)).unwrap(), 77);
        assert_eq!(*mounted.borrow(), [root.join("kernel/tracing")]);
    }

    #[test]
    fn tracefs_without_the_block_event_says_so_and_mounts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        put(dir.path(), "kernel/tracing/events/enable", "0\n");
        let never = |_: &Path| -> io::Result<()> { panic!("mounted over tracefs") };
        let e = find_issue_id(dir.path(), Some(&never)).unwrap_err();
        assert!(matches!(e, TracefsError::NoEvent { .. }), "{e}");
        assert!(
            e.to_string().contains("no block:block_rq_issue tracepoint"),
            "{e}"
        );
        put(dir.path(), &format!("kernel/tracing/{EVENT}"), "x\n");
        let e = find_issue_id(dir.path(), Some(&never)).unwrap_err();
        assert!(matches!(e, TracefsError::Invalid { .. }), "{e}");
    }

    #[test]
    fn device_numbers_in_the_kernels_encoding() {
        assert_eq!(kernel_dev(259, 0), 259 << 20);
        assert_eq!(kernel_dev(8, 16), (8 << 20) | 16);
    }
}
