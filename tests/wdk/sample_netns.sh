#!/usr/bin/env bash
# The sample NDK consumer driver (drivers/ndksample.c) run by ndkhost in a
# network namespace whose interfaces carry the indexes the driver names:
# a veth pair created with explicit indexes 71 and 72 (10.71.0.1 and
# 10.71.0.2). The driver's listener opens its adapter by interface index 71,
# its client by 72, through WSK. Exit 77 where namespaces cannot be made.
#   sample_netns.sh NDKHOST DRIVER
set -uo pipefail
host=$1 driver=$2
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
	echo "skip: needs root and iproute2 to make a network namespace"
	exit 77
fi
ns=ndkwdk-$$
if ! ip netns add "$ns" 2>/dev/null; then
	echo "skip: cannot create a network namespace here"
	exit 77
fi
trap 'ip netns del "$ns" 2>/dev/null' EXIT
in_ns() { ip netns exec "$ns" "$@"; }
if ! in_ns ip link add ndkA index 71 type veth peer name ndkB index 72; then
	echo "skip: cannot create a veth pair with explicit interface indexes"
	exit 77
fi
in_ns ip link set lo up
in_ns ip addr add 10.71.0.1/24 dev ndkA
in_ns ip addr add 10.71.0.2/24 dev ndkB
in_ns ip link set ndkA up
in_ns ip link set ndkB up

status=0
run() {
	local name=$1 path=$2
	shift 2
	out=$(in_ns timeout 120 "$host" "$driver" "$path" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed "s/^/$name: /"
	if [ "$rc" != 0 ]; then
		echo "FAIL: $name: ndkhost exited $rc"
		status=1
		return
	fi
	for pattern in "$@"; do
		if ! grep -qE -- "$pattern" <<<"$out"; then
			echo "FAIL: $name: no line matches: $pattern"
			status=1
		fi
	done
}
svc='\Registry\Machine\System\CurrentControlSet\Services\ndksample'
# The driver's defaults: interfaces 71 and 72, 10 pings of 64 bytes, the
# extended phase.
run defaults "$svc" \
	'server: interface 71 is ndkA, MTU 1500' 'client: interface 72 is ndkB, MTU 1500' \
	'client: 10 pings of 64 bytes verified' \
	"server: the client's Write landed, its SendAndInvalidate invalidated token" \
	'client: RDMA Write and Read back verified, SendAndInvalidate and Invalidate done' \
	'server: 10 pings served .* flushed 4 receives' 'client: disconnected, 4 receives cancelled' \
	'PASS: ndksample: DriverEntry STATUS_SUCCESS, unloaded, nothing left behind'
# Buffers of several pages: multi-SGE local lists, multi-page registrations.
run pages "$svc;size=9000;pings=50" 'client: 50 pings of 9000 bytes verified' \
	'PASS: ndksample'
# An interface index nobody has: DriverEntry fails cleanly, nothing leaks.
out=$(in_ns timeout 60 "$host" "$driver" "$svc;client-if=73" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/no-such-if: /'
if [ "$rc" != 1 ] || ! grep -q 'client: no interface with index 73' <<<"$out" ||
	! grep -q 'DriverEntry returned STATUS_NOT_FOUND' <<<"$out" ||
	! grep -q '0 verifier finding' <<<"$out" || grep -q 'left allocated\|left open' <<<"$out"; then
	echo "FAIL: no-such-if: expected a clean STATUS_NOT_FOUND from DriverEntry (exit $rc)"
	status=1
fi
[ "$status" = 0 ] && echo "ok: the sample driver ran in a namespace with interface indexes 71 and 72"
exit "$status"
