// SPDX-License-Identifier: GPL-2.0-only
/*
 * pkvm_split_race_test - eager huge-page splitting racing with what could
 * lose a dirty page, with nothing lost.
 *
 * Runs in every host mode (pKVM included), on the guest of pkvm_split_test:
 *
 * - vcpu-race: KVM_CLEAR_DIRTY_LOG splitting blocks while two vCPUs write
 *   to them; every log collected is checked with dirty_log_test's rule.
 * - shared-tables: the same with the two vCPUs on every other page, so on
 *   the same page tables, and a block unmapped (its table freed) in each
 *   round while they write; on pKVM with the test kit, EL2 waits inside
 *   each dirty fault and then the blocks the vCPUs are faulting in are
 *   unmapped under them: with the fault under the VM's lock, some faults
 *   must find it held; with the lock-free fault, unmaps land between a
 *   fault's read and its exchange, so some exchanges must lose and some
 *   table frees must wait for a walk. EL2's stage-2 must match the host's
 *   records after every round and unmap.
 * - slot-churn: splits while the memslot is deleted, moved and
 *   mprotect()ed under them.
 * - move-buffered: a memslot move while frames the vCPU dirtied at EL2 are
 *   still in its buffer.
 * - restore-churn: logging off (the restore) while the memslot churns, a
 *   vCPU reads and another writes; each log read between the split and the
 *   restore is checked with dirty_log_test's rule.
 * - two-slots: logging turned on and off (split, restore) on one memslot
 *   while another keeps logging, its log read and cleared again and again
 *   under a writing vCPU, each read checked with dirty_log_test's rule.
 * - On pKVM, kill: the VMM killed inside a split, while its vCPU takes
 *   dirty-logging faults and inside a restore; every page it donated comes
 *   back.
 */
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
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

/*
 * Racing vCPUs each rewrite their pages, every @step-th from @first to
 * @last, pass after pass.
 */
static void race_guest_code(u64 first, u64 last, u64 step)
{
	u64 words = guest_page_size / 8, pass, i, w;

	for (pass = 1;; pass++) {
		for (i = first; i < last; i += step) {
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
	u64 first, last, step, passes;
};

static bool race_stop;

/* One KVM_RUN of race_guest_code: one whole pass; @passes says which. */
static void run_race_pass(struct kvm_vcpu *vcpu, u64 *passes)
{
	struct ucall uc;

	vcpu_run(vcpu);
	switch (get_ucall(vcpu, &uc)) {
	case UCALL_SYNC:
		WRITE_ONCE(*passes, uc.args[1]);
		break;
	case UCALL_ABORT:
		REPORT_GUEST_ASSERT(uc);
		break;
	default:
		TEST_FAIL("unexpected ucall %lu", uc.cmd);
	}
}

static void *race_vcpu_thread(void *arg)
{
	struct race_vcpu *r = arg;

	do {
		run_race_pass(r->vcpu, &r->passes);
	} while (!READ_ONCE(race_stop) || !r->passes);

	return NULL;
}

/*
 * Handshakes rather than timing windows: wait (30 s at most, under TCG)
 * until a vCPU has finished @n more passes, or the guest has changed @n
 * of the pages a test watches.
 */
#define HANDSHAKE_US	(30 * 1000000ULL)

static void wait_passes(u64 *passes, u64 n, const char *what)
{
	u64 start = READ_ONCE(*passes), deadline = now_us() + HANDSHAKE_US;

	while (READ_ONCE(*passes) < start + n) {
		TEST_ASSERT(now_us() < deadline, "%s: no progress in 30 s", what);
		usleep(100);
	}
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

/* Word 0 of pages [first, last) into @words. */
static void snapshot_word0(struct test_vm *t, u64 first, u64 last, u64 *words)
{
	u64 i;

	for (i = first; i < last; i++)
		words[i] = word0(t, i);
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
 * Each vCPU writes half of the range; with @shared, every other page, so
 * that the two fault on the same page tables, and each round also takes a
 * random block away from the guest and gives it back (an mprotect() that
 * only adds PROT_EXEC: the host unmaps the block, EL2 unshares its pages
 * and frees its table, while the vCPUs keep writing, and their next writes
 * map it again). Every log read while they write is checked with
 * dirty_log_test's rule; afterwards every word holds the last pass's data,
 * and a final clear and write pass give an exact dirty log.
 */
static void unmap_block(struct test_vm *t, u64 b)
{
	TEST_ASSERT(!mprotect(t->hva + b * block_size, block_size,
			      PROT_READ | PROT_WRITE | PROT_EXEC) &&
		    !mprotect(t->hva + b * block_size, block_size, PROT_READ | PROT_WRITE),
		    "mprotect of block %lu", b);
}

static void no_fault_delay(void)
{
	write_file(FAULT_DELAY_PARAM, "0");
}

/*
 * With the vCPUs on shared tables under pKVM, the test kit has EL2 wait
 * FAULT_DELAY_US in each dirty fault between reading the leaf and
 * updating it. After the rounds (each ending with EL2's stage-2 checked
 * against the host's records), the whole slot is marked again,
 * DELAYED_UNMAPS times, and 50 ms later the block each vCPU is writing
 * (from the log) is unmapped under it, and EL2's stage-2 must still match
 * the host's records. What the hyp events' waited count must show
 * depends on the fault, which the kit tells (check_el2_records()):
 * - under the VM's lock, the unshares and the two vCPUs' delayed faults
 *   contend for it: some faults must have found it held;
 * - lock-free (the fault's update a compare-and-exchange), the unshares
 *   land inside the delayed windows: some exchanges must lose (the
 *   faults go to the host), and the frees of the unmapped blocks' tables
 *   must have waited for walks in progress (the kit's count). A plain
 *   store there would map again a page the host took back; a free that
 *   did not wait would let a walk read a page already reused.
 */
#define FAULT_DELAY_US	"10000"
#define DELAYED_UNMAPS	24

static void test_split_vs_vcpu_faults(bool shared)
{
	const char *what = shared ? "vCPUs on shared tables" : "split vs vCPU faults";
	u64 words, round, j, w, i, b, faults, *now, *base, changed = 0, unmaps = 0;
	u64 waited = 0, lost = 0, checks = 0, waits0 = NO_SHARED_WALKS, waits = NO_SHARED_WALKS;
	struct race_vcpu r[2];
	struct split_stats s0, s1;
	unsigned long *log;
	bool delayed = false;
	struct test_vm t;

	if (pkvm && shared) {
		atexit(no_fault_delay);
		delayed = write_file(FAULT_DELAY_PARAM, FAULT_DELAY_US);
		if (!delayed)
			pr_info("%s: SKIP the delayed faults and the EL2 record check (no %s: no test kit)\n",
				what, FAULT_DELAY_PARAM);
	}
	create_test_vm_vcpus(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE |
			     KVM_DIRTY_LOG_INITIALLY_SET, 3);
	if (delayed) {
		hyp_events_read();
		waited = hyp.fault_waited;
		lost = hyp.fault_lost;
	}
	words = t.npages / 64;
	race_stop = false;

	/* vCPU 0 checks the end state: fault in its stack and globals now. */
	guest_write(&t, .seed = 1);
	for (i = 0; i < 2; i++) {
		r[i].vcpu = t.vcpus[i + 1];
		vcpu_set_reg(r[i].vcpu, ARM64_CORE_REG(regs.pc), (u64)race_guest_code);
		r[i].first = shared ? i : i * t.npages / 2;
		r[i].last = shared ? t.npages : (i + 1) * t.npages / 2;
		r[i].step = shared ? 2 : 1;
		r[i].passes = 0;
		vcpu_args_set(r[i].vcpu, 3, r[i].first, r[i].last, r[i].step);
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
			/* Both vCPUs write every page with logging off. */
			wait_passes(&r[0].passes, 2, "a vCPU's pass with logging off");
			wait_passes(&r[1].passes, 2, "a vCPU's pass with logging off");
			vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
			for (i = 0; i < t.npages; i++)
				base[i] = NOT_CLEARED;
		}
		/* Read while the vCPUs write: no page written since its clear is lost. */
		for (i = 0; i < t.npages; i++)
			now[i] = word0(&t, i);
		kvm_vm_get_dirty_log(t.vm, DATA_SLOT, log);
		changed += check_log_rule(&t, log, now, base, what);
		if (shared) {
			/* A block's table freed under the vCPUs' faults. */
			unmap_block(&t, random() % t.nr_blocks);
			unmaps++;
		}
		w = random() % words;
		for (j = 0; j < words; j++) {
			w = (w + 5) % words;	/* visits every word: 5 and words are coprime */
			clear_range(&t, w * 64, 64);
			for (i = w * 64; i < w * 64 + 64; i++)
				base[i] = word0(&t, i);
		}
		if (delayed)
			checks += check_el2_records(&t, what, &waits0);
	}
	/*
	 * Every page marked again, so that the vCPUs' passes spend their time
	 * in delayed faults at EL2; 50 ms later, the last page each vCPU
	 * dirtied (its pages are every other one) says which block it is in:
	 * that block is unmapped under it.
	 */
	for (j = 0; delayed && j < DELAYED_UNMAPS; j++) {
		clear_range(&t, 0, t.npages);
		usleep(50000);
		kvm_vm_get_dirty_log(t.vm, DATA_SLOT, log);
		for (i = 0; i < 2; i++) {
			for (b = t.npages - 2 + i; b < t.npages && !test_bit(b, log); b -= 2)
				;
			if (b >= t.npages)
				continue;
			unmap_block(&t, b / t.pages_per_block);
			unmaps++;
		}
		checks += check_el2_records(&t, what, &waits);
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
		for (j = r[i].first; j < r[i].last; j += r[i].step)
			page_seed[j] = r[i].passes;
	}
	read_split_stats(&t, &s1);
	pr_info("%s: %lu and %lu passes, %lu blocks split in %lu hypercalls, %lu blocks unmapped, %lu pages changed between a clear and a read, all in the log\n",
		what, r[0].passes, r[1].passes, s1.blocks - s0.blocks, s1.hcalls - s0.hcalls,
		unmaps, changed);
	free(log);
	free(now);
	free(base);
	for (i = 0; i < 2; i++)
		pr_info("%s: vCPU %lu: %lu faults resolved at EL2\n",
			what, i + 1, vcpu_get_stat(r[i].vcpu, el2_dirty_faults));
	if (delayed) {
		hyp_events_read();
		waited = hyp.fault_waited - waited;
		lost = hyp.fault_lost - lost;
		TEST_ASSERT((waits0 == NO_SHARED_WALKS) == (waits == NO_SHARED_WALKS),
			    "%s: the kit counted walker waits in some checks only",
			    what);
		/*
		 * The kit says which fault this is; the events must agree: only
		 * a lock-free fault loses an exchange (-EAGAIN), and there every
		 * fault that waited lost one.
		 */
		if (waits == NO_SHARED_WALKS) {
			pr_info("%s: %lu dirty faults at EL2 found the VM's lock held (%s us wait), EL2's stage-2 checked %lu times\n",
				what, waited, FAULT_DELAY_US, checks);
			TEST_ASSERT(waited, "%s: no dirty fault at EL2 found the VM's lock held",
				    what);
			TEST_ASSERT(!lost,
				    "%s: %lu dirty faults at EL2 lost an exchange, yet the kit reports no shared walks",
				    what, lost);
		} else {
			pr_info("%s: %lu dirty faults at EL2 lost their exchange and went to the host (%s us wait), %lu table frees waited for a fault's walk, EL2's stage-2 checked %lu times\n",
				what, waited, FAULT_DELAY_US, waits - waits0, checks);
			TEST_ASSERT(waited,
				    "%s: no dirty fault at EL2 lost its exchange to an unmap",
				    what);
			TEST_ASSERT(waits > waits0, "%s: no table free waited for a fault's walk",
				    what);
			TEST_ASSERT(lost == waited,
				    "%s: %lu dirty faults at EL2 waited, %lu lost their exchange",
				    what, waited, lost);
		}
		TEST_ASSERT(checks == round + DELAYED_UNMAPS,
			    "%s: EL2 record check ran %lu times in %lu rounds and %d unmap steps",
			    what, checks, round, DELAYED_UNMAPS);
		no_fault_delay();
	}
	TEST_ASSERT(!pkvm || s1.blocks - s0.blocks >= t.nr_blocks,
		    "only %lu blocks split while the vCPUs ran", s1.blocks - s0.blocks);
	check_memory(&t, what);

	/* Quiesced: one clear, then the dirty log must be exact again. */
	for (i = 0; i < t.nr_blocks; i++)
		blk_split[i] = false;
	kvm_vm_get_dirty_log(t.vm, DATA_SLOT, t.bitmap);
	bitmap_zero(t.expect, t.npages);
	clear_range(&t, 0, t.npages);
	faults = guest_read(&t);
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

/*
 * Read the log; every page that changed between @base (taken after the
 * last read) and a snapshot taken just before this one must be dirty.
 * @base is then retaken. Returns how many pages changed.
 */
static u64 move_collect(struct test_vm *t, u64 nr, u64 *base, u64 *now,
			u64 round, const char *where)
{
	u64 i, changed = 0;

	snapshot_word0(t, 0, nr, now);
	kvm_vm_get_dirty_log(t->vm, DATA_SLOT, t->bitmap);
	for (i = 0; i < nr; i++) {
		if (now[i] == base[i])
			continue;
		changed++;
		TEST_ASSERT(test_bit(i, t->bitmap),
			    "move round %lu, %s: page %lu changed (0x%lx to 0x%lx), not in the log",
			    round, where, i, base[i], now[i]);
	}
	snapshot_word0(t, 0, nr, base);
	return changed;
}

/* Wait until @n of the @nr watched pages differ from @base. */
static void wait_changed(struct test_vm *t, u64 nr, const u64 *base, u64 n,
			 const char *what)
{
	u64 deadline = now_us() + HANDSHAKE_US, i, changed;

	for (;;) {
		for (i = 0, changed = 0; i < nr; i++)
			changed += word0(t, i) != base[i];
		if (changed >= n)
			return;
		TEST_ASSERT(now_us() < deadline, "%s: no page written in 30 s", what);
		usleep(100);
	}
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
	snapshot_word0(&t, 0, nr, base);
	pthread_create(&thread, NULL, move_vcpu_thread, &c);

	srandom(0x5eed);
	for (round = 0; round < MOVE_ROUNDS; round++) {
		/*
		 * Pages the guest writes now fault to the host (the slot is
		 * new): wait until it has mapped all of them again.
		 */
		wait_changed(&t, nr, base, nr, "a write before the log");
		/* Write-protects them: under pKVM, the next writes stay at EL2. */
		at_a += move_collect(&t, nr, base, now, round, "before the move");
		/* Frames dirtied since (at EL2 under pKVM) are in the buffer. */
		wait_changed(&t, nr, base, 1 + random() % 4, "a write before the move");
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
	/* Every page written between a read of the log and a move was write-protected. */
	TEST_ASSERT(!fast_dirty || el2 >= moved,
		    "%lu pages written just before a move, only %lu writes resolved at EL2",
		    moved, el2);
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
	int gone, ok;
	struct test_vm t;

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	size = t.npages * t.page_size;
	c.t = &t;
	c.bitmap = bitmap_zalloc(t.npages);
	bitmap_fill(c.bitmap, t.npages);
	guest_write(&t, .seed = 7);

	for (iter = 0; iter < 6; iter++) {
		/* Fault the slot back in as blocks, then log and split. */
		vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
		guest_read(&t);
		vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);

		c.ok = 0;
		c.gone = 0;
		c.stop = false;
		pthread_create(&thread, NULL, clear_loop_thread, &c);
		for (k = 0; k < 8; k++) {
			/* Handshake: a clear ran since the last change (30 s at most). */
			ok = READ_ONCE(c.ok);
			for (wait = 0; READ_ONCE(c.ok) == ok && wait < 60000; wait++)
				usleep(500);
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
		guest_read(&t);
		guest_write(&t, .first = t.npages / 3, .seed = 20 + iter);
		check_memory(&t, what[iter % 3]);
	}
	free(c.bitmap);
	destroy_test_vm(&t);
}

struct restore_churn {
	struct test_vm *t;
	pthread_rwlock_t layout;	/* held for write while the slot moves */
	pthread_rwlock_t writable;	/* held for write while it is read-only */
	sem_t go, done;			/* one slot change per round */
	bool stop;
	u64 reads, writes, moves, deletes, mprotects;
	u64 first, last;		/* the pages vCPU 1 writes */
};

/* vCPU 0 reads the pages vCPU 1 does not write, pass after pass, checking them. */
static void *restore_reader_thread(void *arg)
{
	struct restore_churn *c = arg;

	while (!READ_ONCE(c->stop)) {
		pthread_rwlock_rdlock(&c->layout);
		guest_read(c->t, .last = c->first);
		pthread_rwlock_unlock(&c->layout);
		WRITE_ONCE(c->reads, c->reads + 1);
	}
	return NULL;
}

/*
 * vCPU 1 rewrites the last eighth of the pages, one pass per KVM_RUN
 * (race_guest_code), never while the slot is away or read-only (its
 * writes would find no memory, or fail with -EFAULT).
 */
static void *restore_writer_thread(void *arg)
{
	struct restore_churn *c = arg;

	while (!READ_ONCE(c->stop)) {
		pthread_rwlock_rdlock(&c->layout);
		pthread_rwlock_rdlock(&c->writable);
		run_race_pass(c->t->vcpus[1], &c->writes);
		pthread_rwlock_unlock(&c->writable);
		pthread_rwlock_unlock(&c->layout);
	}
	return NULL;
}

/*
 * Once per round, when the main thread turns logging off (the restore),
 * move the slot away and back, or delete and re-create it (never while a
 * vCPU runs: it would find no memory), or make its memory read-only and
 * writable again (an MMU-notifier unmap of every page) while vCPU 0
 * reads. Rounds k and k + 4 do the same change, at a later point of the
 * restore: at once (queued with it on slots_lock, or unmapping between its
 * hypercalls, which yield mmu_lock), then after 100 us, 1 ms and 10 ms.
 */
static const u64 churn_delay_us[] = { 0, 100, 1000, 10000 };

static void *restore_churn_thread(void *arg)
{
	struct restore_churn *c = arg;
	u64 size = c->t->npages * c->t->page_size, k;

	for (k = 0;; k++) {
		sem_wait(&c->go);
		if (READ_ONCE(c->stop))
			break;
		if (churn_delay_us[(k / 4) % ARRAY_SIZE(churn_delay_us)])
			usleep(churn_delay_us[(k / 4) % ARRAY_SIZE(churn_delay_us)]);
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
			pthread_rwlock_wrlock(&c->writable);
			TEST_ASSERT(!mprotect(c->t->hva, size, PROT_READ), "mprotect RO");
			TEST_ASSERT(!mprotect(c->t->hva, size, PROT_READ | PROT_WRITE),
				    "mprotect RW");
			pthread_rwlock_unlock(&c->writable);
			c->mprotects++;
			break;
		}
		sem_post(&c->done);
	}
	return NULL;
}

static void init_writer_preferring(pthread_rwlock_t *lock)
{
	pthread_rwlockattr_t attr;

	/* Writer-preferring: the vCPUs' passes must not starve the churn. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(lock, &attr);
	pthread_rwlockattr_destroy(&attr);
}

/*
 * The restore when logging stops, racing everything that can reach the
 * slot's mappings: vCPU 0 reading (faults only after an unmap), vCPU 1
 * writing, and from the second round one slot change (move, delete,
 * mprotect: see restore_churn_thread()). Each round starts quiet with the
 * slot mapped: vCPU 0 reads its pages twice with logging off, so they are
 * blocks again. Logging on and a KVM_CLEAR_DIRTY_LOG split them; the log
 * read after a pass of vCPU 1 obeys dirty_log_test's rule for its pages;
 * then logging goes off, racing the round's slot change.
 *
 * The first round restores every block vCPU 0 reads: nothing unmaps them
 * (vCPU 1's blocks race its writes, which the host resolves once logging
 * is off: it may map such a block itself, or leave it to the fault after
 * the restore). The later ones restore blocks too, with the churn landing
 * before, during or after the restore. Nothing of the guest's data may be
 * lost, the dirty log is exact once quiet, and no page is leaked (checked
 * by the caller).
 */
static void test_restore_vs_churn(void)
{
	struct kvm_clear_dirty_log log = { .slot = DATA_SLOT };
	u64 round, b, b0 = 0, bn = 0, h = 0, faults, i, *now, *base, checked = 0, changed = 0;
	struct kvm_dirty_log get = { .slot = DATA_SLOT };
	struct restore_churn c = {};
	pthread_t reader, writer, churn;
	u64 reader_blocks;
	struct test_vm t;

	create_test_vm_vcpus(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE |
			     KVM_DIRTY_LOG_INITIALLY_SET, 2);
	guest_write(&t, .seed = 5);
	c.t = &t;
	c.first = t.npages - t.npages / 8;
	c.last = t.npages;
	reader_blocks = c.first / t.pages_per_block;
	vcpu_set_reg(t.vcpus[1], ARM64_CORE_REG(regs.pc), (u64)race_guest_code);
	vcpu_args_set(t.vcpus[1], 3, c.first, c.last, 1);
	init_writer_preferring(&c.layout);
	init_writer_preferring(&c.writable);
	TEST_ASSERT(!sem_init(&c.go, 0, 0) && !sem_init(&c.done, 0, 0), "sem_init");
	log.num_pages = t.npages;
	log.dirty_bitmap = t.bitmap;
	bitmap_fill(t.bitmap, t.npages);
	get.dirty_bitmap = bitmap_zalloc(t.npages);
	now = calloc(t.npages, sizeof(u64));
	base = calloc(t.npages, sizeof(u64));

	pthread_create(&reader, NULL, restore_reader_thread, &c);
	pthread_create(&writer, NULL, restore_writer_thread, &c);
	pthread_create(&churn, NULL, restore_churn_thread, &c);
	for (round = 0; round < 41; round++) {
		/* Quiet: vCPU 0 faults its blocks back in with logging off. */
		wait_passes(&c.reads, 2, "restore vs churn: vCPU 0's pass");
		vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
		vm_ioctl(t.vm, KVM_CLEAR_DIRTY_LOG, &log);
		snapshot_word0(&t, c.first, c.last, base);
		/*
		 * vCPU 1 writes its pages (at EL2 on pKVM) until it ends a
		 * pass, then the log: what it wrote since the clear must be
		 * in it. vCPU 0's pages are 0 in both: never changed.
		 */
		wait_passes(&c.writes, 1, "restore vs churn: vCPU 1's pass");
		snapshot_word0(&t, c.first, c.last, now);
		vm_ioctl(t.vm, KVM_GET_DIRTY_LOG, &get);
		changed += check_log_rule(&t, get.dirty_bitmap, now, base, "restore vs churn");
		checked++;

		if (pkvm)
			hyp_events_read();
		b = hyp.collapse_blocks;
		if (round)
			sem_post(&c.go);
		vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
		if (round) {
			sem_wait(&c.done);
			/*
			 * A move or delete takes the slot's flags from the
			 * test's copy of the region as it was: if it read them
			 * before the line above, it turned logging back on.
			 */
			vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
		}
		if (pkvm)
			hyp_events_read();
		b = hyp.collapse_blocks - b;
		if (!round) {
			b0 = b;
		} else {
			bn += b;
			h += !!b;
		}
	}
	WRITE_ONCE(c.stop, true);
	sem_post(&c.go);
	pthread_join(churn, NULL);
	pthread_join(reader, NULL);
	pthread_join(writer, NULL);
	pthread_rwlock_destroy(&c.layout);
	pthread_rwlock_destroy(&c.writable);
	sem_destroy(&c.go);
	sem_destroy(&c.done);
	/* vCPU 1's last pass, with nothing racing: its pages hold that pass. */
	run_race_pass(t.vcpus[1], &c.writes);
	for (i = c.first; i < c.last; i++)
		page_seed[i] = c.writes;

	pr_info("restore vs churn: %lu rounds, %lu vCPU read passes, %lu write passes, %lu moves, %lu deletes, %lu mprotects; %lu blocks restored in the quiet round, %lu in %lu of the %lu churning ones; %lu logs read between split and restore, %lu written pages in them, all set\n",
		round, c.reads, c.writes, c.moves, c.deletes, c.mprotects, b0, bn, h,
		round - 1, checked, changed);
	TEST_ASSERT(c.reads && c.writes && c.moves && c.deletes && c.mprotects,
		    "restore vs churn: a racer never ran");
	TEST_ASSERT(checked == round && changed,
		    "restore vs churn: %lu logs read with %lu written pages", checked, changed);
	TEST_ASSERT(!collapse || (b0 >= reader_blocks && b0 <= t.nr_blocks),
		    "restore vs churn: %lu blocks restored in the quiet round, vCPU 0 reads %lu",
		    b0, reader_blocks);
	TEST_ASSERT(!collapse || h,
		    "restore vs churn: no block restored with the slot churning");
	check_memory(&t, "restore vs churn");
	free(get.dirty_bitmap);
	free(now);
	free(base);

	/*
	 * Quiet again. A write pass first: after mprotect(), the host's
	 * page-table entries stay read-only until written (private memory),
	 * so read faults map pages read-only, and a write to those is the
	 * host's to resolve, not EL2's. Then the log must be exact.
	 */
	faults = guest_write(&t, .seed = 6);
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
 * Two memslots, the restore of one racing the dirty log of the other. The
 * second slot (OTHER_SLOT, two blocks, mapped in the guest right after the
 * data slot) logs throughout: its log is read, checked with
 * dirty_log_test's rule and cleared again and again while vCPU 1 rewrites
 * it (under pKVM its writes are resolved at EL2, their frames waiting in
 * the vCPU's buffer until it exits or a read of the log kicks it). Another
 * thread meanwhile turns logging on the data slot on (a whole-slot clear
 * splits it), lets vCPU 0 write it, and turns it off (the restore), over
 * and over. A drain that dropped or misfiled the other slot's frames
 * around a restore, or a restore that reached past its slot, loses a page
 * of OTHER_SLOT's log or data.
 */
#define OTHER_SLOT	2
#define OTHER_BLOCKS	2
#define TWO_SLOT_READS	30

struct two_slots {
	struct test_vm *t;
	struct race_vcpu *r;
	unsigned long *ones;
	u64 toggles;
	bool stop;
};

static void *toggle_logging_thread(void *arg)
{
	struct two_slots *c = arg;
	struct kvm_vm *vm = c->t->vm;

	while (!READ_ONCE(c->stop)) {
		vm_mem_region_set_flags(vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
		kvm_vm_clear_dirty_log(vm, DATA_SLOT, c->ones, 0, c->t->npages);
		wait_passes(&c->r[0].passes, 1, "two slots: vCPU 0's pass while logging");
		vm_mem_region_set_flags(vm, DATA_SLOT, 0);
		/* vCPU 0 faults the blocks back in, then they split again. */
		wait_passes(&c->r[0].passes, 1, "two slots: vCPU 0's pass after the restore");
		WRITE_ONCE(c->toggles, c->toggles + 1);
	}
	return NULL;
}

static void test_two_slots(void)
{
	u64 n, gpa, gva, i, w, read, changed = 0, *now, *base, b0, el2;
	struct hyp_counts h0;
	struct two_slots c = {};
	struct race_vcpu r[2];
	pthread_t toggler;
	struct test_vm t, o;
	unsigned long *log;

	create_test_vm_vcpus(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE |
			     KVM_DIRTY_LOG_INITIALLY_SET, 2);
	n = OTHER_BLOCKS * t.pages_per_block;
	gpa = DATA_GPA + ALIGN(t.npages * t.page_size, block_size) + block_size;
	gva = TEST_GVA + t.npages * t.page_size;
	vm_userspace_mem_region_add(t.vm, VM_MEM_SRC_ANONYMOUS_HUGETLB, gpa,
				    OTHER_SLOT, n, 0);
	virt_map(t.vm, gva, gpa, n);
	/* The second slot, seen through the data slot's helpers. */
	o = t;
	o.hva = addr_gpa2hva(t.vm, gpa);
	o.npages = n;

	race_stop = false;
	for (i = 0; i < 2; i++) {
		r[i].vcpu = t.vcpus[i];
		r[i].first = i ? t.npages : 0;
		r[i].last = i ? t.npages + n : t.npages;
		r[i].step = 1;
		r[i].passes = 0;
		vcpu_set_reg(r[i].vcpu, ARM64_CORE_REG(regs.pc), (u64)race_guest_code);
		vcpu_args_set(r[i].vcpu, 3, r[i].first, r[i].last, r[i].step);
	}
	/* Both slots are mapped with blocks before logging starts. */
	for (i = 0; i < 2; i++)
		run_race_pass(r[i].vcpu, &r[i].passes);

	c.t = &t;
	c.r = r;
	c.ones = bitmap_zalloc(t.npages);
	bitmap_fill(c.ones, t.npages);
	log = bitmap_zalloc(n);
	now = calloc(n, sizeof(u64));
	base = calloc(n, sizeof(u64));
	for (i = 0; i < n; i++)
		base[i] = NOT_CLEARED;
	hyp_events_read();
	h0 = hyp;

	vm_mem_region_set_flags(t.vm, OTHER_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	for (i = 0; i < 2; i++)
		pthread_create(&r[i].thread, NULL, race_vcpu_thread, &r[i]);
	pthread_create(&toggler, NULL, toggle_logging_thread, &c);
	for (read = 0; read < TWO_SLOT_READS || !READ_ONCE(c.toggles); read++) {
		snapshot_word0(&o, 0, n, now);
		kvm_vm_get_dirty_log(t.vm, OTHER_SLOT, log);
		changed += check_log_rule(&o, log, now, base, "two slots");
		kvm_vm_clear_dirty_log(t.vm, OTHER_SLOT, c.ones, 0, n);
		snapshot_word0(&o, 0, n, base);
		/* vCPU 1 writes every page again, at EL2 under pKVM. */
		wait_passes(&r[1].passes, 1, "two slots: vCPU 1's pass");
	}
	WRITE_ONCE(c.stop, true);
	pthread_join(toggler, NULL);
	WRITE_ONCE(race_stop, true);
	for (i = 0; i < 2; i++)
		pthread_join(r[i].thread, NULL);

	/* Quiet: one more pass each, then every word holds it. */
	for (i = 0; i < 2; i++)
		run_race_pass(r[i].vcpu, &r[i].passes);
	for (i = 0; i < t.npages; i++)
		page_seed[i] = r[0].passes;
	check_memory(&t, "two slots");
	for (i = 0; i < n; i++)
		for (w = 0; w < t.page_size / 8; w++)
			TEST_ASSERT(((u64 *)(o.hva + i * t.page_size))[w] ==
				    pattern(t.npages + i, w, r[1].passes),
				    "two slots: second slot page %lu word %lu lost vCPU 1's last pass",
				    i, w);
	/* The second slot's log since the last clear: every page, exactly. */
	snapshot_word0(&o, 0, n, now);
	kvm_vm_get_dirty_log(t.vm, OTHER_SLOT, log);
	changed += check_log_rule(&o, log, now, base, "two slots, quiet");
	for (i = 0; i < n; i++)
		TEST_ASSERT(test_bit(i, log), "two slots: page %lu not in the last log", i);

	hyp_events_read();
	b0 = hyp.collapse_blocks - h0.collapse_blocks;
	el2 = vcpu_get_stat(r[1].vcpu, el2_dirty_faults);
	pr_info("two slots: %lu reads of the second slot's log, %lu pages changed in them, all set; %lu logging toggles on the data slot, %lu blocks split, %lu restored by %lu hypercalls (%lu left split); vCPU 1: %lu passes, %lu faults at EL2\n",
		read, changed, c.toggles, hyp.split_blocks - h0.split_blocks, b0,
		hyp.collapse_calls - h0.collapse_calls,
		hyp.collapse_skipped - h0.collapse_skipped, r[1].passes, el2);
	TEST_ASSERT(changed, "two slots: no page changed between a clear and a read");
	TEST_ASSERT(!fast_dirty || el2, "two slots: no write to the second slot resolved at EL2");
	TEST_ASSERT(!collapse || b0 >= t.nr_blocks,
		    "two slots: %lu blocks restored, fewer than the data slot's %lu",
		    b0, t.nr_blocks);
	free(c.ones);
	free(log);
	free(now);
	free(base);
	destroy_test_vm(&t);
}

/*
 * Kill the VMM while it is inside KVM_CLEAR_DIRTY_LOG splitting blocks,
 * while its vCPU writes the pages that clear write-protected (faults
 * resolved at EL2), or turning logging off (EL2 restoring them, table
 * pages coming back on the split cache): the VM is torn down with the
 * split memcache part used, and every page it donated must come back. The
 * child says, in memory shared with the parent, which of the three it is
 * in (IN_CLEAR, IN_RUN, IN_LOG_OFF) and when it leaves.
 */
enum { IN_CLEAR = 1, IN_RUN, IN_LOG_OFF };

static void kill_child_vmm(int ready_fd, int *in_ioctl)
{
	struct test_vm t;
	u64 seed = 1;

	create_test_vm(&t, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET);
	guest_write(&t, .seed = seed);
	TEST_ASSERT(write(ready_fd, "r", 1) == 1, "signal readiness");
	for (;;) {
		vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
		WRITE_ONCE(*in_ioctl, IN_CLEAR);
		clear_range(&t, 0, t.npages);
		WRITE_ONCE(*in_ioctl, IN_RUN);
		guest_write(&t, .seed = ++seed);
		WRITE_ONCE(*in_ioctl, IN_LOG_OFF);
		vm_mem_region_set_flags(t.vm, DATA_SLOT, 0);
		WRITE_ONCE(*in_ioctl, 0);
		guest_write(&t, .seed = ++seed);
	}
}

static void test_kill_mid_split(u64 secpt)
{
	int i, want, landed[4] = {}, status, pipefd[2], *in_ioctl;
	u64 now, deadline, tries;
	pid_t pid;
	char c;

	if (!pkvm)
		return;

	in_ioctl = mmap(NULL, getpagesize(), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	TEST_ASSERT(in_ioctl != MAP_FAILED, "mmap");
	for (i = 0; i < 12; i++) {
		want = IN_CLEAR + i % 3;
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
		deadline = now_us() + (i / 3) * 200;
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
	pr_info("killed %d VMMs, %d while in KVM_CLEAR_DIRTY_LOG, %d while the vCPU wrote logged pages, %d while turning logging off; SecPageTables back to %lu kB\n",
		i, landed[IN_CLEAR], landed[IN_RUN], landed[IN_LOG_OFF], secpt);
	TEST_ASSERT(landed[IN_CLEAR], "no kill landed inside KVM_CLEAR_DIRTY_LOG");
	TEST_ASSERT(landed[IN_RUN], "no kill landed while the vCPU wrote logged pages");
	TEST_ASSERT(landed[IN_LOG_OFF], "no kill landed while turning logging off");
}

static const char * const scenarios[] = {
	"vcpu-race", "shared-tables", "slot-churn", "move-buffered", "restore-churn",
	"two-slots",
	"kill",
};

int main(int argc, char *argv[])
{
	u64 secpt;
	int opt;

	while ((opt = getopt(argc, argv, "t:")) != -1) {
		switch (opt) {
		case 't':
			set_only(optarg, scenarios, ARRAY_SIZE(scenarios));
			break;
		default:
			printf("usage: %s [-t SCENARIO]\n"
			       " -t: only one scenario: vcpu-race, shared-tables, slot-churn, move-buffered,\n"
			       "     restore-churn, two-slots, or on pKVM kill\n", argv[0]);
			/* A bad option is a broken test line, not a skip. */
			exit(KSFT_FAIL);
		}
	}
	pkvm_split_setup();

	secpt = sec_pagetables_kb();
	if (want("vcpu-race")) {
		test_split_vs_vcpu_faults(false);
		check_no_leak(secpt, "split vs vCPU faults");
	}
	if (want("shared-tables")) {
		test_split_vs_vcpu_faults(true);
		check_no_leak(secpt, "vCPUs on shared tables");
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
	if (want("two-slots")) {
		test_two_slots();
		check_no_leak(secpt, "two slots");
	}
	if (pkvm && want("kill"))
		test_kill_mid_split(secpt);
	pr_info("PASS\n");
	return 0;
}
