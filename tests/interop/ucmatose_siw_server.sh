#!/bin/bash
# ucmatose_siw_server - `ndkping --ucmatose -c 10` clients on the host
# against rdma-core's ucmatose servers on Linux siw (the guest), through
# run-guest.sh forwards: libndk is the iWARP initiator of ten connections
# at once, takes siw's messages on each, and sends its replies; siw's
# server disconnects them all. One guest boot, one guest server per case:
#
#   p2p        libndk's default peer-to-peer Requests (A=1): siw's Replies
#              pick the RTR, NdkCompleteConnect sends it
#   cs         --no-p2p: client/server Requests (A=0), as siw's own
#   cs-big     --no-p2p, -C 20 -S 65536
#
# Every client waits 200 ms between siw's MPA Reply and its first FPDU
# (--delay-first 200): siw 6.1 sends the Reply before it installs the
# socket callbacks that read FPDUs, and an FPDU that arrives in between
# may sit unread (the harness README, "accept race").
#
# Run by hand: bash tests/interop/ucmatose_siw_server.sh build/tools/ndkping .
# shellcheck source=tests/interop/ucmatose_lib.sh
source "$(dirname "$0")/ucmatose_lib.sh"
need_guest

CASES=(p2p cs cs-big)
declare -A GPORT=([p2p]=7471 [cs]=7472 [cs-big]=7473)
declare -A ARGS=([p2p]="-c 10" [cs]="-c 10" [cs-big]="-c 10 -C 20 -S 65536")
declare -A MODE=([p2p]="" [cs]=--no-p2p [cs-big]=--no-p2p)
forward_ports "${CASES[@]}"

for n in "${CASES[@]}"; do
	SERVER[$n]="timeout 150 ucmatose -b 10.0.2.15 -p ${GPORT[$n]} ${ARGS[$n]}"
done
boot_guest_servers ucmatose

for n in "${CASES[@]}"; do
	note "$n: ndkping --ucmatose -s 127.0.0.1 ${ARGS[$n]} ${MODE[$n]}"
	# shellcheck disable=SC2086 # ARGS and MODE are options
	start "$n" timeout 90 "$NDKPING" --ucmatose -s 127.0.0.1 -p "${HOST_PORT[$n]}" ${ARGS[$n]} ${MODE[$n]} \
		--delay-first 200
	wait_exit "$n" 100
done
wait_exit guest 60

check_rc guest 0 "the guest script ran to its end"
for n in "${CASES[@]}"; do
	check_rc "$n" 0 "$n: ndkping --ucmatose client exited 0"
	check_ucmatose_run "$n.out" "" client "$n: the host client ran every step"
	check "$n.out" '^ndkping --ucmatose: 10 of 10 connections, .*: ok$' "$n: the host client moved every message"
	check_none "$n.err" 'library problem|ndkping:' "$n: no complaint from the host client"
	check guest.out "^$n: rc=0\$" "$n: guest ucmatose server exited 0"
	check_ucmatose_run guest.out "$n: " server "$n: guest ucmatose ran every step"
	check_none guest.out "^$n: .*(failed|error|event: )" "$n: guest ucmatose reported no error"
done
finish
