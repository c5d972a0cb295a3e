/*
 * cli_policy.c - gatehouse policy test: the tool decisions recorded in the
 * audit log, decided again under a candidate config (policy_test.h), as a
 * table or JSON.
 *
 * Reads through a read-only connection, so it is safe beside a running
 * server. Exit codes differ from the other commands, like diff(1): 0 no
 * call would change, 1 some would, 2 an error (usage, config, database).
 */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "json.h"
#include "policy_test.h"
#include "util.h"

enum { EXIT_SAME = 0, EXIT_CHANGED = 1, EXIT_ERROR = 2 };

static const char usage_policy[] =
	"usage: gatehouse policy test CANDIDATE.json [--config CURRENT.json] [--db PATH]\n"
	"                             [--since 7d|12h|30m|TIME] [--json]\n"
	"\n"
	"Replays the tool decisions recorded in the audit log (allowed, denied,\n"
	"rate_limited, approval_requested) since --since (default 7d; or an ISO-8601\n"
	"UTC time or Unix ms) against CANDIDATE.json with the gate's own decision\n"
	"functions, and prints the calls whose outcome would change (allowed ->\n"
	"denied, allowed -> approval, and back), counted per rule. A call whose\n"
	"decision reads an argument the log stores redacted or truncated is\n"
	"reported undecidable. Rate limits are not replayed: a call recorded\n"
	"rate_limited changes only when the candidate denies it.\n"
	"  --config  the config the server runs (its database); default: the\n"
	"            candidate's database.path\n"
	"  --json    the report as one JSON object (as POST /api/admin/policy/test)\n"
	"Exit codes: 0 no call would change, 1 some would, 2 error.\n";

static const char *str_or(const cJSON *o, const char *k, const char *dflt)
{
	const char *s = gh_json_str(o, k);

	return s ? s : dflt;
}

static void print_calls(const cJSON *list, int changes)
{
	const cJSON *c;

	if (changes)
		printf("  %-8s %-24s %-28s %-14s %-22s %-12s %-9s %s\n", "SEQ", "TIME", "KEY",
		       "AGENT", "TOOL", "BEFORE", "AFTER", "RULE");
	else
		printf("  %-8s %-24s %-28s %-14s %-22s %-12s %s\n", "SEQ", "TIME", "KEY", "AGENT",
		       "TOOL", "BEFORE", "WHY");
	cJSON_ArrayForEach(c, list) {
		printf("  %-8lld %-24s %-28s %-14s %-22s %-12s ", (long long)gh_json_int(c, "seq", 0),
		       str_or(c, "time", "-"), str_or(c, "key", "-"), str_or(c, "agent", "-"),
		       str_or(c, "tool", "-"), str_or(c, "before", "-"));
		if (changes)
			printf("%-9s %s\n", str_or(c, "after", "-"), str_or(c, "rule", ""));
		else
			printf("%s\n", str_or(c, "why", ""));
	}
}

static void print_report(const cJSON *r)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "totals");
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(r, "gone");
	const cJSON *x, *y;
	int64_t listmax = gh_json_int(r, "listMax", 0);
	int64_t changed = gh_json_int(t, "changed", 0), undec = gh_json_int(t, "undecidable", 0);

	printf("policy test: %s against %lld tool decisions recorded since %s\n\n",
	       str_or(r, "candidate", "-"), (long long)gh_json_int(t, "decisions", 0),
	       str_or(r, "since", "the start of the log"));
	printf("CHANGED: %lld call%s would change outcome\n", (long long)changed,
	       changed == 1 ? "" : "s");
	if (changed) {
		print_calls(cJSON_GetObjectItemCaseSensitive(r, "changes"), 1);
		if (changed > listmax)
			printf("  (the first %lld listed)\n", (long long)listmax);
		printf("\nPER RULE\n  %-8s %-36s %s\n", "CHANGED", "TRANSITIONS", "RULE");
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "rules")) {
			char tr[256];
			size_t used = 0;

			tr[0] = '\0';
			cJSON_ArrayForEach(y, cJSON_GetObjectItemCaseSensitive(x, "transitions"))
				if (used < sizeof(tr))
					used += (size_t)snprintf(tr + used, sizeof(tr) - used, "%s%s: %lld",
								 used ? ", " : "", y->string,
								 (long long)y->valuedouble);
			printf("  %-8lld %-36s %s\n", (long long)gh_json_int(x, "changed", 0), tr,
			       str_or(x, "rule", ""));
		}
	}
	printf("\nUNDECIDABLE: %lld call%s\n", (long long)undec, undec == 1 ? "" : "s");
	if (undec) {
		print_calls(cJSON_GetObjectItemCaseSensitive(r, "undecidable"), 0);
		if (undec > listmax)
			printf("  (the first %lld listed)\n", (long long)listmax);
		printf("  per rule:\n");
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "undecidableRules"))
			printf("  %-8lld %s\n", (long long)gh_json_int(x, "calls", 0),
			       str_or(x, "rule", ""));
	}
	x = cJSON_GetObjectItemCaseSensitive(g, "agents");
	if (cJSON_GetArraySize(x) || cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(g, "keys")) ||
	    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(g, "policies"))) {
		printf("\nGONE\n");
		cJSON_ArrayForEach(y, x)
			printf("  agent \"%s\": %lld call%s; the candidate has no such agent (its calls "
			       "would be refused)\n", str_or(y, "agent", "-"),
			       (long long)gh_json_int(y, "calls", 0),
			       gh_json_int(y, "calls", 0) == 1 ? "" : "s");
		cJSON_ArrayForEach(y, cJSON_GetObjectItemCaseSensitive(g, "keys"))
			printf("  key %s: %lld call%s; revoked or deleted since (not replayed)\n",
			       str_or(y, "key", "-"), (long long)gh_json_int(y, "calls", 0),
			       gh_json_int(y, "calls", 0) == 1 ? "" : "s");
		cJSON_ArrayForEach(y, cJSON_GetObjectItemCaseSensitive(g, "policies"))
			printf("  key %s (%s) runs under policy \"%s\", which the candidate does not "
			       "have: no policy would apply to it\n", str_or(y, "key", "-"),
			       str_or(y, "name", "-"), str_or(y, "policy", "-"));
	}
	printf("\nTOTAL: %lld decisions: %lld unchanged, %lld changed, %lld undecidable, %lld by "
	       "keys revoked since; %lld recorded rate_limited and not replayed\n",
	       (long long)gh_json_int(t, "decisions", 0), (long long)gh_json_int(t, "unchanged", 0),
	       (long long)changed, (long long)undec, (long long)gh_json_int(t, "keyGone", 0),
	       (long long)gh_json_int(t, "rateLimitedNotReplayed", 0));
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "notes"))
		printf("note: %s\n", cJSON_IsString(x) ? x->valuestring : "");
}

static int policy_test(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *since = NULL, *cand_path = NULL;
	int json = 0, help, rc = EXIT_ERROR;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
			     {"--since", 1, &since, NULL},     {"--json", 0, NULL, &json},
			     {0}};
	struct gh_config *cand = NULL;
	struct gh_store *s = NULL;
	struct gh_err e;
	cJSON *report = NULL;
	int64_t since_ms = 0;

	if (argc > 3 && argv[3][0] != '-')
		cand_path = argv[3];
	if (gh_cli_parse(argc, argv, cand_path ? 4 : 3, opts, usage_policy, &help) != 0)
		return help ? EXIT_SAME : EXIT_ERROR;
	if (!cand_path) {
		fprintf(stderr, "gatehouse: policy test needs CANDIDATE.json\n\n%s", usage_policy);
		return EXIT_ERROR;
	}
	if (gh_ptest_parse_since(since ? since : "7d", gh_now_ms(), &since_ms) != 0) {
		fprintf(stderr, "gatehouse: --since: expected 7d, 12h, 30m, 90s, an ISO-8601 UTC "
			"time or Unix ms, got \"%s\"\n", since);
		return EXIT_ERROR;
	}
	if (gh_config_load(cand_path, &cand, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: the candidate is not a valid config: %s\n", e.msg);
		return EXIT_ERROR;
	}
	if (!c.config)
		c.config = cand_path;
	if (gh_cli_load(&c) != GH_EXIT_OK || !(s = gh_cli_store(&c, 1, NULL)))
		goto out;
	if (gh_ptest_run(s, cand, NULL, cand_path, since_ms, &report, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (json) {
		char *text = cJSON_PrintUnformatted(report);

		if (!text) {
			fprintf(stderr, "gatehouse: out of memory\n");
			goto out;
		}
		printf("%s\n", text);
		cJSON_free(text);
	} else {
		print_report(report);
	}
	fflush(stdout);
	rc = gh_json_int(cJSON_GetObjectItemCaseSensitive(report, "totals"), "changed", 0)
		     ? EXIT_CHANGED
		     : EXIT_SAME;
out:
	cJSON_Delete(report);
	gh_store_close(s);
	gh_config_free(cand);
	gh_cli_free(&c);
	return rc;
}

int gh_cmd_policy(int argc, char **argv)
{
	static const struct gh_cli_sub subs[] = {{"test", policy_test}, {NULL, NULL}};

	return gh_cli_dispatch(argc, argv, "policy", subs, usage_policy);
}
