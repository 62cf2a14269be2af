#!/usr/bin/env bash
# publish_plots.sh [--remark TEXT] CONNRATE_OUT DATAPATH_OUT
# Copies the plots of a bench/run.sh run (CONNRATE_OUT, its OUT folder)
# and of a bench/datapath/run.sh run (DATAPATH_OUT) into bench/plots/, and
# rewrites README.md's plot section (between its plots:begin and plots:end
# markers) to show them, each with the date, machine and commit it was made
# on (the run's plot-note.txt), after TEXT, if given (say, that it was a
# short sample run). Commit the result.
set -euo pipefail
remark=
if [ "${1:-}" = --remark ]; then remark=$2; shift 2; fi
[ $# = 2 ] || { echo "usage: publish_plots.sh [--remark TEXT] CONNRATE_OUT DATAPATH_OUT" >&2; exit 2; }
conn=$1 dp=$2
src=$(cd "$(dirname "$0")/.." && pwd)
readme=$src/README.md
dest=$src/bench/plots
mkdir -p "$dest"

block=$(mktemp)
trap 'rm -f "$block"' EXIT
{
	echo '<!-- plots:begin: written by bench/publish_plots.sh -->'
	if [ -n "$remark" ]; then echo; echo "$remark"; fi
	# entry DIR FILE TITLE
	entry() {
		[ -f "$1/$2" ] || { echo "publish_plots.sh: $1/$2 is missing" >&2; exit 1; }
		cp "$1/$2" "$dest/$2"
		echo
		echo "**$3.** $(cat "$1/plot-note.txt")."
		echo
		echo "![$3](bench/plots/$2)"
	}
	entry "$conn" connrate.png "Connection rate against raw TCP (bench/run.sh)"
	for pl in same cross; do
		place="both processes on one CPU"; [ "$pl" = cross ] && place="server and client on two CPUs"
		[ -f "$dp/latency_$pl.png" ] || continue
		entry "$dp" "latency_$pl.png" "Latency against message size, $place (bench/datapath/run.sh)"
		entry "$dp" "bandwidth_$pl.png" "Bandwidth against message size, $place (bench/datapath/run.sh)"
	done
	echo
	echo '<!-- plots:end -->'
} > "$block"
grep -q '^<!-- plots:begin' "$readme" && grep -q '^<!-- plots:end -->' "$readme" ||
	{ echo "publish_plots.sh: README.md has no plots:begin / plots:end markers" >&2; exit 1; }
awk -v blockfile="$block" '
	/^<!-- plots:begin/ { while ((getline l < blockfile) > 0) print l; skip = 1; next }
	/^<!-- plots:end -->/ { skip = 0; next }
	!skip' "$readme" > "$readme.new"
mv "$readme.new" "$readme"
echo "publish_plots.sh: README.md and bench/plots/ updated"
