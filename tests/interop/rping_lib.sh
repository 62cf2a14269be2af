# shellcheck shell=bash
# Shared by the rping drivers (tests/interop/rping_*.sh), which CTest runs as
#
#   bash DRIVER NDKPING PROJECT_ROOT
#
# NDKPING is the built ndkping (its --rping mode is under test). The work
# folder, processes, bounded waits and checks come from tool_lib.sh; this
# file adds starting an ndkping --rping server and rping's ping lines.

WORK_PREFIX=rping
GUEST_TIMEOUT=150
GUEST_PACKAGES=
# shellcheck source=tests/interop/tool_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tool_lib.sh"
# shellcheck disable=SC2034 # used by the drivers
NDKPING=$TOOL

# server_port NAME: the port from ndkping --rping -s -d's "rdma_listen on
# ADDR:PORT" line (the server runs with -p 0: no port can collide).
server_port() {
	sed -n 's/^rdma_listen on .*:\([0-9][0-9]*\)$/\1/p' "$WORK/$1.out" | head -n 1
}

# start_server NAME ARGS...: ndkping --rping -s -p 0 -d ARGS, waits for it
# to listen and sets PORT_OF[NAME]. Dies when it does not come up.
# timeout runs in --foreground mode so that a signal sent to PID_OF[NAME]
# reaches ndkping once: otherwise timeout forwards it to ndkping and then
# to its whole process group, and ndkping takes the second copy for a
# second Ctrl-C ("interrupted again", exit 130).
declare -A PORT_OF=()
start_server() {
	local name=$1
	shift
	start "$name" timeout --foreground 150 "$NDKPING" --rping -s -p 0 -d "$@"
	wait_line "$name" '^rdma_listen on ' 20 || die "$name: ndkping --rping -s did not start listening"
	PORT_OF[$name]=$(server_port "$name")
	[ -n "${PORT_OF[$name]}" ] || die "$name: no port in its rdma_listen line"
}

# ping_line N [PREFIX]: rping's -v line for ping N of a 64-byte buffer:
# PREFIX, "rdma-ping-N: ", and the run of characters from 'A' + N upwards
# (wrapping from 'z' to 'A'), up to the NUL in byte 64.
RPING_CHARS='ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_`abcdefghijklmnopqrstuvwxyz' # 'A' (65) .. 'z' (122)
ping_line() {
	local n=$1 prefix=${2:-} head twice=$RPING_CHARS$RPING_CHARS
	head="rdma-ping-$n: "
	printf '%s%s%s\n' "$prefix" "$head" "${twice:$((n % ${#RPING_CHARS})):$((63 - ${#head}))}"
}

# check_ping_lines FILE COUNT PREFIX WHAT: FILE holds exactly COUNT ping
# lines, each byte for byte what rping's -v prints for a 64-byte buffer.
check_ping_lines() {
	local file=$1 count=$2 prefix=$3 what=$4 n
	: >"$WORK/$file.want"
	for ((n = 0; n < count; n++)); do
		ping_line "$n" "$prefix" >>"$WORK/$file.want"
	done
	# The prefixes are plain text ("ping data: ", "server ping data: ").
	grep -- "^${prefix}rdma-ping-" "$WORK/$file" >"$WORK/$file.got"
	if cmp -s "$WORK/$file.want" "$WORK/$file.got"; then
		pass "$what"
	else
		fail "$what: $file's ping lines differ from rping's (diff follows)"
		diff "$WORK/$file.want" "$WORK/$file.got" | head -n 10
	fi
}

