#!/usr/bin/env bash
# The whole test run: host-side checks, then the QEMU matrix over every host
# mode. Ends with "N passed, N failed[, N skipped]"; exits non-zero on any
# failure.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

MODES=${MODES:-"protected protected-nvhe nvhe vhe"}
results=$BUILD/test-results.txt
mkdir -p "$BUILD"
: > "$results"

record() { echo "$*" | tee -a "$results"; }
check() {
	local name=$1; shift
	local out
	if out=$("$@" 2>&1); then
		record "PASS host $name"
	else
		record "FAIL host $name"
		echo "$out" | tail -20 | sed 's/^/    /'
	fi
}

start=$(date +%s)
phase_start=$start

# The debug kernel builds in the background, at the lowest priority, while
# the host checks and the boots run: they leave about half of the 2 CPUs
# idle (single-threaded checks, a guest with one busy vCPU), and a nice 19
# build takes only what they leave. Waited for before the debug boot.
debug_pid=
if [ "${DEBUG_BOOT:-1}" != 0 ] && [[ " $MODES " == *" protected "* ]]; then
	nice -n 19 "$TOP/scripts/build-kernel.sh" debug > "$BUILD/boot-protected+debug.results.err" 2>&1 &
	debug_pid=$!
fi
# How long each phase took, for CI's 45-minute budget (README).
phase() {
	local now
	now=$(date +%s)
	echo "# phase $1 took $(( now - phase_start )) s" | tee -a "$BUILD/test-phases.txt"
	phase_start=$now
}
: > "$BUILD/test-phases.txt"
check series-applies git -C "$TREE" diff --quiet HEAD
# HOST_CHECKS=0 (make test-step1): the boots only.
for c in "$TOP"/scripts/check-*.sh; do
	[ "${HOST_CHECKS:-1}" != 0 ] || break
	[ -x "$c" ] || continue
	check "$(basename "$c" .sh)" "$c"
	phase "host-$(basename "$c" .sh)"
done

for mode in $MODES; do
	echo "== $mode"
	out=$BUILD/boot-$mode.results
	"$TOP/scripts/boot.sh" "$mode" default 2> "$out.err" | tee "$out"
	brc=${PIPESTATUS[0]}
	cat "$out" >> "$results"
	cat "$out.err" >&2
	# boot.sh prints a FAIL line for everything that goes wrong; a status
	# it did not explain (it died) is one more.
	if [ "$brc" -ne 0 ] && ! grep -q '^FAIL' "$out"; then
		record "FAIL $mode boot.sh exited with status $brc: $(tail -c 300 "$out.err" | tr '\n' ' ')"
	fi
	phase "boot-$mode"
done

# The debug kernel (Kconfig/debug.config: lockdep, atomic-sleep and list
# checks) in protected mode, on the short list of selftests/debug.list:
# about 7x slower under TCG, it cannot take the whole matrix. Its result
# lines name the mode "protected+debug". DEBUG_BOOT=0 leaves it out.
if [ "${DEBUG_BOOT:-1}" != 0 ] && [[ " $MODES " == *" protected "* ]]; then
	echo "== protected+debug"
	out=$BUILD/boot-protected+debug.results
	dinitrd=$BUILD/initramfs-debug.cpio
	: > "$out"
	if ! wait "$debug_pid"; then
		record "FAIL protected+debug build: $(tail -c 300 "$out.err" | tr '\n' ' ')"
	elif phase debug-build-wait && ! LIST_PREFIX=debug- MATRIX="$TOP/selftests/debug.list" INITRAMFS_OUT="$dinitrd" \
		"$TOP/scripts/mk-initramfs.sh" >> "$out.err" 2>&1; then
		record "FAIL protected+debug initramfs: $(tail -c 300 "$out.err" | tr '\n' ' ')"
	else
		INITRD="$dinitrd" "$TOP/scripts/boot.sh" protected debug debug-protected 2>> "$out.err" |
			sed -u 's/^\(PASS\|FAIL\|SKIP\) protected /\1 protected+debug /' | tee "$out"
		brc=${PIPESTATUS[0]}
		cat "$out" >> "$results"
		if [ "$brc" -ne 0 ] && ! grep -q '^FAIL' "$out"; then
			record "FAIL protected+debug boot.sh exited with status $brc: $(tail -c 300 "$out.err" | tr '\n' ' ')"
		fi
		phase debug-boot
	fi
fi

# Checks on what the boots printed.
case " $MODES " in
*" protected "*) check memstress-seed "$TOP/scripts/seed-log-check.sh" "$BUILD/logs/default-protected-protected.log" ;;
esac

pass=$(grep -c '^PASS' "$results")
fail=$(grep -c '^FAIL' "$results")
skip=$(grep -c '^SKIP' "$results")
echo
grep '^FAIL' "$results" | sed 's/^/  /'
echo "(matrix took $(( $(date +%s) - start ))s; serial logs in $BUILD/logs)"
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
