#!/usr/bin/env bash
# check_man_pages.sh BUILD_MAN_DIR SOURCE_MAN_DIR
# Every page built from SOURCE_MAN_DIR/*.md (and every .so link) exists in
# BUILD_MAN_DIR/manN/, and renders without any warning: groff -ww with the
# man macros, and man-db at 80 columns (as lintian runs it); its NAME line
# is one lexgrog (whatis) parses. Exit 77 when pandoc or groff is missing.
set -uo pipefail
out=$1
src=$2
for tool in groff man lexgrog; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: $tool is not installed (apt-get install groff-base man-db)"
		exit 77
	fi
done
if ! ls "$out"/man[1-8]/*.[1-8] >/dev/null 2>&1; then
	echo "SKIP: no page was built (pandoc missing at configure time? apt-get install pandoc)"
	exit 77
fi
cd "$out" || exit 1
failed=0
pages=0
for md in "$src"/*.[1-8].md; do
	page=$(basename "$md" .md)
	[ -f "man${page##*.}/$page" ] || { echo "FAIL: $page was not built"; failed=1; }
done
for page in man[1-8]/*.[1-8]; do
	pages=$((pages + 1))
	# -t: pandoc may emit tables; .so pages resolve against this folder.
	warn=$(groff -ww -z -t -man -Tutf8 -I . "$page" 2>&1)
	if [ -n "$warn" ]; then
		echo "FAIL: groff -ww: $page:"; echo "$warn" | sed 's/^/  /'; failed=1
	fi
	warn=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
	if [ -n "$warn" ]; then
		echo "FAIL: man --warnings: $page:"; echo "$warn" | sed 's/^/  /'; failed=1
	fi
	if ! grep -q '^\.so ' "$page"; then
		whatis=$(lexgrog "$page" 2>&1)
		case $whatis in
		*': "'*' - '*) ;;
		*) echo "FAIL: lexgrog cannot parse the NAME section of $page: $whatis"; failed=1 ;;
		esac
	fi
done
[ "$failed" = 0 ] && echo "ok: $pages man pages render without warnings"
exit "$failed"
