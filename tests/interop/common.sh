# shellcheck shell=bash
# What the two driver libraries share: lib.sh (the siw drivers, siw_*.sh)
# and tool_lib.sh (our tools against their rdma-core counterparts) source
# this file, then call setup_work. It collects assertions, runs background
# processes with their output in files, waits for marker lines with a
# bound, boots the guest, and at the end shows every log. Every wait here
# is bounded; processes are ended only by the PIDs this script started.
#
# Before sourcing, the including file sets HARNESS and TEST_NAME; before
# run_guest, GUEST_TIMEOUT (run-guest.sh's -t). LOG_WIDTH, when set, cuts
# the log lines shown at the end to that many characters.

T_START=$SECONDS
FAILS=0
SKIPPED=
declare -A PID_OF=() RC_OF=()

note() { echo "--- [$((SECONDS - T_START)) s] $*"; }
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

# setup_work PREFIX: the work folder ($WORK), and the exit trap.
setup_work() {
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/ndk-$1-$TEST_NAME.XXXXXX")
	trap on_exit EXIT
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
		if [ -n "${LOG_WIDTH:-}" ]; then
			cut -c1-"$LOG_WIDTH" "$f"
		else
			cat "$f"
		fi
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

# need_harness: skips unless HARNESS holds run-guest.sh and build-guest.sh.
need_harness() {
	if [ ! -x "$HARNESS/run-guest.sh" ] || [ ! -x "$HARNESS/build-guest.sh" ]; then
		skip "no siw harness in $HARNESS (set NDK_INTEROP_DIR to the folder with run-guest.sh)"
	fi
}

# build_guest: build-guest.sh is idempotent (about 5 s when up to date,
# 10 CPU seconds of apt-cache and sha256sum, 25 s on a loaded host) but
# must never run twice at once: CTest serialises the guest tests
# (RESOURCE_LOCK), and flock covers a driver started by hand next to them.
# NDK_INTEROP_GUEST_BUILT=1 says that the caller ran build-guest.sh already
# in this session and it succeeded (.ci/run does, before its suites): the
# drivers then use that guest instead of asking again each, as long as its
# files are there.
build_guest() {
	local log=$WORK/build-guest.log rc dir=${SIW_GUEST_DIR:-/var/tmp/siw-guest}
	if [ -n "${NDK_INTEROP_GUEST_BUILT:-}" ] && [ -s "$dir/initramfs.cpio.gz" ] && [ -s "$dir/manifest" ]; then
		note "build-guest.sh already ran (NDK_INTEROP_GUEST_BUILT): the guest in $dir"
		return 0
	fi
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

# start NAME CMD...: CMD in the background; stdout in $WORK/NAME.out,
# stderr in $WORK/NAME.err, stdin from $WORK/NAME.in when that exists.
# libndk's own trace (NDK_DEBUG) goes to stderr with it.
start() {
	local name=$1 input=/dev/null
	shift
	[ -e "$WORK/$name.in" ] && input=$WORK/$name.in
	NDK_DEBUG=${NDK_DEBUG-1} "$@" <"$input" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	PID_OF[$name]=$!
}

# run_guest NAME SCRIPTFILE [run-guest.sh options...]: boots the guest in
# the background with the script as its command, the guest's console in
# NAME.out, and returns once the guest says it is ready (the harness's
# "siw-guest: ready" line, printed before the script runs).
# NDK_INTEROP_GUEST_OPTS adds run-guest.sh options, e.g. "-v -a
# siw.dyndbg=+p" for siw's debug messages (they then reach the console:
# loglevel=8 is appended too).
#
# A guest that is not ready after GUEST_BOOT_SECS is booted once more:
# nothing of the test has run in it yet, so a second boot repeats no part
# of what the test checks. Under TCG a boot takes 4-9 s (the harness
# README's timings), but CI once saw a guest print nothing at all for 120 s
# (interop.siw_responder_p2p, which failed as "the guest server did not
# start" before any connection). The first attempt's console stays in
# NAME.boot1.out, shown at the end with the other logs.
GUEST_BOOT_SECS=${GUEST_BOOT_SECS:-60}
run_guest() {
	local name=$1 script=$2 extra=() attempt
	shift 2
	if [ -n "${NDK_INTEROP_GUEST_OPTS:-}" ]; then
		read -r -a extra <<<"$NDK_INTEROP_GUEST_OPTS"
		extra+=(-a loglevel=8)
	fi
	for attempt in 1 2; do
		cp "$script" "$WORK/$name.in"
		note "guest $name: run-guest.sh ${extra[*]} $* (boot $attempt)"
		start "$name" "$HARNESS/run-guest.sh" -t "$GUEST_TIMEOUT" "${extra[@]}" "$@" -
		if wait_count "$WORK/$name.out" '^siw-guest: ready' 1 "$GUEST_BOOT_SECS" "$name"; then
			return 0
		fi
		note "guest $name: not ready after $GUEST_BOOT_SECS s (boot $attempt)"
		kill "${PID_OF[$name]}" 2>/dev/null
		wait "${PID_OF[$name]}" 2>/dev/null
		unset "PID_OF[$name]"
		mv "$WORK/$name.out" "$WORK/$name.boot$attempt.out"
		mv "$WORK/$name.err" "$WORK/$name.boot$attempt.err"
	done
	die "guest $name: not ready after two boots of $GUEST_BOOT_SECS s each"
}

# The guest scripts' run NAME CMD...: CMD's lines, and a final "rc=N",
# each prefixed with "NAME: " (busybox sh).
# shellcheck disable=SC2016,SC2034 # expanded in the guest; used by the drivers
GUEST_RUN_FN='run() {
	n=$1
	shift
	{ "$@"; echo "rc=$?"; } 2>&1 | sed "s/^/$n: /"
}'

# The guest scripts' wait_listen PORT...: returns once ss shows each port
# listening (about 30 s at most in all), else prints "GUEST-NOT-LISTENING
# PORT" and returns 1.
# shellcheck disable=SC2016,SC2034 # expanded in the guest; used by the drivers
GUEST_LISTEN_FN='wait_listen() {
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
}'

# log_path FILE: FILE itself when it is a path, else $WORK/FILE.
log_path() {
	case $1 in
	*/*) echo "$1" ;;
	*) echo "$WORK/$1" ;;
	esac
}

# wait_count FILE REGEX N SECONDS [NAME]: true once N lines of FILE match
# the extended REGEX; false after SECONDS, or as soon as process NAME has
# ended without printing them. Polls the file: the writer is another
# process.
wait_count() {
	local file re=$2 n=$3 secs=$4 name=${5:-}
	local end=$((SECONDS + secs))
	file=$(log_path "$1")
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

# check FILE REGEX WHAT: some line of FILE (a path, or a name in $WORK)
# matches the extended REGEX.
check() {
	local file
	file=$(log_path "$1")
	if grep -Eq -- "$2" "$file" 2>/dev/null; then
		pass "$3"
	else
		fail "$3: no line of $(basename "$file") matches /$2/"
	fi
}

# check_count FILE REGEX N WHAT: exactly N lines of FILE match.
check_count() {
	local file got
	file=$(log_path "$1")
	got=$(grep -Ec -- "$2" "$file" 2>/dev/null)
	if [ "${got:-0}" -eq "$3" ]; then
		pass "$4"
	else
		fail "$4: ${got:-0} line(s) of $(basename "$file") match /$2/, expected $3"
	fi
}

# check_none FILE REGEX WHAT: no line of FILE matches.
check_none() {
	local file
	file=$(log_path "$1")
	if grep -Eq -- "$2" "$file" 2>/dev/null; then
		fail "$3: $(basename "$file") has: $(grep -Em1 -- "$2" "$file")"
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
