/*
 * cli_admin.c - gatehouse admin create|list|disable: accounts for the admin
 * web UI. Passwords are read from stdin (or prompted for, without echo, on
 * a terminal) and stored as Argon2id hashes (libsodium crypto_pwhash_str).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>

#include "admin_audit.h"
#include "cli_common.h"
#include "util.h"

#define PASSWORD_MIN 10
#define PASSWORD_MAX 1024

static const char usage_admin[] =
	"usage: gatehouse admin create  --config FILE --user NAME   (password on stdin)\n"
	"       gatehouse admin list    --config FILE\n"
	"       gatehouse admin disable --config FILE --user NAME\n"
	"\n"
	"create   makes an admin UI account. The password is read from stdin (first line),\n"
	"         or prompted for twice when stdin is a terminal; at least 10 characters.\n"
	"         Stored as an Argon2id hash.\n"
	"disable  stops the account and ends its sessions at once.\n";

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
	size_t i, n = strlen(s);

	if (n == 0 || n > 64)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.' || c == '@'))
			return 0;
	}
	return 1;
}

static void audit_admin_action(struct gh_store *s, const char *event, const char *user)
{
	struct gh_admin_action a = {.event = event, .via = "cli", .admin_user = "cli",
				    .reason = user};
	struct gh_err e;

	if (gh_admin_audit(s, &a, &e) != GH_OK)
		fprintf(stderr, "gatehouse: audit: %s\n", e.msg);
}

static int admin_create(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *user = NULL;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
				{"--user", 1, &user, NULL}, {0}};
	char pw[PASSWORD_MAX + 2], pw2[PASSWORD_MAX + 2], hash[crypto_pwhash_STRBYTES];
	struct gh_store *s = NULL;
	struct gh_err e;
	int help, rc = GH_EXIT_RUNTIME;

	if (gh_cli_parse(argc, argv, 3, opts, usage_admin, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (!user || !valid_user(user)) {
		fprintf(stderr, "gatehouse: --user NAME is required (1..64 of a-z A-Z 0-9 _ - . @)\n");
		return GH_EXIT_USAGE;
	}
	if (read_line("password: ", pw, sizeof(pw)) != 0) {
		fprintf(stderr, "gatehouse: password longer than %d characters\n", PASSWORD_MAX);
		rc = GH_EXIT_USAGE;
		goto out;
	}
	if (isatty(STDIN_FILENO)) {
		if (read_line("again: ", pw2, sizeof(pw2)) != 0 || strcmp(pw, pw2)) {
			fprintf(stderr, "gatehouse: the passwords differ\n");
			rc = GH_EXIT_USAGE;
			goto out;
		}
	}
	if (strlen(pw) < PASSWORD_MIN) {
		fprintf(stderr, "gatehouse: the password needs at least %d characters\n",
			PASSWORD_MIN);
		rc = GH_EXIT_USAGE;
		goto out;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	if (crypto_pwhash_str(hash, pw, strlen(pw), crypto_pwhash_OPSLIMIT_INTERACTIVE,
			      crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
		fprintf(stderr, "gatehouse: out of memory hashing the password\n");
		goto out;
	}
	if (!(s = gh_cli_store(&c, 0, NULL)))
		goto out;
	if (gh_store_admin_create(s, user, hash, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	audit_admin_action(s, "admin_created", user);
	printf("created admin %s\n", user);
	rc = GH_EXIT_OK;
out:
	sodium_memzero(pw, sizeof(pw));
	sodium_memzero(pw2, sizeof(pw2));
	sodium_memzero(hash, sizeof(hash));
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
	int help, rc;

	if (gh_cli_parse(argc, argv, 3, opts, usage_admin, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK) {
		gh_cli_free(&c);
		return rc;
	}
	if (!(s = gh_cli_store(&c, 1, NULL))) {
		gh_cli_free(&c);
		return GH_EXIT_RUNTIME;
	}
	printf("%-24s %-24s %-24s %s\n", "USER", "CREATED", "LAST LOGIN", "STATE");
	rc = gh_store_admin_list(s, print_user, NULL, &e) == GH_OK ? GH_EXIT_OK : GH_EXIT_RUNTIME;
	if (rc)
		fprintf(stderr, "gatehouse: %s\n", e.msg);
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

static int admin_disable(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *user = NULL;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
				{"--user", 1, &user, NULL}, {0}};
	struct gh_store *s;
	struct gh_err e;
	int help, rc;

	if (gh_cli_parse(argc, argv, 3, opts, usage_admin, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (!user) {
		fprintf(stderr, "gatehouse: --user NAME is required\n");
		return GH_EXIT_USAGE;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK) {
		gh_cli_free(&c);
		return rc;
	}
	if (!(s = gh_cli_store(&c, 0, NULL))) {
		gh_cli_free(&c);
		return GH_EXIT_RUNTIME;
	}
	rc = GH_EXIT_RUNTIME;
	if (gh_store_admin_disable(s, user, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
	} else {
		audit_admin_action(s, "admin_disabled", user);
		printf("disabled admin %s; their sessions have ended\n", user);
		rc = GH_EXIT_OK;
	}
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

int gh_cmd_admin(int argc, char **argv)
{
	if (argc < 3 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) {
		fputs(usage_admin, argc < 3 ? stderr : stdout);
		return argc < 3 ? GH_EXIT_USAGE : GH_EXIT_OK;
	}
	if (!strcmp(argv[2], "create"))
		return admin_create(argc, argv);
	if (!strcmp(argv[2], "list"))
		return admin_list(argc, argv);
	if (!strcmp(argv[2], "disable"))
		return admin_disable(argc, argv);
	fprintf(stderr, "gatehouse: unknown admin command \"%s\"\n\n%s", argv[2], usage_admin);
	return GH_EXIT_USAGE;
}
