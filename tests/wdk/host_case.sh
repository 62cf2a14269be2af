#!/usr/bin/env bash
# Runs ndkhost on a test driver and checks its exit status and that its
# report matches every pattern (extended regular expressions, one line each):
#   host_case.sh NDKHOST DRIVER CASE EXPECTED_EXIT PATTERN...
# NDKHOST_OPTS holds extra ndkhost options.
set -uo pipefail
host=$1 driver=$2 case=$3 want=$4
shift 4
# shellcheck disable=SC2086 # the options are a word list
out=$(timeout 120 "$host" ${NDKHOST_OPTS:-} "$driver" "$case" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" != "$want" ]; then
	echo "FAIL: ndkhost exited $rc, expected $want"
	exit 1
fi
for pattern in "$@"; do
	if ! grep -qE -- "$pattern" <<<"$out"; then
		echo "FAIL: no line of the report matches: $pattern"
		exit 1
	fi
done
echo "ok: case $case: exit $rc, the report matches $# pattern(s)"
