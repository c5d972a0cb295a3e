/*
 * mcp.c - upstream MCP servers: supervisors, catalogs, pinning and calls;
 * see mcp.h.
 *
 * Threading: one supervisor thread per upstream owns its connection's
 * life (open, handshake, list, pin, publish, close, reconnect) and answers
 * the server's own requests. Calls run on the callers' threads with a
 * reference to the connection current when they started. Each upstream's
 * state is guarded by its mutex (u->mu) and its supervisor sleeps on its
 * condition variable; publishing a catalog also takes the manager's mutex
 * (m->mu, always before any u->mu) so name collisions between upstreams
 * are decided one publication at a time. Store writes (pins, audit rows)
 * happen on supervisors and in gh_mcp_decide, never under a mutex.
 */
#include "mcp.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "json.h"
#include "log.h"
#include "otel.h"
#include "mcp_int.h"
#include "store_mcp.h"
#include "tools.h"
#include "upstream.h"
#include "util.h"

#define MAX_PAGES 100           /* tools/list pages read per listing */
#define MAX_TOOLS 2000          /* tools kept per upstream */
#define PIN_RECHECK_MS 2000     /* a held tool's pin is read again this often */
#define IDLE_WAKE_MS 5000       /* a supervisor looks around at least this often */
#define MAX_SERVER_REQUESTS 64  /* the server's own requests waiting for an answer */
#define NOTIFY_TIMEOUT_MS 2000
#define STABLE_MS 5000          /* a connection older than this reconnects at once */

enum ustate { U_CONNECTING, U_CONNECTED, U_FAILING, U_STOPPED };

static const char *const state_names[] = {"connecting", "connected", "failing", "stopped"};

struct catalog {
	_Atomic int refs;
	size_t n;
	struct gh_mcp_tool **v;
};

struct srv_req {
	struct mcp_conn *conn;          /* referenced */
	cJSON *id;                      /* the server's request id */
	char method[128];
	struct srv_req *next;
};

struct mcp_upstream {
	struct gh_mcp *m;
	const struct gh_mcp_server_conf *conf;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* CLOCK_MONOTONIC */
	/* under mu */
	enum ustate state;
	char last_error[512];
	int64_t next_retry_ms;          /* wall clock; 0 = none */
	int64_t connected_at;
	int failures;
	struct mcp_conn *conn;          /* current, referenced; NULL when none */
	uint64_t conn_gen;              /* connections made so far */
	struct gh_mcp_init init;
	struct catalog *cat;            /* current tools, referenced */
	cJSON *raw_tools;               /* the last tools/list, for republishing */
	int list_changed, pins_changed, first_done;
	struct srv_req *reqs;
	int nreqs;
	int inflight;
	int64_t calls, call_errors;
	/* any thread */
	_Atomic int64_t next_id;
};

struct gh_mcp {
	const struct gh_config *cfg;
	struct gh_store *store;
	struct mcp_upstream *ups;
	size_t n;
	pthread_mutex_t mu;             /* publication (collision checks) */
	_Atomic int stopping;
};

/* --------------------------------------------------------------- tools */

void gh_mcp_tool_ref(struct gh_mcp_tool *t)
{
	atomic_fetch_add(&t->refs, 1);
}

void gh_mcp_tool_unref(struct gh_mcp_tool *t)
{
	if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	gh_mcp_tool_def_clear(&t->def);
	free(t);
}

static void catalog_unref(struct catalog *c)
{
	size_t i;

	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	for (i = 0; i < c->n; i++)
		gh_mcp_tool_unref(c->v[i]);
	free(c->v);
	free(c);
}

/* The upstream's current catalog, referenced (never NULL once started). */
static struct catalog *catalog_get(struct mcp_upstream *u)
{
	struct catalog *c;

	pthread_mutex_lock(&u->mu);
	c = u->cat;
	if (c)
		atomic_fetch_add(&c->refs, 1);
	pthread_mutex_unlock(&u->mu);
	return c;
}

const char *gh_mcp_hint_text(enum gh_mcp_hint h)
{
	switch (h) {
	case GH_MCP_HINT_READONLY: return "not required (readOnlyHint true)";
	case GH_MCP_HINT_NOT_DESTRUCTIVE: return "not required (destructiveHint false)";
	case GH_MCP_HINT_DESTRUCTIVE: return "required (destructiveHint true)";
	case GH_MCP_HINT_DEFAULT: break;
	}
	return "required (no destructiveHint: destructive by default)";
}

/* ------------------------------------------------------------- helpers */

static void lock_wait(struct mcp_upstream *u, int64_t ms)
{
	struct timespec ts;

	gh_deadline(CLOCK_MONOTONIC, ms, &ts);
	pthread_cond_timedwait(&u->cv, &u->mu, &ts);
}

/* The caller's tick (its client went away?) with u->mu released meanwhile
 * (u->mu held on entry and on return). 1 to stop waiting. */
static int tick_unlocked(struct mcp_upstream *u, const struct gh_mcp_call_opts *o)
{
	int stop;

	if (!o || !o->tick)
		return 0;
	pthread_mutex_unlock(&u->mu);
	stop = o->tick(o->ud);
	pthread_mutex_lock(&u->mu);
	return stop;
}

/* Records the upstream's state for `gatehouse mcp list`. Under u->mu. */
static void persist(struct mcp_upstream *u)
{
	struct gh_mcp_server_row r;

	memset(&r, 0, sizeof(r));
	gh_strlcpy(r.name, u->conf->name, sizeof(r.name));
	gh_strlcpy(r.transport, u->conf->transport == GH_MCP_STDIO ? "stdio" : "http",
		   sizeof(r.transport));
	gh_strlcpy(r.state, state_names[u->state], sizeof(r.state));
	gh_strlcpy(r.last_error, u->state == U_CONNECTED ? "" : u->last_error,
		   sizeof(r.last_error));
	r.next_retry_at = u->state == U_FAILING ? u->next_retry_ms : 0;
	if (u->conn)
		gh_strlcpy(r.session, u->conn->session, sizeof(r.session));
	gh_strlcpy(r.protocol_version, u->state == U_CONNECTED ? u->init.version : "",
		   sizeof(r.protocol_version));
	if (u->init.server_name[0])
		snprintf(r.server_info, sizeof(r.server_info), "%.120s %.60s", u->init.server_name,
			 u->init.server_version);
	r.tools = u->cat ? (int64_t)u->cat->n : 0;
	r.connected_at = u->connected_at;
	r.updated_at = gh_now_ms();
	gh_store_mcp_server_put(u->m->store, &r);
}

static void set_state(struct mcp_upstream *u, enum ustate s, const char *err)
{
	pthread_mutex_lock(&u->mu);
	u->state = s;
	if (err)
		gh_strlcpy(u->last_error, err, sizeof(u->last_error));
	if (s == U_CONNECTED) {
		u->connected_at = gh_now_ms();
		u->next_retry_ms = 0;
	}
	persist(u);
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
}

static cJSON *tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A tool error the model sees: MCP's shape, plus "error" for the audit row. */
static cJSON *tool_error(const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	cJSON *r, *c, *b;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r = cJSON_CreateObject();
	c = cJSON_CreateArray();
	b = cJSON_CreateObject();
	if (!r || !c || !b) {
		cJSON_Delete(r);
		cJSON_Delete(c);
		cJSON_Delete(b);
		return NULL;
	}
	cJSON_AddStringToObject(r, "error", msg);
	cJSON_AddStringToObject(b, "type", "text");
	cJSON_AddStringToObject(b, "text", msg);
	cJSON_AddItemToArray(c, b);
	cJSON_AddItemToObject(r, "content", c);
	cJSON_AddBoolToObject(r, "isError", 1);
	return r;
}

/* ------------------------------------------------------------- pinning */

/* The audit row of a pin event: by the system (who NULL) or an admin.
 * detail gets {server, tool, digest, previous_digest?, via?, by?}. */
static void pin_event(struct gh_audit_event *ev, char **detail, const char *event,
		      const char *exposed, const char *server, const char *tool, const char *digest,
		      const char *previous, const struct gh_mcp_actor *who)
{
	cJSON *d = cJSON_CreateObject();

	memset(ev, 0, sizeof(*ev));
	ev->event = event;
	ev->admin_user = who ? who->admin_user : "system";
	ev->key_id = who ? who->key_id : NULL;
	ev->source = who ? "admin" : "system";
	ev->tool_name = exposed && *exposed ? exposed : NULL;
	ev->outcome = "ok";
	ev->duration_ms = -1;
	if (d) {
		cJSON_AddStringToObject(d, "server", server);
		cJSON_AddStringToObject(d, "tool", tool);
		if (digest)
			cJSON_AddStringToObject(d, "digest", digest);
		if (previous && *previous)
			cJSON_AddStringToObject(d, "previous_digest", previous);
		if (who && who->via)
			cJSON_AddStringToObject(d, "via", who->via);
		if (who && who->by)
			cJSON_AddStringToObject(d, "by", who->by);
	}
	*detail = d ? gh_json_dump(d) : NULL;
	ev->detail = *detail;
	cJSON_Delete(d);
}

/* Checks t's definition against its pin (pinning it at first sight) and
 * sets t->pin and t->blocked. Runs on the supervisor. */
static void check_pin(struct mcp_upstream *u, struct gh_mcp_tool *t)
{
	struct gh_store *s = u->m->store;
	struct gh_mcp_pin p;
	struct gh_audit_event ev;
	struct gh_err e;
	char *detail = NULL, *def = NULL;
	enum gh_code rc;
	int tries;

	for (tries = 0; tries < 3; tries++) {
		rc = gh_store_mcp_pin_get(s, u->conf->name, t->upstream_name, &p, &e);
		if (rc == GH_E_NOTFOUND) {
			if (!def && !(def = gh_json_dump(t->def.def)))
				break;
			pin_event(&ev, &detail, "mcp_tool_pinned", t->name, u->conf->name,
				  t->upstream_name, t->def.digest, NULL, NULL);
			rc = gh_store_mcp_pin_insert(s, u->conf->name, t->upstream_name,
						     t->def.digest, def, &ev, &e);
			free(detail);
			detail = NULL;
			if (rc == GH_E_CONFLICT)
				continue;
			if (rc == GH_OK) {
				gh_info("mcp %s: pinned tool %s (%.12s…)", u->conf->name, t->name,
					t->def.digest);
				gh_strlcpy(t->pin, "pinned", sizeof(t->pin));
				free(def);
				return;
			}
			break;
		}
		if (rc != GH_OK)
			break;
		if (!strcmp(p.digest, t->def.digest)) {
			if (p.pending_digest[0]) {
				/* the upstream went back to the accepted definition */
				gh_info("mcp %s: tool %s offers its pinned definition again",
					u->conf->name, t->name);
				gh_store_mcp_pin_unhold(s, u->conf->name, t->upstream_name, &e);
			}
			gh_strlcpy(t->pin, "pinned", sizeof(t->pin));
			gh_mcp_pin_clear(&p);
			free(def);
			return;
		}
		if (strcmp(p.pending_digest, t->def.digest)) {
			if (!def && !(def = gh_json_dump(t->def.def))) {
				gh_mcp_pin_clear(&p);
				break;
			}
			pin_event(&ev, &detail, "mcp_tool_changed", t->name, u->conf->name,
				  t->upstream_name, t->def.digest, p.digest, NULL);
			rc = gh_store_mcp_pin_hold(s, u->conf->name, t->upstream_name, p.digest,
						   t->def.digest, def, &ev, &e);
			free(detail);
			detail = NULL;
			if (rc == GH_E_CONFLICT) {
				gh_mcp_pin_clear(&p);
				continue;
			}
			if (rc != GH_OK) {
				gh_mcp_pin_clear(&p);
				break;
			}
			gh_warn("mcp %s: tool %s changed its definition (%.12s… pinned, %.12s… "
				"offered): held until an admin accepts it", u->conf->name, t->name,
				p.digest, t->def.digest);
			gh_strlcpy(p.pending_status, "held", sizeof(p.pending_status));
		}
		if (!strcmp(p.pending_status, "rejected"))
			snprintf(t->blocked, sizeof(t->blocked),
				 "its definition changed since it was pinned (%.12s… pinned, "
				 "%.12s… offered) and %s rejected the change", p.digest,
				 t->def.digest, p.rejected_by[0] ? p.rejected_by : "an admin");
		else
			snprintf(t->blocked, sizeof(t->blocked),
				 "its definition changed since it was pinned (%.12s… pinned, "
				 "%.12s… offered): held until an admin accepts it (gatehouse mcp "
				 "accept, or the admin UI's MCP servers page)", p.digest,
				 t->def.digest);
		gh_strlcpy(t->pin, p.pending_status[0] ? p.pending_status : "held", sizeof(t->pin));
		gh_mcp_pin_clear(&p);
		free(def);
		return;
	}
	/* the store failed: fail closed */
	free(def);
	gh_warn("mcp %s: the pin of tool %s could not be checked: %s", u->conf->name, t->name,
		e.msg);
	snprintf(t->blocked, sizeof(t->blocked), "its pinned definition could not be checked: %.400s",
		 e.msg);
	gh_strlcpy(t->pin, "none", sizeof(t->pin));
}

/* The state of a pinned definition, from its pin (an upstream not
 * connected: nothing is observed). */
static void pin_from_store(struct mcp_upstream *u, struct gh_mcp_tool *t)
{
	struct gh_mcp_pin p;
	struct gh_err e;

	if (gh_store_mcp_pin_get(u->m->store, u->conf->name, t->upstream_name, &p, &e) != GH_OK) {
		snprintf(t->blocked, sizeof(t->blocked),
			 "its pinned definition could not be read: %.400s", e.msg);
		return;
	}
	if (p.pending_status[0]) {
		gh_strlcpy(t->pin, p.pending_status, sizeof(t->pin));
		snprintf(t->blocked, sizeof(t->blocked),
			 "its definition changed since it was pinned (%.12s… pinned, %.12s… "
			 "offered when last connected): %s", p.digest, p.pending_digest,
			 strcmp(p.pending_status, "rejected") ? "held until an admin accepts it"
							       : "the change was rejected");
	} else {
		gh_strlcpy(t->pin, "pinned", sizeof(t->pin));
	}
	gh_mcp_pin_clear(&p);
}

/* ---------------------------------------------------------- publishing */

static int is_memory_tool(const char *name)
{
	size_t i;

	for (i = 0; gh_memory_tool_names[i]; i++)
		if (!strcmp(gh_memory_tool_names[i], name))
			return 1;
	return 0;
}

/* Blocks t when its name is another tool's: a configured (HTTP) or memory tool,
 * or an offered tool of another upstream (published earlier). Under
 * m->mu. */
static void check_collision(struct gh_mcp *m, struct mcp_upstream *u, struct gh_mcp_tool *t)
{
	size_t i, j;

	if (t->blocked[0] || !t->name[0])
		return;
	if (gh_config_tool(m->cfg, t->name) || is_memory_tool(t->name)) {
		snprintf(t->blocked, sizeof(t->blocked),
			 "name collision: tool \"%s\" of MCP server %s and %s tool \"%s\" both "
			 "resolve to \"%s\"", t->upstream_name, u->conf->name,
			 is_memory_tool(t->name) ? "memory" : "HTTP", t->name, t->name);
		t->collision = 1;
		return;
	}
	for (i = 0; i < m->n; i++) {
		struct mcp_upstream *o = &m->ups[i];
		struct catalog *c;

		if (o == u)
			continue;
		c = catalog_get(o);
		for (j = 0; c && j < c->n; j++) {
			const struct gh_mcp_tool *x = c->v[j];

			if (x->blocked[0] || strcmp(x->name, t->name))
				continue;
			snprintf(t->blocked, sizeof(t->blocked),
				 "name collision: tool \"%s\" of MCP server %s and tool \"%s\" of "
				 "MCP server %s both resolve to \"%s\"", t->upstream_name,
				 u->conf->name, x->upstream_name, o->conf->name, t->name);
			t->collision = 1;
			break;
		}
		catalog_unref(c);
		if (t->blocked[0])
			return;
	}
}

/* A tool from one element of tools/list (or a stored definition). NULL
 * on OOM. */
static struct gh_mcp_tool *make_tool(struct mcp_upstream *u, const cJSON *raw, size_t idx)
{
	struct gh_mcp_tool *t = calloc(1, sizeof(*t));
	struct gh_err e;
	char why[160];
	const char *rawname = gh_json_str(raw, "name");

	if (!t)
		return NULL;
	atomic_init(&t->refs, 1);
	t->server = u->conf->name;
	t->up = u;
	gh_strlcpy(t->pin, "none", sizeof(t->pin));
	if (gh_mcp_tool_def_parse(raw, &t->def, &e) != GH_OK) {
		if (rawname && *rawname)
			mcp_log_safe(rawname, strlen(rawname), t->upstream_name,
				     sizeof(t->upstream_name));
		else
			snprintf(t->upstream_name, sizeof(t->upstream_name), "(tool #%zu)", idx + 1);
		snprintf(t->blocked, sizeof(t->blocked),
			 "the upstream's definition is refused: %.400s", e.msg);
		if (rawname && *rawname)
			gh_mcp_expose_name(u->conf->prefix, t->upstream_name, t->name, NULL, 0);
		return t;
	}
	gh_strlcpy(t->upstream_name, t->def.name, sizeof(t->upstream_name));
	if (gh_mcp_expose_name(u->conf->prefix, t->def.name, t->name, why, sizeof(why)) != 0)
		snprintf(t->blocked, sizeof(t->blocked), "its name cannot be exposed: %s", why);
	return t;
}

/* Builds a catalog from raw (tools/list's tools when offered, else the
 * pinned definitions of an upstream not connected yet; NULL: none), pins
 * what is new, and makes it the upstream's current one. Runs on the
 * supervisor. */
static void pin_from_store(struct mcp_upstream *u, struct gh_mcp_tool *t);

static void publish(struct mcp_upstream *u, const cJSON *raw, int offered)
{
	struct gh_mcp *m = u->m;
	struct catalog *c = calloc(1, sizeof(*c)), *old;
	const cJSON *it;
	size_t cap, i, j;
	cJSON *stored = NULL;

	if (!c)
		return;
	atomic_init(&c->refs, 1);
	if (!raw) {
		if (!(stored = cJSON_CreateArray()))
			goto oom;
		raw = stored;
	}
	cap = (size_t)cJSON_GetArraySize(raw);
	if (cap > MAX_TOOLS)
		cap = MAX_TOOLS;
	c->v = calloc(cap ? cap : 1, sizeof(*c->v));
	if (!c->v)
		goto oom;
	i = 0;
	cJSON_ArrayForEach(it, raw) {
		struct gh_mcp_tool *t;

		if (c->n >= cap)
			break;
		if (!(t = make_tool(u, it, i++)))
			goto oom;
		c->v[c->n++] = t;
	}
	/* two tools of this upstream with one exposed name: neither is offered */
	for (i = 0; i < c->n; i++) {
		for (j = i + 1; j < c->n; j++) {
			struct gh_mcp_tool *a = c->v[i], *b = c->v[j];

			if (!a->name[0] || strcmp(a->name, b->name))
				continue;
			snprintf(b->blocked, sizeof(b->blocked),
				 "name collision: tools \"%s\" and \"%s\" of MCP server %s both "
				 "resolve to \"%s\"", a->upstream_name, b->upstream_name,
				 u->conf->name, a->name);
			if (!a->blocked[0])
				gh_strlcpy(a->blocked, b->blocked, sizeof(a->blocked));
			a->collision = b->collision = 1;
		}
	}
	/* what the upstream offers is checked against its pins (and pinned
	 * when new); the pinned definitions themselves only say their state */
	for (i = 0; i < c->n; i++) {
		if (!c->v[i]->def.def || c->v[i]->collision)
			continue;
		if (offered)
			check_pin(u, c->v[i]);
		else
			pin_from_store(u, c->v[i]);
	}
	pthread_mutex_lock(&m->mu);
	for (i = 0; i < c->n; i++) {
		check_collision(m, u, c->v[i]);
		if (c->v[i]->blocked[0] && (c->v[i]->collision || !c->v[i]->def.def))
			gh_error("mcp %s: tool %s is not offered: %s", u->conf->name,
				 c->v[i]->upstream_name, c->v[i]->blocked);
	}
	pthread_mutex_lock(&u->mu);
	old = u->cat;
	u->cat = c;
	persist(u);
	pthread_mutex_unlock(&u->mu);
	pthread_mutex_unlock(&m->mu);
	catalog_unref(old);
	cJSON_Delete(stored);
	return;
oom:
	gh_error("mcp %s: out of memory publishing its tools", u->conf->name);
	catalog_unref(c);
	cJSON_Delete(stored);
}

static int collect_pin(void *ud, const struct gh_mcp_pin *p)
{
	cJSON *arr = ud, *def = gh_json_parse_stored(p->definition);

	if (def)
		cJSON_AddItemToArray(arr, def);
	return cJSON_GetArraySize(arr) >= MAX_TOOLS;
}

/* The catalog of an upstream that has not connected yet: its pinned
 * definitions, so calls to its tools hear that it is unavailable. */
static void publish_pinned(struct mcp_upstream *u)
{
	cJSON *arr = cJSON_CreateArray();
	struct gh_err e;

	if (!arr)
		return;
	if (gh_store_mcp_pin_list(u->m->store, u->conf->name, collect_pin, arr, &e) != GH_OK)
		gh_warn("mcp %s: its pinned tools could not be read: %s", u->conf->name, e.msg);
	publish(u, arr, 0);
	cJSON_Delete(arr);
}

/* ------------------------------------------------------------- events */

static void ev_notify(void *ud, const struct gh_mcp_msg *msg)
{
	struct mcp_upstream *u = ud;

	if (!strcmp(msg->method, "notifications/tools/list_changed")) {
		pthread_mutex_lock(&u->mu);
		u->list_changed = 1;
		pthread_cond_broadcast(&u->cv);
		pthread_mutex_unlock(&u->mu);
	} else if (!strcmp(msg->method, "notifications/message")) {
		const char *lvl = gh_json_str(msg->params, "level");
		char *data = gh_json_dump(cJSON_GetObjectItemCaseSensitive(msg->params, "data"));
		char line[512];

		mcp_log_safe(data ? data : "", data ? strlen(data) : 0, line, sizeof(line));
		gh_debug("mcp %s: log %s: %s", u->conf->name, lvl ? lvl : "?", line);
		free(data);
	}
}

static void ev_request(void *ud, const struct gh_mcp_msg *msg)
{
	struct mcp_upstream *u = ud;
	struct srv_req *r;

	pthread_mutex_lock(&u->mu);
	if (u->nreqs >= MAX_SERVER_REQUESTS || !u->conn) {
		pthread_mutex_unlock(&u->mu);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (r && (r->id = cJSON_Duplicate(msg->req_id, 1))) {
		gh_strlcpy(r->method, msg->method, sizeof(r->method));
		r->conn = u->conn;
		mcp_conn_ref(r->conn);
		r->next = u->reqs;
		u->reqs = r;
		u->nreqs++;
		pthread_cond_broadcast(&u->cv);
	} else {
		free(r);
	}
	pthread_mutex_unlock(&u->mu);
}

/* The connection died (its reason is in it): the supervisor wakes. */
static void ev_closed(void *ud, const char *why)
{
	struct mcp_upstream *u = ud;

	(void)why;
	pthread_mutex_lock(&u->mu);
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
}

/* Answers the server's own requests: ping, and a refusal for anything
 * else (gatehouse declares no client capabilities). */
static void answer_requests(struct mcp_upstream *u)
{
	struct srv_req *r;

	for (;;) {
		struct gh_buf b;
		struct gh_err e;
		int ok;

		pthread_mutex_lock(&u->mu);
		r = u->reqs;
		if (r) {
			u->reqs = r->next;
			u->nreqs--;
		}
		pthread_mutex_unlock(&u->mu);
		if (!r)
			return;
		gh_buf_init(&b, 64 << 10);
		if (!strcmp(r->method, "ping")) {
			ok = gh_mcp_build_result(&b, r->id, NULL) == GH_BUF_OK;
		} else {
			char msg[200];

			snprintf(msg, sizeof(msg), "gatehouse does not offer %s", r->method);
			ok = gh_mcp_build_error(&b, r->id, GH_JSONRPC_METHOD_NOT_FOUND, msg) ==
			     GH_BUF_OK;
		}
		if (ok && r->conn->ops->respond(r->conn, b.data, b.len, &e) != GH_OK)
			gh_debug("mcp %s: answering its %s failed: %s", u->conf->name, r->method,
				 e.msg);
		gh_buf_free(&b);
		mcp_conn_unref(r->conn);
		cJSON_Delete(r->id);
		free(r);
	}
}

/* ---------------------------------------------------------- connecting */

static enum gh_code request(struct mcp_upstream *u, struct mcp_conn *c, const char *method,
			    const cJSON *params, int64_t timeout_ms, struct gh_mcp_msg *reply,
			    struct gh_err *e)
{
	struct mcp_req_opts o;
	enum gh_code rc;

	memset(&o, 0, sizeof(o));
	o.timeout_ms = timeout_ms;
	rc = c->ops->request(c, atomic_fetch_add(&u->next_id, 1), method, params, &o, reply, e);
	if (rc == GH_OK && reply->kind == GH_MCP_ERROR) {
		char msg[256];

		mcp_log_safe(reply->error, strlen(reply->error), msg, sizeof(msg));
		rc = gh_err_set(e, GH_E_UPSTREAM, "%s refused: %lld %s", method,
				(long long)reply->error_code, msg);
		gh_mcp_msg_clear(reply);
	}
	return rc;
}

/* Every page of tools/list into *out (an array of raw tools). */
static enum gh_code list_tools(struct mcp_upstream *u, struct mcp_conn *c, cJSON **out,
			       struct gh_err *e)
{
	cJSON *all = cJSON_CreateArray(), *params = NULL;
	char *cursor = NULL;
	enum gh_code rc = GH_OK;
	int page;

	*out = NULL;
	if (!all)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	for (page = 0; page < MAX_PAGES; page++) {
		struct gh_mcp_msg reply;
		const cJSON *tools, *it;
		const char *next;

		params = NULL;
		if (cursor) {
			params = cJSON_CreateObject();
			if (!params || !cJSON_AddStringToObject(params, "cursor", cursor)) {
				rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
				break;
			}
		}
		rc = request(u, c, "tools/list", params, u->conf->connect_timeout_ms, &reply, e);
		cJSON_Delete(params);
		params = NULL;
		if (rc != GH_OK)
			break;
		rc = gh_mcp_parse_tools_page(reply.result, &tools, &next, e);
		if (rc == GH_OK) {
			cJSON_ArrayForEach(it, tools) {
				if (cJSON_GetArraySize(all) >= MAX_TOOLS)
					break;
				cJSON_AddItemToArray(all, cJSON_Duplicate(it, 1));
			}
			free(cursor);
			cursor = next ? strdup(next) : NULL;
		}
		gh_mcp_msg_clear(&reply);
		if (rc != GH_OK || !cursor)
			break;
	}
	free(cursor);
	if (rc == GH_OK && page == MAX_PAGES)
		gh_warn("mcp %s: tools/list has more than %d pages; the rest is ignored",
			u->conf->name, MAX_PAGES);
	if (rc != GH_OK) {
		cJSON_Delete(all);
		return rc;
	}
	*out = all;
	return GH_OK;
}

/* Opens a connection, shakes hands and lists the tools; on success the
 * connection is the upstream's current one. */
static enum gh_code connect_once(struct mcp_upstream *u, struct gh_err *e)
{
	struct mcp_events ev = {ev_notify, ev_request, ev_closed, u};
	struct mcp_conn *c = NULL;
	struct gh_mcp_msg reply;
	struct gh_mcp_init init;
	cJSON *params = NULL, *tools = NULL;
	enum gh_code rc;
	char why[256];

	rc = u->conf->transport == GH_MCP_STDIO ? mcp_stdio_open(u->conf, &ev, &c, e)
						: mcp_http_open(u->conf, &ev, &c, e);
	if (rc != GH_OK)
		return rc;
	if (!(params = gh_mcp_initialize_params(GH_MCP_PROTO_LATEST))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	rc = request(u, c, "initialize", params, u->conf->connect_timeout_ms, &reply, e);
	cJSON_Delete(params);
	if (rc != GH_OK)
		goto fail;
	rc = gh_mcp_parse_init(reply.result, &init, e);
	gh_mcp_msg_clear(&reply);
	if (rc != GH_OK)
		goto fail;
	c->ops->agreed(c, init.version);
	if ((rc = c->ops->notify(c, "notifications/initialized", NULL, u->conf->connect_timeout_ms,
				 e)) != GH_OK)
		goto fail;
	c->ops->listen(c);
	if (init.has_tools) {
		if ((rc = list_tools(u, c, &tools, e)) != GH_OK)
			goto fail;
	} else if (!(tools = cJSON_CreateArray())) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	pthread_mutex_lock(&u->mu);
	c->gen = ++u->conn_gen;
	u->conn = c;
	u->init = init;
	cJSON_Delete(u->raw_tools);
	u->raw_tools = tools;
	u->list_changed = 0;
	pthread_mutex_unlock(&u->mu);
	gh_info("mcp %s: connected (%s, protocol %s, %s %s), %d tools", u->conf->name,
		c->session, init.version, init.server_name[0] ? init.server_name : "?",
		init.server_version, cJSON_GetArraySize(tools));
	publish(u, tools, 1);
	return GH_OK;
fail:
	why[0] = '\0';
	c->ops->close(c, why, sizeof(why));
	if (why[0])
		gh_info("mcp %s: %s", u->conf->name, why);
	mcp_conn_unref(c);
	return rc;
}

/* Lists the tools again (after notifications/tools/list_changed). */
static void refresh(struct mcp_upstream *u, struct mcp_conn *c)
{
	cJSON *tools = NULL;
	struct gh_err e;

	if (list_tools(u, c, &tools, &e) != GH_OK) {
		gh_warn("mcp %s: listing its tools again failed: %s", u->conf->name, e.msg);
		return;
	}
	gh_info("mcp %s: its tool list changed: %d tools", u->conf->name,
		cJSON_GetArraySize(tools));
	pthread_mutex_lock(&u->mu);
	cJSON_Delete(u->raw_tools);
	u->raw_tools = tools;
	pthread_mutex_unlock(&u->mu);
	publish(u, tools, 1);
}

static int any_held(struct mcp_upstream *u)
{
	struct catalog *c = catalog_get(u);
	size_t i;
	int held = 0;

	for (i = 0; c && i < c->n && !held; i++)
		held = !strcmp(c->v[i]->pin, "held") || !strcmp(c->v[i]->pin, "rejected");
	catalog_unref(c);
	return held;
}

/* Republishes from the last tool list (or the pins when never connected):
 * an admin may have decided on a held tool. */
static void republish(struct mcp_upstream *u)
{
	cJSON *raw;

	pthread_mutex_lock(&u->mu);
	raw = u->raw_tools ? cJSON_Duplicate(u->raw_tools, 1) : NULL;
	pthread_mutex_unlock(&u->mu);
	if (raw)
		publish(u, raw, 1);
	else
		publish_pinned(u);
	cJSON_Delete(raw);
}

/* Serves a live connection until it dies or gatehouse stops. */
static void serve(struct mcp_upstream *u, struct mcp_conn *c)
{
	int64_t next_recheck = gh_mono_ns() / 1000000 + PIN_RECHECK_MS;

	for (;;) {
		int changed, pins, reqs, recheck;
		int64_t now;

		pthread_mutex_lock(&u->mu);
		for (;;) {
			now = gh_mono_ns() / 1000000;
			if (atomic_load(&u->m->stopping) || atomic_load(&c->dead) ||
			    u->list_changed || u->pins_changed || u->reqs || now >= next_recheck)
				break;
			lock_wait(u, next_recheck - now < IDLE_WAKE_MS ? next_recheck - now
								       : IDLE_WAKE_MS);
		}
		changed = u->list_changed;
		pins = u->pins_changed;
		reqs = u->reqs != NULL;
		u->list_changed = u->pins_changed = 0;
		pthread_mutex_unlock(&u->mu);
		if (atomic_load(&u->m->stopping) || atomic_load(&c->dead))
			return;
		if (reqs)
			answer_requests(u);
		recheck = now >= next_recheck;
		if (recheck)
			next_recheck = now + PIN_RECHECK_MS;
		if (changed)
			refresh(u, c);
		else if (pins || (recheck && any_held(u)))
			republish(u);
	}
}

static int64_t backoff_ms(const struct gh_mcp_server_conf *conf, int failures)
{
	int64_t d = conf->retry_base_ms;
	int i;

	for (i = 1; i < failures && d < conf->retry_max_ms; i++)
		d *= 2;
	if (d > conf->retry_max_ms)
		d = conf->retry_max_ms;
	/* up to a quarter more, so upstreams that failed together spread out */
	d += (int64_t)randombytes_uniform((uint32_t)(d / 4 + 1));
	return d;
}

static void drop_conn(struct mcp_upstream *u)
{
	struct mcp_conn *c;
	struct srv_req *r;
	char why[256] = "";

	pthread_mutex_lock(&u->mu);
	c = u->conn;
	u->conn = NULL;
	r = u->reqs;
	u->reqs = NULL;
	u->nreqs = 0;
	pthread_mutex_unlock(&u->mu);
	while (r) {
		struct srv_req *next = r->next;

		mcp_conn_unref(r->conn);
		cJSON_Delete(r->id);
		free(r);
		r = next;
	}
	if (!c)
		return;
	c->ops->close(c, why, sizeof(why));
	if (why[0])
		gh_info("mcp %s: %s", u->conf->name, why);
	mcp_conn_unref(c);
}

static void *supervisor_main(void *arg)
{
	struct mcp_upstream *u = arg;
	struct gh_mcp *m = u->m;

	publish_pinned(u);
	while (!atomic_load(&m->stopping)) {
		struct gh_err e;
		enum gh_code rc;
		int64_t wait, until;

		set_state(u, U_CONNECTING, NULL);
		gh_err_clear(&e);
		rc = connect_once(u, &e);
		if (rc == GH_OK) {
			struct mcp_conn *c;
			int64_t since = gh_mono_ns();

			pthread_mutex_lock(&u->mu);
			u->failures = 0;
			u->first_done = 1;
			u->last_error[0] = '\0';
			c = u->conn;
			pthread_mutex_unlock(&u->mu);
			set_state(u, U_CONNECTED, "");
			serve(u, c);
			pthread_mutex_lock(&u->mu);
			gh_strlcpy(u->last_error,
				   atomic_load(&c->dead) && c->why[0] ? c->why
								       : "the connection closed",
				   sizeof(u->last_error));
			snprintf(e.msg, sizeof(e.msg), "%s", u->last_error);
			pthread_mutex_unlock(&u->mu);
			drop_conn(u);
			if (atomic_load(&m->stopping))
				break;
			gh_warn("mcp %s: disconnected: %s", u->conf->name, e.msg);
			/* a connection that lived a while is made again at once
			 * (a renewed session, a restarted child); one that died
			 * young counts as a failure, so a crashing child is not
			 * restarted in a tight loop */
			if (gh_mono_ns() - since >= STABLE_MS * INT64_C(1000000))
				continue;
		} else {
			gh_warn("mcp %s: cannot connect: %s", u->conf->name, e.msg);
		}
		if (atomic_load(&m->stopping))
			break;
		wait = backoff_ms(u->conf, u->failures + 1);
		pthread_mutex_lock(&u->mu);
		u->failures++;
		u->first_done = 1;
		u->next_retry_ms = gh_now_ms() + wait;
		pthread_mutex_unlock(&u->mu);
		set_state(u, U_FAILING, e.msg);
		until = gh_mono_ns() / 1000000 + wait;
		pthread_mutex_lock(&u->mu);
		while (!atomic_load(&m->stopping)) {
			int64_t now = gh_mono_ns() / 1000000;

			if (now >= until)
				break;
			if (u->pins_changed) {
				u->pins_changed = 0;
				pthread_mutex_unlock(&u->mu);
				republish(u);
				pthread_mutex_lock(&u->mu);
				continue;
			}
			lock_wait(u, until - now < IDLE_WAKE_MS ? until - now : IDLE_WAKE_MS);
		}
		pthread_mutex_unlock(&u->mu);
	}
	drop_conn(u);
	pthread_mutex_lock(&u->mu);
	u->first_done = 1;
	pthread_mutex_unlock(&u->mu);
	set_state(u, U_STOPPED, NULL);
	return NULL;
}

/* ------------------------------------------------------------ lifecycle */

void gh_mcp_stop(struct gh_mcp *m)
{
	size_t i;

	if (!m)
		return;
	atomic_store(&m->stopping, 1);
	for (i = 0; i < m->n; i++) {
		pthread_mutex_lock(&m->ups[i].mu);
		pthread_cond_broadcast(&m->ups[i].cv);
		pthread_mutex_unlock(&m->ups[i].mu);
	}
	for (i = 0; i < m->n; i++) {
		struct mcp_upstream *u = &m->ups[i];

		if (u->started)
			pthread_join(u->thread, NULL);
		catalog_unref(u->cat);
		cJSON_Delete(u->raw_tools);
		pthread_mutex_destroy(&u->mu);
		pthread_cond_destroy(&u->cv);
	}
	pthread_mutex_destroy(&m->mu);
	free(m->ups);
	free(m);
}

enum gh_code gh_mcp_start(const struct gh_config *cfg, struct gh_store *store,
			  struct gh_mcp **out, struct gh_err *e)
{
	struct gh_mcp *m;
	int64_t end = 0;
	size_t i, j;
	enum gh_code rc = GH_OK;

	*out = NULL;
	if (!cfg->nmcp_servers)
		return GH_OK;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->ups = calloc(cfg->nmcp_servers, sizeof(*m->ups)))) {
		free(m);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	m->cfg = cfg;
	m->store = store;
	m->n = cfg->nmcp_servers;
	atomic_init(&m->stopping, 0);
	pthread_mutex_init(&m->mu, NULL);
	for (i = 0; i < m->n; i++) {
		struct mcp_upstream *u = &m->ups[i];

		u->m = m;
		u->conf = &cfg->mcp_servers[i];
		pthread_mutex_init(&u->mu, NULL);
		gh_cond_init_mono(&u->cv);
		atomic_init(&u->next_id, 1);
		if (u->conf->connect_timeout_ms > end)
			end = u->conf->connect_timeout_ms;
	}
	for (i = 0; i < m->n; i++) {
		struct mcp_upstream *u = &m->ups[i];

		if (pthread_create(&u->thread, NULL, supervisor_main, u) != 0) {
			rc = gh_err_set(e, GH_E_INTERNAL, "mcp %s: cannot start its thread",
					u->conf->name);
			goto fail;
		}
		u->started = 1;
	}
	/* the first attempt of each, all at once: a little over the longest
	 * connect timeout (starting a child and listing tools count too) */
	end = gh_mono_ns() / 1000000 + end + 2000;
	for (i = 0; i < m->n; i++) {
		struct mcp_upstream *u = &m->ups[i];

		pthread_mutex_lock(&u->mu);
		while (!u->first_done && gh_mono_ns() / 1000000 < end)
			lock_wait(u, 100);
		pthread_mutex_unlock(&u->mu);
	}
	/* a name two tools resolve to is a start-up error, naming both */
	for (i = 0; i < m->n; i++) {
		struct catalog *c = catalog_get(&m->ups[i]);

		for (j = 0; c && j < c->n; j++) {
			if (c->v[j]->collision) {
				rc = gh_err_set(e, GH_E_BADREQ, "MCP server %s: tool \"%s\" is not "
								"offered: %s", m->ups[i].conf->name,
						c->v[j]->upstream_name, c->v[j]->blocked);
				break;
			}
		}
		catalog_unref(c);
		if (rc != GH_OK)
			goto fail;
	}
	*out = m;
	return GH_OK;
fail:
	gh_mcp_stop(m);
	return rc;
}

/* ---------------------------------------------------------------- tools */

long gh_mcp_tools(struct gh_mcp *m, struct gh_mcp_tool ***out)
{
	struct gh_mcp_tool **v = NULL;
	size_t n = 0, cap = 0, i, j;

	*out = NULL;
	if (!m)
		return 0;
	for (i = 0; i < m->n; i++) {
		struct catalog *c = catalog_get(&m->ups[i]);

		for (j = 0; c && j < c->n; j++) {
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct gh_mcp_tool **nv = realloc(v, nc * sizeof(*nv));

				if (!nv) {
					catalog_unref(c);
					gh_mcp_tools_free(v, (long)n);
					return -1;
				}
				v = nv;
				cap = nc;
			}
			gh_mcp_tool_ref(c->v[j]);
			v[n++] = c->v[j];
		}
		catalog_unref(c);
	}
	*out = v;
	return (long)n;
}

void gh_mcp_tools_free(struct gh_mcp_tool **v, long n)
{
	long i;

	for (i = 0; i < n; i++)
		gh_mcp_tool_unref(v[i]);
	free(v);
}

struct gh_mcp_tool *gh_mcp_tool_find(struct gh_mcp *m, const char *name)
{
	size_t i, j;

	for (i = 0; m && name && i < m->n; i++) {
		struct catalog *c = catalog_get(&m->ups[i]);
		struct gh_mcp_tool *t = NULL;

		for (j = 0; c && j < c->n && !t; j++)
			if (!strcmp(c->v[j]->name, name) && !c->v[j]->collision)
				t = c->v[j];
		if (t)
			gh_mcp_tool_ref(t);
		catalog_unref(c);
		if (t)
			return t;
	}
	return NULL;
}

/* ---------------------------------------------------------------- calls */

static int call_tick(void *ud)
{
	const struct gh_mcp_call_opts *o = ud;

	return o->tick ? o->tick(o->ud) : 0;
}

static void call_progress(void *ud, const struct gh_mcp_progress *p)
{
	const struct gh_mcp_call_opts *o = ud;

	if (o->progress)
		o->progress(o->ud, p->progress, p->total, p->message);
}

/* Is t still what the upstream offers, unblocked? "" when yes. */
static void still_offered(struct mcp_upstream *u, const struct gh_mcp_tool *t, char *why,
			  size_t cap)
{
	struct catalog *c = catalog_get(u);
	const struct gh_mcp_tool *cur = NULL;
	size_t i;

	why[0] = '\0';
	for (i = 0; c && i < c->n && !cur; i++)
		if (!strcmp(c->v[i]->upstream_name, t->upstream_name))
			cur = c->v[i];
	if (!cur)
		snprintf(why, cap, "MCP server %s no longer offers tool %s", u->conf->name,
			 t->upstream_name);
	else if (cur->blocked[0])
		snprintf(why, cap, "tool %s is not available: %.500s", t->name, cur->blocked);
	else if (cur->def.def && strcmp(cur->def.digest, t->def.digest))
		snprintf(why, cap, "the definition of tool %s changed since it was offered; try "
				   "again", t->name);
	catalog_unref(c);
}

/* Takes a call slot and the current connection; GH_OK with *conn
 * referenced, or a message for the model in why. */
static enum gh_code take_slot(struct mcp_upstream *u, const struct gh_mcp_call_opts *o,
			      int64_t start_ns, struct mcp_conn **conn, char *why, size_t cap)
{
	const struct gh_mcp_server_conf *conf = u->conf;
	enum gh_code rc = GH_OK;

	*conn = NULL;
	pthread_mutex_lock(&u->mu);
	for (;;) {
		int64_t waited = (gh_mono_ns() - start_ns) / 1000000;

		if (u->state != U_CONNECTED || !u->conn || atomic_load(&u->conn->dead)) {
			int64_t in = u->next_retry_ms ? u->next_retry_ms - gh_now_ms() : 0;

			/* its last error (which may name hosts and paths) is for
			 * admins: the model hears that it is down and for how long */
			if (u->state == U_FAILING && in > 0)
				snprintf(why, cap, "MCP server %s is unavailable (it failed %d times "
						   "in a row); gatehouse reconnects in %lld s",
					 conf->name, u->failures, (long long)((in + 999) / 1000));
			else
				snprintf(why, cap, "MCP server %s is unavailable (%s)", conf->name,
					 u->state == U_CONNECTING ? "connecting" : "not connected");
			rc = GH_E_UNAVAILABLE;
			break;
		}
		if (u->inflight < conf->max_concurrency) {
			u->inflight++;
			*conn = u->conn;
			mcp_conn_ref(*conn);
			break;
		}
		if (waited >= conf->timeout_ms) {
			snprintf(why, cap, "MCP server %s is busy: %lld calls in flight (its "
					   "max_concurrency) for %lld ms", conf->name,
				 (long long)conf->max_concurrency, (long long)waited);
			rc = GH_E_UNAVAILABLE;
			break;
		}
		if (tick_unlocked(u, o)) {
			rc = GH_E_CANCELLED;
			break;
		}
		lock_wait(u, 50);
	}
	pthread_mutex_unlock(&u->mu);
	return rc;
}

static void give_slot(struct mcp_upstream *u, struct mcp_conn *c, int failed)
{
	pthread_mutex_lock(&u->mu);
	u->inflight--;
	u->calls++;
	u->call_errors += failed;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	mcp_conn_unref(c);
}

/* Tells the upstream a call is off: notifications/cancelled. */
static void cancel_call(struct mcp_upstream *u, struct mcp_conn *c, int64_t id,
			const char *reason)
{
	cJSON *p = cJSON_CreateObject();
	struct gh_err e;

	if (!p)
		return;
	cJSON_AddNumberToObject(p, "requestId", (double)id);
	cJSON_AddStringToObject(p, "reason", reason);
	if (!atomic_load(&c->dead) &&
	    c->ops->notify(c, "notifications/cancelled", p, NOTIFY_TIMEOUT_MS, &e) != GH_OK)
		gh_debug("mcp %s: telling it about the cancelled call failed: %s", u->conf->name,
			 e.msg);
	cJSON_Delete(p);
}

/* After a 404: waits for the supervisor's new session (at most until
 * deadline_ns): a connection newer than old_gen, the generation of the
 * one that failed (its address is no test: the caller has let go of it,
 * and the new one may be allocated where it was). 1 when there is one. */
static int await_renewal(struct mcp_upstream *u, uint64_t old_gen, int64_t deadline_ns,
			 const struct gh_mcp_call_opts *o)
{
	int ok = 0;

	pthread_mutex_lock(&u->mu);
	pthread_cond_broadcast(&u->cv);
	while (gh_mono_ns() < deadline_ns && !atomic_load(&u->m->stopping)) {
		if (u->conn && u->conn->gen > old_gen && u->state == U_CONNECTED) {
			ok = 1;
			break;
		}
		if (tick_unlocked(u, o))
			break;
		lock_wait(u, 50);
	}
	pthread_mutex_unlock(&u->mu);
	return ok;
}

enum gh_code gh_mcp_call(struct gh_mcp *m, struct gh_mcp_tool *t, const cJSON *args,
			 const struct gh_mcp_call_opts *o, cJSON **result, int *is_error,
			 char *session, size_t cap, struct gh_err *e)
{
	struct mcp_upstream *u = t->up;
	static const struct gh_mcp_call_opts none;
	struct mcp_conn *c = NULL;
	struct mcp_req_opts ro;
	struct gh_mcp_call_opts oc;
	struct gh_mcp_msg reply;
	struct gh_err ce;
	int64_t start = gh_mono_ns(), id, left;
	char why[640];
	cJSON *params = NULL;
	enum gh_code rc;
	int renewed = 0;

	(void)m;
	*result = NULL;
	*is_error = 1;
	if (session && cap)
		session[0] = '\0';
	oc = o ? *o : none;
	o = &oc;
	if (t->blocked[0]) {
		*result = tool_error("tool %s is not available: %s", t->name, t->blocked);
		goto done;
	}
	still_offered(u, t, why, sizeof(why));
	if (why[0]) {
		*result = tool_error("%s", why);
		goto done;
	}
again:
	rc = take_slot(u, o, start, &c, why, sizeof(why));
	if (rc == GH_E_CANCELLED)
		return gh_err_set(e, GH_E_CANCELLED, "cancelled");
	if (rc != GH_OK) {
		*result = tool_error("%s", why);
		goto done;
	}
	if (session && cap)
		gh_strlcpy(session, c->session, cap);
	id = atomic_fetch_add(&u->next_id, 1);
	if (!(params = gh_mcp_call_params(t->upstream_name, args, id))) {
		give_slot(u, c, 1);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	gh_otel_inject_meta(params); /* _meta.traceparent, when a span is active */
	left = u->conf->timeout_ms - (gh_mono_ns() - start) / 1000000;
	memset(&ro, 0, sizeof(ro));
	ro.timeout_ms = left > 1 ? left : 1;
	ro.tick = o->tick ? call_tick : NULL;
	ro.wake_fd = o->wake_fd;
	ro.tick_ms = o->tick_ms;
	ro.progress = o->progress ? call_progress : NULL;
	ro.ud = &oc;
	rc = c->ops->request(c, id, "tools/call", params, &ro, &reply, &ce);
	cJSON_Delete(params);
	params = NULL;
	switch (rc) {
	case GH_OK:
		break;
	case GH_E_CANCELLED:
		cancel_call(u, c, id, "the caller went away");
		give_slot(u, c, 1);
		return gh_err_set(e, GH_E_CANCELLED, "cancelled");
	case GH_E_TIMEOUT:
		cancel_call(u, c, id, "gatehouse stopped waiting (timeout_ms)");
		*result = tool_error("MCP server %s did not answer the call to %s within %lld ms",
				     u->conf->name, t->upstream_name,
				     (long long)u->conf->timeout_ms);
		give_slot(u, c, 1);
		goto done;
	case GH_E_NOTFOUND: {
		/* the HTTP session ended: a new one, and the call once more */
		uint64_t gen = c->gen;

		mcp_conn_fail(c, "the session ended (the server no longer knows it)");
		give_slot(u, c, 0);
		if (!renewed && await_renewal(u, gen, start + u->conf->timeout_ms * 1000000, o)) {
			renewed = 1;
			gh_info("mcp %s: session renewed after HTTP 404; calling %s again",
				u->conf->name, t->upstream_name);
			goto again;
		}
		*result = tool_error("%s; no new session could be made in time", ce.msg);
		goto done;
	}
	default:
		*result = tool_error("the call to %s failed: %s%s", t->name, ce.msg,
				     atomic_load(&c->dead) ? " (gatehouse reconnects to it)" : "");
		give_slot(u, c, 1);
		goto done;
	}
	if (reply.kind == GH_MCP_ERROR) {
		char msg[256];

		mcp_log_safe(reply.error, strlen(reply.error), msg, sizeof(msg));
		*result = tool_error("MCP server %s refused the call to %s: %lld %s", u->conf->name,
				     t->upstream_name, (long long)reply.error_code, msg);
	} else if (gh_mcp_parse_call_result(reply.result, t->def.output_schema, result, is_error,
					    &ce) != GH_OK) {
		*result = tool_error("MCP server %s answered the call to %s badly: %s",
				     u->conf->name, t->upstream_name, ce.msg);
		*is_error = 1;
	}
	gh_mcp_msg_clear(&reply);
	give_slot(u, c, *is_error);
	if (!*result)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	return GH_OK;
done:
	*is_error = 1;
	if (!*result)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	return GH_OK;
}

/* ------------------------------------------------------------ reporting */

static void add_time(cJSON *o, const char *key, int64_t ms)
{
	if (ms > 0)
		gh_json_add_time(o, key, ms);
	else
		cJSON_AddNullToObject(o, key);
}

/* tools, offered (to models), available (callable now), held. Under
 * u->mu. */
static void add_counts(cJSON *s, const struct mcp_upstream *u)
{
	size_t ntools = u->cat ? u->cat->n : 0, j;
	int offered = 0, held = 0;

	for (j = 0; j < ntools; j++) {
		if (!u->cat->v[j]->blocked[0])
			offered++;
		if (!strcmp(u->cat->v[j]->pin, "held") || !strcmp(u->cat->v[j]->pin, "rejected"))
			held++;
	}
	cJSON_AddNumberToObject(s, "tools", (double)ntools);
	cJSON_AddNumberToObject(s, "offered", offered);
	cJSON_AddNumberToObject(s, "available", u->state == U_CONNECTED ? offered : 0);
	cJSON_AddNumberToObject(s, "held", held);
}

cJSON *gh_mcp_status_json(struct gh_mcp *m, int public_view, int *degraded)
{
	cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "servers");
	size_t i;

	if (degraded)
		*degraded = 0;
	if (!o || !arr) {
		cJSON_Delete(o);
		return NULL;
	}
	for (i = 0; m && i < m->n; i++) {
		struct mcp_upstream *u = &m->ups[i];
		cJSON *s = cJSON_CreateObject(), *si;

		if (!s)
			break;
		cJSON_AddItemToArray(arr, s);
		pthread_mutex_lock(&u->mu);
		cJSON_AddStringToObject(s, "name", u->conf->name);
		cJSON_AddStringToObject(s, "transport",
					u->conf->transport == GH_MCP_STDIO ? "stdio" : "http");
		cJSON_AddStringToObject(s, "state", state_names[u->state]);
		if (!public_view)
			gh_json_add_str(s, "lastError", u->state != U_CONNECTED && u->last_error[0]
								 ? u->last_error : NULL);
		if (u->state == U_FAILING && u->next_retry_ms) {
			int64_t in = u->next_retry_ms - gh_now_ms();

			add_time(s, "nextRetryAt", u->next_retry_ms);
			cJSON_AddNumberToObject(s, "retryInMs", (double)(in > 0 ? in : 0));
		} else {
			cJSON_AddNullToObject(s, "nextRetryAt");
			cJSON_AddNullToObject(s, "retryInMs");
		}
		if (public_view) {
			add_counts(s, u);
			if (degraded && u->state != U_CONNECTED)
				*degraded = 1;
			pthread_mutex_unlock(&u->mu);
			continue;
		}
		gh_json_add_str(s, "session", u->conn && u->state == U_CONNECTED ? u->conn->session
										 : NULL);
		gh_json_add_str(s, "protocolVersion",
				u->state == U_CONNECTED ? u->init.version : NULL);
		si = cJSON_AddObjectToObject(s, "serverInfo");
		gh_json_add_str(si, "name", u->init.server_name[0] ? u->init.server_name : NULL);
		gh_json_add_str(si, "version",
				u->init.server_version[0] ? u->init.server_version : NULL);
		add_time(s, "connectedAt", u->connected_at);
		cJSON_AddNumberToObject(s, "failures", u->failures);
		cJSON_AddNumberToObject(s, "inflight", u->inflight);
		cJSON_AddNumberToObject(s, "calls", (double)u->calls);
		cJSON_AddNumberToObject(s, "callErrors", (double)u->call_errors);
		add_counts(s, u);
		if (degraded && u->state != U_CONNECTED)
			*degraded = 1;
		pthread_mutex_unlock(&u->mu);
	}
	return o;
}

static struct mcp_upstream *upstream_named(struct gh_mcp *m, const char *name)
{
	size_t i;

	for (i = 0; m && name && i < m->n; i++)
		if (!strcmp(m->ups[i].conf->name, name))
			return &m->ups[i];
	return NULL;
}

static void add_definition(cJSON *o, const char *key, const char *def)
{
	cJSON *v = def ? gh_json_parse_stored(def) : NULL;

	if (v)
		cJSON_AddItemToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

enum gh_code gh_mcp_server_tools_json(struct gh_mcp *m, const char *server, cJSON **out,
				      struct gh_err *e)
{
	struct mcp_upstream *u = upstream_named(m, server);
	struct catalog *c;
	cJSON *o, *arr;
	size_t i;

	*out = NULL;
	if (!u)
		return gh_err_set(e, GH_E_NOTFOUND, "no MCP server \"%s\" in the config", server);
	o = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(o, "tools");
	if (!o || !arr) {
		cJSON_Delete(o);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	cJSON_AddStringToObject(o, "server", u->conf->name);
	cJSON_AddStringToObject(o, "prefix", u->conf->prefix);
	c = catalog_get(u);
	for (i = 0; c && i < c->n; i++) {
		const struct gh_mcp_tool *t = c->v[i];
		cJSON *to = cJSON_CreateObject(), *po;
		struct gh_mcp_pin p;
		struct gh_err pe;

		if (!to)
			break;
		cJSON_AddItemToArray(arr, to);
		gh_json_add_str(to, "name", t->name[0] ? t->name : NULL);
		cJSON_AddStringToObject(to, "upstreamName", t->upstream_name);
		gh_json_add_str(to, "title", t->def.title);
		gh_json_add_str(to, "description", t->def.description);
		if (t->def.annotations)
			cJSON_AddItemToObject(to, "annotations",
					      cJSON_Duplicate(t->def.annotations, 1));
		else
			cJSON_AddNullToObject(to, "annotations");
		if (t->def.input_schema)
			cJSON_AddItemToObject(to, "inputSchema",
					      cJSON_Duplicate(t->def.input_schema, 1));
		if (t->def.output_schema)
			cJSON_AddItemToObject(to, "outputSchema",
					      cJSON_Duplicate(t->def.output_schema, 1));
		gh_json_add_str(to, "digest", t->def.def ? t->def.digest : NULL);
		cJSON_AddBoolToObject(to, "offered", !t->blocked[0]);
		gh_json_add_str(to, "reason", t->blocked[0] ? t->blocked : NULL);
		cJSON_AddStringToObject(to, "approvalDefault",
					gh_mcp_hint_text(gh_mcp_hint_of(t->def.annotations)));
		po = cJSON_AddObjectToObject(to, "pin");
		cJSON_AddStringToObject(po, "status", t->pin);
		if (t->def.def &&
		    gh_store_mcp_pin_get(m->store, u->conf->name, t->upstream_name, &p, &pe) ==
			    GH_OK) {
			cJSON_AddStringToObject(po, "digest", p.digest);
			add_time(po, "pinnedAt", p.pinned_at);
			add_time(po, "acceptedAt", p.accepted_at);
			gh_json_add_str(po, "acceptedBy", p.accepted_by[0] ? p.accepted_by : NULL);
			gh_json_add_str(po, "pendingDigest",
					p.pending_digest[0] ? p.pending_digest : NULL);
			add_time(po, "pendingSince", p.pending_since);
			gh_json_add_str(po, "rejectedBy", p.rejected_by[0] ? p.rejected_by : NULL);
			if (p.pending_digest[0]) {
				add_definition(po, "acceptedDefinition", p.definition);
				add_definition(po, "offeredDefinition", p.pending_definition);
			}
			gh_mcp_pin_clear(&p);
		}
	}
	catalog_unref(c);
	*out = o;
	return GH_OK;
}

/* ------------------------------------------------------------ decisions */

struct find_pin {
	const struct gh_mcp_server_conf *conf;
	const char *want;
	char tool[GH_MCP_UPSTREAM_NAME_MAX + 1];
	char exposed[GH_MCP_NAME_MAX + 1];
	int found;
};

static int find_pin_cb(void *ud, const struct gh_mcp_pin *p)
{
	struct find_pin *f = ud;
	char exposed[GH_MCP_NAME_MAX + 1];

	if (gh_mcp_expose_name(f->conf->prefix, p->tool, exposed, NULL, 0) != 0)
		exposed[0] = '\0';
	if (!strcmp(p->tool, f->want) || (exposed[0] && !strcmp(exposed, f->want))) {
		gh_strlcpy(f->tool, p->tool, sizeof(f->tool));
		gh_strlcpy(f->exposed, exposed, sizeof(f->exposed));
		f->found = !strcmp(p->tool, f->want) ? 2 : 1; /* its own name wins */
		return f->found == 2;
	}
	return 0;
}

enum gh_code gh_mcp_pin_decide(struct gh_store *s, const struct gh_mcp_server_conf *conf,
			       const char *tool, const char *digest, int accept,
			       const struct gh_mcp_actor *who, struct gh_err *e)
{
	struct find_pin f;
	struct gh_mcp_pin p;
	struct gh_audit_event ev;
	char *detail = NULL;
	enum gh_code rc;

	memset(&f, 0, sizeof(f));
	f.conf = conf;
	f.want = tool;
	if ((rc = gh_store_mcp_pin_list(s, conf->name, find_pin_cb, &f, e)) != GH_OK)
		return rc;
	if (!f.found)
		return gh_err_set(e, GH_E_NOTFOUND, "MCP server %s has no pinned tool \"%s\"",
				  conf->name, tool);
	if ((rc = gh_store_mcp_pin_get(s, conf->name, f.tool, &p, e)) != GH_OK)
		return rc;
	pin_event(&ev, &detail, accept ? "mcp_tool_accepted" : "mcp_tool_rejected", f.exposed,
		  conf->name, f.tool, p.pending_digest[0] ? p.pending_digest : NULL, p.digest, who);
	rc = gh_store_mcp_pin_decide(s, conf->name, f.tool, digest, accept, who->by, &ev, e);
	if (rc == GH_OK)
		gh_info("mcp %s: %s %s the changed definition of tool %s (%.12s…)", conf->name,
			who->by ? who->by : "?", accept ? "accepted" : "rejected", f.tool,
			p.pending_digest);
	free(detail);
	gh_mcp_pin_clear(&p);
	return rc;
}

enum gh_code gh_mcp_decide(struct gh_mcp *m, const char *server, const char *tool,
			   const char *digest, int accept, const struct gh_mcp_actor *who,
			   struct gh_err *e)
{
	struct mcp_upstream *u = upstream_named(m, server);
	enum gh_code rc;

	if (!u)
		return gh_err_set(e, GH_E_NOTFOUND, "no MCP server \"%s\" in the config", server);
	rc = gh_mcp_pin_decide(m->store, u->conf, tool, digest, accept, who, e);
	if (rc == GH_OK) {
		pthread_mutex_lock(&u->mu);
		u->pins_changed = 1;
		pthread_cond_broadcast(&u->cv);
		pthread_mutex_unlock(&u->mu);
	}
	return rc;
}
