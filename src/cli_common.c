/*
 * cli_common.c - what the commands share: options, loading the config,
 * opening the store. See cli_common.h.
 */
#include "cli_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* ------------------------------------------------------------- options */

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

static char *path_with(const char *db, const char *suffix)
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
	if (c->db) {
		char *p = strdup(c->db);

		if (!p)
			return GH_EXIT_RUNTIME;
		free(c->cfg->database.path);
		c->cfg->database.path = p;
	}
	c->key_hash_file = c->cfg->key_hash_file ? strdup(c->cfg->key_hash_file)
						 : path_with(c->cfg->database.path, "-hashkey");
	c->signing_key_file = c->cfg->audit.signing_key_file
				      ? strdup(c->cfg->audit.signing_key_file)
				      : path_with(c->cfg->database.path, "-audit.key");
	if (!c->key_hash_file || !c->signing_key_file)
		return GH_EXIT_RUNTIME;
	return GH_EXIT_OK;
}

void gh_cli_free(struct gh_cli *c)
{
	gh_config_free(c->cfg);
	free(c->key_hash_file);
	free(c->signing_key_file);
	memset(c, 0, sizeof(*c));
}

struct gh_store *gh_cli_store(struct gh_cli *c, int readonly, const struct gh_audit_signer *s)
{
	struct gh_store_opts o;
	struct gh_store *st = NULL;
	struct gh_err e;

	memset(&o, 0, sizeof(o));
	o.path = c->cfg->database.path;
	o.synchronous_full = c->cfg->database.synchronous_full;
	o.readers = 1;
	o.busy_timeout_ms = (int)c->cfg->database.busy_timeout_ms;
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
	return st;
}

