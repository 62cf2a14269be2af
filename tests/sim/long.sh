#!/usr/bin/env bash
# The sim's long mode: the scripted exchange cut at every byte offset of both
# directions, both ways (end of stream, reset), for many seeds; each seed
# picks its own configuration (MULPDU, IRD/ORD, gated responder, Read RTR)
# and randomness (tests/sim/test_sim_faults.c). Not part of the default test
# run, which cuts one fixed configuration at every offset and samples one
# seed's offsets.
#
#   tests/sim/long.sh [-n SEEDS] [-f FIRST] [-j JOBS] [-b BUILD] [-o OUT] [--full]
#
#   -n  seeds to run (default 10000)
#   -f  the first seed (default random); seeds FIRST .. FIRST+SEEDS-1
#   -j  processes at once, each taking an equal share of the seeds (default 1)
#   -b  the build with the tests (default build; built first)
#   -o  where each process writes its log (default /tmp/ndk-sim-long)
#   --full  the full exchange script (payloads of many FPDUs), not the compact one
#
# One seed takes from 20 s (MULPDU 128-1000) to hours (MULPDU 65535, every
# offset of some 400 KB per direction) of one core with the compact script;
# the summary says how many seeds and runs were done. The machine is usually
# shared: run it as `nice -n 19 tests/sim/long.sh ...`. Exit status 1 when
# any run failed; the log has each failure and the command that replays it.
set -euo pipefail
cd "$(dirname "$0")/../.."

seeds=10000
first=
jobs=1
build=build
out=/tmp/ndk-sim-long
full=
while [ $# -gt 0 ]; do
	case $1 in
	-n) seeds=$2; shift 2 ;;
	-f) first=$2; shift 2 ;;
	-j) jobs=$2; shift 2 ;;
	-b) build=$2; shift 2 ;;
	-o) out=$2; shift 2 ;;
	--full) full=--full; shift ;;
	*) sed -n '2,24p' "$0" >&2; exit 2 ;;
	esac
done
[ -n "$first" ] || first=$(( $(od -An -N4 -tu4 /dev/urandom) ))

cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$jobs" --target sim_test_sim_faults >/dev/null
bin=$build/tests/sim_test_sim_faults
mkdir -p "$out"
rm -f "$out"/part-*.log

echo "sim long mode: seeds $first .. $((first + seeds - 1)), $jobs process(es), logs in $out ($(date +%T))"
start=$(date +%s)
share=$(( (seeds + jobs - 1) / jobs ))
pids=()
for ((j = 0; j < jobs; j++)); do
	s=$((first + j * share))
	n=$(( seeds - j * share < share ? seeds - j * share : share ))
	[ "$n" -gt 0 ] || break
	"$bin" --seeds "$n" --first "$s" $full >"$out/part-$j.log" 2>&1 &
	pids+=($!)
done
status=0
for p in "${pids[@]}"; do
	wait "$p" || status=1
done

# Per seed the test prints "seed S: A + B bytes, R runs, F failed, T s".
cat "$out"/part-*.log | awk -v elapsed=$(( $(date +%s) - start )) '
	/^\[faults\] seed [0-9]+:/ {
		n++; bytes += $4 + $6; runs += $8; failed += $10; if ($10 > 0) bad = bad " " substr($3, 1, length($3) - 1)
	}
	END {
		printf "sim long mode: %d seeds done, %d cut runs, %d failed, %d stream bytes cut at every offset, %d s\n",
			n, runs, failed, bytes, elapsed
		if (bad != "") printf "failed seeds:%s\n", bad
	}'
if [ "$status" != 0 ]; then
	echo "sim long mode: failures; see $out/part-*.log (each names the run seed and the replay command)"
fi
exit $status
