#!/usr/bin/env bash
# Build the elcount QEMU TCG plugin (scripts/elcount/elcount.c) into
# build/plugin/libelcount.so, for the QEMU the harness runs on: Debian's
# qemu-system-arm 1:10.0.2+ds-2+deb13u1~bpo12+1 (plugin API version 4).
# That package ships no qemu-plugin.h, so the header is taken from Debian's
# source tarball of the same upstream version (pinned by sha256, cached
# under $PKVM_CACHE/dl like fetch-source.sh does); only the header is
# extracted, into build/plugin/include, and it is never committed.
#
#   scripts/build-plugin.sh          build (idempotent)
#   scripts/build-plugin.sh --check  build, then run scripts/elcount/selftest.S
#                                    under QEMU with the plugin and compare
#                                    its counts with the expected ones
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# The orig tarball of qemu 1:10.0.2+ds-2+deb13u1~bpo12+1, i.e. upstream's
# header for 10.0.2 (plugin API 4, as the installed QEMU). The .dsc and
# .debian.tar.xz of that revision are no longer in the pool (nor listed in
# its index), so neither its checksum in the .dsc nor the absence of a Debian
# patch to the header could be checked; the tarball is still served, and
# its sha256 was taken from two downloads from deb.debian.org over HTTPS.
QTAR=${QEMU_ORIG_TAR:-qemu_10.0.2+ds.orig.tar.xz}
QTAR_SHA=${QEMU_ORIG_SHA256:-0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1}
QHDR_SHA=${QEMU_PLUGIN_H_SHA256:-ceca12f3ba448340b38223617b1c66d7b92e0e0d78687d1e108c42287542836e}
POOL=${QEMU_POOL:-https://deb.debian.org/debian/pool/main/q/qemu}

SRC=$TOP/scripts/elcount
OUT=$BUILD/plugin
INC=$OUT/include
HDR=$INC/qemu/qemu-plugin.h
SO=$OUT/libelcount.so

check=0
case "${1:-}" in
"") ;;
--check) check=1 ;;
*) die "usage: $0 [--check]" ;;
esac

need gcc curl tar xz sha256sum
command -v pkg-config >/dev/null ||
	die "pkg-config is not installed (apt-get install pkg-config libglib2.0-dev, or run scripts/install-deps.sh)"
pkg-config --exists glib-2.0 ||
	die "libglib2.0-dev is not installed (pkg-config finds no glib-2.0): apt-get install libglib2.0-dev, or run scripts/install-deps.sh"

sha_ok() { [ -f "$2" ] && echo "$1  $2" | sha256sum -c --status; }

fetch_header() {
	local dl=$CACHE/dl tar tmp
	tar=$dl/$QTAR
	mkdir -p "$dl" "$INC/qemu"
	if ! sha_ok "$QTAR_SHA" "$tar"; then
		rm -f "$tar" "$tar.part"
		echo "build-plugin: downloading $POOL/$QTAR" >&2
		curl -fsSL --retry 2 --connect-timeout 20 -o "$tar.part" "$POOL/$QTAR" ||
			{ rm -f "$tar.part"; die "download of $POOL/$QTAR failed (no network? gone from the pool? place the verified file at $tar)"; }
		if ! sha_ok "$QTAR_SHA" "$tar.part"; then
			mv "$tar.part" "$tar.bad"
			die "sha256 mismatch for $QTAR (kept as $tar.bad); expected $QTAR_SHA"
		fi
		mv "$tar.part" "$tar"
	fi
	tmp=$(mktemp -d "$OUT/x.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	tar -xJf "$tar" -C "$tmp" --no-same-owner --wildcards --no-anchored 'include/qemu/qemu-plugin.h' ||
		die "$QTAR does not contain include/qemu/qemu-plugin.h"
	local h
	h=$(find "$tmp" -path '*/include/qemu/qemu-plugin.h' | head -1)
	[ -n "$h" ] || die "$QTAR does not contain include/qemu/qemu-plugin.h"
	sha_ok "$QHDR_SHA" "$h" ||
		die "sha256 mismatch for qemu-plugin.h from $QTAR; expected $QHDR_SHA"
	mv "$h" "$HDR"
	rm -rf "$tmp"
	trap - EXIT
}

mkdir -p "$OUT"
sha_ok "$QHDR_SHA" "$HDR" || fetch_header

if [ ! -f "$SO" ] || [ "$SRC/elcount.c" -nt "$SO" ] || [ "$HDR" -nt "$SO" ] || [ "$0" -nt "$SO" ]; then
	# shellcheck disable=SC2046
	gcc -shared -fPIC -O2 -Wall -Werror -I"$INC" $(pkg-config --cflags glib-2.0) \
		-o "$SO.tmp" "$SRC/elcount.c" $(pkg-config --libs glib-2.0) ||
		{ rm -f "$SO.tmp"; die "compiling $SRC/elcount.c failed"; }
	mv "$SO.tmp" "$SO"
	echo "build-plugin: built ${SO#"$TOP"/}"
else
	echo "build-plugin: ${SO#"$TOP"/} up to date"
fi
[ $check -eq 1 ] || exit 0

# --check: a bare-metal program that starts at EL2 (virt,virtualization=on),
# runs known numbers of instructions at EL2, EL1 (lower and upper half) and
# EL0, issues one broadcast and one local TLBI, marks two snapshots and
# powers off through PSCI. scripts/elcount/selftest.S derives every number.
need "${CROSS}as" "${CROSS}ld" qemu-system-aarch64 flock timeout
"${CROSS}as" -o "$OUT/selftest.o" "$SRC/selftest.S" || die "assembling selftest.S failed"
"${CROSS}ld" -nostdlib -Ttext=0x40200000 -e _start -o "$OUT/selftest.elf" "$OUT/selftest.o" ||
	die "linking selftest failed"
log=$OUT/selftest.log
rm -f "$log"
rc=0
flock /tmp/qemu.lock timeout 60 qemu-system-aarch64 -M virt,virtualization=on -cpu max -m 256M \
	-nographic -no-reboot -nic none -monitor none -serial none -kernel "$OUT/selftest.elf" \
	-plugin "$SO" -d plugin -D "$log" </dev/null || rc=$?
[ $rc -eq 0 ] || die "qemu-system-aarch64 exited $rc (124: timed out; the selftest did not power off)"
[ -s "$log" ] || die "no plugin output in $log"

expect=$OUT/selftest.expect
cat > "$expect" <<'EOF'
elcount: mark 0x1 insn.el0.lo=0 insn.el0.hi=0 insn.el1.lo=0 insn.el1.hi=0 insn.el2=109 insn.el3=0 trans.el0.el1=0 trans.el0.el2=0 trans.el0.el3=0 trans.el1.el0=0 trans.el1.el2=0 trans.el1.el3=0 trans.el2.el0=0 trans.el2.el1=0 trans.el2.el3=0 trans.el3.el0=0 trans.el3.el1=0 trans.el3.el2=0 tlbi.bcast=0 tlbi.local=0 trans.el1lo.el2=0 trans.el1hi.el2=0 trans.el2.el1lo=0 trans.el2.el1hi=0
elcount: mark 0x2 insn.el0.lo=51 insn.el0.hi=0 insn.el1.lo=219 insn.el1.hi=301 insn.el2=119 insn.el3=0 trans.el0.el1=1 trans.el0.el2=0 trans.el0.el3=0 trans.el1.el0=1 trans.el1.el2=1 trans.el1.el3=0 trans.el2.el0=0 trans.el2.el1=1 trans.el2.el3=0 trans.el3.el0=0 trans.el3.el1=0 trans.el3.el2=0 tlbi.bcast=1 tlbi.local=1 trans.el1lo.el2=0 trans.el1hi.el2=1 trans.el2.el1lo=1 trans.el2.el1hi=0
elcount: vcpus 1
elcount: marks 2
elcount: errors 0
elcount: insn.el0.lo 51
elcount: insn.el0.hi 0
elcount: insn.el1.lo 219
elcount: insn.el1.hi 301
elcount: insn.el2 121
elcount: insn.el3 0
elcount: trans.el0.el1 1
elcount: trans.el0.el2 0
elcount: trans.el0.el3 0
elcount: trans.el1.el0 1
elcount: trans.el1.el2 1
elcount: trans.el1.el3 0
elcount: trans.el2.el0 0
elcount: trans.el2.el1 1
elcount: trans.el2.el3 0
elcount: trans.el3.el0 0
elcount: trans.el3.el1 0
elcount: trans.el3.el2 0
elcount: tlbi.bcast 1
elcount: tlbi.local 1
elcount: trans.el1lo.el2 0
elcount: trans.el1hi.el2 1
elcount: trans.el2.el1lo 1
elcount: trans.el2.el1hi 0
elcount: insn.all 692
elcount: matrix el0 0 1 0 0
elcount: matrix el1 1 0 1 0
elcount: matrix el2 0 1 0 0
elcount: matrix el3 0 0 0 0
EOF
if ! grep '^elcount: ' "$log" | diff -u "$expect" - >&2; then
	die "selftest counts differ from the expected ones (-expected +observed; log: $log)"
fi
echo "build-plugin: selftest passed ($(grep -c '^elcount: ' "$log") lines match)"
