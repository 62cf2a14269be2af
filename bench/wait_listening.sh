# wait_listening.sh - sourced by the bench scripts that start a server
# process and then its client (run.sh, ab.sh).
#
# wait_listening LOG PID: returns 0 once the server writing LOG says it is
# "listening on" its port, 1 if it exited first or said nothing in 5 s
# (then the client's own connect timeout reports the failure).
wait_listening() {
	local i
	for i in $(seq 50); do
		grep -q "listening on" "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
