#!/usr/bin/env bash
# plot_test.sh DIR: bench/plot.sh draws a line plot (with a missing value)
# and a bar plot from canned data into DIR, each a PNG file; a table
# without data is refused. Exit 77 without gnuplot.
set -uo pipefail
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot is not installed (apt-get install gnuplot-nox)"; exit 77; }
mkdir -p "$dir"
printf 'size\tlibndk poll\traw TCP\n64\t12.5\t10.1\n4096\t-\t14.0\n1048576\t410\t380\n' > "$dir/lines.tsv"
printf 'what\traw TCP\tlibndk\nserial\t9000\t7000\n64 in flight\t30000\t-\n' > "$dir/bars.tsv"
printf 'size\tlibndk poll\n' > "$dir/empty.tsv"
rm -f "$dir"/*.png
export PLOT_NOTE="canned data, \"quoted\" note"
failed=0
"$here/plot.sh" lines "$dir/lines.tsv" "$dir/lines.png" 'Latency "test"' "size" "us" logy || failed=1
"$here/plot.sh" bars "$dir/bars.tsv" "$dir/bars.png" "Rate" "conn/s" || failed=1
for f in lines bars; do
	if [ "$(head -c 8 "$dir/$f.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
		echo "FAIL: $f.png is not a PNG file"; failed=1
	fi
done
if "$here/plot.sh" lines "$dir/empty.tsv" "$dir/empty.png" "t" "x" "y" 2>/dev/null; then
	echo "FAIL: a table without data was plotted"; failed=1
fi
[ "$failed" = 0 ] && echo "ok: line and bar plots drawn, an empty table refused"
exit "$failed"
