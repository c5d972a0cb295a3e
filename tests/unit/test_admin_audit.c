/*
 * test_admin_audit.c - admin actions in the audit log on a real store: a
 * key created from the CLI and one revoked through the API carry the key's
 * id and owner and a canonical detail naming the key, its policy and role,
 * how the action came in and (API) who did it; a failed login carries the
 * outcome, the reason, the address and the user name tried, and no key;
 * the chain verifies afterwards.
 */
#include "admin_audit.h"

#include "audit.h"
#include "audit_verify.h"
#include "t.h"
#include "t_store.h"
#include "util.h"

/* The newest row of an event, copied out of the query callback. */
struct row {
	int found;
	char key_id[48], owner[64], admin_user[64], source[16], outcome[16];
	char reason[128], detail[512];
	int64_t duration_ms;
};

static void copy(char *dst, size_t cap, const char *s)
{
	gh_strlcpy(dst, s ? s : "(null)", cap);
}

static int take_row(void *ud, const struct gh_audit_row *r)
{
	struct row *w = ud;

	w->found = 1;
	copy(w->key_id, sizeof(w->key_id), r->ev->key_id);
	copy(w->owner, sizeof(w->owner), r->ev->owner);
	copy(w->admin_user, sizeof(w->admin_user), r->ev->admin_user);
	copy(w->source, sizeof(w->source), r->ev->source);
	copy(w->outcome, sizeof(w->outcome), r->ev->outcome);
	copy(w->reason, sizeof(w->reason), r->ev->reason);
	copy(w->detail, sizeof(w->detail), r->ev->detail);
	w->duration_ms = r->ev->duration_ms;
	return 1;
}

static int newest(struct t_store *t, const char *event, struct row *out)
{
	struct gh_audit_filter f;
	struct gh_err e;
	int64_t next;

	memset(&f, 0, sizeof(f));
	memset(out, 0, sizeof(*out));
	f.event = event;
	if (gh_store_audit_query(t->s, &f, 0, 1, 0, take_row, out, &next, &e) != GH_OK) {
		fprintf(stderr, "  audit query: %s\n", e.msg);
		return -1;
	}
	return out->found ? 0 : -1;
}

static void key_fill(struct gh_key *k, const char *policy, int admin)
{
	memset(k, 0, sizeof(*k));
	gh_strlcpy(k->id, "key_1", sizeof(k->id));
	gh_strlcpy(k->name, "ci", sizeof(k->name));
	gh_strlcpy(k->owner, "team-a", sizeof(k->owner));
	gh_strlcpy(k->policy, policy, sizeof(k->policy));
	gh_strlcpy(k->prefix, "gh_AbCd", sizeof(k->prefix));
	k->admin = admin;
}

static void test_key_actions(void)
{
	struct t_store t;
	struct gh_key k;
	struct gh_err e;
	struct row w;
	struct gh_audit_verify rep;
	struct gh_admin_action cli = {.event = "key_created", .via = "cli", .admin_user = "cli"};
	struct gh_admin_action api = {.event = "key_revoked", .via = "api", .by = "key:key_0"};

	T_EQ_INT(t_store_open(&t), 0);
	key_fill(&k, "", 0);
	cli.key = &k;
	T_EQ_INT(gh_admin_audit(t.s, &cli, &e), GH_OK);
	T_EQ_INT(newest(&t, "key_created", &w), 0);
	T_EQ_STR(w.key_id, "key_1");
	T_EQ_STR(w.owner, "team-a");
	T_EQ_STR(w.admin_user, "cli");
	T_EQ_STR(w.source, "admin");
	T_EQ_STR(w.outcome, "ok");
	T_EQ_STR(w.reason, "(null)");
	T_EQ_INT(w.duration_ms, -1);
	/* canonical: keys sorted, no spaces; an empty policy is "default" */
	T_EQ_STR(w.detail, "{\"name\":\"ci\",\"policy\":\"default\",\"prefix\":\"gh_AbCd\","
		 "\"role\":\"user\",\"via\":\"cli\"}");

	key_fill(&k, "ops", 1);
	api.key = &k;
	T_EQ_INT(gh_admin_audit(t.s, &api, &e), GH_OK);
	T_EQ_INT(newest(&t, "key_revoked", &w), 0);
	T_EQ_STR(w.admin_user, "(null)");
	T_EQ_STR(w.detail, "{\"by\":\"key:key_0\",\"name\":\"ci\",\"policy\":\"ops\","
		 "\"prefix\":\"gh_AbCd\",\"role\":\"admin\",\"via\":\"api\"}");

	T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.rows, 2);
	t_store_close(&t);
}

static void test_failed_login(void)
{
	struct t_store t;
	struct gh_err e;
	struct row w;
	struct gh_admin_action a = {.event = "admin_login_failed", .via = "web",
				    .outcome = "denied", .reason = "wrong password",
				    .address = "127.0.0.1", .user = "mallory"};
	struct gh_admin_action cli = {.event = "admin_created", .via = "cli", .admin_user = "cli",
				      .reason = "alice"};

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_admin_audit(t.s, &a, &e), GH_OK);
	T_EQ_INT(newest(&t, "admin_login_failed", &w), 0);
	T_EQ_STR(w.key_id, "(null)");
	T_EQ_STR(w.owner, "(null)");
	T_EQ_STR(w.admin_user, "(null)");
	T_EQ_STR(w.outcome, "denied");
	T_EQ_STR(w.reason, "wrong password");
	T_EQ_STR(w.detail, "{\"address\":\"127.0.0.1\",\"user\":\"mallory\",\"via\":\"web\"}");

	T_EQ_INT(gh_admin_audit(t.s, &cli, &e), GH_OK);
	T_EQ_INT(newest(&t, "admin_created", &w), 0);
	T_EQ_STR(w.reason, "alice");
	T_EQ_STR(w.detail, "{\"via\":\"cli\"}");
	t_store_close(&t);
}

T_MAIN(T(test_key_actions), T(test_failed_login))
