#!/usr/bin/env bash
# Installs the build into a scratch prefix (or takes what is installed on
# the system: --installed) and builds an outside consumer (consumer.c)
# against it with pkg-config only, as a user of the library would.
#   install_consumer.sh BUILD_DIR|--installed [CC] [EXTRA_CFLAGS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/prefix.sh" "$@"
prefix=$WORK
# shellcheck disable=SC2086 # the extra flags are a word list
"$cc" -std=c11 -Wall -Werror $extra_cflags "$here/consumer.c" -o "$prefix/consumer" \
	$(pkg-config --cflags --libs libndk) -Wl,-rpath,"$(pkg-config --variable=libdir libndk)"
"$prefix/consumer"
# The same consumer linked with the static library.
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Werror $extra_cflags "$here/consumer.c" -o "$prefix/consumer-static" \
	$(pkg-config --cflags libndk) -L"$(pkg-config --variable=libdir libndk)" \
	-Wl,-Bstatic -lndk -Wl,-Bdynamic $(pkg-config --static --libs-only-l libndk | sed 's/-lndk//')
if ldd "$prefix/consumer-static" | grep -q libndk; then
	echo "FAIL: consumer-static loads libndk.so"
	exit 1
fi
"$prefix/consumer-static"
"$BINDIR/ndkinfo" -l
