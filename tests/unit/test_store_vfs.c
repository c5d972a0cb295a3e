/*
 * test_store_vfs.c - the VFS gatehouse opens SQLite databases with
 * (store_vfs.c): a WAL frame reaches the file in one write, a held frame
 * header never outlives the next call on the file, and what it writes is
 * a WAL SQLite reads back whole with the default VFS.
 *
 * Under it sits a counting VFS, made the default before store_vfs.c looks
 * for the default: the system's VFS, whose WAL files record the size and
 * place of every write.
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_sqlite.h"
#include "t.h"

#define MAX_WRITES 4096

static sqlite3_vfs *sys_vfs;
static sqlite3_vfs counting;
static int nwrites;
static int write_size[MAX_WRITES];
static sqlite3_int64 write_at[MAX_WRITES];

/* The system's WAL file methods with xWrite counting: a WAL the counting
 * VFS opens is the system's own file, given these methods. */
static sqlite3_io_methods counted;
static int (*sys_write)(sqlite3_file *, const void *, int, sqlite3_int64);

static int c_write(sqlite3_file *f, const void *data, int amt, sqlite3_int64 at)
{
	if (nwrites < MAX_WRITES) {
		write_size[nwrites] = amt;
		write_at[nwrites++] = at;
	}
	return sys_write(f, data, amt, at);
}

static int c_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags,
		  int *out)
{
	int rc = sys_vfs->xOpen(sys_vfs, name, f, flags, out);

	(void)v;
	if (rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL) && f->pMethods) {
		if (!sys_write) {
			counted = *f->pMethods;
			sys_write = counted.xWrite;
			counted.xWrite = c_write;
		}
		f->pMethods = &counted;
	}
	return rc;
}

/* The counting VFS (the system's, with c_open) as the default, then
 * gatehouse's over it. */
static const char *setup(void)
{
	static const char *name;

	if (name)
		return name;
	sys_vfs = sqlite3_vfs_find(NULL);
	counting = *sys_vfs;
	counting.pNext = NULL;
	counting.zName = "counting";
	counting.xOpen = c_open;
	if (sqlite3_vfs_register(&counting, 1) != SQLITE_OK)
		return NULL;
	name = store_vfs_register();
	return name;
}

static char dir[64];

static void tmpdir(char *path, size_t cap, const char *file)
{
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/gh-test-vfs-XXXXXX");
		if (!mkdtemp(dir))
			dir[0] = '\0';
	}
	snprintf(path, cap, "%s/%s", dir, file);
}

static void rm_db(const char *path)
{
	char p[256];

	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

static int exec_ok(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
}

static long long one_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -2;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* A new database at path over vfs, in WAL mode as gatehouse runs it and
 * never checkpointed, with a table t (id, v); NULL on failure. */
static sqlite3 *open_wal(const char *path, const char *vfs)
{
	sqlite3 *db = NULL;

	rm_db(path);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs) !=
		    SQLITE_OK ||
	    !exec_ok(db, "PRAGMA journal_mode = WAL") ||
	    !exec_ok(db, "PRAGMA synchronous = NORMAL") ||
	    !exec_ok(db, "PRAGMA wal_autocheckpoint = 0") ||
	    !exec_ok(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")) {
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

/* Commits of one and of several pages: every frame is one write of
 * header and page (32 bytes once for the WAL's own header), as many
 * writes as the WAL holds frames; read back whole by the default VFS,
 * before and after a checkpoint. */
static void test_one_write_per_frame(void)
{
	const char *vfs = setup();
	char path[256], sql[4096];
	sqlite3 *db = NULL, *other = NULL;
	struct stat st;
	int i, frames, k, headers = 0, whole = 0, other_sizes = 0;
	char text[3000];

	T_ASSERT(vfs != NULL);
	T_EQ_STR(vfs, "gatehouse");
	tmpdir(path, sizeof(path), "frames.db");
	T_ASSERT((db = open_wal(path, vfs)) != NULL);
	T_ASSERT(exec_ok(db, "CREATE INDEX t_v ON t (v)"));
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	nwrites = 0;
	for (i = 0; i < 60; i++) {
		/* a row of 3 KB each: a new page most times, with the index's */
		snprintf(sql, sizeof(sql), "INSERT INTO t (v) VALUES ('%d' || '%.2900s')", i, text);
		T_ASSERT(exec_ok(db, sql));
	}
	T_ASSERT(exec_ok(db, "BEGIN; UPDATE t SET v = v || 'y' WHERE id % 3 = 0; COMMIT"));
	T_ASSERT(stat(path, &st) == 0);
	snprintf(sql, sizeof(sql), "%s-wal", path);
	T_ASSERT(stat(sql, &st) == 0);
	frames = (int)((st.st_size - 32) / (24 + 4096));
	T_ASSERT(frames > 60);
	for (k = 0; k < nwrites; k++) {
		if (write_size[k] == 24)
			headers++;
		else if (write_size[k] == 24 + 4096)
			whole++;
		else
			other_sizes++;
	}
	T_EQ_INT(headers, 0);
	T_EQ_INT(other_sizes, 0);
	T_EQ_INT(whole, frames - 4); /* 4: the CREATEs' frames, before counting */
	/* the default VFS reads it all back, the WAL and then the database */
	T_ASSERT(sqlite3_open_v2(path, &other, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	T_EQ_INT(one_int(other, "SELECT count(*) FROM t"), 60);
	T_EQ_INT(one_int(other, "SELECT count(*) FROM t WHERE v LIKE '%y'"), 20);
	T_EQ_INT(one_int(other, "SELECT sum(length(v)) FROM t"), 60 * 2900 + 110 + 20);
	sqlite3_close(other);
	other = NULL;
	T_ASSERT(sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) ==
		 SQLITE_OK);
	sqlite3_close(db);
	T_ASSERT(sqlite3_open_v2(path, &other, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	T_EQ_INT(one_int(other, "SELECT count(*) FROM t"), 60);
	{
		sqlite3_stmt *s;

		T_ASSERT(sqlite3_prepare_v2(other, "PRAGMA integrity_check", -1, &s, NULL) ==
			 SQLITE_OK);
		T_ASSERT(sqlite3_step(s) == SQLITE_ROW);
		T_EQ_STR((const char *)sqlite3_column_text(s, 0), "ok");
		sqlite3_finalize(s);
	}
	sqlite3_close(other);
	rm_db(path);
}

/* The file itself: a 24-byte write where the last write ended is held,
 * the write right behind it goes out with it, and anything else done to
 * the file (a read, a write elsewhere, a sync, closing it) writes a held
 * header out first. A 24-byte write anywhere else, or after a read (SQLite
 * rewriting a frame's checksum), goes out at once. */
static void test_held_header(void)
{
	const char *name = setup();
	sqlite3_vfs *vfs = name ? sqlite3_vfs_find(name) : NULL;
	char path[256], walpath[sizeof(path) + 8];
	sqlite3_file *f;
	sqlite3_filename fn;
	unsigned char whdr[32], hdr[24], page[4096], got[24 + 4096];
	int out = 0, fd;

	T_ASSERT(vfs != NULL);
	tmpdir(path, sizeof(path), "held.db");
	rm_db(path);
	fd = open(path, O_CREAT | O_WRONLY, 0600); /* the WAL takes its mode */
	T_ASSERT(fd >= 0);
	close(fd);
	snprintf(walpath, sizeof(walpath), "%s-wal", path);
	fn = sqlite3_create_filename(path, "", walpath, 0, NULL);
	T_ASSERT(fn != NULL);
	f = calloc(1, (size_t)vfs->szOsFile);
	T_ASSERT(f != NULL);
	T_ASSERT(vfs->xOpen(vfs, sqlite3_filename_wal(fn), f,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_WAL, &out) ==
		 SQLITE_OK);
	memset(whdr, 'w', sizeof(whdr));
	memset(hdr, 'h', sizeof(hdr));
	memset(page, 'p', sizeof(page));
	nwrites = 0;

	/* the WAL's header, then a frame: held, then out with its page, in
	 * one write at the header's place */
	T_EQ_INT(f->pMethods->xWrite(f, whdr, 32, 0), SQLITE_OK);
	T_EQ_INT(nwrites, 1);
	T_EQ_INT(f->pMethods->xWrite(f, hdr, 24, 32), SQLITE_OK);
	T_EQ_INT(nwrites, 1);
	T_EQ_INT(f->pMethods->xWrite(f, page, 4096, 56), SQLITE_OK);
	T_EQ_INT(nwrites, 2);
	T_EQ_INT(write_size[1], 24 + 4096);
	T_EQ_INT(write_at[1], 32);
	T_EQ_INT(f->pMethods->xRead(f, got, 24 + 4096, 32), SQLITE_OK);
	T_ASSERT(memcmp(got, hdr, 24) == 0 && memcmp(got + 24, page, 4096) == 0);

	/* the next frame's header is held; a read of it finds it written */
	T_EQ_INT(f->pMethods->xWrite(f, hdr, 24, 4120), SQLITE_OK); /* after a read */
	T_EQ_INT(nwrites, 3);
	T_EQ_INT(f->pMethods->xWrite(f, page, 4096, 4144), SQLITE_OK);
	T_EQ_INT(nwrites, 4);
	hdr[0] = '1';
	T_EQ_INT(f->pMethods->xWrite(f, hdr, 24, 8240), SQLITE_OK);
	T_EQ_INT(nwrites, 4);
	T_EQ_INT(f->pMethods->xRead(f, got, 24, 8240), SQLITE_OK);
	T_EQ_INT(nwrites, 5);
	T_EQ_INT(write_size[4], 24);
	T_ASSERT(memcmp(got, hdr, 24) == 0);

	/* held, then a write somewhere else: the header first, on its own */
	T_EQ_INT(f->pMethods->xWrite(f, page, 4096, 8264), SQLITE_OK);
	hdr[0] = '2';
	T_EQ_INT(f->pMethods->xWrite(f, hdr, 24, 12360), SQLITE_OK);
	T_EQ_INT(nwrites, 6);
	T_EQ_INT(f->pMethods->xWrite(f, page, 100, 20000), SQLITE_OK);
	T_EQ_INT(nwrites, 8);
	T_EQ_INT(write_size[6], 24);
	T_EQ_INT(write_at[6], 12360);
	T_EQ_INT(write_size[7], 100);

	/* held, then a sync */
	hdr[0] = '3';
	T_EQ_INT(f->pMethods->xWrite(f, hdr, 24, 20100), SQLITE_OK);
	T_EQ_INT(nwrites, 8);
	T_EQ_INT(f->pMethods->xSync(f, SQLITE_SYNC_NORMAL), SQLITE_OK);
	T_EQ_INT(nwrites, 9);
	T_EQ_INT(write_at[8], 20100);

	/* a checksum rewritten in place, right after reading the frame: out
	 * at once, as is a 24-byte write where no write ended */
	T_EQ_INT(f->pMethods->xRead(f, got, 24 + 4096, 32), SQLITE_OK);
	T_EQ_INT(f->pMethods->xWrite(f, hdr, 24, 32), SQLITE_OK);
	T_EQ_INT(nwrites, 10);
	T_EQ_INT(write_at[9], 32);
	T_EQ_INT(f->pMethods->xWrite(f, hdr, 24, 30000), SQLITE_OK);
	T_EQ_INT(nwrites, 11);

	/* held, then the file closed */
	hdr[0] = '4';
	T_EQ_INT(f->pMethods->xWrite(f, hdr, 24, 30024), SQLITE_OK);
	T_EQ_INT(nwrites, 11);
	T_EQ_INT(f->pMethods->xClose(f), SQLITE_OK);
	T_EQ_INT(nwrites, 12);
	T_EQ_INT(write_at[11], 30024);
	free(f);
	{
		FILE *w = fopen(walpath, "rb");
		unsigned char b[24];

		T_ASSERT(w != NULL);
		T_ASSERT(fseek(w, 30024, SEEK_SET) == 0 && fread(b, 1, 24, w) == 24);
		fclose(w);
		T_ASSERT(memcmp(b, hdr, 24) == 0);
	}
	sqlite3_free_filename(fn);
	unlink(walpath);
	unlink(path);
}

/* Copies a file whole (the WAL, as a crash would leave it). */
static int copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
	char buf[65536];
	size_t n;
	int ok = a && b;

	while (ok && (n = fread(buf, 1, sizeof(buf), a)) > 0)
		ok = fwrite(buf, 1, n, b) == n;
	if (a)
		fclose(a);
	if (b && fclose(b) != 0)
		ok = 0;
	return ok ? 0 : -1;
}

/* The database at path and its WAL, copied as they are (no WAL index:
 * the copy is recovered from the WAL, every frame's checksum checked),
 * hold rows rows, last of them 'last', every other 1,001 bytes long. */
static int recovered(const char *path, const char *copy, int rows, int last)
{
	char from[300], to[300];
	sqlite3 *db = NULL;
	int ok;

	rm_db(copy);
	snprintf(from, sizeof(from), "%s-wal", path);
	snprintf(to, sizeof(to), "%s-wal", copy);
	if (copy_file(path, copy) != 0 || copy_file(from, to) != 0 ||
	    sqlite3_open_v2(copy, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return 0;
	}
	ok = one_int(db, "SELECT count(*) FROM t") == rows &&
	     one_int(db, "SELECT count(*) FROM t WHERE v = 'last'") == last &&
	     one_int(db, "SELECT count(*) FROM t WHERE v <> 'last' AND length(v) <> 1001") == 0;
	if (!ok)
		fprintf(stderr, "  recovered copy: %lld rows (%d expected), %lld 'last' (%d)\n",
			one_int(db, "SELECT count(*) FROM t"), rows,
			one_int(db, "SELECT count(*) FROM t WHERE v = 'last'"), last);
	sqlite3_close(db);
	return ok;
}

/* A transaction larger than its cache writes pages to the WAL before it
 * commits, writes some of them again in place, and then rewrites its
 * frames' checksums: those headers are not held. The database and its
 * WAL, copied as they are the moment each COMMIT returns (what a kill -9
 * then would leave, without the WAL index), are recovered whole by the
 * default VFS, which checks every frame's checksum. */
static void test_recovered_from_the_files_alone(void)
{
	const char *vfs = setup();
	char path[256], copy[256], sql[4096], text[1100];
	sqlite3 *db = NULL;
	int i, k, rewrites = 0, round;

	T_ASSERT(vfs != NULL);
	tmpdir(path, sizeof(path), "big.db");
	tmpdir(copy, sizeof(copy), "copy.db");
	T_ASSERT((db = open_wal(path, vfs)) != NULL);
	T_ASSERT(exec_ok(db, "PRAGMA cache_size = 10"));
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	for (round = 1; round <= 3; round++) {
		nwrites = 0;
		T_ASSERT(exec_ok(db, "BEGIN"));
		for (i = 0; i < 400; i++) {
			snprintf(sql, sizeof(sql), "INSERT INTO t (v) VALUES ('%.1000s')", text);
			T_ASSERT(exec_ok(db, sql));
		}
		T_ASSERT(exec_ok(db, "UPDATE t SET v = v || 'y' "
				     "WHERE id > (SELECT max(id) FROM t) - 400"));
		T_ASSERT(exec_ok(db, "COMMIT"));
		for (k = 0; k < nwrites; k++)
			rewrites += write_size[k] == 24;
		T_ASSERT(recovered(path, copy, round * 401 - 1, round - 1));
		/* a small one after it, as a request's commit would be */
		T_ASSERT(exec_ok(db, "INSERT INTO t (v) VALUES ('last')"));
		T_ASSERT(recovered(path, copy, round * 401, round));
	}
	/* the test wrote what it means to: checksums rewritten in place */
	T_ASSERT(rewrites > 0);
	sqlite3_close(db);
	rm_db(copy);
	rm_db(path);
	rmdir(dir);
}

T_MAIN(T(test_one_write_per_frame), T(test_held_header), T(test_recovered_from_the_files_alone))
