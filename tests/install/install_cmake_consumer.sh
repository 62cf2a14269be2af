#!/usr/bin/env bash
# Installs the build into a scratch prefix (or takes what is installed on
# the system: --installed) and builds an outside project against it with
# find_package(ndk CONFIG) only (cmake_consumer/): the consumer with
# ndk::ndk and with ndk::ndk_static, the WDK kit's routine table and the
# sample driver with ndk::wdk, which the installed ndkhost then runs; and
# the version file's rules: the installed version and older ones of the
# same major version are accepted, newer and other majors refused.
#   install_cmake_consumer.sh BUILD_DIR|--installed SOURCE_DIR [CC] [EXTRA_CFLAGS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$2
. "$here/prefix.sh" "$1" "${@:3}"

cfg=(-DCMAKE_PREFIX_PATH="$PREFIX" -DNDK_SOURCE_DIR="$src")
version=$(sed -n 's/^project(libndk VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
IFS=. read -r major minor patch <<<"$version"
check_version() { # WANT EXPECT
	cmake -S "$here/cmake_consumer" -B "$WORK/v-$1" "${cfg[@]}" -DNDK_WANT_VERSION="$1" -DNDK_EXPECT="$2" >/dev/null ||
		{ echo "FAIL: find_package(ndk $1) should give $2 with $version installed"; exit 1; }
	echo "ok: find_package(ndk $1): $2"
}
check_version "$version" FOUND
check_version "$major.0" FOUND
check_version "$major.$((minor + 1))" NOTFOUND
check_version "$((major + 1)).0" NOTFOUND

cmake -S "$here/cmake_consumer" -B "$WORK/build" "${cfg[@]}" -DCMAKE_C_COMPILER="$cc" \
	-DCMAKE_C_FLAGS="$extra_cflags" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$WORK/configure.log" ||
	{ cat "$WORK/configure.log"; exit 1; }
grep 'found ndk' "$WORK/configure.log"
cmake --build "$WORK/build" -j2 >"$WORK/build.log" || { cat "$WORK/build.log"; exit 1; }
echo "ok: consumer, consumer_static, every name of the kit and the sample driver built with ndk::ndk, ndk::ndk_static and ndk::wdk"
"$WORK/build/consumer"
if ldd "$WORK/build/consumer_static" | grep -q libndk; then
	echo "FAIL: consumer_static loads libndk.so"
	exit 1
fi
"$WORK/build/consumer_static"
"$here/run_sample_driver.sh" "$BINDIR/ndkhost" "$WORK/build/ndksample.so" 17475
