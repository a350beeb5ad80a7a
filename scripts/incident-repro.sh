#!/usr/bin/env bash
# incident-repro.sh [runs] [mode]: boot <mode> (default vhe) twice, running
# kvm_page_table_test (2 vCPUs, hugetlb, every guest mode: one VM created
# and destroyed per guest mode) <runs> times (default 30) per boot: once
# with init holding an idle VM open for the boot (preempt_notifier_key
# never patched), once without (pkvm.hold_vm=0, the key patched at every
# VM create/destroy). Counts, per boot, the runs that failed and the
# KVM_BUG/WARNING lines. Logs go to bench/incidents/repro-<date>/.
# See bench/incidents/README.md for the incident and the hypothesis.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

runs=${1:-30}
mode=${2:-vhe}
case "$runs" in ''|*[!0-9]*|0) die "runs must be a positive count" ;; esac
case "$mode" in protected|protected-nvhe|nvhe|vhe) ;; *) die "unknown mode '$mode'" ;; esac
out=$TOP/bench/incidents/repro-$(date -u +%Y-%m-%d-%H%M)
mkdir -p "$out"
list=$BUILD/repro.list
: > "$list"
for i in $(seq 1 "$runs"); do
	echo "$mode kpt_$i 120 ./kvm_page_table_test -b 32M -v 2 -s anonymous_hugetlb_2mb" >> "$list"
done
MATRIX=$list INITRAMFS_OUT=$BUILD/repro-initramfs.cpio "$TOP/scripts/mk-initramfs.sh" >/dev/null

summary=$out/summary.txt
: > "$summary"
for hold in 0 1; do
	EXTRA_CMDLINE="pkvm.hold_vm=$hold" INITRD=$BUILD/repro-initramfs.cpio \
		"$TOP/scripts/boot.sh" "$mode" default "$mode" > "$out/hold$hold.results" 2>&1
	log=$out/hold$hold.log
	cp "$BUILD/logs/default-$mode-$mode.log" "$log"
	printf '%s hold_vm=%s: %s of %s runs failed, %s KVM_BUG/WARNING lines; init: %s\n' \
		"$mode" "$hold" "$(grep -c '^not ok' "$log")" "$runs" \
		"$(grep -cE 'KVM_BUG|WARNING:' "$log")" \
		"$(grep -m1 '^# init: ' "$log" | sed 's/^# init: //')" | tee -a "$summary"
done
