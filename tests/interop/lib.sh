# shellcheck shell=bash
# Shared by the siw interop drivers (tests/interop/siw_*.sh), which CTest runs
# as: bash DRIVER NDK_PEER CM_PEER|none PROJECT_ROOT
#
# Skips (exit 77) when the harness cannot be used; the rest (processes,
# bounded waits, assertions) is common.sh's.

set -u

NDK_PEER=${1:?ndk_peer path}
CM_PEER=${2:?cm_peer path or none}
PROJECT=${3:?project root}
HARNESS=${NDK_INTEROP_DIR:-$PROJECT/../shared/interop}
TEST_NAME=$(basename "$0" .sh)

# shellcheck source=tests/interop/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
GUEST_TIMEOUT=180

need_harness
[ -x "$NDK_PEER" ] || {
	echo "ERROR: no ndk_peer at $NDK_PEER"
	exit 1
}

# libndk's own trace (stderr, in NAME.err) makes a failure readable without
# a second run.
export NDK_DEBUG=${NDK_DEBUG-1}

setup_work interop

need_cm_peer() {
	if [ "$CM_PEER" = none ] || [ ! -x "$CM_PEER" ]; then
		skip "cm_peer was not built: install librdmacm-dev and libibverbs-dev and re-run cmake"
	fi
}

# wait_line FILE REGEX SECONDS [NAME]: true once a line of FILE matches the
# extended REGEX; false after SECONDS, or as soon as process NAME has ended
# without printing it.
wait_line() { wait_count "$1" "$2" 1 "$3" "${4:-}"; }

# listen_port NAME: the port of "LISTENING port=P" in NAME.out.
listen_port() {
	sed -n 's/^LISTENING port=\([0-9]*\)$/\1/p' "$WORK/$1.out" | head -n 1
}

# hexof TEXT: TEXT's octets in lower-case hex, as the peers print them.
hexof() { printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'; }

# Shell functions for the guest scripts (busybox sh). run NAME CMD... runs
# CMD and prefixes each of its lines, and a final "rc=N", with "NAME: ".
# wait_listen PORT... returns once ss shows each port listening (max ~30 s).
# Used by the drivers, expanded into their guest scripts as it is.
# shellcheck disable=SC2034,SC2016
GUEST_LIB="
$GUEST_RUN_FN"'
wait_listen() {
	i=0
	for p in "$@"; do
		while ! ss -ltn | grep -q ":$p "; do
			i=$((i + 1))
			if [ $i -gt 300 ]; then
				echo "GUEST-NOT-LISTENING $p"
				return 1
			fi
			sleep 0.1
		done
	done
}
'
