/*
 * test_config.c - loading the config file: a table of broken configs and
 * the message each must produce (file, JSON path, what was expected),
 * ${ENV} substitution, the defaults an operator gets by leaving options
 * out, policy versions (change with the policy's content, not with its
 * layout or with other sections), and the shipped example config.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "t.h"
#include "util.h"

/* The smallest valid config: one mock provider and one agent. */
#define MIN_PROVIDERS "'providers':{'m':{'type':'mock'}}"
#define MIN_AGENTS "'agents':{'a':{'provider':'m'}}"
#define MIN MIN_PROVIDERS "," MIN_AGENTS
#define TOOL(name, extra)                                                                   \
	"'" name "':{'type':'http','description':'d','url':'http://127.0.0.1:9/x'," \
	"'input_schema':{'type':'object'}" extra "}"

/* The configs and expected messages below write JSON's double quotes as
 * single quotes, for legibility; dq() turns them back. Rotating buffers. */
static const char *dq(const char *s)
{
	static char buf[4][8192];
	static int k;
	char *d = buf[k++ % 4];
	size_t i;

	for (i = 0; s[i] && i < sizeof(buf[0]) - 1; i++)
		d[i] = s[i] == '\'' ? '"' : s[i];
	d[i] = '\0';
	return d;
}

static enum gh_code load(const char *text, struct gh_config **out, struct gh_err *e)
{
	const char *t = dq(text);

	gh_err_clear(e);
	return gh_config_parse("t.json", t, strlen(t), out, e);
}

struct bad_case {
	const char *text;
	const char *msg; /* fragment the message must contain */
};

static void test_bad_configs(void)
{
	static const struct bad_case c[] = {
		/* syntax */
		{"{" MIN ",}", "t.json: config is not valid JSON (line 1, column"},
		{"{" MIN "} /* never closed", "t.json: $: unterminated /* comment"},
		{"[]", "t.json: $: expected an object at the top level"},
		/* unknown names, so a typo is reported */
		{"{'servers':{}," MIN "}", "t.json: $.servers: unknown section (known: server,"},
		{"{'server':{'treads':8}," MIN "}",
		 "t.json: $.server.treads: unknown option (known: listen, max_body_bytes, "
		 "threads,"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','max_step':3}}}",
		 "$.agents.a.max_step: unknown option (known: name,"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','memory':{'on':true}}}}",
		 "$.agents.a.memory.on: unknown option (known: enabled, last_messages)"},
		{"{" MIN ",'policies':{'p':{'tools':{'alow':['*']}}}}",
		 "$.policies.p.tools.alow: unknown option (known: allow, deny)"},
		/* wrong types */
		{"{'server':{'threads':'8'}," MIN "}",
		 "t.json: $.server.threads: expected an integer in 4..20000, got a string"},
		{"{'server':{'listen':8080}," MIN "}",
		 "$.server.listen: expected a string, got a number"},
		{"{'server':[]," MIN "}", "$.server: expected an object, got an array"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','tools':'memory_*'}}}",
		 "$.agents.a.tools: expected an array of strings, got a string"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','tools':['x',3]}}}",
		 "$.agents.a.tools: item 1: expected a non-empty string, got a number"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','memory':{'enabled':1}}}}",
		 "$.agents.a.memory.enabled: expected true or false, got a number"},
		{"{" MIN_PROVIDERS ",'agents':[]}",
		 "$.agents: expected an object of name -> settings"},
		/* out of range */
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','max_steps':0}}}",
		 "t.json: $.agents.a.max_steps: expected an integer in 1..100, got a number out of "
		 "range"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','max_steps':101}}}",
		 "$.agents.a.max_steps: expected an integer in 1..100"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','max_steps':2.5}}}",
		 "$.agents.a.max_steps: expected an integer in 1..100"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','temperature':2.5}}}",
		 "$.agents.a.temperature: expected a number in 0..2"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','client_tool_timeout_s':0}}}",
		 "$.agents.a.client_tool_timeout_s: expected an integer in 1..2592000"},
		{"{" MIN ",'tools':{" TOOL("t", ",'output_schema':{'type':'strng'}") "}}",
		 "$.tools.t.output_schema: type: unknown type"},
		{"{" MIN ",'tools':{" TOOL("t", ",'output_schema':'object'") "}}",
		 "$.tools.t.output_schema: expected an object"},
		/* server.listen: a whole HOST:PORT, checked before anything starts */
		{"{'server':{'listen':'127.0.0.1'}," MIN "}",
		 "t.json: $.server.listen: expected HOST:PORT (e.g. 127.0.0.1:8080): '127.0.0.1' "
		 "has no port"},
		{"{'server':{'listen':'8080'}," MIN "}", "$.server.listen: expected HOST:PORT"},
		{"{'server':{'listen':':8080'}," MIN "}",
		 "$.server.listen: ':8080' has no host before the port"},
		{"{'server':{'listen':''}," MIN "}", "$.server.listen: expected HOST:PORT"},
		{"{'server':{'listen':'127.0.0.1:'}," MIN "}",
		 "$.server.listen: '127.0.0.1:': the port must be a number in 0..65535"},
		{"{'server':{'listen':'127.0.0.1:65536'}," MIN "}",
		 "the port must be a number in 0..65535"},
		{"{'server':{'listen':'127.0.0.1:80x'}," MIN "}",
		 "the port must be a number in 0..65535"},
		{"{'server':{'listen':'127.0.0.1:-1'}," MIN "}",
		 "the port must be a number in 0..65535"},
		{"{'server':{'listen':'127.0.0.1:8080,127.0.0.1:8081'}," MIN "}",
		 "expected one HOST:PORT, not a list"},
		{"{'server':{'listen':'::1:8080'}," MIN "}",
		 "'::1:8080': an IPv6 address goes in brackets, e.g. [::1]:8080"},
		{"{'server':{'listen':'[::1'}," MIN "}", "expected [IPv6]:PORT"},
		{"{'server':{'listen':'[::1]8080'}," MIN "}", "expected [IPv6]:PORT"},
		{"{'server':{'listen':'[1.2.3.4]:80'}," MIN "}", "'1.2.3.4' is not an IPv6 address"},
		{"{'server':{'listen':'127.0.0:80'}," MIN "}", "'127.0.0' is not an IPv4 address"},
		{"{'server':{'listen':'300.0.0.1:80'}," MIN "}", "'300.0.0.1' is not an IPv4 address"},
		{"{'server':{'listen':'my host:80'}," MIN "}",
		 "'my host' is not an IP address or a host name"},
		{"{'server':{'listen':'-host:80'}," MIN "}", "is not an IP address or a host name"},
		{"{'server':{'listen':'host-:80'}," MIN "}", "is not an IP address or a host name"},
		{"{'server':{'listen':'a..b:80'}," MIN "}", "is not an IP address or a host name"},
		/* the per-user failed-login limit is never below the per-address one */
		{"{'admin':{'login_attempts_per_minute':10,'login_failures_per_user_per_hour':9},"
		 MIN "}",
		 "$.admin.login_failures_per_user_per_hour: 9 is below login_attempts_per_minute "
		 "(10): it must be at least that"},
		{"{'server':{'max_body_bytes':1023}," MIN "}",
		 "$.server.max_body_bytes: expected an integer in 1024..1073741824"},
		{"{'audit':{'max_args_bytes':100}," MIN "}",
		 "$.audit.max_args_bytes: expected an integer in 256..1048576"},
		{"{'database':{'synchronous':'off'}," MIN "}",
		 "$.database.synchronous: expected 'normal' or 'full'"},
		/* PostgreSQL: one database, a URL libpq takes, never the password */
		{"{'database':{'path':'a.db','url':'postgres://u@h/d'}," MIN "}",
		 "$.database.url: database.path and database.url both name a database"},
		{"{'database':{'url':'mysql://u@h/d'}," MIN "}",
		 "$.database.url: expected a postgres:// or postgresql:// URL"},
		{"{'database':{'url':'postgres://u:hunter2@h/d?nosuch=1'}," MIN "}",
		 "$.database.url: database.url is not a URL libpq accepts"},
		{"{'database':{'url':'postgres://u@h/d','pool_size':0}," MIN "}",
		 "$.database.pool_size: expected an integer in 1..1000"},
		/* threads must leave room for plain requests beside held streams */
		{"{'server':{'threads':10,'max_streams':7}," MIN "}",
		 "t.json: $.server: threads (10) must exceed max_streams (7) by at least 4"},
		{"{'server':{'max_streams':253}," MIN "}",
		 "$.server: threads (256) must exceed max_streams (253) by at least 4"},
		/* missing required */
		{"{" MIN_PROVIDERS ",'agents':{'a':{'model':'x'}}}",
		 "t.json: $.agents.a.provider: required option is missing"},
		{"{" MIN_PROVIDERS "}", "t.json: $.agents: at least one agent is required"},
		{"{'providers':{'o':{'type':'openai','base_url':'http://h/v1'}}," MIN_AGENTS
		 "}",
		 "$.agents.a.provider: no provider named 'm' in $.providers"},
		{"{'providers':{'o':{'type':'openai','base_url':'http://h/v1'}},"
		 "'agents':{'a':{'provider':'o'}}}",
		 "$.agents.a.model: required option is missing"},
		{"{'providers':{'o':{'base_url':'http://h'}}," MIN_AGENTS "}",
		 "$.providers.o.type: required"},
		{"{'providers':{'o':{'type':'openai'}}," MIN_AGENTS "}",
		 "$.providers.o.base_url: expected an http:// or https:// URL"},
		{"{'providers':{'o':{'type':'openai','base_url':'ftp://h'}}," MIN_AGENTS "}",
		 "$.providers.o.base_url: expected an http:// or https:// URL"},
		/* no host: with its trailing '/' cut, "https://" would send the key
		 * to "https:/chat/completions", which curl reads as host "chat" */
		{"{'providers':{'m':{'type':'mock'},'o':{'type':'openai','base_url':'https://'}}," MIN_AGENTS "}",
		 "$.providers.o.base_url: expected an http:// or https:// URL with a host"},
		{"{'providers':{'m':{'type':'mock'},'o':{'type':'anthropic','base_url':'http:///v1'}}," MIN_AGENTS "}",
		 "$.providers.o.base_url: expected an http:// or https:// URL with a host"},
		{"{'providers':{'m':{'type':'mock'},'o':{'type':'openai','base_url':'https://?x'}}," MIN_AGENTS "}",
		 "$.providers.o.base_url: expected an http:// or https:// URL with a host"},
		{"{'providers':{'m':{'type':'mock'},'o':{'type':'openai','base_url':'https://h /v1'}}," MIN_AGENTS "}",
		 "$.providers.o.base_url: expected an http:// or https:// URL with a host"},
		{"{" MIN ",'tools':{'t':{'type':'http','description':'d','url':"
		 "'http://','input_schema':{}}}}",
		 "$.tools.t.url: expected an http:// or https:// URL with a host"},
		{"{" MIN ",'tools':{'t':{'type':'http','description':'d','url':"
		 "'http://h/a\tb','input_schema':{}}}}",
		 "$.tools.t.url: expected an http:// or https:// URL with a host"},
		{"{'providers':{'o':{'type':'gpt'}}," MIN_AGENTS "}",
		 "$.providers.o.type: expected 'openai', 'anthropic' or 'mock', got 'gpt'"},
		{"{" MIN ",'tools':{'t':{'type':'http','url':'http://h',"
		 "'input_schema':{}}}}",
		 "$.tools.t.description: required option is missing"},
		/* unknown references */
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'nope'}}}",
		 "t.json: $.agents.a.provider: no provider named 'nope' in $.providers"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','tools':['memory_*',"
		 "'send_mail']}}}",
		 "t.json: $.agents.a.tools[1]: no tool named 'send_mail' in $.tools"},
		{"{" MIN ",'default_agent':'b'}",
		 "t.json: $.default_agent: expected the id of an agent in $.agents"},
		/* environment */
		{"{'providers':{'o':{'type':'openai','base_url':'http://h',"
		 "'api_key':'${GH_TEST_SURELY_UNSET}'}}," MIN_AGENTS "}",
		 "t.json: $.providers.o.api_key: environment variable GH_TEST_SURELY_UNSET is not "
		 "set (use ${GH_TEST_SURELY_UNSET:-default} for an optional one)"},
		{"{" MIN ",'tools':{" TOOL("t", ",'headers':{'X':['a','${GH_TEST_SURELY_UNSET}']}")
		 "}}",
		 "$.tools.t.headers.X[1]: environment variable GH_TEST_SURELY_UNSET is not set"},
		{"{'database':{'path':'${GH_TEST_X'}," MIN "}",
		 "$.database.path: unterminated ${ in string"},
		{"{'database':{'path':'${A-B}'}," MIN "}",
		 "$.database.path: bad environment variable name 'A-B'"},
		{"{'database':{'path':'${}'}," MIN "}",
		 "$.database.path: bad environment variable reference"},
		/* tools */
		{"{" MIN ",'tools':{'t':{'type':'http','description':'d','url':'http://h',"
		 "'input_schema':{'type':'object','properties':{'to':{'type':'strng'}}}}}}",
		 "t.json: $.tools.t.input_schema: properties.to.type: unknown type 'strng'"},
		{"{" MIN ",'tools':{'t':{'type':'http','description':'d','url':'http://h',"
		 "'input_schema':{'pattern':'(?<=x)'}}}}",
		 "$.tools.t.input_schema: pattern:"},
		{"{" MIN ",'tools':{'t':{'type':'http','description':'d','url':'http://h',"
		 "'input_schema':[]}}}",
		 "$.tools.t.input_schema: expected an object, got an array"},
		{"{" MIN ",'tools':{" TOOL("9lives", "") "}}",
		 "$.tools.9lives: tool name must match"},
		{"{" MIN ",'tools':{'t':{'type':'mcp','description':'d','url':"
		 "'http://h','input_schema':{}}}}",
		 "$.tools.t.type: expected 'http'"},
		{"{" MIN ",'tools':{'t':{'type':'http','description':'d','url':"
		 "'file:///etc/passwd','input_schema':{}}}}",
		 "$.tools.t.url: expected an http:// or https:// URL"},
		{"{" MIN ",'tools':{" TOOL("t", ",'headers':{'X':'a\\r\\nEvil: 1'}") "}}",
		 "$.tools.t.headers: X: expected a header value string without line breaks"},
		{"{" MIN ",'tools':{" TOOL("t", ",'headers':{'X: y':'a'}") "}}",
		 "$.tools.t.headers: X: y: expected a header value string without line breaks"},
		{"{" MIN ",'tools':{" TOOL("t", ",'annotations':{'readOnly':true}") "}}",
		 "$.tools.t.annotations: unknown annotation 'readOnly'"},
		{"{" MIN ",'tools':{" TOOL("t", ",'annotations':{'readOnlyHint':'yes'}") "}}",
		 "$.tools.t.annotations: readOnlyHint: expected true or false"},
		{"{" MIN_PROVIDERS ",'agents':{'a b':{'provider':'m'}}}",
		 "$.agents.a b: names may use letters, digits"},
		/* policies */
		{"{" MIN ",'policies':{'p':{'approval':{'approver':'boss'}}}}",
		 "t.json: $.policies.p.approval.approver: expected 'admin' or 'caller', got "
		 "'boss'"},
		{"{" MIN ",'policies':{'p':{'approval':{'ttl_seconds':5}}}}",
		 "$.policies.p.approval.ttl_seconds: expected an integer in 10..2592000"},
		{"{" MIN ",'policies':{'p':{'rate_limits':{'tool_calls_per_minute':"
		 "{'*':10,'send_email':-1}}}}}",
		 "$.policies.p.rate_limits.tool_calls_per_minute: send_email: expected an "
		 "integer in "
		 "0..100000000"},
		{"{" MIN ",'policies':{'p':{'agents':['']}}}",
		 "$.policies.p.agents: item 0: expected a non-empty string"},
		/* mock rules */
		{"{'providers':{'m':{'type':'mock','rules':{}}}," MIN_AGENTS "}",
		 "t.json: $.providers.m.rules: expected an array of rules"},
		{"{'providers':{'m':{'type':'mock','rules':[{'text':'hi'},"
		 "{'if_contains':'x'}]}}," MIN_AGENTS "}",
		 "t.json: $.providers.m.rules[1]: expected exactly one of 'tool' (a tool call) or "
		 "'text' (a reply)"},
		{"{'providers':{'m':{'type':'mock','rules':[{'tool':'t','text':'x'}]}},"
		 MIN_AGENTS "}",
		 "$.providers.m.rules[0]: expected exactly one of 'tool'"},
		{"{'providers':{'m':{'type':'mock','rules':[{'tool':'not a name'}]}},"
		 MIN_AGENTS "}",
		 "$.providers.m.rules[0]: tool: expected a tool name"},
		{"{'providers':{'m':{'type':'mock','rules':[{'tool':'t','args':[1]}]}},"
		 MIN_AGENTS "}",
		 "$.providers.m.rules[0]: args: expected an object"},
		{"{'providers':{'m':{'type':'mock','rules':[{'text':'x',"
		 "'if_contains':3}]}}," MIN_AGENTS "}",
		 "$.providers.m.rules[0]: if_contains: expected a string"},
		{"{'providers':{'m':{'type':'mock','rules':['hi']}}," MIN_AGENTS "}",
		 "$.providers.m.rules[0]: expected an object"},
		{"{'providers':{'m':{'type':'mock','rulez':[]}}," MIN_AGENTS "}",
		 "$.providers.m.rulez: unknown option"},
		/* notifications: each target checked whole, by kind */
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'pager','url':'http://x'}}}}",
		 "t.json: $.notifications.targets.h.kind: expected \"webhook\" or \"smtp\""},
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'webhook','url':'http://x'}}}}",
		 "$.notifications.targets.h.secret: required option is missing: a json webhook is "
		 "signed with it"},
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'webhook','url':'http://x',"
		 "'secret':'short'}}}}",
		 "$.notifications.targets.h.secret: expected at least 16 characters"},
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'webhook','url':'smtp://x',"
		 "'format':'slack'}}}}",
		 "$.notifications.targets.h.url: expected an http:// or https:// URL"},
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'webhook','url':'http://x',"
		 "'format':'teams','secret':'0123456789abcdef'}}}}",
		 "$.notifications.targets.h.format: expected \"json\" or \"slack\""},
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'webhook','url':'http://x',"
		 "'format':'slack','to':['a@b']}}}}",
		 "$.notifications.targets.h.to: not an option of a webhook target"},
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'webhook','url':'http://x',"
		 "'format':'slack','events':['approval-requested','approved']}}}}",
		 "$.notifications.targets.h.events: item 1: expected \"approval-requested\""},
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'webhook','url':'http://x',"
		 "'format':'slack','events':[]}}}}",
		 "$.notifications.targets.h.events: expected at least one event"},
		{"{" MIN ",'notifications':{'targets':{'h':{'kind':'webhook','url':'http://x',"
		 "'format':'slack','events':'approval-requested'}}}}",
		 "$.notifications.targets.h.events: expected an array, got a string"},
		{"{" MIN ",'notifications':{'targets':{'m':{'kind':'smtp','url':'smtp://x',"
		 "'to':['r@example.com']}}}}",
		 "$.notifications.targets.m.from: required option is missing"},
		{"{" MIN ",'notifications':{'targets':{'m':{'kind':'smtp','url':'smtp://x',"
		 "'from':'g@example.com','to':['r@example.com>\\r\\nBcc: e@x']}}}}",
		 "$.notifications.targets.m.to: item 0: expected an address like reviewer@example.com"},
		{"{" MIN ",'notifications':{'targets':{'m':{'kind':'smtp',"
		 "'url':'smtp://user:pw@x','from':'g@example.com','to':['r@example.com']}}}}",
		 "$.notifications.targets.m.url: expected smtp://HOST[:PORT] or smtps://HOST[:PORT]"},
		{"{" MIN ",'notifications':{'targets':{'m':{'kind':'smtp','url':'smtps://x:465',"
		 "'from':'g@example.com','to':['r@example.com'],'username':'u'}}}}",
		 "$.notifications.targets.m.password: username and password go together"},
		{"{" MIN ",'notifications':{'targets':{'m':{'kind':'smtp','url':'smtp://x',"
		 "'from':'g@example.com','to':['r@example.com'],'secret':'0123456789abcdef'}}}}",
		 "$.notifications.targets.m.secret: not an option of a smtp target"},
		{"{" MIN ",'notifications':{'retry_base_ms':5}}",
		 "$.notifications.retry_base_ms: expected an integer in 10..3600000"},
		{"{" MIN ",'notifications':{'retry_base_ms':5000,'retry_max_ms':1000}}",
		 "$.notifications.retry_max_ms: 1000 is below retry_base_ms (5000)"},
		{"{" MIN ",'notifications':{'targets':{'b a d':{'kind':'smtp'}}}}",
		 "$.notifications.targets.b a d: names may use letters"},
		{"{" MIN ",'notifications':{'retention_days':-1}}",
		 "$.notifications.retention_days: expected an integer in 0..36500"},
	};
	struct gh_config *cfg;
	struct gh_err e;
	size_t i;
	int bad = 0;

	unsetenv("GH_TEST_SURELY_UNSET");
	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		cfg = (struct gh_config *)&e;
		if (load(c[i].text, &cfg, &e) == GH_OK) {
			gh_config_free(cfg);
			fprintf(stderr, "  case %zu accepted: %s\n", i, c[i].text);
			bad++;
			continue;
		}
		if (cfg != NULL || e.code != GH_E_BADREQ || !strstr(e.msg, dq(c[i].msg))) {
			fprintf(stderr, "  case %zu: code %d, message\n    \"%s\"\n  expected to "
					"contain\n    \"%s\"\n", i, e.code, e.msg, dq(c[i].msg));
			bad++;
		}
	}
	if (bad)
		T_FAIL("%d of %zu broken configs not reported as expected", bad, GH_ARRAY_LEN(c));
}

/* Options the section readers handle themselves (objects like headers,
 * annotations, tool_calls_per_minute; strings like approver) given with
 * the wrong JSON type: a clear refusal, never a crash or a silent default.
 * Each case runs in a child process so a crash is reported as such. */
static void test_wrong_types_of_special_options(void)
{
	static const struct bad_case c[] = {
		{"{" MIN ",'tools':{" TOOL("t", ",'headers':['x']") "}}", "$.tools.t.headers"},
		{"{" MIN ",'tools':{" TOOL("t", ",'headers':'Authorization: x'") "}}",
		 "$.tools.t.headers"},
		{"{" MIN ",'tools':{" TOOL("t", ",'annotations':[true]") "}}",
		 "$.tools.t.annotations"},
		{"{" MIN ",'policies':{'p':{'rate_limits':{'tool_calls_per_minute':[5]}}}}",
		 "$.policies.p.rate_limits.tool_calls_per_minute"},
		{"{" MIN ",'policies':{'p':{'rate_limits':{'tool_calls_per_minute':5}}}}",
		 "$.policies.p.rate_limits.tool_calls_per_minute"},
		{"{" MIN ",'policies':{'p':{'approval':{'approver':5}}}}",
		 "$.policies.p.approval.approver"},
		{"{'database':{'synchronous':true}," MIN "}", "$.database.synchronous"},
	};
	size_t i;
	int bad = 0;

	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		int fd[2], status = 0;
		char msg[GH_ERR_MSG_MAX + 8] = "";
		ssize_t n;
		pid_t pid;

		T_ASSERT(pipe(fd) == 0);
		fflush(NULL);
		pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			struct gh_config *cfg;
			struct gh_err e;
			enum gh_code rc;

			close(fd[0]);
			rc = load(c[i].text, &cfg, &e);
			gh_config_free(cfg);
			if (rc == GH_OK)
				gh_strlcpy(e.msg, "(accepted)", sizeof(e.msg));
			n = write(fd[1], e.msg, strlen(e.msg));
			_exit(n < 0 || rc == GH_OK ? 3 : 0);
		}
		close(fd[1]);
		n = read(fd[0], msg, sizeof(msg) - 1);
		msg[n > 0 ? n : 0] = '\0';
		close(fd[0]);
		waitpid(pid, &status, 0);
		if (!WIFEXITED(status)) {
			fprintf(stderr, "  case %zu crashed (signal %d): %s\n", i,
				WIFSIGNALED(status) ? WTERMSIG(status) : 0, c[i].text);
			bad++;
		} else if (WEXITSTATUS(status) != 0 || !strstr(msg, dq(c[i].msg))) {
			fprintf(stderr,
				"  case %zu: exit %d, message \"%s\", expected it to name %s\n",
				i, WEXITSTATUS(status), msg, c[i].msg);
			bad++;
		}
	}
	if (bad)
		T_FAIL("%d of %zu wrongly typed options crashed or were accepted", bad,
		       GH_ARRAY_LEN(c));
}

/* The boundary values of the table above are accepted. */
static void test_boundaries_accepted(void)
{
	static const char *const ok[] = {
		"{'server':{'threads':11,'max_streams':7}," MIN "}",
		"{'server':{'max_body_bytes':1024}," MIN "}",
		"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','max_steps':100,"
		"'temperature':0,'max_tokens':1000000}}}",
		"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','max_steps':1.0}}}",
		"{" MIN ",'policies':{'p':{'approval':{'ttl_seconds':10}}}}",
		"// comment first\n{" MIN "} // and last",
		"{'server':{'listen':'0.0.0.0:65535'}," MIN "}",
		"{'admin':{'login_attempts_per_minute':10,'login_failures_per_user_per_hour':10},"
		MIN "}",
		"{'server':{'listen':'[::1]:0'}," MIN "}",
		"{'server':{'listen':'localhost:8080'}," MIN "}",
		"{'server':{'listen':'gw-1.example.internal:80'}," MIN "}",
		"{" MIN ",'tools':{" TOOL("t", ",'annotations':{'title':'T',"
						  "'readOnlyHint':true}") "}}",
		"{'providers':{'m':{'type':'mock','rules':[{'if_contains':'x',"
		"'tool':'t','args':{},'then':'done'}],'default':'d',"
		"'after_tool':'a'}}," MIN_AGENTS "}",
	};
	struct gh_config *cfg;
	struct gh_err e;
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(ok); i++) {
		if (load(ok[i], &cfg, &e) != GH_OK)
			T_FAIL("case %zu refused: %s\n    %s", i, e.msg, ok[i]);
		gh_config_free(cfg);
	}
}

/* A name given twice: refused, naming it ("defined twice" from the
 * section reader, or "duplicate" should the JSON parser refuse it first). */
static int dup_check(const struct bad_case *c, size_t i, const char *name)
{
	struct gh_config *cfg;
	struct gh_err e;

	if (load(c->text, &cfg, &e) == GH_OK) {
		gh_config_free(cfg);
		fprintf(stderr, "  case %zu: accepted, one of the two silently ignored: %s\n", i,
			c->text);
		return 1;
	}
	if (e.code != GH_E_BADREQ || !strstr(e.msg, dq(c->msg)) ||
	    (!strstr(e.msg, "defined twice") && !strstr(e.msg, "duplicate")) ||
	    !strstr(e.msg, name)) {
		fprintf(stderr, "  case %zu: \"%s\" should name the duplicate %s\n", i, e.msg,
			name);
		return 1;
	}
	return 0;
}

static void test_duplicate_names(void)
{
	static const struct bad_case c[] = {
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m'},'a':{'provider':'m'}}}",
		 "t.json: "},
		{"{'providers':{'m':{'type':'mock'},'m':{'type':'mock'}}," MIN_AGENTS "}",
		 "t.json: "},
		{"{" MIN ",'tools':{" TOOL("t", "") "," TOOL("t", "") "}}", "t.json: "},
		{"{" MIN ",'policies':{'p':{},'p':{}}}", "t.json: "},
	};
	static const char *const names[] = {"'a'", "'m'", "'t'", "'p'"};
	static const char *const paths[] = {"$.agents.a", "$.providers.m", "$.tools.t",
					    "$.policies.p"};
	size_t i;
	int bad = 0;

	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		struct gh_config *cfg;
		struct gh_err e;

		bad += dup_check(&c[i], i, "");
		/* today's reader says "$.agents.a: defined twice"; a parser-level
		 * refusal must still name the key */
		if (load(c[i].text, &cfg, &e) != GH_OK && !strstr(e.msg, paths[i]) &&
		    !strstr(e.msg, dq(names[i]))) {
			fprintf(stderr, "  case %zu: \"%s\" names neither %s nor %s\n", i, e.msg,
				paths[i], names[i]);
			bad++;
		}
	}
	if (bad)
		T_FAIL("%d duplicate names not reported", bad);
}

/* A key given twice in one object (an option, a section): the second is
 * not silently ignored. */
static void test_duplicate_keys(void)
{
	static const struct bad_case c[] = {
		{"{'server':{'threads':100,'threads':64}," MIN "}", "t.json: "},
		{"{" MIN ",'server':{'listen':'127.0.0.1:1'},'server':{'listen':"
		 "'0.0.0.0:2'}}",
		 "t.json: "},
		{"{" MIN ",'agents':{'b':{'provider':'m'}}}", "t.json: "},
	};
	static const char *const names[] = {"threads", "server", "agents"};
	size_t i;
	int bad = 0;

	for (i = 0; i < GH_ARRAY_LEN(c); i++)
		bad += dup_check(&c[i], i, names[i]);
	if (bad)
		T_FAIL("%d keys given twice were not reported", bad);
}

/* A misspelt key in a mock rule is reported; otherwise the rule loses its
 * condition and answers every message. */
static void test_mock_rule_unknown_key(void)
{
	static const char *const text =
		"{'providers':{'m':{'type':'mock','rules':[{'if_contain':'refund',"
		"'text':'Refund issued.'}]}}," MIN_AGENTS "}";
	struct gh_config *cfg;
	struct gh_err e;

	if (load(text, &cfg, &e) == GH_OK) {
		gh_config_free(cfg);
		T_FAIL("mock rule with unknown key \"if_contain\" accepted");
	}
	T_CONTAINS(e.msg, "$.providers.m.rules[0]");
	T_CONTAINS(e.msg, "if_contain");
}

static void test_env(void)
{
	static const char *const text =
		"{'providers':{'o':{'type':'openai','base_url':'${GH_TEST_URL:-http://"
		"localhost:1}/v1/','api_key':'k-${GH_TEST_KEY}-${GH_TEST_KEY}'}},"
		"'agents':{'a':{'provider':'o','model':'${GH_TEST_MODEL:-}',"
		"'instructions':'cost: $5 and ${GH_TEST_EMPTY:-fallback} {x}'}}}";
	struct gh_config *cfg;
	struct gh_err e;

	unsetenv("GH_TEST_URL");
	unsetenv("GH_TEST_MODEL");
	setenv("GH_TEST_KEY", "s3cret", 1);
	setenv("GH_TEST_EMPTY", "", 1);
	T_EQ_INT(load(text, &cfg, &e), GH_OK);
	/* default used, then the trailing slash trimmed */
	T_EQ_STR(cfg->providers[0].base_url, "http://localhost:1/v1");
	T_EQ_STR(cfg->providers[0].api_key, "k-s3cret-s3cret");
	T_EQ_STR(cfg->agents[0].model, "");
	/* set but empty counts as unset when there is a default; a lone $ is text */
	T_EQ_STR(cfg->agents[0].instructions, "cost: $5 and fallback {x}");
	gh_config_free(cfg);

	setenv("GH_TEST_URL", "https://api.example.com", 1);
	setenv("GH_TEST_MODEL", "gpt-x", 1);
	setenv("GH_TEST_EMPTY", "given", 1);
	T_EQ_INT(load(text, &cfg, &e), GH_OK);
	T_EQ_STR(cfg->providers[0].base_url, "https://api.example.com/v1");
	T_EQ_STR(cfg->agents[0].model, "gpt-x");
	T_EQ_STR(cfg->agents[0].instructions, "cost: $5 and given {x}");
	/* the substituted document is what the config keeps */
	T_EQ_STR(gh_json_str(cJSON_GetObjectItem(cJSON_GetObjectItem(cfg->root, "providers"), "o"),
			     "api_key"),
		 "k-s3cret-s3cret");
	gh_config_free(cfg);
	/* the same rules for a string from elsewhere (migrate --to) */
	{
		char *out = NULL;

		T_EQ_INT(gh_config_subst_env("postgresql://u:${GH_TEST_KEY}@h/${GH_TEST_DB:-gh}",
					     &out, &e), GH_OK);
		T_EQ_STR(out, "postgresql://u:s3cret@h/gh");
		free(out);
		T_EQ_INT(gh_config_subst_env("x${GH_TEST_SURELY_UNSET}", &out, &e), GH_E_BADREQ);
		T_ASSERT(!out);
		T_EQ_STR(e.msg, "environment variable GH_TEST_SURELY_UNSET is not set (use "
				"${GH_TEST_SURELY_UNSET:-default} for an optional one)");
	}
	unsetenv("GH_TEST_URL");
	unsetenv("GH_TEST_MODEL");
	unsetenv("GH_TEST_KEY");
	unsetenv("GH_TEST_EMPTY");
}

/* database.url: the password from the environment; local files beside
 * the config */
static void test_database_url(void)
{
	struct gh_config *cfg;
	struct gh_err e;
	const char *t;

	setenv("GH_TEST_PGPASS", "pw", 1);
	t = dq("{'database':{'url':'postgresql://gh:${GH_TEST_PGPASS}@db/gh',"
	       "'statement_timeout_ms':5000}," MIN "}");
	T_EQ_INT(gh_config_parse("/etc/gh/g.json", t, strlen(t), &cfg, &e), GH_OK);
	T_EQ_STR(cfg->database.url, "postgresql://gh:pw@db/gh");
	T_EQ_STR(cfg->database.path, "/etc/gh/gatehouse");
	T_EQ_INT(cfg->database.statement_timeout_ms, 5000);
	T_EQ_INT(cfg->database.pool_size, 16);
	T_EQ_INT(cfg->database.connect_timeout_ms, 5000);
	gh_config_free(cfg);
	unsetenv("GH_TEST_PGPASS");
	/* SQLite by default */
	T_EQ_INT(load("{" MIN "}", &cfg, &e), GH_OK);
	T_ASSERT(!cfg->database.url);
	T_EQ_STR(cfg->database.path, "gatehouse.db");
	gh_config_free(cfg);
	/* a URL libpq refuses: named, its password not */
	T_ASSERT(load("{'database':{'url':'postgres://u:hunter2@h/d?nosuch=1'}," MIN "}", &cfg,
		      &e) != GH_OK);
	T_ASSERT(!strstr(e.msg, "hunter2"));
}

/* notifications: targets by name, defaults, ${ENV} secrets */
static void test_notifications(void)
{
	struct gh_config *cfg = NULL;
	struct gh_err e;
	const struct gh_notify_target_conf *h, *m;

	setenv("GH_TEST_HOOK_SECRET", "0123456789abcdef-secret", 1);
	T_EQ_INT(load("{" MIN ",'notifications':{'targets':{"
		      "'hook':{'kind':'webhook','url':'https://h.example/x',"
		      "'secret':'${GH_TEST_HOOK_SECRET}','events':['approval-expired']},"
		      "'mail':{'kind':'smtp','url':'smtps://mail.example:465','username':'u',"
		      "'password':'p','from':'g@example.com','to':['a@example.com','b@example.com']}"
		      "}}}", &cfg, &e), GH_OK);
	T_EQ_INT(cfg->notifications.ntargets, 2);
	T_EQ_INT(cfg->notifications.queue_max, 1000);
	T_EQ_INT(cfg->notifications.max_attempts, 6);
	T_EQ_INT(cfg->notifications.retry_base_ms, 20000);
	T_EQ_INT(cfg->notifications.retry_max_ms, 600000);
	h = &cfg->notifications.targets[0];
	m = &cfg->notifications.targets[1];
	T_EQ_STR(h->name, "hook");
	T_EQ_INT(h->kind, GH_NOTIFY_WEBHOOK);
	T_EQ_INT(h->format, GH_NOTIFY_FORMAT_JSON);
	T_EQ_STR(h->secret, "0123456789abcdef-secret");
	T_EQ_INT(h->events, GH_NOTIFY_EV_EXPIRED);
	T_EQ_INT(h->timeout_ms, 10000);
	T_EQ_STR(m->name, "mail");
	T_EQ_INT(m->kind, GH_NOTIFY_SMTP);
	T_EQ_INT(m->events, GH_NOTIFY_EV_REQUESTED | GH_NOTIFY_EV_DECIDED | GH_NOTIFY_EV_EXPIRED);
	T_EQ_INT(m->to.n, 2);
	T_EQ_STR(m->to.v[1], "b@example.com");
	T_EQ_INT(m->starttls, 1);
	gh_config_free(cfg);
	/* none configured: none */
	T_EQ_INT(load("{" MIN "}", &cfg, &e), GH_OK);
	T_EQ_INT(cfg->notifications.ntargets, 0);
	gh_config_free(cfg);
	unsetenv("GH_TEST_HOOK_SECRET");
}

static void test_defaults(void)
{
	struct gh_config *cfg;
	struct gh_err e;
	const struct gh_agent_conf *a;
	const struct gh_provider_conf *p;
	const struct gh_policy_conf *pol;
	const struct gh_tool_conf *t;

	T_EQ_INT(load("{'providers':{'m':{'type':'mock'},'an':{'type':'anthropic'}},"
		      "'agents':{'a':{'provider':'m'},'b':{'provider':'an','model':"
		      "'claude','memory':{'enabled':true}}},"
		      "'tools':{" TOOL("t", "") "},'policies':{'p':{}}}",
		      &cfg, &e),
		 GH_OK);
	T_EQ_STR(cfg->server.listen, "127.0.0.1:8080");
	T_EQ_INT(cfg->server.max_body_bytes, 1 << 20);
	T_EQ_INT(cfg->server.threads, 256);
	T_EQ_INT(cfg->server.head_timeout_ms, 10000);
	T_EQ_INT(cfg->server.max_connections_per_address, 128);
	T_EQ_INT(cfg->server.max_streams, 32);
	T_EQ_INT(cfg->server.heartbeat_ms, 15000);
	T_EQ_INT(cfg->server.request_timeout_ms, 30000);
	T_EQ_INT(cfg->server.approval_wait_ms, 30000);
	T_ASSERT(cfg->server.public_url == NULL);
	T_EQ_STR(cfg->database.path, "gatehouse.db");
	T_EQ_INT(cfg->database.synchronous_full, 0);
	T_EQ_INT(cfg->database.readers, 8);
	T_EQ_INT(cfg->database.busy_timeout_ms, 5000);
	T_EQ_INT(cfg->database.group_commit_max, 2048);

	p = gh_config_provider(cfg, "an");
	T_ASSERT(p && p->type == GH_PROVIDER_ANTHROPIC);
	T_EQ_STR(p->base_url, "https://api.anthropic.com");
	T_EQ_STR(p->anthropic_version, "2023-06-01");
	T_EQ_INT(p->timeout_ms, 60000);
	T_EQ_INT(p->connect_timeout_ms, 5000);
	T_EQ_INT(p->max_retries, 2);
	T_EQ_INT(p->retry_base_ms, 250);
	T_EQ_INT(p->max_response_bytes, 8 << 20);
	T_ASSERT(p->api_key == NULL);
	T_ASSERT(gh_config_provider(cfg, "m")->type == GH_PROVIDER_MOCK);
	T_ASSERT(gh_config_provider(cfg, "nope") == NULL);

	a = gh_config_agent(cfg, "a");
	T_ASSERT(a != NULL);
	T_EQ_STR(a->name, "a"); /* the id when no name */
	T_EQ_STR(a->description, "");
	T_EQ_STR(a->instructions, "");
	T_EQ_STR(a->model, "mock");
	T_ASSERT(a->prov == gh_config_provider(cfg, "m"));
	T_EQ_INT(a->max_steps, 8);
	T_EQ_INT(a->client_tool_timeout_s, 3600);
	T_EQ_INT(a->memory_enabled, 0);
	T_EQ_INT(a->last_messages, 20);
	T_EQ_INT(a->has_temperature, 0);
	T_EQ_INT(a->max_tokens, 0);
	T_EQ_INT(a->tools.n, 0);
	T_EQ_INT(gh_config_agent(cfg, "b")->memory_enabled, 1);
	T_ASSERT(gh_config_agent(cfg, "c") == NULL);
	T_EQ_STR(cfg->default_agent, "a"); /* the first agent */

	t = gh_config_tool(cfg, "t");
	T_ASSERT(t && t->type == GH_TOOL_HTTP);
	T_EQ_INT(t->timeout_ms, 10000);
	T_EQ_INT(t->max_response_bytes, 1 << 20);
	T_ASSERT(t->output_schema == NULL);
	T_EQ_INT(t->require_approval, 0);
	T_EQ_INT(t->nheaders, 0);
	T_ASSERT(t->annotations == NULL);
	T_ASSERT(cJSON_IsObject(t->input_schema));

	pol = gh_config_policy(cfg, "p");
	T_ASSERT(pol != NULL);
	T_EQ_INT(pol->agents.n, 0);
	T_EQ_INT(pol->tools_allow.n, 0);
	T_EQ_INT(pol->client_tools_enabled, 0);
	T_EQ_INT(pol->approver, GH_APPROVER_ADMIN);
	T_EQ_INT(pol->approval_ttl_s, 3600);
	T_EQ_INT(pol->requests_per_minute, 0);
	T_EQ_INT(pol->burst, 0);
	T_EQ_INT(pol->ntool_limits, 0);
	T_EQ_INT(pol->tokens_per_minute, 0);
	T_EQ_INT(strlen(pol->version), 16);

	T_EQ_INT(cfg->audit.redact.n, 5);
	T_ASSERT(gh_strlist_match(&cfg->audit.redact, "password"));
	T_ASSERT(gh_strlist_match(&cfg->audit.redact, "authorization"));
	T_EQ_INT(cfg->audit.checkpoint_rows, 1000);
	T_EQ_INT(cfg->audit.checkpoint_seconds, 60);
	T_EQ_INT(cfg->audit.retention_days, 0);
	T_EQ_INT(cfg->audit.max_args_bytes, 65536);
	T_EQ_INT(cfg->admin.session_idle_s, 1800);
	T_EQ_INT(cfg->admin.session_max_s, 43200);
	T_EQ_INT(cfg->admin.login_attempts_per_minute, 5);
	T_EQ_INT(cfg->admin.login_failures_per_user_per_hour, 30);
	gh_config_free(cfg);
	/* the per-user default follows a high per-address limit: six minutes' worth */
	T_EQ_INT(load("{" MIN ",'admin':{'login_attempts_per_minute':10}}", &cfg, &e), GH_OK);
	T_EQ_INT(cfg->admin.login_failures_per_user_per_hour, 60);
	gh_config_free(cfg);

	/* an explicit redact list replaces the defaults; [] turns redaction off */
	T_EQ_INT(load("{" MIN ",'audit':{'redact':[]}}", &cfg, &e), GH_OK);
	T_EQ_INT(cfg->audit.redact.n, 0);
	gh_config_free(cfg);
	gh_config_free(NULL);
}

static void test_values_read(void)
{
	struct gh_config *cfg;
	struct gh_err e;
	const struct gh_policy_conf *p;
	const struct gh_tool_conf *t;

	T_EQ_INT(load("{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','temperature':0.7,"
		      "'require_approval':['send_*'],'tools':['t','memory_*']}},"
		      "'database':{'synchronous':'full'},"
		      "'tools':{" TOOL("t", ",'require_approval':true,'headers':{'X-A':'1',"
					      "'X-B':'2'}") "},"
		      "'policies':{'p':{'client_tools':{'allow':['*']},"
		      "'approval':{'approver':'caller','ttl_seconds':600},"
		      "'rate_limits':{'tool_calls_per_minute':{'*':10,'send_*':3}}}},"
		      "'default_agent':'a'}",
		      &cfg, &e),
		 GH_OK);
	T_EQ_INT(cfg->agents[0].has_temperature, 1);
	T_ASSERT(cfg->agents[0].temperature > 0.69 && cfg->agents[0].temperature < 0.71);
	T_ASSERT(gh_strlist_match(&cfg->agents[0].require_approval, "send_email"));
	T_ASSERT(!gh_strlist_match(&cfg->agents[0].require_approval, "get_weather"));
	T_EQ_INT(cfg->database.synchronous_full, 1);
	t = gh_config_tool(cfg, "t");
	T_EQ_INT(t->require_approval, 1);
	T_EQ_INT(t->nheaders, 2);
	T_EQ_STR(t->headers[1].name, "X-B");
	T_EQ_STR(t->headers[1].value, "2");
	p = gh_config_policy(cfg, "p");
	T_EQ_INT(p->client_tools_enabled, 1);
	T_EQ_INT(p->approver, GH_APPROVER_CALLER);
	T_EQ_INT(p->approval_ttl_s, 600);
	T_EQ_INT(p->ntool_limits, 2);
	T_EQ_STR(p->tool_limits[1].glob, "send_*");
	T_EQ_INT(p->tool_limits[1].per_minute, 3);
	gh_config_free(cfg);
}

/* ---- policy versions ---- */

static int version_of(const char *text, const char *policy, char out[17])
{
	struct gh_config *cfg;
	struct gh_err e;
	const struct gh_policy_conf *p;

	if (load(text, &cfg, &e) != GH_OK) {
		fprintf(stderr, "  %s\n", e.msg);
		return -1;
	}
	p = gh_config_policy(cfg, policy);
	if (!p) {
		gh_config_free(cfg);
		return -1;
	}
	memcpy(out, p->version, 17);
	gh_config_free(cfg);
	return 0;
}

static void test_policy_version(void)
{
	static const char *const base =
		"{" MIN ",'policies':{'p':{'agents':['*'],'tools':{'allow':['a','b']}},"
		"'q':{'agents':['x']}}}";
	/* same content, other layout: key order, whitespace, comments */
	static const char *const same =
		"{" MIN ",'policies':{'q':{'agents':['x']},\n 'p': { 'tools' : { 'allow' "
		": ['a', 'b'] }, /* note */ 'agents': ['*'] }}}";
	/* another policy or another section changes */
	static const char *const other =
		"{" MIN ",'server':{'threads':100},'policies':{'p':{'agents':['*'],"
		"'tools':{'allow':['a','b']}},'q':{'agents':['y']}}}";
	static const char *const changed[] = {
		"{" MIN ",'policies':{'p':{'agents':['*'],'tools':{'allow':['a','c']}}}}",
		"{" MIN ",'policies':{'p':{'agents':['*'],'tools':{'allow':['b','a']}}}}",
		"{" MIN ",'policies':{'p':{'agents':['*'],'tools':{'allow':['a','b'],"
		"'deny':['b']}}}}",
		"{" MIN ",'policies':{'p':{'agents':['*'],'tools':{'allow':['a','b']},"
		"'approval':{'ttl_seconds':60}}}}",
	};
	char v0[17], v1[17], v2[17], vq0[17], vq2[17];
	size_t i;

	T_EQ_INT(version_of(base, "p", v0), 0);
	T_EQ_INT(strlen(v0), 16);
	T_EQ_INT(strspn(v0, "0123456789abcdef"), 16);
	T_ASSERT(strcmp(v0, "0000000000000000") != 0);
	T_EQ_INT(version_of(same, "p", v1), 0);
	T_EQ_STR(v1, v0);
	T_EQ_INT(version_of(other, "p", v2), 0);
	T_EQ_STR(v2, v0);
	/* q itself changed in `other` */
	T_EQ_INT(version_of(base, "q", vq0), 0);
	T_EQ_INT(version_of(other, "q", vq2), 0);
	T_ASSERT(strcmp(vq0, vq2) != 0);
	T_ASSERT(strcmp(vq0, v0) != 0);
	for (i = 0; i < GH_ARRAY_LEN(changed); i++) {
		T_EQ_INT(version_of(changed[i], "p", v1), 0);
		if (!strcmp(v1, v0))
			T_FAIL("policy change %zu kept version %s", i, v0);
	}
}

/* ---- files ---- */

static void src_path(const char *rel, char *out, size_t cap)
{
	const char *root = getenv("GH_SRC");
	const char *f = __FILE__, *cut = strstr(f, "tests/unit/test_config.c");

	if (root)
		snprintf(out, cap, "%s/%s", root, rel);
	else if (cut && cut > f)
		snprintf(out, cap, "%.*s%s", (int)(cut - f), f, rel);
	else
		snprintf(out, cap, "%s", rel);
}

static void test_example_config(void)
{
	struct gh_config *cfg;
	struct gh_err e;
	char path[4096];
	const struct gh_policy_conf *p;
	const struct gh_tool_conf *t;

	src_path("config/gatehouse.example.json", path, sizeof(path));
	if (gh_config_load(path, &cfg, &e) != GH_OK)
		T_FAIL("%s", e.msg);
	T_EQ_STR(cfg->default_agent, "assistant");
	T_EQ_STR(cfg->agents[0].prov->name, "offline");
	T_EQ_INT(cfg->agents[0].memory_enabled, 1);
	T_ASSERT(gh_strlist_match(&cfg->agents[0].tools, "memory_search"));
	T_EQ_INT(cfg->nproviders, 3);
	T_EQ_STR(gh_config_provider(cfg, "local")->base_url, "http://127.0.0.1:11434/v1");
	t = gh_config_tool(cfg, "send_email");
	T_ASSERT(t != NULL);
	T_EQ_INT(t->nheaders, 1);
	T_EQ_STR(t->headers[0].name, "Authorization");
	p = gh_config_policy(cfg, "default");
	T_ASSERT(p != NULL);
	T_ASSERT(gh_strlist_match(&p->tools_deny, "memory_delete"));
	T_EQ_INT(p->ntool_limits, 2);
	p = gh_config_policy(cfg, "self-approve");
	T_ASSERT(p && p->approver == GH_APPROVER_CALLER && p->approval_ttl_s == 600);
	T_EQ_INT(cfg->audit.redact.n, 5);
	gh_config_free(cfg);
}

static void test_load_files(void)
{
	char dir[] = "/tmp/gh_test_config_XXXXXX", path[256];
	struct gh_config *cfg;
	struct gh_err e;
	FILE *f;

	T_EQ_INT(gh_config_load("/nonexistent/gatehouse.json", &cfg, &e), GH_E_IO);
	T_CONTAINS(e.msg, "/nonexistent/gatehouse.json: cannot open");
	T_ASSERT(cfg == NULL);
	T_ASSERT(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/g.json", dir);
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fputs(dq("{\n" MIN ",\n'server': {'threads': 2}\n}\n"), f);
	fclose(f);
	T_EQ_INT(gh_config_load(path, &cfg, &e), GH_E_BADREQ);
	/* the message names the file the operator gave */
	T_ASSERT(!strncmp(e.msg, path, strlen(path)));
	T_CONTAINS(e.msg, ": $.server.threads: expected an integer in 4..20000");
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fclose(f);
	T_EQ_INT(gh_config_load(path, &cfg, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "config is empty");
	unlink(path);
	rmdir(dir);
}

/* audit.witness and the tail rule's grace: defaults, values, mistakes. */
static void test_audit_witness_options(void)
{
	static const struct bad_case c[] = {
		{"{" MIN ",'audit':{'witness':{'fiel':'w'}}}",
		 "t.json: $.audit.witness.fiel: unknown option (known: enabled, file, webhook_url,"},
		{"{" MIN ",'audit':{'witness':{'file':''}}}",
		 "$.audit.witness.file: expected a path (use \"enabled\": false to run without a "
		 "witness)"},
		{"{" MIN ",'audit':{'witness':{'webhook_url':'ftp://x'}}}",
		 "$.audit.witness.webhook_url: expected an http:// or https:// URL"},
		{"{" MIN ",'audit':{'witness':{'when_behind':'ignore'}}}",
		 "$.audit.witness.when_behind: expected \"refuse\" or \"read_only\""},
		{"{" MIN ",'audit':{'witness':{'when_behind':1}}}",
		 "$.audit.witness.when_behind: expected a string, got a number"},
		{"{" MIN ",'audit':{'witness':{'webhook_timeout_ms':50}}}",
		 "$.audit.witness.webhook_timeout_ms: expected an integer in 100..60000"},
		{"{" MIN ",'audit':{'witness':true}}", "$.audit.witness: expected an object"},
		{"{" MIN ",'audit':{'unsigned_grace_seconds':-1}}",
		 "$.audit.unsigned_grace_seconds: expected an integer in 0..2592000"},
	};
	struct gh_config *cfg = NULL;
	struct gh_err e;
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		if (load(c[i].text, &cfg, &e) == GH_OK) {
			gh_config_free(cfg);
			T_FAIL("case %zu accepted: %s", i, c[i].text);
		}
		T_CONTAINS(e.msg, dq(c[i].msg));
	}
	T_EQ_INT(load("{" MIN "}", &cfg, &e), GH_OK);
	T_EQ_INT(cfg->audit.witness.enabled, 1);
	T_ASSERT(cfg->audit.witness.file == NULL); /* "<db>-witness", resolved by the CLI */
	T_ASSERT(cfg->audit.witness.webhook_url == NULL);
	T_EQ_INT(cfg->audit.witness.webhook_timeout_ms, 5000);
	T_EQ_INT(cfg->audit.witness.syslog, 0);
	T_EQ_INT(cfg->audit.witness.when_behind, GH_WITNESS_REFUSE);
	T_EQ_INT(cfg->audit.unsigned_grace_seconds, 60);
	gh_config_free(cfg);
	T_EQ_INT(load("{" MIN ",'audit':{'unsigned_grace_seconds':0,'witness':{'file':'/w/x',"
		      "'webhook_url':'https://example.com/w','syslog':true,"
		      "'when_behind':'read_only'}}}", &cfg, &e), GH_OK);
	T_EQ_STR(cfg->audit.witness.file, "/w/x");
	T_EQ_STR(cfg->audit.witness.webhook_url, "https://example.com/w");
	T_EQ_INT(cfg->audit.witness.syslog, 1);
	T_EQ_INT(cfg->audit.witness.when_behind, GH_WITNESS_READ_ONLY);
	T_EQ_INT(cfg->audit.unsigned_grace_seconds, 0);
	gh_config_free(cfg);
	T_EQ_INT(load("{" MIN ",'audit':{'witness':{'enabled':false}}}", &cfg, &e), GH_OK);
	T_EQ_INT(cfg->audit.witness.enabled, 0);
	gh_config_free(cfg);
}

/* A NUL in a string is refused, raw or escaped, naming file, JSON path and
 * position: cJSON would keep "http://\u0000\u0000evil.example/v1" as
 * "http://", and that passed validation. */
static void test_nul_in_strings(void)
{
	static const char raw[] = "{\"providers\":{\"o\":{\"type\":\"openai\",\n"
				  "\"base_url\":\"http://\0\0evil.example/v1\"}},"
				  "\"agents\":{\"a\":{\"provider\":\"o\"}}}";
	struct gh_config *cfg = NULL;
	struct gh_err e;

	T_EQ_INT(gh_config_parse("t.json", raw, sizeof(raw) - 1, &cfg, &e), GH_E_BADREQ);
	T_ASSERT(cfg == NULL);
	T_CONTAINS(e.msg, "t.json: config has a NUL character (a raw 0 byte) in the string at "
			  "$.providers.o.base_url (line 2, column 20)");
	T_EQ_INT(load("{'providers':{'o':{'type':'openai','base_url':"
		      "'http://\\u0000\\u0000evil.example/v1'}},'agents':{'a':{'provider':'o'}}}",
		      &cfg, &e),
		 GH_E_BADREQ);
	T_ASSERT(cfg == NULL);
	T_CONTAINS(e.msg, "t.json: config has a NUL character (\\u0000) in the string at "
			  "$.providers.o.base_url");
	T_CONTAINS(e.msg, "strings may not contain NUL");
}


/* mcp_servers: each transport's options, table-driven like the rest, and
 * only the config names what gatehouse starts or calls. */
static void test_mcp_servers(void)
{
	static const struct bad_case c[] = {
		{"{" MIN ",'mcp_servers':{'e':{'command':'node'}}}",
		 "$.mcp_servers.e.transport: expected \"stdio\" (a command gatehouse starts) or "
		 "\"http\""},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'pipe','command':'node'}}}",
		 "$.mcp_servers.e.transport: expected \"stdio\""},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'stdio'}}}",
		 "$.mcp_servers.e.command: required option is missing"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'stdio','command':''}}}",
		 "$.mcp_servers.e.command: expected a command to run"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'stdio','command':'x','url':'http://a'}}}",
		 "$.mcp_servers.e.url: unknown option (known: transport, prefix,"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'http','url':'http://a','command':'x'}}}",
		 "$.mcp_servers.e.command: unknown option"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'stdio','command':'x','args':'-v'}}}",
		 "$.mcp_servers.e.args: expected an array of strings"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'stdio','command':'x','args':[1]}}}",
		 "$.mcp_servers.e.args: item 0: expected a string"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'stdio','command':'x','env':{'A-B':'1'}}}}",
		 "$.mcp_servers.e.env: \"A-B\": not a valid environment variable name"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'stdio','command':'x','env':{'A':1}}}}",
		 "$.mcp_servers.e.env: A: expected a string without line breaks"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'http'}}}",
		 "$.mcp_servers.e.url: required option is missing"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'http','url':'file:///etc/passwd'}}}",
		 "$.mcp_servers.e.url: expected an http:// or https:// URL"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'http','url':'http://a',"
		 "'headers':{'X:Y':'1'}}}}",
		 "$.mcp_servers.e.headers: \"X:Y\": not a valid header name"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'http','url':'http://a','prefix':'1x'}}}",
		 "$.mcp_servers.e.prefix: expected up to 48 of [A-Za-z0-9_-]"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'http','url':'http://a',"
		 "'max_concurrency':0}}}",
		 "$.mcp_servers.e.max_concurrency: expected an integer in 1..1024"},
		{"{" MIN ",'mcp_servers':{'e':{'transport':'http','url':'http://a',"
		 "'retry_base_ms':1000,'retry_max_ms':100}}}",
		 "$.mcp_servers.e.retry_max_ms: must be at least retry_base_ms (1000)"},
		{"{" MIN ",'mcp_servers':{'a b':{'transport':'http','url':'http://a'}}}",
		 "$.mcp_servers.a b: names may use letters"},
		{"{" MIN ",'mcp_servers':[]}", "$.mcp_servers: expected an object of name -> settings"},
		{"{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','tools':['fs_read']}},"
		 "'mcp_servers':{'e':{'transport':'http','url':'http://a'}}}",
		 "$.agents.a.tools[0]: no tool named \"fs_read\" in $.tools (nor does it start with the "
		 "prefix of an MCP server)"},
		{"{" MIN ",'policies':{'p':{'approval':{'exempt':'e_*'}}}}",
		 "$.policies.p.approval.exempt: expected an array of strings"},
	};
	struct gh_config *cfg = NULL;
	struct gh_err e;
	const struct gh_mcp_server_conf *m;
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		if (load(c[i].text, &cfg, &e) == GH_OK) {
			gh_config_free(cfg);
			T_FAIL("case %zu loaded: %s", i, c[i].text);
		}
		if (!strstr(e.msg, dq(c[i].msg)))
			T_FAIL("case %zu: \"%s\" does not contain \"%s\"", i, e.msg, dq(c[i].msg));
		T_ASSERT(cfg == NULL);
	}
	setenv("GH_TEST_MCP_TOKEN", "s3cret-token", 1);
	T_EQ_INT(load("{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','tools':"
		      "['everything_echo','my_fs_x']}},"
		      "'mcp_servers':{'everything':{'transport':'stdio','command':'node',"
		      "'args':['index.js','stdio',''],'env':{'TOKEN':'${GH_TEST_MCP_TOKEN}'},"
		      "'cwd':'/tmp','max_concurrency':2},"
		      "'my.fs':{'transport':'http','url':'http://127.0.0.1:9/mcp',"
		      "'headers':{'Authorization':'Bearer ${GH_TEST_MCP_TOKEN}'},'timeout_ms':500}},"
		      "'policies':{'p':{'approval':{'exempt':['everything_*']}}}}",
		      &cfg, &e), GH_OK);
	unsetenv("GH_TEST_MCP_TOKEN");
	T_EQ_INT(cfg->nmcp_servers, 2);
	m = gh_config_mcp_server(cfg, "everything");
	T_ASSERT(m);
	T_EQ_INT(m->transport, GH_MCP_STDIO);
	T_EQ_STR(m->prefix, "everything_");
	T_EQ_STR(m->command, "node");
	T_EQ_INT(m->args.n, 3);
	T_EQ_STR(m->args.v[2], "");
	T_EQ_INT(m->nenv, 1);
	T_EQ_STR(m->env[0].value, "s3cret-token");
	T_EQ_STR(m->cwd, "/tmp");
	T_EQ_INT(m->max_concurrency, 2);
	/* defaults */
	T_EQ_INT(m->timeout_ms, 60000);
	T_EQ_INT(m->connect_timeout_ms, 20000);
	T_EQ_INT(m->max_message_bytes, 4 << 20);
	T_EQ_INT(m->shutdown_grace_ms, 2000);
	m = gh_config_mcp_server(cfg, "my.fs");
	T_ASSERT(m);
	T_EQ_INT(m->transport, GH_MCP_HTTP);
	T_EQ_STR(m->prefix, "my_fs_"); /* the name made a valid prefix */
	T_EQ_STR(m->headers[0].value, "Bearer s3cret-token");
	T_EQ_INT(m->timeout_ms, 500);
	T_EQ_INT(cfg->policies[0].approval_exempt.n, 1);
	gh_config_free(cfg);
	/* an empty prefix exposes the upstream's names as they are */
	T_EQ_INT(load("{" MIN_PROVIDERS ",'agents':{'a':{'provider':'m','tools':['anything']}},"
		      "'mcp_servers':{'e':{'transport':'http','url':'http://a','prefix':''}}}",
		      &cfg, &e), GH_OK);
	gh_config_free(cfg);
}

/* metrics: on by default on the main listener; a listener of its own
 * must be loopback unless allow_remote says otherwise */
static void test_metrics_section(void)
{
	static const struct {
		const char *listen;
		int allow_remote;
		const char *msg; /* NULL: accepted */
	} c[] = {
		{"127.0.0.1:9464", 0, NULL},
		{"127.0.0.2:0", 0, NULL},
		{"[::1]:9464", 0, NULL},
		{"localhost:9464", 0, "\"localhost\": expected an IP address"},
		{"0.0.0.0:9464", 0, "t.json: $.metrics.listen: \"0.0.0.0\" is not a loopback address"},
		{"[::]:9464", 0, "$.metrics.listen: \"::\" is not a loopback address"},
		{"10.1.2.3:9464", 0, "set metrics.allow_remote to true"},
		{"metrics.example:9464", 1, "expected an IP address"},
		{"0.0.0.0:9464", 1, NULL},
		{"127.0.0.1", 0, "$.metrics.listen: expected HOST:PORT"},
	};
	struct gh_config *cfg = NULL;
	struct gh_err e;
	char text[512];
	size_t i;

	T_EQ_INT(load("{" MIN "}", &cfg, &e), GH_OK);
	T_EQ_INT(cfg->metrics.enabled, 1);
	T_ASSERT(cfg->metrics.listen == NULL);
	T_EQ_INT(cfg->metrics.allow_remote, 0);
	gh_config_free(cfg);
	T_EQ_INT(load("{" MIN ",'metrics':{'enabled':false}}", &cfg, &e), GH_OK);
	T_EQ_INT(cfg->metrics.enabled, 0);
	gh_config_free(cfg);
	T_EQ_INT(load("{" MIN ",'metrics':{'port':1}}", &cfg, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "$.metrics.port: unknown option (known: enabled, listen, allow_remote)");
	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		snprintf(text, sizeof(text), "{" MIN ",'metrics':{'listen':'%s','allow_remote':%s}}",
			 c[i].listen, c[i].allow_remote ? "true" : "false");
		cfg = NULL;
		if (!c[i].msg) {
			T_EQ_INT(load(text, &cfg, &e), GH_OK);
			T_EQ_STR(cfg->metrics.listen, c[i].listen);
			gh_config_free(cfg);
			continue;
		}
		T_EQ_INT(load(text, &cfg, &e), GH_E_BADREQ);
		T_CONTAINS(e.msg, c[i].msg);
	}
}

T_MAIN(T(test_bad_configs), T(test_metrics_section), T(test_notifications), T(test_mcp_servers),
       T(test_wrong_types_of_special_options),
       T(test_boundaries_accepted), T(test_duplicate_names), T(test_duplicate_keys),
       T(test_mock_rule_unknown_key), T(test_env), T(test_database_url),
       T(test_defaults), T(test_values_read),
       T(test_policy_version), T(test_example_config), T(test_load_files),
       T(test_audit_witness_options), T(test_nul_in_strings))
