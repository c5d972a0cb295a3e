/*
 * audit_index.c - row sets and one block's postings for the audit log's
 * filter index (see audit_index.h for the layout).
 *
 * A block's postings are a small open-addressing hash table over entries
 * that each hold a value and a full bitmap: a block has at most a few
 * thousand distinct values, and a bitmap makes adding a row and testing one
 * a single bit operation. Not thread safe.
 */
#include "audit_index.h"

#include <stdlib.h>
#include <string.h>

const char *gh_audit_dim_value(const struct gh_audit_event *ev, int dim)
{
	const char *v = NULL;

	switch (dim) {
	case GH_AUDIT_DIM_KEY: v = ev->key_id; break;
	case GH_AUDIT_DIM_AGENT: v = ev->agent_id; break;
	case GH_AUDIT_DIM_THREAD: v = ev->thread_id; break;
	case GH_AUDIT_DIM_RUN: v = ev->run_id; break;
	case GH_AUDIT_DIM_TOOL: v = ev->tool_name; break;
	case GH_AUDIT_DIM_EVENT: v = ev->event; break;
	case GH_AUDIT_DIM_OUTCOME: v = ev->outcome; break;
	case GH_AUDIT_DIM_OWNER: v = ev->owner; break;
	default: break;
	}
	return v && *v ? v : NULL;
}

const char *gh_audit_dim_name(int dim)
{
	static const char *const names[] = {
		"?", "key_id", "agent_id", "thread_id", "run_id",
		"tool_name", "event", "outcome", "owner",
	};

	return dim >= 1 && dim <= GH_AUDIT_DIM_LAST ? names[dim] : names[0];
}

/* ------------------------------------------------------------ row sets */

#define WORDS (GH_AUDIT_BLOCK_ROWS / 64)

int gh_audit_rows_decode(const void *p, size_t n, struct gh_audit_rows *out)
{
	const unsigned char *b = p;
	size_t i;
	int prev = -1;

	memset(out, 0, sizeof(*out));
	if (n == GH_AUDIT_BITMAP_BYTES) {
		for (i = 0; i < WORDS; i++) {
			uint64_t w = 0;
			int k;

			for (k = 7; k >= 0; k--)
				w = w << 8 | b[i * 8 + (size_t)k];
			out->w[i] = w;
		}
		return 0;
	}
	if (n == 0 || n % 2 != 0 || n / 2 > GH_AUDIT_ARRAY_MAX)
		return -1;
	for (i = 0; i < n; i += 2) {
		int off = b[i] | b[i + 1] << 8;

		if (off <= prev || off >= GH_AUDIT_BLOCK_ROWS)
			return -1;
		gh_audit_rows_set(out, (unsigned)off);
		prev = off;
	}
	return 0;
}

int gh_audit_rows_count(const struct gh_audit_rows *r)
{
	int n = 0;
	size_t i;

	for (i = 0; i < WORDS; i++)
		n += __builtin_popcountll(r->w[i]);
	return n;
}

size_t gh_audit_rows_encode(const struct gh_audit_rows *r,
			    unsigned char out[GH_AUDIT_BITMAP_BYTES])
{
	int n = gh_audit_rows_count(r);
	size_t i, len = 0;

	if (n > GH_AUDIT_ARRAY_MAX) {
		for (i = 0; i < WORDS; i++) {
			uint64_t w = r->w[i];
			int k;

			for (k = 0; k < 8; k++, w >>= 8)
				out[i * 8 + (size_t)k] = (unsigned char)(w & 0xff);
		}
		return GH_AUDIT_BITMAP_BYTES;
	}
	for (i = 0; i < WORDS; i++) {
		uint64_t w = r->w[i];

		while (w) {
			unsigned off = (unsigned)(i * 64) + (unsigned)__builtin_ctzll(w);

			out[len++] = (unsigned char)(off & 0xff);
			out[len++] = (unsigned char)(off >> 8);
			w &= w - 1;
		}
	}
	return len;
}

int gh_audit_rows_and(struct gh_audit_rows *r, const struct gh_audit_rows *o)
{
	uint64_t any = 0;
	size_t i;

	for (i = 0; i < WORDS; i++) {
		r->w[i] &= o->w[i];
		any |= r->w[i];
	}
	return any != 0;
}

int gh_audit_rows_prev(const struct gh_audit_rows *r, int from)
{
	int i;
	uint64_t w;

	if (from < 0)
		return -1;
	if (from >= GH_AUDIT_BLOCK_ROWS)
		from = GH_AUDIT_BLOCK_ROWS - 1;
	i = from >> 6;
	w = r->w[i] & (~(uint64_t)0 >> (63 - (from & 63)));
	for (;;) {
		if (w)
			return i * 64 + 63 - __builtin_clzll(w);
		if (--i < 0)
			return -1;
		w = r->w[i];
	}
}

int gh_audit_rows_next(const struct gh_audit_rows *r, int from)
{
	int i;
	uint64_t w;

	if (from >= GH_AUDIT_BLOCK_ROWS)
		return -1;
	if (from < 0)
		from = 0;
	i = from >> 6;
	w = r->w[i] & (~(uint64_t)0 << (from & 63));
	for (;;) {
		if (w)
			return i * 64 + __builtin_ctzll(w);
		if (++i >= WORDS)
			return -1;
		w = r->w[i];
	}
}

/* ----------------------------------------------------- block postings */

struct sortkey;

struct entry {
	int dim;
	uint32_t hash;
	size_t val;                 /* offset into the value arena */
	size_t len;
	struct gh_audit_rows rows;
};

struct gh_audit_blockidx {
	struct entry *e;
	size_t n, cap;
	uint32_t *slot;             /* entry index + 1; 0 is empty */
	size_t nslot;               /* a power of two, at least twice n */
	char *arena;
	size_t used, acap;
	int64_t total;              /* rows over all entries */
	struct sortkey *order;      /* after sort: entries in (dim, value) order */
	size_t ocap;
	int sorted;
};

/* Eight bytes at a time: verify hashes eight values per row of the log. */
static uint32_t hash_of(int dim, const char *v, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL * (uint64_t)(dim + 1) ^ (uint64_t)len, w;

	while (len >= 8) {
		memcpy(&w, v, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
		h ^= h >> 29;
		v += 8;
		len -= 8;
	}
	w = 0;
	memcpy(&w, v, len);
	h = (h ^ w) * 0x94d049bb133111ebULL;
	h ^= h >> 32;
	return (uint32_t)h;
}

struct gh_audit_blockidx *gh_audit_blockidx_new(void)
{
	struct gh_audit_blockidx *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->nslot = 1024;
	b->slot = calloc(b->nslot, sizeof(*b->slot));
	if (!b->slot) {
		free(b);
		return NULL;
	}
	return b;
}

void gh_audit_blockidx_reset(struct gh_audit_blockidx *b)
{
	memset(b->slot, 0, b->nslot * sizeof(*b->slot));
	b->n = 0;
	b->used = 0;
	b->sorted = 0;
	b->total = 0;
}

void gh_audit_blockidx_free(struct gh_audit_blockidx *b)
{
	if (!b)
		return;
	free(b->e);
	free(b->slot);
	free(b->arena);
	free(b->order);
	free(b);
}

static int grow_slots(struct gh_audit_blockidx *b)
{
	size_t ns = b->nslot * 2, i;
	uint32_t *s = calloc(ns, sizeof(*s));

	if (!s)
		return -1;
	for (i = 0; i < b->n; i++) {
		size_t j = b->e[i].hash & (ns - 1);

		while (s[j])
			j = (j + 1) & (ns - 1);
		s[j] = (uint32_t)i + 1;
	}
	free(b->slot);
	b->slot = s;
	b->nslot = ns;
	return 0;
}

/* The slot of (dim, v) with hash h: its entry's, or the empty one where
 * it would go. */
static size_t slot_of(const struct gh_audit_blockidx *b, int dim, const char *v, size_t len,
		      uint32_t h)
{
	size_t j = h & (b->nslot - 1);

	while (b->slot[j]) {
		const struct entry *x = &b->e[b->slot[j] - 1];

		if (x->hash == h && x->dim == dim && x->len == len &&
		    !memcmp(b->arena + x->val, v, len))
			break;
		j = (j + 1) & (b->nslot - 1);
	}
	return j;
}

/* The entry for (dim, v), created when create is set; NULL when absent
 * (or out of memory). *created says which. */
static struct entry *find(struct gh_audit_blockidx *b, int dim, const char *v, size_t len,
			  int create, int *created)
{
	uint32_t h = hash_of(dim, v, len);
	size_t j = slot_of(b, dim, v, len, h);
	struct entry *x;

	if (created)
		*created = 0;
	if (b->slot[j])
		return &b->e[b->slot[j] - 1];
	if (!create)
		return NULL;
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 256;
		struct entry *ne = realloc(b->e, nc * sizeof(*ne));

		if (!ne)
			return NULL;
		b->e = ne;
		b->cap = nc;
	}
	if (b->used + len + 1 > b->acap) {
		size_t na = b->acap ? b->acap : 16384;
		char *a;

		while (na < b->used + len + 1)
			na *= 2;
		if (!(a = realloc(b->arena, na)))
			return NULL;
		b->arena = a;
		b->acap = na;
	}
	if ((b->n + 1) * 2 > b->nslot) {
		if (grow_slots(b) != 0)
			return NULL;
		j = h & (b->nslot - 1);
		while (b->slot[j])
			j = (j + 1) & (b->nslot - 1);
	}
	x = &b->e[b->n];
	x->dim = dim;
	x->hash = h;
	x->val = b->used;
	x->len = len;
	memset(&x->rows, 0, sizeof(x->rows));
	memcpy(b->arena + b->used, v, len);
	b->arena[b->used + len] = '\0';
	b->used += len + 1;
	b->slot[j] = (uint32_t)++b->n;
	b->sorted = 0;
	if (created)
		*created = 1;
	return x;
}

int gh_audit_blockidx_add(struct gh_audit_blockidx *b, int dim, const char *val, size_t len,
			  unsigned off)
{
	struct entry *x = find(b, dim, val, len, 1, NULL);

	if (!x)
		return -1;
	off &= GH_AUDIT_BLOCK_ROWS - 1;
	if (!gh_audit_rows_has(&x->rows, off)) {
		gh_audit_rows_set(&x->rows, off);
		b->total++;
	}
	return 0;
}

int gh_audit_blockidx_add_row(struct gh_audit_blockidx *b, const struct gh_audit_event *ev,
			      unsigned off)
{
	int d;

	for (d = 1; d <= GH_AUDIT_DIM_LAST; d++) {
		const char *v = gh_audit_dim_value(ev, d);

		if (v && gh_audit_blockidx_add(b, d, v, strlen(v), off) != 0)
			return -1;
	}
	return 0;
}

const struct gh_audit_rows *gh_audit_blockidx_get(const struct gh_audit_blockidx *b, int dim,
						  const char *val)
{
	size_t len = strlen(val), j = slot_of(b, dim, val, len, hash_of(dim, val, len));

	return b->slot[j] ? &b->e[b->slot[j] - 1].rows : NULL;
}

size_t gh_audit_blockidx_count(const struct gh_audit_blockidx *b)
{
	return b->n;
}

int64_t gh_audit_blockidx_rows(const struct gh_audit_blockidx *b)
{
	return b->total;
}

/* Sort keys carry what the comparison needs, so qsort needs no context. */
struct sortkey {
	const char *val;
	size_t len;
	int dim;
	uint32_t idx;
};

static int cmp_key(const void *pa, const void *pb)
{
	const struct sortkey *a = pa, *b = pb;
	size_t n = a->len < b->len ? a->len : b->len;
	int c;

	if (a->dim != b->dim)
		return a->dim < b->dim ? -1 : 1;
	c = memcmp(a->val, b->val, n);
	if (c)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

void gh_audit_blockidx_sort(struct gh_audit_blockidx *b)
{
	struct sortkey *k;
	size_t i;

	if (b->sorted || b->n == 0)
		return;
	if (b->ocap < b->n) {
		if (!(k = realloc(b->order, b->cap * sizeof(*k))))
			return; /* entry() then walks in insertion order */
		b->order = k;
		b->ocap = b->cap;
	}
	k = b->order;
	for (i = 0; i < b->n; i++) {
		k[i].val = b->arena + b->e[i].val;
		k[i].len = b->e[i].len;
		k[i].dim = b->e[i].dim;
		k[i].idx = (uint32_t)i;
	}
	qsort(k, b->n, sizeof(*k), cmp_key);
	b->sorted = 1;
}

void gh_audit_blockidx_entry(const struct gh_audit_blockidx *b, size_t i, int *dim,
			     const char **val, size_t *len, const struct gh_audit_rows **rows)
{
	const struct entry *x = &b->e[b->sorted ? b->order[i].idx : i];

	*dim = x->dim;
	*val = b->arena + x->val;
	*len = x->len;
	*rows = &x->rows;
}

/* ------------------------------------------------------ stored, by row */

struct gh_audit_blockmap {
	uint32_t who[GH_AUDIT_DIM_LAST][GH_AUDIT_BLOCK_ROWS]; /* value offset + 1, 0: none */
	char *arena;
	size_t used, cap;
};

struct gh_audit_blockmap *gh_audit_blockmap_new(void)
{
	return calloc(1, sizeof(struct gh_audit_blockmap));
}

void gh_audit_blockmap_reset(struct gh_audit_blockmap *m)
{
	memset(m->who, 0, sizeof(m->who));
	m->used = 0;
}

void gh_audit_blockmap_free(struct gh_audit_blockmap *m)
{
	if (!m)
		return;
	free(m->arena);
	free(m);
}

static int claim(struct gh_audit_blockmap *m, int dim, unsigned off, uint32_t v,
		 const char **why)
{
	uint32_t *w = &m->who[dim - 1][off];

	if (*w) {
		*why = "a row is listed under two values of one column";
		return -1;
	}
	*w = v;
	return 0;
}

int gh_audit_blockmap_load(struct gh_audit_blockmap *m, int dim, const char *val, size_t len,
			   const void *rows, size_t rows_len, const char **why)
{
	const unsigned char *p = rows;
	uint32_t v;
	size_t i;

	if (dim < 1 || dim > GH_AUDIT_DIM_LAST) {
		*why = "an entry is malformed";
		return -1;
	}
	if (m->used + len + 1 > m->cap || m->used + len + 1 > UINT32_MAX) {
		size_t nc = m->cap ? m->cap : 65536;
		char *a;

		while (nc < m->used + len + 1)
			nc *= 2;
		if (nc > UINT32_MAX || !(a = realloc(m->arena, nc))) {
			*why = "out of memory";
			return -1;
		}
		m->arena = a;
		m->cap = nc;
	}
	memcpy(m->arena + m->used, val, len);
	m->arena[m->used + len] = '\0';
	v = (uint32_t)m->used + 1;
	m->used += len + 1;
	if (rows_len == GH_AUDIT_BITMAP_BYTES) {
		for (i = 0; i < GH_AUDIT_BITMAP_BYTES; i++) {
			unsigned bits = p[i];

			while (bits) {
				unsigned off = (unsigned)i * 8 + (unsigned)__builtin_ctz(bits);

				if (claim(m, dim, off, v, why) != 0)
					return -1;
				bits &= bits - 1;
			}
		}
		return 0;
	}
	if (rows_len == 0 || rows_len % 2 != 0 || rows_len / 2 > GH_AUDIT_ARRAY_MAX) {
		*why = "an entry is malformed";
		return -1;
	}
	for (i = 0; i < rows_len; i += 2) {
		unsigned off = p[i] | (unsigned)p[i + 1] << 8;

		if (off >= GH_AUDIT_BLOCK_ROWS || (i && off <= (p[i - 2] | (unsigned)p[i - 1] << 8))) {
			*why = "an entry is malformed";
			return -1;
		}
		if (claim(m, dim, off, v, why) != 0)
			return -1;
	}
	return 0;
}

const char *gh_audit_blockmap_value_at(const struct gh_audit_blockmap *m, int dim,
				       unsigned off)
{
	uint32_t v = m->who[dim - 1][off & (GH_AUDIT_BLOCK_ROWS - 1)];

	return v ? m->arena + v - 1 : NULL;
}
