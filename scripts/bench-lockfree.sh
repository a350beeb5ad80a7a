#!/usr/bin/env bash
# `make bench-lockfree`: the EL2 fault path without the VM's lock (the
# el2-lockfree posting, step two) against step one, the series without it
# (msg/steps), in counts.
#
# Two kernels of the production config (nodebug): the series as it stands,
# and 'nodebug-locked', step one: the same tree with the step-two patches
# (the el2-lockfree posting and its test-kit patch) taken out, as a diff
# made here by reverse-applying them to the tree in a scratch index (no
# hand-written patch; kept in the results as step1.patch). The diff is
# applied to the tree only for that build and taken out again, whatever
# happens (scripts/build-patched-kernel.sh).
#
# Then make bench-counts' counts boots (elcount plugin, fast path only,
# COUNTS_VCPUS at 1 and 2 vCPUs, LOCKFREE_REPS pairs of -i 2 / -i 4 runs per
# cell), one boot per kernel and pKVM mode, the boots in a seeded order, and
# scripts/lockfree-report.py: EL2 instructions per dirtied page of each
# kernel, their difference, and the same with the world switches to the host
# (timer ticks, whose rate follows TCG's wall time) factored out.
#
# Then contention (issue #43): both steps again, as kernels with hyp
# events (the default config with 7.3's hyp trace clock fixed,
# bench/hypclock/: 'default-cntpct' and 'default-cntpct-locked'; hyp events
# need NVHE_EL2_DEBUG, so these are not the production config), one boot
# per kernel and pKVM mode, running dirty_log_migrate_perf_test -I: every
# vCPU writes its share of pages interleaved with the others' (so vCPUs
# fault on one last-level table) while the host collects and clears the
# log with the vCPUs in KVM_RUN, at LOCKFREE_CVCPUS vCPUs (4 on the guest's
# 2 CPUs is oversubscribed), each run under hyp-expect wp_overlap: the
# faults EL2 resolved while another CPU was in a write-protect call, and
# those that waited (the locked step: found the VM's lock held; the
# lock-free step: lost the exchange and went to the host).
#
# Results in bench/lockfree/<date>/: results.md, one bench-counts folder
# per boot (<kernel>-<mode>/), and contention-<kernel>-<mode>.{log,results}.
#   LOCKFREE_MODES  pKVM modes (default: protected protected-nvhe)
#   LOCKFREE_REPS   pairs of runs per cell (default 4)
#   LOCKFREE_VCPUS  vCPU counts (default "1 2")
#   LOCKFREE_COUNTS 1 (default) to run the counts boots, 0 not
#   LOCKFREE_CONTENTION  1 (default) to run the contention boots, 0 not
#   LOCKFREE_OUT    results folder (default: a new bench/lockfree/<date>/;
#                   an existing run's, to add the boots not run there)
#   LOCKFREE_CVCPUS vCPU counts of the contention runs (default "1 2 4")
#   LOCKFREE_CREPS  contention runs per vCPU count (default 3)
#   LOCKFREE_SEED   order seed (default: the time)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

MODES=${LOCKFREE_MODES:-"protected protected-nvhe"}
REPS=${LOCKFREE_REPS:-4}
VCPUS=${LOCKFREE_VCPUS:-"1 2"}
SEED=${LOCKFREE_SEED:-$(date +%s)}
CONT=${LOCKFREE_CONTENTION:-1}
COUNTS=${LOCKFREE_COUNTS:-1}
CVCPUS=${LOCKFREE_CVCPUS:-"1 2 4"}
CREPS=${LOCKFREE_CREPS:-3}
PATCH=$BUILD/lockfree-step1.patch
HYPCLOCK_FIX=$TOP/bench/hypclock/0001-KVM-arm64-Read-the-physical-counter-for-the-nVHE-hyp-trace-clock.patch
CONT_ARGS="-s anonymous_hugetlb_2mb -b 32M -I -M bitmap -r 4 -t 50 -w 200"

case "$REPS" in ''|*[!0-9]*|0) die "LOCKFREE_REPS must be a positive count, not '$REPS'" ;; esac
for m in $MODES; do
	case "$m" in protected|protected-nvhe) ;; *) die "LOCKFREE_MODES: '$m' is not a pKVM mode" ;; esac
done
for v in $VCPUS; do case "$v" in 1|2) ;; *) die "LOCKFREE_VCPUS: '$v' is not 1 or 2" ;; esac; done
case "$CONT" in 0|1) ;; *) die "LOCKFREE_CONTENTION must be 0 or 1, not '$CONT'" ;; esac
case "$COUNTS" in 0|1) ;; *) die "LOCKFREE_COUNTS must be 0 or 1, not '$COUNTS'" ;; esac
[ "$COUNTS$CONT" != 00 ] || die "LOCKFREE_COUNTS and LOCKFREE_CONTENTION are both 0: nothing to run"
for v in $CVCPUS; do case "$v" in [1-8]) ;; *) die "LOCKFREE_CVCPUS: '$v' is not 1 to 8" ;; esac; done
case "$CREPS" in ''|*[!0-9]*|0) die "LOCKFREE_CREPS must be a positive count, not '$CREPS'" ;; esac

# Step one as a diff from the tree: the step-two patches reverse-applied,
# newest first, to the tree's HEAD in a scratch index.
step2=$(awk '$1 == "step2" { $1 = ""; print }' "$TOP/msg/steps")
[ -n "$step2" ] || die "msg/steps names no step-two patch"
[ -z "$(git -C "$TREE" status --porcelain --untracked-files=no)" ] || die "$TREE has changes"
mapfile -t commits < <(git -C "$TREE" rev-list --reverse base..HEAD)
export GIT_INDEX_FILE=$BUILD/lockfree-step1.index
git -C "$TREE" read-tree HEAD
for n in $(printf '%s\n' $step2 | sort -rn); do
	[ "$n" -le "${#commits[@]}" ] || die "msg/steps: no patch $n in the tree"
	git -C "$TREE" show "${commits[$((n - 1))]}" | git -C "$TREE" apply --cached -R ||
		die "patch $n does not come out of the tree"
done
step1_tree=$(git -C "$TREE" write-tree)
unset GIT_INDEX_FILE
rm -f "$BUILD/lockfree-step1.index"
git -C "$TREE" diff HEAD "$step1_tree" -- . ':(exclude)tools' > "$PATCH"
[ -s "$PATCH" ] || die "step one does not differ from the tree"
[ -f "$HYPCLOCK_FIX" ] || die "no $HYPCLOCK_FIX"

# The locked kernel: nodebug's objects rebuilt with the patch.
[ "$COUNTS" = 0 ] || "$TOP/scripts/build-patched-kernel.sh" nodebug nodebug-locked "$PATCH"
if [ "$CONT" = 1 ]; then
	"$TOP/scripts/build-patched-kernel.sh" default default-cntpct "$HYPCLOCK_FIX"
	"$TOP/scripts/build-patched-kernel.sh" default default-cntpct-locked "$HYPCLOCK_FIX" "$PATCH"
fi

stamp=$(date -u +%Y-%m-%d-%H%M)
out=${LOCKFREE_OUT:-$TOP/bench/lockfree/$stamp}
mkdir -p "$out"
out=$(realpath "$out")
start=$(date +%s)
[ "$COUNTS" = 0 ] ||
	for mode in $MODES; do for k in nodebug nodebug-locked; do echo "$k:$mode"; done; done |
	seeded_shuffle "$SEED-lockfree" > "$out/order.txt"
[ "$COUNTS" = 0 ] || while IFS=: read -r k mode; do
	echo "== $k $mode ($(date -u +%H:%M:%S))"
	COUNTS_OUT=$out/$k-$mode COUNTS_MODES=$mode COUNTS_VARIANT=$k COUNTS_REPS=$REPS \
		COUNTS_VCPUS="$VCPUS" COUNTS_FAST=1 COUNTS_TIME=0 COUNTS_LOCK=0 \
		COUNTS_SEED="$SEED-$k" "$TOP/scripts/bench-counts.sh"
done < "$out/order.txt"

# Contention: one boot per kernel and mode, the runs in a seeded order.
contention_list() {
	local k=0 rep v
	for rep in $(seq 1 "$CREPS"); do for v in $CVCPUS; do echo "$rep:$v"; done; done |
		seeded_shuffle "$SEED-contention-$1" |
		while IFS=: read -r rep v; do
			echo "all w${k}_v${v}_${rep} 900 KVM_EAGER_SPLIT_CHUNK_SIZE=2M ./hyp-expect el2_faults=1 wp_overlap=0 -- ./dirty_log_migrate_perf_test $CONT_ARGS -v $v"
			k=$((k + 1))
		done
}
if [ "$CONT" = 1 ]; then
	for mode in $MODES; do for k in default-cntpct default-cntpct-locked; do echo "$k:$mode"; done; done |
		seeded_shuffle "$SEED-contention" > "$out/contention-order.txt"
	while IFS=: read -r k mode; do
		echo "== contention $k $mode ($(date -u +%H:%M:%S))"
		list=$BUILD/contention-$k-$mode.list
		contention_list "$k-$mode" > "$list"
		MATRIX=$list LIST_PREFIX=contention- INITRAMFS_OUT=$BUILD/contention-initramfs.cpio \
			"$TOP/scripts/mk-initramfs.sh" >/dev/null || die "mk-initramfs failed"
		rc=0
		INITRD=$BUILD/contention-initramfs.cpio BOOT_TIMEOUT=3600 \
			"$TOP/scripts/boot.sh" "$mode" "$k" "contention-$mode" > "$out/contention-$k-$mode.results" 2>&1 || rc=$?
		{
			echo "# bench-lockfree contention: kernel $k, mode $mode, boot.sh exit status $rc"
			cat "$BUILD/logs/$k-$mode-contention-$mode.log"
		} > "$out/contention-$k-$mode.log"
		cp "$list" "$out/contention-$k-$mode.list"
		grep -E '^FAIL' "$out/contention-$k-$mode.results" || true
	done < "$out/contention-order.txt"
fi
about=$out/README.txt
[ "$COUNTS" = 1 ] || { about=$out/README-contention.txt; echo "(contention boots added to this run)" > "$about"; }
{
	echo "date: $stamp (UTC); took $(( ($(date +%s) - start) / 60 )) min"
	echo "machine: $(nproc) host cores, $(uname -m), QEMU $(qemu-system-aarch64 --version | head -1 | awk '{print $4}') TCG; guest (L1) -smp ${SMP:-2}"
	echo "kernels: nodebug ($(git -C "$TREE" describe --always) on base $(git -C "$TREE" rev-parse --short base)) and nodebug-locked (step one: the same without patches$step2, msg/steps; step1.patch, tree $step1_tree)"
	[ "$CONT" = 0 ] || echo "contention kernels: default-cntpct and default-cntpct-locked (the default config, NVHE_EL2_DEBUG=y, with bench/hypclock/'s fix; the second also step one, as above); runs: dirty_log_migrate_perf_test $CONT_ARGS -v {$CVCPUS}, $CREPS each"
	echo "seed: $SEED"
	echo "command: make bench-lockfree LOCKFREE_COUNTS=$COUNTS LOCKFREE_MODES=\"$MODES\" LOCKFREE_REPS=$REPS LOCKFREE_VCPUS=\"$VCPUS\" LOCKFREE_CONTENTION=$CONT LOCKFREE_CVCPUS=\"$CVCPUS\" LOCKFREE_CREPS=$CREPS LOCKFREE_SEED=$SEED"
} >> "$about"
cp "$PATCH" "$out/step1.patch"
/usr/bin/python3 "$TOP/scripts/lockfree-report.py" "$out"
echo "bench-lockfree: results in $out ($(( ($(date +%s) - start) / 60 )) min)"
