#!/bin/sh
# The whole test suite, as CI runs it: installs what is missing, builds with
# ASan+UBSan and -Werror, runs every CTest label (unit, integration, browser,
# fuzz-smoke), then builds with TSan and runs the threaded tests again.
#   tests/run.sh                 everything
#   tests/run.sh -L unit         only one label (arguments go to ctest)
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

tests/install-deps.sh --test

cmake -S "$root" -B "$root/build-asan" -DGH_SANITIZE=address -DGH_WERROR=ON \
	-DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$root/build-asan" -j"$jobs"
(cd "$root/build-asan" && ctest --output-on-failure -j"$jobs" --timeout 900 "$@")

# Threaded paths under ThreadSanitizer: the store's writer and readers, the
# rate limiter, the hub, and the HTTP server under concurrent requests.
if [ $# -eq 0 ]; then
	cmake -S "$root" -B "$root/build-tsan" -DGH_SANITIZE=thread -DGH_WERROR=ON \
		-DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build "$root/build-tsan" -j"$jobs"
	(cd "$root/build-tsan" && ctest --output-on-failure -j"$jobs" --timeout 900 -L tsan)
fi
