#!/bin/sh
# gatehouse's benchmarks: builds a Release tree (no sanitizers) and runs
# every bench_* in it, printing their tables (and saving them to a file).
#
#   tests/bench/run.sh                    all of them, full size (about 75 min;
#                                         replicas 5 and pgaudit 26 of them)
#   tests/bench/run.sh --quick            smaller runs (a few minutes each)
#   tests/bench/run.sh latency policy     only these (latency, audit, policy, streams, mcp,
#                                         messages, connect, memory, replicas, pgaudit)
#
# replicas (bench_mcp --backend ...) and pgaudit (bench_audit --backend ...)
# measure the PostgreSQL backend beside SQLite in the same run: MCP tool
# calls through one gatehouse and through two replicas on one database, and
# audit ingest and the 10-million-row log (moved there by gatehouse
# migrate). They start their own server with tests/pg/pg_server.sh
# (Debian's postgresql; without it they print why and skip those rows).
#
# Environment:
#   GH_BENCH_BUILD  build directory (default: build-bench in the repository)
#   GH_BENCH_TMP    where benchmarks put their temp dirs (default /tmp); the
#                   10-million-row audit log needs about 6 GB there
#   GH_PG_TMP       where the PostgreSQL cluster goes (default /tmp); pgaudit's
#                   copy of the 10-million-row log needs about 9 GB more there
#   GH_BENCH_NICE   run the benchmarks under this nice value (e.g. -5 on a
#                   busy shared machine; needs the privilege); default: as is
#   GH_BENCH_OUT    results file (default: $GH_BENCH_BUILD/bench-results.txt)
#
# bench_latency also starts Portkey's open-source gateway (node from PATH and
# @portkey-ai/gateway from tests/node_modules: npm ci in tests/) in front of
# the same fake upstream and prints gatehouse's throughput as a multiple of
# Portkey's; without node or the package it says so and skips those rows.
#
# Benchmarks measure; they never fail a build. Numbers from a shared or
# busy machine are noisy: compare the ratios each table prints (gatehouse
# against the same work done directly, in the same run) rather than
# absolute figures across runs.
set -eu
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${GH_BENCH_BUILD:-$root/build-bench}
out=${GH_BENCH_OUT:-$build/bench-results.txt}
jobs=$(nproc 2>/dev/null || echo 2)
quick=0
which=""
for a in "$@"; do
	case "$a" in
	--quick) quick=1 ;;
	latency | audit | policy | streams | mcp | messages | connect | memory | replicas | pgaudit)
		which="$which $a"
		;;
	-h | --help)
		sed -n '2,/^set -eu$/{/^set -eu$/!p}' "$0"
		exit 0
		;;
	*)
		echo "run.sh: unknown argument $a (see --help)" >&2
		exit 2
		;;
	esac
done
[ -n "$which" ] || which="policy latency mcp streams messages connect memory audit replicas pgaudit"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGH_SANITIZE= >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null

# 1,000 streams hold about 4,000 descriptors in gatehouse and 2,000 each in
# the fake upstream and the client.
# shellcheck disable=SC3045 # dash and bash both have ulimit -n
ulimit -n 20000 2>/dev/null || true

nice_cmd=""
if [ -n "${GH_BENCH_NICE:-}" ]; then
	nice_cmd="nice -n $GH_BENCH_NICE"
fi

# Arguments per benchmark, full size or --quick.
args_for() {
	if [ "$quick" = 1 ]; then
		case "$1" in
		latency) echo "--requests 500 --reps 3 --warmup 100 --scrape" ;;
		audit) echo "--threads 1,64 --seconds 5 --reps 1 --rows 1000000 --verify-reps 2" \
			"--queries 40" ;;
		policy) echo "--iterations 50000 --reps 3" ;;
		mcp) echo "--requests 500 --reps 3 --warmup 100" ;;
		streams) echo "--streams 300 --ramp-ms 2000 --words 60 --reps 1" ;;
		messages) echo "--requests 500 --warmup 100" ;;
		connect) echo "--requests 500 --reps 3 --warmup 100" ;;
		memory) echo "--memories 1000,10000 --searches 300 --reps 3" ;;
		replicas) echo "--backend sqlite,pg1,pg2 --requests 500 --reps 3 --warmup 100" ;;
		pgaudit) echo "--backend sqlite,pg,pg-sync --threads 1,16,64 --seconds 5 --reps 1" \
			"--rows 1000000 --verify-reps 1 --queries 40" ;;
		esac
	else
		case "$1" in
		latency) echo "--requests 2000 --reps 5 --warmup 200 --scrape" ;;
		audit) echo "--threads 1,16,64,256 --seconds 10 --reps 3 --rows 10000000" \
			"--verify-reps 3 --queries 100" ;;
		policy) echo "--iterations 200000 --reps 5" ;;
		mcp) echo "--requests 2000 --reps 5 --warmup 200" ;;
		streams) echo "--streams 1000 --ramp-ms 5000 --words 150 --chunk-delay-ms 100" \
			"--reps 3" ;;
		messages) echo "--requests 2000 --warmup 200" ;;
		connect) echo "--requests 2000 --reps 5 --warmup 200" ;;
		memory) echo "--memories 1000,10000,50000 --searches 2000 --reps 5" ;;
		replicas) echo "--backend sqlite,pg1,pg2,sqlite-full,pg1-sync,pg2-sync" \
			"--requests 2000 --reps 5 --warmup 200" ;;
		pgaudit) echo "--backend sqlite,pg,pg-sync --threads 1,16,64 --seconds 10 --reps 3" \
			"--rows 10000000 --verify-reps 3 --queries 100" ;;
		esac
	fi
}

# The program each name runs.
bin_for() {
	case "$1" in
	replicas) echo bench_mcp ;;
	pgaudit) echo bench_audit ;;
	*) echo "bench_$1" ;;
	esac
}

: >"$out"
{
	echo "gatehouse benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "tree: $root; build: $build (Release)"
	echo "machine: $(nproc) CPUs," \
		"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
		"load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$out"

status=0
for b in $which; do
	args=$(args_for "$b")
	echo | tee -a "$out"
	bin=$(bin_for "$b")
	echo "### $b: $bin $args" | tee -a "$out"
	# shellcheck disable=SC2086
	(
		rc=0
		$nice_cmd "$build/tests/$bin" $args 2>&1 || rc=$?
		echo "$rc" >"$build/.bench_rc"
	) | tee -a "$out"
	[ "$(cat "$build/.bench_rc")" = 0 ] || status=1
done
echo
echo "results saved in $out"
exit $status
