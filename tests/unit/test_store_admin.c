/*
 * test_store_admin.c - admin accounts in the store: create, disable,
 * enable and a new password, each with its audit row in the same
 * transaction (a row that cannot be written undoes the change), the
 * sessions each change ends (a password change may keep the one session
 * it came from), and the errors for an unknown or unchanged account.
 */
#include <stdio.h>
#include <string.h>

#include "audit_verify.h"
#include "t.h"
#include "t_store.h"

static struct gh_audit_event row(const char *event)
{
	struct gh_audit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = event;
	ev.admin_user = "cli";
	ev.source = "admin";
	ev.outcome = "ok";
	ev.duration_ms = -1;
	return ev;
}

static int64_t audit_rows(struct t_store *t)
{
	int64_t first = 0, last = 0, count = 0;
	struct gh_err e;

	if (gh_store_audit_bounds(t->s, &first, &last, &count, &e) != GH_OK)
		return -1;
	return count;
}

static int session(struct t_store *t, const char *user, unsigned char h[32])
{
	struct gh_err e;

	randombytes_buf(h, 32);
	return gh_store_session_create(t->s, h, user, "csrf", gh_now_ms() + 60000, "127.0.0.1",
				       &e) == GH_OK ? 0 : -1;
}

static int alive(struct t_store *t, const unsigned char h[32])
{
	struct gh_admin_session s;
	struct gh_err e;

	return gh_store_session_peek(t->s, h, &s, &e) == GH_OK;
}

static void test_changes_are_audited_with_the_change(void)
{
	struct t_store t;
	struct gh_audit_event ev = row("admin_created"), bad = row(NULL);
	struct gh_admin_user u;
	struct gh_err e;
	int ended = -1;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_admin_create(t.s, "alice", "hash-1", &ev, &e), GH_OK);
	T_EQ_INT(audit_rows(&t), 1);
	/* an audit row that cannot be written (no event) undoes the change */
	T_ASSERT(gh_store_admin_create(t.s, "bob", "hash-b", &bad, &e) != GH_OK);
	T_EQ_INT(gh_store_admin_get(t.s, "bob", &u, &e), GH_E_NOTFOUND);
	T_ASSERT(gh_store_admin_set_password(t.s, "alice", "hash-2", NULL, &bad, &ended, &e) !=
		 GH_OK);
	T_EQ_INT(gh_store_admin_get(t.s, "alice", &u, &e), GH_OK);
	T_EQ_STR(u.password_hash, "hash-1");
	T_ASSERT(gh_store_admin_disable(t.s, "alice", &bad, NULL, &e) != GH_OK);
	T_EQ_INT(gh_store_admin_get(t.s, "alice", &u, &e), GH_OK);
	T_EQ_INT(u.disabled_at, 0);
	T_EQ_INT(audit_rows(&t), 1);
	ev = row("admin_password_changed");
	T_EQ_INT(gh_store_admin_set_password(t.s, "alice", "hash-2", NULL, &ev, &ended, &e), GH_OK);
	T_EQ_INT(gh_store_admin_get(t.s, "alice", &u, &e), GH_OK);
	T_EQ_STR(u.password_hash, "hash-2");
	T_EQ_INT(audit_rows(&t), 2);
	/* the refused changes left no gap or stray row in the chain */
	{
		struct gh_audit_verify rep;

		T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
		T_ASSERT(rep.chain_ok);
		T_EQ_INT(rep.rows, 2);
	}
	t_store_close(&t);
}

static void test_password_change_ends_the_other_sessions(void)
{
	struct t_store t;
	unsigned char mine[32], other[32], bobs[32];
	struct gh_err e;
	int ended = -1;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_admin_create(t.s, "alice", "h", NULL, &e), GH_OK);
	T_EQ_INT(gh_store_admin_create(t.s, "bob", "h", NULL, &e), GH_OK);
	T_EQ_INT(session(&t, "alice", mine), 0);
	T_EQ_INT(session(&t, "alice", other), 0);
	T_EQ_INT(session(&t, "bob", bobs), 0);
	T_EQ_INT(gh_store_admin_set_password(t.s, "alice", "h2", mine, NULL, &ended, &e), GH_OK);
	T_EQ_INT(ended, 1);
	T_ASSERT(alive(&t, mine));
	T_ASSERT(!alive(&t, other));
	T_ASSERT(alive(&t, bobs));
	/* without a session to keep (an operator's reset) every one ends */
	T_EQ_INT(gh_store_admin_set_password(t.s, "alice", "h3", NULL, NULL, &ended, &e), GH_OK);
	T_EQ_INT(ended, 1);
	T_ASSERT(!alive(&t, mine));
	T_ASSERT(alive(&t, bobs));
	T_EQ_INT(gh_store_admin_set_password(t.s, "carol", "h", NULL, NULL, &ended, &e),
		 GH_E_NOTFOUND);
	T_CONTAINS(e.msg, "no admin \"carol\"");
	t_store_close(&t);
}

static void test_disable_and_enable(void)
{
	struct t_store t;
	unsigned char h[32];
	struct gh_admin_user u;
	struct gh_err e;
	int ended = -1;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_admin_create(t.s, "alice", "h", NULL, &e), GH_OK);
	T_EQ_INT(session(&t, "alice", h), 0);
	T_EQ_INT(gh_store_admin_enable(t.s, "alice", NULL, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "admin \"alice\" is not disabled");
	T_EQ_INT(gh_store_admin_disable(t.s, "alice", NULL, &ended, &e), GH_OK);
	T_EQ_INT(ended, 1);
	T_ASSERT(!alive(&t, h));
	T_EQ_INT(gh_store_admin_disable(t.s, "alice", NULL, &ended, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "admin \"alice\" is disabled already");
	T_EQ_INT(gh_store_admin_enable(t.s, "alice", NULL, &e), GH_OK);
	T_EQ_INT(gh_store_admin_get(t.s, "alice", &u, &e), GH_OK);
	T_EQ_INT(u.disabled_at, 0);
	T_EQ_INT(gh_store_admin_enable(t.s, "nobody", NULL, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_admin_disable(t.s, "nobody", NULL, NULL, &e), GH_E_NOTFOUND);
	t_store_close(&t);
}

T_MAIN(T(test_changes_are_audited_with_the_change),
       T(test_password_change_ends_the_other_sessions), T(test_disable_and_enable))
