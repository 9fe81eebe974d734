#!/usr/bin/env bash
# Sluice against NATS JetStream (file store), the same work on both in one run,
# on loopback, stores under one temporary folder. Prints a table of ratios.
#
#   scripts/bench-vs-nats.sh                 # full scale
#   N=20000 DURABLE_N=2000 REPLAY=100000 ROUNDS=1 scripts/bench-vs-nats.sh   # quick
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
ROUNDS=${ROUNDS:-3}         # alternating rounds per row

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
# pair NAME SLUICE NATS KIND: runs the functions SLUICE and NATS (each
# given the round number, each printing msgs/s) ROUNDS times, alternating,
# settling (KIND produce or replay) before each run; the row gives the medians and the median of the rounds'
# ratios with their range (the machine is shared: one round proves little).
pair() {
	local name=$1 sf=$2 nf=$3 kind=$4 ss=() nn=() rr=() s n r
	for r in $(seq "$ROUNDS"); do
		# NB: who goes first alternates (Sluice in odd rounds, NATS in
		# even ones): a run right after heavy writes pays for them (see
		# settle), so the first of a round had a systematic handicap.
		if [ $((r % 2)) = 1 ]; then
			settle "$kind"
			s=$("$sf" "$r")
			settle "$kind"
			n=$("$nf" "$r")
		else
			settle "$kind"
			n=$("$nf" "$r")
			settle "$kind"
			s=$("$sf" "$r")
		fi
		ss+=("$s")
		nn+=("$n")
		rr+=("$(awk -v s="$s" -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", s / n; else print 0 }')")
		echo "$name, round $r: sluice $s msgs/s, nats $n msgs/s" >&2
	done
	local sm nm rm lo hi
	sm=$(median "${ss[@]}")
	nm=$(median "${nn[@]}")
	rm=$(median "${rr[@]}")
	lo=$(printf '%s\n' "${rr[@]}" | sort -g | head -1)
	hi=$(printf '%s\n' "${rr[@]}" | sort -g | tail -1)
	rows+=("| $name | $sm | $nm | **$rm** ($lo–$hi) |")
	echo "$name: median sluice $sm, nats $nm, ratio $rm ($lo–$hi)" >&2
}
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# settle: write back dirty pages and let background work end, so that a
# run does not pay for the one before it (each run writes up to 1 GB).
# Before a produce run it also drops the page cache (when root may): on a
# virtual machine whose memory the host backs lazily (Firecracker here), a
# page the guest never touched costs a host fault, and a run that writes
# into such pages is several times slower. NATS's --purge frees its
# stream's pages before each run, so its runs reuse touched memory;
# Sluice's runs go to new topics and kept growing the cache, so without
# the drop each Sluice run paid for all the runs before it (measured:
# auto-batch 103k msgs/s before a drop, 138-148k after).
settle() {
	sync
	if [ "${1:-}" = produce ] && [ -w /proc/sys/vm/drop_caches ]; then
		echo 3 >/proc/sys/vm/drop_caches
	fi
	sleep 2
}

nats_async=$(start_nats nats-async 2m)
nats_sync=$(start_nats nats-sync always)
ns_async=$(start_sluice sluice-async async)
ns_sync=$(start_sluice sluice-sync sync)

# The durable rows run first, on a quiet disk. After the async rows' GBs
# of writes the host behind this VM's disk is still writing back for a
# minute or more, past the guest's sync, and fsyncs are slower meanwhile
# (measured: Sluice durable 22k, 30k, 36k msgs/s in the three runs after
# writing 3 GB, 33-45k before); whichever system ran first after them
# paid most.
sluice_durable() { "$bin/mqbench" produce -n "$ns_sync" -t "durable-$1" --size 1024 --sync --producers "$SENDERS" --count "$DURABLE_N" --json 2>/dev/null | sluice_rate; }
sluice_durable_shared() { "$bin/mqbench" produce -n "$ns_sync" -t "durable-shared-$1" --size 1024 --sync --senders "$SENDERS" --count "$DURABLE_N" --json 2>/dev/null | sluice_rate; }
nats_durable() {
	"$bin/nats" -s "$nats_sync" bench js pub sync bench.d --stream durable --size 1024 --msgs "$DURABLE_N" --clients "$SENDERS" \
		--create --storage file --purge --no-progress 2>&1 | nats_rate
}
pair "durable produce 1 KiB, $SENDERS senders with a connection each (Sluice sync flush / NATS sync_interval always)" sluice_durable nats_durable produce
pair "durable produce 1 KiB, $SENDERS sending goroutines sharing one Sluice producer, vs NATS's $SENDERS connections" sluice_durable_shared nats_durable produce

sluice_async() { "$bin/mqbench" produce -n "$ns_async" -t "async$size-$1" --size "$size" --inflight 256 --count "$N" --json 2>/dev/null | sluice_rate; }
nats_async_pub() {
	"$bin/nats" -s "$nats_async" bench js pub async "bench.a$size" --stream "a$size" --size "$size" --msgs "$N" --batch 256 \
		--create --storage file --purge --no-progress 2>&1 | nats_rate
}
sluice_auto() { "$bin/mqbench" produce -n "$ns_async" -t "auto-$1" --size 1024 --inflight 256 --auto-batch 32 --count "$N" --json 2>/dev/null | sluice_rate; }
sluice_batch() { "$bin/mqbench" produce -n "$ns_async" -t "batch-$1" --size 1024 --batch 32 --inflight 256 --count "$N" --json 2>/dev/null | sluice_rate; }
for size in 1024 128; do
	pair "async produce $size B (pipelined, 256 in flight)" sluice_async nats_async_pub produce
done
size=1024
pair "Sluice async 1 KiB with the producer's auto-batching (--auto-batch 32) vs NATS async 1 KiB" sluice_auto nats_async_pub produce
pair "Sluice batch 32 × 1 KiB (8 batches in flight) vs NATS async 1 KiB" sluice_batch nats_async_pub produce

"$bin/mqbench" produce -n "$ns_async" -t replay --size 1024 --batch 32 --inflight 256 --count "$REPLAY" --json >/dev/null 2>&1
"$bin/nats" -s "$nats_async" bench js pub async bench.r --stream replay --size 1024 --msgs "$REPLAY" --batch 256 \
	--create --storage file --purge --no-progress >/dev/null 2>&1
sluice_replay() { "$bin/mqbench" consume -n "$ns_async" -t replay -g "replay$pull-$1" --pull-batch "$pull" --count "$REPLAY" --json 2>/dev/null | sluice_rate; }
nats_replay() { "$bin/nats" -s "$nats_async" bench js ordered --stream replay --msgs "$REPLAY" --no-progress 2>&1 | nats_rate; }
pull=32
pair "replay of $REPLAY stored 1 KiB messages (pull batch 32, RocketMQ's default)" sluice_replay nats_replay replay
pull=128
pair "replay of $REPLAY stored 1 KiB messages (pull batch 128)" sluice_replay nats_replay replay

e2e=$("$bin/mqbench" e2e -n "$ns_async" -t e2e -g e2e --rate 10000 --duration 10s --json 2>/dev/null)

echo
echo "Sluice vs NATS JetStream (file store), loopback, $(nproc) cores shared by clients and servers"
echo
echo "Medians of $ROUNDS alternating rounds (who goes first alternates too); the ratio is the median of the rounds' ratios (range)."
echo
echo "| work | Sluice msgs/s | NATS msgs/s | Sluice / NATS |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Sluice end-to-end latency at 10,000 msgs/s (send → delivery):"
echo "$e2e" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms (%d msgs)" % (r["latency_p50_ms"], r["latency_p99_ms"], r["latency_p999_ms"], r["latency_max_ms"], r["messages"]))'
