#!/usr/bin/env bash
# build-patched-kernel.sh <variant> <new variant> <patch>: an experiment
# kernel. Builds <variant> (build-kernel.sh), copies its objects to
# $BUILD/obj/<new variant>, applies <patch> to the tree, rebuilds the Image
# there (only what the patch touches recompiles), and takes the patch out of
# the tree again, whatever happens. Refuses a tree with changes in the
# files the patch touches. Used by make bench-lockfree, and for
# bench/hypclock/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -eq 3 ] || die "usage: build-patched-kernel.sh <variant> <new variant> <patch>"
variant=$1 new=$2 patch=$3
case "$new" in ''|*/*|"$variant") die "'$new' is not a new variant name" ;; esac
[ -f "$patch" ] || die "no patch $patch"
patch=$(realpath "$patch")

"$TOP/scripts/build-kernel.sh" "$variant"

files=$(sed -n 's#^+++ b/##p' "$patch")
[ -n "$files" ] || die "$patch changes no file"
# shellcheck disable=SC2086
git -C "$TREE" diff --quiet -- $files || die "the tree has changes in $files: not touching it"
git -C "$TREE" apply --check "$patch" || die "$patch does not apply to the tree"
# shellcheck disable=SC2086
restore() { git -C "$TREE" checkout -q -- $files; }
trap restore EXIT
obj=$BUILD/obj/$new
rsync -a --delete "$BUILD/obj/$variant/" "$obj/"
git -C "$TREE" apply "$patch"
start=$(date +%s)
"${KMAKE[@]}" O="$obj" Image > "$obj/build.log" 2>&1 ||
	{ tail -40 "$obj/build.log" >&2; die "$new failed to build (log: $obj/build.log)"; }
! grep -E "warning:" "$obj/build.log" >&2 || die "$new has warnings (log: $obj/build.log)"
echo "build-patched-kernel: $new ($variant + $(basename "$patch")) Image built in $(( $(date +%s) - start ))s"
