//! Fake sysfs trees laid out as Linux 6.12 lays them out, for the tests, the
//! benchmarks and demos (`cargo run --example mkfixture`). Test scaffolding,
//! not part of the shipped library: the integration tests, the library's
//! unit tests and the example include this file by path.
//!
//! Real directories live under `devices/`; `block/` and `class/block/` hold
//! relative symlinks to them; each disk has a `device` link to its controller
//! or SCSI device, `queue/`, `holders/`, `slaves/` and, when request-based,
//! `mq/N/cpu_list`. Links are relative as the kernel makes them (up to the
//! nearest common directory, `../../nvme0`). Panics on I/O errors: it is
//! test scaffolding.
//!
//! `tests/guest_layout.rs` holds the NVMe, multipath, md and dm parts to the
//! layout a real 6.12 kernel shows in the QEMU guest of `kernel-patch/test`.

use blkqos::abi::Abi;
use blkqos::sysfs::Sysfs;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// An Intel server's idle states: (name, exit latency us, target residency us).
pub const INTEL_IDLE: &[(&str, u64, u64)] = &[
    ("POLL", 0, 0),
    ("C1", 1, 1),
    ("C1E", 4, 4),
    ("C6", 170, 600),
];

/// The test idle driver of `kernel-patch/test` (the QEMU guest's table).
pub const TEST_IDLE: &[(&str, u64, u64)] = &[("POLL", 0, 0), ("C1", 2, 4), ("DEEP", 150, 600)];

pub struct Fixture {
    root: PathBuf,
    abi: Abi,
    cpus: u32,
    minor: u32,
    pci_slot: u32,
    scsi_host: u32,
    /// NVMe controller number -> its directory.
    nvme_ctrls: std::collections::BTreeMap<u32, String>,
    /// Link NVMe multipath heads to their paths in `multipath/` (Linux 6.14
    /// and later); 6.12 has no such links.
    multipath_links: bool,
}

pub struct DiskOpts<'a> {
    pub request_based: bool,
    pub rotational: bool,
    pub removable: bool,
    pub hidden: bool,
    pub size_sectors: u64,
    /// `device` link target (relative to the root), if any.
    pub device: Option<&'a str>,
    pub major: u32,
    /// Hardware queues; each gets an equal share of the CPUs.
    pub hw_queues: u32,
}

impl Default for DiskOpts<'_> {
    fn default() -> Self {
        DiskOpts {
            request_based: true,
            rotational: false,
            removable: false,
            hidden: false,
            size_sectors: 2 * 1024 * 1024 * 1024, // 1 TiB
            device: None,
            major: 259,
            hw_queues: 0,
        }
    }
}

fn write(path: &Path, value: &str) {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
    }
    fs::write(path, format!("{value}\n"))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

impl Fixture {
    /// An empty machine with `cpus` CPUs, each with the Intel idle table,
    /// whose kernel exposes the `abi` knobs on request-based queues.
    pub fn new(root: impl Into<PathBuf>, cpus: u32, abi: Abi) -> Fixture {
        let f = Fixture {
            root: root.into(),
            abi,
            cpus,
            minor: 0,
            pci_slot: 2,
            scsi_host: 0,
            nvme_ctrls: std::collections::BTreeMap::new(),
            multipath_links: false,
        };
        for dir in [
            "block",
            "class/block",
            "devices/virtual/block",
            "bus/pci/drivers/nvme",
            "bus/scsi/drivers/sd",
        ] {
            fs::create_dir_all(f.root.join(dir)).unwrap_or_else(|e| panic!("mkdir {dir}: {e}"));
        }
        for cpu in 0..cpus {
            f.cpu(cpu, INTEL_IDLE);
        }
        f.put(
            "devices/system/cpu/possible",
            &format!("0-{}", cpus.max(1) - 1),
        );
        f
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// (Re)create one CPU with the given idle-state table.
    pub fn cpu(&self, cpu: u32, states: &[(&str, u64, u64)]) {
        let base = format!("devices/system/cpu/cpu{cpu}");
        let _ = fs::remove_dir_all(self.root.join(format!("{base}/cpuidle")));
        self.put(&format!("{base}/power/pm_qos_resume_latency_us"), "0");
        for (i, (name, lat, res)) in states.iter().enumerate() {
            let s = format!("{base}/cpuidle/state{i}");
            self.put(&format!("{s}/name"), name);
            self.put(&format!("{s}/desc"), &format!("{name} idle state"));
            self.put(&format!("{s}/latency"), &lat.to_string());
            self.put(&format!("{s}/residency"), &res.to_string());
            self.put(&format!("{s}/disable"), "0");
            self.put(&format!("{s}/usage"), &(1000 * (i as u64 + 1)).to_string());
            self.put(
                &format!("{s}/time"),
                &(250_000 * (i as u64 + 1)).to_string(),
            );
            self.put(&format!("{s}/above"), &(10 * i as u64).to_string());
            self.put(&format!("{s}/below"), &(20 * i as u64).to_string());
        }
        // The lease attribute comes with the queue knobs (kernel-patch/),
        // in the cpuidle directory, which only a CPU with a driver has.
        if self.abi == Abi::Queue && !states.is_empty() {
            self.set_lease(cpu, None);
        }
    }

    /// The CPU's live lease as the patched kernel reports it: `Some((limit
    /// us, us left))`, or `None` for no lease (-1 and 0).
    pub fn set_lease(&self, cpu: u32, lease: Option<(u64, u64)>) {
        let (limit, left) = lease.map_or(("-1".to_string(), "0".to_string()), |(limit, left)| {
            (limit.to_string(), left.to_string())
        });
        let dir = format!("devices/system/cpu/cpu{cpu}/cpuidle");
        self.put(&format!("{dir}/cpu_lat_lease_limit_us"), &limit);
        self.put(&format!("{dir}/cpu_lat_lease_left_us"), &left);
    }

    /// A disk's `stat` after `reads` and `writes` I/Os of 4 KiB, each taking
    /// a millisecond.
    pub fn set_stat(&self, disk: &str, reads: u64, writes: u64) {
        let fields = [
            reads,
            0,
            reads * 8,
            reads,
            writes,
            0,
            writes * 8,
            writes,
            0,
            reads + writes,
            reads + writes,
        ];
        let mut line: Vec<String> = fields.iter().map(u64::to_string).collect();
        // discard and flush counters, as 6.12 prints them
        line.extend(std::iter::repeat_n("0".to_string(), 6));
        self.put(&format!("block/{disk}/stat"), &line.join(" "));
    }

    /// Write an attribute (relative to the root).
    pub fn put(&self, rel: &str, value: &str) {
        write(&self.root.join(rel), value);
    }

    pub fn get(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel))
            .unwrap_or_else(|e| panic!("read {rel}: {e}"))
            .trim_end()
            .to_string()
    }

    /// Lay out NVMe multipath heads as Linux 6.14 and later do, with a
    /// `multipath/` link to each path; by default they have none, as in 6.12.
    pub fn set_multipath_links(&mut self, on: bool) {
        self.multipath_links = on;
    }

    /// The slot of the next PCI function (`0000:00:<slot>.0`).
    pub fn set_pci_slot(&mut self, slot: u32) {
        self.pci_slot = slot;
    }

    /// A relative symlink at `link` (relative to the root) pointing at
    /// `target`, as sysfs makes it: up to the nearest directory that holds
    /// the target's parent, then down (`../../nvme0`, `../devices/...`).
    pub fn link(&self, link: &str, target: &str) {
        let from: Vec<&str> = link.split('/').collect();
        let from = &from[..from.len() - 1];
        let to: Vec<&str> = target.split('/').collect();
        let common = from
            .iter()
            .zip(&to[..to.len() - 1])
            .take_while(|(a, b)| a == b)
            .count();
        let rel = format!(
            "{}{}",
            "../".repeat(from.len() - common),
            to[common..].join("/")
        );
        let p = self.root.join(link);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("mkdir {}: {e}", parent.display()));
        }
        let _ = fs::remove_file(&p);
        symlink(&rel, &p).unwrap_or_else(|e| panic!("ln {link}: {e}"));
    }

    /// Register a disk directory at `dir` (relative, ending in the name).
    pub fn disk(&mut self, dir: &str, opts: DiskOpts) -> String {
        let name = dir.rsplit('/').next().unwrap_or(dir).to_string();
        let minor = self.minor;
        self.minor += 1;
        let p = |attr: &str| format!("{dir}/{attr}");
        self.put(&p("dev"), &format!("{}:{minor}", opts.major));
        // the kernel's count of disks made since boot (5.15+): a name or a
        // device number used again gets a new one
        self.put(&p("diskseq"), &(minor + 1).to_string());
        self.put(&p("size"), &opts.size_sectors.to_string());
        self.put(&p("removable"), if opts.removable { "1" } else { "0" });
        self.put(&p("hidden"), if opts.hidden { "1" } else { "0" });
        self.put(&p("ro"), "0");
        self.put(&p("stat"), &["0"; 17].join(" "));
        self.put(
            &p("uevent"),
            &format!(
                "MAJOR={}\nMINOR={minor}\nDEVNAME={name}\nDEVTYPE=disk",
                opts.major
            ),
        );
        for sub in ["holders", "slaves"] {
            fs::create_dir_all(self.root.join(p(sub))).unwrap_or_else(|e| panic!("mkdir: {e}"));
        }
        self.put(
            &p("queue/rotational"),
            if opts.rotational { "1" } else { "0" },
        );
        self.put(&p("queue/read_ahead_kb"), "128");
        self.put(&p("queue/max_sectors_kb"), "1280");
        self.put(&p("queue/logical_block_size"), "512");
        self.put(&p("queue/nomerges"), "0");
        if opts.request_based {
            self.put(&p("queue/scheduler"), "[none] mq-deadline kyber bfq");
            self.put(&p("queue/nr_requests"), "1023");
            self.put(&p("queue/rq_affinity"), "1");
            match self.abi {
                Abi::Queue => {
                    self.put(&p("queue/cpu_lat_limit_us"), "-1");
                    self.put(&p("queue/cpu_lat_timeout_ms"), "3");
                }
                Abi::Disk => {
                    self.put(&p("cpu_lat_limit_us"), "-1");
                    self.put(&p("cpu_lat_timeout_ms"), "3");
                }
                Abi::None => {}
            }
            let queues = if opts.hw_queues == 0 {
                self.cpus.max(1)
            } else {
                opts.hw_queues
            };
            for q in 0..queues {
                let cpus: Vec<String> = (0..self.cpus)
                    .filter(|c| c % queues == q)
                    .map(|c| c.to_string())
                    .collect();
                self.put(&p(&format!("mq/{q}/cpu_list")), &cpus.join(", "));
                self.put(&p(&format!("mq/{q}/nr_tags")), "1023");
            }
        }
        if let Some(dev) = opts.device {
            self.link(&p("device"), dev);
        }
        self.link(&format!("block/{name}"), dir);
        self.link(&format!("class/block/{name}"), dir);
        self.link(&format!("{dir}/subsystem"), "class/block");
        name
    }

    /// A partition of `disk` (its directory relative to the root).
    pub fn partition(&mut self, disk_dir: &str, n: u32) -> String {
        let disk = disk_dir.rsplit('/').next().unwrap_or(disk_dir);
        let sep = if disk.ends_with(|c: char| c.is_ascii_digit()) {
            "p"
        } else {
            ""
        };
        let name = format!("{disk}{sep}{n}");
        let dir = format!("{disk_dir}/{name}");
        self.put(&format!("{dir}/partition"), &n.to_string());
        self.put(&format!("{dir}/start"), "2048");
        self.put(&format!("{dir}/size"), "1000000");
        self.put(
            &format!("{dir}/uevent"),
            &format!("DEVNAME={name}\nDEVTYPE=partition\nPARTN={n}"),
        );
        fs::create_dir_all(self.root.join(format!("{dir}/holders")))
            .unwrap_or_else(|e| panic!("mkdir: {e}"));
        self.link(&format!("{dir}/subsystem"), "class/block");
        self.link(&format!("class/block/{name}"), &dir);
        name
    }

    fn pci(&mut self, driver: &str) -> String {
        let bdf = format!("0000:00:{:02x}.0", self.pci_slot);
        self.pci_slot += 1;
        let dir = format!("devices/pci0000:00/{bdf}");
        self.put(&format!("{dir}/vendor"), "0x144d");
        self.put(&format!("{dir}/class"), "0x010802");
        fs::create_dir_all(self.root.join(format!("bus/pci/drivers/{driver}")))
            .unwrap_or_else(|e| panic!("mkdir: {e}"));
        self.link(
            &format!("{dir}/driver"),
            &format!("bus/pci/drivers/{driver}"),
        );
        dir
    }

    fn nvme_ctrl(&mut self, ctrl: u32, model: &str, serial: &str) -> String {
        let pci = self.pci("nvme");
        let dir = format!("{pci}/nvme/nvme{ctrl}");
        self.put(&format!("{dir}/model"), &format!("{model:<40}"));
        self.put(&format!("{dir}/serial"), &format!("{serial:<20}"));
        self.put(&format!("{dir}/firmware_rev"), "GDC7102Q");
        self.put(&format!("{dir}/transport"), "pcie");
        self.put(
            &format!("{dir}/address"),
            pci.rsplit('/').next().unwrap_or(""),
        );
        self.link(&format!("{dir}/device"), &pci);
        self.nvme_ctrls.insert(ctrl, dir.clone());
        dir
    }

    /// An NVM subsystem device; 6.12 makes one for every controller, named
    /// after the first controller's number, and links its controllers.
    fn nvme_subsystem(&mut self, subsys: u32, ctrls: &[u32], model: &str, serial: &str) -> String {
        let sdir = format!("devices/virtual/nvme-subsystem/nvme-subsys{subsys}");
        self.put(&format!("{sdir}/model"), &format!("{model:<40}"));
        self.put(&format!("{sdir}/serial"), &format!("{serial:<20}"));
        self.put(
            &format!("{sdir}/subsysnqn"),
            &format!("nqn.2014.08.org.nvmexpress:{serial}"),
        );
        self.put(&format!("{sdir}/iopolicy"), "numa");
        for c in ctrls {
            let cdir = self.nvme_ctrls[c].clone();
            self.link(&format!("{sdir}/nvme{c}"), &cdir);
        }
        sdir
    }

    /// A PCIe NVMe controller with one namespace (no multipath): `nvme{ctrl}n1`.
    pub fn nvme(&mut self, ctrl: u32, model: &str, serial: &str) -> String {
        self.nvme_ctrl(ctrl, model, serial);
        self.nvme_subsystem(ctrl, &[ctrl], model, serial);
        self.nvme_ns(ctrl, 1)
    }

    /// Namespace `ns` of plain controller `ctrl` (made by [`Fixture::nvme`]):
    /// `nvme{ctrl}n{ns}`.
    pub fn nvme_ns(&mut self, ctrl: u32, ns: u32) -> String {
        let cdir = self.nvme_ctrls[&ctrl].clone();
        let dir = format!("{cdir}/nvme{ctrl}n{ns}");
        self.put(
            &format!("{dir}/wwid"),
            &format!("eui.00253852{ctrl:04x}{ns:04x}"),
        );
        self.put(&format!("{dir}/nsid"), &ns.to_string());
        self.disk(
            &dir,
            DiskOpts {
                device: Some(&cdir),
                ..DiskOpts::default()
            },
        )
    }

    /// Take a disk away as the kernel does on removal: its directory (with
    /// its partitions), its `block/` and `class/block/` entries and the
    /// `holders/` links its members had to it.
    pub fn remove_disk(&self, name: &str) {
        let dir = self.dir_of(name);
        let sysfs = Sysfs::new(&self.root);
        for lower in sysfs.list(&format!("{dir}/slaves")) {
            let ldir = self.dir_of(&lower);
            let _ = fs::remove_file(self.root.join(format!("{ldir}/holders/{name}")));
        }
        for entry in sysfs.list(&dir) {
            if sysfs.exists(&format!("{dir}/{entry}/partition")) {
                let _ = fs::remove_file(self.root.join(format!("class/block/{entry}")));
            }
        }
        fs::remove_dir_all(self.root.join(&dir)).unwrap_or_else(|e| panic!("rm {dir}: {e}"));
        for link in [format!("block/{name}"), format!("class/block/{name}")] {
            fs::remove_file(self.root.join(&link)).unwrap_or_else(|e| panic!("rm {link}: {e}"));
        }
    }

    /// The directory of a disk registered earlier.
    pub fn dir_of(&self, name: &str) -> String {
        Sysfs::new(&self.root)
            .canonical(&format!("class/block/{name}"))
            .unwrap_or_else(|e| panic!("no disk {name}: {e}"))
    }

    /// NVMe native multipath: subsystem `subsys` reached through controllers
    /// `ctrls` (the kernel numbers a subsystem after its first controller);
    /// the head `nvme{subsys}n1` is bio-based and its hidden path disks
    /// `nvme{subsys}c{ctrl}n1`, in the controllers' directories, do the I/O.
    /// Nothing links the head to its paths but the subsystem's links to its
    /// controllers, unless [`Fixture::set_multipath_links`].
    pub fn nvme_multipath(
        &mut self,
        subsys: u32,
        ctrls: &[u32],
        model: &str,
        serial: &str,
    ) -> String {
        for &c in ctrls {
            self.nvme_ctrl(c, model, serial);
        }
        let sdir = self.nvme_subsystem(subsys, ctrls, model, serial);
        let mut paths = Vec::new();
        for &c in ctrls {
            let cdir = self.nvme_ctrls[&c].clone();
            let pdir = format!("{cdir}/nvme{subsys}c{c}n1");
            self.put(&format!("{pdir}/wwid"), &format!("eui.9{subsys:07x}"));
            self.put(&format!("{pdir}/ana_state"), "optimized");
            self.disk(
                &pdir,
                DiskOpts {
                    hidden: true,
                    device: Some(&cdir),
                    ..DiskOpts::default()
                },
            );
            paths.push(pdir);
        }
        let hdir = format!("{sdir}/nvme{subsys}n1");
        self.put(&format!("{hdir}/wwid"), &format!("eui.9{subsys:07x}"));
        let head = self.disk(
            &hdir,
            DiskOpts {
                request_based: false,
                device: Some(&sdir),
                ..DiskOpts::default()
            },
        );
        if self.multipath_links {
            for p in paths {
                let name = p.rsplit('/').next().unwrap_or_default().to_string();
                self.link(&format!("{hdir}/multipath/{name}"), &p);
            }
        }
        head
    }

    /// A stacked virtual device (md or dm) over `lower` (disks or partitions).
    fn stacked(&mut self, name: &str, lower: &[&str], extra: &[(&str, &str)]) -> String {
        let dir = format!("devices/virtual/block/{name}");
        for (k, v) in extra {
            self.put(&format!("{dir}/{k}"), v);
        }
        self.disk(
            &dir,
            DiskOpts {
                request_based: false,
                major: 9,
                ..DiskOpts::default()
            },
        );
        for l in lower {
            let ldir = self.dir_of(l);
            self.link(&format!("{dir}/slaves/{l}"), &ldir);
            self.link(&format!("{ldir}/holders/{name}"), &dir);
        }
        name.to_string()
    }

    /// An md RAID0 array over whole disks.
    pub fn md_raid0(&mut self, name: &str, members: &[&str]) -> String {
        self.stacked(
            name,
            members,
            &[("md/level", "raid0"), ("md/array_state", "clean")],
        )
    }

    /// A dm-linear device (bio-based) over disks or partitions.
    pub fn dm_linear(&mut self, name: &str, dm_name: &str, lower: &[&str]) -> String {
        self.stacked(
            name,
            lower,
            &[("dm/name", dm_name), ("dm/uuid", &format!("LVM-{dm_name}"))],
        )
    }

    fn scsi_disk(
        &mut self,
        parent: &str,
        name: &str,
        vendor: &str,
        model: &str,
        opts: DiskOpts,
    ) -> String {
        let h = self.scsi_host;
        self.scsi_host += 1;
        let sdev = format!("{parent}/host{h}/target{h}:0:0/{h}:0:0:0");
        self.put(&format!("{sdev}/vendor"), &format!("{vendor:<8}"));
        self.put(&format!("{sdev}/model"), &format!("{model:<16}"));
        self.put(&format!("{sdev}/rev"), "1B6Q");
        self.put(&format!("{sdev}/wwid"), &format!("naa.5002538e4{h:07x}"));
        let serial = format!("S5STNF0T{h:06}");
        let mut page = vec![0u8, 0x80, 0, serial.len() as u8];
        page.extend_from_slice(serial.as_bytes());
        fs::write(self.root.join(format!("{sdev}/vpd_pg80")), page)
            .unwrap_or_else(|e| panic!("vpd: {e}"));
        self.link(&format!("{sdev}/driver"), "bus/scsi/drivers/sd");
        self.disk(
            &format!("{sdev}/block/{name}"),
            DiskOpts {
                device: Some(&sdev),
                hw_queues: 1,
                major: 8,
                ..opts
            },
        )
    }

    /// A SATA disk behind AHCI; `rotational` makes it an HDD.
    pub fn sata(&mut self, name: &str, model: &str, rotational: bool) -> String {
        let pci = self.pci("ahci");
        let port = self.scsi_host + 1;
        self.scsi_disk(
            &format!("{pci}/ata{port}"),
            name,
            "ATA",
            model,
            DiskOpts {
                rotational,
                ..DiskOpts::default()
            },
        )
    }

    /// A SAS disk behind an HBA and its expander port.
    pub fn sas(&mut self, name: &str, model: &str) -> String {
        let pci = self.pci("mpt3sas");
        let h = self.scsi_host;
        self.scsi_disk(
            &format!("{pci}/port-{h}:0/end_device-{h}:0"),
            name,
            "SEAGATE",
            model,
            DiskOpts {
                rotational: true,
                ..DiskOpts::default()
            },
        )
    }

    /// A removable USB mass-storage disk.
    pub fn usb(&mut self, name: &str, model: &str) -> String {
        let pci = self.pci("xhci_hcd");
        self.scsi_disk(
            &format!("{pci}/usb2/2-1/2-1:1.0"),
            name,
            "SanDisk",
            model,
            DiskOpts {
                removable: true,
                ..DiskOpts::default()
            },
        )
    }

    /// A virtio-blk disk.
    pub fn virtio(&mut self, name: &str, index: u32) -> String {
        let pci = self.pci("virtio-pci");
        let vdir = format!("{pci}/virtio{index}");
        fs::create_dir_all(self.root.join("bus/virtio/drivers/virtio_blk"))
            .unwrap_or_else(|e| panic!("mkdir: {e}"));
        self.link(&format!("{vdir}/driver"), "bus/virtio/drivers/virtio_blk");
        let dir = format!("{vdir}/block/{name}");
        self.put(&format!("{dir}/serial"), &format!("VIRTIO-{index}"));
        self.disk(
            &dir,
            DiskOpts {
                device: Some(&vdir),
                major: 254,
                ..DiskOpts::default()
            },
        )
    }

    /// A loop device; `size_sectors` 0 is an unbound (empty) one.
    pub fn loop_dev(&mut self, n: u32, size_sectors: u64) -> String {
        let dir = format!("devices/virtual/block/loop{n}");
        if size_sectors > 0 {
            self.put(
                &format!("{dir}/loop/backing_file"),
                "/var/lib/images/disk.img",
            );
        }
        self.disk(
            &dir,
            DiskOpts {
                size_sectors,
                major: 7,
                hw_queues: 1,
                ..DiskOpts::default()
            },
        )
    }

    /// A zram device (bio-based, no hardware queues).
    pub fn zram(&mut self, n: u32) -> String {
        let dir = format!("devices/virtual/block/zram{n}");
        self.put(&format!("{dir}/comp_algorithm"), "lzo [zstd]");
        self.disk(
            &dir,
            DiskOpts {
                request_based: false,
                major: 252,
                size_sectors: 8 * 1024 * 1024,
                ..DiskOpts::default()
            },
        )
    }

    /// The zoo the integration tests use: every kind of disk and stacking.
    pub fn zoo(root: impl Into<PathBuf>, abi: Abi) -> Fixture {
        let mut f = Fixture::new(root, 4, abi);
        f.nvme(0, "SAMSUNG MZQL21T9HCJR-00A07", "S64GNE0R100001");
        f.nvme(1, "SAMSUNG MZQL21T9HCJR-00A07", "S64GNE0R100002");
        f.nvme(2, "INTEL SSDPE2KX040T8", "PHLJ000000004");
        f.nvme(3, "INTEL SSDPE2KX040T8", "PHLJ000000005");
        f.md_raid0("md0", &["nvme2n1", "nvme3n1"]);
        f.nvme_multipath(4, &[4, 5], "NETAPP E-Series", "721838500123");
        f.sata("sda", "Samsung SSD 870", false);
        let sda = f.dir_of("sda");
        f.partition(&sda, 1);
        f.dm_linear("dm-0", "vg0-data", &["sda1"]);
        f.sata("sdb", "ST4000NM0035-1V4", true);
        f.sas("sdc", "ST8000NM0075");
        f.usb("sdd", "Cruzer Blade");
        f.virtio("vda", 1);
        f.loop_dev(0, 2 * 1024 * 1024);
        f.loop_dev(1, 0);
        f.zram(0);
        f
    }
}
