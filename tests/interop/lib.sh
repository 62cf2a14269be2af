# shellcheck shell=bash
# Shared by the siw interop drivers (tests/interop/siw_*.sh), which CTest runs
# as: bash DRIVER NDK_PEER CM_PEER|none PROJECT_ROOT
#
# Finds the harness, skips (exit 77) when it cannot be used, runs background
# processes with their output in files, waits for marker lines with a bound,
# and collects assertions. Every wait here is bounded; processes are ended
# only by the PIDs this script started.

set -u

NDK_PEER=${1:?ndk_peer path}
CM_PEER=${2:?cm_peer path or none}
PROJECT=${3:?project root}
HARNESS=${NDK_INTEROP_DIR:-$PROJECT/../shared/interop}
TEST_NAME=$(basename "$0" .sh)
T_START=$SECONDS

SKIPPED=
skip() {
	echo "SKIP: $*"
	SKIPPED=1
	exit 77
}
die() {
	echo "ERROR: $*"
	FAILS=$((FAILS + 1))
	exit 1
}
note() { echo "--- [$((SECONDS - T_START)) s] $*"; }

if [ ! -x "$HARNESS/run-guest.sh" ] || [ ! -x "$HARNESS/build-guest.sh" ]; then
	skip "no siw harness in $HARNESS (set NDK_INTEROP_DIR to the folder with run-guest.sh)"
fi
[ -x "$NDK_PEER" ] || {
	echo "ERROR: no ndk_peer at $NDK_PEER"
	exit 1
}

# libndk's own trace (stderr, in NAME.err) makes a failure readable without
# a second run.
export NDK_DEBUG=${NDK_DEBUG-1}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ndk-interop-$TEST_NAME.XXXXXX")
FAILS=0
declare -A PID_OF=() RC_OF=()

# On exit: stop what is still running (only our own PIDs), show every log so
# that `ctest --output-on-failure` has the whole story, and keep the folder
# when something failed.
cleanup() {
	local name pid
	for name in "${!PID_OF[@]}"; do
		pid=${PID_OF[$name]}
		if kill -0 "$pid" 2>/dev/null; then
			echo "stopping $name (pid $pid)"
			kill "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
		fi
	done
	local f
	for f in "$WORK"/*.out "$WORK"/*.err; do
		[ -s "$f" ] || continue
		echo "===== $(basename "$f")"
		cat "$f"
	done
	if [ -n "$SKIPPED" ]; then
		echo "===== $TEST_NAME: skipped"
	else
		echo "===== $TEST_NAME: $FAILS failure(s), $((SECONDS - T_START)) s"
	fi
	if [ "$FAILS" -eq 0 ] && [ -z "${NDK_INTEROP_KEEP:-}" ]; then
		rm -rf "$WORK"
	else
		echo "logs kept in $WORK"
	fi
}
trap cleanup EXIT

need_cm_peer() {
	if [ "$CM_PEER" = none ] || [ ! -x "$CM_PEER" ]; then
		skip "cm_peer was not built: install librdmacm-dev and libibverbs-dev and re-run cmake"
	fi
}

# build-guest.sh is idempotent and takes a few seconds when the guest is up
# to date. It must never run twice at once: CTest serialises these tests
# (RESOURCE_LOCK), and flock covers a driver started by hand next to them.
build_guest() {
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
}

# start NAME CMD...: runs CMD in the background; stdout in $WORK/NAME.out,
# stderr in $WORK/NAME.err, stdin from $WORK/NAME.in when that exists.
start() {
	local name=$1 input=/dev/null
	shift
	[ -e "$WORK/$name.in" ] && input=$WORK/$name.in
	"$@" <"$input" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	PID_OF[$name]=$!
}

# run_guest NAME SCRIPT [run-guest.sh options...]: boots the guest in the
# background with SCRIPT as its command ("-": read from stdin, here NAME.in);
# the guest's console goes to $WORK/NAME.out. NDK_INTEROP_GUEST_OPTS adds
# run-guest.sh options, e.g. "-v -a siw.dyndbg=+p" for siw's debug messages
# (they then reach the console: loglevel=8 is appended too).
run_guest() {
	local name=$1 script=$2 extra=()
	shift 2
	cp "$script" "$WORK/$name.in"
	if [ -n "${NDK_INTEROP_GUEST_OPTS:-}" ]; then
		read -r -a extra <<<"$NDK_INTEROP_GUEST_OPTS"
		extra+=(-a loglevel=8)
	fi
	note "guest $name: run-guest.sh ${extra[*]} $*"
	start "$name" "$HARNESS/run-guest.sh" -t 180 "${extra[@]}" "$@" -
}

# wait_line FILE REGEX SECONDS [NAME]: true once a line of FILE matches the
# extended REGEX; false after SECONDS, or as soon as process NAME has ended
# without printing it. Polls the file: the writer is another process.
wait_line() {
	local file=$1 re=$2 secs=$3 name=${4:-}
	local end=$((SECONDS + secs))
	while :; do
		grep -Eq -- "$re" "$file" 2>/dev/null && return 0
		if [ -n "$name" ] && ! kill -0 "${PID_OF[$name]}" 2>/dev/null; then
			grep -Eq -- "$re" "$file" 2>/dev/null
			return
		fi
		[ $SECONDS -ge $end ] && return 1
		sleep 0.05
	done
}

# wait_count FILE REGEX N SECONDS [NAME]: as wait_line, for N matching lines.
wait_count() {
	local file=$1 re=$2 n=$3 secs=$4 name=${5:-}
	local end=$((SECONDS + secs))
	while :; do
		[ "$(grep -Ec -- "$re" "$file" 2>/dev/null)" -ge "$n" ] && return 0
		if [ -n "$name" ] && ! kill -0 "${PID_OF[$name]}" 2>/dev/null; then
			[ "$(grep -Ec -- "$re" "$file" 2>/dev/null)" -ge "$n" ]
			return
		fi
		[ $SECONDS -ge $end ] && return 1
		sleep 0.05
	done
}

# wait_exit NAME SECONDS: waits for process NAME (killing it after SECONDS)
# and stores its exit status in RC_OF[NAME].
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

# listen_port NAME: the port of "LISTENING port=P" in NAME.out.
listen_port() {
	sed -n 's/^LISTENING port=\([0-9]*\)$/\1/p' "$WORK/$1.out" | head -n 1
}

# free_port: a TCP port no socket on this host uses now, for run-guest.sh -p
# (QEMU binds it on 127.0.0.1). Reads /proc so that no extra tool is needed.
free_port() {
	local used p _ local_addr
	used=" "
	for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r "$f" ] || continue
		while read -r _ local_addr _; do
			# The header, and any line read while the table changed under
			# us (seen once: an empty port made $((16#)) fail the test).
			case $local_addr in
			*:[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]) ;;
			*) continue ;;
			esac
			used="$used$((16#${local_addr##*:})) "
		done <"$f"
	done
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 30000))
		case "$used" in *" $p "*) continue ;; esac
		echo "$p"
		return 0
	done
	return 1
}

# hexof TEXT: TEXT's octets in lower-case hex, as the peers print them.
hexof() { printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'; }

fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}
pass() { echo "ok: $*"; }

# check FILE REGEX WHAT: some line of FILE matches the extended REGEX.
check() {
	if grep -Eq -- "$2" "$1" 2>/dev/null; then
		pass "$3"
	else
		fail "$3: no line of $(basename "$1") matches /$2/"
	fi
}

# check_count FILE REGEX N WHAT: exactly N lines of FILE match.
check_count() {
	local got
	got=$(grep -Ec -- "$2" "$1" 2>/dev/null)
	if [ "$got" -eq "$3" ]; then
		pass "$4"
	else
		fail "$4: $got line(s) of $(basename "$1") match /$2/, expected $3"
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

# Shell functions for the guest scripts (busybox sh). run NAME CMD... runs
# CMD and prefixes each of its lines, and a final "rc=N", with "NAME: ".
# wait_listen PORT... returns once ss shows each port listening (max ~30 s).
# Used by the drivers, expanded into their guest scripts as it is.
# shellcheck disable=SC2034,SC2016
GUEST_LIB='
run() {
	n=$1
	shift
	{ "$@"; echo "rc=$?"; } 2>&1 | sed "s/^/$n: /"
}
wait_listen() {
	i=0
	for p in "$@"; do
		while ! ss -ltn | grep -q ":$p "; do
			i=$((i + 1))
			if [ $i -gt 300 ]; then
				echo "GUEST-NOT-LISTENING $p"
				return 1
			fi
			sleep 0.1
		done
	done
}
'
