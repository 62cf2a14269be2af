#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds an outside consumer
# against it with pkg-config only, as a user of the library would.
set -euo pipefail
build=$1
cc=${2:-cc}
# A sanitized library needs a consumer built with the same runtime.
extra_cflags=${3:-}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:${PKG_CONFIG_PATH:-}
for d in lib lib64 lib/x86_64-linux-gnu; do
	[ -d "$prefix/$d/pkgconfig" ] && PKG_CONFIG_PATH=$prefix/$d/pkgconfig:$PKG_CONFIG_PATH
done
cat >"$prefix/consumer.c" <<'C'
/* Windows consumers include <ndkpi.h> and <ndkinfo.h> by their bare names. */
#include <ndkinfo.h>
#include <ndkpi.h>
#include <ndk/ndk.h>
#include <stdio.h>
int main(void)
{
    NDK_ADAPTER *ad;
    NTSTATUS st = ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &ad);
    if (st != STATUS_SUCCESS) {
        printf("open: %s\n", ndk_status_name(st));
        return 1;
    }
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    st = ad->Dispatch->NdkQueryAdapterInfo(ad, &info, &size);
    ndk_close_adapter(ad);
    printf("installed libndk: NDK %u.%u, %s\n", info.Version.Major, info.Version.Minor, ndk_status_name(st));
    return st == STATUS_SUCCESS ? 0 : 1;
}
C
# shellcheck disable=SC2086 # the extra flags are a word list
"$cc" -std=c11 -Wall -Werror $extra_cflags "$prefix/consumer.c" -o "$prefix/consumer" \
	$(pkg-config --cflags --libs libndk) -Wl,-rpath,"$(pkg-config --variable=libdir libndk)"
"$prefix/consumer"
# The same consumer linked with the static library.
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Werror $extra_cflags "$prefix/consumer.c" -o "$prefix/consumer-static" \
	$(pkg-config --cflags libndk) -L"$(pkg-config --variable=libdir libndk)" \
	-Wl,-Bstatic -lndk -Wl,-Bdynamic $(pkg-config --static --libs-only-l libndk | sed 's/-lndk//')
if ldd "$prefix/consumer-static" | grep -q libndk; then
	echo "FAIL: consumer-static loads libndk.so"
	exit 1
fi
"$prefix/consumer-static"
"$prefix/bin/ndkinfo" -l
