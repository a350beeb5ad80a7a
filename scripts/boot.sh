#!/usr/bin/env bash
# boot.sh <mode> [variant] [list]: boot the test kernel under QEMU in one host
# mode, run the list's tests from the initramfs, and check the serial log.
#   modes: protected (pKVM, hVHE under -cpu max), protected-nvhe, nvhe, vhe
#
# Prints one line per result ("PASS|FAIL|SKIP <mode> <test> [why]") on
# stdout and exits non-zero if anything failed. Every test the list plans
# (read from the initramfs itself) gets exactly one line, whatever happens
# to the boot: a test without a result is "FAIL <mode> <test> not run". A
# boot that cannot start (unknown mode, no QEMU, no Image, no initramfs, no
# such list) is "FAIL <mode> boot <why>", with every planned test not run.
# QEMU is killed at the list's timeouts summed (BOOT_TIMEOUT), or sooner
# once the serial log has been silent for the longest test timeout plus
# 180 s (BOOT_SILENCE): init ends a test at its timeout, so that is a hung
# kernel.
# A skip is a failure unless selftests/expected-skips.list (SKIPS= for
# another file) gives the mode, the test and the reason; so is a test that
# passed but printed a SKIP line (it skipped a part of itself), unless the
# list gives "<test>/part".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
QEMU=${QEMU:-qemu-system-aarch64}

mode=${1:-}
variant=${2:-default}
list=${3:-$mode}
image=$BUILD/obj/$variant/arch/arm64/boot/Image
initrd=${INITRD:-$BUILD/initramfs.cpio}
skips=${SKIPS:-$TOP/selftests/expected-skips.list}
logdir=$BUILD/logs
mkdir -p "$logdir"
log=$logdir/$variant-${mode:-none}-${list:-none}.log
# Never read what an earlier boot left.
rm -f "$log" "$log.tmp"

fail=0
result() { echo "$*"; case "$1" in FAIL) fail=1 ;; esac; }

# The plan: the list's test names, from the initramfs the boot uses.
declare -A seen=()
planned=()
if [ -n "$list" ] && [ -f "$initrd" ]; then
	mapfile -t planned < <(cpio -i --quiet --to-stdout "tests/$list.list" < "$initrd" 2>/dev/null |
		awk '$1 !~ /^#/ && NF { print $1 }')
fi

declare -A in_plan=()
for name in "${planned[@]}"; do in_plan[$name]=1; done

# Every planned test without a result line is a failure; then exit.
finish() {
	local name
	for name in "${planned[@]}"; do
		[ -n "${seen[$name]:-}" ] || result FAIL "$mode" "$name" "not run${1:+ ($1)}"
	done
	exit $fail
}
# A boot that cannot start.
abort() { result FAIL "${mode:-none}" boot "$*"; finish "the boot did not start"; }

case "$mode" in
protected)	args="kvm-arm.mode=protected"; expect="Protected hVHE mode initialized successfully" ;;
protected-nvhe)	args="kvm-arm.mode=protected arm64_sw.hvhe=0 id_aa64mmfr1.vh=0"; expect="Protected nVHE mode initialized successfully" ;;
nvhe)		args="kvm-arm.mode=nvhe"; expect="Hyp nVHE mode initialized successfully" ;;
vhe)		args=""; expect="VHE mode initialized successfully" ;;
*) abort "unknown mode '$mode' (protected, protected-nvhe, nvhe, vhe)" ;;
esac
command -v "$QEMU" >/dev/null || abort "no QEMU '$QEMU' (run scripts/install-deps.sh)"
command -v timeout >/dev/null || abort "no 'timeout' tool"
[ -f "$image" ] || abort "no kernel image at $image (make kernel)"
[ -f "$initrd" ] || abort "no initramfs at $initrd (make initramfs)"
[ ${#planned[@]} -gt 0 ] || abort "the initramfs $initrd has no test list '$list' (or an empty one)"

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
tl=$(cpio -i --quiet --to-stdout "tests/$list.list" < "$initrd" 2>/dev/null |
	awk '$1 !~ /^#/ && NF { s += $2 } END { print s + 0 }')
limit=${BOOT_TIMEOUT:-$((tl + 120))}
# A hung kernel is caught long before that: init ends each test at its own
# timeout and says so, so a serial line is due at least once per longest
# test timeout. Silence beyond it (and boot slack) kills QEMU. A kernel
# that panicked (after a hyp panic, its reboot may never come) is killed
# once the log has been quiet 30 s after "Kernel panic - not syncing".
tmax=$(cpio -i --quiet --to-stdout "tests/$list.list" < "$initrd" 2>/dev/null |
	awk '$1 !~ /^#/ && NF && $2 > m { m = $2 } END { print m + 0 }')
silence=${BOOT_SILENCE:-$((tmax + 180))}

start=$(date +%s)
timeout --foreground -k 10 "$limit" "$QEMU" \
	-M virt,virtualization=on,gic-version=3 -cpu "$cpu" \
	-smp "${SMP:-2}" -m "${MEM:-2G}" -nographic -no-reboot -nic none \
	-kernel "$image" -initrd "$initrd" ${QEMU_EXTRA:-} \
	-append "console=ttyAMA0 panic=-1 $hp $args pkvm.tests=$list ${EXTRA_CMDLINE:-}" \
	> "$log" 2>&1 < /dev/null &
qpid=$!
silent=0
panicked=0
last=-1
while kill -0 "$qpid" 2>/dev/null; do
	sleep 5
	size=$(stat -c %s "$log" 2>/dev/null || echo 0)
	if [ "$size" != "$last" ]; then
		last=$size
		quiet=$(date +%s)
	elif [ $(( $(date +%s) - quiet )) -ge 30 ] &&
	     grep -q "Kernel panic - not syncing" "$log" 2>/dev/null; then
		panicked=1
		kill -TERM "$qpid" 2>/dev/null
		sleep 10
		kill -KILL "$qpid" 2>/dev/null
		break
	elif [ $(( $(date +%s) - quiet )) -ge "$silence" ]; then
		# timeout passes the signal on to QEMU.
		silent=1
		kill -TERM "$qpid" 2>/dev/null
		sleep 10
		kill -KILL "$qpid" 2>/dev/null
		break
	fi
done
wait "$qpid"
qrc=$?
secs=$(( $(date +%s) - start ))
{ echo "# host: $("$QEMU" --version | head -1)"; tr -d '\r' < "$log"; } > "$log.tmp" && mv "$log.tmp" "$log"

ended=""
if [ "$panicked" = 1 ]; then
	result FAIL "$mode" boot "the kernel panicked and QEMU did not exit: killed after 30 s of silence (log: $log)"
	ended="QEMU was killed 30 s after the kernel panicked"
elif [ "$silent" = 1 ]; then
	result FAIL "$mode" boot "no serial output for ${silence}s (a hung kernel): QEMU killed (log: $log)"
	ended="QEMU was killed after ${silence}s without serial output"
elif [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
	result FAIL "$mode" boot "QEMU hung: killed after ${limit}s (log: $log)"
	ended="QEMU was killed after ${limit}s"
elif [ "$qrc" -ne 0 ]; then
	result FAIL "$mode" boot "QEMU exited with status $qrc: $(head -c 300 "$log" | tr '\n' ' ')"
	ended="QEMU exited with status $qrc"
fi
if grep -qE "kvm \[[0-9]+\]: $expect" "$log"; then
	result PASS "$mode" "mode-line" "$(grep -oE "kvm \[[0-9]+\]: $expect" "$log" | head -1)"
else
	result FAIL "$mode" "mode-line" "log lacks '$expect' (log: $log)"
fi

# Expected skips: "<modes> <test> <reason...>" lines.
expected_skip() {
	[ -f "$skips" ] || return 1
	awk -v m="$mode" -v t="$1" '$1 !~ /^#/ && NF >= 3 && $2 == t {
		n = split($1, ms, ","); for (i = 1; i <= n; i++) if (ms[i] == "all" || ms[i] == m) {
			$1 = ""; $2 = ""; sub(/^ +/, ""); print; found = 1; exit } }
		END { exit !found }' "$skips"
}

# Test results (KTAP lines printed by our init), each checked against the plan.
while read -r line; do
	case "$line" in
	"ok "*"# SKIP"*) verdict=SKIP; n=${line#ok } ;;
	"ok "*) verdict=PASS; n=${line#ok } ;;
	"not ok "*) verdict=FAIL; n=${line#not ok } ;;
	*) continue ;;
	esac
	n=${n#* }
	name=${n%% *}
	if [ -n "${seen[$name]:-}" ]; then
		result FAIL "$mode" "$name" "reported twice (log: $log)"
		continue
	fi
	seen[$name]=1
	# A lookup, not "printf | grep -q": under pipefail, grep -q leaving
	# at the first line (the list's first test) can SIGPIPE printf and
	# read as "not found" (seen once, 2026-12-02).
	if [ -z "${in_plan[$name]:-}" ]; then
		result FAIL "$mode" "$name" "not in the list's plan: ${n#* } (log: $log)"
		continue
	fi
	case "$verdict" in
	PASS)
		# A test that passed may still have skipped a part of itself
		# (a kselftest "SKIP" line, a KTAP subtest "# SKIP"): that is
		# a failure too, unless the list expects "<test>/part".
		part=$(awk -v s="# start $name" '$0 == s { on = 1; next }
			on && /^(not )?ok [0-9]+ / { exit } on && /SKIP/ { print; exit }' \
			<(tr -d '\r' < "$log"))
		if [ -z "$part" ]; then
			result PASS "$mode" "$name"
		elif why=$(expected_skip "$name/part"); then
			result PASS "$mode" "$name" "skipped a part, expected: $why"
		else
			result FAIL "$mode" "$name" "passed but skipped a part, and $skips does not expect it: ${part#\# } (log: $log)"
		fi ;;
	FAIL) result FAIL "$mode" "$name" "${n#* # } (log: $log)"
		# What the test said last (its assertion), so that a CI
		# record without the serial log still shows why.
		awk -v s="# start $name" -v e="$line" '$0 == s { on = 1; n = 0; next }
			on && $0 == e { exit } on && /^# time / { next } on { l[n++ % 12] = $0 }
			END { for (i = (n > 12 ? n - 12 : 0); i < n; i++) print "    | " l[i % 12] }' \
			<(tr -d '\r' < "$log") ;;
	SKIP)
		if why=$(expected_skip "$name"); then
			result SKIP "$mode" "$name" "expected: $why"
		else
			result FAIL "$mode" "$name" "skipped, and $skips does not expect it (log: $log)"
		fi ;;
	esac
done < <(grep -aE '^(not )?ok [0-9]+ ' "$log")
want=$(grep -aoE '^1\.\.[0-9]+' "$log" | head -1 | cut -c4-)
got=$(grep -acE '^(not )?ok [0-9]+ ' "$log")
grep -aq "# pkvm-init: done" "$log" && [ "${want:-x}" = "$got" ] && [ "$got" = "${#planned[@]}" ] ||
	result FAIL "$mode" "test-run" "init did not finish its list (planned ${#planned[@]}, init's plan ${want:-?}, reported $got; log: $log)"
# init's own count of its verdicts must be what the result lines say: a
# result line lost or mangled on the way (or an init that miscounts) shows.
if grep -aq "# pkvm-init: done" "$log"; then
	n_skip=$(grep -acE '^ok [0-9]+ .*# SKIP' "$log")
	n_pass=$(( $(grep -acE '^ok [0-9]+ ' "$log") - n_skip ))
	n_fail=$(grep -acE '^not ok [0-9]+ ' "$log")
	read_count="$n_pass passed, $n_fail failed, $n_skip skipped"
	init_count=$(tr -d '\r' < "$log" | grep -aoE '^# init: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' | tail -1)
	init_count=${init_count#\# init: }
	[ "$init_count" = "$read_count" ] ||
		result FAIL "$mode" "test-run" "init counted ${init_count:-nothing}, the harness read $read_count (log: $log)"
fi

# Any kernel or hypervisor complaint fails the boot (SERIAL_BAD_RE: lib.sh).
bad=$(grep -anE "$SERIAL_BAD_RE" "$log" | head -20)
if [ -n "$bad" ]; then
	result FAIL "$mode" "serial-log" "forbidden lines in $log:"
	echo "$bad" | sed 's/^/    /'
else
	result PASS "$mode" "serial-log" "clean (${secs}s)"
fi
finish "$ended"
