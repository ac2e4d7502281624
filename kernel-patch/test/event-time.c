// SPDX-License-Identifier: GPL-2.0-only
/*
 * event-time: stands in for /usr/sbin/blkqos during the udev event storm
 * measurement (guest/udev.sh check_udev_storm). Runs /usr/bin/blkqos with the
 * same arguments, as udevd's RUN would, and appends one line per event to
 * /tmp/event-times: "<wall ns> <exit status> <ACTION> <DEVNAME>". A C program,
 * not a shell wrapper, so that the figure is blkqos's own time plus one
 * fork and exec, not a shell's start-up.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	char line[512];
	long long t0 = now_ns();
	const char *action = getenv("ACTION"), *dev = getenv("DEVNAME");
	int status = 0, fd, n;
	pid_t pid = fork();

	(void)argc;
	if (pid < 0)
		return 1;
	if (pid == 0) {
		argv[0] = "/usr/bin/blkqos";
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return 1;
	n = snprintf(line, sizeof(line), "%lld %d %s %s\n", now_ns() - t0,
		     WIFEXITED(status) ? WEXITSTATUS(status) : 128,
		     action ? action : "-", dev ? dev : "-");
	if (n >= (int)sizeof(line))
		n = sizeof(line) - 1;
	fd = open("/tmp/event-times", O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd >= 0) {
		if (write(fd, line, n) != n)
			status = 1;
		close(fd);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
