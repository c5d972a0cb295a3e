/* metrics.c: the exposition writer (escaping, histograms' cumulative
 * buckets, +Inf, _sum and _count), the agent of a request, the bounded
 * name tables and recording from many threads at once. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"
#include "t.h"

/* The whole exposition (caller frees). */
static char *render(void)
{
	struct gh_metrics_gauges g = {3, 32, 2, 1000000};
	struct gh_buf b;

	gh_buf_init(&b, 16u << 20);
	if (gh_metrics_render(&b, &g) != GH_BUF_OK) {
		gh_buf_free(&b);
		return NULL;
	}
	return gh_buf_detach(&b);
}

/* The number of lines of text that start with prefix. */
static int lines_starting(const char *text, const char *prefix)
{
	const char *p = text;
	int n = 0;

	while (p && *p) {
		if (!strncmp(p, prefix, strlen(prefix)))
			n++;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return n;
}

static void test_escape(void)
{
	struct gh_buf b;
	struct gh_metrics_label l[2] = {{"a", "x\\y\"z\nw"}, {"b", "plain"}};

	gh_buf_init(&b, 4096);
	T_EQ_INT(gh_metrics_escape(&b, "a\\b\"c\nd"), GH_BUF_OK);
	T_EQ_STR(b.data, "a\\\\b\\\"c\\nd");
	gh_buf_reset(&b);
	T_EQ_INT(gh_metrics_sample(&b, "m_total", l, 2, 5), GH_BUF_OK);
	T_EQ_STR(b.data, "m_total{a=\"x\\\\y\\\"z\\nw\",b=\"plain\"} 5\n");
	gh_buf_reset(&b);
	T_EQ_INT(gh_metrics_sample(&b, "g", NULL, 0, 0.25), GH_BUF_OK);
	T_EQ_STR(b.data, "g 0.25\n");
	gh_buf_free(&b);
}

static void test_histogram_buckets(void)
{
	char *t;

	gh_metrics_reset();
	/* 3 ms, 20 s and 400 s (above the last bound: +Inf only) */
	gh_metrics_tool_exec("lookup", "server", GH_ME_OK, 3000000LL);
	gh_metrics_tool_exec("lookup", "server", GH_ME_OK, 20000000000LL);
	gh_metrics_tool_exec("lookup", "server", GH_ME_ERROR, 400000000000LL);
	t = render();
	T_ASSERT(t);
	T_CONTAINS(t, "# TYPE gatehouse_tool_execution_duration_seconds histogram\n");
	T_CONTAINS(t, "gatehouse_tool_execution_duration_seconds_bucket{tool=\"lookup\","
		      "source=\"server\",le=\"0.0025\"} 0\n");
	T_CONTAINS(t, "gatehouse_tool_execution_duration_seconds_bucket{tool=\"lookup\","
		      "source=\"server\",le=\"0.005\"} 1\n");
	T_CONTAINS(t, "gatehouse_tool_execution_duration_seconds_bucket{tool=\"lookup\","
		      "source=\"server\",le=\"10\"} 1\n");
	T_CONTAINS(t, "gatehouse_tool_execution_duration_seconds_bucket{tool=\"lookup\","
		      "source=\"server\",le=\"30\"} 2\n");
	T_CONTAINS(t, "gatehouse_tool_execution_duration_seconds_bucket{tool=\"lookup\","
		      "source=\"server\",le=\"300\"} 2\n");
	T_CONTAINS(t, "gatehouse_tool_execution_duration_seconds_bucket{tool=\"lookup\","
		      "source=\"server\",le=\"+Inf\"} 3\n");
	T_CONTAINS(t, "gatehouse_tool_execution_duration_seconds_sum{tool=\"lookup\","
		      "source=\"server\"} 420.003\n");
	T_CONTAINS(t, "gatehouse_tool_execution_duration_seconds_count{tool=\"lookup\","
		      "source=\"server\"} 3\n");
	T_CONTAINS(t, "gatehouse_tool_executions_total{tool=\"lookup\",source=\"server\","
		      "outcome=\"ok\"} 2\n");
	T_CONTAINS(t, "gatehouse_tool_executions_total{tool=\"lookup\",source=\"server\","
		      "outcome=\"error\"} 1\n");
	/* 16 bounds + Inf */
	T_EQ_INT(lines_starting(t, "gatehouse_tool_execution_duration_seconds_bucket{"), 17);
	free(t);
}

static void test_integer_buckets_and_gauges(void)
{
	char *t;

	gh_metrics_reset();
	gh_metrics_upstream("local", "openai", GH_MO_OK, 1500000, 400000, 1000, 5000);
	gh_metrics_upstream("local", "openai", GH_MO_TIMEOUT, 2000000, -1, -1, -1);
	gh_metrics_audit_commit(3, 2, 700000);
	gh_metrics_audit_checkpoint(990000);
	gh_metrics_audit_verified(1, 500000);
	t = render();
	T_ASSERT(t);
	T_CONTAINS(t, "gen_ai_client_token_usage_bucket{gen_ai_operation_name=\"chat\","
		      "gen_ai_provider_name=\"openai\",provider=\"local\",gen_ai_token_type=\"input\","
		      "le=\"1024\"} 1\n");
	T_CONTAINS(t, "gen_ai_client_token_usage_bucket{gen_ai_operation_name=\"chat\","
		      "gen_ai_provider_name=\"openai\",provider=\"local\","
		      "gen_ai_token_type=\"output\",le=\"4096\"} 0\n");
	T_CONTAINS(t, "gen_ai_client_token_usage_sum{gen_ai_operation_name=\"chat\","
		      "gen_ai_provider_name=\"openai\",provider=\"local\","
		      "gen_ai_token_type=\"output\"} 5000\n");
	/* success has no error_type; a timeout has one */
	T_CONTAINS(t, "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="
		      "\"chat\",gen_ai_provider_name=\"openai\",provider=\"local\"} 1\n");
	T_CONTAINS(t, "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="
		      "\"chat\",gen_ai_provider_name=\"openai\",provider=\"local\","
		      "error_type=\"timeout\"} 1\n");
	T_CONTAINS(t, "gatehouse_upstream_calls_total{provider=\"local\",gen_ai_provider_name="
		      "\"openai\",outcome=\"timeout\"} 1\n");
	T_CONTAINS(t, "gatehouse_upstream_time_to_first_token_seconds_count{gen_ai_provider_name="
		      "\"openai\",provider=\"local\"} 1\n");
	T_CONTAINS(t, "gatehouse_upstream_time_to_first_token_seconds_sum{gen_ai_provider_name="
		      "\"openai\",provider=\"local\"} 0.0004\n");
	T_CONTAINS(t, "gatehouse_audit_rows_appended_total 2\n");
	T_CONTAINS(t, "gatehouse_store_group_commit_jobs_bucket{le=\"2\"} 0\n");
	T_CONTAINS(t, "gatehouse_store_group_commit_jobs_bucket{le=\"4\"} 1\n");
	T_CONTAINS(t, "gatehouse_audit_checkpoint_age_seconds 10\n");
	T_CONTAINS(t, "gatehouse_audit_verify_ok 1\n");
	T_CONTAINS(t, "gatehouse_audit_verify_timestamp_seconds 500\n");
	T_CONTAINS(t, "gatehouse_streams_active 3\n");
	T_CONTAINS(t, "gatehouse_streams_max 32\n");
	T_CONTAINS(t, "gatehouse_approvals_pending 2\n");
	/* declared though nothing was recorded */
	T_CONTAINS(t, "# TYPE gatehouse_approval_decision_seconds histogram\n");
	T_EQ_INT(lines_starting(t, "gatehouse_approval_decision_seconds"), 0);
	free(t);
}

static void test_request_agent(void)
{
	char *t;

	gh_metrics_reset();
	gh_metrics_set_agent("assistant");
	gh_metrics_request(GH_MS_NATIVE, 201, 1000000);
	/* the next request on this thread ran no agent */
	gh_metrics_request(GH_MS_NATIVE, 404, 1000000);
	gh_metrics_request(GH_MS_NONE, 499, 1000000);
	gh_metrics_set_agent("bad\"agent");
	gh_metrics_request(GH_MS_OPENAI, 502, 1000000);
	t = render();
	T_ASSERT(t);
	T_CONTAINS(t, "gatehouse_http_requests_total{surface=\"native\",status_class=\"2xx\","
		      "agent=\"assistant\"} 1\n");
	T_CONTAINS(t, "gatehouse_http_requests_total{surface=\"native\",status_class=\"4xx\","
		      "agent=\"\"} 1\n");
	T_CONTAINS(t, "gatehouse_http_requests_total{surface=\"none\",status_class=\"4xx\","
		      "agent=\"\"} 1\n");
	T_CONTAINS(t, "gatehouse_http_requests_total{surface=\"openai\",status_class=\"5xx\","
		      "agent=\"bad\\\"agent\"} 1\n");
	free(t);
}

static void test_tool_table_is_bounded(void)
{
	char name[32], *t, *p;
	int i, other = 0, series = 0;

	gh_metrics_reset();
	for (i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "tool_%d", i);
		gh_metrics_tool(name, "client", GH_MD_ALLOWED);
	}
	gh_metrics_tool(NULL, NULL, GH_MD_DENIED);
	t = render();
	T_ASSERT(t);
	for (p = t; (p = strstr(p, "\ngatehouse_tool_calls_total{")); p++) {
		series++;
		if (!strncmp(p + 28, "tool=\"_other\"", 13))
			other++;
	}
	/* 255 names and "_other"; the made-up name went to "_other" too (the
	 * table was full when it came) */
	T_EQ_INT(series, GH_METRICS_TOOLS + 1);
	T_EQ_INT(other, 2);
	T_CONTAINS(t, "gatehouse_tool_calls_total{tool=\"_other\",source=\"client\","
		      "decision=\"allowed\"} 145\n");
	T_CONTAINS(t, "gatehouse_tool_calls_total{tool=\"_other\",source=\"server\","
		      "decision=\"denied\"} 1\n");
	T_CONTAINS(t, "gatehouse_tool_calls_total{tool=\"tool_254\",source=\"client\","
		      "decision=\"allowed\"} 1\n");
	free(t);
	gh_metrics_reset();
	gh_metrics_tool(NULL, NULL, GH_MD_DENIED);
	t = render();
	T_CONTAINS(t, "gatehouse_tool_calls_total{tool=\"_unknown\",source=\"server\","
		      "decision=\"denied\"} 1\n");
	free(t);
}

static void test_stored_source_follows_mcp(void)
{
	char *t;

	gh_metrics_reset();
	gh_metrics_tool("docs_search", "mcp", GH_MD_APPROVAL_REQUESTED);
	/* an approval row says "server" for a federated tool */
	gh_metrics_tool("docs_search", "server", GH_MD_APPROVED);
	t = render();
	T_CONTAINS(t, "gatehouse_tool_calls_total{tool=\"docs_search\",source=\"mcp\","
		      "decision=\"approved\"} 1\n");
	free(t);
}

#define THREADS 4
#define PER_THREAD 20000

static void *hammer(void *arg)
{
	char name[16];
	int i, k = (int)(intptr_t)arg;

	for (i = 0; i < PER_THREAD; i++) {
		snprintf(name, sizeof(name), "t%d", i % 50);
		gh_metrics_tool(name, "server", GH_MD_ALLOWED);
		gh_metrics_set_agent(k & 1 ? "a" : "b");
		gh_metrics_request(GH_MS_MCP, 200, i);
	}
	return NULL;
}

static void test_concurrent_recording(void)
{
	pthread_t th[THREADS];
	char *t;
	int i;

	gh_metrics_reset();
	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, hammer, (void *)(intptr_t)i);
	/* scraping meanwhile is fine */
	for (i = 0; i < 5; i++)
		free(render());
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	t = render();
	T_CONTAINS(t, "gatehouse_tool_calls_total{tool=\"t7\",source=\"server\","
		      "decision=\"allowed\"} 1600\n");
	T_CONTAINS(t, "gatehouse_http_requests_total{surface=\"mcp\",status_class=\"2xx\","
		      "agent=\"a\"} 40000\n");
	T_EQ_INT(lines_starting(t, "gatehouse_tool_calls_total{"), 50);
	free(t);
}

T_MAIN(T(test_escape), T(test_histogram_buckets), T(test_integer_buckets_and_gauges),
       T(test_request_agent), T(test_tool_table_is_bounded), T(test_stored_source_follows_mcp),
       T(test_concurrent_recording))
