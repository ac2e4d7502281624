use super::*;

#[test]
fn transport_follows_the_device_ancestry() {
    let t = |p| transport_of(p, Kind::Disk);
    assert_eq!(
        t("devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1"),
        Transport::Nvme
    );
    assert_eq!(
        t("devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda"),
        Transport::Sata
    );
    assert_eq!(
        t("devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb"),
        Transport::Usb
    );
    assert_eq!(
        t(
            "devices/pci0000:00/0000:03:00.0/host2/port-2:0/end_device-2:0/target2:0:0/2:0:0:0/block/sdc"
        ),
        Transport::Sas
    );
    assert_eq!(
        t("devices/pci0000:00/0000:00:02.0/virtio1/block/vda"),
        Transport::Virtio
    );
    assert_eq!(
        t("devices/pci0000:00/0000:00:03.0/virtio2/host0/target0:0:0/0:0:0:0/block/sda"),
        Transport::Scsi
    );
    assert_eq!(t("devices/virtual/block/loop0"), Transport::Virtual);
    assert_eq!(
        t("devices/platform/soc/mmc_host/mmc0/mmc0:0001/block/mmcblk0"),
        Transport::Mmc
    );
}

#[test]
fn names_and_escapes() {
    assert!(is_nvme_path_name("nvme0c1n1"));
    assert!(!is_nvme_path_name("nvme0n1"));
    assert!(is_pci_address("0000:00:1f.2"));
    assert!(!is_pci_address("0000:00:1f"));
}
