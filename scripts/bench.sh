#!/usr/bin/env bash
# `make bench`: dirty_log_perf_test over a matrix, side by side, one boot per
# host mode, cells interleaved and repeated. Results go to
# bench/results/<date>/ (raw logs, results.csv, results.md, speedup.png).
#   BENCH_MODES   host modes (default: protected protected-nvhe nvhe vhe)
#   BENCH_MEM     guest memory per vCPU (default 32M)
#   BENCH_REPS    repetitions of each cell (default 3)
#   BENCH_VCPUS   vCPU counts (default "1 2")
set -euo pipefail
. "$(dirname "$0")/lib.sh"

MODES=${BENCH_MODES:-"protected protected-nvhe nvhe vhe"}
MEM=${BENCH_MEM:-32M}
REPS=${BENCH_REPS:-3}
VCPUS=${BENCH_VCPUS:-"1 2"}
# dirty_log_perf_test guest mode 3: 48-bit PA/VA, 4K pages (the seed's setting)
GUEST_MODE=${BENCH_GUEST_MODE:-3}
stamp=$(date -u +%Y-%m-%d-%H%M)
out=$TOP/bench/results/$stamp
mkdir -p "$out/raw"

# One cell: split (0 | 2M) x workload x vCPUs x manual-protect (mp | nomp).
list=$BUILD/bench.matrix
: > "$list"
cells=()
for v in $VCPUS; do
	for mp in mp nomp; do
		for work in w100 w10 stride; do
			for split in 0 2M; do
				cells+=("$split:$work:$v:$mp")
			done
		done
	done
done
for rep in $(seq 1 "$REPS"); do
	for c in "${cells[@]}"; do
		IFS=: read -r split work v mp <<< "$c"
		args="-s anonymous_hugetlb_2mb -b $MEM -i 3 -v $v -m $GUEST_MODE"
		case "$work" in
		w100) args+=" -w 100" ;;
		w10) args+=" -w 10" ;;
		stride) args+=" -w 100 -S 2M" ;;
		esac
		[ "$mp" = nomp ] && args+=" -g"
		[ "$split" = 2M ] && args+=" -k 2M"
		echo "all b_${split}_${work}_${v}_${mp}_r$rep 300 ./dirty_log_perf_test $args" >> "$list"
	done
done
echo "bench: ${#cells[@]} cells x $REPS repetitions per mode, modes: $MODES"

MATRIX=$list INITRAMFS_OUT=$BUILD/bench-initramfs.cpio "$TOP/scripts/mk-initramfs.sh"
for mode in $MODES; do
	echo "== $mode ($(date -u +%H:%M:%S))"
	INITRD=$BUILD/bench-initramfs.cpio BOOT_TIMEOUT=${BENCH_BOOT_TIMEOUT:-1800} \
		"$TOP/scripts/boot.sh" "$mode" default "$mode" |
		grep -v '^PASS' || true
	cp "$BUILD/logs/default-$mode-$mode.log" "$out/raw/$mode.log"
done

{
	echo "date: $stamp (UTC)"
	echo "machine: $(nproc) cores, $(uname -m), QEMU $(qemu-system-aarch64 --version | head -1 | awk '{print $4}') TCG"
	echo "kernel: $(git -C "$TREE" describe --always) on base $(git -C "$TREE" rev-parse --short base)"
	echo "command: make bench BENCH_MODES=\"$MODES\" BENCH_MEM=$MEM BENCH_REPS=$REPS BENCH_VCPUS=\"$VCPUS\""
} > "$out/README.txt"
/usr/bin/python3 "$TOP/scripts/bench-report.py" "$out"
echo "bench: results in $out"
