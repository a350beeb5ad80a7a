# Shared settings for the project's scripts. Source it; do not run it.
# shellcheck shell=bash
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
CACHE=${PKVM_CACHE:-$HOME/.cache/pkvm-split}
TREE=$BUILD/linux
export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
export CCACHE_BASEDIR=$BUILD
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}
CROSS=${CROSS_COMPILE:-aarch64-linux-gnu-}
JOBS=${JOBS:-$(( $(nproc) + 1 ))}
KMAKE=(make -s -C "$TREE" ARCH=arm64 CROSS_COMPILE="$CROSS" CC="ccache ${CROSS}gcc" -j"$JOBS")

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
need() { for t in "$@"; do command -v "$t" >/dev/null || die "missing tool '$t' (run scripts/install-deps.sh)"; done; }
