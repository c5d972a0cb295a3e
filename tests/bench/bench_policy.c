/*
 * bench_policy.c - the policy gate gatehouse runs for every tool call the
 * model emits, measured in process: allowlist and approval decision
 * (gh_policy_tool), the tool's rate limit (gh_policy_tool_limit, then
 * gh_rl_take on "tool:<key id>:<tool>"), and the arguments checked against
 * the tool's JSON Schema (gh_schema_validate), in the order run.c calls them.
 *
 * The policy and agent come from a realistic config (several allow, deny and
 * approval globs, per-tool limits); the schema is a mail tool's (nested
 * objects, arrays of objects, enum, pattern, length and count bounds,
 * additionalProperties false); the limiter holds 10,000 live keys, taken
 * round-robin (with a limit far above the call rate, so every take is
 * allowed and updates its key, as for a key within its budget). Each gate
 * call is timed on its own (clock overhead measured and reported, not
 * subtracted), repeated in several runs; tables show medians over runs. The
 * same loop also runs on two threads at once, and the schema check runs
 * once more with the schema's "pattern" keywords removed, to show what the
 * patterns cost.
 *
 * Threading: the config, schema and limiter are shared read-only / through
 * the limiter's own locks, as in the server.
 */
#include <pthread.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "policy.h"
#include "ratelimit.h"
#include "schema.h"
#include "util.h"

#include "bench.h"

#define NKEYS 10000

/* A mail tool's input schema, as a configured server tool declares it. */
#define SCHEMA_TEXT                                                                          \
	"{\"type\": \"object\",\n"                                                        \
	" \"properties\": {\n"                                                              \
	"  \"to\": {\"type\": \"array\", \"minItems\": 1, \"maxItems\": 20,\n"             \
	"          \"items\": {\"type\": \"string\", \"maxLength\": 254,\n"                \
	"                    \"pattern\": \"^[^@\\\\s]+@[^@\\\\s]+\\\\.[a-z]{2,}$\"}},\n"  \
	"  \"cc\": {\"type\": \"array\",\n"                                                \
	"          \"items\": {\"type\": \"string\", \"maxLength\": 254}},\n"                \
	"  \"subject\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 200},\n"   \
	"  \"body\": {\"type\": \"string\", \"maxLength\": 20000},\n"                      \
	"  \"priority\": {\"type\": \"string\", \"enum\": [\"low\", \"normal\", \"high\"]},\n" \
	"  \"send_at\": {\"type\": [\"string\", \"null\"], \"format\": \"date-time\"},\n"   \
	"  \"attachments\": {\"type\": \"array\", \"maxItems\": 5, \"items\": {\n"           \
	"     \"type\": \"object\",\n"                                                     \
	"     \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 128},\n"      \
	"                    \"url\": {\"type\": \"string\", \"pattern\": \"^https://\"},\n"  \
	"                    \"size\": {\"type\": \"integer\", \"minimum\": 0,\n"            \
	"                             \"maximum\": 10485760}},\n"                            \
	"     \"required\": [\"name\", \"url\"], \"additionalProperties\": false}},\n"       \
	"  \"tracking\": {\"type\": \"boolean\"}},\n"                                      \
	" \"required\": [\"to\", \"subject\", \"body\"],\n"                                \
	" \"additionalProperties\": false}"

static const char config_text[] =
	"{\"server\": {\"listen\": \"127.0.0.1:0\"},\n"
	" \"providers\": {\"offline\": {\"type\": \"mock\", \"default\": \"hi\"}},\n"
	" \"tools\": {\"send_email\": {\"type\": \"http\", \"url\": \"http://127.0.0.1:9/mail\",\n"
	"   \"description\": \"Send an email.\", \"input_schema\": " SCHEMA_TEXT "}},\n"
	" \"agents\": {\"support\": {\"provider\": \"offline\", \"model\": \"mock\",\n"
	"   \"tools\": [\"memory_*\", \"send_email\", \"get_*\", \"crm_*\", \"ticket_*\"],\n"
	"   \"require_approval\": [\"refund_*\", \"crm_delete*\"]}},\n"
	" \"policies\": {\"default\": {\n"
	"   \"agents\": [\"support\", \"sales-*\", \"internal-*\"],\n"
	"   \"tools\": {\"allow\": [\"memory_*\", \"working_memory_update\", \"get_*\",\n"
	"                        \"crm_*\", \"ticket_*\", \"send_*\", \"calendar_*\",\n"
	"                        \"search_*\"],\n"
	"             \"deny\": [\"memory_delete\", \"crm_delete_all\", \"*_admin\",\n"
	"                      \"shell_*\"]},\n"
	"   \"client_tools\": {\"allow\": [\"ui_*\", \"browser_*\"],\n"
	"                    \"deny\": [\"browser_exec\"]},\n"
	"   \"approval\": {\"require\": [\"send_sms\", \"delete_*\", \"crm_update_owner\",\n"
	"                             \"transfer_*\"], \"approver\": \"admin\",\n"
	"                \"ttl_seconds\": 3600},\n"
	"   \"rate_limits\": {\"requests_per_minute\": 600, \"burst\": 20,\n"
	"     \"tool_calls_per_minute\": {\"*\": 600, \"send_email\": 30, \"send_*\": 10,\n"
	"                                \"crm_*\": 120, \"get_weather\": 60},\n"
	"     \"tokens_per_minute\": 200000}}}}\n";

static const char args_text[] =
	"{\"to\": [\"alice@example.com\", \"bob.smith@example.org\"],\n"
	" \"cc\": [\"team@example.com\"],\n"
	" \"subject\": \"Quarterly numbers for the board meeting\",\n"
	" \"body\": \"Hi both, please find the figures attached. The revenue line moved after "
	"the late invoices came in; the detail is in the second sheet. Let me know if anything "
	"looks off before Thursday. Thanks!\",\n"
	" \"priority\": \"high\", \"send_at\": null,\n"
	" \"attachments\": [{\"name\": \"q3.xlsx\", \"url\": \"https://files.example.com/q3.xlsx\","
	" \"size\": 48211}],\n"
	" \"tracking\": false}\n";

struct gate {
	const struct gh_policy_conf *policy;
	const struct gh_agent_conf *agent;
	struct gh_ratelimit *rl;
	cJSON *schema, *args;
	char keys[NKEYS][64];
};

/* One tool call through the gate, as run.c's gate() does it. Returns the
 * verdict so the compiler cannot drop the work. */
static int gate_once(struct gate *g, int i, int64_t part_ns[4])
{
	struct gh_decision d;
	struct gh_rl_result res;
	const char *rule = NULL;
	char msg[256];
	int64_t per_min, t0, t1, t2, t3, t4;
	int v;

	t0 = bench_ns();
	gh_policy_tool(g->policy, g->agent, "send_email", GH_SRC_SERVER, 0, &d);
	t1 = bench_ns();
	per_min = gh_policy_tool_limit(g->policy, "send_email", &rule);
	t2 = bench_ns();
	{
		/* the server's limit has a burst of a minute's budget; the bench's
		 * keys must stay allowed, so it allows far more */
		struct gh_rl_limit lim = {per_min * 1000000, 60000, per_min * 1000000 - 1};

		gh_rl_take(g->rl, g->keys[i % NKEYS], &lim, 1, &res);
	}
	t3 = bench_ns();
	v = gh_schema_validate(g->schema, g->args, msg, sizeof(msg));
	t4 = bench_ns();
	if (part_ns) {
		part_ns[0] = t1 - t0;
		part_ns[1] = t2 - t1;
		part_ns[2] = t3 - t2;
		part_ns[3] = t4 - t3;
	}
	return (int)d.verdict + res.allowed + v;
}

struct run_result {
	struct bench_stats total, part[4];
	double batch_mean_ns;
};

struct run_arg {
	struct gate *g;
	int64_t iters;
	int offset;
	struct run_result r;
	pthread_barrier_t *go;
};

static void *run_main(void *arg)
{
	struct run_arg *a = arg;
	int64_t *tot = malloc((size_t)a->iters * sizeof(int64_t));
	int64_t *parts[4];
	int64_t i, t0;
	volatile int sink = 0;
	int k;

	for (k = 0; k < 4; k++)
		parts[k] = malloc((size_t)a->iters * sizeof(int64_t));
	if (!tot || !parts[0] || !parts[1] || !parts[2] || !parts[3])
		bench_die("out of memory");
	if (a->go)
		pthread_barrier_wait(a->go);
	/* timed one by one */
	for (i = 0; i < a->iters; i++) {
		int64_t p[4], s = bench_ns();

		sink += gate_once(a->g, (int)(i + a->offset), p);
		tot[i] = bench_ns() - s;
		for (k = 0; k < 4; k++)
			parts[k][i] = p[k];
	}
	/* and as a batch, for the mean without per-call clock reads */
	t0 = bench_ns();
	for (i = 0; i < a->iters; i++)
		sink += gate_once(a->g, (int)(i + a->offset), NULL);
	a->r.batch_mean_ns = (double)(bench_ns() - t0) / (double)a->iters;
	a->r.total = bench_summary(tot, (size_t)a->iters, 1e3);
	for (k = 0; k < 4; k++) {
		a->r.part[k] = bench_summary(parts[k], (size_t)a->iters, 1e3);
		free(parts[k]);
	}
	free(tot);
	(void)sink;
	return NULL;
}

static double clock_overhead_ns(void)
{
	int64_t t0 = bench_ns(), i;
	volatile int64_t x = 0;

	for (i = 0; i < 1000000; i++)
		x += bench_ns();
	(void)x;
	return (double)(bench_ns() - t0) / 1e6;
}

int main(int argc, char **argv)
{
	int64_t iters = 200000, reps = 5, r;
	struct gh_config *cfg = NULL;
	struct gh_err e;
	struct gate *g = calloc(1, sizeof(*g));
	char msg[256];
	const char *v;
	double tp50[64], tp99[64], tmean[64], bmean[64], pp50[4][64], pp99[4][64], mt50[64];
	double mt99[64];
	static const char *const names[4] = {"gh_policy_tool (allowlist + approval)",
					     "gh_policy_tool_limit", "gh_rl_take",
					     "gh_schema_validate"};
	int i, k;

	for (i = 1; i < argc; i++) {
		if ((v = bench_opt(argc, argv, &i, "--iterations")))
			iters = bench_num(v, 1000, 100000000, "--iterations");
		else if ((v = bench_opt(argc, argv, &i, "--reps")))
			reps = bench_num(v, 1, 64, "--reps");
		else
			bench_die("usage: bench_policy [--iterations N] [--reps R]");
	}
	if (!g)
		bench_die("out of memory");
	bench_init();
	if (gh_config_parse("bench.json", config_text, strlen(config_text), &cfg, &e) != GH_OK)
		bench_die("config: %s", e.msg);
	g->policy = gh_config_policy(cfg, "default");
	g->agent = gh_config_agent(cfg, "support");
	g->schema = gh_config_tool(cfg, "send_email")
			    ? cJSON_Duplicate(gh_config_tool(cfg, "send_email")->input_schema, 1)
			    : NULL;
	g->args = cJSON_Parse(args_text);
	g->rl = gh_rl_new(NKEYS * 2);
	if (!g->policy || !g->agent || !g->schema || !g->args || !g->rl)
		bench_die("set-up failed");
	if (gh_schema_check(g->schema, msg, sizeof(msg)) != 0)
		bench_die("schema: %s", msg);
	if (gh_schema_validate(g->schema, g->args, msg, sizeof(msg)) != 0)
		bench_die("arguments do not validate: %s", msg);
	for (i = 0; i < NKEYS; i++) {
		char id[GH_ID_MAX];

		gh_id_new("key_", id, sizeof(id));
		snprintf(g->keys[i], sizeof(g->keys[i]), "tool:%s:send_email", id);
	}
	{
		struct gh_decision d;

		gh_policy_tool(g->policy, g->agent, "send_email", GH_SRC_SERVER, 0, &d);
		if (d.verdict != GH_V_ALLOW)
			bench_die("send_email should be allowed: %s", d.rule);
	}

	printf("bench_policy: the policy gate for one tool call (send_email), in process\n");
	bench_print_host();
	printf("%lld runs x %lld gate calls; clock read costs %.0f ns (included in every "
	       "timed figure)\n", (long long)reps, (long long)iters, clock_overhead_ns());
	for (r = 0; r < reps && r < 64; r++) {
		struct run_arg a = {.g = g, .iters = iters, .offset = 0, .go = NULL};

		run_main(&a);
		tp50[r] = a.r.total.p50;
		tp99[r] = a.r.total.p99;
		tmean[r] = a.r.total.mean;
		bmean[r] = a.r.batch_mean_ns / 1e3;
		for (k = 0; k < 4; k++) {
			pp50[k][r] = a.r.part[k].p50;
			pp99[k][r] = a.r.part[k].p99;
		}
	}
	/* two threads at once (the limiter's stripes, the allocator) */
	for (r = 0; r < reps && r < 64; r++) {
		pthread_barrier_t go;
		pthread_t th[2];
		struct run_arg a[2];

		pthread_barrier_init(&go, NULL, 2);
		for (i = 0; i < 2; i++) {
			a[i] = (struct run_arg){.g = g, .iters = iters / 2,
						.offset = i * (NKEYS / 2), .go = &go};
			pthread_create(&th[i], NULL, run_main, &a[i]);
		}
		for (i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&go);
		mt50[r] = (a[0].r.total.p50 + a[1].r.total.p50) / 2;
		mt99[r] = a[0].r.total.p99 > a[1].r.total.p99 ? a[0].r.total.p99 : a[1].r.total.p99;
	}
	printf("\n  %-40s %9s %9s\n", "(us, median over runs)", "p50", "p99");
	for (k = 0; k < 4; k++)
		printf("  %-40s %9.2f %9.2f\n", names[k], bench_median(pp50[k], (size_t)r),
		       bench_median(pp99[k], (size_t)r));
	printf("  %-40s %9.2f %9.2f   (mean %.2f; untimed batch mean %.2f)\n",
	       "whole gate, 1 thread", bench_median(tp50, (size_t)r),
	       bench_median(tp99, (size_t)r), bench_median(tmean, (size_t)r),
	       bench_median(bmean, (size_t)r));
	printf("  %-40s %9.2f %9.2f\n", "whole gate, 2 threads at once",
	       bench_median(mt50, (size_t)r), bench_median(mt99, (size_t)r));
	{
		/* the same validation with the schema's two "pattern" keywords
		 * removed: how much of the gate the patterns cost */
		cJSON *plain = cJSON_Duplicate(g->schema, 1), *to, *att, *url;
		int64_t *lat = malloc((size_t)iters * sizeof(int64_t)), n;
		struct bench_stats st;

		to = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(plain, "properties"), "to");
		cJSON_DeleteItemFromObjectCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(to, "items"), "pattern");
		att = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(plain, "properties"), "attachments");
		att = cJSON_GetObjectItemCaseSensitive(att, "items");
		url = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(att, "properties"), "url");
		cJSON_DeleteItemFromObjectCaseSensitive(url, "pattern");
		if (!lat)
			bench_die("out of memory");
		for (n = 0; n < iters; n++) {
			int64_t t0 = bench_ns();

			if (gh_schema_validate(plain, g->args, msg, sizeof(msg)) != 0)
				bench_die("validation without patterns failed: %s", msg);
			lat[n] = bench_ns() - t0;
		}
		st = bench_summary(lat, (size_t)iters, 1e3);
		printf("  %-40s %9.2f %9.2f   (mean %.2f)\n", "gh_schema_validate without patterns",
		       st.p50, st.p99, st.mean);
		free(lat);
		cJSON_Delete(plain);
	}
	printf("  target: gate p50 <= 20 us: %s\n",
	       bench_median(tp50, (size_t)r) <= 20 ? "met" : "NOT met");
	printf("  limiter keys held: %zu\n", gh_rl_count(g->rl));

	gh_rl_free(g->rl);
	cJSON_Delete(g->schema);
	cJSON_Delete(g->args);
	gh_config_free(cfg);
	free(g);
	return 0;
}
