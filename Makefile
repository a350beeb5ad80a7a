# pKVM eager huge-page splitting: build, boot and test harness.
# See README.md. Everything is built under $(BUILD); downloads and ccache
# live under $(PKVM_CACHE) (default ~/.cache/pkvm-split).

BUILD ?= $(CURDIR)/build
export BUILD

S := $(CURDIR)/scripts

.PHONY: all deps tree kernel selftests initramfs run test test-step1 check patches bench-el2pc \
	bench bench-counts bench-lockfree bench-migrate matrix bisect fuzz mutants repro readme clean distclean

all: initramfs

deps:
	@$(S)/install-deps.sh

tree: deps
	@$(S)/prepare-tree.sh

kernel: tree
	@$(S)/build-kernel.sh default

selftests: tree
	@$(S)/build-selftests.sh

initramfs: kernel selftests
	@$(S)/mk-initramfs.sh

# Boot pKVM once and show the feature working.
run: initramfs
	@$(S)/run-demo.sh

# Every test: host-side checks, then the QEMU matrix in all four host modes.
test: initramfs
	@$(S)/test.sh

# Step one of the EL2 dirty fault (msg/steps), built and booted through
# the matrix in $(BUILD)/step1 (long: about as long as make test).
test-step1: deps
	@$(S)/test-step1.sh

# Exported series: git format-patch against the pristine base.
patches: tree
	@$(S)/export-patches.sh

# The README's headline figures, from the newest make bench report.
readme:
	@/usr/bin/python3 $(S)/readme-headline.py --readme README.md

clean:
	rm -rf $(BUILD)/obj $(BUILD)/selftests $(BUILD)/initramfs* $(BUILD)/logs

distclean:
	rm -rf $(BUILD)

# Each mechanism broken on purpose (bench/mutants/patches/), each against the
# test that should catch it; verdicts under bench/mutants/<date>/ (long).
mutants: initramfs
	@$(S)/mutants.sh

# Dirty-logging benchmark over host modes, split on/off and workloads (long).
bench: initramfs
	@$(S)/install-deps.sh
	@command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || \
		{ apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null || \
		  echo "bench: no matplotlib: the report will have no chart"; }
	@$(S)/bench.sh

# What a dirtied page costs in counts that carry to hardware (exceptions,
# instructions per EL, TLBIs; the elcount TCG plugin), and the fast/host
# time ratio under -icount and TCG, on the production kernel (nodebug).
# Results in bench/counts/; COUNTS_* variables in scripts/bench-counts.sh.
bench-counts: initramfs
	@$(S)/build-kernel.sh nodebug
	@$(S)/bench-counts.sh
	@/usr/bin/python3 $(S)/counts-report.py $$(ls -d bench/counts/*/ | tail -1) --readme docs/details.md

# The EL2 fault path without the VM's lock (issue #26) against the locked
# one it replaced, same tree, nodebug kernels: EL2 instructions per dirtied
# page at 1 and 2 vCPUs. Results in bench/lockfree/; LOCKFREE_* variables
# in scripts/bench-lockfree.sh.
bench-lockfree: initramfs
	@$(S)/bench-lockfree.sh
	@/usr/bin/python3 $(S)/lockfree-report.py $$(ls -d bench/lockfree/20*/ | tail -1) --readme docs/details.md

# Where a dirtied page's EL2 instructions go, by hyp function (the elcount
# plugin's el2pc=on), for the kernels make bench-lockfree builds. Results in
# bench/el2pc/; EL2PC_* variables in scripts/bench-el2pc.sh.
bench-el2pc: initramfs
	@$(S)/bench-el2pc.sh

# Dirty logging shaped like a live migration: the guest keeps writing while
# the log is collected and cleared in rounds, then the blackout; bitmap and
# dirty ring, fast path on/off, every host mode. Results in bench/migrate/;
# MIGRATE_* variables in scripts/bench-migrate.sh.
bench-migrate: initramfs
	@$(S)/bench-migrate.sh
	@/usr/bin/python3 $(S)/migrate-report.py $$(ls -d bench/migrate/*/ | tail -1) --readme docs/details.md

# 4K/16K/64K pages x NVHE_EL2_DEBUG on/off builds, 16K and 64K pKVM boots (long).
matrix: tree selftests
	@$(S)/matrix.sh

# The random sequence test, long: fresh seeds in both protected modes
# (FUZZ_STEPS steps per seed, FUZZ_RUNS seeds per mode; FUZZ_JOBS=2 boots
# the two modes at once). Results in bench/fuzz/.
FUZZ_STEPS ?= 2000
FUZZ_RUNS ?= 4
FUZZ_JOBS ?= 1
fuzz: initramfs
	@FUZZ_JOBS=$(FUZZ_JOBS) $(S)/fuzz.sh $(FUZZ_STEPS) $(FUZZ_RUNS)

# The non-protected incidents' reproducer, long: vm_churn for REPRO_SECS
# per run in VHE and nVHE, without and with init's held VM, on the QEMU
# the harness uses (QEMU=, QEMU_EXTRA= to change it). Results in
# bench/incidents/repro-<date>/.
REPRO_SECS ?= 240
repro: kernel
	@$(S)/incident-repro.sh $(REPRO_SECS) vhe
	@$(S)/incident-repro.sh $(REPRO_SECS) nvhe

# Every prefix of the series builds (kernel, and selftests where touched).
bisect: kernel
	@$(S)/bisect-build.sh

# Code quality gates (also run by `make test`).
check: kernel
	@$(S)/check-series.sh && $(S)/check-quality.sh
