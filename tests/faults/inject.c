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
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FD 4096

static char watched[MAX_FD];
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

static void note(int fd, const char *path)
{
	if (fd >= 0 && fd < MAX_FD)
		watched[fd] = matches(path);
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

#define OPENER(name, ...)						\
int name(__VA_ARGS__, int flags, ...)					\
{									\
	static int (*real)();						\
	mode_t mode = 0;						\
	va_list ap;							\
	int fd;								\
									\
	if (!real)							\
		real = (int (*)())dlsym(RTLD_NEXT, #name);		\
	if (flags & (O_CREAT | O_TMPFILE)) {				\
		va_start(ap, flags);					\
		mode = va_arg(ap, mode_t);				\
		va_end(ap);						\
	}

OPENER(open, const char *path)
	fd = real(path, flags, mode);
	note(fd, path);
	return fd;
}

OPENER(open64, const char *path)
	fd = real(path, flags, mode);
	note(fd, path);
	return fd;
}

OPENER(openat, int dirfd, const char *path)
	fd = real(dirfd, path, flags, mode);
	note(fd, path);
	return fd;
}

OPENER(openat64, int dirfd, const char *path)
	fd = real(dirfd, path, flags, mode);
	note(fd, path);
	return fd;
}

ssize_t write(int fd, const void *buf, size_t count)
{
	static ssize_t (*real)(int, const void *, size_t);
	const char *at = getenv("BLKQOS_FAULT_AT");
	const char *err = getenv("BLKQOS_FAULT_ERRNO");

	if (!real)
		real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	if (fd >= 0 && fd < MAX_FD && watched[fd] && at && err &&
	    listed(at, ++writes)) {
		errno = atoi(err);
		return -1;
	}
	return real(fd, buf, count);
}

int close(int fd)
{
	static int (*real)(int);

	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "close");
	if (fd >= 0 && fd < MAX_FD)
		watched[fd] = 0;
	return real(fd);
}
