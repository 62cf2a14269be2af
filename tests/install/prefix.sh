# Sourced by the install tests. $1 is a build directory, installed here
# into a scratch prefix, or --installed for what is installed on the system
# (the Debian packages, in CI). Sets WORK (a scratch folder, removed on
# exit), PREFIX (empty for --installed), BINDIR (where the tools are) and
# PKG_CONFIG_PATH.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [ "$1" = --installed ]; then
	PREFIX=
	BINDIR=$(dirname "$(command -v ndkinfo || echo /usr/bin/ndkinfo)")
else
	PREFIX=$WORK/prefix
	BINDIR=$PREFIX/bin
	cmake --install "$1" --prefix "$PREFIX" >/dev/null
	export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig:${PKG_CONFIG_PATH:-}
	for d in lib lib64 lib/x86_64-linux-gnu; do
		if [ -d "$PREFIX/$d/pkgconfig" ]; then PKG_CONFIG_PATH=$PREFIX/$d/pkgconfig:$PKG_CONFIG_PATH; fi
	done
fi
