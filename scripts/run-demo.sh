#!/usr/bin/env bash
# `make run`: boot pKVM (protected mode, hVHE) once and show, in a few lines,
# that a non-protected guest backed by 2 MiB pages runs under dirty logging
# with its blocks split by EL2, and that EL2 resolves the write faults that
# dirty logging leaves. Full serial log: $BUILD/logs/default-protected-demo.log
set -uo pipefail
. "$(dirname "$0")/lib.sh"

log=$BUILD/logs/default-protected-demo.log
mkdir -p "$BUILD/logs"
: > "$log"
echo "Booting pKVM under QEMU (TCG); progress from the serial log:"
"$TOP/scripts/boot.sh" protected default demo > "$BUILD/demo-results.txt" &
boot=$!
# Stream what the guest is doing while it boots and runs; tail stops
# within a second of the boot.
tail -n +1 -F --pid="$boot" "$log" 2>/dev/null | grep --line-buffered -aE \
	'Protected .* mode initialized|^# start |^(not )?ok [0-9]+ ' | sed -u 's/^/  | /' &
tailer=$!
wait "$boot"
rc=$?
wait "$tailer" 2>/dev/null
echo
grep -aE '^# (host pKVM|enable-time|clear-time)|blocks split by|KVM_CLEAR_DIRTY_LOG of one|faults resolved at EL2|restored in place' "$log" |
	head -14 | sed 's/^# /  /'

it2() { sed -n "/# start $1\$/,/^ok\|^not ok/p" "$log" | sed -n 's/^# Iteration 2 dirty memory time: \([0-9.]*\)s$/\1/p' | head -1; }
faults() { sed -n "/# start $1\$/,/^ok\|^not ok/p" "$log" | sed -n 's/^# Iteration 2 faults resolved by the host: \([0-9]*\), at EL2: \([0-9]*\),.*/host \1, EL2 \2/p' | head -1; }
echo
echo "  dirty_log_perf_test -w 10 (10% of pages written per pass), manual-protect, 64 MiB, 1 vCPU, TCG:"
for t in demo_w10_nosplit demo_w10_hostpath demo_w10_split; do
	case $t in
	demo_w10_nosplit) what="no eager split           " ;;
	demo_w10_hostpath) what="eager split, host path   " ;;
	demo_w10_split) what="eager split + EL2 faults " ;;
	esac
	echo "    $what iteration 2: $(it2 $t)s, faults: $(faults $t)"
done
off() {
	sed -n "/# start $1\$/,/^ok\|^not ok/p" "$log" | awk '
		/Disabling dirty logging time/ { d = $NF }
		/Logging off: iteration/ { r = $NF; getline; f = $NF }
		/pKVM collapse:/ { c = ", blocks restored in place at EL2: " $7 " by " $5 " hypercalls" }
		END { if (r != "") print "logging off " d ", next pass " r ", faults " f c }'
}
a=$(it2 demo_w10_nosplit); b=$(it2 demo_w10_hostpath); c=$(it2 demo_w10_split)
if [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ]; then
	python3 -c "print(f'    speed-up: eager split {$a/$b:.1f}x; EL2 fast path on top {$b/$c:.1f}x; together {$a/$c:.1f}x')"
fi
echo "  then dirty logging turned off, and one more pass over every page (10% written):"
echo "    no eager split            $(off demo_w10_nosplit)"
echo "    eager split + EL2 faults  $(off demo_w10_split)"
echo
sed 's/^/  /' "$BUILD/demo-results.txt"
[ "$rc" -eq 0 ] && echo "make run: pKVM eager split and EL2 dirty faults work (log: $log)" || echo "make run: FAILED (log: $log)"
exit "$rc"
