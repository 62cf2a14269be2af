# Sourced by the install tests with the arguments BUILD_DIR|--installed
# [CC] [EXTRA_CFLAGS]: a build directory, installed here into a scratch
# prefix, or --installed for what is installed on the system (the Debian
# packages, in CI); the compiler of the consumers (default cc) and flags
# for it. Sets cc and extra_cflags, WORK (a scratch folder, removed on
# exit), PREFIX (empty for --installed), BINDIR (where the tools are) and
# PKG_CONFIG_PATH.
cc=${2:-cc}
# A sanitized library needs consumers built with the same runtime.
extra_cflags=${3:-}
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
