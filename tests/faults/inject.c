// SPDX-License-Identifier: GPL-2.0-only
/*
 * LD_PRELOAD fault injection for the blkqos integration tests: the Nth
 * write(2) to a file whose path contains $BLKQOS_FAULT_MATCH fails with
 * errno $BLKQOS_FAULT_ERRNO, as a sysfs attribute's store() would. Every
 * other call goes to libc untouched. Counting is per process.
 *
 * $BLKQOS_FAULT_AT may list several writes ("3,5") and $BLKQOS_FAULT_MATCH
 * several substrings ("/queue/|state.json"), counted together: a failed
 * write followed by a failed rollback, or by a failed save of the state.
 *
 * With $BLKQOS_FAULT_HOLD set to a path instead of an errno, the listed
 * writes are held, not failed: the shim creates "$BLKQOS_FAULT_HOLD.held"
 * and waits (at most 60 s) until the test removes $BLKQOS_FAULT_HOLD, then
 * writes. A race test holds one run inside its write, with its locks
 * taken, while another runs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static int writes;

static int matches(const char *path)
{
	const char *match = getenv("BLKQOS_FAULT_MATCH");
	char one[256];

	while (match && path && *match) {
		size_t n = strcspn(match, "|");

		if (n > 0 && n < sizeof(one)) {
			memcpy(one, match, n);
			one[n] = '\0';
			if (strstr(path, one))
				return 1;
		}
		match += n + (match[n] == '|');
	}
	return 0;
}

/*
 * The file behind a descriptor, asked at write time: blkqos opens sysfs
 * attributes with openat2(2) through syscall(), which no open() wrapper
 * would see.
 */
static int watched(int fd)
{
	char link[64], path[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return 0;
	path[n] = '\0';
	return matches(path);
}

/* Is write number n one of the comma-separated numbers in at? */
static int listed(const char *at, int n)
{
	char *end;

	while (at && *at) {
		long k = strtol(at, &end, 10);

		if (end == at)
			return 0;
		if (k == n)
			return 1;
		at = end + (*end == ',');
	}
	return 0;
}

/* Say the write is held, then wait until the test lets it go. */
static void hold(const char *gate)
{
	struct timespec ms = { 0, 1000000 };
	char held[4096];
	int i, fd;

	snprintf(held, sizeof(held), "%s.held", gate);
	fd = open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	for (i = 0; i < 60000 && access(gate, F_OK) == 0; i++)
		nanosleep(&ms, NULL);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	static ssize_t (*real)(int, const void *, size_t);
	const char *at = getenv("BLKQOS_FAULT_AT");
	const char *err = getenv("BLKQOS_FAULT_ERRNO");
	const char *gate = getenv("BLKQOS_FAULT_HOLD");

	if (!real)
		real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	if (at && gate && fd > 2 && watched(fd) && listed(at, ++writes)) {
		hold(gate);
		return real(fd, buf, count);
	}
	if (at && err && fd > 2 && watched(fd) && listed(at, ++writes)) {
		errno = atoi(err);
		return -1;
	}
	return real(fd, buf, count);
}
