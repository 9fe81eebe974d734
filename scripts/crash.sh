#!/usr/bin/env bash
# Kill -9 loop for the commitlog: the child appends in sync mode and is killed
# at a random moment; every acknowledged record must survive each reopen.
#   scripts/crash.sh [kills] [seed]
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE_CRASH_ITER=${1:-200} SLUICE_CRASH_SEED=${2:-$(date +%s)} \
	go test -count=1 -timeout 60m -run '^TestCrash_Kill9$' -v ./commitlog/ | grep -E '^(---|ok|FAIL|\s+crash_test)' 
