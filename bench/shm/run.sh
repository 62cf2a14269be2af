#!/usr/bin/env bash
# run.sh BUILD_DIR - the shared-memory transport (docs/shm.md) beside the
# iWARP transport over loopback TCP and the UCX anchors for same-host
# messaging (UCX_TLS=posix,cma) and the machine's floor (line_pingpong),
# all measured in this run, client on
# CPU_CLIENT and server on CPU_SERVER. Prints one Markdown table of the
# targets and one of the size sweep (8 B .. 16 MiB) for both transports.
# bench/datapath/run.sh may call it for its shared-memory rows.
#
# Environment:
#   SECS=1           seconds per bandwidth / rate run
#   LAT_ITERS=20000  ping-pong iterations of the latency rows (ndkperf, UCX)
#   SIZES="8 64 512 2048 4096 16384 32768 65536 262144 1048576 4194304 16777216"
#                    the sweep (both sides of SHM_RING_MAX, 16 KiB, and of
#                    SHM_SPLIT_MIN, 64 KiB: docs/shm.md)
#   CPU_CLIENT=0 CPU_SERVER=1
#   MEMCPY_BW        a memcpy bandwidth program ("memcpy_bw SIZE THREADS",
#                    printing "GB/s=VALUE"); its row is left out when unset
#   OUT=/tmp/ndk-shm-DATE  raw logs
# Every process runs under timeout(1); UCX servers are stopped by their PID;
# UCX runs only when ucx_perftest is installed (Debian: apt-get install
# ucx-utils). What the anchors measure, and the machine's ceiling rows
# (copy_ceiling): docs/shm.md, Bandwidth.
set -u -o pipefail

BUILD=${1:?usage: run.sh BUILD_DIR}
SECS=${SECS:-1}
LAT_ITERS=${LAT_ITERS:-20000}
SIZES=${SIZES:-8 64 512 2048 4096 16384 32768 65536 262144 1048576 4194304 16777216}
CPU_CLIENT=${CPU_CLIENT:-0}
CPU_SERVER=${CPU_SERVER:-1}
OUT=${OUT:-/tmp/ndk-shm-$(date +%Y%m%d-%H%M%S)}
SHM=$BUILD/bench/shm/shm_perf
NDKPERF=$BUILD/tools/ndkperf/ndkperf
CEIL=$BUILD/bench/shm/copy_ceiling
LINE=$BUILD/bench/shm/line_pingpong
mkdir -p "$OUT"
export SHM_CPU_CLIENT=$CPU_CLIENT SHM_CPU_SERVER=$CPU_SERVER
export UCX_TLS=posix,cma UCX_NET_DEVICES=lo

log() { echo "$*" >>"$OUT/log"; }

# shm TEST SIZE [copy] -> the value shm_perf prints
shm() {
	local env=()
	[ "${3:-}" = copy ] && env=(NDK_SHM_COPY=1)
	env "${env[@]}" timeout 120 "$SHM" "$1" "$2" "$SECS" 2>>"$OUT/log" | tee -a "$OUT/log" | awk '{print $3}'
}

# tcp TEST SIZE [ndkperf options] -> t_typical (us) or average bandwidth (GB/s)
tcp() {
	local t=$1 s=$2
	shift 2
	local iters=$((s > 1048576 ? 50 : s >= 65536 ? 500 : LAT_ITERS / 4))
	local args=(--loopback -s "$s" --busy-poll --cpu-client="$CPU_CLIENT" --cpu-server="$CPU_SERVER")
	local secs=${SECS%.*}
	[ "${secs:-0}" -ge 1 ] || secs=1 # ndkperf takes whole seconds
	case $t in *_lat) args+=(-n "$iters" --wait=spin) ;; *) args+=(-D "$secs") ;; esac
	NDK_SHM=0 timeout 120 "$NDKPERF" "$t" "${args[@]}" "$@" 2>>"$OUT/log" | tee -a "$OUT/log" |
		awk -v t="$t" '$1 ~ /^[0-9]+$/ && NF >= 5 {
			if (t ~ /_lat$/) print $4; else if (t == "send_bw") print $5; else printf "%.3f\n", $4 * 1048576 / 1e9 }'
}

# ucx TEST SIZE FIELD -> the "Final:" line's field (3: p50 us, 7: MB/s, 9: msg/s)
UCX_PORT=13500
ucx() {
	command -v ucx_perftest >/dev/null || { echo "- (no ucx_perftest: apt-get install ucx-utils)"; return; }
	UCX_PORT=$((UCX_PORT + 1))
	timeout 60 taskset -c "$CPU_SERVER" ucx_perftest -p $UCX_PORT >>"$OUT/log" 2>&1 &
	local spid=$!
	local n=20000
	case $1 in *_lat) n=$LAT_ITERS ;; *) [ "$2" -ge 1048576 ] && n=2000 ;; esac
	local line
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		line=$(timeout 60 taskset -c "$CPU_CLIENT" ucx_perftest 127.0.0.1 -p $UCX_PORT -t "$1" -s "$2" -n "$n" 2>>"$OUT/log" | grep '^Final:')
		[ -n "$line" ] && break
		kill -0 $spid 2>/dev/null || break
		sleep 0.2 # the server is not listening yet: a bounded retry
	done
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	echo "$line" >>"$OUT/log"
	echo "$line" | awk -v f="$3" '{ v = $f; if (f == 7) v = v * 1048576 / 1e9; else if (f == 9) v = v / 1e6; printf "%.3f\n", v }'
}

# ceiling MODE -> "wall GB/s, per CPU second" of copy_ceiling MODE 1 MiB
ceiling() {
	[ -x "$CEIL" ] || { echo "-"; return; }
	timeout 60 "$CEIL" "$1" 1048576 "$SECS" 2>>"$OUT/log" | tee -a "$OUT/log" |
		awk '{ sub("GB/s=", "", $3); sub("cpu_GB/s=", "", $4); printf "%s (%s per CPU s)\n", $3, $4 }'
}

# floor MODE -> half a round trip (ns) of line_pingpong MODE
floor() {
	[ -x "$LINE" ] || { echo "-"; return; }
	timeout 60 "$LINE" "$1" 2>>"$OUT/log" | tee -a "$OUT/log" | sed -n 's/.*ns=//p'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

lat=$(shm lat 64); latc=$(shm lat 64 copy); late=$(shm lat_events 64)
wr=$(shm write_bw 1048576); wrc=$(shm write_bw 1048576 copy)
rd=$(shm read_bw 1048576); rdc=$(shm read_bw 1048576 copy)
rate=$(shm send_rate 64); ratec=$(shm send_rate 64 copy)
t_lat=$(tcp send_lat 64); t_late=$(tcp send_lat 64 --wait=events)
t_wr=$(tcp write_bw 1048576); t_rd=$(tcp read_bw 1048576); t_rate=$(tcp send_bw 64 -l 32)
u_lat=$(ucx tag_lat 64 3); u_put=$(ucx ucp_put_bw 1048576 7); u_rate=$(ucx tag_bw 64 9)
f_flag=$(floor flag); f_ring=$(floor ring)
m_bw=-
[ -n "${MEMCPY_BW:-}" ] && m_bw=$(timeout 60 taskset -c "$CPU_CLIENT" "$MEMCPY_BW" 1048576 1 2>>"$OUT/log" | grep -o 'GB/s=[0-9.]*' | tail -1 | cut -d= -f2)

echo "| measurement | shm | shm copy mode | iWARP over TCP | UCX posix,cma | target | shm / UCX |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
echo "| 64 B Send half round trip, busy polling (us, p50) | $lat | $latc | $t_lat | $u_lat (tag_lat) | <= UCX | $(ratio "$lat" "$u_lat") |"
echo "| half round trip floor: 1 / 2 cache lines each way, no libndk (us; line_pingpong flag / ring) | $(awk -v a="$f_flag" -v b="$f_ring" 'BEGIN { if (a + 0 > 0) printf "%.3f / %.3f", a / 1000, b / 1000; else print "-" }') | | | | reported | |"
echo "| 64 B Send half round trip, events (us, p50) | $late | - | $t_late | - | reported | - |"
echo "| 1 MiB RDMA Write (GB/s) | $wr | $wrc | $t_wr | $u_put (ucp_put_bw) | >= 0.9x UCX | $(ratio "$wr" "$u_put") |"
echo "| 1 MiB RDMA Read (GB/s) | $rd | $rdc | $t_rd | $u_put (ucp_put_bw) | >= 0.9x UCX | $(ratio "$rd" "$u_put") |"
echo "| 64 B Send rate, DEFER chains of 32 (Mmsg/s) | $rate | $ratec | $t_rate | $u_rate (tag_bw) | >= 10 | $(ratio "$rate" "$u_rate") |"
echo "| memcpy 1 MiB, one thread (GB/s) | $m_bw | | | | | |"
echo
echo "The machine's ceiling for 1 MiB between the two CPUs (copy_ceiling; GB/s, and GB per CPU second of the copying threads):"
echo
echo "| memcpy, one CPU | process_vm_readv, one CPU | process_vm_writev, one CPU | process_vm_readv, both CPUs (a half each) |"
echo "| --- | --- | --- | --- |"
echo "| $(ceiling memcpy) | $(ceiling pull) | $(ceiling push) | $(ceiling pull2) |"
echo
echo "| size | shm Send half RTT (us) | TCP Send half RTT (us) | shm Write (GB/s) | TCP Write (GB/s) |"
echo "| --- | --- | --- | --- | --- |"
for s in $SIZES; do
	echo "| $s | $(shm lat "$s") | $(tcp send_lat "$s") | $(shm write_bw "$s") | $(tcp write_bw "$s") |"
done
echo
echo "raw logs: $OUT"
