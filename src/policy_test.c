/*
 * policy_test.c - recorded tool decisions replayed under a candidate
 * config; see policy_test.h.
 *
 * The report is built in one pass over the audit log from the given time,
 * a page of rows at a time: counts are kept for every call, the calls
 * themselves only up to GH_PTEST_LIST_MAX per list, so memory does not
 * grow with the log. Per call, on the caller's thread.
 */
#include "policy_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "json.h"
#include "mcp.h"
#include "policy.h"
#include "tools.h"
#include "util.h"

#define PAGE_ROWS 500
#define KEY_CACHE_MAX 4096

int gh_ptest_is_gate_row(const struct gh_audit_event *ev)
{
	static const char *const gate[] = {"allowed", "denied", "rate_limited",
					   "approval_requested", NULL};
	cJSON *d;
	int by_gate;

	if (!ev->event || !gh_str_in(gate, ev->event) || !ev->tool_name || !ev->agent_id)
		return 0;
	if (ev->source && (!strcmp(ev->source, "admin") || !strcmp(ev->source, "system")))
		return 0;
	if (!strcmp(ev->event, "approval_requested") || !ev->detail)
		return 1;
	/* a reviewer's "denied" names who decided; the refusal of an approved
	 * call at its resumption carries the approval it followed (that call's
	 * gate decision is its approval_requested row) */
	d = gh_json_parse_stored(ev->detail);
	by_gate = !cJSON_GetObjectItemCaseSensitive(d, "decided_by") &&
		  !cJSON_GetObjectItemCaseSensitive(d, "approval_id");
	cJSON_Delete(d);
	return by_gate;
}

static const char *before_word(const char *event)
{
	if (!strcmp(event, "allowed"))
		return "allowed";
	if (!strcmp(event, "approval_requested"))
		return "approval";
	if (!strcmp(event, "rate_limited"))
		return "rate_limited";
	return "denied";
}

static const char *verdict_word(enum gh_verdict v)
{
	return v == GH_V_ALLOW ? "allowed" : v == GH_V_DENY ? "denied" : "approval";
}

/* The arguments as stored, or NULL when they were stored truncated (or
 * cannot be read): then no argument condition can be answered. */
static cJSON *stored_args(const char *text)
{
	cJSON *a = text ? gh_json_parse_stored(text) : NULL;

	if (a && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "truncated")) &&
	    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(a, "blake2b"))) {
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

static void undecidable(struct gh_ptest_verdict *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void undecidable(struct gh_ptest_verdict *out, const char *fmt, ...)
{
	va_list ap;

	out->kind = GH_PT_UNDECIDABLE;
	out->after = NULL;
	va_start(ap, fmt);
	vsnprintf(out->rule, sizeof(out->rule), fmt, ap);
	va_end(ap);
}

/* Whether the client declared its tool requireApproval, as far as the row
 * tells: 1, 0, or -1 unknown. An allowed call did not (the flag asks for
 * approval whenever the policy allows); an approval the gate asked for
 * naming the declaration did. */
static int client_flag(const struct gh_ptest_call *c)
{
	if (!strcmp(c->event, "allowed"))
		return 0;
	if (!strcmp(c->event, "approval_requested") && c->reason &&
	    strstr(c->reason, "declares requireApproval"))
		return 1;
	return -1;
}

/* The tool's decision under the candidate (gh_tools_decide, as the gate's
 * tool set has it), then its argument conditions. */
static void decide_tool(const struct gh_config *cand, struct gh_mcp *mcp,
			const struct gh_agent_conf *a, const struct gh_policy_conf *p,
			const struct gh_ptest_call *c, struct gh_ptest_verdict *out,
			struct gh_decision *d)
{
	const char *src = c->source ? c->source : "server";
	int client = !strcmp(src, "client"), flag = client ? client_flag(c) : 0;
	cJSON *detail = c->detail ? gh_json_parse_stored(c->detail) : NULL;
	int federated = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(detail, "mcp"));
	struct gh_mcp_tool *mt = NULL;
	cJSON *defs = NULL, *args = NULL;
	const struct gh_arg_rule *unknown = NULL;
	struct gh_tool_verdict v;

	cJSON_Delete(detail);
	if (federated && !(mt = gh_mcp_tool_find(mcp, c->tool))) {
		undecidable(out, "federated MCP tool \"%.64s\": its definition is known only to a "
			    "running gatehouse that publishes it now", c->tool);
		return;
	}
	if (client) {
		cJSON *def;

		defs = cJSON_CreateArray();
		def = cJSON_CreateObject();
		if (!defs || !def) {
			cJSON_Delete(def);
			undecidable(out, "out of memory");
			goto out;
		}
		cJSON_AddItemToArray(defs, def);
		cJSON_AddStringToObject(def, "name", c->tool);
		cJSON_AddBoolToObject(def, "requireApproval", flag == 1);
	}
	gh_tools_decide(cand, mt, a, p, c->tool, defs, &v);
	*d = v.d;
	if (strcmp(src, gh_tool_source_name(v.src))) {
		/* the run's tool set would not have it as the tool it was */
		d->verdict = GH_V_DENY;
		if (client)
			snprintf(d->rule, sizeof(d->rule), "client tool \"%.64s\" would collide with "
				 "the candidate's %s tool of that name", c->tool,
				 gh_tool_source_name(v.src));
		else
			snprintf(d->rule, sizeof(d->rule), "unknown tool: the candidate has no %s "
				 "tool \"%.64s\"", src, c->tool);
		goto out;
	}
	args = stored_args(c->args);
	if (gh_policy_args_recorded(p, c->tool, args, d, &unknown)) {
		char name[96];

		if (unknown->name)
			snprintf(name, sizeof(name), "arguments \"%.60s\"", unknown->name);
		else
			snprintf(name, sizeof(name), "arguments[%zu]", unknown->index);
		if (args)
			undecidable(out, "policy \"%.64s\": %s reads %s, which the audit log stores "
				    "redacted (audit.redact)", p->name, name,
				    unknown->pointer[0] ? unknown->pointer : "the whole arguments");
		else
			undecidable(out, "policy \"%.64s\": %s reads the arguments, which the audit "
				    "log stores truncated (audit.max_args_bytes)", p->name, name);
		goto out;
	}
	if (client && flag < 0 && d->verdict == GH_V_ALLOW)
		undecidable(out, "client tool \"%.64s\": the log does not say whether the client "
			    "declared it requireApproval", c->tool);
out:
	cJSON_Delete(args);
	cJSON_Delete(defs);
	gh_mcp_tool_unref(mt);
}

void gh_ptest_decide(const struct gh_config *cand, struct gh_mcp *mcp, const struct gh_key *k,
		     const struct gh_ptest_call *c, struct gh_ptest_verdict *out)
{
	const struct gh_policy_conf *p;
	const struct gh_agent_conf *a;
	struct gh_decision d;

	memset(out, 0, sizeof(*out));
	memset(&d, 0, sizeof(d));
	out->before = before_word(c->event);
	if (c->key_id && (!k || k->revoked_at)) {
		out->kind = GH_PT_KEY_GONE;
		snprintf(out->rule, sizeof(out->rule), "key %.48s %s", c->key_id,
			 k ? "is revoked" : "no longer exists");
		return;
	}
	/* a call without a key came from an admin session, which runs under
	 * no policy (http.c) */
	p = c->key_id ? gh_policy_for_key(cand, k) : NULL;
	a = gh_config_agent(cand, c->agent_id);
	if (!a) {
		out->agent_gone = 1;
		d.verdict = GH_V_DENY;
		snprintf(d.rule, sizeof(d.rule), "agent \"%.64s\" is not in the candidate config",
			 c->agent_id);
	} else {
		gh_policy_agent(p, a->id, &d);
		if (d.verdict != GH_V_DENY) {
			decide_tool(cand, mcp, a, p, c, out, &d);
			if (out->kind == GH_PT_UNDECIDABLE)
				return;
		}
	}
	out->after = verdict_word(d.verdict);
	gh_strlcpy(out->rule, d.rule, sizeof(out->rule));
	if (!strcmp(out->before, "rate_limited"))
		/* rate limits are not replayed: only a deny changes such a call */
		out->kind = d.verdict == GH_V_DENY ? GH_PT_CHANGED : GH_PT_SAME;
	else
		out->kind = strcmp(out->before, out->after) ? GH_PT_CHANGED : GH_PT_SAME;
}

int gh_ptest_parse_since(const char *s, int64_t now_ms, int64_t *ms)
{
	size_t n = s ? strlen(s) : 0;
	int64_t v, unit;
	char num[24];

	if (!n)
		return -1;
	switch (s[n - 1]) {
	case 'd': unit = 86400000; break;
	case 'h': unit = 3600000; break;
	case 'm': unit = 60000; break;
	case 's': unit = 1000; break;
	default: unit = 0; break;
	}
	if (unit && n - 1 < sizeof(num) && n > 1) {
		memcpy(num, s, n - 1);
		num[n - 1] = '\0';
		if (gh_parse_i64(num, 0, INT64_MAX / unit, &v) != 0 || v * unit > now_ms)
			return -1;
		*ms = now_ms - v * unit;
		return 0;
	}
	if (gh_parse_time(s, &v) != 0 || v < 0)
		return -1;
	*ms = v;
	return 0;
}

/* ------------------------------------------------------------ the report */

struct key_slot {
	char id[48];
	int found;
	struct gh_key k;
};

struct report {
	struct gh_store *s;
	const struct gh_config *cand;
	struct gh_mcp *mcp;
	cJSON *page;                     /* the gate rows of the page being read */
	cJSON *changes, *undec, *trans, *rules, *undec_rules, *gone_agents, *gone_keys;
	cJSON *policies;
	int64_t n, same, changed, undecidable, key_gone, rl_kept, rows;
	struct key_slot *keys;
	size_t nkeys;
	int oom;
};

static int keep_row(void *ud, const struct gh_audit_row *r)
{
	struct report *rp = ud;
	const struct gh_audit_event *ev = r->ev;
	cJSON *o;

	rp->rows++;
	if (!gh_ptest_is_gate_row(ev))
		return 0;
	if (!(o = cJSON_CreateObject())) {
		rp->oom = 1;
		return 1;
	}
	cJSON_AddItemToArray(rp->page, o);
	cJSON_AddNumberToObject(o, "seq", (double)r->seq);
	cJSON_AddNumberToObject(o, "ts", (double)ev->ts);
	gh_json_add_str(o, "event", ev->event);
	gh_json_add_str(o, "key", ev->key_id);
	gh_json_add_str(o, "agent", ev->agent_id);
	gh_json_add_str(o, "tool", ev->tool_name);
	gh_json_add_str(o, "source", ev->source);
	gh_json_add_str(o, "reason", ev->reason);
	gh_json_add_str(o, "args", ev->args);
	gh_json_add_str(o, "detail", ev->detail);
	return 0;
}

/* The key of id (cached per report); NULL when it no longer exists. */
static const struct gh_key *key_of(struct report *rp, const char *id, struct gh_err *e)
{
	struct key_slot *ks;
	size_t i;
	struct gh_err ke;

	if (!id)
		return NULL;
	for (i = 0; i < rp->nkeys; i++)
		if (!strcmp(rp->keys[i].id, id))
			return rp->keys[i].found ? &rp->keys[i].k : NULL;
	if (rp->nkeys == KEY_CACHE_MAX)
		return NULL; /* never reached by a real deployment: counted as gone */
	if (!(ks = realloc(rp->keys, (rp->nkeys + 1) * sizeof(*ks)))) {
		rp->oom = 1;
		return NULL;
	}
	rp->keys = ks;
	ks = &rp->keys[rp->nkeys++];
	memset(ks, 0, sizeof(*ks));
	gh_strlcpy(ks->id, id, sizeof(ks->id));
	if (gh_store_key_by_id(rp->s, id, &ks->k, &ke) == GH_OK) {
		ks->found = 1;
		if (ks->k.policy[0] && !gh_config_policy(rp->cand, ks->k.policy)) {
			cJSON *o = cJSON_CreateObject();

			cJSON_AddItemToArray(rp->policies, o);
			cJSON_AddStringToObject(o, "key", ks->k.id);
			cJSON_AddStringToObject(o, "name", ks->k.name);
			cJSON_AddStringToObject(o, "policy", ks->k.policy);
		}
	} else if (ke.code != GH_E_NOTFOUND) {
		*e = ke;
		return NULL;
	}
	return ks->found ? &ks->k : NULL;
}

static void bump(cJSON *map, const char *name)
{
	cJSON *n = cJSON_GetObjectItemCaseSensitive(map, name);

	if (n)
		cJSON_SetNumberValue(n, n->valuedouble + 1);
	else
		cJSON_AddNumberToObject(map, name, 1);
}

static cJSON *listed(const struct gh_ptest_call *c)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "seq", (double)c->seq);
	gh_json_add_time(o, "time", c->ts);
	gh_json_add_str(o, "key", c->key_id);
	gh_json_add_str(o, "agent", c->agent_id);
	gh_json_add_str(o, "tool", c->tool);
	return o;
}

static void count(struct report *rp, const struct gh_ptest_call *c,
		  const struct gh_ptest_verdict *v)
{
	char tr[64];
	cJSON *o, *r;

	rp->n++;
	if (v->agent_gone)
		bump(rp->gone_agents, c->agent_id);
	switch (v->kind) {
	case GH_PT_KEY_GONE:
		rp->key_gone++;
		bump(rp->gone_keys, c->key_id ? c->key_id : "-");
		return;
	case GH_PT_SAME:
		rp->same++;
		if (!strcmp(v->before, "rate_limited"))
			rp->rl_kept++;
		return;
	case GH_PT_UNDECIDABLE:
		rp->undecidable++;
		bump(rp->undec_rules, v->rule);
		if (cJSON_GetArraySize(rp->undec) < GH_PTEST_LIST_MAX) {
			o = listed(c);
			cJSON_AddStringToObject(o, "before", v->before);
			cJSON_AddStringToObject(o, "why", v->rule);
			cJSON_AddItemToArray(rp->undec, o);
		}
		return;
	case GH_PT_CHANGED:
		break;
	}
	rp->changed++;
	snprintf(tr, sizeof(tr), "%s -> %s", v->before, v->after);
	bump(rp->trans, tr);
	if (!(r = cJSON_GetObjectItemCaseSensitive(rp->rules, v->rule))) {
		r = cJSON_AddObjectToObject(rp->rules, v->rule);
		cJSON_AddObjectToObject(r, "transitions");
	}
	bump(cJSON_GetObjectItemCaseSensitive(r, "transitions"), tr);
	if (cJSON_GetArraySize(rp->changes) < GH_PTEST_LIST_MAX) {
		o = listed(c);
		cJSON_AddStringToObject(o, "before", v->before);
		cJSON_AddStringToObject(o, "after", v->after);
		cJSON_AddStringToObject(o, "rule", v->rule);
		gh_json_add_str(o, "recordedRule", c->reason);
		cJSON_AddItemToArray(rp->changes, o);
	}
}

static enum gh_code replay_page(struct report *rp, struct gh_err *e)
{
	cJSON *o;

	cJSON_ArrayForEach(o, rp->page) {
		struct gh_ptest_call c = {
			.seq = gh_json_int(o, "seq", 0), .ts = gh_json_int(o, "ts", 0),
			.event = gh_json_str(o, "event"), .key_id = gh_json_str(o, "key"),
			.agent_id = gh_json_str(o, "agent"), .tool = gh_json_str(o, "tool"),
			.source = gh_json_str(o, "source"), .reason = gh_json_str(o, "reason"),
			.args = gh_json_str(o, "args"), .detail = gh_json_str(o, "detail"),
		};
		struct gh_ptest_verdict v;
		const struct gh_key *k;

		e->code = GH_OK;
		k = key_of(rp, c.key_id, e);
		if (e->code != GH_OK)
			return e->code;
		gh_ptest_decide(rp->cand, rp->mcp, k, &c, &v);
		count(rp, &c, &v);
	}
	return rp->oom ? gh_err_set(e, GH_E_NOMEM, "out of memory") : GH_OK;
}

static int by_changed(const void *x, const void *y)
{
	const cJSON *a = *(const cJSON *const *)x, *b = *(const cJSON *const *)y;
	double d = gh_json_int(b, "changed", 0) - gh_json_int(a, "changed", 0);

	return d > 0 ? 1 : d < 0 ? -1 : strcmp(gh_json_str(a, "rule"), gh_json_str(b, "rule"));
}

/* The per-rule map as [{rule, changed, transitions}], most changes first. */
static cJSON *rules_array(cJSON *rules)
{
	cJSON *arr = cJSON_CreateArray(), *r, **v;
	int n = cJSON_GetArraySize(rules), i = 0;

	if (!arr || !(v = calloc((size_t)n + 1, sizeof(*v)))) {
		cJSON_Delete(arr);
		return NULL;
	}
	while ((r = rules->child)) {
		cJSON *t = cJSON_DetachItemFromObjectCaseSensitive(r, "transitions"), *x;
		double sum = 0;
		cJSON *o = cJSON_CreateObject();

		cJSON_ArrayForEach(x, t)
			sum += x->valuedouble;
		cJSON_AddStringToObject(o, "rule", r->string);
		cJSON_AddNumberToObject(o, "changed", sum);
		cJSON_AddItemToObject(o, "transitions", t);
		cJSON_DeleteItemFromObjectCaseSensitive(rules, r->string);
		v[i++] = o;
	}
	qsort(v, (size_t)i, sizeof(*v), by_changed);
	for (n = 0; n < i; n++)
		cJSON_AddItemToArray(arr, v[n]);
	free(v);
	return arr;
}

static int by_calls(const void *x, const void *y)
{
	const cJSON *a = *(const cJSON *const *)x, *b = *(const cJSON *const *)y;

	return a->valuedouble < b->valuedouble ? 1 : a->valuedouble > b->valuedouble ? -1
										      : strcmp(a->string, b->string);
}

/* {name: n} as [{field: name, calls: n}], most first. */
static cJSON *counts_array(const cJSON *map, const char *field)
{
	cJSON *arr = cJSON_CreateArray(), *x, **v;
	size_t n = (size_t)cJSON_GetArraySize(map), i = 0;

	if (!arr || !(v = calloc(n + 1, sizeof(*v)))) {
		cJSON_Delete(arr);
		return NULL;
	}
	cJSON_ArrayForEach(x, map)
		v[i++] = x;
	qsort(v, i, sizeof(*v), by_calls);
	for (n = 0; n < i; n++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, field, v[n]->string);
		cJSON_AddNumberToObject(o, "calls", v[n]->valuedouble);
		cJSON_AddItemToArray(arr, o);
	}
	free(v);
	return arr;
}

enum gh_code gh_ptest_run(struct gh_store *s, const struct gh_config *cand, struct gh_mcp *mcp,
			  const char *candidate_name, int64_t since_ms, cJSON **out,
			  struct gh_err *e)
{
	struct report rp;
	struct gh_audit_filter f;
	int64_t cursor = 0, next = 0;
	enum gh_code rc = GH_OK;
	cJSON *o = NULL, *t, *g, *notes;
	int complete = 1;

	*out = NULL;
	memset(&rp, 0, sizeof(rp));
	memset(&f, 0, sizeof(f));
	rp.s = s;
	rp.cand = cand;
	rp.mcp = mcp;
	f.from_ms = since_ms;
	rp.changes = cJSON_CreateArray();
	rp.undec = cJSON_CreateArray();
	rp.trans = cJSON_CreateObject();
	rp.rules = cJSON_CreateObject();
	rp.undec_rules = cJSON_CreateObject();
	rp.gone_agents = cJSON_CreateObject();
	rp.gone_keys = cJSON_CreateObject();
	rp.policies = cJSON_CreateArray();
	if (!rp.changes || !rp.undec || !rp.trans || !rp.rules || !rp.undec_rules ||
	    !rp.gone_agents || !rp.gone_keys || !rp.policies) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	do {
		if (rp.rows >= GH_PTEST_ROWS_MAX) {
			complete = 0;
			break;
		}
		if (!(rp.page = cJSON_CreateArray())) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			goto out;
		}
		rc = gh_store_audit_query(s, &f, cursor, PAGE_ROWS, 1, keep_row, &rp, &next, e);
		if (rc == GH_OK)
			rc = rp.oom ? gh_err_set(e, GH_E_NOMEM, "out of memory")
				    : replay_page(&rp, e);
		cJSON_Delete(rp.page);
		rp.page = NULL;
		if (rc != GH_OK)
			goto out;
		cursor = next;
	} while (next);

	o = cJSON_CreateObject();
	if (!o) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	gh_json_add_str(o, "candidate", candidate_name);
	gh_json_add_time(o, "since", since_ms);
	t = cJSON_AddObjectToObject(o, "totals");
	cJSON_AddNumberToObject(t, "decisions", (double)rp.n);
	cJSON_AddNumberToObject(t, "unchanged", (double)rp.same);
	cJSON_AddNumberToObject(t, "changed", (double)rp.changed);
	cJSON_AddNumberToObject(t, "undecidable", (double)rp.undecidable);
	cJSON_AddNumberToObject(t, "keyGone", (double)rp.key_gone);
	cJSON_AddNumberToObject(t, "rateLimitedNotReplayed", (double)rp.rl_kept);
	cJSON_AddItemToObject(o, "transitions", rp.trans);
	rp.trans = NULL;
	cJSON_AddItemToObject(o, "rules", rules_array(rp.rules));
	cJSON_AddItemToObject(o, "changes", rp.changes);
	rp.changes = NULL;
	cJSON_AddItemToObject(o, "undecidable", rp.undec);
	rp.undec = NULL;
	cJSON_AddItemToObject(o, "undecidableRules", counts_array(rp.undec_rules, "rule"));
	g = cJSON_AddObjectToObject(o, "gone");
	cJSON_AddItemToObject(g, "agents", counts_array(rp.gone_agents, "agent"));
	cJSON_AddItemToObject(g, "keys", counts_array(rp.gone_keys, "key"));
	cJSON_AddItemToObject(g, "policies", rp.policies);
	rp.policies = NULL;
	cJSON_AddNumberToObject(o, "listMax", GH_PTEST_LIST_MAX);
	cJSON_AddBoolToObject(o, "complete", complete);
	notes = cJSON_AddArrayToObject(o, "notes");
	cJSON_AddItemToArray(notes, cJSON_CreateString(
		"each call is compared with the decision the gate recorded for it at the time"));
	cJSON_AddItemToArray(notes, cJSON_CreateString(
		"rate limits are not replayed: a call recorded rate_limited changes only when the "
		"candidate denies it"));
	if (!complete)
		cJSON_AddItemToArray(notes, cJSON_CreateString(
			"the audit log has more rows than one report reads: give a later --since"));
	*out = o;
	o = NULL;
out:
	cJSON_Delete(o);
	cJSON_Delete(rp.changes);
	cJSON_Delete(rp.undec);
	cJSON_Delete(rp.trans);
	cJSON_Delete(rp.rules);
	cJSON_Delete(rp.undec_rules);
	cJSON_Delete(rp.gone_agents);
	cJSON_Delete(rp.gone_keys);
	cJSON_Delete(rp.policies);
	free(rp.keys);
	return rc;
}
