#!/usr/bin/env bash
# `make bench-el2pc`: where a dirtied page's EL2 instructions go, by hyp
# function, for kernels compared in `make bench-lockfree` (issue 41: the
# lock-free step's 1-vCPU cost against step one).
#
# One boot per kernel and pKVM mode with the elcount plugin's el2pc=on
# (scripts/elcount/README.md): every marker prints the EL2 instructions run
# so far by TB start address. The runs are make bench-counts' (fast path on,
# dirty_log_perf_test on 2 MiB hugetlb, 1 vCPU, 8192 pages an iteration),
# EL2PC_REPS pairs of -i 2 and -i 4, each between two markers; the pair's
# difference over 16384 pages is per dirtied page. scripts/el2pc-report.py
# maps addresses to the kernel's __kvm_nvhe_ symbols (the hyp VA offset is
# found by the TBs that start on a function) and writes report.md.
#
#   EL2PC_KERNELS  kernel variants, built already (default: nodebug
#                  nodebug-locked, as make bench-lockfree leaves them)
#   EL2PC_MODES    pKVM modes (default: protected protected-nvhe)
#   EL2PC_REPS     pairs per boot (default 2)
#   EL2PC_VCPUS    vCPUs (default 1)
#   EL2PC_OUT      results folder (default bench/el2pc/<date>/)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KERNELS=${EL2PC_KERNELS:-"nodebug nodebug-locked"}
MODES=${EL2PC_MODES:-"protected protected-nvhe"}
REPS=${EL2PC_REPS:-2}
VCPUS=${EL2PC_VCPUS:-1}
ARGS="-s anonymous_hugetlb_2mb -b 32M -m 3 -k 2M"

case "$REPS" in ''|*[!0-9]*|0) die "EL2PC_REPS must be a positive count, not '$REPS'" ;; esac
case "$VCPUS" in 1|2) ;; *) die "EL2PC_VCPUS must be 1 or 2, not '$VCPUS'" ;; esac
for m in $MODES; do
	case "$m" in protected|protected-nvhe) ;; *) die "EL2PC_MODES: '$m' is not a pKVM mode" ;; esac
done
for k in $KERNELS; do
	[ -f "$BUILD/obj/$k/vmlinux" ] || die "no '$k' kernel ($BUILD/obj/$k/vmlinux): make bench-lockfree builds nodebug-locked"
done
"$TOP/scripts/build-plugin.sh" --check >&2 || die "the elcount plugin failed its self-test"
PLUGIN=$BUILD/plugin/libelcount.so

stamp=$(date -u +%Y-%m-%d-%H%M)
out=${EL2PC_OUT:-$TOP/bench/el2pc/$stamp}
mkdir -p "$out"
out=$(realpath "$out")
list=$BUILD/el2pc.list
k=0
: > "$list"
for rep in $(seq 1 "$REPS"); do
	for it in 2 4; do
		echo "all m${k}a 60 ./elmark $((2 * k))"
		echo "all r${k}_v${VCPUS}_${rep}_i${it} 600 ./dirty_log_perf_test $ARGS -v $VCPUS -i $it"
		echo "all m${k}b 60 ./elmark $((2 * k + 1))"
		k=$((k + 1))
	done
done >> "$list"
cp "$list" "$out/runs.list"
MATRIX=$list LIST_PREFIX=el2pc- INITRAMFS_OUT=$BUILD/el2pc-initramfs.cpio \
	"$TOP/scripts/mk-initramfs.sh" >/dev/null || die "mk-initramfs failed"
start=$(date +%s)
for mode in $MODES; do
	for kern in $KERNELS; do
		echo "== $kern $mode ($(date -u +%H:%M:%S))"
		rc=0
		INITRD=$BUILD/el2pc-initramfs.cpio BOOT_TIMEOUT=2400 \
			QEMU_EXTRA="-plugin $PLUGIN,el2pc=on -d plugin" \
			"$TOP/scripts/boot.sh" "$mode" "$kern" "el2pc-$mode" > "$out/$kern-$mode.results" 2>&1 || rc=$?
		grep -E '^FAIL' "$out/$kern-$mode.results" || true
		[ $rc -eq 0 ] || die "boot $kern $mode ended with status $rc"
		# The el2pc lines only (the serial log is kept in build/logs).
		grep -E '^elcount: (mark|el2pc) ' "$BUILD/logs/$kern-$mode-el2pc-$mode.log" | gzip -9 > "$out/$kern-$mode.el2pc.gz"
		"${CROSS}nm" "$BUILD/obj/$kern/vmlinux" | grep ' __kvm_nvhe_' | gzip -9 > "$out/$kern.nm.gz"
	done
done
{
	echo "date: $stamp (UTC); took $(( ($(date +%s) - start) / 60 )) min"
	echo "kernels: $KERNELS (tree $(git -C "$TREE" describe --always)); modes: $MODES; $REPS pairs of -i 2/-i 4 at $VCPUS vCPU(s)"
	for kern in $KERNELS; do
		echo "kernel $kern: $(strings "$BUILD/obj/$kern/vmlinux" | grep -m1 '^Linux version' | cut -c1-120)"
	done
	echo "command: make bench-el2pc EL2PC_KERNELS=\"$KERNELS\" EL2PC_MODES=\"$MODES\" EL2PC_REPS=$REPS EL2PC_VCPUS=$VCPUS"
} > "$out/README.txt"
/usr/bin/python3 "$TOP/scripts/el2pc-report.py" "$out"
echo "bench-el2pc: results in $out"
