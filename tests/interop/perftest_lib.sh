# shellcheck shell=bash
# Shared by the perftest drivers (tests/interop/perftest_siw_*.sh), which
# CTest runs as
#
#   bash DRIVER NDKPERF PROJECT_ROOT
#
# NDKPERF is the built ndkperf; its --perftest mode (perftest 6.06's
# protocol over rdma_cm) is under test against Debian's perftest 4.5+0.17
# on Linux siw in the harness's QEMU guest. This file makes a work folder,
# runs background processes with their output in files, waits for marker
# lines with a bound, collects assertions, and at the end shows every log.
# It ends only processes it started, by PID. need_guest skips (exit 77)
# when the harness, root or the guest build is missing.

set -u

NDKPERF=${1:?path of ndkperf}
PROJECT=${2:?project root}
HARNESS=${NDK_INTEROP_DIR:-$PROJECT/../shared/interop}
TEST_NAME=$(basename "$0" .sh)
T0=$SECONDS
FAILS=0
SKIPPED=
declare -A PID_OF=() RC_OF=()

if [ ! -x "$NDKPERF" ]; then
	echo "ERROR: no ndkperf at $NDKPERF"
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ndk-perftest-$TEST_NAME.XXXXXX")

note() { echo "--- [$((SECONDS - T0)) s] $*"; }
pass() { echo "ok: $*"; }
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}
skip() {
	echo "SKIP: $*"
	SKIPPED=1
	exit 77
}
die() {
	fail "$*"
	exit 1
}

# On exit: stop what still runs (our PIDs only), print every log so that
# `ctest --output-on-failure` tells the whole story, and keep the folder
# when something failed (or NDK_INTEROP_KEEP is set).
on_exit() {
	local name pid f
	for name in "${!PID_OF[@]}"; do
		pid=${PID_OF[$name]}
		if kill -0 "$pid" 2>/dev/null; then
			echo "stopping $name (pid $pid)"
			kill "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
		fi
	done
	for f in "$WORK"/*.out "$WORK"/*.err; do
		[ -s "$f" ] || continue
		echo "===== $(basename "$f")"
		cut -c1-300 "$f"
	done
	if [ -n "$SKIPPED" ]; then
		echo "===== $TEST_NAME: skipped"
	else
		echo "===== $TEST_NAME: $FAILS failure(s), $((SECONDS - T0)) s"
	fi
	if [ "$FAILS" -eq 0 ] && [ -z "${NDK_INTEROP_KEEP:-}" ]; then
		rm -rf "$WORK"
	else
		echo "logs kept in $WORK"
	fi
}
trap on_exit EXIT

# need_guest: the harness, root, and an up-to-date guest build, else skip
# (77). build-guest.sh is idempotent (seconds when up to date) but must
# never run twice at once: CTest serialises the guest tests (RESOURCE_LOCK
# siw_guest), and the same flock as the other interop drivers covers a
# driver started by hand next to them.
need_guest() {
	if [ ! -x "$HARNESS/run-guest.sh" ] || [ ! -x "$HARNESS/build-guest.sh" ]; then
		skip "no siw harness in $HARNESS (set NDK_INTEROP_DIR to the folder with run-guest.sh)"
	fi
	if [ "$(id -u)" -ne 0 ]; then
		skip "the siw harness needs root (QEMU, and build-guest.sh installs packages)"
	fi
	local log=$WORK/build-guest.log rc
	note "build-guest.sh"
	if command -v flock >/dev/null; then
		flock "${TMPDIR:-/tmp}/ndk-interop-build-guest.lock" "$HARNESS/build-guest.sh" >"$log" 2>&1
	else
		"$HARNESS/build-guest.sh" >"$log" 2>&1
	fi
	rc=$?
	if [ $rc -ne 0 ]; then
		tail -n 20 "$log"
		skip "build-guest.sh failed with status $rc (it needs root and Debian's package mirror)"
	fi
	local dir=${SIW_GUEST_DIR:-/var/tmp/siw-guest}
	if [ -r "$dir/manifest" ] && ! grep -q '^Package: perftest ' "$dir/manifest"; then
		skip "the guest build has no perftest (see $dir/manifest)"
	fi
}

# start NAME CMD...: CMD in the background, stdout in NAME.out, stderr in
# NAME.err, with libndk's own trace (NDK_DEBUG) in NAME.err too.
start() {
	local name=$1
	shift
	NDK_DEBUG=${NDK_DEBUG-1} "$@" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" &
	PID_OF[$name]=$!
}

# run_guest NAME SCRIPTFILE [run-guest.sh options...]: boots the guest in
# the background with the script as its command; its console goes to
# NAME.out. NDK_INTEROP_GUEST_OPTS adds run-guest.sh options (e.g.
# "-a siw.dyndbg=+p", then read dmesg in the guest).
run_guest() {
	local name=$1 script=$2 extra=()
	shift 2
	if [ -n "${NDK_INTEROP_GUEST_OPTS:-}" ]; then
		read -r -a extra <<<"$NDK_INTEROP_GUEST_OPTS"
	fi
	note "guest $name: run-guest.sh ${extra[*]} $*"
	"$HARNESS/run-guest.sh" -t 250 "${extra[@]}" "$@" - <"$script" >"$WORK/$name.out" 2>&1 &
	PID_OF[$name]=$!
}

# wait_line NAME REGEX SECONDS: true once a line of NAME.out matches the
# extended REGEX; false after SECONDS, or as soon as NAME has ended
# without printing it.
wait_line() {
	local name=$1 re=$2 secs=$3 file=$WORK/$1.out
	local end=$((SECONDS + secs))
	while :; do
		grep -Eq -- "$re" "$file" 2>/dev/null && return 0
		if ! kill -0 "${PID_OF[$name]}" 2>/dev/null; then
			grep -Eq -- "$re" "$file" 2>/dev/null
			return
		fi
		[ $SECONDS -ge $end ] && return 1
		sleep 0.05
	done
}

# wait_exit NAME SECONDS: waits for NAME (killed after SECONDS) and keeps
# its exit status in RC_OF[NAME].
wait_exit() {
	local name=$1 secs=$2
	local pid=${PID_OF[$name]} end=$((SECONDS + secs))
	while kill -0 "$pid" 2>/dev/null; do
		if [ $SECONDS -ge $end ]; then
			fail "$name did not end within $secs s; killed"
			kill "$pid" 2>/dev/null
			break
		fi
		sleep 0.05
	done
	wait "$pid" 2>/dev/null
	RC_OF[$name]=$?
	unset "PID_OF[$name]"
}

# free_port: a TCP port no socket on this host uses now, for run-guest.sh
# -p (QEMU binds it on 127.0.0.1); each random candidate is asked about on
# its own, which stays fast with many sockets on the host.
free_port() {
	local p _
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 30000))
		if command -v ss >/dev/null; then
			[ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ] || continue
		elif grep -qi ":$(printf '%04X' "$p") " /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
			continue
		fi
		echo "$p"
		return 0
	done
	return 1
}

# Each case: the test it runs and its options, the same on both sides
# (perftest 6.06 does not exchange them). A case is named after its test,
# or after its test and what differs ("send_bw_D": send_bw with -D).
test_of() { echo "${1%_D}"; }
test_args() {
	case $1 in
	*_D) echo "-D 2 -s 4096" ;;
	*_bw) echo "-n 200 -s 65536" ;;
	*) echo "-n 200" ;;
	esac
}
test_size() {
	case $1 in
	*_D) echo 4096 ;;
	*_bw) echo 65536 ;;
	*) echo 2 ;;
	esac
}
# The iterations a results line shows: -n's, or any count with -D.
test_iters() {
	case $1 in
	*_D) echo "[0-9]+" ;;
	*) echo 200 ;;
	esac
}

# perftest's clock check fails now and then under TCG ("Correlation
# coefficient r^2 ... < 0.9", then "Can't produce a report" and the run is
# abandoned): that says nothing about the protocol, so such a case counts
# as inconclusive, not as failed.
# shellcheck disable=SC2034 # used by the drivers
PERFTEST_CLOCK_RE="Can't produce a report"

# check FILE REGEX WHAT: some line of FILE (in $WORK) matches.
check() {
	if grep -Eq -- "$2" "$WORK/$1" 2>/dev/null; then
		pass "$3"
	else
		fail "$3: no line of $1 matches /$2/"
	fi
}

# check_none FILE REGEX WHAT: no line of FILE matches.
check_none() {
	if grep -Eq -- "$2" "$WORK/$1" 2>/dev/null; then
		fail "$3: $1 has: $(grep -Em1 -- "$2" "$WORK/$1")"
	else
		pass "$3"
	fi
}

# check_rc NAME EXPECTED WHAT
check_rc() {
	if [ "${RC_OF[$1]:-none}" = "$2" ]; then
		pass "$3"
	else
		fail "$3: $1 exited with ${RC_OF[$1]:-?}, expected $2"
	fi
}

# bw_avg FILE PREFIX SIZE: the BW average column of the results line that
# starts with PREFIX (a regex) and the message size, or nothing.
bw_avg() {
	grep -E -- "^$2 *$3 +[0-9]+ +[0-9.]+ +[0-9.]+" "$WORK/$1" | head -n 1 |
		sed -E "s/^$2 *$3 +[0-9]+ +[0-9.]+ +([0-9.]+).*/\\1/"
}

# check_same_avg FILE1 PREFIX1 FILE2 PREFIX2 SIZE WHAT: both results lines
# show the same BW average (the server prints what the client measured).
check_same_avg() {
	local a b
	a=$(bw_avg "$1" "$2" "$5")
	b=$(bw_avg "$3" "$4" "$5")
	if [ -n "$a" ] && [ "$a" = "$b" ]; then
		pass "$6 ($a MB/s on both sides)"
	else
		fail "$6: ${a:-none} in $1, ${b:-none} in $3"
	fi
}

finish() {
	[ "$FAILS" -eq 0 ] && exit 0
	exit 1
}
