#!/usr/bin/env bash
# Runs libndk's libFuzzer targets and prints, per target, the executions,
# the coverage, the corpus size and what was found.
#
#   fuzz/campaign.sh [-t SECONDS] [-n EXECUTIONS] [-j JOBS] [-b BUILD] [-o OUT] [-x FLAG]... [-m | -M] [TARGET...]
#
#   -t  time per target (default 60 s; 0: no time limit, -n must be given)
#   -n  stop a target after this many executions (default: none)
#   -j  targets fuzzed at the same time, one process each (default 1)
#   -b  the fuzz build (default build-fuzz; configured when absent, with
#       CC=clang and -DNDK_FUZZ=ON, and the targets to run are brought up
#       to date, nothing else); a build configured with
#       -DNDK_FUZZ_ASAN=OFF runs about twice as fast without ASan's checks:
#       give it an OUT of its own and minimise with -M -b build-fuzz
#       (docs/fuzzing.md, "With ASan or with UBSan alone")
#   -o  where runs keep their new corpus units, crash artifacts and logs
#       (default /tmp/ndk-fuzz-campaign); a second campaign with the same
#       directory continues from there, and the summary's "all runs" column
#       adds up the executions of every run there (one log per run)
#   -x  one more libFuzzer flag for every run (repeatable), e.g. -x -entropic=0:
#       plain scheduling instead of the entropic one, whose per-feature
#       bookkeeping is two fifths of fuzz_fpdu_stream's time (docs/fuzzing.md)
#   -m  afterwards, minimise each target's committed corpus
#       (fuzz/corpus/NAME) together with the units this run found: libFuzzer
#       -merge=1 keeps the smallest set of files that covers every feature
#   -M  only that, with what earlier runs left in OUT (no fuzzing)
#   TARGET  names without the fuzz_ prefix (default: every fuzz/fuzz_*.c)
#
# The machine is usually shared: run it as `nice -n 19 fuzz/campaign.sh ...`.
# Exit status 1 when any target crashed, leaked, timed out or ran out of
# memory; the artifact that did it is printed (replay: BUILD/fuzz/fuzz_NAME FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

time_s=60
execs=0
jobs=1
build=build-fuzz
out=/tmp/ndk-fuzz-campaign
minimize=0
fuzz=1
extra=()
while getopts "t:n:j:b:o:x:mM" opt; do
	case $opt in
	t) time_s=$OPTARG ;;
	n) execs=$OPTARG ;;
	j) jobs=$OPTARG ;;
	b) build=$OPTARG ;;
	o) out=$OPTARG ;;
	x) extra+=("$OPTARG") ;;
	m) minimize=1 ;;
	M) minimize=1; fuzz=0 ;;
	*) sed -n '2,31p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ "$time_s" = 0 ] && [ "$execs" = 0 ]; then
	echo "campaign: -t 0 needs -n" >&2
	exit 2
fi

if [ ! -d "$build/fuzz" ]; then
	CC=clang cmake -S . -B "$build" -DNDK_FUZZ=ON >/dev/null
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for f in fuzz/fuzz_*.c; do
		targets+=("$(basename "$f" .c | sed 's/^fuzz_//')")
	done
fi
# Only the targets that run (and what they link), as CI builds them: the
# rest of the tree (tests, tools, benchmarks) takes minutes more.
cmake --build "$build" -j"$jobs" --target "${targets[@]/#/fuzz_}" >/dev/null
[ ${#targets[@]} -gt 0 ] || { echo "campaign: no fuzz targets in $build/fuzz" >&2; exit 2; }

# One target: fuzz into OUT/NAME/corpus with the committed corpus as seeds.
run_one() {
	local name=$1 bin=$build/fuzz/fuzz_$1 dir=$out/$1 log
	mkdir -p "$dir/corpus" "$dir/artifacts" "fuzz/corpus/$name"
	log=$dir/log.$(date +%Y%m%dT%H%M%S)
	ln -sfn "$(basename "$log")" "$dir/log"
	local args=(-print_final_stats=1 -timeout=25 -artifact_prefix="$dir/artifacts/")
	[ "$time_s" != 0 ] && args+=(-max_total_time="$time_s")
	[ "$execs" != 0 ] && args+=(-runs="$execs")
	args+=("${extra[@]}")
	local rc=0
	"$bin" "${args[@]}" "$dir/corpus" "fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
	echo "$rc" >"$dir/rc"
}

fuzz_all() {
	local pids=() t p
	for t in "${targets[@]}"; do
		[ -x "$build/fuzz/fuzz_$t" ] || { echo "campaign: no target fuzz_$t in $build/fuzz" >&2; exit 2; }
		while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
			wait -n || true
		done
		echo "campaign: fuzz_$t started ($(date +%T))"
		run_one "$t" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || true
	done
}

# Counts: libFuzzer's final statistics, its last status line (cov: edges
# reached in instrumented code, ft: features, corp: units/bytes in memory),
# and the files on disk.
summary() {
	local t dir log units total rate last cov ft secs files found rc result
	printf '\n%-16s %12s %13s %9s %6s %7s %16s %8s  %s\n' target executions "all runs" exec/s cov ft \
		"corpus: kept+new" seconds result
	for t in "${targets[@]}"; do
		dir=$out/$t
		log=$dir/log
		units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
		total=$(cat "$dir"/log.* | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s + 0}')
		rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
		last=$(grep -E '^#[0-9]+' "$log" | grep ' cov: ' | tail -n1 || true)
		cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
		ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
		secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n1)
		files="$(find "fuzz/corpus/$t" -type f | wc -l)+$(find "$dir/corpus" -type f | wc -l)"
		found=$(find "$dir/artifacts" -type f | wc -l)
		rc=$(cat "$dir/rc")
		result=ok
		if [ "$rc" != 0 ] || [ "$found" != 0 ]; then
			result="FOUND $found (exit $rc), see $dir/artifacts and $log"
			status=1
		fi
		printf '%-16s %12s %13s %9s %6s %7s %16s %8s  %s\n' "$t" "${units:-?}" "$total" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
			"$files" "${secs:-?}" "$result"
	done
}

status=0
if [ "$fuzz" = 1 ]; then
	fuzz_all
	summary
fi

if [ "$minimize" = 1 ]; then
	echo
	for t in "${targets[@]}"; do
		dir=$out/$t
		rm -rf "$dir/merged"
		mkdir -p "$dir/merged"
		if ! "$build/fuzz/fuzz_$t" -merge=1 -timeout=25 "$dir/merged" "fuzz/corpus/$t" "$dir/corpus" \
			>"$dir/merge.log" 2>&1 || [ -z "$(ls -A "$dir/merged")" ]; then
			echo "campaign: merging $t failed, its corpus is unchanged (see $dir/merge.log)"
			status=1
			continue
		fi
		before=$(find "fuzz/corpus/$t" -type f | wc -l)
		rm -f "fuzz/corpus/$t"/*
		cp "$dir/merged"/* "fuzz/corpus/$t"/
		after=$(find "fuzz/corpus/$t" -type f | wc -l)
		echo "campaign: fuzz/corpus/$t minimised: $before committed + $(find "$dir/corpus" -type f | wc -l) found -> $after files, $(cat "fuzz/corpus/$t"/* | wc -c) bytes"
	done
fi
exit $status
