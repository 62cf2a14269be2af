#!/bin/bash
# rping_loopback - ndkping --rping against itself on this host's loopback
# adapter, two processes, no guest: runs wherever the project builds (CTest
# label conformance). What the siw drivers check against rdma-core's rping,
# this checks between our own two ends, at sizes rping itself cannot do:
#
#   s64        -S 64, -C 10, -v on both ends: every "ping data:" and
#              "server ping data:" line exactly as rping prints it
#   s64k       -S 65536 (one more than rping's maximum), -C 10, -V
#   s1m        -S 1048576 (1 MiB), -C 10, -V
#   variants   the client in client/server MPA (--no-p2p), and both ends
#              asking for MPA CRC (--crc)
#   persistent -P with two clients at once (the server's rdma_buf grows to
#              each client's size), then SIGTERM: exit 0
#   short      a server given -C 10 and a client that makes 3 pings: the
#              client succeeds, the server reports the shortfall, exit 1
#   refused    a client to a port where nothing listens: exit 1, at once
#   usage      rping's limits on the command line: exit 2
#
# Run by hand: bash tests/interop/rping_loopback.sh build/tools/ndkping .
# shellcheck source=tests/interop/rping_lib.sh
source "$(dirname "$0")/rping_lib.sh"

# client NAME PORT ARGS...: ndkping --rping -c to 127.0.0.1:PORT, waited for.
client() {
	local name=$1 port=$2
	shift 2
	start "$name" timeout 60 "$NDKPING" --rping -c -a 127.0.0.1 -p "$port" "$@"
	wait_exit "$name" 70
}

# pair NAME SIZE SERVER_ARGS -- CLIENT_ARGS: one server, one client, 10
# pings of SIZE bytes, both must exit 0 and the server count 10 pings.
pair() {
	local name=$1 size=$2
	shift 2
	split_args "$@"
	note "$name: -S $size, server ${SARGS[*]}, client ${CARGS[*]}"
	start_server "$name-server" -C 10 "${SARGS[@]}"
	client "$name-client" "${PORT_OF[$name-server]}" -C 10 -S "$size" "${CARGS[@]}"
	wait_exit "$name-server" 30
	check_rc "$name-client" 0 "$name: the client made its 10 pings"
	check_rc "$name-server" 0 "$name: the server served 10 pings and the disconnect"
	check "$name-server.out" "^server: 127\.0\.0\.1:[0-9]+: 10 pings of $size bytes in " \
		"$name: the server counted 10 pings of $size bytes"
	check "$name-server.err" '^server DISCONNECT EVENT\.\.\.$' "$name: the server saw the disconnect"
	check "$name-client.err" '^client DISCONNECT EVENT\.\.\.$' "$name: the client's disconnect completed"
	check_none "$name-server.err" 'library problem|ndkping:' "$name: no complaint from the server"
	check_none "$name-client.err" 'library problem|ndkping:|data mismatch' "$name: no complaint from the client"
}

pair s64 64 -v -- -V -v
check_ping_lines s64-client.out 10 "ping data: " "s64: the client's -v lines are rping's"
check_ping_lines s64-server.out 10 "server ping data: " "s64: the server's -v lines are rping's"
pair s64k 65536 -- -V
check "s64k-server.out" '^growing rdma_buf from 64 to 65536 bytes' "s64k: the server grew its rdma_buf to the client's size"
pair s1m 1048576 -S 1048576 -- -V
pair no-p2p 4096 -- -V --no-p2p
pair crc 4096 --crc -- -V --crc

note "persistent: -P, two clients at once (-S 1000 and -S 300000)"
start_server persistent -P -C 10
start persistent-a timeout 60 "$NDKPING" --rping -c -a 127.0.0.1 -p "${PORT_OF[persistent]}" -C 10 -V -S 1000
start persistent-b timeout 60 "$NDKPING" --rping -c -a 127.0.0.1 -p "${PORT_OF[persistent]}" -C 10 -V -S 300000
wait_exit persistent-a 70
wait_exit persistent-b 70
check_rc persistent-a 0 "persistent: the first client made its 10 pings"
check_rc persistent-b 0 "persistent: the second client made its 10 pings"
# Each connection thread prints its summary line once its disconnect is
# done; only then may SIGTERM end the server without cutting one short.
if ! wait_line persistent '^server: 127\.0\.0\.1:[0-9]+: 10 pings of 300000 bytes' 20 ||
	! wait_line persistent '^server: 127\.0\.0\.1:[0-9]+: 10 pings of 1000 bytes' 20; then
	fail "persistent: the server did not finish both connections"
fi
kill -TERM "${PID_OF[persistent]}"
wait_exit persistent 30
check_rc persistent 0 "persistent: SIGTERM ends the server with exit status 0"
check persistent.out '^server: 2 connections, 2 ok, 0 failed$' "persistent: both connections ok"

note "short: the server expects 10 pings, the client makes 3"
start_server short -C 10
client short-client "${PORT_OF[short]}" -C 3 -V
wait_exit short 30
check_rc short-client 0 "short: the client made its 3 pings"
check_rc short 1 "short: the server fails the connection"
check short.err 'made 3 pings, expected 10 \(-C\)$' "short: the server says why"

# The short server's port: its listener is closed now, and nothing else
# on this host asks for that port while the test runs.
note "refused: nothing listens (any more) on port ${PORT_OF[short]}"
T=$SECONDS
client refused "${PORT_OF[short]}" -C 1
check_rc refused 1 "refused: the client fails"
check refused.err 'connect to 127\.0\.0\.1:[0-9]+ failed: STATUS_CONNECTION_REFUSED' "refused: the client says why"
if [ $((SECONDS - T)) -le 5 ]; then
	pass "refused: at once"
else
	fail "refused: took $((SECONDS - T)) s"
fi

note "usage: rping's limits"
usage no-role --rping -a 127.0.0.1
usage no-addr --rping -c
usage small --rping -c -a 127.0.0.1 -S 22
usage large --rping -c -a 127.0.0.1 -S 1048577
usage p-on-client --rping -c -a 127.0.0.1 -P
"$NDKPING" --rping --help >"$WORK/help.txt" 2>&1
RC_OF[help]=$?
check_rc help 0 "usage: --rping --help"
finish
