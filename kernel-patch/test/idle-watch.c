// SPDX-License-Identifier: GPL-2.0-only
/*
 * idle-watch: where every CPU's time goes, by idle state, for the blkqos
 * benchmarks in the QEMU guest.
 *
 *   idle-watch DEV IO_CPU NR_IOS WINDOW_US
 *
 * Issues NR_IOS 4 KiB O_DIRECT reads of DEV one at a time from IO_CPU,
 * notes when the last one returned, takes a reading of every CPU (below);
 * sleeps until WINDOW_US after the last I/O, takes another, and prints,
 * for every CPU N, shares of the time between its two readings, per cent:
 *
 *   cpuN_pct=<halted in the deepest state>
 *   cpuN_spin_pct=<paying exit latencies: the deepest state's, C1E's>
 *   cpuN_c1_pct=<halted in the states between POLL and the deepest (C1, C1E)>
 *   cpuN_poll_pct=<polling, state 0>
 *   cpuN_first_us=<last I/O -> CPU N's first deep entry, -1 if none>
 *
 *   idle-watch snap
 *
 * prints one reading per CPU, one line each:
 * "<poll us> <C1 and C1E us> <deep us> <deep entries> <deep exit latency us>
 *  <CLOCK_MONOTONIC ns> <C1E's exit spin us>" (C1 and C1E without that
 * spin); two snaps give the same shares for the time between them (the
 * latency runs' "while fio ran").
 *
 *   idle-watch burst DEV IO_CPU BURST GAP_US NR_BURSTS [raw|pos]
 *
 * times 4 KiB O_DIRECT reads of DEV from IO_CPU in NR_BURSTS bursts of
 * BURST reads, one at a time, each burst after GAP_US of sleep, and prints
 * the median, 90th and 99th percentiles and maximum of the first read of
 * each burst and of the others, in microseconds: "first_p50= first_p90=
 * first_p99= first_max= rest_p50= rest_p90= rest_p99= rest_max=". A gap
 * longer than a lease's timeout lets every CPU that served the last burst
 * sleep deep before the next one, as on a server between bursts of queries.
 * With "raw", prints each time instead, one per line, "first <us>" or
 * "rest <us>": runs of two configurations taken in turns pool theirs.
 * With "pos", prints each time in the order taken, "<index in its burst>
 * <us>": how many reads of a burst came before the CPUs were held.
 * With "v4", prints the summary, then "firsts=" every first read's time
 * (us, comma-separated), "rests=" the others' as a histogram of 1 us bins
 * ("gap:count" pairs, gap the bin's distance from the previous one
 * listed), "gap_sum_ms=" the time between the last completion of a burst and
 * the first submission of the next, summed, and per CPU N "gapdeepN_pct="
 * the share of that time CPU N was halted in the deepest state (debugfs
 * blkqos_test/deep, read without waking the CPU).
 *
 *   idle-watch sleeps CPU NR US
 *
 * sleeps NR times for US microseconds on CPU, each time idle in between,
 * and prints how much longer than asked a sleep took on average, in ns:
 * "over_ns=". The same on two kernels gives the difference in the cost
 * of an idle entry and exit with its timer wake-up.
 *
 *   idle-watch lease WATCH_CPU CPU MAX_MS
 *
 * reads CPU's live lease (debugfs blkqos_test/lease) from WATCH_CPU every
 * millisecond, without forking, until SIGTERM (and 20 ms more) or MAX_MS:
 * a look costs a read, and the next comes a millisecond after WATCH_CPU
 * runs again. (Under TCG
 * a CPU that reads without a pause left WATCH_CPU no turn for up to a
 * second, likely -icount's round robin of the vCPUs on one host thread: a
 * shell loop of fork, exec and sleep there then missed a lease that
 * lapses a few milliseconds after the last read.) Prints the first limit
 * seen other than none ("-1" if none), how many looks saw one, of how
 * many, and the longest time between two looks, in microseconds:
 * "lease=<limit> held_looks= looks= max_gap_us=".
 *
 * A reading is taken on the CPU itself: a CPU adds to a state's time only
 * when it leaves the state, so running there brings it up to date. The
 * test idle driver's states past C1 (C1E, the deepest) spin their exit
 * latency inside their enter call, and cpuidle counts the whole call as
 * time in the state: the spin, exit latency times entries, is taken out
 * of "halted" and shown apart.
 * The first deep entry comes from the test driver (debugfs
 * blkqos_test/first_deep), which stamps it when the CPU enters the state:
 * nothing has to poll for it and keep a CPU awake.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 8
#define MAX_STATES 4	/* POLL, C1, an intermediate state, the deepest */
#define FIRST_DEEP "/sys/kernel/debug/blkqos_test/first_deep"
#define DEEP_NS "/sys/kernel/debug/blkqos_test/deep"

struct cpu_files {
	int time[MAX_STATES];
	int nr_states;
	int usage;		/* of the deep state */
	long long exit_us;	/* of the deep state */
	int mid_usage[MAX_STATES];	/* of the states past C1 but the deepest */
	long long mid_exit_us[MAX_STATES];
};

/* times of POLL, of the states between POLL and the deepest, the deepest */
struct reading {
	long long time_us[3];
	long long mid_spin_us;	/* C1E's exit spin, out of time_us[1] */
	long long entries;
	long long when_ns;
};

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

	snprintf(path, sizeof(path),
		 "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/%s",
		 cpu, state, attr);
	return open(path, O_RDONLY);
}

/* the cpuidle files of each CPU that has them; returns how many */
static int open_cpus(struct cpu_files *files)
{
	int cpu, s, fd;

	for (cpu = 0; cpu < MAX_CPUS; cpu++) {
		for (s = 0; s < MAX_STATES; s++) {
			files[cpu].time[s] = open_attr(cpu, s, "time");
			if (files[cpu].time[s] < 0)
				break;
		}
		files[cpu].nr_states = s;
		if (s < 3)
			return cpu;
		files[cpu].usage = open_attr(cpu, s - 1, "usage");
		fd = open_attr(cpu, s - 1, "latency");
		if (files[cpu].usage < 0 || fd < 0)
			return cpu;
		files[cpu].exit_us = read_num(fd);
		close(fd);
		for (s = 2; s < files[cpu].nr_states - 1; s++) {
			files[cpu].mid_usage[s] = open_attr(cpu, s, "usage");
			fd = open_attr(cpu, s, "latency");
			if (files[cpu].mid_usage[s] < 0 || fd < 0)
				return cpu;
			files[cpu].mid_exit_us[s] = read_num(fd);
			close(fd);
		}
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

static void read_awake(int cpu, const struct cpu_files *f, struct reading *r)
{
	int s;

	pin(cpu);
	r->time_us[1] = 0;
	for (s = 0; s < f->nr_states; s++) {
		long long us = read_num(f->time[s]);

		if (s == 0)
			r->time_us[0] = us;
		else if (s == f->nr_states - 1)
			r->time_us[2] = us;
		else
			r->time_us[1] += us;
	}
	r->mid_spin_us = 0;
	for (s = 2; s < f->nr_states - 1; s++)
		r->mid_spin_us += f->mid_exit_us[s] * read_num(f->mid_usage[s]);
	r->time_us[1] -= r->mid_spin_us;
	r->entries = read_num(f->usage);
	r->when_ns = now_ns();
}

static int snap(void)
{
	struct cpu_files files[MAX_CPUS];
	struct reading r;
	int ncpu = open_cpus(files), cpu;

	if (!ncpu) {
		fprintf(stderr, "idle-watch: no cpuidle states\n");
		return 1;
	}
	for (cpu = 0; cpu < ncpu; cpu++) {
		read_awake(cpu, &files[cpu], &r);
		printf("%lld %lld %lld %lld %lld %lld %lld\n", r.time_us[0],
		       r.time_us[1], r.time_us[2], r.entries,
		       files[cpu].exit_us, r.when_ns, r.mid_spin_us);
	}
	return 0;
}

/* one 4 KiB read at a pseudo-random offset in the first 64 MiB */
static int read_random(int dev, void *buf, unsigned long long *lcg)
{
	*lcg = *lcg * 6364136223846793005ULL + 1442695040888963407ULL;
	if (pread(dev, buf, 4096, (off_t)((*lcg >> 33) % 16384) * 4096) != 4096) {
		perror("read");
		return -1;
	}
	return 0;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* the p-th percentile of n sorted values, nearest rank */
static long long pct(const long long *v, int n, int p)
{
	int rank = (n * p + 99) / 100;

	return n ? v[rank > 0 ? rank - 1 : 0] : -1;
}

/* every CPU's time halted in the deepest state (ns), into deep[] */
static int read_deep(int fd, long long *deep, int ncpu)
{
	char buf[64 * MAX_CPUS], *p = buf, *end;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	int cpu;
	long long ns;

	if (n <= 0)
		return -1;
	buf[n] = 0;
	for (cpu = 0; cpu < ncpu; cpu++)
		deep[cpu] = 0;
	while (sscanf(p, "cpu%d %lld", &cpu, &ns) == 2) {
		if (cpu >= 0 && cpu < ncpu)
			deep[cpu] = ns;
		end = strchr(p, '\n');
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

static void print_v4(const long long *first, int nf, const long long *rest,
		     int nrest, long long gap_ns, const long long *gap_deep,
		     int ncpu)
{
	long long prev = 0;
	int i, j, cpu;

	printf(" firsts=");
	for (i = 0; i < nf; i++)
		printf("%s%lld", i ? "," : "", first[i]);
	/* rest[] sorted: one pair per distinct value */
	printf(" rests=");
	for (i = 0; i < nrest; i = j) {
		for (j = i; j < nrest && rest[j] == rest[i]; j++)
			;
		printf("%s%lld:%d", i ? "," : "", rest[i] - prev, j - i);
		prev = rest[i];
	}
	printf(" gap_sum_ms=%.3f", gap_ns / 1e6);
	for (cpu = 0; cpu < ncpu; cpu++)
		printf(" gapdeep%d_pct=%.2f", cpu,
		       gap_ns ? 100.0 * gap_deep[cpu] / gap_ns : 0.0);
}

static int burst(int argc, char **argv)
{
	int io_cpu, b, nr, dev, i, j, nf = 0, nrest = 0, v4, deep_fd = -1, cpu;
	int ncpu = 0;
	long long gap_ns, *first, *rest, *all, t0, gap_end_ns, gap_sum = 0;
	long long deep_end[MAX_CPUS], deep_start[MAX_CPUS], gap_deep[MAX_CPUS] = { 0 };
	const char *deep_path;
	unsigned long long lcg = 12345;
	struct timespec gap;
	void *buf;

	if (argc != 7 && (argc != 8 || (strcmp(argv[7], "raw") &&
					strcmp(argv[7], "pos") &&
					strcmp(argv[7], "v4")))) {
		fprintf(stderr, "usage: idle-watch burst DEV IO_CPU BURST GAP_US NR_BURSTS [raw|pos|v4]\n");
		return 2;
	}
	v4 = argc == 8 && !strcmp(argv[7], "v4");
	if (v4) {
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		if (ncpu > MAX_CPUS)
			ncpu = MAX_CPUS;
		/* another file of the same lines: bench/tests' */
		deep_path = getenv("IDLE_WATCH_DEEP") ?: DEEP_NS;
		deep_fd = open(deep_path, O_RDONLY);
		if (deep_fd < 0 || read_deep(deep_fd, deep_end, ncpu)) {
			perror(deep_path);
			return 1;
		}
	}
	io_cpu = atoi(argv[3]);
	b = atoi(argv[4]);
	gap_ns = atoll(argv[5]) * 1000LL;
	nr = atoi(argv[6]);
	if (b < 1 || nr < 1 || gap_ns < 0 || (long long)b * nr > INT_MAX / 2) {
		fprintf(stderr, "idle-watch: bad burst arguments\n");
		return 2;
	}
	first = calloc(nr, sizeof(*first));
	rest = calloc((size_t)nr * b, sizeof(*rest));
	all = calloc((size_t)nr * b, sizeof(*all));
	dev = open(argv[2], O_RDONLY | O_DIRECT);
	if (!first || !rest || !all || dev < 0 || posix_memalign(&buf, 4096, 4096)) {
		perror(argv[2]);
		return 1;
	}
	pin(io_cpu);
	gap.tv_sec = gap_ns / 1000000000LL;
	gap.tv_nsec = gap_ns % 1000000000LL;
	if (v4 && read_deep(deep_fd, deep_end, ncpu))
		return 1;
	gap_end_ns = now_ns();
	for (i = 0; i < nr; i++) {
		clock_nanosleep(CLOCK_MONOTONIC, 0, &gap, NULL);
		/*
		 * the gap between bursts: from the last completion of one to
		 * the first submission of the next (the first burst's gap
		 * from the start, as the others')
		 */
		if (v4) {
			if (read_deep(deep_fd, deep_start, ncpu))
				return 1;
			gap_sum += now_ns() - gap_end_ns;
			for (cpu = 0; cpu < ncpu; cpu++)
				gap_deep[cpu] += deep_start[cpu] - deep_end[cpu];
		}
		for (j = 0; j < b; j++) {
			t0 = now_ns();
			if (read_random(dev, buf, &lcg))
				return 1;
			t0 = (now_ns() - t0) / 1000;
			all[i * b + j] = t0;
			if (j)
				rest[nrest++] = t0;
			else
				first[nf++] = t0;
		}
		if (v4) {
			gap_end_ns = now_ns();
			if (read_deep(deep_fd, deep_end, ncpu))
				return 1;
		}
	}
	if (argc == 8 && !strcmp(argv[7], "pos")) {
		for (i = 0; i < nr * b; i++)
			printf("%d %lld\n", i % b, all[i]);
		return 0;
	}
	if (argc == 8 && !strcmp(argv[7], "raw")) {
		for (i = 0; i < nf; i++)
			printf("first %lld\n", first[i]);
		for (i = 0; i < nrest; i++)
			printf("rest %lld\n", rest[i]);
		return 0;
	}
	qsort(first, nf, sizeof(*first), cmp_ll);
	qsort(rest, nrest, sizeof(*rest), cmp_ll);
	printf("first_p50=%lld first_p90=%lld first_p99=%lld first_max=%lld rest_p50=%lld rest_p90=%lld rest_p99=%lld rest_max=%lld",
	       pct(first, nf, 50), pct(first, nf, 90), pct(first, nf, 99),
	       pct(first, nf, 100), pct(rest, nrest, 50), pct(rest, nrest, 90),
	       pct(rest, nrest, 99), pct(rest, nrest, 100));
	if (v4)
		print_v4(first, nf, rest, nrest, gap_sum, gap_deep, ncpu);
	printf("\n");
	return 0;
}

static int sleeps(int argc, char **argv)
{
	long long nr, us, i, t0, over = 0;
	struct timespec ts;

	if (argc != 5) {
		fprintf(stderr, "usage: idle-watch sleeps CPU NR US\n");
		return 2;
	}
	nr = atoll(argv[3]);
	us = atoll(argv[4]);
	if (nr < 1 || us < 1 || us >= 1000000) {
		fprintf(stderr, "idle-watch: bad sleeps arguments\n");
		return 2;
	}
	pin(atoi(argv[2]));
	ts.tv_sec = 0;
	ts.tv_nsec = us * 1000;
	for (i = 0; i < nr; i++) {
		t0 = now_ns();
		clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		over += now_ns() - t0 - us * 1000;
	}
	printf("over_ns=%lld\n", over / nr);
	return 0;
}

static volatile sig_atomic_t lease_stop;

static void lease_term(int sig)
{
	(void)sig;
	lease_stop = 1;
}

static int lease(int argc, char **argv)
{
	long long end, t, last = 0, gap = 0, looks = 0, found = 0, held = 0;
	struct timespec ms = { .tv_sec = 0, .tv_nsec = 1000000 };
	char buf[1 << 16], want[32], first[32] = "-1";
	int fd, watch, cpu;
	long long max_ms;
	ssize_t n;

	if (argc != 5 || sscanf(argv[2], "%d", &watch) != 1 ||
	    sscanf(argv[3], "%d", &cpu) != 1 || sscanf(argv[4], "%lld", &max_ms) != 1 ||
	    watch < 0 || watch >= CPU_SETSIZE || cpu < 0 || max_ms < 1) {
		fprintf(stderr, "usage: idle-watch lease WATCH_CPU CPU MAX_MS\n");
		return 2;
	}
	pin(watch);
	signal(SIGTERM, lease_term);
	snprintf(want, sizeof(want), "cpu%d limit_us=", cpu);
	fd = open("/sys/kernel/debug/blkqos_test/lease", O_RDONLY);
	if (fd < 0) {
		perror("blkqos_test/lease");
		return 1;
	}
	end = now_ns() + max_ms * 1000000LL;
	while ((t = now_ns()) < end) {
		char *at, *rest;
		long v;

		/* a last look after SIGTERM, then 20 ms more */
		if (lease_stop == 1) {
			lease_stop = 2;
			end = t + 20000000LL;
		}
		if (last && t - last > gap)
			gap = t - last;
		last = t;
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0 || n == (ssize_t)sizeof(buf) - 1) {
			fprintf(stderr, "idle-watch: blkqos_test/lease: %s\n",
				n < 0 ? "unreadable" : "larger than the buffer");
			return 1;
		}
		buf[n] = 0;
		looks++;
		clock_nanosleep(CLOCK_MONOTONIC, 0, &ms, NULL);
		/* the line of CPU, at the start of a line */
		for (at = strstr(buf, want); at && at != buf && at[-1] != '\n';
		     at = strstr(at + 1, want))
			;
		if (!at)
			continue;
		found++;
		at += strlen(want);
		if (!strncmp(at, "auto ", 5)) {
			v = 0;
		} else {
			v = strtol(at, &rest, 10);
			if (rest == at || *rest != ' ') {
				fprintf(stderr, "idle-watch: cpu%d: %.20s\n", cpu, at);
				return 1;
			}
			if (v == -1)
				continue;
		}
		held++;
		if (!strcmp(first, "-1"))
			sscanf(at, "%31s", first);
	}
	if (!found) {
		fprintf(stderr, "idle-watch: no line for cpu%d in blkqos_test/lease\n", cpu);
		return 1;
	}
	printf("lease=%s held_looks=%lld looks=%lld max_gap_us=%lld\n", first,
	       held, looks, gap / 1000);
	return 0;
}

int main(int argc, char **argv)
{
	struct cpu_files files[MAX_CPUS];
	struct reading a[MAX_CPUS], b[MAX_CPUS];
	int io_cpu, nr, dev, ncpu, cpu, i;
	long long window_ns, t_last, first[MAX_CPUS];
	unsigned long long lcg = 12345;
	struct timespec end;
	void *buf;

	if (argc == 2 && !strcmp(argv[1], "snap"))
		return snap();
	if (argc > 1 && !strcmp(argv[1], "burst"))
		return burst(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "sleeps"))
		return sleeps(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "lease"))
		return lease(argc, argv);
	if (argc != 5) {
		fprintf(stderr,
			"usage: idle-watch DEV IO_CPU NR_IOS WINDOW_US\n"
			"       idle-watch snap\n"
			"       idle-watch burst DEV IO_CPU BURST GAP_US NR_BURSTS [raw|pos]\n"
			"       idle-watch sleeps CPU NR US\n"
			"       idle-watch lease WATCH_CPU CPU MAX_MS\n");
		return 2;
	}
	io_cpu = atoi(argv[2]);
	nr = atoi(argv[3]);
	window_ns = atoll(argv[4]) * 1000LL;

	dev = open(argv[1], O_RDONLY | O_DIRECT);
	if (dev < 0 || posix_memalign(&buf, 4096, 4096)) {
		perror(argv[1]);
		return 1;
	}
	ncpu = open_cpus(files);
	if (!ncpu) {
		fprintf(stderr, "idle-watch: no cpuidle states\n");
		return 1;
	}

	pin(io_cpu);
	for (i = 0; i < nr; i++)
		if (read_random(dev, buf, &lcg))
			return 1;
	t_last = now_ns();
	for (cpu = 0; cpu < ncpu; cpu++)
		read_awake(cpu, &files[cpu], &a[cpu]);
	end.tv_sec = (t_last + window_ns) / 1000000000LL;
	end.tv_nsec = (t_last + window_ns) % 1000000000LL;
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL);
	read_first(first, ncpu);
	for (cpu = 0; cpu < ncpu; cpu++)
		read_awake(cpu, &files[cpu], &b[cpu]);
	/* state times are in microseconds, the interval in nanoseconds */
	for (cpu = 0; cpu < ncpu; cpu++) {
		double pct = 100000.0 / (b[cpu].when_ns - a[cpu].when_ns);
		long long spin = files[cpu].exit_us *
				 (b[cpu].entries - a[cpu].entries);
		long long mid_spin = b[cpu].mid_spin_us - a[cpu].mid_spin_us;
		long long deep = b[cpu].time_us[2] - a[cpu].time_us[2];

		printf("%scpu%d_pct=%.1f cpu%d_spin_pct=%.1f cpu%d_c1_pct=%.1f"
		       " cpu%d_poll_pct=%.1f cpu%d_first_us=%lld",
		       cpu ? " " : "", cpu, (deep - spin) * pct, cpu,
		       (spin + mid_spin) * pct, cpu,
		       (b[cpu].time_us[1] - a[cpu].time_us[1]) * pct, cpu,
		       (b[cpu].time_us[0] - a[cpu].time_us[0]) * pct, cpu,
		       first[cpu]);
	}
	printf("\n");
	return 0;
}
