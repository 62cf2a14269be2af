#!/usr/bin/env bash
# run_sample_driver.sh NDKHOST DRIVER.so PORT
# Runs the sample NDK consumer driver (tests/wdk/drivers/ndksample.c), built
# from an installed kit, with an installed ndkhost: a listener and a client
# over loopback on PORT; passes only on ndkhost's clean verdict.
set -uo pipefail
ndkhost=$1
driver=$2
port=$3
out=$("$ndkhost" "$driver" \
	"\\Registry\\Machine\\System\\CurrentControlSet\\Services\\ndksample;server-if=1;client-if=1;server=127.0.0.1;client=127.0.0.1;port=$port" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" != 0 ] || ! grep -q 'PASS: ndksample: DriverEntry STATUS_SUCCESS, unloaded, nothing left behind' <<<"$out"; then
	echo "FAIL: $ndkhost did not run $driver clean (exit $rc)"
	exit 1
fi
echo "ok: $ndkhost ran the driver built from the installed kit"
