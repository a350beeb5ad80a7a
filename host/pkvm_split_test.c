// SPDX-License-Identifier: GPL-2.0-only
/*
 * Hostile-host test of the pKVM split hypercalls.
 *
 * Reading /sys/kernel/debug/kvm/<pid>-<fd>/pkvm_split_abi, for a
 * non-protected VM whose hyp VM exists and which has at least two adjacent
 * unsplit block mappings, issues __pkvm_host_split_guest and
 * __pkvm_tlb_flush_vmid_ipa_nsh with a table of bad arguments and bad
 * memcaches, as a compromised host could, and reports one KTAP line per
 * case: the result must be the documented error, and the following
 * legitimate calls must find the guest's stage-2 unchanged. If another VM
 * is protected and running, its handle must be refused too.
 *
 * Reading pkvm_split_abi_dying, for an idle non-protected VM with nothing
 * mapped, starts its teardown and checks that the split then refuses it.
 *
 * Reading pkvm_split_check checks the VM's guest stage-2 at EL2 against
 * the page states and the host's records, and changes nothing: the
 * random sequence test calls it after every step.
 */

#include <linux/debugfs.h>
#include <linux/kvm_host.h>
#include <linux/seq_file.h>

#include <asm/kvm_mmu.h>
#include <asm/kvm_pkvm.h>

#include "hyp_constants.h"

struct abi_case_ctx {
	struct seq_file *m;
	int nr, failed;
};

static void report(struct abi_case_ctx *c, bool ok, const char *what,
		   long got, long want)
{
	c->nr++;
	if (ok) {
		seq_printf(c->m, "ok %d %s\n", c->nr, what);
		return;
	}
	c->failed++;
	seq_printf(c->m, "not ok %d %s # got %ld, expected %ld\n", c->nr, what,
		   got, want);
}

static long split_wp_hvc(pkvm_handle_t handle, u64 gfn, u64 nr_pages, u64 wp_gfn,
			 u64 wp_nr, u64 *done, u64 *nr_split, u64 *wp_done)
{
	struct arm_smccc_1_2_regs res, args = {
		.a0	= KVM_HOST_SMCCC_FUNC(__pkvm_host_split_guest),
		.a1	= handle,
		.a2	= gfn,
		.a3	= nr_pages,
		.a4	= wp_gfn,
		.a5	= wp_nr,
	};

	arm_smccc_1_2_hvc(&args, &res);
	if (res.a0 != SMCCC_RET_SUCCESS)
		return -EOPNOTSUPP;
	*done = res.a2;
	*nr_split = res.a3;
	*wp_done = res.a5;
	return (long)res.a1;
}

static long split_hvc(pkvm_handle_t handle, u64 gfn, u64 nr_pages,
		      u64 *done, u64 *nr_split)
{
	u64 wp_done;

	return split_wp_hvc(handle, gfn, nr_pages, 0, 0, done, nr_split, &wp_done);
}

static long collapse_hvc(pkvm_handle_t handle, u64 gfn, u64 nr_pages,
			 u64 *done, u64 *restored, u64 *returned)
{
	struct arm_smccc_1_2_regs res, args = {
		.a0	= KVM_HOST_SMCCC_FUNC(__pkvm_host_collapse_guest),
		.a1	= handle,
		.a2	= gfn,
		.a3	= nr_pages,
	};

	arm_smccc_1_2_hvc(&args, &res);
	if (res.a0 != SMCCC_RET_SUCCESS)
		return -EOPNOTSUPP;
	*done = res.a2;
	*restored = res.a3;
	*returned = res.a6;
	return (long)res.a1;
}

/*
 * A bad restore request must fail as documented, restore nothing and give
 * back no page.
 */
static void expect_collapse(struct abi_case_ctx *c, const char *what,
			    pkvm_handle_t handle, u64 gfn, u64 nr_pages, long want)
{
	u64 done = ~0ULL, restored = ~0ULL, returned = ~0ULL;
	long ret = collapse_hvc(handle, gfn, nr_pages, &done, &restored, &returned);

	report(c, ret == want && !restored && !returned && (ret ? !done : !!done),
	       what, ret, want);
}

static long nsh_hvc(pkvm_handle_t handle, u64 ipa, long level)
{
	struct arm_smccc_res res;

	arm_smccc_1_1_hvc(KVM_HOST_SMCCC_FUNC(__pkvm_tlb_flush_vmid_ipa_nsh),
			  handle, ipa, level, &res);
	return res.a0 == SMCCC_RET_SUCCESS ? (long)res.a1 : -EOPNOTSUPP;
}

/* A bad call must fail as documented and split nothing. */
static void expect_split(struct abi_case_ctx *c, const char *what,
			 pkvm_handle_t handle, u64 gfn, u64 nr_pages, long want)
{
	u64 done = ~0ULL, nr_split = ~0ULL;
	long ret = split_hvc(handle, gfn, nr_pages, &done, &nr_split);

	report(c, ret == want && !nr_split, what, ret, want);
}

/* A bad write-protect range: the call fails before it splits anything. */
static void expect_split_wp(struct abi_case_ctx *c, const char *what,
			    pkvm_handle_t handle, u64 gfn, u64 nr_pages,
			    u64 wp_gfn, u64 wp_nr, long want)
{
	u64 done = ~0ULL, nr_split = ~0ULL, wp_done = ~0ULL;
	long ret = split_wp_hvc(handle, gfn, nr_pages, wp_gfn, wp_nr, &done,
				&nr_split, &wp_done);

	report(c, ret == want && !nr_split && !wp_done, what, ret, want);
}

/*
 * A split memcache whose first page EL2 cannot admit: the call fails with
 * -ENOMEM, as refill_memcache() does for the vCPU's memcache, splits
 * nothing and leaves the host's memcache as it was.
 */
static void expect_cache_refused(struct abi_case_ctx *c, struct kvm *kvm,
				 const char *what, u64 gfn, u64 bp,
				 phys_addr_t head, unsigned long nr)
{
	struct kvm_hyp_memcache *mc = &kvm->arch.pkvm.split_mc;

	mc->head = head;
	mc->nr_pages = nr;
	expect_split(c, what, kvm->arch.pkvm.handle, gfn, bp, -ENOMEM);
	report(c, mc->head == head && mc->nr_pages == nr,
	       "  ... and the host's memcache is left alone", mc->nr_pages, nr);
}

static void *phys_to_host_va(phys_addr_t phys)
{
	return __va(phys);
}

static phys_addr_t host_va_to_phys(void *addr)
{
	return __pa(addr);
}

/*
 * The TLB hypercalls that take a struct kvm_s2_mmu pointer would have EL2
 * load whatever VMID and page-table base the host wrote there (or fault on
 * memory it does not map): in protected mode they are refused. The pointer
 * used is the VM's own, shared with EL2, so that a regression shows up as a
 * failed case rather than a hyp panic.
 */
static void expect_s2_mmu_refused(struct abi_case_ctx *c, struct kvm *kvm)
{
	struct kvm_s2_mmu *mmu = &kvm->arch.mmu;
	struct arm_smccc_res res;

	arm_smccc_1_1_hvc(KVM_HOST_SMCCC_FUNC(__kvm_tlb_flush_vmid), mmu, &res);
	report(c, res.a0 == SMCCC_RET_NOT_SUPPORTED, "__kvm_tlb_flush_vmid(host mmu) refused",
	       res.a0, SMCCC_RET_NOT_SUPPORTED);
	arm_smccc_1_1_hvc(KVM_HOST_SMCCC_FUNC(__kvm_tlb_flush_vmid_ipa), mmu, 0,
			  KVM_PGTABLE_LAST_LEVEL, &res);
	report(c, res.a0 == SMCCC_RET_NOT_SUPPORTED, "__kvm_tlb_flush_vmid_ipa(host mmu) refused",
	       res.a0, SMCCC_RET_NOT_SUPPORTED);
	arm_smccc_1_1_hvc(KVM_HOST_SMCCC_FUNC(__kvm_tlb_flush_vmid_ipa_nsh), mmu, 0,
			  KVM_PGTABLE_LAST_LEVEL, &res);
	report(c, res.a0 == SMCCC_RET_NOT_SUPPORTED,
	       "__kvm_tlb_flush_vmid_ipa_nsh(host mmu) refused", res.a0, SMCCC_RET_NOT_SUPPORTED);
	arm_smccc_1_1_hvc(KVM_HOST_SMCCC_FUNC(__kvm_tlb_flush_vmid_range), mmu, 0, 1, &res);
	report(c, res.a0 == SMCCC_RET_NOT_SUPPORTED,
	       "__kvm_tlb_flush_vmid_range(host mmu) refused", res.a0, SMCCC_RET_NOT_SUPPORTED);
	arm_smccc_1_1_hvc(KVM_HOST_SMCCC_FUNC(__kvm_flush_cpu_context), mmu, &res);
	report(c, res.a0 == SMCCC_RET_NOT_SUPPORTED, "__kvm_flush_cpu_context(host mmu) refused",
	       res.a0, SMCCC_RET_NOT_SUPPORTED);
}

static struct pkvm_mapping *first_block(struct kvm_pgtable *pgt, u64 *bp)
{
	struct rb_node *node;

	for (node = rb_first_cached(&pgt->pkvm_mappings); node; node = rb_next(node)) {
		struct pkvm_mapping *m = rb_entry(node, struct pkvm_mapping, node);
		struct rb_node *next_node = rb_next(node);
		struct pkvm_mapping *n;

		if (m->nr_pages == 1 || m->split || !next_node)
			continue;
		n = rb_entry(next_node, struct pkvm_mapping, node);
		if (n->nr_pages == m->nr_pages && !n->split && n->gfn == m->gfn + m->nr_pages) {
			*bp = m->nr_pages;
			return m;
		}
	}
	return NULL;
}

/*
 * A page the host has donated to protected VM @pvm, or 0 if none. It is
 * looked up before the table takes its locks, without a reference: the
 * table expects the protected VM to be idle.
 */
static phys_addr_t first_donated_page(struct kvm *pvm)
{
	struct rb_node *node;
	phys_addr_t phys = 0;

	read_lock(&pvm->mmu_lock);
	node = rb_first_cached(&pvm->arch.mmu.pgt->pkvm_mappings);
	if (node)
		phys = PFN_PHYS(rb_entry(node, struct pkvm_mapping, node)->pfn);
	read_unlock(&pvm->mmu_lock);

	return phys;
}

/*
 * A handle in EL2's range that no VM holds: one above the highest in use.
 * (A VM created meanwhile could take it; the table is meant to run alone.)
 */
static pkvm_handle_t unused_handle(void)
{
	pkvm_handle_t h = 0;
	struct kvm *kvm;

	mutex_lock(&kvm_lock);
	list_for_each_entry(kvm, &vm_list, vm_list)
		h = max(h, READ_ONCE(kvm->arch.pkvm.handle));
	mutex_unlock(&kvm_lock);

	return h + 1;
}

/* Another VM, protected and with its hyp VM created, or NULL; ref held. */
static struct kvm *get_protected_vm(struct kvm *self)
{
	struct kvm *other, *found = NULL;

	mutex_lock(&kvm_lock);
	list_for_each_entry(other, &vm_list, vm_list) {
		if (other != self && kvm_vm_is_protected(other) &&
		    pkvm_hyp_vm_is_created(other) && kvm_get_kvm_safe(other)) {
			found = other;
			break;
		}
	}
	mutex_unlock(&kvm_lock);

	return found;
}

/*
 * A protected VM's handle is refused by both hypercalls, and a page donated
 * to it (@donated, looked up before the table's locks) as a memcache page.
 */
static void expect_protected_refused(struct abi_case_ctx *c, struct kvm *kvm,
				     struct kvm *pvm, phys_addr_t donated,
				     u64 gfn, u64 bp)
{
	long ret;

	if (!pvm || !donated) {
		seq_printf(c->m, "ok %d split: a protected VM # SKIP no protected VM with memory\n",
			   ++c->nr);
		return;
	}

	expect_split(c, "split: a protected VM's handle", pvm->arch.pkvm.handle,
		     gfn, bp, -EPERM);
	expect_collapse(c, "restore: a protected VM's handle", pvm->arch.pkvm.handle,
			gfn, bp, -EPERM);
	ret = nsh_hvc(pvm->arch.pkvm.handle, PFN_PHYS(gfn), KVM_PGTABLE_LAST_LEVEL);
	report(c, ret == -EPERM, "nsh flush: a protected VM's handle", ret, -EPERM);

	expect_cache_refused(c, kvm, "split: memcache page donated to a protected guest",
			     gfn, bp, donated, 1);
}

/* A vCPU of @kvm in the state @finalized asks for, or NULL. */
static struct kvm_vcpu *find_vcpu(struct kvm *kvm, bool finalized)
{
	struct kvm_vcpu *vcpu;
	unsigned long i;

	kvm_for_each_vcpu(i, vcpu, kvm)
		if (!!vcpu_get_flag(vcpu, VCPU_PKVM_FINALIZED) == finalized)
			return vcpu;
	return NULL;
}

/*
 * __pkvm_init_vcpu with @buf as the vCPU's dirty buffer must fail with
 * @want. Returns false if it succeeded: the vCPU then exists at EL2 with
 * @hyp_vcpu, which the host must no longer touch.
 */
static bool expect_init_vcpu(struct abi_case_ctx *c, struct kvm_vcpu *vcpu,
			     void *hyp_vcpu, const char *what, void *buf,
			     long want)
{
	long ret;

	WRITE_ONCE(vcpu->arch.pkvm_dirty_buf, buf);
	ret = kvm_call_hyp_nvhe(__pkvm_init_vcpu, vcpu->kvm->arch.pkvm.handle,
				vcpu, hyp_vcpu);
	WRITE_ONCE(vcpu->arch.pkvm_dirty_buf, NULL);
	report(c, ret == want, what, ret, want);
	if (!ret)
		vcpu_set_flag(vcpu, VCPU_PKVM_FINALIZED);

	return ret;
}

/* EL2 gave every page of [va, va + size) back: the host can share it. */
static bool host_owns(void *va, size_t size)
{
	u64 pfn;

	for (pfn = virt_to_pfn(va); pfn < virt_to_pfn(va + size); pfn++) {
		if (kvm_call_hyp_nvhe(__pkvm_host_share_hyp, pfn) ||
		    kvm_call_hyp_nvhe(__pkvm_host_unshare_hyp, pfn))
			return false;
	}
	return true;
}

/*
 * The per-vCPU dirty buffer of the EL2 fast dirty-fault path, as a hostile
 * host could hand it over: a vCPU that has run keeps its buffer pinned (the
 * host cannot unshare it), and a vCPU not yet created at EL2 is refused
 * with every bad buffer (EL2 gives back the vCPU's memory), then created
 * with a good one. @guest_page is shared with the guest, @donated (if not
 * 0) donated to a protected VM.
 */
static void run_dirty_buf_cases(struct abi_case_ctx *c, struct kvm *kvm,
				phys_addr_t guest_page, phys_addr_t donated)
{
	size_t hyp_vcpu_sz = PAGE_ALIGN(PKVM_HYP_VCPU_SIZE);
	struct kvm_vcpu *ran, *vcpu;
	void *hyp_vcpu, *own, *shared;
	struct pkvm_dirty_buf *buf;
	long ret;

	ran = find_vcpu(kvm, true);
	vcpu = find_vcpu(kvm, false);
	buf = ran ? ran->arch.pkvm_dirty_buf : NULL;
	if (!buf || !vcpu) {
		seq_printf(c->m, "ok %d dirty buffer # SKIP needs the fast path on, a vCPU that ran and one that did not\n",
			   ++c->nr);
		return;
	}

	ret = kvm_call_hyp_nvhe(__pkvm_host_unshare_hyp, virt_to_pfn(buf));
	report(c, ret == -EBUSY, "dirty buffer: unshared while its vCPU exists", ret,
	       -EBUSY);

	hyp_vcpu = alloc_pages_exact(hyp_vcpu_sz, GFP_KERNEL_ACCOUNT);
	own = (void *)get_zeroed_page(GFP_KERNEL_ACCOUNT);
	shared = (void *)get_zeroed_page(GFP_KERNEL_ACCOUNT);
	if (!hyp_vcpu || !own || !shared || kvm_share_hyp(shared, shared + 1)) {
		report(c, false, "dirty buffer: allocations", -ENOMEM, 0);
		goto free;
	}

	/* No first KVM_RUN of @vcpu creates it meanwhile. */
	mutex_lock(&kvm->arch.config_lock);
	if (!expect_init_vcpu(c, vcpu, hyp_vcpu, "dirty buffer: not page-aligned",
			      shared + 8, -EINVAL) ||
	    !expect_init_vcpu(c, vcpu, hyp_vcpu, "dirty buffer: not shared with EL2",
			      own, -EPERM) ||
	    !expect_init_vcpu(c, vcpu, hyp_vcpu, "dirty buffer: shared with the guest",
			      phys_to_host_va(guest_page), -EPERM) ||
	    !expect_init_vcpu(c, vcpu, hyp_vcpu, "dirty buffer: owned by EL2",
			      phys_to_host_va(hyp_mem_base), -EPERM) ||
	    (donated &&
	     !expect_init_vcpu(c, vcpu, hyp_vcpu, "dirty buffer: donated to a protected guest",
			       phys_to_host_va(donated), -EPERM)) ||
	    !expect_init_vcpu(c, vcpu, hyp_vcpu, "dirty buffer: beyond memory",
			      phys_to_host_va(memblock_end_of_DRAM()), -EPERM)) {
		/* EL2 took the vCPU's memory with a bad buffer: leave it be. */
		mutex_unlock(&kvm->arch.config_lock);
		hyp_vcpu = NULL;
		goto free;
	}
	mutex_unlock(&kvm->arch.config_lock);

	report(c, host_owns(hyp_vcpu, hyp_vcpu_sz),
	       "  ... and EL2 gave the vCPU's memory back each time", 0, 0);

	ret = pkvm_create_hyp_vcpu(vcpu);
	report(c, !ret && vcpu->arch.pkvm_dirty_buf,
	       "dirty buffer: a good one after the bad ones", ret, 0);
free:
	if (shared) {
		kvm_unshare_hyp(shared, shared + 1);
		free_page((unsigned long)shared);
	}
	free_page((unsigned long)own);
	if (hyp_vcpu)
		free_pages_exact(hyp_vcpu, hyp_vcpu_sz);
}

static void run_abi_test(struct seq_file *s, struct kvm *kvm)
{
	struct kvm_hyp_memcache *mc = &kvm->arch.pkvm.split_mc;
	struct kvm_hyp_memcache saved, spare = {
		.flags = HYP_MEMCACHE_ACCOUNT_STAGE2,
	};
	pkvm_handle_t h = kvm->arch.pkvm.handle, unused;
	struct kvm_pgtable *pgt = kvm->arch.mmu.pgt;
	struct abi_case_ctx c = { .m = s };
	u64 bp, gfn, ipa_pages, done, nr_split, covered;
	struct pkvm_mapping *m, *n;
	phys_addr_t *loop, donated, guest_page = 0;
	struct kvm *pvm;
	long ret;

	/* Allocations first: the test then runs under mmu_lock. */
	if (topup_hyp_memcache(&spare, 2) || topup_hyp_memcache(mc, 2)) {
		seq_puts(s, "not ok 1 allocation # -ENOMEM\n");
		free_hyp_memcache(&spare);
		return;
	}
	pvm = get_protected_vm(kvm);
	donated = pvm ? first_donated_page(pvm) : 0;
	unused = unused_handle();

	mutex_lock(&kvm->slots_lock);
	write_lock(&kvm->mmu_lock);

	m = first_block(pgt, &bp);
	if (!m) {
		seq_puts(s, "1..0 # SKIP no two adjacent unsplit blocks\n");
		goto unlock;
	}
	n = rb_entry(rb_next(&m->node), struct pkvm_mapping, node);
	gfn = m->gfn;
	guest_page = PFN_PHYS(m->pfn);
	ipa_pages = BIT_ULL(kvm_phys_shift(&kvm->arch.mmu) - PAGE_SHIFT);
	saved = *mc;
	mc->head = 0;
	mc->nr_pages = 0;

	seq_puts(s, "KTAP version 1\n");
	expect_split(&c, "split: unknown handle", 0, gfn, bp, -ENOENT);
	expect_split(&c, "split: unused handle", unused, gfn, bp, -ENOENT);
	expect_split(&c, "split: zero length", h, gfn, 0, -EINVAL);
	expect_split(&c, "split: unaligned start", h, gfn + 1, bp, -EINVAL);
	expect_split(&c, "split: unaligned length", h, gfn, bp + 1, -EINVAL);
	expect_split(&c, "split: range beyond the IPA space", h, ipa_pages, bp, -ERANGE);
	expect_split(&c, "split: range ending beyond the IPA space", h,
		     ipa_pages - bp, 2 * bp, -ERANGE);
	expect_split(&c, "split: overflowing gfn + nr_pages", h, ipa_pages - bp,
		     ALIGN_DOWN(U64_MAX, bp), -ERANGE);
	/* The memcache is empty: these fail on their arguments first. */
	expect_split_wp(&c, "split+wp: write-protect range before the split range", h,
			gfn + bp, bp, gfn, 1, -EINVAL);
	expect_split_wp(&c, "split+wp: write-protect range past the split range", h,
			gfn, bp, gfn + bp, 1, -EINVAL);
	expect_split_wp(&c, "split+wp: write-protect range further past it", h,
			gfn, bp, gfn + bp + 1, 1, -EINVAL);
	expect_split_wp(&c, "split+wp: write-protect range at the top of the u64 space", h,
			gfn, bp, ALIGN_DOWN(U64_MAX, bp), bp, -EINVAL);
	expect_split_wp(&c, "split+wp: write-protect range across a block boundary", h,
			gfn, 2 * bp, gfn + bp - 1, 2, -EINVAL);
	expect_split_wp(&c, "split+wp: overflowing wp_gfn + wp_nr", h, gfn, bp,
			gfn + 1, U64_MAX, -EINVAL);
	expect_split(&c, "split: empty memcache", h, gfn, bp, -ENOMEM);

	expect_collapse(&c, "restore: unknown handle", 0, gfn, bp, -ENOENT);
	expect_collapse(&c, "restore: zero length", h, gfn, 0, -EINVAL);
	expect_collapse(&c, "restore: unaligned start", h, gfn + 1, bp, -EINVAL);
	expect_collapse(&c, "restore: unaligned length", h, gfn, bp + 1, -EINVAL);
	expect_collapse(&c, "restore: range beyond the IPA space", h, ipa_pages, bp, -ERANGE);
	expect_collapse(&c, "restore: overflowing gfn + nr_pages", h, ipa_pages - bp,
			ALIGN_DOWN(U64_MAX, bp), -ERANGE);
	expect_collapse(&c, "restore: blocks that are not split stay as they are", h,
			gfn, 2 * bp, 0);
	expect_collapse(&c, "restore: unmapped range restores nothing", h,
			ipa_pages - 2 * bp, bp, 0);

	expect_cache_refused(&c, kvm, "split: memcache page owned by EL2", gfn, bp,
			     hyp_mem_base, 1);
	expect_cache_refused(&c, kvm, "split: memcache page is MMIO (PA 0)", gfn, bp,
			     0, 1);
	expect_cache_refused(&c, kvm, "split: memcache page beyond memory", gfn, bp,
			     memblock_end_of_DRAM(), 1);
	/* The top page of the address space: beyond any PA range. */
	expect_cache_refused(&c, kvm, "split: memcache page beyond the PA range",
			     gfn, bp, PAGE_MASK, 1);
	expect_cache_refused(&c, kvm, "split: memcache page shared with the guest",
			     gfn, bp, PFN_PHYS(m->pfn), 1);
	expect_protected_refused(&c, kvm, pvm, donated, gfn, bp);

	/*
	 * One good page for two blocks: EL2 splits the first, then runs out:
	 * -ENOMEM, with x2 and x3 saying what was split. A call covers a
	 * single block with 64KiB pages: there, no call can run out part-way.
	 */
	if (KVM_PKVM_SPLIT_MAX_BLOCKS > 1) {
		mc->head = 0;
		mc->nr_pages = 0;
		push_hyp_memcache(mc, pop_hyp_memcache(&spare, phys_to_host_va),
				  host_va_to_phys);
		ret = split_hvc(h, gfn, 2 * bp, &done, &nr_split);
		report(&c, ret == -ENOMEM && nr_split == 1 && done == bp,
		       "split: a page for one block of two splits it, then -ENOMEM", ret,
		       -ENOMEM);
		m->split = 1;
	}
	mc->head = 0;
	mc->nr_pages = 0;
	expect_split(&c, "split: nothing left for the next block", h, gfn + bp, bp,
		     -ENOMEM);

	/*
	 * A list that loops: its page is admitted once and splits a block,
	 * then it is refused (EL2 owns it now) and nothing is split.
	 */
	loop = pop_hyp_memcache(&spare, phys_to_host_va);
	*loop = __pa(loop);
	mc->head = __pa(loop);
	mc->nr_pages = 2;
	ret = split_hvc(h, gfn + bp, bp, &done, &nr_split);
	report(&c, !ret && nr_split == 1 && mc->head == __pa(loop) && mc->nr_pages == 1,
	       "split: memcache list that loops: its page admitted once, one block split",
	       ret, 0);
	n->split = 1;
	expect_split(&c, "split: ... and refused the second time", h, gfn, 2 * bp,
		     -ENOMEM);
	report(&c, mc->head == __pa(loop) && mc->nr_pages == 1,
	       "  ... and the host's memcache is left alone", mc->nr_pages, 1);

	/* Legitimate calls: the host marked what EL2 split. */
	*mc = saved;
	ret = pkvm_pgtable_stage2_split(pgt, PFN_PHYS(gfn), 2 * bp * PAGE_SIZE, NULL);
	report(&c, !ret, "split: legitimate call after the bad ones", ret, 0);
	ret = split_hvc(h, gfn, 2 * bp, &done, &nr_split);
	covered = min_t(u64, 2, KVM_PKVM_SPLIT_MAX_BLOCKS) * bp;
	report(&c, !ret && !nr_split && done == covered,
	       "split: split blocks are skipped", ret, 0);
	expect_split(&c, "split: unmapped range splits nothing", h,
		     ipa_pages - 2 * bp, bp, 0);
	ret = split_wp_hvc(h, gfn, 2 * bp, gfn + 64, min_t(u64, 64, bp), &done,
			   &nr_split, &covered);
	report(&c, !ret && !nr_split && covered == min_t(u64, 64, bp),
	       "split+wp: split blocks are skipped, the range write-protected", ret, 0);

	/*
	 * The two split blocks, one with a page write-protected just above:
	 * restored in place by the host's legitimate path, which clears their
	 * split bits; a second request finds nothing left to restore.
	 */
	covered = mc->nr_pages;
	ret = pkvm_pgtable_stage2_collapse(pgt, PFN_PHYS(gfn), 2 * bp * PAGE_SIZE);
	report(&c, !ret && !m->split && !n->split,
	       "restore: legitimate call restores the split blocks", ret, 0);
	report(&c, mc->nr_pages == covered + 2,
	       "  ... and gives their two table pages back on the host's cache",
	       mc->nr_pages - covered, 2);
	expect_collapse(&c, "restore: ... and then finds nothing to restore", h,
			gfn, 2 * bp, 0);

	report(&c, nsh_hvc(0, PFN_PHYS(gfn), KVM_PGTABLE_LAST_LEVEL) == -ENOENT,
	       "nsh flush: unknown handle", 0, -ENOENT);
	report(&c, nsh_hvc(h, PFN_PHYS(gfn), KVM_PGTABLE_LAST_LEVEL + 1) == -EINVAL,
	       "nsh flush: level out of range", 0, -EINVAL);
	report(&c, nsh_hvc(h, PFN_PHYS(gfn), KVM_PGTABLE_FIRST_LEVEL - 1) == -EINVAL,
	       "nsh flush: negative level out of range", 0, -EINVAL);
	report(&c, nsh_hvc(h, PFN_PHYS(ipa_pages), KVM_PGTABLE_LAST_LEVEL) == -ERANGE,
	       "nsh flush: IPA outside the VM", 0, -ERANGE);
	report(&c, !nsh_hvc(h, PFN_PHYS(gfn), KVM_PGTABLE_LAST_LEVEL),
	       "nsh flush: legitimate call", 0, 0);

	expect_s2_mmu_refused(&c, kvm);
unlock:
	write_unlock(&kvm->mmu_lock);
	mutex_unlock(&kvm->slots_lock);
	if (guest_page) {
		run_dirty_buf_cases(&c, kvm, guest_page, donated);
		seq_printf(s, "1..%d\n# %d failed\n", c.nr, c.failed);
	}
	if (pvm)
		kvm_put_kvm(pvm);
	free_hyp_memcache(&spare);
}

static int pkvm_split_abi_show(struct seq_file *s, void *unused)
{
	struct kvm *kvm = s->private;

	if (!pkvm_hyp_vm_is_created(kvm) || kvm_vm_is_protected(kvm)) {
		seq_puts(s, "1..0 # SKIP needs a running non-protected VM\n");
		return 0;
	}

	run_abi_test(s, kvm);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pkvm_split_abi);

static bool vm_has_mappings(struct kvm *kvm)
{
	bool mapped;

	read_lock(&kvm->mmu_lock);
	mapped = !RB_EMPTY_ROOT(&kvm->arch.mmu.pgt->pkvm_mappings.rb_root);
	read_unlock(&kvm->mmu_lock);

	return mapped;
}

/*
 * Reading pkvm_split_abi_dying starts this VM's teardown at EL2, the first
 * step kvm_destroy_vm() would take, and checks that the split hypercall
 * then refuses the VM's handle with -EBUSY, as a host racing its own
 * teardown would get. The VM is dead afterwards; only a VM that has mapped
 * no memory and whose vCPUs are not running qualifies.
 */
static int pkvm_split_abi_dying_show(struct seq_file *s, void *unused)
{
	u64 bp = kvm_granule_size(KVM_PGTABLE_LAST_LEVEL - 1) >> PAGE_SHIFT;
	struct kvm *kvm = s->private;
	struct abi_case_ctx c = { .m = s };
	u64 done = ~0ULL, nr_split = ~0ULL;
	long ret;

	mutex_lock(&kvm->lock);
	if (kvm_is_vcpu_creation_in_progress(kvm) || kvm_trylock_all_vcpus(kvm)) {
		seq_puts(s, "1..0 # SKIP needs an idle VM\n");
		goto unlock;
	}
	if (!pkvm_hyp_vm_is_created(kvm) || kvm_vm_is_protected(kvm) ||
	    kvm->arch.pkvm.is_dying || vm_has_mappings(kvm)) {
		seq_puts(s, "1..0 # SKIP needs a non-protected VM with nothing mapped\n");
		goto unlock_vcpus;
	}

	ret = kvm_call_hyp_nvhe(__pkvm_start_teardown_vm, kvm->arch.pkvm.handle);
	kvm->arch.pkvm.is_dying = !ret;
	seq_puts(s, "KTAP version 1\n");
	report(&c, !ret, "start of the VM's teardown", ret, 0);

	ret = split_hvc(kvm->arch.pkvm.handle, 0, bp, &done, &nr_split);
	report(&c, ret == -EBUSY && !nr_split && !done,
	       "split: a VM being torn down", ret, -EBUSY);
	expect_collapse(&c, "restore: a VM being torn down", kvm->arch.pkvm.handle,
			0, bp, -EBUSY);
	seq_printf(s, "1..%d\n# %d failed\n", c.nr, c.failed);
unlock_vcpus:
	kvm_unlock_all_vcpus(kvm);
unlock:
	mutex_unlock(&kvm->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pkvm_split_abi_dying);

static long check_hvc(pkvm_handle_t handle, u64 gfn, u64 nr_pages,
		      struct arm_smccc_1_2_regs *res)
{
	struct arm_smccc_1_2_regs args = {
		.a0	= KVM_HOST_SMCCC_FUNC(__pkvm_check_guest),
		.a1	= handle,
		.a2	= gfn,
		.a3	= nr_pages,
	};

	arm_smccc_1_2_hvc(&args, res);
	if (res->a0 != SMCCC_RET_SUCCESS)
		return -EOPNOTSUPP;
	return (long)res->a1;
}

/*
 * Reading pkvm_split_check checks the VM's guest stage-2 at EL2, over every
 * memslot (block-aligned, in IPA order), against the page states
 * (__pkvm_check_guest), and what EL2 found against the host's records: as
 * many pages mapped as recorded, and one block leaf per record of a whole
 * block that is not split. It changes nothing.
 */
static int pkvm_split_check_show(struct seq_file *s, void *unused)
{
	u64 bp = kvm_granule_size(KVM_PGTABLE_LAST_LEVEL - 1) >> PAGE_SHIFT;
	u64 pages = 0, blocks = 0, marked = 0, rec_pages = 0, rec_blocks = 0;
	u64 rec_split = 0, calls = 0, covered = 0, gfn, end;
	struct kvm *kvm = s->private;
	struct arm_smccc_1_2_regs res = {};
	struct kvm_memory_slot *slot;
	struct kvm_memslot_iter iter;
	struct kvm_pgtable *pgt;
	struct rb_node *node;
	long ret = 0;

	if (!pkvm_hyp_vm_is_created(kvm) || kvm_vm_is_protected(kvm)) {
		seq_puts(s, "skip: needs a running non-protected VM\n");
		return 0;
	}

	mutex_lock(&kvm->slots_lock);
	write_lock(&kvm->mmu_lock);
	pgt = kvm->arch.mmu.pgt;
	kvm_for_each_memslot_in_gfn_range(&iter, kvm_memslots(kvm), 0, U64_MAX) {
		slot = iter.slot;
		gfn = max(ALIGN_DOWN(slot->base_gfn, bp), covered);
		end = ALIGN(slot->base_gfn + slot->npages, bp);
		while (!ret && gfn < end) {
			ret = check_hvc(kvm->arch.pkvm.handle, gfn, end - gfn, &res);
			calls++;
			pages += res.a3;
			blocks += res.a4;
			marked += res.a5;
			if (!ret && !res.a2)
				ret = -EIO;
			gfn += res.a2;
		}
		covered = end;
		if (ret)
			break;
	}
	for (node = rb_first_cached(&pgt->pkvm_mappings); node; node = rb_next(node)) {
		struct pkvm_mapping *m = rb_entry(node, struct pkvm_mapping, node);

		rec_pages += m->nr_pages;
		rec_blocks += m->nr_pages > 1 && !m->split;
		rec_split += m->split;
	}
	write_unlock(&kvm->mmu_lock);
	mutex_unlock(&kvm->slots_lock);

	seq_printf(s, "el2: calls %llu pages %llu blocks %llu marked %llu\n",
		   calls, pages, blocks, marked);
	seq_printf(s, "host: pages %llu blocks %llu split %llu\n",
		   rec_pages, rec_blocks, rec_split);
	seq_printf(s, "result %ld bad_ipa 0x%llx\n", ret, ret ? (u64)res.a6 : 0ULL);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pkvm_split_check);

void pkvm_split_abi_test_create_debugfs(struct kvm *kvm)
{
	if (!is_protected_kvm_enabled())
		return;

	debugfs_create_file("pkvm_split_abi", 0400, kvm->debugfs_dentry, kvm,
			    &pkvm_split_abi_fops);
	debugfs_create_file("pkvm_split_abi_dying", 0400, kvm->debugfs_dentry,
			    kvm, &pkvm_split_abi_dying_fops);
	debugfs_create_file("pkvm_split_check", 0400, kvm->debugfs_dentry, kvm,
			    &pkvm_split_check_fops);
}
