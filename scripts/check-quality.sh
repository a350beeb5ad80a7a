#!/usr/bin/env bash
# `make check` (also run by `make test`): the kernel's own quality gates on
# what the series touches, each compared with the pristine base so that only
# findings our change adds fail the check:
#   - sparse (C=2) over arch/arm64/kvm (EL1 and the nVHE EL2 object);
#   - W=1 build of every .c file the series adds or modifies;
#   - Coccinelle (coccicheck MODE=report) over the same files.
# checkpatch and `git am` are scripts/check-series.sh.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
need spatch
sparse=$("$TOP/scripts/build-sparse.sh") || die "no usable sparse"

base_tree=$BUILD/base-tree
base_obj=$BUILD/obj/base
our_obj=$BUILD/obj/default
qdir=$BUILD/quality
mkdir -p "$qdir"

# A pristine worktree at 'base', built with the same config.
if [ "$(git -C "$base_tree" rev-parse HEAD 2>/dev/null)" != "$(git -C "$TREE" rev-parse base)" ]; then
	git -C "$TREE" worktree remove --force "$base_tree" 2>/dev/null || rm -rf "$base_tree"
	git -C "$TREE" worktree prune
	git -C "$TREE" worktree add -q --detach "$base_tree" base || die "cannot check out base"
fi
mkdir -p "$base_obj"
grep -v "PKVM_SPLIT_ABI_TEST" "$our_obj/.config" > "$base_obj/.config"
BMAKE=(make -s -C "$base_tree" ARCH=arm64 CROSS_COMPILE="$CROSS" CC="ccache ${CROSS}gcc" -j"$JOBS" O="$base_obj")
OMAKE=(make -s -C "$TREE" ARCH=arm64 CROSS_COMPILE="$CROSS" CC="ccache ${CROSS}gcc" -j"$JOBS" O="$our_obj")
"${BMAKE[@]}" olddefconfig >/dev/null
# Only what the checks below build needs (headers, generated files, tools):
# they build arch/arm64/kvm/ and single objects, not the whole kernel.
"${BMAKE[@]}" prepare > "$qdir/base-build.log" 2>&1 || die "base prepare failed ($qdir/base-build.log)"

# Files the series adds or modifies, as source paths and object targets.
mapfile -t files < <(git -C "$TREE" diff --name-only --diff-filter=AM base HEAD -- 'arch/*.c')
objs=()
for f in "${files[@]}"; do
	case "$f" in
	arch/arm64/kvm/hyp/nvhe/*) objs+=("${f%.c}.nvhe.o") ;;
	arch/arm64/kvm/hyp/pgtable.c) objs+=("arch/arm64/kvm/hyp/pgtable.o" "arch/arm64/kvm/hyp/nvhe/../pgtable.nvhe.o") ;;
	*) objs+=("${f%.c}.o") ;;
	esac
done

# Normalise a warning list: drop line numbers and paths before the tree.
norm() {
	sed -E 's#^.*/(arch|include|virt)/#\1/#; s#:[0-9]+(-[0-9]+)?:[0-9]+(-[0-9]+)?:#:#; s#:[0-9]+(-[0-9]+)?:#:#; s#line [0-9]+#line N#g' |
		sort -u
}

fail=0
# sparse over arch/arm64/kvm (C=2 checks every file, built or not).
for side in base our; do
	if [ $side = base ]; then M=("${BMAKE[@]}"); else M=("${OMAKE[@]}"); fi
	"${M[@]}" C=2 CHECK="$sparse" arch/arm64/kvm/ > "$qdir/sparse-$side.log" 2>&1 ||
		die "sparse C=2 build of arch/arm64/kvm ($side) failed: $(tail -5 "$qdir/sparse-$side.log")"
	grep -q "not available or not up to date" "$qdir/sparse-$side.log" &&
		die "the kernel refused $sparse for C=2"
	grep -E 'warning|error' "$qdir/sparse-$side.log" | norm > "$qdir/sparse-$side.txt"
done
new=$(comm -13 "$qdir/sparse-base.txt" "$qdir/sparse-our.txt")
if [ -n "$new" ]; then echo "check-quality: sparse warnings the base does not have:"; echo "$new"; fail=1; fi

# W=1 on every object we touch (forced rebuild of just those).
for side in base our; do
	if [ $side = base ]; then M=("${BMAKE[@]}"); d=$base_tree; o=$base_obj; else M=("${OMAKE[@]}"); d=$TREE; o=$our_obj; fi
	present=()
	for ob in "${objs[@]}"; do
		src=${ob%.nvhe.o}; src=${src%.o}.c
		[ -f "$d/$src" ] || continue
		rm -f "$o/$ob"
		present+=("$ob")
	done
	: > "$qdir/w1-$side.txt"
	if [ ${#present[@]} -gt 0 ]; then
		"${M[@]}" W=1 "${present[@]}" > "$qdir/w1-$side.log" 2>&1 ||
			die "W=1 build ($side) failed: $(grep -E 'error' "$qdir/w1-$side.log" | head -5)"
		grep -E 'warning:' "$qdir/w1-$side.log" | norm > "$qdir/w1-$side.txt"
	fi
done
new=$(comm -13 "$qdir/w1-base.txt" "$qdir/w1-our.txt")
if [ -n "$new" ]; then echo "check-quality: W=1 warnings the base does not have:"; echo "$new"; fail=1; fi

# Coccinelle on the same files, every semantic patch in report mode.
skipped=()
for side in base our; do
	if [ $side = base ]; then d=$base_tree; else d=$TREE; fi
	: > "$qdir/cocci-$side.txt"
	present=()
	for f in "${files[@]}"; do
		[ -f "$d/$f" ] && present+=("$d/$f")
	done
	for c in "$d"/scripts/coccinelle/*/*.cocci; do
		# Semantic patches that cannot run in report mode here are listed,
		# not run: those without a report mode, and those scripted in
		# OCaml when no OCaml compiler is installed (Debian's spatch
		# compiles such scripts at run time).
		if ! grep -q "virtual report" "$c"; then
			[ $side = our ] && skipped+=("$(basename "$c") (no report mode)")
			continue
		fi
		if grep -qE '^@(script|initialize|finalize):ocaml' "$c" &&
		   ! command -v ocamlopt >/dev/null && ! command -v ocamlopt.opt >/dev/null; then
			[ $side = our ] && skipped+=("$(basename "$c") (OCaml script, no OCaml compiler)")
			continue
		fi
		# A semantic patch that times out or fails checked nothing: that
		# is a failure of the check, not a clean result.
		timeout 300 spatch --very-quiet -D report --no-show-diff \
			-I "$d/include" -I "$d/arch/arm64/include" --cocci-file "$c" \
			"${present[@]}" > "$qdir/cocci.out" 2> "$qdir/cocci.err"
		src=$?
		if [ $src -ne 0 ]; then
			echo "check-quality: spatch $(basename "$c") ($side) exited with status $src$([ $src = 124 ] && echo ' (timeout)'): $(tail -2 "$qdir/cocci.err" | tr '\n' ' ')"
			fail=1
		fi
		norm < "$qdir/cocci.out" >> "$qdir/cocci-$side.txt"
	done
	sort -u -o "$qdir/cocci-$side.txt" "$qdir/cocci-$side.txt"
done
new=$(comm -13 "$qdir/cocci-base.txt" "$qdir/cocci-our.txt")
if [ -n "$new" ]; then echo "check-quality: Coccinelle reports the base does not have:"; echo "$new"; fail=1; fi

# Restore our objects (W=1 rebuilt them with other flags).
"${OMAKE[@]}" Image >/dev/null 2>&1
[ ${#skipped[@]} -eq 0 ] || echo "check-quality: Coccinelle semantic patches not run: ${skipped[*]}"
[ $fail -eq 0 ] && echo "check-quality: sparse $(wc -l < "$qdir/sparse-our.txt") (base $(wc -l < "$qdir/sparse-base.txt")), W=1 $(wc -l < "$qdir/w1-our.txt") (base $(wc -l < "$qdir/w1-base.txt")), coccinelle $(wc -l < "$qdir/cocci-our.txt") (base $(wc -l < "$qdir/cocci-base.txt")): nothing new"
exit $fail
