#!/usr/bin/env bash
# plot.sh - the benchmarks' plots, with gnuplot (apt-get install gnuplot-nox).
#
#   plot.sh lines DATA.tsv OUT.png TITLE XLABEL YLABEL [logy]
#       one line per column against the first (message sizes in bytes,
#       log scale); DATA's first row names the columns
#   plot.sh bars DATA.tsv OUT.png TITLE YLABEL
#       clustered bars: one cluster per row (its first column names it),
#       one bar per further column
#   plot.sh note
#       prints the line the run.sh scripts put under their plots (PLOT_NOTE):
#       the date, the machine and the commit measured
#
# DATA is tab-separated; "-" is a missing value (a run that failed or an
# anchor that is not installed). PLOT_NOTE, when set, is printed under the
# plot (the run.sh scripts put the date, machine and commit there).
# Exit status 0 with the PNG written; 1 on failure; 77 without gnuplot.
set -euo pipefail
if [ "$1" = note ]; then
	src=$(cd "$(dirname "$0")/.." && pwd)
	commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
	[ -n "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit (modified)"
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc), Linux $(uname -r), commit $commit"
	exit 0
fi
kind=$1 data=$2 out=$3 title=$4
if ! command -v gnuplot >/dev/null; then
	echo "plot.sh: gnuplot is not installed (apt-get install gnuplot-nox): $out not drawn" >&2
	exit 77
fi
ncol=$(awk -F'\t' 'NR == 1 {print NF; exit}' "$data")
rows=$(awk -F'\t' 'NR > 1 && NF > 1' "$data" | wc -l)
if [ "${ncol:-0}" -lt 2 ] || [ "$rows" -lt 1 ]; then
	echo "plot.sh: $data has no data to plot" >&2
	exit 1
fi
# gnuplot strings are double-quoted: keep the caller's quotes out of them.
q() { printf '"%s"' "${1//\"/\'}"; }

common="set terminal pngcairo size 960,600 font 'DejaVu Sans,10' noenhanced
set output $(q "$out")
set datafile separator '\t'
set datafile missing '-'
set title $(q "$title")
set grid
set key outside right top
set bmargin 5
set label 1 $(q "${PLOT_NOTE:-}") at screen 0.01, screen 0.02 font ',8'"

case $kind in
lines)
	xlabel=$5 ylabel=$6 logy=${7:-}
	gnuplot <<GP
$common
set logscale x 2
set format x '%.0b%B'
set xlabel $(q "$xlabel")
set ylabel $(q "$ylabel")
$( [ "$logy" = logy ] && echo "set logscale y 10" )
plot for [i=2:$ncol] $(q "$data") using 1:i with linespoints pointsize 1 title columnheader(i)
GP
	;;
bars)
	ylabel=$5
	gnuplot <<GP
$common
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set xrange [-0.6:$rows - 0.4]
set ylabel $(q "$ylabel")
plot for [i=2:$ncol] $(q "$data") using i:xtic(1) title columnheader(i)
GP
	;;
*)
	echo "plot.sh: kind must be lines or bars" >&2
	exit 1
	;;
esac
[ -s "$out" ] || { echo "plot.sh: gnuplot wrote no $out" >&2; exit 1; }
echo "plot: $out"
