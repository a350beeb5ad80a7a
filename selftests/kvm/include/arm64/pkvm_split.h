/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the pKVM eager-split tests share (lib/arm64/pkvm_split.c): a guest
 * whose data memslot is backed by hugetlb pages and mapped with stage-2
 * blocks, guest passes that write or read its pages and count the faults
 * they take, a model of what the guest wrote and of what KVM splits and
 * write-protects, the checks against it, and on pKVM what EL2 did, read
 * from its hyp events (CONFIG_NVHE_EL2_TRACING) and from the test-only
 * switches and check calls (CONFIG_PKVM_SPLIT_ABI_TEST).
 */
#ifndef SELFTEST_KVM_PKVM_SPLIT_H
#define SELFTEST_KVM_PKVM_SPLIT_H

#include <linux/bitmap.h>
#include <linux/sizes.h>
#include <stdbool.h>

#include "kvm_util.h"

#define DATA_SLOT	1
#define TEST_GVA	SZ_1G
/*
 * The data memslot starts one block past 1GiB: block-aligned, but at an
 * odd block of the IPA space, so that the host's split windows, which
 * count from the memslot's first block, differ from windows aligned in
 * the IPA space (a regression to those fails the clear-time test).
 */
#define DATA_GPA	(SZ_1G + block_size)
#define MAX_PAGES	16384
#define MAX_VCPUS	3
/*
 * KVM_PKVM_SPLIT_MAX_BLOCKS: blocks one split hypercall covers, 4096
 * descriptors' worth (8 with 4KiB pages, 2 with 16KiB, 1 with 64KiB).
 */
#define SPLIT_BATCH	max_t(u64, 4096 / (getpagesize() / 8), 1)
/* Frames a vCPU's dirty buffer takes per run (debugfs kvm/pkvm_dirty_buf_entries). */
#define DIRTY_BUF_ENTRIES	511

#define FAST_DIRTY_PARAM	"/sys/module/kvm/parameters/pkvm_fast_dirty"
#define DIRTY_BUF_PARAM		"/sys/kernel/debug/kvm/pkvm_dirty_buf_entries"
#define COLLAPSE_PARAM		"/sys/kernel/debug/kvm/pkvm_collapse"
/* Test kit: EL2's wait between a dirty fault's read of the leaf and its update. */
#define FAULT_DELAY_PARAM	"/sys/kernel/debug/kvm/pkvm_fault_delay_us"
#define FAIL_PAGE_ALLOC		"/sys/kernel/debug/fail_page_alloc/"
#define FAIL_TIMES		1000000

enum { CMD_WRITE = 1, CMD_READ };

/* Guest-visible parameters of the next pass, per vCPU where they differ. */
extern u64 guest_cmd, guest_first, guest_last, guest_rounds;
extern u64 guest_stride[MAX_VCPUS], guest_offset[MAX_VCPUS];
extern u64 guest_page_size;
extern u8 guest_seed;
/* The seed each data page was last written with (0: never written). */
extern u8 page_seed[MAX_PAGES];
/* What the test expects of stage-2: blocks split, pages write-protected. */
extern bool blk_split[MAX_PAGES];
extern bool page_ro[MAX_PAGES];

static inline u64 pattern(u64 page, u64 word, u8 seed)
{
	return (TEST_GVA + page * guest_page_size + word * 8) ^
	       (seed * 0x9e3779b97f4a7c15ULL);
}

void guest_code(void);

struct split_stats {
	u64 hcalls, blocks, tlbi, donated, wrprotect;
};

struct test_vm {
	struct kvm_vm *vm;
	struct kvm_vcpu *vcpu;
	struct kvm_vcpu *vcpus[MAX_VCPUS];
	/* vCPUs that share a guest pass (1 unless set), vcpus[0] first. */
	int pass_vcpus;
	/* Times a write pass writes its pages, round r with seed + r (1 unless set). */
	int pass_rounds;
	u64 npages, nr_blocks, pages_per_block, page_size;
	u8 *hva;
	unsigned long *bitmap;
	unsigned long *expect;
};

/* The host, and the pKVM switches as the tests found or set them. */
extern bool pkvm;
extern u64 block_size;
/* pKVM resolves dirty-logging write faults at EL2 for the VMs created now. */
extern bool fast_dirty;
/*
 * pKVM restores in place the blocks EL2 split when logging stops
 * (debugfs kvm/pkvm_collapse); otherwise each is collapsed on the next fault.
 */
extern bool collapse;
extern u64 dirty_buf_entries;

/* What the last guest pass took, by where it was resolved. */
struct pass_faults {
	u64 host, el2, full, spurious;
};

extern struct pass_faults pass_faults;

/* What EL2 did, from its hyp events, summed over the events read so far. */
struct hyp_counts {
	u64 split_calls, split_blocks, split_tlbi, split_admitted;
	u64 wrprotect_calls;
	u64 collapse_calls, collapse_blocks, collapse_tlbi, collapse_skipped;
	u64 collapse_returned;
	u64 fault_full;
	u64 fault_waited;	/* the event's waited: lock held, or exchange lost */
	u64 fault_lost;		/* -EAGAIN: the exchange lost (lock-free fault only) */
};

extern struct hyp_counts hyp;

/* Checks the host and its block sizes, reads the switches, starts the events. */
void pkvm_split_setup(void);
/* -t: the one scenario to run (NULL: all of them). */
extern const char *only;
bool want(const char *scenario);
void set_only(const char *arg, const char * const *scenarios, int nr);

void hyp_events_read(void);
void hyp_events_stop(void);
void hyp_events_start(void);
void read_split_stats(struct test_vm *t, struct split_stats *s);
u64 sec_pagetables_kb(void);
void check_no_leak(u64 secpt, const char *after);
/* check_el2_records()'s count where EL2's dirty faults take the VM's lock */
#define NO_SHARED_WALKS	(~0ULL)
bool check_el2_records(struct test_vm *t, const char *when, u64 *walker_waits);
enum vm_guest_mode host_page_mode(void);
void slot0_no_thp(struct kvm_vm *vm);
void create_test_vm_vcpus(struct test_vm *t, u64 manual_caps, int nr_vcpus);
void create_test_vm(struct test_vm *t, u64 manual_caps);
void destroy_test_vm(struct test_vm *t);

u64 guest_pass(struct test_vm *t, int cmd, u64 first, u64 last, u64 stride,
	       u64 offset, u8 seed);

/* A guest pass by name: the pages, and for a write the pattern's seed. */
struct pass {
	u64 first, last;	/* pages [first, last); last 0: to the slot's end */
	u64 stride, offset;	/* every stride-th page (0: each) from first + offset */
	u8 seed;
};

u64 run_pass(struct test_vm *t, int cmd, struct pass p);
#define guest_write(t, ...)	run_pass(t, CMD_WRITE, (struct pass){ __VA_ARGS__ })
#define guest_read(t, ...)	run_pass(t, CMD_READ, (struct pass){ __VA_ARGS__ })

void check_fault_path(const char *when);
u64 logging_off(struct test_vm *t, u64 split, const char *when);
void check_no_fast_path(const char *when);
u64 count_pages(u64 first, u64 last, u64 stride, u64 offset);
u64 count_ro_pages(u64 first, u64 last, u64 stride, u64 offset);
u64 model_clear(struct test_vm *t, u64 first, u64 nr);
void check_memory(struct test_vm *t, const char *when);
void check_bitmap(struct test_vm *t, const char *when);
void check_split(struct test_vm *t, struct split_stats *before, u64 blocks,
		 const char *when);
void check_write_pass(struct test_vm *t, u64 stride, u64 offset, u8 seed,
		      u64 expected, const char *when);
void clear_range(struct test_vm *t, u64 first, u64 nr);
void set_data_region(struct test_vm *t, u64 gpa, u64 size);

/* A VM made with raw ioctls: a protected one, or one that is torn down. */
struct raw_vm {
	int kvm_fd, vm_fd, vcpu_fd;
	void *mem;
};

void start_raw_vm(struct raw_vm *p, unsigned long type, bool with_memory);
void stop_raw_vm(struct raw_vm *p);
bool read_ktap(const char *path, int expect, const char *what);

bool write_file(const char *path, const char *val);
u64 read_u64_file(const char *path);
bool arm_page_alloc_failure(u64 budget);
bool disarm_page_alloc_failure(void);
u64 clear_all_failing(struct test_vm *t, u64 budget);
void clear_all(struct test_vm *t);
u64 now_us(void);

bool param_or(const char *path, bool dflt);
bool param_enabled(const char *path);
bool fast_dirty_enabled(void);
bool set_param(const char *path, bool on);
void restore_fast_dirty(void);
bool host_is_pkvm(void);

#endif /* SELFTEST_KVM_PKVM_SPLIT_H */
