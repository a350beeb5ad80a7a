#!/usr/bin/env bash
# `make bench`: dirty_log_perf_test side by side over host modes, eager split
# on/off and, under pKVM, the EL2 fast dirty-fault path on/off, to judge the
# fast path. Several boots per mode (the headline kernel is the production
# build, NVHE_EL2_DEBUG off), the cells of each boot in a seeded random order
# (the seed is printed and recorded), plus labelled boots of the debug
# build (NVHE_EL2_DEBUG and hyp events), whose runs also count what EL2's
# split, write-protect and collapse calls did (hyp-expect totals): the
# hypercall and TLBI rows, since v3 left the host no statistics of them.
# Results go to bench/results/<date>/: raw serial logs, results.csv
# (one row per run), results.md (every target, met or missed, with its
# range) and speedup.png.
#   BENCH_MODES    host modes (default: protected protected-nvhe nvhe vhe)
#   BENCH_BOOTS    boots per mode of the production kernel (default 5)
#   BENCH_DEBUG    boots of the debug kernel per pKVM mode (default 1)
#   BENCH_MEM      guest memory per vCPU (default 32M)
#   BENCH_VCPUS    vCPU counts (default "1 2")
#   BENCH_SEED     shuffle seed (default: the time)
#   BENCH_VARIANT  headline kernel variant (default nodebug)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

MODES=${BENCH_MODES:-"protected protected-nvhe nvhe vhe"}
BOOTS=${BENCH_BOOTS:-5}
DEBUG_BOOTS=${BENCH_DEBUG:-1}
MEM=${BENCH_MEM:-32M}
VCPUS=${BENCH_VCPUS:-"1 2"}
SEED=${BENCH_SEED:-$(date +%s)}
VARIANT=${BENCH_VARIANT:-nodebug}
# dirty_log_perf_test guest mode 3: 48-bit PA/VA, 4K pages (the seed's setting)
GUEST_MODE=${BENCH_GUEST_MODE:-3}
PARAM=/sys/module/kvm/parameters/pkvm_fast_dirty
COLLAPSE=/sys/kernel/debug/kvm/pkvm_collapse
stamp=$(date -u +%Y-%m-%d-%H%M)
out=${BENCH_OUT:-$TOP/bench/results/$stamp}
mkdir -p "$out/raw"

case "$BOOTS$DEBUG_BOOTS" in *[!0-9]*) die "BENCH_BOOTS and BENCH_DEBUG are counts" ;; esac
for v in $VCPUS; do case "$v" in ''|*[!0-9]*|0) die "BENCH_VCPUS: '$v' is not a vCPU count" ;; esac; done
for m in $MODES; do
	case "$m" in protected|protected-nvhe|nvhe|vhe) ;; *) die "BENCH_MODES: unknown mode '$m'" ;; esac
done

# Wall time from here: the kernel builds count.
start=$(date +%s)
"$TOP/scripts/build-kernel.sh" "$VARIANT"
[ "$DEBUG_BOOTS" -eq 0 ] || "$TOP/scripts/build-kernel.sh" default

# Cells: split:workload:vcpus:fast:wp:c. Split on with 2 MiB blocks is the
# case the fast path is for; one split-off cell per mode keeps eager split's
# own gain in view. fast=1 only means something under pKVM; so does c=0
# (pkvm_collapse=N: blocks collapsed on fault after logging off, not
# restored in place at EL2), one cell per pKVM mode to compare with its
# twin. The wp field stays 1 in every cell, so that results read as
# before: v3's wp=0 cell (pkvm_split_wrprotect=N, write-protect then split
# against v3's one-call clear) has no switch in v4, whose clear always
# splits, then write-protects the word.
cells() {
	local mode=$1 fasts=0 v w f
	case "$mode" in protected*) fasts="1 0"; echo "2M:w10:1:1:1:0" ;; esac
	for f in $fasts; do
		for v in $VCPUS; do
			for w in w10 w100; do
				echo "2M:$w:$v:$f:1:1"
			done
		done
		echo "0:w10:1:$f:1:1"
	done
}

# One list per boot, its cells in an order drawn from the seed. In the
# debug boots ($4 = default, whose EL2 has hyp events) every run goes under
# `hyp-expect totals`: what EL2's split, write-protect and collapse calls
# did (calls, blocks, TLBIs, pages), the report's hypercall and TLBI rows.
boot_list() {
	local mode=$1 boot=$2 list=$3 variant=$4 split work v f args sw he=""
	[ "$variant" = default ] && he="./hyp-expect totals -- "
	: > "$list"
	cells "$mode" | seeded_shuffle "$SEED-$mode-$boot" |
	while IFS=: read -r split work v f wp c; do
		args="-s anonymous_hugetlb_2mb -b $MEM -i 3 -v $v -m $GUEST_MODE -L"
		case "$work" in
		w100) args+=" -w 100" ;;
		w10) args+=" -w 10" ;;
		esac
		[ "$split" = 2M ] && args+=" -k 2M"
		# The test switches are debugfs files of pKVM test kernels only.
		sw="$PARAM=$f"
		case "$mode" in protected*) sw+=" $COLLAPSE=$c" ;; esac
		echo "all b_${split}_${work}_${v}_mp_f${f}_wp${wp}_c${c} 300 $sw $he./dirty_log_perf_test $args" >> "$list"
	done
}

run_boot() {
	local variant=$1 mode=$2 boot=$3 label=$4
	local list=$BUILD/bench-$label.list
	boot_list "$mode" "$boot" "$list" "$variant"
	echo "== $label: $mode, boot $boot, kernel $variant ($(date -u +%H:%M:%S)); order: $(awk '{print $2}' "$list" | tr '\n' ' ')"
	# The plan (every planned run, for the report to find each one's
	# result) and the kernel's configuration of what is measured.
	cp "$list" "$out/raw/$label.list"
	MATRIX=$list INITRAMFS_OUT=$BUILD/bench-initramfs.cpio "$TOP/scripts/mk-initramfs.sh" >/dev/null
	local rc=0
	INITRD=$BUILD/bench-initramfs.cpio BOOT_TIMEOUT=${BENCH_BOOT_TIMEOUT:-1800} \
		"$TOP/scripts/boot.sh" "$mode" "$variant" "$mode" > "$out/raw/$label.boot" 2>&1 || rc=$?
	grep -v '^PASS' "$out/raw/$label.boot" || true
	{
		echo "# bench: $label, kernel $variant, boot.sh exit status $rc"
		for o in NVHE_EL2_DEBUG NVHE_EL2_TRACING PROVE_LOCKING PKVM_SPLIT_ABI_TEST; do
			echo "# config: CONFIG_$o=$(sed -n "s/^CONFIG_$o=//p" "$BUILD/obj/$variant/.config" | grep . || echo n)"
		done
		cat "$BUILD/logs/$variant-$mode-$mode.log"
	} > "$out/raw/$label.log"
}

echo "bench: seed $SEED, $BOOTS boots per mode of '$VARIANT', $DEBUG_BOOTS of 'default' (debug EL2), modes: $MODES"
# The debug boots go between the production boots, at seeded places, so
# that a drift over the bench does not fall on them alone.
debug_after=()
for boot in $(seq 1 "$DEBUG_BOOTS"); do
	debug_after+=("$(seq 1 "$BOOTS" | seeded_shuffle "$SEED-debug-$boot" | head -1)")
done
for boot in $(seq 1 "$BOOTS"); do
	# The modes too go in a seeded order, boot by boot.
	for mode in $(printf '%s\n' $MODES | seeded_shuffle "$SEED-modes-$boot"); do
		run_boot "$VARIANT" "$mode" "$boot" "$mode-b$boot"
	done
	for i in "${!debug_after[@]}"; do
		[ "${debug_after[$i]}" = "$boot" ] || continue
		for mode in $MODES; do
			case "$mode" in protected*) run_boot default "$mode" "$((i + 1))" "$mode-debug-b$((i + 1))" ;; esac
		done
	done
done

{
	echo "date: $stamp (UTC); took $(( ($(date +%s) - start) / 60 )) min (from the start, kernel builds included)"
	echo "machine: $(nproc) host cores, $(uname -m), QEMU $(qemu-system-aarch64 --version | head -1 | awk '{print $4}') TCG; guest (L1) -smp ${SMP:-2}"
	echo "kernel: $(git -C "$TREE" describe --always) on base $(git -C "$TREE" rev-parse --short base); headline variant '$VARIANT', debug rows 'default'"
	echo "seed: $SEED"
	echo "command: make bench BENCH_MODES=\"$MODES\" BENCH_BOOTS=$BOOTS BENCH_DEBUG=$DEBUG_BOOTS BENCH_MEM=$MEM BENCH_VCPUS=\"$VCPUS\" BENCH_SEED=$SEED BENCH_VARIANT=$VARIANT"
} > "$out/README.txt"
/usr/bin/python3 "$TOP/scripts/bench-report.py" "$out"
echo "bench: results in $out ($(( ($(date +%s) - start) / 60 )) min)"
