#!/bin/bash
# interop.siw_responder_p2p - NDK's three legs against a Linux siw responder:
# libndk's default peer-to-peer Request (A=1, Write/Read RTR offered), siw's
# Reply picks the Write RTR, and NdkCompleteConnect sends it. siw reports
# ESTABLISHED only once it has processed that RTR, so the test holds each
# connection after CONNECTED until cm_peer in the guest has printed
# CM-ESTABLISHED, and only then lets ndk_peer disconnect.
#
#   p2p-1 .. p2p-4  four connections, IRD 4 / ORD 2; the 2nd and 4th with
#                   MPA CRC, so their RTR carries a CRC that siw checks
#
# Four, because the race below hits in roughly half of the connections: a
# single one would make a flaky test; four fail nearly always while libndk
# does not allow for it, and pass every time once it does.
#
# Why hold: siw 6.1 sends its Reply before it installs the callback that
# consumes the RTR (the harness README, siw behaviour 1). An RTR that lands
# in between stays unread and siw never reports ESTABLISHED. Such a
# connection cannot be ended safely from either side: iw_cm's destroy waits
# for the ESTABLISHED that never comes (cm_peer hangs in rdma_destroy_id),
# and when the initiator closes, siw reports CLOSE for a connection iw_cm
# never saw established and iw_cm hits BUG() (iwcm.c:969, a guest kernel
# oops). So on failure ndk_peer keeps holding, the guest script powers off
# as soon as cm_peer gives up, and only then does ndk_peer see the
# connection end: the test fails in seconds instead of hanging the guest.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "$0")/lib.sh"
need_cm_peer
build_guest

boot_held_server 120 1000 --pd hello-from-siw --count 4 --timeout 10

# connect_held NAME N OPTIONS...: one held connection; N is how many
# CM-ESTABLISHED lines the guest has printed once this one is established.
# Returns false when siw did not report ESTABLISHED (the guest is then gone).
connect_held() {
	local name=$1 n=$2 ok=0
	shift 2
	mkfifo "$WORK/$name.in"
	start "$name" timeout 90 "$NDK_PEER" connect "127.0.0.1:$HPORT" --pd hello-from-ndk \
		--ird 4 --ord 2 --hold --timeout 40 "$@"
	# Opening the FIFO's write end completes once ndk_peer has its stdin.
	exec 8>"$WORK/$name.in"
	if ! wait_line "$WORK/$name.out" '^HOLDING conn=1$' 40 "$name"; then
		fail "$name: ndk_peer did not reach CONNECTED"
		ok=1
	elif wait_count "$WORK/guest.out" '^CM-ESTABLISHED ' "$n" 8 guest; then
		pass "$name: siw reported ESTABLISHED while the connection was held"
		echo release >&8
	else
		fail "$name: siw did not report ESTABLISHED within 8 s of NdkCompleteConnect (the RTR was not processed)"
		# Not released: the guest powers off first (see above).
		wait_exit guest 60
		ok=1
	fi
	wait_exit "$name" 60
	exec 8>&-
	return $ok
}

N=0
for name in p2p-1 p2p-2 p2p-3 p2p-4; do
	N=$((N + 1))
	crc=()
	[ $((N % 2)) -eq 0 ] && crc=(--crc)
	if ! connect_held "$name" "$N" "${crc[@]}"; then
		note "the guest is gone: the connections after $name are not run"
		break
	fi
done
[ -n "${PID_OF[guest]:-}" ] && wait_exit guest 150

G=$WORK/guest.out
NDK=$(hexof hello-from-ndk)
SIW=$(hexof hello-from-siw)
check_rc guest 0 "the guest script ran to its end"
if grep -q 'kernel BUG' "$G"; then
	fail "the guest kernel hit a BUG (see guest.out)"
fi
check_count "$G" "^CM-REQUEST pd=${NDK}[0-9a-f]* pd_len=[0-9]+ ird=2 ord=4$" 4 \
	"siw got all requests with our private data and IRD 4 / ORD 2"
for name in p2p-1 p2p-2 p2p-3 p2p-4; do
	[ -e "$WORK/$name.out" ] || continue
	check "$WORK/$name.out" \
		"^PEER-REPLY status=STATUS_SUCCESS rds=[0-9]+ pd=${SIW}[0-9a-f]* ird=4 ord=2 conn=1$" \
		"$name: NdkConnect completed on siw's Reply"
	check "$WORK/$name.out" '^CONNECTED status=STATUS_SUCCESS conn=1$' \
		"$name: NdkCompleteConnect (the RTR) succeeded"
	check "$WORK/$name.out" '^DISCONNECTED status=STATUS_SUCCESS peer_first=0 conn=1$' \
		"$name: NdkDisconnect after the release succeeded"
	check_rc "$name" 0 "$name: ndk_peer saw everything it expected"
done
# On the passive side ESTABLISHED reports initiator_depth = siw's IRD (2) and
# responder_resources = siw's ORD (4), printed as ird=4 ord=2.
check_count "$G" '^CM-ESTABLISHED ird=4 ord=2$' 4 "siw reported all connections ESTABLISHED"
check_count "$G" '^CM-DISCONNECTED$' 4 "siw saw all disconnects"
check "$G" '^server: rc=0$' "cm_peer server succeeded"

finish
