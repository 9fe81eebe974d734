#!/usr/bin/env bash
# Controller-mode fault injection, many rounds: three mqcontroller, three
# mqbroker and an mqnamesrv as real processes; kill -9 of the master, kill -9
# of the controller leader and SIGSTOP of the master in turn, at random
# moments, with a producer recording every acknowledgement; then, each broker
# on a network namespace of its own (root needed), partitions of the master
# and of a slave (a third as many rounds). After each fault heals, every replica must equal the master byte for byte and hold every
# acknowledged message. Prints each round's failover times and a summary.
#
#   scripts/failover.sh [ROUNDS]      # default 100
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-100}
SLUICE_FAILOVER_ROUNDS=$rounds go test -count=1 -timeout "$((rounds * 30 + 300))s" -v -run "TestFailover_(Faults|Partitions)" ./scripts/failover/ |
	grep -E 'round [0-9]+:|faults,|^(--- |ok|FAIL)'
