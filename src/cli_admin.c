/*
 * cli_admin.c - gatehouse admin create|list|passwd|enable|disable: accounts
 * for the admin web UI. Passwords are read from stdin (or prompted for,
 * without echo, on a terminal) and stored as Argon2id hashes (libsodium
 * crypto_pwhash_str). Every change is written to the audit log in the same
 * transaction as the change itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>

#include "admin_audit.h"
#include "admin_auth.h"
#include "cli_common.h"
#include "util.h"

#define PASSWORD_MAX GH_ADMIN_PASSWORD_MAX

static const char usage_admin[] =
	"usage: gatehouse admin create  --config FILE --user NAME   (password on stdin)\n"
	"       gatehouse admin list    --config FILE\n"
	"       gatehouse admin passwd  --config FILE --user NAME   (password on stdin)\n"
	"       gatehouse admin enable  --config FILE --user NAME\n"
	"       gatehouse admin disable --config FILE --user NAME\n"
	"\n"
	"create   makes an admin UI account. The password is read from stdin (first line),\n"
	"         or prompted for twice when stdin is a terminal; at least 10 characters.\n"
	"         Stored as an Argon2id hash.\n"
	"passwd   sets a new password (read as for create; at least 10 characters) and\n"
	"         ends the account's sessions: for a forgotten password. Signed-in admins\n"
	"         change their own under \"Change password\" in the UI.\n"
	"enable   lets a disabled account log in again.\n"
	"disable  stops the account and ends its sessions at once.\n"
	"Each change is written to the audit log (admin_created, admin_password_changed,\n"
	"admin_enabled, admin_disabled).\n";

/* Reads one line into buf without echo when stdin is a terminal. */
static int read_line(const char *prompt, char *buf, size_t cap)
{
	struct termios old, noecho;
	int tty = isatty(STDIN_FILENO);
	size_t n;

	if (tty) {
		fputs(prompt, stderr);
		fflush(stderr);
		tcgetattr(STDIN_FILENO, &old);
		noecho = old;
		noecho.c_lflag &= (tcflag_t)~ECHO;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &noecho);
	}
	if (!fgets(buf, (int)cap, stdin))
		buf[0] = '\0';
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	n = strlen(buf);
	if (n == cap - 1 && buf[n - 1] != '\n')
		return -1; /* too long */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	return 0;
}

static int valid_user(const char *s)
{
	return gh_chars_ok(s, 64, "_-.@");
}

/* The audit row of a CLI change to user's account, into ev (its strings
 * are borrowed from user and detail; the caller frees detail). */
static int cli_event(const char *event, const char *user, struct gh_audit_event *ev,
		     struct gh_buf *detail)
{
	struct gh_admin_action a = {.event = event, .via = "cli", .admin_user = "cli",
				    .reason = user, .user = user};
	struct gh_err e;

	if (gh_admin_audit_event(&a, ev, detail, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		return -1;
	}
	return 0;
}

/* A new password into pw (cap bytes): stdin's first line, or typed twice
 * on a terminal. 0 when it will do; else prints why and returns
 * GH_EXIT_USAGE. */
static int read_new_password(char *pw, char *pw2, size_t cap)
{
	size_t n;

	if (read_line("password: ", pw, cap) != 0) {
		fprintf(stderr, "gatehouse: the password is longer than %d characters\n",
			PASSWORD_MAX);
		return GH_EXIT_USAGE;
	}
	if (isatty(STDIN_FILENO) && (read_line("again: ", pw2, cap) != 0 || strcmp(pw, pw2))) {
		fprintf(stderr, "gatehouse: the passwords differ\n");
		return GH_EXIT_USAGE;
	}
	if ((n = strlen(pw)) < GH_ADMIN_PASSWORD_MIN) {
		fprintf(stderr, "gatehouse: the password needs at least %d characters (this one "
			"has %zu)\n", GH_ADMIN_PASSWORD_MIN, n);
		return GH_EXIT_USAGE;
	}
	return 0;
}

/* create and passwd (argv[2]): a password from stdin for --user. */
static int admin_set(int argc, char **argv)
{
	int create = !strcmp(argv[2], "create");
	struct gh_cli c = {0};
	const char *user = NULL;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
				{"--user", 1, &user, NULL}, {0}};
	char pw[PASSWORD_MAX + 2], pw2[PASSWORD_MAX + 2], hash[crypto_pwhash_STRBYTES];
	struct gh_audit_event ev;
	struct gh_buf detail;
	struct gh_store *s = NULL;
	struct gh_err e;
	int help, rc, ended = 0;

	memset(pw, 0, sizeof(pw));
	memset(pw2, 0, sizeof(pw2));
	memset(hash, 0, sizeof(hash));
	gh_buf_init(&detail, GH_ADMIN_DETAIL_MAX);
	if (gh_cli_parse(argc, argv, 3, opts, usage_admin, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (!user || !valid_user(user)) {
		fprintf(stderr, "gatehouse: --user NAME is required (1..64 of a-z A-Z 0-9 _ - . @)\n");
		return GH_EXIT_USAGE;
	}
	if ((rc = read_new_password(pw, pw2, sizeof(pw))) != 0)
		goto out;
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK || (rc = gh_cli_check_paths(&c)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	if (crypto_pwhash_str(hash, pw, strlen(pw), crypto_pwhash_OPSLIMIT_INTERACTIVE,
			      crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
		fprintf(stderr, "gatehouse: out of memory hashing the password\n");
		goto out;
	}
	if (cli_event(create ? "admin_created" : "admin_password_changed", user, &ev,
		      &detail) != 0 || !(s = gh_cli_store(&c, 0, NULL)))
		goto out;
	if ((create ? gh_store_admin_create(s, user, hash, &ev, &e)
		    : gh_store_admin_set_password(s, user, hash, NULL, &ev, &ended, &e)) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (create)
		printf("created admin %s\n", user);
	else
		printf("changed the password of admin %s; %d session%s ended\n", user, ended,
		       ended == 1 ? "" : "s");
	rc = GH_EXIT_OK;
out:
	sodium_memzero(pw, sizeof(pw));
	sodium_memzero(pw2, sizeof(pw2));
	sodium_memzero(hash, sizeof(hash));
	gh_buf_free(&detail);
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

static int print_user(void *ud, const struct gh_admin_user *u)
{
	char created[GH_ISO8601_MAX], login[GH_ISO8601_MAX] = "-";

	(void)ud;
	gh_iso8601(u->created_at, created, sizeof(created));
	if (u->last_login_at)
		gh_iso8601(u->last_login_at, login, sizeof(login));
	printf("%-24s %-24s %-24s %s\n", u->name, created, login,
	       u->disabled_at ? "disabled" : "active");
	return 0;
}

static int admin_list(int argc, char **argv)
{
	struct gh_cli c = {0};
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL}, {0}};
	struct gh_store *s;
	struct gh_err e;
	int rc;

	if ((rc = gh_cli_open(argc, argv, 3, opts, usage_admin, 1, &c, &s)) != GH_EXIT_OK || !s)
		return rc;
	printf("%-24s %-24s %-24s %s\n", "USER", "CREATED", "LAST LOGIN", "STATE");
	rc = gh_store_admin_list(s, print_user, NULL, &e) == GH_OK ? GH_EXIT_OK : GH_EXIT_RUNTIME;
	if (rc)
		fprintf(stderr, "gatehouse: %s\n", e.msg);
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

/* enable and disable (argv[2]) --user. */
static int admin_toggle(int argc, char **argv)
{
	int enable = !strcmp(argv[2], "enable");
	struct gh_cli c = {0};
	const char *user = NULL;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
				{"--user", 1, &user, NULL}, {0}};
	struct gh_audit_event ev;
	struct gh_buf detail;
	struct gh_store *s = NULL;
	struct gh_err e;
	int help, rc, ended = 0;

	gh_buf_init(&detail, GH_ADMIN_DETAIL_MAX);
	if (gh_cli_parse(argc, argv, 3, opts, usage_admin, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (!user) {
		fprintf(stderr, "gatehouse: --user NAME is required\n");
		return GH_EXIT_USAGE;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK || (rc = gh_cli_check_paths(&c)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	if (cli_event(enable ? "admin_enabled" : "admin_disabled", user, &ev, &detail) != 0 ||
	    !(s = gh_cli_store(&c, 0, NULL)))
		goto out;
	if ((enable ? gh_store_admin_enable(s, user, &ev, &e)
		    : gh_store_admin_disable(s, user, &ev, &ended, &e)) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (enable)
		printf("enabled admin %s; they can log in again\n", user);
	else
		printf("disabled admin %s; %d session%s ended\n", user, ended,
		       ended == 1 ? "" : "s");
	rc = GH_EXIT_OK;
out:
	gh_buf_free(&detail);
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

int gh_cmd_admin(int argc, char **argv)
{
	static const struct gh_cli_sub subs[] = {
		{"create", admin_set},     {"passwd", admin_set},
		{"list", admin_list},      {"enable", admin_toggle},
		{"disable", admin_toggle}, {NULL, NULL},
	};

	return gh_cli_dispatch(argc, argv, "admin", subs, usage_admin);
}
