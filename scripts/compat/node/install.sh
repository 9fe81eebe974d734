#!/usr/bin/env bash
# Installs what the Node.js SDK tests (scripts/compat/v5_node_test.go) need:
# node and npm from Debian's packages when they are missing and we are root,
# then the pinned npm packages (package-lock.json; rocketmq-client-nodejs
# 1.0.8) with `npm ci` when node_modules is missing or was installed from
# another lock file. Only packages by name from the two registries, no
# install scripts. Without root and node the tests are skipped (they fail
# under CI=true). scripts/test.sh runs this before the compat stage.
set -euo pipefail
cd "$(dirname "$0")"

# aptInstall installs a Debian package as root, or says what the tests do
# without it and exits.
aptUpdated=false
aptInstall() {
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "== $1 missing: the Node.js SDK tests $([ "${CI:-}" = true ] && echo fail || echo are skipped) (apt-get install $1)"
		exit 0
	fi
	echo "== installing $1 for the Node.js SDK tests"
	aptlog=$(mktemp)
	if ! { { $aptUpdated || DEBIAN_FRONTEND=noninteractive apt-get update -qq; } &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1"; } >"$aptlog" 2>&1; then
		tail -20 "$aptlog"; rm -f "$aptlog"
		echo "scripts/compat/node/install.sh: could not install $1" >&2; exit 1
	fi
	rm -f "$aptlog"
	aptUpdated=true
}
# NB: one at a time: a nodejs that brings its own npm (NodeSource's)
# conflicts with Debian's npm package.
command -v node >/dev/null 2>&1 || aptInstall nodejs
command -v npm >/dev/null 2>&1 || aptInstall npm

# NB: node_modules/.sluice-lock is the package-lock.json it was installed
# from: a changed lock file installs again.
if ! cmp -s package-lock.json node_modules/.sluice-lock 2>/dev/null; then
	echo "== npm ci in scripts/compat/node (rocketmq-client-nodejs for the Node.js SDK tests)"
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	cp package-lock.json node_modules/.sluice-lock
fi
