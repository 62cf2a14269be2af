#!/usr/bin/env bash
# ab.sh A B [ROUNDS] - two builds of shm_perf (A: the baseline, B: the
# change) in paired, interleaved runs: each round runs both, in an order
# that alternates from round to round, so that a machine whose load moves
# weighs on both alike. Prints one Markdown row per test: the medians of
# A and B and B/A, the ratio of each round's pair's values (their median,
# lowest and highest). On a shared machine only the ratio means much
# (docs/shm.md, Small messages).
#
#   A, B    shm_perf executables (or build directories holding bench/shm/shm_perf)
#   ROUNDS  pairs per test (default 9)
# Environment: TESTS ("lat 64,send_rate 64" by default: comma-separated
# "TEST SIZE" pairs), SECS (seconds per run, default 1), PRIO (a command
# both runs go through, e.g. "nice -n -10": a larger share of the CPUs
# than the machine's other work, the same for A and B), and shm_perf's
# SHM_CPU_CLIENT / SHM_CPU_SERVER.
set -u -o pipefail

exe() { if [ -d "$1" ]; then echo "$1/bench/shm/shm_perf"; else echo "$1"; fi; }
A=$(exe "${1:?usage: ab.sh A B [ROUNDS]}")
B=$(exe "${2:?usage: ab.sh A B [ROUNDS]}")
ROUNDS=${3:-9}
TESTS=${TESTS:-lat 64,send_rate 64}
SECS=${SECS:-1}
read -r -a PRIO <<<"${PRIO:-}"

# one BIN TEST SIZE -> the value shm_perf prints (3rd field) and, for
# send_rate, the sender's and the receiver's CPU ns per message; or nothing
one() {
	timeout 120 "${PRIO[@]}" "$1" "$2" "$3" "$SECS" 2>/dev/null |
		awk '{ v = $3; if ($5 == "(sender") { s = $6; sub(",", "", s); v = v " " s " " $8 } print v }'
}

median() { sort -g | awk '{v[NR] = $1} END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

echo "| test | A (median) | B (median) | B/A of the pairs: median (lowest, highest) | pairs |"
echo "| --- | --- | --- | --- | --- |"
IFS=, read -r -a tests <<<"$TESTS"
for t in "${tests[@]}"; do
	read -r name size <<<"$t"
	ra=() rb=()
	for ((i = 0; i < ROUNDS; i++)); do
		if ((i % 2)); then
			b=$(one "$B" "$name" "$size"); a=$(one "$A" "$name" "$size")
		else
			a=$(one "$A" "$name" "$size"); b=$(one "$B" "$name" "$size")
		fi
		[ -n "$a" ] && [ -n "$b" ] || continue
		ra+=("$a") rb+=("$b")
	done
	# Column k of the runs: the value, then (send_rate) the CPU times.
	for k in 1 2 3; do
		label="$name $size"
		[ $k = 2 ] && label="$name $size: sender CPU ns per message"
		[ $k = 3 ] && label="$name $size: receiver CPU ns per message"
		as=() bs=() rs=()
		for ((i = 0; i < ${#ra[@]}; i++)); do
			a=$(echo "${ra[$i]}" | awk -v k=$k '{print $k}') b=$(echo "${rb[$i]}" | awk -v k=$k '{print $k}')
			[ -n "$a" ] && [ -n "$b" ] || continue
			as+=("$a") bs+=("$b")
			rs+=("$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.3f", b / a }')")
		done
		[ ${#rs[@]} -gt 0 ] || continue
		ma=$(printf '%s\n' "${as[@]}" | median)
		mb=$(printf '%s\n' "${bs[@]}" | median)
		mr=$(printf '%s\n' "${rs[@]}" | median)
		lo=$(printf '%s\n' "${rs[@]}" | sort -g | head -1)
		hi=$(printf '%s\n' "${rs[@]}" | sort -g | tail -1)
		echo "| $label | $ma | $mb | $mr ($lo, $hi) | ${#rs[@]} |"
	done
done
