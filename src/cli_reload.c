/*
 * cli_reload.c - gatehouse reload: asks the running server to re-read its
 * config (SIGHUP to the pid in DB.pid) and prints the outcome the server
 * leaves in DB.reload.json: the admin API's answer to POST
 * /api/admin/reload, or the reason the config was refused.
 *
 * The config is loaded here first, to find the database (and so the pid
 * file) and to report a config that does not validate without bothering
 * the server. Runs on the main thread; reads files, writes none.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli_common.h"
#include "json.h"
#include "reload.h"
#include "util.h"

static const char usage_reload[] =
	"usage: gatehouse reload --config FILE [--db PATH] [--timeout-ms N]\n"
	"\n"
	"Makes the server running on this config (found by the pid file DB.pid beside\n"
	"its database) re-read FILE, as SIGHUP does, and prints the outcome as JSON:\n"
	"the digest of the new text, what changed, and settings that need a restart.\n"
	"A config that does not validate is refused and the running one stays.\n"
	"Exit codes: 0 applied, 1 refused or no answer, 2 usage error.\n";

/* A small file's text (at most cap - 1 bytes), NUL-terminated; -1 when
 * it cannot be read. */
static int read_small(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return -1;
	n = fread(out, 1, cap - 1, f);
	fclose(f);
	out[n] = '\0';
	return 0;
}

/* The outcome file's signal count, when it was written by pid; else 0. */
static long status_count(const char *path, long pid, cJSON **doc)
{
	static char buf[64 * 1024];
	cJSON *o, *c, *p;
	long n = 0;

	*doc = NULL;
	/* serve wrote it */
	if (read_small(path, buf, sizeof(buf)) != 0 || !(o = gh_json_parse_stored(buf)))
		return 0;
	c = cJSON_GetObjectItemCaseSensitive(o, "signal");
	p = cJSON_GetObjectItemCaseSensitive(o, "pid");
	if (cJSON_IsNumber(c) && cJSON_IsNumber(p) && (long)p->valuedouble == pid)
		n = (long)c->valuedouble;
	*doc = o;
	return n;
}

int gh_cmd_reload(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *timeout_s = NULL;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
			     {"--timeout-ms", 1, &timeout_s, NULL}, {0}};
	char *pidf = NULL, *statf = NULL, buf[64], *end;
	long pid, before, timeout_ms = 60000;
	cJSON *doc = NULL;
	int help, rc = GH_EXIT_RUNTIME;
	int64_t deadline;

	if (gh_cli_parse(argc, argv, 2, opts, usage_reload, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (timeout_s) {
		errno = 0;
		timeout_ms = strtol(timeout_s, &end, 10);
		if (errno || *end || timeout_ms < 100 || timeout_ms > 3600000) {
			fprintf(stderr, "gatehouse: --timeout-ms: expected 100..3600000\n");
			return GH_EXIT_USAGE;
		}
	}
	/* a config that does not validate: said here, the server untouched */
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK) {
		gh_cli_free(&c);
		return rc;
	}
	rc = GH_EXIT_RUNTIME;
	pidf = gh_cli_path_with(c.cfg->database.path, GH_RELOAD_PID_SUFFIX);
	statf = gh_cli_path_with(c.cfg->database.path, GH_RELOAD_STATUS_SUFFIX);
	if (!pidf || !statf) {
		fprintf(stderr, "gatehouse: out of memory\n");
		goto out;
	}
	if (read_small(pidf, buf, sizeof(buf)) != 0) {
		fprintf(stderr, "gatehouse: cannot read %s (%s): is gatehouse serve running on "
			"this database?\n", pidf, strerror(errno));
		goto out;
	}
	errno = 0;
	pid = strtol(buf, &end, 10);
	if (errno || pid <= 1 || (*end && *end != '\n')) {
		fprintf(stderr, "gatehouse: %s holds no process id\n", pidf);
		goto out;
	}
	if (!gh_cli_is_serve(pid)) {
		fprintf(stderr, "gatehouse: process %ld (from %s) is not gatehouse serve; the pid "
			"file is stale: is the server running?\n", pid, pidf);
		goto out;
	}
	before = status_count(statf, pid, &doc);
	cJSON_Delete(doc);
	doc = NULL;
	if (kill((pid_t)pid, SIGHUP) != 0) {
		fprintf(stderr, "gatehouse: cannot signal process %ld (from %s): %s\n", pid, pidf,
			strerror(errno));
		goto out;
	}
	deadline = gh_now_ms() + timeout_ms;
	while (gh_now_ms() < deadline) {
		usleep(50000);
		if (status_count(statf, pid, &doc) > before)
			break;
		cJSON_Delete(doc);
		doc = NULL;
	}
	if (!doc) {
		fprintf(stderr, "gatehouse: process %ld did not report a reload within %ld ms; "
			"its log says why\n", pid, timeout_ms);
		goto out;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "signal");
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "pid");
	{
		char *txt = cJSON_Print(doc);

		if (txt)
			printf("%s\n", txt);
		free(txt);
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "ok"))) {
		rc = GH_EXIT_OK;
	} else {
		const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc,
											 "error"));

		fprintf(stderr, "gatehouse: reload refused: %s\n", err ? err : "(no reason)");
	}
out:
	cJSON_Delete(doc);
	free(pidf);
	free(statf);
	gh_cli_free(&c);
	return rc;
}
