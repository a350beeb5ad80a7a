// SPDX-License-Identifier: GPL-2.0-only
/*
 * pkvm_split_fuzz_test - random sequences of what reaches the split and
 * restore ABI, checked after every step against a model (see
 * test_random_sequence()). -s SEED replays a sequence.
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
#include <asm/barrier.h>

#include "delay.h"
#include "kvm_util.h"
#include "pkvm_split.h"
#include "processor.h"
#include "test_util.h"
#include "ucall.h"

/*
 * Random sequence test (-z STEPS): from a seed, a sequence of the steps
 * that reach the split and restore ABI and what it interacts with (guest
 * reads and writes, dirty logging on and off, clears of random ranges,
 * KVM_GET_DIRTY_LOG (both also while two vCPUs write: fz_overlap()),
 * slot moves, deletes, mprotect(), the pKVM knobs, top-ups
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
	/* Overlap steps: host calls made while the guest pass still ran. */
	u64 host_ops, host_ops_started_running, written_cleared, written_harvested;
	/* EL2's stage-2 of the data slot after the last step: bit per page. */
	u64 mapped[MAX_PAGES / 64], writable[MAX_PAGES / 64];
	const char *op;
	bool done;
};

static struct fuzz fz;

enum {
	FZ_WRITE, FZ_READ, FZ_LOG, FZ_CLEAR, FZ_GET, FZ_MOVE, FZ_DELETE,
	FZ_MPROTECT, FZ_KNOBS, FZ_TOPUP, FZ_NEW_VM, FZ_RAW, FZ_PVM, FZ_OVERLAP, FZ_NR,
};

static const char * const fz_names[FZ_NR] = {
	"write pass", "read pass", "logging on/off", "clear a range",
	"get the dirty log", "move the slot and back", "delete and re-create the slot",
	"mprotect read-only and back", "flip the pKVM knobs", "clear with a failing top-up",
	"new VM", "raw hostile calls", "start or stop a protected VM",
	"host log calls during a two-vCPU write pass",
};

/* Relative weights: guest passes and the log most often. */
static const u64 fz_weight[FZ_NR] = { 6, 3, 3, 5, 3, 1, 1, 1, 1, 1, 1, 3, 1, 3 };

/* xorshift64*: reproducible from the seed on any libc. */
static u64 xorshift(u64 *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 0x2545f4914f6cdd1dULL;
}

static u64 fz_rand(void)
{
	return xorshift(&fz.rng);
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
	guest_write(&fz.t, .seed = 1);
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
		} else if (strncmp(line, "walker_waits ", 13)) {
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
	/* Production kernels have no test kit: nothing to check against. */
	if (!f && errno == ENOENT)
		ksft_exit_skip("%s: needs the test kit (CONFIG_PKVM_SPLIT_ABI_TEST)\n",
			       path);
	TEST_ASSERT(f, "%s: %s", path, strerror(errno));
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
	if (fd < 0 && errno == ENOENT)
		ksft_exit_skip("%s: needs the test kit (CONFIG_PKVM_SPLIT_ABI_TEST)\n",
			       path);
	TEST_ASSERT(fd >= 0, "%s: %s", path, strerror(errno));
	len = snprintf(val, sizeof(val), "%lx %lu", seed, steps);
	ret = write(fd, val, len);
	TEST_ASSERT(ret == len,
		    "raw hostile calls, kernel seed 0x%lx, %lu steps: %s (the kernel log says which call)",
		    seed, steps, ret < 0 ? strerror(errno) : "short write");
	close(fd);
	fz.raw_calls += steps;
}

/*
 * The host's own unmap, write-protect and test-and-clear-young of random
 * records (fz_raw()) reach slot 0 too (the guest's code, stacks and
 * page_seed[]), and an old page takes an access-flag fault that EL2's
 * masks do not show. Both vCPUs read every page, then each rewrites a
 * page with what it holds, so that both branches of a pass have run and
 * the passes the test counts next take only the faults it models.
 */
static void fz_rewarm(void)
{
	struct test_vm *t = &fz.t;
	u64 v;

	t->pass_vcpus = 2;
	guest_read(t);
	t->pass_vcpus = 1;
	for (v = 0; v < 2; v++) {
		t->vcpu = t->vcpus[v];
		guest_write(t, .first = v, .last = v + 1, .seed = page_seed[v]);
	}
	t->vcpu = t->vcpus[0];
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

/* The write pass of an overlap step, in its own thread. */
struct fz_pass {
	u64 first, last, stride, offset, faults;
	u8 seed;
	bool done;
};

/* What the host calls of an overlap step saw, page by page. */
static struct {
	/* Harvested by a get, by two, covered by a clear, before the pass. */
	unsigned long *seen, *twice, *cleared, *before;
	/* Written by the pass, its last word not yet seen to hold the pass's. */
	unsigned long *pending;
	/* Last call that harvested or cleared it; last after which it was pending. */
	u32 last_call[MAX_PAGES], pending_after[MAX_PAGES];
} ov;

static void *fz_pass_thread(void *arg)
{
	struct fz_pass *p = arg;

	p->faults = guest_write(&fz.t, .first = p->first, .last = p->last,
				.stride = p->stride, .offset = p->offset, .seed = p->seed);
	/* Pairs with fz_overlap()'s acquire: p->faults and the model are set. */
	smp_store_release(&p->done, true);
	return NULL;
}

static bool fz_pass_writes(struct fz_pass *p, u64 page)
{
	return page >= p->first + p->offset && page < p->last &&
	       !((page - p->first - p->offset) % p->stride);
}

static const char *fz_page_was(struct fz_pass *p, u64 page)
{
	if (fz_pass_writes(p, page))
		return "written";
	return test_bit(page, ov.before) ? "dirty before" : "clean and not written";
}

/*
 * Host call @k of an overlap step: without manual-protect a get (it
 * harvests), with it a clear of a random range of whole words. @state is
 * the step's own generator.
 */
static void fz_overlap_call(u32 k, u64 *state)
{
	struct test_vm *t = &fz.t;
	u64 i, r, first, n;

	if (!fz.manual) {
		kvm_vm_get_dirty_log(t->vm, DATA_SLOT, t->bitmap);
		for (i = 0; i < t->npages; i++) {
			if (!test_bit(i, t->bitmap))
				continue;
			if (test_bit(i, ov.seen))
				__set_bit(i, ov.twice);
			__set_bit(i, ov.seen);
			ov.last_call[i] = k;
		}
		return;
	}
	r = xorshift(state);
	first = 64 * ((r >> 8) % (t->npages / 64));
	n = 64 * (1 + (r >> 32) % ((t->npages - first) / 64));
	bitmap_zero(t->bitmap, t->npages);
	for (i = 0; i < n; i++) {
		__set_bit(i, t->bitmap);
		__set_bit(first + i, ov.cleared);
		ov.last_call[first + i] = k;
	}
	kvm_vm_clear_dirty_log(t->vm, DATA_SLOT, t->bitmap, first, n);
}

/*
 * After host call @k returned: a written page whose last word does not
 * hold the second round's pattern yet is written (its last word, the
 * guest's last store to it) after the call; the call's write-protect, if
 * it made one, is then in force for that store (the call flushed the
 * TLBs), so the store must fault and be logged.
 */
static void fz_overlap_scan(struct fz_pass *p, u32 k)
{
	u64 words = fz.t.page_size / 8, i;

	for (i = p->first + p->offset; i < p->last; i += p->stride) {
		u64 *page = (u64 *)(fz.t.hva + i * fz.t.page_size);

		if (!test_bit(i, ov.pending))
			continue;
		if (READ_ONCE(page[words - 1]) == pattern(i, words - 1, p->seed + 1))
			__clear_bit(i, ov.pending);
		else
			ov.pending_after[i] = k;
	}
}

/*
 * The log after an overlap step, and the model after it. No write may be
 * lost whatever the interleaving:
 * - without manual-protect, every page dirty before the pass or written
 *   by it is harvested at least once, no other page ever, and a page
 *   still unwritten when a get returned is harvested by a later get;
 * - with manual-protect, a page no clear covered is exactly "dirty before
 *   or written" in the log; a cleared page the pass did not write is
 *   clean; a cleared page still unwritten when its last clear returned is
 *   dirty; any other cleared page the pass wrote may be either, and the
 *   model takes the log's word for it, so that fz_check_el2() then fails
 *   if it is clean and writable at EL2 (its next write would be lost).
 */
static void fz_overlap_check(struct fz_pass *p, u32 calls)
{
	struct test_vm *t = &fz.t;
	bool written, dirty, logged;
	u64 i;

	for (i = 0; i < t->npages; i++) {
		written = fz_pass_writes(p, i);
		dirty = test_bit(i, ov.before) || written;
		logged = test_bit(i, t->bitmap);
		if (!fz.manual) {
			TEST_ASSERT(test_bit(i, ov.seen) == dirty,
				    "overlap, %u gets: page %lu %s, harvested %s", calls, i,
				    fz_page_was(p, i), dirty ? "never" : "at least once");
			TEST_ASSERT(!ov.pending_after[i] ||
				    ov.last_call[i] > ov.pending_after[i],
				    "overlap, %u gets: page %lu unwritten after get %u, last harvested by get %u",
				    calls, i, ov.pending_after[i], ov.last_call[i]);
			fz.written_harvested += written && test_bit(i, ov.twice);
			__clear_bit(i, t->expect);
		} else if (!test_bit(i, ov.cleared)) {
			TEST_ASSERT(logged == dirty,
				    "overlap, %u clears: page %lu, no clear, %s, log %d", calls, i,
				    fz_page_was(p, i), logged);
		} else if (!written) {
			TEST_ASSERT(!logged,
				    "overlap, %u clears: page %lu cleared, not written, dirty",
				    calls, i);
			__clear_bit(i, t->expect);
		} else if (!logged) {
			TEST_ASSERT(ov.pending_after[i] < ov.last_call[i],
				    "overlap, %u clears: page %lu unwritten after clear %u, its last, and clean",
				    calls, i, ov.pending_after[i]);
			/* Written, then cleared: EL2 must map it read-only. */
			__clear_bit(i, t->expect);
			fz.written_cleared++;
		}
	}
}

/*
 * A write pass of two rounds on both vCPUs (each every other page: they
 * fault in the same last-level tables; the second round rewrites, in the
 * same KVM_RUN, pages the host may have write-protected since the first)
 * while this thread makes host log calls until the pass ends
 * (fz_overlap_call()), checked by fz_overlap_check(). A page can be
 * write-protected again while the guest is inside it, and the rest of its
 * words fault again: a page may be logged, and fault, more than once in
 * one pass, so the pass must take at least a fault per page it writes
 * that was not writable before it, with no upper bound. The host calls'
 * randomness is the step's own, so that how many ran does not change the
 * sequence's steps; what they leave (which pages are clean, which blocks
 * split) does depend on the timing, so a replay with -s runs the same
 * steps but may not meet the same state after an overlap.
 */
static void fz_overlap(void)
{
	struct test_vm *t = &fz.t;
	struct fz_pass p = {};
	u64 state, i, need = 0, pages = 0;
	bool running;
	pthread_t thread;
	u32 calls = 0;
	int ret;

	state = fz_rand() | 1;
	p.stride = 1 + fz_below(4);
	p.first = fz_below(t->npages);
	p.last = p.first + 1 + fz_below(t->npages - p.first);
	p.offset = fz_below(p.stride);
	p.seed = 2 + fz_below(250);
	ov.seen = bitmap_zalloc(t->npages);
	ov.twice = bitmap_zalloc(t->npages);
	ov.cleared = bitmap_zalloc(t->npages);
	ov.before = bitmap_zalloc(t->npages);
	ov.pending = bitmap_zalloc(t->npages);
	TEST_ASSERT(ov.seen && ov.twice && ov.cleared && ov.before && ov.pending,
		    "overlap: no memory");
	memset(ov.last_call, 0, sizeof(ov.last_call));
	memset(ov.pending_after, 0, sizeof(ov.pending_after));
	bitmap_copy(ov.before, t->expect, t->npages);
	for (i = p.first + p.offset; i < p.last; i += p.stride) {
		need += fz.masks && !fz_bit(fz.writable, i);
		pages++;
		/* A page that already holds the last round's pattern cannot show it. */
		if (page_seed[i] != (u8)(p.seed + 1))
			__set_bit(i, ov.pending);
	}

	t->pass_vcpus = 2;
	t->pass_rounds = 2;
	fz.two_vcpu_passes++;
	ret = pthread_create(&thread, NULL, fz_pass_thread, &p);
	TEST_ASSERT(!ret, "overlap: pthread_create: %s", strerror(ret));
	do {
		/* Pairs with fz_pass_thread()'s release. */
		running = !smp_load_acquire(&p.done);
		fz_overlap_call(++calls, &state);
		fz.host_ops++;
		fz.host_ops_started_running += running;
		fz_overlap_scan(&p, calls);
	} while (running);
	pthread_join(thread, NULL);
	t->pass_vcpus = 1;
	t->pass_rounds = 1;

	/* One more call after the pass: a get harvests what the pass left. */
	fz_overlap_call(++calls, &state);
	if (fz.manual)
		kvm_vm_get_dirty_log(t->vm, DATA_SLOT, t->bitmap);
	fz_overlap_check(&p, calls);
	TEST_ASSERT(p.faults >= need,
		    "overlap, %u host calls: %lu faults (%lu at EL2) for %lu pages written, %lu of them not writable before",
		    calls, p.faults, pass_faults.el2, pages, need);
	TEST_ASSERT(!pass_faults.el2 || fz.fast,
		    "overlap: %lu faults resolved at EL2 in a VM created with the fast path off",
		    pass_faults.el2);
	bitmap_free(ov.seen);
	bitmap_free(ov.twice);
	bitmap_free(ov.cleared);
	bitmap_free(ov.before);
	bitmap_free(ov.pending);
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
		faults = guest_write(t, .first = first, .last = first + nr, .stride = stride,
				     .offset = offset, .seed = seed);
		fz_check_pass(CMD_WRITE, first, first + nr, stride, offset, seed, faults);
		t->pass_vcpus = 1;
		break;
	case FZ_READ:
		t->pass_vcpus = 1 + fz_below(2);
		fz.two_vcpu_passes += t->pass_vcpus == 2;
		faults = guest_read(t);
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
		if (pkvm) {
			fz_raw();
			fz_rewarm();
		}
		break;
	case FZ_PVM:
		if (pkvm)
			fz_toggle_pvm();
		break;
	case FZ_OVERLAP:
		if (fz.logging)
			fz_overlap();
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
		collapse = set_param(COLLAPSE_PARAM, true);
	}
	fz.done = true;
	printf("random sequence: seed 0x%lx, %lu steps passed:", seed, steps);
	for (i = 0; i < FZ_NR; i++)
		printf(" %lu %s,", fz.ops[i], fz_names[i]);
	printf(" %lu raw hostile calls in all, %lu guest passes on two vCPUs,",
	       fz.raw_calls, fz.two_vcpu_passes);
	printf(" %lu of %lu host log calls during a pass,", fz.host_ops_started_running,
	       fz.host_ops);
	printf(" %lu pages written then cleared, %lu written pages harvested twice\n",
	       fz.written_cleared, fz.written_harvested);
}

int main(int argc, char *argv[])
{
	u64 steps = 100, seeds[8];
	int opt, nr_seeds = 0, i;

	while ((opt = getopt(argc, argv, "z:s:")) != -1) {
		switch (opt) {
		case 'z':
			steps = strtoull(optarg, NULL, 0);
			TEST_ASSERT(steps, "-z: a number of steps, not '%s'", optarg);
			break;
		case 's':
			TEST_ASSERT(nr_seeds < ARRAY_SIZE(seeds), "at most %zu seeds",
				    ARRAY_SIZE(seeds));
			seeds[nr_seeds++] = strtoull(optarg, NULL, 0);
			break;
		default:
			printf("usage: %s [-z STEPS] [-s SEED]...\n"
			       " -z: steps per seed (default 100)\n"
			       " -s: a seed (repeatable; default 0x1, 0x2 and a new one)\n",
			       argv[0]);
			/* A bad option is a broken test line, not a skip. */
			exit(KSFT_FAIL);
		}
	}
	pkvm_split_setup();

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
