#!/usr/bin/env bash
# ab.sh NAME=BUILD_DIR[,VAR=VALUE...] ... - the same few data-path and
# connection measurements for several builds of libndk (say, before and
# after a change), or for one build run with different environment
# variables (say, spin0=build,NDK_ENGINE_SPIN_US=0 against spin50=build:
# bench/README.md, Engine spin), alternating them inside every repetition so that a
# slow spell of a shared machine hits each alike, with raw TCP measured in
# the same run as the anchor. Prints one table: medians, and each build's
# ratio to the first one. For a question like "does the verifier, switched
# off, cost anything?" (docs/verifier.md), where bench/datapath/run.sh's
# full matrix takes too long to repeat per build.
#
# Environment: REPS=5 repetitions; LAT_ITERS=10000; SECS=2 seconds per
# bandwidth or rate run; PLACEMENT=cross (server CPU 0, client CPU 1) or
# same (both on CPU 0); ONLY=KEY,... only those rows (keys: busy events
# defer write read conn1 conn2; default all), to repeat one question more
# often in the same time, with only the anchors those rows need (the
# others show -); OUT=/tmp/ndk-ab-DATE (raw logs and summary.md).
# The summary also lists every repetition's value, where a median of a
# bimodal row would hide the spread.
# The connection rate is measured in both of bench/run.sh's layouts: one
# process with two views of "lo" (one device and its two engines:
# bench/README.md, Engines) and two processes pinned like the data-path
# runs, as real peers are. The heap an idle connection costs (connrate
# --idle, one side: the connection plus its QP of depth 16/16) is the same
# in every repetition and is taken once per build.
#
# Each build needs tools/ndkperf/ndkperf and bench/connrate; the anchors
# come from the first build (bench/datapath/tcp_pingpong, tcp_stream,
# bench/tcp_connrate). NDK_SHM=0 by default, as in bench/run.sh and
# bench/datapath/run.sh: the rows are iWARP over loopback TCP, which the raw
# TCP anchors stand for; NDK_SHM=1 measures the same-host transport
# instead (bench/shm/ab.sh compares shm builds more finely).
set -u -o pipefail

[ $# -ge 2 ] || { echo "usage: ab.sh NAME=BUILD_DIR[,VAR=VALUE...] NAME=BUILD_DIR[,VAR=VALUE...] [...]" >&2; exit 2; }
REPS=${REPS:-5}
export NDK_SHM=${NDK_SHM:-0}
LAT_ITERS=${LAT_ITERS:-10000}
SECS=${SECS:-2}
PLACEMENT=${PLACEMENT:-cross}
OUT=${OUT:-/tmp/ndk-ab-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
case $PLACEMENT in
same) PIN="--cpu-server 0 --cpu-client 0"; SPIN="--busy-poll --wait=yield" ;;
cross) PIN="--cpu-server 0 --cpu-client 1"; SPIN="--busy-poll --wait=spin" ;;
*) echo "ab.sh: PLACEMENT is same or cross" >&2; exit 2 ;;
esac

names=() dirs=() envs=()
for a in "$@"; do
	names+=("${a%%=*}")
	spec=${a#*=}
	dirs+=("${spec%%,*}")
	# The variables, space-separated for env(1); none: an empty list.
	case $spec in *,*) envs+=("$(echo "${spec#*,}" | tr ',' ' ')") ;; *) envs+=("") ;; esac
	for b in tools/ndkperf/ndkperf bench/connrate; do
		[ -x "${spec%%,*}/$b" ] || { echo "ab.sh: ${spec%%,*}/$b not found (build it first)" >&2; exit 2; }
	done
done
ANCHOR=${dirs[0]}/bench/datapath

# The metrics: key|name|unit|which number of the log|command after the binary.
# ndkperf's latency rows have 8 numbers (t_typical is the 4th), bandwidth
# rows 5 (MB/s 4th, Mmsg/s 5th); connrate prints rate=N.
METRICS=(
	"busy|64 B half round trip, busy-poll|us|lat|send_lat --loopback -s 64 -n $LAT_ITERS $PIN $SPIN --no-progress"
	"events|64 B half round trip, events|us|lat|send_lat --loopback -s 64 -n $LAT_ITERS $PIN --wait=events --no-progress"
	"defer|64 B Send rate, DEFER chains, poll|Mmsg/s|rate|send_bw --loopback -s 64 -D $SECS $PIN --wait=yield --no-progress"
	"write|1 MiB Write bandwidth, busy-poll|MB/s|bw|write_bw --loopback -s 1048576 -D $SECS $PIN $SPIN --no-progress"
	"read|1 MiB Read bandwidth, busy-poll|MB/s|bw|read_bw --loopback -s 1048576 -D $SECS $PIN $SPIN --no-progress"
	"conn1|connections per second, 64 in flight, one process|conn/s|conn|-m inflight -q 64"
	"conn2|connections per second, 64 in flight, two processes|conn/s|conn2|-m inflight -q 64"
)
if [ -n "${ONLY:-}" ]; then
	keep=()
	for m in "${METRICS[@]}"; do
		case ",$ONLY," in *",${m%%|*},"*) keep+=("$m") ;; esac
	done
	[ ${#keep[@]} -gt 0 ] || { echo "ab.sh: ONLY=$ONLY names no row (busy events defer write read conn1 conn2)" >&2; exit 2; }
	METRICS=("${keep[@]}")
fi
# The anchors the kept rows are compared with (their kinds: lat -> tcp_pingpong,
# bw -> tcp_stream, conn -> tcp_connrate, conn2 -> tcp_connrate in two
# processes); ONLY= runs no anchor that none of its rows needs.
KINDS=" "
for m in "${METRICS[@]}"; do
	IFS='|' read -r _ _ _ kind _ <<< "$m"
	KINDS+="$kind "
done
needs() { [[ $KINDS == *" $1 "* ]]; }
PIN_S="taskset -c 0" PIN_C="taskset -c 1"
[ "$PLACEMENT" = same ] && PIN_C="taskset -c 0"
NEXT_PORT=31000
# shellcheck source=bench/wait_listening.sh
. "$(dirname "$0")/wait_listening.sh"

RUN_ENV=""
# two_procs BIN LOG ARGS...: BIN --server pinned as the server, BIN
# --client ARGS pinned as the client, on a port nothing uses (below the
# kernel's and libndk's ephemeral ranges, a fresh one each run, as
# bench/run.sh). The server is given 5 s to say it listens.
two_procs() {
	local bin=$1 log=$2 port spid
	shift 2
	port=$NEXT_PORT
	while [ -n "$(ss -Htan "( sport = :$port or dport = :$port )" 2>/dev/null)" ]; do port=$((port + 1)); done
	NEXT_PORT=$((port + 1))
	# shellcheck disable=SC2086 # RUN_ENV: the entry's variables, a list
	env $RUN_ENV timeout 70 $PIN_S "$bin" --server -p "$port" --lifetime 60 > "$log.server" 2>&1 &
	spid=$!
	wait_listening "$log.server" "$spid"
	# shellcheck disable=SC2086
	env $RUN_ENV timeout 60 $PIN_C "$bin" --client -p "$port" "$@" > "$log" 2>&1
	kill -INT "$spid" 2>/dev/null
	wait "$spid"
}
pick() { # KIND LOG
	case $1 in
	lat) awk 'NF == 8 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {v = $4} END {print v}' "$2" ;;
	bw) awk 'NF == 5 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {v = $4} END {print v}' "$2" ;;
	rate) awk 'NF == 5 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {v = $5} END {print v}' "$2" ;;
	conn | anchor) grep -o '\(rate\|typical\|MB_per_sec\)=[0-9.]*' "$2" | tail -1 | cut -d= -f2 ;;
	esac
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

declare -A VALS HEAP
for i in "${!names[@]}"; do
	# shellcheck disable=SC2086
	env ${envs[$i]} timeout 120 "${dirs[$i]}/bench/connrate" --idle 1000 > "$OUT/idle-${names[$i]}.log" 2>&1
	HEAP[$i]=$(sed -n 's/^RESULT .* side_bytes=\([0-9]*\) qp_bytes=\([0-9]*\).*/\1 \2/p' "$OUT/idle-${names[$i]}.log" |
		awk '{print $1 + $2}')
done
for rep in $(seq "$REPS"); do
	for m in "${!METRICS[@]}"; do
		IFS='|' read -r _ label unit kind args <<< "${METRICS[$m]}"
		for i in "${!names[@]}"; do
			log=$OUT/m$m-${names[$i]}-$rep.log
			RUN_ENV=${envs[$i]}
			if [ "$kind" = conn2 ]; then
				# shellcheck disable=SC2086 # an argument list
				two_procs "${dirs[$i]}/bench/connrate" "$log" -D "$SECS" $args
			elif [ "$kind" = conn ]; then
				# shellcheck disable=SC2086 # an argument list
				env $RUN_ENV timeout 60 "${dirs[$i]}/bench/connrate" -D "$SECS" $args > "$log" 2>&1
			else
				# shellcheck disable=SC2086
				env $RUN_ENV timeout 60 "${dirs[$i]}/tools/ndkperf/ndkperf" $args > "$log" 2>&1
			fi
			v=$(pick "${kind%2}" "$log")
			[ -n "$v" ] && VALS[$m,$i]+=" $v" || echo "ab.sh: no result in $log" >&2
		done
	done
	# The anchors, in the same repetition, with no entry's variables.
	RUN_ENV=""
	needs lat && timeout 60 "$ANCHOR/tcp_pingpong" -s 64 -n "$LAT_ITERS" $PIN > "$OUT/a-lat-$rep.log" 2>&1 &&
		VALS[alat]+=" $(pick anchor "$OUT/a-lat-$rep.log")"
	needs bw && timeout 60 "$ANCHOR/tcp_stream" -s 1048576 -D "$SECS" $PIN > "$OUT/a-bw-$rep.log" 2>&1 &&
		VALS[abw]+=" $(pick anchor "$OUT/a-bw-$rep.log")"
	needs conn && timeout 60 "${dirs[0]}/bench/tcp_connrate" -D "$SECS" -m inflight -q 64 > "$OUT/a-conn-$rep.log" 2>&1 &&
		VALS[aconn]+=" $(pick anchor "$OUT/a-conn-$rep.log")"
	needs conn2 && two_procs "${dirs[0]}/bench/tcp_connrate" "$OUT/a-conn2-$rep.log" -D "$SECS" -m inflight -q 64 &&
		VALS[aconn2]+=" $(pick anchor "$OUT/a-conn2-$rep.log")"
	echo "ab.sh: repetition $rep of $REPS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

{
	echo "A/B, $PLACEMENT placement, $REPS repetitions alternating the builds, medians, NDK_SHM=$NDK_SHM;"
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	printf '| metric |'
	for n in "${names[@]}"; do printf ' %s |' "$n"; done
	for n in "${names[@]:1}"; do printf ' %s / %s |' "$n" "${names[0]}"; done
	echo
	printf '| --- |'
	for _ in "${names[@]}" "${names[@]:1}"; do printf ' --- |'; done
	echo
	for m in "${!METRICS[@]}"; do
		IFS='|' read -r _ label unit _ _ <<< "${METRICS[$m]}"
		printf '| %s (%s) |' "$label" "$unit"
		meds=()
		for i in "${!names[@]}"; do
			meds[i]=$(echo "${VALS[$m,$i]:-}" | median)
			printf ' %s |' "${meds[i]:--}"
		done
		for i in "${!names[@]}"; do
			[ "$i" = 0 ] && continue
			awk -v a="${meds[0]:-0}" -v b="${meds[i]:-0}" 'BEGIN {printf(a > 0 && b > 0 ? " %.2f |" : " - |", b / a)}'
		done
		echo
	done
	printf '| heap bytes per idle connection, one side with its QP (bytes) |'
	for i in "${!names[@]}"; do printf ' %s |' "${HEAP[$i]:--}"; done
	for i in "${!names[@]}"; do
		[ "$i" = 0 ] && continue
		awk -v a="${HEAP[0]:-0}" -v b="${HEAP[$i]:-0}" 'BEGIN {printf(a > 0 && b > 0 ? " %.2f |" : " - |", b / a)}'
	done
	echo
	echo
	amed() { local v; v=$(echo "${VALS[$1]:-}" | median); echo "${v:--}"; } # "-": not run (ONLY=)
	echo "Anchors (same run): tcp_pingpong 64 B $(amed alat) us;" \
		"tcp_stream 1 MiB $(amed abw) MB/s;" \
		"tcp_connrate, 64 in flight, $(amed aconn) conn/s in one process," \
		"$(amed aconn2) conn/s in two."
	echo
	echo "Every repetition, in order:"
	echo
	for m in "${!METRICS[@]}"; do
		IFS='|' read -r key _ _ _ _ <<< "${METRICS[$m]}"
		for i in "${!names[@]}"; do echo "- $key ${names[$i]}:${VALS[$m,$i]:-}"; done
	done
	echo "- anchors tcp_pingpong:${VALS[alat]:-}; tcp_stream:${VALS[abw]:-}; tcp_connrate:${VALS[aconn]:-}; two processes:${VALS[aconn2]:-}"
} | tee "$OUT/summary.md"
