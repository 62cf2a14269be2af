#!/usr/bin/env bash
# engines.sh - what several progress engines add (docs/architecture.md,
# Engines): one engine against two, in one process with two views of "lo",
# on two CPUs. Builds nothing: build first (cmake --build build), then
#
#   bench/engines.sh [BUILD_DIR]      # default BUILD_DIR: build
#
# Measured, each the median of REPS runs:
#   - multiqp: the aggregate 64 B message rate and 1 MiB bandwidth of 2, 4
#     and 16 QPs (RDMA Writes, a window of requests per QP, driven from the
#     CQ callbacks), with MaxEngines 1 and 2; target: 2 engines >= 1.6x the
#     rate of 1;
#   - connrate -m inflight -q 64 with MaxEngines 1 and 2 against raw TCP
#     (tcp_connrate, same layout); target: 2 engines >= 1.0x raw TCP.
#     tcp_connrate --mpa-shape, raw TCP carrying libndk's exchange (MPA
#     Request, Reply, RTR, the client closing after the server's FIN), shows
#     what of the gap is the protocol's and what is libndk's.
#
# Environment knobs:
#   CPUS=0,1   the two CPUs every run is confined to (taskset -c)
#   DUR=3      seconds per measurement
#   REPS=3     repetitions
#   QPS="2 4 16"
#   OUT=/tmp/bench-engines-<date>   raw outputs and the summary
#
# Every run is bounded (timeout(1) and the programs' own watchdogs). Exit
# status: 0 when every run succeeded (whether or not the targets are met),
# 1 otherwise.
set -u -o pipefail

BUILD=${1:-build}
CPUS=${CPUS:-0,1}
DUR=${DUR:-3}
REPS=${REPS:-3}
QPS=${QPS:-2 4 16}
OUT=${OUT:-/tmp/bench-engines-$(date +%Y%m%d-%H%M%S)}
MULTIQP=$BUILD/bench/multiqp
CONNRATE=$BUILD/bench/connrate
TCPRATE=$BUILD/bench/tcp_connrate
FAILED=0
# The engines are what is measured: both views of "lo" live in this one
# process, which the same-host fast path (docs/shm.md) would otherwise take.
export NDK_SHM=0

for b in "$MULTIQP" "$CONNRATE" "$TCPRATE"; do
	if [ ! -x "$b" ]; then
		echo "engines.sh: $b not found: build first (cmake --build $BUILD)" >&2
		exit 1
	fi
done
mkdir -p "$OUT"
# 64 connections in flight and their TIME_WAIT leftovers: ask for 8192 descriptors.
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 8192 ]; then
	ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fi

median() { printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }

# run NAME KEY CMD...: runs CMD REPS times, prints the median of KEY=.
run() {
	local name=$1 key=$2 vals=() i v; shift 2
	for i in $(seq "$REPS"); do
		local log="$OUT/$name.$i.log"
		if ! timeout $((DUR * 4 + 60)) taskset -c "$CPUS" "$@" >"$log" 2>&1; then
			echo "engines.sh: $name run $i failed (see $log)" >&2
			FAILED=1
		fi
		v=$(sed -n "s/.*[[:space:]]$key=\([^[:space:]]*\).*/\1/p" "$log" | tail -1)
		vals+=("$v")
	done
	median "${vals[@]}"
}

{
	echo "# engines.sh $(date -u +%Y-%m-%dT%H:%MZ), CPUs $CPUS, ${DUR}s x $REPS (median)"
	echo
	echo "| QPs | 64 B msgs/s, 1 engine | 2 engines | ratio (>= 1.6) | 1 MiB MB/s, 1 engine | 2 engines | ratio |"
	echo "| --- | --- | --- | --- | --- | --- | --- |"
} | tee "$OUT/summary.md"
for q in $QPS; do
	r1=$(run "rate-q$q-e1" msgs_per_s "$MULTIQP" --qps "$q" --size 64 --engines 1 -D "$DUR")
	r2=$(run "rate-q$q-e2" msgs_per_s "$MULTIQP" --qps "$q" --size 64 --engines 2 -D "$DUR")
	b1=$(run "bw-q$q-e1" MBps "$MULTIQP" --qps "$q" --size 1M --engines 1 -D "$DUR")
	b2=$(run "bw-q$q-e2" MBps "$MULTIQP" --qps "$q" --size 1M --engines 2 -D "$DUR")
	echo "| $q | $r1 | $r2 | $(ratio "$r2" "$r1") | $b1 | $b2 | $(ratio "$b2" "$b1") |" | tee -a "$OUT/summary.md"
done

t=$(run "conn-tcp" rate "$TCPRATE" -m inflight -q 64 -D "$DUR")
tm=$(run "conn-tcp-mpa" rate "$TCPRATE" -m inflight -q 64 -D "$DUR" --mpa-shape)
c1=$(run "conn-e1" rate "$CONNRATE" -m inflight -q 64 -D "$DUR" --engines 1)
c2=$(run "conn-e2" rate "$CONNRATE" -m inflight -q 64 -D "$DUR" --engines 2)
{
	echo
	echo "| connections/s, 64 in flight | raw TCP | raw TCP, MPA's exchange | 1 engine | 2 engines | 2 engines / TCP (>= 1.0) | 2 engines / TCP with MPA's exchange |"
	echo "| --- | --- | --- | --- | --- | --- | --- |"
	echo "| | $t | $tm | $c1 | $c2 | $(ratio "$c2" "$t") | $(ratio "$c2" "$tm") |"
	echo
	echo "raw outputs: $OUT"
} | tee -a "$OUT/summary.md"
exit $FAILED
