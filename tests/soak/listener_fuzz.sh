#!/usr/bin/env bash
# The long version of soak.test_listener_fuzz: the same attack on one
# listener, with good clients in a loop, for SECONDS (default 60; the run
# ends earlier if the test's request records run out, and says so).
#   tests/soak/listener_fuzz.sh [BUILD_DIR] [SECONDS]
set -u
BUILD=${1:-build}
BIN=$BUILD/tests/soak_test_listener_fuzz
[ -x "$BIN" ] || { echo "no $BIN: build first" >&2; exit 1; }
FUZZ_SECONDS=${2:-60} timeout $((${2:-60} + 120)) "$BIN"
