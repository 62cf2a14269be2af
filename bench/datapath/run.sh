#!/usr/bin/env bash
# run.sh BUILD_DIR - libndk's data path (ndkperf) against raw TCP and the
# established anchors, over loopback, all measured in the same run, with
# both ends placed the same way for each comparison. Prints one table of
# ratios with their targets. See README.md beside this file.
#
# Environment:
#   REPS=3          repetitions of the whole matrix; the table shows medians
#   LAT_ITERS=20000 ping-pong iterations (latency)
#   SECS=3          seconds per bandwidth / message-rate run
#   OUT=/tmp/ndk-datapath-DATE   raw logs and the table
#   PLACEMENTS="same cross"      same: both ends on CPU 0; cross: server on
#                   CPU 0, client on CPU 1
#   NDKPERF, TCP_PINGPONG, TCP_STREAM: binaries (default: under BUILD_DIR)
#   MODERATION=100,16  CQ interrupt moderation of the "events mod" message-
#                   rate row (ndkperf --moderation=US,N)
#   QUIET_PCT=15    before each run, wait (at most QUIET_WAIT s, QUIET_TOTAL s
#   QUIET_WAIT=8    over the whole script) until other processes use less
#   QUIET_TOTAL=120 than this % of all CPUs; the busiest value seen is shown
#   SWEEP_SIZES="64 256 ... 4194304"  message sizes of the latency and
#                   bandwidth sweep drawn in the plots; SWEEP_SIZES= skips it
#   STAGE_SIZES="64 256 ... 16384"  message sizes of the staging sweep:
#                   64 B..16 KiB Send rate and latency around the receive
#                   (src/rx_stage.c, 8 KiB) and transmit (src/qp_tx.c, 1 KiB)
#                   staging thresholds; STAGE_SIZES= skips it
#   PERF_ITERS=5000 ping-pongs per perf stat run (CPU time, wake-ups and
#                   system calls per message, raw TCP against ndkperf)
#   SWEEP_REPS=1    repetitions of the sweep (medians)
#   SWEEP_SECS=1    seconds per bandwidth point
#   SWEEP_LAT_ITERS=2000  ping-pong iterations per latency point (fewer for
#                   large sizes: at most 64 MiB each way, at least 100)
#
# Plots (bench/plot.sh, gnuplot): latency_PLACEMENT.png and
# bandwidth_PLACEMENT.png against message size, beside the table in $OUT;
# bench/publish_plots.sh copies them into the README.
#
# Third-party anchors run only when installed (.ci/run installs none of them):
# ucx_perftest (ucx-utils), fi_pingpong (libfabric-bin), sockperf, iperf3,
# each pinned with taskset like the ndkperf run it is compared with; UCX and
# libfabric over their tcp transports on lo. Every process runs under
# timeout(1); servers are stopped by their PID; all traffic is to 127.0.0.1.
set -u -o pipefail

BUILD=${1:?usage: run.sh BUILD_DIR}
REPS=${REPS:-3}
LAT_ITERS=${LAT_ITERS:-20000}
SECS=${SECS:-3}
OUT=${OUT:-/tmp/ndk-datapath-$(date +%Y%m%d-%H%M%S)}
PLACEMENTS=${PLACEMENTS:-same cross}
NDKPERF=${NDKPERF:-$BUILD/tools/ndkperf/ndkperf}
# iWARP over TCP is what is measured: ndkperf --loopback runs both ends on
# this host, which the same-host fast path (docs/shm.md) would otherwise take.
export NDK_SHM=0
TCP_PINGPONG=${TCP_PINGPONG:-$BUILD/bench/datapath/tcp_pingpong}
TCP_STREAM=${TCP_STREAM:-$BUILD/bench/datapath/tcp_stream}
MODERATION=${MODERATION:-100,16}
QUIET_PCT=${QUIET_PCT:-15}
QUIET_WAIT=${QUIET_WAIT:-8}
QUIET_TOTAL=${QUIET_TOTAL:-120}
HOST=127.0.0.1
HERE=$(cd "$(dirname "$0")" && pwd)
RAW=$OUT/raw
mkdir -p "$RAW"
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_NET_DEVICES=lo

for b in "$NDKPERF" "$TCP_PINGPONG" "$TCP_STREAM"; do
	[ -x "$b" ] || { echo "run.sh: $b not found (build first, or set NDKPERF / TCP_PINGPONG / TCP_STREAM)" >&2; exit 2; }
done
if [ "$(nproc)" -lt 2 ]; then
	PLACEMENTS=${PLACEMENTS//cross/}
	echo "run.sh: one CPU only: the cross-CPU placement is skipped" >&2
fi

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
have() { command -v "$1" > /dev/null 2>&1; }

# ------------------------------------------------------------- results ---
declare -A R      # key -> values, one per repetition
declare -a ORDER  # keys in the order first seen
add() { # KEY VALUE
	[ -n "$2" ] || return 0
	[ -n "${R[$1]+x}" ] || ORDER+=("$1")
	R[$1]="${R[$1]:-} $2"
}
median() { # KEY -> median of its values, or empty
	[ -n "${R[$1]+x}" ] || return 0
	tr ' ' '\n' <<< "${R[$1]}" | grep . | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'
}

# ---------------------------------------------------- a quiet machine ---
# cpu_busy_pct: busy % of all CPUs over 0.5 s.
# shellcheck source=bench/cpu_busy.sh
. "$HERE/../cpu_busy.sh"
WAITED=0
BG_MAX=0 BG=0
# Waits (bounded) for the machine to be quiet before a measurement: the
# benchmark's own processes are not running then, so what is busy is
# someone else.
quiet() {
	local waited=0 bg
	bg=$(cpu_busy_pct)
	while [ "$bg" -gt "$QUIET_PCT" ] && [ "$waited" -lt "$QUIET_WAIT" ] && [ "$WAITED" -lt "$QUIET_TOTAL" ]; do
		sleep 1
		waited=$((waited + 2)); WAITED=$((WAITED + 2))
		bg=$(cpu_busy_pct)
	done
	[ "$bg" -gt "$BG_MAX" ] && BG_MAX=$bg
	BG=$bg
}

# ----------------------------------------------------------- processes ---
SPID=""
cleanup() { [ -n "$SPID" ] && { kill "$SPID" 2> /dev/null; wait "$SPID" 2> /dev/null; }; }
trap cleanup EXIT

port_free() { [ -z "$(ss -Htan "sport = :$1" 2> /dev/null)" ]; }
pick_port() { local p=$1; while ! port_free "$p"; do p=$((p + 1)); done; echo "$p"; }

# run NAME TIMEOUT CMD... : the command's output goes to $RAW/NAME.log;
# LOG names it afterwards.
run() {
	local name=$1 to=$2; shift 2
	LOG=$RAW/$name.log
	[ -n "${NOQUIET:-}" ] || quiet
	{ echo "# $*"; echo "# background busy: $BG%"; } > "$LOG"
	timeout "$to" "$@" >> "$LOG" 2>&1 < /dev/null
	local rc=$?
	[ "$rc" -eq 0 ] || log "  FAILED (exit $rc): $name, see $LOG"
	return "$rc"
}

# pair NAME PORT SERVER_CPU CLIENT_CPU "server cmd" "client cmd": a
# third-party server/client pair, each pinned with taskset; the client's
# output is the log. The server is stopped by its PID afterwards.
pair() {
	local name=$1 port=$2 scpu=$3 ccpu=$4 scmd=$5 ccmd=$6 i
	quiet
	bash -c "exec timeout 40 taskset -c $scpu $scmd" > "$RAW/$name.server.log" 2>&1 &
	SPID=$!
	for i in $(seq 50); do # the script's own pacing: at most 5 s for the listener
		[ -n "$(ss -Htln "sport = :$port" 2> /dev/null)" ] && break
		sleep 0.1
	done
	NOQUIET=1 run "$name" 25 bash -c "exec taskset -c $ccpu $ccmd"
	local rc=$?
	kill "$SPID" 2> /dev/null
	wait "$SPID" 2> /dev/null
	SPID=""
	return "$rc"
}

# --------------------------------------------------------------- parsing ---
# ndkperf: latency rows have 8 numbers (t_typical is the 4th), bandwidth
# rows 5 (average MB/s 4th, Mpps 5th).
ndk_lat() { awk 'NF == 8 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {v = $4} END {print v}' "$1"; }
ndk_bw() { awk 'NF == 5 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {v = $4} END {print v}' "$1"; }
ndk_rate() { awk 'NF == 5 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {v = $5} END {print v}' "$1"; }
# --wait=events: the receiving server's notifications per data message.
ndk_npm() { sed -n 's/^ Notifications   : server .*(\([0-9.]*\) per message)$/\1/p' "$1" | tail -1; }
kv() { grep -o "$2=[0-9.]*" "$1" | tail -1 | cut -d= -f2; } # FILE KEY
strip() { sed 's/\x1b\[[0-9;]*m//g' "$1"; }

# --------------------------------------------------------------- matrix ---
cpus() { case $1 in same) echo "0 0" ;; cross) echo "0 1" ;; esac; }
# place PLACEMENT: its server and client CPUs in SC and CC, and the
# options that pin ndkperf and the TCP anchors there in PIN.
place() {
	read -r SC CC <<< "$(cpus "$1")"
	PIN="--cpu-server $SC --cpu-client $CC"
}

# ndkperf's ways of waiting, per placement: "label|options".
BUSY=1
"$NDKPERF" send_lat --loopback -n 1 --warmup 0 --busy-poll --no-progress > /dev/null 2>&1
[ $? -eq 2 ] && { BUSY=0; log "this libndk has no busy-poll mode: that column stays empty"; }
ndk_modes() {
	echo "poll|--wait=yield"
	# Same CPU: a poller must yield, or the peer process on that CPU only
	# runs when the scheduler preempts it. Own CPU: spin, as perftest.
	if [ "$BUSY" = 1 ]; then
		if [ "$1" = same ]; then echo "busy-poll|--busy-poll --wait=yield"; else echo "busy-poll|--busy-poll --wait=spin"; fi
	fi
	echo "events|--wait=events"
}

# The message rate also once with a doorbell per request (-l 1): the
# default chains each burst with NDK_OP_FLAG_DEFER, as an NDK consumer that
# posts a batch does; and in events mode once with CQ interrupt moderation.
rate_modes() {
	ndk_modes "$1"
	echo "poll -l 1|--wait=yield -l 1"
	# The receiver reading the socket itself, as UCX's does: no wake-up of a
	# sleeping progress thread per message.
	[ "$BUSY" = 1 ] && [ "$1" = cross ] && echo "busy-poll -l 1|--busy-poll --wait=spin -l 1"
	echo "events mod|--wait=events --moderation=$MODERATION"
}

# ndk_runs MODES TEST KEY:PARSER[,KEY:PARSER] ARGS...: ndkperf TEST over
# loopback with ARGS, placed by $PIN, once per way of waiting that MODES
# lists for placement $pl; each PARSER's value from the log is added under
# KEY|$pl|ndk|MODE.
ndk_runs() {
	local modes=$1 test=$2 adds=$3 mode opts a
	shift 3
	while IFS='|' read -r mode opts; do
		run "ndk_${test}_${pl}_${mode}_$rep" 60 "$NDKPERF" "$test" --loopback "$@" $PIN $opts --no-progress || continue
		for a in ${adds//,/ }; do
			add "${a%%:*}|$pl|ndk|$mode" "$("${a#*:}" "$LOG")"
		done
	done < <("$modes" "$pl")
}

# external TOOL NAME PORT SERVER CLIENT KEY EXTRACT...: when TOOL is
# installed, the run NAME of SERVER and CLIENT as a pair on this
# placement's CPUs, and what EXTRACT... prints from the client's log
# (given as its last argument) added as KEY.
external() {
	local tool=$1 name=$2 port=$3 scmd=$4 ccmd=$5 key=$6
	shift 6
	have "$tool" || return 0
	pair "$name" "$port" "$SC" "$CC" "$scmd" "$ccmd" && add "$key" "$("$@" "$LOG")"
}
# What the external benchmarks' logs say.
sockperf_p50() { strip "$1" | grep -o 'percentile 50.000 = *[0-9.]*' | awk '{print $NF}'; }
sockperf_mps() { strip "$1" | grep -o 'Message Rate is [0-9]*' | awk '{printf "%.6f", $NF / 1e6}'; }
fi_lat() { awk -v s="$1" '$1 == s && NF == 8 {print $7}' "$2"; } # SIZE FILE
ucx_final() { awk -v f="$1" '/^Final:/ {print $f}' "$2"; } # FIELD FILE
ucx_final_mps() { awk '/^Final:/ {printf "%.6f", $9 / 1e6}' "$1"; }
iperf3_mbs() {
	python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8 / 1048576))' <(sed -n '/^{/,$p' "$1") 2> /dev/null
}

P_FI=$(pick_port 41151); P_UCX=$(pick_port 41161); P_SP=$(pick_port 41111); P_IP=$(pick_port 41121)

{
	echo "date: $(date -Is)"
	echo "kernel: $(uname -r)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
	echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "ndkperf: $NDKPERF"
	for t in ucx_perftest fi_pingpong sockperf iperf3; do echo "$t: $(command -v $t || echo 'not installed')"; done
} > "$OUT/versions.txt"

T_START=$SECONDS
for rep in $(seq "$REPS"); do
	for pl in $PLACEMENTS; do
		place "$pl"
		log "rep $rep/$REPS, placement $pl (server CPU $SC, client CPU $CC)"

		# Latency: 64-byte ping-pong, half round trip.
		run "tcp_pingpong_${pl}_$rep" 60 "$TCP_PINGPONG" -s 64 -n "$LAT_ITERS" $PIN &&
			add "lat|$pl|tcp_pingpong" "$(kv "$LOG" typical)"
		# The same waiting in epoll_wait: what any event loop pays, the
		# floor of events mode (README, "Events mode against blocking TCP").
		run "tcp_pingpong_epoll_${pl}_$rep" 60 "$TCP_PINGPONG" -s 64 -n "$LAT_ITERS" --epoll $PIN &&
			add "lat|$pl|tcp_pingpong epoll" "$(kv "$LOG" typical)"
		# Polling with a yield after each empty read, as busy-poll mode
		# on one CPU polls its CQ: what that discipline costs raw TCP.
		run "tcp_pingpong_yield_${pl}_$rep" 60 "$TCP_PINGPONG" -s 64 -n "$LAT_ITERS" --yield $PIN &&
			add "lat|$pl|tcp_pingpong yield" "$(kv "$LOG" typical)"
		ndk_runs ndk_modes send_lat lat:ndk_lat -s 64 -n "$LAT_ITERS"
		external sockperf "sockperf_pp_${pl}_$rep" "$P_SP" "sockperf sr --tcp -i $HOST -p $P_SP -m 65536" \
			"sockperf pp --tcp -i $HOST -p $P_SP -m 64 -t $SECS" "lat|$pl|sockperf pp" sockperf_p50
		external fi_pingpong "fi_pingpong_${pl}_$rep" "$P_FI" "fi_pingpong -p tcp -e msg -d lo -I 4000 -S 64 -B $P_FI" \
			"fi_pingpong -p tcp -e msg -d lo -I 4000 -S 64 -P $P_FI $HOST" "lat|$pl|fi_pingpong tcp" fi_lat 64
		# Half round trip, as ndkperf's (ucx_perftest's latency is one way).
		# Both ends poll: on one CPU they starve each other, so cross only.
		[ "$pl" = cross ] && external ucx_perftest "ucx_tag_lat_${pl}_$rep" "$P_UCX" "env UCX_TLS=tcp ucx_perftest -p $P_UCX" \
			"env UCX_TLS=tcp ucx_perftest $HOST -p $P_UCX -t tag_lat -s 64 -n $LAT_ITERS -w 1000" \
			"lat|$pl|ucx tag_lat tcp" ucx_final 3

		# Bandwidth: one stream of 1 MiB messages.
		run "tcp_stream_${pl}_$rep" 60 "$TCP_STREAM" -s 1048576 -D "$SECS" $PIN &&
			add "bw|$pl|tcp_stream" "$(kv "$LOG" MB_per_sec)"
		# The same with both ends spinning, as busy-poll mode does: how far a
		# busy-polled stream spreads without libndk in it. Two spinners on one
		# CPU only take turns by time slice, so cross only.
		[ "$pl" = cross ] && run "tcp_stream_spin_${pl}_$rep" 60 "$TCP_STREAM" -s 1048576 -D "$SECS" --spin $PIN &&
			add "bw|$pl|tcp_stream spin" "$(kv "$LOG" MB_per_sec)"
		ndk_runs ndk_modes write_bw bw:ndk_bw -s 1048576 -D "$SECS"
		# RDMA Read: the same 1 MiB stream pulled by the client.
		ndk_runs ndk_modes read_bw rbw:ndk_bw -s 1048576 -D "$SECS"
		external ucx_perftest "ucx_put_bw_${pl}_$rep" "$P_UCX" "env UCX_TLS=tcp ucx_perftest -p $P_UCX" \
			"env UCX_TLS=tcp ucx_perftest $HOST -p $P_UCX -t ucp_put_bw -s 1048576 -n 500 -w 50" \
			"bw|$pl|ucx put_bw tcp" ucx_final 7
		external iperf3 "iperf3_${pl}_$rep" "$P_IP" "iperf3 -s -1 -B $HOST -p $P_IP" "iperf3 -c $HOST -B $HOST -p $P_IP -t $SECS -J" \
			"bw|$pl|iperf3" iperf3_mbs

		# Message rate: 64-byte messages, one direction.
		ndk_runs rate_modes send_bw rate:ndk_rate,npm:ndk_npm -s 64 -D "$SECS"
		external ucx_perftest "ucx_tag_bw_${pl}_$rep" "$P_UCX" "env UCX_TLS=tcp ucx_perftest -p $P_UCX" \
			"env UCX_TLS=tcp ucx_perftest $HOST -p $P_UCX -t tag_bw -s 64 -n 300000 -w 10000" \
			"rate|$pl|ucx tag_bw tcp" ucx_final_mps
		external sockperf "sockperf_tp_${pl}_$rep" "$P_SP" "sockperf sr --tcp -i $HOST -p $P_SP -m 65536" \
			"sockperf tp --tcp -i $HOST -p $P_SP -m 64 -t $SECS" "rate|$pl|sockperf tp" sockperf_mps
	done
done
log "measured in $((SECONDS - T_START)) s, of which ${WAITED} s waiting for a quiet machine"

# ---------------------------------------------------------------- table ---
# row METRIC PLACEMENT MODE NDK_KEY ANCHOR_LABEL ANCHOR_KEY DIRECTION TARGET
# DIRECTION: "lower" (ndk/anchor <= target is good), "higher" (>=), "info".
TABLE=$OUT/table.txt
row() {
	local metric=$1 pl=$2 mode=$3 nk=$4 alabel=$5 ak=$6 dir=$7 target=$8
	local n a
	n=$(median "$nk"); a=$(median "$ak")
	[ -n "$n" ] || n="-"
	[ -n "$a" ] || a="-"
	awk -v m="$metric" -v p="$pl" -v mo="$mode" -v n="$n" -v al="$alabel" -v a="$a" -v d="$dir" -v t="$target" 'BEGIN {
		r = "-"; tg = "(info)"; v = ""
		if (n != "-" && a != "-" && a + 0 > 0) {
			q = n / a; r = sprintf("%.2f", q)
			if (d == "lower") { tg = "<= " t; v = (q <= t) ? "met" : "MISSED" }
			if (d == "higher") { tg = ">= " t; v = (q >= t) ? "met" : "MISSED" }
		} else if (d != "info") { tg = (d == "lower" ? "<= " : ">= ") t; v = "no data" }
		printf "%-27s %-6s %-10s %10s  %-17s %10s  %6s  %-7s %s\n", m, p, mo, n, al, a, r, tg, v
	}'
}

# stability WHAT PLACEMENT MODE KEY ANCHOR_KEY: every value of KEY, its
# largest distance from the median, and the smallest against the anchor's
# median (none when ANCHOR_KEY is empty).
stability() {
	local what=$1 pl=$2 mode=$3 k=$4 ak=$5 med amed
	med=$(median "$k"); amed=""
	[ -n "$ak" ] && amed=$(median "$ak")
	awk -v w="$what" -v p="$pl" -v mo="$mode" -v vals="${R[$k]:-}" -v m="${med:-0}" -v a="${amed:-0}" -v ak="$ak" 'BEGIN {
		n = split(vals, v, " "); dev = 0; min = -1; list = ""
		for (i = 1; i <= n; i++) {
			list = list (i > 1 ? " " : "") v[i]
			d = m > 0 ? (v[i] - m) / m : 0; if (d < 0) d = -d; if (d > dev) dev = d
			if (min < 0 || v[i] + 0 < min) min = v[i] + 0
		}
		if (!n) { printf "%-12s %-6s %-10s %-32s %9s %9s  %s\n", w, p, mo, "-", "-", "-", "no data"; exit }
		r = (ak != "" && a > 0) ? sprintf("%.2f", min / a) : "-"
		verdict = (dev <= 0.2) ? "stable" : "UNSTABLE"
		if (r != "-") verdict = verdict ((min / a >= 1) ? ", all >= tcp" : ", BELOW tcp")
		printf "%-12s %-6s %-10s %-32s %8.0f%% %9s  %s\n", w, p, mo, list, dev * 100, r, verdict
	}'
}

{
	echo "libndk data path vs raw TCP and anchors, over 127.0.0.1, medians of $REPS run(s)"
	echo "busiest background load seen before a run: ${BG_MAX}% of all CPUs (quiet threshold ${QUIET_PCT}%)"
	echo "placement same: both processes on CPU 0; cross: server on CPU 0, client on CPU 1"
	echo "ndkperf modes: poll = NdkGetCqResults + sched_yield(); busy-poll = NDK_OPEN_FLAG_BUSY_POLL"
	echo "(yield on the same CPU, spin across CPUs); events = NdkArmCq + notification callback"
	echo
	printf "%-27s %-6s %-10s %10s  %-17s %10s  %6s  %-7s %s\n" metric place mode ndkperf anchor anchor ratio target verdict
	# Latency, with the targets of the progress-engine work: busy-poll at
	# most raw TCP on one CPU and at most libfabric tcp across CPUs, events
	# at most raw TCP across CPUs, poll within 1.3x of raw TCP on one CPU.
	for pl in $PLACEMENTS; do
		while IFS='|' read -r mode _; do
			k="lat|$pl|ndk|$mode"
			case $pl/$mode in
			same/busy-poll)
				row "64 B half RTT [us]" "$pl" "$mode" "$k" tcp_pingpong "lat|$pl|tcp_pingpong" lower 1.0
				row "64 B half RTT [us]" "$pl" "$mode" "$k" "tcp_pingpong yield" "lat|$pl|tcp_pingpong yield" info - ;;
			same/poll) row "64 B half RTT [us]" "$pl" "$mode" "$k" tcp_pingpong "lat|$pl|tcp_pingpong" lower 1.3 ;;
			cross/busy-poll)
				row "64 B half RTT [us]" "$pl" "$mode" "$k" "fi_pingpong tcp" "lat|$pl|fi_pingpong tcp" lower 1.0
				row "64 B half RTT [us]" "$pl" "$mode" "$k" tcp_pingpong "lat|$pl|tcp_pingpong" info - ;;
			cross/events) row "64 B half RTT [us]" "$pl" "$mode" "$k" tcp_pingpong "lat|$pl|tcp_pingpong" lower 1.0 ;;
			*) row "64 B half RTT [us]" "$pl" "$mode" "$k" tcp_pingpong "lat|$pl|tcp_pingpong" info - ;;
			esac
			[ "$mode" = events ] &&
				row "64 B half RTT [us]" "$pl" "$mode" "$k" "tcp_pingpong epoll" "lat|$pl|tcp_pingpong epoll" info -
		done < <(ndk_modes "$pl")
	done
	# Bandwidth: every mode at or above raw TCP; RDMA Read at least 0.9x
	# RDMA Write in the same mode.
	for pl in $PLACEMENTS; do
		while IFS='|' read -r mode _; do
			row "1 MiB write [MB/s]" "$pl" "$mode" "bw|$pl|ndk|$mode" tcp_stream "bw|$pl|tcp_stream" higher 1.0
		done < <(ndk_modes "$pl")
	done
	for pl in $PLACEMENTS; do
		while IFS='|' read -r mode _; do
			row "1 MiB read [MB/s]" "$pl" "$mode" "rbw|$pl|ndk|$mode" "1 MiB write" "bw|$pl|ndk|$mode" higher 0.9
		done < <(ndk_modes "$pl")
	done
	for pl in $PLACEMENTS; do
		while IFS='|' read -r mode _; do
			# The target is the best of libfabric tcp and UCX tcp; libfabric-bin has no
			# message-rate test, so UCX's tag_bw is the bar.
			have ucx_perftest && row "64 B msg rate [Mmsg/s]" "$pl" "$mode" "rate|$pl|ndk|$mode" "ucx tag_bw tcp" "rate|$pl|ucx tag_bw tcp" higher 1
			have sockperf && row "64 B msg rate [Mmsg/s]" "$pl" "$mode" "rate|$pl|ndk|$mode" "sockperf tp" "rate|$pl|sockperf tp" info -
		done < <(rate_modes "$pl")
	done
	for pl in $PLACEMENTS; do
		while IFS='|' read -r mode _; do
			have fi_pingpong && [ "$pl/$mode" != cross/busy-poll ] &&
				row "64 B half RTT [us]" "$pl" "$mode" "lat|$pl|ndk|$mode" "fi_pingpong tcp" "lat|$pl|fi_pingpong tcp" info -
			have ucx_perftest && row "64 B half RTT [us]" "$pl" "$mode" "lat|$pl|ndk|$mode" "ucx tag_lat tcp" "lat|$pl|ucx tag_lat tcp" info -
			have sockperf && row "64 B half RTT [us]" "$pl" "$mode" "lat|$pl|ndk|$mode" "sockperf pp p50" "lat|$pl|sockperf pp" info -
			have ucx_perftest && row "1 MiB write [MB/s]" "$pl" "$mode" "bw|$pl|ndk|$mode" "ucx put_bw tcp" "bw|$pl|ucx put_bw tcp" info -
			have iperf3 && row "1 MiB write [MB/s]" "$pl" "$mode" "bw|$pl|ndk|$mode" "iperf3" "bw|$pl|iperf3" info -
		done < <(ndk_modes "$pl")
	done
	echo
	echo "1 MiB stream, every repetition: each within 20 % of its median, and each at or above"
	echo "tcp_stream's median"
	printf "%-12s %-6s %-10s %-32s %9s %9s  %s\n" stream place mode "values [MB/s]" "max dev" "min/tcp" verdict
	for pl in $PLACEMENTS; do
		while IFS='|' read -r mode _; do
			stability write "$pl" "$mode" "bw|$pl|ndk|$mode" "bw|$pl|tcp_stream"
			stability read "$pl" "$mode" "rbw|$pl|ndk|$mode" "bw|$pl|tcp_stream"
		done < <(ndk_modes "$pl")
		stability tcp_stream "$pl" - "bw|$pl|tcp_stream" ""
		[ "$pl" = cross ] && stability "tcp spin" "$pl" - "bw|$pl|tcp_stream spin" ""
	done
	for pl in $PLACEMENTS; do
		while IFS='|' read -r mode _; do
			case $mode in events*) ;; *) continue ;; esac
			printf "%-27s %-6s %-10s %10s  (receiver's notifications per 64 B message in send_bw)\n" \
				"notifications / msg" "$pl" "$mode" "$(v=$(median "npm|$pl|ndk|$mode"); echo "${v:--}")"
		done < <(rate_modes "$pl")
	done
	echo
	echo "events mod = --wait=events --moderation=$MODERATION (NdkControlCqInterruptModeration US,N)."
	echo "ratio = ndkperf / anchor. Latency: t_typical (median) of ndkperf send_lat against the median"
	echo "of the anchor; lower is better. Bandwidth and message rate: higher is better."
	echo "fi_pingpong prints the average half round trip (usec/xfer), the others a median."
	echo "libfabric-bin ships only fi_pingpong (no message-rate test): it anchors latency, not rate;"
	echo "it polls, so with both ends on one CPU it may not finish (then its column shows -)."
	echo "raw logs: $RAW"
} | tee "$TABLE"

# Every value, for the record.
{
	echo "key: values (one per repetition)"
	for k in "${ORDER[@]}"; do echo "$k:${R[$k]}"; done
} > "$OUT/values.txt"
echo "all values: $OUT/values.txt"

# ------------------------------------------------- where the time goes ---
# Where a target cannot be met on this machine, the proof is the cost of
# the same work: perf stat of raw TCP and of ndkperf, 64 B ping-pong in
# each placement, both processes counted (they fork), per message (2 per
# iteration): CPU time, context switches (wake-ups) and system calls. Each
# run is made with PERF_ITERS and with 3 x PERF_ITERS iterations and the
# difference is divided by the extra messages: what one more message
# costs, without the set-up (threads, connection, memory registration) and
# the teardown that a whole run's count spreads over its messages.
PERF_ITERS=${PERF_ITERS:-5000}
if have perf; then
	perf_count() { # LOGNAME ITERS CMD... -> "task-clock switches syscalls"
		local name=$1 n=$2; shift 2
		run "$name" 60 perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -- "$@" -n "$n" || return 1
		awk -F, '$3 == "task-clock" {t = $1} $3 == "context-switches" {c = $1} $3 == "raw_syscalls:sys_enter" {s = $1}
			END {if (t != "") print t, c, s}' "$LOG"
	}
	perf_row() { # PLACEMENT LABEL CMD... (without -n)
		local pl=$1 label=$2 a b; shift 2
		a=$(perf_count "perfstat_${pl}_${label// /_}_1x" "$PERF_ITERS" "$@") || return 0
		b=$(perf_count "perfstat_${pl}_${label// /_}_3x" $((3 * PERF_ITERS)) "$@") || return 0
		awk -v l="$label" -v p="$pl" -v n=$((2 * 2 * PERF_ITERS)) -v a="$a" -v b="$b" 'BEGIN {
			split(a, x, " "); split(b, y, " ")
			if (x[1] != "" && y[1] != "")
				printf "%-28s %-6s %10.2f %10.2f %10.2f\n", l, p, (y[1] - x[1]) * 1000 / n, (y[2] - x[2]) / n, (y[3] - x[3]) / n
		}'
	}
	{
		echo "64 B ping-pong, per message (perf stat, both processes; the cost of one more"
		echo "message: runs of $PERF_ITERS and $((3 * PERF_ITERS)) iterations, their difference per extra message)"
		printf "%-28s %-6s %10s %10s %10s\n" run place "CPU [us]" "switches" "syscalls"
		for pl in $PLACEMENTS; do
			place "$pl"
			perf_row "$pl" "tcp_pingpong" "$TCP_PINGPONG" -s 64 $PIN
			perf_row "$pl" "tcp_pingpong --epoll" "$TCP_PINGPONG" -s 64 --epoll $PIN
			perf_row "$pl" "tcp_pingpong --yield" "$TCP_PINGPONG" -s 64 --yield $PIN
			while IFS='|' read -r mode opts; do
				perf_row "$pl" "ndkperf $mode" "$NDKPERF" send_lat --loopback -s 64 --warmup 0 $PIN $opts --no-progress
			done < <(ndk_modes "$pl")
		done
	} | tee "$OUT/perf_stat.txt"
fi

# ------------------------------------------------ shared-memory bench ---
# bench/shm/run.sh, where this tree has it, runs after the TCP table with
# the same build and knobs, its output beside this one.
if [ -x "$HERE/../shm/run.sh" ]; then
	log "bench/shm/run.sh"
	OUT=$OUT/shm "$HERE/../shm/run.sh" "$BUILD" || log "bench/shm/run.sh failed (exit $?)"
fi

# ------------------------------------------------------ staging sweep ---
# Send rate (send_bw) and latency (send_lat) against message size, on both
# sides of the staging thresholds, poll mode: the receive engine's (payloads
# up to 8 KiB are read in bulk and copied, larger ones go straight into
# place) and the transmit engine's (payloads up to 1 KiB are copied beside
# their headers, larger ones are referenced where they lie).
STAGE_SIZES=${STAGE_SIZES-64 256 512 1024 2048 4096 8192 16384}
if [ -n "$STAGE_SIZES" ]; then
	for rep in $(seq "$REPS"); do
		for pl in $PLACEMENTS; do
			place "$pl"
			log "staging sweep $rep/$REPS, placement $pl: sizes $STAGE_SIZES"
			for sz in $STAGE_SIZES; do
				run "stage_send_bw_${pl}_${sz}_$rep" 60 "$NDKPERF" send_bw --loopback -s "$sz" -D "$SECS" $PIN --wait=yield --no-progress &&
					add "stage_rate|$pl|$sz" "$(ndk_rate "$LOG")"
				run "stage_send_lat_${pl}_${sz}_$rep" 60 "$NDKPERF" send_lat --loopback -s "$sz" -n "$LAT_ITERS" $PIN --wait=yield --no-progress &&
					add "stage_lat|$pl|$sz" "$(ndk_lat "$LOG")"
			done
		done
	done
	{
		echo "staging sweep (ndkperf --wait=yield, medians of $REPS; load at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
		printf "%-6s %8s %14s %14s\n" place size "rate [Mmsg/s]" "half RTT [us]"
		for pl in $PLACEMENTS; do
			for sz in $STAGE_SIZES; do
				r=$(median "stage_rate|$pl|$sz"); l=$(median "stage_lat|$pl|$sz")
				printf "%-6s %8s %14s %14s\n" "$pl" "$sz" "${r:--}" "${l:--}"
			done
		done
	} | tee "$OUT/stage_sweep.txt"
fi

# ------------------------------------------------- sweep and plots ---
# Latency (send_lat, half round trip) and bandwidth (write_bw) against
# message size, for each ndkperf mode and each anchor that is there, in
# each placement: the plots' data.
SWEEP_SIZES=${SWEEP_SIZES-64 256 1024 4096 16384 65536 262144 1048576 4194304}
SWEEP_REPS=${SWEEP_REPS:-1}
SWEEP_SECS=${SWEEP_SECS:-1}
SWEEP_LAT_ITERS=${SWEEP_LAT_ITERS:-2000}
[ -n "$SWEEP_SIZES" ] || exit 0
sweep_iters() { # SIZE -> ping-pong iterations
	awk -v s="$1" -v m="$SWEEP_LAT_ITERS" 'BEGIN { n = int(67108864 / s); if (n > m) n = m; if (n < 100) n = 100; print n }'
}
lat_series() { # PLACEMENT -> "series|kind" lines, in the order of the plot
	while IFS='|' read -r mode _; do echo "libndk $mode|ndk"; done < <(ndk_modes "$1")
	echo "raw TCP|tcp"
	have sockperf && echo "sockperf pp p50|sockperf"
	have fi_pingpong && echo "fi_pingpong tcp|fi"
}
bw_series() {
	while IFS='|' read -r mode _; do echo "libndk $mode|ndk"; done < <(ndk_modes "$1")
	echo "raw TCP|tcp"
	have iperf3 && echo "iperf3|iperf3"
}
T_SWEEP=$SECONDS
for rep in $(seq "$SWEEP_REPS"); do
	for pl in $PLACEMENTS; do
		place "$pl"
		log "sweep $rep/$SWEEP_REPS, placement $pl: sizes $SWEEP_SIZES"
		for sz in $SWEEP_SIZES; do
			n=$(sweep_iters "$sz"); w=$((n / 10))
			run "sweep_tcp_pingpong_${pl}_${sz}_$rep" 120 "$TCP_PINGPONG" -s "$sz" -n "$n" -w "$w" $PIN &&
				add "slat|$pl|raw TCP|$sz" "$(kv "$LOG" typical)"
			run "sweep_tcp_stream_${pl}_${sz}_$rep" 60 "$TCP_STREAM" -s "$sz" -D "$SWEEP_SECS" $PIN &&
				add "sbw|$pl|raw TCP|$sz" "$(kv "$LOG" MB_per_sec)"
			while IFS='|' read -r mode opts; do
				run "sweep_ndk_send_lat_${pl}_${mode}_${sz}_$rep" 120 "$NDKPERF" send_lat --loopback -s "$sz" -n "$n" --warmup "$w" $PIN $opts --no-progress &&
					add "slat|$pl|libndk $mode|$sz" "$(ndk_lat "$LOG")"
				run "sweep_ndk_write_bw_${pl}_${mode}_${sz}_$rep" 60 "$NDKPERF" write_bw --loopback -s "$sz" -D "$SWEEP_SECS" $PIN $opts --no-progress &&
					add "sbw|$pl|libndk $mode|$sz" "$(ndk_bw "$LOG")"
			done < <(ndk_modes "$pl")
			[ "$sz" -le 65536 ] && external sockperf "sweep_sockperf_pp_${pl}_${sz}_$rep" "$P_SP" \
				"sockperf sr --tcp -i $HOST -p $P_SP -m 65536" "sockperf pp --tcp -i $HOST -p $P_SP -m $sz -t $SWEEP_SECS" \
				"slat|$pl|sockperf pp p50|$sz" sockperf_p50
			external fi_pingpong "sweep_fi_pingpong_${pl}_${sz}_$rep" "$P_FI" \
				"fi_pingpong -p tcp -e msg -d lo -I $n -S $sz -B $P_FI" "fi_pingpong -p tcp -e msg -d lo -I $n -S $sz -P $P_FI $HOST" \
				"slat|$pl|fi_pingpong tcp|$sz" fi_lat "$sz"
			external iperf3 "sweep_iperf3_${pl}_${sz}_$rep" "$P_IP" "iperf3 -s -1 -B $HOST -p $P_IP" \
				"iperf3 -c $HOST -B $HOST -p $P_IP -l $sz -t $SWEEP_SECS -J" "sbw|$pl|iperf3|$sz" iperf3_mbs
		done
	done
done
log "sweep measured in $((SECONDS - T_SWEEP)) s"

# sweep_table METRIC PLACEMENT SERIES_FN -> TSV: size, then one column per series
sweep_table() {
	local metric=$1 pl=$2 fn=$3 sz name v line
	line=size
	while IFS='|' read -r name _; do line+=$'\t'"$name"; done < <("$fn" "$pl")
	echo "$line"
	for sz in $SWEEP_SIZES; do
		line=$sz
		while IFS='|' read -r name _; do
			v=$(median "$metric|$pl|$name|$sz")
			line+=$'\t'"${v:--}"
		done < <("$fn" "$pl")
		echo "$line"
	done
}
PLOT_NOTE="$("$HERE/../plot.sh" note), SWEEP_REPS=$SWEEP_REPS"
export PLOT_NOTE
for pl in $PLACEMENTS; do
	place="both processes on CPU 0"; [ "$pl" = cross ] && place="server on CPU 0, client on CPU 1"
	sweep_table slat "$pl" lat_series > "$OUT/sweep_latency_$pl.tsv"
	sweep_table sbw "$pl" bw_series > "$OUT/sweep_bandwidth_$pl.tsv"
	"$HERE/../plot.sh" lines "$OUT/sweep_latency_$pl.tsv" "$OUT/latency_$pl.png" \
		"Latency over 127.0.0.1 ($place): libndk send_lat and anchors, median" "message size [bytes]" \
		"half round trip [us]" logy
	"$HERE/../plot.sh" lines "$OUT/sweep_bandwidth_$pl.tsv" "$OUT/bandwidth_$pl.png" \
		"Bandwidth over 127.0.0.1 ($place): libndk write_bw and anchors, median" "message size [bytes]" \
		"MB/s (2^20 bytes)" logy
done
echo "$PLOT_NOTE" > "$OUT/plot-note.txt"
echo "sweep tables and plots: $OUT/sweep_*.tsv, $OUT/*.png"
