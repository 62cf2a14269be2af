#!/bin/bash
# interop.siw_tools - the connection phase with rdma-core's own tools in the
# guest (no cm_peer needed), one guest boot:
#
#   cmtime-server  ndk_peer connect --count 5 --parallel -> guest `cmtime`
#                  server
#   cmtime-client  guest `cmtime -s` with 10 connections at once -> ndk_peer
#                  listen --count 10
#   rping          guest `rping -c` -> ndk_peer listen: the connection phase
#                  only. ndk_peer posts no receive and plays no data phase, so
#                  rping's first Send ends the connection one way or another
#                  (libndk's Terminate, or `timeout` stopping rping).
#
# cmtime 44.0 usage: cmtime [-s server_address] [-b bind_address]
# [-c connections] [-p port_number] [-r retries] [-t timeout_ms]; without -s
# it is the server, which never exits by itself, so the host tells the guest
# that it is done by connecting to a busybox `nc -l` on a second forward.
# Our connects to cmtime are made the way cmtime's own client makes them:
# all at once, disconnected when all are up (--parallel). One after the other
# does not work with cmtime 44.0's server: it rejects the second request
# ("failing connection request"), most likely because rdma_create_qp()
# writes the first connection's CQs back into the init_qp_attr that cmtime
# shares between connections, and those CQs go away with the first
# connection. They use client/server mode (--no-p2p): a peer-to-peer
# connection closed right after its RTR can crash the guest kernel (see
# siw_responder_p2p.sh).
# shellcheck source=tests/interop/lib.sh
source "$(dirname "$0")/lib.sh"
build_guest

start cmtime-client "$NDK_PEER" listen 0 --count 10 --timeout 150
start rping "$NDK_PEER" listen 0 --timeout 150
declare -A PORT
for n in cmtime-client rping; do
	wait_line "$WORK/$n.out" '^LISTENING port=[0-9]+$' 20 "$n" || die "ndk_peer listen ($n) did not start"
	PORT[$n]=$(listen_port "$n")
done
HP_CMTIME=$(free_port) || die "no free port"
HP_DONE=$(free_port) || die "no free port"

cat >"$WORK/guest.sh" <<EOF
$GUEST_LIB
timeout 150 cmtime -b 10.0.2.15 -p 7174 -c 5 > /tmp/cmtime-server.log 2>&1 &
srv=\$!
timeout 150 nc -l -p 7199 > /dev/null 2>&1 &
done=\$!
wait_listen 7174 7199 || exit 1
echo GUEST-LISTENING
wait \$done
echo "host-done: rc=\$?"
# cmtime 44.0's server does not end by itself (not even after -c
# disconnects), and its buffered output is lost when it is stopped: only
# the host side of these connections is checked.
kill \$srv
wait \$srv
echo "cmtime-server: rc=\$?"
run cmtime timeout 60 cmtime -s 10.0.2.2 -p ${PORT[cmtime-client]} -c 10
# -d prints the CM events (ESTABLISHED) before the data phase starts.
run rping timeout 10 rping -c -a 10.0.2.2 -p ${PORT[rping]} -C 1 -v -d
EOF
run_guest guest "$WORK/guest.sh" -p "$HP_CMTIME:7174" -p "$HP_DONE:7199"
wait_line "$WORK/guest.out" '^GUEST-LISTENING$' 120 guest || die "the guest servers did not start"

start cmtime-server timeout 90 "$NDK_PEER" connect "127.0.0.1:$HP_CMTIME" --count 5 --parallel \
	--no-p2p --timeout 30
wait_exit cmtime-server 100
# Tell the guest we are done with its cmtime server (bash's /dev/tcp).
if ! (exec 3<>"/dev/tcp/127.0.0.1/$HP_DONE") 2>/dev/null; then
	fail "could not signal the guest on port $HP_DONE"
fi
wait_exit guest 150
for n in cmtime-client rping; do
	wait_exit "$n" 20
done

G=$WORK/guest.out
check_rc guest 0 "the guest script ran to its end"
check "$G" '^host-done: rc=0$' "the guest got the host's signal"

note "cmtime-server: 5 connections at once to cmtime's server"
# cmtime sends no private data and accepts with IRD/ORD 1/1.
check_count "$WORK/cmtime-server.out" \
	'^PEER-REPLY status=STATUS_SUCCESS rds=0 pd= ird=1 ord=1 conn=[1-5]$' 5 \
	"cmtime-server: 5 Replies, no private data, IRD/ORD 1/1"
check_count "$WORK/cmtime-server.out" '^CONNECTED status=STATUS_SUCCESS conn=[1-5]$' 5 \
	"cmtime-server: 5 NdkCompleteConnect"
check_count "$WORK/cmtime-server.out" '^DISCONNECTED status=STATUS_SUCCESS peer_first=0 conn=[1-5]$' 5 \
	"cmtime-server: 5 NdkDisconnect answered by cmtime's rdma_disconnect"
check_rc cmtime-server 0 "cmtime-server: ndk_peer saw everything it expected"

note "cmtime-client: 10 connections at once to ndk_peer"
check_count "$WORK/cmtime-client.out" '^PEER-REQUEST rds=0 pd= ird=1 ord=1 conn=([1-9]|10)$' 10 \
	"cmtime-client: 10 requests, no private data, IRD/ORD 1/1"
check_count "$WORK/cmtime-client.out" '^ACCEPTED status=STATUS_SUCCESS conn=([1-9]|10)$' 10 \
	"cmtime-client: 10 NdkAccept"
check_count "$WORK/cmtime-client.out" '^DISCONNECTED status=STATUS_SUCCESS conn=([1-9]|10)$' 10 \
	"cmtime-client: 10 NdkDisconnect after cmtime's disconnects"
check_rc cmtime-client 0 "cmtime-client: ndk_peer saw everything it expected"
check "$G" '^cmtime: rc=0$' "cmtime-client: cmtime succeeded"

note "rping: the connection phase"
# rping's client asks for IRD/ORD 1/1 and sends no private data.
check "$WORK/rping.out" '^PEER-REQUEST rds=0 pd= ird=1 ord=1 conn=1$' "rping: libndk got rping's request"
check "$WORK/rping.out" '^ACCEPTED status=STATUS_SUCCESS conn=1$' "rping: NdkAccept succeeded"
check "$G" '^rping: .*ESTABLISHED' "rping: rping's client saw the connection established"
# After that only the end is checked, not how it ends: rping's first Send
# finds no receive posted on our side (libndk then terminates the
# connection, and rping sees DISCONNECTED), or nothing answers it and
# `timeout` stops rping.
check "$G" '^rping: rc=[0-9]+$' "rping: rping ended"
check "$WORK/rping.out" '^DISCONNECTED status=STATUS_[A-Z_]+ conn=1$' "rping: the connection ended on our side"

finish
