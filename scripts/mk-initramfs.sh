#!/usr/bin/env bash
# Build the test initramfs: our static init, the selftests and one test list
# per host mode (from selftests/matrix.list, or $MATRIX), named
# tests/$LIST_PREFIX<mode>.list (boot.sh's list argument, init's pkvm.tests=).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need "${CROSS}gcc" cpio

matrix=${MATRIX:-$TOP/selftests/matrix.list}
prefix=${LIST_PREFIX:-}
root=$BUILD/initramfs
out=${INITRAMFS_OUT:-$BUILD/initramfs.cpio}
rm -rf "$root"
mkdir -p "$root"/{tests/bin,proc,sys,dev,tmp}

"${CROSS}gcc" -static -O2 -Wall -Wextra -Werror -o "$root/init" "$TOP/selftests/init/init.c" ||
	die "building init failed"
# The incidents' reproducer (scripts/incident-repro.sh), raw KVM ioctls only.
"${CROSS}gcc" -static -O2 -Wall -Wextra -Werror -pthread -o "$root/tests/bin/vm_churn" \
	"$TOP/selftests/repro/vm_churn.c" || die "building vm_churn failed"
# Runs a test with EL2's hyp events on and requires that EL2 did the work.
"${CROSS}gcc" -static -O2 -Wall -Wextra -Werror -pthread -o "$root/tests/bin/hyp-expect" \
	"$TOP/selftests/init/hyp-expect.c" || die "building hyp-expect failed"
# The elcount plugin's marker (scripts/bench-counts.sh; a NOP without it).
"${CROSS}gcc" -static -O2 -Wall -Wextra -Werror -o "$root/tests/bin/elmark" \
	"$TOP/selftests/init/elmark.c" || die "building elmark failed"
# The harness's misbehaving test program (scripts/check-harness.sh).
"${CROSS}gcc" -static -O2 -Wall -Wextra -Werror -o "$root/tests/bin/probe" \
	"$TOP/selftests/init/probe.c" || die "building probe failed"

for t in "$BUILD"/selftests/*_test "$BUILD"/selftests/arm64/*; do
	[ -x "$t" ] && [ -f "$t" ] && cp "$t" "$root/tests/bin/"
done
for x in "$BUILD"/tools/*; do
	[ -x "$x" ] && [ -f "$x" ] && cp "$x" "$root/tests/bin/"
done

# Every line must be well formed: a line the init would drop, or one for
# no mode, is an error here rather than a test that silently never runs.
# init runs at most MAX_TESTS (128) tests from one list.
[ -f "$matrix" ] || die "no test list at $matrix"
all_modes=",protected,protected-nvhe,nvhe,vhe,"
nr=0
while read -r modes name timeout cmd; do
	nr=$((nr + 1))
	case "$modes" in ""|\#*) continue ;; esac
	for m in ${modes//,/ }; do
		case "$all_modes,all," in *",$m,"*) ;; *) die "$matrix:$nr: unknown mode '$m' in '$modes'" ;; esac
	done
	case "$name" in ""|*[!A-Za-z0-9_.-]*) die "$matrix:$nr: bad test name '$name'" ;; esac
	case "$timeout" in ""|*[!0-9]*|0) die "$matrix:$nr: '$name' needs a timeout in seconds, not '$timeout'" ;; esac
	[ -n "$cmd" ] || die "$matrix:$nr: '$name' has no command"
done < "$matrix"
for mode in protected protected-nvhe nvhe vhe; do
	l=$root/tests/$prefix$mode.list
	: > "$l"
	while read -r modes name timeout cmd; do
		case "$modes" in ""|\#*) continue ;; esac
		case ",$modes," in *",all,"*|*",$mode,"*) ;; *) continue ;; esac
		bin=$(for w in $cmd; do case "$w" in *=*) ;; *) echo "$w"; break ;; esac; done)
		[ -x "$root/tests/bin/${bin#./}" ] || die "$name needs ${bin#./}, which was not built"
		grep -q "^$name " "$l" && die "$matrix: '$name' twice for $mode"
		echo "$name $timeout $cmd" >> "$l"
	done < "$matrix"
	[ "$(wc -l < "$l")" -le 128 ] ||
		die "$matrix: more than 128 tests for $mode (init's MAX_TESTS)"
done
# The `make run` demo list, as is.
grep -v '^#' "$TOP/selftests/demo.list" > "$root/tests/demo.list"

(cd "$root" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) > "$out.tmp"
mv "$out.tmp" "$out"
echo "mk-initramfs: $(du -h "$out" | cut -f1) with $(ls "$root/tests/bin" | wc -l) programs"
