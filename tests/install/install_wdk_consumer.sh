#!/usr/bin/env bash
# Installs the build into a scratch prefix (or takes what is installed on
# the system: --installed) and builds Windows-style sources
# with the installed WDK kit's pkg-config flags only, as a driver porter
# would: every name of the kit's routine table (tests/wdk/every_name.c)
# with -Wall -Wextra -Werror before and after the kit's flags, and the
# sample NDK consumer driver as a shared object, which the installed
# ndkhost then runs over loopback.
#   install_wdk_consumer.sh BUILD_DIR|--installed SOURCE_DIR [CC] [EXTRA_CFLAGS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$2
. "$here/prefix.sh" "$1" "${@:3}"
prefix=$WORK
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

"$here/run_sample_driver.sh" "$BINDIR/ndkhost" "$prefix/ndksample.so" 17473
