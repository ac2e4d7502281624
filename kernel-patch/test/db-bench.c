// SPDX-License-Identifier: GPL-2.0-only
/*
 * db-bench: a fixed SQLite query mix, each query timed, for the blkqos
 * benchmark in the QEMU guest (guest/bench.sh bench_db).
 *
 *   db-bench load DB ROWS
 *
 * makes DB a table kv(k INTEGER PRIMARY KEY, v TEXT) of ROWS rows of 500
 * bytes each, in WAL mode (about 2.5 pages of 4 KiB per 20 rows).
 *
 *   db-bench run DB ROWS QUERIES
 *
 * runs QUERIES statements drawn from a fixed seed: nine point reads
 * (SELECT length(v) FROM kv WHERE k = ?) to one point update, each its own
 * transaction under synchronous=FULL (a commit appends to the WAL and
 * flushes). SQLite's own cache is 64 KiB, so once the kernel's page cache
 * has been dropped most reads reach the device. Prints, in microseconds:
 * "qps= p50= p99= max= read_p99= write_p99=".
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(sqlite3 *db, const char *what)
{
	fprintf(stderr, "db-bench: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static void exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "db-bench: %s: %s\n", sql, err);
		exit(1);
	}
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* the p-th percentile (nearest rank) of n sorted values, in us */
static double pct(const long long *v, int n, int p)
{
	int i = (n * p + 99) / 100 - 1;

	return n ? v[i < 0 ? 0 : i] / 1000.0 : -1;
}

static int load(sqlite3 *db, int rows)
{
	char sql[256];

	exec(db, "PRAGMA journal_mode=WAL");
	exec(db, "CREATE TABLE kv(k INTEGER PRIMARY KEY, v TEXT)");
	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c"
		 " WHERE x < %d) INSERT INTO kv SELECT x, printf('%%.500c', 'v')"
		 " FROM c", rows);
	exec(db, sql);
	exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
	return 0;
}

static int run(sqlite3 *db, int rows, int queries)
{
	long long *all = calloc(queries, sizeof(*all));
	long long *rd = calloc(queries, sizeof(*rd));
	long long *wr = calloc(queries, sizeof(*wr));
	unsigned long long lcg = 25;
	sqlite3_stmt *sel, *upd;
	int i, nr = 0, nw = 0;
	long long start;

	if (!all || !rd || !wr) {
		perror("calloc");
		return 1;
	}
	exec(db, "PRAGMA synchronous=FULL");
	exec(db, "PRAGMA cache_size=-64");
	if (sqlite3_prepare_v2(db, "SELECT length(v) FROM kv WHERE k = ?", -1,
			       &sel, NULL) != SQLITE_OK)
		die(db, "prepare select");
	if (sqlite3_prepare_v2(db, "UPDATE kv SET v = printf('%.500c', ?) WHERE k = ?",
			       -1, &upd, NULL) != SQLITE_OK)
		die(db, "prepare update");
	start = now_ns();
	for (i = 0; i < queries; i++) {
		long long t;
		int k, write;

		lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
		k = (int)((lcg >> 33) % rows) + 1;
		write = (lcg >> 20) % 10 == 0;
		t = now_ns();
		if (write) {
			sqlite3_bind_text(upd, 1, i & 1 ? "w" : "u", 1, SQLITE_STATIC);
			sqlite3_bind_int(upd, 2, k);
			if (sqlite3_step(upd) != SQLITE_DONE)
				die(db, "update");
			sqlite3_reset(upd);
		} else {
			sqlite3_bind_int(sel, 1, k);
			if (sqlite3_step(sel) != SQLITE_ROW)
				die(db, "select");
			sqlite3_reset(sel);
		}
		t = now_ns() - t;
		all[i] = t;
		if (write)
			wr[nw++] = t;
		else
			rd[nr++] = t;
	}
	start = now_ns() - start;
	qsort(all, queries, sizeof(*all), cmp);
	qsort(rd, nr, sizeof(*rd), cmp);
	qsort(wr, nw, sizeof(*wr), cmp);
	printf("qps=%.0f p50=%.1f p99=%.1f max=%.1f read_p99=%.1f write_p99=%.1f\n",
	       queries * 1e9 / start, pct(all, queries, 50),
	       pct(all, queries, 99), all[queries - 1] / 1000.0,
	       pct(rd, nr, 99), pct(wr, nw, 99));
	sqlite3_finalize(sel);
	sqlite3_finalize(upd);
	return 0;
}

int main(int argc, char **argv)
{
	sqlite3 *db;
	int ret;

	if (argc < 4 || (strcmp(argv[1], "load") && strcmp(argv[1], "run")) ||
	    (!strcmp(argv[1], "run") && argc < 5) || atoi(argv[3]) < 1) {
		fprintf(stderr, "usage: db-bench load DB ROWS | run DB ROWS QUERIES\n");
		return 2;
	}
	if (sqlite3_open(argv[2], &db) != SQLITE_OK)
		die(db, argv[2]);
	ret = strcmp(argv[1], "load") ? run(db, atoi(argv[3]), atoi(argv[4])) :
		load(db, atoi(argv[3]));
	sqlite3_close(db);
	return ret;
}
