/*
 * metrics.c - lock-free counters and histograms, bounded name tables and
 * the Prometheus text exposition; see metrics.h.
 *
 * Threading: recording is relaxed atomic increments into fixed arrays,
 * from any thread. A name table's mutex is taken only to add a name seen
 * for the first time (and by gh_metrics_reset); lookups probe an
 * open-addressed index whose slots are published with release stores, so
 * a reader that finds a slot sees its name. Rendering reads with relaxed
 * loads; a histogram's count is the sum of its buckets as read, so +Inf
 * and _count always agree within one scrape.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ------------------------------------------------------------ buckets */

#define HIST_MAX 16

/* Bucket upper bounds in the unit values are recorded in. */
struct bounds {
	const uint64_t *le;
	size_t n;
	int micro;            /* recorded in microseconds, shown in seconds */
};

static const uint64_t dur_le[] = {1000,    2500,    5000,     10000,    25000,    50000,
				  100000,  250000,  500000,   1000000,  2500000,  5000000,
				  10000000, 30000000, 60000000, 300000000};
static const uint64_t commit_le[] = {100,   250,   500,    1000,   2500,   5000,  10000,
				     25000, 50000, 100000, 250000, 500000, 1000000};
/* OpenTelemetry's advice for gen_ai.client.token.usage */
static const uint64_t token_le[] = {1,     4,      16,      64,      256,      1024,    4096,
				    16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
static const uint64_t batch_le[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
static const uint64_t wait_le[] = {1000000,    5000000,    15000000,   30000000,
				   60000000,   300000000,  900000000,  1800000000,
				   3600000000, 7200000000, 21600000000, 86400000000};

static const struct bounds B_DUR = {dur_le, GH_ARRAY_LEN(dur_le), 1};
static const struct bounds B_COMMIT = {commit_le, GH_ARRAY_LEN(commit_le), 1};
static const struct bounds B_TOKEN = {token_le, GH_ARRAY_LEN(token_le), 0};
static const struct bounds B_BATCH = {batch_le, GH_ARRAY_LEN(batch_le), 0};
static const struct bounds B_WAIT = {wait_le, GH_ARRAY_LEN(wait_le), 1};

/* b[i] counts values in (le[i-1], le[i]]; b[n] those above the last. */
struct hist {
	_Atomic uint64_t b[HIST_MAX + 1];
	_Atomic uint64_t sum;
};

static void observe(struct hist *h, const struct bounds *bd, uint64_t v)
{
	size_t i = 0;

	while (i < bd->n && v > bd->le[i])
		i++;
	atomic_fetch_add_explicit(&h->b[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

static uint64_t hist_count(const struct hist *h, const struct bounds *bd)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i <= bd->n; i++)
		n += atomic_load_explicit(&h->b[i], memory_order_relaxed);
	return n;
}

static uint64_t load(const _Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static void inc(_Atomic uint64_t *v, uint64_t n)
{
	atomic_fetch_add_explicit(v, n, memory_order_relaxed);
}

/* --------------------------------------------------------- name tables */

#define NAMES_MAX GH_METRICS_TOOLS
#define NAME_LEN_MAX 128

/* name[0] is the fallback (none / overflow); names are added in order and
 * never removed (until a reset). idx[] is the open-addressed index:
 * 0 empty, else the name's position + 1. */
struct names {
	pthread_mutex_t mu;
	size_t cap;
	const char *fallback;
	_Atomic(char *) name[NAMES_MAX];
	_Atomic uint32_t idx[NAMES_MAX * 2];
	_Atomic uint32_t n;
};

#define NAMES_INIT(c, fb) {PTHREAD_MUTEX_INITIALIZER, (c), (fb), {NULL}, {0}, 0}

static struct names agents = NAMES_INIT(GH_METRICS_AGENTS, "");
static struct names providers = NAMES_INIT(GH_METRICS_PROVIDERS, "_other");
static struct names tools = NAMES_INIT(GH_METRICS_TOOLS, "_other");

static const char *name_at(struct names *t, uint32_t i)
{
	char *s = i ? atomic_load_explicit(&t->name[i], memory_order_acquire) : NULL;

	return s ? s : t->fallback;
}

static uint32_t count_of(struct names *t)
{
	uint32_t n = atomic_load_explicit(&t->n, memory_order_acquire);

	return n ? n : 1; /* the fallback is always there */
}

/* The position of s, or -1 when it has none yet. Lock-free. */
static int lookup(struct names *t, const char *s)
{
	uint32_t mask = (uint32_t)(t->cap * 2 - 1), h = gh_hash_str(s) & mask, k;

	for (k = 0; k <= mask; k++, h = (h + 1) & mask) {
		uint32_t v = atomic_load_explicit(&t->idx[h], memory_order_acquire);

		if (!v)
			return -1;
		if (!strcmp(name_at(t, v - 1), s))
			return (int)(v - 1);
	}
	return -1;
}

/* The position of s, added at its first sighting; the fallback's (0) when
 * s is empty, too long, or the table is full. */
static uint32_t intern(struct names *t, const char *s)
{
	uint32_t mask = (uint32_t)(t->cap * 2 - 1), h, n;
	char *copy;
	int i;

	if (!s || !*s || strlen(s) > NAME_LEN_MAX || !strcmp(s, t->fallback))
		return 0;
	if ((i = lookup(t, s)) >= 0)
		return (uint32_t)i;
	pthread_mutex_lock(&t->mu);
	if ((i = lookup(t, s)) >= 0)
		goto out;
	n = count_of(t);
	i = 0;
	if (n >= t->cap || !(copy = strdup(s)))
		goto out;
	atomic_store_explicit(&t->name[n], copy, memory_order_release);
	for (h = gh_hash_str(s) & mask; atomic_load_explicit(&t->idx[h], memory_order_relaxed);
	     h = (h + 1) & mask)
		;
	atomic_store_explicit(&t->idx[h], n + 1, memory_order_release);
	atomic_store_explicit(&t->n, n + 1, memory_order_release);
	i = (int)n;
out:
	pthread_mutex_unlock(&t->mu);
	return (uint32_t)i;
}

static void names_reset(struct names *t)
{
	size_t i;

	pthread_mutex_lock(&t->mu);
	for (i = 1; i < t->cap; i++)
		free(atomic_exchange(&t->name[i], NULL));
	for (i = 0; i < t->cap * 2; i++)
		atomic_store(&t->idx[i], 0);
	atomic_store(&t->n, 1);
	pthread_mutex_unlock(&t->mu);
}

/* -------------------------------------------------------------- values */

#define N_CLASS 5 /* 1xx..5xx */
#define N_SRC 4

static const char *const surface_names[GH_MS_COUNT] = {
	"none", "native", "openai", "responses", "anthropic", "agui",
	"a2a",  "mcp",    "admin",  "health",    "metrics",
};
static const char *const class_names[N_CLASS] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const decision_names[GH_MD_COUNT] = {
	"allowed",  "denied",  "rate_limited",       "approval_requested",
	"approved", "denied_by_reviewer", "expired",
};
static const char *const outcome_names[GH_MO_COUNT] = {"ok", "error", "timeout",
						       "rate_limited", "cancelled"};
static const char *const exec_names[GH_ME_COUNT] = {"ok", "error", "failed"};
static const char *const src_names[N_SRC] = {"server", "client", "mcp", "memory"};
enum { SRC_SERVER, SRC_CLIENT, SRC_MCP, SRC_MEMORY };
static const char *const ptype_names[] = {"other", "openai", "anthropic", "mock"};

static struct {
	struct hist req[GH_MS_COUNT][N_CLASS][GH_METRICS_AGENTS];
	/* model calls */
	_Atomic int ptype[GH_METRICS_PROVIDERS];
	struct hist up[GH_METRICS_PROVIDERS][GH_MO_COUNT];
	struct hist ttft[GH_METRICS_PROVIDERS];
	struct hist tok[GH_METRICS_PROVIDERS][2];
	/* tools */
	_Atomic uint64_t tool[GH_METRICS_TOOLS][N_SRC][GH_MD_COUNT];
	_Atomic uint64_t exec[GH_METRICS_TOOLS][N_SRC][GH_ME_COUNT];
	struct hist exec_dur[GH_METRICS_TOOLS][N_SRC];
	_Atomic int tool_mcp[GH_METRICS_TOOLS];
	/* approvals: approved, denied, expired */
	struct hist wait[3];
	/* audit and store */
	_Atomic uint64_t audit_rows;
	struct hist batch;
	struct hist commit;
	_Atomic int64_t ckpt_ms;
	_Atomic int verify_ok;       /* -1 never checked */
	_Atomic int64_t verify_ms;
} m = {.verify_ok = -1};

static _Thread_local uint32_t cur_agent;

static uint64_t us_of(int64_t ns)
{
	return ns > 0 ? (uint64_t)ns / 1000 : 0;
}

void gh_metrics_set_agent(const char *agent)
{
	cur_agent = agent && *agent ? intern(&agents, agent) : 0;
}

void gh_metrics_request(enum gh_metrics_surface surface, int status, int64_t dur_ns)
{
	int cls = status / 100 - 1;
	uint32_t a = cur_agent;

	cur_agent = 0;
	if ((unsigned)surface >= GH_MS_COUNT)
		surface = GH_MS_NONE;
	if (cls < 0 || cls >= N_CLASS)
		cls = 4;
	observe(&m.req[surface][cls][a], &B_DUR, us_of(dur_ns));
}

static int ptype_of(const char *type)
{
	size_t i;

	for (i = 1; type && i < GH_ARRAY_LEN(ptype_names); i++)
		if (!strcmp(type, ptype_names[i]))
			return (int)i;
	return 0;
}

void gh_metrics_upstream(const char *provider, const char *type, enum gh_metrics_outcome o,
			 int64_t dur_ns, int64_t ttft_ns, int64_t tokens_in, int64_t tokens_out)
{
	uint32_t p = intern(&providers, provider);

	if ((unsigned)o >= GH_MO_COUNT)
		o = GH_MO_ERROR;
	if (p)
		atomic_store_explicit(&m.ptype[p], ptype_of(type), memory_order_relaxed);
	observe(&m.up[p][o], &B_DUR, us_of(dur_ns));
	if (ttft_ns >= 0)
		observe(&m.ttft[p], &B_DUR, us_of(ttft_ns));
	if (tokens_in >= 0)
		observe(&m.tok[p][0], &B_TOKEN, (uint64_t)tokens_in);
	if (tokens_out >= 0)
		observe(&m.tok[p][1], &B_TOKEN, (uint64_t)tokens_out);
}

static int src_of(const char *s)
{
	size_t i;

	for (i = 0; s && i < N_SRC; i++)
		if (!strcmp(s, src_names[i]))
			return (int)i;
	return SRC_SERVER;
}

/* The tool's slot and source; a "server" tool the gate saw as MCP is MCP. */
static uint32_t tool_slot(const char *tool, const char *source, int *src)
{
	uint32_t t = intern(&tools, tool ? tool : "_unknown");

	*src = src_of(source);
	if (*src == SRC_MCP)
		atomic_store_explicit(&m.tool_mcp[t], 1, memory_order_relaxed);
	else if (*src == SRC_SERVER && atomic_load_explicit(&m.tool_mcp[t], memory_order_relaxed))
		*src = SRC_MCP;
	return t;
}

void gh_metrics_tool(const char *tool, const char *source, enum gh_metrics_decision d)
{
	int src;
	uint32_t t = tool_slot(tool, source, &src);

	if ((unsigned)d < GH_MD_COUNT)
		inc(&m.tool[t][src][d], 1);
}

void gh_metrics_tool_exec(const char *tool, const char *source, enum gh_metrics_exec x,
			  int64_t dur_ns)
{
	int src;
	uint32_t t = tool_slot(tool, source, &src);

	if ((unsigned)x >= GH_ME_COUNT)
		x = GH_ME_FAILED;
	inc(&m.exec[t][src][x], 1);
	observe(&m.exec_dur[t][src], &B_DUR, us_of(dur_ns));
}

void gh_metrics_approval_decided(int approved, int expired, int64_t wait_ms)
{
	observe(&m.wait[expired ? 2 : approved ? 0 : 1], &B_WAIT,
		wait_ms > 0 ? (uint64_t)wait_ms * 1000 : 0);
}

void gh_metrics_audit_commit(int64_t jobs, int64_t audit_rows, int64_t dur_ns)
{
	if (audit_rows > 0)
		inc(&m.audit_rows, (uint64_t)audit_rows);
	observe(&m.batch, &B_BATCH, jobs > 0 ? (uint64_t)jobs : 0);
	observe(&m.commit, &B_COMMIT, us_of(dur_ns));
}

void gh_metrics_audit_checkpoint(int64_t ts_ms)
{
	int64_t prev = atomic_load_explicit(&m.ckpt_ms, memory_order_relaxed);

	while (ts_ms > prev && !atomic_compare_exchange_weak_explicit(
				      &m.ckpt_ms, &prev, ts_ms, memory_order_relaxed,
				      memory_order_relaxed))
		;
}

void gh_metrics_audit_verified(int ok, int64_t ts_ms)
{
	atomic_store_explicit(&m.verify_ms, ts_ms, memory_order_relaxed);
	atomic_store_explicit(&m.verify_ok, ok ? 1 : 0, memory_order_relaxed);
}

void gh_metrics_reset(void)
{
	names_reset(&agents);
	names_reset(&providers);
	names_reset(&tools);
	memset(&m, 0, sizeof(m));
	m.verify_ok = -1;
	cur_agent = 0;
}

/* ----------------------------------------------------------- exposition */

int gh_metrics_escape(struct gh_buf *b, const char *s)
{
	int rc = GH_BUF_OK;

	for (; s && *s && rc == GH_BUF_OK; s++) {
		if (*s == '\\')
			rc = gh_buf_puts(b, "\\\\");
		else if (*s == '"')
			rc = gh_buf_puts(b, "\\\"");
		else if (*s == '\n')
			rc = gh_buf_puts(b, "\\n");
		else
			rc = gh_buf_putc(b, *s);
	}
	return rc;
}

int gh_metrics_family(struct gh_buf *b, const char *name, const char *type, const char *help)
{
	/* help text is ours: no backslash or newline to escape */
	return gh_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int labels(struct gh_buf *b, const struct gh_metrics_label *l, size_t n,
		  const char *extra_name, const char *extra_value)
{
	size_t i;
	int rc = GH_BUF_OK, first = 1;

	if (!n && !extra_name)
		return GH_BUF_OK;
	rc = gh_buf_putc(b, '{');
	for (i = 0; i <= n && rc == GH_BUF_OK; i++) {
		const char *k = i < n ? l[i].name : extra_name;
		const char *v = i < n ? l[i].value : extra_value;

		if (!k || !v)
			continue;
		if (!first)
			rc = gh_buf_putc(b, ',');
		first = 0;
		if (rc == GH_BUF_OK)
			rc = gh_buf_printf(b, "%s=\"", k);
		if (rc == GH_BUF_OK)
			rc = gh_metrics_escape(b, v);
		if (rc == GH_BUF_OK)
			rc = gh_buf_putc(b, '"');
	}
	return rc == GH_BUF_OK ? gh_buf_putc(b, '}') : rc;
}

int gh_metrics_sample(struct gh_buf *b, const char *name, const struct gh_metrics_label *l,
		      size_t n, double value)
{
	int rc = gh_buf_puts(b, name);

	if (rc == GH_BUF_OK)
		rc = labels(b, l, n, NULL, NULL);
	return rc == GH_BUF_OK ? gh_buf_printf(b, " %.15g\n", value) : rc;
}

static int sample_u(struct gh_buf *b, const char *name, const struct gh_metrics_label *l,
		    size_t n, uint64_t v)
{
	int rc = gh_buf_puts(b, name);

	if (rc == GH_BUF_OK)
		rc = labels(b, l, n, NULL, NULL);
	return rc == GH_BUF_OK ? gh_buf_printf(b, " %llu\n", (unsigned long long)v) : rc;
}

/* A value in the exposition's unit, exactly: counts as integers,
 * microseconds as seconds with up to six decimals ("0.0025", "300"). */
static void fmt_scaled(char *out, size_t cap, uint64_t v, int micro)
{
	size_t n;

	if (!micro) {
		snprintf(out, cap, "%llu", (unsigned long long)v);
		return;
	}
	snprintf(out, cap, "%llu.%06llu", (unsigned long long)(v / 1000000),
		 (unsigned long long)(v % 1000000));
	n = strlen(out);
	while (n > 0 && out[n - 1] == '0')
		out[--n] = '\0';
	if (n > 0 && out[n - 1] == '.')
		out[--n] = '\0';
}

/* One histogram's samples (nothing when it holds no observation). */
static int hist_write(struct gh_buf *b, const char *name, const struct gh_metrics_label *l,
		      size_t n, const struct hist *h, const struct bounds *bd)
{
	char nm[128], sv[32];
	uint64_t cum = 0, sum = load(&h->sum);
	size_t i;
	int rc = GH_BUF_OK;

	if (!hist_count(h, bd))
		return GH_BUF_OK;
	snprintf(nm, sizeof(nm), "%s_bucket", name);
	for (i = 0; i <= bd->n && rc == GH_BUF_OK; i++) {
		char le[32];

		cum += load(&h->b[i]);
		if (i == bd->n)
			gh_strlcpy(le, "+Inf", sizeof(le));
		else
			fmt_scaled(le, sizeof(le), bd->le[i], bd->micro);
		rc = gh_buf_puts(b, nm);
		if (rc == GH_BUF_OK)
			rc = labels(b, l, n, "le", le);
		if (rc == GH_BUF_OK)
			rc = gh_buf_printf(b, " %llu\n", (unsigned long long)cum);
	}
	if (rc == GH_BUF_OK)
		rc = gh_buf_printf(b, "%s_sum", name);
	if (rc == GH_BUF_OK)
		rc = labels(b, l, n, NULL, NULL);
	fmt_scaled(sv, sizeof(sv), sum, bd->micro);
	if (rc == GH_BUF_OK)
		rc = gh_buf_printf(b, " %s\n%s_count", sv, name);
	if (rc == GH_BUF_OK)
		rc = labels(b, l, n, NULL, NULL);
	/* the count is the +Inf bucket as read, so the two always agree */
	return rc == GH_BUF_OK ? gh_buf_printf(b, " %llu\n", (unsigned long long)cum) : rc;
}

#define CHECK(x)                               \
	do {                                   \
		if ((rc = (x)) != GH_BUF_OK)   \
			return rc;             \
	} while (0)

static int render_requests(struct gh_buf *b)
{
	uint32_t na = count_of(&agents), a;
	int s, c, rc;

	CHECK(gh_metrics_family(b, "gatehouse_http_requests_total", "counter",
				"HTTP requests answered, by surface, status class and agent."));
	for (s = 0; s < GH_MS_COUNT; s++)
		for (c = 0; c < N_CLASS; c++)
			for (a = 0; a < na; a++) {
				const struct hist *h = &m.req[s][c][a];
				uint64_t n = hist_count(h, &B_DUR);
				struct gh_metrics_label l[3] = {{"surface", surface_names[s]},
								{"status_class", class_names[c]},
								{"agent", name_at(&agents, a)}};

				if (n)
					CHECK(sample_u(b, "gatehouse_http_requests_total", l, 3, n));
			}
	CHECK(gh_metrics_family(b, "gatehouse_http_request_duration_seconds", "histogram",
				"Time from a request's arrival to the end of its response."));
	for (s = 0; s < GH_MS_COUNT; s++)
		for (c = 0; c < N_CLASS; c++)
			for (a = 0; a < na; a++) {
				struct gh_metrics_label l[3] = {{"surface", surface_names[s]},
								{"status_class", class_names[c]},
								{"agent", name_at(&agents, a)}};

				CHECK(hist_write(b, "gatehouse_http_request_duration_seconds", l, 3,
						 &m.req[s][c][a], &B_DUR));
			}
	return GH_BUF_OK;
}

static int render_upstream(struct gh_buf *b)
{
	uint32_t np = count_of(&providers), p;
	int o, k, rc;

	CHECK(gh_metrics_family(b, "gatehouse_upstream_calls_total", "counter",
				"Model calls to providers, by provider entry and outcome."));
	for (p = 0; p < np; p++)
		for (o = 0; o < GH_MO_COUNT; o++) {
			uint64_t n = hist_count(&m.up[p][o], &B_DUR);
			struct gh_metrics_label l[3] = {
				{"provider", name_at(&providers, p)},
				{"gen_ai_provider_name", ptype_names[atomic_load(&m.ptype[p])]},
				{"outcome", outcome_names[o]}};

			if (n)
				CHECK(sample_u(b, "gatehouse_upstream_calls_total", l, 3, n));
		}
	CHECK(gh_metrics_family(b, "gen_ai_client_operation_duration_seconds", "histogram",
				"GenAI operation duration (OpenTelemetry "
				"gen_ai.client.operation.duration): one model call, "
				"end to end."));
	for (p = 0; p < np; p++)
		for (o = 0; o < GH_MO_COUNT; o++) {
			struct gh_metrics_label l[4] = {
				{"gen_ai_operation_name", "chat"},
				{"gen_ai_provider_name", ptype_names[atomic_load(&m.ptype[p])]},
				{"provider", name_at(&providers, p)},
				{"error_type", o == GH_MO_OK ? NULL : outcome_names[o]}};

			CHECK(hist_write(b, "gen_ai_client_operation_duration_seconds", l, 4,
					 &m.up[p][o], &B_DUR));
		}
	CHECK(gh_metrics_family(b, "gatehouse_upstream_time_to_first_token_seconds", "histogram",
				"Time from a streamed model call's start to its first token."));
	for (p = 0; p < np; p++) {
		struct gh_metrics_label l[2] = {
			{"gen_ai_provider_name", ptype_names[atomic_load(&m.ptype[p])]},
			{"provider", name_at(&providers, p)}};

		CHECK(hist_write(b, "gatehouse_upstream_time_to_first_token_seconds", l, 2,
				 &m.ttft[p], &B_DUR));
	}
	CHECK(gh_metrics_family(b, "gen_ai_client_token_usage", "histogram",
				"Tokens used per model call (OpenTelemetry "
				"gen_ai.client.token.usage), input and output."));
	for (p = 0; p < np; p++)
		for (k = 0; k < 2; k++) {
			struct gh_metrics_label l[4] = {
				{"gen_ai_operation_name", "chat"},
				{"gen_ai_provider_name", ptype_names[atomic_load(&m.ptype[p])]},
				{"provider", name_at(&providers, p)},
				{"gen_ai_token_type", k ? "output" : "input"}};

			CHECK(hist_write(b, "gen_ai_client_token_usage", l, 4, &m.tok[p][k],
					 &B_TOKEN));
		}
	return GH_BUF_OK;
}

static int render_tools(struct gh_buf *b)
{
	uint32_t nt = count_of(&tools), t;
	int s, d, rc;

	CHECK(gh_metrics_family(b, "gatehouse_tool_calls_total", "counter",
				"Tool call decisions: the gate's, a reviewer's and expiry's."));
	for (t = 0; t < nt; t++)
		for (s = 0; s < N_SRC; s++)
			for (d = 0; d < GH_MD_COUNT; d++) {
				uint64_t n = load(&m.tool[t][s][d]);
				struct gh_metrics_label l[3] = {{"tool", name_at(&tools, t)},
								{"source", src_names[s]},
								{"decision", decision_names[d]}};

				if (n)
					CHECK(sample_u(b, "gatehouse_tool_calls_total", l, 3, n));
			}
	CHECK(gh_metrics_family(b, "gatehouse_tool_executions_total", "counter",
				"Executions of tools gatehouse runs, by outcome."));
	for (t = 0; t < nt; t++)
		for (s = 0; s < N_SRC; s++)
			for (d = 0; d < GH_ME_COUNT; d++) {
				uint64_t n = load(&m.exec[t][s][d]);
				struct gh_metrics_label l[3] = {{"tool", name_at(&tools, t)},
								{"source", src_names[s]},
								{"outcome", exec_names[d]}};

				if (n)
					CHECK(sample_u(b, "gatehouse_tool_executions_total", l, 3, n));
			}
	CHECK(gh_metrics_family(b, "gatehouse_tool_execution_duration_seconds", "histogram",
				"How long tools gatehouse runs take."));
	for (t = 0; t < nt; t++)
		for (s = 0; s < N_SRC; s++) {
			struct gh_metrics_label l[2] = {{"tool", name_at(&tools, t)},
							{"source", src_names[s]}};

			CHECK(hist_write(b, "gatehouse_tool_execution_duration_seconds", l, 2,
					 &m.exec_dur[t][s], &B_DUR));
		}
	return GH_BUF_OK;
}

static int render_audit(struct gh_buf *b, const struct gh_metrics_gauges *g)
{
	static const char *const wait_names[3] = {"approved", "denied_by_reviewer", "expired"};
	int64_t ck = atomic_load(&m.ckpt_ms);
	int vok = atomic_load(&m.verify_ok), i, rc;

	CHECK(gh_metrics_family(b, "gatehouse_approvals_pending", "gauge",
				"Approvals waiting for a decision."));
	if (g->approvals_pending >= 0)
		CHECK(sample_u(b, "gatehouse_approvals_pending", NULL, 0,
			       (uint64_t)g->approvals_pending));
	CHECK(gh_metrics_family(b, "gatehouse_approval_decision_seconds", "histogram",
				"Time from an approval's request to its decision or expiry."));
	for (i = 0; i < 3; i++) {
		struct gh_metrics_label l = {"decision", wait_names[i]};

		CHECK(hist_write(b, "gatehouse_approval_decision_seconds", &l, 1, &m.wait[i],
				 &B_WAIT));
	}
	CHECK(gh_metrics_family(b, "gatehouse_audit_rows_appended_total", "counter",
				"Audit log rows committed."));
	CHECK(sample_u(b, "gatehouse_audit_rows_appended_total", NULL, 0, load(&m.audit_rows)));
	CHECK(gh_metrics_family(b, "gatehouse_store_group_commit_jobs", "histogram",
				"Writes (jobs) per group-commit transaction."));
	CHECK(hist_write(b, "gatehouse_store_group_commit_jobs", NULL, 0, &m.batch, &B_BATCH));
	CHECK(gh_metrics_family(b, "gatehouse_store_group_commit_duration_seconds", "histogram",
				"Group-commit transactions, BEGIN to COMMIT."));
	CHECK(hist_write(b, "gatehouse_store_group_commit_duration_seconds", NULL, 0, &m.commit,
			 &B_COMMIT));
	CHECK(gh_metrics_family(b, "gatehouse_audit_checkpoint_age_seconds", "gauge",
				"Seconds since the newest signed audit checkpoint."));
	if (ck > 0)
		CHECK(gh_metrics_sample(b, "gatehouse_audit_checkpoint_age_seconds", NULL, 0,
					(double)(g->now_ms > ck ? g->now_ms - ck : 0) / 1000));
	CHECK(gh_metrics_family(b, "gatehouse_audit_verify_ok", "gauge",
				"1 when the last audit chain check found it intact, else 0."));
	if (vok >= 0)
		CHECK(sample_u(b, "gatehouse_audit_verify_ok", NULL, 0, (uint64_t)vok));
	CHECK(gh_metrics_family(b, "gatehouse_audit_verify_timestamp_seconds", "gauge",
				"When the last audit chain check ran (Unix time)."));
	if (vok >= 0)
		CHECK(gh_metrics_sample(b, "gatehouse_audit_verify_timestamp_seconds", NULL, 0,
					(double)atomic_load(&m.verify_ms) / 1000));
	return GH_BUF_OK;
}

int gh_metrics_render(struct gh_buf *b, const struct gh_metrics_gauges *g)
{
	int rc;

	CHECK(render_requests(b));
	CHECK(render_upstream(b));
	CHECK(render_tools(b));
	CHECK(render_audit(b, g));
	CHECK(gh_metrics_family(b, "gatehouse_streams_active", "gauge",
				"Streams (SSE, chunked downloads) open now."));
	CHECK(sample_u(b, "gatehouse_streams_active", NULL, 0,
		       g->active_streams > 0 ? (uint64_t)g->active_streams : 0));
	CHECK(gh_metrics_family(b, "gatehouse_streams_max", "gauge",
				"The cap on concurrent streams (server.max_streams)."));
	CHECK(sample_u(b, "gatehouse_streams_max", NULL, 0,
		       g->max_streams > 0 ? (uint64_t)g->max_streams : 0));
	return GH_BUF_OK;
}
