#!/usr/bin/env bash
# mutants.sh [name...]: make mutants. For each bench/mutants/patches/<name>.patch
# (all by default), build the default kernel with it (build-patched-kernel.sh),
# boot its "Kill:" matrix line under QEMU in that line's mode (with the
# patch's "Qemu:" options, if it has that line), and record the
# verdict: KILLED when the boot reports a FAIL (an assertion, a WARN or hyp
# panic in the serial log, a hang), SURVIVED when everything passed, and
# NOBUILD when the mutant does not build. Results in
# bench/mutants/<date>/results.txt (one row per mutant) with each boot's
# output and serial log; exits non-zero if a mutant survived or did not
# build (a mutant that no longer applies tests nothing: refresh it).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

pdir=$TOP/bench/mutants/patches
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for f in "$pdir"/*.patch; do names+=("$(basename "$f" .patch)"); done
fi
out=$TOP/bench/mutants/$(date -u +%Y-%m-%d-%H%M)
mkdir -p "$out"
"$TOP/scripts/build-kernel.sh" default >/dev/null || die "the default kernel does not build"
printf '# mutant verdict seconds killer\n' > "$out/results.txt"
survived=0
nobuild=0
for name in "${names[@]}"; do
	patch=$pdir/$name.patch
	[ -f "$patch" ] || die "no mutant $patch"
	kill=$(sed -n 's/^Kill: //p' "$patch" | head -1)
	[ -n "$kill" ] || die "$patch has no Kill: line"
	mode=${kill%% *}
	qemu=$(sed -n 's/^Qemu: //p' "$patch" | head -1)
	start=$(date +%s)
	variant=mut-$name
	if ! "$TOP/scripts/build-patched-kernel.sh" default "$variant" "$patch" > "$out/$name.build.txt" 2>&1; then
		verdict=NOBUILD; nobuild=$((nobuild + 1))
	else
		echo "$kill" > "$out/$name.list"
		MATRIX="$out/$name.list" INITRAMFS_OUT="$BUILD/initramfs-mut.cpio" \
			"$TOP/scripts/mk-initramfs.sh" > /dev/null || die "mk-initramfs failed for $name"
		if QEMU_EXTRA="$qemu" INITRD="$BUILD/initramfs-mut.cpio" "$TOP/scripts/boot.sh" "$mode" "$variant" "$mode" \
			> "$out/$name.boot.txt" 2>&1; then
			verdict=SURVIVED; survived=$((survived + 1))
		else
			verdict=KILLED
		fi
		cp "$BUILD/logs/$variant-$mode-$mode.log" "$out/$name.serial.log" 2>/dev/null
		rm -rf "$BUILD/obj/$variant"
	fi
	row="$name $verdict $(( $(date +%s) - start )) $(echo "$kill" | awk '{print $2}')"
	echo "$row" | tee -a "$out/results.txt"
done
echo "mutants: $survived of ${#names[@]} survived, $nobuild did not build (results: $out/results.txt)"
[ "$survived" -eq 0 ] && [ "$nobuild" -eq 0 ]
