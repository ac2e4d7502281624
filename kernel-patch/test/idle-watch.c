// SPDX-License-Identifier: GPL-2.0-only
/*
 * idle-watch: how soon every CPU goes back to a deep idle state after the
 * last I/O, and how much of the next window it spends there, for the
 * blkqos benchmarks in the QEMU guest.
 *
 *   idle-watch DEV IO_CPU NR_IOS STATE WINDOW_US
 *
 * Issues NR_IOS 4 KiB O_DIRECT reads of DEV one at a time from IO_CPU,
 * notes when the last one returned, reads each CPU's cpuidle STATE time
 * from that CPU (a CPU adds to it only when it leaves the state, so
 * running there brings it up to date); sleeps until WINDOW_US after the
 * last I/O, reads each again the same way, and prints, for every CPU N:
 *
 *   cpuN_pct=<share of the time between CPU N's two readings spent in
 *             STATE, per cent; the deep state's time includes its exit>
 *   cpuN_first_us=<last I/O -> CPU N's first STATE entry, -1 if none>
 *
 *   idle-watch snap STATE
 *
 * prints "<STATE time, us> <CLOCK_MONOTONIC, ns>" for every CPU, one line
 * each, both read on that CPU: two snaps give each CPU's share of the time
 * between them spent in STATE (the latency runs' "deep while fio ran").
 *
 * The first entry comes from the test idle driver (debugfs
 * blkqos_test/first_deep), which stamps it when the CPU enters the state:
 * nothing has to poll for it and keep a CPU awake.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 8
#define FIRST_DEEP "/sys/kernel/debug/blkqos_test/first_deep"

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

/* the state's time file of each CPU that has one; returns how many */
static int open_times(int state, int *fds)
{
	char path[128];
	int cpu;

	for (cpu = 0; cpu < MAX_CPUS; cpu++) {
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/time",
			 cpu, state);
		fds[cpu] = open(path, O_RDONLY);
		if (fds[cpu] < 0)
			break;
	}
	return cpu;
}

/* "cpuN <us>" lines of the test driver, -1 where it has none */
static void read_first(long long *first, int ncpu)
{
	char line[64];
	FILE *f = fopen(FIRST_DEEP, "r");
	int cpu;
	long long us;

	for (cpu = 0; cpu < ncpu; cpu++)
		first[cpu] = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "cpu%d %lld", &cpu, &us) == 2 &&
		    cpu >= 0 && cpu < ncpu)
			first[cpu] = us;
	fclose(f);
}

/*
 * A CPU's state time grows only when it leaves the state: read it from the
 * CPU itself (moving there wakes it), and note when.
 */
static long long read_awake(int cpu, int fd, long long *when)
{
	long long v;

	pin(cpu);
	v = read_num(fd);
	*when = now_ns();
	return v;
}

/* "STATE_TIME_US WHEN_NS" of every CPU, one line each, read on that CPU */
static int snap(int state)
{
	int fds[MAX_CPUS];
	int ncpu = open_times(state, fds), cpu;
	long long when, t;

	if (!ncpu) {
		fprintf(stderr, "idle-watch: no cpuidle state%d\n", state);
		return 1;
	}
	for (cpu = 0; cpu < ncpu; cpu++) {
		t = read_awake(cpu, fds[cpu], &when);
		printf("%lld %lld\n", t, when);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int io_cpu, nr, state, dev, ncpu, cpu, i;
	int fds[MAX_CPUS];
	long long window_ns, t_last, t0[MAX_CPUS], t1[MAX_CPUS], first[MAX_CPUS];
	long long w0[MAX_CPUS], w1[MAX_CPUS];
	unsigned long long lcg = 12345;
	struct timespec end;
	void *buf;

	if (argc == 3 && !strcmp(argv[1], "snap"))
		return snap(atoi(argv[2]));
	if (argc != 6) {
		fprintf(stderr,
			"usage: idle-watch DEV IO_CPU NR_IOS STATE WINDOW_US\n"
			"       idle-watch snap STATE\n");
		return 2;
	}
	io_cpu = atoi(argv[2]);
	nr = atoi(argv[3]);
	state = atoi(argv[4]);
	window_ns = atoll(argv[5]) * 1000LL;

	dev = open(argv[1], O_RDONLY | O_DIRECT);
	if (dev < 0 || posix_memalign(&buf, 4096, 4096)) {
		perror(argv[1]);
		return 1;
	}
	ncpu = open_times(state, fds);
	if (!ncpu) {
		fprintf(stderr, "idle-watch: no cpuidle state%d\n", state);
		return 1;
	}

	pin(io_cpu);
	for (i = 0; i < nr; i++) {
		lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
		if (pread(dev, buf, 4096, (off_t)((lcg >> 33) % 16384) * 4096) != 4096) {
			perror("read");
			return 1;
		}
	}
	t_last = now_ns();
	for (cpu = 0; cpu < ncpu; cpu++)
		t0[cpu] = read_awake(cpu, fds[cpu], &w0[cpu]);
	end.tv_sec = (t_last + window_ns) / 1000000000LL;
	end.tv_nsec = (t_last + window_ns) % 1000000000LL;
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL);
	read_first(first, ncpu);
	for (cpu = 0; cpu < ncpu; cpu++)
		t1[cpu] = read_awake(cpu, fds[cpu], &w1[cpu]);
	/* the state time is in microseconds, the interval in nanoseconds */
	for (cpu = 0; cpu < ncpu; cpu++)
		printf("%scpu%d_pct=%.1f cpu%d_first_us=%lld", cpu ? " " : "",
		       cpu, (t1[cpu] - t0[cpu]) * 100000.0 / (w1[cpu] - w0[cpu]),
		       cpu, first[cpu]);
	printf("\n");
	return 0;
}
