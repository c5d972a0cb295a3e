/*
 * notify.c - the notifier: a bounded queue of deliveries and the one
 * thread that records, sends and retries them; see notify.h.
 *
 * Threading: gh_notify_approval runs on any thread and only takes the
 * queue's mutex for a few pointer moves. Everything slow (the store, the
 * network) happens on the delivery thread, which holds no lock while it
 * does. A target that hangs delays other targets' deliveries by at most
 * its timeout_ms, and never a request.
 *
 * Config: the notifier lives as long as the process, and its targets are
 * those of the config generation current when it acts (app.h). A job
 * names its target; each attempt looks that name up in the current
 * generation and copies what the attempt needs (a reload may free the
 * generation while the request is on the wire), so a reload's new URL or
 * secret applies from the next attempt on, and an attempt already on the
 * wire finishes against what it copied.
 */
#include "notify.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <sodium.h>

#include "json.h"
#include "log.h"
#include "upstream.h"
#include "util.h"

#define DROPS_MAX 64          /* dropped deliveries remembered for the record */
#define IDLE_WAIT_MS 1000
#define RESPONSE_MAX 4096
#define QUEUE_FIRST 16        /* slots at first; the queue grows up to queue_max */

struct job {
	int64_t row;                 /* its deliveries row; 0: not recorded yet; -1: could
				      * not be recorded (sent all the same) */
	char target[72];             /* the target's name (gh_notify_row.target) */
	char kind[16];               /* its kind when last looked up */
	int gone;                    /* resumed at start for a target the config no
				      * longer had */
	int event;
	char event_id[GH_ID_MAX];
	char approval_id[GH_ID_MAX];
	char key_id[GH_ID_MAX];
	cJSON *payload;              /* until recorded (then body holds it) */
	char *body;                  /* the payload's JSON */
	int64_t attempts;
	int64_t next_at;             /* Unix ms */
	int64_t created_at;
};

struct drop {
	char target[72];
	char kind[16];
	int event;
	char event_id[GH_ID_MAX];
	char approval_id[GH_ID_MAX];
	int64_t at;
};

struct gh_notify {
	struct gh_app *app;
	pthread_mutex_t mu;
	pthread_cond_t cv;           /* CLOCK_MONOTONIC */
	struct job **q;              /* cap slots: n queued, plus the job in flight */
	size_t n, cap;
	int inflight;
	struct drop drops[DROPS_MAX];
	size_t ndrops;
	int stopping;
	_Atomic int abort_send;      /* stop: cut the request in flight */
	pthread_t thread;
	int started;
	_Atomic uint64_t delivered, failed, dropped, retries;
};

static const char *kind_name(enum gh_notify_kind k)
{
	return k == GH_NOTIFY_SMTP ? "smtp" : "webhook";
}

/* The config current now, with its generation held in *g (the caller
 * releases it; NULL when the app has no generations: boot_cfg then). */
static const struct gh_config *current(struct gh_notify *n, struct gh_cfg_gen **g)
{
	*g = gh_app_cfg_acquire(n->app);
	return *g ? (*g)->cfg : n->app->boot_cfg;
}

static const struct gh_notify_target_conf *find_target(const struct gh_notify_conf *c,
							const char *name)
{
	for (size_t i = 0; i < c->ntargets; i++)
		if (!strcmp(c->targets[i].name, name))
			return &c->targets[i];
	return NULL;
}

/* Under mu: makes room for one more job, growing q up to limit slots
 * (the job in flight keeps its slot). 0, or -1 when full or out of
 * memory. */
static int make_room(struct gh_notify *n, size_t limit)
{
	size_t used = n->n + (size_t)n->inflight, cap;
	struct job **q;

	if (used >= limit)
		return -1;
	if (used < n->cap)
		return 0;
	cap = n->cap ? n->cap * 2 : QUEUE_FIRST;
	if (cap > limit)
		cap = limit;
	if (cap <= used)
		cap = used + 1;
	if (!(q = realloc(n->q, cap * sizeof(*q))))
		return -1;
	n->q = q;
	n->cap = cap;
	return 0;
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	cJSON_Delete(j->payload);
	free(j->body);
	free(j);
}

/* ------------------------------------------------------------ enqueue */

/* Under mu: remembers a dropped delivery for the record (beyond
 * DROPS_MAX only counted and logged). */
static void note_drop(struct gh_notify *n, const struct gh_notify_target_conf *t, int event,
		      const char *event_id, const char *approval_id)
{
	struct drop *d;

	atomic_fetch_add(&n->dropped, 1);
	if (n->ndrops == DROPS_MAX)
		return;
	d = &n->drops[n->ndrops++];
	gh_strlcpy(d->target, t->name, sizeof(d->target));
	gh_strlcpy(d->kind, kind_name(t->kind), sizeof(d->kind));
	d->event = event;
	gh_strlcpy(d->event_id, event_id, sizeof(d->event_id));
	gh_strlcpy(d->approval_id, approval_id, sizeof(d->approval_id));
	d->at = gh_now_ms();
}

void gh_notify_approval(struct gh_notify *n, int event, const struct gh_approval *a)
{
	const struct gh_config *cfg;
	const struct gh_notify_conf *c;
	struct gh_cfg_gen *g;
	cJSON *payload;
	char id[GH_ID_MAX];
	size_t i, dropped = 0;
	int64_t now, queue_max;

	if (!n || !gh_notify_event_name(event))
		return;
	/* the targets of the config current now, not of the one the caller
	 * runs under: an event after a reload goes where the new config says */
	cfg = current(n, &g);
	c = &cfg->notifications;
	queue_max = c->queue_max;
	for (i = 0; i < c->ntargets; i++)
		if (c->targets[i].events & event)
			break;
	if (i == c->ntargets) {
		gh_app_cfg_release(g);
		return;
	}
	gh_id_new("ntf_", id, sizeof(id));
	now = gh_now_ms();
	/* the key's name is looked up by the delivery thread (a read) */
	payload = gh_notify_payload(id, event, a, NULL, &cfg->audit.redact,
				    cfg->server.public_url);
	pthread_mutex_lock(&n->mu);
	for (i = 0; i < c->ntargets; i++) {
		const struct gh_notify_target_conf *t = &c->targets[i];
		struct job *j;

		if (!(t->events & event))
			continue;
		j = NULL;
		/* stopping: the thread is handing the queue over to the store */
		if (payload && !n->stopping && make_room(n, (size_t)queue_max) == 0 &&
		    (j = calloc(1, sizeof(*j))) && !(j->payload = cJSON_Duplicate(payload, 1))) {
			free(j);
			j = NULL;
		}
		if (!j) {
			note_drop(n, t, event, id, a->id);
			dropped++;
			continue;
		}
		gh_strlcpy(j->target, t->name, sizeof(j->target));
		gh_strlcpy(j->kind, kind_name(t->kind), sizeof(j->kind));
		j->event = event;
		gh_strlcpy(j->event_id, id, sizeof(j->event_id));
		gh_strlcpy(j->approval_id, a->id, sizeof(j->approval_id));
		gh_strlcpy(j->key_id, a->key_id, sizeof(j->key_id));
		j->next_at = now;
		j->created_at = now;
		n->q[n->n++] = j;
	}
	pthread_cond_signal(&n->cv);
	pthread_mutex_unlock(&n->mu);
	gh_app_cfg_release(g);
	cJSON_Delete(payload);
	if (dropped)
		gh_warn("notifications: %zu deliveries of %s for approval %s dropped: the queue "
			"is full (notifications.queue_max %lld)", dropped,
			gh_notify_event_name(event), a->id, (long long)queue_max);
}

void gh_notify_stats(struct gh_notify *n, struct gh_notify_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!n)
		return;
	pthread_mutex_lock(&n->mu);
	out->queued = n->n + (size_t)n->inflight;
	pthread_mutex_unlock(&n->mu);
	out->delivered = atomic_load(&n->delivered);
	out->failed = atomic_load(&n->failed);
	out->dropped = atomic_load(&n->dropped);
	out->retries = atomic_load(&n->retries);
}

/* ------------------------------------------------------------ sending */

enum sent { SENT_OK, SENT_RETRY, SENT_FAIL, SENT_ABORTED };

static int aborting(void *ud)
{
	struct gh_notify *n = ud;

	return atomic_load(&n->abort_send);
}

static enum sent send_webhook(struct gh_notify *n, const struct gh_notify_target_conf *t,
			      const struct job *j, int64_t *code, char *err, size_t errcap)
{
	struct gh_upstream_header h[7];
	struct gh_upstream_req req;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char ts[24], sig[GH_NOTIFY_SIG_MAX], delivery[32];
	char *slack = NULL;
	const char *body = j->body;
	size_t nh = 0;
	enum sent r;
	enum gh_code rc;

	if (t->format == GH_NOTIFY_FORMAT_SLACK) {
		cJSON *p = gh_json_parse_stored(j->body), *s = p ? gh_notify_slack(p) : NULL;

		slack = s ? gh_json_dump(s) : NULL;
		cJSON_Delete(p);
		cJSON_Delete(s);
		if (!slack) {
			gh_strlcpy(err, "cannot build the Slack message", errcap);
			return SENT_RETRY;
		}
		body = slack;
	}
	snprintf(ts, sizeof(ts), "%lld", (long long)(gh_now_ms() / 1000));
	snprintf(delivery, sizeof(delivery), "%lld", (long long)j->row);
	h[nh++] = (struct gh_upstream_header){"Content-Type", "application/json"};
	h[nh++] = (struct gh_upstream_header){"User-Agent", "gatehouse"};
	h[nh++] = (struct gh_upstream_header){"X-Gatehouse-Event", gh_notify_event_name(j->event)};
	h[nh++] = (struct gh_upstream_header){"X-Gatehouse-Delivery", delivery};
	h[nh++] = (struct gh_upstream_header){"X-Gatehouse-Timestamp", ts};
	if (t->secret) {
		gh_notify_sign(t->secret, strtoll(ts, NULL, 10), body, strlen(body), sig);
		h[nh++] = (struct gh_upstream_header){"X-Gatehouse-Signature", sig};
	}
	memset(&req, 0, sizeof(req));
	req.url = t->url;
	req.headers = h;
	req.nheaders = nh;
	req.body = body;
	req.body_len = strlen(body);
	req.timeout_ms = t->timeout_ms;
	req.connect_timeout_ms = t->timeout_ms;
	req.max_response = RESPONSE_MAX;
	req.on_tick = aborting;
	req.ud = n;
	gh_upstream_resp_init(&resp, RESPONSE_MAX);
	gh_err_clear(&e);
	rc = gh_upstream_do(&req, &resp, &e);
	if (rc == GH_E_CANCELLED) {
		r = SENT_ABORTED;
	} else if (rc != GH_OK) {
		/* resp.error names what failed without the address (the URL may
		 * be a secret itself) */
		snprintf(err, errcap, "%s", resp.error[0] ? resp.error : "request failed");
		r = SENT_RETRY;
	} else {
		*code = resp.status;
		if (resp.status >= 200 && resp.status < 300) {
			r = SENT_OK;
		} else {
			snprintf(err, errcap, "the receiver answered HTTP %ld", resp.status);
			/* a refusal will not change by asking again; an overload,
			 * a timeout or a server error may */
			r = resp.status == 408 || resp.status == 429 || resp.status >= 500
				    ? SENT_RETRY : SENT_FAIL;
		}
	}
	gh_upstream_resp_free(&resp);
	sodium_memzero(sig, sizeof(sig));
	free(slack);
	return r;
}

struct upload {
	const char *p;
	size_t left;
};

static size_t upload_read(char *dst, size_t size, size_t nmemb, void *ud)
{
	struct upload *u = ud;
	size_t k = size * nmemb < u->left ? size * nmemb : u->left;

	memcpy(dst, u->p, k);
	u->p += k;
	u->left -= k;
	return k;
}

static int smtp_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return aborting(ud);
}

static enum sent send_smtp(struct gh_notify *n, const struct gh_notify_target_conf *t,
			   const struct job *j, int64_t *code, char *err, size_t errcap)
{
	struct gh_notify_mail m;
	struct curl_slist *rcpt = NULL;
	struct upload u;
	cJSON *p = gh_json_parse_stored(j->body);
	char *subject = p ? gh_notify_subject(p) : NULL, *text = p ? gh_notify_text(p) : NULL;
	char *mail = NULL, from[300], mid[GH_ID_MAX + 32];
	CURL *c = NULL;
	CURLcode cc;
	long reply = 0;
	enum sent r = SENT_RETRY;
	size_t i;

	if (!subject || !text) {
		gh_strlcpy(err, "cannot build the message", errcap);
		goto out;
	}
	snprintf(mid, sizeof(mid), "%s.%lld", j->event_id, (long long)j->row);
	memset(&m, 0, sizeof(m));
	m.from = t->from;
	m.to = (const char *const *)t->to.v;
	m.nto = t->to.n;
	m.subject = subject;
	m.body = text;
	m.message_id = mid;
	m.date_ms = gh_now_ms();
	m.event = gh_notify_event_name(j->event);
	m.approval_id = j->approval_id;
	mail = gh_notify_mail_build(&m);
	c = curl_easy_init();
	if (!mail || !c) {
		gh_strlcpy(err, "out of memory", errcap);
		goto out;
	}
	for (i = 0; i < t->to.n; i++) {
		char addr[300];
		struct curl_slist *x;

		snprintf(addr, sizeof(addr), "<%s>", t->to.v[i]);
		if (!(x = curl_slist_append(rcpt, addr))) {
			gh_strlcpy(err, "out of memory", errcap);
			goto out;
		}
		rcpt = x;
	}
	snprintf(from, sizeof(from), "<%s>", t->from);
	u.p = mail;
	u.left = strlen(mail);
	curl_easy_setopt(c, CURLOPT_URL, t->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
	curl_easy_setopt(c, CURLOPT_MAIL_FROM, from);
	curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, upload_read);
	curl_easy_setopt(c, CURLOPT_READDATA, &u);
	curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)u.left);
	if (t->username) {
		curl_easy_setopt(c, CURLOPT_USERNAME, t->username);
		curl_easy_setopt(c, CURLOPT_PASSWORD, t->password);
	}
	if (t->starttls && !strncmp(t->url, "smtp://", 7))
		curl_easy_setopt(c, CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)t->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)t->timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, smtp_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, n);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply);
	*code = reply;
	if (cc == CURLE_OK) {
		r = SENT_OK;
	} else if (cc == CURLE_ABORTED_BY_CALLBACK) {
		r = SENT_ABORTED;
	} else {
		/* curl's own words, never the server's address or our login */
		if (reply > 0)
			snprintf(err, errcap, "%s (SMTP reply %ld)", curl_easy_strerror(cc), reply);
		else
			snprintf(err, errcap, "%s", curl_easy_strerror(cc));
		/* a 5xx reply (unknown mailbox, authentication refused) is final */
		r = reply >= 500 && reply < 600 ? SENT_FAIL : SENT_RETRY;
	}
out:
	curl_easy_cleanup(c);
	curl_slist_free_all(rcpt);
	free(mail);
	free(subject);
	free(text);
	cJSON_Delete(p);
	return r;
}

/* ----------------------------------------------------------- delivery */

/* What one attempt needs of the config: its target and the retry
 * settings, copied so that no generation is held across the network. */
struct attempt_conf {
	struct gh_notify_target_conf t;  /* owned copies; secrets wiped when freed */
	int64_t max_attempts, retry_base_ms, retry_max_ms;
};

static void wipe_str(char **s)
{
	if (*s) {
		sodium_memzero(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

static void attempt_conf_free(struct attempt_conf *a)
{
	size_t i;

	wipe_str(&a->t.name);
	wipe_str(&a->t.url);
	wipe_str(&a->t.secret);
	wipe_str(&a->t.username);
	wipe_str(&a->t.password);
	wipe_str(&a->t.from);
	for (i = 0; i < a->t.to.n; i++)
		free(a->t.to.v[i]);
	free(a->t.to.v);
	memset(a, 0, sizeof(*a));
}

static int dup_opt(char **dst, const char *src)
{
	*dst = NULL;
	return src && !(*dst = gh_strdup(src)) ? -1 : 0;
}

/* Copies t (borrowed from a generation) and c's retry settings into a.
 * 0, or -1 out of memory (a then holds nothing). */
static int attempt_conf_copy(struct attempt_conf *a, const struct gh_notify_target_conf *t,
			     const struct gh_notify_conf *c)
{
	size_t i;

	memset(a, 0, sizeof(*a));
	a->t.kind = t->kind;
	a->t.events = t->events;
	a->t.timeout_ms = t->timeout_ms;
	a->t.format = t->format;
	a->t.starttls = t->starttls;
	a->max_attempts = c->max_attempts;
	a->retry_base_ms = c->retry_base_ms;
	a->retry_max_ms = c->retry_max_ms;
	if (dup_opt(&a->t.name, t->name) || dup_opt(&a->t.url, t->url) ||
	    dup_opt(&a->t.secret, t->secret) || dup_opt(&a->t.username, t->username) ||
	    dup_opt(&a->t.password, t->password) || dup_opt(&a->t.from, t->from))
		goto nomem;
	if (t->to.n) {
		if (!(a->t.to.v = calloc(t->to.n, sizeof(*a->t.to.v))))
			goto nomem;
		for (i = 0; i < t->to.n; i++, a->t.to.n++)
			if (!(a->t.to.v[i] = gh_strdup(t->to.v[i])))
				goto nomem;
	}
	return 0;
nomem:
	attempt_conf_free(a);
	return -1;
}

enum found { FOUND, FOUND_NOT, FOUND_NOT_FOR_EVENT, FOUND_NOMEM };

/* Looks j's target up by name in the config current now and copies it
 * into a (the generation is held only for the copy). */
static enum found lookup(struct gh_notify *n, const struct job *j, struct attempt_conf *a)
{
	struct gh_cfg_gen *g;
	const struct gh_config *cfg = current(n, &g);
	const struct gh_notify_target_conf *t = find_target(&cfg->notifications, j->target);
	enum found f = FOUND;

	memset(a, 0, sizeof(*a));
	if (!t)
		f = FOUND_NOT;
	else if (!(t->events & j->event))
		f = FOUND_NOT_FOR_EVENT;
	else if (attempt_conf_copy(a, t, &cfg->notifications) != 0)
		f = FOUND_NOMEM;
	gh_app_cfg_release(g);
	return f;
}

/* The row of j as it stands (borrowing j's strings; caller fills state). */
static void row_of(const struct job *j, struct gh_notify_row *r)
{
	memset(r, 0, sizeof(*r));
	r->id = j->row;
	gh_strlcpy(r->event_id, j->event_id, sizeof(r->event_id));
	gh_strlcpy(r->target, j->target, sizeof(r->target));
	gh_strlcpy(r->kind, j->kind, sizeof(r->kind));
	gh_strlcpy(r->event, gh_notify_event_name(j->event), sizeof(r->event));
	gh_strlcpy(r->approval_id, j->approval_id, sizeof(r->approval_id));
	r->payload = j->body;
	r->attempts = j->attempts;
	r->next_attempt_at = j->next_at;
	r->created_at = j->created_at;
	r->updated_at = gh_now_ms();
}

/* Fills in the key's name, serialises the payload and records j as
 * pending. */
static void record(struct gh_notify *n, struct job *j)
{
	struct gh_notify_row r;
	struct gh_key k;
	struct gh_err e;

	if (j->payload && j->key_id[0] &&
	    gh_store_key_by_id(n->app->store, j->key_id, &k, &e) == GH_OK)
		cJSON_ReplaceItemInObjectCaseSensitive(j->payload, "key_name",
						       cJSON_CreateString(k.name));
	if (j->payload) {
		j->body = gh_json_dump(j->payload);
		cJSON_Delete(j->payload);
		j->payload = NULL;
	}
	row_of(j, &r);
	gh_strlcpy(r.state, "pending", sizeof(r.state));
	if (!j->body || gh_store_notify_insert(n->app->store, &r, &j->row, &e) != GH_OK) {
		gh_warn("notifications: cannot record the delivery of %s for approval %s to %s: "
			"%s", r.event, j->approval_id, r.target, j->body ? e.msg : "out of memory");
		j->row = -1;
	}
}

static void update(struct gh_notify *n, const struct job *j, const char *state, int64_t code,
		   const char *error)
{
	struct gh_notify_row r;
	struct gh_err e;

	if (j->row <= 0)
		return;
	row_of(j, &r);
	gh_strlcpy(r.state, state, sizeof(r.state));
	r.last_code = code;
	r.last_error = (char *)(uintptr_t)(error && *error ? error : NULL);
	if (strcmp(state, "pending"))
		r.next_attempt_at = 0;
	if (!strcmp(state, "delivered"))
		r.delivered_at = r.updated_at;
	if (gh_store_notify_update(n->app->store, &r, &e) != GH_OK)
		gh_warn("notifications: cannot record the outcome of delivery %lld: %s",
			(long long)j->row, e.msg);
}

/* The wait before attempt number `attempts` + 1: base * 2^(attempts-1)
 * capped at retry_max_ms, then a random point in its upper half. */
static int64_t backoff(const struct attempt_conf *c, int64_t attempts)
{
	int64_t d = c->retry_base_ms;

	for (int64_t i = 1; i < attempts && d < c->retry_max_ms; i++)
		d *= 2;
	if (d > c->retry_max_ms)
		d = c->retry_max_ms;
	return d / 2 + (int64_t)randombytes_uniform((uint32_t)(d / 2 + 1));
}

/* Ends j as failed before sending it, for reason. */
static void give_up(struct gh_notify *n, struct job *j, const char *reason)
{
	if (j->row == 0)
		record(n, j);
	update(n, j, "failed", 0, reason);
	atomic_fetch_add(&n->failed, 1);
	gh_info("notifications: %s for approval %s to %s not sent: %s",
		gh_notify_event_name(j->event), j->approval_id, j->target, reason);
}

/* Sends j once and records how it went; 1 when it is to be tried again. */
static int deliver(struct gh_notify *n, struct job *j)
{
	struct attempt_conf a;
	const struct gh_notify_target_conf *t = &a.t;
	char err[256] = "";
	int64_t code = 0, now;
	enum sent s;
	int again = 0;

	switch (lookup(n, j, &a)) {
	case FOUND:
		break;
	case FOUND_NOT:
		/* never sent to where the target used to point */
		give_up(n, j, j->gone ? "the target is no longer configured"
				      : "target removed by reload");
		return 0;
	case FOUND_NOT_FOR_EVENT:
		give_up(n, j, "the target no longer takes this event");
		return 0;
	case FOUND_NOMEM:
		give_up(n, j, "out of memory");
		return 0;
	}
	/* a reload may have changed its kind: the row says how it is sent */
	gh_strlcpy(j->kind, kind_name(t->kind), sizeof(j->kind));
	if (j->row == 0)
		record(n, j);
	if (!j->body) {
		update(n, j, "failed", 0, "out of memory");
		atomic_fetch_add(&n->failed, 1);
		goto out;
	}
	if (j->attempts > 0)
		atomic_fetch_add(&n->retries, 1);
	s = t->kind == GH_NOTIFY_SMTP ? send_smtp(n, t, j, &code, err, sizeof(err))
				      : send_webhook(n, t, j, &code, err, sizeof(err));
	now = gh_now_ms();
	if (s == SENT_ABORTED) {
		/* stopping: not an attempt; the next start sends it */
		j->next_at = now;
		update(n, j, "pending", 0, "interrupted by shutdown");
		goto out;
	}
	j->attempts++;
	if (s == SENT_OK) {
		update(n, j, "delivered", code, NULL);
		atomic_fetch_add(&n->delivered, 1);
		goto out;
	}
	if (s == SENT_FAIL || j->attempts >= a.max_attempts) {
		update(n, j, "failed", code, err);
		atomic_fetch_add(&n->failed, 1);
		gh_warn("notifications: %s for approval %s to %s failed after %lld attempt%s: %s",
			gh_notify_event_name(j->event), j->approval_id, t->name,
			(long long)j->attempts, j->attempts == 1 ? "" : "s", err);
		goto out;
	}
	j->next_at = now + backoff(&a, j->attempts);
	update(n, j, "pending", code, err);
	gh_info("notifications: %s for approval %s to %s: attempt %lld failed (%s); next in "
		"%lld ms", gh_notify_event_name(j->event), j->approval_id, t->name,
		(long long)j->attempts, err, (long long)(j->next_at - now));
	again = 1;
out:
	attempt_conf_free(&a);
	return again;
}

/* Records the deliveries the queue had no room for. */
static void record_drops(struct gh_notify *n, const struct drop *d, size_t nd)
{
	for (size_t i = 0; i < nd; i++) {
		struct gh_notify_row r;
		struct gh_err e;
		struct job j;

		memset(&j, 0, sizeof(j));
		gh_strlcpy(j.target, d[i].target, sizeof(j.target));
		gh_strlcpy(j.kind, d[i].kind, sizeof(j.kind));
		j.event = d[i].event;
		gh_strlcpy(j.event_id, d[i].event_id, sizeof(j.event_id));
		gh_strlcpy(j.approval_id, d[i].approval_id, sizeof(j.approval_id));
		j.created_at = d[i].at;
		row_of(&j, &r);
		gh_strlcpy(r.state, "failed", sizeof(r.state));
		r.last_error = "dropped: the notification queue was full";
		r.next_attempt_at = 0;
		if (gh_store_notify_insert(n->app->store, &r, NULL, &e) != GH_OK)
			gh_warn("notifications: cannot record a dropped delivery: %s", e.msg);
	}
}

static void wait_ms(struct gh_notify *n, int64_t ms)
{
	struct timespec ts;

	gh_deadline(CLOCK_MONOTONIC, ms, &ts);
	pthread_cond_timedwait(&n->cv, &n->mu, &ts);
}

static void *delivery_main(void *ud)
{
	struct gh_notify *n = ud;
	struct drop drops[DROPS_MAX];
	size_t nd, i, best, left;
	struct job *j;

	pthread_mutex_lock(&n->mu);
	while (!n->stopping) {
		int64_t now;

		if (n->ndrops) {
			nd = n->ndrops;
			memcpy(drops, n->drops, nd * sizeof(*drops));
			n->ndrops = 0;
			pthread_mutex_unlock(&n->mu);
			record_drops(n, drops, nd);
			pthread_mutex_lock(&n->mu);
			continue;
		}
		if (!n->n) {
			wait_ms(n, IDLE_WAIT_MS);
			continue;
		}
		best = 0;
		for (i = 1; i < n->n; i++)
			if (n->q[i]->next_at < n->q[best]->next_at)
				best = i;
		now = gh_now_ms();
		if (n->q[best]->next_at > now) {
			int64_t d = n->q[best]->next_at - now;

			wait_ms(n, d < IDLE_WAIT_MS ? d : IDLE_WAIT_MS);
			continue;
		}
		j = n->q[best];
		n->q[best] = n->q[--n->n];
		n->inflight = 1;
		pthread_mutex_unlock(&n->mu);
		if (deliver(n, j)) {
			pthread_mutex_lock(&n->mu);
			n->q[n->n++] = j; /* its slot was kept: inflight */
		} else {
			job_free(j);
			pthread_mutex_lock(&n->mu);
		}
		n->inflight = 0;
	}
	/* stopping: what is queued but not recorded yet is recorded pending,
	 * for the next start; dropped ones are recorded as such. Nothing is
	 * queued from now on (gh_notify_approval sees stopping). */
	nd = n->ndrops;
	memcpy(drops, n->drops, nd * sizeof(*drops));
	n->ndrops = 0;
	left = n->n;
	n->n = 0;
	pthread_mutex_unlock(&n->mu);
	record_drops(n, drops, nd);
	for (i = 0; i < left; i++) {
		if (n->q[i]->row == 0)
			record(n, n->q[i]);
		job_free(n->q[i]);
		n->q[i] = NULL;
	}
	return NULL;
}

/* -------------------------------------------------------- start, stop */

struct resume_arg {
	struct gh_notify *n;
	const struct gh_notify_conf *conf;   /* the config at start */
};

static int resume_cb(void *ud, const struct gh_notify_row *r)
{
	struct resume_arg *ra = ud;
	struct gh_notify *n = ra->n;
	struct job *j;
	int ev;

	if (make_room(n, (size_t)ra->conf->queue_max) != 0)
		return 1;
	for (ev = GH_NOTIFY_EV_REQUESTED; ev <= GH_NOTIFY_EV_EXPIRED; ev <<= 1)
		if (!strcmp(r->event, gh_notify_event_name(ev)))
			break;
	if (ev > GH_NOTIFY_EV_EXPIRED)
		return 0; /* not an event this binary sends: left as it is */
	j = calloc(1, sizeof(*j));
	if (!j || !(j->body = gh_strdup(r->payload ? r->payload : "null"))) {
		free(j);
		return 1;
	}
	j->row = r->id;
	gh_strlcpy(j->target, r->target, sizeof(j->target));
	gh_strlcpy(j->kind, r->kind, sizeof(j->kind));
	j->gone = !find_target(ra->conf, r->target);
	j->event = ev;
	gh_strlcpy(j->event_id, r->event_id, sizeof(j->event_id));
	gh_strlcpy(j->approval_id, r->approval_id, sizeof(j->approval_id));
	j->attempts = r->attempts;
	/* a restart is a fresh chance: tried at once, the backoff then goes
	 * on from the attempts already made */
	j->next_at = gh_now_ms();
	j->created_at = r->created_at;
	n->q[n->n++] = j;
	return 0;
}

enum gh_code gh_notify_start(struct gh_app *app, struct gh_notify **out, struct gh_err *e)
{
	struct gh_notify *n;
	struct gh_cfg_gen *g;
	struct resume_arg ra;
	enum gh_code rc;

	*out = NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	n->app = app;
	pthread_mutex_init(&n->mu, NULL);
	gh_cond_init_mono(&n->cv);
	ra.n = n;
	ra.conf = &current(n, &g)->notifications;
	rc = gh_store_notify_pending(app->store, (int)ra.conf->queue_max,
				     "not resumed at start: more were pending than "
				     "notifications.queue_max", resume_cb, &ra, e);
	gh_app_cfg_release(g);
	if (rc != GH_OK) {
		gh_notify_stop(n);
		return rc;
	}
	if (n->n)
		gh_info("notifications: %zu pending deliveries resumed", n->n);
	/* started with or without targets: a reload may add the first one */
	if (pthread_create(&n->thread, NULL, delivery_main, n) != 0) {
		gh_notify_stop(n);
		return gh_err_set(e, GH_E_INTERNAL, "cannot start the notification thread");
	}
	n->started = 1;
	*out = n;
	return GH_OK;
}

void gh_notify_stop(struct gh_notify *n)
{
	size_t i;

	if (!n)
		return;
	if (n->started) {
		pthread_mutex_lock(&n->mu);
		n->stopping = 1;
		atomic_store(&n->abort_send, 1);
		pthread_cond_broadcast(&n->cv);
		pthread_mutex_unlock(&n->mu);
		pthread_join(n->thread, NULL);
	}
	for (i = 0; i < n->n; i++)
		job_free(n->q[i]);
	free(n->q);
	pthread_cond_destroy(&n->cv);
	pthread_mutex_destroy(&n->mu);
	free(n);
}
