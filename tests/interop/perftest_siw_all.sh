#!/bin/bash
# perftest_siw_all - perftest's latency tools with -a (every size from 2 B
# to 8 MiB) against `ndkperf --perftest -a` on Linux siw, both ways in one
# guest boot:
#
#   to-host    guest `ib_send_lat -R -a -n 5` and `ib_write_lat -R -a -n 5`
#              clients -> ndkperf --perftest servers on the host
#   to-guest   ndkperf --perftest clients -> guest ib_send_lat / ib_write_lat
#              -R -a -n 5 servers, one after the other
#
# Each side prints 23 results lines. The 8 MiB ping-pongs are slow under
# TCG, and slower still on a loaded host: the bounds are minutes here
# (--timeout 60000 on our side, `timeout 240` on perftest's), while the
# other perftest drivers keep theirs short.
#
# Run by hand: bash tests/interop/perftest_siw_all.sh build/tools/ndkperf/ndkperf .
# shellcheck source=tests/interop/perftest_lib.sh
source "$(dirname "$0")/perftest_lib.sh"
GUEST_TIMEOUT=1100
need_guest

CASES=(send_lat_a write_lat_a)
declare -A GPORT=([send_lat_a]=18521 [write_lat_a]=18522)
forward_ports "${CASES[@]}"

# Host servers on ports libndk picks, for the guest's clients.
for n in "${CASES[@]}"; do
	# shellcheck disable=SC2046
	start "h-$n" timeout 1000 "$NDKPERF" --perftest "$(test_of "$n")" -p 0 $(test_args "$n") --timeout 60000 \
		--accept-timeout 600
	host_listening "h-$n" "$n"
done

# The guest: its clients first ("c-NAME: " lines), then one server at a
# time ("s-NAME: " lines, with GUEST-LISTENING and GUEST-DONE markers).
{
	echo "$GUEST_RUN_FN"
	for n in "${CASES[@]}"; do
		echo "run c-$n timeout 240 ib_$(test_of "$n") -d siw0 -R -p ${PORT_OF[$n]} $(test_args "$n") 10.0.2.2"
	done
	echo "$GUEST_LISTEN_FN"
	for n in "${CASES[@]}"; do
		guest_server "$n" 240 "s-$n"
	done
} >"$WORK/guest.sh"
run_guest guest "$WORK/guest.sh" "${FWD[@]}"
clients_of_guest c- 600 300 --timeout 60000
wait_exit guest 300
for n in "${CASES[@]}"; do
	wait_exit "h-$n" 30
done

check_rc guest 0 "the guest script ran to its end"
# check_side HOSTNAME GUESTPREFIX N: one direction of case N.
check_side() {
	local host=$1 guest=$2 n=$3 size iters lines
	size=$(test_size "$n")
	iters=$(test_iters "$n")
	lines=$(test_lines "$n")
	clock_inconclusive "$guest" && return
	check guest.out "^$guest: rc=0\$" "$guest: guest perftest exited 0"
	check_count guest.out "^$guest: +[0-9]+ +$iters +([0-9.]+|inf) +" "$lines" "$guest: guest perftest's $lines results lines"
	check guest.out "^$guest: +$size +$iters +" "$guest: guest perftest reached $size bytes"
	check_none guest.out "^$guest: .*(Bad wc|Unable|Failed|Couldn't|error)" "$guest: no complaint from guest perftest"
	check_rc "$host" 0 "$host: ndkperf --perftest exited 0"
	check_count "$host.out" '^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' "$lines" "$host: ndkperf's $lines results lines"
	check "$host.out" "peer version \"6\\.06\"" "$host: the peer announced perftest version 6.06"
	check_none "$host.err" 'library problem|ndkperf:' "$host: no complaint from ndkperf"
}
for n in "${CASES[@]}"; do
	check_side "h-$n" "c-$n" "$n"
	check_side "c-$n" "s-$n" "$n"
done
finish
