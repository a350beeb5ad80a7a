#!/usr/bin/env bash
# `make bisect`: every prefix of the series must build. Walks the tree's
# commits base..HEAD in order, checks each out in $TREE (detached) and
# builds, incrementally and with ccache, into $BUILD/obj/bisect:
#   - the kernel Image with the default test config (Kconfig/ fragments);
#   - when the commit touches tools/testing/selftests/kvm, the selftests
#     scripts/build-selftests.sh builds, against that commit's UAPI headers.
# A build error, or a compiler warning, fails the prefix. For review, each
# commit's added EL2 lines that go through host-named memory are listed.
# The tree goes back
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

# BISECT_FIRST/BISECT_LAST (1-based, inclusive): only those prefixes, for a
# quick check of the patches just changed; `make bisect` builds them all.
first=${BISECT_FIRST:-1}
last=${BISECT_LAST:-${#commits[@]}}
case "$first$last" in *[!0-9]*) die "BISECT_FIRST/BISECT_LAST must be patch numbers" ;; esac
[ "$first" -ge 1 ] && [ "$first" -le "$last" ] && [ "$last" -le ${#commits[@]} ] ||
	die "BISECT_FIRST=$first BISECT_LAST=$last: not a range of 1..${#commits[@]}"

fail=0
n=0
for c in "${commits[@]}"; do
	n=$((n + 1))
	[ "$n" -ge "$first" ] && [ "$n" -le "$last" ] || continue
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
	# The review checklist: every line this commit adds at EL2 that reads
	# or writes through memory the host names (a pointer from a host
	# register or host structure, kern_hyp_va(), container_of() on such a
	# pointer, the host's memcaches), for a reviewer to check that no
	# prefix lets the host aim an EL2 access: listed, not judged.
	git -C "$TREE" show --format= -U0 "$c" -- arch/arm64/kvm/hyp |
		awk '/^\+\+\+ b\// { f = substr($0, 7) } /^@@/ { split($3, a, ","); l = substr(a[1], 2) - 1 }
		     /^\+[^+]/ { l++; if ($0 ~ /kern_hyp_va\(|container_of\(|DECLARE_REG\([^,]*\*|host_kvm|host_mc|hyp_pin_shared_mem|->head\b/)
				print "  review " sprintf("%02d", n) ": " f ":" l ": " substr($0, 2) }
		     /^ / { l++ }' n="$n" | sed 's/\t/ /g; s/  */ /g' | tee -a "$results"
done
echo "bisect: $((last - first + 1)) prefixes ($first-$last of $n), $(grep -c ^PASS "$results") build, $(grep -c ^FAIL "$results") fail" | tee -a "$results"
exit $fail
