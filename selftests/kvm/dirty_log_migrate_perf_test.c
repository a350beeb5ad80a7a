// SPDX-License-Identifier: GPL-2.0
/*
 * Dirty logging shaped like a live migration.
 *
 * The guest never stops writing: each vCPU writes one word of each of its
 * pages in turn, for the whole run, and counts its writes.  The host copies
 * the guest's memory to a destination buffer the way a VMM migrating it
 * would: round 0 copies everything, then each round collects the dirty log
 * (KVM_GET_DIRTY_LOG + KVM_CLEAR_DIRTY_LOG with manual protection, or a
 * harvest of the dirty rings + KVM_RESET_DIRTY_RINGS) and copies the pages
 * it names, all while the vCPUs are in KVM_RUN.  Then the blackout: the
 * vCPUs are stopped, the log is collected one last time and the last pages
 * are copied, and the destination must match the guest's memory word for
 * word.
 *
 * With -I the vCPUs' pages interleave (vCPU i writes pages i, i + n,
 * i + 2n, ... of the whole region) instead of each writing its own range:
 * every vCPU faults on the same last-level tables, which KVM_CLEAR_DIRTY_LOG
 * write-protects under them.
 *
 * Reported: the guest's write rate during each round against its rate
 * before logging was turned on (how much tracking slows it down), each
 * round's collection time (the kick and drain of every vCPU included), the
 * blackout and its parts, and the cost of turning logging off.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/bitmap.h>
#include <asm/barrier.h>

#include "kvm_util.h"
#include "test_util.h"
#include "ucall_common.h"

#define TEST_MEM_SLOT		1
#define TEST_GVA		0xc0000000UL

enum log_kind { LOG_BITMAP, LOG_RING };

struct params {
	int nr_vcpus;
	u64 vcpu_bytes;
	enum vm_mem_backing_src_type src;
	enum log_kind log;
	int rounds;
	int round_ms;
	int rate_ms;
	u32 ring_entries;	/* -R: this many, and the ring must fill */
	bool interleave;	/* -I */
};

/* Shared with the guest. */
static u64 guest_page_size;
static u64 guest_pages_per_vcpu;
static u64 guest_nr_vcpus;
static bool guest_interleave;
static u64 guest_written[KVM_MAX_VCPUS];
static bool guest_stop;

static void guest_code(u32 idx)
{
	u64 first = guest_interleave ? idx : idx * guest_pages_per_vcpu;
	u64 stride = guest_interleave ? guest_nr_vcpus : 1;
	u64 words = guest_page_size / sizeof(u64);
	u64 pass = 0, val = (u64)idx << 48, i, gva;

	for (;;) {
		for (i = 0; i < guest_pages_per_vcpu; i++) {
			if (READ_ONCE(guest_stop))
				GUEST_SYNC(0);
			gva = TEST_GVA + (first + i * stride) * guest_page_size;
			WRITE_ONCE(*(u64 *)(gva + (pass % words) * sizeof(u64)), ++val);
			WRITE_ONCE(guest_written[idx], guest_written[idx] + 1);
		}
		pass++;
	}
}

static struct kvm_vm *vm;
static struct kvm_vcpu *vcpus[KVM_MAX_VCPUS];
static struct params p;
static u64 nr_pages;
static u8 *src_mem, *dst_mem;
static u64 *written;		/* the guest's guest_written[] */
static bool *stop;		/* the guest's guest_stop */
static unsigned long *pending;	/* collected, not yet copied */
static u64 nr_pending;
static unsigned long *bmap;
static u32 ring_entries, ring_fetch[KVM_MAX_VCPUS];

static bool host_quit;
static int nr_stopped;
static int nr_ring_full;
static u64 ring_full_exits;
static u64 collections;

static void *vcpu_thread(void *arg)
{
	struct kvm_vcpu *vcpu = arg;
	u64 seen;

	while (!READ_ONCE(host_quit)) {
		seen = READ_ONCE(collections);
		vcpu_run(vcpu);
		if (vcpu->run->exit_reason == KVM_EXIT_DIRTY_RING_FULL) {
			/* A VMM's vCPU waits for its ring to be harvested. */
			__atomic_add_fetch(&nr_ring_full, 1, __ATOMIC_SEQ_CST);
			__atomic_add_fetch(&ring_full_exits, 1, __ATOMIC_SEQ_CST);
			while (READ_ONCE(collections) == seen && !READ_ONCE(host_quit))
				usleep(50);
			__atomic_sub_fetch(&nr_ring_full, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		TEST_ASSERT_EQ(get_ucall(vcpu, NULL), UCALL_SYNC);
		__atomic_add_fetch(&nr_stopped, 1, __ATOMIC_SEQ_CST);
		while (READ_ONCE(*stop) && !READ_ONCE(host_quit))
			usleep(50);
		if (READ_ONCE(host_quit))
			break;
		__atomic_sub_fetch(&nr_stopped, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static u64 total_written(void)
{
	u64 n = 0;
	int i;

	for (i = 0; i < p.nr_vcpus; i++)
		n += READ_ONCE(written[i]);
	return n;
}

/* Guest pages written per second over @ms of wall time. */
static double guest_rate(int ms)
{
	u64 n = total_written();
	double t = now_s();

	usleep(ms * 1000);
	return (total_written() - n) / (now_s() - t);
}

static void faults(u64 *host, u64 *el2)
{
	int i;

	*host = *el2 = 0;
	for (i = 0; i < p.nr_vcpus; i++) {
		*host += vcpu_get_stat(vcpus[i], stage2_mem_faults);
		*el2 += vcpu_get_stat(vcpus[i], el2_dirty_faults);
	}
}

static u64 harvest_ring(int i)
{
	struct kvm_dirty_gfn *ring = vcpu_map_dirty_ring(vcpus[i]), *e;
	u64 n = 0;

	for (;;) {
		e = &ring[ring_fetch[i] % ring_entries];
		/* Pairs with KVM's release of the entry it pushed. */
		if (smp_load_acquire(&e->flags) != KVM_DIRTY_GFN_F_DIRTY)
			break;
		TEST_ASSERT(e->slot == TEST_MEM_SLOT && e->offset < nr_pages,
			    "ring entry for slot %u offset 0x%llx", e->slot, e->offset);
		if (!test_bit(e->offset, pending)) {
			__set_bit(e->offset, pending);
			nr_pending++;
		}
		/* The entry is read before KVM may reuse it. */
		smp_store_release(&e->flags, KVM_DIRTY_GFN_F_RESET);
		ring_fetch[i]++;
		n++;
	}
	return n;
}

/*
 * Collect the dirty log into @pending and re-protect what it names; the
 * second part's time in @reprotect.  Returns the pages newly pending.
 */
static u64 collect(double *reprotect)
{
	u64 before = nr_pending, harvested = 0, w;
	double t;
	int i;

	if (p.log == LOG_BITMAP) {
		kvm_vm_get_dirty_log(vm, TEST_MEM_SLOT, bmap);
		t = now_s();
		kvm_vm_clear_dirty_log(vm, TEST_MEM_SLOT, bmap, 0, nr_pages);
		*reprotect = now_s() - t;
		for (w = 0; w < BITS_TO_LONGS(nr_pages); w++) {
			nr_pending += __builtin_popcountl(bmap[w] & ~pending[w]);
			pending[w] |= bmap[w];
		}
	} else {
		for (i = 0; i < p.nr_vcpus; i++)
			harvested += harvest_ring(i);
		t = now_s();
		TEST_ASSERT_EQ(kvm_vm_reset_dirty_ring(vm), harvested);
		*reprotect = now_s() - t;
	}
	WRITE_ONCE(collections, collections + 1);
	return nr_pending - before;
}

static u64 copy_pending(void)
{
	u64 n = nr_pending, i;

	for (i = 0; i < nr_pages; i++)
		if (test_bit(i, pending))
			memcpy(dst_mem + i * guest_page_size,
			       src_mem + i * guest_page_size, guest_page_size);
	bitmap_zero(pending, nr_pages);
	nr_pending = 0;
	return n;
}

static void set_stop(bool on)
{
	WRITE_ONCE(*stop, on);
}

/* Stop the vCPUs (out of KVM_RUN); harvest a full ring meanwhile. */
static void stop_vcpus(void)
{
	double unused;

	set_stop(true);
	while (READ_ONCE(nr_stopped) < p.nr_vcpus) {
		if (READ_ONCE(nr_ring_full))
			collect(&unused);
		usleep(50);
	}
}

static void verify(void)
{
	u64 *s = (u64 *)src_mem, *d = (u64 *)dst_mem;
	u64 words = nr_pages * guest_page_size / sizeof(u64), w;

	for (w = 0; w < words; w++)
		TEST_ASSERT(s[w] == d[w],
			    "page 0x%lx word %lu: guest 0x%lx, destination 0x%lx (a write the log missed)",
			    w * sizeof(u64) / guest_page_size,
			    w % (guest_page_size / sizeof(u64)), s[w], d[w]);
	pr_info("Destination matches the guest: %lu pages, every word\n", nr_pages);
}

static void create_vm(void)
{
	u64 ring_pages;
	gpa_t gpa;
	int i;

	guest_page_size = getpagesize();
	guest_pages_per_vcpu = p.vcpu_bytes / guest_page_size;
	nr_pages = guest_pages_per_vcpu * p.nr_vcpus;

	vm = __vm_create(VM_SHAPE_DEFAULT, p.nr_vcpus, nr_pages / 256 + 64);
	TEST_ASSERT(vm->page_size == guest_page_size, "guest and host page sizes differ");
	if (p.log == LOG_RING) {
		TEST_REQUIRE(kvm_has_cap(KVM_CAP_DIRTY_LOG_RING_ACQ_REL));
		/*
		 * Room for two passes of a vCPU's pages, within KVM's limit,
		 * unless -R says otherwise.
		 */
		ring_pages = 2 * guest_pages_per_vcpu;
		ring_entries = 1u << min(16, 64 - __builtin_clzll(ring_pages - 1));
		if (p.ring_entries)
			ring_entries = p.ring_entries;
		vm_enable_dirty_ring(vm, ring_entries * sizeof(struct kvm_dirty_gfn));
	} else {
		TEST_REQUIRE(kvm_has_cap(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2));
		vm_enable_cap(vm, KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
			      KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE |
			      KVM_DIRTY_LOG_INITIALLY_SET);
	}
	for (i = 0; i < p.nr_vcpus; i++) {
		vcpus[i] = vm_vcpu_add(vm, i, guest_code);
		vcpu_args_set(vcpus[i], 1, i);
	}
	kvm_arch_vm_finalize_vcpus(vm);

	gpa = (vm->max_gfn - nr_pages) * guest_page_size;
	gpa = align_down(gpa, get_backing_src_pagesz(p.src));
	vm_userspace_mem_region_add(vm, p.src, gpa, TEST_MEM_SLOT, nr_pages, 0);
	virt_map(vm, TEST_GVA, gpa, nr_pages);
	src_mem = addr_gpa2hva(vm, gpa);

	sync_global_to_guest(vm, guest_page_size);
	sync_global_to_guest(vm, guest_pages_per_vcpu);
	guest_nr_vcpus = p.nr_vcpus;
	guest_interleave = p.interleave;
	sync_global_to_guest(vm, guest_nr_vcpus);
	sync_global_to_guest(vm, guest_interleave);
	written = addr_gva2hva(vm, (gva_t)guest_written);
	stop = addr_gva2hva(vm, (gva_t)&guest_stop);

	dst_mem = malloc(nr_pages * guest_page_size);
	TEST_ASSERT(dst_mem, "no memory for the destination");
	pending = bitmap_zalloc(nr_pages);
	bmap = bitmap_zalloc(nr_pages);
}

/*
 * -R: the rings must fill. Round 1 collects only once a vCPU has exited
 * with its ring full, or after 30 s: the guest keeps writing pages it
 * wrote before round 0's collection, so a ring that is not harvested
 * fills. Without the wait, whether one fills before the next collection
 * depends on the host's speed (a vCPU whose faults the host resolves may
 * dirty fewer pages in a round than its ring holds).
 */
static void wait_ring_full(void)
{
	double t = now_s();

	while (!__atomic_load_n(&ring_full_exits, __ATOMIC_SEQ_CST) &&
	       now_s() - t < 30)
		usleep(1000);
}

static void run(void)
{
	double base, t0, t1, t2, round_start, rate, reprotect, stop_s, coll_s, copy_s, disable_s;
	u64 dirty, n0, host0, el20, host1, el21, copied;
	pthread_t threads[KVM_MAX_VCPUS];
	int i, r;

	for (i = 0; i < p.nr_vcpus; i++)
		pthread_create(&threads[i], NULL, vcpu_thread, vcpus[i]);

	/*
	 * Every vCPU through its pages twice (its blocks mapped) before the
	 * rate is taken and logging starts.
	 */
	for (i = 0; i < p.nr_vcpus; i++)
		while (READ_ONCE(written[i]) < 2 * guest_pages_per_vcpu)
			usleep(1000);
	base = guest_rate(p.rate_ms);
	pr_info("Guest rate, logging off: %.0f pages/s\n", base);

	t0 = now_s();
	vm_mem_region_set_flags(vm, TEST_MEM_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	pr_info("Enable logging: %.6fs\n", now_s() - t0);

	for (r = 0; r <= p.rounds; r++) {
		if (r == 1)
			faults(&host0, &el20);
		round_start = now_s();
		n0 = total_written();
		if (r)
			usleep(p.round_ms * 1000);
		if (r == 1 && p.ring_entries)
			wait_ring_full();
		t0 = now_s();
		dirty = collect(&reprotect);
		t1 = now_s();
		if (!r) {
			/* Round 0 is the full copy. */
			bitmap_fill(pending, nr_pages);
			nr_pending = nr_pages;
			dirty = nr_pages;
		}
		copy_pending();
		t2 = now_s();
		rate = (total_written() - n0) / (t2 - round_start);
		pr_info("Round %d: %lu pages dirty, collect %.6fs (re-protect %.6fs), copy %.6fs, round %.6fs, guest rate %.0f pages/s (%.3fx of logging off)\n",
			r, dirty, t1 - t0, reprotect, t2 - t1, t2 - round_start,
			rate, rate / base);
	}
	faults(&host1, &el21);
	pr_info("Rounds: stage-2 faults resolved by the host: %lu, at EL2: %lu\n",
		host1 - host0, el21 - el20);

	/* The blackout. */
	t0 = now_s();
	stop_vcpus();
	t1 = now_s();
	collect(&reprotect);
	t2 = now_s();
	copied = copy_pending();
	stop_s = t1 - t0;
	coll_s = t2 - t1;
	copy_s = now_s() - t2;
	pr_info("Blackout: %.6fs (stop vCPUs %.6fs, collect %.6fs, copy %.6fs), %lu pages\n",
		stop_s + coll_s + copy_s, stop_s, coll_s, copy_s, copied);
	verify();

	t0 = now_s();
	vm_mem_region_set_flags(vm, TEST_MEM_SLOT, 0);
	disable_s = now_s() - t0;
	pr_info("Disable logging: %.6fs\n", disable_s);

	/* The guest resumes on its own memory; blocks come back where they can. */
	set_stop(false);
	while (READ_ONCE(nr_stopped))
		usleep(50);
	rate = guest_rate(p.rate_ms);
	pr_info("Guest rate, after logging off: %.0f pages/s (%.3fx of logging off)\n",
		rate, rate / base);

	WRITE_ONCE(host_quit, true);
	set_stop(true);
	for (i = 0; i < p.nr_vcpus; i++)
		pthread_join(threads[i], NULL);
}

static void help(const char *name, int status)
{
	printf("usage: %s [-v vcpus] [-b bytes per vCPU] [-s mem type] [-M bitmap|ring]\n"
	       "          [-r rounds] [-t ms] [-w ms] [-R entries] [-I]\n"
	       " -v: vCPUs (default 1)\n"
	       " -b: memory each vCPU writes, e.g. 32M (default 32M)\n"
	       " -M: bitmap (KVM_GET_DIRTY_LOG + KVM_CLEAR_DIRTY_LOG, manual\n"
	       "     protection, initially set) or ring (dirty rings); default bitmap\n"
	       " -r: rounds after the full copy, before the blackout (default 4)\n"
	       " -t: shortest round, in ms (default 50)\n"
	       " -w: how long the guest's write rate is measured, in ms (default 200)\n"
	       " -R: entries of each dirty ring, a power of 2 (with -M ring; default:\n"
	       "     two passes' worth); the rings must then fill at least once\n"
	       " -I: the vCPUs write interleaved pages (vCPU i: pages i, i + vcpus,\n"
	       "     ...), so they fault on the same last-level tables\n",
	       name);
	backing_src_help("-s");
	exit(status);
}

static long arg(const char *opt, const char *val, long min, long max)
{
	char *end;
	long v = strtol(val, &end, 0);

	if (*end || v < min || v > max) {
		fprintf(stderr, "%s: '%s' is not in [%ld, %ld]\n", opt, val, min, max);
		exit(KSFT_FAIL);
	}
	return v;
}

int main(int argc, char *argv[])
{
	int opt;

	p = (struct params){
		.nr_vcpus = 1, .vcpu_bytes = 32 << 20, .src = VM_MEM_SRC_ANONYMOUS,
		.log = LOG_BITMAP, .rounds = 4, .round_ms = 50, .rate_ms = 200,
	};
	while ((opt = getopt(argc, argv, "hv:b:s:M:r:t:w:R:I")) != -1) {
		switch (opt) {
		case 'v':
			p.nr_vcpus = arg("-v", optarg, 1, KVM_MAX_VCPUS);
			break;
		case 'b':
			p.vcpu_bytes = parse_size(optarg);
			break;
		case 's':
			p.src = parse_backing_src_type(optarg);
			break;
		case 'M':
			if (!strcmp(optarg, "bitmap")) {
				p.log = LOG_BITMAP;
			} else if (!strcmp(optarg, "ring")) {
				p.log = LOG_RING;
			} else {
				fprintf(stderr, "-M: '%s' is neither bitmap nor ring\n", optarg);
				exit(KSFT_FAIL);
			}
			break;
		case 'r':
			p.rounds = arg("-r", optarg, 1, 1000);
			break;
		case 't':
			p.round_ms = arg("-t", optarg, 1, 60000);
			break;
		case 'w':
			p.rate_ms = arg("-w", optarg, 1, 60000);
			break;
		case 'R':
			p.ring_entries = arg("-R", optarg, 1, 1 << 16);
			if (p.ring_entries & (p.ring_entries - 1)) {
				fprintf(stderr, "-R: %u is not a power of 2\n", p.ring_entries);
				exit(KSFT_FAIL);
			}
			break;
		case 'I':
			p.interleave = true;
			break;
		case 'h':
			help(argv[0], 0);
			break;
		default:
			help(argv[0], KSFT_FAIL);
		}
	}
	TEST_ASSERT(p.vcpu_bytes >= get_backing_src_pagesz(p.src) &&
		    !(p.vcpu_bytes % get_backing_src_pagesz(p.src)),
		    "-b must be a multiple of the backing page size");

	pr_info("%s log, %d vCPUs, %lu MiB each%s, %s\n",
		p.log == LOG_RING ? "ring" : "bitmap", p.nr_vcpus,
		p.vcpu_bytes >> 20, p.interleave ? " (interleaved pages)" : "",
		vm_mem_backing_src_alias(p.src)->name);
	if (p.ring_entries && p.log != LOG_RING) {
		fprintf(stderr, "-R needs -M ring\n");
		exit(KSFT_FAIL);
	}
	create_vm();
	run();
	if (p.log == LOG_RING)
		pr_info("Dirty rings of %u entries, full %lu times\n", ring_entries,
			ring_full_exits);
	TEST_ASSERT(!p.ring_entries || ring_full_exits,
		    "-R %u: the rings never filled", p.ring_entries);
	kvm_vm_free(vm);
	return 0;
}
