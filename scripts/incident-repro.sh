#!/usr/bin/env bash
# incident-repro.sh [seconds] [mode] [variant]: reproduce the non-protected
# incidents of bench/incidents/README.md in a loop. Boots <mode> (default
# vhe) with kernel <variant> (default 'default'; 'base' is the pristine
# base, built by this script with the same config) once per value of
# HOLDS (default "0 1": pkvm.hold_vm=0, then 1), and in each boot runs
# vm_churn (selftests/repro/vm_churn.c) for <seconds> (default 240): VMs
# created and freed one after another, each with two vCPU threads on one
# CPU making 5 MMIO exits each, then as long again with dirty logging on.
# With hold_vm=0 every create and free patches the kernel's
# preempt_notifier_key; with 1, init holds a VM open and the
# key is never patched. Environment: QEMU (the binary, default the one on
# PATH), QEMU_EXTRA (e.g. "-accel tcg,thread=single"). One summary line per
# boot is appended to bench/incidents/repro-<date>/summary.txt, with the
# serial logs beside it.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

secs=${1:-240}
mode=${2:-vhe}
variant=${3:-default}
holds=${HOLDS:-0 1}
QEMU=${QEMU:-qemu-system-aarch64}
export QEMU
case "$secs" in ''|*[!0-9]*|0) die "seconds must be a positive count" ;; esac
case "$mode" in protected|protected-nvhe|nvhe|vhe) ;; *) die "unknown mode '$mode'" ;; esac
for h in $holds; do case "$h" in 0|1) ;; *) die "HOLDS takes 0 and 1 only" ;; esac; done
need "$QEMU"

# The pristine base: its own worktree (check-quality's), our config less our
# test option, built into $BUILD/obj/base (whose .config check-quality
# also writes, for its `make prepare`).
if [ "$variant" = base ]; then
	base_tree=$BUILD/base-tree
	obj=$BUILD/obj/base
	[ "$(git -C "$base_tree" rev-parse HEAD 2>/dev/null)" = "$(git -C "$TREE" rev-parse base)" ] ||
		die "no pristine base worktree at $base_tree (run scripts/check-quality.sh once)"
	"$TOP/scripts/build-kernel.sh" default >/dev/null || die "our kernel does not build"
	mkdir -p "$obj"
	grep -v "PKVM_SPLIT_ABI_TEST" "$BUILD/obj/default/.config" > "$obj/.config"
	make -s -C "$base_tree" ARCH=arm64 CROSS_COMPILE="$CROSS" CC="ccache ${CROSS}gcc" \
		O="$obj" olddefconfig || die "base config failed"
	make -s -C "$base_tree" ARCH=arm64 CROSS_COMPILE="$CROSS" CC="ccache ${CROSS}gcc" \
		-j"$JOBS" O="$obj" Image > "$obj/image-build.log" 2>&1 ||
		die "base Image build failed ($obj/image-build.log)"
fi
[ -f "$BUILD/obj/$variant/arch/arm64/boot/Image" ] || die "no kernel $variant (scripts/build-kernel.sh $variant)"

out=${REPRO_OUT:-$TOP/bench/incidents/repro-$(date -u +%Y-%m-%d)}
mkdir -p "$out"
list=$BUILD/repro.list
{
	echo "$mode churn $((secs + 120)) ./vm_churn -n 100000000 -e 5 -t $secs"
	echo "$mode churn_log $((secs + 120)) ./vm_churn -n 100000000 -e 5 -t $secs -l"
} > "$list"
MATRIX=$list INITRAMFS_OUT=$BUILD/repro-initramfs.cpio "$TOP/scripts/mk-initramfs.sh" >/dev/null ||
	die "initramfs build failed"

qv=$("$QEMU" --version | head -1 | sed 's/^QEMU emulator version //')
accel=$(case "${QEMU_EXTRA:-}" in *thread=single*) echo "tcg single-threaded" ;; *) echo "tcg multi-threaded" ;; esac)
summary=$out/summary.txt
for hold in $holds; do
	tag=$variant-$mode-hold$hold-qemu${qv%% *}$(case "$accel" in *single*) echo -single ;; esac)
	EXTRA_CMDLINE="pkvm.hold_vm=$hold" INITRD=$BUILD/repro-initramfs.cpio \
		"$TOP/scripts/boot.sh" "$mode" "$variant" "$mode" > "$out/$tag.results" 2>&1
	log=$out/$tag.log
	cp "$BUILD/logs/$variant-$mode-$mode.log" "$log"
	# Per run, its summary, or its last progress line if it died.
	churn=$(awk '/^# start /{l="no output"} /# vm_churn: [0-9]+ VMs (in|done)/{sub(/.*# vm_churn: /,""); l=$0}
		/^(not )?ok /{print l}' "$log" | paste -sd';' -)
	printf '%s | kernel %s | QEMU %s, %s | %s hold_vm=%s | %s of 2 runs failed, %s KVM_BUG/WARNING lines | %s\n' \
		"$(date -u +%H:%M)" "$variant" "$qv" "$accel" "$mode" "$hold" \
		"$(grep -c '^not ok' "$log")" "$(grep -cE 'KVM_BUG|WARNING:' "$log")" \
		"${churn:-no vm_churn summary}" | tee -a "$summary"
done
