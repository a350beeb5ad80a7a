#!/usr/bin/env bash
# boot.sh <mode> [variant] [list]: boot the test kernel under QEMU in one host
# mode, run the mode's test list from the initramfs, and check the serial log.
# Prints one line per result ("PASS|FAIL|SKIP <mode> <test> [why]") on stdout
# and exits non-zero if anything failed.
#   modes: protected (pKVM, hVHE under -cpu max), protected-nvhe, nvhe, vhe
set -uo pipefail
. "$(dirname "$0")/lib.sh"
QEMU=${QEMU:-qemu-system-aarch64}
need "$QEMU" timeout

mode=${1:?mode}
variant=${2:-default}
list=${3:-$mode}
image=$BUILD/obj/$variant/arch/arm64/boot/Image
initrd=${INITRD:-$BUILD/initramfs.cpio}
logdir=$BUILD/logs
mkdir -p "$logdir"
log=$logdir/$variant-$mode-$list.log
[ -f "$image" ] || die "no kernel image at $image (make kernel)"
[ -f "$initrd" ] || die "no initramfs at $initrd (make initramfs)"

case "$mode" in
protected)	args="kvm-arm.mode=protected"; expect="Protected hVHE mode initialized successfully" ;;
protected-nvhe)	args="kvm-arm.mode=protected arm64_sw.hvhe=0 id_aa64mmfr1.vh=0"; expect="Protected nVHE mode initialized successfully" ;;
nvhe)		args="kvm-arm.mode=nvhe"; expect="Hyp nVHE mode initialized successfully" ;;
vhe)		args=""; expect="VHE mode initialized successfully" ;;
*) die "unknown mode '$mode' (protected, protected-nvhe, nvhe, vhe)" ;;
esac

# Hugepage reservation follows the granule: 2 MiB blocks with 4K pages,
# 32 MiB with 16K, 512 MiB with 64K.
case "$variant" in
*64k*)	hp="hugepagesz=512M hugepages=6"; MEM=${MEM:-6G} ;;
*16k*)	hp="hugepagesz=32M hugepages=24" ;;
*)	hp="hugepagesz=2M hugepages=${HUGEPAGES:-400}" ;;
esac

# "nolpa2" kernels run on a CPU without FEAT_LPA2, so that KVM's stage-2
# does not use it either: the 7.2 fallback's way to boot 16K pKVM (16K with
# LPA2 stalls at pKVM init under QEMU 7.2, base included, not under 10:
# bench/incidents/README.md).
cpu=${CPU:-"max,pauth-impdef=on"}
case "$variant" in
*nolpa2*) cpu="$cpu,lpa2=off" ;;
esac

# Per-boot limit: the list's timeouts plus boot slack.
tl=$(awk '{s += $2} END {print s + 0}' "$BUILD/initramfs/tests/$list.list" 2>/dev/null || echo 600)
limit=${BOOT_TIMEOUT:-$((tl + 120))}

start=$(date +%s)
timeout --foreground -k 10 "$limit" "$QEMU" \
	-M virt,virtualization=on,gic-version=3 -cpu "$cpu" \
	-smp "${SMP:-2}" -m "${MEM:-2G}" -nographic -no-reboot -nic none \
	-kernel "$image" -initrd "$initrd" ${QEMU_EXTRA:-} \
	-append "console=ttyAMA0 panic=-1 $hp $args pkvm.tests=$list ${EXTRA_CMDLINE:-}" \
	> "$log" 2>&1 < /dev/null
qrc=$?
secs=$(( $(date +%s) - start ))
{ echo "# host: $("$QEMU" --version | head -1)"; tr -d '\r' < "$log"; } > "$log.tmp" && mv "$log.tmp" "$log"

fail=0
result() { echo "$*"; case "$1" in FAIL) fail=1 ;; esac; }

if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
	result FAIL "$mode" boot "QEMU hung: killed after ${limit}s (log: $log)"
elif [ "$qrc" -ne 0 ]; then
	result FAIL "$mode" boot "QEMU exited with status $qrc: $(head -c 300 "$log" | tr '\n' ' ')"
fi
if grep -qE "kvm \[[0-9]+\]: $expect" "$log"; then
	result PASS "$mode" "mode-line" "$(grep -oE "kvm \[[0-9]+\]: $expect" "$log" | head -1)"
else
	result FAIL "$mode" "mode-line" "log lacks '$expect' (log: $log)"
fi

# Test results (KTAP lines printed by our init).
while read -r line; do
	case "$line" in
	"ok "*"# SKIP"*) n=${line#ok }; n=${n#* }; result SKIP "$mode" "${n%% *}" ;;
	"ok "*) n=${line#ok }; n=${n#* }; result PASS "$mode" "${n%% *}" ;;
	"not ok "*) n=${line#not ok }; n=${n#* }; result FAIL "$mode" "${n%% *}" "${n#* # } (log: $log)" ;;
	esac
done < <(grep -aE '^(not )?ok [0-9]+ ' "$log")
want=$(grep -aoE '^1\.\.[0-9]+' "$log" | head -1 | cut -c4-)
got=$(grep -acE '^(not )?ok [0-9]+ ' "$log")
grep -aq "# pkvm-init: done" "$log" && [ -n "$want" ] && [ "$want" = "$got" ] ||
	result FAIL "$mode" "test-run" "init did not finish its list (planned ${want:-?}, reported $got; log: $log)"

# Any kernel or hypervisor complaint fails the boot.
bad=$(grep -anE 'vmstat_refresh: nr_|WARNING:|\bBUG\b|Oops|Kernel panic|hyp panic|HYP panic|Test Assertion Failure|Unable to handle kernel' "$log" | head -20)
if [ -n "$bad" ]; then
	result FAIL "$mode" "serial-log" "forbidden lines in $log:"
	echo "$bad" | sed 's/^/    /'
else
	result PASS "$mode" "serial-log" "clean (${secs}s)"
fi
exit $fail
