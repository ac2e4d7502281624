//! Without openat2(2) (ENOSYS: Linux before 5.6; EPERM: a seccomp profile
//! that denies it), writes still never go through a link out of the sysfs
//! root. The test runs itself again under a seccomp filter that makes
//! openat2 fail each way.

#![deny(unsafe_code)]

use blkqos::sysfs::Sysfs;
use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt;
use std::process::Command;

const ERRNO_VAR: &str = "BLKQOS_TEST_OPENAT2_ERRNO";

/// A seccomp filter: openat2 fails with `errno`, everything else runs.
/// Unsafe code allowed here (tests/source_layout.rs lists it): no safe
/// binding installs a seccomp filter.
#[allow(unsafe_code)]
fn deny_openat2(errno: u32) -> std::io::Result<()> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let filter = [
        // seccomp_data.nr
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_openat2 as u32,
        },
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ERRNO | errno),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut _,
    };
    rustix::thread::set_no_new_privs(true)?;
    // SAFETY: prctl with a filter program that outlives the call. (rustix's
    // set_secure_computing_mode takes no program: it cannot set a filter.)
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Run the test named `name` again in a child where openat2 fails.
/// Unsafe code allowed here (tests/source_layout.rs lists it):
/// `CommandExt::pre_exec` is itself unsafe.
#[allow(unsafe_code)]
fn in_child_without_openat2(name: &str) {
    for errno in [libc::ENOSYS, libc::EPERM] {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args([name, "--exact", "--test-threads=1"])
            .env(ERRNO_VAR, errno.to_string());
        // SAFETY: the closure makes only async-signal-safe calls (prctl).
        unsafe { c.pre_exec(move || deny_openat2(errno as u32)) };
        let out = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "openat2 failing with errno {errno}:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn child() -> bool {
    std::env::var_os(ERRNO_VAR).is_some()
}

#[test]
fn without_openat2_a_write_does_not_follow_a_link_out_of_the_root() {
    if !child() {
        return in_child_without_openat2(
            "without_openat2_a_write_does_not_follow_a_link_out_of_the_root",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let (root, outside) = (dir.path().join("root"), dir.path().join("outside"));
    fs::create_dir_all(outside.join("queue")).unwrap();
    fs::create_dir_all(outside.join("power")).unwrap();
    fs::write(outside.join("queue/cpu_lat_limit_us"), "-1\n").unwrap();
    fs::write(outside.join("power/pm_qos_resume_latency_us"), "0\n").unwrap();
    fs::create_dir_all(root.join("block")).unwrap();
    fs::create_dir_all(root.join("devices/system/cpu")).unwrap();
    // a disk not scanned this run (a restore scans none), and a CPU
    symlink(&outside, root.join("block/x")).unwrap();
    symlink(&outside, root.join("devices/system/cpu/cpu0")).unwrap();
    let s = Sysfs::new(&root);
    let disk = s.write("block/x/queue/cpu_lat_limit_us", "7");
    let cpu = s.write(
        "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us",
        "7",
    );
    let value = |f: &str| fs::read_to_string(outside.join(f)).unwrap();
    assert_eq!(
        value("queue/cpu_lat_limit_us"),
        "-1\n",
        "written outside the root: {disk:?}"
    );
    assert_eq!(
        value("power/pm_qos_resume_latency_us"),
        "0\n",
        "written outside the root: {cpu:?}"
    );
    assert!(disk.is_err() && cpu.is_err(), "{disk:?} {cpu:?}");
}

#[test]
fn without_openat2_a_disk_is_read_and_written_inside_the_root() {
    if !child() {
        return in_child_without_openat2(
            "without_openat2_a_disk_is_read_and_written_inside_the_root",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join("devices/pci0/a/queue")).unwrap();
    fs::create_dir_all(r.join("devices/pci0/a/holders")).unwrap();
    fs::create_dir_all(r.join("block")).unwrap();
    fs::write(r.join("devices/pci0/a/size"), "8\n").unwrap();
    fs::write(r.join("devices/pci0/a/queue/cpu_lat_limit_us"), "-1\n").unwrap();
    symlink("../devices/pci0/a", r.join("block/a")).unwrap();
    let s = Sysfs::new(r);
    let d = s.dir("block/a").unwrap();
    assert_eq!(d.canonical().unwrap(), "devices/pci0/a");
    assert_eq!(d.read("size").unwrap(), "8");
    assert_eq!(d.list("holders"), Some(Vec::new()));
    assert_eq!(d.list("mq"), None);
    let back = s
        .write_and_read_back("block/a/queue/cpu_lat_limit_us", "4")
        .unwrap();
    assert_eq!(back.unwrap(), "4");
}
