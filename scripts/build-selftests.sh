#!/usr/bin/env bash
# Build the KVM selftests the matrix runs, statically, against the UAPI
# headers of our own tree (the cross libc's linux/kvm.h is too old).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need "${CROSS}gcc" make rsync

TESTS=${SELFTESTS:-"dirty_log_test dirty_log_perf_test dirty_log_migrate_perf_test kvm_page_table_test kvm_binary_stats_test arm64/stage2_block_transitions arm64/pkvm_split_test arm64/pkvm_split_race_test arm64/pkvm_split_abi_test arm64/pkvm_split_fuzz_test set_memory_region_test memslot_modification_stress_test mmu_stress_test"}
hdr=${BUILD_SELFTESTS_HDR:-$BUILD/uapi}
out=${BUILD_SELFTESTS_OUT:-$BUILD/selftests}

key=$(git -C "$TREE" rev-parse HEAD)
if [ "$(cat "$hdr/.key" 2>/dev/null)" != "$key" ]; then
	rm -rf "$hdr"
	make -s -C "$TREE" ARCH=arm64 O="$hdr.obj" INSTALL_HDR_PATH="$hdr" headers_install >/dev/null ||
		die "headers_install failed"
	echo "$key" > "$hdr/.key"
fi

mkdir -p "$out"
targets=()
for t in $TESTS; do
	[ -f "$TREE/tools/testing/selftests/kvm/$t.c" ] || { echo "build-selftests: skipping $t (not in tree)"; continue; }
	targets+=("$out/$t")
done
make -s -C "$TREE/tools/testing/selftests/kvm" ARCH=arm64 CROSS_COMPILE="$CROSS" \
	CC="ccache ${CROSS}gcc" LDFLAGS=-static KHDR_INCLUDES="-isystem $hdr/include" \
	OUTPUT="$out" -j"$JOBS" "${targets[@]}" > "$out/build.log" 2>&1 ||
	{ tail -40 "$out/build.log" >&2; die "selftest build failed (log: $out/build.log)"; }
# A warning in a test is a bug in the test: fail on any.
if grep "warning:" "$out/build.log" >&2; then
	die "selftest build has warnings (log: $out/build.log)"
fi
echo "build-selftests: built ${#targets[@]} tests into $out"
