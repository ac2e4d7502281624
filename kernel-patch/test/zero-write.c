// SPDX-License-Identifier: GPL-2.0-only
/*
 * zero-write FILE: one write(2) of zero bytes to FILE, which a shell cannot
 * do (echo -n and printf '' write nothing at all). Prints write's result
 * and errno, e.g. "ret=0 errno=0".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	ssize_t ret;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: zero-write FILE\n");
		return 2;
	}
	fd = open(argv[1], O_WRONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	errno = 0;
	ret = write(fd, "", 0);
	printf("ret=%zd errno=%d\n", ret, ret < 0 ? errno : 0);
	return close(fd) ? 1 : 0;
}
