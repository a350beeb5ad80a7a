# Shared settings for the project's scripts. Source it; do not run it.
# shellcheck shell=bash
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
CACHE=${PKVM_CACHE:-$HOME/.cache/pkvm-split}
TREE=${PKVM_TREE:-$BUILD/linux}
export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
export CCACHE_BASEDIR=$BUILD
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}
CROSS=${CROSS_COMPILE:-aarch64-linux-gnu-}
JOBS=${JOBS:-$(( $(nproc) + 1 ))}
KMAKE=(make -s -C "$TREE" ARCH=arm64 CROSS_COMPILE="$CROSS" CC="ccache ${CROSS}gcc" -j"$JOBS")

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
need() { for t in "$@"; do command -v "$t" >/dev/null || die "missing tool '$t' (run scripts/install-deps.sh)"; done; }

# Serial-log lines that fail a boot: kernel and hypervisor complaints
# (WARN, BUG, Oops, panics), a selftest's assertion, the vmstat counter
# that went negative, and the reports of the detectors the test config
# enables: hung tasks, RCU stalls, hard and soft lockups, and (in a debug
# kernel) lockdep, KASAN, UBSAN and list corruption. scripts/check-harness.sh
# holds a sample of each that must match.
SERIAL_BAD_RE='vmstat_refresh: nr_|WARNING:|\bBUG\b|Oops|Kernel panic|hyp panic|HYP panic'
SERIAL_BAD_RE+='|Test Assertion Failure|Unable to handle kernel|Call trace:'
SERIAL_BAD_RE+='|INFO: task .* blocked for more than|rcu: INFO:|detected stalls? on CPU'
SERIAL_BAD_RE+='|hard LOCKUP|soft lockup|KASAN:|UBSAN:|possible circular locking|possible recursive locking'
SERIAL_BAD_RE+='|inconsistent lock state|suspicious RCU usage|DEBUG_LOCKS_WARN_ON|turning off the locking correctness validator'
SERIAL_BAD_RE+='|list_add corruption|list_del corruption|sleeping function called from invalid context'

# Lines of stdin in an order drawn from the seed string $1 (bench.sh,
# bench-counts.sh).
seeded_shuffle() {
	/usr/bin/python3 -c 'import random, sys
lines = sys.stdin.read().split()
random.Random(sys.argv[1]).shuffle(lines)
print("\n".join(lines))' "$1"
}
