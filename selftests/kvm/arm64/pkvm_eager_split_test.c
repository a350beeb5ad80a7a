// SPDX-License-Identifier: GPL-2.0-only
/*
 * pkvm_eager_split_test - eager huge-page splitting under dirty logging.
 *
 * Runs in every host mode (pKVM included) on a guest whose memory is backed
 * by hugetlb pages and mapped with stage-2 blocks, with
 * KVM_CAP_ARM_EAGER_SPLIT_CHUNK_SIZE set to the block size:
 *
 * 1. Without manual-protect, enabling dirty logging splits every block.
 * 2. With manual-protect and initially-set, KVM_CLEAR_DIRTY_LOG splits the
 *    blocks of the range it clears, and only those.
 *
 * In both, every word of guest memory is checked after each step, a read
 * pass after splitting must take no stage-2 fault, every write pass must
 * fault exactly once per write-protected page it writes, and the dirty
 * bitmap must be exactly what the guest wrote. On a pKVM host the split
 * counters (VM stats) must show what EL2 did: every block split once, in
 * batches, with one page-table page per block, and the pages donated to EL2
 * must all come back when the VM is destroyed.
 */
#include <linux/bitmap.h>
#include <linux/sizes.h>
#include <stdio.h>
#include <string.h>

#include "kvm_util.h"
#include "processor.h"
#include "test_util.h"
#include "ucall.h"

#define DATA_SLOT	1
#define TEST_GPA	SZ_1G
#define TEST_GVA	SZ_1G
#define MAX_PAGES	8192
#define SPLIT_BATCH	8	/* KVM_PKVM_SPLIT_MAX_BLOCKS */

enum { CMD_WRITE = 1, CMD_READ };

/* Guest-visible parameters of the next pass. */
static u64 guest_cmd, guest_stride, guest_offset, guest_first, guest_last;
static u64 guest_page_size;
static u8 guest_seed;
static u8 page_seed[MAX_PAGES];

static inline u64 pattern(u64 page, u64 word, u8 seed)
{
	return (TEST_GVA + page * guest_page_size + word * 8) ^
	       (seed * 0x9e3779b97f4a7c15ULL);
}

static void guest_code(void)
{
	for (;;) {
		u64 words = guest_page_size / 8;
		u64 i, w;

		/* Fault in page_seed[] now, so that only test pages fault below. */
		for (i = 0; i < MAX_PAGES; i += 64)
			READ_ONCE(page_seed[i]);

		for (i = guest_first + guest_offset; i < guest_last; i += guest_stride) {
			u64 *page = (u64 *)(TEST_GVA + i * guest_page_size);

			if (guest_cmd == CMD_WRITE) {
				for (w = 0; w < words; w++)
					WRITE_ONCE(page[w], pattern(i, w, guest_seed));
			} else {
				GUEST_ASSERT_EQ(READ_ONCE(page[0]), pattern(i, 0, page_seed[i]));
				GUEST_ASSERT_EQ(READ_ONCE(page[words - 1]),
						pattern(i, words - 1, page_seed[i]));
			}
		}
		GUEST_SYNC(guest_cmd);
	}
}

struct split_stats {
	u64 hcalls, blocks, tlbi, donated, max_cycles, wrprotect;
};

struct test_vm {
	struct kvm_vm *vm;
	struct kvm_vcpu *vcpu;
	u64 npages, nr_blocks, pages_per_block, page_size;
	u8 *hva;
	unsigned long *bitmap;
	unsigned long *expect;
};

static bool pkvm;
static u64 block_size;

static void read_split_stats(struct test_vm *t, struct split_stats *s)
{
	s->hcalls = vm_get_stat(t->vm, pkvm_split_hcalls);
	s->blocks = vm_get_stat(t->vm, pkvm_split_blocks);
	s->tlbi = vm_get_stat(t->vm, pkvm_split_tlbi);
	s->donated = vm_get_stat(t->vm, pkvm_split_pages_donated);
	s->max_cycles = vm_get_stat(t->vm, pkvm_split_max_cycles);
	s->wrprotect = vm_get_stat(t->vm, pkvm_wrprotect_hcalls);
}

/*
 * Pages donated for stage-2 (and split) page-tables, as /proc/meminfo
 * accounts them; vm/stat_refresh first folds the per-CPU deltas in.
 */
static u64 sec_pagetables_kb(void)
{
	char line[128];
	u64 kb = 0;
	FILE *f;

	f = fopen("/proc/sys/vm/stat_refresh", "w");
	TEST_ASSERT(f, "open /proc/sys/vm/stat_refresh");
	fputs("1", f);
	fclose(f);

	f = fopen("/proc/meminfo", "r");
	TEST_ASSERT(f, "open /proc/meminfo");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SecPageTables: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void create_test_vm(struct test_vm *t, u64 manual_caps)
{
	u64 gpa = TEST_GPA;

	kvm_eager_split_chunk_size = block_size;
	t->vm = vm_create_with_one_vcpu(&t->vcpu, guest_code);
	kvm_eager_split_chunk_size = 0;

	if (manual_caps)
		vm_enable_cap(t->vm, KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2, manual_caps);

	t->page_size = t->vm->page_size;
	t->pages_per_block = block_size / t->page_size;
	t->nr_blocks = min_t(u64, 16, max_t(u64, 2, SZ_32M / block_size));
	t->npages = t->nr_blocks * t->pages_per_block;
	TEST_ASSERT(t->npages <= MAX_PAGES, "too many pages: %lu", t->npages);

	vm_userspace_mem_region_add(t->vm, VM_MEM_SRC_ANONYMOUS_HUGETLB, gpa,
				    DATA_SLOT, t->npages, 0);
	virt_map(t->vm, TEST_GVA, gpa, t->npages);
	t->hva = addr_gpa2hva(t->vm, gpa);
	t->bitmap = bitmap_zalloc(t->npages);
	t->expect = bitmap_zalloc(t->npages);

	guest_page_size = t->page_size;
	sync_global_to_guest(t->vm, guest_page_size);
	memset(page_seed, 0, sizeof(page_seed));
}

static void destroy_test_vm(struct test_vm *t)
{
	free(t->bitmap);
	free(t->expect);
	kvm_vm_free(t->vm);
}

/*
 * Run one guest pass over pages first + offset + k * stride < last and
 * return the stage-2 memory faults it took. Writes also record the pages in
 * t->expect, the bitmap of pages the guest dirtied.
 */
static u64 guest_pass(struct test_vm *t, int cmd, u64 first, u64 last,
		      u64 stride, u64 offset, u8 seed)
{
	struct ucall uc;
	u64 before, i;

	guest_cmd = cmd;
	guest_first = first;
	guest_last = last;
	guest_stride = stride;
	guest_offset = offset;
	guest_seed = seed;
	sync_global_to_guest(t->vm, guest_cmd);
	sync_global_to_guest(t->vm, guest_first);
	sync_global_to_guest(t->vm, guest_last);
	sync_global_to_guest(t->vm, guest_stride);
	sync_global_to_guest(t->vm, guest_offset);
	sync_global_to_guest(t->vm, guest_seed);
	sync_global_to_guest(t->vm, page_seed);

	before = vcpu_get_stat(t->vcpu, stage2_mem_faults);
	vcpu_run(t->vcpu);
	switch (get_ucall(t->vcpu, &uc)) {
	case UCALL_SYNC:
		TEST_ASSERT_EQ(uc.args[1], cmd);
		break;
	case UCALL_ABORT:
		REPORT_GUEST_ASSERT(uc);
		break;
	default:
		TEST_FAIL("unexpected ucall %lu", uc.cmd);
	}

	if (cmd == CMD_WRITE) {
		for (i = first + offset; i < last; i += stride) {
			page_seed[i] = seed;
			__set_bit(i, t->expect);
		}
	}
	return vcpu_get_stat(t->vcpu, stage2_mem_faults) - before;
}

static u64 count_pages(u64 first, u64 last, u64 stride, u64 offset)
{
	return first + offset >= last ? 0 : DIV_ROUND_UP(last - first - offset, stride);
}

/* Every word of every page must hold what the guest last wrote there. */
static void check_memory(struct test_vm *t, const char *when)
{
	u64 words = t->page_size / 8, i, w;

	for (i = 0; i < t->npages; i++) {
		u64 *page = (u64 *)(t->hva + i * t->page_size);

		for (w = 0; w < words; w++)
			TEST_ASSERT(page[w] == pattern(i, w, page_seed[i]),
				    "%s: page %lu word %lu is 0x%lx, expected 0x%lx",
				    when, i, w, page[w], pattern(i, w, page_seed[i]));
	}
}

static void check_bitmap(struct test_vm *t, const char *when)
{
	u64 i;

	for (i = 0; i < t->npages; i++)
		TEST_ASSERT(test_bit(i, t->bitmap) == test_bit(i, t->expect),
			    "%s: dirty bit of page %lu is %d, expected %d", when, i,
			    test_bit(i, t->bitmap), test_bit(i, t->expect));
}

static void check_split(struct test_vm *t, struct split_stats *before,
			u64 blocks, const char *when)
{
	struct split_stats now;
	u64 hcalls;

	if (!pkvm)
		return;

	read_split_stats(t, &now);
	hcalls = now.hcalls - before->hcalls;
	TEST_ASSERT(now.blocks - before->blocks == blocks,
		    "%s: EL2 split %lu blocks, expected %lu", when,
		    now.blocks - before->blocks, blocks);
	TEST_ASSERT(now.tlbi - before->tlbi <= hcalls,
		    "%s: %lu split TLBIs for %lu hypercalls", when,
		    now.tlbi - before->tlbi, hcalls);
	TEST_ASSERT(now.donated - before->donated <= blocks,
		    "%s: %lu pages donated for %lu blocks", when,
		    now.donated - before->donated, blocks);
	pr_info("%s: %lu blocks split by %lu hypercalls, %lu TLBIs, %lu pages donated, longest call %lu cycles\n",
		when, blocks, hcalls, now.tlbi - before->tlbi,
		now.donated - before->donated, now.max_cycles);
}

/* Without manual-protect: enabling dirty logging splits every block. */
static void test_split_on_enable(void)
{
	struct split_stats s0;
	struct test_vm t;
	u64 faults, k, n;

	create_test_vm(&t, 0);
	pr_info("enable-time split: %lu blocks of %lu KiB\n", t.nr_blocks, block_size >> 10);

	faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 1);
	check_memory(&t, "populate");
	bitmap_zero(t.expect, t.npages);

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

	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "read pass after split took %lu stage-2 faults", faults);

	for (k = 0; k < 3; k++) {
		n = count_pages(0, t.npages, 3, k);
		faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 3, k, 2 + k);
		TEST_ASSERT(faults == n, "write pass %lu: %lu faults for %lu write-protected pages",
			    k, faults, n);
		kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
		check_bitmap(&t, "write pass");
		bitmap_zero(t.expect, t.npages);
		check_memory(&t, "write pass");

		faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
		TEST_ASSERT(!faults, "read pass %lu took %lu stage-2 faults", k, faults);
	}

	/* Logging off: the first write to each block collapses it again. */
	vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
	faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 9);
	TEST_ASSERT(faults == t.nr_blocks, "collapse: %lu faults for %lu blocks",
		    faults, t.nr_blocks);
	check_memory(&t, "after collapse");

	destroy_test_vm(&t);
}

/* KVM_CLEAR_DIRTY_LOG of pages [first, first + nr): bit 0 is @first. */
static void clear_range(struct test_vm *t, u64 first, u64 nr)
{
	u64 i;

	bitmap_zero(t->bitmap, t->npages);
	for (i = 0; i < nr; i++) {
		__set_bit(i, t->bitmap);
		__clear_bit(first + i, t->expect);
	}
	kvm_vm_clear_dirty_log(t->vm, DATA_SLOT, t->bitmap, first, nr);
}

/* Manual-protect + initially-set: KVM_CLEAR_DIRTY_LOG splits what it clears. */
static void test_split_on_clear(void)
{
	struct split_stats s0, s1, s2;
	struct test_vm t;
	u64 faults, half, b, n, k;

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	half = t.nr_blocks / 2;
	b = half * t.pages_per_block;	/* first page of the first block not cleared */
	pr_info("clear-time split: %lu blocks of %lu KiB\n", t.nr_blocks, block_size >> 10);

	guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 1);
	read_split_stats(&t, &s0);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	check_split(&t, &s0, 0, "enable logging (initially set)");
	bitmap_fill(t.expect, t.npages);

	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "read pass before clearing took %lu faults", faults);

	/* Clear the first half: its blocks, and only those, are split. */
	read_split_stats(&t, &s0);
	clear_range(&t, 0, b);
	check_split(&t, &s0, half, "clear first half");
	check_memory(&t, "after clear");

	/* Hypercalls for one 64-page word, first in its block, then the next. */
	read_split_stats(&t, &s0);
	clear_range(&t, b, 64);
	read_split_stats(&t, &s1);
	clear_range(&t, b + 64, 64);
	read_split_stats(&t, &s2);
	if (pkvm) {
		pr_info("KVM_CLEAR_DIRTY_LOG of one 64-page word: first in a block %lu split + %lu wrprotect hypercalls; next word %lu + %lu\n",
			s1.hcalls - s0.hcalls, s1.wrprotect - s0.wrprotect,
			s2.hcalls - s1.hcalls, s2.wrprotect - s1.wrprotect);
		TEST_ASSERT(s1.blocks - s0.blocks == 1 && s2.blocks == s1.blocks,
			    "word clears split %lu then %lu blocks, expected 1 then 0",
			    s1.blocks - s0.blocks, s2.blocks - s1.blocks);
		TEST_ASSERT(s2.hcalls == s1.hcalls && s2.wrprotect - s1.wrprotect == 1,
			    "second word of a split block took %lu split + %lu wrprotect hypercalls",
			    s2.hcalls - s1.hcalls, s2.wrprotect - s1.wrprotect);
	}
	check_memory(&t, "after word clears");

	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "read pass after clearing took %lu faults", faults);

	/*
	 * Write every third page: only the pages write-protected by the clears
	 * fault, i.e. all of the first half plus the whole block the word
	 * clears hit (write protection of a block precedes its split).
	 */
	n = count_pages(0, b + t.pages_per_block, 3, 0);
	faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 3, 0, 2);
	TEST_ASSERT(faults == n, "write pass: %lu faults, expected %lu", faults, n);
	kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
	check_bitmap(&t, "write pass (manual protect)");
	check_memory(&t, "write pass (manual protect)");

	/* Clear the rest in 64-page words: every remaining block splits. */
	read_split_stats(&t, &s0);
	for (k = b; k < t.npages; k += 64)
		clear_range(&t, k, min_t(u64, 64, t.npages - k));
	check_split(&t, &s0, t.nr_blocks - half - 1, "clear second half by words");
	clear_range(&t, 0, b);

	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "final read pass took %lu faults", faults);
	n = count_pages(0, t.npages, 5, 1);
	faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 5, 1, 3);
	TEST_ASSERT(faults == n, "final write pass: %lu faults, expected %lu", faults, n);
	kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
	check_bitmap(&t, "final write pass");
	check_memory(&t, "final");

	destroy_test_vm(&t);
}

/* Protected VMs keep refusing eager split. */
static void test_protected_vm_refuses(void)
{
	struct kvm_enable_cap cap = {
		.cap = KVM_CAP_ARM_EAGER_SPLIT_CHUNK_SIZE,
		.args[0] = block_size,
	};
	int kvm_fd, vm_fd, ret;

	/* The library refuses VM types on arm64: create it by hand. */
	kvm_fd = open_kvm_dev_path_or_exit();
	vm_fd = __kvm_ioctl(kvm_fd, KVM_CREATE_VM, (void *)KVM_VM_TYPE_ARM_PROTECTED);
	TEST_ASSERT(vm_fd >= 0, KVM_IOCTL_ERROR(KVM_CREATE_VM, vm_fd));

	ret = ioctl(vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_ARM_SUPPORTED_BLOCK_SIZES);
	TEST_ASSERT(ret == 0, "protected VM reports block sizes 0x%x", ret);
	ret = ioctl(vm_fd, KVM_ENABLE_CAP, &cap);
	TEST_ASSERT(ret == -1 && errno == EINVAL,
		    "protected VM accepted eager split: ret %d errno %d", ret, errno);

	close(vm_fd);
	close(kvm_fd);
}

static bool host_is_pkvm(void)
{
	char cmdline[4096] = "";
	FILE *f = fopen("/proc/cmdline", "r");

	if (f) {
		if (!fgets(cmdline, sizeof(cmdline), f))
			cmdline[0] = '\0';
		fclose(f);
	}
	return strstr(cmdline, "kvm-arm.mode=protected");
}

int main(int argc, char *argv[])
{
	u64 sizes, secpt;

	TEST_REQUIRE(kvm_has_cap(KVM_CAP_ARM_SUPPORTED_BLOCK_SIZES));
	TEST_REQUIRE(kvm_has_cap(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2));

	pkvm = host_is_pkvm();
	block_size = get_backing_src_pagesz(VM_MEM_SRC_ANONYMOUS_HUGETLB);
	sizes = kvm_check_cap(KVM_CAP_ARM_SUPPORTED_BLOCK_SIZES);
	pr_info("host %s, supported block sizes 0x%lx, hugetlb block %lu KiB\n",
		pkvm ? "pKVM" : "non-protected KVM", sizes, block_size >> 10);
	TEST_ASSERT(sizes & block_size, "block size 0x%lx not supported (0x%lx)",
		    block_size, sizes);
	if (pkvm)
		TEST_ASSERT(!(sizes & ~(getpagesize() | block_size)),
			    "pKVM claims block sizes it does not map: 0x%lx", sizes);

	secpt = sec_pagetables_kb();
	test_split_on_enable();
	test_split_on_clear();
	if (pkvm) {
		test_protected_vm_refuses();
		TEST_ASSERT(sec_pagetables_kb() == secpt,
			    "SecPageTables %lu kB after the VMs are gone, %lu kB before",
			    sec_pagetables_kb(), secpt);
	}
	pr_info("PASS\n");
	return 0;
}
