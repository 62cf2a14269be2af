#!/bin/bash
# rping_siw_server - `ndkping --rping -c` on the host against rdma-core's
# rping server on Linux siw (the guest), through run-guest.sh forwards:
# libndk is the iWARP initiator, siw's rping server RDMA-Reads our start_buf
# and RDMA-Writes our rdma_buf, and our client compares them (-V). One guest
# boot, one guest rping server per case (each serves one connection):
#
#   p2p-64      libndk's default peer-to-peer Request (A=1): siw's Reply
#               picks the Write RTR, NdkCompleteConnect sends it; -S 64, the
#               guest server with -v: its ping lines exactly as rping's
#   p2p-65535   the same with -S 65535 (multi-FPDU Reads and Writes)
#   cs-64       --no-p2p: a client/server Request (A=0), as siw's own
#   cs-65535    --no-p2p, -S 65535
#   crc         --crc (C=1 in our Request, siw echoes it), -S 1000
#
# Every client waits 200 ms between siw's MPA Reply and its first FPDU
# (--delay-first 200): siw 6.1 sends the Reply before it installs the
# socket callbacks that read FPDUs, and an FPDU that arrives in between is
# never read, as rping's protocol then sends nothing more (the harness
# README, "accept race"; without the pause about one connection in three
# stalls here, the first after boot most often).
#
# Run by hand: bash tests/interop/rping_siw_server.sh build/tools/ndkping .
# shellcheck source=tests/interop/rping_lib.sh
source "$(dirname "$0")/rping_lib.sh"
need_guest

CASES=(p2p-64 p2p-65535 cs-64 cs-65535 crc)
declare -A GPORT=([p2p-64]=7174 [p2p-65535]=7175 [cs-64]=7176 [cs-65535]=7177 [crc]=7178)
declare -A SIZE=([p2p-64]=64 [p2p-65535]=65535 [cs-64]=64 [cs-65535]=65535 [crc]=1000)
declare -A MODE=([p2p-64]="" [p2p-65535]="" [cs-64]=--no-p2p [cs-65535]=--no-p2p [crc]=--crc)
forward_ports "${CASES[@]}"

for n in "${CASES[@]}"; do
	v=
	[ "$n" = p2p-64 ] && v=-v
	SERVER[$n]="timeout 120 rping -s -a 10.0.2.15 -p ${GPORT[$n]} -C 10 -S ${SIZE[$n]} $v"
done
boot_guest_servers rping

for n in "${CASES[@]}"; do
	note "$n: ndkping --rping -c -S ${SIZE[$n]} ${MODE[$n]}"
	# shellcheck disable=SC2086 # MODE is one option or none
	start "$n" timeout 60 "$NDKPING" --rping -c -a 127.0.0.1 -p "${HOST_PORT[$n]}" -C 10 -V \
		-S "${SIZE[$n]}" ${MODE[$n]} --delay-first 200 -d
	wait_exit "$n" 70
done
wait_exit guest 60

check_rc guest 0 "the guest script ran to its end"
for n in "${CASES[@]}"; do
	size=${SIZE[$n]}
	check_rc "$n" 0 "$n: ndkping --rping -c exited 0 (10 pings, -V compared every byte)"
	check "$n.out" "^client: 127\\.0\\.0\\.1:[0-9]+: 10 pings of $size bytes in " \
		"$n: the host client counted 10 pings of $size bytes"
	check "$n.err" '^client DISCONNECT EVENT\.\.\.$' "$n: the host client's disconnect completed"
	check_none "$n.err" 'library problem|ndkping:|data mismatch|bogus' "$n: no complaint from the host client"
	check guest.out "^$n: rc=0\$" "$n: guest rping -s exited 0"
	check guest.out "^$n: server DISCONNECT EVENT\\.\\.\\.\$" "$n: guest rping saw our disconnect"
	# rping's server ends on "wait for RDMA_READ_ADV state 10" (the
	# DISCONNECTED state) by design; anything else is an error.
	check_none guest.out "^$n: .*(failed|bogus|mismatch|error|state [0-9]$)" "$n: guest rping reported no error"
done
check p2p-64.out 'peer-to-peer MPA' "p2p-64: the client asked for peer-to-peer MPA"
check cs-64.out 'client/server MPA' "cs-64: the client asked for client/server MPA"
check_ping_lines guest.out 10 "p2p-64: server ping data: " \
	"p2p-64: guest rping's -v lines (the data it RDMA-Read from our start_buf)"
finish
