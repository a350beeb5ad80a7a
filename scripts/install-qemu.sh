#!/usr/bin/env bash
# Install the QEMU the harness runs on: Debian's qemu-system-arm, pinned to
# 1:10.0.2+ds-2+deb13u1~bpo12+1 from bookworm-backports. The backports suite
# is used through a private apt list in the cache (as fetch-source.sh does),
# so the machine's apt configuration is not changed.
#
# Why 10 and not bookworm's 7.2: under QEMU 7.2, a 16K-page kernel with
# LPA2 stalls in pKVM init (base kernel included): the host's stage-1 walk
# takes a level-0 stage-2 translation fault that is never resolved. The
# same kernel boots pKVM and passes the tests under QEMU 10.0.2
# (bench/incidents/README.md, "16K + LPA2").
#
# If the pinned version cannot be installed (no network, gone from the
# mirror), the harness falls back to the QEMU 7.2 that install-deps.sh
# installs, says so here, and the boot logs name the version that ran;
# only the 16K + LPA2 boot of `make matrix` needs 10.
set -euo pipefail

VER=${QEMU_DEB_VERSION:-1:10.0.2+ds-2+deb13u1~bpo12+1}
CACHE=${PKVM_CACHE:-$HOME/.cache/pkvm-split}
A=$CACHE/qemu-apt
PKGS=(qemu-system-arm qemu-system-common qemu-system-data)

installed() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }

ok=1
for p in "${PKGS[@]}"; do
	[ "$(installed "$p")" = "$VER" ] || ok=0
done
if [ $ok -eq 1 ]; then
	echo "install-qemu: qemu-system-arm $VER present"
	exit 0
fi

fallback() {
	echo "install-qemu: WARNING: $* ; the harness runs on $(qemu-system-aarch64 --version 2>/dev/null | head -1 || echo 'no QEMU') (16K + LPA2 pKVM boots need $VER)" >&2
	exit 0
}

if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || fallback "not root and no sudo to install qemu-system-arm $VER"
	SUDO=sudo
else
	SUDO=
fi

mkdir -p "$A/lists/partial" "$A/archives/partial"
cat > "$A/sources.list" <<EOF
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
deb http://deb.debian.org/debian bookworm-backports main
EOF
opts=(-o "Dir::Etc::sourcelist=$A/sources.list"
      -o "Dir::Etc::sourceparts=/dev/null"
      -o "Dir::State::Lists=$A/lists"
      -o "Dir::Cache=$A"
      -o "APT::Sandbox::User=root")
echo "install-qemu: apt-get update (bookworm + bookworm-backports, private list)"
$SUDO apt-get "${opts[@]}" update -qq || fallback "apt-get update of bookworm-backports failed"
avail=$(apt-cache "${opts[@]}" madison qemu-system-arm | awk '{print $3}' | tr '\n' ' ')
case " $avail " in
*" $VER "*) ;;
*) fallback "qemu-system-arm $VER is not on the mirror (available: ${avail:-none}); set QEMU_DEB_VERSION to pin another" ;;
esac
echo "install-qemu: installing qemu-system-arm $VER"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get "${opts[@]}" install -y -qq --no-install-recommends -t bookworm-backports \
	"${PKGS[@]/%/=$VER}" >/dev/null || fallback "apt-get install of qemu-system-arm $VER failed"
[ "$(installed qemu-system-arm)" = "$VER" ] || fallback "qemu-system-arm is $(installed qemu-system-arm) after install"
echo "install-qemu: $(qemu-system-aarch64 --version | head -1)"
