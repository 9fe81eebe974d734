#!/usr/bin/env bash
# Kill -9 loops: a child appends to the commitlog (then puts to the store) in
# sync mode and is killed at a random moment after its first acknowledgement;
# every acknowledged record must survive each reopen, and a kill that finds
# nothing acknowledged fails the run. (The store test picks its own seed.)
#   scripts/crash.sh [kills] [seed]
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-200} seed=${2:-$(date +%s)}
run() {
	SLUICE_CRASH_ITER=$kills SLUICE_CRASH_SEED=$seed \
		go test -count=1 -timeout 60m -run "$1" -v "$2" | grep -E '^(---|ok|FAIL|\s+crash_test)'
}
run '^TestCrash_Kill9$' ./commitlog/
run '^TestStoreCrash_Kill9$' ./broker/store/
