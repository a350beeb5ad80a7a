// SPDX-License-Identifier: GPL-2.0-only
/*
 * pkvm_split_test - eager huge-page splitting under dirty logging, and the
 * restore when logging stops.
 *
 * Runs in every host mode (pKVM included) on a guest whose memory is backed
 * by hugetlb pages and mapped with stage-2 blocks, with
 * KVM_CAP_ARM_EAGER_SPLIT_CHUNK_SIZE set to the block size:
 *
 * 1. enable: without manual-protect, enabling dirty logging splits every
 *    block; turning it off restores them (on pKVM, in place at EL2).
 * 2. clear: with manual-protect and initially-set, KVM_CLEAR_DIRTY_LOG
 *    splits the blocks of the range it clears, and only those.
 * 3. shared: splitting one guest's blocks leaves another guest that maps
 *    the same memory alone.
 * 4. On pKVM: topup, the split memcache top-up failing part-way (kernel
 *    fault injection, this thread only); small-buffer and fast-off, the
 *    enable and clear scenarios again with a 16-frame EL2 dirty buffer and
 *    with every dirty-logging fault left to the host.
 *
 * In each, every word of guest memory is checked after each step, a read
 * pass after splitting must take no stage-2 fault, every write pass must
 * fault exactly once per write-protected page it writes, and the dirty
 * bitmap must be exactly what the guest wrote. On pKVM those faults are
 * resolved at EL2 (the fast dirty-fault path: el2_dirty_faults), but for
 * the ones that find the vCPU's dirty buffer full, which go to the host;
 * with kvm.pkvm_fast_dirty=0 the host resolves them all. On a pKVM host the
 * hyp events of the split and restore calls (CONFIG_NVHE_EL2_TRACING, read
 * from tracefs) must show what EL2 did: every block split once, in batches,
 * with one page-table page per block, and the pages donated to EL2 must all
 * come back when the VM is destroyed.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "delay.h"
#include "kvm_util.h"
#include "pkvm_split.h"
#include "processor.h"
#include "test_util.h"
#include "ucall.h"

/* Without manual-protect: enabling dirty logging splits every block. */
static void test_split_on_enable(void)
{
	struct split_stats s0;
	struct test_vm t;
	u64 faults, k, n, secpt;

	create_test_vm(&t, 0);
	pr_info("enable-time split: %lu blocks of %lu KiB\n", t.nr_blocks, block_size >> 10);

	faults = guest_write(&t, .seed = 1);
	check_memory(&t, "populate");
	bitmap_zero(t.expect, t.npages);

	secpt = pkvm ? sec_pagetables_kb() : 0;
	read_split_stats(&t, &s0);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	check_split(&t, &s0, t.nr_blocks, "enable logging");
	if (pkvm) {
		struct split_stats s1;

		read_split_stats(&t, &s1);
		TEST_ASSERT(s1.hcalls - s0.hcalls <= DIV_ROUND_UP(t.nr_blocks, SPLIT_BATCH),
			    "%lu split hypercalls for %lu contiguous blocks",
			    s1.hcalls - s0.hcalls, t.nr_blocks);
	}
	check_memory(&t, "after split");

	faults = guest_read(&t);
	TEST_ASSERT(!faults, "read pass after split took %lu stage-2 faults", faults);

	for (k = 0; k < 3; k++) {
		check_write_pass(&t, 3, k, 2 + k, count_pages(0, t.npages, 3, k), "write pass");
		bitmap_zero(t.expect, t.npages);

		faults = guest_read(&t);
		TEST_ASSERT(!faults, "read pass %lu took %lu stage-2 faults", k, faults);
	}

	/*
	 * Fewer pages than the dirty buffer holds: with the fast path, every
	 * fault is EL2's and no exit is needed.
	 */
	n = min_t(u64, t.npages, dirty_buf_entries > 10 ? dirty_buf_entries - 9 : 1);
	faults = guest_write(&t, .last = n, .seed = 7);
	TEST_ASSERT(faults == n, "short write pass: %lu faults for %lu pages", faults, n);
	check_fault_path("short write pass");
	if (fast_dirty)
		TEST_ASSERT(pass_faults.el2 == n && !pass_faults.host,
			    "short write pass: %lu faults at EL2, %lu in the host, for %lu pages",
			    pass_faults.el2, pass_faults.host, n);
	kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
	check_bitmap(&t, "short write pass");
	bitmap_zero(t.expect, t.npages);
	check_memory(&t, "short write pass");

	/*
	 * Logging off: EL2 restores every block in place, or the first write
	 * to each block collapses it.
	 */
	n = t.nr_blocks - logging_off(&t, t.nr_blocks, "logging off");
	check_memory(&t, "after logging off");
	/*
	 * Every page the split took is back in the host: the tables of the
	 * restored blocks and what was left in the split cache.
	 */
	if (pkvm && collapse)
		check_no_leak(secpt, "logging off");
	faults = guest_read(&t);
	TEST_ASSERT(!faults, "read pass after logging off took %lu faults", faults);
	faults = guest_write(&t, .seed = 9);
	TEST_ASSERT(faults == n, "collapse: %lu faults, expected %lu for %lu blocks",
		    faults, n, t.nr_blocks);
	check_no_fast_path("collapse");
	check_memory(&t, "after collapse");

	/* Logging on again: every block splits again, and the log is exact. */
	read_split_stats(&t, &s0);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	check_split(&t, &s0, t.nr_blocks, "logging on again");
	bitmap_zero(t.expect, t.npages);
	faults = guest_read(&t);
	TEST_ASSERT(!faults, "read pass after logging on again took %lu faults", faults);
	check_write_pass(&t, 2, 1, 10, count_pages(0, t.npages, 2, 1), "logging on again");
	n = t.nr_blocks - logging_off(&t, t.nr_blocks, "logging off again");
	faults = guest_write(&t, .seed = 11);
	TEST_ASSERT(faults == n, "second collapse: %lu faults, expected %lu", faults, n);
	check_memory(&t, "after the second logging off");

	destroy_test_vm(&t);
}

/* Manual-protect + initially-set: KVM_CLEAR_DIRTY_LOG splits what it clears. */
static void test_split_on_clear(void)
{
	struct split_stats s0, s1, s2;
	struct test_vm t;
	u64 faults, half, b, k, blocks;

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	half = t.nr_blocks / 2;
	b = half * t.pages_per_block;	/* first page of the first block not cleared */
	pr_info("clear-time split: %lu blocks of %lu KiB, %s\n", t.nr_blocks, block_size >> 10,
		pkvm ? "split, then write-protect" : "write-protect, then split");

	guest_write(&t, .seed = 1);
	read_split_stats(&t, &s0);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	check_split(&t, &s0, 0, "enable logging (initially set)");
	bitmap_fill(t.expect, t.npages);

	faults = guest_read(&t);
	TEST_ASSERT(!faults, "read pass before clearing took %lu faults", faults);

	/* Clear the first half: the blocks it covers (and on pKVM, its window). */
	read_split_stats(&t, &s0);
	clear_range(&t, 0, b);
	check_split(&t, &s0, model_clear(&t, 0, b), "clear first half");
	check_memory(&t, "after clear");

	/* Hypercalls for one 64-page word, then for the next one. */
	read_split_stats(&t, &s0);
	clear_range(&t, b, 64);
	blocks = model_clear(&t, b, 64);
	read_split_stats(&t, &s1);
	clear_range(&t, b + 64, 64);
	TEST_ASSERT_EQ(model_clear(&t, b + 64, 64), 0);
	read_split_stats(&t, &s2);
	if (pkvm) {
		pr_info("KVM_CLEAR_DIRTY_LOG of one 64-page word: %lu split + %lu wrprotect hypercalls (%lu blocks split); next word %lu + %lu\n",
			s1.hcalls - s0.hcalls, s1.wrprotect - s0.wrprotect, s1.blocks - s0.blocks,
			s2.hcalls - s1.hcalls, s2.wrprotect - s1.wrprotect);
		TEST_ASSERT(s1.blocks - s0.blocks == blocks && s2.blocks == s1.blocks,
			    "word clears split %lu then %lu blocks, expected %lu then 0",
			    s1.blocks - s0.blocks, s2.blocks - s1.blocks, blocks);
		TEST_ASSERT(s2.hcalls == s1.hcalls && s2.wrprotect - s1.wrprotect == 1,
			    "second word of a split block took %lu split + %lu wrprotect hypercalls",
			    s2.hcalls - s1.hcalls, s2.wrprotect - s1.wrprotect);
		/* The window is one call's worth: one split, then the write-protect. */
		TEST_ASSERT(s1.hcalls - s0.hcalls == !!blocks &&
			    s1.wrprotect - s0.wrprotect == 1,
			    "first word: %lu split + %lu wrprotect hypercalls, expected %d + 1",
			    s1.hcalls - s0.hcalls, s1.wrprotect - s0.wrprotect, !!blocks);
	}
	check_memory(&t, "after word clears");

	faults = guest_read(&t);
	TEST_ASSERT(!faults, "read pass after clearing took %lu faults", faults);

	/* Write every third page: exactly the write-protected ones fault. */
	check_write_pass(&t, 3, 0, 2, count_ro_pages(0, t.npages, 3, 0),
			 "write pass (manual protect)");

	/* Clear the rest in 64-page words: every remaining block splits. */
	read_split_stats(&t, &s0);
	for (k = b, blocks = 0; k < t.npages; k += 64) {
		clear_range(&t, k, min_t(u64, 64, t.npages - k));
		blocks += model_clear(&t, k, min_t(u64, 64, t.npages - k));
	}
	check_split(&t, &s0, blocks, "clear second half by words");
	clear_range(&t, 0, b);
	model_clear(&t, 0, b);
	for (k = 0; k < t.nr_blocks; k++)
		TEST_ASSERT(blk_split[k], "block %lu never split", k);

	faults = guest_read(&t);
	TEST_ASSERT(!faults, "final read pass took %lu faults", faults);
	check_write_pass(&t, 5, 1, 3, count_ro_pages(0, t.npages, 5, 1), "final write pass");

	destroy_test_vm(&t);
}

/*
 * Two guests map the same host memory (a host page may be shared with
 * several non-protected guests): splitting one guest's blocks must leave
 * the other's stage-2 alone, and both keep seeing the same data.
 */
static void test_split_shared_with_other_vm(void)
{
	struct kvm_userspace_memory_region2 region;
	struct test_vm a, b;
	u64 faults, n;

	create_test_vm(&a, 0);
	create_test_vm(&b, 0);
	/* b first runs on its own memory: its code, stack and page-tables fault in. */
	guest_write(&b, .seed = 1);
	guest_write(&a, .seed = 1);

	/* Point b's data slot at a's memory. */
	region = memslot2region(b.vm, DATA_SLOT)->region;
	region.memory_size = 0;
	vm_ioctl(b.vm, KVM_SET_USER_MEMORY_REGION2, &region);
	region.memory_size = a.npages * a.page_size;
	region.userspace_addr = (u64)a.hva;
	vm_ioctl(b.vm, KVM_SET_USER_MEMORY_REGION2, &region);

	faults = guest_read(&b);
	TEST_ASSERT(faults == b.nr_blocks, "other guest: %lu faults to map %lu blocks",
		    faults, b.nr_blocks);

	memset(blk_split, 0, sizeof(blk_split));
	vm_mem_region_set_flags(a.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	faults = guest_read(&b);
	TEST_ASSERT(!faults, "other guest took %lu faults after a's split", faults);

	n = count_pages(0, a.npages, 3, 1);
	faults = guest_write(&a, .stride = 3, .offset = 1, .seed = 2);
	TEST_ASSERT(faults == n, "split guest: %lu faults for %lu write-protected pages",
		    faults, n);
	faults = guest_read(&b);
	TEST_ASSERT(!faults, "other guest took %lu faults reading a's writes", faults);
	check_memory(&a, "shared with another guest");
	pr_info("shared with another guest: %lu blocks split in one, none touched in the other\n",
		a.nr_blocks);

	destroy_test_vm(&b);
	destroy_test_vm(&a);
}

/*
 * The split memcache top-up fails part-way (kernel fault injection on this
 * thread's page allocations after a budget): KVM_CLEAR_DIRTY_LOG still
 * succeeds, the split stops early at a batch boundary, the guest's data,
 * its fault counts and the dirty log stay exact, and no donated page is
 * lost (checked by SecPageTables when the VM is gone).
 */
static void test_split_topup_failure(bool required)
{
	static const u64 budgets[] = { 0, 1, 4, 8, 9, 12, 17, 100 };
	u64 prev_blocks = 0, pooled = 0, faults, blocks, failed, b, i;
	struct split_stats s0, s1;
	bool partial = false;
	struct test_vm t;

	if (!pkvm)
		return;
	if (!disarm_page_alloc_failure() || access("/proc/thread-self/make-it-fail", W_OK)) {
		TEST_ASSERT(!required, "no page allocation fault injection (%s)",
			    FAIL_PAGE_ALLOC);
		pr_info("top-up failure: SKIP (no page allocation fault injection)\n");
		return;
	}

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	guest_write(&t, .seed = 1);

	for (i = 0; i < ARRAY_SIZE(budgets); i++) {
		vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
		memset(blk_split, 0, sizeof(blk_split));

		read_split_stats(&t, &s0);
		failed = clear_all_failing(&t, budgets[i]);
		read_split_stats(&t, &s1);
		blocks = s1.blocks - s0.blocks;
		pr_info("top-up with %lu pages allowed: %lu allocations failed, %lu of %lu blocks split\n",
			budgets[i], failed, blocks, t.nr_blocks);

		/* A failure may also hit a top-up after the last split. */
		TEST_ASSERT(failed || blocks == t.nr_blocks,
			    "no allocation failed, %lu of %lu blocks split",
			    blocks, t.nr_blocks);
		partial |= blocks && blocks < t.nr_blocks;
		TEST_ASSERT(budgets[i] || (failed && !blocks),
			    "no page allowed: %lu failures, %lu blocks split", failed, blocks);
		/*
		 * No more blocks than pages allowed, but for the tables of the
		 * blocks collapsed on fault in the round before: they are left
		 * in the VM's pool at EL2, which the split draws on first.
		 */
		TEST_ASSERT(blocks <= budgets[i] + pooled,
			    "%lu pages allowed: %lu blocks split, %lu collapsed on fault before",
			    budgets[i], blocks, pooled);
		TEST_ASSERT(blocks % SPLIT_BATCH == 0 || blocks == t.nr_blocks,
			    "split stopped inside a batch: %lu blocks", blocks);
		prev_blocks = blocks;

		/* The blocks EL2 split are the first ones: model them. */
		for (b = 0; b < t.nr_blocks; b++)
			blk_split[b] = b < blocks;
		for (b = 0; b < t.npages; b++)
			page_ro[b] = true;
		check_memory(&t, "after a failed top-up");
		faults = guest_read(&t);
		TEST_ASSERT(!faults, "read pass after a failed top-up took %lu faults", faults);

		/*
		 * Nothing was left half-done: every page faults exactly once
		 * on write, by permission in the split blocks, and broken out
		 * of the block on fault (as without eager split) in the rest.
		 */
		faults = guest_write(&t, .seed = 2 + i);
		TEST_ASSERT(faults == t.npages, "write pass: %lu faults for %lu pages",
			    faults, t.npages);
		kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
		check_bitmap(&t, "after a failed top-up");
		check_memory(&t, "after a failed top-up");

		/*
		 * Write-protect everything, then collapse for the next round:
		 * EL2 restores the split blocks, the others (broken out on
		 * fault) fault once each.
		 */
		clear_all(&t);
		b = t.nr_blocks - logging_off(&t, blocks, "logging off after a failed top-up");
		faults = guest_write(&t, .seed = 100 + i);
		TEST_ASSERT(faults == b, "collapse: %lu faults, expected %lu for %lu blocks",
			    faults, b, t.nr_blocks);
		pooled = b;
		check_no_fast_path("collapse after a failed top-up");
		check_memory(&t, "collapse after a failed top-up");
	}
	TEST_ASSERT(prev_blocks == t.nr_blocks, "top-up never succeeded");
	TEST_ASSERT(partial || t.nr_blocks <= SPLIT_BATCH,
		    "no budget stopped the split part-way through %lu blocks", t.nr_blocks);
	destroy_test_vm(&t);
}

/*
 * The enable-time test again with a dirty buffer of 16 frames: EL2 leaves a
 * fault on a marked page to the host each time it fills, and the host
 * resolves exactly those.
 */
static void test_small_dirty_buffer(u64 secpt)
{
	atexit(restore_fast_dirty);
	TEST_ASSERT(write_file(DIRTY_BUF_PARAM, "16"), "cannot write " DIRTY_BUF_PARAM);
	dirty_buf_entries = read_u64_file(DIRTY_BUF_PARAM);
	TEST_ASSERT_EQ(dirty_buf_entries, 16);
	test_split_on_enable();
	check_no_leak(secpt, "enable-time split, 16-frame dirty buffer");
	TEST_ASSERT(write_file(DIRTY_BUF_PARAM, "0"), "cannot write " DIRTY_BUF_PARAM);
	dirty_buf_entries = DIRTY_BUF_ENTRIES;
}

/*
 * Test kernels only: the kit's cap on the frames a run may buffer is host
 * memory (the host's vCPU), so EL2 must not trust it: each value beyond
 * the buffer's 511 frames is taken as 511 (the kit's switch passes it
 * through unchecked). A cap EL2 obeyed would write frames past the
 * buffer's page, which the host never drains: the exact dirty-log check
 * fails, or EL2 faults on the next page. Without the kit there is no cap.
 *
 * That only shows if a run of the vCPU fills the buffer: 511 faults with
 * no exit between them. Under TCG the host's timer tick comes first (an
 * exit every few dozen faults); under QEMU's -icount, where time follows
 * the instructions executed, a tick comes every few thousand faults. With
 * -F the buffer must have filled for each limit.
 */
static void test_hostile_dirty_buf_limit(u64 secpt, bool fill_required)
{
	static const char * const limits[] = { "512", "4096", "4294967295" };
	char what[64];
	u64 full;

	atexit(restore_fast_dirty);
	for (int i = 0; i < ARRAY_SIZE(limits); i++) {
		hyp_events_read();
		full = hyp.fault_full;
		TEST_ASSERT(write_file(DIRTY_BUF_PARAM, limits[i]),
			    "cannot write %s to " DIRTY_BUF_PARAM, limits[i]);
		TEST_ASSERT_EQ(read_u64_file(DIRTY_BUF_PARAM), strtoull(limits[i], NULL, 0));
		dirty_buf_entries = DIRTY_BUF_ENTRIES;
		test_split_on_enable();
		snprintf(what, sizeof(what), "enable-time split, dirty buffer limit %s", limits[i]);
		check_no_leak(secpt, what);
		hyp_events_read();
		full = hyp.fault_full - full;
		pr_info("dirty buffer limit %s: the buffer was full %lu times\n", limits[i], full);
		TEST_ASSERT(full || !fill_required,
			    "-F: dirty buffer limit %s: the buffer never filled", limits[i]);
	}
	TEST_ASSERT(write_file(DIRTY_BUF_PARAM, "0"), "cannot write " DIRTY_BUF_PARAM);
	dirty_buf_entries = DIRTY_BUF_ENTRIES;
}

/* The same clear-time test with every dirty-logging fault left to the host. */
static void test_fast_dirty_off(u64 secpt)
{
	atexit(restore_fast_dirty);
	TEST_ASSERT(write_file(FAST_DIRTY_PARAM, "0"), "cannot write " FAST_DIRTY_PARAM);
	fast_dirty = fast_dirty_enabled();
	TEST_ASSERT(!fast_dirty, FAST_DIRTY_PARAM " still set");
	test_split_on_clear();
	check_no_leak(secpt, "clear-time split, fast path off");
	TEST_ASSERT(write_file(FAST_DIRTY_PARAM, "1"), "cannot write " FAST_DIRTY_PARAM);
	fast_dirty = fast_dirty_enabled();
	TEST_ASSERT(fast_dirty, FAST_DIRTY_PARAM " not set again");
}

static const char * const scenarios[] = {
	"enable", "clear", "shared", "topup", "small-buffer", "hostile-limit",
	"fast-off",
};

int main(int argc, char *argv[])
{
	bool fault_required = false, fill_required = false;
	u64 secpt;
	int opt;

	while ((opt = getopt(argc, argv, "fFt:")) != -1) {
		switch (opt) {
		case 'f':
			fault_required = true;
			break;
		case 'F':
			fill_required = true;
			break;
		case 't':
			set_only(optarg, scenarios, ARRAY_SIZE(scenarios));
			break;
		default:
			printf("usage: %s [-f] [-F] [-t SCENARIO]\n"
			       " -f: fail if page allocation fault injection or the test\n"
			       "     kit's switches are missing\n"
			       " -F: hostile-limit must fill the dirty buffer (QEMU -icount)\n"
			       " -t: only one scenario: enable, clear, shared, and on pKVM\n"
			       "     topup, small-buffer, hostile-limit or fast-off\n", argv[0]);
			/* A bad option is a broken test line, not a skip. */
			exit(KSFT_FAIL);
		}
	}
	pkvm_split_setup();

	secpt = sec_pagetables_kb();
	if (want("enable")) {
		test_split_on_enable();
		check_no_leak(secpt, "enable-time split");
		if (collapse && !access(COLLAPSE_PARAM, W_OK)) {
			/* Blocks collapsed on fault, as without the in-place restore. */
			collapse = set_param(COLLAPSE_PARAM, false);
			test_split_on_enable();
			collapse = set_param(COLLAPSE_PARAM, true);
			check_no_leak(secpt, "enable-time split, collapse on fault");
		}
	}
	if (want("clear")) {
		test_split_on_clear();
		check_no_leak(secpt, "clear-time split");
	}
	if (want("shared")) {
		test_split_shared_with_other_vm();
		check_no_leak(secpt, "split shared with another guest");
	}
	if (pkvm && fast_dirty) {
		/* The buffer's size is a switch of test kernels only. */
		if (!access(DIRTY_BUF_PARAM, W_OK)) {
			dirty_buf_entries = read_u64_file(DIRTY_BUF_PARAM) ?: DIRTY_BUF_ENTRIES;
			if (want("small-buffer"))
				test_small_dirty_buffer(secpt);
			if (want("hostile-limit"))
				test_hostile_dirty_buf_limit(secpt, fill_required);
		} else {
			TEST_ASSERT(!fault_required, "-f: no %s (no test kit)", DIRTY_BUF_PARAM);
			pr_info("small-buffer: not run, no %s (no test kit)\n", DIRTY_BUF_PARAM);
		}
		if (want("fast-off"))
			test_fast_dirty_off(secpt);
	}
	if (pkvm && want("topup")) {
		test_split_topup_failure(fault_required);
		check_no_leak(secpt, "failed top-ups");
	}
	pr_info("PASS\n");
	return 0;
}
