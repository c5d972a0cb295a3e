/*
 * admin_audit.h - the audit row of an administrative action: an API key
 * created or revoked, an admin account created, disabled, enabled or given
 * a new password, an admin login, failed login or logout. The CLI and the
 * admin API write these rows the same way: source "admin", no duration,
 * and a detail object (canonical JSON) that always says how the action
 * came in ("via": cli, web or api). Changes to admin accounts write their
 * row in the change's own transaction (gh_admin_audit_event, then a
 * gh_store_admin_* function).
 *
 * Thread-safe: a row is built on the caller's stack and appended through
 * the store's writer.
 */
#ifndef GH_ADMIN_AUDIT_H
#define GH_ADMIN_AUDIT_H

#include "audit.h"
#include "buf.h"
#include "err.h"
#include "store.h"

/* One action; every pointer is borrowed for the call. */
struct gh_admin_action {
	const char *event;          /* key_created, key_revoked, admin_login, ... */
	const char *via;            /* "cli", "web" or "api": detail.via */
	const char *admin_user;     /* who acted: an admin user, "cli", or NULL */
	const char *outcome;        /* NULL = "ok" */
	const char *reason;         /* NULL = none */
	const struct gh_key *key;   /* the key acted on: its id and owner, and
				     * detail name, prefix, policy, role; or NULL */
	const char *by;             /* detail.by: the acting principal, or NULL */
	const char *address;        /* detail.address: the client's, or NULL */
	const char *user;           /* detail.user: the admin user named, or NULL */
};

/* a's row without appending it, for a store function that appends it in
 * the same transaction as the change it records: fills ev, whose strings
 * are borrowed from a and from detail (a buffer the caller initialised
 * with gh_buf_init(detail, GH_ADMIN_DETAIL_MAX) and frees after using ev).
 * GH_E_NOMEM on failure. */
#define GH_ADMIN_DETAIL_MAX 4096
enum gh_code gh_admin_audit_event(const struct gh_admin_action *a, struct gh_audit_event *ev,
				  struct gh_buf *detail, struct gh_err *e);

/* Appends a's row to the audit log and waits for its commit. Errors:
 * GH_E_NOMEM, or the store's (the action is then not recorded). */
enum gh_code gh_admin_audit(struct gh_store *s, const struct gh_admin_action *a,
			    struct gh_err *e);

#endif
