#!/usr/bin/env bash
# Sluice against NATS JetStream (file store), the same work on both in one run,
# on loopback, stores under one temporary folder. Prints a table of ratios.
#
#   scripts/bench-vs-nats.sh                 # full scale
#   N=20000 REPLAY=100000 scripts/bench-vs-nats.sh   # quick
#
# Installs nats-server v2.15.2 and the nats CLI v0.5.0 with `go install` into
# the temporary folder. On a 2-core machine the clients and the servers share
# the cores: say so beside the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-500000}              # messages per async produce run
DURABLE_N=${DURABLE_N:-50000} # messages per durable produce run
REPLAY=${REPLAY:-1000000}   # messages stored, then replayed
SENDERS=${SENDERS:-128}     # concurrent senders in the durable run

work=$(mktemp -d /tmp/sluice-vs-nats.XXXXXX)
# NB: the servers are started inside $(...) subshells, so their pids go to a
# file, not to a variable the subshell would lose.
cleanup() {
	if [ -f "$work/pids" ]; then
		while read -r p; do kill "$p" 2>/dev/null || true; done <"$work/pids"
		sleep 0.5
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$work/pids"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
bin=$work/bin
mkdir -p "$bin"

echo "== installing nats-server v2.15.2 and nats CLI v0.5.0 into $bin" >&2
GOBIN=$bin go install github.com/nats-io/nats-server/v2@v2.15.2
GOBIN=$bin go install github.com/nats-io/natscli/nats@v0.5.0
go build -o "$bin/mqbroker" ./cmd/mqbroker
go build -o "$bin/mqbench" ./cmd/mqbench

# start_nats NAME SYNC_INTERVAL: prints the client URL.
start_nats() {
	local dir=$work/$1
	mkdir -p "$dir"
	cat >"$dir/nats.conf" <<CONF
listen: 127.0.0.1:-1
jetstream { store_dir: "$dir/store", sync_interval: $2 }
CONF
	"$bin/nats-server" -c "$dir/nats.conf" >"$dir/log" 2>&1 &
	echo $! >>"$work/pids"
	for _ in $(seq 100); do
		if grep -q 'Listening for client connections' "$dir/log"; then
			echo "nats://$(grep -oE 'client connections on [0-9.:]+' "$dir/log" | awk '{print $4}')"
			return
		fi
		sleep 0.1
	done
	echo "nats-server did not start: $(cat "$dir/log")" >&2
	exit 1
}

# start_sluice NAME FLUSH: prints the nameserver address.
start_sluice() {
	local dir=$work/$1
	mkdir -p "$dir"
	SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0 SLUICE_STORE_SEGMENT_SIZE=$((256 << 20)) \
		"$bin/mqbroker" --listen 127.0.0.1:0 --store-dir "$dir/store" --flush "$2" >"$dir/out" 2>"$dir/log" &
	echo $! >>"$work/pids"
	for _ in $(seq 100); do
		if grep -q 'serving on' "$dir/out"; then
			grep -oE 'nameserver [0-9.:]+' "$dir/out" | awk '{print $2}'
			return
		fi
		sleep 0.1
	done
	echo "mqbroker did not start: $(cat "$dir/log")" >&2
	exit 1
}

nats_rate() { awk '/aggregated stats/ { agg = $0 } /msgs\/sec/ && !first { first = $0 } END { print (agg != "" ? agg : first) }' | grep -oE '[0-9,]+ msgs/sec' | head -1 | tr -d ',' | awk '{print $1}'; }
sluice_rate() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["msgs_per_sec"]))'; }

rows=()
row() { # name sluice nats
	local ratio
	ratio=$(awk -v s="$2" -v n="$3" 'BEGIN { if (n > 0) printf "%.2f", s / n; else print "n/a" }')
	rows+=("| $1 | $2 | $3 | $ratio |")
	echo "$1: sluice $2 msgs/s, nats $3 msgs/s, ratio $ratio" >&2
}

# settle: write back dirty pages and let background work end, so that a
# run does not pay for the one before it (each run writes up to 1 GB).
settle() { sync; sleep 2; }

nats_async=$(start_nats nats-async 2m)
nats_sync=$(start_nats nats-sync always)
ns_async=$(start_sluice sluice-async async)
ns_sync=$(start_sluice sluice-sync sync)

for size in 1024 128; do
	settle
	s=$("$bin/mqbench" produce -n "$ns_async" -t "async$size" --size "$size" --inflight 256 --count "$N" --json 2>/dev/null | sluice_rate)
	settle
	n=$("$bin/nats" -s "$nats_async" bench js pub async "bench.a$size" --stream "a$size" --size "$size" --msgs "$N" --batch 256 \
		--create --storage file --purge --no-progress 2>&1 | nats_rate)
	row "async produce ${size} B (pipelined, 256 in flight)" "$s" "$n"
done
settle
s=$("$bin/mqbench" produce -n "$ns_async" -t auto1024 --size 1024 --inflight 256 --auto-batch 32 --count "$N" --json 2>/dev/null | sluice_rate)
row "Sluice async 1 KiB with the producer's auto-batching (--auto-batch 32) vs NATS async 1 KiB" "$s" "$(echo "${rows[0]}" | awk -F'|' '{print $4}' | tr -d ' ')"
settle
s=$("$bin/mqbench" produce -n "$ns_async" -t batch1024 --size 1024 --batch 32 --inflight 256 --count "$N" --json 2>/dev/null | sluice_rate)
row "Sluice batch 32 × 1 KiB (8 batches in flight) vs NATS async 1 KiB" "$s" "$(echo "${rows[0]}" | awk -F'|' '{print $4}' | tr -d ' ')"

# NB: the async runs leave GBs of dirty pages; the durable runs' fsyncs
# would wait for their writeback. Both systems start the durable runs clean.
settle
s=$("$bin/mqbench" produce -n "$ns_sync" -t durable --size 1024 --sync --producers "$SENDERS" --count "$DURABLE_N" --json 2>/dev/null | sluice_rate)
settle
s1=$("$bin/mqbench" produce -n "$ns_sync" -t durable --size 1024 --sync --senders "$SENDERS" --count "$DURABLE_N" --json 2>/dev/null | sluice_rate)
settle
n=$("$bin/nats" -s "$nats_sync" bench js pub sync bench.d --stream durable --size 1024 --msgs "$DURABLE_N" --clients "$SENDERS" \
	--create --storage file --purge --no-progress 2>&1 | nats_rate)
row "durable produce 1 KiB, $SENDERS senders with a connection each (Sluice sync flush / NATS sync_interval always)" "$s" "$n"
row "durable produce 1 KiB, $SENDERS sending goroutines sharing one Sluice producer, vs the NATS row above" "$s1" "$n"

"$bin/mqbench" produce -n "$ns_async" -t replay --size 1024 --batch 32 --inflight 256 --count "$REPLAY" --json >/dev/null 2>&1
settle
s=$("$bin/mqbench" consume -n "$ns_async" -t replay -g replay --count "$REPLAY" --json 2>/dev/null | sluice_rate)
s128=$("$bin/mqbench" consume -n "$ns_async" -t replay -g replay128 --pull-batch 128 --count "$REPLAY" --json 2>/dev/null | sluice_rate)
"$bin/nats" -s "$nats_async" bench js pub async bench.r --stream replay --size 1024 --msgs "$REPLAY" --batch 256 \
	--create --storage file --purge --no-progress >/dev/null 2>&1
settle
n=$("$bin/nats" -s "$nats_async" bench js ordered --stream replay --msgs "$REPLAY" --no-progress 2>&1 | nats_rate)
row "replay of $REPLAY stored 1 KiB messages (pull batch 32, RocketMQ's default)" "$s" "$n"
row "replay of $REPLAY stored 1 KiB messages (pull batch 128)" "$s128" "$n"

e2e=$("$bin/mqbench" e2e -n "$ns_async" -t e2e -g e2e --rate 10000 --duration 10s --json 2>/dev/null)

echo
echo "Sluice vs NATS JetStream (file store), loopback, $(nproc) cores shared by clients and servers"
echo
echo "| work | Sluice msgs/s | NATS msgs/s | Sluice / NATS |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Sluice end-to-end latency at 10,000 msgs/s (send → delivery):"
echo "$e2e" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms (%d msgs)" % (r["latency_p50_ms"], r["latency_p99_ms"], r["latency_p999_ms"], r["latency_max_ms"], r["messages"]))'
