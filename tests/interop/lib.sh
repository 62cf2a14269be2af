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

# The shell functions for the guest scripts (busybox sh), run and
# wait_listen (common.sh); the drivers expand it into their guest scripts.
# shellcheck disable=SC2034
GUEST_LIB="
$GUEST_RUN_FN
$GUEST_LISTEN_FN
"

# boot_held_server SECONDS TICKS SERVER_ARGS...: boots the guest ("guest")
# with one cm_peer server on its port 7174 (killed after SECONDS),
# forwarded from HPORT on the host, and returns once it listens. The
# server's lines go live to the console (the driver waits for its
# CM-ESTABLISHED lines) and to a file the guest script watches: the script
# ends with the server, or prints GUEST-GIVES-UP as soon as the server
# missed an event (cm_peer then hangs in rdma_destroy_id: the guest powers
# off with the connection still open), or GUEST-TIMEOUT after TICKS tenths
# of a second.
boot_held_server() {
	local secs=$1 ticks=$2
	shift 2
	HPORT=$(free_port) || die "no free port"
	cat >"$WORK/guest.sh" <<EOF
$GUEST_LIB
{ timeout $secs /root/cm_peer server 7174 $*; echo "server: rc=\$?"; } 2>&1 | tee /tmp/server.log &
wait_listen 7174 || exit 1
echo GUEST-LISTENING
i=0
while ! grep -q '^server: rc=' /tmp/server.log; do
	if grep -q '^CM-NO-EVENT' /tmp/server.log; then
		echo GUEST-GIVES-UP
		exit 1
	fi
	i=\$((i + 1))
	if [ \$i -gt $ticks ]; then
		echo GUEST-TIMEOUT
		exit 1
	fi
	sleep 0.1
done
EOF
	run_guest guest "$WORK/guest.sh" -f "$CM_PEER:/root/cm_peer" -p "$HPORT:7174"
	# The forward accepts on the host as soon as QEMU runs, so connecting
	# before the marker would only hit a closed guest port.
	wait_line "$WORK/guest.out" '^GUEST-LISTENING$' 120 guest || die "the guest server did not start"
}
