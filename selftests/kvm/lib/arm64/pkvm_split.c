// SPDX-License-Identifier: GPL-2.0-only
/*
 * What the pKVM eager-split tests share: see pkvm_split.h. Linked only into
 * those tests (arm64/pkvm_split_*_test).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/time.h>

#include "kvm_util.h"
#include "pkvm_split.h"
#include "processor.h"
#include "test_util.h"
#include "ucall.h"

/* A pass's stride and offset are per vCPU: two vCPUs can share a pass. */
u64 guest_cmd, guest_first, guest_last, guest_rounds;
u64 guest_stride[MAX_VCPUS], guest_offset[MAX_VCPUS];
u64 guest_page_size;
u8 guest_seed;
u8 page_seed[MAX_PAGES];

/* What the test expects of stage-2: blocks split, pages write-protected. */
bool blk_split[MAX_PAGES];
bool page_ro[MAX_PAGES];

void guest_code(void)
{
	for (;;) {
		u64 words = guest_page_size / 8, id = guest_get_vcpuid();
		u64 i, w, r;

		/* Fault in page_seed[] now, so that only test pages fault below. */
		for (i = 0; i < MAX_PAGES; i += 64)
			READ_ONCE(page_seed[i]);

		/* A write pass of several rounds: round r writes seed + r. */
		for (r = 0; r < (guest_cmd == CMD_WRITE ? guest_rounds : 1); r++) {
			for (i = guest_first + guest_offset[id]; i < guest_last;
			     i += guest_stride[id]) {
				u64 *page = (u64 *)(TEST_GVA + i * guest_page_size);
				u8 seed = guest_seed + r;

				if (guest_cmd == CMD_WRITE) {
					for (w = 0; w < words; w++)
						WRITE_ONCE(page[w], pattern(i, w, seed));
				} else {
					GUEST_ASSERT_EQ(READ_ONCE(page[0]),
							pattern(i, 0, page_seed[i]));
					GUEST_ASSERT_EQ(READ_ONCE(page[words - 1]),
							pattern(i, words - 1, page_seed[i]));
				}
			}
		}
		GUEST_SYNC(guest_cmd);
	}
}

bool pkvm;
u64 block_size;

/* pKVM resolves dirty-logging write faults at EL2 for the VMs created now. */
bool fast_dirty;

/*
 * pKVM restores in place the blocks EL2 split when logging stops
 * (debugfs kvm/pkvm_collapse); otherwise each is collapsed on the next fault.
 */
bool collapse;

/* What the last guest_pass() took, by where it was resolved. */
struct pass_faults pass_faults;

u64 dirty_buf_entries = DIRTY_BUF_ENTRIES;

/*
 * What EL2 did, from its hyp events (CONFIG_NVHE_EL2_TRACING), summed over
 * the events read so far: the calls the host has no statistic for.
 */
struct hyp_counts hyp;

#define HYP_TRACE	"/sys/kernel/tracing/remotes/hypervisor"
static const char * const hyp_events[] = {
	"pkvm_host_split_guest", "pkvm_host_collapse_range",
	"pkvm_host_wrprotect_guest", "pkvm_dirty_fault", "selftest",
};

static int hyp_pipe = -1;
static pid_t hyp_pid;
static __thread bool hyp_reader;
static pthread_mutex_t hyp_lock = PTHREAD_MUTEX_INITIALIZER;
static u64 hyp_marker;

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

/* Add one trace_pipe line to the sums; a marker's id, 0 for other events. */
static u64 hyp_account(const char *line)
{
	const char *ev = strstr(line, ": ");

	TEST_ASSERT(!strstr(line, "LOST") && ev, "hyp trace: %s", line);
	ev += 2;
	if (!strncmp(ev, "selftest ", 9))
		return hyp_field(ev, "id");
	if (!strncmp(ev, "pkvm_host_split_guest ", 22)) {
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
		hyp.fault_waited += !!hyp_field(ev, "waited");
		hyp.fault_lost += hyp_sfield(ev, "ret") == -EAGAIN;
	}
	return 0;
}

/*
 * Have EL2 emit one marker event on every CPU, from this thread pinned to
 * each in turn; returns how many. Each CPU's events reach trace_pipe in
 * the order EL2 wrote them, but not in timestamp order across CPUs: the
 * reader sees a CPU's buffer as of its last poll (a CPU's events were seen
 * seconds after a later marker from another CPU). So one marker is no
 * fence; one per CPU is, once all of them have been read.
 */
static int hyp_markers_write(u64 *first)
{
	int cpu, nr = 0, ncpus = sysconf(_SC_NPROCESSORS_CONF);
	cpu_set_t old, one;
	char id[32];

	TEST_ASSERT(!sched_getaffinity(0, sizeof(old), &old), "sched_getaffinity");
	*first = hyp_marker + 1;
	for (cpu = 0; cpu < ncpus && cpu < CPU_SETSIZE; cpu++) {
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		/* An offline CPU runs no EL2 code that could emit an event. */
		if (sched_setaffinity(0, sizeof(one), &one))
			continue;
		snprintf(id, sizeof(id), "%lu", ++hyp_marker);
		TEST_ASSERT(write_file(HYP_TRACE "/write_event", id), "hyp marker event");
		nr++;
	}
	TEST_ASSERT(!sched_setaffinity(0, sizeof(old), &old), "sched_setaffinity");
	TEST_ASSERT(nr, "no CPU to emit a hyp marker event on");
	return nr;
}

/*
 * Bring the sums up to date: have EL2 emit a marker event on every CPU,
 * then consume trace_pipe until all of them have come, so that every
 * event EL2 emitted before, on any CPU, is counted. Only the thread and
 * process that set tracing up read the pipe; the others (vCPU threads,
 * killed-VMM children) leave the sums alone.
 */
void hyp_events_read(void)
{
	static char buf[8192];
	static size_t len;
	u64 first, id;
	int nr, seen = 0;

	if (hyp_pipe < 0 || !hyp_reader || getpid() != hyp_pid)
		return;

	pthread_mutex_lock(&hyp_lock);
	nr = hyp_markers_write(&first);
	while (seen < nr) {
		char *nl, *line = buf;
		ssize_t n;

		alarm(60);
		n = read(hyp_pipe, buf + len, sizeof(buf) - 1 - len);
		alarm(0);
		TEST_ASSERT(n > 0, "reading %s/trace_pipe: %s", HYP_TRACE,
			    n ? strerror(errno) : "end of file");
		len += n;
		buf[len] = 0;
		while (seen < nr && (nl = strchr(line, '\n'))) {
			*nl = 0;
			id = hyp_account(line);
			TEST_ASSERT(!id || (id >= first && id < first + nr),
				    "hyp marker %lu outside this read's %lu..%lu", id,
				    first, first + nr - 1);
			seen += !!id;
			line = nl + 1;
		}
		len -= line - buf;
		memmove(buf, line, len);
		TEST_ASSERT(len < sizeof(buf) - 1, "hyp trace line too long");
	}
	pthread_mutex_unlock(&hyp_lock);
}

void hyp_events_stop(void)
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
void hyp_events_start(void)
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

void read_split_stats(struct test_vm *t, struct split_stats *s)
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
u64 sec_pagetables_kb(void)
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
void check_no_leak(u64 secpt, const char *after)
{
	u64 now;

	if (!pkvm)
		return;

	now = sec_pagetables_kb();
	pr_info("SecPageTables after %s: %lu kB\n", after, now);
	TEST_ASSERT(now == secpt, "SecPageTables %lu kB after %s, %lu kB before",
		    now, after, secpt);
}

enum vm_guest_mode host_page_mode(void)
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
void slot0_no_thp(struct kvm_vm *vm)
{
	struct userspace_mem_region *region = memslot2region(vm, 0);

	TEST_ASSERT(!madvise(region->mmap_start, region->mmap_size, MADV_NOHUGEPAGE),
		    "madvise(MADV_NOHUGEPAGE) of slot 0: %s", strerror(errno));
}

void create_test_vm_vcpus(struct test_vm *t, u64 manual_caps, int nr_vcpus)
{
	u64 gpa = DATA_GPA;

	/* Guest pages the size of stage-2 pages: one fault per page. */
	kvm_eager_split_chunk_size = block_size;
	t->vm = __vm_create_with_vcpus(VM_SHAPE(host_page_mode()), nr_vcpus, 0,
				       guest_code, t->vcpus);
	t->vcpu = t->vcpus[0];
	t->pass_vcpus = 1;
	t->pass_rounds = 1;
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

void create_test_vm(struct test_vm *t, u64 manual_caps)
{
	create_test_vm_vcpus(t, manual_caps, 1);
}

void destroy_test_vm(struct test_vm *t)
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
 * the same blocks. With t->pass_rounds above 1, a write pass writes its
 * pages that many times in the one KVM_RUN, round r with seed + r, so that
 * a page is written again long after its first write (a stale writable
 * TLB entry would go unnoticed by the log). Writes also record the pages
 * in t->expect, the bitmap of pages the guest dirtied.
 */
u64 guest_pass(struct test_vm *t, int cmd, u64 first, u64 last,
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
	guest_rounds = t->pass_rounds > 1 ? t->pass_rounds : 1;
	sync_global_to_guest(t->vm, guest_cmd);
	sync_global_to_guest(t->vm, guest_rounds);
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
			page_seed[i] = seed + guest_rounds - 1;
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
void check_fault_path(const char *when)
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
u64 logging_off(struct test_vm *t, u64 split, const char *when)
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
void check_no_fast_path(const char *when)
{
	TEST_ASSERT(!pass_faults.el2 && !pass_faults.full,
		    "%s: %lu faults resolved at EL2, %lu buffer-full exits with logging off",
		    when, pass_faults.el2, pass_faults.full);
}

u64 count_pages(u64 first, u64 last, u64 stride, u64 offset)
{
	return first + offset >= last ? 0 : DIV_ROUND_UP(last - first - offset, stride);
}

/* Write-protected pages a write pass over [first, last) will fault on. */
u64 count_ro_pages(u64 first, u64 last, u64 stride, u64 offset)
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
 * from the memslot's first block (within the slot). pKVM splits first,
 * and write-protects only the cleared pages. Returns the blocks newly
 * split.
 */
u64 model_clear(struct test_vm *t, u64 first, u64 nr)
{
	u64 b0, b1, b, i, split = 0;

	b0 = first / t->pages_per_block;
	b1 = (first + nr - 1) / t->pages_per_block;
	for (b = b0; b <= b1; b++) {
		bool whole = !blk_split[b] && !pkvm;
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
void check_memory(struct test_vm *t, const char *when)
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

void check_bitmap(struct test_vm *t, const char *when)
{
	u64 i;

	for (i = 0; i < t->npages; i++)
		TEST_ASSERT(test_bit(i, t->bitmap) == test_bit(i, t->expect),
			    "%s: dirty bit of page %lu is %d, expected %d", when, i,
			    test_bit(i, t->bitmap), test_bit(i, t->expect));
}

void check_split(struct test_vm *t, struct split_stats *before,
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
void check_write_pass(struct test_vm *t, u64 stride, u64 offset, u8 seed,
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

/* KVM_CLEAR_DIRTY_LOG of pages [first, first + nr): bit 0 is @first. */
void clear_range(struct test_vm *t, u64 first, u64 nr)
{
	u64 i;

	bitmap_zero(t->bitmap, t->npages);
	for (i = 0; i < nr; i++) {
		__set_bit(i, t->bitmap);
		__clear_bit(first + i, t->expect);
	}
	kvm_vm_clear_dirty_log(t->vm, DATA_SLOT, t->bitmap, first, nr);
}

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
void start_raw_vm(struct raw_vm *p, unsigned long type, bool with_memory)
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

void stop_raw_vm(struct raw_vm *p)
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
bool read_ktap(const char *path, int expect, const char *what)
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
 * The VM's stage-2 at EL2 against the page states and the host's records
 * (the test kit's pkvm_split_check: the whole IPA space, then record by
 * record), and how many table frees so far had to wait for another CPU's
 * shared walk: the kit reports it where EL2's dirty faults walk shared
 * (the lock-free fault), and NO_SHARED_WALKS is returned where they take
 * the VM's lock. False, checking nothing, without the kit.
 */
bool check_el2_records(struct test_vm *t, const char *when, u64 *walker_waits)
{
	u64 calls, pages, blocks, marked, hpages, hblocks, hsplit, records, bad;
	char path[128], line[256];
	long result;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/pkvm_split_check",
		 getpid(), t->vm->fd);
	f = fopen(path, "r");
	if (!f && errno == ENOENT)
		return false;
	TEST_ASSERT(f, "%s: %s", path, strerror(errno));
	n = fscanf(f, "el2: calls %lu pages %lu blocks %lu marked %lu\n"
		   "host: pages %lu blocks %lu split %lu records %lu\n"
		   "result %ld bad_ipa 0x%lx\n", &calls, &pages, &blocks, &marked,
		   &hpages, &hblocks, &hsplit, &records, &result, &bad);
	TEST_ASSERT(n == 10, "%s: %d fields read", path, n);
	*walker_waits = NO_SHARED_WALKS;
	while (fgets(line, sizeof(line), f))
		sscanf(line, "walker_waits %lu", walker_waits);
	fclose(f);
	TEST_ASSERT(!result && pages == hpages && blocks == hblocks,
		    "%s: EL2 stage-2 check error %ld at IPA 0x%lx; EL2 maps %lu pages, %lu blocks, the host records %lu pages, %lu blocks",
		    when, result, bad, pages, blocks, hpages, hblocks);
	return true;
}

/* Best-effort write of @val to @path; false if the file is not there. */
bool write_file(const char *path, const char *val)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f)
		return false;
	ok = fputs(val, f) >= 0;
	return !fclose(f) && ok;
}

u64 read_u64_file(const char *path)
{
	u64 val = 0;
	FILE *f = fopen(path, "r");

	TEST_ASSERT(f, "open %s: %s", path, strerror(errno));
	TEST_ASSERT(fscanf(f, "%lu", &val) == 1, "read %s", path);
	fclose(f);
	return val;
}

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
bool arm_page_alloc_failure(u64 budget)
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

bool disarm_page_alloc_failure(void)
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
u64 clear_all_failing(struct test_vm *t, u64 budget)
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
void clear_all(struct test_vm *t)
{
	clear_range(t, 0, t->npages);
	model_clear(t, 0, t->npages);
}

void set_data_region(struct test_vm *t, u64 gpa, u64 size)
{
	struct kvm_userspace_memory_region2 region =
		memslot2region(t->vm, DATA_SLOT)->region;

	region.guest_phys_addr = gpa;
	region.memory_size = size;
	vm_ioctl(t->vm, KVM_SET_USER_MEMORY_REGION2, &region);
}

u64 now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

/* A boolean switch; @dflt if the kernel does not have it. */
bool param_or(const char *path, bool dflt)
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

bool param_enabled(const char *path)
{
	return param_or(path, false);
}

bool fast_dirty_enabled(void)
{
	return param_enabled(FAST_DIRTY_PARAM);
}

/* Set a boolean switch; returns what it reads back. */
bool set_param(const char *path, bool on)
{
	int fd = open(path, O_WRONLY);

	TEST_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
	TEST_ASSERT(write(fd, on ? "Y" : "N", 1) == 1, "write %s", path);
	close(fd);
	TEST_ASSERT(param_enabled(path) == on, "%s did not take %d", path, on);
	return on;
}

/* Leave the parameters as they were found, even when an assertion fails. */
void restore_fast_dirty(void)
{
	write_file(FAST_DIRTY_PARAM, "1");
	write_file(DIRTY_BUF_PARAM, "0");
}

/*
 * The kernel's answer: only a host in protected mode creates a protected
 * VM. The command line must agree (a protected mode that failed to
 * initialise is a failure, not a non-protected run).
 */
bool host_is_pkvm(void)
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

u64 run_pass(struct test_vm *t, int cmd, struct pass p)
{
	return guest_pass(t, cmd, p.first, p.last ?: t->npages, p.stride ?: 1, p.offset,
			  p.seed);
}

const char *only;

bool want(const char *scenario)
{
	return !only || !strcmp(only, scenario);
}

/* -t @arg: one of @scenarios, or the test line is broken (not a skip). */
void set_only(const char *arg, const char * const *scenarios, int nr)
{
	int i;

	for (i = 0; i < nr && strcmp(arg, scenarios[i]); i++)
		;
	TEST_ASSERT(i < nr, "-t: no scenario '%s'", arg);
	only = arg;
}

void pkvm_split_setup(void)
{
	u64 sizes;

	TEST_REQUIRE(kvm_has_cap(KVM_CAP_ARM_SUPPORTED_BLOCK_SIZES));
	TEST_REQUIRE(kvm_has_cap(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2));

	pkvm = host_is_pkvm();
	fast_dirty = pkvm && fast_dirty_enabled();
	/* Test kernels' switches (CONFIG_PKVM_SPLIT_ABI_TEST), on without them. */
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
}
