#!/bin/bash
# rping_siw_client - rdma-core's rping client on Linux siw (the guest)
# against `ndkping --rping -s` on the host: libndk is the iWARP responder to
# siw's client/server MPA Request (A=0, IRD = ORD = 1, no private data),
# serves rping's 16-byte Sends, issues the RDMA Reads and Writes, and
# answers the disconnect. One guest boot, one host server per case:
#
#   s64    guest `rping -c -C 10 -V -v -S 64`; the host server with -v: both
#          sides' ping lines exactly as rping prints them
#   s65535 guest `rping -c -C 10 -V -S 65535` (rping's largest size: Reads
#          and Writes of many FPDUs); the host server starts at 64 bytes
#          and grows its rdma_buf to the client's size
#   crc    guest `rping -c -C 10 -V -S 1000` to a host server with --crc: the
#          MPA Reply turns CRC on, and siw checks and sends it
#
# Each host server runs with -C 10: it fails unless exactly 10 pings came.
# Guest rping 44.0 takes -S 23..65535 only ("Invalid size 65536 (valid
# range is 23 to 65536)"), so larger sizes are left to rping_loopback.
#
# Run by hand: bash tests/interop/rping_siw_client.sh build/tools/ndkping .
# shellcheck source=tests/interop/rping_lib.sh
source "$(dirname "$0")/rping_lib.sh"
need_guest

# Host servers on ports libndk picks (-p 0); the guest reaches them at
# 10.0.2.2.
start_server s64 -C 10 -v
start_server s65535 -C 10
start_server crc -C 10 --crc

# Each guest rping is bounded by `timeout` (rping 44.0 hangs after a
# refused connect); its lines are prefixed with the case name, then "rc=N".
cat >"$WORK/guest.sh" <<EOF
$GUEST_RUN_FN
run s64 timeout 60 rping -c -a 10.0.2.2 -p ${PORT_OF[s64]} -C 10 -V -v -S 64
run s65535 timeout 60 rping -c -a 10.0.2.2 -p ${PORT_OF[s65535]} -C 10 -V -S 65535
run crc timeout 60 rping -c -a 10.0.2.2 -p ${PORT_OF[crc]} -C 10 -V -S 1000
EOF
run_guest guest "$WORK/guest.sh"
wait_exit guest 160
for n in s64 s65535 crc; do
	wait_exit "$n" 20
done

check_rc guest 0 "the guest script ran to its end"
for n in s64 s65535 crc; do
	case $n in
	s64) size=64 ;;
	s65535) size=65535 ;;
	crc) size=1000 ;;
	esac
	check guest.out "^$n: rc=0\$" "$n: guest rping -c -S $size exited 0 (10 pings, -V compared every byte)"
	check_none guest.out "^$n: .*(data mismatch|bogus|error|failed)" "$n: guest rping reported no error"
	check_rc "$n" 0 "$n: ndkping --rping -s exited 0"
	check "$n.out" "^server: 127\\.0\\.0\\.1:[0-9]+: 10 pings of $size bytes in " \
		"$n: the host server counted 10 pings of $size bytes"
	check "$n.err" '^server DISCONNECT EVENT\.\.\.$' "$n: the host server saw rping's disconnect"
	check_none "$n.err" 'library problem|ndkping:' "$n: no complaint from the host server"
done
check s64.out '^cma_event type RDMA_CM_EVENT_CONNECT_REQUEST from 127\.0\.0\.1:[0-9]+: IRD 1 ORD 1, 0 bytes of private data$' \
	"s64: siw's Request carried IRD 1 / ORD 1 and no private data"
check_ping_lines guest.out 10 "s64: ping data: " "s64: guest rping's -v lines (the data our RDMA Write put in its rdma_buf)"
check_ping_lines s64.out 10 "server ping data: " "s64: the host's -v lines (the data our RDMA Read fetched)"
check s65535.out '^growing rdma_buf from 64 to 65535 bytes' "s65535: the host server grew its rdma_buf to 65535 bytes"
finish
