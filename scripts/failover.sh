#!/usr/bin/env bash
# Controller-mode fault injection, many rounds: three mqcontroller, three
# mqbroker and an mqnamesrv as real processes, a producer recording every
# acknowledgement; every fault kind of scripts/failover in turn at random
# moments (kill -9, SIGSTOP and SIGTERM of the master, rolling restarts,
# controller leader kills mid SyncStateSet change, hung controllers, the HA
# link cut), then, each broker on a network namespace of its own (root
# needed), partitions and link cuts (a third as many rounds), and, in one
# process, steps of the brokers' and controllers' clocks. After each
# fault heals, every replica must equal the master byte for byte and hold
# every acknowledged message. Prints each round and, per fault kind, the
# count, the failover time p50/max, the acknowledged and lost messages;
# and the RocketMQ 5 (POP) consumers' duplicates per failover, acked
# messages delivered again, FIFO order breaks and losses.
#
#   scripts/failover.sh [ROUNDS]      # default 100
#   SLUICE_FAILOVER_SEED=N SLUICE_FAILOVER_FAULT="SIGTERM master" scripts/failover.sh 20
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-100}
SLUICE_FAILOVER_ROUNDS=$rounds go test -count=1 -timeout "$((rounds * 40 + 300))s" -v -run "TestFailover_(Faults|Partitions)|TestClockSteps" ./scripts/failover/ |
	grep -E 'round [0-9]+:|summary:|seed [0-9]+|lost;|^(--- |ok|FAIL)'
