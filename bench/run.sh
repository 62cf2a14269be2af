#!/usr/bin/env bash
# run.sh - libndk connection establishment against the raw TCP anchor,
# measured in the same run, on the same machine, with both ends placed the
# same way. Builds nothing: build first (cmake --build build), then
#
#   bench/run.sh [BUILD_DIR]          # default BUILD_DIR: build
#
# Environment knobs:
#   DUR=5        seconds per measurement
#   REPS=3       repetitions (the table shows the median)
#   Q=64         connections in flight for the "inflight" rows
#   IDLE_N=1000  idle connections for the heap figure
#   LAYOUT=auto  twoproc: server `taskset -c 0`, client `taskset -c 1`, two
#                processes (auto picks it when there are >= 2 CPUs);
#                oneproc: client and server in one process, unpinned
#   OUT=/tmp/bench-connrate-<date>   raw outputs of every run, the summary,
#                and connrate.png (bench/plot.sh, gnuplot) beside it
#   QUIET_PCT=15 before each run, wait until the background CPU use is below
#                this % of all CPUs, at most QUIET_WAIT_ONE=8 s per run and
#                QUIET_WAIT_TOTAL=90 s in all; the highest value seen when a
#                run started is reported (on a shared machine, raise the
#                bounds rather than trust a busy run)
#
# Every run is bounded (timeout(1) around it, and the programs' own
# watchdogs); servers are stopped by their PID. Exit status: 0 when every run
# succeeded (whether or not the targets are met), 1 otherwise.
set -u -o pipefail

BUILD=${1:-build}
DUR=${DUR:-5}
REPS=${REPS:-3}
Q=${Q:-64}
IDLE_N=${IDLE_N:-1000}
LAYOUT=${LAYOUT:-auto}
OUT=${OUT:-/tmp/bench-connrate-$(date +%Y%m%d-%H%M%S)}
HERE=$(cd "$(dirname "$0")" && pwd)
CONNRATE=$BUILD/bench/connrate
# The iWARP connection over TCP is what is measured: both ends run in one
# process, which the same-host fast path (docs/shm.md) would otherwise take.
export NDK_SHM=0
TCPRATE=$BUILD/bench/tcp_connrate
FAILED=0
CUR_SPID=""

for b in "$CONNRATE" "$TCPRATE"; do
	if [ ! -x "$b" ]; then
		echo "run.sh: $b not found: build first (cmake --build $BUILD --target connrate tcp_connrate)" >&2
		exit 1
	fi
done
mkdir -p "$OUT"

cleanup() {
	if [ -n "$CUR_SPID" ]; then
		kill -INT "$CUR_SPID" 2>/dev/null
		wait "$CUR_SPID" 2>/dev/null
	fi
}
trap cleanup EXIT

# 1000 idle connections hold 2000 sockets in one process, plus epoll and
# eventfd descriptors: ask for 8192 (at most the hard limit).
NOFILE_WANT=8192
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$NOFILE_WANT" ]; then
	hard=$(ulimit -Hn)
	if [ "$hard" = unlimited ] || [ "$hard" -ge "$NOFILE_WANT" ]; then
		ulimit -n "$NOFILE_WANT"
	else
		ulimit -n "$hard"
	fi
fi

NCPU=$(nproc)
if [ "$LAYOUT" = auto ]; then
	if [ "$NCPU" -ge 2 ]; then LAYOUT=twoproc; else LAYOUT=oneproc; fi
fi
case $LAYOUT in
twoproc) PIN_S="taskset -c 0"; PIN_C="taskset -c 1"
	LAYOUT_TXT="two processes: server \`taskset -c 0\`, client \`taskset -c 1\` (the same for raw TCP and libndk)" ;;
oneproc) PIN_S=""; PIN_C=""
	LAYOUT_TXT="one process each: client and server threads (raw TCP) / two adapters with their progress threads (libndk), unpinned" ;;
*) echo "run.sh: LAYOUT must be twoproc, oneproc or auto" >&2; exit 1 ;;
esac

timewait() { ss -Htan state time-wait 2>/dev/null | wc -l; }

# Background CPU use in % of all CPUs over 0.5 s, from /proc/stat. Pinned
# processes cannot move away from a busy CPU, so a busy machine shows up
# directly in the serial numbers.
QUIET_PCT=${QUIET_PCT:-15}
QUIET_WAIT_ONE=${QUIET_WAIT_ONE:-8}
QUIET_WAIT_TOTAL=${QUIET_WAIT_TOTAL:-90}
QUIET_WAITED=0
BG_MAX=0
# shellcheck source=bench/cpu_busy.sh
. "$HERE/cpu_busy.sh"
# shellcheck source=bench/wait_listening.sh
. "$HERE/wait_listening.sh"
# Sets BG; waits while the machine is busy, bounded per run and in total.
wait_quiet() {
	local waited=0
	BG=$(cpu_busy_pct)
	while [ "$BG" -gt "$QUIET_PCT" ] && [ "$waited" -lt "$QUIET_WAIT_ONE" ] &&
	      [ "$QUIET_WAITED" -lt "$QUIET_WAIT_TOTAL" ]; do
		sleep 1
		waited=$((waited + 2)); QUIET_WAITED=$((QUIET_WAITED + 2))
		BG=$(cpu_busy_pct)
	done
	[ "$BG" -gt "$BG_MAX" ] && BG_MAX=$BG
}

# A server port below the kernel's ephemeral range (32768-) and libndk's
# (49152-), and a fresh one for every run: no TIME_WAIT 4-tuple of an
# earlier run can collide with the new connections.
NEXT_PORT=31000
port_free() { [ -z "$(ss -Htan "( sport = :$1 or dport = :$1 )" 2>/dev/null)" ]; }
# Sets PORT (not echoed: a command substitution's subshell would lose
# NEXT_PORT).
pick_port() {
	PORT=$NEXT_PORT
	while ! port_free "$PORT"; do PORT=$((PORT + 1)); done
	NEXT_PORT=$((PORT + 1))
}

# field KEY FILE: the value of KEY=... on the RESULT line of FILE
field() { sed -n "s/^RESULT .*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" "$2" | tail -1; }

median() { printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }

CMDS=()

# run_one PROG NAME EXTRA_ARGS... ; sets LAST_LOG and returns the client's status.
# In the two-process layout the server is started first, the client once
# the server says it listens (at most 5 s).
run_one() {
	local bin=$1 name=$2; shift 2
	local log="$OUT/$name.log" rc srv_rc=0
	local tmo=$(awk -v d="$DUR" 'BEGIN { printf "%d", d + 60 }')
	wait_quiet
	echo "# TIME_WAIT sockets before: $(timewait); background CPU busy: ${BG}%" > "$log"
	if [ "$LAYOUT" = twoproc ]; then
		local port
		pick_port
		port=$PORT
		local scmd="$PIN_S $bin --server -p $port --lifetime $tmo"
		local ccmd="$PIN_C $bin --client -p $port $*"
		CMDS+=("$name: server: $scmd" "$name: client: $ccmd")
		echo "# server: $scmd" >> "$log"
		echo "# client: $ccmd" >> "$log"
		timeout $((tmo + 5)) $scmd > "$log.server" 2>&1 &
		CUR_SPID=$!
		wait_listening "$log.server" "$CUR_SPID"
		timeout "$tmo" $ccmd >> "$log" 2>&1
		rc=$?
		kill -INT "$CUR_SPID" 2>/dev/null
		wait "$CUR_SPID"
		srv_rc=$?
		CUR_SPID=""
		cat "$log.server" >> "$log"
		[ "$srv_rc" -eq 0 ] || echo "# server exit status $srv_rc" >> "$log"
	else
		local ccmd="$bin $*"
		CMDS+=("$name: $ccmd")
		echo "# cmd: $ccmd" >> "$log"
		timeout "$tmo" $ccmd >> "$log" 2>&1
		rc=$?
	fi
	LAST_LOG=$log
	if [ "$rc" -eq 0 ] && [ "$srv_rc" -ne 0 ]; then rc=$srv_rc; fi
	return "$rc"
}

# measure PROG NAME ARGS...: one repetition; on local port exhaustion
# (exit status 3) says so and retries once with half the duration.
measure() {
	local bin=$1 name=$2; shift 2
	local d=$DUR rc
	run_one "$bin" "$name" -D "$d" "$@"
	rc=$?
	if [ "$rc" -eq 3 ]; then
		d=$(awk -v d="$DUR" 'BEGIN { x = d / 2; if (x < 1) x = 1; print x }')
		echo "  PORT EXHAUSTION in $name (TIME_WAIT sockets: $(timewait)): retrying with -D $d" >&2
		echo "PORT EXHAUSTION in $name; retried with -D $d" >> "$OUT/notes.txt"
		run_one "$bin" "$name.retry" -D "$d" "$@"
		rc=$?
	fi
	if [ "$rc" -ne 0 ]; then
		echo "  FAILED: $name (exit status $rc), see $LAST_LOG" >&2
		grep -h 'FAILED\|EXHAUSTION' "$LAST_LOG" >&2
		echo "FAILED: $name (exit status $rc), see $LAST_LOG" >> "$OUT/notes.txt"
		FAILED=1
	fi
	return "$rc"
}

echo "run.sh: $REPS x ${DUR}s per measurement, layout: $LAYOUT; raw logs in $OUT" >&2
declare -A RATE P50 P99 B50 B99
for rep in $(seq "$REPS"); do
	# Anchor and libndk alternate inside every repetition, so a slow spell
	# of the machine hits both alike.
	for m in serial inflight; do
		qa=""; [ "$m" = inflight ] && qa="-q $Q"
		echo "  rep $rep: tcp_connrate $m" >&2
		if measure "$TCPRATE" "tcp-$m-$rep" -m $m $qa; then
			RATE[tcp-$m]+=" $(field rate "$LAST_LOG")"
			P50[tcp-$m]+=" $(field rt_p50_us "$LAST_LOG")"
			P99[tcp-$m]+=" $(field rt_p99_us "$LAST_LOG")"
		fi
		echo "  rep $rep: connrate $m" >&2
		if measure "$CONNRATE" "ndk-$m-$rep" -m $m $qa; then
			RATE[ndk-$m]+=" $(field rate "$LAST_LOG")"
			P50[ndk-$m]+=" $(field est_p50_us "$LAST_LOG")"
			P99[ndk-$m]+=" $(field est_p99_us "$LAST_LOG")"
			B50[ndk-$m]+=" $(field both_p50_us "$LAST_LOG")"
			B99[ndk-$m]+=" $(field both_p99_us "$LAST_LOG")"
		fi
	done
done

# For information only (not the ratio's base): the anchor with plain
# connect(), where the kernel searches its ephemeral range for a port whose
# 4-tuple is free, a search that grows with every TIME_WAIT socket the churn
# leaves behind. libndk binds a random port itself (NDKPI reserves the local
# endpoint), and so does the anchor above.
for m in serial inflight; do
	qa=""; [ "$m" = inflight ] && qa="-q $Q"
	echo "  info: tcp_connrate $m --kernel-port" >&2
	if measure "$TCPRATE" "tcpk-$m-1" -m $m $qa --kernel-port; then
		RATE[tcpk-$m]=$(field rate "$LAST_LOG")
		P50[tcpk-$m]=$(field rt_p50_us "$LAST_LOG")
		P99[tcpk-$m]=$(field rt_p99_us "$LAST_LOG")
	fi
done

# For information too: raw TCP carrying libndk's exchange instead of the
# echo (tcp_connrate --mpa-shape: MPA Request, Reply, RTR, the client closing
# after the server's FIN), what the kernel alone costs for the protocol's
# segments and system calls (README.md, "What bounds the connection rate").
for m in serial inflight; do
	qa=""; [ "$m" = inflight ] && qa="-q $Q"
	echo "  info: tcp_connrate $m --mpa-shape" >&2
	if measure "$TCPRATE" "tcpm-$m-1" -m $m $qa --mpa-shape; then
		RATE[tcpm-$m]=$(field rate "$LAST_LOG")
	fi
done

# Heap per idle connection: one process (both sides' heap in one mallinfo2).
echo "  connrate --idle $IDLE_N" >&2
IDLE_LOG=$OUT/ndk-idle.log
CMDS+=("idle: $CONNRATE --idle $IDLE_N")
wait_quiet
echo "# cmd: $CONNRATE --idle $IDLE_N (background CPU busy: ${BG}%)" > "$IDLE_LOG"
if ! timeout 120 "$CONNRATE" --idle "$IDLE_N" >> "$IDLE_LOG" 2>&1; then
	echo "  FAILED: connrate --idle (see $IDLE_LOG)" >&2
	echo "FAILED: connrate --idle, see $IDLE_LOG" >> "$OUT/notes.txt"
	FAILED=1
fi

# Where the time goes: one process, so both sides' stamps are in one record.
echo "  connrate serial, one process (leg breakdown)" >&2
LEGS_LOG=$OUT/ndk-legs-oneproc.log
CMDS+=("legs: $CONNRATE -m serial -D $DUR")
wait_quiet
echo "# cmd: $CONNRATE -m serial -D $DUR (background CPU busy: ${BG}%)" > "$LEGS_LOG"
if ! timeout $((${DUR%.*} + 60)) "$CONNRATE" -m serial -D "$DUR" >> "$LEGS_LOG" 2>&1; then
	echo "FAILED: leg breakdown run, see $LEGS_LOG" >> "$OUT/notes.txt"
	FAILED=1
fi

# ----------------------------------------------------------------- report
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b != "-") printf "%.2f", b / a; else print "-" }'; }
verdict() { awk -v r="$1" 'BEGIN { if (r == "-") print "no result"; else if (r >= 0.5) print "met"; else print "NOT met" }'; }
fmt0() { awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else printf "%.0f", v }'; }

{
	echo
	echo "# libndk connection establishment vs raw TCP ($(date -Is))"
	echo
	echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $NCPU (nproc=$NCPU), kernel $(uname -r)"
	echo "net: tcp_tw_reuse=$(cat /proc/sys/net/ipv4/tcp_tw_reuse) ip_local_port_range=$(tr '\t' '-' < /proc/sys/net/ipv4/ip_local_port_range) tcp_max_tw_buckets=$(cat /proc/sys/net/ipv4/tcp_max_tw_buckets); ulimit -n $(ulimit -n); load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "source: $(git -C "$HERE/.." rev-parse --short HEAD 2>/dev/null)$( [ -n "$(git -C "$HERE/.." status --porcelain --untracked-files=no 2>/dev/null)" ] && echo ' (working tree modified)')"
	echo "layout: $LAYOUT_TXT"
	echo "each measurement: ${DUR}s, median of $REPS; inflight = $Q connections in flight"
	echo "background CPU use when a run started: at most ${BG_MAX}% of all CPUs (waited ${QUIET_WAITED}s in all for < ${QUIET_PCT}%)"
	[ "$BG_MAX" -gt $((QUIET_PCT * 2)) ] &&
		echo "WARNING: the machine was busy during some runs (see '# ... background CPU busy' in the logs): pinned serial numbers are then unreliable; rerun with larger QUIET_WAIT_ONE / QUIET_WAIT_TOTAL"
	echo
	echo "| what | raw TCP conn/s | libndk conn/s | ratio | target |"
	echo "|---|---|---|---|---|"
	for m in serial inflight; do
		t=$(median ${RATE[tcp-$m]:-}); n=$(median ${RATE[ndk-$m]:-}); r=$(ratio "$t" "$n")
		label="serial (one at a time)"; [ "$m" = inflight ] && label="$Q in flight"
		echo "| $label | $(fmt0 "$t") | $(fmt0 "$n") | $r | ratio >= 0.5: $(verdict "$r") |"
	done
	echo
	echo "| latency (median of reps) | raw TCP p50 / p99 us | libndk p50 / p99 us | libndk both-established p50 / p99 us |"
	echo "|---|---|---|---|"
	for m in serial inflight; do
		label="serial"; [ "$m" = inflight ] && label="$Q in flight"
		both="-"
		[ "$LAYOUT" = oneproc ] && both="$(median ${B50[ndk-$m]:-}) / $(median ${B99[ndk-$m]:-})"
		echo "| $label | $(median ${P50[tcp-$m]:-}) / $(median ${P99[tcp-$m]:-}) | $(median ${P50[ndk-$m]:-}) / $(median ${P99[ndk-$m]:-}) | $both |"
	done
	echo
	echo "raw TCP latency: connect() called -> 1-byte echo received (TCP handshake + one round trip)."
	echo "raw TCP binds a random local port in 49152-65535 before connect(), as libndk does. With plain"
	echo "connect() (kernel-chosen port, one run each, TIME_WAIT sockets at the start: see logs) it reached"
	echo "$(fmt0 "${RATE[tcpk-serial]:--}") conn/s serial (p50/p99 ${P50[tcpk-serial]:--}/${P99[tcpk-serial]:--} us) and $(fmt0 "${RATE[tcpk-inflight]:--}") conn/s with $Q in flight (p50/p99 ${P50[tcpk-inflight]:--}/${P99[tcpk-inflight]:--} us):"
	echo "the kernel's ephemeral-port search slows down as TIME_WAIT sockets pile up."
	echo "raw TCP carrying MPA's exchange instead of the echo (--mpa-shape, one run each): $(fmt0 "${RATE[tcpm-serial]:--}") conn/s serial,"
	echo "$(fmt0 "${RATE[tcpm-inflight]:--}") with $Q in flight; libndk's median is $(ratio "${RATE[tcpm-serial]:--}" "$(median ${RATE[ndk-serial]:-})") / $(ratio "${RATE[tcpm-inflight]:--}" "$(median ${RATE[ndk-inflight]:-})") of it."
	echo "libndk latency: NdkConnect called -> NdkCompleteConnect succeeded (active side established: TCP handshake, MPA Request/Reply, RTR sent)."
	echo "In flight, latency is mostly queueing: about $Q / rate."
	echo
	side=$(field side_bytes "$IDLE_LOG"); pair=$(field pair_bytes "$IDLE_LOG")
	qpb=$(field qp_bytes "$IDLE_LOG"); leak=$(field leak_bytes "$IDLE_LOG")
	hv="no result"
	[ -n "$side" ] && { if [ "$side" -le 32768 ]; then hv=met; else hv="NOT met"; fi; }
	echo "| heap bytes per idle connection | N | target <= 32768 |"
	echo "|---|---|---|"
	echo "| ${side:--} per side (${pair:--} per connection pair, both sides) | $IDLE_N | $hv |"
	echo
	echo "heap = mallinfo2() uordblks + hblkhd over all arenas with glibc's per-thread caches off (the"
	echo "sanitizer allocator's count in a sanitizer build), after - before establishing N connections,"
	echo "divided by N (pair) and by 2N (side). Excluded: the QPs and their queues (created before the"
	echo "baseline; ${qpb:--} bytes per QP at depth 16/16, i.e. $( [ -n "$qpb" ] && [ -n "$side" ] && echo $((side + qpb)) || echo -) per side with its QP), the CQs, PDs, adapters, listener,"
	echo "and kernel socket memory. After tearing everything down the heap is ${leak:--} bytes off its baseline."
	echo
	echo "## commands"
	echo
	echo "Repetition 1 (the others differ only in the server port: a fresh one per run):"
	echo
	for c in "${CMDS[@]}"; do echo "    $c"; done | grep -E '^    ((tcp[km]?|ndk)-[a-z]+-1(\.retry)?|idle|legs):'
	echo
	echo "## where the time goes (libndk, serial, one process: both sides stamped in one record)"
	sed -n '/^### legs/,/^RESULT/p' "$LEGS_LOG" | grep -v '^RESULT'
	sed -n '/^## connrate server side/,$p' "$LEGS_LOG"
	if [ "$LAYOUT" = twoproc ]; then
		echo
		echo "## libndk serial, two processes: client legs and server legs (repetition $REPS)"
		f=$OUT/ndk-serial-$REPS.log
		[ -f "$OUT/ndk-serial-$REPS.retry.log" ] && f=$OUT/ndk-serial-$REPS.retry.log
		sed -n '/^### legs/,/^RESULT/p' "$f" | grep -v '^RESULT'
		sed -n '/^## connrate server side/,$p' "$f"
	fi
	echo
	if [ -f "$OUT/notes.txt" ]; then
		echo "## notes"
		cat "$OUT/notes.txt"
	else
		echo "notes: no failures, no port exhaustion (TIME_WAIT sockets now: $(timewait))"
	fi
	echo "raw logs: $OUT"
} | tee "$OUT/summary.md"

# The comparison as a plot beside the summary (bench/plot.sh, gnuplot):
# connections per second, median of the repetitions.
{
	printf 'what\traw TCP\tlibndk\traw TCP, kernel port (1 run)\n'
	for m in serial inflight; do
		label="serial (one at a time)"; [ "$m" = inflight ] && label="$Q in flight"
		printf '%s\t%s\t%s\t%s\n' "$label" "$(median ${RATE[tcp-$m]:-})" "$(median ${RATE[ndk-$m]:-})" "${RATE[tcpk-$m]:--}"
	done
} > "$OUT/connrate.tsv"
PLOT_NOTE="$("$HERE/plot.sh" note), layout $LAYOUT, ${DUR}s x $REPS"
echo "$PLOT_NOTE" > "$OUT/plot-note.txt"
PLOT_NOTE=$PLOT_NOTE "$HERE/plot.sh" bars "$OUT/connrate.tsv" "$OUT/connrate.png" \
	"Connection establishment over 127.0.0.1: libndk against raw TCP" "connections per second"

exit "$FAILED"
