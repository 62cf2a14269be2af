#!/bin/bash
# perftest_siw_server - `ndkperf --perftest` clients on the host against
# perftest's servers on Linux siw (the guest), through run-guest.sh
# forwards: libndk is the iWARP initiator of both of perftest's connections
# (control, then test, retried while the server re-listens), sends perftest
# 6.06's control messages, drives the data phase, and both sides print
# results. One guest boot; the guest runs one server after another:
#
#   write_bw   `ib_write_bw -R -n 200 -s 65536`: we RDMA-Write into siw's
#              buffer and send our numbers, which siw's server prints
#   send_bw    `ib_send_bw -R -n 200 -s 65536`: we Send within the credits
#              siw's server RDMA-Writes into our buffer; both measure
#   read_bw    `ib_read_bw -R -n 200 -s 65536`: we RDMA-Read siw's buffer,
#              up to 128 outstanding; siw's server prints our numbers
#   send_lat   `ib_send_lat -R -n 200`: Send ping-pong; both measure
#   write_lat  `ib_write_lat -R -n 200`: RDMA Write ping-pong, siw's server
#              writing first; we poll the last byte; both measure
#   send_bw_D  `ib_send_bw -R -D 2 -s 4096`: both sides end at their own
#              deadline (every Send of ours signaled: no Send after it,
#              which siw's server would no longer credit)
#
# Run by hand: bash tests/interop/perftest_siw_server.sh build/tools/ndkperf/ndkperf .
# shellcheck source=tests/interop/perftest_lib.sh
source "$(dirname "$0")/perftest_lib.sh"
need_guest

CASES=(write_bw send_bw read_bw send_lat write_lat send_bw_D)
declare -A GPORT=([write_bw]=18515 [send_bw]=18516 [read_bw]=18517 [send_lat]=18518 [write_lat]=18519 [send_bw_D]=18520)
forward_ports "${CASES[@]}"

# One guest server at a time (guest_server), each with an ndkperf client.
{
	echo "$GUEST_LISTEN_FN"
	for n in "${CASES[@]}"; do
		guest_server "$n" 90 "$n"
	done
} >"$WORK/guest.sh"
run_guest guest "$WORK/guest.sh" "${FWD[@]}"
clients_of_guest "" 120 100
wait_exit guest 120

check_rc guest 0 "the guest script ran to its end"
for n in "${CASES[@]}"; do
	size=$(test_size "$n")
	clock_inconclusive "$n" && continue
	check_rc "$n" 0 "$n: ndkperf --perftest client exited 0"
	check "$n.out" "^ +$size +[0-9]+ +[0-9.]+ +[0-9.]+" "$n: ndkperf printed its results line"
	check_count "$n.out" "^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+" "$(test_lines "$n")" "$n: ndkperf's results lines, one per size"
	check "$n.out" "peer version \"6\\.06\"" "$n: the peer announced perftest version 6.06"
	check_none "$n.err" 'library problem|ndkperf:' "$n: no complaint from ndkperf"
	check guest.out "^$n: rc=0\$" "$n: guest perftest server exited 0"
	check guest.out "^$n: +$size +[0-9]+ +([0-9.]+|inf) +" "$n: guest perftest server printed its results line"
	check_count guest.out "^$n: +[0-9]+ +[0-9]+ +([0-9.]+|inf) +" "$(test_lines "$n")" \
		"$n: guest perftest server's results lines, one per size"
	check_none guest.out "^$n: .*(Bad wc|Unable|Failed|Couldn't|error)" "$n: no complaint from guest perftest"
	case $n in
	write_bw | read_bw)
		check_same_avg guest.out "$n:" "$n.out" "" "$size" "$n: siw's server prints the BW average we measured"
		;;
	esac
done
finish
