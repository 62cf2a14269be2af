#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds Windows-style sources
# with the installed WDK kit's pkg-config flags only, as a driver porter
# would: every name of the kit's routine table (tests/wdk/every_name.c)
# with -Wall -Wextra -Werror before and after the kit's flags, and the
# sample NDK consumer driver as a shared object, which the installed
# ndkhost then runs over loopback.
#   install_wdk_consumer.sh BUILD_DIR SOURCE_DIR [CC] [EXTRA_CFLAGS]
set -euo pipefail
build=$1
src=$2
cc=${3:-cc}
# A sanitized library needs consumers built with the same runtime.
extra_cflags=${4:-}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:${PKG_CONFIG_PATH:-}
for d in lib lib64 lib/x86_64-linux-gnu; do
	[ -d "$prefix/$d/pkgconfig" ] && PKG_CONFIG_PATH=$prefix/$d/pkgconfig:$PKG_CONFIG_PATH
done
cflags=$(pkg-config --cflags libndk-wdk)
libs=$(pkg-config --libs libndk-wdk)
libdir=$(pkg-config --variable=libdir libndk-wdk)
echo "pkg-config --cflags libndk-wdk: $cflags"
echo "pkg-config --libs libndk-wdk: $libs"
case " $cflags " in
*"/include/ndk-wdk "*) ;;
*) echo "FAIL: the kit's include folder is not in the flags"; exit 1 ;;
esac

# shellcheck disable=SC2086 # flag lists
"$cc" $extra_cflags $cflags -Wall -Wextra -Werror -c "$src/tests/wdk/every_name.c" -o "$prefix/every1.o"
# shellcheck disable=SC2086
"$cc" $extra_cflags -Wall -Wextra -Werror $cflags -c "$src/tests/wdk/every_name.c" -o "$prefix/every2.o"
echo "ok: every name of the routine table compiles with -Wall -Wextra -Werror (both orders)"

# shellcheck disable=SC2086
"$cc" $extra_cflags $cflags -c "$src/tests/wdk/drivers/ndksample.c" -o "$prefix/ndksample.o"
# shellcheck disable=SC2086
"$cc" $extra_cflags -shared "$prefix/ndksample.o" -o "$prefix/ndksample.so" $libs -Wl,-rpath,"$libdir"
echo "ok: the sample driver builds with the kit's flags only"

out=$("$prefix/bin/ndkhost" "$prefix/ndksample.so" \
	'\Registry\Machine\System\CurrentControlSet\Services\ndksample;server-if=1;client-if=1;server=127.0.0.1;client=127.0.0.1;port=17473' 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" != 0 ] || ! grep -q 'PASS: ndksample: DriverEntry STATUS_SUCCESS, unloaded, nothing left behind' <<<"$out"; then
	echo "FAIL: the installed ndkhost did not run the driver clean (exit $rc)"
	exit 1
fi
echo "ok: the installed ndkhost ran the driver built from the installed kit"
