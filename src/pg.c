/*
 * pg.c - PostgreSQL connections through libpq: URL checks, the pool,
 * statements with SQLite placeholders, COPY FROM STDIN, migrations under
 * an advisory lock.
 * See pg.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "log.h"
#include "pg.h"
#include "util.h"

#define PG_STMT_CACHE 256
#define PG_SQL_MAX 16384
#define PG_BACKOFF_MIN_MS 50
#define PG_BACKOFF_MAX_MS 1000
/* pg_advisory_xact_lock key of schema migrations ("gatehse1") */
#define PG_MIGRATE_LOCK 0x6761746568736531LL

struct gh_pg_conn {
	PGconn *pc;
	int busy;
	struct {
		const char *sql;
		char name[16];
	} cache[PG_STMT_CACHE];
	size_t ncache;
	unsigned next_name;
};

struct gh_pg_pool {
	char *url;                      /* owned; holds the password: never logged */
	char shown[256];                /* url redacted, for messages */
	int connect_timeout_s, statement_timeout_ms, acquire_timeout_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct gh_pg_conn *conns;
	int size;
	/* after a failed connection attempt: none before retry_at (monotonic
	 * ms); the reason is kept for the requests refused meanwhile */
	int64_t retry_at;
	int backoff_ms;
	char down_msg[200];
	int opened;                    /* past gh_pg_pool_open: failures to connect go
					* to the log, callers get a plain message */
	uint64_t connects, connect_failures, broken;
};

/* ------------------------------------------------------------ URLs */

int gh_pg_is_url(const char *url)
{
	return url && (!strncmp(url, "postgres://", 11) || !strncmp(url, "postgresql://", 13));
}

/* Appends s[0..n) to out at *at, cut at cap - 1. */
static void put(char *out, size_t cap, size_t *at, const char *s, size_t n)
{
	if (*at + 1 >= cap)
		return;
	if (n > cap - 1 - *at)
		n = cap - 1 - *at;
	memcpy(out + *at, s, n);
	*at += n;
	out[*at] = '\0';
}

void gh_pg_url_redact(const char *url, char *out, size_t cap)
{
	const char *p, *auth, *at_sign, *colon, *q;
	size_t at = 0;

	if (!cap)
		return;
	out[0] = '\0';
	if (!url)
		return;
	p = strstr(url, "://");
	auth = p ? p + 3 : url;
	/* the user part ends at the last '@' before the path or the query */
	q = auth + strcspn(auth, "/?");
	at_sign = NULL;
	for (p = auth; p < q; p++)
		if (*p == '@')
			at_sign = p;
	colon = at_sign ? memchr(auth, ':', (size_t)(at_sign - auth)) : NULL;
	if (colon) {
		put(out, cap, &at, url, (size_t)(colon + 1 - url));
		put(out, cap, &at, "***", 3);
		p = at_sign;
	} else {
		p = url;
	}
	/* password=... in the query */
	while (*p) {
		const char *hit = strstr(p, "password=");

		if (!hit || (hit != url && hit[-1] != '?' && hit[-1] != '&')) {
			if (!hit) {
				put(out, cap, &at, p, strlen(p));
				break;
			}
			put(out, cap, &at, p, (size_t)(hit + 9 - p));
			p = hit + 9;
			continue;
		}
		put(out, cap, &at, p, (size_t)(hit + 9 - p));
		put(out, cap, &at, "***", 3);
		p = hit + 9 + strcspn(hit + 9, "&");
	}
}

/* Copies msg into out with every occurrence of the password of url
 * replaced by "***" and the trailing newline libpq adds removed. */
static void scrub(const char *url, const char *msg, char *out, size_t cap)
{
	char pw[256] = "";
	PQconninfoOption *opts = url ? PQconninfoParse(url, NULL) : NULL, *o;
	size_t at = 0, pl;
	const char *p = msg ? msg : "";

	for (o = opts; o && o->keyword; o++)
		if (!strcmp(o->keyword, "password") && o->val)
			gh_strlcpy(pw, o->val, sizeof(pw));
	PQconninfoFree(opts);
	out[0] = '\0';
	pl = strlen(pw);
	while (*p) {
		const char *hit = pl ? strstr(p, pw) : NULL;

		if (!hit) {
			put(out, cap, &at, p, strlen(p));
			break;
		}
		put(out, cap, &at, p, (size_t)(hit - p));
		put(out, cap, &at, "***", 3);
		p = hit + pl;
	}
	while (at && (out[at - 1] == '\n' || out[at - 1] == ' '))
		out[--at] = '\0';
	sodium_memzero(pw, sizeof(pw));
}

enum gh_code gh_pg_url_check(const char *url, const char *what, struct gh_err *e)
{
	char *err = NULL;
	PQconninfoOption *opts;
	enum gh_code rc;

	if (!gh_pg_is_url(url))
		return gh_err_set(e, GH_E_BADREQ, "%s must start with postgres:// or postgresql://",
				  what);
	opts = PQconninfoParse(url, &err);
	if (!opts) {
		/* libpq's message can quote the whole URL, password and all:
		 * it is shown only when it does not */
		if (err && !strstr(err, "://") && !strchr(err, '@')) {
			size_t n = strlen(err);

			while (n && (err[n - 1] == '\n' || err[n - 1] == ' '))
				err[--n] = '\0';
			rc = gh_err_set(e, GH_E_BADREQ, "%s is not a URL libpq accepts: %s", what,
					err);
		} else {
			rc = gh_err_set(e, GH_E_BADREQ, "%s is not a URL libpq accepts (%s)", what,
					err ? "its message is withheld: it quotes the URL"
					    : "out of memory");
		}
		PQfreemem(err);
		return rc;
	}
	PQconninfoFree(opts);
	return GH_OK;
}

/* ------------------------------------------------------------- SQL */

/* Copies a quoted run (from the quote at *i to its closing one; a
 * doubled quote is part of it) or a comment. */
static int copy_span(const char *sql, size_t *i, char *out, size_t cap, size_t *o)
{
	size_t start = *i, end;
	char q = sql[*i];

	if (q == '\'' || q == '"') {
		end = start + 1;
		for (;;) {
			if (!sql[end])
				break;
			if (sql[end] == q) {
				if (sql[end + 1] == q) {
					end += 2;
					continue;
				}
				end++;
				break;
			}
			end++;
		}
	} else if (q == '-') {          /* -- to the end of the line */
		end = start + strcspn(sql + start, "\n");
	} else {                        /* block comment */
		const char *close = strstr(sql + start + 2, "*/");

		end = close ? (size_t)(close + 2 - sql) : strlen(sql);
	}
	if (*o + (end - start) >= cap)
		return -1;
	memcpy(out + *o, sql + start, end - start);
	*o += end - start;
	*i = end;
	return 0;
}

int gh_pg_sql_rewrite(const char *sql, char *out, size_t cap, int *nparams)
{
	size_t i = 0, o = 0;
	int top = 0;

	if (!cap)
		return -1;
	while (sql[i]) {
		char ch = sql[i];

		if (ch == '\'' || ch == '"' || (ch == '-' && sql[i + 1] == '-') ||
		    (ch == '/' && sql[i + 1] == '*')) {
			if (copy_span(sql, &i, out, cap, &o) != 0)
				return -1;
			continue;
		}
		if (ch == '?') {
			int k = 0, digits = 0, w;

			i++;
			while (sql[i] >= '0' && sql[i] <= '9' && digits < 4) {
				k = k * 10 + (sql[i++] - '0');
				digits++;
			}
			if (!digits)
				k = top + 1;
			if (k < 1 || k > 999 || (sql[i] >= '0' && sql[i] <= '9'))
				return -1;
			if (k > top)
				top = k;
			w = snprintf(out + o, cap - o, "$%d", k);
			if (w < 0 || (size_t)w >= cap - o)
				return -1;
			o += (size_t)w;
			continue;
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = ch;
		i++;
	}
	out[o] = '\0';
	if (nparams)
		*nparams = top;
	return 0;
}

/* ------------------------------------------------------------ pool */

static int64_t mono_ms(void)
{
	return gh_mono_ns() / 1000000;
}

/* Closes c's connection and forgets its prepared statements. */
static void disconnect(struct gh_pg_conn *c)
{
	PQfinish(c->pc);
	c->pc = NULL;
	c->ncache = 0;
}

/* The server's notices (NOTICE, WARNING) go to the debug log, not stderr. */
static void notice(void *ud, const char *msg)
{
	(void)ud;
	gh_debug("database: %.*s", (int)strcspn(msg, "\n"), msg);
}

enum gh_code gh_pg_connect(const char *url, int connect_timeout_s, PGconn **out,
			   struct gh_err *e)
{
	char timeout[16], msg[300], shown[256];
	/* the URL's own values win over the defaults given before it */
	const char *keys[] = {"application_name", "connect_timeout", "dbname", NULL};
	const char *vals[] = {"gatehouse", timeout, url, NULL};
	PGconn *pc;

	*out = NULL;
	snprintf(timeout, sizeof(timeout), "%d", connect_timeout_s < 2 ? 2 : connect_timeout_s);
	if (!(pc = PQconnectdbParams(keys, vals, 1)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (PQstatus(pc) != CONNECTION_OK) {
		scrub(url, PQerrorMessage(pc), msg, sizeof(msg));
		gh_pg_url_redact(url, shown, sizeof(shown));
		PQfinish(pc);
		return gh_err_set(e, GH_E_UNAVAILABLE, "database %s: %s", shown, msg);
	}
	PQsetNoticeProcessor(pc, notice, NULL);
	*out = pc;
	return GH_OK;
}

/* Makes c's connection, with the pool's statement timeout. */
static enum gh_code connect_one(struct gh_pg_pool *p, struct gh_pg_conn *c, struct gh_err *e)
{
	char msg[300], set[64];
	enum gh_code rc;
	PGresult *r;

	if ((rc = gh_pg_connect(p->url, p->connect_timeout_s, &c->pc, e)) != GH_OK)
		return rc;
	if (p->statement_timeout_ms > 0) {
		snprintf(set, sizeof(set), "SET statement_timeout = %d", p->statement_timeout_ms);
		r = PQexec(c->pc, set);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			scrub(p->url, PQresultErrorMessage(r), msg, sizeof(msg));
			PQclear(r);
			disconnect(c);
			return gh_err_set(e, GH_E_UNAVAILABLE, "database %s: %s", p->shown, msg);
		}
		PQclear(r);
	}
	return GH_OK;
}

enum gh_code gh_pg_pool_open(const struct gh_pg_opts *o, struct gh_pg_pool **out,
			     struct gh_err *e)
{
	struct gh_pg_pool *p;
	struct gh_pg_conn *c;
	enum gh_code rc;

	*out = NULL;
	if ((rc = gh_pg_url_check(o->url, "database.url", e)) != GH_OK)
		return rc;
	if (o->size < 1)
		return gh_err_set(e, GH_E_BADREQ, "database pool size must be at least 1");
	if (!(p = calloc(1, sizeof(*p))))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	p->size = o->size;
	p->connect_timeout_s = o->connect_timeout_s < 2 ? 2 : o->connect_timeout_s;
	p->statement_timeout_ms = o->statement_timeout_ms;
	p->acquire_timeout_ms = o->acquire_timeout_ms;
	gh_pg_url_redact(o->url, p->shown, sizeof(p->shown));
	p->url = strdup(o->url);
	p->conns = calloc((size_t)o->size, sizeof(*p->conns));
	if (!p->url || !p->conns) {
		free(p->url);
		free(p->conns);
		free(p);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	pthread_mutex_init(&p->mu, NULL);
	gh_cond_init_mono(&p->cv);
	/* one connection now: a wrong URL or password shows at start */
	if ((rc = gh_pg_acquire(p, &c, e)) != GH_OK) {
		gh_pg_pool_close(p);
		return rc;
	}
	gh_pg_release(p, c);
	p->opened = 1;
	*out = p;
	return GH_OK;
}

void gh_pg_pool_close(struct gh_pg_pool *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; i < p->size; i++)
		disconnect(&p->conns[i]);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	sodium_memzero(p->url, strlen(p->url));
	free(p->url);
	free(p->conns);
	free(p);
}

/* A free slot, connected ones first; NULL when every one is busy until
 * the deadline. Called with p->mu held. */
static struct gh_pg_conn *take_slot(struct gh_pg_pool *p, const struct timespec *until)
{
	for (;;) {
		struct gh_pg_conn *free_slot = NULL;
		int i;

		for (i = 0; i < p->size; i++) {
			struct gh_pg_conn *c = &p->conns[i];

			if (c->busy)
				continue;
			if (c->pc) {
				c->busy = 1;
				return c;
			}
			if (!free_slot)
				free_slot = c;
		}
		if (free_slot) {
			free_slot->busy = 1;
			return free_slot;
		}
		if (pthread_cond_timedwait(&p->cv, &p->mu, until) == ETIMEDOUT)
			return NULL;
	}
}

enum gh_code gh_pg_acquire(struct gh_pg_pool *p, struct gh_pg_conn **out, struct gh_err *e)
{
	struct gh_pg_conn *c;
	struct timespec until;
	enum gh_code rc;
	int64_t now;

	*out = NULL;
	gh_deadline(CLOCK_MONOTONIC, p->acquire_timeout_ms, &until);
	pthread_mutex_lock(&p->mu);
	c = take_slot(p, &until);
	if (!c) {
		pthread_mutex_unlock(&p->mu);
		return gh_err_set(e, GH_E_TIMEOUT, "database: every one of the %d connections stayed "
				  "busy for %d ms", p->size, p->acquire_timeout_ms);
	}
	if (c->pc) {
		pthread_mutex_unlock(&p->mu);
		*out = c;
		return GH_OK;
	}
	now = mono_ms();
	if (now < p->retry_at) {
		/* the server was not reachable a moment ago: fail fast */
		rc = gh_err_set(e, GH_E_UNAVAILABLE, "%s", p->down_msg);
		e->retry_after = 1;
		c->busy = 0;
		pthread_cond_signal(&p->cv);
		pthread_mutex_unlock(&p->mu);
		return rc;
	}
	pthread_mutex_unlock(&p->mu);

	rc = connect_one(p, c, e);
	pthread_mutex_lock(&p->mu);
	if (rc == GH_OK) {
		p->connects++;
		p->backoff_ms = 0;
		p->retry_at = 0;
		*out = c;
	} else {
		p->connect_failures++;
		p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : PG_BACKOFF_MIN_MS;
		if (p->backoff_ms > PG_BACKOFF_MAX_MS)
			p->backoff_ms = PG_BACKOFF_MAX_MS;
		p->retry_at = mono_ms() + p->backoff_ms;
		if (p->opened && e && e->code == GH_E_UNAVAILABLE) {
			/* once per attempt (at most one per back-off): the
			 * server's address is for the operator, not for clients */
			gh_warn("%s (next attempt in %d ms)", e->msg, p->backoff_ms);
			gh_err_set(e, GH_E_UNAVAILABLE, "the database cannot be reached; "
				   "gatehouse's log says why");
		}
		gh_strlcpy(p->down_msg, e ? e->msg : "database unavailable", sizeof(p->down_msg));
		if (e)
			e->retry_after = 1;
		c->busy = 0;
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

void gh_pg_release(struct gh_pg_pool *p, struct gh_pg_conn *c)
{
	if (!c)
		return;
	if (c->pc && PQstatus(c->pc) == CONNECTION_OK) {
		PGTransactionStatusType ts = PQtransactionStatus(c->pc);

		if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR) {
			PGresult *r = PQexec(c->pc, "ROLLBACK");

			if (PQresultStatus(r) != PGRES_COMMAND_OK)
				disconnect(c);
			PQclear(r);
		} else if (ts != PQTRANS_IDLE) {
			disconnect(c);
		}
	}
	pthread_mutex_lock(&p->mu);
	if (c->pc && PQstatus(c->pc) != CONNECTION_OK) {
		disconnect(c);
		p->broken++;
	} else if (!c->pc) {
		p->broken++;
	}
	c->busy = 0;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void gh_pg_pool_stats(struct gh_pg_pool *p, struct gh_pg_stats *out)
{
	int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&p->mu);
	out->size = p->size;
	for (i = 0; i < p->size; i++) {
		out->open += p->conns[i].pc != NULL;
		out->busy += p->conns[i].busy;
	}
	out->connects = p->connects;
	out->connect_failures = p->connect_failures;
	out->broken = p->broken;
	pthread_mutex_unlock(&p->mu);
}

PGconn *gh_pg_conn_raw(struct gh_pg_conn *c)
{
	return c->pc;
}

/* ------------------------------------------------------- statements */

/* Maps a failed result (or none) to a gatehouse error. */
static enum gh_code fail(struct gh_pg_conn *c, const PGresult *r, const char *what,
			 struct gh_err *e)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char text[300];

	/* the primary message never quotes parameter values (DETAIL does) */
	gh_strlcpy(text, msg ? msg : PQerrorMessage(c->pc), sizeof(text));
	text[strcspn(text, "\n")] = '\0';
	if (PQstatus(c->pc) != CONNECTION_OK || (state && (!strncmp(state, "08", 2) ||
							   !strncmp(state, "57P", 3)))) {
		enum gh_code rc = gh_err_set(e, GH_E_UNAVAILABLE, "database: %s: connection "
					     "lost: %s", what, text);

		if (e)
			e->retry_after = 1;
		return rc;
	}
	if (state && (!strcmp(state, "23505") || !strcmp(state, "23P01")))
		return gh_err_set(e, GH_E_CONFLICT, "database: %s: %s", what, text);
	if (state && !strcmp(state, "57014"))
		return gh_err_set(e, GH_E_TIMEOUT, "database: %s: statement timed out", what);
	return gh_err_set(e, GH_E_IO, "database: %s: %s", what, text);
}

/* The name of sql's prepared statement on c, preparing it the first time
 * (NULL with e filled on failure). */
static const char *prepared(struct gh_pg_conn *c, const char *sql, const char *what,
			    struct gh_err *e)
{
	char text[PG_SQL_MAX];
	PGresult *r;
	size_t i, slot;

	for (i = 0; i < c->ncache; i++)
		if (c->cache[i].sql == sql)
			return c->cache[i].name;
	if (gh_pg_sql_rewrite(sql, text, sizeof(text), NULL) != 0) {
		gh_err_set(e, GH_E_INTERNAL, "database: %s: the statement is too long or has a bad "
			   "placeholder", what);
		return NULL;
	}
	if (c->ncache < PG_STMT_CACHE) {
		slot = c->ncache;
	} else {
		/* full: forget the oldest (statements are a fixed set of
		 * literals, so this does not happen in practice) */
		slot = 0;
		r = PQexec(c->pc, "DEALLOCATE ALL");
		PQclear(r);
		c->ncache = 0;
	}
	snprintf(c->cache[slot].name, sizeof(c->cache[slot].name), "gh%u", c->next_name++);
	r = PQprepare(c->pc, c->cache[slot].name, text, 0, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fail(c, r, what, e);
		PQclear(r);
		return NULL;
	}
	PQclear(r);
	c->cache[slot].sql = sql;
	c->ncache = slot + 1;
	return c->cache[slot].name;
}

#define PG_MAX_ARGS 64

/* libpq's parameter arrays for args. */
struct pg_params {
	char nums[PG_MAX_ARGS][24];
	const char *vals[PG_MAX_ARGS];
	int lens[PG_MAX_ARGS], fmts[PG_MAX_ARGS];
};

static void params_of(const struct gh_pg_arg *args, int n, struct pg_params *pp)
{
	int i;

	for (i = 0; i < n; i++) {
		pp->lens[i] = 0;
		pp->fmts[i] = 0;
		switch (args[i].kind) {
		case GH_PG_TEXT:
			pp->vals[i] = args[i].p;
			break;
		case GH_PG_INT:
			snprintf(pp->nums[i], sizeof(pp->nums[i]), "%lld", (long long)args[i].num);
			pp->vals[i] = pp->nums[i];
			break;
		case GH_PG_BYTES:
			pp->vals[i] = args[i].p ? args[i].p : "";
			pp->lens[i] = (int)args[i].num;
			pp->fmts[i] = 1;
			break;
		}
	}
}

/* Hands r to *res (or frees it) when it succeeded, else maps its error. */
static enum gh_code result(struct gh_pg_conn *c, PGresult *r, const char *what, PGresult **res,
			   struct gh_err *e)
{
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		enum gh_code rc = fail(c, r, what, e);

		PQclear(r);
		return rc;
	}
	if (res)
		*res = r;
	else
		PQclear(r);
	return GH_OK;
}

/* What every statement checks first: its parameter count and the
 * connection; *res (may be NULL) cleared. */
static enum gh_code can_run(struct gh_pg_conn *c, int n, const char *what, PGresult **res,
			    struct gh_err *e)
{
	if (res)
		*res = NULL;
	if (n < 0 || n > PG_MAX_ARGS)
		return gh_err_set(e, GH_E_INTERNAL, "database: %s: %d parameters", what, n);
	if (!c->pc)
		return gh_err_set(e, GH_E_UNAVAILABLE, "database: %s: not connected", what);
	return GH_OK;
}

enum gh_code gh_pg_exec(struct gh_pg_conn *c, const char *sql, const struct gh_pg_arg *args,
			int n, const char *what, PGresult **res, struct gh_err *e)
{
	struct pg_params pp;
	const char *name;
	enum gh_code rc;

	if ((rc = can_run(c, n, what, res, e)) != GH_OK)
		return rc;
	if (!(name = prepared(c, sql, what, e)))
		return e ? e->code : GH_E_IO;
	params_of(args, n, &pp);
	return result(c, PQexecPrepared(c->pc, name, n, pp.vals, pp.lens, pp.fmts, 0), what, res,
		      e);
}

enum gh_code gh_pg_exec_once(struct gh_pg_conn *c, const char *sql, const struct gh_pg_arg *args,
			     int n, const char *what, PGresult **res, struct gh_err *e)
{
	struct pg_params pp;
	size_t cap = strlen(sql) * 4 + 1;
	char *text;
	enum gh_code rc;

	if ((rc = can_run(c, n, what, res, e)) != GH_OK)
		return rc;
	/* a bare ? becomes at most $999: four bytes for one */
	if (!(text = malloc(cap)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (gh_pg_sql_rewrite(sql, text, cap, NULL) != 0) {
		free(text);
		return gh_err_set(e, GH_E_INTERNAL, "database: %s: a bad placeholder", what);
	}
	params_of(args, n, &pp);
	rc = result(c, PQexecParams(c->pc, text, n, NULL, pp.vals, pp.lens, pp.fmts, 0), what, res,
		    e);
	free(text);
	return rc;
}

enum gh_code gh_pg_run(struct gh_pg_conn *c, const char *sql, const char *what,
		       struct gh_err *e)
{
	PGresult *r;
	ExecStatusType st;
	enum gh_code rc = GH_OK;

	if (!c->pc)
		return gh_err_set(e, GH_E_UNAVAILABLE, "database: %s: not connected", what);
	r = PQexec(c->pc, sql);
	st = PQresultStatus(r);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		rc = fail(c, r, what, e);
	PQclear(r);
	return rc;
}

/* ------------------------------------------------------------ COPY */

enum gh_code gh_pg_copy_begin(struct gh_pg_conn *c, const char *sql, const char *what,
			      struct gh_err *e)
{
	PGresult *r;
	enum gh_code rc = GH_OK;

	if ((rc = can_run(c, 0, what, NULL, e)) != GH_OK)
		return rc;
	r = PQexec(c->pc, sql);
	if (PQresultStatus(r) != PGRES_COPY_IN)
		rc = fail(c, r, what, e);
	PQclear(r);
	return rc;
}

enum gh_code gh_pg_copy_put(struct gh_pg_conn *c, const void *data, size_t len,
			    const char *what, struct gh_err *e)
{
	const char *p = data;

	if (!c->pc)
		return gh_err_set(e, GH_E_UNAVAILABLE, "database: %s: not connected", what);
	while (len) {
		int n = len > (1u << 30) ? 1 << 30 : (int)len;

		/* blocking connection: 1 once queued, -1 when it broke (a
		 * value the server refused shows only at the end) */
		if (PQputCopyData(c->pc, p, n) != 1)
			return fail(c, NULL, what, e);
		p += n;
		len -= (size_t)n;
	}
	return GH_OK;
}

/* ", line N" of a COPY error's context, or 0. The rest of the context
 * quotes the row, which stays out of messages. */
static long copy_line(const PGresult *r)
{
	const char *ctx = r ? PQresultErrorField(r, PG_DIAG_CONTEXT) : NULL;
	const char *at = ctx ? strstr(ctx, ", line ") : NULL;

	return at ? strtol(at + 7, NULL, 10) : 0;
}

enum gh_code gh_pg_copy_end(struct gh_pg_conn *c, const char *why, const char *what,
			    int64_t *rows, struct gh_err *e)
{
	enum gh_code rc = GH_OK;
	int first = 1;
	PGresult *r;

	if (rows)
		*rows = 0;
	if (!c->pc)
		return gh_err_set(e, GH_E_UNAVAILABLE, "database: %s: not connected", what);
	if (PQputCopyEnd(c->pc, why) != 1)
		return fail(c, NULL, what, e);
	/* every result is read, so the connection is ready for the next
	 * statement whatever happened */
	while ((r = PQgetResult(c->pc))) {
		ExecStatusType st = PQresultStatus(r);

		if (first && st == PGRES_COMMAND_OK && rows)
			*rows = strtoll(PQcmdTuples(r), NULL, 10);
		else if (first && st != PGRES_COMMAND_OK && !why) {
			long line = copy_line(r);

			rc = fail(c, r, what, e);
			if (line > 0 && e) {
				size_t n = strlen(e->msg);

				snprintf(e->msg + n, sizeof(e->msg) - n, " (row %ld of the copy)",
					 line);
			}
		}
		first = 0;
		PQclear(r);
		if (PQstatus(c->pc) != CONNECTION_OK)
			break;
	}
	return rc;
}

const char *gh_pg_text(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return "";
	return PQgetvalue(res, row, col);
}

int64_t gh_pg_int(const PGresult *res, int row, int col, int *ok)
{
	const char *s;
	char *end;
	long long v;

	if (ok)
		*ok = 0;
	if (PQgetisnull(res, row, col))
		return 0;
	s = PQgetvalue(res, row, col);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return 0;
	if (ok)
		*ok = 1;
	return (int64_t)v;
}

unsigned char *gh_pg_bytes(const PGresult *res, int row, int col, size_t *len)
{
	unsigned char *raw, *copy;
	size_t n;

	*len = 0;
	if (PQgetisnull(res, row, col))
		return NULL;
	raw = PQunescapeBytea((const unsigned char *)PQgetvalue(res, row, col), &n);
	if (!raw) {
		*len = (size_t)-1;
		return NULL;
	}
	/* a copy from malloc, so callers free it as everything else */
	copy = malloc(n ? n : 1);
	if (!copy) {
		PQfreemem(raw);
		*len = (size_t)-1;
		return NULL;
	}
	memcpy(copy, raw, n);
	PQfreemem(raw);
	*len = n;
	return copy;
}

/* ------------------------------------------------------- migrations */

static const char SQL_VERSION[] = "SELECT coalesce(max(version), 0) FROM schema_migrations";
static const char SQL_APPLIED[] =
	"INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)";

/* Applies the migrations above the current version; inside the caller's
 * transaction, the lock held. */
static enum gh_code migrate_locked(struct gh_pg_conn *c, const struct gh_pg_migration *m,
				   size_t n, int *version, struct gh_err *e)
{
	PGresult *r = NULL;
	enum gh_code rc;
	int64_t cur;
	size_t i;

	/* as the SQLite store's: applied_at in Unix milliseconds */
	rc = gh_pg_run(c, "CREATE TABLE IF NOT EXISTS schema_migrations ("
			  "version integer PRIMARY KEY, name text NOT NULL, "
			  "applied_at bigint NOT NULL)",
		       "schema version table", e);
	if (rc != GH_OK)
		return rc;
	if ((rc = gh_pg_exec(c, SQL_VERSION, NULL, 0, "schema version", &r, e)) != GH_OK)
		return rc;
	cur = gh_pg_int(r, 0, 0, NULL);
	PQclear(r);
	if (n && cur > m[n - 1].version)
		return gh_err_set(e, GH_E_IO, "database: its schema is at version %lld, newer than "
				  "this gatehouse knows (%d): run the newer gatehouse, or restore "
				  "a backup", (long long)cur, m[n - 1].version);
	for (i = 0; i < n; i++) {
		char what[96];

		if (m[i].version <= cur)
			continue;
		snprintf(what, sizeof(what), "migration %04d_%s", m[i].version, m[i].name);
		if ((rc = gh_pg_run(c, m[i].sql, what, e)) != GH_OK)
			return rc;
		rc = gh_pg_exec(c, SQL_APPLIED, (const struct gh_pg_arg[]){
					{GH_PG_INT, NULL, m[i].version},
					{GH_PG_TEXT, m[i].name, 0},
					{GH_PG_INT, NULL, gh_now_ms()}}, 3, what, NULL, e);
		if (rc != GH_OK)
			return rc;
		gh_info("database: applied migration %04d_%s", m[i].version, m[i].name);
		cur = m[i].version;
	}
	if (version)
		*version = (int)cur;
	return GH_OK;
}

enum gh_code gh_pg_migrate(struct gh_pg_conn *c, const struct gh_pg_migration *m, size_t n,
			   int *version, struct gh_err *e)
{
	char lock[80];
	enum gh_code rc;

	if ((rc = gh_pg_run(c, "BEGIN", "migrations", e)) != GH_OK)
		return rc;
	snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%lld)",
		 (long long)PG_MIGRATE_LOCK);
	rc = gh_pg_run(c, lock, "migration lock", e);
	if (rc == GH_OK)
		rc = migrate_locked(c, m, n, version, e);
	if (rc == GH_OK)
		return gh_pg_run(c, "COMMIT", "migrations", e);
	gh_pg_run(c, "ROLLBACK", "migrations", NULL);
	return rc;
}
