//! The first I/O of a burst, seen as it is issued: the `block:block_rq_issue`
//! tracepoint, one perf event per CPU for each watched device, filtered on
//! the device's number, enabled only while the device's lease is lapsed.
//! Its first sample wakes a poll(2) on the event; the caller then disarms
//! it, so that a burst costs the I/O path one sample per CPU that issues
//! before the lease holds, and a lease that holds costs it nothing.
//!
//! Root (or CAP_PERFMON) and tracefs are needed; without them `open` fails
//! and `blkqos lease` reads the disks' `stat` alone.

use perf_event_open_sys as sys;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const EVENT: &str = "events/block/block_rq_issue/id";

/// The tracepoint's id, from tracefs.
pub fn issue_id() -> io::Result<u64> {
    let mut last = io::Error::from(io::ErrorKind::NotFound);
    for root in TRACEFS {
        match fs::read_to_string(format!("{root}/{EVENT}")) {
            Ok(t) => {
                return t.trim().parse().map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("{root}/{EVENT}: {t:?}"))
                });
            }
            Err(e) => last = e,
        }
    }
    Err(last)
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
        // SAFETY: sysconf has no preconditions.
        let page_size = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| io::Error::other("no page size"))?;
        let len = 2 * page_size;
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
    /// Watch nothing yet; fails where the tracepoint cannot be found.
    pub fn new() -> io::Result<IssueWatch> {
        Ok(IssueWatch {
            id: issue_id()?,
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
    pub fn armed_fds(&self) -> Vec<(RawFd, &str)> {
        (self.devices.iter())
            .filter(|(_, (_, armed))| *armed)
            .flat_map(|(d, (events, _))| events.iter().map(move |e| (e.fd.as_raw_fd(), d.as_str())))
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

    #[test]
    fn device_numbers_in_the_kernels_encoding() {
        assert_eq!(kernel_dev(259, 0), 259 << 20);
        assert_eq!(kernel_dev(8, 16), (8 << 20) | 16);
    }
}
