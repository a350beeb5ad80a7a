#!/usr/bin/env bash
# Install the Debian packages the build and the QEMU test matrix need.
# Idempotent: skips apt entirely when every tool is already present.
set -euo pipefail

PKGS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-system-arm sparse coccinelle
flex bison bc libssl-dev libelf-dev cpio rsync ccache xz-utils git make python3
ca-certificates curl libglib2.0-dev pkg-config"

need=()
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -eq 0 ]; then
	echo "install-deps: all packages present"
	exec "$(dirname "$0")/install-qemu.sh"
fi
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
	command -v sudo >/dev/null || { echo "install-deps: missing packages (${need[*]}) and not root, no sudo" >&2; exit 1; }
else
	SUDO=
fi
echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || { echo "install-deps: apt-get update failed (no network?)" >&2; exit 1; }
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
	{ echo "install-deps: apt-get install failed for: ${need[*]}" >&2; exit 1; }
echo "install-deps: done"
exec "$(dirname "$0")/install-qemu.sh"
