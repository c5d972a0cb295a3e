/*
 * pg_leader.h - one replica at a time does a piece of background work
 * (approval expiry, retention, checkpoints, resumption of runs), and
 * another takes it over when that one dies: leadership is a session-level
 * advisory lock on PostgreSQL, held by a connection kept for it alone.
 *
 * A replica that dies loses its session, and with it the lock: another
 * replica's next try (every check_ms) takes it. A leader checks its
 * connection every check_ms and stops calling itself leader as soon as it
 * finds it broken, so two replicas can both believe they lead for at most
 * about check_ms: the work done under leadership must still be safe to do
 * twice (gatehouse's is: expiry and resumption claim their rows with
 * conditional updates; retention and checkpoints run in one transaction
 * under the audit lock). Leadership saves the duplicated work; it is not
 * what keeps it correct.
 *
 * Threading: gh_pg_leader_is from any thread; start/stop from one.
 */
#ifndef GH_PG_LEADER_H
#define GH_PG_LEADER_H

#include <stdint.h>

#include "err.h"

struct gh_pg_leader;

/* Starts contending for the leadership called name (any text: it is
 * hashed into the lock's key) with its own connection to url, trying and
 * checking every check_ms (>= 10). Fails only when the first connection
 * cannot be made (GH_E_UNAVAILABLE, URL redacted).
 *
 * presence (0: none) is a second advisory lock key, this process's own:
 * the same connection holds it from start to stop (taken again at every
 * reconnection), so that other replicas can tell, from pg_locks, that
 * the work it claimed (runs, open calls) is not theirs to recover while
 * it lives. */
enum gh_code gh_pg_leader_start(const char *url, const char *name, int check_ms,
				int64_t presence, struct gh_pg_leader **out, struct gh_err *e);
/* Gives the leadership up (to another replica at its next try) and stops.
 * NULL ok. */
void gh_pg_leader_stop(struct gh_pg_leader *l);

/* 1 while this process leads. NULL: 1 (a single node leads itself). */
int gh_pg_leader_is(struct gh_pg_leader *l);

struct gh_pg_leader_stats {
	int leader;
	int backend_pid;        /* the lock-holding session's, for operators */
	uint64_t gained, lost;
};
void gh_pg_leader_stats(struct gh_pg_leader *l, struct gh_pg_leader_stats *out);

#endif
