# shellcheck shell=bash
# Shared by the drivers that test one of our tools against its rdma-core
# counterpart (rping_lib.sh, perftest_lib.sh source it). CTest runs them as
#
#   bash DRIVER TOOL PROJECT_ROOT
#
# TOOL is the built tool under test. Before sourcing, the including file
# sets WORK_PREFIX (the work folder's name), GUEST_TIMEOUT (run-guest.sh's
# -t) and GUEST_PACKAGES (what the guest build must hold, or empty). This
# file sets up a work folder, runs background processes with their output
# in files, waits for marker lines with a bound, collects assertions (with
# common.sh), and at the end shows every log.
# Drivers that need the siw guest call need_guest, which skips (exit 77)
# when the harness, root or the guest build is missing.

set -u

TOOL=${1:?path of the tool under test}
PROJECT=${2:?project root}
HARNESS=${NDK_INTEROP_DIR:-$PROJECT/../shared/interop}
TEST_NAME=$(basename "$0" .sh)
# A 1 MiB ping line (rping -v) would drown the logs shown at the end.
LOG_WIDTH=300

# shellcheck source=tests/interop/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ ! -x "$TOOL" ]; then
	echo "ERROR: no $(basename "$TOOL") at $TOOL"
	exit 1
fi

setup_work "$WORK_PREFIX"

# need_guest: the siw harness, root, and an up-to-date guest, else skip.
need_guest() {
	need_harness
	if [ "$(id -u)" -ne 0 ]; then
		skip "the siw harness needs root (QEMU, and build-guest.sh installs packages)"
	fi
	build_guest
	local dir=${SIW_GUEST_DIR:-/var/tmp/siw-guest} pkg
	for pkg in $GUEST_PACKAGES; do
		if [ -r "$dir/manifest" ] && ! grep -q "^Package: $pkg " "$dir/manifest"; then
			skip "the guest build has no $pkg (see $dir/manifest)"
		fi
	done
}

# wait_line NAME REGEX SECONDS: true once a line of NAME.out matches the
# extended REGEX; false after SECONDS, or as soon as NAME has ended
# without printing it.
wait_line() { wait_count "$1.out" "$2" 1 "$3" "$1"; }
