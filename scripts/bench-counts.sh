#!/usr/bin/env bash
# `make bench-counts`: what a dirtied page costs in counts that carry to
# hardware (issue #25, item 1), beside instruction-weighted time ratios.
#
# The scenario is make bench's: dirty_log_perf_test on 2 MiB hugetlb pages,
# eager split on, 1 vCPU writing 32 MiB (8192 pages) per iteration, under
# pKVM with the EL2 fast dirty-fault path on (fast=1) and off (fast=0, the
# host resolves each fault), and in nvhe and vhe.
#
#  1. Counts: one boot per mode with the elcount TCG plugin
#     (scripts/elcount/). Each run is bracketed by two markers (elmark); a run
#     with -i 4 and one with -i 2 of the same cell, in the same boot, differ
#     by two dirty iterations (16384 dirtied pages: the write fault, its
#     resolution, and the get+clear of the log), so their difference over
#     16384 is the cost per dirtied page: exceptions by kind and level,
#     instructions at each EL, broadcast and local TLBIs. Everything the
#     runs share (VM creation, population, eager split, teardown, init's
#     bookkeeping) cancels.
#     With COUNTS_VCPUS="1 2" (the default) every cell also runs with 2
#     vCPUs (16384 pages per iteration): what a fault costs at 2 vCPUs
#     against 1 (issue #25, item 4: the scaling 2 host cores can judge).
#  2. Time, the same ratio two ways: under -icount shift=0,sleep=off
#     (guest time advances one ns per instruction, so every instruction
#     weighs alike, exceptions and world switches included) and under plain
#     TCG (wall time, which weighs world switches heavily): one boot of
#     each per pKVM mode, fast=1 and fast=0 runs alternating, the ratio of
#     their dirty-iteration times paired run by run; at 1 and 2 vCPUs
#     (vCPU-time per fault = wall time x vCPUs / pages).
#  3. The VM's lock: one boot per pKVM mode of the default kernel (hyp
#     events exist only with NVHE_EL2_DEBUG; before issue #26 that also
#     checked page states under the host's lock in the fast path), fast
#     path on, 1 and 2 vCPUs, each run under hyp-expect: the share of
#     faults resolved at EL2 that waited (pkvm_dirty_fault's waited: for
#     the VM's lock, or, since the fault path takes no lock, a lost
#     compare-and-exchange tried again). In the same boot, per repetition,
#     dirty_log_migrate_perf_test (bitmap, 2 vCPUs writing while the log
#     is cleared) under hyp-expect wp_overlap: the faults EL2 resolved
#     while another CPU was in a write-protect call of KVM_CLEAR_DIRTY_LOG.
#
# Results go to bench/counts/<date>/: raw serial logs, plan.txt, counts.csv,
# counts.md; scripts/counts-report.py writes the last two and, with
# --readme, the README's table.
#   COUNTS_MODES    host modes (default: protected protected-nvhe nvhe vhe)
#   COUNTS_REPS     pairs of runs per cell (default 3)
#   COUNTS_VARIANT  kernel variant (default nodebug, the production config)
#   COUNTS_TIME     1 (default) to run the -icount and TCG time boots, 0 not
#   COUNTS_VCPUS    vCPU counts (default "1 2")
#   COUNTS_FAST     pKVM cells of the counts boots: "1 0" (default: fast
#                   path and host path), "1" or "0"
#   COUNTS_LOCK     1 (default) to run the lock boots, 0 not
#   COUNTS_LOCK_VARIANT  kernel of the lock boots (default: default-cntpct,
#                   the default kernel with 7.3's hyp trace clock fixed,
#                   bench/hypclock/, built here: without the fix protected
#                   nVHE's event times are the guest's on a CPU running a
#                   vCPU; "default" for the kernel as it is; another must
#                   have hyp events and be built already)
#   COUNTS_PLUGIN   1 (default) to run the counts boots (elcount plugin), 0
#                   not (with COUNTS_TIME=0: the lock boots only, which
#                   need no nodebug kernel)
#   COUNTS_SEED     shuffle seed (default: the time)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

MODES=${COUNTS_MODES:-"protected protected-nvhe nvhe vhe"}
REPS=${COUNTS_REPS:-3}
VARIANT=${COUNTS_VARIANT:-nodebug}
TIME=${COUNTS_TIME:-1}
SEED=${COUNTS_SEED:-$(date +%s)}
PARAM=/sys/module/kvm/parameters/pkvm_fast_dirty
VCPUS=${COUNTS_VCPUS:-"1 2"}
FAST=${COUNTS_FAST:-"1 0"}
LOCK=${COUNTS_LOCK:-1}
LOCK_VARIANT=${COUNTS_LOCK_VARIANT:-default-cntpct}
HYPCLOCK_FIX=$TOP/bench/hypclock/0001-KVM-arm64-Read-the-physical-counter-for-the-nVHE-hyp-trace-clock.patch
COUNT=${COUNTS_PLUGIN:-1}
ARGS="-s anonymous_hugetlb_2mb -b 32M -m 3 -k 2M"
CLEAR_ARGS="-s anonymous_hugetlb_2mb -b 32M -v 2 -M bitmap -r 4 -t 50 -w 200"

case "$REPS" in ''|*[!0-9]*|0) die "COUNTS_REPS must be a positive count, not '$REPS'" ;; esac
case "$TIME" in 0|1) ;; *) die "COUNTS_TIME must be 0 or 1, not '$TIME'" ;; esac
case "$LOCK" in 0|1) ;; *) die "COUNTS_LOCK must be 0 or 1, not '$LOCK'" ;; esac
case "$COUNT" in 0|1) ;; *) die "COUNTS_PLUGIN must be 0 or 1, not '$COUNT'" ;; esac
[ "$COUNT$TIME$LOCK" != 000 ] || die "COUNTS_PLUGIN, COUNTS_TIME and COUNTS_LOCK are all 0: nothing to run"
for v in $VCPUS; do case "$v" in 1|2) ;; *) die "COUNTS_VCPUS: '$v' is not 1 or 2" ;; esac; done
case "$FAST" in "1 0"|"0 1"|1|0) ;; *) die "COUNTS_FAST: '$FAST' is not \"1 0\", \"1\" or \"0\"" ;; esac
for m in $MODES; do
	case "$m" in protected|protected-nvhe|nvhe|vhe) ;; *) die "COUNTS_MODES: unknown mode '$m'" ;; esac
done
if [ "$COUNT$TIME" != 00 ]; then
	[ -f "$BUILD/obj/$VARIANT/arch/arm64/boot/Image" ] ||
		die "no '$VARIANT' kernel (make kernel-$VARIANT, or scripts/build-kernel.sh $VARIANT)"
fi
if [ "$COUNT" = 1 ]; then
	"$TOP/scripts/build-plugin.sh" --check >&2 || die "the elcount plugin failed its self-test"
fi
PLUGIN=$BUILD/plugin/libelcount.so

stamp=$(date -u +%Y-%m-%d-%H%M)
out=${COUNTS_OUT:-$TOP/bench/counts/$stamp}
mkdir -p "$out/raw"
plan=$out/plan.txt
: > "$plan"
start=$(date +%s)

fasts() { case "$1" in protected*) echo "$FAST" ;; *) echo "-" ;; esac; }

# One boot; $3 makes its list. Every planned run is in plan.txt, and the
# report counts a run without its two markers (or its "ok" line) as failed.
boot() {
	local kind=$1 mode=$2 list=$BUILD/counts-$1-$2.list label=$1-$2 rc=0 variant=${4:-$VARIANT}
	"$3" "$mode" > "$list"
	MATRIX=$list LIST_PREFIX=counts- INITRAMFS_OUT=$BUILD/counts-initramfs.cpio \
		"$TOP/scripts/mk-initramfs.sh" >/dev/null || die "mk-initramfs failed"
	echo "== $label ($(date -u +%H:%M:%S)): $(grep -c ' ./dirty_log_perf_test' "$list") runs"
	INITRD=$BUILD/counts-initramfs.cpio BOOT_TIMEOUT=${COUNTS_BOOT_TIMEOUT:-2400} \
		"$TOP/scripts/boot.sh" "$mode" "$variant" "counts-$mode" > "$out/raw/$label.results" 2>&1 || rc=$?
	{
		echo "# bench-counts: $label, kernel $variant, boot.sh exit status $rc"
		for o in NVHE_EL2_DEBUG NVHE_EL2_TRACING PROVE_LOCKING; do
			echo "# config: CONFIG_$o=$(sed -n "s/^CONFIG_$o=//p" "$BUILD/obj/$variant/.config" | grep . || echo n)"
		done
		cat "$BUILD/logs/$variant-$mode-counts-$mode.log"
	} > "$out/raw/$label.log"
	grep -E '^FAIL' "$out/raw/$label.results" || true
	[ $rc -eq 0 ] || echo "bench-counts: boot $label ended with status $rc (its runs are counted as failed)"
}

# Counts: for each cell and repetition, an -i 2 and an -i 4 run (in a
# seeded order), each between markers 2k and 2k+1.
counts_list() {
	local mode=$1 k=0 cell f rep it sw v
	for f in $(fasts "$mode"); do
		for v in $VCPUS; do
			for rep in $(seq 1 "$REPS"); do
				for it in 2 4; do echo "$f:$v:$rep:$it"; done
			done
		done
	done | seeded_shuffle "$SEED-counts-$mode" |
	while IFS=: read -r f v rep it; do
		sw=""
		[ "$f" = - ] || sw="$PARAM=$f"
		echo "counts $mode $k fast=$f rep=$rep iters=$it vcpus=$v" >> "$plan"
		echo "all m${k}a 60 ./elmark $((2 * k))"
		echo "all r${k}_f${f/-/x}_v${v}_${rep}_i${it} 600 $sw ./dirty_log_perf_test $ARGS -v $v -i $it"
		echo "all m${k}b 60 ./elmark $((2 * k + 1))"
		k=$((k + 1))
	done
}

# Time: fast=1 and fast=0 alternating, -i 4, REPS pairs per vCPU count.
time_list() {
	local mode=$1 k=0 rep f v
	for v in $VCPUS; do
		for rep in $(seq 1 "$REPS"); do
			for f in 1 0; do
				echo "$kind $mode $k fast=$f rep=$rep iters=4 vcpus=$v" >> "$plan"
				echo "all t${k}_f${f}_v${v}_${rep} 900 $PARAM=$f ./dirty_log_perf_test $ARGS -v $v -i 4"
				k=$((k + 1))
			done
		done
	done
}

# The VM's lock: fast path on, REPS runs per vCPU count, alternating, each
# under hyp-expect (which counts the faults EL2 resolved and how many
# waited).
lock_list() {
	local mode=$1 k=0 rep v
	for rep in $(seq 1 "$REPS"); do
		for v in $VCPUS; do
			echo "lock $mode $k fast=1 rep=$rep iters=4 vcpus=$v" >> "$plan"
			echo "all l${k}_f1_v${v}_${rep} 900 $PARAM=1 ./hyp-expect el2_faults=1 -- ./dirty_log_perf_test $ARGS -v $v -i 4"
			k=$((k + 1))
		done
		# Faults during KVM_CLEAR_DIRTY_LOG: the migration-shaped test
		# keeps both vCPUs writing while the log is cleared.
		echo "clear $mode $k fast=1 rep=$rep iters=4 vcpus=2" >> "$plan"
		echo "all c${k}_f1_v2_${rep} 900 KVM_EAGER_SPLIT_CHUNK_SIZE=2M $PARAM=1 ./hyp-expect el2_faults=1 wp_overlap=0 -- ./dirty_log_migrate_perf_test $CLEAR_ARGS"
		k=$((k + 1))
	done
}

echo "bench-counts: seed $SEED, kernel '$VARIANT', $REPS pairs per cell, modes: $MODES"
for mode in $MODES; do
	[ "$COUNT" = 1 ] || break
	QEMU_EXTRA="-plugin $PLUGIN -d plugin" boot counts "$mode" counts_list
done
if [ "$TIME" = 1 ]; then
	for mode in $MODES; do
		case "$mode" in protected*) ;; *) continue ;; esac
		kind=icount QEMU_EXTRA="-icount shift=0,sleep=off" boot icount "$mode" time_list
		kind=tcg QEMU_EXTRA="" boot tcg "$mode" time_list
	done
fi
if [ "$LOCK" = 1 ]; then
	if [ "$LOCK_VARIANT" = default ]; then
		"$TOP/scripts/build-kernel.sh" default
	elif [ "$LOCK_VARIANT" = default-cntpct ]; then
		"$TOP/scripts/build-patched-kernel.sh" default default-cntpct "$HYPCLOCK_FIX"
	else
		grep -qs '^CONFIG_NVHE_EL2_TRACING=y' "$BUILD/obj/$LOCK_VARIANT/.config" &&
			[ -f "$BUILD/obj/$LOCK_VARIANT/arch/arm64/boot/Image" ] ||
			die "COUNTS_LOCK_VARIANT: no '$LOCK_VARIANT' kernel with NVHE_EL2_TRACING built"
	fi
	for mode in $MODES; do
		case "$mode" in protected*) ;; *) continue ;; esac
		QEMU_EXTRA="" boot lock "$mode" lock_list "$LOCK_VARIANT"
	done
fi

{
	echo "date: $stamp (UTC); took $(( ($(date +%s) - start) / 60 )) min"
	echo "machine: $(nproc) host cores, $(uname -m), QEMU $(qemu-system-aarch64 --version | head -1 | awk '{print $4}') TCG; guest (L1) -smp ${SMP:-2}"
	echo "kernel: $(git -C "$TREE" describe --always) on base $(git -C "$TREE" rev-parse --short base), variant '$VARIANT' ($(grep -qs '^CONFIG_NVHE_EL2_DEBUG=y' "$BUILD/obj/$VARIANT/.config" && echo NVHE_EL2_DEBUG=y || echo NVHE_EL2_DEBUG off); $(grep -qs '^CONFIG_NVHE_EL2_TRACING=y' "$BUILD/obj/$VARIANT/.config" && echo NVHE_EL2_TRACING=y || echo NVHE_EL2_TRACING off))"
	[ "$COUNT$TIME" = 00 ] && echo "(no counts or time boots: the variant above was not used)"
	[ "$LOCK" = 0 ] || echo "lock boots: variant '$LOCK_VARIANT' ($(git -C "$TREE" describe --always)); write-protect overlap: dirty_log_migrate_perf_test $CLEAR_ARGS"
	echo "scenario: dirty_log_perf_test $ARGS -i 2 / -i 4"
	echo "seed: $SEED"
	echo "command: make bench-counts COUNTS_MODES=\"$MODES\" COUNTS_REPS=$REPS COUNTS_VARIANT=$VARIANT COUNTS_TIME=$TIME COUNTS_VCPUS=\"$VCPUS\" COUNTS_LOCK=$LOCK COUNTS_PLUGIN=$COUNT COUNTS_FAST=\"$FAST\" COUNTS_LOCK_VARIANT=$LOCK_VARIANT COUNTS_SEED=$SEED"
} > "$out/README.txt"
/usr/bin/python3 "$TOP/scripts/counts-report.py" "$out"
echo "bench-counts: results in $out ($(( ($(date +%s) - start) / 60 )) min)"
