#!/usr/bin/env bash
# `make bisect`: every prefix of the series must build. Walks the tree's
# commits base..HEAD in order, checks each out in $TREE (detached) and
# builds, incrementally and with ccache, into $BUILD/obj/bisect:
#   - the kernel Image with the default test config (Kconfig/ fragments);
#   - when the commit touches tools/testing/selftests/kvm, the selftests
#     scripts/build-selftests.sh builds, against that commit's UAPI headers.
# A build error, or a compiler warning, fails the prefix. The tree goes back
# to where it was on exit, whatever happens. Results: $BUILD/bisect-results.txt.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
need "${CROSS}gcc" ccache make

obj=$BUILD/obj/bisect
out=$BUILD/bisect
results=$BUILD/bisect-results.txt
config=$BUILD/obj/default/.config
[ -f "$config" ] || die "no $config (make kernel first)"
git -C "$TREE" diff --quiet HEAD || die "$TREE has uncommitted changes"

orig=$(git -C "$TREE" symbolic-ref -q HEAD || git -C "$TREE" rev-parse HEAD)
restore() { git -C "$TREE" checkout -q --force "${orig#refs/heads/}"; }
trap restore EXIT
trap 'exit 130' INT TERM

mkdir -p "$obj" "$out"
: > "$results"
mapfile -t commits < <(git -C "$TREE" rev-list --reverse base..HEAD)
[ ${#commits[@]} -gt 0 ] || die "no commits on top of base"

fail=0
n=0
for c in "${commits[@]}"; do
	n=$((n + 1))
	subject=$(git -C "$TREE" log -1 --format=%s "$c")
	log=$out/$(printf %02d $n).log
	start=$(date +%s)
	git -C "$TREE" checkout -q --force --detach "$c" || die "cannot check out $c"

	# The full test config each time: options a later patch adds only
	# exist from that patch on, and kbuild rebuilds only their users.
	cp "$config" "$obj/.config"
	{
		"${KMAKE[@]}" O="$obj" olddefconfig &&
		"${KMAKE[@]}" O="$obj" Image
	} > "$log" 2>&1
	rc=$?
	what=kernel
	if [ $rc -eq 0 ] && git -C "$TREE" diff --quiet "$c~1" "$c" -- tools/testing/selftests/kvm; then
		:
	elif [ $rc -eq 0 ]; then
		what="kernel+selftests"
		BUILD_SELFTESTS_HDR=$out/uapi BUILD_SELFTESTS_OUT=$out/selftests \
			"$TOP/scripts/build-selftests.sh" >> "$log" 2>&1
		rc=$?
	fi
	warnings=$(grep -c 'warning:' "$log")
	secs=$(( $(date +%s) - start ))
	if [ $rc -ne 0 ] || [ "$warnings" -ne 0 ]; then
		echo "FAIL $(printf %02d $n) $what ($rc, $warnings warnings, ${secs}s) $subject (log: $log)" | tee -a "$results"
		grep -m5 -E 'error|warning:' "$log"
		fail=1
	else
		echo "PASS $(printf %02d $n) $what (${secs}s) $subject" | tee -a "$results"
	fi
done
echo "bisect: $n prefixes, $(grep -c ^PASS "$results") build, $(grep -c ^FAIL "$results") fail" | tee -a "$results"
exit $fail
