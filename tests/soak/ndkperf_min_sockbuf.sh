#!/usr/bin/env bash
# The long version of tools.ndkperf_*_min_sockbuf: every ndkperf test at
# every size (-a) with the smallest socket buffers Linux allows on both ends
# (--sockbuf=1), N iterations per size. Prints each test's exit status and
# time, and keeps the tables.
#   tests/soak/ndkperf_min_sockbuf.sh [BUILD_DIR] [N]     (default: build 20)
# Environment: TESTS="send_lat ..." (default: all six), OUT=/tmp/... (logs),
# TIMEOUT_MS=60000 (ndkperf --timeout). Exit status 0 when every run ended
# well (write_lat's 3, "the adapter cannot run it", counts as skipped).
set -u -o pipefail
BUILD=${1:-build}
N=${2:-20}
TESTS=${TESTS:-send_lat send_bw write_lat write_bw read_lat read_bw}
OUT=${OUT:-/tmp/ndkperf-min-sockbuf-$(date +%Y%m%d-%H%M%S)}
TIMEOUT_MS=${TIMEOUT_MS:-60000}
NDKPERF=$BUILD/tools/ndkperf/ndkperf
[ -x "$NDKPERF" ] || { echo "no $NDKPERF: build first" >&2; exit 1; }
mkdir -p "$OUT"
status=0
for t in $TESTS; do
	start=$(date +%s.%N)
	# Bounded: the largest size moves N x 8 MiB at a few MB/s at worst.
	timeout $((600 + N * 30)) "$NDKPERF" "$t" --loopback --sockbuf=1 -a -n "$N" --warmup=2 \
		--timeout="$TIMEOUT_MS" --no-progress >"$OUT/$t.log" 2>&1
	rc=$?
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	case $rc in
	0) verdict=ok ;;
	3) verdict="skipped (the adapter cannot run it)" ;;
	*) verdict="FAILED (exit $rc)"; status=1 ;;
	esac
	printf '%-10s %-40s %8.1f s   %s\n' "$t" "$verdict" "$secs" "$OUT/$t.log"
done
exit $status
