#!/bin/sh
# Installs what gatehouse needs on Debian 12, skipping what is already there.
#   tests/install-deps.sh          build dependencies (compiler, CMake, libraries)
#   tests/install-deps.sh --test   also what the test suite needs: python3, sqlite3,
#                                  Node.js + npm, chromium, dpkg-dev and systemd (the
#                                  .deb and its unit), prometheus (promtool checks
#                                  /metrics), postgresql (the tests start a
#                                  throwaway server), and the npm clients from
#                                  tests/package-lock.json (npm ci)
set -eu

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

pkgs="build-essential cmake pkg-config curl sqlite3 libsqlite3-dev libcivetweb-dev libcurl4-openssl-dev \
libcjson-dev libsodium-dev libpq-dev"
if [ "$want_test" -eq 1 ]; then
	pkgs="$pkgs python3 chromium dpkg-dev systemd prometheus postgresql"
	# Node.js: keep an existing installation (any vendor), else Debian's.
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		pkgs="$pkgs nodejs npm"
	fi
fi

missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
# Root (or sudo) is needed only when something is missing.
SUDO=""
if [ -n "$missing" ] && [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "install-deps: missing:$missing" >&2
		echo "install-deps: installing them needs root: run this as root or install sudo" >&2
		exit 1
	fi
fi
if [ -n "$missing" ]; then
	echo "install-deps: installing$missing"
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
	# shellcheck disable=SC2086
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

if [ "$want_test" -eq 1 ]; then
	here=$(cd "$(dirname "$0")" && pwd)
	if [ ! -d "$here/node_modules" ] || [ "$here/package-lock.json" -nt "$here/node_modules" ]; then
		echo "install-deps: npm ci (tests/package-lock.json)"
		(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
		touch "$here/node_modules"
	fi
fi
