#!/usr/bin/env bash
# `make bench-migrate`: dirty logging shaped like a live migration (issue
# #25, item 2). dirty_log_migrate_perf_test (our selftest patch) keeps the
# guest writing for the whole run while the host copies its memory to a
# destination buffer in rounds of collect (KVM_GET_DIRTY_LOG +
# KVM_CLEAR_DIRTY_LOG, or the dirty ring) and copy, with the vCPUs in
# KVM_RUN, then stops them for the last round (the blackout) and checks the
# destination word for word. Per run: the guest's write rate with logging
# on against the same guest with logging off, each round's collection time
# (kick and drain included), the blackout, and turning logging off.
#
# Cells: bitmap and ring, 1 and 2 vCPUs, 32 MiB of 2 MiB hugetlb pages per
# vCPU, eager split on (2M); under pKVM with the EL2 fast dirty-fault path
# on and off, in the same boot. Several boots per mode, each boot's cells
# in a seeded order. Results go to bench/migrate/<date>/: raw serial logs
# and each boot's plan, results.csv and results.md by
# scripts/migrate-report.py (with --readme, the README's section).
#   MIGRATE_MODES    host modes (default: protected protected-nvhe nvhe vhe)
#   MIGRATE_BOOTS    boots per mode (default 5)
#   MIGRATE_VCPUS    vCPU counts (default "1 2")
#   MIGRATE_VARIANT  kernel variant (default nodebug, the production config)
#   MIGRATE_SEED     shuffle seed (default: the time)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

MODES=${MIGRATE_MODES:-"protected protected-nvhe nvhe vhe"}
BOOTS=${MIGRATE_BOOTS:-5}
VCPUS=${MIGRATE_VCPUS:-"1 2"}
VARIANT=${MIGRATE_VARIANT:-nodebug}
SEED=${MIGRATE_SEED:-$(date +%s)}
PARAM=/sys/module/kvm/parameters/pkvm_fast_dirty
ARGS="-s anonymous_hugetlb_2mb -b 32M -r 4 -t 50 -w 200"

case "$BOOTS" in ''|*[!0-9]*|0) die "MIGRATE_BOOTS must be a positive count, not '$BOOTS'" ;; esac
for v in $VCPUS; do case "$v" in ''|*[!0-9]*|0) die "MIGRATE_VCPUS: '$v' is not a vCPU count" ;; esac; done
for m in $MODES; do
	case "$m" in protected|protected-nvhe|nvhe|vhe) ;; *) die "MIGRATE_MODES: unknown mode '$m'" ;; esac
done

start=$(date +%s)
"$TOP/scripts/build-kernel.sh" "$VARIANT"
stamp=$(date -u +%Y-%m-%d-%H%M)
out=${MIGRATE_OUT:-$TOP/bench/migrate/$stamp}
mkdir -p "$out/raw"

cells() {
	local mode=$1 fasts="-" f v l
	case "$mode" in protected*) fasts="1 0" ;; esac
	for f in $fasts; do
		for v in $VCPUS; do
			for l in bitmap ring; do echo "$l:$v:$f"; done
		done
	done
}

run_boot() {
	local mode=$1 boot=$2 label=$1-b$2 list=$BUILD/migrate-$1-b$2.list rc=0 l v f sw
	cells "$mode" | seeded_shuffle "$SEED-$mode-$boot" |
	while IFS=: read -r l v f; do
		sw=""
		[ "$f" = - ] || sw="$PARAM=$f"
		echo "all g_${l}_${v}_f${f/-/x} 300 KVM_EAGER_SPLIT_CHUNK_SIZE=2M $sw ./dirty_log_migrate_perf_test $ARGS -M $l -v $v"
	done > "$list"
	cp "$list" "$out/raw/$label.list"
	MATRIX=$list LIST_PREFIX=migrate- INITRAMFS_OUT=$BUILD/migrate-initramfs.cpio \
		"$TOP/scripts/mk-initramfs.sh" >/dev/null || die "mk-initramfs failed"
	echo "== $label ($(date -u +%H:%M:%S)): $(awk '{print $2}' "$list" | tr '\n' ' ')"
	INITRD=$BUILD/migrate-initramfs.cpio BOOT_TIMEOUT=${MIGRATE_BOOT_TIMEOUT:-1800} \
		"$TOP/scripts/boot.sh" "$mode" "$VARIANT" "migrate-$mode" > "$out/raw/$label.boot" 2>&1 || rc=$?
	grep -E '^FAIL' "$out/raw/$label.boot" || true
	{
		echo "# bench-migrate: $label, kernel $VARIANT, boot.sh exit status $rc"
		for o in NVHE_EL2_DEBUG NVHE_EL2_TRACING PROVE_LOCKING; do
			echo "# config: CONFIG_$o=$(sed -n "s/^CONFIG_$o=//p" "$BUILD/obj/$VARIANT/.config" | grep . || echo n)"
		done
		cat "$BUILD/logs/$VARIANT-$mode-migrate-$mode.log"
	} > "$out/raw/$label.log"
}

echo "bench-migrate: seed $SEED, $BOOTS boots per mode of '$VARIANT', modes: $MODES"
for boot in $(seq 1 "$BOOTS"); do
	for mode in $(printf '%s\n' $MODES | seeded_shuffle "$SEED-modes-$boot"); do
		run_boot "$mode" "$boot"
	done
done

{
	echo "date: $stamp (UTC); took $(( ($(date +%s) - start) / 60 )) min (from the start, kernel build included)"
	echo "machine: $(nproc) host cores, $(uname -m), QEMU $(qemu-system-aarch64 --version | head -1 | awk '{print $4}') TCG; guest (L1) -smp ${SMP:-2}"
	echo "kernel: $(git -C "$TREE" describe --always) on base $(git -C "$TREE" rev-parse --short base), variant '$VARIANT'"
	echo "scenario: KVM_EAGER_SPLIT_CHUNK_SIZE=2M dirty_log_migrate_perf_test $ARGS -M bitmap|ring -v N"
	echo "seed: $SEED"
	echo "command: make bench-migrate MIGRATE_MODES=\"$MODES\" MIGRATE_BOOTS=$BOOTS MIGRATE_VCPUS=\"$VCPUS\" MIGRATE_VARIANT=$VARIANT MIGRATE_SEED=$SEED"
} > "$out/README.txt"
/usr/bin/python3 "$TOP/scripts/migrate-report.py" "$out"
echo "bench-migrate: results in $out ($(( ($(date +%s) - start) / 60 )) min)"
