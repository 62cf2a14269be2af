#!/usr/bin/env bash
# The long version of soak.test_many_connections: CONNS (default 10000)
# concurrent connections between two processes, each moving one message.
#   tests/soak/many_connections.sh [BUILD_DIR] [CONNS]
set -u
BUILD=${1:-build}
BIN=$BUILD/tests/soak_test_many_connections
[ -x "$BIN" ] || { echo "no $BIN: build first" >&2; exit 1; }
CONNS=${2:-10000} timeout 900 "$BIN"
