#!/usr/bin/env bash
# Builds libndk and runs its whole test suite (every CTest label).
#   ./test.sh              normal build in build/
#   ./test.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
#   ./test.sh --tsan       ThreadSanitizer build in build-tsan/ (without the sim tests,
#                          which are single-threaded; suppressions, each
#                          with its reason: tests/tsan.supp)
# Extra arguments after the flag go to ctest (e.g. -L unit, -LE interop);
# --build-only there (first) configures and builds without running ctest.
set -euo pipefail
cd "$(dirname "$0")"
dir=build
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
case "${1:-}" in
--sanitize)
	shift
	dir=build-asan
	cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DNDK_SANITIZE=ON)
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	;;
--tsan)
	shift
	dir=build-tsan
	cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNDK_TSAN=ON)
	export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$PWD/tests/tsan.supp}
	;;
esac
build_only=
if [ "${1:-}" = --build-only ]; then
	shift
	build_only=1
fi
cmake -S . -B "$dir" "${cmake_args[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
[ -z "$build_only" ] || exit 0
ctest --test-dir "$dir" --output-on-failure --timeout 300 "$@"
