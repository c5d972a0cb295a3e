#!/bin/sh
# Runs a command with GH_TEST_PG_URL set to the URL of the test server that
# "tests/pg/pg_server.sh start STATE" started (STATE/url), so the store's
# unit tests (tests/unit/t_store.h) run on PostgreSQL.
#
#   tests/pg/with_pg.sh STATE COMMAND [ARG...]
set -eu

state=${1:-}
[ -n "$state" ] && [ $# -ge 2 ] || {
	sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
shift
[ -r "$state/url" ] || {
	echo "with_pg: no $state/url: is the test server started?" >&2
	exit 1
}
GH_TEST_PG_URL=$(cat "$state/url")
export GH_TEST_PG_URL
exec "$@"
