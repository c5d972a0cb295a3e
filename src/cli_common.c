/*
 * cli_common.c - what the commands share: options, loading the config,
 * checking its paths, opening the store, key names. See cli_common.h.
 */
#include "cli_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "audit_health.h"
#include "log.h"
#include "pg.h"
#include "reload.h"
#include "util.h"

/* ------------------------------------------------------------- options */

int gh_cli_dispatch(int argc, char **argv, const char *cmd, const struct gh_cli_sub *subs,
		    const char *usage)
{
	size_t i;

	if (argc < 3 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) {
		fputs(usage, argc < 3 ? stderr : stdout);
		return argc < 3 ? GH_EXIT_USAGE : GH_EXIT_OK;
	}
	for (i = 0; subs[i].name; i++)
		if (!strcmp(subs[i].name, argv[2]))
			return subs[i].run(argc, argv);
	fprintf(stderr, "gatehouse: unknown %s command \"%s\"\n\n%s", cmd, argv[2], usage);
	return GH_EXIT_USAGE;
}

int gh_cli_parse(int argc, char **argv, int from, const struct gh_opt *opts, const char *usage,
		 int *help)
{
	int i;

	*help = 0;
	for (i = from; i < argc; i++) {
		const struct gh_opt *o;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			*help = 1;
			return -1;
		}
		for (o = opts; o->name; o++)
			if (!strcmp(argv[i], o->name))
				break;
		if (!o->name) {
			fprintf(stderr, "gatehouse: unknown option %s\n\n%s", argv[i], usage);
			return -1;
		}
		if (o->has_arg) {
			if (i + 1 >= argc) {
				fprintf(stderr, "gatehouse: %s needs a value\n\n%s", argv[i], usage);
				return -1;
			}
			*o->value = argv[++i];
		} else {
			*o->flag = 1;
		}
	}
	return 0;
}

char *gh_cli_path_with(const char *db, const char *suffix)
{
	size_t n = strlen(db) + strlen(suffix) + 1;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s%s", db, suffix);
	return p;
}

int gh_cli_load(struct gh_cli *c)
{
	struct gh_err e;

	if (!c->config) {
		fprintf(stderr, "gatehouse: --config FILE is required\n");
		return GH_EXIT_USAGE;
	}
	if (gh_config_load(c->config, &c->cfg, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		return GH_EXIT_RUNTIME;
	}
	if (c->db && gh_pg_is_url(c->db)) {
		/* --db postgres://...: that database, local files as for
		 * database.url */
		char *u = strdup(c->db);

		if (!u)
			return GH_EXIT_RUNTIME;
		if (gh_pg_url_check(u, "--db", &e) != GH_OK) {
			fprintf(stderr, "gatehouse: %s\n", e.msg);
			free(u);
			return GH_EXIT_USAGE;
		}
		if (!c->cfg->database.url) {
			/* local files beside the config, as with database.url */
			const char *slash = strrchr(c->cfg->file, '/');
			int dl = slash ? (int)(slash - c->cfg->file) + 1 : 0;
			size_t n = (size_t)dl + sizeof("gatehouse");
			char *p = malloc(n);

			if (!p) {
				free(u);
				return GH_EXIT_RUNTIME;
			}
			snprintf(p, n, "%.*sgatehouse", dl, c->cfg->file);
			free(c->cfg->database.path);
			c->cfg->database.path = p;
		}
		free(c->cfg->database.url);
		c->cfg->database.url = u;
	} else if (c->db) {
		char *p = strdup(c->db);

		if (!p)
			return GH_EXIT_RUNTIME;
		free(c->cfg->database.path);
		c->cfg->database.path = p;
		if (c->cfg->database.url) {
			/* --db PATH: SQLite, whatever the config says */
			sodium_memzero(c->cfg->database.url, strlen(c->cfg->database.url));
			free(c->cfg->database.url);
			c->cfg->database.url = NULL;
		}
	}
	c->key_hash_file = c->cfg->key_hash_file ? strdup(c->cfg->key_hash_file)
						 : gh_cli_path_with(c->cfg->database.path, "-hashkey");
	c->signing_key_file = c->cfg->audit.signing_key_file
				      ? strdup(c->cfg->audit.signing_key_file)
				      : gh_cli_path_with(c->cfg->database.path, "-audit.key");
	if (!c->key_hash_file || !c->signing_key_file)
		return GH_EXIT_RUNTIME;
	if (c->cfg->audit.witness.enabled) {
		c->witness_file = c->cfg->audit.witness.file ? strdup(c->cfg->audit.witness.file)
							     : gh_cli_path_with(c->cfg->database.path,
									 "-witness");
		if (!c->witness_file)
			return GH_EXIT_RUNTIME;
	}
	return GH_EXIT_OK;
}

/* Can path (named by option) be opened, or created, by a command that
 * writes? For the database its directory must also be writable (SQLite
 * keeps -wal and -shm files beside it). 0 when yes; else prints why. */
static int check_path(const char *option, const char *path, int need_write, int dir_write)
{
	struct stat st;
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int exists = stat(path, &st) == 0;

	if (!exists && errno != ENOENT && errno != ENOTDIR) {
		fprintf(stderr, "gatehouse: %s \"%s\": %s\n", option, path, strerror(errno));
		return -1;
	}
	if (exists && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "gatehouse: %s \"%s\" is a directory, not a file\n", option, path);
		return -1;
	}
	if (exists && access(path, need_write ? R_OK | W_OK : R_OK) != 0) {
		fprintf(stderr, "gatehouse: %s \"%s\" is not %s: %s\n", option, path,
			need_write ? "readable and writable" : "readable", strerror(errno));
		return -1;
	}
	if (exists && !dir_write)
		return 0;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) != 0) {
		fprintf(stderr, "gatehouse: %s \"%s\": %s \"%s\" %s\n", option, path,
			errno == ENOTDIR ? "a part of" : "directory", dir,
			errno == ENOENT ? "does not exist"
			: errno == ENOTDIR ? "is not a directory" : strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "gatehouse: %s \"%s\": \"%s\" is not a directory\n", option, path,
			dir);
		return -1;
	}
	if (access(dir, W_OK | X_OK) != 0) {
		fprintf(stderr, "gatehouse: %s \"%s\": directory \"%s\" is not writable: %s\n",
			option, path, dir, strerror(errno));
		return -1;
	}
	return 0;
}

int gh_cli_check_paths(const struct gh_cli *c)
{
	const char *dbopt = c->db ? "--db" : "database.path";

	if (!c->cfg->database.url && check_path(dbopt, c->cfg->database.path, 1, 1) != 0)
		return GH_EXIT_RUNTIME;
	/* the default key files live beside the database: checked with it */
	if (c->cfg->key_hash_file &&
	    check_path("auth.key_hash_file", c->key_hash_file, 0, 0) != 0)
		return GH_EXIT_RUNTIME;
	if (c->cfg->audit.signing_key_file &&
	    check_path("audit.signing_key_file", c->signing_key_file, 0, 0) != 0)
		return GH_EXIT_RUNTIME;
	/* the witness is appended to: it must be writable */
	if (c->witness_file && c->cfg->audit.witness.file &&
	    check_path("audit.witness.file", c->witness_file, 1, 0) != 0)
		return GH_EXIT_RUNTIME;
	return GH_EXIT_OK;
}

void gh_cli_free(struct gh_cli *c)
{
	gh_audit_cli_close(c->signing);
	gh_config_free(c->cfg);
	free(c->key_hash_file);
	free(c->signing_key_file);
	free(c->witness_file);
	memset(c, 0, sizeof(*c));
}

void gh_cli_db_opts(const struct gh_config *cfg, struct gh_store_opts *o)
{
	const struct gh_database_conf *d = &cfg->database;

	memset(o, 0, sizeof(*o));
	o->path = d->path;
	o->url = d->url;
	o->synchronous_full = d->synchronous_full;
	o->readers = (int)d->readers;
	o->busy_timeout_ms = (int)d->busy_timeout_ms;
	o->group_commit_max = (int)d->group_commit_max;
	o->pool_size = (int)d->pool_size;
	o->statement_timeout_ms = (int)d->statement_timeout_ms;
	o->connect_timeout_ms = (int)d->connect_timeout_ms;
}

void gh_cli_db_name(const struct gh_config *cfg, char *out, size_t cap)
{
	if (cfg->database.url)
		gh_pg_url_redact(cfg->database.url, out, cap);
	else
		snprintf(out, cap, "%s", cfg->database.path);
}

struct gh_store *gh_cli_store(struct gh_cli *c, int readonly, const struct gh_audit_signer *s)
{
	struct gh_store_opts o;
	struct gh_store *st = NULL;
	struct gh_err e;

	gh_cli_db_opts(c->cfg, &o);
	o.readers = 1;
	o.pool_size = 2;
	o.group_commit_max = 1;
	o.threaded = 0;
	o.readonly = readonly;
	o.signer = s;
	o.ckpt_rows = c->cfg->audit.checkpoint_rows;
	o.ckpt_ms = c->cfg->audit.checkpoint_seconds * 1000;
	if (gh_store_open(&o, &st, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		return NULL;
	}
	if (!readonly && !s && !c->signing)
		c->signing = gh_audit_cli_sign(st, c->cfg, c->signing_key_file, c->witness_file);
	return st;
}

int gh_cli_open(int argc, char **argv, int from, const struct gh_opt *opts, const char *usage,
		int readonly, struct gh_cli *c, struct gh_store **s)
{
	int help, rc;

	*s = NULL;
	if (gh_cli_parse(argc, argv, from, opts, usage, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if ((rc = gh_cli_load(c)) != GH_EXIT_OK ||
	    (!readonly && (rc = gh_cli_check_paths(c)) != GH_EXIT_OK)) {
		gh_cli_free(c);
		return rc;
	}
	if (!(*s = gh_cli_store(c, readonly, NULL))) {
		gh_cli_free(c);
		return GH_EXIT_RUNTIME;
	}
	return GH_EXIT_OK;
}

/* ------------------------------------------------------------ key names */

static int collect_named(void *ud, const struct gh_key *k)
{
	struct gh_cli_named *o = ud;
	size_t len = strlen(o->ids);

	if (strcmp(k->name, o->name))
		return 0;
	if (o->n++ == 0)
		gh_strlcpy(o->id, k->id, sizeof(o->id));
	snprintf(o->ids + len, sizeof(o->ids) - len, "%s%s%s", len ? ", " : "", k->id,
		 k->revoked_at ? " (revoked)" : "");
	return 0;
}

enum gh_code gh_cli_keys_named(struct gh_store *s, const char *name, struct gh_cli_named *out,
			       struct gh_err *e)
{
	memset(out, 0, sizeof(*out));
	out->name = name;
	return gh_store_key_list(s, collect_named, out, e);
}


/* ------------------------------------------------------- the server */

int gh_cli_is_serve(long pid)
{
	char path[64], args[4096];
	FILE *f;
	size_t n, i;
	int serve = 0;

	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	if (!(f = fopen(path, "rb")))
		return 0;
	n = fread(args, 1, sizeof(args) - 1, f);
	fclose(f);
	args[n] = '\0';
	/* NUL-separated arguments: the first names the binary */
	if (!strstr(args, "gatehouse"))
		return 0;
	for (i = strlen(args) + 1; i < n; i += strlen(args + i) + 1)
		if (!strcmp(args + i, "serve"))
			serve = 1;
	return serve;
}

long gh_cli_server_pid(const char *db)
{
	char *pidf = gh_cli_path_with(db, GH_RELOAD_PID_SUFFIX), buf[32], *end = buf;
	FILE *f = pidf ? fopen(pidf, "rb") : NULL;
	size_t n = 0;
	long pid = 0;

	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	free(pidf);
	buf[n] = '\0';
	errno = 0;
	if (n)
		pid = strtol(buf, &end, 10);
	if (errno || pid <= 1 || (*end && *end != '\n') || !gh_cli_is_serve(pid))
		return 0;
	return pid;
}
