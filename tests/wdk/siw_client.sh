#!/bin/bash
# wdk siw_client - the sample NDK consumer driver (drivers/ndksample.c), run
# by ndkhost on the host as a client, against rdma-core's rping server on
# Linux siw in the QEMU guest: the driver opens interface index 1 (lo)
# through WskOpenNdkAdapter, connects to the guest's rping (forwarded to
# 127.0.0.1), and does rping's exchange: its Sends advertise a
# fast-registered region that siw RDMA-Reads and RDMA-Writes, 10 pings, each
# compared byte for byte; then it disconnects and unloads clean.
#
#   bash siw_client.sh NDKHOST PROJECT_ROOT NDKSAMPLE
WORK_PREFIX=wdk
GUEST_TIMEOUT=150
GUEST_PACKAGES=
# shellcheck source=tests/interop/tool_lib.sh
source "$(dirname "$0")/../interop/tool_lib.sh"
SAMPLE=${3:?path of ndksample.so}
need_guest

GPORT=7174
HPORT=$(free_port) || die "no free port"
# The guest script: rping's server with its lines prefixed "rping: " and
# its exit status; GUEST-LISTENING once it listens.
cat >"$WORK/guest.sh" <<'GUEST'
run() {
	n=$1
	shift
	{ "$@"; echo "rc=$?"; } 2>&1 | sed "s/^/$n: /"
}
GUEST
cat >>"$WORK/guest.sh" <<GUEST
run rping timeout 120 rping -s -a 10.0.2.15 -p $GPORT -C 10 -S 64 -v &
i=0
while ! ss -ltn | grep -q ":$GPORT "; do
	i=\$((i + 1))
	[ \$i -gt 300 ] && { echo GUEST-NOT-LISTENING; exit 1; }
	sleep 0.1
done
echo GUEST-LISTENING
wait
GUEST
run_guest guest "$WORK/guest.sh" -p "$HPORT:$GPORT"
wait_line guest '^GUEST-LISTENING$' 90 || die "the guest's rping server did not start"

# delay-first: a siw 6.1 server drops a Send that arrives right behind the
# connection's establishment (docs/interop.md); the driver waits 200 ms.
path='\Registry\Machine\System\CurrentControlSet\Services\ndksample;mode=client'
path="$path;client-if=1;client=127.0.0.1;server=127.0.0.1;port=$HPORT;pings=10;size=64;ext=0;delay-first=200"
note "ndkhost ndksample.so (client) -> guest rping -s"
start host timeout 90 "$TOOL" "$SAMPLE" "$path"
wait_exit host 100
wait_exit guest 60

check_rc host 0 "ndkhost exited 0: DriverEntry succeeded, the driver unloaded, nothing left behind"
check host.err 'client: 10 pings of 64 bytes verified' "the driver compared 10 pings siw read and wrote"
check host.err 'client: disconnected, 4 receives cancelled' "the driver disconnected and its receives were flushed"
check host.err 'PASS: ndksample: DriverEntry STATUS_SUCCESS, unloaded, nothing left behind' \
	"ndkhost's verdict"
check guest.out '^rping: rc=0$' "the guest's rping server exited 0"
check_count guest.out '^rping: server ping data: rdma-ping-' 10 "rping served 10 pings"
finish
