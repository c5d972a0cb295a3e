#!/bin/sh
# A throwaway PostgreSQL server for the tests: Debian's postgresql package,
# a new cluster made by initdb in a temporary directory, owned by an
# unprivileged user (the package's "postgres" account when run as root),
# listening on a Unix socket in that directory only (no TCP), with
# password (SCRAM) authentication for the one role it creates.
#
#   tests/pg/pg_server.sh start STATE   starts it; writes STATE/url (a
#                                       postgresql:// URL with the password),
#                                       STATE/pgdata (where the cluster is)
#   tests/pg/pg_server.sh stop STATE    stops it and removes the cluster,
#                                       keeping its log in STATE/server.log
#   tests/pg/pg_server.sh restart STATE stops (when running) and starts the
#                                       same cluster
#   tests/pg/pg_server.sh halt STATE    stops the server, keeping the cluster
#                                       (an outage; restart brings it back)
#
# STATE is a directory the caller owns (created when missing). The server
# is stopped with "fast" shutdown; a cluster left behind by a killed run is
# stopped and removed by the next start into the same STATE.
#
# The server runs with fsync=off (the tests need no durability). On start,
#   GH_PG_SETTINGS  more server settings, "name=value" words separated by
#                   spaces (e.g. "fsync=on synchronous_commit=off"); they
#                   come after the defaults, so they win, and restart keeps
#                   them (the benchmarks use this)
#   GH_PG_TMP       where the cluster's directory is made (default /tmp; its
#                   socket lives there too: keep the path short)
set -eu

cmd=${1:-}
state=${2:-}
[ -n "$cmd" ] && [ -n "$state" ] || {
	sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

bindir=""
for d in /usr/lib/postgresql/*/bin; do
	[ -x "$d/initdb" ] && bindir=$d
done
[ -n "$bindir" ] || {
	echo "pg_server: no initdb under /usr/lib/postgresql/*/bin: install Debian's postgresql" >&2
	exit 1
}

# initdb and postgres refuse to run as root: run them as "postgres".
as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

stop() {
	[ -f "$state/pgdata" ] || return 0
	dir=$(cat "$state/pgdata")
	if [ -f "$dir/data/postmaster.pid" ]; then
		as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
	fi
}

start() {
	dir=$(cat "$state/pgdata")
	extra=""
	for kv in $(cat "$dir/settings" 2>/dev/null || true); do
		extra="$extra -c $kv"
	done
	as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-c listen_addresses='' -c unix_socket_directories='$dir' -p 5432 \
-c fsync=off -c max_connections=200 -c shared_buffers=64MB$extra" start >/dev/null || {
		echo "pg_server: the server did not start; its log:" >&2
		tail -20 "$dir/server.log" >&2
		exit 1
	}
}

case "$cmd" in
start)
	for kv in ${GH_PG_SETTINGS:-}; do
		# each word goes to postgres unquoted: no room for quoting
		case "$kv" in
		=* | *= | *[!A-Za-z0-9_.,=-]*) ;;
		*=*) continue ;;
		esac
		echo "pg_server: GH_PG_SETTINGS: \"$kv\" is not name=value (letters, digits" \
			"and _ . , - only)" >&2
		exit 2
	done
	mkdir -p "$state"
	if [ -f "$state/pgdata" ]; then
		stop
		rm -rf "$(cat "$state/pgdata")"
	fi
	dir=$(mktemp -d "${GH_PG_TMP:-/tmp}/gh-pg.XXXXXX")
	chmod 700 "$dir"
	[ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
	echo "$dir" >"$state/pgdata"
	echo "${GH_PG_SETTINGS:-}" >"$dir/settings"
	pw=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	printf '%s\n' "$pw" >"$dir/pw.tmp"
	[ "$(id -u)" -eq 0 ] && chown postgres: "$dir/pw.tmp"
	as_owner "$bindir/initdb" -D "$dir/data" -U gatehouse --pwfile="$dir/pw.tmp" \
		--auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
		echo "pg_server: initdb failed; its log:" >&2
		tail -20 "$dir/initdb.log" >&2
		exit 1
	}
	rm -f "$dir/pw.tmp"
	start
	PGPASSWORD=$pw "$bindir/psql" -q -h "$dir" -p 5432 -U gatehouse -d postgres \
		-c "CREATE DATABASE gatehouse_test" >/dev/null
	echo "postgresql://gatehouse:$pw@/gatehouse_test?host=$dir&port=5432" >"$state/url"
	chmod 600 "$state/url"
	;;
stop)
	stop
	if [ -f "$state/pgdata" ]; then
		cp "$(cat "$state/pgdata")/server.log" "$state/server.log" 2>/dev/null || true
		rm -rf "$(cat "$state/pgdata")"
		rm -f "$state/pgdata" "$state/url"
	fi
	;;
restart)
	stop
	start
	;;
halt)
	stop
	;;
*)
	echo "pg_server: unknown command $cmd (start, stop, restart or halt)" >&2
	exit 2
	;;
esac
