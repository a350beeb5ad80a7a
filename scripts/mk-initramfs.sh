#!/usr/bin/env bash
# Build the test initramfs: our static init, the selftests and one test list
# per host mode (from selftests/matrix.list, or $MATRIX).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need "${CROSS}gcc" cpio

matrix=${MATRIX:-$TOP/selftests/matrix.list}
root=$BUILD/initramfs
out=${INITRAMFS_OUT:-$BUILD/initramfs.cpio}
rm -rf "$root"
mkdir -p "$root"/{tests/bin,proc,sys,dev,tmp}

"${CROSS}gcc" -static -O2 -Wall -Wextra -Werror -o "$root/init" "$TOP/selftests/init/init.c" ||
	die "building init failed"
# The incidents' reproducer (scripts/incident-repro.sh), raw KVM ioctls only.
"${CROSS}gcc" -static -O2 -Wall -Wextra -Werror -pthread -o "$root/tests/bin/vm_churn" \
	"$TOP/selftests/repro/vm_churn.c" || die "building vm_churn failed"

for t in "$BUILD"/selftests/*_test "$BUILD"/selftests/arm64/*; do
	[ -x "$t" ] && [ -f "$t" ] && cp "$t" "$root/tests/bin/"
done
for x in "$BUILD"/tools/*; do
	[ -x "$x" ] && [ -f "$x" ] && cp "$x" "$root/tests/bin/"
done

for mode in protected protected-nvhe nvhe vhe; do
	: > "$root/tests/$mode.list"
	while read -r modes name timeout cmd; do
		case "$modes" in ""|\#*) continue ;; esac
		case ",$modes," in *",all,"*|*",$mode,"*) ;; *) continue ;; esac
		bin=$(for w in $cmd; do case "$w" in *=*) ;; *) echo "$w"; break ;; esac; done)
		[ -x "$root/tests/bin/${bin#./}" ] || die "$name needs ${bin#./}, which was not built"
		echo "$name $timeout $cmd" >> "$root/tests/$mode.list"
	done < "$matrix"
done
# The `make run` demo list, as is.
grep -v '^#' "$TOP/selftests/demo.list" > "$root/tests/demo.list"

(cd "$root" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) > "$out.tmp"
mv "$out.tmp" "$out"
echo "mk-initramfs: $(du -h "$out" | cut -f1) with $(ls "$root/tests/bin" | wc -l) programs"
