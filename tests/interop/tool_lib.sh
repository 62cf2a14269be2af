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

# forward_ports CASE...: a free host port HOST_PORT[CASE] for each case's guest
# port GPORT[CASE], and the run-guest.sh options that forward them in FWD.
declare -A HOST_PORT=()
forward_ports() {
	local n
	FWD=()
	for n in "$@"; do
		HOST_PORT[$n]=$(free_port) || die "no free port"
		FWD+=(-p "${HOST_PORT[$n]}:${GPORT[$n]}")
	done
}

# boot_guest_servers WHAT: boots the guest ("guest") with one server per
# case, SERVER[CASE] in the background, its lines prefixed with the case name
# and then "rc=N", forwarded as FWD says; returns once every GPORT listens
# (the forwards accept on the host as soon as QEMU runs, so connecting
# earlier only hits a closed port).
declare -A SERVER=()
boot_guest_servers() {
	local n
	{
		echo "$GUEST_RUN_FN"
		echo "$GUEST_LISTEN_FN"
		for n in "${CASES[@]}"; do
			echo "run $n ${SERVER[$n]} &"
		done
		echo "wait_listen ${GPORT[*]} || exit 1"
		echo "echo GUEST-LISTENING"
		echo "wait"
	} >"$WORK/guest.sh"
	run_guest guest "$WORK/guest.sh" "${FWD[@]}"
	wait_line guest '^GUEST-LISTENING$' 90 || die "the guest's $1 servers did not start"
}

# split_args ARGS... -- ARGS...: the arguments before the -- in SARGS, those
# after it in CARGS (a server's and its client's).
# shellcheck disable=SC2034 # used by the drivers
split_args() {
	SARGS=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		SARGS+=("$1")
		shift
	done
	shift
	CARGS=("$@")
}

# usage NAME MODE ARGS...: TOOL MODE ARGS... is refused as a usage error
# (exit status 2); NAME.out and NAME.err keep what it printed.
usage() {
	local name=$1 mode=$2
	shift 2
	"$TOOL" "$mode" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
	RC_OF[$name]=$?
	check_rc "$name" 2 "usage: $(basename "$TOOL") $mode $* is refused"
}
