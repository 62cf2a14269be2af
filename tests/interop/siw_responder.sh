#!/bin/bash
# interop.siw_responder - libndk as the MPA initiator, Linux siw as the
# responder. Three cm_peer (librdmacm) servers in the guest, reached through
# run-guest.sh forwards, one guest boot:
#
#   accept  client/server Request (--no-p2p), IRD 4 / ORD 2, private data
#           both ways
#   pdmax   the same server, 252 octets of private data: libndk's
#           MaxCallerData, PD_Length 256 with the RFC 6581 word, siw's limit
#   clamp   the same with MPA CRC, against a server that accepts with
#           IRD 1 / ORD 8, which siw clamps to the negotiated values
#   reject  rdma_reject with private data -> NdkConnect fails with
#           STATUS_CONNECTION_REFUSED and the reject's data stays readable
#
# libndk's default, peer-to-peer Requests with an RTR, is covered by
# siw_responder_p2p.sh.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "$0")/lib.sh"
need_cm_peer
build_guest

declare -A HP
for n in accept clamp reject; do
	HP[$n]=$(free_port) || die "no free port"
done
cat >"$WORK/guest.sh" <<EOF
$GUEST_LIB
timeout 120 /root/cm_peer server 7174 --pd hello-from-siw --count 2 > /tmp/accept.log 2>&1 &
a=\$!
timeout 120 /root/cm_peer server 7175 --pd clamped-by-siw --ird 1 --ord 8 > /tmp/clamp.log 2>&1 &
c=\$!
timeout 120 /root/cm_peer server 7176 --pd go-away-from-siw --reject > /tmp/reject.log 2>&1 &
r=\$!
wait_listen 7174 7175 7176 || exit 1
echo GUEST-LISTENING
wait \$a; echo "accept: rc=\$?"
wait \$c; echo "clamp: rc=\$?"
wait \$r; echo "reject: rc=\$?"
sed 's/^/accept: /' /tmp/accept.log
sed 's/^/clamp: /' /tmp/clamp.log
sed 's/^/reject: /' /tmp/reject.log
EOF
run_guest guest "$WORK/guest.sh" -f "$CM_PEER:/root/cm_peer" \
	-p "${HP[accept]}:7174" -p "${HP[clamp]}:7175" -p "${HP[reject]}:7176"
# The forwards accept on the host as soon as QEMU runs, so connecting
# before the marker would only hit a closed guest port.
wait_line "$WORK/guest.out" '^GUEST-LISTENING$' 120 guest || die "the guest servers did not start"

start accept timeout 60 "$NDK_PEER" connect "127.0.0.1:${HP[accept]}" --pd hello-from-ndk \
	--ird 4 --ord 2 --no-p2p --timeout 30
wait_exit accept 70
PD252=$(printf '%0252d' 0)
start pdmax timeout 60 "$NDK_PEER" connect "127.0.0.1:${HP[accept]}" --pd "$PD252" --no-p2p --timeout 30
wait_exit pdmax 70
start clamp timeout 60 "$NDK_PEER" connect "127.0.0.1:${HP[clamp]}" --pd hello-from-ndk \
	--ird 4 --ord 2 --no-p2p --crc --timeout 30
wait_exit clamp 70
start reject timeout 60 "$NDK_PEER" connect "127.0.0.1:${HP[reject]}" --pd hello-from-ndk \
	--ird 6 --ord 7 --expect-refused --timeout 30
wait_exit reject 70
wait_exit guest 150

G=$WORK/guest.out
NDK=$(hexof hello-from-ndk)
check_rc guest 0 "the guest script ran to its end"

note "accept: client/server Request, IRD 4 / ORD 2"
# rdma_cm's CONNECT_REQUEST shows the request from the listener's side:
# responder_resources (printed ird) = our ORD 2, initiator_depth (ord) = our
# IRD 4. siw accepts them as they are (both below its maximum of 128).
check "$G" "^accept: CM-REQUEST pd=${NDK}[0-9a-f]* pd_len=[0-9]+ ird=2 ord=4$" \
	"accept: siw got our private data and IRD 4 / ORD 2"
# The Reply carries siw's IRD 2 / ORD 4, so ours stay 4 / 2.
check "$WORK/accept.out" \
	"^PEER-REPLY status=STATUS_SUCCESS rds=[0-9]+ pd=$(hexof hello-from-siw)[0-9a-f]* ird=4 ord=2 conn=1$" \
	"accept: libndk got siw's private data; IRD 4 / ORD 2"
check "$WORK/accept.out" '^CONNECTED status=STATUS_SUCCESS conn=1$' "accept: NdkCompleteConnect succeeded"
check "$WORK/accept.out" '^DISCONNECTED status=STATUS_SUCCESS peer_first=0 conn=1$' \
	"accept: NdkDisconnect succeeded"
check_rc accept 0 "accept: ndk_peer saw everything it expected"
# ESTABLISHED on the passive side reports initiator_depth = siw's IRD (2) and
# responder_resources = siw's ORD (4): printed as ird=4 ord=2.
check "$G" '^accept: CM-ESTABLISHED ird=4 ord=2$' "accept: siw reported ESTABLISHED with IRD 2 / ORD 4"
check_count "$G" '^accept: CM-DISCONNECTED$' 2 "accept, pdmax: siw saw our disconnects"
check "$G" '^accept: rc=0$' "accept: cm_peer server succeeded"

note "pdmax: 252 octets of private data"
# siw takes PD_Length 256 (its MPA_MAX_PRIVDATA); the ucma ABI hands at most
# 56 octets to userspace but reports the full length.
check "$G" "^accept: CM-REQUEST pd=$(hexof "${PD252:0:56}") pd_len=252 ird=1 ord=1$" \
	"pdmax: siw took 252 octets of private data (56 shown by librdmacm)"
check "$WORK/pdmax.out" '^CONNECTED status=STATUS_SUCCESS conn=1$' "pdmax: the connection was established"
check "$WORK/pdmax.out" '^DISCONNECTED status=STATUS_SUCCESS peer_first=0 conn=1$' "pdmax: NdkDisconnect succeeded"
check_rc pdmax 0 "pdmax: ndk_peer saw everything it expected"

note "clamp: CRC on; the server accepts with IRD 1 / ORD 8"
check "$G" "^clamp: CM-REQUEST pd=${NDK}[0-9a-f]* pd_len=[0-9]+ ird=2 ord=4$" "clamp: siw got the request"
# siw (relaxed_ird_negotiation) raises the ULP's IRD 1 to the requested 2 and
# lowers its ORD 8 to our IRD 4, so the result is the same as for accept.
check "$G" '^clamp: CM-ESTABLISHED ird=4 ord=2$' "clamp: siw clamped its accept to IRD 2 / ORD 4"
check "$WORK/clamp.out" \
	"^PEER-REPLY status=STATUS_SUCCESS rds=[0-9]+ pd=$(hexof clamped-by-siw)[0-9a-f]* ird=4 ord=2 conn=1$" \
	"clamp: libndk kept IRD 4 / ORD 2"
check "$WORK/clamp.out" '^CONNECTED status=STATUS_SUCCESS conn=1$' "clamp: NdkCompleteConnect succeeded"
check "$WORK/clamp.out" '^DISCONNECTED status=STATUS_SUCCESS peer_first=0 conn=1$' \
	"clamp: NdkDisconnect succeeded"
check "$G" '^clamp: CM-DISCONNECTED$' "clamp: siw saw our disconnect"
check "$G" '^clamp: rc=0$' "clamp: cm_peer server succeeded"

note "reject: rdma_reject with private data"
check "$G" "^reject: CM-REQUEST pd=${NDK}[0-9a-f]* pd_len=[0-9]+ ird=7 ord=6$" \
	"reject: siw got the request (our IRD 6 / ORD 7)"
check "$G" '^reject: CM-REJECT-SENT rc=0$' "reject: rdma_reject succeeded"
# siw's reject carries the RFC 6581 word it computed from our Request (IRD 7,
# ORD 6), so libndk's effective values stay IRD 6 / ORD 7.
check "$WORK/reject.out" \
	"^PEER-REPLY status=STATUS_CONNECTION_REFUSED rds=[0-9]+ pd=$(hexof go-away-from-siw)[0-9a-f]* ird=6 ord=7 conn=1$" \
	"reject: NdkConnect refused, the reject's private data readable"
check_rc reject 0 "reject: ndk_peer saw everything it expected"
check "$G" '^reject: rc=0$' "reject: cm_peer server succeeded"

finish
