/*
 * test_approvals_store.c - the approvals table on a real database: insert
 * with its audit row in one transaction, lookups by id and tool call id
 * (owner-scoped), listing order, deciding once (a second decision, even a
 * concurrent one, is a conflict naming who decided), executing once,
 * expiry (marked, audited, then undecidable), and the audit chain staying
 * intact through all of it.
 */
#include "store.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "audit.h"
#include "audit_verify.h"
#include "json.h"
#include "t.h"
#include "t_store.h"
#include "util.h"

static int64_t audit_rows(struct t_store *t)
{
	int64_t first = 0, last = 0, count = -1;
	struct gh_err e;

	gh_store_audit_bounds(t->s, &first, &last, &count, &e);
	return count;
}

static void fill(struct gh_approval *a, const char *id, const char *call, const char *owner,
		 int64_t expires_at)
{
	memset(a, 0, sizeof(*a));
	gh_strlcpy(a->id, id, sizeof(a->id));
	gh_strlcpy(a->key_id, "key_1", sizeof(a->key_id));
	gh_strlcpy(a->owner, owner, sizeof(a->owner));
	gh_strlcpy(a->agent_id, "assistant", sizeof(a->agent_id));
	gh_strlcpy(a->thread_id, "thr_1", sizeof(a->thread_id));
	gh_strlcpy(a->run_id, "run_1", sizeof(a->run_id));
	gh_strlcpy(a->tool_call_id, call, sizeof(a->tool_call_id));
	gh_strlcpy(a->tool_name, "send_email", sizeof(a->tool_name));
	gh_strlcpy(a->source, "server", sizeof(a->source));
	gh_strlcpy(a->args_sha256, "ab12", sizeof(a->args_sha256));
	gh_strlcpy(a->policy_name, "default", sizeof(a->policy_name));
	gh_strlcpy(a->policy_version, "0123456789abcdef", sizeof(a->policy_version));
	gh_strlcpy(a->approver, "admin", sizeof(a->approver));
	a->rule = (char *)"policy \"default\": approval.require \"send_*\"";
	a->created_at = gh_now_ms();
	a->expires_at = expires_at;
}

static enum gh_code insert(struct t_store *t, const struct gh_approval *a, struct gh_err *e)
{
	struct gh_audit_event ev = {0};

	ev.event = "approval_requested";
	ev.key_id = a->key_id;
	ev.owner = a->owner;
	ev.run_id = a->run_id;
	ev.tool_call_id = a->tool_call_id;
	ev.tool_name = a->tool_name;
	ev.outcome = "pending";
	ev.duration_ms = -1;
	return gh_store_approval_insert(t->s, a, "{\"to\":\"team@example.com\"}", &ev, e);
}

static enum gh_code decide(struct t_store *t, const char *id, const char *status, const char *by,
			   struct gh_err *e)
{
	struct gh_audit_event ev = {0};

	ev.event = !strcmp(status, "approved") ? "approved" : "rejected";
	ev.admin_user = by;
	ev.outcome = status;
	ev.duration_ms = -1;
	gh_err_clear(e);
	return gh_store_approval_decide(t->s, id, status, by, "looks fine", NULL, &ev, e);
}

static void test_insert_get(void)
{
	struct t_store t;
	struct gh_approval a, got;
	struct gh_err e;
	int64_t exp = gh_now_ms() + 3600000;

	T_EQ_INT(t_store_open(&t), 0);
	fill(&a, "apr_1", "call_1", "alice", exp);
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	/* the request and its audit row are one transaction */
	T_EQ_INT(audit_rows(&t), 1);
	T_EQ_INT(gh_store_approval_get(t.s, "alice", "apr_1", 0, &got, &e), GH_OK);
	T_EQ_STR(got.status, "pending");
	T_EQ_STR(got.tool_call_id, "call_1");
	T_EQ_STR(got.thread_id, "thr_1");
	T_EQ_STR(got.policy_name, "default");
	T_EQ_STR(got.policy_version, "0123456789abcdef");
	T_EQ_STR(got.approver, "admin");
	T_EQ_STR(got.args_sha256, "ab12");
	T_EQ_STR(got.rule, a.rule);
	T_EQ_STR(gh_json_str(got.args, "to"), "team@example.com");
	T_EQ_INT(got.expires_at, exp);
	T_EQ_INT(got.decided_at, 0);
	T_EQ_INT(got.executed_at, 0);
	T_ASSERT(got.reason == NULL);
	T_EQ_STR(got.decided_by, "");
	gh_approval_clear(&got);
	gh_approval_clear(NULL);
	/* by tool call id; other owners see nothing */
	T_EQ_INT(gh_store_approval_get(t.s, "alice", "call_1", 1, &got, &e), GH_OK);
	T_EQ_STR(got.id, "apr_1");
	gh_approval_clear(&got);
	T_EQ_INT(gh_store_approval_get(t.s, "bob", "apr_1", 0, &got, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_approval_get(t.s, "bob", "call_1", 1, &got, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_1", 0, &got, &e), GH_OK);
	gh_approval_clear(&got);
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_x", 0, &got, &e), GH_E_NOTFOUND);
	/* one approval per tool call: a second is refused, and not audited */
	fill(&a, "apr_2", "call_1", "alice", exp);
	T_EQ_INT(insert(&t, &a, &e), GH_E_CONFLICT);
	T_EQ_INT(audit_rows(&t), 1);
	/* a thread-less approval stores no thread */
	fill(&a, "apr_3", "call_3", "alice", exp);
	a.thread_id[0] = '\0';
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_3", 0, &got, &e), GH_OK);
	T_EQ_STR(got.thread_id, "");
	gh_approval_clear(&got);
	t_store_close(&t);
}

struct listed {
	char ids[8][GH_ID_MAX];
	int n;
};

static int list_cb(void *ud, const struct gh_approval *a)
{
	struct listed *l = ud;

	if (l->n < 8)
		gh_strlcpy(l->ids[l->n++], a->id, sizeof(l->ids[0]));
	return 0;
}

static void test_list(void)
{
	struct t_store t;
	struct gh_approval a;
	struct gh_err e;
	struct listed l;
	int64_t exp = gh_now_ms() + 3600000;
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	for (i = 1; i <= 4; i++) {
		char id[16], call[16];

		snprintf(id, sizeof(id), "apr_%d", i);
		snprintf(call, sizeof(call), "call_%d", i);
		fill(&a, id, call, i == 4 ? "bob" : "alice", exp);
		a.created_at += i; /* distinct, increasing */
		T_EQ_INT(insert(&t, &a, &e), GH_OK);
	}
	T_EQ_INT(decide(&t, "apr_2", "denied", "admin:root", &e), GH_OK);
	/* pending: oldest first (the review queue) */
	memset(&l, 0, sizeof(l));
	T_EQ_INT(gh_store_approval_list(t.s, "pending", NULL, 10, list_cb, &l, &e), GH_OK);
	T_EQ_INT(l.n, 3);
	T_EQ_STR(l.ids[0], "apr_1");
	T_EQ_STR(l.ids[2], "apr_4");
	/* everything: newest first; owner filter; limit */
	memset(&l, 0, sizeof(l));
	T_EQ_INT(gh_store_approval_list(t.s, NULL, NULL, 10, list_cb, &l, &e), GH_OK);
	T_EQ_INT(l.n, 4);
	T_EQ_STR(l.ids[0], "apr_4");
	memset(&l, 0, sizeof(l));
	T_EQ_INT(gh_store_approval_list(t.s, "pending", "alice", 10, list_cb, &l, &e), GH_OK);
	T_EQ_INT(l.n, 2);
	memset(&l, 0, sizeof(l));
	T_EQ_INT(gh_store_approval_list(t.s, "denied", NULL, 10, list_cb, &l, &e), GH_OK);
	T_EQ_INT(l.n, 1);
	T_EQ_STR(l.ids[0], "apr_2");
	memset(&l, 0, sizeof(l));
	T_EQ_INT(gh_store_approval_list(t.s, NULL, NULL, 2, list_cb, &l, &e), GH_OK);
	T_EQ_INT(l.n, 2);
	t_store_close(&t);
}

static void test_decide_once(void)
{
	struct t_store t;
	struct gh_approval a, got;
	struct gh_err e;
	struct gh_audit_verify rep;

	T_EQ_INT(t_store_open(&t), 0);
	fill(&a, "apr_1", "call_1", "alice", gh_now_ms() + 3600000);
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	T_EQ_INT(decide(&t, "apr_1", "approved", "admin:root", &e), GH_OK);
	T_EQ_INT(audit_rows(&t), 2);
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_1", 0, &got, &e), GH_OK);
	T_EQ_STR(got.status, "approved");
	T_EQ_STR(got.decided_by, "admin:root");
	T_EQ_STR(got.reason, "looks fine");
	T_ASSERT(got.decided_at > 0);
	gh_approval_clear(&got);
	/* a second decision, either way: a conflict that says who decided */
	T_EQ_INT(decide(&t, "apr_1", "denied", "key:key_2", &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "approval apr_1 was already approved by admin:root");
	T_EQ_INT(decide(&t, "apr_1", "approved", "admin:root", &e), GH_E_CONFLICT);
	T_EQ_INT(audit_rows(&t), 2); /* refused decisions leave no audit row */
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_1", 0, &got, &e), GH_OK);
	T_EQ_STR(got.status, "approved");
	T_EQ_STR(got.decided_by, "admin:root");
	gh_approval_clear(&got);
	T_EQ_INT(decide(&t, "apr_404", "approved", "admin:root", &e), GH_E_NOTFOUND);

	/* executed once */
	T_EQ_INT(gh_store_approval_claim_exec(t.s, "apr_1", NULL, NULL, &e), GH_OK);
	T_EQ_INT(gh_store_approval_claim_exec(t.s, "apr_1", NULL, NULL, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "already executed");
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_1", 0, &got, &e), GH_OK);
	T_ASSERT(got.executed_at >= got.decided_at);
	gh_approval_clear(&got);
	/* a denied or undecided approval never executes */
	fill(&a, "apr_2", "call_2", "alice", gh_now_ms() + 3600000);
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	T_EQ_INT(gh_store_approval_claim_exec(t.s, "apr_2", NULL, NULL, &e), GH_E_CONFLICT);
	T_EQ_INT(decide(&t, "apr_2", "denied", "admin:root", &e), GH_OK);
	T_EQ_INT(gh_store_approval_claim_exec(t.s, "apr_2", NULL, NULL, &e), GH_E_CONFLICT);
	T_EQ_INT(decide(&t, "apr_2", "approved", "admin:eve", &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "was already denied by admin:root");
	T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.rows, 4);
	t_store_close(&t);
}

struct expired {
	char ids[4][GH_ID_MAX];
	char status[4][16];
	int n;
};

static void expired_cb(void *ud, const struct gh_approval *a)
{
	struct expired *x = ud;

	if (x->n < 4) {
		gh_strlcpy(x->ids[x->n], a->id, sizeof(x->ids[0]));
		gh_strlcpy(x->status[x->n++], a->status, sizeof(x->status[0]));
	}
}

struct audit_seen {
	char event[32], outcome[32], detail[128], tool_call[32];
	int n;
};

static int audit_cb(void *ud, const struct gh_audit_row *r)
{
	struct audit_seen *s = ud;

	s->n++;
	gh_strlcpy(s->event, r->ev->event ? r->ev->event : "", sizeof(s->event));
	gh_strlcpy(s->outcome, r->ev->outcome ? r->ev->outcome : "", sizeof(s->outcome));
	gh_strlcpy(s->detail, r->ev->detail ? r->ev->detail : "", sizeof(s->detail));
	gh_strlcpy(s->tool_call, r->ev->tool_call_id ? r->ev->tool_call_id : "",
		   sizeof(s->tool_call));
	return 0;
}

static void test_expire(void)
{
	struct t_store t;
	struct gh_approval a, got;
	struct gh_err e;
	struct expired x = {0};
	struct audit_seen seen = {0};
	struct gh_audit_verify rep;
	int64_t now = gh_now_ms();
	int n = -1;

	T_EQ_INT(t_store_open(&t), 0);
	fill(&a, "apr_old", "call_old", "alice", now - 1000);
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	fill(&a, "apr_new", "call_new", "alice", now + 3600000);
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	/* decided before its expiry: a minute, so a slow machine decides it in
	 * time; the sweeps look two minutes ahead, past it */
	fill(&a, "apr_done", "call_done", "alice", now + 60000);
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	T_EQ_INT(decide(&t, "apr_done", "approved", "admin:root", &e), GH_OK);
	/* past its expiry but not yet swept: no longer decidable */
	T_EQ_INT(decide(&t, "apr_old", "approved", "admin:root", &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "approval apr_old already expired");
	/* sweeping at now + 2 min: only the pending one past its expiry */
	T_EQ_INT(gh_store_approvals_expire(t.s, now + 120000, expired_cb, &x, &n, &e), GH_OK);
	T_EQ_INT(n, 1);
	T_EQ_INT(x.n, 1);
	T_EQ_STR(x.ids[0], "apr_old");
	T_EQ_STR(x.status[0], "expired");
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_old", 0, &got, &e), GH_OK);
	T_EQ_STR(got.status, "expired");
	T_EQ_STR(got.decided_by, "system");
	gh_approval_clear(&got);
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_done", 0, &got, &e), GH_OK);
	T_EQ_STR(got.status, "approved");
	gh_approval_clear(&got);
	/* the expiry is in the audit log */
	T_EQ_INT(gh_store_audit_scan(t.s, 5, 0, audit_cb, &seen, &e), GH_OK);
	T_EQ_INT(seen.n, 1);
	T_EQ_STR(seen.event, "expired");
	T_EQ_STR(seen.outcome, "expired");
	T_EQ_STR(seen.tool_call, "call_old");
	T_EQ_STR(seen.detail, "{\"approval_id\":\"apr_old\"}");
	/* expired is final */
	T_EQ_INT(decide(&t, "apr_old", "approved", "admin:root", &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "already expired");
	T_EQ_INT(gh_store_approval_claim_exec(t.s, "apr_old", NULL, NULL, &e), GH_E_CONFLICT);
	x.n = 0;
	T_EQ_INT(gh_store_approvals_expire(t.s, now + 120000, expired_cb, &x, &n, &e), GH_OK);
	T_EQ_INT(n, 0);
	T_EQ_INT(x.n, 0);
	T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.rows, 5);
	t_store_close(&t);
}

/* ---- races: many reviewers press the button at once ---- */

#define RACERS 12

struct race {
	struct t_store *t;
	int i;
	_Atomic int *go;
	enum gh_code decide_rc, claim_rc;
	char msg[GH_ERR_MSG_MAX];
};

static void *racer(void *arg)
{
	struct race *r = arg;
	char who[32];
	struct gh_err e;

	snprintf(who, sizeof(who), "admin:user%d", r->i);
	while (!atomic_load(r->go))
		sched_yield();
	r->decide_rc = decide(r->t, "apr_1", r->i % 2 ? "approved" : "denied", who, &e);
	gh_strlcpy(r->msg, e.msg, sizeof(r->msg));
	return NULL;
}

static void *claimer(void *arg)
{
	struct race *r = arg;
	struct gh_err e;

	while (!atomic_load(r->go))
		sched_yield();
	r->claim_rc = gh_store_approval_claim_exec(r->t->s, "apr_2", NULL, NULL, &e);
	return NULL;
}

static void test_concurrent_decisions(void)
{
	struct t_store t;
	struct gh_approval a, got;
	struct gh_err e;
	struct race r[RACERS];
	pthread_t th[RACERS], tc[RACERS];
	_Atomic int go = 0;
	int i, won = -1, ok = 0, claimed = 0;
	char expect[128];

	T_EQ_INT(t_store_open(&t), 0);
	fill(&a, "apr_1", "call_1", "alice", gh_now_ms() + 3600000);
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	fill(&a, "apr_2", "call_2", "alice", gh_now_ms() + 3600000);
	T_EQ_INT(insert(&t, &a, &e), GH_OK);
	T_EQ_INT(decide(&t, "apr_2", "approved", "admin:root", &e), GH_OK);
	for (i = 0; i < RACERS; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].t = &t;
		r[i].i = i;
		r[i].go = &go;
		T_EQ_INT(pthread_create(&th[i], NULL, racer, &r[i]), 0);
		T_EQ_INT(pthread_create(&tc[i], NULL, claimer, &r[i]), 0);
	}
	atomic_store(&go, 1);
	for (i = 0; i < RACERS; i++) {
		pthread_join(th[i], NULL);
		pthread_join(tc[i], NULL);
	}
	for (i = 0; i < RACERS; i++) {
		if (r[i].decide_rc == GH_OK) {
			ok++;
			won = i;
		}
		claimed += r[i].claim_rc == GH_OK;
	}
	T_EQ_INT(ok, 1);
	T_EQ_INT(claimed, 1);
	T_EQ_INT(gh_store_approval_get(t.s, NULL, "apr_1", 0, &got, &e), GH_OK);
	snprintf(expect, sizeof(expect), "admin:user%d", won);
	T_EQ_STR(got.decided_by, expect);
	snprintf(expect, sizeof(expect), "approval apr_1 was already %s by admin:user%d",
		 got.status, won);
	gh_approval_clear(&got);
	for (i = 0; i < RACERS; i++) {
		if (i == won)
			continue;
		T_EQ_INT(r[i].decide_rc, GH_E_CONFLICT);
		T_EQ_STR(r[i].msg, expect);
	}
	T_EQ_INT(audit_rows(&t), 4); /* 2 requests, 1 decision each */
	t_store_close(&t);
}

T_MAIN(T(test_insert_get), T(test_list), T(test_decide_once), T(test_expire),
       T(test_concurrent_decisions))
