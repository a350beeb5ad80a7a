#!/usr/bin/env bash
# build-kernel.sh [variant]: configure and build the arm64 Image out of tree
# in $BUILD/obj/<variant>. Variant 'default' uses Kconfig/base.config;
# other variants add Kconfig/<variant>.config on top (e.g. 16k, 64k, nodebug).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need "${CROSS}gcc" ccache make flex bison bc

variant=${1:-default}
obj=$BUILD/obj/$variant
frags=("$TOP/Kconfig/base.config")
if [ "$variant" != default ]; then
	for v in ${variant//+/ }; do
		[ -f "$TOP/Kconfig/$v.config" ] || die "no fragment Kconfig/$v.config for variant '$variant'"
		frags+=("$TOP/Kconfig/$v.config")
	done
fi
mkdir -p "$obj"

# Rebuild .config only when a fragment or the tree changed.
cfgkey=$( { cat "${frags[@]}"; git -C "$TREE" rev-parse HEAD; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$obj/.cfgkey" 2>/dev/null)" != "$cfgkey" ] || [ ! -f "$obj/.config" ]; then
	"${KMAKE[@]}" O="$obj" allnoconfig
	"$TREE/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "${frags[@]}" >/dev/null
	"${KMAKE[@]}" O="$obj" olddefconfig
	"$TOP/scripts/kconfig-check.sh" "$obj/.config" "${frags[@]}" ||
		die "olddefconfig dropped options asked for by Kconfig/ (see above)"
	echo "$cfgkey" > "$obj/.cfgkey"
fi

start=$(date +%s)
"${KMAKE[@]}" O="$obj" Image > "$obj/build.log" 2>&1 || { tail -40 "$obj/build.log" >&2; die "kernel build failed (log: $obj/build.log)"; }
if grep -E "warning:" "$obj/build.log" >&2; then
	die "kernel build has warnings (log: $obj/build.log)"
fi
echo "build-kernel: $variant Image built in $(( $(date +%s) - start ))s"
