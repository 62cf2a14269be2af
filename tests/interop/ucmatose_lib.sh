# shellcheck shell=bash
# Shared by the ucmatose drivers (tests/interop/ucmatose_*.sh), which CTest
# runs as
#
#   bash DRIVER NDKPING PROJECT_ROOT
#
# NDKPING is the built ndkping (its --ucmatose mode is under test). The
# work folder, processes, bounded waits and checks come from tool_lib.sh;
# this file adds starting an ndkping --ucmatose server.

WORK_PREFIX=ucmatose
GUEST_TIMEOUT=200
GUEST_PACKAGES=rdmacm-utils
# shellcheck source=tests/interop/tool_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tool_lib.sh"
# shellcheck disable=SC2034 # used by the drivers
NDKPING=$TOOL

# start_server NAME ARGS...: ndkping --ucmatose -p 0 ARGS (a server: no
# -s), waits for its "cmatose: listening on ADDR:PORT" line and sets
# PORT_OF[NAME]. Dies when it does not come up. timeout runs in
# --foreground mode so that a signal sent to PID_OF[NAME] reaches ndkping
# once.
declare -A PORT_OF=()
start_server() {
	local name=$1
	shift
	start "$name" timeout --foreground 180 "$NDKPING" --ucmatose -p 0 "$@"
	wait_line "$name" '^cmatose: listening on ' 20 || die "$name: ndkping --ucmatose did not start listening"
	PORT_OF[$name]=$(sed -n 's/^cmatose: listening on .*:\([0-9][0-9]*\)$/\1/p' "$WORK/$name.out" | head -n 1)
	[ -n "${PORT_OF[$name]}" ] || die "$name: no port in its listening line"
}

# check_ucmatose_run FILE PREFIX ROLE WHAT: FILE holds ucmatose's lines of
# a whole run for ROLE (server or client), each after PREFIX, in order,
# ending with "return status 0".
check_ucmatose_run() {
	local file=$1 prefix=$2 role=$3 what=$4 want
	if [ "$role" = server ]; then
		want="cmatose: starting server|initiating data transfers|completing sends|receiving data transfers|data transfers complete|cmatose: disconnecting|disconnected|test complete|return status 0"
	else
		want="cmatose: starting client|cmatose: connecting|receiving data transfers|sending replies|data transfers complete|test complete|return status 0"
	fi
	local got
	got=$(sed -n "s/^$prefix//p" "$WORK/$file" | grep -E "^(${want})\$" | paste -sd'|')
	if [ "$got" = "$want" ]; then
		pass "$what"
	else
		fail "$what: ucmatose's lines in $file are '$got', expected '$want'"
	fi
}
