#!/usr/bin/env bash
# Lay the project's series onto a pristine Debian 7.3 tree:
#   $BUILD/linux is a git repository whose tag 'base' is the untouched source
#   and whose commits after it are exactly the series, one commit per entry.
# Idempotent: a stamp (hash of the tarball and every series input) says
# whether the tree is current; a stale tree is reset to 'base' and rebuilt,
# never patched twice.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need git tar xz sha256sum

series=$TOP/series
[ -f "$series" ] || die "no series file at $series"
# SERIES_STEP=1: step one of the EL2 dirty fault (msg/steps), the series
# without the lock-free posting and its part of the test kit. Build it in
# a BUILD of its own (make test-step1): this tree is then not the series.
case "${SERIES_STEP:-2}" in
2) ;;
1)
	[ "$(realpath -m "$BUILD")" != "$TOP/build" ] ||
		die "SERIES_STEP=1 needs a BUILD of its own (make test-step1 uses build/step1)"
	skip=$(awk '$1 == "step2" { $1 = ""; print }' "$TOP/msg/steps")
	[ -n "$skip" ] || die "msg/steps names no step-two patch"
	mkdir -p "$BUILD"
	awk -v skip="$skip" '
		BEGIN { n = split(skip, s, " "); for (i = 1; i <= n; i++) drop[s[i] + 0] = 1 }
		$1 == "commit" { c++; keep = !(c in drop) }
		keep || $1 == "" || $1 ~ /^#/' "$series" > "$BUILD/series.step1"
	series=$BUILD/series.step1 ;;
*) die "SERIES_STEP is 1 or 2, not '$SERIES_STEP'" ;;
esac

inputs() {
	echo "tarball $TAR_SHA"
	cat "$series"
	awk '$1 == "patch" || $1 == "add" || $1 == "commit" { print $2 }' "$series" |
		while read -r f; do
			[ -f "$TOP/$f" ] || die "series names $f, which does not exist"
			sha256sum "$TOP/$f"
		done
}

TAR_SHA=${KSRC_TAR_SHA256:-76df1affb19f24926949369be1d74b60071c963c598ce8780bddd4bbf0fc3bc4}
want=$(inputs | sha256sum | cut -d' ' -f1)
stamp=$BUILD/.tree-stamp

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
   git -C "$TREE" rev-parse -q --verify base >/dev/null 2>&1 &&
   [ -z "$(git -C "$TREE" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	echo "prepare-tree: tree is current ($(git -C "$TREE" rev-list --count base..HEAD) commits on base)"
	exit 0
fi
# export-tree.sh just wrote the series from the tree's commits: adopt the
# tree as it is (no reset, so nothing is rebuilt that did not change).
if [ "${ADOPT_TREE:-0}" = 1 ]; then
	[ -z "$(git -C "$TREE" status --porcelain --untracked-files=no)" ] ||
		die "$TREE has uncommitted changes: not adopting it"
	echo "$want" > "$stamp"
	git -C "$TREE" rev-parse HEAD > "$BUILD/.tree-head"
	echo "prepare-tree: adopted the tree ($(git -C "$TREE" rev-list --count base..HEAD) commits on base)"
	exit 0
fi
# A tree whose commits are not the ones this script made last time holds
# someone's work (commits made in the tree, not yet exported with
# scripts/export-tree.sh): resetting it would lose them.
head_stamp=$BUILD/.tree-head
if git -C "$TREE" rev-parse -q --verify base >/dev/null 2>&1 &&
   [ "${FORCE_TREE_RESET:-0}" != 1 ]; then
	head=$(git -C "$TREE" rev-parse HEAD)
	if [ -n "$(git -C "$TREE" status --porcelain --untracked-files=no)" ] ||
	   { [ "$head" != "$(git -C "$TREE" rev-parse base)" ] &&
	     [ "$head" != "$(cat "$head_stamp" 2>/dev/null)" ]; }; then
		die "$TREE has changes or commits the series does not have: run scripts/export-tree.sh (or FORCE_TREE_RESET=1 to drop them)"
	fi
fi
rm -f "$stamp"

GIT=(git -C "$TREE" -c user.name="pKVM split" -c user.email="pkvm-split@invalid" -c commit.gpgsign=false)

if ! git -C "$TREE" rev-parse -q --verify base >/dev/null 2>&1; then
	tarball=$("$TOP/scripts/fetch-source.sh")
	echo "prepare-tree: extracting $tarball"
	rm -rf "$TREE" "$BUILD/linux.tmp"
	mkdir -p "$BUILD/linux.tmp"
	tar -xf "$tarball" -C "$BUILD/linux.tmp" || die "extracting $tarball failed"
	mv "$BUILD/linux.tmp/linux-source-7.3" "$TREE" || die "tarball has no linux-source-7.3/"
	rmdir "$BUILD/linux.tmp"
	git -C "$TREE" init -q
	# Debian's top-level .gitignore ignores everything: add with -f.
	"${GIT[@]}" add -A -f
	"${GIT[@]}" commit -q -m "base: Debian linux-source-7.3 ${KSRC_DEB_VERSION:-7.3.4-1~bpo13+1}"
	"${GIT[@]}" tag base
else
	"${GIT[@]}" reset -q --hard base
	"${GIT[@]}" clean -q -fdx
fi

# Series grammar, one step per line ('#' starts a comment):
#   commit <message file>           start a commit; its first line is the subject
#   patch  <file.patch>              apply a unified diff to existing files
#   add    <source file> <tree path> install a new file
# A commit is closed by the next 'commit' line or the end of the file.
msg=""
flush() {
	[ -n "$msg" ] || return 0
	"${GIT[@]}" add -A -f
	"${GIT[@]}" commit -q -F "$TOP/$msg" || die "nothing to commit for $msg"
	msg=""
}
n=0
while read -r verb a b; do
	case "$verb" in
	""|\#*) continue ;;
	commit) flush; msg=$a; n=$((n + 1)) ;;
	patch)
		[ -n "$msg" ] || die "'patch $a' comes before any 'commit' line"
		"${GIT[@]}" apply --whitespace=nowarn "$TOP/$a" ||
			die "patch $a does not apply to the tree (commit $msg)" ;;
	add)
		[ -n "$msg" ] || die "'add $a' comes before any 'commit' line"
		[ -n "$b" ] || die "'add $a' needs a tree path"
		mkdir -p "$(dirname "$TREE/$b")"
		cp "$TOP/$a" "$TREE/$b" ;;
	*) die "unknown series verb '$verb'" ;;
	esac
done < "$series"
flush
echo "$want" > "$stamp"
git -C "$TREE" rev-parse HEAD > "$head_stamp"
echo "prepare-tree: applied $n commits on base"
