#!/bin/bash
# ucmatose_siw_client - rdma-core's ucmatose client on Linux siw (the
# guest) against `ndkping --ucmatose` servers on the host: libndk is the
# iWARP responder to ten client/server MPA Requests at once, sends first
# (NDK_OPEN_FLAG_RELAXED_TX_GATE: siw's client sends nothing before the
# server's messages), receives the replies, and disconnects every
# connection. One guest boot, one host server per case:
#
#   c10        guest `ucmatose -c 10` (10 messages of 100 bytes each way)
#   c10-big    guest `ucmatose -c 10 -C 20 -S 65536`
#   c10-crc    guest `ucmatose -c 10` to a host server with --crc: its MPA
#              Replies turn CRC on, and siw checks and sends it
#
# Each host server runs with the same -c/-C/-S: it fails unless every
# message of every connection came, exactly -S bytes long.
#
# Run by hand: bash tests/interop/ucmatose_siw_client.sh build/tools/ndkping .
# shellcheck source=tests/interop/ucmatose_lib.sh
source "$(dirname "$0")/ucmatose_lib.sh"
need_guest

CASES=(c10 c10-big c10-crc)
declare -A ARGS=([c10]="-c 10" [c10-big]="-c 10 -C 20 -S 65536" [c10-crc]="-c 10")
declare -A HOST=([c10]="" [c10-big]="" [c10-crc]="--crc")

# Host servers on ports libndk picks (-p 0); the guest reaches them at
# 10.0.2.2.
for n in "${CASES[@]}"; do
	# shellcheck disable=SC2086 # ARGS and HOST are options
	start_server "$n" ${ARGS[$n]} ${HOST[$n]}
done

# Each guest ucmatose is bounded by `timeout`; its lines are prefixed with
# the case name, then "rc=N".
{
	echo "$GUEST_RUN_FN"
	for n in "${CASES[@]}"; do
		echo "run $n timeout 60 ucmatose -s 10.0.2.2 -p ${PORT_OF[$n]} ${ARGS[$n]}"
	done
} >"$WORK/guest.sh"
run_guest guest "$WORK/guest.sh"
wait_exit guest 190
for n in "${CASES[@]}"; do
	wait_exit "$n" 30
done

check_rc guest 0 "the guest script ran to its end"
for n in "${CASES[@]}"; do
	check guest.out "^$n: rc=0\$" "$n: guest ucmatose ${ARGS[$n]} exited 0"
	check_ucmatose_run guest.out "$n: " client "$n: guest ucmatose ran every step"
	check_none guest.out "^$n: .*(failed|error|event: )" "$n: guest ucmatose reported no error"
	check_rc "$n" 0 "$n: ndkping --ucmatose server exited 0"
	check_ucmatose_run "$n.out" "" server "$n: the host server ran every step"
	check "$n.out" '^ndkping --ucmatose: 10 of 10 connections, .*: ok$' "$n: the host server moved every message"
	check_none "$n.err" 'library problem|ndkping:' "$n: no complaint from the host server"
done
finish
