#!/bin/bash
# interop.siw_initiator - Linux siw as the MPA initiator, libndk as the
# responder. cm_peer (librdmacm) connects from the guest to four ndk_peer
# listeners on the host, one guest boot for all of them:
#
#   accept  client IRD 3 / ORD 5, private data both ways
#   clamp   the same request, accepted with IRD 1 / ORD 8
#   crc     a listener that asks for MPA CRC (C=1 in its Reply)
#   reject  NdkReject with private data -> RDMA_CM_EVENT_REJECTED, five
#           times: siw loses a reject's private data when the responder's
#           FIN comes with the Reply (it then reports a bare ECONNRESET);
#           in about a third of single tries here, so one try would only be
#           a flaky test
#
# siw sends a client/server Request (A=0), so NdkAccept completes when the
# Reply is written (docs/behaviour.md), and the guest's rdma_disconnect ends
# each connection: ndk_peer answers the disconnect event with NdkDisconnect.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "$0")/lib.sh"
need_cm_peer
build_guest

# Listeners on free ports chosen by libndk (port 0); each prints its port.
start accept "$NDK_PEER" listen 0 --pd hello-from-ndk --timeout 120
start clamp "$NDK_PEER" listen 0 --pd clamped-by-ndk --ird 1 --ord 8 --timeout 120
start crc "$NDK_PEER" listen 0 --pd crc-from-ndk --crc --timeout 120
start reject "$NDK_PEER" listen 0 --pd no-thanks-from-ndk --reject --count 5 --timeout 120
declare -A PORT
for n in accept clamp crc reject; do
	wait_line "$WORK/$n.out" '^LISTENING port=[0-9]+$' 20 "$n" || die "ndk_peer listen ($n) did not start"
	PORT[$n]=$(listen_port "$n")
done

cat >"$WORK/guest.sh" <<EOF
$GUEST_LIB
run accept timeout 60 /root/cm_peer client 10.0.2.2 ${PORT[accept]} --pd hello-from-siw --ird 3 --ord 5
run clamp timeout 60 /root/cm_peer client 10.0.2.2 ${PORT[clamp]} --pd hello-from-siw --ird 3 --ord 5
run crc timeout 60 /root/cm_peer client 10.0.2.2 ${PORT[crc]} --pd hello-from-siw
for i in 1 2 3 4 5; do
	run reject timeout 60 /root/cm_peer client 10.0.2.2 ${PORT[reject]} --pd hello-from-siw --expect-reject
done
EOF
run_guest guest "$WORK/guest.sh" -f "$CM_PEER:/root/cm_peer"
wait_exit guest 200
for n in accept clamp crc reject; do
	wait_exit "$n" 20
done

G=$WORK/guest.out
SIW=$(hexof hello-from-siw)
check_rc guest 0 "the guest script ran to its end"

note "accept: siw requests IRD 3 / ORD 5 with private data"
# Before NdkAccept libndk offers IRD = min(128, requester ORD) = 5 and
# ORD = min(128, requester IRD) = 3 (docs/behaviour.md); ndk_peer accepts
# with exactly those.
check "$WORK/accept.out" "^PEER-REQUEST rds=[0-9]+ pd=${SIW}[0-9a-f]* ird=5 ord=3 conn=1$" \
	"accept: libndk got siw's private data and IRD 5 / ORD 3 to offer"
check "$WORK/accept.out" '^ACCEPTED status=STATUS_SUCCESS conn=1$' "accept: NdkAccept succeeded"
check "$WORK/accept.out" '^DISCONNECTED status=STATUS_SUCCESS conn=1$' \
	"accept: NdkDisconnect after siw's disconnect succeeded"
check_rc accept 0 "accept: ndk_peer saw everything it expected"
# rdma_cm's ESTABLISHED (CONNECT_REPLY) carries siw's negotiated values as
# responder_resources = siw's ORD and initiator_depth = siw's IRD: siw adopts
# IRD := our ORD (3) and ORD := our IRD (5) from the Reply.
check "$G" "^accept: CM-REPLY pd=$(hexof hello-from-ndk)[0-9a-f]* pd_len=[0-9]+ ird=5 ord=3$" \
	"accept: siw got our private data; ORD 5 / IRD 3 on its side"
check "$G" '^accept: CM-DISCONNECTED$' "accept: siw saw the disconnect complete"
check "$G" '^accept: rc=0$' "accept: cm_peer client succeeded"

note "clamp: the same request accepted with IRD 1 / ORD 8"
# libndk caps the accept's values at the requester's opposite values: IRD
# min(1, 5) = 1, ORD min(8, 3) = 3; siw then limits its ORD to our IRD 1.
check "$WORK/clamp.out" "^PEER-REQUEST rds=[0-9]+ pd=${SIW}[0-9a-f]* ird=5 ord=3 conn=1$" \
	"clamp: libndk got the request"
check "$WORK/clamp.out" '^ACCEPTED status=STATUS_SUCCESS conn=1$' "clamp: NdkAccept succeeded"
check "$WORK/clamp.out" '^DISCONNECTED status=STATUS_SUCCESS conn=1$' "clamp: NdkDisconnect succeeded"
check "$G" "^clamp: CM-REPLY pd=$(hexof clamped-by-ndk)[0-9a-f]* pd_len=[0-9]+ ird=1 ord=3$" \
	"clamp: siw's ORD became 1 (our IRD), its IRD 3"
check "$G" '^clamp: rc=0$' "clamp: cm_peer client succeeded"

note "crc: a Reply with C=1 turns MPA CRC on for siw"
check "$WORK/crc.out" "^PEER-REQUEST rds=[0-9]+ pd=${SIW}[0-9a-f]* ird=1 ord=1 conn=1$" \
	"crc: libndk got the request (IRD/ORD 1/1 by default)"
check "$WORK/crc.out" '^ACCEPTED status=STATUS_SUCCESS conn=1$' "crc: NdkAccept succeeded"
check "$WORK/crc.out" '^DISCONNECTED status=STATUS_SUCCESS conn=1$' "crc: NdkDisconnect succeeded"
check "$G" "^crc: CM-REPLY pd=$(hexof crc-from-ndk)[0-9a-f]* pd_len=[0-9]+ ird=1 ord=1$" \
	"crc: siw accepted the CRC Reply"
check "$G" '^crc: rc=0$' "crc: cm_peer client succeeded"

note "reject: NdkReject with private data, five times"
check_count "$WORK/reject.out" "^PEER-REQUEST rds=[0-9]+ pd=${SIW}[0-9a-f]* ird=1 ord=1 conn=[1-5]$" 5 \
	"reject: libndk got the requests"
check_count "$WORK/reject.out" '^REJECTED status=STATUS_SUCCESS conn=[1-5]$' 5 "reject: NdkReject succeeded"
check_rc reject 0 "reject: ndk_peer saw everything it expected"
# siw reports an MPA reject (R=1) as ECONNRESET; rdma_cm makes it REJECTED
# and hands over the private data behind the RFC 6581 word. A reject whose
# frame siw never read (the FIN came with it: siw 6.1's data_ready ignores
# data once the socket is in CLOSE_WAIT) arrives as REJECTED without data.
check_count "$G" "^reject: CM-REJECTED pd=$(hexof no-thanks-from-ndk)[0-9a-f]* pd_len=[0-9]+ status=-104$" 5 \
	"reject: siw reported REJECTED with our private data each time"
check_count "$G" '^reject: rc=0$' 5 "reject: cm_peer client saw the reject it expected"

finish
