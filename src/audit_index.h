/*
 * audit_index.h - the audit log's filter index, in memory.
 *
 * The log is cut into blocks of GH_AUDIT_BLOCK_ROWS consecutive rows
 * (block = seq >> GH_AUDIT_BLOCK_SHIFT). For each block, and each value of
 * each filterable column, the index stores which rows of the block carry
 * that value: a row set. A query with several filters ANDs their row sets
 * block by block, so a rare combination of common values costs a few
 * bitwise operations per block instead of a walk over every row of the
 * most selective single value.
 *
 * A row set is stored as sorted 16-bit offsets (2 bytes each, little
 * endian) when it holds fewer than GH_AUDIT_ARRAY_MAX + 1 rows, else as a
 * GH_AUDIT_BITMAP_BYTES bitmap; the length tells which.
 *
 * struct gh_audit_blockidx collects one block's postings as the store
 * builds them from rows; struct gh_audit_blockmap holds stored ones by row
 * for `audit verify` to check every row against. Not thread safe: one user
 * at a time.
 */
#ifndef GH_AUDIT_INDEX_H
#define GH_AUDIT_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "audit.h"

#define GH_AUDIT_BLOCK_SHIFT 12
#define GH_AUDIT_BLOCK_ROWS (1 << GH_AUDIT_BLOCK_SHIFT)
#define GH_AUDIT_BITMAP_BYTES (GH_AUDIT_BLOCK_ROWS / 8)
#define GH_AUDIT_ARRAY_MAX (GH_AUDIT_BITMAP_BYTES / 2 - 1)

/* The filterable columns, as stored (never renumber). */
enum gh_audit_dim {
	GH_AUDIT_DIM_KEY = 1,
	GH_AUDIT_DIM_AGENT,
	GH_AUDIT_DIM_THREAD,
	GH_AUDIT_DIM_RUN,
	GH_AUDIT_DIM_TOOL,
	GH_AUDIT_DIM_EVENT,
	GH_AUDIT_DIM_OUTCOME,
	GH_AUDIT_DIM_OWNER,
	GH_AUDIT_DIM_LAST = GH_AUDIT_DIM_OWNER
};

/* ev's value for dim, or NULL when the row has none (NULL or ""). */
const char *gh_audit_dim_value(const struct gh_audit_event *ev, int dim);
/* The column's name, for messages. */
const char *gh_audit_dim_name(int dim);

/* A set of rows of one block: bit (seq & (GH_AUDIT_BLOCK_ROWS - 1)). */
struct gh_audit_rows {
	uint64_t w[GH_AUDIT_BLOCK_ROWS / 64];
};

/* Decodes a stored row set into out; -1 when p is not a valid encoding
 * (a length that is neither an even count below the bitmap size nor the
 * bitmap size, or offsets not strictly ascending). */
int gh_audit_rows_decode(const void *p, size_t n, struct gh_audit_rows *out);
/* Encodes r into out (at most GH_AUDIT_BITMAP_BYTES); returns the length,
 * 0 for an empty set. The encoding is canonical: equal sets, equal bytes. */
size_t gh_audit_rows_encode(const struct gh_audit_rows *r,
			    unsigned char out[GH_AUDIT_BITMAP_BYTES]);
/* Rows in the set. */
int gh_audit_rows_count(const struct gh_audit_rows *r);
/* r &= o; returns 1 when r is still not empty. */
int gh_audit_rows_and(struct gh_audit_rows *r, const struct gh_audit_rows *o);
/* The highest member <= from (from < 0: none) or -1; the lowest >= from
 * or -1. Walk a set with them, newest or oldest first. */
int gh_audit_rows_prev(const struct gh_audit_rows *r, int from);
int gh_audit_rows_next(const struct gh_audit_rows *r, int from);

static inline void gh_audit_rows_set(struct gh_audit_rows *r, unsigned off)
{
	r->w[off >> 6] |= (uint64_t)1 << (off & 63);
}

static inline int gh_audit_rows_has(const struct gh_audit_rows *r, unsigned off)
{
	return (int)((r->w[off >> 6] >> (off & 63)) & 1);
}

/* One block's postings: (dim, value) -> row set. */
struct gh_audit_blockidx;

/* NULL when out of memory. */
struct gh_audit_blockidx *gh_audit_blockidx_new(void);
/* Empties it for another block, keeping its memory. */
void gh_audit_blockidx_reset(struct gh_audit_blockidx *b);
void gh_audit_blockidx_free(struct gh_audit_blockidx *b);

/* Adds row off (< GH_AUDIT_BLOCK_ROWS) to (dim, val), creating the entry.
 * -1 when out of memory. */
int gh_audit_blockidx_add(struct gh_audit_blockidx *b, int dim, const char *val, size_t len,
			  unsigned off);
/* Adds every filterable value of ev at row off: the row's postings. */
int gh_audit_blockidx_add_row(struct gh_audit_blockidx *b, const struct gh_audit_event *ev,
			      unsigned off);
/* The row set of (dim, val), or NULL. */
const struct gh_audit_rows *gh_audit_blockidx_get(const struct gh_audit_blockidx *b, int dim,
						  const char *val);

/* Entries, and the total of their rows. */
size_t gh_audit_blockidx_count(const struct gh_audit_blockidx *b);
int64_t gh_audit_blockidx_rows(const struct gh_audit_blockidx *b);

/* Sorts the entries by (dim, value) (byte order, as SQLite's BINARY
 * collation does) so that entry(i) walks them in the stored order. */
void gh_audit_blockidx_sort(struct gh_audit_blockidx *b);
/* Entry i: dim, value (borrowed, NUL-terminated) and its row set. */
void gh_audit_blockidx_entry(const struct gh_audit_blockidx *b, size_t i, int *dim,
			     const char **val, size_t *len, const struct gh_audit_rows **rows);

/* One block's stored postings the other way round, for `audit verify`:
 * for each column and row, the value the postings list the row under. */
struct gh_audit_blockmap;

/* NULL when out of memory. */
struct gh_audit_blockmap *gh_audit_blockmap_new(void);
/* Empties it for another block, keeping its memory. */
void gh_audit_blockmap_reset(struct gh_audit_blockmap *m);
void gh_audit_blockmap_free(struct gh_audit_blockmap *m);
/* Records a stored posting: the rows it lists carry val in dim. -1 with
 * *why when it is damaged (an unknown dim, rows that do not decode, a row
 * already listed under another value of dim) or memory ran out. */
int gh_audit_blockmap_load(struct gh_audit_blockmap *m, int dim, const char *val, size_t len,
			   const void *rows, size_t rows_len, const char **why);
/* The value row off carries in dim according to the postings, or NULL. */
const char *gh_audit_blockmap_value_at(const struct gh_audit_blockmap *m, int dim,
				       unsigned off);

#endif
