#!/usr/bin/env bash
# Host-side check: the postings, applied one after the other with `git am`
# to a fresh checkout of the pristine base, give exactly our tree below the
# test kit (the series' last patches, msg/postings' `kit` line, never
# posted), none of them carries test-kit code, each cover letter has its
# version tag, and
# checkpatch --strict finds nothing but what scripts/checkpatch.allow
# lists (with its reason).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

pdir=$BUILD/check-patches
wt=$BUILD/check-am
# The export signs off as the exporter; a machine with no git identity
# (a fresh CI clone) checks the series under a stand-in one.
if [ -z "${EXPORT_IDENT:-}" ] &&
   ! { git -C "$TOP" config user.name && git -C "$TOP" config user.email; } >/dev/null; then
	export EXPORT_IDENT="series check <series-check@example.invalid>"
fi
"$TOP/scripts/export-patches.sh" "$pdir" >/dev/null
for p in $(find "$pdir" -name '[0-9]*.patch' ! -name '0000-cover-letter.patch'); do
	grep -q '^Signed-off-by: ' "$p" || die "$(basename "$p"): no Signed-off-by"
done
! grep -rl 'pkvm-split@invalid' "$pdir" >/dev/null || die "an exported patch names the placeholder identity"

git -C "$TREE" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
git -C "$TREE" worktree prune
git -C "$TREE" worktree add -q --detach "$wt" base
[ ! -e "$pdir/0000-cover-letter.patch" ] || die "the export has an overview of the whole series beside its postings"

# The postings, one after the other, give the same tree.
git -C "$wt" checkout -q --detach base
for d in "$pdir"/postings/*/; do
	# shellcheck disable=SC2046
	git -C "$wt" -c user.name=check -c user.email=check@invalid am -q \
		$(ls "$d"[0-9]*.patch | grep -v 0000-cover-letter) ||
		die "posting $(basename "$d") does not apply with git am after the ones before it"
	grep -q "^Subject: \[\(RFC \)\?PATCH v[0-9]* 0\+/" "$d/0000-cover-letter.patch" ||
		die "posting $(basename "$d"): its cover letter has no version tag"
done
kit=$(awk '$1 == "kit" { print $3 - $2 + 1 }' "$TOP/msg/postings")
[ "$(git -C "$wt" rev-parse 'HEAD^{tree}')" = "$(git -C "$TREE" rev-parse "HEAD~${kit:-0}^{tree}")" ] ||
	die "git am of the postings in order does not reproduce the tree below the test kit"
# Nothing that exists only to test reaches a posting (hypercalls/test-kit.md).
for word in "config PKVM_SPLIT_ABI_TEST" __pkvm_check_guest pkvm_split_test.o arm_smccc_1_2_hvc pkvm-split@invalid; do
	! grep -rl -e "^+.*$word" "$pdir/postings" >/dev/null ||
		die "a posting adds test-kit code: $word in $(grep -rl -e "^+.*$word" "$pdir/postings" | head -1)"
done
git -C "$TREE" worktree remove --force "$wt"

found=$(cd "$pdir/postings" && perl "$TREE/scripts/checkpatch.pl" --strict --no-tree --terse --show-types \
	$(ls ./*/[0-9]*.patch | grep -v 0000-cover-letter) 2>&1 | grep -E 'ERROR|WARNING|CHECK' |
	sed -E 's#^\./[^/]*/##' | grep -v '^0000-cover' || true)
allowed=$(grep -v '^#' "$TOP/scripts/checkpatch.allow" | cut -d'|' -f1 | sed 's/ *$//' | grep . || true)
bad=$(echo "$found" | grep . | while read -r l; do
	key=$(echo "$l" | sed -E 's/^[0-9]{4}-([^:]*):[0-9]+: (.*)$/\1: \2/')
	# A here-string, not a pipe: with pipefail, grep -q quitting on a match
	# early in a long list would fail the writer with SIGPIPE.
	grep -qxF "$key" <<<"$allowed" || echo "$l"
done)
[ -z "$bad" ] || { echo "$bad"; die "checkpatch --strict reports the lines above"; }
echo "check-series: git am of the $(ls -d "$pdir"/postings/*/ | wc -l) postings in order reproduces the tree below the ${kit:-0}-patch test kit, no test-kit code in them; checkpatch clean ($(echo "$found" | grep -c . ) allowed)"
