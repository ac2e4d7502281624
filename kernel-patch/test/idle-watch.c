// SPDX-License-Identifier: GPL-2.0-only
/*
 * idle-watch: how soon a CPU goes back to a deep idle state after its last
 * I/O, for the blkqos benchmarks in the QEMU guest.
 *
 *   idle-watch DEV IO_CPU WATCH_CPU NR_IOS STATE WINDOW_US
 *
 * Issues NR_IOS 4 KiB O_DIRECT reads of DEV one at a time from IO_CPU, notes
 * the time the last one returned, moves itself to WATCH_CPU and polls
 * IO_CPU's cpuidle STATE usage counter until it moves (the first entry into
 * that state), then sleeps out WINDOW_US counted from the last I/O and
 * prints:
 *
 *   first_us=<last I/O -> first entry, or -1 if none within 50 ms>
 *   pct=<share of the window IO_CPU spent in STATE, per cent>
 *
 * Doing the I/O itself is what makes "after the last I/O" exact: a separate
 * program could only start watching after fio has exited.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define POLL_LIMIT_NS 50000000LL

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static long long read_num(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0) {
		perror("pread cpuidle");
		exit(1);
	}
	buf[n] = 0;
	return atoll(buf);
}

static int open_attr(int cpu, int state, const char *attr)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path),
		 "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/%s",
		 cpu, state, attr);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	return fd;
}

int main(int argc, char **argv)
{
	int io_cpu, watch_cpu, nr, state, dev, usage_fd, time_fd, i;
	long long window_ns, t_last, t_first = -1, usage0, time0, time1;
	unsigned long long lcg = 12345;
	struct timespec end;
	void *buf;

	if (argc != 7) {
		fprintf(stderr,
			"usage: idle-watch DEV IO_CPU WATCH_CPU NR_IOS STATE WINDOW_US\n");
		return 2;
	}
	io_cpu = atoi(argv[2]);
	watch_cpu = atoi(argv[3]);
	nr = atoi(argv[4]);
	state = atoi(argv[5]);
	window_ns = atoll(argv[6]) * 1000LL;

	dev = open(argv[1], O_RDONLY | O_DIRECT);
	if (dev < 0 || posix_memalign(&buf, 4096, 4096)) {
		perror(argv[1]);
		return 1;
	}
	usage_fd = open_attr(io_cpu, state, "usage");
	time_fd = open_attr(io_cpu, state, "time");

	pin(io_cpu);
	for (i = 0; i < nr; i++) {
		lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
		if (pread(dev, buf, 4096, (off_t)((lcg >> 33) % 16384) * 4096) != 4096) {
			perror("read");
			return 1;
		}
	}
	t_last = now_ns();
	/* still running on IO_CPU, so it cannot have gone idle yet */
	usage0 = read_num(usage_fd);
	time0 = read_num(time_fd);
	pin(watch_cpu);
	while (now_ns() - t_last < POLL_LIMIT_NS) {
		if (read_num(usage_fd) != usage0) {
			t_first = now_ns() - t_last;
			break;
		}
	}
	end.tv_sec = (t_last + window_ns) / 1000000000LL;
	end.tv_nsec = (t_last + window_ns) % 1000000000LL;
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL);
	time1 = read_num(time_fd);
	printf("first_us=%lld pct=%.1f\n", t_first < 0 ? -1 : t_first / 1000,
	       (time1 - time0) * 100000.0 / window_ns);
	return 0;
}
