/*
 * test_store_mcp.c - tool-definition pins of upstream MCP servers: first
 * sight pins, a changed definition is held, an admin accepts exactly the
 * definition reviewed (or rejects it), every event in the same
 * transaction as its audit row; upstream states for `gatehouse mcp list`.
 */
#include "t.h"
#include "t_store.h"

#include "store_mcp.h"

struct events {
	int n;
	char names[8][32];
};

static int audit_cb(void *ud, const struct gh_audit_row *r)
{
	struct events *ev = ud;

	if (ev->n < 8)
		gh_strlcpy(ev->names[ev->n], r->ev->event ? r->ev->event : "",
			   sizeof(ev->names[0]));
	ev->n++;
	return 0;
}

static struct gh_audit_event event(const char *name)
{
	struct gh_audit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = name;
	ev.source = "admin";
	ev.tool_name = "e_echo";
	ev.outcome = "ok";
	ev.duration_ms = -1;
	return ev;
}

static int count_cb(void *ud, const struct gh_mcp_pin *p)
{
	(void)p;
	(*(int *)ud)++;
	return 0;
}

static void test_pin_lifecycle(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_mcp_pin p;
	struct gh_audit_event pinned = event("mcp_tool_pinned"), changed = event("mcp_tool_changed"),
			      accepted = event("mcp_tool_accepted"),
			      rejected = event("mcp_tool_rejected");
	struct events seen = {0};
	int n = 0;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_mcp_pin_get(t.s, "e", "echo", &p, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_mcp_pin_insert(t.s, "e", "echo", "aaaa", "{\"name\":\"echo\"}", &pinned,
					 &e), GH_OK);
	/* pinned once only */
	T_EQ_INT(gh_store_mcp_pin_insert(t.s, "e", "echo", "bbbb", "{}", &pinned, &e),
		 GH_E_CONFLICT);
	T_EQ_INT(gh_store_mcp_pin_get(t.s, "e", "echo", &p, &e), GH_OK);
	T_EQ_STR(p.digest, "aaaa");
	T_EQ_STR(p.definition, "{\"name\":\"echo\"}");
	T_EQ_STR(p.pending_digest, "");
	T_EQ_STR(p.accepted_by, "");
	gh_mcp_pin_clear(&p);

	/* nothing to decide yet */
	T_EQ_INT(gh_store_mcp_pin_decide(t.s, "e", "echo", NULL, 1, "cli", &accepted, &e),
		 GH_E_CONFLICT);
	T_EQ_INT(gh_store_mcp_pin_decide(t.s, "e", "nope", NULL, 1, "cli", &accepted, &e),
		 GH_E_NOTFOUND);
	/* a change is held, once: the same definition again writes nothing */
	T_EQ_INT(gh_store_mcp_pin_hold(t.s, "e", "echo", "aaaa", "bbbb", "{\"v\":2}", &changed,
				       &e), GH_OK);
	T_EQ_INT(gh_store_mcp_pin_hold(t.s, "e", "echo", "aaaa", "bbbb", "{\"v\":2}", &changed,
				       &e), GH_E_CONFLICT);
	/* a hold against a stale pin is refused */
	T_EQ_INT(gh_store_mcp_pin_hold(t.s, "e", "echo", "zzzz", "cccc", "{}", &changed, &e),
		 GH_E_CONFLICT);
	T_EQ_INT(gh_store_mcp_pin_get(t.s, "e", "echo", &p, &e), GH_OK);
	T_EQ_STR(p.pending_digest, "bbbb");
	T_EQ_STR(p.pending_status, "held");
	T_EQ_STR(p.pending_definition, "{\"v\":2}");
	T_ASSERT(p.pending_since > 0);
	gh_mcp_pin_clear(&p);

	/* reject, once; the old pin stays */
	T_EQ_INT(gh_store_mcp_pin_decide(t.s, "e", "echo", "bbbb", 0, "admin:ann", &rejected, &e),
		 GH_OK);
	T_EQ_INT(gh_store_mcp_pin_decide(t.s, "e", "echo", "bbbb", 0, "admin:ann", &rejected, &e),
		 GH_E_CONFLICT);
	T_EQ_INT(gh_store_mcp_pin_get(t.s, "e", "echo", &p, &e), GH_OK);
	T_EQ_STR(p.digest, "aaaa");
	T_EQ_STR(p.pending_status, "rejected");
	T_EQ_STR(p.rejected_by, "admin:ann");
	gh_mcp_pin_clear(&p);

	/* accepting another digest than the pending one is refused */
	T_EQ_INT(gh_store_mcp_pin_decide(t.s, "e", "echo", "cccc", 1, "cli", &accepted, &e),
		 GH_E_CONFLICT);
	T_CONTAINS(e.msg, "review it again");
	T_EQ_INT(gh_store_mcp_pin_decide(t.s, "e", "echo", "bbbb", 1, "cli", &accepted, &e),
		 GH_OK);
	T_EQ_INT(gh_store_mcp_pin_get(t.s, "e", "echo", &p, &e), GH_OK);
	T_EQ_STR(p.digest, "bbbb");
	T_EQ_STR(p.definition, "{\"v\":2}");
	T_EQ_STR(p.accepted_by, "cli");
	T_EQ_STR(p.pending_digest, "");
	T_ASSERT(p.pending_definition == NULL);
	gh_mcp_pin_clear(&p);

	/* a change that goes away again */
	T_EQ_INT(gh_store_mcp_pin_hold(t.s, "e", "echo", "bbbb", "dddd", "{}", NULL, &e), GH_OK);
	T_EQ_INT(gh_store_mcp_pin_unhold(t.s, "e", "echo", &e), GH_OK);
	T_EQ_INT(gh_store_mcp_pin_get(t.s, "e", "echo", &p, &e), GH_OK);
	T_EQ_STR(p.pending_digest, "");
	T_EQ_STR(p.digest, "bbbb");
	gh_mcp_pin_clear(&p);

	T_EQ_INT(gh_store_mcp_pin_insert(t.s, "f", "ls", "ffff", "{}", NULL, &e), GH_OK);
	T_EQ_INT(gh_store_mcp_pin_list(t.s, NULL, count_cb, &n, &e), GH_OK);
	T_EQ_INT(n, 2);
	n = 0;
	T_EQ_INT(gh_store_mcp_pin_list(t.s, "f", count_cb, &n, &e), GH_OK);
	T_EQ_INT(n, 1);

	/* every event that was written has its audit row; refused ones none */
	T_EQ_INT(gh_store_audit_scan(t.s, 1, 0, audit_cb, &seen, &e), GH_OK);
	T_EQ_INT(seen.n, 4);
	T_EQ_STR(seen.names[0], "mcp_tool_pinned");
	T_EQ_STR(seen.names[1], "mcp_tool_changed");
	T_EQ_STR(seen.names[2], "mcp_tool_rejected");
	T_EQ_STR(seen.names[3], "mcp_tool_accepted");
	t_store_close(&t);
}

struct rows {
	int n;
	struct gh_mcp_server_row last;
};

static int row_cb(void *ud, const struct gh_mcp_server_row *r)
{
	struct rows *rs = ud;

	rs->n++;
	rs->last = *r;
	return 0;
}

static void test_server_rows(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_mcp_server_row r;
	struct rows rs = {0};

	T_EQ_INT(t_store_open(&t), 0);
	memset(&r, 0, sizeof(r));
	gh_strlcpy(r.name, "everything", sizeof(r.name));
	gh_strlcpy(r.transport, "stdio", sizeof(r.transport));
	gh_strlcpy(r.state, "failing", sizeof(r.state));
	gh_strlcpy(r.last_error, "exited with status 1", sizeof(r.last_error));
	r.next_retry_at = 1234;
	gh_store_mcp_server_put(t.s, &r);
	gh_strlcpy(r.state, "connected", sizeof(r.state));
	r.last_error[0] = '\0';
	r.next_retry_at = 0;
	gh_strlcpy(r.session, "pid 42", sizeof(r.session));
	r.tools = 12;
	gh_store_mcp_server_put(t.s, &r);
	/* the puts are asynchronous; a synchronous write behind them orders */
	T_EQ_INT(gh_store_mcp_pin_insert(t.s, "x", "y", "d", "{}", NULL, &e), GH_OK);
	T_EQ_INT(gh_store_mcp_server_list(t.s, row_cb, &rs, &e), GH_OK);
	T_EQ_INT(rs.n, 1);
	T_EQ_STR(rs.last.state, "connected");
	T_EQ_STR(rs.last.last_error, "");
	T_EQ_INT(rs.last.next_retry_at, 0);
	T_EQ_STR(rs.last.session, "pid 42");
	T_EQ_INT(rs.last.tools, 12);
	T_ASSERT(rs.last.updated_at > 0);
	t_store_close(&t);
}

T_MAIN(T(test_pin_lifecycle), T(test_server_rows))
