/*
 * cli.c - command dispatch, and the keys commands. See cli.h; what the
 * commands share is in cli_common.c, migrate is in cli_migrate.c.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "admin_audit.h"
#include "cli_common.h"
#include "keys.h"
#include "log.h"
#include "util.h"

static const char usage_main[] =
	"usage: gatehouse <command> [options]\n"
	"\n"
	"commands:\n"
	"  serve    --config FILE [--listen HOST:PORT] [--db PATH]   run the gateway\n"
	"  migrate  --config FILE [--db PATH]                        apply schema migrations\n"
	"  migrate  --config FILE --from sqlite:PATH --to URL        copy a SQLite database "
	"into an empty PostgreSQL one\n"
	"  keys     create|list|revoke                               manage API keys\n"
	"  audit    tail|query|export|verify|reindex|pubkey          read and check the audit log\n"
	"  admin    create|list|passwd|enable|disable                manage admin UI accounts\n"
	"  mcp      list|tools|accept|reject                         upstream MCP servers and "
	"their pinned tools\n"
	"  reload   --config FILE                                    make the running server "
	"re-read its config\n"
	"  policy   test                                             replay recorded tool calls "
	"against a candidate config\n"
	"\n"
	"Run gatehouse <command> --help for a command's options.\n"
	"Exit codes: 0 ok, 1 runtime error, 2 usage error.\n";

static const char usage_keys[] =
	"usage: gatehouse keys create --config FILE --name NAME [--owner NAME] [--policy NAME] "
	"[--admin]\n"
	"       gatehouse keys list   --config FILE\n"
	"       gatehouse keys revoke --config FILE --id KEY_ID\n"
	"\n"
	"create  makes a key and prints its secret once, as the last line of stdout;\n"
	"        warns when another key has that name already.\n"
	"        --owner  keys of one owner share threads and memory (default: the name)\n"
	"        --policy the policy in the config the key runs under (default: \"default\")\n"
	"        --admin  the key may call admin endpoints (approvals, audit)\n"
	"list    shows every key: id, prefix, name, owner, policy, role, created, last used,\n"
	"        revoked.\n"
	"revoke  stops a key at once; its threads and memory stay with its owner.\n";

/* ---------------------------------------------------------------- keys */

/* An admin action written to the audit log by the CLI, signed when the
 * command ends if the CLI can read the signing key (gh_cli_store). */
static int audit_admin(struct gh_store *s, const char *event, const struct gh_key *k)
{
	struct gh_admin_action a = {.event = event, .via = "cli", .admin_user = "cli", .key = k};
	struct gh_err e;

	if (gh_admin_audit(s, &a, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: audit: %s\n", e.msg);
		return -1;
	}
	return 0;
}

static int keys_create(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *name = NULL, *owner = NULL, *policy = NULL;
	int admin = 0, help, rc = GH_EXIT_RUNTIME;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
			     {"--name", 1, &name, NULL},       {"--owner", 1, &owner, NULL},
			     {"--policy", 1, &policy, NULL},   {"--admin", 0, NULL, &admin},
			     {0}};
	unsigned char hk[32];
	char secret[GH_KEY_SECRET_MAX];
	struct gh_cli_named same;
	struct gh_key k;
	struct gh_store *s = NULL;
	struct gh_err e;

	if (gh_cli_parse(argc, argv, 3, opts, usage_keys, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (!name) {
		fprintf(stderr, "gatehouse: keys create needs --name NAME\n\n%s", usage_keys);
		return GH_EXIT_USAGE;
	}
	if (!gh_name_ok(name) || (owner && !gh_name_ok(owner)) || (policy && !gh_name_ok(policy))) {
		fprintf(stderr, "gatehouse: --name, --owner and --policy take 1..%d printable "
			"characters\n", GH_NAME_MAX);
		return GH_EXIT_USAGE;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK || (rc = gh_cli_check_paths(&c)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	if (policy && !gh_config_policy(c.cfg, policy)) {
		fprintf(stderr, "gatehouse: no policy \"%s\" in %s\n", policy, c.config);
		rc = GH_EXIT_USAGE;
		goto out;
	}
	if (!policy && !gh_config_policy(c.cfg, "default"))
		fprintf(stderr, "gatehouse: warning: %s has no policy named \"default\": this key "
			"may use nothing until you give it one (--policy)\n", c.config);
	if (gh_keys_load_hashkey(c.key_hash_file, 1, hk, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (!(s = gh_cli_store(&c, 0, NULL)))
		goto out;
	if (gh_cli_keys_named(s, name, &same, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (same.n)
		fprintf(stderr, "gatehouse: warning: %s named \"%s\" already: %s; the audit log "
			"and the admin UI tell keys of one name apart only by their ids (choose "
			"another --name to avoid that)\n", same.n == 1 ? "a key is" : "keys are",
			name, same.ids);
	memset(&k, 0, sizeof(k));
	gh_strlcpy(k.name, name, sizeof(k.name));
	gh_strlcpy(k.owner, owner ? owner : name, sizeof(k.owner));
	gh_strlcpy(k.policy, policy ? policy : "", sizeof(k.policy));
	k.admin = admin;
	if (gh_keys_create(s, hk, &k, secret, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (audit_admin(s, "key_created", &k) != 0) {
		/* The key exists but its creation is not in the audit log:
		 * revoke it rather than leave an unrecorded credential. */
		gh_store_key_revoke(s, k.id, &e);
		sodium_memzero(secret, sizeof(secret));
		fprintf(stderr, "gatehouse: key not created (audit log unavailable)\n");
		goto out;
	}
	printf("created key %s (%s) for owner %s, policy %s%s\n", k.id, k.name, k.owner,
	       k.policy[0] ? k.policy : "default", k.admin ? ", role admin" : "");
	printf("store this secret now; it is not shown again:\n");
	printf("%s\n", secret);
	fflush(stdout);
	sodium_memzero(secret, sizeof(secret));
	rc = GH_EXIT_OK;
out:
	sodium_memzero(hk, sizeof(hk));
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

static int print_key(void *ud, const struct gh_key *k)
{
	char created[GH_ISO8601_MAX], used[GH_ISO8601_MAX] = "-", revoked[GH_ISO8601_MAX] = "-";

	(void)ud;
	gh_iso8601(k->created_at, created, sizeof(created));
	if (k->last_used_at)
		gh_iso8601(k->last_used_at, used, sizeof(used));
	if (k->revoked_at)
		gh_iso8601(k->revoked_at, revoked, sizeof(revoked));
	printf("%-28s %-12s %-16s %-16s %-10s %-5s %-24s %-24s %s\n", k->id, k->prefix, k->name,
	       k->owner, k->policy[0] ? k->policy : "default", k->admin ? "admin" : "user",
	       created, used, revoked);
	return 0;
}

static int keys_list(int argc, char **argv)
{
	struct gh_cli c = {0};
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL}, {0}};
	struct gh_store *s;
	struct gh_err e;
	int rc;

	if ((rc = gh_cli_open(argc, argv, 3, opts, usage_keys, 1, &c, &s)) != GH_EXIT_OK || !s)
		return rc;
	printf("%-28s %-12s %-16s %-16s %-10s %-5s %-24s %-24s %s\n", "ID", "PREFIX", "NAME",
	       "OWNER", "POLICY", "ROLE", "CREATED", "LAST USED", "REVOKED");
	rc = gh_store_key_list(s, print_key, NULL, &e) == GH_OK ? GH_EXIT_OK : GH_EXIT_RUNTIME;
	if (rc)
		fprintf(stderr, "gatehouse: %s\n", e.msg);
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

static int keys_revoke(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *id = NULL;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
			     {"--id", 1, &id, NULL}, {0}};
	struct gh_store *s;
	struct gh_key k;
	struct gh_err e;
	int help, rc;

	if (gh_cli_parse(argc, argv, 3, opts, usage_keys, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (!id) {
		fprintf(stderr, "gatehouse: keys revoke needs --id KEY_ID\n\n%s", usage_keys);
		return GH_EXIT_USAGE;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK || (rc = gh_cli_check_paths(&c)) != GH_EXIT_OK) {
		gh_cli_free(&c);
		return rc;
	}
	if (!(s = gh_cli_store(&c, 0, NULL))) {
		gh_cli_free(&c);
		return GH_EXIT_RUNTIME;
	}
	rc = GH_EXIT_RUNTIME;
	if (gh_store_key_by_id(s, id, &k, &e) != GH_OK ||
	    gh_store_key_revoke(s, id, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
	} else if (audit_admin(s, "key_revoked", &k) == 0) {
		printf("revoked key %s (%s)\n", k.id, k.name);
		rc = GH_EXIT_OK;
	}
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

static int cmd_keys(int argc, char **argv)
{
	static const struct gh_cli_sub subs[] = {
		{"create", keys_create}, {"list", keys_list}, {"revoke", keys_revoke}, {NULL, NULL},
	};

	return gh_cli_dispatch(argc, argv, "keys", subs, usage_keys);
}

/* ---------------------------------------------------------------- serve */

static const char usage_serve[] =
	"usage: gatehouse serve --config FILE [--listen HOST:PORT] [--db PATH]\n"
	"\n"
	"Runs the gateway: applies migrations, then serves HTTP until SIGINT or SIGTERM.\n"
	"  --listen  overrides server.listen (port 0 picks a free port, printed at start)\n"
	"  --db      overrides database.path\n"
	"Logs go to stderr; GH_LOG=debug|info|warn|error sets the level.\n";

/* glibc keeps up to 7 freed chunks of each small size (up to 1 KB) on the
 * thread that freed them, for its next malloc of that size; past 7, a free
 * goes to the arena's bins, and the next malloc searches them (and a
 * larger one first merges what sits in the fast bins). A tool request
 * makes about 480 allocations, most of them cJSON's, freed together as
 * its trees go: with 7 a size, most took the slow way, a tenth of the
 * request's instructions. With 256 a size, a thread keeps a request's
 * worth of chunks for the next request, as a per-request pool would.
 * glibc reads the setting only from GLIBC_TUNABLES as a program starts, so
 * serve starts itself once more with it (execv of itself: same process,
 * same pid), and the second start puts the environment back as it was
 * given. GH_MALLOC=system keeps glibc's defaults and makes no second start
 * (under valgrind, say, which a second start would leave); so does a
 * glibc.malloc.tcache_count of the operator's own. */
#define TCACHE_TUNABLE "glibc.malloc.tcache_count=256"
#define MALLOC_TUNED "GH_MALLOC_TUNED"

/* GLIBC_TUNABLES as mark records it ("=VALUE", or "-" for none), and no
 * mark. */
static void tunables_restore(const char *mark)
{
	if (*mark == '=')
		setenv("GLIBC_TUNABLES", mark + 1, 1);
	else
		unsetenv("GLIBC_TUNABLES");
	unsetenv(MALLOC_TUNED);
}

static void malloc_tune(char **argv)
{
	const char *was = getenv(MALLOC_TUNED), *mode = getenv("GH_MALLOC"), *cur;
	char *val, *mark;
	size_t n;

	if (was && (*was == '=' || !strcmp(was, "-"))) { /* the second start */
		tunables_restore(was);
		return;
	}
	if (was) /* not one this function set: nothing to put back */
		unsetenv(MALLOC_TUNED);
	if (mode && !strcmp(mode, "system"))
		return;
	if (mode)
		gh_warn("GH_MALLOC=%.64s is not a setting (\"system\" keeps glibc's malloc "
			"defaults): ignored", mode);
	cur = getenv("GLIBC_TUNABLES");
	if (cur && strstr(cur, "glibc.malloc.tcache_count"))
		return;
	n = (cur ? strlen(cur) : 0) + sizeof(TCACHE_TUNABLE) + 1;
	val = malloc(n);
	mark = malloc(n);
	if (val && mark) {
		snprintf(val, n, "%s%s%s", cur ? cur : "", cur && *cur ? ":" : "", TCACHE_TUNABLE);
		snprintf(mark, n, "%s%s", cur ? "=" : "-", cur ? cur : "");
	}
	if (val && mark && setenv(MALLOC_TUNED, mark, 1) == 0 &&
	    setenv("GLIBC_TUNABLES", val, 1) == 0)
		execv("/proc/self/exe", argv);
	/* not started again: glibc's defaults, the environment as it was
	 * (mark holds it: setenv may have moved what cur pointed to) */
	gh_debug("serve: %s not applied: %s", TCACHE_TUNABLE, strerror(errno));
	if (mark)
		tunables_restore(mark);
	free(val);
	free(mark);
}

static int cmd_serve(int argc, char **argv)
{
	struct gh_cli c = {0};
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
			     {"--listen", 1, &c.listen, NULL}, {0}};
	int help, rc;

	if (gh_cli_parse(argc, argv, 2, opts, usage_serve, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	malloc_tune(argv);
	if (c.listen) {
		char host[GH_LISTEN_HOST_MAX], why[200];
		int port, v6;

		if (gh_config_listen_parse(c.listen, host, sizeof(host), &port, &v6, why,
					   sizeof(why)) != 0) {
			fprintf(stderr, "gatehouse: --listen: %s\n", why);
			return GH_EXIT_USAGE;
		}
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK) {
		gh_cli_free(&c);
		return rc;
	}
	rc = gh_cmd_serve(&c);
	gh_cli_free(&c);
	return rc;
}

int gh_cli_main(int argc, char **argv)
{
	const char *lvl = getenv("GH_LOG");

	if (lvl)
		gh_log_set_level(gh_log_level_from_name(lvl));
	if (sodium_init() < 0) {
		fprintf(stderr, "gatehouse: libsodium failed to initialise\n");
		return GH_EXIT_RUNTIME;
	}
	if (argc < 2) {
		fputs(usage_main, stderr);
		return GH_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		fputs(usage_main, stdout);
		return GH_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("gatehouse %s\n", GH_VERSION);
		return GH_EXIT_OK;
	}
	if (!strcmp(argv[1], "serve"))
		return cmd_serve(argc, argv);
	if (!strcmp(argv[1], "migrate"))
		return gh_cmd_migrate(argc, argv);
	if (!strcmp(argv[1], "keys"))
		return cmd_keys(argc, argv);
	if (!strcmp(argv[1], "audit"))
		return gh_cmd_audit(argc, argv);
	if (!strcmp(argv[1], "admin"))
		return gh_cmd_admin(argc, argv);
	if (!strcmp(argv[1], "mcp"))
		return gh_cmd_mcp(argc, argv);
	if (!strcmp(argv[1], "reload"))
		return gh_cmd_reload(argc, argv);
	if (!strcmp(argv[1], "policy"))
		return gh_cmd_policy(argc, argv);
	fprintf(stderr, "gatehouse: unknown command \"%s\"\n\n%s", argv[1], usage_main);
	return GH_EXIT_USAGE;
}
