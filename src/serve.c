/*
 * serve.c - gatehouse serve: wires config, store, rate limiter, background
 * work and the HTTP server together, then waits for SIGINT/SIGTERM and
 * shuts down in order (HTTP first, so no request is cut mid-write; the
 * store last, after a final checkpoint).
 *
 * Start-up checks what it can before it writes anything (the database's
 * and key files' directories, the listen address by binding it once); a
 * start that fails later removes the files it created itself.
 *
 * Runs on the main thread; SIGINT/SIGTERM/SIGHUP are blocked in every
 * thread and taken with sigwait here. SIGHUP reloads the config
 * (reload.h); the outcome goes to the log, the audit log and, for
 * `gatehouse reload`, to DB.reload.json beside the pid file DB.pid.
 */
/* F_OFD_SETLK */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "admin_audit.h"
#include "audit_health.h"
#include "background.h"
#include "cli_common.h"
#include "http.h"
#include "http_metrics.h"
#include "hub.h"
#include "notify.h"
#include "json.h"
#include "keys.h"
#include "log.h"
#include "mcp.h"
#include "otel.h"
#include "policy.h"
#include "ratelimit.h"
#include "replica.h"
#include "reload.h"
#include "upstream.h"
#include "util.h"

/* ------------------------------------------------------------- start-up */

/* Descriptors a worker thread may hold at once: its client's connection,
 * an upstream connection and, once its pair has carried a transfer
 * through libcurl, the two ends of that pair's wake-up socketpair; and
 * those the rest of the process holds besides (listeners, the database's
 * files, MCP servers' pipes, connections the front keeps until their
 * request head is in). */
#define FDS_PER_THREAD 4
#define FDS_BESIDES 1024

/* Raises the soft limit on descriptors to what server.threads may hold
 * (never above the hard limit; a warning when that is lower), and grows
 * the process's descriptor table to it now, before any thread starts.
 *
 * Linux grows a descriptor table by doubling when a new descriptor does
 * not fit, and in a process of more than one thread the growth waits for
 * an RCU grace period (several milliseconds) inside the accept() or
 * socket() that needed the room, while every other thread that opens a
 * descriptor waits behind it. Serving, that stalls every new connection
 * each time the count of open descriptors crosses a power of two: five
 * stalls of 5-15 ms on the way to 1,000 streams. Grown once here, the
 * table has room for all of them and never grows while serving; it costs
 * the kernel about 8 bytes per slot. */
static void reserve_descriptors(const struct gh_config *cfg)
{
	rlim_t want = (rlim_t)cfg->server.threads * FDS_PER_THREAD + FDS_BESIDES, top;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	/* RLIM_INFINITY is rlim_t's largest value: never below want */
	if (rl.rlim_cur < want) {
		struct rlimit up = rl;

		up.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		if (up.rlim_cur > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
		if (rl.rlim_cur < want)
			gh_warn("descriptors: the limit is %llu (hard limit %llu), and server.threads "
				"= %lld may hold about %llu at once; raise it (LimitNOFILE= in a "
				"systemd unit, ulimit -n in a shell)",
				(unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
				(long long)cfg->server.threads, (unsigned long long)want);
	}
	top = rl.rlim_cur < want ? rl.rlim_cur : want;
	if (gh_fd_table_grow((int)top) != 0)
		gh_debug("descriptors: could not size the table for %llu: %s",
			 (unsigned long long)top, strerror(errno));
}

/* Binds and listens on listen's address once and lets go, as CivetWeb
 * will (SO_REUSEADDR, an IPv6 socket only for IPv6), so that an address
 * in use, a port that needs privileges or a host name that does not
 * resolve is reported before anything is written to disk. */
static enum gh_code probe_listen(const char *addr, struct gh_err *e)
{
	char host[GH_LISTEN_HOST_MAX], why[200], port_s[8];
	struct addrinfo hints, *res = NULL;
	int port, v6, fd, one = 1, gai, err;

	if (gh_config_listen_parse(addr, host, sizeof(host), &port, &v6, why, sizeof(why)))
		return gh_err_set(e, GH_E_BADREQ, "cannot listen on %s: %s", addr, why);
	snprintf(port_s, sizeof(port_s), "%d", port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	/* like CivetWeb: a name is looked up as IPv4 first, then IPv6 */
	hints.ai_family = v6 ? AF_INET6 : AF_INET;
	gai = getaddrinfo(host, port_s, &hints, &res);
	if (gai != 0 && !v6) {
		hints.ai_family = AF_INET6;
		gai = getaddrinfo(host, port_s, &hints, &res);
	}
	if (gai != 0)
		return gh_err_set(e, GH_E_IO, "cannot listen on %s: host \"%s\" does not resolve "
				  "(%s)", addr, host, gai_strerror(gai));
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = errno;
		freeaddrinfo(res);
		return gh_err_set(e, GH_E_IO, "cannot listen on %s: %s", addr, strerror(err));
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (res->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	err = bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1) != 0 ? errno : 0;
	close(fd);
	freeaddrinfo(res);
	if (err == EACCES)
		return gh_err_set(e, GH_E_IO, "cannot listen on %s: %s (ports below 1024 need root "
				  "or CAP_NET_BIND_SERVICE)", addr, strerror(err));
	if (err == EADDRNOTAVAIL)
		return gh_err_set(e, GH_E_IO, "cannot listen on %s: %s (no network interface of "
				  "this machine has that address)", addr, strerror(err));
	if (err)
		return gh_err_set(e, GH_E_IO, "cannot listen on %s: %s", addr, strerror(err));
	return GH_OK;
}

/* The files one start may create: whichever did not exist before it are
 * removed again when that start fails, so a failed first start leaves the
 * directory as it found it. */
enum { CR_HASHKEY, CR_SIGNKEY, CR_WITNESS, CR_DB, CR_NFILES = CR_DB + 4 };

struct created {
	char *path[CR_NFILES];
	int existed[CR_NFILES];
};

static int created_init(struct created *cr, const struct gh_cli *c)
{
	static const char *const sfx[] = {"", "-wal", "-shm", "-writer.lock"};
	const char *db = c->cfg->database.path;
	size_t i, n = strlen(db) + sizeof("-writer.lock");

	memset(cr, 0, sizeof(*cr));
	cr->path[CR_HASHKEY] = strdup(c->key_hash_file);
	cr->path[CR_SIGNKEY] = strdup(c->signing_key_file);
	/* none when the witness is disabled */
	cr->path[CR_WITNESS] = strdup(c->witness_file ? c->witness_file : "");
	/* PostgreSQL: no database file (an empty path counts as existing) */
	for (i = 0; i < 4; i++)
		if ((cr->path[CR_DB + i] = malloc(n)))
			snprintf(cr->path[CR_DB + i], n, "%s%s", c->cfg->database.url ? "" : db,
				 c->cfg->database.url ? "" : sfx[i]);
	for (i = 0; i < CR_NFILES; i++) {
		if (!cr->path[i])
			return -1;
		cr->existed[i] = !*cr->path[i] || access(cr->path[i], F_OK) == 0;
	}
	return 0;
}

static void created_undo(struct created *cr)
{
	size_t i;

	for (i = 0; i < CR_NFILES; i++) {
		if (!cr->path[i] || cr->existed[i] || access(cr->path[i], F_OK) != 0)
			continue;
		if (unlink(cr->path[i]) == 0)
			gh_info("removed %s, created by this failed start", cr->path[i]);
		else
			gh_warn("cannot remove %s: %s", cr->path[i], strerror(errno));
	}
}

static void created_free(struct created *cr)
{
	size_t i;

	for (i = 0; i < CR_NFILES; i++)
		free(cr->path[i]);
}

static void warn_policy(void *ud, const char *msg)
{
	(void)ud;
	gh_warn("%s", msg);
}

static int restore_cb(void *ud, const char *key, int64_t tat_ms)
{
	gh_rl_restore(ud, key, tat_ms, gh_now_ms());
	return 0;
}

/* The rate limiter and the hub of live events. Replicas (database.url)
 * share both, and leadership, through the database; one node restores
 * the limits it saved at its last stop. */
static enum gh_code start_limits_and_events(struct gh_app *app, struct gh_cli *c,
					    struct gh_err *e)
{
	app->rl = gh_rl_new(1000000);
	app->hub = gh_hub_new();
	if (!app->rl || !app->hub)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (c->cfg->database.url)
		return gh_replica_start(app, c->cfg->database.url, e);
	if (gh_store_ratelimit_load(app->store, restore_cb, app->rl, e) != GH_OK)
		gh_warn("rate limits: previous state not restored: %s", e->msg);
	return GH_OK;
}

/* Records the policies in force at start ("policy_reload"), so the audit
 * log shows which policy version governed every later decision. */
static void audit_policies(struct gh_app *app)
{
	struct gh_system_event se = {"policy_reload", "admin", "ok", NULL, NULL,
				     "the loaded policies"};
	cJSON *d = cJSON_CreateObject(), *p = cJSON_AddObjectToObject(d, "policies");
	char *ds;
	size_t i;

	const struct gh_config *cfg = gh_app_cfg(app);

	for (i = 0; i < cfg->npolicies; i++)
		cJSON_AddStringToObject(p, cfg->policies[i].name, cfg->policies[i].version);
	cJSON_AddStringToObject(d, "config", cfg->file);
	ds = gh_json_dump(d);
	cJSON_Delete(d);
	se.detail = ds;
	gh_admin_audit_system(app->store, &se);
	free(ds);
}

/* Everything that can be checked is checked before a file is made; then
 * what start-up will create is noted (to remove it if start-up fails). 0,
 * or -1 after printing why. */
static int preflight(struct gh_cli *c, const char *listen, struct created *cr)
{
	struct gh_err e;

	if (gh_cli_check_paths(c) != GH_EXIT_OK)
		return -1;
	if (probe_listen(listen, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		return -1;
	}
	/* policy rules that can match nothing (a misspelt agent, a tool
	 * that does not exist) start anyway, but not silently */
	for (size_t i = 0; i < c->cfg->npolicies; i++)
		gh_policy_lint(c->cfg, &c->cfg->policies[i], warn_policy, NULL);
	if (!gh_config_policy(c->cfg, "default"))
		gh_warn("%s has no policy named \"default\": keys created without --policy may use "
			"nothing (no agent, no tool)", c->cfg->file);
	if (created_init(cr, c) != 0) {
		created_free(cr);
		fprintf(stderr, "gatehouse: out of memory\n");
		return -1;
	}
	if (gh_upstream_global_init() != 0) {
		created_free(cr);
		fprintf(stderr, "gatehouse: libcurl failed to initialise\n");
		return -1;
	}
	return 0;
}

/* Opens the store (migrating it), undoes what a crash left half done and
 * refreshes the planner's statistics. */
static enum gh_code open_store(struct gh_app *app, struct gh_cli *c, struct gh_err *e)
{
	struct gh_store_opts so;
	int n = 0;

	gh_cli_db_opts(c->cfg, &so);
	so.threaded = 1;
	so.ckpt_rows = c->cfg->audit.checkpoint_rows;
	so.ckpt_ms = c->cfg->audit.checkpoint_seconds * 1000;
	/* opens the store, checks the audit chain before anything writes, and
	 * signs from there on (or refuses, or serves read-only) */
	if (gh_audit_serve_open(app, &so, c->witness_file, e) != GH_OK)
		return e->code;
	if (app->read_only)
		return GH_OK;
	if (gh_store_audit_close_interrupted(app->store, &n, e) != GH_OK)
		return e->code;
	if (n)
		gh_warn("audit: %d tool calls were cut off by the last shutdown; each is "
			"recorded as interrupted", n);
	if (gh_store_runs_recover(app->store, &n, e) != GH_OK)
		return e->code;
	if (n)
		gh_warn("recovered %d runs interrupted by the last shutdown", n);
	if (gh_store_analyze(app->store, e) != GH_OK)
		gh_warn("database: statistics not refreshed: %s", e->msg);
	return GH_OK;
}

/* The trace exporter, when the config has an `otel` section. */
static enum gh_code start_otel(const struct gh_config *cfg, struct gh_err *e)
{
	const struct gh_otel_conf *o = &cfg->otel;
	struct gh_otel_header h[64];
	struct gh_otel_settings s;
	size_t i;

	if (!o->endpoint)
		return GH_OK;
	if (o->nheaders > GH_ARRAY_LEN(h))
		return gh_err_set(e, GH_E_BADREQ, "otel.headers: at most %zu headers",
				  GH_ARRAY_LEN(h));
	for (i = 0; i < o->nheaders; i++)
		h[i] = (struct gh_otel_header){o->headers[i].name, o->headers[i].value};
	memset(&s, 0, sizeof(s));
	s.endpoint = o->endpoint;
	s.headers = h;
	s.nheaders = o->nheaders;
	s.capture_content = o->capture_content;
	s.sample_ratio = o->sample_ratio;
	s.max_queue = o->max_queue;
	s.max_batch = o->max_batch;
	s.interval_ms = o->interval_ms;
	s.timeout_ms = o->timeout_ms;
	s.shutdown_ms = o->shutdown_timeout_ms;
	if (gh_otel_start(&s, e) != GH_OK)
		return e->code;
	/* not the endpoint: its address may carry credentials */
	gh_info("otel: exporting traces (sample ratio %g, queue %lld spans)", o->sample_ratio,
		(long long)o->max_queue);
	return GH_OK;
}

/* The line the operator (and the test harness) waits for. */
static void announce(struct gh_cli *c, const char *listen, struct gh_app *app,
		     struct gh_http *http)
{
	char host[256], db[512];
	const char *colon = strrchr(listen, ':');
	size_t hl = colon ? (size_t)(colon - listen) : 0;

	if (hl >= sizeof(host))
		hl = sizeof(host) - 1;
	memcpy(host, listen, hl);
	host[hl] = '\0';
	gh_cli_db_name(c->cfg, db, sizeof(db));
	gh_info("gatehouse %s: database %s (schema %d), %zu agents, %zu policies", GH_VERSION, db,
		gh_store_schema_version(app->store), c->cfg->nagents, c->cfg->npolicies);
	printf("gatehouse listening on http://%s:%d\n", hl ? host : "127.0.0.1", gh_http_port(http));
	fflush(stdout);
	if (!c->cfg->server.public_url || !*c->cfg->server.public_url) {
		char url[320];

		gh_a2a_base_url(app, gh_http_port(http), url, sizeof(url));
		gh_warn("server.public_url is not set: A2A agent cards announce %s (the listen "
			"address); set server.public_url to the address clients use to reach "
			"gatehouse", url);
	}
}

/* ------------------------------------------------------ pid and reload */

/* DB + sfx, or NULL out of memory; caller frees. */
static char *state_path(const struct gh_cli *c, const char *sfx)
{
	return gh_cli_path_with(c->cfg->database.path, sfx);
}

/* One server per SQLite database. A second one would take the first's
 * calls in flight for calls a crash cut off (start-up closes those with an
 * "interrupted" row) and its running runs for runs to recover. The lock is
 * an open file description lock on byte 0 of <db>-writer.lock, held until
 * the process ends; it is apart from the flock every write transaction
 * takes on that file, so the CLI still writes beside a server. The
 * descriptor, or -1 after printing why. */
static int serve_lock(const struct gh_cli *c)
{
	struct flock fl;
	char *path = state_path(c, "-writer.lock"), pid[48] = "";
	long other;
	int fd = -1, err;

	if (!path) {
		fprintf(stderr, "gatehouse: out of memory\n");
		goto out;
	}
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		fprintf(stderr, "gatehouse: cannot open %s: %s\n", path, strerror(errno));
		goto out;
	}
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_len = 1;
	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		goto out;
	err = errno;
	close(fd);
	fd = -1;
	if (err != EAGAIN && err != EACCES) {
		fprintf(stderr, "gatehouse: cannot lock %s: %s\n", path, strerror(err));
		goto out;
	}
	/* its pid file is written once it serves: one still starting has none */
	if ((other = gh_cli_server_pid(c->cfg->database.path)))
		snprintf(pid, sizeof(pid), " (pid %ld)", other);
	fprintf(stderr, "gatehouse: the database %s is in use by another gatehouse server%s; "
		"one server serves a SQLite database (replicas share a PostgreSQL one)\n",
		c->cfg->database.path, pid);
out:
	free(path);
	return fd;
}

/* DB.pid: how `gatehouse reload` finds this process. */
static void pidfile_write(const struct gh_cli *c)
{
	char *p = state_path(c, GH_RELOAD_PID_SUFFIX), num[32];
	FILE *f;

	if (!p)
		return;
	snprintf(num, sizeof(num), "%ld\n", (long)getpid());
	if (!(f = fopen(p, "w")) || fputs(num, f) < 0 || fclose(f) != 0)
		gh_warn("cannot write %s (gatehouse reload finds the server by it): %s", p,
			strerror(errno));
	free(p);
}

static void pidfile_remove(const struct gh_cli *c)
{
	char *p = state_path(c, GH_RELOAD_PID_SUFFIX);

	if (p)
		unlink(p);
	free(p);
}

/* SIGHUP: reloads, and leaves the outcome (the admin API's answer, or
 * {"ok":false,"error":...}) with the signal count in DB.reload.json,
 * written whole (renamed into place), for `gatehouse reload`. */
static void reload_on_signal(struct gh_app *app, const struct gh_cli *c)
{
	static long count;
	struct gh_reload_opts o = {"signal", NULL, app->db_override};
	struct gh_err e;
	cJSON *res = NULL;
	char *p = state_path(c, GH_RELOAD_STATUS_SUFFIX), *tmp = state_path(c, ".reload.tmp");
	char *txt;
	FILE *f;

	gh_info("received SIGHUP: reloading %s", app->boot_cfg->file);
	if (gh_reload(app, &o, &res, &e) != GH_OK) {
		res = cJSON_CreateObject();
		cJSON_AddBoolToObject(res, "ok", 0);
		cJSON_AddStringToObject(res, "error", e.msg);
	}
	cJSON_AddNumberToObject(res, "signal", (double)++count);
	cJSON_AddNumberToObject(res, "pid", (double)getpid());
	txt = gh_json_dump(res);
	cJSON_Delete(res);
	if (p && tmp && txt && (f = fopen(tmp, "w"))) {
		int ok = fputs(txt, f) >= 0;

		if (fclose(f) != 0 || !ok || rename(tmp, p) != 0)
			unlink(tmp);
	}
	free(txt);
	free(tmp);
	free(p);
}

/* Serves until SIGINT or SIGTERM (returned), reloading the config at
 * each SIGHUP; the pid file names this process meanwhile. */
static int serve_until_signal(struct gh_app *app, const struct gh_cli *c, const sigset_t *set)
{
	int sig;

	pidfile_write(c);
	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (sig != SIGHUP)
			break;
		reload_on_signal(app, c);
	}
	pidfile_remove(c);
	return sig;
}

/* Stops what serve started, in the order that lets each part finish what
 * the others hand it. Each part may be missing (a start that failed). */
static void stop_all(struct gh_app *app, struct gh_http *http, struct gh_metrics_http *mhttp)
{
	int64_t t0 = gh_mono_ns(), t1, t2, t3;

	gh_http_metrics_stop(mhttp);
	gh_http_stop(http);
	t1 = gh_mono_ns();
	gh_bg_stop(app->bg);
	t2 = gh_mono_ns();
	/* after everything that decides or expires approvals, and before
	 * the last generation goes: the notifier reads its targets there */
	gh_notify_stop(app->notify);
	/* after the background work, before the store: the rate limiter and
	 * the events relay use the database */
	gh_replica_stop(app);
	/* after every request and background run: no call is in flight,
	 * and the last generation (with its MCP servers) goes */
	gh_app_cfg_fini(app);
	/* after every span's end: what waits is flushed, for a bounded time */
	gh_otel_stop();
	t3 = gh_mono_ns();
	gh_store_close(app->store);
	gh_audit_serve_close(app);
	if (http)
		gh_info("stopped: http %.0f ms, background %.0f ms, mcp %.0f ms, store %.0f ms",
			(double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6, (double)(t3 - t2) / 1e6,
			(double)(gh_mono_ns() - t3) / 1e6);
}

int gh_cmd_serve(struct gh_cli *c)
{
	struct gh_app app;
	struct gh_http *http = NULL;
	struct gh_metrics_http *mhttp = NULL;
	struct gh_err e;
	struct created cr;
	sigset_t set;
	int sig, rc = GH_EXIT_RUNTIME, lock_fd = -1;
	const char *listen = c->listen ? c->listen : c->cfg->server.listen;

	struct gh_mcp *mcp = NULL;
	char digest[65];

	memset(&app, 0, sizeof(app));
	memset(&cr, 0, sizeof(cr));
	gh_reload_apply_log(c->cfg);
	app.boot_cfg = c->cfg;
	app.listen = listen;
	app.db_override = c->db;
	app.started_ms = gh_now_ms();
	app.config_path = c->config;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	reserve_descriptors(c->cfg);

	if (preflight(c, listen, &cr) != 0)
		return GH_EXIT_RUNTIME;
	if (!c->cfg->database.url && (lock_fd = serve_lock(c)) < 0)
		goto out;
	if (gh_keys_load_hashkey(c->key_hash_file, 1, app.hashkey, &e) != GH_OK ||
	    gh_audit_signer_load(c->signing_key_file, 1, &app.signer, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	app.has_signer = 1;
	if (open_store(&app, c, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (start_limits_and_events(&app, c, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	/* read-only: nothing in the background writes either */
	if (!app.read_only)
		audit_policies(&app);
	/* upstream MCP servers pin what they list and every call is audited:
	 * a read-only gateway starts none */
	if (app.read_only && c->cfg->nmcp_servers)
		gh_warn("read-only: the %zu upstream MCP servers are not started",
			c->cfg->nmcp_servers);
	if (!app.read_only && gh_mcp_start(c->cfg, app.store, &mcp, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	/* the first config generation; reloads replace it (reload.h) */
	gh_reload_digest_file(c->cfg->file, digest);
	if (gh_app_cfg_init(&app, c->cfg, mcp, digest) != 0) {
		gh_mcp_stop(mcp);
		fprintf(stderr, "gatehouse: out of memory\n");
		goto out;
	}
	if (!app.read_only && gh_notify_start(&app, &app.notify, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (!app.read_only && gh_bg_start(&app, &app.bg, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (start_otel(c->cfg, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (gh_http_start(&app, listen, &http, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (c->cfg->metrics.enabled && c->cfg->metrics.listen) {
		if (gh_http_metrics_start(&app, &mhttp, &e) != GH_OK) {
			fprintf(stderr, "gatehouse: %s\n", e.msg);
			goto out;
		}
		printf("gatehouse metrics on port %d (metrics.listen %s)\n",
		       gh_http_metrics_port(mhttp), c->cfg->metrics.listen);
	}
	{
		/* the main thread reads the config under a reference like
		 * every other thread: a reload may free what it read */
		struct gh_cfg_gen *g = gh_app_cfg_acquire(&app), *prev = gh_app_cfg_enter(g);

		announce(c, listen, &app, http);
		gh_app_cfg_leave(prev);
		gh_app_cfg_release(g);
	}
	sig = serve_until_signal(&app, c, &set);
	gh_info("received %s: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
	atomic_store(&app.stopping, 1);
	rc = GH_EXIT_OK;
out:
	stop_all(&app, http, mhttp);
	if (rc != GH_EXIT_OK && !http)
		created_undo(&cr);
	created_free(&cr);
	gh_hub_free(app.hub);
	gh_rl_free(app.rl);
	sodium_memzero(app.hashkey, sizeof(app.hashkey));
	gh_audit_signer_wipe(&app.signer);
	gh_upstream_global_cleanup();
	if (lock_fd >= 0)
		close(lock_fd);
	return rc;
}
