use super::*;

#[test]
fn resolve_follows_links_like_canonical_for_sysfs_layouts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    fs::create_dir_all(r.join("devices/pci0/nvme/nvme0/nvme0n1/nvme0n1p1")).expect("mkdir");
    fs::create_dir_all(r.join("block")).expect("mkdir");
    fs::create_dir_all(r.join("class/block")).expect("mkdir");
    let link =
        |target: &str, at: &str| std::os::unix::fs::symlink(target, r.join(at)).expect("symlink");
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
    let mut v = vec![
        "sda", "nvme1n10", "", "nvme1n2", "a01", "a1", "nvme1", "md0p1", "md0",
    ];
    v.sort_by(|a, b| natural_cmp(a, b));
    assert_eq!(
        v,
        [
            "", "a01", "a1", "md0", "md0p1", "nvme1", "nvme1n2", "nvme1n10", "sda"
        ]
    );
}

/// A disk's directory as the kernel lays it out: `block/<disk>` a link
/// to its device directory.
fn disk_tree(r: &Path, disk: &str) {
    let dev = format!("devices/pci0/{disk}");
    fs::create_dir_all(r.join(&dev).join("queue")).unwrap();
    fs::create_dir_all(r.join(&dev).join("holders")).unwrap();
    fs::create_dir_all(r.join("block")).unwrap();
    fs::write(r.join(&dev).join("size"), "8\n").unwrap();
    fs::write(r.join(&dev).join("queue/cpu_lat_limit_us"), "-1\n").unwrap();
    std::os::unix::fs::symlink(format!("../{dev}"), r.join("block").join(disk)).unwrap();
}

#[test]
fn a_disk_directory_reads_lists_and_resolves_beneath_itself() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path().join("root");
    disk_tree(&r, "a");
    fs::write(dir.path().join("secret"), "s\n").unwrap();
    fs::create_dir_all(r.join("devices/queues/a")).unwrap();
    fs::write(r.join("devices/queues/a/depth"), "64\n").unwrap();
    // devices/pci0/a/{up,out,q,h}
    std::os::unix::fs::symlink("../../../../secret", r.join("devices/pci0/a/up")).unwrap();
    std::os::unix::fs::symlink("../../queues/a", r.join("devices/pci0/a/q")).unwrap();
    std::os::unix::fs::symlink("../../../a", r.join("devices/pci0/a/holders/h")).unwrap();
    let s = Sysfs::new(&r);
    let d = s.dir("block/a").unwrap();
    assert_eq!(d.canonical().unwrap(), "devices/pci0/a");
    assert_eq!(d.read("size").unwrap(), "8");
    assert_eq!(d.attr("missing"), None);
    assert!(d.exists("queue/cpu_lat_limit_us") && !d.exists("md"));
    assert_eq!(d.list("holders"), Some(vec!["h".to_string()]));
    assert_eq!(d.list("mq"), None, "missing is not empty");
    assert_eq!(d.list("size"), None, "a file is not a directory");
    // a link out of the disk's directory is followed from the root,
    // and refused where it leaves the root
    assert_eq!(d.read("q/depth").unwrap(), "64");
    assert_eq!(d.list("q"), Some(vec!["depth".to_string()]));
    let e = d.read("up").unwrap_err();
    assert!(e.to_string().contains("outside the sysfs root"), "{e}");
    assert!(s.dir("block/none").is_err());
    assert!(s.dir("block/a/size").is_err(), "a file is not a directory");
}

/// `block/a -> ../x/../devices/a`, `x -> devices/deep`: the kernel
/// reaches `devices/devices/a`; a lexical reading says `devices/a`.
fn dotdot_after_a_link(r: &Path, with_decoy: bool) {
    fs::create_dir_all(r.join("devices/deep")).unwrap();
    fs::create_dir_all(r.join("devices/devices/a/queue")).unwrap();
    fs::create_dir_all(r.join("block")).unwrap();
    fs::write(r.join("devices/devices/a/queue/cpu_lat_limit_us"), "1\n").unwrap();
    if with_decoy {
        fs::create_dir_all(r.join("devices/a/queue")).unwrap();
        fs::write(r.join("devices/a/queue/cpu_lat_limit_us"), "2\n").unwrap();
    }
    std::os::unix::fs::symlink("devices/deep", r.join("x")).unwrap();
    std::os::unix::fs::symlink("../x/../devices/a", r.join("block/a")).unwrap();
}

#[test]
fn a_scanned_disk_is_written_in_the_directory_its_values_were_read_from() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    dotdot_after_a_link(r, true);
    let s = Sysfs::new(r);
    let d = s.dir("block/a").unwrap();
    assert_eq!(d.read("queue/cpu_lat_limit_us").unwrap(), "1");
    let at = d.canonical().unwrap();
    s.write("block/a/queue/cpu_lat_limit_us", "9").unwrap();
    let value = |d: &str| fs::read_to_string(r.join(d).join("queue/cpu_lat_limit_us")).unwrap();
    assert_eq!(
        value("devices/a"),
        "2\n",
        "a directory never read is written"
    );
    assert_eq!(value("devices/devices/a"), "9");
    assert_eq!(at, s.canonical("block/a").unwrap());
}

#[test]
fn a_scanned_disk_that_is_there_does_not_vanish_on_write() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    dotdot_after_a_link(r, false);
    let s = Sysfs::new(r);
    s.dir("block/a").unwrap().canonical().unwrap();
    let w = s.write("block/a/queue/cpu_lat_limit_us", "9");
    assert!(w.is_ok(), "{w:?}");
}

#[test]
fn a_clone_forgets_where_disks_were_found() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let plug = |port: &str| {
        let dev = format!("devices/{port}/a");
        fs::create_dir_all(r.join(&dev).join("queue")).unwrap();
        fs::create_dir_all(r.join("block")).unwrap();
        fs::write(r.join(&dev).join("stat"), format!("{port}\n")).unwrap();
        let _ = fs::remove_file(r.join("block/a"));
        std::os::unix::fs::symlink(format!("../{dev}"), r.join("block/a")).unwrap();
    };
    plug("usb1");
    let s = Sysfs::new(r);
    let scan = s.clone();
    scan.dir("block/a").unwrap().canonical().unwrap();
    assert_eq!(scan.read("block/a/stat").unwrap(), "usb1");
    fs::remove_dir_all(r.join("devices/usb1")).unwrap();
    plug("usb2");
    assert!(is_vanished(&scan.read("block/a/stat").unwrap_err()));
    assert_eq!(s.read("block/a/stat").unwrap(), "usb2");
}

#[test]
fn a_scanned_disk_is_written_where_it_was_found() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    disk_tree(r, "a");
    disk_tree(r, "b");
    let s = Sysfs::new(r);
    s.dir("block/a").unwrap().canonical().unwrap();
    // the name now leads to another device (a removal and an add since)
    fs::remove_file(r.join("block/a")).unwrap();
    std::os::unix::fs::symlink("../devices/pci0/b", r.join("block/a")).unwrap();
    let back = s
        .write_and_read_back("block/a/queue/cpu_lat_limit_us", "4")
        .unwrap();
    assert_eq!(back.unwrap(), "4");
    let value = |d: &str| fs::read_to_string(r.join(d).join("queue/cpu_lat_limit_us")).unwrap();
    assert_eq!(value("devices/pci0/a"), "4");
    assert_eq!(value("devices/pci0/b"), "-1\n");
    // gone from where it was found: vanished, not written elsewhere
    fs::remove_dir_all(r.join("devices/pci0/a")).unwrap();
    let e = s.write("block/a/queue/cpu_lat_limit_us", "5").unwrap_err();
    assert!(is_vanished(&e), "{e}");
    assert_eq!(value("devices/pci0/b"), "-1\n");
    // a disk this run did not scan is resolved when written
    Sysfs::new(r)
        .write("block/a/queue/cpu_lat_limit_us", "6")
        .unwrap();
    assert_eq!(value("devices/pci0/b"), "6");
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
    assert!(s.open_beneath("a/b/v", false).is_ok());
    // a link where `canonical` saw a directory (swapped in since)
    let e = s.open_beneath("a/link/v", false).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(Errno::LOOP.raw_os_error()), "{e}");
    assert!(s.open_beneath("../outside", false).is_err());
    assert!(s.open_beneath("a/b/v\0x", false).is_err());
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
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        dir.path().join("f"),
        Mode::from_raw_mode(0o600),
    )
    .unwrap();
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
