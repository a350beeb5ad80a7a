#!/usr/bin/env bash
# `make patches`: export the series as git format-patch files against the
# pristine base into $BUILD/patches (or $1): the postings it is sent as
# (msg/postings: fixes, eager split, EL2 dirty-log faults, in-place
# restore, documentation and tests), each a series of its own with its
# cover letter msg/cover-<name>, under postings/<k>-<name>/. They apply
# with `git am` in that order; there is no overview of the whole series
# beside them (msg/cover-letter is the project's overview, not a posting).
# The test kit (msg/postings' `kit` line: the series' last patches, which
# the harness applies on top for test kernels; hypercalls/test-kit.md) is
# never exported.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=${1:-$BUILD/patches}
prefix="PATCH v${SERIES_VERSION:-4}"

# The postings are signed off (DCO) and sent by whoever exports them: their
# git identity, or EXPORT_IDENT="Name <email>". The tree's commits carry a
# placeholder author that must never reach a posting.
placeholder="pKVM split <pkvm-split@invalid>"
ident=${EXPORT_IDENT:-}
if [ -z "$ident" ]; then
	name=$(git -C "$TOP" config user.name || true)
	email=$(git -C "$TOP" config user.email || true)
	[ -n "$name" ] && [ -n "$email" ] ||
		die "no git identity: set git config user.name and user.email (the postings are signed off by whoever exports them), or EXPORT_IDENT='Name <email>'"
	ident="$name <$email>"
fi
[[ "$ident" =~ ^[^\<\>]+\ \<[^@\<\>\ ]+@[^\<\>\ ]+\>$ ]] ||
	die "EXPORT_IDENT '$ident' is not 'Name <email>'"
[ "$ident" != "$placeholder" ] || die "refusing to sign off as the tree's placeholder author"
ident_name=${ident% <*}
ident_email=${ident##*<}
ident_email=${ident_email%>}
FP=(git -C "$TREE" -c user.name="$ident_name" -c user.email="$ident_email" format-patch -q
    --signoff --cover-letter --thread)

# sign_as <dir>: the exporter is the author of every patch and cover letter.
sign_as() {
	python3 - "$ident" "$placeholder" "$1"/*.patch <<'PY'
import sys
ident, placeholder, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
for path in paths:
    s = open(path).read()
    head, sep, body = s.partition("\n\n")
    head = head.replace("From: " + placeholder, "From: " + ident)
    s = head + sep + body
    assert placeholder not in s, path
    open(path, "w").write(s)
PY
}
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


mapfile -t commits < <(git -C "$TREE" rev-list --reverse base..HEAD)
total=${#commits[@]}
k=0
next=1
kit=0
while read -r name first last kind; do
	case "$name" in ''|'#'*) continue ;; esac
	[ "$first" = "$next" ] && [ "$last" -ge "$first" ] && [ "$last" -le "$total" ] ||
		die "msg/postings: '$name $first $last' does not follow on from patch $((next - 1)) (of $total)"
	if [ "$name" = kit ]; then
		[ "$last" -eq "$total" ] || die "msg/postings: the kit must be the series' last patches"
		kit=$((last - first + 1))
		next=$((last + 1))
		continue
	fi
	k=$((k + 1))
	[ -f "$TOP/msg/cover-$name" ] || die "msg/postings: no cover letter msg/cover-$name"
	dir=$out/postings/$k-$name
	mkdir -p "$dir"
	from=${commits[$((first - 1))]}
	to=${commits[$((last - 1))]}
	# A posting marked 'rfc' in msg/postings is sent as an RFC.
	pfx=$prefix
	[ "${kind:-}" = rfc ] && pfx="RFC $prefix"
	"${FP[@]}" --subject-prefix="$pfx" -o "$dir" "$from~1..$to"
	fill_cover "$dir/0000-cover-letter.patch" "$TOP/msg/cover-$name"
	sign_as "$dir"
	next=$((last + 1))
done < "$TOP/msg/postings"
[ "$next" -eq $((total + 1)) ] || die "msg/postings covers patches 1-$((next - 1)) of $total"
echo "export-patches: $((total - kit)) patches in $k postings in $out/postings, signed off by $ident ($kit test-kit patches not exported)"
