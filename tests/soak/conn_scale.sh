#!/usr/bin/env bash
# Connection scale, the long version (bench/connrate does the work):
#   1. SEQ_N sequential connect/disconnects (connrate -m serial) from one
#      client process against one listener process, in ROUNDS rounds; the
#      listener's RSS and descriptor count before, and after each round
#      (flat: nothing accumulates per connection);
#   2. IDLE_N connections established and left idle (connrate --idle, both
#      sides in one process): heap per idle connection, and the heap back
#      at its baseline after the teardown (--check).
#   tests/soak/conn_scale.sh [BUILD_DIR]          (default: build)
# Environment: SEQ_N=100000, ROUNDS=2, IDLE_N=10000, PORT=47000,
# OUT=/tmp/conn-scale-<date> (logs). Raises the descriptor limit for itself
# (IDLE_N connections hold 2 x IDLE_N sockets). Exit 0 when every run
# succeeded and the listener's descriptors came back to where they were.
set -u -o pipefail
BUILD=${1:-build}
SEQ_N=${SEQ_N:-100000}
ROUNDS=${ROUNDS:-2}
IDLE_N=${IDLE_N:-10000}
PORT=${PORT:-47000}
OUT=${OUT:-/tmp/conn-scale-$(date +%Y%m%d-%H%M%S)}
CONNRATE=$BUILD/bench/connrate
[ -x "$CONNRATE" ] || { echo "no $CONNRATE: build first (--target connrate)" >&2; exit 1; }
mkdir -p "$OUT"
want=$((2 * IDLE_N + 1024))
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then
	ulimit -Hn "$want" 2>/dev/null
fi
if ! ulimit -n "$want" 2>/dev/null; then
	# Not allowed to go past the hard limit (no CAP_SYS_RESOURCE): as many
	# idle connections as it leaves room for.
	ulimit -n "$(ulimit -Hn)"
	IDLE_N=$((($(ulimit -n) - 1024) / 2))
	echo "descriptor limit $(ulimit -n) (cannot raise it): IDLE_N=$IDLE_N"
fi
status=0
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
nfds() { ls "/proc/$1/fd" | wc -l; }

"$CONNRATE" --server -p "$PORT" --lifetime $((ROUNDS * (SEQ_N / 200 + 120))) >"$OUT/server.log" 2>&1 &
spid=$!
trap 'kill -INT $spid 2>/dev/null; wait $spid 2>/dev/null' EXIT
for _ in $(seq 100); do
	grep -q "listening on" "$OUT/server.log" && break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
grep -q "listening on" "$OUT/server.log" || { echo "the listener did not start: $OUT/server.log" >&2; exit 1; }
rss0=$(rss_kb $spid) fds0=$(nfds $spid)
echo "listener before:        RSS ${rss0} KiB, ${fds0} descriptors"
for r in $(seq "$ROUNDS"); do
	start=$(date +%s.%N)
	if ! timeout $((SEQ_N / 100 + 300)) "$CONNRATE" --client -p "$PORT" -m serial -n "$SEQ_N" \
		>"$OUT/client-$r.log" 2>&1; then
		echo "round $r: connrate --client failed: $OUT/client-$r.log"
		status=1
	fi
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	echo "listener after round $r: RSS $(rss_kb $spid) KiB, $(nfds $spid) descriptors;" \
		"$SEQ_N sequential connections in ${secs} s"
	grep -A2 '^| what' "$OUT/client-$r.log" | tail -n 1
done
[ "$(nfds $spid)" -le "$fds0" ] || { echo "the listener kept descriptors"; status=1; }
kill -INT $spid; wait $spid; trap - EXIT

if ! timeout 900 "$CONNRATE" --idle "$IDLE_N" --check --timeout 600000 >"$OUT/idle.log" 2>&1; then
	echo "connrate --idle $IDLE_N --check failed: $OUT/idle.log"
	status=1
fi
grep -i "per conn\|heap\|baseline" "$OUT/idle.log" | sed 's/^/idle: /'
exit $status
