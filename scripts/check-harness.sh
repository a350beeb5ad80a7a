#!/usr/bin/env bash
# Host-side check (run by `make test`): the harness counts every way a run
# can go wrong as a failure. Each case breaks a run on purpose and checks
# what boot.sh, mk-initramfs.sh and the serial-log pattern make of it:
#   - no kernel image, no initramfs, an unknown mode: FAIL boot, and every
#     planned test "not run";
#   - a list line with a typo'd mode or no timeout: mk-initramfs refuses it;
#   - one boot of misbehaving tests (selftests/harness.list): a failing
#     test (and the last lines it printed, under its FAIL), an unexpected
#     skip, an expected skip (selftests/expected-skips.list), a passing
#     test that skipped a part of itself (unexpected, expected), a test past
#     its timeout, a hung-task report in the kernel log, and hyp-expect
#     with EL2 short of el2_dirtied or given a bad size;
#   - a boot killed at its time limit, one killed for going silent longer
#     than BOOT_SILENCE (a hung kernel), a kernel whose init dies at
#     once (panic), and one that panics and never resets (panic=0): FAIL
#     boot, and the planned tests not run;
#   - an init whose own count of passed, failed and skipped tests is not
#     what its result lines say (pkvm.harness_miscount=1): FAIL test-run;
#   - the serial-log pattern against a sample of each report it must catch
#     and of boot lines it must not.
# HARNESS_RECORD=<dir> keeps every case's output there (bench/harness/).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

mode=${HARNESS_MODE:-protected}
work=$BUILD/harness
rm -rf "$work"
mkdir -p "$work"
rec=${HARNESS_RECORD:-}
[ -z "$rec" ] || mkdir -p "$rec"
bad=0
nr=0

# expect <case> <rc: 0|nonzero> <file> <line regex>...: each regex must
# match exactly one line of the file.
expect() {
	local c=$1 want=$2 f=$3 re n
	shift 3
	nr=$((nr + 1))
	[ -z "$rec" ] || { echo "== $c (status $(cat "$f.rc"))"; cat "$f"; echo; } >> "$rec/transcript.txt"
	case "$want:$(cat "$f.rc")" in
	0:0|nonzero:[1-9]*) ;;
	*) echo "check-harness: $c: exit status $(cat "$f.rc"), expected $want"; bad=1 ;;
	esac
	for re in "$@"; do
		n=$(grep -cE -- "$re" "$f")
		[ "$n" = 1 ] || { echo "check-harness: $c: $n lines match '$re', expected 1:"; sed 's/^/    /' "$f"; bad=1; }
	done
}
run() { local f=$1; shift; "$@" > "$f" 2>&1; echo $? > "$f.rc"; }

# Two initramfs images with the probe lists (lists named harness-<mode>
# and hang-<mode>); the main initramfs is left alone.
LIST_PREFIX=harness- MATRIX=$TOP/selftests/harness.list INITRAMFS_OUT=$work/harness.cpio \
	"$TOP/scripts/mk-initramfs.sh" > "$work/mk1.log" 2>&1 || die "mk-initramfs (harness.list) failed: $(tail -3 "$work/mk1.log")"
LIST_PREFIX=hang- MATRIX=$TOP/selftests/harness-hang.list INITRAMFS_OUT=$work/hang.cpio \
	"$TOP/scripts/mk-initramfs.sh" > "$work/mk2.log" 2>&1 || die "mk-initramfs (harness-hang.list) failed: $(tail -3 "$work/mk2.log")"
LIST_PREFIX=count- MATRIX=$TOP/selftests/harness-count.list INITRAMFS_OUT=$work/count.cpio \
	"$TOP/scripts/mk-initramfs.sh" > "$work/mk3.log" 2>&1 || die "mk-initramfs (harness-count.list) failed: $(tail -3 "$work/mk3.log")"
H=harness-$mode
G=hang-$mode

# A boot that cannot start.
INITRD=$work/harness.cpio run "$work/no-image" "$TOP/scripts/boot.sh" "$mode" no-such-variant "$H"
expect "no kernel image" nonzero "$work/no-image" "^FAIL $mode boot no kernel image" \
	"^FAIL $mode probe_pass not run" "^FAIL $mode probe_hung_task not run"
[ "$(grep -c '^FAIL' "$work/no-image")" = 11 ] || { echo "check-harness: no image: not 11 FAIL lines"; bad=1; }
INITRD=$work/no-such.cpio run "$work/no-initrd" "$TOP/scripts/boot.sh" "$mode" default "$H"
expect "no initramfs" nonzero "$work/no-initrd" "^FAIL $mode boot no initramfs"
INITRD=$work/harness.cpio run "$work/bad-mode" "$TOP/scripts/boot.sh" protectd default "$H"
expect "unknown mode" nonzero "$work/bad-mode" "^FAIL protectd boot unknown mode" \
	"^FAIL protectd probe_timeout not run"
INITRD=$work/harness.cpio run "$work/no-list" "$TOP/scripts/boot.sh" "$mode" default no-such-list
expect "no such list" nonzero "$work/no-list" "^FAIL $mode boot the initramfs .* has no test list"

# Lines that would silently drop out of a list.
printf 'protectd  t1 30 ./probe exit 0\n' > "$work/typo.list"
MATRIX=$work/typo.list INITRAMFS_OUT=$work/typo.cpio run "$work/typo" "$TOP/scripts/mk-initramfs.sh"
expect "list line with a typo'd mode" nonzero "$work/typo" "unknown mode 'protectd'"
printf 'all  t1 ./probe exit 0\n' > "$work/notime.list"
MATRIX=$work/notime.list INITRAMFS_OUT=$work/notime.cpio run "$work/notime" "$TOP/scripts/mk-initramfs.sh"
expect "list line without a timeout" nonzero "$work/notime" "needs a timeout"

# One boot of misbehaving tests.
INITRD=$work/harness.cpio run "$work/probes" "$TOP/scripts/boot.sh" "$mode" default "$H"
expect "misbehaving tests" nonzero "$work/probes" \
	"^PASS $mode mode-line" "^PASS $mode probe_pass\$" "^FAIL $mode probe_fail exit status 1" \
	"^    \| # probe: the reason this test failed\$" \
	"^FAIL $mode probe_skip skipped, and .* does not expect it" \
	"^SKIP $mode probe_skip_expected expected: " \
	"^FAIL $mode probe_part_skip passed but skipped a part, and .* does not expect it: SKIP a part" \
	"^PASS $mode probe_part_skip_expected skipped a part, expected: " \
	"^FAIL $mode probe_el2_short exit status 1" \
	"^    \| # hyp-expect: expected the faults resolved at EL2 to cover at least 1024 MiB" \
	"^FAIL $mode probe_el2_badarg exit status 1" \
	"^FAIL $mode probe_timeout timeout after 5s" "^PASS $mode probe_hung_task\$" \
	"^FAIL $mode serial-log forbidden lines" "INFO: task probe:77 blocked for more than"
grep -q "^FAIL $mode test-run" "$work/probes" && { echo "check-harness: misbehaving tests: the list did not run to its end"; bad=1; }

# A boot killed at its limit, and an init that dies at once.
BOOT_TIMEOUT=${HARNESS_HANG_TIMEOUT:-30} INITRD=$work/hang.cpio run "$work/hang" "$TOP/scripts/boot.sh" "$mode" default "$G"
expect "a boot that hangs" nonzero "$work/hang" "^FAIL $mode boot QEMU hung: killed after" \
	"^FAIL $mode probe_sleep not run" "^FAIL $mode probe_after not run" "^FAIL $mode test-run"
BOOT_SILENCE=40 INITRD=$work/hang.cpio run "$work/silent" "$TOP/scripts/boot.sh" "$mode" default "$G"
expect "a boot that goes silent (hung kernel)" nonzero "$work/silent" "^FAIL $mode boot no serial output for 40s" \
	"^FAIL $mode probe_sleep not run" "^FAIL $mode probe_after not run" "^FAIL $mode test-run"
EXTRA_CMDLINE="rdinit=/tests/bin/probe" INITRD=$work/hang.cpio run "$work/panic" "$TOP/scripts/boot.sh" "$mode" default "$G"
expect "an init that dies (kernel panic)" nonzero "$work/panic" "^FAIL $mode serial-log forbidden lines" \
	"Kernel panic" "^FAIL $mode probe_sleep not run" "^FAIL $mode probe_after not run" "^FAIL $mode test-run"

# A kernel that panics and never resets (panic=0: as after a hyp panic,
# whose reboot through EL2 may never come): killed 30 s after the panic.
EXTRA_CMDLINE="rdinit=/tests/bin/probe panic=0" INITRD=$work/hang.cpio run "$work/panic-hang" "$TOP/scripts/boot.sh" "$mode" default "$G"
expect "a kernel that panics and hangs" nonzero "$work/panic-hang" \
	"^FAIL $mode boot the kernel panicked and QEMU did not exit" \
	"^FAIL $mode probe_sleep not run" "^FAIL $mode probe_after not run" "^FAIL $mode test-run"

# init's count against the result lines (the probes' boot above agreed).
EXTRA_CMDLINE="pkvm.harness_miscount=1" INITRD=$work/count.cpio run "$work/miscount" "$TOP/scripts/boot.sh" "$mode" default "count-$mode"
expect "an init that miscounts" nonzero "$work/miscount" "^PASS $mode probe_pass\$" \
	"^FAIL $mode test-run init counted 2 passed, 0 failed, 0 skipped, the harness read 1 passed, 0 failed, 0 skipped"

# The serial-log pattern: each report must match, each benign line must not.
nr=$((nr + 1))
while IFS= read -r l; do
	[ -n "$l" ] || continue
	echo "$l" | grep -qE "$SERIAL_BAD_RE" || { echo "check-harness: serial-log pattern misses: $l"; bad=1; }
done <<'EOF'
[  242.1] INFO: task kworker/0:1:12 blocked for more than 120 seconds.
[  242.1] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
[  242.1] rcu: INFO: rcu_preempt self-detected stall on CPU
[  242.1] Watchdog detected hard LOCKUP on cpu 1
[  242.1] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]
[  242.1] BUG: KASAN: slab-out-of-bounds in pkvm_drain_dirty_buf+0x40/0x100
[  242.1] UBSAN: shift-out-of-bounds in arch/arm64/kvm/pkvm.c:100:2
[  242.1] WARNING: possible circular locking dependency detected
[  242.1] WARNING: possible recursive locking detected
[  242.1] WARNING: inconsistent lock state
[  242.1] WARNING: suspicious RCU usage
[  242.1] BUG: sleeping function called from invalid context at mm/page_alloc.c:4000
[  242.1] list_add corruption. prev->next should be next (ffff000012345678)
[  242.1] ------------[ cut here ]------------ WARNING: CPU: 1 PID: 77 at arch/arm64/kvm/pkvm.c:1 x+0x0/0x4
[  242.1] kvm [1]: nVHE hyp panic at: [<ffff80008000>] __kvm_nvhe_x+0x0/0x4!
[  242.1] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000000
[  242.1] Unable to handle kernel paging request at virtual address 0000000000000008
[  242.1] vmstat_refresh: nr_page_table_pages -8
# ==== Test Assertion Failure ====
EOF
while IFS= read -r l; do
	[ -n "$l" ] || continue
	echo "$l" | grep -qE "$SERIAL_BAD_RE" && { echo "check-harness: serial-log pattern flags a benign line: $l"; bad=1; }
done <<'EOF'
[    0.0] rcu: 	RCU CPU stall warnings timeout set to 100 (rcu_task_stall_timeout).
[    0.1] kvm [1]: Protected hVHE mode initialized successfully
[    0.1] hung_task: detector enabled
# ok 1 vm0
EOF

[ -z "$rec" ] || cp "$BUILD/logs/default-$mode-$H.log" "$BUILD/logs/default-$mode-$G.log" "$rec/" 2>/dev/null
if [ $bad -ne 0 ]; then
	echo "check-harness: the harness let a broken run through (outputs in $work)"
	exit 1
fi
echo "check-harness: $nr broken runs and pattern checks, each counted as it must be"
