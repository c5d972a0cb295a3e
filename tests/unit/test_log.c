/*
 * test_log.c - the stderr log: json lines are one valid object each, at
 * most GH_LOG_LINE_MAX bytes however long the message or the path, with
 * quotes and control characters escaped and UTF-8 never split; text lines
 * keep their shape; a request line carries its fields in both formats.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../../src/log.h"
#include "t.h"

static char out[1 << 16];

/* Runs fn with stderr going to a temp file; out holds what it wrote. */
static void capture(void (*fn)(void))
{
	char path[] = "/tmp/gh-unit-log-XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	ssize_t n;

	dup2(fd, STDERR_FILENO);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	n = read(fd, out, sizeof(out) - 1);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
}

static void long_message(void)
{
	static char msg[5000];
	size_t i;

	/* quotes, a tab, a newline and 3-byte UTF-8 characters, repeated */
	for (i = 0; i + 8 < sizeof(msg); i += 8)
		memcpy(msg + i, "a\"\t\n\xe2\x82\xac\\", 8);
	msg[i] = '\0';
	gh_log_set_format(GH_LOG_JSON);
	gh_info("%s", msg);
	gh_log_set_format(GH_LOG_TEXT);
}

static void test_json_line_is_bounded_and_valid(void)
{
	cJSON *o;
	const char *m;

	capture(long_message);
	T_ASSERT(strlen(out) <= GH_LOG_LINE_MAX);
	T_ASSERT(out[strlen(out) - 1] == '\n');
	T_ASSERT(!strchr(out, '\n') || strchr(out, '\n') == out + strlen(out) - 1);
	o = cJSON_Parse(out);
	T_ASSERT(o);
	T_EQ_STR(cJSON_GetObjectItem(o, "level")->valuestring, "info");
	T_ASSERT(cJSON_IsString(cJSON_GetObjectItem(o, "ts")));
	m = cJSON_GetObjectItem(o, "msg")->valuestring;
	T_ASSERT(!strncmp(m, "a\"\t\n\xe2\x82\xac\\a\"", 10));
	T_ASSERT(strlen(m) > 600);
	T_ASSERT(strstr(out, "a\\\"\\t\\n\xe2\x82\xac\\\\"));
	cJSON_Delete(o);
}

static char long_path[9000];

static void request_lines(void)
{
	struct gh_log_request lr = {"req_1", "POST", long_path, "/api/agents/:id/generate", 201,
				    12.5, "k_abc"};

	memset(long_path, 'p', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[1] = (char)0xff;   /* starts no sequence */
	long_path[2] = (char)0xc3;   /* a sequence cut short */
	long_path[sizeof(long_path) - 1] = '\0';
	gh_log_set_format(GH_LOG_JSON);
	gh_log_request(&lr);
	gh_log_set_format(GH_LOG_TEXT);
	lr.path = "/api/agents/a/generate";
	gh_log_request(&lr);
}

static void test_request_line_fields_in_both_formats(void)
{
	char *nl;
	cJSON *o;

	capture(request_lines);
	nl = strchr(out, '\n');
	T_ASSERT(nl);
	*nl = '\0';
	T_ASSERT(strlen(out) < GH_LOG_LINE_MAX);
	o = cJSON_Parse(out);
	T_ASSERT(o);
	T_EQ_INT((int)cJSON_GetObjectItem(o, "status")->valuedouble, 201);
	T_ASSERT(cJSON_GetObjectItem(o, "duration_ms")->valuedouble == 12.5);
	T_EQ_STR(cJSON_GetObjectItem(o, "request_id")->valuestring, "req_1");
	T_EQ_STR(cJSON_GetObjectItem(o, "route")->valuestring, "/api/agents/:id/generate");
	T_EQ_STR(cJSON_GetObjectItem(o, "key_id")->valuestring, "k_abc");
	T_EQ_STR(cJSON_GetObjectItem(o, "method")->valuestring, "POST");
	/* the path was cut, inside its string; bytes that are no UTF-8
	 * became U+FFFD */
	T_ASSERT(!strncmp(cJSON_GetObjectItem(o, "path")->valuestring, "/\xef\xbf\xbd\xef\xbf\xbdpp", 9));
	T_ASSERT(strlen(cJSON_GetObjectItem(o, "path")->valuestring) > 500);
	cJSON_Delete(o);
	T_CONTAINS(nl + 1, " info  req_1 POST /api/agents/a/generate 201 12.50ms key=k_abc "
			   "route=/api/agents/:id/generate\n");
}

T_MAIN(T(test_json_line_is_bounded_and_valid), T(test_request_line_fields_in_both_formats))
