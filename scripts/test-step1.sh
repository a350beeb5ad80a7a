#!/usr/bin/env bash
# make test-step1: step one of the EL2 dirty fault (msg/steps: the series
# without the lock-free posting and its part of the test kit), built from
# nothing in a BUILD of its own ($BUILD/step1, sharing only the download
# cache and ccache) and put through make test's QEMU matrix: every host
# mode and the debug boot. The host checks are about the whole series
# (check-series, the harness) and run in make test. The result lines and
# the kernel they ran on are kept in bench/steps/<date>-step1/. Ends with
# "N passed, N failed"; exits non-zero on any failure.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

export BUILD=$BUILD/step1 SERIES_STEP=1 HOST_CHECKS=0
for s in prepare-tree build-kernel build-selftests mk-initramfs; do
	args=()
	[ "$s" = build-kernel ] && args=(default)
	"$TOP/scripts/$s.sh" "${args[@]}" || die "$s failed for step one"
done
"$TOP/scripts/test.sh" 2>&1 | tee "$BUILD/test-step1.out"
rc=${PIPESTATUS[0]}
out=$TOP/bench/steps/$(date -u +%Y-%m-%d-%H%M)-step1
mkdir -p "$out"
cp "$BUILD/test-results.txt" "$BUILD/test-phases.txt" "$out/"
{
	echo "step one: $(git -C "$BUILD/linux" rev-list --count base..HEAD) commits on base, HEAD $(git -C "$BUILD/linux" rev-parse --short HEAD)"
	git -C "$BUILD/linux" log --format='%h %s' base..HEAD
} > "$out/kernel.txt"
tail -1 "$BUILD/test-step1.out" > "$out/summary.txt"
echo "test-step1: results in $out"
exit "$rc"
