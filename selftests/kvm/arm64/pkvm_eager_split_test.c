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
 * bitmap must be exactly what the guest wrote. On pKVM those faults are
 * resolved at EL2 (the fast dirty-fault path: el2_dirty_faults), but for
 * the ones that find the vCPU's dirty buffer full, which go to the host;
 * with kvm.pkvm_fast_dirty=0 the host resolves them all. On a pKVM host the
 * hyp events of the split and restore calls (CONFIG_NVHE_EL2_TRACING, read
 * from tracefs) must show what EL2 did: every block split once, in batches,
 * with one page-table page per block, and the pages donated to EL2 must all
 * come back when the VM is destroyed.
 *
 * Then, with nothing to be lost: splits racing with vCPUs faulting on the
 * same range, with the memslot being deleted, moved or mprotect()ed, and
 * on pKVM with the split memcache top-up failing part-way (kernel fault
 * injection, this thread only) and with the VMM killed inside a split.
 */
#include <linux/bitmap.h>
#include <linux/sizes.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "delay.h"
#include "kvm_util.h"
#include "processor.h"
#include "test_util.h"
#include "ucall.h"

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
/*
 * KVM_PKVM_SPLIT_MAX_BLOCKS: blocks one split hypercall covers, 4096
 * descriptors' worth (8 with 4KiB pages, 2 with 16KiB, 1 with 64KiB).
 */
#define SPLIT_BATCH	max_t(u64, 4096 / (getpagesize() / 8), 1)

enum { CMD_WRITE = 1, CMD_READ };

/* Guest-visible parameters of the next pass. */
#define MAX_VCPUS	3

/* A pass's stride and offset are per vCPU: two vCPUs can share a pass. */
static u64 guest_cmd, guest_first, guest_last;
static u64 guest_stride[MAX_VCPUS], guest_offset[MAX_VCPUS];
static u64 guest_page_size;
static u8 guest_seed;
static u8 page_seed[MAX_PAGES];

/* What the test expects of stage-2: blocks split, pages write-protected. */
static bool blk_split[MAX_PAGES];
static bool page_ro[MAX_PAGES];

static inline u64 pattern(u64 page, u64 word, u8 seed)
{
	return (TEST_GVA + page * guest_page_size + word * 8) ^
	       (seed * 0x9e3779b97f4a7c15ULL);
}

static void guest_code(void)
{
	for (;;) {
		u64 words = guest_page_size / 8, id = guest_get_vcpuid();
		u64 i, w;

		/* Fault in page_seed[] now, so that only test pages fault below. */
		for (i = 0; i < MAX_PAGES; i += 64)
			READ_ONCE(page_seed[i]);

		for (i = guest_first + guest_offset[id]; i < guest_last; i += guest_stride[id]) {
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
	u64 hcalls, blocks, tlbi, donated, wrprotect;
};

struct test_vm {
	struct kvm_vm *vm;
	struct kvm_vcpu *vcpu;
	struct kvm_vcpu *vcpus[MAX_VCPUS];
	/* vCPUs that share a guest pass (1 unless set), vcpus[0] first. */
	int pass_vcpus;
	u64 npages, nr_blocks, pages_per_block, page_size;
	u8 *hva;
	unsigned long *bitmap;
	unsigned long *expect;
};

static bool pkvm;
static u64 block_size;

/* pKVM resolves dirty-logging write faults at EL2 for the VMs created now. */
static bool fast_dirty;

/*
 * pKVM splits the window around a cleared word of a whole block and
 * write-protects the word in one hypercall (debugfs kvm/pkvm_split_wrprotect).
 */
static bool split_wp;

/*
 * pKVM restores in place the blocks EL2 split when logging stops
 * (debugfs kvm/pkvm_collapse); otherwise each is collapsed on the next fault.
 */
static bool collapse;

/* What the last guest_pass() took, by where it was resolved. */
static struct {
	u64 host, el2, full, spurious;
} pass_faults;

/* Frames a vCPU's dirty buffer takes per run (debugfs kvm/pkvm_dirty_buf_entries). */
#define DIRTY_BUF_ENTRIES	510
static u64 dirty_buf_entries = DIRTY_BUF_ENTRIES;

/*
 * What EL2 did, from its hyp events (CONFIG_NVHE_EL2_TRACING), summed over
 * the events read so far: the calls the host has no statistic for.
 */
static struct {
	u64 split_calls, split_blocks, split_tlbi, split_admitted;
	u64 wrprotect_calls;
	u64 collapse_calls, collapse_blocks, collapse_tlbi, collapse_skipped;
	u64 collapse_returned;
	u64 fault_full;
} hyp;

#define HYP_TRACE	"/sys/kernel/tracing/remotes/hypervisor"
static const char * const hyp_events[] = {
	"pkvm_host_split_range", "pkvm_host_collapse_range",
	"pkvm_host_wrprotect_guest", "pkvm_dirty_fault", "selftest",
};

static int hyp_pipe = -1;
static pid_t hyp_pid;
static __thread bool hyp_reader;
static pthread_mutex_t hyp_lock = PTHREAD_MUTEX_INITIALIZER;
static u64 hyp_marker;

static bool write_file(const char *path, const char *val);

/* The u64 after "@key=" in @line, or a test failure. */
static u64 hyp_field(const char *line, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(line, pat);
	TEST_ASSERT(p, "hyp event without %s: %s", key, line);
	return strtoull(p + strlen(pat), NULL, 0);
}

static s64 hyp_sfield(const char *line, const char *key)
{
	return (s64)hyp_field(line, key);
}

/* Add one trace_pipe line to the sums; true if it is marker @marker. */
static bool hyp_account(const char *line, u64 marker)
{
	const char *ev = strstr(line, ": ");

	TEST_ASSERT(!strstr(line, "LOST") && ev, "hyp trace: %s", line);
	ev += 2;
	if (!strncmp(ev, "selftest ", 9))
		return hyp_field(ev, "id") == marker;
	if (!strncmp(ev, "pkvm_host_split_range ", 22)) {
		hyp.split_calls++;
		hyp.split_blocks += hyp_field(ev, "blocks");
		hyp.split_admitted += hyp_field(ev, "admitted");
		hyp.split_tlbi += hyp_field(ev, "tlbi");
	} else if (!strncmp(ev, "pkvm_host_collapse_range ", 25)) {
		hyp.collapse_calls++;
		hyp.collapse_blocks += __builtin_popcountll(hyp_field(ev, "restored"));
		hyp.collapse_skipped += hyp_field(ev, "left");
		hyp.collapse_returned += hyp_field(ev, "freed");
		hyp.collapse_tlbi += hyp_field(ev, "tlbi");
	} else if (!strncmp(ev, "pkvm_host_wrprotect_guest ", 26)) {
		hyp.wrprotect_calls++;
	} else if (!strncmp(ev, "pkvm_dirty_fault ", 17)) {
		hyp.fault_full += hyp_sfield(ev, "ret") == -ENOSPC;
	}
	return false;
}

/*
 * Bring the sums up to date: have EL2 emit a marker event (write_event),
 * then consume trace_pipe up to it. Events merge in timestamp order, so
 * every event EL2 emitted before the marker, on any CPU, is counted. Only
 * the thread and process that set tracing up read the pipe; the others
 * (vCPU threads, killed-VMM children) leave the sums alone.
 */
static void hyp_events_read(void)
{
	static char buf[8192];
	static size_t len;
	char id[32];
	bool found = false;

	if (hyp_pipe < 0 || !hyp_reader || getpid() != hyp_pid)
		return;

	pthread_mutex_lock(&hyp_lock);
	snprintf(id, sizeof(id), "%lu", ++hyp_marker);
	TEST_ASSERT(write_file(HYP_TRACE "/write_event", id), "hyp marker event");
	while (!found) {
		char *nl, *line = buf;
		ssize_t n;

		alarm(60);
		n = read(hyp_pipe, buf + len, sizeof(buf) - 1 - len);
		alarm(0);
		TEST_ASSERT(n > 0, "reading %s/trace_pipe: %s", HYP_TRACE,
			    n ? strerror(errno) : "end of file");
		len += n;
		buf[len] = 0;
		while (!found && (nl = strchr(line, '\n'))) {
			*nl = 0;
			found = hyp_account(line, hyp_marker);
			line = nl + 1;
		}
		len -= line - buf;
		memmove(buf, line, len);
		TEST_ASSERT(len < sizeof(buf) - 1, "hyp trace line too long");
	}
	pthread_mutex_unlock(&hyp_lock);
}

static void hyp_events_stop(void)
{
	char path[256];
	int i;

	if (getpid() != hyp_pid)
		return;
	write_file(HYP_TRACE "/tracing_on", "0");
	if (hyp_pipe >= 0)
		close(hyp_pipe);
	hyp_pipe = -1;
	write_file(HYP_TRACE "/trace", "0");
	for (i = 0; i < ARRAY_SIZE(hyp_events); i++) {
		snprintf(path, sizeof(path), HYP_TRACE "/events/hypervisor/%s/enable",
			 hyp_events[i]);
		write_file(path, "0");
	}
}

/*
 * Under pKVM the split, restore and fault-path figures are hyp events: a
 * kernel without them (no CONFIG_NVHE_EL2_TRACING) cannot run this test.
 */
static void hyp_events_start(void)
{
	char path[256];
	int i;

	if (access(HYP_TRACE, F_OK))
		mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL);
	TEST_ASSERT(!access(HYP_TRACE "/write_event", W_OK),
		    "no %s: the pKVM figures need CONFIG_NVHE_EL2_TRACING", HYP_TRACE);
	hyp_pid = getpid();
	hyp_reader = true;
	atexit(hyp_events_stop);
	/* Off and empty, the buffer is unloaded: only then can it be resized. */
	TEST_ASSERT(write_file(HYP_TRACE "/tracing_on", "0") &&
		    write_file(HYP_TRACE "/trace", "0") &&
		    write_file(HYP_TRACE "/buffer_size_kb", "2048") &&
		    write_file(HYP_TRACE "/events/enable", "0"),
		    "setting up %s", HYP_TRACE);
	for (i = 0; i < ARRAY_SIZE(hyp_events); i++) {
		snprintf(path, sizeof(path), HYP_TRACE "/events/hypervisor/%s/enable",
			 hyp_events[i]);
		TEST_ASSERT(write_file(path, "1"), "enabling %s", path);
	}
	TEST_ASSERT(write_file(HYP_TRACE "/tracing_on", "1"), "hyp tracing on");
	hyp_pipe = open(HYP_TRACE "/trace_pipe", O_RDONLY);
	TEST_ASSERT(hyp_pipe >= 0, "open %s/trace_pipe: %s", HYP_TRACE, strerror(errno));
	hyp_events_read();
}

static void read_split_stats(struct test_vm *t, struct split_stats *s)
{
	hyp_events_read();
	s->hcalls = hyp.split_calls;
	s->blocks = hyp.split_blocks;
	s->tlbi = hyp.split_tlbi;
	s->donated = hyp.split_admitted;
	s->wrprotect = hyp.wrprotect_calls;
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

/*
 * Once a test's VMs are gone, every page they donated for stage-2 must be
 * back. (A negative count would read as 0 here: the harness fails on the
 * kernel's vmstat_refresh complaint about it.)
 */
static void check_no_leak(u64 secpt, const char *after)
{
	u64 now;

	if (!pkvm)
		return;

	now = sec_pagetables_kb();
	pr_info("SecPageTables after %s: %lu kB\n", after, now);
	TEST_ASSERT(now == secpt, "SecPageTables %lu kB after %s, %lu kB before",
		    now, after, secpt);
}

static enum vm_guest_mode host_page_mode(void)
{
	switch (getpagesize()) {
	case SZ_16K:
		return VM_MODE_P40V48_16K;
	case SZ_64K:
		return VM_MODE_P40V48_64K;
	default:
		return VM_MODE_P40V48_4K;
	}
}

/*
 * The exact fault counts are the vCPU's, slot 0 included (code, stack,
 * page-tables): keep khugepaged from collapsing slot 0's memory behind the
 * test's back (THP is "always"), which would unmap it and add faults.
 */
static void slot0_no_thp(struct kvm_vm *vm)
{
	struct userspace_mem_region *region = memslot2region(vm, 0);

	TEST_ASSERT(!madvise(region->mmap_start, region->mmap_size, MADV_NOHUGEPAGE),
		    "madvise(MADV_NOHUGEPAGE) of slot 0: %s", strerror(errno));
}

static void create_test_vm_vcpus(struct test_vm *t, u64 manual_caps, int nr_vcpus)
{
	u64 gpa = DATA_GPA;

	/* Guest pages the size of stage-2 pages: one fault per page. */
	kvm_eager_split_chunk_size = block_size;
	t->vm = __vm_create_with_vcpus(VM_SHAPE(host_page_mode()), nr_vcpus, 0,
				       guest_code, t->vcpus);
	t->vcpu = t->vcpus[0];
	t->pass_vcpus = 1;
	kvm_eager_split_chunk_size = 0;
	slot0_no_thp(t->vm);

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
	memset(blk_split, 0, sizeof(blk_split));
	memset(page_ro, 0, sizeof(page_ro));
}

static void create_test_vm(struct test_vm *t, u64 manual_caps)
{
	create_test_vm_vcpus(t, manual_caps, 1);
}

static void destroy_test_vm(struct test_vm *t)
{
	free(t->bitmap);
	free(t->expect);
	kvm_vm_free(t->vm);
}

static void run_pass_vcpu(struct kvm_vcpu *vcpu)
{
	struct ucall uc;

	vcpu_run(vcpu);
	switch (get_ucall(vcpu, &uc)) {
	case UCALL_SYNC:
		TEST_ASSERT_EQ(uc.args[1], guest_cmd);
		break;
	case UCALL_ABORT:
		REPORT_GUEST_ASSERT(uc);
		break;
	default:
		TEST_FAIL("unexpected ucall %lu", uc.cmd);
	}
}

static void *pass_vcpu_thread(void *arg)
{
	run_pass_vcpu(arg);
	return NULL;
}

/* The faults of a pass's vCPUs so far: host, EL2, stale TLB entries. */
static void pass_vcpu_stats(struct kvm_vcpu **vcpus, int nr, u64 *host, u64 *el2,
			    u64 *spurious)
{
	int v;

	*host = *el2 = *spurious = 0;
	for (v = 0; v < nr; v++) {
		*host += vcpu_get_stat(vcpus[v], stage2_mem_faults);
		*el2 += vcpu_get_stat(vcpus[v], el2_dirty_faults);
		*spurious += vcpu_get_stat(vcpus[v], el2_spurious_faults);
	}
}

/*
 * Run one guest pass over pages first + offset + k * stride < last and
 * return the stage-2 memory faults it took, wherever they were resolved
 * (the host or, for dirty-logging write faults under pKVM, EL2); a stale
 * TLB entry fixed at EL2 is not one. pass_faults has the breakdown. The
 * pass runs on t->vcpu or, with t->pass_vcpus at 2, on vCPUs 0 and 1 at
 * once, each taking every other page of the pass, so that both fault in
 * the same blocks. Writes also record the pages in t->expect, the bitmap
 * of pages the guest dirtied.
 */
static u64 guest_pass(struct test_vm *t, int cmd, u64 first, u64 last,
		      u64 stride, u64 offset, u8 seed)
{
	struct kvm_vcpu *vcpus[2] = { t->vcpu };
	int v, nr = t->pass_vcpus == 2 ? 2 : 1;
	u64 i, host, el2, spurious;
	pthread_t thread;

	guest_cmd = cmd;
	guest_first = first;
	guest_last = last;
	for (v = 0; v < MAX_VCPUS; v++) {
		guest_stride[v] = stride;
		guest_offset[v] = offset;
	}
	if (nr == 2) {
		TEST_ASSERT(t->vcpus[1], "a pass of 2 vCPUs in a VM of one");
		vcpus[0] = t->vcpus[0];
		vcpus[1] = t->vcpus[1];
		for (v = 0; v < 2; v++) {
			guest_stride[vcpus[v]->id] = 2 * stride;
			guest_offset[vcpus[v]->id] = offset + v * stride;
		}
	}
	guest_seed = seed;
	sync_global_to_guest(t->vm, guest_cmd);
	sync_global_to_guest(t->vm, guest_first);
	sync_global_to_guest(t->vm, guest_last);
	sync_global_to_guest(t->vm, guest_stride);
	sync_global_to_guest(t->vm, guest_offset);
	sync_global_to_guest(t->vm, guest_seed);
	sync_global_to_guest(t->vm, page_seed);

	hyp_events_read();
	pass_vcpu_stats(vcpus, nr, &host, &el2, &spurious);
	pass_faults.full = hyp.fault_full;
	if (nr == 2)
		pthread_create(&thread, NULL, pass_vcpu_thread, vcpus[1]);
	run_pass_vcpu(vcpus[0]);
	if (nr == 2)
		pthread_join(thread, NULL);

	if (cmd == CMD_WRITE) {
		for (i = first + offset; i < last; i += stride) {
			page_seed[i] = seed;
			page_ro[i] = false;
			__set_bit(i, t->expect);
		}
	}
	hyp_events_read();
	pass_vcpu_stats(vcpus, nr, &pass_faults.host, &pass_faults.el2,
			&pass_faults.spurious);
	pass_faults.host -= host;
	pass_faults.el2 -= el2;
	pass_faults.spurious -= spurious;
	pass_faults.full = hyp.fault_full - pass_faults.full;
	return pass_faults.host + pass_faults.el2;
}

/*
 * After a write pass whose write-protected pages were all split and marked:
 * with the fast path, EL2 resolved every fault but those that found the
 * dirty buffer full, and the buffer only fills after DIRTY_BUF_ENTRIES
 * faults in one run; without it, the host resolved them all.
 */
static void check_fault_path(const char *when)
{
	if (!fast_dirty) {
		TEST_ASSERT(!pass_faults.el2 && !pass_faults.full && !pass_faults.spurious,
			    "%s: %lu faults resolved at EL2 (%lu full, %lu spurious) without the fast path",
			    when, pass_faults.el2, pass_faults.full, pass_faults.spurious);
		return;
	}

	TEST_ASSERT(pass_faults.host == pass_faults.full,
		    "%s: the host resolved %lu faults, %lu of them for a full dirty buffer",
		    when, pass_faults.host, pass_faults.full);
	TEST_ASSERT(pass_faults.el2 >= dirty_buf_entries * pass_faults.full,
		    "%s: dirty buffer of %lu full %lu times after %lu faults resolved at EL2",
		    when, dirty_buf_entries, pass_faults.full, pass_faults.el2);
	/* A small buffer must fill: an exit every few faults is not expected. */
	if (dirty_buf_entries <= 64 && pass_faults.el2 >= 8 * dirty_buf_entries)
		TEST_ASSERT(pass_faults.full,
			    "%s: %lu faults resolved at EL2 and a dirty buffer of %lu never full",
			    when, pass_faults.el2, dirty_buf_entries);
	pr_info("%s: %lu faults resolved at EL2, %lu by the host (buffer full), %lu stale TLB entries\n",
		when, pass_faults.el2, pass_faults.host, pass_faults.spurious);
}

/*
 * Turn dirty logging off. On pKVM with pkvm_collapse on, EL2 restores in
 * place the @split blocks it split, which are the slot's first ones: one
 * hypercall and one TLBI per SPLIT_BATCH of them, none left split.
 * Returns the blocks restored.
 */
static u64 logging_off(struct test_vm *t, u64 split, const char *when)
{
	u64 h = 0, b = 0, tlbi = 0, skipped = 0, returned = 0;

	if (pkvm) {
		hyp_events_read();
		h = hyp.collapse_calls;
		b = hyp.collapse_blocks;
		tlbi = hyp.collapse_tlbi;
		skipped = hyp.collapse_skipped;
		returned = hyp.collapse_returned;
	}
	vm_mem_region_set_flags(t->vm, DATA_SLOT, 0);
	if (!pkvm)
		return 0;

	hyp_events_read();
	h = hyp.collapse_calls - h;
	b = hyp.collapse_blocks - b;
	tlbi = hyp.collapse_tlbi - tlbi;
	skipped = hyp.collapse_skipped - skipped;
	returned = hyp.collapse_returned - returned;
	if (!collapse) {
		TEST_ASSERT(!h && !b && !returned,
			    "%s: %lu collapse hypercalls with pkvm_collapse off", when, h);
		return 0;
	}
	TEST_ASSERT(b == split && !skipped,
		    "%s: EL2 restored %lu blocks and left %lu split, expected %lu restored",
		    when, b, skipped, split);
	TEST_ASSERT(h == DIV_ROUND_UP(split, SPLIT_BATCH) && tlbi == h,
		    "%s: %lu blocks restored by %lu hypercalls with %lu TLBIs",
		    when, b, h, tlbi);
	/* One last-level table per block, back to the host. */
	TEST_ASSERT(returned == b, "%s: %lu table pages given back for %lu blocks",
		    when, returned, b);
	pr_info("%s: %lu blocks restored in place by %lu hypercalls, %lu TLBIs, %lu table pages back\n",
		when, b, h, tlbi, returned);
	return b;
}

/* Writes after logging stopped go to the host, which collapses blocks. */
static void check_no_fast_path(const char *when)
{
	TEST_ASSERT(!pass_faults.el2 && !pass_faults.full,
		    "%s: %lu faults resolved at EL2, %lu buffer-full exits with logging off",
		    when, pass_faults.el2, pass_faults.full);
}

static u64 count_pages(u64 first, u64 last, u64 stride, u64 offset)
{
	return first + offset >= last ? 0 : DIV_ROUND_UP(last - first - offset, stride);
}

/* Write-protected pages a write pass over [first, last) will fault on. */
static u64 count_ro_pages(u64 first, u64 last, u64 stride, u64 offset)
{
	u64 i, n = 0;

	for (i = first + offset; i < last; i += stride)
		n += page_ro[i];
	return n;
}

/*
 * Model of KVM_CLEAR_DIRTY_LOG of pages [first, first + nr): write
 * protection comes first and covers a whole block while it is not split
 * (a block is one mapping), then the blocks are split: those the range
 * overlaps, or on pKVM the window of SPLIT_BATCH blocks around it, counted
 * from the memslot's first block (within the slot). With split_wp, pKVM splits first, in the same
 * hypercall, and write-protects only the cleared pages. Returns the blocks
 * newly split.
 */
static u64 model_clear(struct test_vm *t, u64 first, u64 nr)
{
	u64 b0, b1, b, i, split = 0;

	b0 = first / t->pages_per_block;
	b1 = (first + nr - 1) / t->pages_per_block;
	for (b = b0; b <= b1; b++) {
		bool whole = !blk_split[b] && !split_wp;
		u64 s = whole ? b * t->pages_per_block : max(first, b * t->pages_per_block);
		u64 e = whole ? (b + 1) * t->pages_per_block :
				min(first + nr, (b + 1) * t->pages_per_block);

		for (i = s; i < e; i++)
			page_ro[i] = true;
	}
	if (pkvm) {
		/* Windows count from the memslot's first block. */
		b0 = ALIGN_DOWN(b0, SPLIT_BATCH);
		b1 = min_t(u64, t->nr_blocks - 1, ALIGN(b1 + 1, SPLIT_BATCH) - 1);
	}
	for (b = b0; b <= b1; b++) {
		split += !blk_split[b];
		blk_split[b] = true;
	}
	return split;
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
	/* EL2 counts them where it issues them: one per call that split. */
	TEST_ASSERT(now.tlbi - before->tlbi <= hcalls,
		    "%s: %lu split TLBIs for %lu hypercalls", when,
		    now.tlbi - before->tlbi, hcalls);
	TEST_ASSERT(!blocks || now.tlbi > before->tlbi,
		    "%s: %lu blocks split with no TLBI counted at EL2", when, blocks);
	TEST_ASSERT(now.donated - before->donated <= blocks,
		    "%s: %lu pages donated for %lu blocks", when,
		    now.donated - before->donated, blocks);
	pr_info("%s: %lu blocks split by %lu hypercalls, %lu TLBIs, %lu pages donated\n",
		when, blocks, hcalls, now.tlbi - before->tlbi,
		now.donated - before->donated);
}

/*
 * A write pass over every @stride-th page from @offset must fault exactly
 * once per write-protected page (@expected), where the fast path says, and
 * leave an exact dirty log and every word of memory as written.
 */
static void check_write_pass(struct test_vm *t, u64 stride, u64 offset, u8 seed,
			     u64 expected, const char *when)
{
	u64 faults = guest_pass(t, CMD_WRITE, 0, t->npages, stride, offset, seed);

	TEST_ASSERT(faults == expected, "%s: %lu faults for %lu write-protected pages",
		    when, faults, expected);
	check_fault_path(when);
	kvm_vm_get_dirty_log(t->vm, DATA_SLOT, t->bitmap);
	check_bitmap(t, when);
	check_memory(t, when);
}

/* Without manual-protect: enabling dirty logging splits every block. */
static void test_split_on_enable(void)
{
	struct split_stats s0;
	struct test_vm t;
	u64 faults, k, n, secpt;

	create_test_vm(&t, 0);
	pr_info("enable-time split: %lu blocks of %lu KiB\n", t.nr_blocks, block_size >> 10);

	faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 1);
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

	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "read pass after split took %lu stage-2 faults", faults);

	for (k = 0; k < 3; k++) {
		check_write_pass(&t, 3, k, 2 + k, count_pages(0, t.npages, 3, k), "write pass");
		bitmap_zero(t.expect, t.npages);

		faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
		TEST_ASSERT(!faults, "read pass %lu took %lu stage-2 faults", k, faults);
	}

	/*
	 * Fewer pages than the dirty buffer holds: with the fast path, every
	 * fault is EL2's and no exit is needed.
	 */
	n = min_t(u64, t.npages, dirty_buf_entries > 10 ? dirty_buf_entries - 9 : 1);
	faults = guest_pass(&t, CMD_WRITE, 0, n, 1, 0, 7);
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
	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "read pass after logging off took %lu faults", faults);
	faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 9);
	TEST_ASSERT(faults == n, "collapse: %lu faults, expected %lu for %lu blocks",
		    faults, n, t.nr_blocks);
	check_no_fast_path("collapse");
	check_memory(&t, "after collapse");

	/* Logging on again: every block splits again, and the log is exact. */
	read_split_stats(&t, &s0);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	check_split(&t, &s0, t.nr_blocks, "logging on again");
	bitmap_zero(t.expect, t.npages);
	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "read pass after logging on again took %lu faults", faults);
	check_write_pass(&t, 2, 1, 10, count_pages(0, t.npages, 2, 1), "logging on again");
	n = t.nr_blocks - logging_off(&t, t.nr_blocks, "logging off again");
	faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 11);
	TEST_ASSERT(faults == n, "second collapse: %lu faults, expected %lu", faults, n);
	check_memory(&t, "after the second logging off");

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
	u64 faults, half, b, k, blocks;

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	half = t.nr_blocks / 2;
	b = half * t.pages_per_block;	/* first page of the first block not cleared */
	pr_info("clear-time split: %lu blocks of %lu KiB, %s\n", t.nr_blocks, block_size >> 10,
		split_wp ? "split + write-protect in one call" : "write-protect, then split");

	guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 1);
	read_split_stats(&t, &s0);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	check_split(&t, &s0, 0, "enable logging (initially set)");
	bitmap_fill(t.expect, t.npages);

	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
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
		/* The window is one call's worth: one split, with the write-protect. */
		TEST_ASSERT(s1.hcalls - s0.hcalls == !!blocks &&
			    s1.wrprotect - s0.wrprotect == !(split_wp && blocks),
			    "first word: %lu split + %lu wrprotect hypercalls, expected %d + %d",
			    s1.hcalls - s0.hcalls, s1.wrprotect - s0.wrprotect, !!blocks,
			    !(split_wp && blocks));
	}
	check_memory(&t, "after word clears");

	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
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

	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "final read pass took %lu faults", faults);
	check_write_pass(&t, 5, 1, 3, count_ro_pages(0, t.npages, 5, 1), "final write pass");

	destroy_test_vm(&t);
}

struct raw_vm {
	int kvm_fd, vm_fd, vcpu_fd;
	void *mem;
};

static void on_sigalrm(int sig)
{
}

/*
 * Give the raw VM one page of memory at IPA 0 holding "b ." and run its
 * vCPU (reset PC 0, MMU off) for 100 ms: the instruction fetch makes the
 * host map (for a protected VM, donate) that page, then SIGALRM ends
 * KVM_RUN with -EINTR.
 */
static void run_raw_vm_briefly(struct raw_vm *p, struct kvm_run *run)
{
	struct kvm_userspace_memory_region region = {
		.memory_size = getpagesize(),
	};
	struct sigaction sa = { .sa_handler = on_sigalrm };
	struct itimerval timer = { .it_value.tv_usec = 100000 };
	int ret;

	p->mem = mmap(NULL, getpagesize(), PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TEST_ASSERT(p->mem != MAP_FAILED, "mmap guest page");
	*(u32 *)p->mem = 0x14000000;	/* b . */
	region.userspace_addr = (u64)p->mem;
	ret = ioctl(p->vm_fd, KVM_SET_USER_MEMORY_REGION, &region);
	TEST_ASSERT(!ret, KVM_IOCTL_ERROR(KVM_SET_USER_MEMORY_REGION, ret));

	TEST_ASSERT(!sigaction(SIGALRM, &sa, NULL), "sigaction");
	TEST_ASSERT(!setitimer(ITIMER_REAL, &timer, NULL), "setitimer");
	run->immediate_exit = 0;
	ret = ioctl(p->vcpu_fd, KVM_RUN, 0);
	TEST_ASSERT(ret == -1 && errno == EINTR,
		    "vCPU spinning at IPA 0: ret %d errno %d, exit reason %u", ret,
		    errno, run->exit_reason);
	signal(SIGALRM, SIG_DFL);
}

/*
 * A VM of @type whose hyp VM exists: its one vCPU enters KVM_RUN once,
 * which creates the hyp VM and vCPU. Without memory it does so with
 * immediate_exit set, which returns -EINTR before the guest runs; with
 * memory the guest runs briefly (run_raw_vm_briefly()). The library
 * refuses VM types on arm64: by hand.
 */
static void start_raw_vm(struct raw_vm *p, unsigned long type, bool with_memory)
{
	struct kvm_vcpu_init init;
	struct kvm_run *run;
	int size, ret;

	p->kvm_fd = open_kvm_dev_path_or_exit();
	p->vm_fd = __kvm_ioctl(p->kvm_fd, KVM_CREATE_VM, (void *)type);
	TEST_ASSERT(p->vm_fd >= 0, KVM_IOCTL_ERROR(KVM_CREATE_VM, p->vm_fd));
	p->vcpu_fd = ioctl(p->vm_fd, KVM_CREATE_VCPU, 0);
	TEST_ASSERT(p->vcpu_fd >= 0, KVM_IOCTL_ERROR(KVM_CREATE_VCPU, p->vcpu_fd));
	ret = ioctl(p->vm_fd, KVM_ARM_PREFERRED_TARGET, &init);
	TEST_ASSERT(!ret, KVM_IOCTL_ERROR(KVM_ARM_PREFERRED_TARGET, ret));
	ret = ioctl(p->vcpu_fd, KVM_ARM_VCPU_INIT, &init);
	TEST_ASSERT(!ret, KVM_IOCTL_ERROR(KVM_ARM_VCPU_INIT, ret));

	size = ioctl(p->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	TEST_ASSERT(size > 0, KVM_IOCTL_ERROR(KVM_GET_VCPU_MMAP_SIZE, size));
	run = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, p->vcpu_fd, 0);
	TEST_ASSERT(run != MAP_FAILED, "mmap kvm_run");
	p->mem = NULL;
	if (with_memory) {
		run_raw_vm_briefly(p, run);
	} else {
		run->immediate_exit = 1;
		ret = ioctl(p->vcpu_fd, KVM_RUN, 0);
		TEST_ASSERT(ret == -1 && errno == EINTR,
			    "vCPU with immediate_exit: ret %d errno %d", ret, errno);
	}
	munmap(run, size);
}

static void stop_raw_vm(struct raw_vm *p)
{
	close(p->vcpu_fd);
	close(p->vm_fd);
	close(p->kvm_fd);
	if (p->mem)
		munmap(p->mem, getpagesize());
}

/*
 * Hostile-host table (CONFIG_PKVM_SPLIT_ABI_TEST): the kernel calls the
 * split hypercalls with bad arguments and memcaches on a VM with unsplit
 * blocks, and with the handle of a running protected VM, and reports each
 * result as a KTAP line.
 */
/*
 * Read a KTAP report from debugfs; false if the file is not there. Every
 * case must pass, be numbered in order, and the plan ("1..N") must count
 * exactly @expect of them: a case that silently stops being run fails.
 */
static bool read_ktap(const char *path, int expect, const char *what)
{
	int ok = 0, bad = 0, skip = 0, plan = -1, n;
	char line[256];
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		pr_info("abi: %s", line);
		if (sscanf(line, "1..%d", &n) == 1) {
			TEST_ASSERT(plan < 0, "%s: two KTAP plans", what);
			plan = n;
		} else if (sscanf(line, "ok %d ", &n) == 1) {
			TEST_ASSERT(n == ok + bad + 1, "%s: case %d out of order", what, n);
			ok++;
		} else if (sscanf(line, "not ok %d ", &n) == 1) {
			bad++;
		}
		skip += !!strstr(line, "# SKIP");
	}
	fclose(f);
	TEST_ASSERT(!bad && !skip && ok == plan && plan == expect,
		    "%s: %d ok, %d not ok, %d skipped, plan %d, %d cases expected",
		    what, ok, bad, skip, plan, expect);
	return true;
}

/*
 * A VM being torn down: the kernel starts the teardown of an idle
 * non-protected VM with nothing mapped, as kvm_destroy_vm() would, and the
 * split must then refuse its handle with -EBUSY.
 */
static void test_abi_dying(bool required)
{
	struct raw_vm vm;
	char path[128];

	start_raw_vm(&vm, 0, false);
	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/pkvm_split_abi_dying",
		 getpid(), vm.vm_fd);
	if (!read_ktap(path, 3, "VM being torn down")) {
		TEST_ASSERT(!required, "%s: %s", path, strerror(errno));
		pr_info("VM being torn down: SKIP (no %s)\n", path);
	}
	stop_raw_vm(&vm);
}

/* The hostile-host table's cases (hypercalls/security.md lists them). */
#define ABI_CASES	72

static void test_abi_hostile(bool required)
{
	struct raw_vm pvm;
	char path[128];
	struct test_vm t;

	start_raw_vm(&pvm, KVM_VM_TYPE_ARM_PROTECTED, true);
	/* vCPU 1 is not run: the table creates it at EL2, after bad buffers. */
	create_test_vm_vcpus(&t, 0, 2);
	guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 1);

	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/pkvm_split_abi",
		 getpid(), t.vm->fd);
	/* With 64K pages no call can run out of pages part-way: one case less. */
	if (!read_ktap(path, getpagesize() == SZ_64K ? ABI_CASES - 1 : ABI_CASES,
		       "hostile-host ABI table")) {
		TEST_ASSERT(!required, "%s: %s", path, strerror(errno));
		pr_info("hostile-host ABI table: SKIP (no %s)\n", path);
		destroy_test_vm(&t);
		stop_raw_vm(&pvm);
		return;
	}
	stop_raw_vm(&pvm);

	/*
	 * The guest's data and the host's records survived it, and vCPU 1,
	 * created at EL2 after its bad dirty buffers were refused, logs
	 * every page it dirties, through its own buffer.
	 */
	check_memory(&t, "after the hostile-host table");
	t.vcpu = t.vcpus[1];
	guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	check_write_pass(&t, 1, 0, 2, t.npages, "vCPU 1 after the hostile-host table");
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
	guest_pass(&b, CMD_WRITE, 0, b.npages, 1, 0, 1);
	guest_pass(&a, CMD_WRITE, 0, a.npages, 1, 0, 1);

	/* Point b's data slot at a's memory. */
	region = memslot2region(b.vm, DATA_SLOT)->region;
	region.memory_size = 0;
	vm_ioctl(b.vm, KVM_SET_USER_MEMORY_REGION2, &region);
	region.memory_size = a.npages * a.page_size;
	region.userspace_addr = (u64)a.hva;
	vm_ioctl(b.vm, KVM_SET_USER_MEMORY_REGION2, &region);

	faults = guest_pass(&b, CMD_READ, 0, b.npages, 1, 0, 0);
	TEST_ASSERT(faults == b.nr_blocks, "other guest: %lu faults to map %lu blocks",
		    faults, b.nr_blocks);

	memset(blk_split, 0, sizeof(blk_split));
	vm_mem_region_set_flags(a.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	faults = guest_pass(&b, CMD_READ, 0, b.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "other guest took %lu faults after a's split", faults);

	n = count_pages(0, a.npages, 3, 1);
	faults = guest_pass(&a, CMD_WRITE, 0, a.npages, 3, 1, 2);
	TEST_ASSERT(faults == n, "split guest: %lu faults for %lu write-protected pages",
		    faults, n);
	faults = guest_pass(&b, CMD_READ, 0, b.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "other guest took %lu faults reading a's writes", faults);
	check_memory(&a, "shared with another guest");
	pr_info("shared with another guest: %lu blocks split in one, none touched in the other\n",
		a.nr_blocks);

	destroy_test_vm(&b);
	destroy_test_vm(&a);
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

/* Best-effort write of @val to @path; false if the file is not there. */
static bool write_file(const char *path, const char *val)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f)
		return false;
	ok = fputs(val, f) >= 0;
	return !fclose(f) && ok;
}

static u64 read_u64_file(const char *path)
{
	u64 val = 0;
	FILE *f = fopen(path, "r");

	TEST_ASSERT(f, "open %s: %s", path, strerror(errno));
	TEST_ASSERT(fscanf(f, "%lu", &val) == 1, "read %s", path);
	fclose(f);
	return val;
}

#define FAIL_PAGE_ALLOC	"/sys/kernel/debug/fail_page_alloc/"
#define FAIL_TIMES	1000000

static bool set_fail_attr(const char *attr, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), FAIL_PAGE_ALLOC "%s", attr);
	return write_file(path, val);
}

/*
 * Page allocation fault injection for tasks with make-it-fail set: the
 * first @budget pages they allocate succeed, every later one fails. Only
 * this thread sets make-it-fail, and only around one ioctl.
 */
static bool arm_page_alloc_failure(u64 budget)
{
	char space[32], times[32];

	/* An order-0 allocation costs 1; it fails once space is not above that. */
	snprintf(space, sizeof(space), "%lu", budget + 1);
	snprintf(times, sizeof(times), "%d", FAIL_TIMES);
	return set_fail_attr("probability", "0") &&
	       set_fail_attr("ignore-gfp-wait", "N") &&
	       set_fail_attr("min-order", "0") &&
	       set_fail_attr("verbose", "0") &&
	       set_fail_attr("task-filter", "Y") &&
	       set_fail_attr("interval", "1") &&
	       set_fail_attr("times", times) &&
	       set_fail_attr("space", space) &&
	       set_fail_attr("probability", "100");
}

static bool disarm_page_alloc_failure(void)
{
	return set_fail_attr("probability", "0") &&
	       set_fail_attr("task-filter", "N") &&
	       set_fail_attr("space", "0") &&
	       set_fail_attr("times", "1") &&
	       set_fail_attr("verbose", "2") &&
	       set_fail_attr("ignore-gfp-wait", "Y") &&
	       set_fail_attr("min-order", "1");
}

/*
 * KVM_CLEAR_DIRTY_LOG of the whole slot with this thread's page
 * allocations failing after @budget pages. The bitmap is written before,
 * and make-it-fail toggled through an open fd, so that nothing but the
 * ioctl allocates while it is set. Returns the failures injected.
 */
static u64 clear_all_failing(struct test_vm *t, u64 budget)
{
	struct kvm_clear_dirty_log log = {
		.slot = DATA_SLOT,
		.num_pages = t->npages,
		.dirty_bitmap = t->bitmap,
	};
	int fd, ret, err;
	u64 failed;

	bitmap_fill(t->bitmap, t->npages);
	bitmap_zero(t->expect, t->npages);
	fd = open("/proc/thread-self/make-it-fail", O_WRONLY);
	TEST_ASSERT(fd >= 0, "open make-it-fail: %s", strerror(errno));
	TEST_ASSERT(arm_page_alloc_failure(budget), "arm fail_page_alloc");

	TEST_ASSERT(pwrite(fd, "1", 1, 0) == 1, "set make-it-fail");
	ret = __vm_ioctl(t->vm, KVM_CLEAR_DIRTY_LOG, &log);
	err = errno;
	TEST_ASSERT(pwrite(fd, "0", 1, 0) == 1, "clear make-it-fail");
	close(fd);

	failed = FAIL_TIMES - read_u64_file(FAIL_PAGE_ALLOC "times");
	TEST_ASSERT(disarm_page_alloc_failure(), "disarm fail_page_alloc");
	TEST_ASSERT(!ret, "KVM_CLEAR_DIRTY_LOG with failing top-up: ret %d errno %d",
		    ret, err);
	return failed;
}

/* Clear the whole slot: write-protects every page and splits every block. */
static void clear_all(struct test_vm *t)
{
	clear_range(t, 0, t->npages);
	model_clear(t, 0, t->npages);
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
	guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 1);

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
		faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
		TEST_ASSERT(!faults, "read pass after a failed top-up took %lu faults", faults);

		/*
		 * Nothing was left half-done: every page faults exactly once
		 * on write, by permission in the split blocks, and broken out
		 * of the block on fault (as without eager split) in the rest.
		 */
		faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 2 + i);
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
		faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 100 + i);
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

/* Racing vCPUs each rewrite their half of the pages, pass after pass. */
static void race_guest_code(u64 first, u64 last)
{
	u64 words = guest_page_size / 8, pass, i, w;

	for (pass = 1;; pass++) {
		for (i = first; i < last; i++) {
			u64 *page = (u64 *)(TEST_GVA + i * guest_page_size);

			for (w = 0; w < words; w++)
				WRITE_ONCE(page[w], pattern(i, w, pass));
		}
		GUEST_SYNC(pass);
	}
}

struct race_vcpu {
	struct kvm_vcpu *vcpu;
	pthread_t thread;
	u64 first, last, passes;
};

static bool race_stop;

static void *race_vcpu_thread(void *arg)
{
	struct race_vcpu *r = arg;
	struct ucall uc;

	do {
		vcpu_run(r->vcpu);
		switch (get_ucall(r->vcpu, &uc)) {
		case UCALL_SYNC:
			r->passes = uc.args[1];
			break;
		case UCALL_ABORT:
			REPORT_GUEST_ASSERT(uc);
			break;
		default:
			TEST_FAIL("unexpected ucall %lu", uc.cmd);
		}
	} while (!READ_ONCE(race_stop) || !r->passes);

	return NULL;
}

/*
 * dirty_log_test's rule for a log read while vCPUs write: every page whose
 * word 0 changed since it was last cleared must be dirty. @now is word 0
 * of each page read just before the log, @base word 0 just after the
 * page's last clear, ~0 while it has not been cleared since logging was
 * (re-)enabled (initially set: every page is dirty then). Returns how many
 * pages changed.
 */
#define NOT_CLEARED	(~0ULL)

static u64 word0(struct test_vm *t, u64 page)
{
	return READ_ONCE(*(u64 *)(t->hva + page * t->page_size));
}

static u64 check_log_rule(struct test_vm *t, unsigned long *log, const u64 *now,
			  const u64 *base, const char *when)
{
	u64 i, changed = 0;

	for (i = 0; i < t->npages; i++) {
		if (base[i] == NOT_CLEARED || now[i] == base[i])
			continue;
		changed++;
		TEST_ASSERT(test_bit(i, log),
			    "%s: page %lu changed since its clear (0x%lx to 0x%lx), not in the log",
			    when, i, base[i], now[i]);
	}
	return changed;
}

/*
 * Split while two vCPUs keep writing the same range: clears of random
 * 64-page words split blocks under write-protection faults, and logging is
 * turned off (the vCPUs collapse blocks again) and back on now and then.
 * Afterwards every word holds the last pass's data, and a final clear and
 * write pass give an exact dirty log.
 */
static void test_split_vs_vcpu_faults(void)
{
	u64 words, round, j, w, i, faults, *now, *base, changed = 0;
	struct race_vcpu r[2];
	struct split_stats s0, s1;
	unsigned long *log;
	struct test_vm t;

	create_test_vm_vcpus(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE |
			     KVM_DIRTY_LOG_INITIALLY_SET, 3);
	words = t.npages / 64;
	race_stop = false;

	/* vCPU 0 checks the end state: fault in its stack and globals now. */
	guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 1);
	for (i = 0; i < 2; i++) {
		r[i].vcpu = t.vcpus[i + 1];
		vcpu_set_reg(r[i].vcpu, ARM64_CORE_REG(regs.pc), (u64)race_guest_code);
		r[i].first = i * t.npages / 2;
		r[i].last = (i + 1) * t.npages / 2;
		r[i].passes = 0;
		vcpu_args_set(r[i].vcpu, 2, r[i].first, r[i].last);
	}
	for (i = 0; i < 2; i++)
		pthread_create(&r[i].thread, NULL, race_vcpu_thread, &r[i]);

	log = bitmap_zalloc(t.npages);
	now = calloc(t.npages, sizeof(u64));
	base = calloc(t.npages, sizeof(u64));
	for (i = 0; i < t.npages; i++)
		base[i] = NOT_CLEARED;
	read_split_stats(&t, &s0);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	for (round = 0; round < 12; round++) {
		if (round % 4 == 3) {
			vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
			usleep(50000);
			vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
			for (i = 0; i < t.npages; i++)
				base[i] = NOT_CLEARED;
		}
		/* Read while the vCPUs write: no page written since its clear is lost. */
		for (i = 0; i < t.npages; i++)
			now[i] = word0(&t, i);
		kvm_vm_get_dirty_log(t.vm, DATA_SLOT, log);
		changed += check_log_rule(&t, log, now, base, "split vs vCPU faults");
		w = random() % words;
		for (j = 0; j < words; j++) {
			w = (w + 5) % words;	/* visits every word: 5 and words are coprime */
			clear_range(&t, w * 64, 64);
			for (i = w * 64; i < w * 64 + 64; i++)
				base[i] = word0(&t, i);
		}
	}
	TEST_ASSERT(changed, "no page changed between a clear and a read of the log");
	WRITE_ONCE(race_stop, true);
	for (i = 0; i < 2; i++) {
		pthread_join(r[i].thread, NULL);
		/*
		 * One more pass with nothing racing: a block broken on fault
		 * in the last racing pass (a clear drops mmu_lock to top up
		 * between write-protecting and splitting) has its pages
		 * mapped again.
		 */
		race_vcpu_thread(&r[i]);
		for (j = r[i].first; j < r[i].last; j++)
			page_seed[j] = r[i].passes;
	}
	read_split_stats(&t, &s1);
	pr_info("split vs vCPU faults: %lu and %lu passes, %lu blocks split in %lu hypercalls, %lu pages changed between a clear and a read, all in the log\n",
		r[0].passes, r[1].passes, s1.blocks - s0.blocks, s1.hcalls - s0.hcalls, changed);
	free(log);
	free(now);
	free(base);
	for (i = 0; i < 2; i++)
		pr_info("split vs vCPU faults: vCPU %lu: %lu faults resolved at EL2\n",
			i + 1, vcpu_get_stat(r[i].vcpu, el2_dirty_faults));
	TEST_ASSERT(!pkvm || s1.blocks - s0.blocks >= t.nr_blocks,
		    "only %lu blocks split while the vCPUs ran", s1.blocks - s0.blocks);
	check_memory(&t, "split vs vCPU faults");

	/* Quiesced: one clear, then the dirty log must be exact again. */
	for (i = 0; i < t.nr_blocks; i++)
		blk_split[i] = false;
	kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
	bitmap_zero(t.expect, t.npages);
	clear_range(&t, 0, t.npages);
	faults = guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
	TEST_ASSERT(!faults, "read pass after the race took %lu faults", faults);
	check_write_pass(&t, 7, 3, 42, count_pages(0, t.npages, 7, 3),
			 "write pass after the race");
	destroy_test_vm(&t);
}

struct churn_ctx {
	struct test_vm *t;
	unsigned long *bitmap;
	bool stop;
	int ok, gone;
};

/* Clear the whole slot again and again; the slot may vanish under us. */
static void *clear_loop_thread(void *arg)
{
	struct churn_ctx *c = arg;
	struct kvm_clear_dirty_log log = {
		.slot = DATA_SLOT,
		.num_pages = c->t->npages,
		.dirty_bitmap = c->bitmap,
	};
	int ret;

	while (!READ_ONCE(c->stop)) {
		ret = __vm_ioctl(c->t->vm, KVM_CLEAR_DIRTY_LOG, &log);
		TEST_ASSERT(!ret || errno == ENOENT,
			    "KVM_CLEAR_DIRTY_LOG during slot churn: ret %d errno %d", ret, errno);
		if (ret)
			WRITE_ONCE(c->gone, c->gone + 1);
		else
			WRITE_ONCE(c->ok, c->ok + 1);
	}
	return NULL;
}

static void set_data_region(struct test_vm *t, u64 gpa, u64 size)
{
	struct kvm_userspace_memory_region2 region =
		memslot2region(t->vm, DATA_SLOT)->region;

	region.guest_phys_addr = gpa;
	region.memory_size = size;
	vm_ioctl(t->vm, KVM_SET_USER_MEMORY_REGION2, &region);
}

/*
 * A logging memslot moved away and back while a vCPU keeps writing to it:
 * the frames of the pages it wrote at EL2 since its last exit sit in its
 * dirty buffer when the slot is unmapped, and it may not exit again (one
 * write every MOVE_WRITE_US, ticks aside) before the slot is at its new
 * place. The log read there must still hold every page whose content
 * changed since the last read (dirty_log_test's rule). While the slot is
 * away, the guest's writes are MMIO exits that change nothing.
 */
#define MOVE_WRITE_US	1500
#define MOVE_ROUNDS	60

static void move_guest_code(u64 nr)
{
	u64 seq, i;

	for (seq = 1;; seq++) {
		for (i = 0; i < nr; i++) {
			WRITE_ONCE(*(u64 *)(TEST_GVA + i * guest_page_size), seq << 16 | i);
			udelay(MOVE_WRITE_US);
		}
	}
}

struct move_ctx {
	struct test_vm *t;
	u64 size, mmio;
	bool stop;
};

static void *move_vcpu_thread(void *arg)
{
	struct move_ctx *c = arg;
	struct kvm_vcpu *vcpu = c->t->vcpu;
	struct kvm_run *run = vcpu->run;
	struct ucall uc;

	while (!READ_ONCE(c->stop)) {
		vcpu_run(vcpu);
		if (run->exit_reason == KVM_EXIT_MMIO &&
		    run->mmio.phys_addr >= DATA_GPA && run->mmio.phys_addr < DATA_GPA + c->size) {
			TEST_ASSERT(run->mmio.is_write, "MMIO read of the data slot");
			c->mmio++;
			continue;
		}
		switch (get_ucall(vcpu, &uc)) {
		case UCALL_ABORT:
			REPORT_GUEST_ASSERT(uc);
			break;
		default:
			TEST_FAIL("unexpected exit %u, ucall %lu", run->exit_reason, uc.cmd);
		}
	}
	return NULL;
}

/* Word 0 of each page, where the guest writes. */
static void move_snapshot(struct test_vm *t, u64 nr, u64 *words)
{
	u64 i;

	for (i = 0; i < nr; i++)
		words[i] = READ_ONCE(*(u64 *)(t->hva + i * t->page_size));
}

/*
 * Read the log; every page that changed between @base (taken after the
 * last read) and a snapshot taken just before this one must be dirty.
 * @base is then retaken. Returns how many pages changed.
 */
static u64 move_collect(struct test_vm *t, u64 nr, u64 *base, u64 *now,
			u64 round, const char *where)
{
	u64 i, changed = 0;

	move_snapshot(t, nr, now);
	kvm_vm_get_dirty_log(t->vm, DATA_SLOT, t->bitmap);
	for (i = 0; i < nr; i++) {
		if (now[i] == base[i])
			continue;
		changed++;
		TEST_ASSERT(test_bit(i, t->bitmap),
			    "move round %lu, %s: page %lu changed (0x%lx to 0x%lx), not in the log",
			    round, where, i, base[i], now[i]);
	}
	move_snapshot(t, nr, base);
	return changed;
}

static void test_move_with_buffered_frames(void)
{
	u64 nr, round, gpa_b, *base, *now, moved = 0, at_a = 0, el2;
	struct move_ctx c = {};
	pthread_t thread;
	struct test_vm t;

	create_test_vm(&t, 0);
	c.t = &t;
	c.size = t.npages * t.page_size;
	gpa_b = DATA_GPA + 2 * ALIGN(c.size, block_size);
	/* Each page rewritten every 12 ms: after a read of the log, at EL2. */
	nr = 8;
	base = calloc(nr, sizeof(u64));
	now = calloc(nr, sizeof(u64));
	vcpu_set_reg(t.vcpu, ARM64_CORE_REG(regs.pc), (u64)move_guest_code);
	vcpu_args_set(t.vcpu, 1, nr);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
	move_snapshot(&t, nr, base);
	pthread_create(&thread, NULL, move_vcpu_thread, &c);

	srandom(0x5eed);
	for (round = 0; round < MOVE_ROUNDS; round++) {
		/* Pages the guest writes now fault to the host (the slot is new). */
		usleep(2000 + random() % 8000);
		/* Write-protects them: under pKVM, the next writes stay at EL2. */
		at_a += move_collect(&t, nr, base, now, round, "before the move");
		usleep(random() % 10000);
		set_data_region(&t, gpa_b, c.size);
		moved += move_collect(&t, nr, base, now, round, "after the move");
		set_data_region(&t, DATA_GPA, c.size);
	}
	WRITE_ONCE(c.stop, true);
	/* The guest is kicked out by its next write (MMIO) or a signal-free exit. */
	set_data_region(&t, gpa_b, c.size);
	pthread_join(thread, NULL);
	el2 = vcpu_get_stat(t.vcpu, el2_dirty_faults);
	pr_info("memslot move with buffered frames: %u rounds, %lu+%lu pages written, %lu MMIO writes, %lu at EL2\n",
		MOVE_ROUNDS, at_a, moved, c.mmio, el2);
	TEST_ASSERT(moved && c.mmio, "the guest wrote %lu pages just before a move, %lu while away",
		    moved, c.mmio);
	TEST_ASSERT(!fast_dirty || el2, "no write was resolved at EL2");
	free(base);
	free(now);
	destroy_test_vm(&t);
}

/*
 * Delete and re-create, move and move back, or mprotect the slot's memory
 * (an MMU-notifier unmap, which can run while a split loop has dropped
 * mmu_lock to reschedule) while another thread keeps clearing, and so
 * splitting, the same slot. Nothing of the guest's data may be lost.
 */
static void test_split_vs_slot_churn(void)
{
	static const char * const what[] = { "delete", "move", "mprotect" };
	struct churn_ctx c = {};
	u64 size, iter, k, wait;
	pthread_t thread;
	int gone;
	struct test_vm t;

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	size = t.npages * t.page_size;
	c.t = &t;
	c.bitmap = bitmap_zalloc(t.npages);
	bitmap_fill(c.bitmap, t.npages);
	guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 7);

	for (iter = 0; iter < 6; iter++) {
		/* Fault the slot back in as blocks, then log and split. */
		vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
		guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
		vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);

		c.ok = 0;
		c.gone = 0;
		c.stop = false;
		pthread_create(&thread, NULL, clear_loop_thread, &c);
		for (k = 0; k < 8; k++) {
			usleep(2000);
			switch (iter % 3) {
			case 0:
				/* Handshake: a clear must find the slot gone (2 s at most). */
				gone = READ_ONCE(c.gone);
				set_data_region(&t, DATA_GPA, 0);
				for (wait = 0; READ_ONCE(c.gone) == gone && wait < 4000; wait++)
					usleep(500);
				set_data_region(&t, DATA_GPA, size);
				break;
			case 1:
				set_data_region(&t, DATA_GPA + SZ_4G, size);
				set_data_region(&t, DATA_GPA, size);
				break;
			case 2:
				TEST_ASSERT(!mprotect(t.hva, size, PROT_READ), "mprotect RO");
				TEST_ASSERT(!mprotect(t.hva, size, PROT_READ | PROT_WRITE),
					    "mprotect RW");
				break;
			}
		}
		WRITE_ONCE(c.stop, true);
		pthread_join(thread, NULL);
		pr_info("split vs %s: %d clears done, %d found no slot\n", what[iter % 3],
			c.ok, c.gone);
		TEST_ASSERT(c.ok && (iter % 3 || c.gone),
			    "split vs %s: %d clears done, %d found no slot",
			    what[iter % 3], c.ok, c.gone);

		check_memory(&t, what[iter % 3]);
		guest_pass(&t, CMD_READ, 0, t.npages, 1, 0, 0);
		guest_pass(&t, CMD_WRITE, t.npages / 3, t.npages, 1, 0, 20 + iter);
		check_memory(&t, what[iter % 3]);
	}
	free(c.bitmap);
	destroy_test_vm(&t);
}

struct restore_churn {
	struct test_vm *t;
	pthread_rwlock_t layout;	/* held for write while the slot moves */
	bool stop;
	u64 reads, moves, deletes, mprotects;
};

/* vCPU 0 reads every page, pass after pass, checking its data. */
static void *restore_reader_thread(void *arg)
{
	struct restore_churn *c = arg;

	while (!READ_ONCE(c->stop)) {
		pthread_rwlock_rdlock(&c->layout);
		guest_pass(c->t, CMD_READ, 0, c->t->npages, 1, 0, 0);
		pthread_rwlock_unlock(&c->layout);
		c->reads++;
	}
	return NULL;
}

/*
 * Move the slot away and back, or delete and re-create it (never while
 * the vCPU runs: it would find no memory), or make its memory read-only
 * and writable again (an MMU-notifier unmap of every page).
 */
static void *restore_churn_thread(void *arg)
{
	struct restore_churn *c = arg;
	u64 size = c->t->npages * c->t->page_size, k;

	for (k = 0; !READ_ONCE(c->stop); k++) {
		switch (k % 4) {
		case 0:
			pthread_rwlock_wrlock(&c->layout);
			set_data_region(c->t, DATA_GPA + SZ_4G, size);
			set_data_region(c->t, DATA_GPA, size);
			pthread_rwlock_unlock(&c->layout);
			c->moves++;
			break;
		case 2:
			pthread_rwlock_wrlock(&c->layout);
			set_data_region(c->t, DATA_GPA, 0);
			set_data_region(c->t, DATA_GPA, size);
			pthread_rwlock_unlock(&c->layout);
			c->deletes++;
			break;
		default:
			TEST_ASSERT(!mprotect(c->t->hva, size, PROT_READ), "mprotect RO");
			TEST_ASSERT(!mprotect(c->t->hva, size, PROT_READ | PROT_WRITE),
				    "mprotect RW");
			c->mprotects++;
			break;
		}
		usleep(1000);
	}
	return NULL;
}

/*
 * The restore when logging stops, racing everything that can reach the
 * slot's mappings: a vCPU faulting pages back in, MMU-notifier unmaps
 * (which can land between two restore hypercalls, as the loop yields
 * mmu_lock), and a delete or move of the slot (queued behind the restore
 * on slots_lock, or landing between the split and the restore). Nothing
 * of the guest's data may be lost, the dirty log is exact once quiet, and
 * no page is leaked (checked by the caller).
 */
static void test_restore_vs_churn(void)
{
	struct kvm_clear_dirty_log log = { .slot = DATA_SLOT };
	struct restore_churn c = {};
	pthread_rwlockattr_t rwattr;
	pthread_t reader, churn;
	u64 round, b0, h0, faults;
	struct test_vm t;

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 5);
	c.t = &t;
	/* Writer-preferring: the vCPU's reads must not starve the churn. */
	pthread_rwlockattr_init(&rwattr);
	pthread_rwlockattr_setkind_np(&rwattr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&c.layout, &rwattr);
	pthread_rwlockattr_destroy(&rwattr);
	log.num_pages = t.npages;
	log.dirty_bitmap = t.bitmap;
	bitmap_fill(t.bitmap, t.npages);
	hyp_events_read();
	b0 = hyp.collapse_blocks;
	h0 = hyp.collapse_calls;

	pthread_create(&reader, NULL, restore_reader_thread, &c);
	for (round = 0; round < 40; round++) {
		/* Split what the vCPU faulted back in, then restore it. */
		vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
		if (__vm_ioctl(t.vm, KVM_CLEAR_DIRTY_LOG, &log))
			TEST_ASSERT(errno == ENOENT, "KVM_CLEAR_DIRTY_LOG: errno %d", errno);
		vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
		/*
		 * The first round, with only the vCPU racing, restores every
		 * block; then the slot churns. Longer pauses now and then let
		 * the vCPU fault blocks back in with logging off.
		 */
		if (!round)
			pthread_create(&churn, NULL, restore_churn_thread, &c);
		usleep(round % 4 ? 2000 : 20000);
	}
	WRITE_ONCE(c.stop, true);
	pthread_join(churn, NULL);
	pthread_join(reader, NULL);
	pthread_rwlock_destroy(&c.layout);

	hyp_events_read();
	b0 = hyp.collapse_blocks - b0;
	h0 = hyp.collapse_calls - h0;
	pr_info("restore vs churn: %lu rounds, %lu vCPU read passes, %lu moves, %lu deletes, %lu mprotects; %lu blocks restored by %lu hypercalls\n",
		round, c.reads, c.moves, c.deletes, c.mprotects, b0, h0);
	TEST_ASSERT(c.reads && c.moves && c.deletes && c.mprotects,
		    "restore vs churn: a racer never ran");
	TEST_ASSERT(!collapse || b0 >= t.nr_blocks,
		    "restore vs churn: %lu blocks restored, fewer than the first round's %lu",
		    b0, t.nr_blocks);
	check_memory(&t, "restore vs churn");

	/*
	 * Quiet again. A write pass first: after mprotect(), the host's
	 * page-table entries stay read-only until written (private memory),
	 * so read faults map pages read-only, and a write to those is the
	 * host's to resolve, not EL2's. Then the log must be exact.
	 */
	faults = guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, 6);
	pr_info("restore vs churn: %lu faults to map every page writable again\n", faults);
	check_memory(&t, "write pass after restore vs churn");
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
	clear_range(&t, 0, t.npages);
	bitmap_zero(t.expect, t.npages);
	memset(blk_split, 0, sizeof(blk_split));
	check_write_pass(&t, 5, 2, 77, count_pages(0, t.npages, 5, 2),
			 "write pass after restore vs churn");
	check_memory(&t, "after restore vs churn");
	destroy_test_vm(&t);
}

/*
 * Kill the VMM while it is inside KVM_CLEAR_DIRTY_LOG splitting blocks, or
 * turning logging off (EL2 restoring them, table pages coming back on the
 * split cache): the VM is torn down with the split memcache part used, and
 * every page it donated must come back. The child says, in memory shared
 * with the parent, which of the two it is in (IN_CLEAR, IN_LOG_OFF) and
 * when it leaves.
 */
enum { IN_CLEAR = 1, IN_LOG_OFF };

static void kill_child_vmm(int ready_fd, int *in_ioctl)
{
	struct test_vm t;
	u64 seed = 1;

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, seed);
	TEST_ASSERT(write(ready_fd, "r", 1) == 1, "signal readiness");
	for (;;) {
		vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
		WRITE_ONCE(*in_ioctl, IN_CLEAR);
		clear_range(&t, 0, t.npages);
		WRITE_ONCE(*in_ioctl, IN_LOG_OFF);
		vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
		WRITE_ONCE(*in_ioctl, 0);
		guest_pass(&t, CMD_WRITE, 0, t.npages, 1, 0, ++seed);
	}
}

static u64 now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

static void test_kill_mid_split(u64 secpt)
{
	int i, want, landed[3] = {}, status, pipefd[2], *in_ioctl;
	u64 now, deadline, tries;
	pid_t pid;
	char c;

	if (!pkvm)
		return;

	in_ioctl = mmap(NULL, getpagesize(), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	TEST_ASSERT(in_ioctl != MAP_FAILED, "mmap");
	for (i = 0; i < 12; i++) {
		want = i % 2 ? IN_LOG_OFF : IN_CLEAR;
		WRITE_ONCE(*in_ioctl, 0);
		TEST_ASSERT(!pipe(pipefd), "pipe");
		fflush(stdout);
		pid = fork();
		TEST_ASSERT(pid >= 0, "fork");
		if (!pid) {
			close(pipefd[0]);
			kill_child_vmm(pipefd[1], in_ioctl);
		}
		close(pipefd[1]);
		TEST_ASSERT(read(pipefd[0], &c, 1) == 1, "child VMM died before its VM ran");
		close(pipefd[0]);

		/* Catch it entering the ioctl, then wait a little longer each time. */
		deadline = now_us() + 20 * 1000000ULL;
		while (READ_ONCE(*in_ioctl) != want && now_us() < deadline)
			;
		deadline = now_us() + (i / 2) * 200;
		while (now_us() < deadline)
			;
		landed[READ_ONCE(*in_ioctl)]++;
		kill(pid, SIGKILL);
		TEST_ASSERT(waitpid(pid, &status, 0) == pid, "waitpid");
		TEST_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			    "child VMM ended with status 0x%x, not by SIGKILL", status);

		/* Its VM is gone: every donated page must be back. */
		for (tries = 0; tries < 50 && (now = sec_pagetables_kb()) != secpt; tries++)
			usleep(100000);
		TEST_ASSERT(now == secpt,
			    "SecPageTables %lu kB after killing a VMM mid-split, %lu kB before",
			    now, secpt);
	}
	munmap(in_ioctl, getpagesize());
	pr_info("killed %d VMMs, %d while in KVM_CLEAR_DIRTY_LOG, %d while turning logging off; SecPageTables back to %lu kB\n",
		i, landed[IN_CLEAR], landed[IN_LOG_OFF], secpt);
	TEST_ASSERT(landed[IN_CLEAR], "no kill landed inside KVM_CLEAR_DIRTY_LOG");
	TEST_ASSERT(landed[IN_LOG_OFF], "no kill landed while turning logging off");
}

#define FAST_DIRTY_PARAM	"/sys/module/kvm/parameters/pkvm_fast_dirty"
#define DIRTY_BUF_PARAM		"/sys/kernel/debug/kvm/pkvm_dirty_buf_entries"

#define SPLIT_WP_PARAM		"/sys/kernel/debug/kvm/pkvm_split_wrprotect"
#define COLLAPSE_PARAM		"/sys/kernel/debug/kvm/pkvm_collapse"

/* A boolean switch; @dflt if the kernel does not have it. */
static bool param_or(const char *path, bool dflt)
{
	char val = dflt ? 'Y' : 'N';
	FILE *f = fopen(path, "r");

	if (f) {
		if (fread(&val, 1, 1, f) != 1)
			val = 'N';
		fclose(f);
	}
	return val == 'Y';
}

static bool param_enabled(const char *path)
{
	return param_or(path, false);
}

static bool fast_dirty_enabled(void)
{
	return param_enabled(FAST_DIRTY_PARAM);
}

/* Set a boolean switch; returns what it reads back. */
static bool set_param(const char *path, bool on)
{
	int fd = open(path, O_WRONLY);

	TEST_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
	TEST_ASSERT(write(fd, on ? "Y" : "N", 1) == 1, "write %s", path);
	close(fd);
	TEST_ASSERT(param_enabled(path) == on, "%s did not take %d", path, on);
	return on;
}

/* Leave the parameters as they were found, even when an assertion fails. */
static void restore_fast_dirty(void)
{
	write_file(FAST_DIRTY_PARAM, "1");
	write_file(DIRTY_BUF_PARAM, "0");
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

/*
 * The kernel's answer: only a host in protected mode creates a protected
 * VM. The command line must agree (a protected mode that failed to
 * initialise is a failure, not a non-protected run).
 */
static bool host_is_pkvm(void)
{
	char cmdline[4096] = "";
	FILE *f = fopen("/proc/cmdline", "r");
	int kvm_fd, vm_fd;
	bool asked;

	if (f) {
		if (!fgets(cmdline, sizeof(cmdline), f))
			cmdline[0] = '\0';
		fclose(f);
	}
	asked = strstr(cmdline, "kvm-arm.mode=protected");
	kvm_fd = open_kvm_dev_path_or_exit();
	vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, KVM_VM_TYPE_ARM_PROTECTED);
	if (vm_fd >= 0)
		close(vm_fd);
	close(kvm_fd);
	TEST_ASSERT((vm_fd >= 0) == asked,
		    "a protected VM %s, but the command line %s protected mode",
		    vm_fd >= 0 ? "can be created" : "cannot be created",
		    asked ? "asks for" : "does not ask for");
	return vm_fd >= 0;
}

/*
 * Random sequence test (-z STEPS): from a seed, a sequence of the steps
 * that reach the split and restore ABI and what it interacts with (guest
 * reads and writes, dirty logging on and off, clears of random ranges,
 * KVM_GET_DIRTY_LOG, slot moves, deletes, mprotect(), the pKVM knobs, top-ups
 * that fail part-way, VM teardown and creation with and without
 * manual-protect, a protected VM started and stopped beside it, bursts of
 * raw hostile hypercalls made by the kernel (pkvm_split_raw: each call
 * checked there against EL2's own page counts)), checked after every step
 * against a model: every word of guest memory, the exact dirty log, and on
 * pKVM the guest's stage-2 at EL2 against the page states and the host's
 * records (pkvm_split_check), and SecPageTables back to its baseline after
 * each VM. A failure prints the seed and the step: -s SEED replays it.
 *
 * The VM has two vCPUs; a guest pass runs on one or on both at once. On
 * pKVM, every pass takes exactly the faults EL2's stage-2 says it must,
 * read before it: while logging, one per page written that was not
 * writable or read that was not mapped; otherwise at least one and at
 * most that many. After a clear whose top-up failed, until logging starts
 * again, a write pass may take one fault more per block it writes in: the
 * fallback write-protects what it could not split, and a page of such a
 * block can take two faults (seen once, not yet explained). And while
 * logging, no page clean in the model may be mapped writable (its next
 * write would not be logged).
 */
struct fuzz {
	struct test_vm t;
	struct raw_vm pvm;
	bool live, manual, logging, pvm_live, fast, masks, topup_failed;
	u64 seed, step, rng, secpt, ops[16], raw_calls, two_vcpu_passes;
	/* EL2's stage-2 of the data slot after the last step: bit per page. */
	u64 mapped[MAX_PAGES / 64], writable[MAX_PAGES / 64];
	const char *op;
	bool done;
};

static struct fuzz fz;

enum {
	FZ_WRITE, FZ_READ, FZ_LOG, FZ_CLEAR, FZ_GET, FZ_MOVE, FZ_DELETE,
	FZ_MPROTECT, FZ_KNOBS, FZ_TOPUP, FZ_NEW_VM, FZ_RAW, FZ_PVM, FZ_NR,
};

static const char * const fz_names[FZ_NR] = {
	"write pass", "read pass", "logging on/off", "clear a range",
	"get the dirty log", "move the slot and back", "delete and re-create the slot",
	"mprotect read-only and back", "flip the pKVM knobs", "clear with a failing top-up",
	"new VM", "raw hostile calls", "start or stop a protected VM",
};

/* Relative weights: guest passes and the log most often. */
static const u64 fz_weight[FZ_NR] = { 6, 3, 3, 5, 3, 1, 1, 1, 1, 1, 1, 3, 1 };

static u64 fz_rand(void)
{
	/* xorshift64*: reproducible from the seed on any libc. */
	fz.rng ^= fz.rng >> 12;
	fz.rng ^= fz.rng << 25;
	fz.rng ^= fz.rng >> 27;
	return fz.rng * 0x2545f4914f6cdd1dULL;
}

static u64 fz_below(u64 n)
{
	return fz_rand() % n;
}

static void fz_report(void)
{
	if (fz.seed && !fz.done)
		printf("random sequence: FAILED at seed 0x%lx step %lu (%s): replay with %s\n",
		       fz.seed, fz.step, fz.op ?: "setup", "-z <step + 1> -s <seed>");
}

/* The log model after logging starts, or the slot is re-created logging. */
static void fz_log_started(void)
{
	if (fz.manual)
		bitmap_fill(fz.t.expect, fz.t.npages);
	else
		bitmap_zero(fz.t.expect, fz.t.npages);
}

/* A protected VM beside the test's, or not: its memory is donated to it. */
static void fz_toggle_pvm(void)
{
	if (fz.pvm_live)
		stop_raw_vm(&fz.pvm);
	else
		start_raw_vm(&fz.pvm, KVM_VM_TYPE_ARM_PROTECTED, true);
	fz.pvm_live = !fz.pvm_live;
}

static void fz_new_vm(void)
{
	/* SecPageTables is back to its baseline without the protected VM. */
	if (fz.pvm_live)
		fz_toggle_pvm();
	if (fz.live) {
		destroy_test_vm(&fz.t);
		check_no_leak(fz.secpt, "a VM of the random sequence");
	}
	fz.manual = fz_below(2);
	/* A VM takes the fast path's switch as it is when it is created. */
	fz.fast = pkvm && fast_dirty_enabled();
	create_test_vm_vcpus(&fz.t, fz.manual ? KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE |
						KVM_DIRTY_LOG_INITIALLY_SET : 0, 2);
	fz.live = true;
	fz.logging = false;
	fz.masks = false;
	fz.topup_failed = false;
	/* Both vCPUs run once: their own pages of slot 0 are mapped from now on. */
	fz.t.pass_vcpus = 2;
	guest_pass(&fz.t, CMD_WRITE, 0, fz.t.npages, 1, 0, 1);
	fz.t.pass_vcpus = 1;
}

static bool fz_bit(const u64 *mask, u64 page)
{
	return mask[page / 64] & BIT_ULL(page % 64);
}

/*
 * The data slot's lines of pkvm_split_check: "slot N gfn G pages P", then
 * "gfn mapped writable" per 64 pages, into fz.mapped and fz.writable.
 */
static void fz_read_masks(FILE *f, const char *path)
{
	u64 gfn, base = 0, pages = 0, mapped, writable, lines = 0;
	bool data = false;
	char line[128];
	long result = -1;
	int slot;

	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "slot %d gfn 0x%lx pages %lu", &slot, &gfn, &pages) == 3) {
			data = slot == DATA_SLOT;
			if (data)
				base = gfn;
		} else if (sscanf(line, "0x%lx 0x%lx 0x%lx", &gfn, &mapped, &writable) == 3) {
			if (!data)
				continue;
			TEST_ASSERT(gfn >= base && gfn - base < fz.t.npages && !((gfn - base) % 64),
				    "%s: line for gfn 0x%lx in a slot at 0x%lx", path, gfn, base);
			fz.mapped[(gfn - base) / 64] = mapped;
			fz.writable[(gfn - base) / 64] = writable;
			lines++;
		} else {
			TEST_ASSERT(sscanf(line, "masks %ld", &result) == 1,
				    "%s: unexpected line '%s'", path, line);
		}
	}
	TEST_ASSERT(!result, "%s: EL2's page masks: error %ld", path, result);
	TEST_ASSERT(lines == DIV_ROUND_UP(fz.t.npages, 64),
		    "%s: %lu lines of masks for the data slot's %lu pages", path, lines,
		    fz.t.npages);
	fz.masks = true;
}

/*
 * The guest's stage-2 at EL2 agrees with the page states and with the
 * host's records: as many pages mapped, a block leaf for every record of
 * a whole block that is not split.
 */
static void fz_check_el2(void)
{
	u64 calls, pages, blocks, marked, hpages, hblocks, hsplit, records, bad;
	u64 tables, split_cache, i;
	char path[128];
	long result;
	FILE *f;
	int n;

	if (!pkvm)
		return;
	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/pkvm_split_check",
		 getpid(), fz.t.vm->fd);
	f = fopen(path, "r");
	TEST_ASSERT(f, "%s: %s (the random test needs CONFIG_PKVM_SPLIT_ABI_TEST)",
		    path, strerror(errno));
	n = fscanf(f, "el2: calls %lu pages %lu blocks %lu marked %lu\n"
		   "host: pages %lu blocks %lu split %lu records %lu\n"
		   "result %ld bad_ipa 0x%lx\nel2 pages: tables %lu split_cache %lu\n",
		   &calls, &pages, &blocks, &marked, &hpages, &hblocks, &hsplit,
		   &records, &result, &bad, &tables, &split_cache);
	TEST_ASSERT(n == 12, "%s: %d fields read", path, n);
	/* -EIO: a record EL2 does not map as recorded (the kernel log says which). */
	TEST_ASSERT(!result, "EL2 stage-2 check: error %ld at IPA 0x%lx", result, bad);
	TEST_ASSERT(pages == hpages && blocks == hblocks,
		    "EL2: %lu pages, %lu blocks; host: %lu pages, %lu blocks, %lu split",
		    pages, blocks, hpages, hblocks, hsplit);
	TEST_ASSERT(tables >= hsplit, "EL2: %lu last-level tables for %lu split blocks",
		    tables, hsplit);
	fz_read_masks(f, path);
	fclose(f);

	if (!fz.logging)
		return;
	for (i = 0; i < fz.t.npages; i++)
		TEST_ASSERT(test_bit(i, fz.t.expect) || !fz_bit(fz.writable, i),
			    "page %lu: clean in the log but writable at EL2", i);
}

/*
 * A burst of random raw hostile calls for the VM, made and checked one by
 * one by the kernel (CONFIG_PKVM_SPLIT_ABI_TEST: pkvm_split_raw); a
 * failure is described in the kernel log, with the kernel's seed and step.
 */
static void fz_raw(void)
{
	u64 seed = fz_rand(), steps = 1 + fz_below(16);
	char path[128], val[64];
	ssize_t ret;
	int fd, len;

	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/pkvm_split_raw",
		 getpid(), fz.t.vm->fd);
	fd = open(path, O_WRONLY);
	TEST_ASSERT(fd >= 0, "%s: %s (the random test needs CONFIG_PKVM_SPLIT_ABI_TEST)",
		    path, strerror(errno));
	len = snprintf(val, sizeof(val), "%lx %lu", seed, steps);
	ret = write(fd, val, len);
	TEST_ASSERT(ret == len,
		    "raw hostile calls, kernel seed 0x%lx, %lu steps: %s (the kernel log says which call)",
		    seed, steps, ret < 0 ? strerror(errno) : "short write");
	close(fd);
	fz.raw_calls += steps;
}

/*
 * The faults of the pass just run (@faults), against EL2's stage-2 before
 * it (fz.mapped, fz.writable), and where they were resolved: EL2 resolves
 * none while the slot is not logging, nor in a VM created with the fast
 * path off. The same pass run again at once takes no fault at all.
 */
static void fz_check_pass(int cmd, u64 first, u64 last, u64 stride, u64 offset, u8 seed,
			  u64 faults)
{
	const u64 *mask = cmd == CMD_WRITE ? fz.writable : fz.mapped;
	u64 i, need = 0, blocks = 0, b = ~0ULL, extra = 0;
	bool ok;

	if (fz.masks) {
		for (i = first + offset; i < last; i += stride) {
			need += !fz_bit(mask, i);
			blocks += i / fz.t.pages_per_block != b;
			b = i / fz.t.pages_per_block;
		}
		if (cmd == CMD_WRITE && fz.topup_failed)
			extra = blocks;
		if (fz.logging)
			ok = faults >= need && faults <= need + extra;
		else
			ok = faults <= need + extra && (!need || faults);
		TEST_ASSERT(ok, "%s, %d vCPU(s): %lu faults (%lu at EL2), %lu pages %s before%s%s",
			    fz.op, fz.t.pass_vcpus, faults, pass_faults.el2, need,
			    cmd == CMD_WRITE ? "not writable" : "not mapped",
			    fz.logging ? " while logging" : "",
			    extra ? ", after a failed top-up" : "");
	}
	TEST_ASSERT(!pass_faults.el2 || (fz.logging && fz.fast),
		    "%s: %lu faults resolved at EL2 %s", fz.op, pass_faults.el2,
		    fz.logging ? "in a VM created with the fast path off" :
				 "while the slot is not logging");
	faults = guest_pass(&fz.t, cmd, first, last, stride, offset, seed);
	TEST_ASSERT(!faults, "%s: the same pass again took %lu faults (%lu at EL2)",
		    fz.op, faults, pass_faults.el2);
}

static void fz_step(int op)
{
	struct test_vm *t = &fz.t;
	u64 first, nr, stride, offset, faults;
	u8 seed;

	switch (op) {
	case FZ_WRITE:
		first = fz_below(t->npages);
		nr = 1 + fz_below(t->npages - first);
		stride = 1 + fz_below(7);
		offset = fz_below(stride);
		seed = 2 + fz_below(250);
		t->pass_vcpus = 1 + fz_below(2);
		fz.two_vcpu_passes += t->pass_vcpus == 2;
		faults = guest_pass(t, CMD_WRITE, first, first + nr, stride, offset, seed);
		fz_check_pass(CMD_WRITE, first, first + nr, stride, offset, seed, faults);
		t->pass_vcpus = 1;
		break;
	case FZ_READ:
		t->pass_vcpus = 1 + fz_below(2);
		fz.two_vcpu_passes += t->pass_vcpus == 2;
		faults = guest_pass(t, CMD_READ, 0, t->npages, 1, 0, 0);
		fz_check_pass(CMD_READ, 0, t->npages, 1, 0, 0, faults);
		t->pass_vcpus = 1;
		break;
	case FZ_LOG:
		fz.logging = !fz.logging;
		vm_mem_region_set_flags(t->vm, DATA_SLOT,
					fz.logging ? KVM_MEM_LOG_DIRTY_PAGES : 0);
		if (fz.logging)
			fz_log_started();
		fz.topup_failed = false;
		memset(blk_split, 0, sizeof(blk_split));
		break;
	case FZ_CLEAR:
		if (!fz.logging || !fz.manual)
			break;
		first = 64 * fz_below(t->npages / 64);
		nr = 64 * (1 + fz_below((t->npages - first) / 64));
		clear_range(t, first, nr);
		break;
	case FZ_GET:
		if (!fz.logging)
			break;
		kvm_vm_get_dirty_log(t->vm, DATA_SLOT, t->bitmap);
		check_bitmap(t, "random sequence");
		/* Without manual-protect, the get also clears the log. */
		if (!fz.manual)
			bitmap_zero(t->expect, t->npages);
		break;
	case FZ_MOVE:
	case FZ_DELETE:
		set_data_region(t, op == FZ_MOVE ? DATA_GPA + SZ_4G : DATA_GPA,
				op == FZ_MOVE ? t->npages * t->page_size : 0);
		set_data_region(t, DATA_GPA, t->npages * t->page_size);
		/*
		 * A move keeps the slot's dirty bitmap; a slot created again
		 * logging has a new one.
		 */
		if (op == FZ_DELETE && fz.logging)
			fz_log_started();
		break;
	case FZ_MPROTECT:
		TEST_ASSERT(!mprotect(t->hva, t->npages * t->page_size, PROT_READ),
			    "mprotect RO");
		TEST_ASSERT(!mprotect(t->hva, t->npages * t->page_size,
				      PROT_READ | PROT_WRITE), "mprotect RW");
		break;
	case FZ_KNOBS:
		if (!pkvm)
			break;
		write_file(FAST_DIRTY_PARAM, fz_below(2) ? "1" : "0");
		split_wp = set_param(SPLIT_WP_PARAM, fz_below(2));
		collapse = set_param(COLLAPSE_PARAM, fz_below(2));
		break;
	case FZ_TOPUP:
		if (!pkvm || !fz.logging || !fz.manual || !disarm_page_alloc_failure() ||
		    access("/proc/thread-self/make-it-fail", W_OK))
			break;
		clear_all_failing(t, fz_below(20));
		fz.topup_failed = true;
		break;
	case FZ_NEW_VM:
		fz_new_vm();
		break;
	case FZ_RAW:
		if (pkvm)
			fz_raw();
		break;
	case FZ_PVM:
		if (pkvm)
			fz_toggle_pvm();
		break;
	}
}

static void test_random_sequence(u64 seed, u64 steps)
{
	u64 total = 0, i, w;
	int op;

	memset(&fz, 0, sizeof(fz));
	fz.seed = seed;
	fz.rng = seed ?: 1;
	fz.secpt = sec_pagetables_kb();
	pr_info("random sequence: seed 0x%lx, %lu steps\n", seed, steps);
	fz_new_vm();
	check_memory(&fz.t, "the first VM");
	fz_check_el2();

	for (op = 0; op < FZ_NR; op++)
		total += fz_weight[op];
	for (fz.step = 0; fz.step < steps; fz.step++) {
		w = fz_below(total);
		for (op = 0; w >= fz_weight[op]; op++)
			w -= fz_weight[op];
		fz.op = fz_names[op];
		fz.ops[op]++;
		/* Named before it runs: a timeout or a panic still says which. */
		fprintf(stderr, "# random sequence 0x%lx step %lu: %s\n", seed, fz.step, fz.op);
		fz_step(op);
		check_memory(&fz.t, fz.op);
		fz_check_el2();
	}
	fz.op = "teardown";
	if (fz.pvm_live)
		fz_toggle_pvm();
	destroy_test_vm(&fz.t);
	check_no_leak(fz.secpt, "the random sequence");
	if (pkvm) {
		restore_fast_dirty();
		split_wp = set_param(SPLIT_WP_PARAM, true);
		collapse = set_param(COLLAPSE_PARAM, true);
	}
	fz.done = true;
	printf("random sequence: seed 0x%lx, %lu steps passed:", seed, steps);
	for (i = 0; i < FZ_NR; i++)
		printf(" %lu %s,", fz.ops[i], fz_names[i]);
	printf(" %lu raw hostile calls in all, %lu guest passes on two vCPUs\n", fz.raw_calls,
	       fz.two_vcpu_passes);
}

/* -t: the one scenario to run, or all of them. */
static const char *only;
static const char * const scenarios[] = {
	"enable", "clear", "vcpu-race", "slot-churn", "move-buffered",
	"restore-churn", "shared", "pkvm",
};

static bool want(const char *scenario)
{
	return !only || !strcmp(only, scenario);
}

int main(int argc, char *argv[])
{
	bool abi_required = false, fault_required = false;
	u64 sizes, secpt, steps = 0, seeds[8];
	int opt, nr_seeds = 0, i;

	while ((opt = getopt(argc, argv, "afz:s:t:")) != -1) {
		switch (opt) {
		case 'a':
			abi_required = true;
			break;
		case 'f':
			fault_required = true;
			break;
		case 'z':
			steps = strtoull(optarg, NULL, 0);
			TEST_ASSERT(steps, "-z: a number of steps, not '%s'", optarg);
			break;
		case 't':
			only = optarg;
			for (i = 0; i < ARRAY_SIZE(scenarios) && strcmp(only, scenarios[i]); i++)
				;
			TEST_ASSERT(i < ARRAY_SIZE(scenarios), "-t: no scenario '%s'", only);
			break;
		case 's':
			TEST_ASSERT(nr_seeds < ARRAY_SIZE(seeds), "at most %zu seeds",
				    ARRAY_SIZE(seeds));
			seeds[nr_seeds++] = strtoull(optarg, NULL, 0);
			break;
		default:
			printf("usage: %s [-a] [-f] [-t SCENARIO] [-z STEPS [-s SEED]...]\n"
			       " -a: fail if the pKVM hostile-host ABI table is missing\n"
			       " -f: fail if page allocation fault injection is missing\n"
			       " -z: only the random sequence test, STEPS steps per seed\n"
			       " -s: its seed (repeatable; default 0x1, 0x2 and a new one)\n"
			       " -t: only one scenario: enable, clear, vcpu-race, slot-churn,\n"
			       "     move-buffered, restore-churn, shared or pkvm\n",
			       argv[0]);
			/* A bad option is a broken test line, not a skip. */
			exit(KSFT_FAIL);
		}
	}

	TEST_REQUIRE(kvm_has_cap(KVM_CAP_ARM_SUPPORTED_BLOCK_SIZES));
	TEST_REQUIRE(kvm_has_cap(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2));

	pkvm = host_is_pkvm();
	fast_dirty = pkvm && fast_dirty_enabled();
	/* Test kernels' switches (CONFIG_PKVM_SPLIT_ABI_TEST), on without them. */
	split_wp = pkvm && param_or(SPLIT_WP_PARAM, true);
	collapse = pkvm && param_or(COLLAPSE_PARAM, true);
	if (pkvm)
		hyp_events_start();
	block_size = get_backing_src_pagesz(VM_MEM_SRC_ANONYMOUS_HUGETLB);
	sizes = kvm_check_cap(KVM_CAP_ARM_SUPPORTED_BLOCK_SIZES);
	pr_info("host %s, supported block sizes 0x%lx, hugetlb block %lu KiB, dirty-logging faults resolved %s\n",
		pkvm ? "pKVM" : "non-protected KVM", sizes, block_size >> 10,
		fast_dirty ? "at EL2" : "by the host");
	TEST_ASSERT(sizes & block_size, "block size 0x%lx not supported (0x%lx)",
		    block_size, sizes);
	if (pkvm)
		TEST_ASSERT(!(sizes & ~(getpagesize() | block_size)),
			    "pKVM claims block sizes it does not map: 0x%lx", sizes);

	if (steps) {
		if (!nr_seeds) {
			seeds[nr_seeds++] = 0x1;
			seeds[nr_seeds++] = 0x2;
			seeds[nr_seeds++] = now_us() ^ ((u64)getpid() << 32);
		}
		atexit(fz_report);
		for (i = 0; i < nr_seeds; i++)
			test_random_sequence(seeds[i], steps);
		pr_info("PASS\n");
		return 0;
	}

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
		if (split_wp && !access(SPLIT_WP_PARAM, W_OK)) {
			/* The two-step path (write-protect, then split) still works. */
			split_wp = set_param(SPLIT_WP_PARAM, false);
			test_split_on_clear();
			split_wp = set_param(SPLIT_WP_PARAM, true);
			check_no_leak(secpt, "clear-time split, two-step");
		}
	}
	if (want("vcpu-race")) {
		test_split_vs_vcpu_faults();
		check_no_leak(secpt, "split vs vCPU faults");
	}
	if (want("slot-churn")) {
		test_split_vs_slot_churn();
		check_no_leak(secpt, "split vs slot churn");
	}
	if (want("move-buffered")) {
		test_move_with_buffered_frames();
		check_no_leak(secpt, "memslot move with buffered frames");
	}
	if (want("restore-churn")) {
		test_restore_vs_churn();
		check_no_leak(secpt, "restore vs churn");
	}
	if (want("shared")) {
		test_split_shared_with_other_vm();
		check_no_leak(secpt, "split shared with another guest");
	}
	if (pkvm && want("pkvm")) {
		if (fast_dirty) {
			dirty_buf_entries = read_u64_file(DIRTY_BUF_PARAM) ?: DIRTY_BUF_ENTRIES;
			test_small_dirty_buffer(secpt);
			test_fast_dirty_off(secpt);
		}
		test_split_topup_failure(fault_required);
		check_no_leak(secpt, "failed top-ups");
		test_abi_hostile(abi_required);
		check_no_leak(secpt, "the hostile-host table");
		test_abi_dying(abi_required);
		check_no_leak(secpt, "a VM torn down under the table");
		test_protected_vm_refuses();
		check_no_leak(secpt, "the protected VM");
		test_kill_mid_split(secpt);
	}
	pr_info("PASS\n");
	return 0;
}
