/*
 * cli_common.h - what the gatehouse commands share: exit codes, option
 * parsing, loading the config and opening the store, and the entry points
 * of the commands that live in their own files (cli.c dispatches to them).
 * Runs on the main thread.
 */
#ifndef GH_CLI_COMMON_H
#define GH_CLI_COMMON_H

#include "app.h"
#include "config.h"
#include "err.h"
#include "store.h"

struct gh_audit_cli;

enum { GH_EXIT_OK = 0, GH_EXIT_RUNTIME = 1, GH_EXIT_USAGE = 2 };

/* Options every command shares, filled by gh_cli_parse. */
struct gh_cli {
	const char *config;
	const char *db;
	const char *listen;
	struct gh_config *cfg;
	char *key_hash_file;       /* resolved paths (owned) */
	char *signing_key_file;
	char *witness_file;        /* NULL: audit.witness disabled */
	struct gh_audit_cli *signing; /* a writable store signs (audit_health.h) */
};

/* Command-line options: a flag (has_arg 0, sets *flag) or a value. */
struct gh_opt {
	const char *name;
	int has_arg;
	const char **value;
	int *flag;
};

/* Parses argv[from..] against opts (terminated by {0}); prints usage and
 * returns -1 on an unknown option, a missing value, or --help (then *help
 * is set and usage went to stdout). */
int gh_cli_parse(int argc, char **argv, int from, const struct gh_opt *opts, const char *usage,
		 int *help);

/* A subcommand (argv[2]) and what runs it: run gets the whole argv and
 * may tell its subcommands apart by argv[2]. */
struct gh_cli_sub {
	const char *name;
	int (*run)(int argc, char **argv);
};
/* Runs the subcommand of command cmd that argv[2] names, from subs (ended
 * by a NULL name). Without one: usage to stderr, GH_EXIT_USAGE; --help/-h:
 * usage to stdout, GH_EXIT_OK; an unknown one: named, with usage, to
 * stderr, GH_EXIT_USAGE. */
int gh_cli_dispatch(int argc, char **argv, const char *cmd, const struct gh_cli_sub *subs,
		    const char *usage);

/* Loads the config named by --config and resolves paths (--db wins over
 * the config). Prints the error and returns nonzero on failure. */
int gh_cli_load(struct gh_cli *c);
/* A malloc'ed "<db><suffix>" (the files kept beside the database), or
 * NULL out of memory. */
char *gh_cli_path_with(const char *db, const char *suffix);
void gh_cli_free(struct gh_cli *c);

/* Before a command that writes creates anything: checks that the database
 * (database.path or --db) and the key files can be opened or created there
 * (directories exist and are writable, files are readable and writable).
 * Prints the problem naming the option; returns GH_EXIT_OK or
 * GH_EXIT_RUNTIME. */
int gh_cli_check_paths(const struct gh_cli *c);

/* Opens the store for the CLI: readonly, or inline writes under the writer
 * lock (safe beside a running server). A writable store without s signs
 * its checkpoint at close when it may (gh_audit_cli_sign). Prints
 * errors. */
/* The store options the config's database section gives (SQLite file or
 * PostgreSQL URL, pool, timeouts); callers set the rest. */
void gh_cli_db_opts(const struct gh_config *cfg, struct gh_store_opts *o);
/* How messages name the database: its path, or its URL without the
 * password. */
void gh_cli_db_name(const struct gh_config *cfg, char *out, size_t cap);

struct gh_store *gh_cli_store(struct gh_cli *c, int readonly, const struct gh_audit_signer *s);

/* The start most commands share: parses argv[from..] against opts, loads
 * the config, checks its paths when the command writes (readonly 0), and
 * opens the store. GH_EXIT_OK with *s open; otherwise the exit code to
 * return, with c freed and *s NULL. After --help: GH_EXIT_OK and *s NULL. */
int gh_cli_open(int argc, char **argv, int from, const struct gh_opt *opts, const char *usage,
		int readonly, struct gh_cli *c, struct gh_store **s);

/* The keys (revoked ones too) whose name is name: how many, the newest
 * one's id, and their ids as "key_a, key_b (revoked)" (cut short past
 * the buffer). name is borrowed. */
struct gh_cli_named {
	const char *name;
	size_t n;
	char id[48];
	char ids[480];
};
enum gh_code gh_cli_keys_named(struct gh_store *s, const char *name, struct gh_cli_named *out,
			       struct gh_err *e);

/* 1 when process pid runs "gatehouse ... serve ...": a pid file left by a
 * server that crashed may name a process that is something else now. */
int gh_cli_is_serve(long pid);
/* The process id of the gatehouse serve running on the SQLite database db
 * (its pid file DB.pid, as serve writes it), or 0 when none is. */
long gh_cli_server_pid(const char *db);

/* serve.c */
int gh_cmd_serve(struct gh_cli *c);

/* cli_migrate.c */
int gh_cmd_migrate(int argc, char **argv);
/* cli_audit.c */
int gh_cmd_audit(int argc, char **argv);
/* What `gatehouse audit verify` prints of rep to stdout: intact or the
 * first bad row, the newest checkpoint, the witness (witness_file, may be
 * NULL) and the filter index (none on PostgreSQL: pg). */
struct gh_audit_verify;
void gh_cli_audit_verify_print(const struct gh_audit_verify *rep, const char *witness_file,
			       int pg);
/* cli_admin.c */
int gh_cmd_admin(int argc, char **argv);
/* cli_mcp.c */
int gh_cmd_mcp(int argc, char **argv);
/* gatehouse reload (cli_reload.c) */
int gh_cmd_reload(int argc, char **argv);
/* cli_policy.c */
int gh_cmd_policy(int argc, char **argv);

#endif
