#!/bin/bash
# interop.siw_abort - an abort (process killed with SIGKILL) from either
# side of an established libndk <-> Linux siw connection, and what the other
# end sees. One guest boot, two cm_peer (librdmacm) servers in the guest,
# ndk_peer connect --hold on the host:
#
#   hostkill  ndk_peer connects and holds; once both sides report the
#             connection established, the driver kills ndk_peer (kill -9).
#             The host kernel closes its TCP socket, QEMU passes the close
#             on, and siw must report RDMA_CM_EVENT_DISCONNECTED: cm_peer
#             prints CM-DISCONNECTED and exits 0, within a bound.
#   guestkill ndk_peer connects and holds; the guest script kills cm_peer
#             (kill -9) once it printed CM-ESTABLISHED. The guest kernel
#             destroys the rdma_cm id, siw closes its socket, and libndk must
#             report the peer's disconnect: ndk_peer prints
#             PEER-DISCONNECTED, then DISCONNECTED ... peer_first=1, and
#             exits 0, within a bound.
#
# Usage (CTest): bash siw_abort.sh NDK_PEER CM_PEER|none [PROJECT_ROOT]
# PROJECT_ROOT defaults to the tree this script is in.
set -- "${1:-}" "${2:-}" "${3:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/interop/lib.sh
source "$(dirname "$0")/lib.sh"
need_cm_peer
build_guest

# How long the far end may take to notice the abort.
BOUND=${NDK_ABORT_BOUND:-30}

declare -A HP
for n in hostkill guestkill; do
	HP[$n]=$(free_port) || die "no free port"
done
[ "${HP[hostkill]}" != "${HP[guestkill]}" ] || HP[guestkill]=$(free_port) || die "no free port"

# cm_peer for guestkill runs without timeout(1), so that kill -9 hits
# cm_peer itself; its waits are bounded by --timeout, and a watchdog ends it.
cat >"$WORK/guest.sh" <<EOF
$GUEST_LIB
wait_file() {
	i=0
	while ! grep -q "\$2" "\$1"; do
		i=\$((i + 1))
		[ \$i -gt \$3 ] && return 1
		sleep 0.1
	done
}
timeout 150 /root/cm_peer server 7190 --pd abort-hostkill --timeout 60 > /tmp/hostkill.log 2>&1 &
a=\$!
/root/cm_peer server 7191 --pd abort-guestkill --timeout 120 > /tmp/guestkill.log 2>&1 &
b=\$!
( sleep 150; kill \$b 2>/dev/null ) &
wait_listen 7190 7191 || exit 1
echo GUEST-LISTENING

# hostkill: the host kills ndk_peer; cm_peer must see DISCONNECTED and end.
wait_file /tmp/hostkill.log '^CM-ESTABLISHED' 900 && echo GUEST-HOSTKILL-ESTABLISHED
wait \$a; echo "hostkill: rc=\$?"
sed 's/^/hostkill: /' /tmp/hostkill.log

# guestkill: kill cm_peer as soon as the connection is established.
if wait_file /tmp/guestkill.log '^CM-ESTABLISHED' 1200; then
	kill -9 \$b
	echo GUEST-GUESTKILL-KILLED
fi
wait \$b; echo "guestkill: rc=\$?"
sed 's/^/guestkill: /' /tmp/guestkill.log
# Give siw time to finish the close before the guest powers off.
sleep 2
EOF
run_guest guest "$WORK/guest.sh" -f "$CM_PEER:/root/cm_peer" \
	-p "${HP[hostkill]}:7190" -p "${HP[guestkill]}:7191"
G=$WORK/guest.out
wait_line "$G" '^GUEST-LISTENING$' 120 guest || die "the guest servers did not start"

# hold_stdin NAME: a FIFO as NAME's stdin (start() takes NAME.in), kept open
# by a sleep so that ndk_peer --hold sees no line and no EOF.
hold_stdin() {
	mkfifo "$WORK/$1.in" || die "mkfifo"
	# shellcheck disable=SC2016
	start "$1-stdin" bash -c 'exec sleep 200 >"$0"' "$WORK/$1.in"
}

note "hostkill: kill -9 of ndk_peer while connected"
hold_stdin hostkill
start hostkill "$NDK_PEER" connect "127.0.0.1:${HP[hostkill]}" --pd abort-from-ndk --no-p2p \
	--hold --timeout 120
if wait_line "$WORK/hostkill.out" '^HOLDING conn=1$' 60 hostkill &&
	wait_line "$G" '^GUEST-HOSTKILL-ESTABLISHED$' 30 guest; then
	# Let siw settle in RTS before the abort.
	sleep 1
	kill -9 "${PID_OF[hostkill]}"
	t0=$SECONDS
	wait_exit hostkill 10
	if wait_line "$G" '^hostkill: rc=' "$BOUND" guest; then
		note "hostkill: the guest's cm_peer ended $((SECONDS - t0)) s after the kill"
	else
		fail "hostkill: the guest's cm_peer did not end within $BOUND s of the kill"
	fi
	check_rc hostkill 137 "hostkill: ndk_peer was killed by SIGKILL"
else
	fail "hostkill: the connection was not established on both sides"
fi
kill "${PID_OF[hostkill-stdin]}" 2>/dev/null
wait_exit hostkill-stdin 5

note "guestkill: kill -9 of cm_peer in the guest while connected"
hold_stdin guestkill
start guestkill "$NDK_PEER" connect "127.0.0.1:${HP[guestkill]}" --pd abort-from-ndk --no-p2p \
	--hold --timeout 60
if wait_line "$WORK/guestkill.out" '^HOLDING conn=1$' 60 guestkill &&
	wait_line "$G" '^GUEST-GUESTKILL-KILLED$' 30 guest; then
	t0=$SECONDS
	if wait_line "$WORK/guestkill.out" '^DISCONNECTED ' "$BOUND" guestkill; then
		note "guestkill: ndk_peer reported the disconnect $((SECONDS - t0)) s after the kill"
	else
		fail "guestkill: ndk_peer reported no disconnect within $BOUND s of the kill"
	fi
else
	fail "guestkill: the connection was not established on both sides"
fi
wait_exit guestkill 20
kill "${PID_OF[guestkill-stdin]}" 2>/dev/null
wait_exit guestkill-stdin 5
wait_exit guest 150

check_rc guest 0 "the guest script ran to its end"

note "hostkill: what the guest saw"
check "$G" "^hostkill: CM-REQUEST pd=$(hexof abort-from-ndk)[0-9a-f]* pd_len=[0-9]+ ird=1 ord=1$" \
	"hostkill: siw got the request"
check "$G" '^hostkill: CM-ESTABLISHED ' "hostkill: siw reported ESTABLISHED"
check "$G" '^hostkill: CM-DISCONNECTED$' "hostkill: siw reported DISCONNECTED after the host's abort"
check "$G" '^hostkill: rc=0$' "hostkill: cm_peer server exited 0"
check "$WORK/hostkill.out" '^CONNECTED status=STATUS_SUCCESS conn=1$' "hostkill: libndk connected"
check_count "$WORK/hostkill.out" '^DISCONNECTED ' 0 "hostkill: ndk_peer died before any disconnect"

note "guestkill: what libndk saw"
check "$WORK/guestkill.out" '^CONNECTED status=STATUS_SUCCESS conn=1$' "guestkill: libndk connected"
check "$G" '^guestkill: CM-ESTABLISHED ' "guestkill: siw reported ESTABLISHED"
check "$G" '^guestkill: rc=137$' "guestkill: cm_peer was killed by SIGKILL"
check "$WORK/guestkill.out" '^PEER-DISCONNECTED conn=1$' "guestkill: libndk raised the disconnect event"
check "$WORK/guestkill.out" '^DISCONNECTED status=STATUS_SUCCESS peer_first=1 conn=1$' \
	"guestkill: NdkDisconnect after the peer's abort succeeded"
check_rc guestkill 0 "guestkill: ndk_peer saw everything it expected"

finish
