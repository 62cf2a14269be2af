#!/bin/bash
# perftest_siw_client - perftest's clients on Linux siw (the guest) against
# `ndkperf --perftest` servers on the host: libndk is the iWARP responder
# of both of perftest's connections (control and test), answers perftest
# 6.06's control messages, serves the data phase, and prints results. One
# guest boot; one host server per test, each on a port libndk picks:
#
#   write_bw   guest `ib_write_bw -R -n 200 -s 65536`: siw RDMA-Writes into
#              our buffer; our server prints the numbers the client sends
#   send_bw    guest `ib_send_bw -R -n 200 -s 65536`: we keep 200 receives
#              posted and RDMA-Write the receive count into siw's credit
#              buffer (perftest's iWARP credits); both measure
#   read_bw    guest `ib_read_bw -R -n 200 -s 65536`: siw RDMA-Reads our
#              buffer (IRD = ORD = 128 asked); our server prints its numbers
#   send_lat   guest `ib_send_lat -R -n 200`: Send ping-pong; both measure
#   send_bw_D  guest `ib_send_bw -R -D 2 -s 4096`: both sides end at their
#              own deadline; our server stops at the client's closing
#              message
#
#   write_lat  guest `ib_write_lat -R -n 200`: perftest's server writes
#              first, while a client/server-mode responder normally sends no
#              FPDU before the initiator's first one (RFC 5044) and siw's
#              client sends nothing first: ndkperf's server opens its adapter
#              with NDK_OPEN_FLAG_RELAXED_TX_GATE (send 100 ms after the
#              Reply at the latest)
#
# Run by hand: bash tests/interop/perftest_siw_client.sh build/tools/ndkperf/ndkperf .
# shellcheck source=tests/interop/perftest_lib.sh
source "$(dirname "$0")/perftest_lib.sh"
need_guest

CASES=(write_bw send_bw read_bw send_lat write_lat send_bw_D)

# Servers on ports libndk picks (-p 0); they wait for the guest to boot
# and for the cases before theirs.
for n in "${CASES[@]}"; do
	# shellcheck disable=SC2046
	start "$n" timeout 240 "$NDKPERF" --perftest "$(test_of "$n")" -p 0 $(test_args "$n") --accept-timeout 200
done
for n in "${CASES[@]}"; do
	host_listening "$n" "$n"
done

# Each guest client is bounded by `timeout`; its lines are prefixed with
# the case name, then "rc=N".
{
	echo "$GUEST_RUN_FN"
	for n in "${CASES[@]}"; do
		echo "run $n timeout 60 ib_$(test_of "$n") -d siw0 -R -p ${PORT_OF[$n]} $(test_args "$n") 10.0.2.2"
	done
} >"$WORK/guest.sh"
run_guest guest "$WORK/guest.sh"
wait_exit guest 260
for n in "${CASES[@]}"; do
	wait_exit "$n" 30
done

check_rc guest 0 "the guest script ran to its end"
for n in "${CASES[@]}"; do
	size=$(test_size "$n")
	iters=$(test_iters "$n")
	clock_inconclusive "$n" && continue
	check guest.out "^$n: rc=0\$" "$n: guest perftest client exited 0"
	check guest.out "^$n: +$size +$iters +([0-9.]+|inf) +" "$n: guest perftest client printed its results line"
	check_count guest.out "^$n: +[0-9]+ +[0-9]+ +([0-9.]+|inf) +" "$(test_lines "$n")" \
		"$n: guest perftest client's results lines, one per size"
	check_rc "$n" 0 "$n: ndkperf --perftest server exited 0"
	check "$n.out" "^ +$size +[0-9]+ +[0-9.]+ +[0-9.]+" "$n: ndkperf printed its results line"
	check_count "$n.out" "^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+" "$(test_lines "$n")" "$n: ndkperf's results lines, one per size"
	check "$n.out" "peer version \"6\\.06\"" "$n: the peer announced perftest version 6.06"
	check_none "$n.err" 'library problem|ndkperf:' "$n: no complaint from ndkperf"
	check_none guest.out "^$n: .*(Bad wc|Unable|Failed|Couldn't|error)" "$n: no complaint from guest perftest"
	case $n in
	write_bw | read_bw)
		check "$n.out" "\\(measured by the client\\)" "$n: ndkperf's server printed the client's report"
		check_same_avg guest.out "$n:" "$n.out" "" "$size" "$n: both sides print the client's BW average"
		;;
	esac
done
finish
