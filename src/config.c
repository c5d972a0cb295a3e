/*
 * config.c - loading and validating the config file; see config.h.
 *
 * Each section is described by a table of options (name, type, bounds,
 * default, where it goes), read by one generic routine that also rejects
 * unknown keys, so a typo is reported instead of silently ignored. Runs
 * once at start, single-threaded.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "buf.h"
#include "json.h"
#include "pg.h"
#include "policy.h"
#include "schema.h"
#include "util.h"

#define PATH_MAX_LEN 256
#define CONFIG_MAX_BYTES (16 * 1024 * 1024)

struct ctx {
	const char *file;
	struct gh_err *e;
	char path[PATH_MAX_LEN];
};

static enum gh_code fail(struct ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static enum gh_code fail(struct ctx *c, const char *fmt, ...)
{
	char msg[GH_ERR_MSG_MAX - PATH_MAX_LEN - 8];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return gh_err_set(c->e, GH_E_BADREQ, "%s: %s: %s", c->file, c->path, msg);
}

/* Appends ".key" to the path; returns the old length for pop(). */
static size_t push(struct ctx *c, const char *key)
{
	size_t n = strlen(c->path);

	snprintf(c->path + n, sizeof(c->path) - n, ".%s", key);
	return n;
}

static void pop(struct ctx *c, size_t n)
{
	c->path[n] = '\0';
}

/* ---- ${ENV} substitution over every string in the tree ---- */

enum gh_code gh_config_subst_env(const char *s, char **out, struct gh_err *e)
{
	const char *p;
	struct gh_buf b;
	enum gh_code rc = GH_OK;

	*out = NULL;
	gh_buf_init(&b, 1 << 20);
	for (p = s; *p;) {
		const char *end, *dflt;
		char name[128];
		size_t nlen;
		const char *val;

		if (p[0] != '$' || p[1] != '{') {
			if (gh_buf_putc(&b, *p++) != GH_BUF_OK)
				goto nomem;
			continue;
		}
		end = strchr(p + 2, '}');
		if (!end) {
			rc = gh_err_set(e, GH_E_BADREQ, "unterminated ${ in string");
			goto out;
		}
		dflt = NULL;
		nlen = (size_t)(end - (p + 2));
		{
			const char *colon = memchr(p + 2, ':', nlen);

			if (colon && colon + 1 < end && colon[1] == '-') {
				dflt = colon + 2;
				nlen = (size_t)(colon - (p + 2));
			}
		}
		if (nlen == 0 || nlen >= sizeof(name)) {
			rc = gh_err_set(e, GH_E_BADREQ, "bad environment variable reference");
			goto out;
		}
		memcpy(name, p + 2, nlen);
		name[nlen] = '\0';
		for (size_t i = 0; i < nlen; i++) {
			char ch = name[i];

			if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			      (ch >= '0' && ch <= '9') || ch == '_')) {
				rc = gh_err_set(e, GH_E_BADREQ, "bad environment variable name \"%s\"",
						name);
				goto out;
			}
		}
		val = getenv(name);
		if (!val || (!*val && dflt)) {
			if (!dflt) {
				rc = gh_err_set(e, GH_E_BADREQ, "environment variable %s is not set "
						"(use ${%s:-default} for an optional one)", name, name);
				goto out;
			}
			if (gh_buf_append(&b, dflt, (size_t)(end - dflt)) != GH_BUF_OK)
				goto nomem;
		} else if (gh_buf_puts(&b, val) != GH_BUF_OK) {
			goto nomem;
		}
		p = end + 1;
	}
	if (!(*out = gh_buf_detach(&b)))
		goto nomem;
	goto out;
nomem:
	rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
out:
	/* what was read may hold a secret (a database password) */
	if (b.data)
		sodium_memzero(b.data, b.alloc);
	gh_buf_free(&b);
	return rc;
}

static enum gh_code subst_string(struct ctx *c, cJSON *item)
{
	const char *s = item->valuestring;
	struct gh_err e;
	char *ns = NULL;

	if (!s || !strstr(s, "${"))
		return GH_OK;
	if (gh_config_subst_env(s, &ns, &e) != GH_OK)
		return e.code == GH_E_NOMEM ? gh_err_set(c->e, GH_E_NOMEM, "%s: out of memory",
							 c->file)
					    : fail(c, "%s", e.msg);
	/* valuestring is owned by the item (not a reference here). */
	cJSON_free(item->valuestring);
	item->valuestring = ns;
	return GH_OK;
}

static enum gh_code subst_tree(struct ctx *c, cJSON *v)
{
	cJSON *it;
	enum gh_code rc;
	size_t n;
	int i = 0;

	if (cJSON_IsString(v))
		return subst_string(c, v);
	if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
		return GH_OK;
	for (it = v->child; it; it = it->next, i++) {
		char idx[24];

		if (it->string) {
			n = push(c, it->string);
		} else {
			n = strlen(c->path);
			snprintf(idx, sizeof(idx), "[%d]", i);
			snprintf(c->path + n, sizeof(c->path) - n, "%s", idx);
		}
		rc = subst_tree(c, it);
		pop(c, n);
		if (rc)
			return rc;
	}
	return GH_OK;
}

/* cJSON keeps both members of {"a":1,"a":2} and lookups see the first: a
 * repeated key in the config would be silently ignored, so refuse it. */
static enum gh_code no_duplicates(struct ctx *c, const cJSON *v)
{
	const cJSON *it, *jt;
	enum gh_code rc;
	size_t n;
	int i = 0;

	if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
		return GH_OK;
	for (it = v->child; it; it = it->next, i++) {
		if (it->string) {
			for (jt = it->next; jt; jt = jt->next) {
				if (jt->string && !strcmp(it->string, jt->string)) {
					n = push(c, it->string);
					rc = fail(c, "duplicate key: given twice (one would be ignored)");
					pop(c, n);
					return rc;
				}
			}
			n = push(c, it->string);
		} else {
			n = strlen(c->path);
			snprintf(c->path + n, sizeof(c->path) - n, "[%d]", i);
		}
		rc = no_duplicates(c, it);
		pop(c, n);
		if (rc)
			return rc;
	}
	return GH_OK;
}

/* ---- typed readers ---- */

enum ftype { F_STR, F_INT, F_BOOL, F_DOUBLE, F_LIST, F_OBJ, F_ARR };

struct field {
	const char *name;
	enum ftype type;
	size_t off;           /* offset in the target struct; SIZE_MAX = handled by caller */
	int required;
	int64_t min, max;     /* F_INT bounds; F_DOUBLE uses them too */
	int64_t dflt;         /* F_INT / F_BOOL default */
	const char *sdflt;    /* F_STR default (NULL = none) */
};

#define NOFIELD ((size_t)-1)

static const char *type_name(const cJSON *v)
{
	if (!v)
		return "nothing";
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsArray(v))
		return "an array";
	return "an object";
}

static enum gh_code read_list(struct ctx *c, const cJSON *v, struct gh_strlist *out)
{
	const cJSON *it;
	size_t n = 0, i = 0;

	if (!cJSON_IsArray(v))
		return fail(c, "expected an array of strings, got %s", type_name(v));
	for (it = v->child; it; it = it->next, n++)
		if (!cJSON_IsString(it) || !*it->valuestring)
			return fail(c, "item %zu: expected a non-empty string, got %s", n,
				    type_name(it));
	out->v = calloc(n ? n : 1, sizeof(char *));
	if (!out->v)
		return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	for (it = v->child; it; it = it->next) {
		out->v[i] = strdup(it->valuestring);
		if (!out->v[i])
			return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
		out->n = ++i;
	}
	return GH_OK;
}

static void free_list(struct gh_strlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* Reads obj against the field table into base; rejects unknown keys except
 * those in `extra` (handled by the caller). */
static enum gh_code read_fields(struct ctx *c, const cJSON *obj, const struct field *f, size_t nf,
				void *base, const char *const *extra)
{
	const cJSON *it;
	size_t i, n;
	enum gh_code rc;

	if (obj && !cJSON_IsObject(obj))
		return fail(c, "expected an object, got %s", type_name(obj));
	for (it = obj ? obj->child : NULL; it; it = it->next) {
		int known = 0;

		for (i = 0; i < nf && !known; i++)
			known = !strcmp(it->string, f[i].name);
		for (i = 0; extra && extra[i] && !known; i++)
			known = !strcmp(it->string, extra[i]);
		if (!known) {
			char names[256] = "";
			size_t used = 0;

			for (i = 0; i < nf && used < sizeof(names) - 1; i++)
				used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
							 i ? ", " : "", f[i].name);
			for (i = 0; extra && extra[i] && used < sizeof(names) - 1; i++)
				used += (size_t)snprintf(names + used, sizeof(names) - used, ", %s",
							 extra[i]);
			n = push(c, it->string);
			rc = fail(c, "unknown option (known: %s)", names);
			pop(c, n);
			return rc;
		}
	}
	for (i = 0; i < nf; i++) {
		const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, f[i].name) : NULL;
		char *dst = f[i].off == NOFIELD ? NULL : (char *)base + f[i].off;

		if (cJSON_IsNull(v))
			v = NULL;
		n = push(c, f[i].name);
		rc = GH_OK;
		if (!v && f[i].required) {
			rc = fail(c, "required option is missing");
		} else if (!dst) {
			/* the caller reads it, but its type is checked here */
			if (v && f[i].type == F_STR && !cJSON_IsString(v))
				rc = fail(c, "expected a string, got %s", type_name(v));
			else if (v && f[i].type == F_OBJ && !cJSON_IsObject(v))
				rc = fail(c, "expected an object, got %s", type_name(v));
		} else {
			switch (f[i].type) {
			case F_STR:
				if (!v) {
					if (f[i].sdflt && !(*(char **)dst = strdup(f[i].sdflt)))
						rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
				} else if (!cJSON_IsString(v)) {
					rc = fail(c, "expected a string, got %s", type_name(v));
				} else if (!(*(char **)dst = strdup(v->valuestring))) {
					rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
				}
				break;
			case F_INT:
				if (!v) {
					*(int64_t *)dst = f[i].dflt;
				} else if (!gh_json_is_int(v) || v->valuedouble < (double)f[i].min ||
					   v->valuedouble > (double)f[i].max) {
					rc = fail(c, "expected an integer in %lld..%lld, got %s",
						  (long long)f[i].min, (long long)f[i].max,
						  cJSON_IsNumber(v) ? "a number out of range"
								    : type_name(v));
				} else {
					*(int64_t *)dst = (int64_t)v->valuedouble;
				}
				break;
			case F_BOOL:
				if (!v)
					*(int *)dst = (int)f[i].dflt;
				else if (!cJSON_IsBool(v))
					rc = fail(c, "expected true or false, got %s", type_name(v));
				else
					*(int *)dst = cJSON_IsTrue(v);
				break;
			case F_DOUBLE:
				if (v && (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
					  v->valuedouble < (double)f[i].min ||
					  v->valuedouble > (double)f[i].max))
					rc = fail(c, "expected a number in %lld..%lld",
						  (long long)f[i].min, (long long)f[i].max);
				else if (v)
					*(double *)dst = v->valuedouble;
				break;
			case F_LIST:
				if (v)
					rc = read_list(c, v, (struct gh_strlist *)(void *)dst);
				break;
			case F_OBJ:
				if (v && !cJSON_IsObject(v))
					rc = fail(c, "expected an object, got %s", type_name(v));
				break;
			case F_ARR:
				if (v && !cJSON_IsArray(v))
					rc = fail(c, "expected an array, got %s", type_name(v));
				break;
			}
		}
		pop(c, n);
		if (rc)
			return rc;
	}
	return GH_OK;
}

/* 1..max letters, digits, '_' and '-', starting with a letter or '_'. */
static int valid_name(const char *s, size_t max)
{
	return ((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_') &&
	       gh_chars_ok(s, max, "_-");
}

/* 1 when name is a valid normalised tool name (what Mastra produces). */
static int valid_tool_name(const char *s)
{
	return valid_name(s, 63);
}

static int valid_id(const char *s)
{
	return gh_chars_ok(s, 64, "_-.");
}

/* An http(s) URL with a host, and without the spaces and control
 * characters curl refuses. Without a host, "https://" with its trailing
 * '/' cut would become "https:/chat/completions", which curl reads as the
 * host "chat": the provider's key would go wherever that name resolves. */
static int is_http_url(const char *s)
{
	size_t n = !strncmp(s, "http://", 7) ? 7 : !strncmp(s, "https://", 8) ? 8 : 0;
	const unsigned char *p;

	if (!n || !s[n] || strchr("/?#", s[n]))
		return 0;
	for (p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			return 0;
	return 1;
}

/* ---- server.listen ---- */

static int host_name_ok(const char *h)
{
	size_t i, label = 0;

	if (!((h[0] >= 'a' && h[0] <= 'z') || (h[0] >= 'A' && h[0] <= 'Z')))
		return 0;
	for (i = 0; h[i]; i++) {
		char ch = h[i];

		if (ch == '.') {
			if (label == 0 || h[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '-') || ++label > 63 ||
		    (ch == '-' && label == 1))
			return 0;
	}
	return label > 0 && h[i - 1] != '-';
}

int gh_config_listen_parse(const char *s, char *host, size_t cap, int *port, int *v6,
			   char *why, size_t why_cap)
{
	const char *colon, *hs = s, *he, *p;
	unsigned char addr[16];
	char h[GH_LISTEN_HOST_MAX];
	long v = 0;
	size_t hl;

	*v6 = 0;
	if (!s || !*s) {
		snprintf(why, why_cap, "expected HOST:PORT (e.g. 127.0.0.1:8080), got nothing");
		return -1;
	}
	if (strlen(s) >= GH_LISTEN_HOST_MAX) {
		snprintf(why, why_cap, "expected HOST:PORT, got %zu characters", strlen(s));
		return -1;
	}
	if (strchr(s, ',')) {
		snprintf(why, why_cap, "\"%s\": expected one HOST:PORT, not a list", s);
		return -1;
	}
	if (s[0] == '[') {
		he = strchr(s, ']');
		if (!he || he[1] != ':') {
			snprintf(why, why_cap, "expected [IPv6]:PORT (e.g. [::1]:8080), got \"%s\"",
				 s);
			return -1;
		}
		hs = s + 1;
		colon = he + 1;
		*v6 = 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon) {
			snprintf(why, why_cap, "expected HOST:PORT (e.g. 127.0.0.1:8080): \"%s\" has "
				 "no port", s);
			return -1;
		}
		he = colon;
		if (memchr(s, ':', (size_t)(colon - s))) {
			snprintf(why, why_cap, "\"%s\": an IPv6 address goes in brackets, e.g. "
				 "[::1]:8080", s);
			return -1;
		}
	}
	hl = (size_t)(he - hs);
	if (hl == 0) {
		snprintf(why, why_cap, "\"%s\" has no host before the port (0.0.0.0:PORT listens "
			 "on every IPv4 address)", s);
		return -1;
	}
	memcpy(h, hs, hl);
	h[hl] = '\0';
	for (p = colon + 1; *p >= '0' && *p <= '9' && p - colon <= 5; p++)
		v = v * 10 + (*p - '0');
	if (p == colon + 1 || *p || v > 65535) {
		snprintf(why, why_cap, "\"%s\": the port must be a number in 0..65535 (0 picks a "
			 "free one)", s);
		return -1;
	}
	if (*v6) {
		if (inet_pton(AF_INET6, h, addr) != 1) {
			snprintf(why, why_cap, "\"%s\" is not an IPv6 address", h);
			return -1;
		}
	} else if (strspn(h, "0123456789.") == hl) {
		if (inet_pton(AF_INET, h, addr) != 1) {
			snprintf(why, why_cap, "\"%s\" is not an IPv4 address", h);
			return -1;
		}
	} else if (!host_name_ok(h)) {
		snprintf(why, why_cap, "\"%s\" is not an IP address or a host name", h);
		return -1;
	}
	if (cap <= hl) {
		snprintf(why, why_cap, "host name too long");
		return -1;
	}
	memcpy(host, h, hl + 1);
	*port = (int)v;
	return 0;
}

/* ---- sections ---- */

static enum gh_code read_server(struct ctx *c, const cJSON *obj, struct gh_server_conf *s)
{
	static const struct field f[] = {
		{"listen", F_STR, offsetof(struct gh_server_conf, listen), 0, 0, 0, 0,
		 "127.0.0.1:8080"},
		{"max_body_bytes", F_INT, offsetof(struct gh_server_conf, max_body_bytes), 0, 1024,
		 1 << 30, 1 << 20, NULL},
		{"threads", F_INT, offsetof(struct gh_server_conf, threads), 0, 4, 20000, 256, NULL},
		{"max_streams", F_INT, offsetof(struct gh_server_conf, max_streams), 0, 1, 19000,
		 32, NULL},
		{"heartbeat_ms", F_INT, offsetof(struct gh_server_conf, heartbeat_ms), 0, 50,
		 600000, 15000, NULL},
		{"request_timeout_ms", F_INT, offsetof(struct gh_server_conf, request_timeout_ms),
		 0, 1000, 3600000, 30000, NULL},
		{"approval_wait_ms", F_INT, offsetof(struct gh_server_conf, approval_wait_ms), 0, 0,
		 3600000, 30000, NULL},
		{"head_timeout_ms", F_INT, offsetof(struct gh_server_conf, head_timeout_ms), 0, 100,
		 600000, 10000, NULL},
		{"max_connections_per_address", F_INT,
		 offsetof(struct gh_server_conf, max_connections_per_address), 0, 0, 1000000, 128,
		 NULL},
		{"public_url", F_STR, offsetof(struct gh_server_conf, public_url), 0, 0, 0, 0, NULL},
		{"mcp_sessions_per_key", F_INT,
		 offsetof(struct gh_server_conf, mcp_sessions_per_key), 0, 1, 10000, 16, NULL},
		{"mcp_session_idle_ms", F_INT, offsetof(struct gh_server_conf, mcp_session_idle_ms),
		 0, 1000, 604800000, 3600000, NULL},
		{"upstream_idle_ms", F_INT, offsetof(struct gh_server_conf, upstream_idle_ms), 0,
		 1000, 3600000, 60000, NULL},
	};
	size_t n = push(c, "server");
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), s, NULL);

	if (!rc) {
		char host[GH_LISTEN_HOST_MAX], why[200];
		int port, v6;

		if (gh_config_listen_parse(s->listen, host, sizeof(host), &port, &v6, why,
					   sizeof(why)) != 0) {
			size_t m = push(c, "listen");

			rc = fail(c, "%s", why);
			pop(c, m);
		}
	}
	if (!rc && s->threads < s->max_streams + 4)
		rc = fail(c, "threads (%lld) must exceed max_streams (%lld) by at least 4, so "
			     "plain requests are served while streams are held",
			  (long long)s->threads, (long long)s->max_streams);
	pop(c, n);
	return rc;
}

/* database.url: PostgreSQL instead of the SQLite file. Local files (key
 * files, the pid file) then live beside the config file, named
 * "gatehouse-...", unless auth.key_hash_file and audit.signing_key_file
 * say otherwise (replicas share those two: see the README). */
static enum gh_code read_database_url(struct ctx *c, const cJSON *obj, struct gh_database_conf *d,
				      const char *file)
{
	const char *slash = strrchr(file, '/');
	size_t n = push(c, "url"), dl = slash ? (size_t)(slash - file) + 1 : 0;
	struct gh_err e;
	enum gh_code rc = GH_OK;

	if (cJSON_GetObjectItemCaseSensitive(obj, "path"))
		rc = fail(c, "database.path and database.url both name a database: keep one");
	else if (!gh_pg_is_url(d->url))
		rc = fail(c, "expected a postgres:// or postgresql:// URL");
	else if (gh_pg_url_check(d->url, "database.url", &e) != GH_OK)
		rc = fail(c, "%s", e.msg);
	pop(c, n);
	if (rc)
		return rc;
	free(d->path);
	if (!(d->path = malloc(dl + sizeof("gatehouse"))))
		return fail(c, "out of memory");
	memcpy(d->path, file, dl);
	memcpy(d->path + dl, "gatehouse", sizeof("gatehouse"));
	return GH_OK;
}

static enum gh_code read_database(struct ctx *c, const cJSON *obj, struct gh_database_conf *d,
				  const char *file)
{
	static const struct field f[] = {
		{"path", F_STR, offsetof(struct gh_database_conf, path), 0, 0, 0, 0, "gatehouse.db"},
		{"url", F_STR, offsetof(struct gh_database_conf, url), 0, 0, 0, 0, NULL},
		{"synchronous", F_STR, NOFIELD, 0, 0, 0, 0, NULL},
		{"readers", F_INT, offsetof(struct gh_database_conf, readers), 0, 1, 256, 8, NULL},
		{"busy_timeout_ms", F_INT, offsetof(struct gh_database_conf, busy_timeout_ms), 0, 0,
		 600000, 5000, NULL},
		{"group_commit_max", F_INT, offsetof(struct gh_database_conf, group_commit_max), 0, 1,
		 100000, 2048, NULL},
		{"pool_size", F_INT, offsetof(struct gh_database_conf, pool_size), 0, 1, 1000, 16,
		 NULL},
		{"statement_timeout_ms", F_INT,
		 offsetof(struct gh_database_conf, statement_timeout_ms), 0, 0, 3600000, 30000, NULL},
		{"connect_timeout_ms", F_INT, offsetof(struct gh_database_conf, connect_timeout_ms),
		 0, 2000, 600000, 5000, NULL},
	};
	size_t n = push(c, "database");
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), d, NULL);
	const char *sync = obj ? gh_json_str(obj, "synchronous") : NULL;

	if (!rc && sync) {
		if (!strcmp(sync, "full")) {
			d->synchronous_full = 1;
		} else if (strcmp(sync, "normal")) {
			size_t m = push(c, "synchronous");

			rc = fail(c, "expected \"normal\" or \"full\"");
			pop(c, m);
		}
	}
	if (!rc && d->url)
		rc = read_database_url(c, obj, d, file);
	pop(c, n);
	return rc;
}

static enum gh_code check_mock(struct ctx *c, const cJSON *obj)
{
	const cJSON *rules = cJSON_GetObjectItemCaseSensitive(obj, "rules"), *r;
	size_t n, i = 0;

	if (!rules)
		return GH_OK;
	n = push(c, "rules");
	if (!cJSON_IsArray(rules)) {
		enum gh_code rc = fail(c, "expected an array of rules");

		pop(c, n);
		return rc;
	}
	for (r = rules->child; r; r = r->next, i++) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "if_contains");
		const cJSON *tool = cJSON_GetObjectItemCaseSensitive(r, "tool");
		const cJSON *text = cJSON_GetObjectItemCaseSensitive(r, "text");
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(r, "args");
		const cJSON *then = cJSON_GetObjectItemCaseSensitive(r, "then");
		char idx[24];
		size_t m2 = strlen(c->path);
		const char *why = NULL;

		snprintf(idx, sizeof(idx), "[%zu]", i);
		snprintf(c->path + m2, sizeof(c->path) - m2, "%s", idx);
		if (cJSON_IsObject(r)) {
			static const char *const keys[] = {"if_contains", "tool", "text", "args",
							   "then", NULL};
			const cJSON *k;

			for (k = r->child; k && !why; k = k->next) {
				int known = 0;

				for (size_t j = 0; keys[j] && !known; j++)
					known = !strcmp(k->string, keys[j]);
				if (!known)
					why = "unknown key in a mock rule (known: if_contains, tool, text, "
					      "args, then)";
			}
		}
		if (why)
			;
		else if (!cJSON_IsObject(r))
			why = "expected an object";
		else if (m && !cJSON_IsString(m))
			why = "if_contains: expected a string";
		else if (!!tool == !!text)
			why = "expected exactly one of \"tool\" (a tool call) or \"text\" (a reply)";
		else if (tool && (!cJSON_IsString(tool) || !valid_tool_name(tool->valuestring)))
			why = "tool: expected a tool name";
		else if (text && !cJSON_IsString(text))
			why = "text: expected a string";
		else if (args && !cJSON_IsObject(args))
			why = "args: expected an object";
		else if (then && !cJSON_IsString(then))
			why = "then: expected a string";
		if (why) {
			enum gh_code rc = fail(c, "%s", why);

			pop(c, n);
			return rc;
		}
		pop(c, m2);
	}
	pop(c, n);
	return GH_OK;
}

static enum gh_code read_provider(struct ctx *c, const cJSON *obj, struct gh_provider_conf *p)
{
	static const struct field f[] = {
		{"type", F_STR, NOFIELD, 1, 0, 0, 0, NULL},
		{"base_url", F_STR, offsetof(struct gh_provider_conf, base_url), 0, 0, 0, 0, NULL},
		{"api_key", F_STR, offsetof(struct gh_provider_conf, api_key), 0, 0, 0, 0, NULL},
		{"timeout_ms", F_INT, offsetof(struct gh_provider_conf, timeout_ms), 0, 100, 3600000,
		 60000, NULL},
		{"connect_timeout_ms", F_INT, offsetof(struct gh_provider_conf, connect_timeout_ms),
		 0, 50, 600000, 5000, NULL},
		{"max_retries", F_INT, offsetof(struct gh_provider_conf, max_retries), 0, 0, 10, 2,
		 NULL},
		{"retry_base_ms", F_INT, offsetof(struct gh_provider_conf, retry_base_ms), 0, 1,
		 60000, 250, NULL},
		{"max_response_bytes", F_INT, offsetof(struct gh_provider_conf, max_response_bytes),
		 0, 1024, 256 << 20, 8 << 20, NULL},
		{"anthropic_version", F_STR, offsetof(struct gh_provider_conf, anthropic_version), 0,
		 0, 0, 0, "2023-06-01"},
	};
	static const char *const mock_extra[] = {"rules", "default", "after_tool", NULL};
	const char *type = gh_json_str(obj, "type");
	enum gh_code rc;

	if (!cJSON_IsObject(obj))
		return fail(c, "expected an object, got %s", type_name(obj));
	if (!type) {
		size_t n = push(c, "type");

		rc = fail(c, "required: \"openai\", \"anthropic\" or \"mock\"");
		pop(c, n);
		return rc;
	}
	if (!strcmp(type, "openai")) {
		p->type = GH_PROVIDER_OPENAI;
	} else if (!strcmp(type, "anthropic")) {
		p->type = GH_PROVIDER_ANTHROPIC;
	} else if (!strcmp(type, "mock")) {
		p->type = GH_PROVIDER_MOCK;
	} else {
		size_t n = push(c, "type");

		rc = fail(c, "expected \"openai\", \"anthropic\" or \"mock\", got \"%s\"", type);
		pop(c, n);
		return rc;
	}
	rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), p,
			 p->type == GH_PROVIDER_MOCK ? mock_extra : NULL);
	if (rc)
		return rc;
	p->mock = obj;
	if (p->type == GH_PROVIDER_MOCK)
		return check_mock(c, obj);
	if (!p->base_url && p->type == GH_PROVIDER_ANTHROPIC &&
	    !(p->base_url = strdup("https://api.anthropic.com")))
		return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	if (!p->base_url || !is_http_url(p->base_url)) {
		size_t n = push(c, "base_url");

		rc = fail(c, "expected an http:// or https:// URL with a host");
		pop(c, n);
		return rc;
	}
	{
		size_t len = strlen(p->base_url);

		while (len > 0 && p->base_url[len - 1] == '/')
			p->base_url[--len] = '\0';
	}
	return GH_OK;
}

static enum gh_code read_agent(struct ctx *c, const struct gh_config *cfg, const cJSON *obj,
			       struct gh_agent_conf *a)
{
	static const struct field f[] = {
		{"name", F_STR, offsetof(struct gh_agent_conf, name), 0, 0, 0, 0, NULL},
		{"description", F_STR, offsetof(struct gh_agent_conf, description), 0, 0, 0, 0, ""},
		{"provider", F_STR, offsetof(struct gh_agent_conf, provider), 1, 0, 0, 0, NULL},
		{"model", F_STR, offsetof(struct gh_agent_conf, model), 0, 0, 0, 0, NULL},
		{"instructions", F_STR, offsetof(struct gh_agent_conf, instructions), 0, 0, 0, 0,
		 ""},
		{"tools", F_LIST, offsetof(struct gh_agent_conf, tools), 0, 0, 0, 0, NULL},
		{"memory", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"max_steps", F_INT, offsetof(struct gh_agent_conf, max_steps), 0, 1, 100, 8, NULL},
		{"require_approval", F_LIST, offsetof(struct gh_agent_conf, require_approval), 0, 0,
		 0, 0, NULL},
		{"temperature", F_DOUBLE, offsetof(struct gh_agent_conf, temperature), 0, 0, 2, 0,
		 NULL},
		{"max_tokens", F_INT, offsetof(struct gh_agent_conf, max_tokens), 0, 0, 1000000, 0,
		 NULL},
		{"models", F_LIST, offsetof(struct gh_agent_conf, models), 0, 0, 0, 0, NULL},
		{"passthrough", F_BOOL, offsetof(struct gh_agent_conf, passthrough), 0, 0, 0, 0, NULL},
		{"client_tool_timeout_s", F_INT, offsetof(struct gh_agent_conf, client_tool_timeout_s),
		 0, 1, 30 * 86400, 3600, NULL},
	};
	static const struct field mf[] = {
		{"enabled", F_BOOL, offsetof(struct gh_agent_conf, memory_enabled), 0, 0, 0, 0, NULL},
		{"last_messages", F_INT, offsetof(struct gh_agent_conf, last_messages), 0, 0, 1000,
		 20, NULL},
	};
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), a, NULL);
	size_t n;

	if (rc)
		return rc;
	a->has_temperature = cJSON_GetObjectItemCaseSensitive(obj, "temperature") != NULL;
	n = push(c, "memory");
	rc = read_fields(c, cJSON_GetObjectItemCaseSensitive(obj, "memory"), mf, GH_ARRAY_LEN(mf),
			 a, NULL);
	pop(c, n);
	if (rc)
		return rc;
	if (!a->name && !(a->name = strdup(a->id)))
		return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	a->prov = gh_config_provider(cfg, a->provider);
	if (!a->prov) {
		n = push(c, "provider");
		rc = fail(c, "no provider named \"%s\" in $.providers", a->provider);
		pop(c, n);
		return rc;
	}
	if (a->passthrough && a->instructions && *a->instructions) {
		n = push(c, "instructions");
		rc = fail(c, "a passthrough agent adds no instructions of its own");
		pop(c, n);
		return rc;
	}
	if (!a->model && a->passthrough && a->prov->type != GH_PROVIDER_MOCK) {
		/* the model the client asks for */
		if (!(a->model = strdup("")))
			return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	}
	if (!a->model) {
		if (a->prov->type != GH_PROVIDER_MOCK) {
			n = push(c, "model");
			rc = fail(c, "required option is missing");
			pop(c, n);
			return rc;
		}
		if (!(a->model = strdup("mock")))
			return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	}
	return GH_OK;
}

/* A tool's output_schema: optional, checked like input_schema. */
static enum gh_code read_output_schema(struct ctx *c, const cJSON *obj, struct gh_tool_conf *t)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "output_schema");
	char msg[256];
	enum gh_code rc = GH_OK;
	size_t n;

	if (!v)
		return GH_OK;
	n = push(c, "output_schema");
	if (gh_schema_check(v, msg, sizeof(msg)) != 0)
		rc = fail(c, "%s", msg);
	pop(c, n);
	if (rc == GH_OK && !(t->output_schema = cJSON_Duplicate(v, 1)))
		rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	return rc;
}

static enum gh_code read_tool(struct ctx *c, const cJSON *obj, struct gh_tool_conf *t)
{
	static const struct field f[] = {
		{"type", F_STR, NOFIELD, 1, 0, 0, 0, NULL},
		{"description", F_STR, offsetof(struct gh_tool_conf, description), 1, 0, 0, 0, NULL},
		{"input_schema", F_OBJ, NOFIELD, 1, 0, 0, 0, NULL},
		{"output_schema", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"annotations", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"url", F_STR, offsetof(struct gh_tool_conf, url), 1, 0, 0, 0, NULL},
		{"headers", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"timeout_ms", F_INT, offsetof(struct gh_tool_conf, timeout_ms), 0, 100, 600000,
		 10000, NULL},
		{"max_response_bytes", F_INT, offsetof(struct gh_tool_conf, max_response_bytes), 0,
		 16, 64 << 20, 1 << 20, NULL},
		{"require_approval", F_BOOL, offsetof(struct gh_tool_conf, require_approval), 0, 0, 0,
		 0, NULL},
	};
	static const char *const hints[] = {"readOnlyHint", "destructiveHint", "idempotentHint",
					    "openWorldHint", NULL};
	const cJSON *v, *it;
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), t, NULL);
	char msg[256];
	size_t n, i;

	if (rc)
		return rc;
	if (strcmp(gh_json_str(obj, "type") ? gh_json_str(obj, "type") : "", "http")) {
		n = push(c, "type");
		rc = fail(c, "expected \"http\"");
		pop(c, n);
		return rc;
	}
	t->type = GH_TOOL_HTTP;
	if (!valid_tool_name(t->name))
		return fail(c, "tool name must match [a-zA-Z_][a-zA-Z0-9_-]{0,62}");
	if (!is_http_url(t->url)) {
		n = push(c, "url");
		rc = fail(c, "expected an http:// or https:// URL with a host");
		pop(c, n);
		return rc;
	}
	v = cJSON_GetObjectItemCaseSensitive(obj, "input_schema");
	n = push(c, "input_schema");
	if (gh_schema_check(v, msg, sizeof(msg)) != 0) {
		rc = fail(c, "%s", msg);
		pop(c, n);
		return rc;
	}
	pop(c, n);
	if (!(t->input_schema = cJSON_Duplicate(v, 1)))
		return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	if ((rc = read_output_schema(c, obj, t)) != GH_OK)
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(obj, "annotations");
	if (v) {
		for (it = v->child; it; it = it->next) {
			int known = !strcmp(it->string, "title");

			for (i = 0; hints[i] && !known; i++)
				known = !strcmp(it->string, hints[i]);
			n = push(c, "annotations");
			if (!known)
				rc = fail(c, "unknown annotation \"%s\"", it->string);
			else if (strcmp(it->string, "title") ? !cJSON_IsBool(it)
							     : !cJSON_IsString(it))
				rc = fail(c, "%s: expected %s", it->string,
					  strcmp(it->string, "title") ? "true or false" : "a string");
			pop(c, n);
			if (rc)
				return rc;
		}
		if (!(t->annotations = cJSON_Duplicate(v, 1)))
			return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	}
	v = cJSON_GetObjectItemCaseSensitive(obj, "headers");
	if (v) {
		size_t nh = 0;

		for (it = v->child; it; it = it->next)
			nh++;
		t->headers = calloc(nh ? nh : 1, sizeof(*t->headers));
		if (!t->headers)
			return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
		for (it = v->child; it; it = it->next) {
			n = push(c, "headers");
			if (!cJSON_IsString(it) || strpbrk(it->string, "\r\n:") ||
			    strpbrk(it->valuestring, "\r\n"))
				rc = fail(c, "%s: expected a header value string without line breaks",
					  it->string);
			pop(c, n);
			if (rc)
				return rc;
			t->headers[t->nheaders].name = strdup(it->string);
			t->headers[t->nheaders].value = strdup(it->valuestring);
			if (!t->headers[t->nheaders].name || !t->headers[t->nheaders].value) {
				t->nheaders++;
				return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
			}
			t->nheaders++;
		}
	}
	return GH_OK;
}

/* The policy version is a digest of the policy's own canonical JSON, so any
 * edit of a policy voids approvals bound to the old text. */
static void policy_version(const cJSON *obj, char out[17])
{
	struct gh_buf b;
	unsigned char h[8];

	gh_buf_init(&b, 1 << 20);
	if (gh_json_canonical(obj, &b) == GH_BUF_OK && b.data)
		crypto_generichash(h, sizeof(h), (const unsigned char *)b.data, b.len, NULL, 0);
	else
		memset(h, 0, sizeof(h));
	gh_buf_free(&b);
	gh_hex(h, sizeof(h), out);
}

/* "arguments": conditions on a call's arguments. A pattern that cannot be
 * used stops the start (fail closed), naming the policy and the rule. */
static enum gh_code read_arg_rules(struct ctx *c, const cJSON *arr, struct gh_policy_conf *p)
{
	static const struct field f[] = {
		{"name", F_STR, offsetof(struct gh_arg_rule, name), 0, 0, 0, 0, NULL},
		{"tool", F_STR, offsetof(struct gh_arg_rule, tool), 1, 0, 0, 0, NULL},
		{"pointer", F_STR, offsetof(struct gh_arg_rule, pointer), 1, 0, 0, 0, NULL},
		{"regex", F_STR, offsetof(struct gh_arg_rule, regex), 0, 0, 0, 0, NULL},
		{"glob", F_STR, offsetof(struct gh_arg_rule, glob), 0, 0, 0, 0, NULL},
		{"negate", F_BOOL, offsetof(struct gh_arg_rule, negate), 0, 0, 0, 0, NULL},
		{"effect", F_STR, NOFIELD, 1, 0, 0, 0, NULL},
	};
	const cJSON *it;
	size_t n, cnt = (size_t)cJSON_GetArraySize(arr);
	char key[40], why[200];
	enum gh_code rc = GH_OK;

	if (!cnt)
		return GH_OK;
	if (!(p->arg_rules = calloc(cnt, sizeof(*p->arg_rules))))
		return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(it, arr) {
		struct gh_arg_rule *r = &p->arg_rules[p->narg_rules];
		const char *eff;

		snprintf(key, sizeof(key), "arguments[%zu]", p->narg_rules);
		r->index = p->narg_rules++;
		n = push(c, key);
		if (!cJSON_IsObject(it))
			rc = fail(c, "expected an object {tool, pointer, regex | glob, effect}");
		else
			rc = read_fields(c, it, f, GH_ARRAY_LEN(f), r, NULL);
		if (rc)
			goto next;
		eff = gh_json_str(it, "effect");
		if (!strcmp(eff, "deny")) {
			r->effect = GH_ARG_DENY;
		} else if (!strcmp(eff, "approval")) {
			r->effect = GH_ARG_APPROVAL;
		} else {
			rc = fail(c, "effect: expected \"deny\" or \"approval\", got \"%s\"", eff);
			goto next;
		}
		if (r->pointer[0] && r->pointer[0] != '/') {
			rc = fail(c, "pointer: expected a JSON pointer (\"/command\"), got \"%s\"",
				  r->pointer);
		} else if (!r->regex == !r->glob) {
			rc = fail(c, "expected one of regex or glob");
		} else if (gh_policy_arg_rule_compile(r, why, sizeof(why)) != 0) {
			size_t m = push(c, "regex");

			rc = fail(c, "policy \"%s\" rule %s: the pattern cannot be used: %s", p->name,
				  r->name ? r->name : key, why);
			pop(c, m);
		}
next:
		pop(c, n);
		if (rc)
			return rc;
	}
	return GH_OK;
}

static enum gh_code read_policy(struct ctx *c, const cJSON *obj, struct gh_policy_conf *p)
{
	static const struct field f[] = {
		{"agents", F_LIST, offsetof(struct gh_policy_conf, agents), 0, 0, 0, 0, NULL},
		{"tools", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"client_tools", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"approval", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"rate_limits", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"arguments", F_ARR, NOFIELD, 0, 0, 0, 0, NULL},
	};
	static const struct field tf[] = {
		{"allow", F_LIST, offsetof(struct gh_policy_conf, tools_allow), 0, 0, 0, 0, NULL},
		{"deny", F_LIST, offsetof(struct gh_policy_conf, tools_deny), 0, 0, 0, 0, NULL},
	};
	static const struct field cf[] = {
		{"allow", F_LIST, offsetof(struct gh_policy_conf, client_allow), 0, 0, 0, 0, NULL},
		{"deny", F_LIST, offsetof(struct gh_policy_conf, client_deny), 0, 0, 0, 0, NULL},
	};
	static const struct field af[] = {
		{"require", F_LIST, offsetof(struct gh_policy_conf, approval_require), 0, 0, 0, 0,
		 NULL},
		{"exempt", F_LIST, offsetof(struct gh_policy_conf, approval_exempt), 0, 0, 0, 0,
		 NULL},
		{"approver", F_STR, NOFIELD, 0, 0, 0, 0, NULL},
		{"ttl_seconds", F_INT, offsetof(struct gh_policy_conf, approval_ttl_s), 0, 10,
		 30 * 86400, 3600, NULL},
	};
	static const struct field rf[] = {
		{"requests_per_minute", F_INT, offsetof(struct gh_policy_conf, requests_per_minute),
		 0, 0, 100000000, 0, NULL},
		{"burst", F_INT, offsetof(struct gh_policy_conf, burst), 0, 0, 1000000, 0, NULL},
		{"tool_calls_per_minute", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"tokens_per_minute", F_INT, offsetof(struct gh_policy_conf, tokens_per_minute), 0, 0,
		 1000000000, 0, NULL},
	};
	const cJSON *sub, *it;
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), p, NULL);
	size_t n, m;

	if (rc)
		return rc;
	n = push(c, "tools");
	rc = read_fields(c, cJSON_GetObjectItemCaseSensitive(obj, "tools"), tf, GH_ARRAY_LEN(tf),
			 p, NULL);
	pop(c, n);
	if (rc)
		return rc;
	sub = cJSON_GetObjectItemCaseSensitive(obj, "client_tools");
	n = push(c, "client_tools");
	rc = read_fields(c, sub, cf, GH_ARRAY_LEN(cf), p, NULL);
	pop(c, n);
	if (rc)
		return rc;
	p->client_tools_enabled = p->client_allow.n > 0;
	sub = cJSON_GetObjectItemCaseSensitive(obj, "approval");
	n = push(c, "approval");
	p->approval_ttl_s = 3600;
	rc = read_fields(c, sub, af, GH_ARRAY_LEN(af), p, NULL);
	if (!rc && sub && gh_json_str(sub, "approver")) {
		const char *who = gh_json_str(sub, "approver");

		if (!strcmp(who, "caller")) {
			p->approver = GH_APPROVER_CALLER;
		} else if (strcmp(who, "admin")) {
			m = push(c, "approver");
			rc = fail(c, "expected \"admin\" or \"caller\", got \"%s\"", who);
			pop(c, m);
		}
	}
	pop(c, n);
	if (rc)
		return rc;
	sub = cJSON_GetObjectItemCaseSensitive(obj, "rate_limits");
	n = push(c, "rate_limits");
	rc = read_fields(c, sub, rf, GH_ARRAY_LEN(rf), p, NULL);
	if (!rc && (sub = cJSON_GetObjectItemCaseSensitive(sub, "tool_calls_per_minute"))) {
		size_t cnt = 0;

		for (it = sub->child; it; it = it->next)
			cnt++;
		p->tool_limits = calloc(cnt ? cnt : 1, sizeof(*p->tool_limits));
		if (!p->tool_limits)
			rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
		for (it = sub->child; it && !rc; it = it->next) {
			m = push(c, "tool_calls_per_minute");
			if (!gh_json_is_int(it) || it->valuedouble < 0 || it->valuedouble > 1e8)
				rc = fail(c, "%s: expected an integer in 0..100000000", it->string);
			pop(c, m);
			if (rc)
				break;
			p->tool_limits[p->ntool_limits].glob = strdup(it->string);
			p->tool_limits[p->ntool_limits].per_minute = (int64_t)it->valuedouble;
			if (!p->tool_limits[p->ntool_limits++].glob)
				rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
		}
	}
	pop(c, n);
	if (rc || (rc = read_arg_rules(c, cJSON_GetObjectItemCaseSensitive(obj, "arguments"), p)))
		return rc;
	policy_version(obj, p->version);
	return GH_OK;
}

/* Reads an object of name -> string into pairs: HTTP headers (names
 * without ':' or line breaks) or environment variables (names of
 * [A-Za-z_][A-Za-z0-9_]*). Values may hold secrets. */
static enum gh_code read_pairs(struct ctx *c, const cJSON *v, const char *key, int env,
			       struct gh_header_conf **out, size_t *nout)
{
	const cJSON *it;
	enum gh_code rc = GH_OK;
	size_t n = 0, m;

	for (it = v ? v->child : NULL; it; it = it->next)
		n++;
	if (!n)
		return GH_OK;
	*out = calloc(n, sizeof(**out));
	if (!*out)
		return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	for (it = v->child; it; it = it->next) {
		int bad_name = 0;

		if (env) {
			size_t i;

			bad_name = !*it->string || (it->string[0] >= '0' && it->string[0] <= '9');
			for (i = 0; it->string[i] && !bad_name; i++) {
				char ch = it->string[i];

				bad_name = !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
					     (ch >= '0' && ch <= '9') || ch == '_');
			}
		} else {
			bad_name = !*it->string || strpbrk(it->string, "\r\n: ") != NULL;
		}
		m = push(c, key);
		if (bad_name)
			rc = fail(c, "\"%s\": not a valid %s name", it->string,
				  env ? "environment variable" : "header");
		else if (!cJSON_IsString(it) || strpbrk(it->valuestring, "\r\n"))
			rc = fail(c, "%s: expected a string without line breaks", it->string);
		pop(c, m);
		if (rc)
			return rc;
		(*out)[*nout].name = strdup(it->string);
		(*out)[*nout].value = strdup(it->valuestring);
		(*nout)++;
		if (!(*out)[*nout - 1].name || !(*out)[*nout - 1].value)
			return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	}
	return GH_OK;
}

/* 1 when s is a prefix for exposed MCP tool names: empty, or up to 48 of
 * [A-Za-z0-9_-] starting with a letter or '_'. */
static int valid_prefix(const char *s)
{
	return !*s || valid_name(s, 48);
}

/* A stdio server's args: strings, empty ones allowed (unlike other
 * lists). */
static enum gh_code read_mcp_args(struct ctx *c, const cJSON *args,
				  struct gh_mcp_server_conf *m)
{
	const cJSON *it;
	enum gh_code rc = GH_OK;
	size_t n, k = 0;

	if (!args || cJSON_IsNull(args))
		return GH_OK;
	n = push(c, "args");
	if (!cJSON_IsArray(args)) {
		rc = fail(c, "expected an array of strings");
	} else {
		for (it = args->child; it && !rc; it = it->next)
			if (!cJSON_IsString(it))
				rc = fail(c, "item %zu: expected a string", k);
			else
				k++;
		if (!rc && !(m->args.v = calloc(k ? k : 1, sizeof(char *))))
			rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
		for (it = args->child; it && !rc; it = it->next) {
			if (!(m->args.v[m->args.n] = strdup(it->valuestring)))
				rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
			else
				m->args.n++;
		}
	}
	pop(c, n);
	return rc;
}

/* The prefix of a server without one: its name, other characters as '_',
 * then '_'. */
static enum gh_code default_prefix(struct ctx *c, struct gh_mcp_server_conf *m)
{
	size_t i, len = strlen(m->name);

	if (!(m->prefix = malloc(len + 2)))
		return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
	for (i = 0; i < len; i++) {
		char ch = m->name[i];

		m->prefix[i] = ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				(ch >= '0' && ch <= '9') || ch == '-') ? ch : '_';
	}
	m->prefix[len] = '_';
	m->prefix[len + 1] = '\0';
	return GH_OK;
}

static enum gh_code read_mcp_server(struct ctx *c, const cJSON *obj,
				    struct gh_mcp_server_conf *m)
{
	/* options every transport has; then each transport's own */
	static const struct field common[] = {
		{"transport", F_STR, NOFIELD, 1, 0, 0, 0, NULL},
		{"prefix", F_STR, offsetof(struct gh_mcp_server_conf, prefix), 0, 0, 0, 0, NULL},
		{"timeout_ms", F_INT, offsetof(struct gh_mcp_server_conf, timeout_ms), 0, 100,
		 3600000, 60000, NULL},
		{"connect_timeout_ms", F_INT,
		 offsetof(struct gh_mcp_server_conf, connect_timeout_ms), 0, 100, 600000, 20000,
		 NULL},
		{"max_concurrency", F_INT, offsetof(struct gh_mcp_server_conf, max_concurrency), 0,
		 1, 1024, 16, NULL},
		{"max_message_bytes", F_INT,
		 offsetof(struct gh_mcp_server_conf, max_message_bytes), 0, 1024, 256 << 20,
		 4 << 20, NULL},
		{"retry_base_ms", F_INT, offsetof(struct gh_mcp_server_conf, retry_base_ms), 0, 10,
		 600000, 500, NULL},
		{"retry_max_ms", F_INT, offsetof(struct gh_mcp_server_conf, retry_max_ms), 0, 10,
		 3600000, 30000, NULL},
	};
	static const struct field stdio_f[] = {
		{"command", F_STR, offsetof(struct gh_mcp_server_conf, command), 1, 0, 0, 0, NULL},
		{"args", F_LIST, NOFIELD, 0, 0, 0, 0, NULL},
		{"env", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"cwd", F_STR, offsetof(struct gh_mcp_server_conf, cwd), 0, 0, 0, 0, NULL},
		{"shutdown_grace_ms", F_INT,
		 offsetof(struct gh_mcp_server_conf, shutdown_grace_ms), 0, 10, 60000, 2000, NULL},
	};
	static const struct field http_f[] = {
		{"url", F_STR, offsetof(struct gh_mcp_server_conf, url), 1, 0, 0, 0, NULL},
		{"headers", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
	};
	static const char *const stdio_names[] = {"command", "args", "env", "cwd",
						  "shutdown_grace_ms", NULL};
	static const char *const http_names[] = {"url", "headers", NULL};
	static const char *const common_names[] = {"transport", "prefix", "timeout_ms",
						   "connect_timeout_ms", "max_concurrency",
						   "max_message_bytes", "retry_base_ms",
						   "retry_max_ms", NULL};
	const char *type = gh_json_str(obj, "transport");
	const struct field *tf;
	size_t ntf, n;
	enum gh_code rc;

	if (!cJSON_IsObject(obj))
		return fail(c, "expected an object, got %s", type_name(obj));
	if (!type || (strcmp(type, "stdio") && strcmp(type, "http"))) {
		n = push(c, "transport");
		rc = fail(c, "expected \"stdio\" (a command gatehouse starts) or \"http\" "
			     "(Streamable HTTP at a url)");
		pop(c, n);
		return rc;
	}
	m->transport = strcmp(type, "stdio") ? GH_MCP_HTTP : GH_MCP_STDIO;
	tf = m->transport == GH_MCP_STDIO ? stdio_f : http_f;
	ntf = m->transport == GH_MCP_STDIO ? GH_ARRAY_LEN(stdio_f) : GH_ARRAY_LEN(http_f);
	/* each table knows the other's names, so a stdio option on an http
	 * server is still reported as unknown by the pass that owns it */
	if ((rc = read_fields(c, obj, common, GH_ARRAY_LEN(common), m,
			      m->transport == GH_MCP_STDIO ? stdio_names : http_names)) ||
	    (rc = read_fields(c, obj, tf, ntf, m, common_names)))
		return rc;
	if (m->transport == GH_MCP_STDIO) {
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(obj, "args");

		if (!*m->command) {
			n = push(c, "command");
			rc = fail(c, "expected a command to run");
			pop(c, n);
			return rc;
		}
		if ((rc = read_mcp_args(c, args, m)))
			return rc;
		if ((rc = read_pairs(c, cJSON_GetObjectItemCaseSensitive(obj, "env"), "env", 1,
				     &m->env, &m->nenv)))
			return rc;
	} else {
		if (!is_http_url(m->url)) {
			n = push(c, "url");
			rc = fail(c, "expected an http:// or https:// URL");
			pop(c, n);
			return rc;
		}
		if ((rc = read_pairs(c, cJSON_GetObjectItemCaseSensitive(obj, "headers"), "headers",
				     0, &m->headers, &m->nheaders)))
			return rc;
	}
	if (m->retry_max_ms < m->retry_base_ms) {
		n = push(c, "retry_max_ms");
		rc = fail(c, "must be at least retry_base_ms (%lld)", (long long)m->retry_base_ms);
		pop(c, n);
		return rc;
	}
	if (!m->prefix && (rc = default_prefix(c, m)))
		return rc;
	if (!valid_prefix(m->prefix)) {
		n = push(c, "prefix");
		rc = fail(c, "expected up to 48 of [A-Za-z0-9_-], starting with a letter or '_' "
			     "(or \"\" for none)");
		pop(c, n);
		return rc;
	}
	return GH_OK;
}

static enum gh_code read_witness(struct ctx *c, const cJSON *obj, struct gh_witness_conf *w)
{
	static const struct field f[] = {
		{"enabled", F_BOOL, offsetof(struct gh_witness_conf, enabled), 0, 0, 0, 1, NULL},
		{"file", F_STR, offsetof(struct gh_witness_conf, file), 0, 0, 0, 0, NULL},
		{"webhook_url", F_STR, offsetof(struct gh_witness_conf, webhook_url), 0, 0, 0, 0,
		 NULL},
		{"webhook_timeout_ms", F_INT, offsetof(struct gh_witness_conf, webhook_timeout_ms), 0,
		 100, 60000, 5000, NULL},
		{"syslog", F_BOOL, offsetof(struct gh_witness_conf, syslog), 0, 0, 0, 0, NULL},
		{"when_behind", F_STR, NOFIELD, 0, 0, 0, 0, NULL},
	};
	size_t n = push(c, "witness"), m;
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), w, NULL);
	const cJSON *v;

	if (rc)
		goto out;
	if (w->file && !*w->file) {
		m = push(c, "file");
		rc = fail(c, "expected a path (use \"enabled\": false to run without a witness)");
		pop(c, m);
		goto out;
	}
	if (w->webhook_url && !is_http_url(w->webhook_url)) {
		m = push(c, "webhook_url");
		rc = fail(c, "expected an http:// or https:// URL");
		pop(c, m);
		goto out;
	}
	v = obj ? cJSON_GetObjectItemCaseSensitive(obj, "when_behind") : NULL;
	w->when_behind = GH_WITNESS_REFUSE;
	if (v && !cJSON_IsNull(v)) {
		if (!strcmp(v->valuestring, "read_only")) {
			w->when_behind = GH_WITNESS_READ_ONLY;
		} else if (strcmp(v->valuestring, "refuse")) {
			m = push(c, "when_behind");
			rc = fail(c, "expected \"refuse\" or \"read_only\"");
			pop(c, m);
		}
	}
out:
	pop(c, n);
	return rc;
}

static enum gh_code read_audit(struct ctx *c, const cJSON *obj, struct gh_audit_conf *a)
{
	static const struct field f[] = {
		{"redact", F_LIST, offsetof(struct gh_audit_conf, redact), 0, 0, 0, 0, NULL},
		{"checkpoint_rows", F_INT, offsetof(struct gh_audit_conf, checkpoint_rows), 0, 1,
		 10000000, 1000, NULL},
		{"checkpoint_seconds", F_INT, offsetof(struct gh_audit_conf, checkpoint_seconds), 0,
		 1, 86400, 60, NULL},
		{"retention_days", F_INT, offsetof(struct gh_audit_conf, retention_days), 0, 0, 36500,
		 0, NULL},
		{"retention_seconds", F_INT, offsetof(struct gh_audit_conf, retention_seconds), 0, 0,
		 INT32_MAX, 0, NULL},
		{"signing_key_file", F_STR, offsetof(struct gh_audit_conf, signing_key_file), 0, 0, 0,
		 0, NULL},
		{"max_args_bytes", F_INT, offsetof(struct gh_audit_conf, max_args_bytes), 0, 256,
		 1 << 20, 65536, NULL},
		{"unsigned_grace_seconds", F_INT,
		 offsetof(struct gh_audit_conf, unsigned_grace_seconds), 0, 0, 30 * 86400, 60, NULL},
		{"witness", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
	};
	static const char *const dflt[] = {"password", "secret", "token", "api_key",
					   "authorization"};
	size_t n = push(c, "audit"), i;
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), a, NULL);

	if (!rc)
		rc = read_witness(c, obj ? cJSON_GetObjectItemCaseSensitive(obj, "witness") : NULL,
				  &a->witness);
	pop(c, n);
	if (rc)
		return rc;
	if (!obj || !cJSON_GetObjectItemCaseSensitive(obj, "redact")) {
		a->redact.v = calloc(GH_ARRAY_LEN(dflt), sizeof(char *));
		if (!a->redact.v)
			return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
		for (i = 0; i < GH_ARRAY_LEN(dflt); i++) {
			if (!(a->redact.v[i] = strdup(dflt[i])))
				return gh_err_set(c->e, GH_E_NOMEM, "out of memory");
			a->redact.n = i + 1;
		}
	}
	return GH_OK;
}

static enum gh_code read_admin(struct ctx *c, const cJSON *obj, struct gh_admin_conf *a)
{
	static const struct field f[] = {
		{"session_idle_s", F_INT, offsetof(struct gh_admin_conf, session_idle_s), 0, 1,
		 86400, 1800, NULL},
		{"session_max_s", F_INT, offsetof(struct gh_admin_conf, session_max_s), 0, 1,
		 30 * 86400, 43200, NULL},
		{"login_attempts_per_minute", F_INT,
		 offsetof(struct gh_admin_conf, login_attempts_per_minute), 0, 1, 1000, 5, NULL},
		{"login_failures_per_user_per_hour", F_INT,
		 offsetof(struct gh_admin_conf, login_failures_per_user_per_hour), 0, 1, 100000, 0,
		 NULL},
	};
	size_t n = push(c, "admin");
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), a, NULL);

	/* Default: 30, or six minutes' worth of the per-address limit when
	 * that is higher. Never below the per-address limit: failures from one
	 * address must not lock a user out from everywhere. */
	if (!rc && !a->login_failures_per_user_per_hour)
		a->login_failures_per_user_per_hour = a->login_attempts_per_minute * 6 > 30
							      ? a->login_attempts_per_minute * 6 : 30;
	if (!rc && a->login_failures_per_user_per_hour < a->login_attempts_per_minute) {
		size_t m = push(c, "login_failures_per_user_per_hour");

		rc = fail(c, "%lld is below login_attempts_per_minute (%lld): it must be at least "
			     "that, so that failures from one address cannot lock a user out from "
			     "every address", (long long)a->login_failures_per_user_per_hour,
			  (long long)a->login_attempts_per_minute);
		pop(c, m);
	}
	pop(c, n);
	return rc;
}

/* 1 when host (as gh_config_listen_parse gives it) is a loopback address. */
static int loopback_host(const char *host)
{
	unsigned char a[16];

	if (inet_pton(AF_INET, host, a) == 1)
		return a[0] == 127;
	if (inet_pton(AF_INET6, host, a) == 1) {
		static const unsigned char one[16] = {[15] = 1};

		return !memcmp(a, one, 16);
	}
	return 0;
}

static enum gh_code read_metrics(struct ctx *c, const cJSON *obj, struct gh_metrics_conf *m)
{
	static const struct field f[] = {
		{"enabled", F_BOOL, offsetof(struct gh_metrics_conf, enabled), 0, 0, 0, 1, NULL},
		{"listen", F_STR, offsetof(struct gh_metrics_conf, listen), 0, 0, 0, 0, NULL},
		{"allow_remote", F_BOOL, offsetof(struct gh_metrics_conf, allow_remote), 0, 0, 0, 0,
		 NULL},
	};
	size_t n = push(c, "metrics");
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), m, NULL);

	if (!rc && m->listen) {
		char host[GH_LISTEN_HOST_MAX], why[200];
		unsigned char addr[16];
		int port, v6;
		size_t k = push(c, "listen");

		if (gh_config_listen_parse(m->listen, host, sizeof(host), &port, &v6, why,
					   sizeof(why)) != 0)
			rc = fail(c, "%s", why);
		else if (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1)
			rc = fail(c, "\"%s\": expected an IP address (127.0.0.1:9464, "
				     "[::1]:9464), not a host name", host);
		else if (!m->allow_remote && !loopback_host(host))
			rc = fail(c, "\"%s\" is not a loopback address: /metrics there answers "
				     "without authentication; set metrics.allow_remote to true to "
				     "serve it there anyway", host);
		pop(c, k);
	}
	pop(c, n);
	return rc;
}

static enum gh_code read_otel(struct ctx *c, const cJSON *obj, struct gh_otel_conf *o)
{
	static const struct field f[] = {
		{"endpoint", F_STR, offsetof(struct gh_otel_conf, endpoint), 1, 0, 0, 0, NULL},
		{"headers", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"capture_content", F_BOOL, offsetof(struct gh_otel_conf, capture_content), 0, 0, 1,
		 0, NULL},
		{"sample_ratio", F_DOUBLE, offsetof(struct gh_otel_conf, sample_ratio), 0, 0, 1, 1,
		 NULL},
		{"max_queue", F_INT, offsetof(struct gh_otel_conf, max_queue), 0, 1, 1000000, 2048,
		 NULL},
		{"max_batch", F_INT, offsetof(struct gh_otel_conf, max_batch), 0, 1, 65536, 512,
		 NULL},
		{"interval_ms", F_INT, offsetof(struct gh_otel_conf, interval_ms), 0, 10, 60000, 1000,
		 NULL},
		{"timeout_ms", F_INT, offsetof(struct gh_otel_conf, timeout_ms), 0, 100, 60000, 5000,
		 NULL},
		{"shutdown_timeout_ms", F_INT, offsetof(struct gh_otel_conf, shutdown_timeout_ms), 0,
		 0, 60000, 2000, NULL},
	};
	size_t n, m;
	enum gh_code rc;

	if (!obj)
		return GH_OK;
	n = push(c, "otel");
	o->sample_ratio = 1.0;
	rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), o, NULL);
	if (!rc && !is_http_url(o->endpoint)) {
		m = push(c, "endpoint");
		rc = fail(c, "expected an http:// or https:// URL");
		pop(c, m);
	}
	if (!rc)
		rc = read_pairs(c, cJSON_GetObjectItemCaseSensitive(obj, "headers"), "headers", 0,
				&o->headers, &o->nheaders);
	pop(c, n);
	return rc;
}

/* ---- notifications ---- */

/* A bare address "local@domain": printable ASCII without spaces or the
 * characters that would start a display name, a comment or a list. */
static int valid_mail(const char *s)
{
	const char *at = strchr(s, '@');
	const unsigned char *p;

	if (!at || at == s || !at[1] || strchr(at + 1, '@') || strlen(s) > 254)
		return 0;
	for (p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p >= 0x7f || strchr("<>()[]\\,;:\"", *p))
			return 0;
	return 1;
}

/* smtp://HOST[:PORT][/] or smtps://...: a host and nothing after it but
 * an optional '/' (curl reads a path as the HELO name). */
static int valid_smtp_url(const char *s)
{
	size_t n = !strncmp(s, "smtp://", 7) ? 7 : !strncmp(s, "smtps://", 8) ? 8 : 0;
	const char *slash;
	const unsigned char *p;

	if (!n || !s[n] || strchr("/?#@", s[n]))
		return 0;
	for (p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p == 0x7f || *p == '?' || *p == '#' || *p == '@')
			return 0;
	slash = strchr(s + n, '/');
	return !slash || !slash[1];
}

static enum gh_code read_notify_target(struct ctx *c, const cJSON *obj,
				       struct gh_notify_target_conf *t)
{
	static const struct field f[] = {
		{"kind", F_STR, NOFIELD, 1, 0, 0, 0, NULL},
		{"url", F_STR, offsetof(struct gh_notify_target_conf, url), 1, 0, 0, 0, NULL},
		{"events", F_ARR, NOFIELD, 0, 0, 0, 0, NULL},
		{"timeout_ms", F_INT, offsetof(struct gh_notify_target_conf, timeout_ms), 0, 100,
		 120000, 10000, NULL},
		{"format", F_STR, NOFIELD, 0, 0, 0, 0, NULL},
		{"secret", F_STR, offsetof(struct gh_notify_target_conf, secret), 0, 0, 0, 0, NULL},
		{"username", F_STR, offsetof(struct gh_notify_target_conf, username), 0, 0, 0, 0,
		 NULL},
		{"password", F_STR, offsetof(struct gh_notify_target_conf, password), 0, 0, 0, 0,
		 NULL},
		{"from", F_STR, offsetof(struct gh_notify_target_conf, from), 0, 0, 0, 0, NULL},
		{"to", F_LIST, offsetof(struct gh_notify_target_conf, to), 0, 0, 0, 0, NULL},
		{"starttls", F_BOOL, offsetof(struct gh_notify_target_conf, starttls), 0, 0, 0, 1,
		 NULL},
	};
	static const char *const webhook_only[] = {"format", "secret", NULL};
	static const char *const smtp_only[] = {"username", "password", "from", "to", "starttls",
						NULL};
	static const char *const event_names[] = {"approval-requested", "approval-decided",
						  "approval-expired", NULL};
	const char *const *other;
	const cJSON *v, *it;
	enum gh_code rc;
	size_t m, i;

	if ((rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), t, NULL)))
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(obj, "kind");
	m = push(c, "kind");
	if (!strcmp(v->valuestring, "webhook"))
		t->kind = GH_NOTIFY_WEBHOOK;
	else if (!strcmp(v->valuestring, "smtp"))
		t->kind = GH_NOTIFY_SMTP;
	else
		rc = fail(c, "expected \"webhook\" or \"smtp\"");
	pop(c, m);
	if (rc)
		return rc;
	/* an option of the other kind is a mistake, not something to ignore */
	other = t->kind == GH_NOTIFY_WEBHOOK ? smtp_only : webhook_only;
	for (i = 0; other[i]; i++) {
		if (!cJSON_GetObjectItemCaseSensitive(obj, other[i]))
			continue;
		m = push(c, other[i]);
		rc = fail(c, "not an option of a %s target", t->kind == GH_NOTIFY_WEBHOOK
								 ? "webhook" : "smtp");
		pop(c, m);
		return rc;
	}
	t->events = 0;
	v = cJSON_GetObjectItemCaseSensitive(obj, "events");
	m = push(c, "events");
	if (v && !cJSON_IsNull(v) && !cJSON_IsArray(v))
		rc = fail(c, "expected an array, got %s", type_name(v));
	if (!v || cJSON_IsNull(v))
		t->events = GH_NOTIFY_EV_REQUESTED | GH_NOTIFY_EV_DECIDED | GH_NOTIFY_EV_EXPIRED;
	for (it = v && !rc ? v->child : NULL, i = 0; it && !rc; it = it->next, i++) {
		size_t j;

		for (j = 0; event_names[j]; j++)
			if (cJSON_IsString(it) && !strcmp(it->valuestring, event_names[j]))
				break;
		if (!event_names[j])
			rc = fail(c, "item %zu: expected \"approval-requested\", "
				     "\"approval-decided\" or \"approval-expired\"", i);
		else
			t->events |= 1 << j;
	}
	if (!rc && !t->events)
		rc = fail(c, "expected at least one event (leave the option out for all)");
	pop(c, m);
	if (rc)
		return rc;
	m = push(c, "url");
	if (t->kind == GH_NOTIFY_WEBHOOK && !is_http_url(t->url))
		rc = fail(c, "expected an http:// or https:// URL");
	else if (t->kind == GH_NOTIFY_SMTP && !valid_smtp_url(t->url))
		rc = fail(c, "expected smtp://HOST[:PORT] or smtps://HOST[:PORT] (credentials go "
			     "in username and password)");
	pop(c, m);
	if (rc)
		return rc;
	if (t->kind == GH_NOTIFY_WEBHOOK) {
		v = cJSON_GetObjectItemCaseSensitive(obj, "format");
		t->format = GH_NOTIFY_FORMAT_JSON;
		m = push(c, "format");
		if (v && !cJSON_IsNull(v)) {
			if (!strcmp(v->valuestring, "slack"))
				t->format = GH_NOTIFY_FORMAT_SLACK;
			else if (strcmp(v->valuestring, "json"))
				rc = fail(c, "expected \"json\" or \"slack\"");
		}
		pop(c, m);
		if (rc)
			return rc;
		m = push(c, "secret");
		if (t->secret && strlen(t->secret) < 16)
			rc = fail(c, "expected at least 16 characters (take it from the environment: "
				     "\"${NAME}\")");
		else if (!t->secret && t->format == GH_NOTIFY_FORMAT_JSON)
			rc = fail(c, "required option is missing: a json webhook is signed with it");
		pop(c, m);
		return rc;
	}
	m = push(c, "from");
	if (!t->from)
		rc = fail(c, "required option is missing");
	else if (!valid_mail(t->from))
		rc = fail(c, "expected an address like gatehouse@example.com");
	pop(c, m);
	if (rc)
		return rc;
	m = push(c, "to");
	if (!t->to.n || t->to.n > 100)
		rc = fail(c, "expected 1 to 100 addresses");
	for (i = 0; !rc && i < t->to.n; i++)
		if (!valid_mail(t->to.v[i]))
			rc = fail(c, "item %zu: expected an address like reviewer@example.com", i);
	pop(c, m);
	if (rc)
		return rc;
	if (!t->username != !t->password) {
		m = push(c, t->username ? "password" : "username");
		rc = fail(c, "username and password go together");
		pop(c, m);
	}
	return rc;
}

static enum gh_code read_notifications(struct ctx *c, const cJSON *obj, struct gh_notify_conf *nc)
{
	static const struct field f[] = {
		{"targets", F_OBJ, NOFIELD, 0, 0, 0, 0, NULL},
		{"queue_max", F_INT, offsetof(struct gh_notify_conf, queue_max), 0, 1, 100000, 1000,
		 NULL},
		{"max_attempts", F_INT, offsetof(struct gh_notify_conf, max_attempts), 0, 1, 20, 6,
		 NULL},
		{"retry_base_ms", F_INT, offsetof(struct gh_notify_conf, retry_base_ms), 0, 10,
		 3600000, 20000, NULL},
		{"retry_max_ms", F_INT, offsetof(struct gh_notify_conf, retry_max_ms), 0, 10,
		 86400000, 600000, NULL},
		{"retention_days", F_INT, offsetof(struct gh_notify_conf, retention_days), 0, 0,
		 36500, 30, NULL},
		{"retention_seconds", F_INT, offsetof(struct gh_notify_conf, retention_seconds), 0,
		 0, INT32_MAX, 0, NULL},
	};
	size_t n = push(c, "notifications"), m, i;
	const cJSON *map, *it;
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), nc, NULL);

	if (rc)
		goto out;
	if (nc->retry_max_ms < nc->retry_base_ms) {
		m = push(c, "retry_max_ms");
		rc = fail(c, "%lld is below retry_base_ms (%lld)", (long long)nc->retry_max_ms,
			  (long long)nc->retry_base_ms);
		pop(c, m);
		goto out;
	}
	map = obj ? cJSON_GetObjectItemCaseSensitive(obj, "targets") : NULL;
	if (!map || cJSON_IsNull(map))
		goto out;
	m = push(c, "targets");
	for (it = map->child, i = 0; it; it = it->next)
		i++;
	nc->targets = calloc(i ? i : 1, sizeof(*nc->targets));
	if (!nc->targets) {
		rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
		pop(c, m);
		goto out;
	}
	for (it = map->child; it && !rc; it = it->next) {
		size_t p = push(c, it->string);
		struct gh_notify_target_conf *t = &nc->targets[nc->ntargets];

		if (!valid_id(it->string))
			rc = fail(c, "names may use letters, digits, '_', '-', '.' (at most 64)");
		else if (!(t->name = strdup(it->string)))
			rc = gh_err_set(c->e, GH_E_NOMEM, "out of memory");
		else
			nc->ntargets++;
		if (!rc)
			rc = read_notify_target(c, it, t);
		pop(c, p);
	}
	pop(c, m);
out:
	pop(c, n);
	return rc;
}

/* Reads each member of a name -> object map with fn into an array. */
#define READ_MAP(c, cfg, key, arr, cnt, ...)                                              \
	do {                                                                              \
		const cJSON *map_ = cJSON_GetObjectItemCaseSensitive((cfg)->root, key), *it_; \
		size_t n_ = 0, base_;                                                     \
		if (!map_)                                                                \
			break;                                                            \
		base_ = push(c, key);                                                     \
		if (!cJSON_IsObject(map_)) {                                              \
			rc = fail(c, "expected an object of name -> settings");           \
			pop(c, base_);                                                    \
			goto out;                                                         \
		}                                                                         \
		for (it_ = map_->child; it_; it_ = it_->next)                             \
			n_++;                                                             \
		(arr) = calloc(n_ ? n_ : 1, sizeof(*(arr)));                              \
		if (!(arr)) {                                                             \
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");                   \
			goto out;                                                         \
		}                                                                         \
		for (it_ = map_->child; it_; it_ = it_->next) {                           \
			size_t p_ = push(c, it_->string);                                 \
			for (size_t j_ = 0; j_ < (cnt); j_++)                             \
				if (!strcmp((arr)[j_].name_field, it_->string))           \
					rc = fail(c, "defined twice");                    \
			if (!rc && !valid_id(it_->string))                                \
				rc = fail(c, "names may use letters, digits, '_', '-', '.' (at most 64)"); \
			if (!rc && !((arr)[cnt].name_field = strdup(it_->string)))        \
				rc = gh_err_set(e, GH_E_NOMEM, "out of memory");           \
			if (!rc)                                                          \
				(cnt)++;                                                  \
			if (!rc)                                                          \
				rc = __VA_ARGS__;                                         \
			pop(c, p_);                                                       \
			if (rc) {                                                         \
				pop(c, base_);                                            \
				goto out;                                                 \
			}                                                                 \
		}                                                                         \
		pop(c, base_);                                                            \
	} while (0)

/* 1 when name may be a tool of an MCP server (discovered at run time):
 * it starts with a server's prefix (any name when a prefix is empty). */
static enum gh_code read_log(struct ctx *c, const cJSON *obj, struct gh_log_conf *l)
{
	static const struct field f[] = {
		{"format", F_STR, NOFIELD, 0, 0, 0, 0, NULL},
		{"level", F_STR, NOFIELD, 0, 0, 0, 0, NULL},
	};
	static const char *const levels[] = {"debug", "info", "warn", "error"};
	size_t n = push(c, "log");
	enum gh_code rc = read_fields(c, obj, f, GH_ARRAY_LEN(f), l, NULL);
	const char *fmt = obj && !rc ? gh_json_str(obj, "format") : NULL;
	const char *lvl = obj && !rc ? gh_json_str(obj, "level") : NULL;
	size_t i, m;

	l->level = 1; /* info */
	if (fmt && strcmp(fmt, "text")) {
		if (!strcmp(fmt, "json")) {
			l->json = 1;
		} else {
			m = push(c, "format");
			rc = fail(c, "expected \"text\" or \"json\"");
			pop(c, m);
		}
	}
	if (!rc && lvl) {
		for (i = 0; i < GH_ARRAY_LEN(levels) && strcmp(lvl, levels[i]); i++)
			;
		if (i == GH_ARRAY_LEN(levels)) {
			m = push(c, "level");
			rc = fail(c, "expected \"debug\", \"info\", \"warn\" or \"error\"");
			pop(c, m);
		} else {
			l->level = (int)i;
		}
	}
	pop(c, n);
	return rc;
}

static int mcp_prefixed(const struct gh_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < cfg->nmcp_servers; i++)
		if (!strncmp(name, cfg->mcp_servers[i].prefix, strlen(cfg->mcp_servers[i].prefix)))
			return 1;
	return 0;
}

static enum gh_code check_top(struct ctx *c, const cJSON *root)
{
	static const char *const known[] = {"server", "database", "auth", "providers", "agents",
					    "default_agent", "tools", "mcp_servers", "policies",
					    "audit", "admin", "metrics", "otel", "notifications",
					    "log", NULL};
	const cJSON *it;
	size_t i;

	if (!cJSON_IsObject(root))
		return fail(c, "expected an object at the top level");
	for (it = root->child; it; it = it->next) {
		int ok = 0;

		for (i = 0; known[i] && !ok; i++)
			ok = !strcmp(it->string, known[i]);
		if (!ok) {
			size_t n = push(c, it->string);
			enum gh_code rc = fail(c, "unknown section (known: server, database, auth, "
						  "providers, agents, default_agent, tools, "
						  "mcp_servers, policies, audit, admin, "
						  "metrics, otel, notifications, log)");
			pop(c, n);
			return rc;
		}
	}
	return GH_OK;
}

enum gh_code gh_config_parse(const char *name, const char *text, size_t len,
			     struct gh_config **out, struct gh_err *e)
{
	struct gh_config *cfg = NULL;
	struct ctx cx = {.file = name, .e = e, .path = "$"}, *c = &cx;
	char *copy = NULL;
	const cJSON *v;
	enum gh_code rc;
	struct gh_err perr;

	*out = NULL;
	copy = malloc(len + 1);
	cfg = calloc(1, sizeof(*cfg));
	if (!copy || !cfg) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	if (gh_json_strip_comments(copy, len) != 0) {
		rc = fail(c, "unterminated /* comment");
		goto out;
	}
	if (gh_json_parse_dups(copy, len, "config", &cfg->root, &perr) != GH_OK) {
		rc = gh_err_set(e, GH_E_BADREQ, "%s: %s", name, perr.msg);
		goto out;
	}
	if (!(cfg->file = strdup(name))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if ((rc = check_top(c, cfg->root)) || (rc = no_duplicates(c, cfg->root)) ||
	    (rc = subst_tree(c, cfg->root)))
		goto out;
	if ((rc = read_server(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "server"),
			      &cfg->server)))
		goto out;
	if ((rc = read_database(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "database"),
				&cfg->database, cfg->file)))
		goto out;
	{
		static const struct field f[] = {
			{"key_hash_file", F_STR, offsetof(struct gh_config, key_hash_file), 0, 0, 0,
			 0, NULL},
		};
		size_t n = push(c, "auth");

		rc = read_fields(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "auth"), f,
				 GH_ARRAY_LEN(f), cfg, NULL);
		pop(c, n);
		if (rc)
			goto out;
	}
	rc = GH_OK;
#define name_field name
	READ_MAP(c, cfg, "providers", cfg->providers, cfg->nproviders,
		 read_provider(c, it_, &cfg->providers[cfg->nproviders - 1]));
	READ_MAP(c, cfg, "tools", cfg->tools, cfg->ntools,
		 read_tool(c, it_, &cfg->tools[cfg->ntools - 1]));
	READ_MAP(c, cfg, "policies", cfg->policies, cfg->npolicies,
		 read_policy(c, it_, &cfg->policies[cfg->npolicies - 1]));
	READ_MAP(c, cfg, "mcp_servers", cfg->mcp_servers, cfg->nmcp_servers,
		 read_mcp_server(c, it_, &cfg->mcp_servers[cfg->nmcp_servers - 1]));
#undef name_field
#define name_field id
	READ_MAP(c, cfg, "agents", cfg->agents, cfg->nagents,
		 read_agent(c, cfg, it_, &cfg->agents[cfg->nagents - 1]));
#undef name_field
	if (cfg->nagents == 0) {
		size_t n = push(c, "agents");

		rc = fail(c, "at least one agent is required");
		pop(c, n);
		goto out;
	}
	/* Every tool an agent names must exist, unless it is a glob or a
	 * built-in memory tool. */
	for (size_t i = 0; i < cfg->nagents; i++) {
		const struct gh_agent_conf *a = &cfg->agents[i];

		for (size_t j = 0; j < a->tools.n; j++) {
			const char *t = a->tools.v[j];

			if (strpbrk(t, "*?") || !strncmp(t, "memory_", 7) ||
			    !strcmp(t, "working_memory_update") || gh_config_tool(cfg, t) ||
			    mcp_prefixed(cfg, t))
				continue;
			snprintf(cx.path, sizeof(cx.path), "$.agents.%s.tools[%zu]", a->id, j);
			rc = fail(c, "no tool named \"%s\" in $.tools%s", t,
				  cfg->nmcp_servers ? " (nor does it start with the prefix of an "
						      "MCP server)" : "");
			goto out;
		}
	}
	snprintf(cx.path, sizeof(cx.path), "$");
	v = cJSON_GetObjectItemCaseSensitive(cfg->root, "default_agent");
	if (v) {
		if (!cJSON_IsString(v) || !gh_config_agent(cfg, v->valuestring)) {
			snprintf(cx.path, sizeof(cx.path), "$.default_agent");
			rc = fail(c, "expected the id of an agent in $.agents");
			goto out;
		}
		cfg->default_agent = strdup(v->valuestring);
	} else {
		cfg->default_agent = strdup(cfg->agents[0].id);
	}
	if (!cfg->default_agent) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if ((rc = read_audit(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "audit"), &cfg->audit)))
		goto out;
	if ((rc = read_admin(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "admin"), &cfg->admin)))
		goto out;
	if ((rc = read_metrics(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "metrics"),
			       &cfg->metrics)))
		goto out;
	if ((rc = read_otel(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "otel"), &cfg->otel)))
		goto out;
	if ((rc = read_notifications(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "notifications"),
				     &cfg->notifications)))
		goto out;
	if ((rc = read_log(c, cJSON_GetObjectItemCaseSensitive(cfg->root, "log"), &cfg->log)))
		goto out;
	*out = cfg;
	cfg = NULL;
	rc = GH_OK;
out:
	free(copy);
	gh_config_free(cfg);
	return rc;
}

enum gh_code gh_config_load(const char *path, struct gh_config **out, struct gh_err *e)
{
	FILE *f;
	struct gh_buf b;
	char chunk[8192];
	size_t n;
	enum gh_code rc;

	*out = NULL;
	f = fopen(path, "rb");
	if (!f)
		return gh_err_set(e, GH_E_IO, "%s: cannot open: %s", path, strerror(errno));
	gh_buf_init(&b, CONFIG_MAX_BYTES);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (gh_buf_append(&b, chunk, n) != GH_BUF_OK) {
			fclose(f);
			gh_buf_free(&b);
			return gh_err_set(e, GH_E_IO, "%s: larger than %d bytes", path,
					  CONFIG_MAX_BYTES);
		}
	}
	if (ferror(f)) {
		fclose(f);
		gh_buf_free(&b);
		return gh_err_set(e, GH_E_IO, "%s: read error", path);
	}
	fclose(f);
	rc = gh_config_parse(path, b.data ? b.data : "", b.len, out, e);
	gh_buf_free(&b);
	return rc;
}

static void free_secret(char *s)
{
	if (s) {
		sodium_memzero(s, strlen(s));
		free(s);
	}
}

/* Frees n name/value pairs whose values may hold secrets. */
static void free_pairs(struct gh_header_conf *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].name);
		free_secret(v[i].value);
	}
	free(v);
}

/* The tree may hold substituted secrets: wipe every string before freeing.
 * Depth is bounded by GH_JSON_MAX_DEPTH (checked at parse). */
static void wipe_strings(cJSON *v)
{
	cJSON *it;

	if (!v)
		return;
	if (cJSON_IsString(v) && v->valuestring)
		sodium_memzero(v->valuestring, strlen(v->valuestring));
	for (it = v->child; it; it = it->next)
		wipe_strings(it);
}

static void free_provider(void *elt)
{
	struct gh_provider_conf *p = elt;

	free(p->name);
	free(p->base_url);
	free_secret(p->api_key);
	free(p->anthropic_version);
}

static void free_agent(void *elt)
{
	struct gh_agent_conf *a = elt;

	free(a->id);
	free(a->name);
	free(a->description);
	free(a->provider);
	free(a->model);
	free(a->instructions);
	free_list(&a->tools);
	free_list(&a->require_approval);
	free_list(&a->models);
}

static void free_tool(void *elt)
{
	struct gh_tool_conf *t = elt;

	free(t->name);
	free(t->description);
	cJSON_Delete(t->input_schema);
	cJSON_Delete(t->output_schema);
	cJSON_Delete(t->annotations);
	free(t->url);
	free_pairs(t->headers, t->nheaders);
}

static void free_tool_limit(void *elt)
{
	free(((struct gh_tool_limit *)elt)->glob);
}

static void free_arg_rule(void *elt)
{
	struct gh_arg_rule *r = elt;

	gh_policy_arg_rule_free(r);
	free(r->name);
	free(r->tool);
	free(r->pointer);
	free(r->regex);
	free(r->glob);
}

/* Frees the n elements of arr (size bytes each) with free_elt, then arr. */
static void free_array(void *arr, size_t n, size_t size, void (*free_elt)(void *elt))
{
	size_t i;

	for (i = 0; i < n; i++)
		free_elt((char *)arr + i * size);
	free(arr);
}

static void free_policy(void *elt)
{
	struct gh_policy_conf *p = elt;

	free(p->name);
	free_list(&p->agents);
	free_list(&p->tools_allow);
	free_list(&p->tools_deny);
	free_list(&p->client_allow);
	free_list(&p->client_deny);
	free_list(&p->approval_require);
	free_list(&p->approval_exempt);
	free_array(p->tool_limits, p->ntool_limits, sizeof(*p->tool_limits), free_tool_limit);
	free_array(p->arg_rules, p->narg_rules, sizeof(*p->arg_rules), free_arg_rule);
}

static void free_notify_target(void *elt)
{
	struct gh_notify_target_conf *t = elt;

	free(t->name);
	free_secret(t->url);
	free_secret(t->secret);
	free(t->username);
	free_secret(t->password);
	free(t->from);
	free_list(&t->to);
}

static void free_mcp_server(void *elt)
{
	struct gh_mcp_server_conf *m = elt;

	free(m->name);
	free(m->prefix);
	free(m->command);
	free_list(&m->args);
	free_pairs(m->env, m->nenv);
	free(m->cwd);
	free(m->url);
	free_pairs(m->headers, m->nheaders);
}

void gh_config_free(struct gh_config *c)
{
	if (!c)
		return;
	free(c->server.listen);
	free(c->server.public_url);
	free(c->database.path);
	free_secret(c->database.url);
	free(c->key_hash_file);
	free_array(c->providers, c->nproviders, sizeof(*c->providers), free_provider);
	free_array(c->agents, c->nagents, sizeof(*c->agents), free_agent);
	free(c->default_agent);
	free_array(c->tools, c->ntools, sizeof(*c->tools), free_tool);
	free_array(c->policies, c->npolicies, sizeof(*c->policies), free_policy);
	free_array(c->mcp_servers, c->nmcp_servers, sizeof(*c->mcp_servers), free_mcp_server);
	free_list(&c->audit.redact);
	free(c->audit.signing_key_file);
	free(c->audit.witness.file);
	free(c->audit.witness.webhook_url);
	free(c->metrics.listen);
	free(c->otel.endpoint);
	free_pairs(c->otel.headers, c->otel.nheaders);
	free_array(c->notifications.targets, c->notifications.ntargets,
		   sizeof(*c->notifications.targets), free_notify_target);
	wipe_strings(c->root);
	cJSON_Delete(c->root);
	free(c->file);
	free(c);
}

/* The element of arr (n elements of size bytes each, each starting with
 * its char * name) named name, or NULL. */
static const void *find_named(const void *arr, size_t n, size_t size, const char *name)
{
	const char *p = arr;
	size_t i;

	for (i = 0; name && i < n; i++, p += size) {
		const char *const *elt_name = (const char *const *)(const void *)p;

		if (*elt_name && !strcmp(*elt_name, name))
			return p;
	}
	return NULL;
}

_Static_assert(offsetof(struct gh_agent_conf, id) == 0, "an agent starts with its id");
_Static_assert(offsetof(struct gh_provider_conf, name) == 0, "a provider starts with its name");
_Static_assert(offsetof(struct gh_tool_conf, name) == 0, "a tool starts with its name");
_Static_assert(offsetof(struct gh_policy_conf, name) == 0, "a policy starts with its name");
_Static_assert(offsetof(struct gh_mcp_server_conf, name) == 0, "a server starts with its name");

const struct gh_agent_conf *gh_config_agent(const struct gh_config *c, const char *id)
{
	return find_named(c->agents, c->nagents, sizeof(*c->agents), id);
}

const struct gh_provider_conf *gh_config_provider(const struct gh_config *c, const char *name)
{
	return find_named(c->providers, c->nproviders, sizeof(*c->providers), name);
}

const struct gh_tool_conf *gh_config_tool(const struct gh_config *c, const char *name)
{
	return find_named(c->tools, c->ntools, sizeof(*c->tools), name);
}

const struct gh_policy_conf *gh_config_policy(const struct gh_config *c, const char *name)
{
	return find_named(c->policies, c->npolicies, sizeof(*c->policies), name);
}

const struct gh_mcp_server_conf *gh_config_mcp_server(const struct gh_config *c,
						      const char *name)
{
	return find_named(c->mcp_servers, c->nmcp_servers, sizeof(*c->mcp_servers), name);
}

int gh_strlist_match(const struct gh_strlist *l, const char *s)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (gh_glob_match(l->v[i], s))
			return 1;
	return 0;
}
