#!/usr/bin/env bash
# fuzz.sh [steps] [runs]: the random sequence test (pkvm_split_fuzz_test),
# long: <runs> fresh seeds (default 4) of <steps> steps each (default
# 2000) in each protected mode, one boot per mode, seeds from /dev/urandom
# and printed. Results go to bench/fuzz/<date>/: the serial logs and
# summary.txt (seed, steps, verdict per run); a failing seed is replayed
# with `pkvm_split_fuzz_test -z <steps> -s <seed>`, and becomes a
# regression seed in selftests/matrix.list.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

steps=${1:-2000}
runs=${2:-4}
case "$steps" in ''|*[!0-9]*|0) die "steps must be a positive count, not '$steps'" ;; esac
case "$runs" in ''|*[!0-9]*|0) die "runs must be a positive count, not '$runs'" ;; esac
jobs=${FUZZ_JOBS:-1}
case "$jobs" in 1|2) ;; *) die "FUZZ_JOBS must be 1 or 2 (boots at once), not '$jobs'" ;; esac
# Under TCG (QEMU 10, 2 host cores) a step takes about 0.5 s (a guest pass,
# a check of every word, an EL2 walk, a burst of raw calls checked by the
# kernel, a protected VM run for 100 ms): allow 1 s per step, and the boot.
# With both modes booted at once (FUZZ_JOBS=2) a step took 0.76-1.07 s:
# allow 2 s per step then.
per_run=$(( steps * jobs + 120 ))
out=$TOP/bench/fuzz/$(date -u +%Y-%m-%d-%H%M)
mkdir -p "$out"
list=$BUILD/fuzz.list
: > "$list"
for mode in protected protected-nvhe; do
	for i in $(seq 1 "$runs"); do
		seed=0x$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
		echo "$mode fuzz_$i $per_run ./pkvm_split_fuzz_test -z $steps -s $seed" >> "$list"
	done
done
cp "$list" "$out/fuzz.list"
echo "kernel: default, $(git -C "$TREE" describe --always) on base $(git -C "$TREE" rev-parse --short base)" > "$out/kernel.txt"
MATRIX=$list INITRAMFS_OUT=$BUILD/fuzz-initramfs.cpio "$TOP/scripts/mk-initramfs.sh" >/dev/null ||
	die "mk-initramfs failed"

summary=$out/summary.txt
: > "$summary"
rc=0
boot_mode() {
	INITRD=$BUILD/fuzz-initramfs.cpio "$TOP/scripts/boot.sh" "$1" default \
		> "$out/$1.results" 2>&1
}
# FUZZ_JOBS=2 boots both modes at once: the sequence test mostly runs one
# vCPU, so each boot keeps about one host CPU busy; together they make
# about 1.2x the steps per minute of one boot at a time.
if [ "$jobs" = 2 ]; then
	boot_mode protected & p1=$!
	boot_mode protected-nvhe & p2=$!
	wait $p1 || rc=1
	wait $p2 || rc=1
else
	boot_mode protected || rc=1
	boot_mode protected-nvhe || rc=1
fi
echo "fuzz: FUZZ_JOBS=$jobs on $(nproc) host CPUs" >> "$summary"
for mode in protected protected-nvhe; do
	log=$out/$mode.log
	cp "$BUILD/logs/default-$mode-$mode.log" "$log"
	grep -E '^# random sequence: ' "$log" | sed "s/^# /$mode: /" >> "$summary"
	grep -E '^(PASS|FAIL|SKIP) ' "$out/$mode.results" | sed "s/^/$mode: /" >> "$summary"
done
# Every planned run is a pass or a failure: a run passed only if boot.sh
# reported it passed (its sequence ran to its end, the boot's serial log
# clean); a crash, a timeout or a boot that died fails every run it took.
planned=$((2 * runs))
passed=0
for mode in protected protected-nvhe; do
	clean=1
	grep -qE "^FAIL $mode (boot|serial-log|test-run|mode-line)" "$out/$mode.results" && clean=0
	for i in $(seq 1 "$runs"); do
		if [ $clean = 1 ] && grep -qE "^PASS $mode fuzz_$i\$" "$out/$mode.results"; then
			passed=$((passed + 1))
		else
			echo "$mode: fuzz_$i counted as FAILED: $(grep -E "^(FAIL|SKIP) $mode (fuzz_$i|boot|serial-log|test-run)" "$out/$mode.results" | head -3 | tr '\n' ' ')" >> "$summary"
			rc=1
		fi
	done
done
failed=$((planned - passed))
echo "fuzz: $passed sequences of $steps steps passed, $failed failed ($planned seeds); see $summary" |
	tee -a "$summary"
# The README's record of the longest run comes from the committed summaries.
python3 "$TOP/scripts/fuzz-report.py" "$TOP/bench/fuzz" --readme "$TOP/docs/details.md" >/dev/null ||
	echo "fuzz: README not updated (scripts/fuzz-report.py failed)" >&2
exit $rc
