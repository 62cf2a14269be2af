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
# in files, waits for marker lines with a bound, collects assertions, and
# at the end shows every log. It ends only processes it started, by PID.
# Drivers that need the siw guest call need_guest, which skips (exit 77)
# when the harness, root or the guest build is missing.

set -u

TOOL=${1:?path of the tool under test}
PROJECT=${2:?project root}
HARNESS=${NDK_INTEROP_DIR:-$PROJECT/../shared/interop}
TEST_NAME=$(basename "$0" .sh)
T0=$SECONDS
FAILS=0
SKIPPED=
declare -A PID_OF=() RC_OF=()

if [ ! -x "$TOOL" ]; then
	echo "ERROR: no $(basename "$TOOL") at $TOOL"
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ndk-$WORK_PREFIX-$TEST_NAME.XXXXXX")

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
# `ctest --output-on-failure` tells the whole story, keep the folder when
# something failed (or NDK_INTEROP_KEEP is set).
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
		# A 1 MiB ping line (rping -v) would drown the rest: cut long lines.
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

# need_guest: the siw harness, root, and an up-to-date guest, else skip.
# build-guest.sh is idempotent (about 5 s when up to date) but must never
# run twice at once: CTest serialises the guest tests (RESOURCE_LOCK), and
# flock covers a driver started by hand next to them.
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
	local dir=${SIW_GUEST_DIR:-/var/tmp/siw-guest} pkg
	for pkg in $GUEST_PACKAGES; do
		if [ -r "$dir/manifest" ] && ! grep -q "^Package: $pkg " "$dir/manifest"; then
			skip "the guest build has no $pkg (see $dir/manifest)"
		fi
	done
}

# start NAME CMD...: CMD in the background, stdout in NAME.out, stderr in
# NAME.err. libndk's own trace (NDK_DEBUG) goes to stderr with it.
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
	"$HARNESS/run-guest.sh" -t "$GUEST_TIMEOUT" "${extra[@]}" "$@" - <"$script" >"$WORK/$name.out" 2>&1 &
	PID_OF[$name]=$!
}

# The guest scripts' run NAME CMD...: CMD's lines, and a final "rc=N",
# each prefixed with "NAME: " (busybox sh).
# shellcheck disable=SC2016,SC2034 # expanded in the guest; used by the drivers
GUEST_RUN_FN='run() {
	n=$1
	shift
	{ "$@"; echo "rc=$?"; } 2>&1 | sed "s/^/$n: /"
}'

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
# -p (QEMU binds it on 127.0.0.1). Each random candidate is asked about on
# its own (ss filters in the kernel): the host may hold tens of thousands
# of sockets (other tests, benchmarks), and listing them all takes seconds.
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

# check FILE REGEX WHAT: some line of FILE (in $WORK) matches.
check() {
	if grep -Eq -- "$2" "$WORK/$1" 2>/dev/null; then
		pass "$3"
	else
		fail "$3: no line of $1 matches /$2/"
	fi
}

# check_count FILE REGEX N WHAT: exactly N lines of FILE match.
check_count() {
	local got
	got=$(grep -Ec -- "$2" "$WORK/$1" 2>/dev/null)
	if [ "${got:-0}" -eq "$3" ]; then
		pass "$4"
	else
		fail "$4: ${got:-0} line(s) of $1 match /$2/, expected $3"
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

finish() {
	[ "$FAILS" -eq 0 ] && exit 0
	exit 1
}
