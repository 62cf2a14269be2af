#!/bin/bash
# ucmatose_loopback - ndkping --ucmatose against itself on this host's
# loopback adapter, two processes, no guest: runs wherever the project
# builds (CTest label conformance). What the siw drivers check against
# rdma-core's ucmatose, this checks between our own two ends, with every
# byte verified:
#
#   c10        -c 10 (ten connections at once), 10 messages of 100 bytes
#              each way on each, --verify
#   c10-cs     the same with the client in client/server MPA (--no-p2p),
#              as siw's initiator, and MPA CRC on both ends
#   big        -c 4 -C 50 -S 65536
#   no-data    -c 3 -C 0: connections and disconnects only
#   mismatch   the client expects 200-byte messages from a server that
#              sends 100: it fails, says why and leaves; the server fails
#              waiting for its messages
#   usage      what NDK cannot follow, and bad numbers: exit 2
#
# Run by hand: bash tests/interop/ucmatose_loopback.sh build/tools/ndkping .
# shellcheck source=tests/interop/ucmatose_lib.sh
source "$(dirname "$0")/ucmatose_lib.sh"

# pair NAME SERVER_ARGS -- CLIENT_ARGS: a server, then a client to it;
# RC_OF holds both exit statuses.
pair() {
	local name=$1
	shift
	split_args "$@"
	note "$name: server ${SARGS[*]}, client ${CARGS[*]}"
	start_server "$name-server" "${SARGS[@]}"
	start "$name-client" timeout 60 "$NDKPING" --ucmatose -s 127.0.0.1 -p "${PORT_OF[$name-server]}" "${CARGS[@]}"
	wait_exit "$name-client" 70
	wait_exit "$name-server" 30
}

# good NAME ARGS...: pair with the same ARGS on both ends, which must both
# succeed with ucmatose's lines and no complaint.
good() {
	local name=$1
	shift
	pair "$name" "$@" -- "$@"
	check_rc "$name-client" 0 "$name: the client exited 0"
	check_rc "$name-server" 0 "$name: the server exited 0"
	check_ucmatose_run "$name-server.out" "" server "$name: the server's ucmatose lines"
	check_ucmatose_run "$name-client.out" "" client "$name: the client's ucmatose lines"
	check_none "$name-server.err" 'library problem|ndkping:' "$name: no complaint from the server"
	check_none "$name-client.err" 'library problem|ndkping:' "$name: no complaint from the client"
}

good c10 -c 10 --verify
check c10-client.out '^ndkping --ucmatose: 10 of 10 connections, 10 messages of 100 bytes each way, every byte verified: ok$' \
	"c10: the client moved and verified every message"
check c10-server.out '^ndkping --ucmatose: 10 of 10 connections, 10 messages of 100 bytes each way, every byte verified: ok$' \
	"c10: the server moved and verified every message"
pair c10-cs -c 10 --verify --crc -- -c 10 --verify --crc --no-p2p
check_rc c10-cs-client 0 "c10-cs: the client (client/server MPA) exited 0"
check_rc c10-cs-server 0 "c10-cs: the server exited 0"
good big -c 4 -C 50 -S 65536 --verify
pair no-data -c 3 -C 0 -- -c 3 -C 0
check_rc no-data-client 0 "no-data: the client exited 0"
check_rc no-data-server 0 "no-data: the server exited 0"
check no-data-server.out '^cmatose: disconnecting$' "no-data: the server disconnected"

pair mismatch -c 2 -S 100 -- -c 2 -S 200
check_rc mismatch-client 1 "mismatch: the client fails"
check_rc mismatch-server 1 "mismatch: the server fails"
check mismatch-client.err 'has 100 bytes, expected 200 \(-S\)' "mismatch: the client says why"
check mismatch-server.err 'the peer disconnected while this side was waiting for \[1\] the client.s messages' \
	"mismatch: the server says why"

note "usage: what NDK cannot follow"
usage port-space --ucmatose -P ib
usage gid --ucmatose -f gid
usage no-connections --ucmatose -c 0
usage server-no-p2p --ucmatose --no-p2p
usage too-much --ucmatose -C 1000000 -S 1000000
"$NDKPING" --ucmatose --help >"$WORK/help.txt" 2>&1
RC_OF[help]=$?
check_rc help 0 "usage: --ucmatose --help"
finish
