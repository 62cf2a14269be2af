#!/usr/bin/env bash
# libndk.so and libndk.a define exactly the entry points of ndk.h
# (symbols.txt) as global symbols: the linker version script and the
# prelinked static library keep every internal name local.
set -euo pipefail
expected=$1
shared=$2
static=$3
want=$(sort "$expected")
# nm -D lists the version node (an absolute symbol) too: drop it.
have_so=$(nm -D --defined-only "$shared" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort)
have_a=$(nm -g --defined-only "$static" | awk 'NF == 3 {print $3}' | sort)
status=0
for kind in so a; do
	if [ "$kind" = so ]; then have=$have_so; file=$shared; else have=$have_a; file=$static; fi
	if [ "$have" != "$want" ]; then
		echo "FAIL: $file exports a different symbol set:"
		diff <(echo "$want") <(echo "$have") | sed 's/^/  /' || true
		status=1
	else
		echo "ok: $file exports $(echo "$have" | wc -l) symbols: $(echo "$have" | tr '\n' ' ')"
	fi
done
# The shared library's symbols carry the version node.
if ! nm -D --defined-only "$shared" | grep -q 'ndk_open_adapter@@LIBNDK_0$'; then
	echo "FAIL: ndk_open_adapter is not versioned LIBNDK_0"
	status=1
fi
exit $status
