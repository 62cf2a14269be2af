# shellcheck shell=bash
# Sourced by bench/run.sh and bench/datapath/run.sh.
#
# cpu_busy_pct: busy % of all CPUs over 0.5 s, from /proc/stat
# (user+nice+system+irq+softirq+steal against the total, idle and iowait
# being the rest).
cpu_busy_pct() {
	local a b i t1=0 t2=0
	read -r -a a < /proc/stat
	sleep 0.5
	read -r -a b < /proc/stat
	for i in 1 2 3 4 5 6 7 8; do t1=$((t1 + a[i])); t2=$((t2 + b[i])); done
	local dt=$((t2 - t1)) di=$((b[4] + b[5] - a[4] - a[5]))
	[ "$dt" -gt 0 ] || { echo 0; return; }
	echo $(((100 * (dt - di)) / dt))
}
