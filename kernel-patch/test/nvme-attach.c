// SPDX-License-Identifier: GPL-2.0-only
/*
 * nvme-attach: attach a namespace to controllers of its subsystem, or
 * detach it, with the NVMe Namespace Attachment admin command, for the
 * blkqos QEMU guest (a namespace hot-add and removal without nvme-cli).
 *
 *   nvme-attach attach|detach /dev/nvmeN NSID CNTLID...
 *
 * The command goes to controller /dev/nvmeN and names every controller
 * (its cntlid, /sys/class/nvme/nvmeX/cntlid) that gains or loses the
 * namespace; each of them then reports "namespace attribute changed" and
 * the kernel rescans on its own.
 */
#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define NVME_ADMIN_NS_ATTACH 0x15

int main(int argc, char **argv)
{
	static uint16_t list[2048];	/* one 4 KiB controller list */
	struct nvme_admin_cmd cmd;
	int fd, i, ret;

	if (argc < 5 || (strcmp(argv[1], "attach") && strcmp(argv[1], "detach"))) {
		fprintf(stderr, "usage: %s attach|detach /dev/nvmeN NSID CNTLID...\n", argv[0]);
		return 2;
	}
	if (argc - 4 > 2047) {
		fprintf(stderr, "nvme-attach: too many controllers\n");
		return 2;
	}
	list[0] = (uint16_t)(argc - 4);	/* little endian, as is x86 */
	for (i = 4; i < argc; i++)
		list[i - 3] = (uint16_t)strtoul(argv[i], NULL, 0);
	fd = open(argv[2], O_RDWR);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = NVME_ADMIN_NS_ATTACH;
	cmd.nsid = (uint32_t)strtoul(argv[3], NULL, 0);
	cmd.addr = (uint64_t)(uintptr_t)list;
	cmd.data_len = sizeof(list);
	cmd.cdw10 = strcmp(argv[1], "attach") ? 1 : 0;	/* SEL */
	ret = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd);
	if (ret) {
		if (ret < 0)
			perror("NVME_IOCTL_ADMIN_CMD");
		else
			fprintf(stderr, "nvme-attach: status 0x%x\n", ret);
		return 1;
	}
	close(fd);
	return 0;
}
