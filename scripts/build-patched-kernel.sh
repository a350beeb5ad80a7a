#!/usr/bin/env bash
# build-patched-kernel.sh <variant> <new variant> <patch>...: an experiment
# kernel. Builds <variant> (build-kernel.sh), copies its objects to
# $BUILD/obj/<new variant>, applies the patches to the tree in order,
# rebuilds the Image there (only what they touch recompiles), and takes them
# out of the tree again, whatever happens. Refuses a tree with changes in
# the files the patches touch. Used by make bench-lockfree, make mutants,
# and for bench/hypclock/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -ge 3 ] || die "usage: build-patched-kernel.sh <variant> <new variant> <patch>..."
variant=$1 new=$2
shift 2
case "$new" in ''|*/*|"$variant") die "'$new' is not a new variant name" ;; esac
patches=()
for patch in "$@"; do
	[ -f "$patch" ] || die "no patch $patch"
	patches+=("$(realpath "$patch")")
done

"$TOP/scripts/build-kernel.sh" "$variant"

files=
for patch in "${patches[@]}"; do
	f=$(sed -n 's#^+++ b/##p' "$patch")
	[ -n "$f" ] || die "$patch changes no file"
	files="$files $f"
done
files=$(echo "$files" | tr ' ' '\n' | sort -u | tr '\n' ' ')
# shellcheck disable=SC2086
git -C "$TREE" diff --quiet -- $files || die "the tree has changes in $files: not touching it"
# shellcheck disable=SC2086
restore() { git -C "$TREE" checkout -q -- $files; }
trap restore EXIT
obj=$BUILD/obj/$new
rsync -a --delete "$BUILD/obj/$variant/" "$obj/"
for patch in "${patches[@]}"; do
	git -C "$TREE" apply "$patch" || die "$patch does not apply to the tree"
done
start=$(date +%s)
"${KMAKE[@]}" O="$obj" Image > "$obj/build.log" 2>&1 ||
	{ tail -40 "$obj/build.log" >&2; die "$new failed to build (log: $obj/build.log)"; }
! grep -E "warning:" "$obj/build.log" >&2 || die "$new has warnings (log: $obj/build.log)"
names=$(for patch in "${patches[@]}"; do basename "$patch"; done | paste -sd+)
echo "build-patched-kernel: $new ($variant + $names) Image built in $(( $(date +%s) - start ))s"
