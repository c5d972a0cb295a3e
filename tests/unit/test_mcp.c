/*
 * test_mcp.c - the MCP client against a real upstream: the stdio test
 * server (tests/integration/mcp_test_server.py, Python) started by
 * gatehouse itself. Paged discovery, pins, calls with progress and
 * structured results, a changed definition held until accepted, a cancel
 * the upstream hears about, the child killed mid-call and restarted, a
 * command that does not exist, and no child, thread or descriptor left
 * behind; an HTTP upstream (the test server in --http mode) whose session
 * is renewed and ended, and after which no thread or descriptor is left.
 * Runs under TSan too (supervisors, readers and callers at once).
 */
#include "t.h"
#include "t_store.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "json.h"
#include "mcp.h"
#include "store_mcp.h"
#include "upstream.h"

static const char *src_dir(void)
{
	const char *s = getenv("GH_SRC");

	return s ? s : ".";
}

/* A config with one stdio upstream "t" running the test server. */
static struct gh_config *config_for(const char *dir, const char *extra)
{
	char text[4096], script[512];
	struct gh_config *cfg = NULL;
	struct gh_err e;

	snprintf(script, sizeof(script), "%s/tests/integration/mcp_test_server.py", src_dir());
	snprintf(text, sizeof(text),
		 "{\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{\"a\":{\"provider\":\"m\"}},"
		 "\"mcp_servers\":{\"t\":{\"transport\":\"stdio\",\"command\":\"python3\","
		 "\"args\":[\"%s\"],\"env\":{\"MCP_TEST_PIDFILE\":\"%s/pid\","
		 "\"MCP_TEST_LOG\":\"%s/log\"},\"timeout_ms\":5000,\"connect_timeout_ms\":8000,"
		 "\"retry_base_ms\":50,\"retry_max_ms\":200,\"shutdown_grace_ms\":500%s}}}",
		 script, dir, dir, extra ? extra : "");
	if (gh_config_parse("t.json", text, strlen(text), &cfg, &e) != GH_OK) {
		fprintf(stderr, "config: %s\n", e.msg);
		return NULL;
	}
	return cfg;
}

static pid_t read_pid(const char *dir)
{
	char p[256], buf[32] = "";
	FILE *f;
	int64_t v = 0;

	snprintf(p, sizeof(p), "%s/pid", dir);
	f = fopen(p, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return gh_parse_i64(buf, 1, INT32_MAX, &v) == 0 ? (pid_t)v : 0;
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	if (d)
		closedir(d);
	return n;
}

/* This process's descriptors, but the database's files under dir (which
 * come and go with the store's reader pool). */
/* Whether socket inode ino is a Unix-domain socket (/proc/net/unix). */
static int is_unix_socket(unsigned long ino)
{
	FILE *f = fopen("/proc/net/unix", "r");
	char line[512];
	int found = 0;

	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned long v;

		/* Num RefCount Protocol Flags Type St Inode Path */
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu", &v) == 1 && v == ino)
			found = 1;
	}
	if (f)
		fclose(f);
	return found;
}

/* Descriptors open outside dir (the store's files). On PostgreSQL the
 * store's pool opens its Unix-socket connections when it needs them, at
 * any time during a test, so those are not counted: MCP's own descriptors
 * are pipes (stdio) and TCP sockets (HTTP). */
static int count_fds_outside(const char *dir)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	size_t dn = strlen(dir);
	int n = 0;

	while (d && (de = readdir(d))) {
		char p[300], target[512];
		ssize_t k;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		k = readlink(p, target, sizeof(target) - 1);
		if (k <= 0)
			continue;
		target[k] = '\0';
		if (!strncmp(target, dir, dn))
			continue;
		if (t_store_pg() && !strncmp(target, "socket:[", 8) &&
		    is_unix_socket(strtoul(target + 8, NULL, 10)))
			continue;
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* Processes whose command line is exactly prog arg. */
static int count_cmdline(const char *prog, const char *arg)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	char want[128];
	size_t wn;
	int n = 0;

	wn = (size_t)snprintf(want, sizeof(want), "%s%c%s", prog, 0, arg) + 1;
	while (d && (de = readdir(d))) {
		char p[300], buf[128];
		FILE *f;
		size_t k;
		int64_t pid;

		if (gh_parse_i64(de->d_name, 1, INT32_MAX, &pid) != 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
		if (!(f = fopen(p, "r")))
			continue;
		k = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		if (k == wn && !memcmp(buf, want, wn))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* 1 when the test server's log of received messages gets s within ms. */
static int log_has(const char *dir, const char *s, int ms)
{
	char p[256], buf[8192];
	int64_t end = gh_mono_ns() / 1000000 + ms;

	snprintf(p, sizeof(p), "%s/log", dir);
	for (;;) {
		FILE *f = fopen(p, "r");
		int found = 0;

		while (f && !found && fgets(buf, sizeof(buf), f))
			found = strstr(buf, s) != NULL;
		if (f)
			fclose(f);
		if (found)
			return 1;
		if (gh_mono_ns() / 1000000 > end)
			return 0;
		usleep(20000);
	}
}

/* Children of this process still in the process table (zombies too). */
static int count_children(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	pid_t me = getpid();

	while (d && (de = readdir(d))) {
		char p[300], buf[512];
		FILE *f;
		int64_t pid;

		if (gh_parse_i64(de->d_name, 1, INT32_MAX, &pid) != 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f)) {
			const char *rp = strrchr(buf, ')');
			char state;
			int ppid;

			if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == me)
				n++;
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

static cJSON *status_of(struct gh_mcp *m)
{
	cJSON *s = gh_mcp_status_json(m, 0, NULL);
	cJSON *srv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(s, "servers"), 0);

	cJSON_DetachItemViaPointer(cJSON_GetObjectItemCaseSensitive(s, "servers"), srv);
	cJSON_Delete(s);
	return srv;
}

/* Waits (at most ms) for the upstream's state to be want. */
static int wait_state(struct gh_mcp *m, const char *want, int ms)
{
	int64_t end = gh_mono_ns() / 1000000 + ms;

	for (;;) {
		cJSON *s = status_of(m);
		int ok = s && !strcmp(gh_json_str(s, "state"), want);

		cJSON_Delete(s);
		if (ok)
			return 1;
		if (gh_mono_ns() / 1000000 > end)
			return 0;
		usleep(20000);
	}
}

/* Waits for tool name to be published with pin status want. */
static struct gh_mcp_tool *wait_tool(struct gh_mcp *m, const char *name, const char *pin,
				     int ms)
{
	int64_t end = gh_mono_ns() / 1000000 + ms;

	for (;;) {
		struct gh_mcp_tool *t = gh_mcp_tool_find(m, name);

		if (t && !strcmp(t->pin, pin))
			return t;
		gh_mcp_tool_unref(t);
		if (gh_mono_ns() / 1000000 > end)
			return NULL;
		usleep(20000);
	}
}

static cJSON *call(struct gh_mcp *m, const char *name, const char *args, int *is_error,
		   char *session)
{
	struct gh_mcp_tool *t = gh_mcp_tool_find(m, name);
	cJSON *a = gh_json_parse_stored(args), *r = NULL;
	struct gh_err e;

	if (t && gh_mcp_call(m, t, a, NULL, &r, is_error, session, 128, &e) != GH_OK)
		r = NULL;
	gh_mcp_tool_unref(t);
	cJSON_Delete(a);
	return r;
}

static const char *first_text(const cJSON *r)
{
	return gh_json_str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "content"), 0),
			   "text");
}

struct progress_seen {
	int n;
	double last, total;
};

static void on_progress(void *ud, double progress, double total, const char *message)
{
	struct progress_seen *p = ud;

	(void)message;
	p->n++;
	p->last = progress;
	p->total = total;
}

static int cancel_after(void *ud)
{
	struct progress_seen *p = ud;

	return p->n >= 2;
}

static void test_stdio_upstream(void)
{
	struct t_store t;
	struct gh_config *cfg;
	struct gh_mcp *m = NULL;
	struct gh_mcp_tool *tool, **all = NULL;
	struct gh_err e;
	struct gh_mcp_pin pin;
	char session[128];
	int is_error = 0, fds0, children0, threads0;
	const struct gh_mcp_actor alice = {"alice", NULL, "admin:alice", "web"};
	long n;
	cJSON *r, *st;
	pid_t pid;

	T_EQ_INT(t_store_open(&t), 0);
	cfg = config_for(t.dir, NULL);
	T_ASSERT(cfg);
	fds0 = count_fds_outside(t.dir);
	children0 = count_children();
	{
		char tp[64];

		snprintf(tp, sizeof(tp), "/proc/%d/task", (int)getpid());
		threads0 = count_dir(tp);
	}
	T_EQ_INT(gh_mcp_start(cfg, t.s, &m, &e), GH_OK);
	T_ASSERT(m);
	T_ASSERT(wait_state(m, "connected", 10000));

	/* every page of tools/list: six tools, two a page */
	n = gh_mcp_tools(m, &all);
	T_EQ_INT(n, 6);
	T_EQ_STR(all[0]->name, "t_echo");
	T_EQ_STR(all[5]->name, "t_mutable");
	T_EQ_STR(all[0]->pin, "pinned");
	gh_mcp_tools_free(all, n);
	T_EQ_INT(gh_store_mcp_pin_get(t.s, "t", "echo", &pin, &e), GH_OK);
	gh_mcp_pin_clear(&pin);

	/* a call, its session, the upstream's result as it sent it */
	r = call(m, "t_echo", "{\"text\":\"hi\"}", &is_error, session);
	T_ASSERT(r);
	T_EQ_INT(is_error, 0);
	T_EQ_STR(first_text(r), "echo: hi");
	T_CONTAINS(session, "pid ");
	cJSON_Delete(r);
	r = call(m, "t_write_note", "{\"note\":\"abc\"}", &is_error, session);
	T_ASSERT(r);
	T_EQ_INT(is_error, 0);
	T_EQ_INT(gh_json_int(cJSON_GetObjectItemCaseSensitive(r, "structuredContent"), "length",
			     0), 3);
	cJSON_Delete(r);
	/* the child has stdin, stdout and stderr, and nothing else of ours */
	r = call(m, "t_fds", "{}", &is_error, session);
	T_ASSERT(r);
	{
		const cJSON *fds = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(r, "structuredContent"), "fds");
		const cJSON *it;

		T_ASSERT(cJSON_IsObject(fds));
		cJSON_ArrayForEach(it, fds) {
			int64_t fd = -1;

			T_EQ_INT(gh_parse_i64(it->string, 0, 1 << 20, &fd), 0);
			if (fd > 2)
				T_FAIL("the child inherited descriptor %lld (%s)", (long long)fd,
				       it->valuestring);
		}
		T_ASSERT(cJSON_GetObjectItemCaseSensitive(fds, "0"));
		T_CONTAINS(gh_json_str(fds, "1"), "pipe:");
	}
	cJSON_Delete(r);
	r = call(m, "t_fail", "{}", &is_error, session);
	T_ASSERT(r);
	T_EQ_INT(is_error, 1);
	T_ASSERT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "isError")));
	cJSON_Delete(r);

	/* progress reaches the caller; a caller that goes away cancels */
	{
		struct progress_seen ps = {0};
		struct gh_mcp_call_opts o = {0};
		cJSON *a = gh_json_parse_stored("{\"seconds\":0.5}");

		o.progress = on_progress;
		o.ud = &ps;
		tool = gh_mcp_tool_find(m, "t_slow");
		T_ASSERT(tool);
		T_EQ_INT(gh_mcp_call(m, tool, a, &o, &r, &is_error, session, sizeof(session), &e),
			 GH_OK);
		T_EQ_INT(is_error, 0);
		T_ASSERT(ps.n >= 5); /* a slow waiter may see only the latest of several */
		T_EQ_INT((int)ps.last, 10);
		T_EQ_INT((int)ps.total, 10);
		cJSON_Delete(r);
		cJSON_Delete(a);
		memset(&ps, 0, sizeof(ps));
		a = gh_json_parse_stored("{\"seconds\":3}");
		o.tick = cancel_after;
		T_EQ_INT(gh_mcp_call(m, tool, a, &o, &r, &is_error, session, sizeof(session), &e),
			 GH_E_CANCELLED);
		T_ASSERT(r == NULL);
		/* the upstream heard it */
		T_ASSERT(log_has(t.dir, "\"notifications/cancelled\"", 5000));
		T_ASSERT(log_has(t.dir, "the caller went away", 100));
		cJSON_Delete(a);
		gh_mcp_tool_unref(tool);
	}

	/* a changed definition is held; accepting it releases the tool */
	pid = read_pid(t.dir);
	T_ASSERT(pid > 0);
	tool = gh_mcp_tool_find(m, "t_mutable");
	T_ASSERT(tool);
	T_EQ_INT(kill(pid, SIGUSR1), 0);
	{
		struct gh_mcp_tool *held = wait_tool(m, "t_mutable", "held", 5000);

		T_ASSERT(held);
		T_CONTAINS(held->blocked, "definition changed");
		/* the run that was offered the old definition cannot call it */
		r = NULL;
		T_EQ_INT(gh_mcp_call(m, tool, NULL, NULL, &r, &is_error, session, sizeof(session),
				     &e), GH_OK);
		T_EQ_INT(is_error, 1);
		T_CONTAINS(gh_json_str(r, "error"), "definition changed");
		cJSON_Delete(r);
		r = NULL;
		T_EQ_INT(gh_mcp_call(m, held, NULL, NULL, &r, &is_error, session, sizeof(session),
				     &e), GH_OK);
		T_EQ_INT(is_error, 1);
		T_CONTAINS(gh_json_str(r, "error"), "held until an admin accepts it");
		cJSON_Delete(r);
		/* only the definition reviewed can be accepted */
		T_EQ_INT(gh_mcp_decide(m, "t", "t_mutable", "0000", 1, &alice, &e), GH_E_CONFLICT);
		T_EQ_INT(gh_mcp_decide(m, "t", "t_mutable", held->def.digest, 1, &alice, &e),
			 GH_OK);
		gh_mcp_tool_unref(held);
	}
	gh_mcp_tool_unref(tool);
	tool = wait_tool(m, "t_mutable", "pinned", 5000);
	T_ASSERT(tool);
	T_ASSERT(!tool->blocked[0]);
	gh_mcp_tool_unref(tool);

	/* the child killed mid-call: a clear tool error, then a new child */
	{
		struct gh_mcp_tool *slow = gh_mcp_tool_find(m, "t_slow");
		cJSON *a = gh_json_parse_stored("{\"seconds\":5}");
		pid_t pid2;
		int64_t t0 = gh_mono_ns();

		T_ASSERT(slow);
		T_EQ_INT(kill(pid, SIGKILL), 0);
		T_EQ_INT(gh_mcp_call(m, slow, a, NULL, &r, &is_error, session, sizeof(session), &e),
			 GH_OK);
		T_EQ_INT(is_error, 1);
		T_ASSERT(gh_json_str(r, "error"));
		cJSON_Delete(r);
		T_ASSERT((gh_mono_ns() - t0) / 1000000 < 4000); /* not the 5 s of the call */
		cJSON_Delete(a);
		gh_mcp_tool_unref(slow);
		/* a new child (it writes its pid), connected again */
		for (pid2 = read_pid(t.dir); pid2 == pid && gh_mono_ns() - t0 < INT64_C(10000000000);
		     pid2 = read_pid(t.dir))
			usleep(20000);
		T_ASSERT(pid2 > 0 && pid2 != pid);
		T_ASSERT(wait_state(m, "connected", 10000));
		r = call(m, "t_echo", "{\"text\":\"again\"}", &is_error, session);
		T_ASSERT(r);
		T_EQ_STR(first_text(r), "echo: again");
		cJSON_Delete(r);
	}
	st = status_of(m);
	T_EQ_STR(gh_json_str(st, "state"), "connected");
	cJSON_Delete(st);
	gh_mcp_stop(m);
	/* no child, zombie, thread or descriptor left behind */
	T_EQ_INT(count_children(), children0);
	T_EQ_INT(count_fds_outside(t.dir), fds0);
	{
		char tp[64];

		snprintf(tp, sizeof(tp), "/proc/%d/task", (int)getpid());
		T_EQ_INT(count_dir(tp), threads0);
	}
	gh_config_free(cfg);
	t_store_close(&t);
}

/* A command that cannot start: the upstream fails, retries with backoff,
 * and its tools (none pinned) are simply absent; nothing else breaks. */
static void test_missing_command(void)
{
	struct t_store t;
	struct gh_config *cfg;
	struct gh_mcp *m = NULL;
	struct gh_err e;
	cJSON *st;
	const char *text = "{\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{\"a\":"
			   "{\"provider\":\"m\"}},\"mcp_servers\":{\"t\":{\"transport\":\"stdio\","
			   "\"command\":\"/nonexistent/mcp-server\",\"retry_base_ms\":50,"
			   "\"retry_max_ms\":100}}}";

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_config_parse("t.json", text, strlen(text), &cfg, &e), GH_OK);
	T_EQ_INT(gh_mcp_start(cfg, t.s, &m, &e), GH_OK);
	T_ASSERT(wait_state(m, "failing", 5000));
	st = status_of(m);
	T_CONTAINS(gh_json_str(st, "lastError"), "cannot start \"/nonexistent/mcp-server\"");
	T_ASSERT(gh_json_int(st, "failures", 0) >= 1);
	cJSON_Delete(st);
	gh_mcp_stop(m);
	gh_config_free(cfg);
	t_store_close(&t);
}

struct slow_call {
	struct gh_mcp *m;
	int is_error;
	enum gh_code rc;
};

static void *slow_thread(void *arg)
{
	struct slow_call *sc = arg;
	struct gh_mcp_tool *t = gh_mcp_tool_find(sc->m, "t_slow");
	cJSON *a = gh_json_parse_stored("{\"seconds\":1.5}"), *r = NULL;
	struct gh_err e;
	char session[64];

	sc->rc = t ? gh_mcp_call(sc->m, t, a, NULL, &r, &sc->is_error, session, sizeof(session), &e)
		   : GH_E_NOTFOUND;
	cJSON_Delete(r);
	cJSON_Delete(a);
	gh_mcp_tool_unref(t);
	return NULL;
}

/* max_concurrency 1: a second call waits for the one slot, so it ends
 * after the slow call that holds it, at least the 1.5 s the server sleeps
 * after the slow call began (with two slots it would end at once). Timed
 * from before the slow call starts: a flag the slow thread set after its
 * call returned could still be unset when the second call, which took the
 * slot the moment it was freed, was already done. */
static void test_concurrency_cap(void)
{
	struct t_store t;
	struct gh_config *cfg;
	struct gh_mcp *m = NULL;
	struct gh_err e;
	struct slow_call sc = {0};
	pthread_t th;
	int is_error = 1;
	char session[64];
	cJSON *r;
	int64_t start, end, waited_ms;

	T_EQ_INT(t_store_open(&t), 0);
	cfg = config_for(t.dir, ",\"max_concurrency\":1");
	T_ASSERT(cfg);
	T_EQ_INT(gh_mcp_start(cfg, t.s, &m, &e), GH_OK);
	T_ASSERT(wait_state(m, "connected", 10000));
	sc.m = m;
	start = gh_mono_ns();
	T_EQ_INT(pthread_create(&th, NULL, slow_thread, &sc), 0);
	/* the slow call holds the one slot */
	end = gh_mono_ns() / 1000000 + 5000;
	for (;;) {
		cJSON *st = status_of(m);
		int busy = gh_json_int(st, "inflight", 0) == 1;

		cJSON_Delete(st);
		if (busy || gh_mono_ns() / 1000000 > end)
			break;
		usleep(10000);
	}
	r = call(m, "t_echo", "{\"text\":\"x\"}", &is_error, session);
	waited_ms = (gh_mono_ns() - start) / 1000000;
	pthread_join(th, NULL);
	T_ASSERT(r);
	T_EQ_INT(is_error, 0);
	T_ASSERT(waited_ms >= 1500);
	T_EQ_INT(sc.rc, GH_OK);
	T_EQ_INT(sc.is_error, 0);
	cJSON_Delete(r);
	gh_mcp_stop(m);
	gh_config_free(cfg);
	t_store_close(&t);
}

/* A child that never answers and ignores both stdin's end and SIGTERM
 * (so do its own children): initialize times out, and stopping it ends in
 * SIGKILL to its process group, leaving no process behind. */
static void test_stubborn_child(void)
{
	struct t_store t;
	struct gh_config *cfg;
	struct gh_mcp *m = NULL;
	struct gh_err e;
	cJSON *st;
	char text[1024], marker[32];
	int children0 = count_children();

	/* the grandchild's command line is this test's own */
	snprintf(marker, sizeof(marker), "60.%d", (int)getpid());
	snprintf(text, sizeof(text),
		 "{\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{\"a\":"
		 "{\"provider\":\"m\"}},\"mcp_servers\":{\"s\":{\"transport\":\"stdio\","
		 "\"command\":\"sh\",\"args\":[\"-c\",\"trap '' TERM; sleep %s & wait\"],"
		 "\"connect_timeout_ms\":300,\"shutdown_grace_ms\":100,"
		 "\"retry_base_ms\":60000,\"retry_max_ms\":60000}}}", marker);
	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_config_parse("t.json", text, strlen(text), &cfg, &e), GH_OK);
	T_EQ_INT(gh_mcp_start(cfg, t.s, &m, &e), GH_OK);
	T_ASSERT(wait_state(m, "failing", 10000));
	st = status_of(m);
	T_CONTAINS(gh_json_str(st, "lastError"), "no answer to initialize");
	cJSON_Delete(st);
	gh_mcp_stop(m);
	T_EQ_INT(count_children(), children0);
	T_EQ_INT(count_cmdline("sleep", marker), 0);
	gh_config_free(cfg);
	t_store_close(&t);
}

static int count_threads(void)
{
	char tp[64];

	snprintf(tp, sizeof(tp), "/proc/%d/task", (int)getpid());
	return count_dir(tp);
}

/* The test server in --http mode (a Python process of the test's own);
 * its port, or 0. */
static int start_http_server(const char *dir, pid_t *pid)
{
	char script[512], portfile[300], logp[300], buf[16] = "";
	int64_t end = gh_mono_ns() / 1000000 + 15000, port = 0;

	snprintf(script, sizeof(script), "%s/tests/integration/mcp_test_server.py", src_dir());
	snprintf(portfile, sizeof(portfile), "%s/port", dir);
	snprintf(logp, sizeof(logp), "%s/log", dir);
	*pid = fork();
	if (*pid < 0)
		return 0;
	if (*pid == 0) {
		/* it goes when the test goes, however the test ends */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		setenv("MCP_TEST_LOG", logp, 1);
		execlp("python3", "python3", script, "--http", portfile, (char *)NULL);
		_exit(127);
	}
	while (!port && gh_mono_ns() / 1000000 < end) {
		FILE *f = fopen(portfile, "r");

		if (f) {
			if (!fgets(buf, sizeof(buf), f) || gh_parse_i64(buf, 1, 65535, &port) != 0)
				port = 0;
			fclose(f);
		}
		if (!port)
			usleep(20000);
	}
	return (int)port;
}

/* Calls over an HTTP upstream's session, then once more after the
 * server forgot it, from a thread that ends as gatehouse's request
 * workers do (its own libcurl handles and their connections go with it). */
/* Whether the file at path holds needle (0 when it cannot be read). */
static int file_has(const char *path, const char *needle)
{
	static char buf[65536];
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

struct http_calls {
	struct gh_mcp *m;
	pid_t srv;
	const char *log;               /* the server's log (MCP_TEST_LOG) */
	char first[128], second[128];
	int ok;
};

static void *http_caller(void *arg)
{
	struct http_calls *hc = arg;
	int i, is_error = 1, good = 0;
	cJSON *r;

	for (i = 0; i < 3; i++) {
		r = call(hc->m, "t_echo", "{\"text\":\"over http\"}", &is_error, hc->first);
		good += r && !is_error && !strcmp(first_text(r) ? first_text(r) : "",
						   "echo: over http");
		cJSON_Delete(r);
	}
	/* the server forgets its sessions (once its signal handler has run,
	 * which it logs): the next call renews it */
	kill(hc->srv, SIGUSR1);
	for (i = 0; i < 500 && !file_has(hc->log, "\"forgot\": \"sessions\""); i++)
		usleep(10000);
	r = call(hc->m, "t_echo", "{\"text\":\"again\"}", &is_error, hc->second);
	good += r && !is_error && !strcmp(first_text(r) ? first_text(r) : "", "echo: again");
	cJSON_Delete(r);
	hc->ok = good == 4;
	return NULL;
}

/* An HTTP upstream: calls over its session, a session the server forgot
 * (renewed, the call sent once more), and after gh_mcp_stop (which ends
 * the session with a DELETE) no thread or descriptor of its left. */
static void test_http_upstream_leaves_nothing(void)
{
	struct t_store t;
	struct gh_config *cfg = NULL;
	struct gh_mcp *m = NULL;
	struct http_calls hc;
	struct gh_err e;
	char text[1024], logp[300];
	int port, fds0, threads0, children0, threads_up;
	pthread_t th;
	pid_t srv;

	T_EQ_INT(t_store_open(&t), 0);
	port = start_http_server(t.dir, &srv);
	T_ASSERT(port > 0);
	snprintf(text, sizeof(text),
		 "{\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{\"a\":{\"provider\":\"m\"}},"
		 "\"mcp_servers\":{\"t\":{\"transport\":\"http\","
		 "\"url\":\"http://127.0.0.1:%d/mcp\",\"timeout_ms\":5000,"
		 "\"connect_timeout_ms\":8000,\"retry_base_ms\":50,\"retry_max_ms\":200}}}",
		 port);
	T_EQ_INT(gh_config_parse("t.json", text, strlen(text), &cfg, &e), GH_OK);
	fds0 = count_fds_outside(t.dir);
	threads0 = count_threads();
	children0 = count_children();
	T_EQ_INT(gh_mcp_start(cfg, t.s, &m, &e), GH_OK);
	T_ASSERT(wait_state(m, "connected", 10000));
	memset(&hc, 0, sizeof(hc));
	hc.m = m;
	hc.srv = srv;
	snprintf(logp, sizeof(logp), "%s/log", t.dir);
	hc.log = logp;
	T_EQ_INT(pthread_create(&th, NULL, http_caller, &hc), 0);
	pthread_join(th, NULL);
	T_ASSERT(hc.ok);
	T_ASSERT(hc.first[0] && hc.second[0] && strcmp(hc.first, hc.second));
	threads_up = count_threads();
	gh_mcp_stop(m);
	/* the session was ended, and nothing of the upstream's is left: its
	 * supervisor (and GET stream) threads, its sockets */
	T_ASSERT(log_has(t.dir, "\"DELETE\"", 5000));
	T_ASSERT(threads_up > threads0);
	T_EQ_INT(count_threads(), threads0);
	/* the connections it left in the pool of curl handles go with their
	 * idle handles, which nothing else holds */
	T_ASSERT(gh_upstream_idle_close(0) > 0);
	T_EQ_INT(count_fds_outside(t.dir), fds0);
	T_EQ_INT(count_children(), children0);
	kill(srv, SIGTERM);
	waitpid(srv, NULL, 0);
	gh_config_free(cfg);
	t_store_close(&t);
}

T_MAIN(T(test_stdio_upstream), T(test_missing_command), T(test_concurrency_cap),
       T(test_stubborn_child), T(test_http_upstream_leaves_nothing))
