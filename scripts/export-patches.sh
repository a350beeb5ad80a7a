#!/usr/bin/env bash
# `make patches`: export the series as git format-patch files against the
# pristine base into $BUILD/patches (or $1):
#   - the whole series, with msg/cover-letter, as NNNN-*.patch;
#   - the postings it is sent as (msg/postings: fixes, eager split, EL2
#     dirty-log faults, in-place restore, documentation and tests), each a
#     series of its own with its cover letter msg/cover-<name>, under
#     postings/<k>-<name>/. They apply with `git am` in that order.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=${1:-$BUILD/patches}
prefix="PATCH v${SERIES_VERSION:-3}"
rm -rf "$out"
mkdir -p "$out"

# fill_cover <cover letter patch> <msg file>: subject (first line) and body.
fill_cover() {
	python3 - "$1" "$2" <<'PY'
import sys
path, msg = sys.argv[1:3]
lines = open(msg).read().split("\n")
subject, body = lines[0], "\n".join(lines[2:]).rstrip("\n")
s = open(path).read()
assert "*** SUBJECT HERE ***" in s and "*** BLURB HERE ***" in s, path
s = s.replace("*** SUBJECT HERE ***", subject).replace("*** BLURB HERE ***", body)
open(path, "w").write(s)
PY
}

git -C "$TREE" format-patch -q --cover-letter --thread --subject-prefix="$prefix" -o "$out" base..HEAD
fill_cover "$out/0000-cover-letter.patch" "$TOP/msg/cover-letter"

mapfile -t commits < <(git -C "$TREE" rev-list --reverse base..HEAD)
total=${#commits[@]}
k=0
next=1
while read -r name first last; do
	case "$name" in ''|'#'*) continue ;; esac
	k=$((k + 1))
	[ "$first" = "$next" ] && [ "$last" -ge "$first" ] && [ "$last" -le "$total" ] ||
		die "msg/postings: '$name $first $last' does not follow on from patch $((next - 1)) (of $total)"
	[ -f "$TOP/msg/cover-$name" ] || die "msg/postings: no cover letter msg/cover-$name"
	dir=$out/postings/$k-$name
	mkdir -p "$dir"
	from=${commits[$((first - 1))]}
	to=${commits[$((last - 1))]}
	git -C "$TREE" format-patch -q --cover-letter --thread --subject-prefix="$prefix" \
		-o "$dir" "$from~1..$to"
	fill_cover "$dir/0000-cover-letter.patch" "$TOP/msg/cover-$name"
	next=$((last + 1))
done < "$TOP/msg/postings"
[ "$next" -eq $((total + 1)) ] || die "msg/postings covers patches 1-$((next - 1)) of $total"
echo "export-patches: $total patches in $out, and $k postings in $out/postings"
