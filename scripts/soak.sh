#!/usr/bin/env bash
# Soak test (not run in CI): a broker at a fixed send rate for a given
# duration, its resident memory, heap, goroutines, open descriptors and the
# send latency percentiles sampled into PREFIX.csv and drawn in PREFIX.png;
# exits 1 when a send failed, a message was not consumed, or a series grows
# without bound. See scripts/soak/main.go for the flags.
#
#   scripts/soak.sh -duration 2h                        # 2,000 msgs/s, a sample every 30 s
#   scripts/soak.sh -duration 3m -sample 10s -out /tmp/soak
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=soak
for ((i = 1; i <= $#; i++)); do
	if [[ ${!i} == -out ]]; then j=$((i + 1)); out=${!j}; fi
done
args=("$@")
# NB: -out relative to where the script was started, not scripts/soak.
if [[ $out != /* ]]; then
	args+=(-out "$PWD/$out")
fi
exec go -C "$root/scripts/soak" run . "${args[@]}"
