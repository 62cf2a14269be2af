#!/bin/bash
# cli.sh - what every tool promises on its command line (docs/tools.md),
# checked on this host's loopback adapter (CTest label conformance):
#
#   --help and --version of every tool and mode: exit 0, the exit statuses
#   in the help, the version line
#   usage errors: exit 2 and the hint
#   clear errors, exit 1: an adapter that does not exist, or an address no
#   adapter has, lists the candidates; a refused connect names the address
#   and port
#   the live line of ndkperf -a and -D: drawn on a terminal (a pty from
#   script(1)), nothing extra when stderr is a pipe or a file
#
# Run by hand: bash tools/tests/cli.sh build/tools
set -u
BIN=${1:?the folder with ndkinfo, ndkping and ndkperf/ndkperf}
NDKINFO=$BIN/ndkinfo
NDKPING=$BIN/ndkping
NDKPERF=$BIN/ndkperf/ndkperf
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ndk-tools-cli.XXXXXX")
FAILS=0
trap 'rm -rf "$WORK"' EXIT

pass() { echo "ok: $*"; }
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

# run NAME CMD...: runs CMD (bounded); stdout in NAME.out, stderr in
# NAME.err, exit status in RC.
run() {
	local name=$1
	shift
	timeout 60 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null
	RC=$?
}

# expect NAME STATUS FILE REGEX WHAT: the last run exited with STATUS and
# a line of NAME.FILE (out or err) matches the extended REGEX.
expect() {
	local name=$1 status=$2 file=$3 re=$4 what=$5
	if [ "$RC" != "$status" ]; then
		fail "$what: exit status $RC, expected $status"
		sed 's/^/    /' "$WORK/$name.err" | head -n 5
	elif ! grep -Eq -- "$re" "$WORK/$name.$file"; then
		fail "$what: no line of $name.$file matches /$re/"
		sed 's/^/    /' "$WORK/$name.$file" | head -n 5
	else
		pass "$what"
	fi
}

# help_and_version NAME CMD...: CMD --help and CMD --version.
help_and_version() {
	local name=$1
	shift
	run "$name-help" "$@" --help
	expect "$name-help" 0 out 'Exit status: 0 success' "$name: --help shows the exit statuses"
	run "$name-version" "$@" --version
	expect "$name-version" 0 out '^nd(kinfo|kping|kperf|kstat) [0-9]+\.[0-9]+\.[0-9]+ \(libndk, NDK [0-9]+\.[0-9]+\)$' \
		"$name: --version"
}

help_and_version ndkinfo "$NDKINFO"
help_and_version ndkstat "$BIN/ndkstat"
help_and_version ndkping "$NDKPING"
help_and_version rping "$NDKPING" --rping
help_and_version ucmatose "$NDKPING" --ucmatose
help_and_version ndkperf "$NDKPERF"
help_and_version perftest "$NDKPERF" --perftest

# Usage errors: exit 2, what is wrong, and where to look.
usage() {
	local name=$1
	shift
	run "$name" "$@"
	expect "$name" 2 err "Try '.* --help'\\.$" "usage: $* exits 2 with the hint"
}
usage ndkinfo-arg "$NDKINFO" extra
usage ndkinfo-opt "$NDKINFO" --bogus
usage ndkstat-pid "$BIN/ndkstat" -p 0
usage ndkping-role "$NDKPING" -a 127.0.0.1
usage ndkping-port "$NDKPING" -c -a 127.0.0.1 -p 70000
usage rping-size "$NDKPING" --rping -c -a 127.0.0.1 -S 5
usage ucmatose-count "$NDKPING" --ucmatose -c 0
usage ndkperf-test "$NDKPERF" bogus_lat --loopback
usage ndkperf-depth "$NDKPERF" write_bw --loopback -q 0
usage ndkperf-moderation "$NDKPERF" send_bw --loopback --moderation=100
usage perftest-all "$NDKPERF" --perftest write_bw -a

# An adapter that does not exist: named, and the candidates listed.
CANDIDATES='the adapters here \(-d takes a name or an address\):.* lo \(127\.0\.0\.1'
run ndkinfo-bogus "$NDKINFO" -d nosuchif0
expect ndkinfo-bogus 1 err "cannot open adapter 'nosuchif0': STATUS_NOT_FOUND" "ndkinfo -d nosuchif0 names it"
expect ndkinfo-bogus 1 err "$CANDIDATES" "ndkinfo -d nosuchif0 lists the candidates"
run ndkping-bogus "$NDKPING" --loopback -d nosuchif0
expect ndkping-bogus 1 err "$CANDIDATES" "ndkping -d nosuchif0 lists the candidates"
run ndkperf-bogus "$NDKPERF" send_lat -c 127.0.0.1 -d nosuchif0
expect ndkperf-bogus 1 err "cannot open adapter 'nosuchif0'" "ndkperf -d nosuchif0 names it"
expect ndkperf-bogus 1 err "$CANDIDATES" "ndkperf -d nosuchif0 lists the candidates"
# An address no adapter has (TEST-NET-1, never assigned here).
run ndkping-addr "$NDKPING" -s -a 192.0.2.99 -C 1
expect ndkping-addr 1 err 'no adapter has the address 192\.0\.2\.99 \(the listen address \(-a\)\); name one with -d' \
	"ndkping -s -a 192.0.2.99 says no adapter has it"
expect ndkping-addr 1 err "$CANDIDATES" "ndkping -s -a 192.0.2.99 lists the candidates"
run ucmatose-addr "$NDKPING" --ucmatose -b 192.0.2.99
expect ucmatose-addr 1 err 'no adapter has the address 192\.0\.2\.99' "ndkping --ucmatose -b 192.0.2.99 says so"

# A refused connect (nothing listens on port 1 of the loopback address):
# the address and the port, and what to check.
REFUSED='connect to 127\.0\.0\.1:1 failed: STATUS_CONNECTION_REFUSED: is a server listening on that address and port\?'
run ndkping-refused "$NDKPING" -c -a 127.0.0.1 -p 1
expect ndkping-refused 1 err "$REFUSED" "ndkping: a refused connect names 127.0.0.1:1"
run rping-refused "$NDKPING" --rping -c -a 127.0.0.1 -p 1
expect rping-refused 1 err "$REFUSED" "ndkping --rping: a refused connect names 127.0.0.1:1"
run ucmatose-refused "$NDKPING" --ucmatose -s 127.0.0.1 -p 1
expect ucmatose-refused 1 err "$REFUSED" "ndkping --ucmatose: a refused connect names 127.0.0.1:1"
run ndkperf-refused "$NDKPERF" send_lat -c 127.0.0.1 -p 1
expect ndkperf-refused 1 err "$REFUSED" "ndkperf: a refused connect names 127.0.0.1:1"

# CQ moderation in events mode: applied, and each side counts its
# notifications per message received.
run ndkperf-mod "$NDKPERF" send_bw --loopback -s 64 -n 2000 --events --moderation=100,16
expect ndkperf-mod 0 out '^ CQ moderation   : 100 us, 16 completions' "ndkperf --moderation: shown in the header"
expect ndkperf-mod 0 out '^ Notifications   : server [0-9]+ for 2000 data messages received \(' \
	"ndkperf --moderation --events: the server's notifications per message"

# The live line: on a terminal it is drawn in place (a carriage return
# and the size's place in the run); piped, stderr has nothing but errors.
live_line() {
	local name=$1 re=$2
	shift 2
	run "$name-pipe" "$@"
	expect "$name-pipe" 0 out '^ +[0-9]+ +[0-9]+ ' "$name, piped: the results"
	if [ -s "$WORK/$name-pipe.err" ]; then
		fail "$name, piped: stderr is not empty: $(head -c 200 "$WORK/$name-pipe.err")"
	else
		pass "$name, piped: nothing on stderr"
	fi
	local cmd
	printf -v cmd '%q ' "$@"
	RC=0
	timeout 120 script -qfec "$cmd" /dev/null >"$WORK/$name-tty.out" 2>&1 </dev/null || RC=$?
	if [ "$RC" = 0 ] && tr '\r' '\n' <"$WORK/$name-tty.out" | grep -Eq -- "$re"; then
		pass "$name, on a terminal: the live line"
	else
		fail "$name, on a terminal: exit status $RC, no line /$re/ drawn in place"
		head -c 400 "$WORK/$name-tty.out" | cat -v
	fi
}
live_line send_lat-all '^[0-9]+ bytes \(size [0-9]+ of 23\): [0-9]+ iterations in [0-9.]+ s, [0-9.]+ us' \
	"$NDKPERF" send_lat --loopback -a -n 200
live_line write_bw-D '^65536 bytes: [0-9]+ messages in [0-9.]+ of 2 s, [0-9.]+ MB/s' \
	"$NDKPERF" write_bw --loopback -D 2

echo "===== cli: $FAILS failure(s)"
[ "$FAILS" -eq 0 ]
