#!/bin/bash
# perftest_loopback - ndkperf --perftest against itself on this host's
# loopback adapter, two processes, no guest: runs wherever the project builds
# (CTest label conformance). What the siw drivers check against perftest,
# this checks between our own two ends, and adds the cases perftest cannot
# be made to produce at will:
#
#   TEST         write_bw, read_bw, send_bw, send_lat, write_lat with -n 200:
#                both ends exit 0 and print their results line
#   few_outs     read_bw -t 64 -o 3: fewer outstanding Reads than a quarter
#                of the depth (every window of Reads must hold a signaled one)
#   *_lat_all    send_lat and write_lat with -a: every size 2 B .. 8 MiB,
#                a results line each
#   close_*      send_lat and write_bw where one side ends the test
#                connection before the closing exchange on the control
#                connection (NDKPERF_PERFTEST_CLOSE=test-first): the other
#                side must take that FIN as the end of the data phase, answer
#                it, and finish the exchange
#   usage        bad command lines: exit 2
#
# Run by hand: bash tests/interop/perftest_loopback.sh build/tools/ndkperf/ndkperf .
# shellcheck source=tests/interop/perftest_lib.sh
source "$(dirname "$0")/perftest_lib.sh"

# pair NAME TEST SERVER_ENV CLIENT_ENV ARGS...: a server on a port the
# provider picks, then a client with the same ARGS; both must exit 0 and
# the client print a results line. *_ENV: "VAR=VALUE" or "-".
pair() {
	local name=$1 test=$2 senv=$3 cenv=$4 port
	shift 4
	local sarg=() carg=()
	[ "$senv" != - ] && sarg=(env "$senv")
	[ "$cenv" != - ] && carg=(env "$cenv")
	note "$name: ndkperf --perftest $test $*"
	start "$name-server" timeout 60 "${sarg[@]}" "$NDKPERF" --perftest "$test" -p 0 --timeout 5000 "$@"
	if ! wait_line "$name-server" ' server: listening on ' 20; then
		fail "$name: the server did not start listening"
		return
	fi
	port=$(sed -n 's/.* port \([0-9][0-9]*\) .*/\1/p' "$WORK/$name-server.out" | head -n 1)
	start "$name-client" timeout 60 "${carg[@]}" "$NDKPERF" --perftest "$test" -p "$port" --timeout 5000 "$@" 127.0.0.1
	wait_exit "$name-client" 70
	wait_exit "$name-server" 30
	check_rc "$name-client" 0 "$name: the client exited 0"
	check_rc "$name-server" 0 "$name: the server exited 0"
	check_none "$name-client.err" 'library problem|ndkperf:' "$name: no complaint from the client"
	check_none "$name-server.err" 'library problem|ndkperf:' "$name: no complaint from the server"
}

for t in write_bw read_bw send_bw; do
	pair "$t" "$t" - - -n 200 -s 65536
	check "$t-client.out" '^ +65536 +200 +[0-9.]+ +[0-9.]+' "$t: the client's results line"
done
for t in send_lat write_lat; do
	pair "$t" "$t" - - -n 200
	check_count "$t-client.out" '^ +2 +[0-9]+ +[0-9.]+ +[0-9.]+' 1 "$t: the client's results line"
	check_count "$t-server.out" '^ +2 +[0-9]+ +[0-9.]+ +[0-9.]+' 1 "$t: the server's results line"
done

pair few_outs read_bw - - -n 300 -s 65536 -t 64 -o 3
check few_outs-client.out '^ +65536 +300 +[0-9.]+ +[0-9.]+' "few_outs: every Read completed"

for t in send_lat write_lat; do
	pair "${t}_all" "$t" - - -a -n 20
	for side in client server; do
		check_count "${t}_all-$side.out" '^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' 23 \
			"${t}_all: the $side's 23 results lines"
		check "${t}_all-$side.out" '^ +8388608 +[0-9]+ ' "${t}_all: the $side reached 8 MiB"
	done
done

pair close_server_first send_lat NDKPERF_PERFTEST_CLOSE=test-first - -n 50
pair close_client_first send_lat - NDKPERF_PERFTEST_CLOSE=test-first -n 50
pair close_bw_client_first write_bw - NDKPERF_PERFTEST_CLOSE=test-first -n 50

note "usage: bad command lines"
usage no-test --perftest
usage unknown-test --perftest bogus_bw
usage all-and-size --perftest send_lat -a -s 64
usage all-bw --perftest send_bw -a
finish
