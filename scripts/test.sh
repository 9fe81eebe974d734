#!/usr/bin/env bash
# Runs Sluice's whole test suite: formatting, vet, the race-enabled tests and a
# short fuzz smoke of every fuzz target. This is the README's test command and
# what .ci/run calls. Needs only Go (modules come from the Go module proxy).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v go >/dev/null 2>&1; then
	echo "scripts/test.sh: Go is not installed (https://go.dev/dl/)" >&2
	exit 1
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 12m ./...

# The compatibility suite is a separate module (scripts/compat, its own
# go.mod) that runs mqnamesrv and mqbroker against the official RocketMQ Go
# client. Without -race: the client itself has data races, which the race
# detector would report as failures of these tests.
echo "== compat: official RocketMQ Go client against mqnamesrv + mqbroker"
(cd scripts/compat && go vet ./... && go test -count=1 -timeout 10m ./...)

echo "== fuzz smoke (${FUZZTIME:=5s} per target)"
fuzzlog=$(mktemp)
trap 'rm -f "$fuzzlog"' EXIT
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "-- $pkg $target"
		# NB: a failure is shown and the target run once more: a crasher is
		# written to testdata/fuzz and fails the second run at once, while
		# a fuzzing engine hiccup on a loaded machine does not repeat.
		if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "$pkg" >"$fuzzlog" 2>&1; then
			tail -40 "$fuzzlog"
			echo "-- $target failed; running it once more"
			go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "$pkg" >"$fuzzlog" 2>&1 || { tail -40 "$fuzzlog"; exit 1; }
		fi
	done
done
echo "== all checks passed"
