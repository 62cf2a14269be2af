#!/usr/bin/env bash
# CI's package step (docs/packaging.md): builds the Debian packages of this
# tree with `dpkg-buildpackage -us -uc -b` in a scratch copy (nothing is
# written beside the tree), runs lintian on them (any error, or a warning
# not listed in debian/lintian-accepted with its reason, fails), installs
# them, runs the install tests of debian/tests against what is installed,
# and removes the packages again (also when a step failed).
#   debian/check-packages.sh            needs root (apt-get) and the build
#                                       dependencies of debian/control
# DEB_BUILD_OPTIONS is passed on (nocheck: no tests in the package build).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
packages=$(sed -n 's/^Package: //p' "$src/debian/control" | tr '\n' ' ')
# Wait for another apt or dpkg run to finish rather than fail at once.
apt=(apt-get -y -qq -o DPkg::Lock::Timeout=600)
installed=0
cleanup() {
	if [ "$installed" = 1 ]; then
		# shellcheck disable=SC2086 # a word list
		"${apt[@]}" purge $packages >/dev/null && echo "packages: removed $packages" ||
			echo "packages: FAILED to remove $packages"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
step() { printf 'packages: %s (%ss)\n' "$1" "$SECONDS"; }

upstream=$(sed -n '1s/^[^ ]* (\([^-)]*\).*/\1/p' "$src/debian/changelog")
tree=$work/libndk-$upstream
mkdir "$tree"
tar -C "$src" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$tree" -xf -

step "dpkg-buildpackage -us -uc -b"
if ! (cd "$tree" && dpkg-buildpackage -us -uc -b -j"$(nproc)") >"$work/build.log" 2>&1; then
	tail -n 60 "$work/build.log"
	echo "packages: FAIL: dpkg-buildpackage (the end of its log is above)"
	exit 1
fi
grep -E '^dpkg-deb: building package' "$work/build.log" | sed 's/^/  /'
grep -E 'tests passed|tests failed' "$work/build.log" | sed 's/^/  package build tests: /' || true

step "lintian"
changes=$(ls "$work"/libndk_*.changes)
lintian --display-info --show-overrides --tag-display-limit 0 "$changes" >"$work/lintian.log" 2>&1 || true
sed 's/^/  /' "$work/lintian.log"
status=0
if grep -q '^E: ' "$work/lintian.log"; then
	echo "packages: FAIL: lintian reports errors"
	status=1
fi
# W: package: tag [detail] -> tag, for every warning
while read -r tag; do
	if ! grep -q "^$tag " "$src/debian/lintian-accepted"; then
		echo "packages: FAIL: lintian warning $tag is not in debian/lintian-accepted (fix it, or list it with the reason it stays)"
		status=1
	fi
done < <(sed -n 's/^W: [^ ]*: \([^ ]*\).*/\1/p' "$work/lintian.log" | sort -u)
[ "$status" = 0 ] || exit 1

step "install"
debs=$(ls "$work"/*.deb | grep -v -- '-dbgsym_')
installed=1
# shellcheck disable=SC2086 # a word list
"${apt[@]}" install --no-install-recommends $debs >/dev/null ||
	{ echo "packages: FAIL: apt-get install $debs"; exit 1; }
dpkg -l $packages | sed -n 's/^ii  /  installed: /p'

for t in pkg-config cmake; do
	step "install test debian/tests/$t against the installed packages"
	(cd "$src" && "debian/tests/$t") >"$work/test-$t.log" 2>&1 ||
		{ cat "$work/test-$t.log"; echo "packages: FAIL: debian/tests/$t"; exit 1; }
	grep -E '^(ok|installed libndk|ndkhost: PASS)' "$work/test-$t.log" | sed 's/^/  /'
done
step "done"
