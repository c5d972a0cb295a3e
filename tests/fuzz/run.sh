#!/bin/sh
# Coverage-guided fuzzing of every parser: builds the libFuzzer build
# (clang, -DGH_FUZZ=ON: ASan+UBSan, the core library instrumented) in
# build-fuzz/, then runs each target in tests/fuzz/fuzz_*.c in turn, one
# process at a time, each bounded by a number of executions and a time,
# and prints what each did. One target runs at a time (libFuzzer's own
# single process, no -jobs/-workers): the machine is shared.
#
#   tests/fuzz/run.sh [-r RUNS] [-t SECONDS] [-l MAX_LEN] [-c DIR] [TARGET...]
#
#   -r RUNS     executions per target            (default 1000000)
#   -t SECONDS  wall-clock bound per target      (default 600)
#   -l MAX_LEN  longest input libFuzzer makes    (default 16384)
#   -c DIR      persistent corpora, one directory per target; new inputs
#               libFuzzer finds go there, never into the repository
#               (default $GH_FUZZ_CORPUS, else ~/.cache/gatehouse-fuzz)
#   TARGET      fuzz_x or x: only these targets (default: every one)
#
# Each target starts from its persistent corpus plus the committed seeds
# in tests/fuzz/corpus/<x>/ (and tests/fuzz/<target>.dict when there is
# one). A crash, leak, timeout (an input over 10 s) or out-of-memory
# (over 2 GB) stops that target; the input is saved under
# <corpora>/artifacts/<target>/ and the script exits 1 after the table.
# Logs: <corpora>/logs/<target>.log. Runs under nice -n 10.
set -eu
cd "$(dirname "$0")/../.."
root=$(pwd)
runs=1000000
secs=600
maxlen=16384
corpora=${GH_FUZZ_CORPUS:-${XDG_CACHE_HOME:-$HOME/.cache}/gatehouse-fuzz}

usage() {
	sed -n '9,17p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
while getopts r:t:l:c:h opt; do
	case $opt in
	r) runs=$OPTARG ;;
	t) secs=$OPTARG ;;
	l) maxlen=$OPTARG ;;
	c) corpora=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
for n in "$runs" "$secs" "$maxlen"; do
	case $n in '' | *[!0-9]*) usage ;; esac
done

# Targets: every tests/fuzz/fuzz_*.c, or the ones named.
all=$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
if [ $# -gt 0 ]; then
	targets=
	for t in "$@"; do
		t=fuzz_${t#fuzz_}
		echo "$all" | grep -qx "$t" || { echo "run.sh: no target $t" >&2; exit 2; }
		targets="$targets $t"
	done
else
	targets=$all
fi

CC=${CC:-clang}
export CC
# what is being fuzzed, for the table: the date, the commit (+ when the
# worktree differs from it) and the compiler
rev=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
git diff --quiet HEAD -- src tests 2>/dev/null || rev="$rev+"
build="$(date -u +%Y-%m-%d) $rev, $("$CC" --version | head -n 1)"
cmake -S "$root" -B "$root/build-fuzz" -DGH_FUZZ=ON -DGH_WERROR=ON \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# shellcheck disable=SC2086 # one word per target
nice -n 10 cmake --build "$root/build-fuzz" -j"$(nproc 2>/dev/null || echo 2)" \
	--target $targets >/dev/null

mkdir -p "$corpora/logs"
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp

status=0
table="target	executions	exec/s	edges	features	corpus	findings"
for t in $targets; do
	seeds=$root/tests/fuzz/corpus/${t#fuzz_}
	corpus=$corpora/$t
	art=$corpora/artifacts/$t
	log=$corpora/logs/$t.log
	mkdir -p "$corpus" "$art"
	set --
	[ -d "$seeds" ] && set -- "$seeds"
	[ -f "$root/tests/fuzz/$t.dict" ] && set -- "-dict=$root/tests/fuzz/$t.dict" "$@"
	before=$(ls "$art" | wc -l)
	echo "run.sh: $t: up to $runs executions or $secs s (log: $log)" >&2
	rc=0
	# -purge_allocator_interval=-1: once the peak RSS passes half the
	# limit libFuzzer would hand ASan's free memory back to the kernel
	# every second, which (peak RSS never falls) cut fuzz_schema from
	# thousands of executions a second to tens
	nice -n 10 "$root/build-fuzz/tests/$t" -runs="$runs" -max_total_time="$secs" \
		-max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 -purge_allocator_interval=-1 \
		-print_final_stats=1 -artifact_prefix="$art/" "$corpus" "$@" \
		>"$log" 2>&1 || rc=$?
	found=$(($(ls "$art" | wc -l) - before))
	if [ "$rc" -ne 0 ] && [ "$found" -eq 0 ]; then
		found="exit $rc"
	fi
	[ "$rc" -ne 0 ] && status=1
	# the last status line: "#N DONE cov: E ft: F corp: U/Sb ... exec/s: R"
	last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -n 1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	[ -n "$execs" ] || execs=$(echo "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
	[ -n "$rate" ] || rate=$(echo "$last" | sed -n 's/.*exec\/s: \([0-9]*\).*/\1/p')
	cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
	corp=$(echo "$last" | sed -n 's/.*corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p')
	table="$table
$t	${execs:-?}	${rate:-?}	${cov:-?}	${ft:-?}	${corp:-?}	$found"
done

echo
echo "$build, RelWithDebInfo, ASan+UBSan, -max_len=$maxlen"
echo "$table" | awk -F '\t' '{ printf "%-22s %12s %8s %7s %9s %14s  %s\n", $1, $2, $3, $4, $5, $6, $7 }'
echo
echo "corpora: $corpora; findings (if any): $corpora/artifacts/<target>/"
exit $status
