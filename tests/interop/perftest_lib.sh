# shellcheck shell=bash
# Shared by the perftest drivers (tests/interop/perftest_siw_*.sh), which
# CTest runs as
#
#   bash DRIVER NDKPERF PROJECT_ROOT
#
# NDKPERF is the built ndkperf; its --perftest mode (perftest 6.06's
# protocol over rdma_cm) is under test against Debian's perftest 4.5+0.17
# on Linux siw in the harness's QEMU guest. The work folder, processes,
# bounded waits and checks come from tool_lib.sh; this file adds the test
# cases and reading perftest's results lines.

WORK_PREFIX=perftest
GUEST_TIMEOUT=250
GUEST_PACKAGES=perftest
# shellcheck source=tests/interop/tool_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tool_lib.sh"
# shellcheck disable=SC2034 # used by the drivers
NDKPERF=$TOOL

# Each case: the test it runs and its options, the same on both sides
# (perftest 6.06 does not exchange them). A case is named after its test,
# or after its test and what differs ("send_bw_D": send_bw with -D,
# "send_lat_a": send_lat with -a, every size 2 B .. 8 MiB; -n 5 keeps the
# 8 MiB ping-pongs short under TCG).
test_of() {
	local t=${1%_D}
	echo "${t%_a}"
}
test_args() {
	case $1 in
	*_D) echo "-D 2 -s 4096" ;;
	*_a) echo "-a -n 5" ;;
	*_bw) echo "-n 200 -s 65536" ;;
	*) echo "-n 200" ;;
	esac
}
# The size of the (last) results line.
test_size() {
	case $1 in
	*_D) echo 4096 ;;
	*_a) echo 8388608 ;;
	*_bw) echo 65536 ;;
	*) echo 2 ;;
	esac
}
# The iterations a results line shows: -n's, or any count with -D.
test_iters() {
	case $1 in
	*_D) echo "[0-9]+" ;;
	*_a) echo 5 ;;
	*) echo 200 ;;
	esac
}
# The results lines a case prints: one per size.
test_lines() {
	case $1 in
	*_a) echo 23 ;;
	*) echo 1 ;;
	esac
}

# clock_inconclusive NAME: perftest's clock check fails now and then under
# TCG ("Correlation coefficient r^2 ... < 0.9", then "Can't produce a
# report" and the run is abandoned): that says nothing about the protocol,
# so when the guest's lines of case NAME say so, the case is noted as
# inconclusive (true), not counted as failed.
clock_inconclusive() {
	grep -q -- "^$1: .*Can't produce a report" "$WORK/guest.out" || return 1
	note "$1: inconclusive: guest perftest's own clock check failed (TCG); not counted"
}

# check FILE REGEX WHAT: some line of FILE (in $WORK) matches.
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

# host_listening NAME CASE: waits (20 s at most) for the listening line of
# the ndkperf server NAME and keeps its port in PORT_OF[CASE].
declare -A PORT_OF=()
host_listening() {
	wait_line "$1" '^ndkperf --perftest .* server: listening on .* port [0-9]+ ' 20 ||
		die "$1: ndkperf --perftest did not start listening"
	PORT_OF[$2]=$(sed -nE 's/^ndkperf --perftest .* server: listening on .* port ([0-9]+) .*/\1/p' "$WORK/$1.out" | head -n 1)
	[ -n "${PORT_OF[$2]}" ] || die "$1: no port in its listening line"
}

# guest_server CASE SECONDS PREFIX: the guest script's lines (after
# $GUEST_LISTEN_FN) that run CASE's perftest server on GPORT[CASE], killed
# after SECONDS; "GUEST-LISTENING CASE" once it listens (the forwards accept
# on the host as soon as QEMU runs, so connecting earlier only meets a
# closed port), its output prefixed with "PREFIX: " and "PREFIX: rc=N" when
# it has ended, then "GUEST-DONE CASE". One server at a time.
guest_server() {
	local n=$1 secs=$2 prefix=$3
	cat <<EOF
timeout $secs ib_$(test_of "$n") -d siw0 -R -p ${GPORT[$n]} $(test_args "$n") >/tmp/$n.log 2>&1 &
pid=\$!
wait_listen ${GPORT[$n]} || true
echo "GUEST-LISTENING $n"
wait \$pid
rc=\$?
sed "s/^/$prefix: /" /tmp/$n.log
echo "$prefix: rc=\$rc"
echo "GUEST-DONE $n"
EOF
}

# clients_of_guest PREFIX LISTEN_S RUN_S [OPTION...]: for each case, once
# the guest's server listens (LISTEN_S at most), ndkperf --perftest as its
# client PREFIXCASE through HOST_PORT[CASE] with OPTIONs (RUN_S at most), then
# the server's GUEST-DONE (RUN_S at most).
clients_of_guest() {
	local prefix=$1 listen_s=$2 run_s=$3 n
	shift 3
	for n in "${CASES[@]}"; do
		if ! wait_line guest "^GUEST-LISTENING $n\$" "$listen_s"; then
			fail "$n: the guest's perftest server did not start listening"
			break
		fi
		# shellcheck disable=SC2046
		start "$prefix$n" timeout "$run_s" "$NDKPERF" --perftest "$(test_of "$n")" -p "${HOST_PORT[$n]}" \
			$(test_args "$n") "$@" 127.0.0.1
		wait_exit "$prefix$n" $((run_s + 10))
		wait_line guest "^GUEST-DONE $n\$" "$run_s" || fail "$n: the guest's perftest server did not end"
	done
}
