# Sourced by guest-init.sh: blkqos on QEMU's emulated NVMe (see run's
# nvme_qemu_args for the topology).
check_nvme() {
	:
}
