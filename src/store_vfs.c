/*
 * store_vfs.c - the VFS gatehouse opens its SQLite databases with: the
 * system's default VFS, but each frame SQLite appends to a WAL reaches the
 * file in one write instead of two.
 *
 * SQLite writes a WAL frame as its 24-byte header, then its page, two
 * pwrite calls at adjacent offsets. Each is a system call that takes the
 * inode lock, updates the file's times and opens an ext4 journal handle;
 * a tool request commits two transactions of two frames each, so half its
 * WAL writes are headers. Here a 24-byte write that continues a run of
 * writes (it starts where the write before it, the call before it on the
 * file, ended) is held, and the write that follows it at the next offset
 * (its page) goes out with it, copied behind it into one buffer: one
 * pwrite of 24 + page bytes.
 *
 * That is how SQLite appends a frame: the header where the last frame (or
 * the WAL's own header) ended, then at once its page. The other 24-byte
 * writes it makes are not held: after a transaction wrote a page twice, it
 * rewrites the checksums of its frames in place, each header right after
 * reading that frame, and the last of them just before the frames become
 * visible; such a header goes out when written. Whatever else is done to
 * the file (a read, a write elsewhere, a sync, closing it) writes a held
 * header out first, so nothing can find the file without it. A crash with
 * a header held is a crash before that frame was written, which SQLite's
 * recovery already handles: a transaction without its commit frame did
 * not happen.
 *
 * Every other file (the database, the WAL index, journals) is opened by
 * the default VFS as it is, with its own methods.
 */
#include "store_sqlite.h"

#include <stdlib.h>
#include <string.h>

#define FRAME_HDR 24

struct wal_file {
	sqlite3_file base;      /* pMethods: wal_methods */
	sqlite3_file *real;     /* the default VFS's file, right behind this */
	unsigned char hdr[FRAME_HDR];
	sqlite3_int64 hdr_at;   /* where the held header goes; -1: none held */
	sqlite3_int64 run_end;  /* where the last call, a write, ended; or -1 */
	unsigned char *buf;     /* header + page, for the write of both */
	size_t cap;
};

static sqlite3_vfs *base_vfs;
static sqlite3_vfs vfs;

/* Writes a held header out on its own, before any other use of the file
 * (which also ends a run of writes). */
static int flush_hdr(struct wal_file *f)
{
	int rc;

	f->run_end = -1;
	if (f->hdr_at < 0)
		return SQLITE_OK;
	rc = f->real->pMethods->xWrite(f->real, f->hdr, FRAME_HDR, f->hdr_at);
	f->hdr_at = -1;
	return rc;
}

static int wal_close(sqlite3_file *p)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f), rc2 = f->real->pMethods->xClose(f->real);

	free(f->buf);
	f->buf = NULL;
	return rc != SQLITE_OK ? rc : rc2;
}

static int wal_read(sqlite3_file *p, void *out, int amt, sqlite3_int64 at)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, out, amt, at);
}

static int wal_write(sqlite3_file *p, const void *data, int amt, sqlite3_int64 at)
{
	struct wal_file *f = (struct wal_file *)p;
	sqlite3_int64 run = f->run_end;
	size_t need;
	int rc;

	if (f->hdr_at >= 0 && at == f->hdr_at + FRAME_HDR && amt > 0) {
		need = FRAME_HDR + (size_t)amt;
		if (need > f->cap) {
			unsigned char *b = realloc(f->buf, need);

			if (!b) /* the two writes, as SQLite made them */
				goto apart;
			f->buf = b;
			f->cap = need;
		}
		memcpy(f->buf, f->hdr, FRAME_HDR);
		memcpy(f->buf + FRAME_HDR, data, (size_t)amt);
		at = f->hdr_at;
		f->hdr_at = -1;
		rc = f->real->pMethods->xWrite(f->real, f->buf, (int)need, at);
		f->run_end = rc == SQLITE_OK ? at + (sqlite3_int64)need : -1;
		return rc;
	}
apart:
	if ((rc = flush_hdr(f)) != SQLITE_OK)
		return rc;
	if (amt == FRAME_HDR && at == run) {
		memcpy(f->hdr, data, FRAME_HDR);
		f->hdr_at = at;
		return SQLITE_OK;
	}
	rc = f->real->pMethods->xWrite(f->real, data, amt, at);
	f->run_end = rc == SQLITE_OK ? at + amt : -1;
	return rc;
}

static int wal_truncate(sqlite3_file *p, sqlite3_int64 size)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int wal_sync(sqlite3_file *p, int flags)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int wal_file_size(sqlite3_file *p, sqlite3_int64 *size)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int wal_lock(sqlite3_file *p, int level)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xLock(f->real, level);
}

static int wal_unlock(sqlite3_file *p, int level)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xUnlock(f->real, level);
}

static int wal_check_lock(sqlite3_file *p, int *out)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int wal_fcntl(sqlite3_file *p, int op, void *arg)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}

static int wal_sector_size(sqlite3_file *p)
{
	struct wal_file *f = (struct wal_file *)p;

	return f->real->pMethods->xSectorSize(f->real);
}

static int wal_device(sqlite3_file *p)
{
	struct wal_file *f = (struct wal_file *)p;

	return f->real->pMethods->xDeviceCharacteristics(f->real);
}

/* Version 1: SQLite asks a WAL for neither the shared-memory methods (its
 * index is the -shm file, reached through the database's file) nor
 * memory-mapped pages. */
static const sqlite3_io_methods wal_methods = {
	1,
	wal_close,
	wal_read,
	wal_write,
	wal_truncate,
	wal_sync,
	wal_file_size,
	wal_lock,
	wal_unlock,
	wal_check_lock,
	wal_fcntl,
	wal_sector_size,
	wal_device,
	NULL, NULL, NULL, NULL, NULL, NULL,
};

static int vfs_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *p, int flags,
		    int *out_flags)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc;

	(void)v;
	if (!(flags & SQLITE_OPEN_WAL))
		return base_vfs->xOpen(base_vfs, name, p, flags, out_flags);
	memset(f, 0, sizeof(*f));
	f->real = (sqlite3_file *)(f + 1);
	f->hdr_at = f->run_end = -1;
	rc = base_vfs->xOpen(base_vfs, name, f->real, flags, out_flags);
	/* no methods when the default VFS's open failed and cleaned up after
	 * itself: SQLite then closes nothing */
	f->base.pMethods = f->real->pMethods ? &wal_methods : NULL;
	return rc;
}

const char *store_vfs_register(void)
{
	if (vfs.zName)
		return vfs.zName;
	if (!(base_vfs = sqlite3_vfs_find(NULL)))
		return NULL;
	/* the default VFS in all but its name, its files' size and xOpen:
	 * its other methods are called as they are */
	vfs = *base_vfs;
	vfs.pNext = NULL;
	vfs.szOsFile = (int)sizeof(struct wal_file) + base_vfs->szOsFile;
	vfs.zName = "gatehouse";
	vfs.xOpen = vfs_open;
	if (sqlite3_vfs_register(&vfs, 0) != SQLITE_OK) {
		vfs.zName = NULL;
		return NULL;
	}
	return vfs.zName;
}
