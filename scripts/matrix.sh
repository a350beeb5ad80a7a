#!/usr/bin/env bash
# `make matrix`: build the kernel with 4K, 16K and 64K pages, with and without
# NVHE_EL2_DEBUG, and boot the 16K (52-bit, LPA2) and 64K (debug) kernels in
# protected mode running the pKVM eager-split tests. Results:
# $BUILD/matrix-results.txt.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# 16K with LPA2 boots pKVM under QEMU 10 (scripts/install-qemu.sh); under
# QEMU 7.2 it stalls at pKVM init, base kernel included (bench/incidents/,
# "16K + LPA2"): on the 7.2 fallback, boot 16K without LPA2 instead, on a
# CPU without it (16k+nolpa2), and say so.
qemu_major=$(qemu-system-aarch64 --version | head -1 | sed -n 's/^QEMU emulator version \([0-9]*\)\..*/\1/p')
if [ "${qemu_major:-0}" -ge 10 ]; then
	def_variants="default nodebug 16k 16k+nodebug 64k 64k+nodebug"
	def_boots="16k 64k"
else
	echo "matrix: QEMU ${qemu_major:-unknown} (not 10): booting 16K without LPA2 (16k+nolpa2)" >&2
	def_variants="default nodebug 16k 16k+nodebug 16k+nolpa2 64k 64k+nodebug"
	def_boots="16k+nolpa2 64k"
fi
VARIANTS=${MATRIX_VARIANTS:-$def_variants}
BOOTS=${MATRIX_BOOTS:-$def_boots}
res=$BUILD/matrix-results.txt
echo "# $(qemu-system-aarch64 --version | head -1)" > "$res"
fail=0
for v in $VARIANTS; do
	start=$(date +%s)
	if "$TOP/scripts/build-kernel.sh" "$v" >/dev/null 2>"$BUILD/matrix-$v.err"; then
		echo "PASS build $v ($(( $(date +%s) - start ))s)" | tee -a "$res"
	else
		echo "FAIL build $v: $(tail -3 "$BUILD/matrix-$v.err" | tr '\n' ' ')" | tee -a "$res"
		fail=1
	fi
done

list=$BUILD/matrix-boot.list
{
	echo "all pkvm_split_test 1200 ./pkvm_split_test -f"
	echo "all pkvm_split_race_test 1200 ./pkvm_split_race_test"
	echo "protected pkvm_split_abi_test 600 ./pkvm_split_abi_test -a"
} > "$list"
MATRIX=$list INITRAMFS_OUT=$BUILD/matrix-initramfs.cpio "$TOP/scripts/mk-initramfs.sh" >/dev/null
for v in $BOOTS; do
	INITRD=$BUILD/matrix-initramfs.cpio "$TOP/scripts/boot.sh" protected "$v" protected |
		sed "s/^\([A-Z]*\) protected/\1 protected[$v]/" | tee -a "$res"
	grep -hE "^# host pKVM|blocks split by" "$BUILD/logs/$v-protected-protected.log" | sed "s/^/    [$v] /" | tee -a "$res"
done
grep -q '^FAIL' "$res" && fail=1
echo "matrix: $(grep -c '^PASS' "$res") passed, $(grep -c '^FAIL' "$res") failed (results: $res)"
exit $fail
