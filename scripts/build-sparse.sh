#!/usr/bin/env bash
# Debian bookworm's sparse (0.6.4) cannot parse Linux 7.3 (__typeof_unqual__):
# the kernel's checker-valid.sh turns C=2 off with it. Build sparse
# 0.6.5~rc1 from Debian's source package (pinned, sha256-checked) into the
# cache and print its path. Fetched through a private apt configuration.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VER=0.6.5~rc1
SHA=3ac8855ec7f3ab92f325be0f64347ccc2b10f8b4d7c2906783ee8e2bdab3f0de
dir=$CACHE/sparse-$VER
bin=$dir/src/sparse
if [ -x "$bin" ] && [ "$("$TREE/scripts/checker-valid.sh" "$bin" -m64)" = 1 ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir/apt/lists/partial" "$dir/apt/archives/partial"
tarball=$dir/sparse_$VER.orig.tar.gz
if ! { [ -f "$tarball" ] && echo "$SHA  $tarball" | sha256sum -c --status; }; then
	echo "deb-src http://deb.debian.org/debian sid main" > "$dir/apt/sources.list"
	opts=(-o "Dir::Etc::sourcelist=$dir/apt/sources.list" -o "Dir::Etc::sourceparts=/dev/null"
	      -o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt" -o "Debug::NoLocking=1")
	apt-get "${opts[@]}" update -qq >&2 || die "apt-get update of Debian sid sources failed (no network?)"
	(cd "$dir" && apt-get "${opts[@]}" source --download-only -qq "sparse=$VER-2" >&2) ||
		die "sparse $VER-2 source is no longer in Debian sid: set a new VER/SHA in $0"
	echo "$SHA  $tarball" | sha256sum -c --status || die "sha256 mismatch for $tarball"
fi
rm -rf "$dir/src"
mkdir -p "$dir/src"
tar -xf "$tarball" -C "$dir/src" --strip-components=1
make -s -C "$dir/src" -j"$JOBS" sparse HAVE_LIBXML=no HAVE_SQLITE=no HAVE_GTK=no HAVE_LLVM=no >&2 ||
	die "building sparse failed"
[ "$("$TREE/scripts/checker-valid.sh" "$bin" -m64)" = 1 ] || die "sparse $VER cannot parse this kernel either"
echo "$bin"
