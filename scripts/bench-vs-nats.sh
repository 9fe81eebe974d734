#!/usr/bin/env bash
# Sluice against NATS JetStream (file store), the same work on both in one run,
# on loopback, stores under one temporary folder. Prints a table of ratios.
#
#   scripts/bench-vs-nats.sh                 # full scale
#   N=20000 DURABLE_N=2000 REPLAY=100000 ROUNDS=1 scripts/bench-vs-nats.sh   # quick
#   ROWS="async batch" scripts/bench-vs-nats.sh   # some rows only (durable async
#                                                 # dedup batch replay cold e2e disk floor v5 repl)
#   PERF=1 scripts/bench-vs-nats.sh          # also the servers' system calls per
#                                            # message (perf stat, as root)
#
# Every row also gives the CPU time (user + system) per message of each
# side's servers (from /proc/PID/stat before and after the run) and of its
# client (the shell's `time`), in microseconds: on a shared 2-core machine
# CPU per message, not wall time alone, decides the produce rows.
#
# Installs nats-server v2.15.2 and the nats CLI v0.5.0 with `go install` into
# the temporary folder (or uses NATS_BIN, a folder holding both). On a 2-core
# machine the clients and the servers share the cores: say so beside the
# figures.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-500000}              # messages per async produce run
DURABLE_N=${DURABLE_N:-50000} # messages per durable produce run
REPLAY=${REPLAY:-1000000}   # messages stored, then replayed
COLD_REPLAY=${COLD_REPLAY:-$REPLAY} # messages stored, then replayed from disk (the cold row)
SENDERS=${SENDERS:-128}     # concurrent senders in the durable run
ROUNDS=${ROUNDS:-3}         # alternating rounds per row
ROWS=${ROWS:-durable async dedup batch replay cold e2e disk floor v5 repl}
V5_N=${V5_N:-$DURABLE_N}    # messages per run of the RocketMQ 5 (gRPC) rows
REPL_N=${REPL_N:-$DURABLE_N} # messages per replicated durable produce run
row() { [[ " $ROWS " == *" $1 "* ]]; }

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

if [ -n "${NATS_BIN:-}" ]; then
	cp "$NATS_BIN/nats-server" "$NATS_BIN/nats" "$bin/"
else
	echo "== installing nats-server v2.15.2 and nats CLI v0.5.0 into $bin" >&2
	GOBIN=$bin go install github.com/nats-io/nats-server/v2@v2.15.2
	GOBIN=$bin go install github.com/nats-io/natscli/nats@v0.5.0
fi
go build -o "$bin/mqbroker" ./cmd/mqbroker
go build -o "$bin/mqbench" ./cmd/mqbench
go build -o "$bin/mqadmin" ./cmd/mqadmin
go build -o "$bin/floor" ./scripts/floor

# free_ports N: prints N free TCP ports of 127.0.0.1.
free_ports() {
	python3 -c 'import socket,sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# start_nats NAME SYNC_INTERVAL [CLUSTER_CONF]: prints the client URL. The
# server's pid goes to $work/NAME.pid (see measured).
start_nats() {
	local dir=$work/$1
	mkdir -p "$dir"
	cat >"$dir/nats.conf" <<CONF
server_name: $1
listen: 127.0.0.1:-1
jetstream { store_dir: "$dir/store", sync_interval: $2 }
${3:-}
CONF
	"$bin/nats-server" -c "$dir/nats.conf" >"$dir/log" 2>&1 &
	echo $! >>"$work/pids"
	echo $! >"$work/$1.pid"
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

# start_sluice NAME FLUSH [FLAG...]: prints the nameserver address (its
# embedded one, or the -n given among the flags). The broker's pid goes to
# $work/NAME.pid (see measured).
start_sluice() {
	local name=$1 dir=$work/$1 flush=$2
	shift 2
	mkdir -p "$dir"
	SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0 SLUICE_STORE_SEGMENT_SIZE=$((256 << 20)) \
		"$bin/mqbroker" --listen "${LISTEN:-127.0.0.1:0}" --store-dir "$dir/store" --flush "$flush" --console-listen off "$@" \
		>"$dir/out" 2>"$dir/log" &
	echo $! >>"$work/pids"
	echo $! >"$work/$name.pid"
	for _ in $(seq 100); do
		if grep -q 'serving on' "$dir/out"; then
			if grep -qE 'nameserver [0-9.:]+' "$dir/out"; then
				grep -oE 'nameserver [0-9.:]+' "$dir/out" | awk '{print $2}'
			else
				echo "${NS:-}"
			fi
			return
		fi
		sleep 0.1
	done
	echo "mqbroker did not start: $(cat "$dir/log")" >&2
	exit 1
}

# broker_values NS ADDR KEY...: prints runtime values of the broker at
# ADDR, one line, space-separated, in the order of the keys.
broker_values() {
	local ns=$1 addr=$2
	shift 2
	"$bin/mqadmin" -n "$ns" --json brokerStatus -b "$addr" 2>/dev/null |
		python3 -c 'import json,sys; r = json.load(sys.stdin); print(" ".join(r.get(k, "") for k in sys.argv[1:]))' "$@"
}

# wait_replicas NS MASTER SLAVE...: waits (up to 10 minutes) until every
# slave's commit log reaches the master's end and its dispatcher has
# indexed all of it.
wait_replicas() {
	local ns=$1 master=$2 end s
	shift 2
	end=$(broker_values "$ns" "$master" commitLogMaxOffset)
	for _ in $(seq 3000); do
		local behind=0
		for s in "$@"; do
			if [ "$(broker_values "$ns" "$s" commitLogMaxOffset dispatchBehindBytes)" != "$end 0" ]; then
				behind=1
				break
			fi
		done
		if [ "$behind" = 0 ]; then return; fi
		sleep 0.2
	done
	echo "the slaves did not reach the master's end ($end) in 10 minutes" >&2
	exit 1
}

# start_floor NAME KIND: starts scripts/floor's server (durable-server or
# relay) and prints its address; its pid goes to $work/NAME.pid.
start_floor() {
	local dir=$work/$1
	mkdir -p "$dir"
	"$bin/floor" "$2" --listen 127.0.0.1:0 --dir "$dir" --prealloc $((1 << 30)) >"$dir/out" 2>"$dir/log" &
	echo $! >>"$work/pids"
	echo $! >"$work/$1.pid"
	for _ in $(seq 100); do
		if grep -q 'listening on' "$dir/out"; then
			awk '/listening on/ { print $3 }' "$dir/out"
			return
		fi
		sleep 0.1
	done
	echo "floor $2 did not start: $(cat "$dir/log")" >&2
	exit 1
}

nats_rate() { awk '/aggregated stats/ { agg = $0 } /msgs\/sec/ && !first { first = $0 } END { print (agg != "" ? agg : first) }' | grep -oE '[0-9,]+ msgs/sec' | head -1 | tr -d ',' | awk '{print $1}'; }
sluice_rate() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["msgs_per_sec"]))'; }

hz=$(getconf CLK_TCK)
# ticks PID...: the CPU time (user + system) the processes used so far, in
# clock ticks (fields 14 and 15 of /proc/PID/stat).
ticks() {
	local t=0 p
	for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
	echo "$t"
}

# The system calls counted per message with PERF=1 (perf stat on the
# syscall tracepoints; needs perf and root).
syscalls="sendmsg sendto write writev recvmsg recvfrom read readv pwrite64 pread64 fdatasync fsync epoll_wait epoll_pwait futex nanosleep"

# measured SERVERS COUNT CMD...: runs CMD (its output as it is) and writes
# to $work/cpu the CPU microseconds per message (COUNT messages) of the
# servers (the names given to start_*, comma-separated: summed) and of CMD,
# and with PERF=1 the servers' system calls per message ("-" without).
measured() {
	local servers=$1 count=$2 pids=() s b a perf_pid=
	shift 2
	for s in ${servers//,/ }; do pids+=("$(cat "$work/$s.pid")"); done
	if [ "${PERF:-0}" = 1 ]; then
		perf stat -x, -o "$work/perf" -e "$(printf 'syscalls:sys_enter_%s,' $syscalls | sed 's/,$//')" \
			-p "$(IFS=,; echo "${pids[*]}")" 2>/dev/null &
		perf_pid=$!
		sleep 0.3 # NB: perf attaches before the run starts
	fi
	b=$(ticks "${pids[@]}")
	local TIMEFORMAT='%U %S'
	{ time "$@" 2>&3; } 3>&2 2>"$work/time"
	a=$(ticks "${pids[@]}")
	local sc=-
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid"
		wait "$perf_pid" 2>/dev/null || true
		sc=$(awk -F, -v n="$count" '$3 ~ /syscalls:/ { t += $1 } END { printf "%.2f", t / n }' "$work/perf")
	fi
	awk -v b="$b" -v a="$a" -v hz="$hz" -v n="$count" -v sc="$sc" \
		'{ printf "%.1f %.1f %s\n", (a - b) / hz * 1e6 / n, ($1 + $2) * 1e6 / n, sc }' "$work/time" >"$work/cpu"
}

rows=()
# pair NAME SLUICE NATS KIND: runs the functions SLUICE and NATS (each
# given the round number, each printing msgs/s through measured) ROUNDS
# times, alternating, settling (KIND produce or replay) before each run;
# the row gives the medians and the median of the rounds' ratios with
# their range (the machine is shared: one round proves little), and the
# medians of the servers' and clients' CPU per message. The other side is
# NATS unless PAIR_OTHER names it, and the row goes to the array PAIR_ROWS
# names (rows by default).
pair() {
	local name=$1 sf=$2 nf=$3 kind=$4 ss=() nn=() rr=() scpu=() ccpu=() ncpu=() dcpu=() ssys=() nsys=() s n r
	local other=${PAIR_OTHER:-nats}
	local -n out=${PAIR_ROWS:-rows}
	for r in $(seq "$ROUNDS"); do
		# NB: who goes first alternates (Sluice in odd rounds, NATS in
		# even ones): a run right after heavy writes pays for them (see
		# settle), so the first of a round had a systematic handicap.
		if [ $((r % 2)) = 1 ]; then
			settle "$kind"
			s=$("$sf" "$r")
			read -r sc cc ss_ <"$work/cpu"
			settle "$kind"
			n=$("$nf" "$r")
			read -r nc dc ns_ <"$work/cpu"
		else
			settle "$kind"
			n=$("$nf" "$r")
			read -r nc dc ns_ <"$work/cpu"
			settle "$kind"
			s=$("$sf" "$r")
			read -r sc cc ss_ <"$work/cpu"
		fi
		ss+=("$s")
		nn+=("$n")
		scpu+=("$sc")
		ccpu+=("$cc")
		ncpu+=("$nc")
		dcpu+=("$dc")
		ssys+=("$ss_")
		nsys+=("$ns_")
		rr+=("$(awk -v s="$s" -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", s / n; else print 0 }')")
		echo "$name, round $r: sluice $s msgs/s (server $sc µs/msg, client $cc), $other $n msgs/s (server $nc µs/msg, client $dc)" >&2
	done
	local sm nm rm lo hi scm ccm ncm dcm
	sm=$(median "${ss[@]}")
	nm=$(median "${nn[@]}")
	rm=$(median "${rr[@]}")
	lo=$(printf '%s\n' "${rr[@]}" | sort -g | head -1)
	hi=$(printf '%s\n' "${rr[@]}" | sort -g | tail -1)
	scm=$(median "${scpu[@]}")
	ccm=$(median "${ccpu[@]}")
	ncm=$(median "${ncpu[@]}")
	dcm=$(median "${dcpu[@]}")
	local sys=
	if [ "${PERF:-0}" = 1 ]; then
		sys=" $(median "${ssys[@]}") / $(median "${nsys[@]}") |"
	fi
	out+=("| $name | $sm | $nm | **$rm** ($lo–$hi) | $scm / $ncm ($(awk -v s="$scm" -v n="$ncm" 'BEGIN { if (n > 0) printf "%.2f", s / n; else print "-" }')) | $ccm / $dcm |$sys")
	echo "$name: median sluice $sm, $other $nm, ratio $rm ($lo–$hi); server µs/msg $scm / $ncm, client $ccm / $dcm" >&2
	last_sluice=$sm
	last_nats=$nm
}
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# settle: write back dirty pages and let background work end, so that a
# run does not pay for the one before it (each run writes up to 1 GB).
# Before a produce run (and a cold replay) it also drops the page cache
# (when root may): on a virtual machine whose memory the host backs lazily
# (Firecracker here), a page the guest never touched costs a host fault,
# and a run that writes into such pages is several times slower. NATS's
# --purge frees its stream's pages before each run, so its runs reuse touched memory;
# Sluice's runs go to new topics and kept growing the cache, so without
# the drop each Sluice run paid for all the runs before it (measured:
# auto-batch 103k msgs/s before a drop, 138-148k after).
settle() {
	sync
	case ${1:-} in
	produce | cold) # NB: cold: the cold replay row's runs read from disk
		if [ -w /proc/sys/vm/drop_caches ]; then
			echo 3 >/proc/sys/vm/drop_caches
		fi
		;;
	esac
	sleep 2
}

nats_async=$(start_nats nats-async 2m)
nats_sync=$(start_nats nats-sync always)
# NB: only the async broker serves RocketMQ 5 clients (the v5 rows), on a
# port picked at start: the default, 8081, would go to whichever started
# first.
ns_async=$(start_sluice sluice-async async --grpc-listen 127.0.0.1:0)
grpc_async=$(grep -oE 'grpc=[0-9.:]+' "$work/sluice-async/log" | head -1 | cut -d= -f2)
ns_sync=$(start_sluice sluice-sync sync --grpc-listen off)
if row dedup; then
	ns_nodedup=$(SLUICE_DEDUP_WINDOW=0s start_sluice sluice-nodedup async --grpc-listen off)
fi

# The durable rows run first, on a quiet disk. After the async rows' GBs
# of writes the host behind this VM's disk is still writing back for a
# minute or more, past the guest's sync, and fsyncs are slower meanwhile
# (measured: Sluice durable 22k, 30k, 36k msgs/s in the three runs after
# writing 3 GB, 33-45k before); whichever system ran first after them
# paid most.
sluice_durable() {
	measured sluice-sync "$DURABLE_N" "$bin/mqbench" produce -n "$ns_sync" -t "durable-$1" --size 1024 --sync --producers "$SENDERS" \
		--count "$DURABLE_N" --json 2>/dev/null | sluice_rate
}
sluice_durable_shared() {
	measured sluice-sync "$DURABLE_N" "$bin/mqbench" produce -n "$ns_sync" -t "durable-shared-$1" --size 1024 --sync --senders "$SENDERS" \
		--count "$DURABLE_N" --json 2>/dev/null | sluice_rate
}
nats_durable() {
	measured nats-sync "$DURABLE_N" "$bin/nats" -s "$nats_sync" bench js pub sync bench.d --stream durable --size 1024 --msgs "$DURABLE_N" \
		--clients "$SENDERS" --create --storage file --purge --no-progress 2>&1 | nats_rate
}
if row durable; then
	pair "durable produce 1 KiB, $SENDERS senders with a connection each (Sluice sync flush / NATS sync_interval always)" sluice_durable nats_durable produce
	nats_durable_rate=$last_nats
	pair "durable produce 1 KiB, $SENDERS sending goroutines sharing one Sluice producer, vs NATS's $SENDERS connections" sluice_durable_shared nats_durable produce
fi

sluice_async() {
	measured sluice-async "$N" "$bin/mqbench" produce -n "$ns_async" -t "async$size-$1" --size "$size" --inflight 256 --count "$N" \
		--json 2>/dev/null | sluice_rate
}
nats_async_pub() {
	measured nats-async "$N" "$bin/nats" -s "$nats_async" bench js pub async "bench.a$size" --stream "a$size" --size "$size" --msgs "$N" \
		--batch 256 --create --storage file --purge --no-progress 2>&1 | nats_rate
}
# NB: a RocketMQ client gives every message a UNIQ_KEY, and Sluice's duplicate
# window (on by default) remembers each; NATS deduplicates only messages that
# carry a Nats-Msg-Id, which its bench sets with --dedup (window 2m).
sluice_async_nodedup() {
	measured sluice-nodedup "$N" "$bin/mqbench" produce -n "$ns_nodedup" -t "nodedup$size-$1" --size "$size" --inflight 256 --count "$N" \
		--json 2>/dev/null | sluice_rate
}
nats_async_dedup() {
	measured nats-async "$N" "$bin/nats" -s "$nats_async" bench js pub async "bench.d$size" --stream "d$size" --size "$size" --msgs "$N" \
		--batch 256 --create --storage file --purge --dedup --no-progress 2>&1 | nats_rate
}
sluice_auto() {
	measured sluice-async "$N" "$bin/mqbench" produce -n "$ns_async" -t "auto-$1" --size 1024 --inflight 256 --auto-batch 32 --count "$N" \
		--json 2>/dev/null | sluice_rate
}
sluice_batch() {
	measured sluice-async "$N" "$bin/mqbench" produce -n "$ns_async" -t "batch-$1" --size 1024 --batch 32 --inflight 256 --count "$N" \
		--json 2>/dev/null | sluice_rate
}
if row async; then
	for size in 1024 128; do
		pair "async produce $size B (pipelined, 256 in flight)" sluice_async nats_async_pub produce
	done
fi
if row dedup; then
	for size in 1024 128; do
		pair "async produce $size B, both deduplicating every message (NATS --dedup)" sluice_async nats_async_dedup produce
		pair "async produce $size B, neither deduplicating (Sluice's window off: SLUICE_DEDUP_WINDOW=0s)" sluice_async_nodedup nats_async_pub produce
	done
fi
size=1024
batch_mbps=
if row batch; then
	pair "Sluice async 1 KiB with the producer's auto-batching (--auto-batch 32) vs NATS async 1 KiB" sluice_auto nats_async_pub produce
	pair "Sluice batch 32 × 1 KiB (8 batches in flight) vs NATS async 1 KiB" sluice_batch nats_async_pub produce
	batch_mbps=$(awk -v r="$last_sluice" 'BEGIN { printf "%.0f", r * 1024 / 1e6 }')
fi

# disk_mbps: the disk's own sequential write, 1 MiB blocks with O_DIRECT
# and an fdatasync at the end, 1 GiB into the stores' folder, in MB/s.
disk_mbps() {
	dd if=/dev/zero of="$work/dd" bs=1M count=1024 oflag=direct conv=fdatasync 2>&1 |
		awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") secs = $(i - 1); printf "%.0f\n", $1 / secs / 1e6 }'
	rm -f "$work/dd"
}
disk=
if row disk; then
	dd_runs=()
	for _ in $(seq "$ROUNDS"); do
		settle produce
		dd_runs+=("$(disk_mbps)")
	done
	disk=$(median "${dd_runs[@]}")
	echo "disk: sequential write with O_DIRECT + fdatasync ${dd_runs[*]} MB/s, median $disk" >&2
fi

if row replay; then
	"$bin/mqbench" produce -n "$ns_async" -t replay --size 1024 --batch 32 --inflight 256 --count "$REPLAY" --json >/dev/null 2>&1
	"$bin/nats" -s "$nats_async" bench js pub async bench.r --stream replay --size 1024 --msgs "$REPLAY" --batch 256 \
		--create --storage file --purge --no-progress >/dev/null 2>&1
	sluice_replay() {
		measured sluice-async "$REPLAY" "$bin/mqbench" consume -n "$ns_async" -t replay -g "replay$pull-$1" --pull-batch "$pull" \
			--count "$REPLAY" --json 2>/dev/null | sluice_rate
	}
	nats_replay() {
		measured nats-async "$REPLAY" "$bin/nats" -s "$nats_async" bench js ordered --stream replay --msgs "$REPLAY" --no-progress 2>&1 | nats_rate
	}
	pull=32
	pair "replay of $REPLAY stored 1 KiB messages (pull batch 32, RocketMQ's default)" sluice_replay nats_replay replay
	pull=128
	pair "replay of $REPLAY stored 1 KiB messages (pull batch 128)" sluice_replay nats_replay replay
fi

# The cold replay row (issue 44's peak shaving, where the backlog outgrew
# memory): COLD_REPLAY stored 1 KiB messages replayed by one consumer with
# the page cache dropped before each run (settle cold), then the same
# replay warm (every store file read once before the pair), so that each
# side's cold replay reads as a share of its warm one. Needs root (a
# writable /proc/sys/vm/drop_caches); skipped, and said so, without.
# NB: nats-server keeps recently used message blocks in its own memory for
# a few seconds; settle's 2 s and the sync before the drop leave its
# replay reading the files too.
cold_note=
if row cold; then
	if [ ! -w /proc/sys/vm/drop_caches ]; then
		cold_note="cold replay row skipped: /proc/sys/vm/drop_caches is not writable (run as root to drop the page cache between runs)"
		echo "$cold_note" >&2
	else
		"$bin/mqbench" produce -n "$ns_async" -t cold-replay --size 1024 --batch 32 --inflight 256 --count "$COLD_REPLAY" --json >/dev/null 2>&1
		"$bin/nats" -s "$nats_async" bench js pub async bench.c --stream coldreplay --size 1024 --msgs "$COLD_REPLAY" --batch 256 \
			--create --storage file --purge --no-progress >/dev/null 2>&1
		sluice_cold_replay() {
			measured sluice-async "$COLD_REPLAY" "$bin/mqbench" consume -n "$ns_async" -t cold-replay -g "cold-$cold_kind-$1" \
				--pull-batch 32 --count "$COLD_REPLAY" --json 2>/dev/null | sluice_rate
		}
		nats_cold_replay() {
			measured nats-async "$COLD_REPLAY" "$bin/nats" -s "$nats_async" bench js ordered --stream coldreplay --msgs "$COLD_REPLAY" \
				--no-progress 2>&1 | nats_rate
		}
		cold_kind=cold
		pair "replay of $COLD_REPLAY stored 1 KiB messages from disk (page cache dropped before each run; pull batch 32)" \
			sluice_cold_replay nats_cold_replay cold
		cold_s=$last_sluice cold_n=$last_nats
		find "$work/sluice-async/store/commitlog" "$work/sluice-async/store/consumequeue" "$work/nats-async/store" -type f \
			-exec cat {} + >/dev/null
		cold_kind=warm
		pair "the same replay warm (its files in the page cache)" sluice_cold_replay nats_cold_replay replay
		cold_note="Replay from disk as a share of the same replay warm (medians): Sluice $(awk -v c="$cold_s" -v w="$last_sluice" 'BEGIN { printf "%.2f", c / w }'), NATS $(awk -v c="$cold_n" -v w="$last_nats" 'BEGIN { printf "%.2f", c / w }')."
	fi
fi

# The e2e row: ROUNDS runs, each after settle as every other row's. NB:
# one run, right after the replay rows' gigabytes, measured their
# write-back too (p99 9.98 ms, send to store p99 5.89, in the full run on
# ebec9f4) and, on a shared host, one 10 s sample of its noise.
# e2e_json: reads mqbench e2e's JSON report, prints p50 p99 p999 max (ms).
e2e_json() { python3 -c 'import json,sys
s = sys.stdin.read(); r = json.loads(s[s.index("{"):s.rindex("}") + 1])
print("%.2f %.2f %.2f %.2f" % (r["latency_p50_ms"], r["latency_p99_ms"], r["latency_p999_ms"], r["latency_max_ms"]))'; }
e2e_runs=()
if row e2e; then
	for r in $(seq "$ROUNDS"); do
		settle
		e2e_runs+=("$("$bin/mqbench" e2e -n "$ns_async" -t "e2e-$r" -g "e2e-$r" --rate 10000 --duration 10s --json 2>/dev/null | tr -d '\n')")
		echo "e2e, round $r: p50 p99 p999 max $(echo "${e2e_runs[-1]}" | e2e_json) ms" >&2
	done
fi

# The machine's floor (scripts/floor): the least code that does the work of
# the durable and e2e rows (frames over TCP, a file, group commit), with
# Go's standard library and no protocol. Sluice runs side by side with it,
# alternating as in pair: its figures as a share of what this machine
# allows, and the targets set against NATS measured against the floor too.
floor_rows=()
floor_note=
if row floor; then
	floor_d=$(start_floor floor-durable durable-server)
	floor_r=$(start_floor floor-relay relay)
	floor_durable() {
		measured floor-durable "$DURABLE_N" "$bin/floor" durable-client --addr "$floor_d" --conns "$SENDERS" --count "$DURABLE_N" \
			--size 1024 2>/dev/null | sluice_rate
	}
	sluice_durable_floor() { sluice_durable "floor-$1"; }
	PAIR_OTHER=floor PAIR_ROWS=floor_rows pair "durable produce 1 KiB, $SENDERS senders with a connection each (Sluice sync flush)" \
		sluice_durable_floor floor_durable produce
	if [ -n "${nats_durable_rate:-}" ]; then
		floor_note="The floor's durable rate is $(awk -v f="$last_nats" -v n="$nats_durable_rate" 'BEGIN { printf "%.1f", f / n }')x NATS's median in the durable row ($nats_durable_rate msgs/s)."
	fi
	se=() fe=()
	for r in $(seq "$ROUNDS"); do
		for who in $([ $((r % 2)) = 1 ] && echo "sluice floor" || echo "floor sluice"); do
			settle
			if [ "$who" = sluice ]; then
				se+=("$("$bin/mqbench" e2e -n "$ns_async" -t "e2e-floor-$r" -g "e2e-floor-$r" --rate 10000 --duration 10s --json 2>/dev/null | e2e_json)")
			else
				fe+=("$("$bin/floor" e2e --addr "$floor_r" --rate 10000 --duration 10s --size 1024 2>/dev/null | e2e_json)")
			fi
		done
		echo "e2e vs floor, round $r: sluice p50 p99 p999 max ${se[-1]} ms, floor ${fe[-1]} ms" >&2
	done
	# col N FIELD...: the median of field N of each.
	col() { local n=$1; shift; median $(printf '%s\n' "$@" | awk -v n="$n" '{ print $n }'); }
	for s in floor-durable floor-relay; do
		kill "$(cat "$work/$s.pid")" 2>/dev/null || true
	done
	floor_rows+=("| end to end at 10,000 msgs/s: p50 / p99 / p999 ms (medians of the rounds) | $(col 1 "${se[@]}") / $(col 2 "${se[@]}") / $(col 3 "${se[@]}") | $(col 1 "${fe[@]}") / $(col 2 "${fe[@]}") / $(col 3 "${fe[@]}") | | | |")
fi

# The RocketMQ 5 rows (mqbench --protocol v5: the gRPC protocol through its
# generated client, no SDK). Send: v5 against 4.x remoting on the same
# broker, alternating as in pair, each a message per call (as the v5 SDKs
# send) and in batches of 32; the rows go to a table of their own.
# Receive: a SimpleConsumer's loop (ReceiveMessage of up to 32, then an
# AckMessage per message, 64 acks in flight) against a NATS pull consumer
# fetching 32 at a time with explicit acks, both over V5_N stored 1 KiB
# messages, a new group or durable consumer each round.
v5_rows=()
if row v5; then
	sluice_v5_send() {
		measured sluice-async "$V5_N" "$bin/mqbench" produce --protocol v5 --grpc "$grpc_async" -n "$ns_async" -t "v5send$v5batch-$1" \
			--size 1024 --batch "$v5batch" --inflight 256 --count "$V5_N" --json 2>/dev/null | sluice_rate
	}
	sluice_4x_send() {
		measured sluice-async "$V5_N" "$bin/mqbench" produce -n "$ns_async" -t "v4send$v5batch-$1" --size 1024 --batch "$v5batch" \
			--inflight 256 --count "$V5_N" --json 2>/dev/null | sluice_rate
	}
	for v5batch in 1 32; do
		PAIR_OTHER=remoting PAIR_ROWS=v5_rows pair "send 1 KiB, 256 in flight, $v5batch per call: v5 (gRPC) / 4.x remoting" \
			sluice_v5_send sluice_4x_send produce
	done
	"$bin/mqbench" produce -n "$ns_async" -t v5recv --size 1024 --batch 32 --inflight 256 --count "$V5_N" --json >/dev/null 2>&1
	"$bin/nats" -s "$nats_async" bench js pub async bench.v5 --stream v5recv --size 1024 --msgs "$V5_N" --batch 256 \
		--create --storage file --purge --no-progress >/dev/null 2>&1
	sluice_v5_recv() {
		measured sluice-async "$V5_N" "$bin/mqbench" consume --protocol v5 --grpc "$grpc_async" -n "$ns_async" -t v5recv -g "v5recv-$1" \
			--pull-batch 32 --count "$V5_N" --json 2>/dev/null | sluice_rate
	}
	nats_pull_ack() {
		"$bin/nats" -s "$nats_async" consumer add v5recv "v5recv-$1" --pull --deliver=all --ack=explicit --defaults >/dev/null 2>&1
		measured nats-async "$V5_N" "$bin/nats" -s "$nats_async" bench js fetch --stream v5recv --consumer "v5recv-$1" --msgs "$V5_N" \
			--batch 32 --acks explicit --no-progress 2>&1 | nats_rate
	}
	pair "receive + ack of $V5_N stored 1 KiB messages: a v5 SimpleConsumer (32 a receive, an ack each) / a NATS pull consumer (fetch 32, explicit acks)" \
		sluice_v5_recv nats_pull_ack replay
fi

# The replicated rows: three Sluice brokers (a SYNC_MASTER and two slaves:
# a send is acknowledged once a slave has it) against a three-node NATS
# JetStream cluster with a stream of 3 replicas (acknowledged once a
# majority has it). Each side writes back on its own schedule (Sluice's
# async flush, NATS's default sync_interval): replication is the
# durability, as these setups are run.
if row repl; then
	for s in nats-async nats-sync sluice-async sluice-sync; do
		kill "$(cat "$work/$s.pid")" 2>/dev/null || true
	done
	read -r c0 c1 c2 b0 h0 b1 b2 < <(free_ports 7)
	routes="routes: [nats-route://127.0.0.1:$c0, nats-route://127.0.0.1:$c1, nats-route://127.0.0.1:$c2]"
	nats_r=$(start_nats nats-r0 2m "cluster { name: bench, listen: 127.0.0.1:$c0, $routes }")
	start_nats nats-r1 2m "cluster { name: bench, listen: 127.0.0.1:$c1, $routes }" >/dev/null
	start_nats nats-r2 2m "cluster { name: bench, listen: 127.0.0.1:$c2, $routes }" >/dev/null
	for _ in $(seq 300); do
		if cat "$work"/nats-r*/log | grep -q 'JetStream cluster new metadata leader\|Self is new JetStream cluster metadata leader'; then
			break
		fi
		sleep 0.1
	done
	ns_r=$(LISTEN=127.0.0.1:$b0 start_sluice sluice-r0 async --role SYNC_MASTER --ha-listen "127.0.0.1:$h0")
	LISTEN=127.0.0.1:$b1 NS=$ns_r start_sluice sluice-r1 async -n "$ns_r" --role SLAVE --broker-id 1 >/dev/null
	LISTEN=127.0.0.1:$b2 NS=$ns_r start_sluice sluice-r2 async -n "$ns_r" --role SLAVE --broker-id 2 >/dev/null
	# NB: a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until a slave is
	# connected and caught up: wait for one send to succeed.
	for _ in $(seq 100); do
		if "$bin/mqbench" produce -n "$ns_r" -t warm --size 16 --count 1 --json >/dev/null 2>&1; then break; fi
		sleep 0.2
	done
	# NB: --sync, as the durable row: each sender has one send in flight,
	# as each of nats's --clients waits for its ack (pub sync). Without it
	# each producer pipelined 256 sends (this row's figures until
	# 2026-12-03 compared those with NATS's one at a time).
	sluice_repl() {
		measured sluice-r0,sluice-r1,sluice-r2 "$REPL_N" "$bin/mqbench" produce -n "$ns_r" -t "repl-$1" --size 1024 --sync --producers "$SENDERS" \
			--count "$REPL_N" --json 2>/dev/null | sluice_rate
	}
	nats_repl() {
		measured nats-r0,nats-r1,nats-r2 "$REPL_N" "$bin/nats" -s "$nats_r" bench js pub sync bench.rd --stream repl --replicas 3 --size 1024 \
			--msgs "$REPL_N" --clients "$SENDERS" --create --storage file --purge --no-progress 2>&1 | nats_rate
	}
	pair "replicated produce 1 KiB, $SENDERS senders with a connection each (Sluice SYNC_MASTER + 2 slaves / NATS R3)" sluice_repl nats_repl produce
	"$bin/mqbench" produce -n "$ns_r" -t repl-replay --size 1024 --batch 32 --inflight 256 --count "$REPLAY" --json >/dev/null 2>&1
	"$bin/nats" -s "$nats_r" bench js pub async bench.rr --stream repl-replay --replicas 3 --size 1024 --msgs "$REPLAY" --batch 256 \
		--create --storage file --purge --no-progress >/dev/null 2>&1
	# NB: replay once both slaves hold and have indexed what the master
	# has, as NATS's replicas have theirs once its publish returns:
	# started earlier, the row measured a replay beside the slaves'
	# catch-up (1.29–4.09 in one run before 2026-12-04).
	wait_replicas "$ns_r" "127.0.0.1:$b0" "127.0.0.1:$b1" "127.0.0.1:$b2"
	sluice_repl_replay() {
		measured sluice-r0,sluice-r1,sluice-r2 "$REPLAY" "$bin/mqbench" consume -n "$ns_r" -t repl-replay -g "rr-$1" --pull-batch 32 \
			--count "$REPLAY" --json 2>/dev/null | sluice_rate
	}
	nats_repl_replay() {
		measured nats-r0,nats-r1,nats-r2 "$REPLAY" "$bin/nats" -s "$nats_r" bench js ordered --stream repl-replay --msgs "$REPLAY" \
			--no-progress 2>&1 | nats_rate
	}
	pair "replay of $REPLAY stored 1 KiB messages, replicated (pull batch 32 / NATS R3)" sluice_repl_replay nats_repl_replay replay
fi

echo
echo "Sluice vs NATS JetStream (file store), loopback, $(nproc) cores shared by clients and servers, $(date -u +%F)"
echo
echo "Medians of $ROUNDS alternating rounds (who goes first alternates too); the ratio is the median of the rounds' ratios (range)."
echo "CPU: user + system microseconds per message, the servers' (summed over a cluster's) and the clients'."
echo
if [ "${PERF:-0}" = 1 ]; then
	echo "| work | Sluice msgs/s | NATS msgs/s | Sluice / NATS | server CPU µs/msg, Sluice / NATS (ratio) | client CPU µs/msg, Sluice / NATS | server syscalls/msg, Sluice / NATS |"
	echo "|---|---|---|---|---|---|---|"
else
	echo "| work | Sluice msgs/s | NATS msgs/s | Sluice / NATS | server CPU µs/msg, Sluice / NATS (ratio) | client CPU µs/msg, Sluice / NATS |"
	echo "|---|---|---|---|---|---|"
fi
printf '%s\n' "${rows[@]}"
if [ -n "$disk" ]; then
	echo
	echo "The disk's sequential write (1 MiB blocks, O_DIRECT, fdatasync): $disk MB/s."
	if [ -n "$batch_mbps" ]; then
		echo "Batch 32 × 1 KiB produce: $batch_mbps MB/s of bodies, $(awk -v b="$batch_mbps" -v d="$disk" 'BEGIN { printf "%.2f", b / d }') of the disk's."
	fi
fi
if [ -n "$cold_note" ]; then
	echo
	echo "$cold_note"
fi
if [ ${#e2e_runs[@]} -gt 0 ]; then
	echo
	echo "Sluice end-to-end latency at 10,000 msgs/s (send → delivery), medians of ${#e2e_runs[@]} settled rounds:"
	printf '%s\n' "${e2e_runs[@]}" | python3 -c 'import json,statistics,sys
rs = [json.loads(l[l.index("{"):l.rindex("}") + 1]) for l in sys.stdin if "{" in l]
m = lambda k: statistics.median(r[k] for r in rs)
ms = lambda k: statistics.median((r.get("stages") or {}).get(k, 0) for r in rs)
print("p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms (%d msgs a round; p99 of the rounds: %s)" % (m("latency_p50_ms"), m("latency_p99_ms"), m("latency_p999_ms"), m("latency_max_ms"), m("messages"), " / ".join("%.2f" % r["latency_p99_ms"] for r in rs)))
if all(r.get("stages") for r in rs):
    print("send to store p99 %.2f ms, p999 %.2f ms; store to delivery p99 %.2f ms, p999 %.2f ms (store timestamps in ms: each part off by up to 1 ms)" % (ms("to_store_p99_ms"), ms("to_store_p999_ms"), ms("from_store_p99_ms"), ms("from_store_p999_ms")))
    print("mqbench itself: %d GC pauses, max %.2f ms; its runnable goroutines waited p99 %.2f ms, p999 %.2f ms" % (ms("client_gc_pauses"), ms("client_gc_pause_max_ms"), ms("client_sched_latency_p99_ms"), ms("client_sched_latency_p999_ms")))'
fi
if [ ${#v5_rows[@]} -gt 0 ]; then
	echo
	echo "RocketMQ 5 (gRPC) send against 4.x remoting send, one broker, alternating as above (mqbench --protocol v5):"
	echo
	echo "| work | v5 msgs/s | remoting msgs/s | v5 / remoting | server CPU µs/msg, v5 / remoting (ratio) | client CPU µs/msg, v5 / remoting |"
	echo "|---|---|---|---|---|---|"
	printf '%s\n' "${v5_rows[@]}"
fi
if [ ${#floor_rows[@]} -gt 0 ]; then
	echo
	echo "Against the machine's floor (scripts/floor: frames over TCP into a file, Go's standard library, no protocol), alternating as above:"
	echo
	if [ "${PERF:-0}" = 1 ]; then
		echo "| work | Sluice | floor | Sluice / floor | server CPU µs/msg, Sluice / floor (ratio) | client CPU µs/msg, Sluice / floor | server syscalls/msg, Sluice / floor |"
		echo "|---|---|---|---|---|---|---|"
	else
		echo "| work | Sluice | floor | Sluice / floor | server CPU µs/msg, Sluice / floor (ratio) | client CPU µs/msg, Sluice / floor |"
		echo "|---|---|---|---|---|---|"
	fi
	printf '%s\n' "${floor_rows[@]}"
	if [ -n "$floor_note" ]; then
		echo
		echo "$floor_note"
	fi
fi
