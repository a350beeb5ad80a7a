#!/usr/bin/env bash
# `make run`: boot pKVM (protected mode, hVHE) once and show, in a few lines,
# that a non-protected guest backed by 2 MiB pages runs under dirty logging
# with its blocks split by EL2. Full serial log: $BUILD/logs/default-protected-demo.log
set -uo pipefail
. "$(dirname "$0")/lib.sh"

echo "Booting pKVM under QEMU (TCG) ..."
out=$("$TOP/scripts/boot.sh" protected default demo)
rc=$?
log=$BUILD/logs/default-protected-demo.log
echo
grep -m1 -oE 'kvm \[[0-9]+\]: Protected .* mode initialized successfully' "$log" || echo "(no pKVM init line!)"
grep -E '^# (host pKVM|enable-time|clear-time)|blocks split by|KVM_CLEAR_DIRTY_LOG of one' "$log" | sed 's/^# /  /'
for t in demo_perf_split demo_perf_nosplit; do
	it=$(sed -n "/# start $t/,/^ok\|^not ok/p" "$log" | grep -m1 'Iteration 2 dirty memory time' | sed 's/.*: //')
	en=$(sed -n "/# start $t/,/^ok\|^not ok/p" "$log" | grep -m1 'Enabling dirty logging time' | sed 's/.*: //')
	echo "  $t: enabling dirty logging ${en:-?}, iteration 2 dirty memory time ${it:-?} (64 MiB, 1 vCPU, TCG)"
done
echo
echo "$out" | sed 's/^/  /'
[ "$rc" -eq 0 ] && echo "make run: pKVM eager split works (log: $log)" || echo "make run: FAILED (log: $log)"
exit "$rc"
