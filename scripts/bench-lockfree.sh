#!/usr/bin/env bash
# `make bench-lockfree`: the EL2 fault path without the VM's lock (the
# el2-dirty posting's last patch, its RFC) against the locked step it goes
# on top of (patch 18), on the same tree, in counts.
#
# Two kernels of the production config (nodebug): the series as it stands,
# and 'nodebug-locked', the same tree with bench/lockfree/locked-fault-path.patch
# (__pkvm_guest_relax_marked() under the VM's lock, an exclusive walk: the
# locked step's fault; nothing else differs). The patch is applied to
# the tree only for that build and taken out again, whatever happens
# (scripts/build-patched-kernel.sh).
#
# Then make bench-counts' counts boots (elcount plugin, fast path only,
# COUNTS_VCPUS at 1 and 2 vCPUs, LOCKFREE_REPS pairs of -i 2 / -i 4 runs per
# cell), one boot per kernel and pKVM mode, the boots in a seeded order, and
# scripts/lockfree-report.py: EL2 instructions per dirtied page of each
# kernel, their difference, and the same with the world switches to the host
# (timer ticks, whose rate follows TCG's wall time) factored out.
#
# Results in bench/lockfree/<date>/: results.md, one bench-counts folder
# per boot (<kernel>-<mode>/).
#   LOCKFREE_MODES  pKVM modes (default: protected protected-nvhe)
#   LOCKFREE_REPS   pairs of runs per cell (default 4)
#   LOCKFREE_VCPUS  vCPU counts (default "1 2")
#   LOCKFREE_SEED   order seed (default: the time)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

MODES=${LOCKFREE_MODES:-"protected protected-nvhe"}
REPS=${LOCKFREE_REPS:-4}
VCPUS=${LOCKFREE_VCPUS:-"1 2"}
SEED=${LOCKFREE_SEED:-$(date +%s)}
PATCH=$TOP/bench/lockfree/locked-fault-path.patch

case "$REPS" in ''|*[!0-9]*|0) die "LOCKFREE_REPS must be a positive count, not '$REPS'" ;; esac
for m in $MODES; do
	case "$m" in protected|protected-nvhe) ;; *) die "LOCKFREE_MODES: '$m' is not a pKVM mode" ;; esac
done
for v in $VCPUS; do case "$v" in 1|2) ;; *) die "LOCKFREE_VCPUS: '$v' is not 1 or 2" ;; esac; done
[ -f "$PATCH" ] || die "no $PATCH"

# The locked kernel: nodebug's objects rebuilt with the patch.
"$TOP/scripts/build-patched-kernel.sh" nodebug nodebug-locked "$PATCH"

stamp=$(date -u +%Y-%m-%d-%H%M)
out=$TOP/bench/lockfree/$stamp
mkdir -p "$out"
start=$(date +%s)
for mode in $MODES; do for k in nodebug nodebug-locked; do echo "$k:$mode"; done; done |
	seeded_shuffle "$SEED-lockfree" > "$out/order.txt"
while IFS=: read -r k mode; do
	echo "== $k $mode ($(date -u +%H:%M:%S))"
	COUNTS_OUT=$out/$k-$mode COUNTS_MODES=$mode COUNTS_VARIANT=$k COUNTS_REPS=$REPS \
		COUNTS_VCPUS="$VCPUS" COUNTS_FAST=1 COUNTS_TIME=0 COUNTS_LOCK=0 \
		COUNTS_SEED="$SEED-$k" "$TOP/scripts/bench-counts.sh"
done < "$out/order.txt"
{
	echo "date: $stamp (UTC); took $(( ($(date +%s) - start) / 60 )) min"
	echo "machine: $(nproc) host cores, $(uname -m), QEMU $(qemu-system-aarch64 --version | head -1 | awk '{print $4}') TCG; guest (L1) -smp ${SMP:-2}"
	echo "kernels: nodebug ($(git -C "$TREE" describe --always) on base $(git -C "$TREE" rev-parse --short base)) and nodebug-locked (the same with bench/lockfree/locked-fault-path.patch)"
	echo "seed: $SEED"
	echo "command: make bench-lockfree LOCKFREE_MODES=\"$MODES\" LOCKFREE_REPS=$REPS LOCKFREE_VCPUS=\"$VCPUS\" LOCKFREE_SEED=$SEED"
} > "$out/README.txt"
/usr/bin/python3 "$TOP/scripts/lockfree-report.py" "$out"
echo "bench-lockfree: results in $out ($(( ($(date +%s) - start) / 60 )) min)"
