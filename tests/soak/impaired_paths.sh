#!/usr/bin/env bash
# The long version of netns.test_impaired_paths: every impairment (delay
# and jitter, loss, reordering, duplication, all together, then the path
# dying) with SEEDS seeds of the impairer (tests/netns/impair.c), each case
# streaming ROUNDS times 1.5 MiB each way in Writes, Reads and Sends with
# the data checked. Needs root (network namespaces).
#   tests/soak/impaired_paths.sh [BUILD_DIR] [SEEDS] [ROUNDS]
# (defaults: build, 20 seeds from 1, 10 rounds). FIRST_SEED=N starts
# elsewhere; OUT=DIR keeps the logs (default /tmp/impaired-paths-<date>). Exit 0 when every run passed; a failing seed is printed and
# replays with NDK_IMPAIR_SEED=N NDK_IMPAIR_ROUNDS=R BUILD/tests/netns_test_impaired_paths.
set -u
BUILD=${1:-build}
SEEDS=${2:-20}
ROUNDS=${3:-10}
FIRST=${FIRST_SEED:-1}
OUT=${OUT:-/tmp/impaired-paths-$(date +%Y%m%d-%H%M%S)}
BIN=$BUILD/tests/netns_test_impaired_paths
[ -x "$BIN" ] || { echo "no $BIN: build first" >&2; exit 1; }
mkdir -p "$OUT"
failed=0
for ((seed = FIRST; seed < FIRST + SEEDS; seed++)); do
	# Each case is bounded by its own watchdog (per stream); this bounds
	# the run as a whole.
	if NDK_IMPAIR_SEED=$seed NDK_IMPAIR_ROUNDS=$ROUNDS timeout $((120 + 60 * ROUNDS)) "$BIN" >"$OUT/seed-$seed.log" 2>&1; then
		echo "seed $seed: passed ($(grep -c '^PASS' "$OUT/seed-$seed.log") cases)"
	else
		rc=$?
		echo "seed $seed: FAILED (exit $rc), log $OUT/seed-$seed.log"
		[ "$rc" = 77 ] && { cat "$OUT/seed-$seed.log"; exit 77; }
		failed=$((failed + 1))
	fi
done
echo "$failed of $SEEDS seeds failed"
[ "$failed" = 0 ]
