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

/* SQLite asks a WAL for none of these (its index is the -shm file), but
 * a file that has them answers for them. */
static int wal_shm_map(sqlite3_file *p, int pg, int pgsz, int extend, void volatile **out)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xShmMap(f->real, pg, pgsz, extend, out);
}

static int wal_shm_lock(sqlite3_file *p, int offset, int n, int flags)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void wal_shm_barrier(sqlite3_file *p)
{
	struct wal_file *f = (struct wal_file *)p;

	flush_hdr(f);
	f->real->pMethods->xShmBarrier(f->real);
}

static int wal_shm_unmap(sqlite3_file *p, int del)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xShmUnmap(f->real, del);
}

static int wal_fetch(sqlite3_file *p, sqlite3_int64 at, int amt, void **out)
{
	struct wal_file *f = (struct wal_file *)p;
	int rc = flush_hdr(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xFetch(f->real, at, amt, out);
}

static int wal_unfetch(sqlite3_file *p, sqlite3_int64 at, void *page)
{
	struct wal_file *f = (struct wal_file *)p;

	return f->real->pMethods->xUnfetch(f->real, at, page);
}

static const sqlite3_io_methods wal_methods = {
	3,
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
	wal_shm_map,
	wal_shm_lock,
	wal_shm_barrier,
	wal_shm_unmap,
	wal_fetch,
	wal_unfetch,
};

static int vfs_open(sqlite3_vfs *v, const char *name, sqlite3_file *p, int flags,
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
	/* without methods SQLite closes nothing: the default VFS's open
	 * has cleaned up after itself */
	f->base.pMethods = f->real->pMethods && f->real->pMethods->iVersion >= 3 ? &wal_methods
										 : NULL;
	if (f->real->pMethods && !f->base.pMethods) {
		f->real->pMethods->xClose(f->real);
		return rc == SQLITE_OK ? SQLITE_CANTOPEN : rc;
	}
	return rc;
}

static int vfs_delete(sqlite3_vfs *v, const char *name, int sync_dir)
{
	(void)v;
	return base_vfs->xDelete(base_vfs, name, sync_dir);
}

static int vfs_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
	(void)v;
	return base_vfs->xAccess(base_vfs, name, flags, out);
}

static int vfs_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
	(void)v;
	return base_vfs->xFullPathname(base_vfs, name, n, out);
}

static void *vfs_dlopen(sqlite3_vfs *v, const char *name)
{
	(void)v;
	return base_vfs->xDlOpen(base_vfs, name);
}

static void vfs_dlerror(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	base_vfs->xDlError(base_vfs, n, out);
}

static void (*vfs_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
	(void)v;
	return base_vfs->xDlSym(base_vfs, h, sym);
}

static void vfs_dlclose(sqlite3_vfs *v, void *h)
{
	(void)v;
	base_vfs->xDlClose(base_vfs, h);
}

static int vfs_randomness(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	return base_vfs->xRandomness(base_vfs, n, out);
}

static int vfs_sleep(sqlite3_vfs *v, int us)
{
	(void)v;
	return base_vfs->xSleep(base_vfs, us);
}

static int vfs_current_time(sqlite3_vfs *v, double *out)
{
	(void)v;
	return base_vfs->xCurrentTime(base_vfs, out);
}

static int vfs_last_error(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	return base_vfs->xGetLastError ? base_vfs->xGetLastError(base_vfs, n, out) : 0;
}

static int vfs_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out)
{
	(void)v;
	return base_vfs->xCurrentTimeInt64(base_vfs, out);
}

const char *store_vfs_register(void)
{
	if (vfs.zName)
		return vfs.zName;
	/* the default's syscall hooks (version 3) stay its own: this VFS
	 * never offers them */
	if (!(base_vfs = sqlite3_vfs_find(NULL)) || base_vfs->iVersion < 2)
		return NULL;
	vfs.iVersion = 2;
	vfs.szOsFile = (int)sizeof(struct wal_file) + base_vfs->szOsFile;
	vfs.mxPathname = base_vfs->mxPathname;
	vfs.zName = "gatehouse";
	vfs.xOpen = vfs_open;
	vfs.xDelete = vfs_delete;
	vfs.xAccess = vfs_access;
	vfs.xFullPathname = vfs_full_pathname;
	vfs.xDlOpen = vfs_dlopen;
	vfs.xDlError = vfs_dlerror;
	vfs.xDlSym = vfs_dlsym;
	vfs.xDlClose = vfs_dlclose;
	vfs.xRandomness = vfs_randomness;
	vfs.xSleep = vfs_sleep;
	vfs.xCurrentTime = vfs_current_time;
	vfs.xGetLastError = vfs_last_error;
	vfs.xCurrentTimeInt64 = vfs_current_time_int64;
	if (sqlite3_vfs_register(&vfs, 0) != SQLITE_OK) {
		vfs.zName = NULL;
		return NULL;
	}
	return vfs.zName;
}
