#!/usr/bin/env bash
# Restart time after kill -9 and after a clean shutdown, by store size and
# send mode. For each size (GB) and mode (batch: 32 x 1 KiB per send;
# single: one 1 KiB message per send) it fills a fresh store with mqbench
# against a real mqbroker (async flush, embedded nameserver), kills the
# broker with SIGKILL while mqbench still sends, drops the page cache
# (root), starts the broker again and times:
#   serve: from exec to the "serving" line (recovery done, ports open);
#   pull:  from exec to the first pull answered (mqadmin consumeMessage of
#          one message from the middle of queue 0, a cold read);
# then stops it with SIGTERM, drops the cache again and times the clean
# restart the same way. The broker's "store: opened" line gives each stage.
#
#   scripts/recovery-bench.sh                 # SIZES="1 4 16" MODES="batch single"
#   SIZES=1 MODES=batch scripts/recovery-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-1 4 16}
MODES=${MODES:-batch single}
bin=$(mktemp -d)
work=$(mktemp -d -p "${TMPDIR:-/var/tmp}" sluice-recovery.XXXXXX)
broker_pid="" bench_pid=""
cleanup() {
	[ -n "$bench_pid" ] && kill -9 "$bench_pid" 2>/dev/null || true
	[ -n "$broker_pid" ] && kill -9 "$broker_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$bin" "$work"
}
trap cleanup EXIT
go build -o "$bin/" ./cmd/mqbroker ./cmd/mqbench ./cmd/mqadmin

now_ms() { date +%s%3N; }
drop_caches() {
	sync
	if [ -w /proc/sys/vm/drop_caches ]; then
		echo 3 >/proc/sys/vm/drop_caches
	else
		echo "recovery-bench: not root: the page cache is NOT dropped (figures are warm)" >&2
	fi
}

# start_broker DIR LOG: starts mqbroker on free ports, waits for its
# serving line and sets broker_pid, ns (nameserver) and serve_ms.
start_broker() {
	local dir=$1 log=$2 t0 line
	t0=$(now_ms)
	SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0 "$bin/mqbroker" --listen 127.0.0.1:0 --store-dir "$dir" \
		--flush async --console-listen off >"$log" 2>&1 &
	broker_pid=$!
	for _ in $(seq 1 6000); do
		line=$(grep -m1 'serving on' "$log" || true)
		[ -n "$line" ] && break
		kill -0 "$broker_pid" 2>/dev/null || { cat "$log" >&2; echo "recovery-bench: the broker exited" >&2; exit 1; }
		sleep 0.01
	done
	[ -n "$line" ] || { echo "recovery-bench: no serving line in 60 s" >&2; exit 1; }
	serve_ms=$(($(now_ms) - t0))
	serve_t0=$t0
	ns=$(sed -E 's/.*\(nameserver ([^,]+),.*/\1/' <<<"$line")
	addr=$(sed -E 's/.*serving on ([^ ]+) .*/\1/' <<<"$line")
}

# first_pull OFFSET: ms from the broker's exec to the first message pulled.
first_pull() {
	local half=$1
	for _ in $(seq 1 100); do
		if "$bin/mqadmin" -n "$ns" consumeMessage -t RecoveryBench -b broker-a -i 0 -o "$half" -c 1 2>/dev/null | grep -q .; then
			echo $(($(now_ms) - serve_t0))
			return
		fi
		sleep 0.05
	done
	echo "recovery-bench: no message pulled" >&2
	exit 1
}

stages() { { grep -m1 'store: opened' "$1" || true; } | { grep -oE '(took|commitlog|commitlog_scanned|from_checkpoint|dispatch|dispatch_bytes|dedup|dedup_bytes)=[^ ]+' || true; } | tr '\n' ' '; }

printf '%-6s %-7s %-8s %-9s %-8s %-8s %-9s %-8s %s\n' size mode store_GB kill9_serve kill9_pull clean_serve clean_pull ratio stages_after_kill9
for gb in $SIZES; do
	for mode in $MODES; do
		dir=$work/store-$gb-$mode
		rm -rf "$dir"
		start_broker "$dir" "$work/fill.log"
		batch=1 producers=8
		[ "$mode" = batch ] && batch=32 producers=4
		"$bin/mqbench" produce -n "$ns" -t RecoveryBench --size 1024 --batch "$batch" --producers "$producers" \
			--duration 1h >"$work/bench.log" 2>&1 &
		bench_pid=$!
		want=$((gb * 1024 * 1024 * 1024))
		while :; do
			base=$("$bin/mqadmin" -n "$ns" brokerStatus -b "$addr" 2>/dev/null | awk '/commitLogMaxOffset:/{print $2}')
			base=${base:-0}
			[ "$base" -ge "$want" ] && break
			kill -0 "$bench_pid" 2>/dev/null || { cat "$work/bench.log" >&2; echo "recovery-bench: mqbench exited" >&2; exit 1; }
			sleep 0.5
		done
		kill -9 "$broker_pid"; wait "$broker_pid" 2>/dev/null || true; broker_pid=""
		kill -9 "$bench_pid"; wait "$bench_pid" 2>/dev/null || true; bench_pid=""
		drop_caches
		start_broker "$dir" "$work/kill9.log"
		k_serve=$serve_ms
		half=1000 # NB: early in the log: a cold read once the cache is dropped
		k_pull=$(first_pull "$half")
		k_stages=$(stages "$work/kill9.log")
		kill -TERM "$broker_pid"; wait "$broker_pid" 2>/dev/null || true; broker_pid=""
		drop_caches
		start_broker "$dir" "$work/clean.log"
		c_serve=$serve_ms
		c_pull=$(first_pull "$half")
		kill -TERM "$broker_pid"; wait "$broker_pid" 2>/dev/null || true; broker_pid=""
		printf '%-6s %-7s %-8s %-9s %-8s %-8s %-9s %-8s %s\n' "$gb" "$mode" "$(awk -v b="$base" 'BEGIN{printf "%.1f", b/2^30}')" \
			"${k_serve}ms" "${k_pull}ms" "${c_serve}ms" "${c_pull}ms" "$(awk -v a="$k_serve" -v b="$c_serve" 'BEGIN{printf "%.2f", a/b}')" "$k_stages"
		{ grep -m1 'commitlog: recovered' "$work/kill9.log" || true; } | { grep -oE '(from_checkpoint|checkpoint_problem|scan_from|scanned)=("[^"]*"|[^ ]+)' || true; } |
			tr '\n' ' ' | sed 's/^/       kill9 recovery: /'
		echo
		rm -rf "$dir"
	done
done
