#!/usr/bin/env bash
# Sluice against itself: the produce rows of bench-vs-nats.sh (async 1 KiB
# and 128 B with 256 in flight, batch 32, durable with a connection per
# sender and with 128 goroutines sharing one producer) on two builds, in
# alternated rounds, each round on fresh brokers. For "no regression" and
# "this made it faster" figures, read as ratios (the machine is shared).
#
#   scripts/bench-ab.sh BASE [HEAD]     # git revisions; HEAD defaults to the work tree
#   N=50000 DURABLE_N=5000 ROUNDS=3 scripts/bench-ab.sh e426daf
#   ROWS="durable" scripts/bench-ab.sh e426daf HEAD   # some rows only
#   A_ENV=SLUICE_DEDUP_WINDOW=0s scripts/bench-ab.sh HEAD   # one build, a config change
#                                 # (A_ENV, B_ENV: variables for that side's brokers)
#   ROWS="e2e replay32" scripts/bench-ab.sh HEAD~3   # rows not in the default set:
#                                 # e2e (p99 at E2E_RATE msgs/s for E2E_DURATION, lower
#                                 # is better) and replay32 (consume REPLAY_N stored
#                                 # messages, pull batch 32)
#   ROWS=repl scripts/bench-ab.sh HEAD~1   # replicated durable sends (one at a time
#                                 # a sender, as bench-vs-nats.sh): a SYNC_MASTER
#                                 # and two slaves, SENDERS connections, REPL_N
#                                 # messages; CPU summed over the three brokers
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:?usage: scripts/bench-ab.sh BASE [HEAD]}
head=${2:-}
N=${N:-200000}
DURABLE_N=${DURABLE_N:-100000} # NB: 20,000 (a second) measured mostly the ramp: 128 producers starting, the broker CPU a message 53 µs against 39.5 at 100,000
SENDERS=${SENDERS:-128}
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-async1k async128 batch32 durable durable-shared}
E2E_RATE=${E2E_RATE:-10000}
E2E_DURATION=${E2E_DURATION:-6s}
REPLAY_N=${REPLAY_N:-300000}
REPL_N=${REPL_N:-200000}
COLD_N=${COLD_N:-4000000}

work=$(mktemp -d /tmp/sluice-ab.XXXXXX)
cleanup() {
	if [ -f "$work/pids" ]; then
		while read -r p; do kill "$p" 2>/dev/null || true; done <"$work/pids"
		sleep 0.5
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$work/pids"
	fi
	git worktree remove --force "$work/src-a" 2>/dev/null || true
	git worktree remove --force "$work/src-b" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# build SIDE REV: builds mqbroker and mqbench of REV ("" = the work tree).
build() {
	local out=$work/$1 src=.
	mkdir -p "$out"
	if [ -n "$2" ]; then
		src=$work/src-$1
		git worktree add --detach "$src" "$2" >/dev/null 2>&1
	fi
	(cd "$src" && go build -o "$out/mqbroker" ./cmd/mqbroker && go build -o "$out/mqbench" ./cmd/mqbench)
}
echo "== building a=$base b=${head:-work tree}" >&2
build a "$base"
build b "$head"

# start SIDE FLUSH [FLAG...]: starts SIDE's broker on a fresh store,
# prints its folder and its nameserver address.
start() {
	local dir sideEnv side=$1 flush=$2
	shift 2
	dir=$(mktemp -d "$work/run.XXXX")
	sideEnv=${side^^}_ENV
	# shellcheck disable=SC2086 # NB: word splitting wanted: VAR=value ...
	env ${!sideEnv:-} SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0 SLUICE_STORE_SEGMENT_SIZE=$((256 << 20)) \
		"$work/$side/mqbroker" --listen 127.0.0.1:0 --store-dir "$dir/store" --flush "$flush" "$@" >"$dir/out" 2>"$dir/log" &
	echo $! >>"$work/pids"
	echo $! >"$dir/pid"
	for _ in $(seq 100); do
		if grep -q 'serving on' "$dir/out"; then
			echo "$dir $(grep -oE 'nameserver [0-9.:]+' "$dir/out" | awk '{print $2}')"
			return
		fi
		sleep 0.1
	done
	echo "mqbroker did not start: $(cat "$dir/log")" >&2
	exit 1
}

stop() {
	kill "$(cat "$1/pid")" 2>/dev/null || true
	while kill -0 "$(cat "$1/pid")" 2>/dev/null; do sleep 0.1; done
	rm -rf "$1/store"
}

rate() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["msgs_per_sec"]))'; }

# cpu PID: the process's user+system CPU time so far, in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run SIDE ROW: one run of a row on a fresh broker of SIDE; prints msgs/s
# (e2e: the p99 latency in ms) and the broker's CPU time per message in
# microseconds (user + system: less sensitive than throughput to what else
# the machine runs).
run() {
	local side=$1 row=$2 flush=async args n=$N pid c0 r
	case $row in
	cold)
		read -r dir ns < <(start "$side" "$flush")
		pid=$(cat "$dir/pid")
		"$work/$side/mqbench" produce -n "$ns" -t ab-cold --size 1024 --batch 32 --inflight 256 --count "$COLD_N" \
			--json >/dev/null 2>&1
		sync
		echo 3 >/proc/sys/vm/drop_caches
		c0=$(cpu "$pid")
		r=$("$work/$side/mqbench" consume -n "$ns" -t ab-cold -g ab-cold --pull-batch 32 --count "$COLD_N" \
			--json 2>/dev/null | rate)
		r="$r $(python3 -c "print(round(($(cpu "$pid") - $c0) / $(getconf CLK_TCK) / $COLD_N * 1e6, 1))")"
		local warm
		warm=$("$work/$side/mqbench" consume -n "$ns" -t ab-cold -g ab-cold-warm --pull-batch 32 --count "$COLD_N" \
			--json 2>/dev/null | rate)
		echo "$side ${r%% *} $warm" >>"$work/coldwarm"
		stop "$dir"
		sync
		echo "$r"
		return
		;;
	e2e | replay32)
		read -r dir ns < <(start "$side" "$flush")
		pid=$(cat "$dir/pid")
		if [ "$row" = replay32 ]; then
			"$work/$side/mqbench" produce -n "$ns" -t ab-replay --size 1024 --batch 32 --inflight 256 --count "$REPLAY_N" \
				--json >/dev/null 2>&1
			c0=$(cpu "$pid")
			r=$("$work/$side/mqbench" consume -n "$ns" -t ab-replay -g ab-replay --pull-batch 32 --count "$REPLAY_N" \
				--json 2>/dev/null | rate)
			n=$REPLAY_N
		else
			c0=$(cpu "$pid")
			read -r r n < <("$work/$side/mqbench" e2e -n "$ns" -t ab-e2e -g ab-e2e --rate "$E2E_RATE" --duration "$E2E_DURATION" \
				--json 2>/dev/null | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["latency_p99_ms"], j["messages"])')
		fi
		r="$r $(python3 -c "print(round(($(cpu "$pid") - $c0) / $(getconf CLK_TCK) / $n * 1e6, 1))")"
		stop "$dir"
		sync
		echo "$r"
		return
		;;
	repl)
		# A SYNC_MASTER and two slaves (async flush): a send is answered
		# once a slave has it. CPU is the three brokers'.
		local ha d1 d2 c1 p1 p2
		ha=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		read -r dir ns < <(start "$side" async --role SYNC_MASTER --ha-listen "127.0.0.1:$ha")
		read -r d1 _ < <(start "$side" async -n "$ns" --role SLAVE --broker-id 1)
		read -r d2 _ < <(start "$side" async -n "$ns" --role SLAVE --broker-id 2)
		pid=$(cat "$dir/pid") p1=$(cat "$d1/pid") p2=$(cat "$d2/pid")
		# NB: a SYNC_MASTER refuses sends until a slave has caught up.
		for _ in $(seq 100); do
			if "$work/$side/mqbench" produce -n "$ns" -t ab-repl-warm --size 16 --count 1 --json >/dev/null 2>&1; then break; fi
			sleep 0.2
		done
		c0=$(($(cpu "$pid") + $(cpu "$p1") + $(cpu "$p2")))
		r=$("$work/$side/mqbench" produce -n "$ns" -t ab-repl --size 1024 --sync --producers "$SENDERS" --count "$REPL_N" \
			--json 2>/dev/null | rate)
		c1=$(($(cpu "$pid") + $(cpu "$p1") + $(cpu "$p2")))
		r="$r $(python3 -c "print(round(($c1 - $c0) / $(getconf CLK_TCK) / $REPL_N * 1e6, 1))")"
		stop "$d2"
		stop "$d1"
		stop "$dir"
		sync
		echo "$r"
		return
		;;
	async1k) args=(--size 1024 --inflight 256 --count "$N") ;;
	async128) args=(--size 128 --inflight 256 --count "$N") ;;
	batch32) args=(--size 1024 --batch 32 --inflight 256 --count "$N") ;;
	durable) flush=sync n=$DURABLE_N args=(--size 1024 --sync --producers "$SENDERS" --count "$DURABLE_N") ;;
	durable-shared) flush=sync n=$DURABLE_N args=(--size 1024 --sync --senders "$SENDERS" --count "$DURABLE_N") ;;
	esac
	read -r dir ns < <(start "$side" "$flush")
	pid=$(cat "$dir/pid")
	c0=$(cpu "$pid")
	r=$("$work/$side/mqbench" produce -n "$ns" -t "ab-$row" "${args[@]}" --json 2>/dev/null | rate)
	r="$r $(python3 -c "print(round(($(cpu "$pid") - $c0) / $(getconf CLK_TCK) / $n * 1e6, 1))")"
	stop "$dir"
	sync
	echo "$r"
}

printf '%-16s %s\n' row "per round: a msgs/s (broker CPU us/msg) | b msgs/s (CPU) | b/a throughput (e2e: p99 ms, b/a p99)"
for row in $ROWS; do
	line=""
	for r in $(seq "$ROUNDS"); do
		# NB: who goes first alternates, so neither side always runs right
		# after the other's writes.
		# NB: $(run ...), not <(run ...): the next run starts only once
		# this one's broker has stopped and its writes are synced.
		if [ $((r % 2)) = 1 ]; then
			ra=$(run a "$row")
			rb=$(run b "$row")
		else
			rb=$(run b "$row")
			ra=$(run a "$row")
		fi
		read -r a ac <<<"$ra"
		read -r b bc <<<"$rb"
		line+=$(python3 -c "print(f' {$a} ({$ac}) | {$b} ({$bc}) | {$b/$a:.2f};')")
	done
	printf '%-16s%s\n' "$row" "$line"
done
if [ -f "$work/coldwarm" ]; then
	echo "cold replays as a share of the same side's warm one, in run order:"
	awk '{ printf "  %s: cold %d, warm %d msgs/s: %.2f\n", $1, $2, $3, $2 / $3 }' "$work/coldwarm"
fi
