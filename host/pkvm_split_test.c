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
 *
 * Writing "SEED STEPS" to pkvm_split_raw makes random raw hostile calls
 * for the VM, checked one by one: see run_raw().
 */

#include <linux/debugfs.h>
#include <linux/kvm_host.h>
#include <linux/prandom.h>
#include <linux/seq_file.h>

#include <asm/kvm_mmu.h>
#include <asm/kvm_pkvm.h>
#include <asm/sections.h>

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

static long check_hvc(pkvm_handle_t handle, u64 gfn, u64 nr_pages, u64 pfn,
		      struct arm_smccc_1_2_regs *res)
{
	struct arm_smccc_1_2_regs args = {
		.a0	= KVM_HOST_SMCCC_FUNC(__pkvm_check_guest),
		.a1	= handle,
		.a2	= gfn,
		.a3	= nr_pages,
		.a4	= pfn,
		/* Left as is by EL2 unless its faults walk shared (x11). */
		.a11	= U64_MAX,
	};

	arm_smccc_1_2_hvc(&args, res);
	if (res->a0 != SMCCC_RET_SUCCESS)
		return -EOPNOTSUPP;
	return (long)res->a1;
}

/*
 * Block leaves EL2 maps in [gfn, gfn + nr_pages), at most one split call's
 * worth, by its own walk (__pkvm_check_guest), in as many calls as that
 * takes: 0 where it refuses the range.
 */
static u64 blocks_mapped(pkvm_handle_t handle, u64 gfn, u64 nr_pages)
{
	u64 bp = kvm_granule_size(KVM_PGTABLE_LAST_LEVEL - 1) >> PAGE_SHIFT;
	u64 end = gfn + min_t(u64, nr_pages, KVM_PKVM_SPLIT_MAX_BLOCKS * bp);
	struct arm_smccc_1_2_regs res;
	u64 blocks = 0;

	while (gfn < end) {
		if (check_hvc(handle, gfn, end - gfn, U64_MAX, &res) || !res.a2)
			return 0;
		blocks += res.a4;
		gfn += res.a2;
	}
	return blocks;
}

/*
 * A split call, and how many blocks it split: the call does not say, so
 * EL2's walk counts the block leaves of the call's window before and after.
 */
static long split_hvc(pkvm_handle_t handle, u64 gfn, u64 nr_pages,
		      u64 *done, u64 *nr_split)
{
	u64 blocks = blocks_mapped(handle, gfn, nr_pages);
	struct arm_smccc_1_2_regs res, args = {
		.a0	= KVM_HOST_SMCCC_FUNC(__pkvm_host_split_guest),
		.a1	= handle,
		.a2	= gfn,
		.a3	= nr_pages,
	};

	arm_smccc_1_2_hvc(&args, &res);
	if (res.a0 != SMCCC_RET_SUCCESS)
		return -EOPNOTSUPP;
	*done = res.a2;
	*nr_split = blocks - blocks_mapped(handle, gfn, nr_pages);
	return (long)res.a1;
}

/*
 * A restore call, and how many pages it gave back: the call does not say,
 * so count them on @mc, the split cache of the VM @handle names.
 */
static long collapse_hvc(struct kvm_hyp_memcache *mc, pkvm_handle_t handle,
			 u64 gfn, u64 nr_pages, u64 *done, u64 *restored,
			 u64 *returned)
{
	unsigned long before = mc->nr_pages;
	struct arm_smccc_1_2_regs res, args = {
		.a0	= KVM_HOST_SMCCC_FUNC(__pkvm_host_collapse_range),
		.a1	= handle,
		.a2	= gfn,
		.a3	= nr_pages,
	};

	arm_smccc_1_2_hvc(&args, &res);
	if (res.a0 != SMCCC_RET_SUCCESS)
		return -EOPNOTSUPP;
	*done = res.a2;
	*restored = res.a3;
	*returned = mc->nr_pages - before;
	return (long)res.a1;
}

/*
 * A bad restore request must fail as documented, restore nothing and give
 * back no page.
 */
static void expect_collapse(struct abi_case_ctx *c, const char *what,
			    struct kvm_hyp_memcache *mc, pkvm_handle_t handle,
			    u64 gfn, u64 nr_pages, long want)
{
	u64 done = ~0ULL, restored = ~0ULL, returned = ~0ULL;
	long ret = collapse_hvc(mc, handle, gfn, nr_pages, &done, &restored,
				&returned);

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
	/* GICv5 guests are not supported with pKVM: both calls are refused. */
	arm_smccc_1_1_hvc(KVM_HOST_SMCCC_FUNC(__vgic_v5_save_apr), mmu, &res);
	report(c, res.a0 == SMCCC_RET_NOT_SUPPORTED, "__vgic_v5_save_apr(host pointer) refused",
	       res.a0, SMCCC_RET_NOT_SUPPORTED);
	arm_smccc_1_1_hvc(KVM_HOST_SMCCC_FUNC(__vgic_v5_restore_vmcr_apr), mmu, &res);
	report(c, res.a0 == SMCCC_RET_NOT_SUPPORTED,
	       "__vgic_v5_restore_vmcr_apr(host pointer) refused", res.a0, SMCCC_RET_NOT_SUPPORTED);
}

/*
 * The guest-page hypercalls that take a handle refuse a gfn outside the
 * guest's IPA space: 7.3 panicked EL2 in test_clear_young on the first one,
 * and let a gfn past 2^(64 - PAGE_SHIFT) wrap to an IPA inside the guest.
 * Each case must leave the block at @gfn mapped: the calls after it check.
 */
static void expect_ipa_range_refused(struct abi_case_ctx *c, pkvm_handle_t h, u64 gfn,
				     u64 bp, u64 ipa_pages)
{
	u64 wrap = gfn + BIT_ULL(64 - PAGE_SHIFT);
	long ret;

	ret = kvm_call_hyp_nvhe(__pkvm_host_test_clear_young_guest, h, ipa_pages, 1, true);
	report(c, ret == -ERANGE, "test_clear_young: gfn past the IPA space", ret, -ERANGE);
	ret = kvm_call_hyp_nvhe(__pkvm_host_test_clear_young_guest, h, ipa_pages - 1, 2, true);
	report(c, ret == -ERANGE, "test_clear_young: range ending past the IPA space",
	       ret, -ERANGE);
	ret = kvm_call_hyp_nvhe(__pkvm_host_test_clear_young_guest, h, wrap, 1, false);
	report(c, ret == -ERANGE, "test_clear_young: gfn that wraps the IPA", ret, -ERANGE);
	ret = kvm_call_hyp_nvhe(__pkvm_host_wrprotect_guest, h, ipa_pages, 1);
	report(c, ret == -ERANGE, "wrprotect: gfn past the IPA space", ret, -ERANGE);
	ret = kvm_call_hyp_nvhe(__pkvm_host_wrprotect_guest, h, wrap, 1);
	report(c, ret == -ERANGE, "wrprotect: gfn that wraps the IPA", ret, -ERANGE);
	ret = kvm_call_hyp_nvhe(__pkvm_host_unshare_guest, h, ipa_pages, 1);
	report(c, ret == -ERANGE, "unshare: gfn past the IPA space", ret, -ERANGE);
	ret = kvm_call_hyp_nvhe(__pkvm_host_unshare_guest, h, wrap, bp);
	report(c, ret == -ERANGE, "unshare: block whose gfn wraps the IPA", ret, -ERANGE);
}

/*
 * The hypervisor's text is mapped read-only in the host stage-2 (for the
 * host to dump on a hyp panic) and belongs to no guest: 7.3 panicked EL2
 * when the host asked to force-reclaim it.
 */
static void expect_hyp_text_reclaim_refused(struct abi_case_ctx *c)
{
	long ret;

	ret = kvm_call_hyp_nvhe(__pkvm_force_reclaim_guest_page, __pa_symbol(__hyp_text_start));
	report(c, ret == -EPERM, "force_reclaim: hyp text refused", ret, -EPERM);
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
		     gfn, bp, -EINVAL);
	expect_collapse(c, "restore: a protected VM's handle", &pvm->arch.pkvm.split_mc,
			pvm->arch.pkvm.handle, gfn, bp, -EINVAL);
	ret = nsh_hvc(pvm->arch.pkvm.handle, PFN_PHYS(gfn), KVM_PGTABLE_LAST_LEVEL);
	report(c, ret == -EINVAL, "nsh flush: a protected VM's handle", ret, -EINVAL);

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

struct split_check {
	u64 calls, pages, blocks, marked, tables, split_cache, bad_ipa;
	u64 rec_pages, rec_blocks, rec_split, records, walker_waits;
};

/*
 * What EL2 maps in [gfn, gfn + nr_pages), at the frames @pfn names if it
 * is not U64_MAX, in as many check calls as the walk's budget takes, added
 * to @sc. Returns the first error.
 */
static long check_range(pkvm_handle_t handle, u64 gfn, u64 nr_pages, u64 pfn,
			struct split_check *sc)
{
	struct arm_smccc_1_2_regs res = {};
	u64 end = gfn + nr_pages;
	long ret = 0;

	while (!ret && gfn < end) {
		ret = check_hvc(handle, gfn, end - gfn, pfn, &res);
		sc->calls++;
		sc->pages += res.a3;
		sc->blocks += res.a4;
		sc->marked += res.a5;
		sc->tables += res.a7;
		sc->split_cache = res.a8;
		sc->walker_waits = res.a11;
		if (ret)
			sc->bad_ipa = res.a6;
		else if (!res.a2)
			ret = -EIO;
		gfn += res.a2;
		if (pfn != U64_MAX)
			pfn += res.a2;
	}
	return ret;
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
	if (topup_hyp_memcache(&spare, 3) || topup_hyp_memcache(mc, 2)) {
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
	expect_split(&c, "split: unknown handle", 0, gfn, bp, -EINVAL);
	expect_split(&c, "split: unused handle", unused, gfn, bp, -EINVAL);
	expect_split(&c, "split: zero length", h, gfn, 0, -EINVAL);
	expect_split(&c, "split: unaligned start", h, gfn + 1, bp, -EINVAL);
	expect_split(&c, "split: unaligned length", h, gfn, bp + 1, -EINVAL);
	expect_split(&c, "split: range beyond the IPA space", h, ipa_pages, bp, -ERANGE);
	expect_split(&c, "split: range ending beyond the IPA space", h,
		     ipa_pages - bp, 2 * bp, -ERANGE);
	expect_split(&c, "split: overflowing gfn + nr_pages", h, ipa_pages - bp,
		     ALIGN_DOWN(U64_MAX, bp), -ERANGE);
	expect_split(&c, "split: empty memcache", h, gfn, bp, -ENOMEM);

	expect_collapse(&c, "restore: unknown handle", mc, 0, gfn, bp, -EINVAL);
	expect_collapse(&c, "restore: zero length", mc, h, gfn, 0, -EINVAL);
	expect_collapse(&c, "restore: unaligned start", mc, h, gfn + 1, bp, -EINVAL);
	expect_collapse(&c, "restore: unaligned length", mc, h, gfn, bp + 1, -EINVAL);
	expect_collapse(&c, "restore: range beyond the IPA space", mc, h, ipa_pages, bp, -ERANGE);
	expect_collapse(&c, "restore: overflowing gfn + nr_pages", mc, h, ipa_pages - bp,
			ALIGN_DOWN(U64_MAX, bp), -ERANGE);
	expect_collapse(&c, "restore: blocks that are not split stay as they are", mc, h,
			gfn, 2 * bp, 0);
	expect_collapse(&c, "restore: unmapped range restores nothing", mc, h,
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
	 * A good page, then one EL2 owns: -ENOMEM and nothing split, but the
	 * good page, admitted, stays in the VM's split cache (EL2's count)
	 * for the next call. That call, with the host's memcache empty,
	 * splits the first of two blocks with it and runs out: -ENOMEM, with
	 * x2 and x3 saying what was split. A call covers a single block with
	 * 64KiB pages: there, no call can run out part-way.
	 */
	if (KVM_PKVM_SPLIT_MAX_BLOCKS > 1) {
		struct split_check sc0 = {}, sc1 = {};

		check_range(h, gfn, bp, U64_MAX, &sc0);
		mc->head = hyp_mem_base;
		mc->nr_pages = 1;
		push_hyp_memcache(mc, pop_hyp_memcache(&spare, phys_to_host_va),
				  host_va_to_phys);
		ret = split_hvc(h, gfn, 2 * bp, &done, &nr_split);
		check_range(h, gfn, bp, U64_MAX, &sc1);
		report(&c, ret == -ENOMEM && !nr_split && !done &&
		       mc->head == hyp_mem_base && mc->nr_pages == 1 &&
		       sc1.split_cache == sc0.split_cache + 1,
		       "split: a good page, then one owned by EL2: -ENOMEM, the good one kept",
		       ret, -ENOMEM);
		mc->head = 0;
		mc->nr_pages = 0;
		ret = split_hvc(h, gfn, 2 * bp, &done, &nr_split);
		report(&c, ret == -ENOMEM && nr_split == 1 && done == bp,
		       "split: ... and it splits one block of two, then -ENOMEM", ret,
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
	ret = kvm_call_hyp_nvhe(__pkvm_host_wrprotect_guest, h, gfn + 64, min_t(u64, 64, bp));
	report(&c, !ret, "wrprotect: a word of a split block", ret, 0);

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
	expect_collapse(&c, "restore: ... and then finds nothing to restore", mc, h,
			gfn, 2 * bp, 0);

	report(&c, nsh_hvc(0, PFN_PHYS(gfn), KVM_PGTABLE_LAST_LEVEL) == -EINVAL,
	       "nsh flush: unknown handle", 0, -EINVAL);
	report(&c, nsh_hvc(0, PFN_PHYS(ipa_pages), KVM_PGTABLE_LAST_LEVEL) == -EINVAL,
	       "nsh flush: unknown handle before an IPA outside the VM", 0, -EINVAL);
	report(&c, nsh_hvc(h, PFN_PHYS(gfn), KVM_PGTABLE_LAST_LEVEL + 1) == -EINVAL,
	       "nsh flush: level out of range", 0, -EINVAL);
	report(&c, nsh_hvc(h, PFN_PHYS(gfn), KVM_PGTABLE_FIRST_LEVEL - 1) == -EINVAL,
	       "nsh flush: negative level out of range", 0, -EINVAL);
	report(&c, nsh_hvc(h, PFN_PHYS(gfn), BIT_ULL(32) | KVM_PGTABLE_LAST_LEVEL) == -EINVAL,
	       "nsh flush: level with high bits set", 0, -EINVAL);
	report(&c, nsh_hvc(h, PFN_PHYS(ipa_pages), KVM_PGTABLE_LAST_LEVEL) == -ERANGE,
	       "nsh flush: IPA outside the VM", 0, -ERANGE);
	report(&c, !nsh_hvc(h, PFN_PHYS(gfn), KVM_PGTABLE_LAST_LEVEL),
	       "nsh flush: legitimate call", 0, 0);

	done = blocks_mapped(h, gfn, 2 * bp);
	expect_ipa_range_refused(&c, h, gfn, bp, ipa_pages);
	covered = blocks_mapped(h, gfn, 2 * bp);
	report(&c, done == 2 && covered == done,
	       "both blocks still mapped after the out-of-range calls", covered, 2);
	expect_s2_mmu_refused(&c, kvm);
	expect_hyp_text_reclaim_refused(&c);
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

/*
 * A table runs once per open of its file: seq_file calls show() again only
 * after an overflow, with a larger buffer, which would run the table a
 * second time on a VM the first run changed. The buffer is sized so that
 * it does not overflow, and a second call reports the overflow instead.
 */
struct abi_once {
	struct kvm *kvm;
	bool ran;
};

static int abi_once_open(struct inode *inode, struct file *file,
			 int (*show)(struct seq_file *, void *))
{
	struct abi_once *once = kzalloc_obj(*once, GFP_KERNEL);
	int ret;

	if (!once)
		return -ENOMEM;
	once->kvm = inode->i_private;
	ret = single_open_size(file, show, once, SZ_64K);
	if (ret)
		kfree(once);
	return ret;
}

static int abi_once_release(struct inode *inode, struct file *file)
{
	kfree(((struct seq_file *)file->private_data)->private);
	return single_release(inode, file);
}

/* The table's kvm, or NULL if it already ran for this open. */
static struct kvm *abi_once_begin(struct seq_file *s)
{
	struct abi_once *once = s->private;

	if (once->ran) {
		seq_puts(s, "not ok 1 run-once # the report overflowed its buffer\n");
		return NULL;
	}
	once->ran = true;
	return once->kvm;
}

#define DEFINE_ABI_ONCE_ATTRIBUTE(__name)					\
static int __name ## _open(struct inode *inode, struct file *file)		\
{										\
	return abi_once_open(inode, file, __name ## _show);			\
}										\
										\
static const struct file_operations __name ## _fops = {			\
	.owner		= THIS_MODULE,						\
	.open		= __name ## _open,					\
	.read		= seq_read,						\
	.llseek		= seq_lseek,						\
	.release	= abi_once_release,					\
}

static int pkvm_split_abi_show(struct seq_file *s, void *unused)
{
	struct kvm *kvm = abi_once_begin(s);

	if (!kvm)
		return 0;

	if (!pkvm_hyp_vm_is_created(kvm) || kvm_vm_is_protected(kvm)) {
		seq_puts(s, "1..0 # SKIP needs a running non-protected VM\n");
		return 0;
	}

	run_abi_test(s, kvm);
	return 0;
}
DEFINE_ABI_ONCE_ATTRIBUTE(pkvm_split_abi);

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
	struct kvm *kvm = abi_once_begin(s);
	struct abi_case_ctx c = { .m = s };
	u64 done = ~0ULL, nr_split = ~0ULL;
	long ret;

	if (!kvm)
		return 0;

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
	expect_collapse(&c, "restore: a VM being torn down", &kvm->arch.pkvm.split_mc,
			kvm->arch.pkvm.handle, 0, bp, -EBUSY);
	seq_printf(s, "1..%d\n# %d failed\n", c.nr, c.failed);
unlock_vcpus:
	kvm_unlock_all_vcpus(kvm);
unlock:
	mutex_unlock(&kvm->lock);
	return 0;
}
DEFINE_ABI_ONCE_ATTRIBUTE(pkvm_split_abi_dying);

/*
 * Check the VM's guest stage-2 at EL2 against the page states and the
 * host's records (__pkvm_check_guest): the whole IPA space, then record by
 * record. Each record must be mapped whole, at the frames it records, by
 * one block leaf if it is a block that is not split and by page leaves
 * otherwise; as the records do not overlap, the whole walk finding as many
 * pages and blocks as the records means nothing else is mapped. A record
 * that breaks this fails with -EIO and its IPA. The caller holds slots_lock
 * and mmu_lock for write.
 */
static long split_check(struct kvm *kvm, struct split_check *sc)
{
	struct kvm_pgtable *pgt = kvm->arch.mmu.pgt;
	pkvm_handle_t handle = kvm->arch.pkvm.handle;
	struct split_check rec;
	struct rb_node *node;
	long ret;

	memset(sc, 0, sizeof(*sc));
	ret = check_range(handle, 0, kvm_phys_size(&kvm->arch.mmu) >> PAGE_SHIFT, U64_MAX, sc);
	for (node = rb_first_cached(&pgt->pkvm_mappings); node; node = rb_next(node)) {
		struct pkvm_mapping *m = rb_entry(node, struct pkvm_mapping, node);
		bool block = m->nr_pages > 1 && !m->split;

		sc->rec_pages += m->nr_pages;
		sc->rec_blocks += block;
		sc->rec_split += m->split;
		sc->records++;
		if (ret)
			continue;

		memset(&rec, 0, sizeof(rec));
		ret = check_range(handle, m->gfn, m->nr_pages, m->pfn, &rec);
		if (ret) {
			sc->bad_ipa = rec.bad_ipa;
		} else if (rec.pages != m->nr_pages || rec.blocks != block) {
			pr_err("pkvm_split_check: record gfn 0x%llx pfn 0x%llx, %llu pages%s: EL2 maps %llu pages, %llu block leaves\n",
			       m->gfn, m->pfn, (u64)m->nr_pages, m->split ? ", split" : "",
			       rec.pages, rec.blocks);
			sc->bad_ipa = m->gfn << PAGE_SHIFT;
			ret = -EIO;
		}
	}

	return ret;
}

/*
 * For each memslot, which of its pages EL2 maps, and which writable: one
 * line per 64 pages, "<gfn> <mapped> <writable>" in hex, bit n for frame
 * gfn + n.
 */
static long show_slot_masks(struct seq_file *s, struct kvm *kvm)
{
	pkvm_handle_t handle = kvm->arch.pkvm.handle;
	struct arm_smccc_1_2_regs res;
	struct kvm_memory_slot *slot;
	int bkt;
	u64 gfn;
	long ret;

	kvm_for_each_memslot(slot, bkt, kvm_memslots(kvm)) {
		seq_printf(s, "slot %d gfn 0x%llx pages %lu\n", slot->id,
			   slot->base_gfn, slot->npages);
		for (gfn = slot->base_gfn; gfn < slot->base_gfn + slot->npages; gfn += 64) {
			ret = check_hvc(handle, gfn,
					min_t(u64, 64, slot->base_gfn + slot->npages - gfn),
					U64_MAX, &res);
			if (ret)
				return ret;
			seq_printf(s, "0x%llx 0x%lx 0x%lx\n", gfn, res.a9, res.a10);
		}
	}
	return 0;
}

/*
 * Reading pkvm_split_check checks the VM's guest stage-2 at EL2 against
 * the page states and the host's records (split_check()), and prints what
 * was found, then which pages of each memslot EL2 maps and which
 * writable, then how many guest stage-2 table frees (of any VM) so far had
 * to wait for a shared walk on another CPU. It changes nothing.
 */
static int pkvm_split_check_show(struct seq_file *s, void *unused)
{
	struct kvm *kvm = s->private;
	struct split_check sc;
	long ret;

	if (!pkvm_hyp_vm_is_created(kvm) || kvm_vm_is_protected(kvm)) {
		seq_puts(s, "skip: needs a running non-protected VM\n");
		return 0;
	}

	mutex_lock(&kvm->slots_lock);
	write_lock(&kvm->mmu_lock);
	ret = split_check(kvm, &sc);
	seq_printf(s, "el2: calls %llu pages %llu blocks %llu marked %llu\n",
		   sc.calls, sc.pages, sc.blocks, sc.marked);
	seq_printf(s, "host: pages %llu blocks %llu split %llu records %llu\n",
		   sc.rec_pages, sc.rec_blocks, sc.rec_split, sc.records);
	seq_printf(s, "result %ld bad_ipa 0x%llx\n", ret, sc.bad_ipa);
	seq_printf(s, "el2 pages: tables %llu split_cache %llu\n", sc.tables,
		   sc.split_cache);
	if (!ret)
		ret = show_slot_masks(s, kvm);
	write_unlock(&kvm->mmu_lock);
	mutex_unlock(&kvm->slots_lock);
	seq_printf(s, "masks %ld\n", ret);
	/* Only where EL2's dirty faults walk shared (the lock-free step). */
	if (sc.walker_waits != U64_MAX)
		seq_printf(s, "walker_waits %llu\n", sc.walker_waits);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pkvm_split_check);

/*
 * Raw hostile calls at random. Writing "SEED STEPS" to pkvm_split_raw
 * makes STEPS calls (at most RAW_MAX_STEPS), drawn from SEED, of what a
 * compromised host could ask EL2 for this VM: __pkvm_host_split_guest on
 * random ranges, with split caches of random length that end, or not, in a
 * page EL2 must refuse (owned by EL2, shared with EL2, shared with this
 * guest, donated to a protected VM, MMIO, beyond memory, one listed twice);
 * __pkvm_host_collapse_range; bad arguments; nsh flushes with random
 * arguments; another VM's protected handle; and, between them, the host's
 * own operations on random ranges (write-protect, test and clear young,
 * unmap). The host's records are kept as the host's own paths keep them.
 *
 * After every call, its results must be exactly the documented ones, as
 * far as EL2's own page counts tell them (__pkvm_check_guest: the pages
 * in the VM's split cache and the last-level tables, before and after):
 * the cache pages EL2 admitted, the host's list left at the first page it
 * did not take, the blocks split or restored and the tables made or freed,
 * the pages given back. Then the EL2 walk must agree with the page states
 * and with the records. The first mismatch fails the write with -EIO and
 * is described, with the seed and the step, in the kernel log.
 *
 * Restores are asked for only where the host would ask: a memslot that is
 * not logging (a restored block is writable: a host restoring a logging
 * slot only loses its own log), over a run of split blocks (a restored
 * table of single-page records would leave the host's records behind its
 * stage-2: again the host's loss). The guest's memory and dirty log stay
 * the userspace test's to check.
 */
#define RAW_MAX_STEPS	64
#define RAW_MAX_GOOD	3

enum raw_op {
	RAW_SPLIT, RAW_COLLAPSE, RAW_BAD_ARGS, RAW_NSH,
	RAW_PROTECTED, RAW_WRPROTECT, RAW_YOUNG, RAW_UNMAP, RAW_NR_OPS,
};

static const char * const raw_op_names[RAW_NR_OPS] = {
	"split", "restore", "bad arguments", "nsh flush",
	"protected VM's handle", "write-protect", "test and clear young", "unmap",
};

enum raw_bad_page {
	BAD_HYP, BAD_HYP_SHARED, BAD_GUEST, BAD_DONATED, BAD_MMIO, BAD_BEYOND,
	BAD_TWICE, BAD_NR,
};

static const char * const raw_bad_names[BAD_NR] = {
	"owned by EL2", "shared with EL2", "shared with the guest",
	"donated to a protected VM", "MMIO", "beyond memory", "listed twice",
};

struct raw_ctx {
	struct kvm *kvm;
	struct kvm *pvm;
	phys_addr_t donated;
	void *hyp_shared;
	struct kvm_hyp_memcache spare;
	pkvm_handle_t unused;
	struct rnd_state rnd;
	u64 seed, step, bp, ipa_pages;
	enum raw_op op;
	struct split_check sc, after;
	bool failed;
};

static u64 raw_below(struct raw_ctx *c, u64 n)
{
	u64 r = (u64)prandom_u32_state(&c->rnd) << 32 | prandom_u32_state(&c->rnd);

	return r % n;
}

static __printf(2, 3) void raw_fail(struct raw_ctx *c, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	if (c->failed)
		return;
	c->failed = true;
	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_err("pkvm_split_raw: seed 0x%llx step %llu (%s): %pV\n", c->seed,
	       c->step, raw_op_names[c->op], &vaf);
	pr_err("pkvm_split_raw: EL2's split cache %llu -> %llu pages, tables %llu -> %llu\n",
	       c->sc.split_cache, c->after.split_cache, c->sc.tables, c->after.tables);
	va_end(args);
}

enum raw_pick { PICK_ANY, PICK_WHOLE, PICK_SPLIT };

static bool raw_picks(struct pkvm_mapping *m, enum raw_pick what)
{
	switch (what) {
	case PICK_WHOLE:
		return m->nr_pages > 1 && !m->split;
	case PICK_SPLIT:
		return m->split;
	default:
		return true;
	}
}

/*
 * A random record of the VM's stage-2: any, a whole block or a split one;
 * NULL if there is none.
 */
static struct pkvm_mapping *raw_pick(struct raw_ctx *c, enum raw_pick what)
{
	struct kvm_pgtable *pgt = c->kvm->arch.mmu.pgt;
	struct pkvm_mapping *m;
	struct rb_node *node;
	u64 n = 0, k;

	for (node = rb_first_cached(&pgt->pkvm_mappings); node; node = rb_next(node))
		n += raw_picks(rb_entry(node, struct pkvm_mapping, node), what);
	if (!n)
		return NULL;
	k = raw_below(c, n);
	for (node = rb_first_cached(&pgt->pkvm_mappings); node; node = rb_next(node)) {
		m = rb_entry(node, struct pkvm_mapping, node);
		if (raw_picks(m, what) && !k--)
			return m;
	}
	return NULL;
}

static struct pkvm_mapping *raw_pick_mapping(struct raw_ctx *c)
{
	return raw_pick(c, PICK_ANY);
}

static struct pkvm_mapping *raw_next(struct pkvm_mapping *m)
{
	struct rb_node *node = rb_next(&m->node);

	return node ? rb_entry(node, struct pkvm_mapping, node) : NULL;
}

static bool raw_slot_logging(struct raw_ctx *c, u64 gfn)
{
	struct kvm_memory_slot *slot = gfn_to_memslot(c->kvm, gfn);

	return slot && kvm_slot_dirty_track_enabled(slot);
}

/*
 * Block-aligned range to split: from a whole block, around any record, or
 * anywhere.
 */
static void raw_pick_range(struct raw_ctx *c, u64 *gfn, u64 *nr)
{
	struct pkvm_mapping *m = NULL;

	switch (raw_below(c, 4)) {
	case 0:
	case 1:
		m = raw_pick(c, PICK_WHOLE);
		break;
	case 2:
		m = raw_pick_mapping(c);
		break;
	}

	if (m)
		*gfn = ALIGN_DOWN(m->gfn, c->bp);
	else
		*gfn = raw_below(c, c->ipa_pages / c->bp) * c->bp;
	*nr = c->bp * (1 + raw_below(c, 2 * KVM_PKVM_SPLIT_MAX_BLOCKS));
	*nr = min(*nr, c->ipa_pages - *gfn);
}

/*
 * Mark split the records of whole blocks that are not split in [gfn, end),
 * as the host does after a split covering it: EL2 split exactly those.
 * Returns how many.
 */
static u64 raw_mark_split(struct raw_ctx *c, u64 gfn, u64 end)
{
	struct kvm_pgtable *pgt = c->kvm->arch.mmu.pgt;
	struct rb_node *node;
	u64 n = 0;

	for (node = rb_first_cached(&pgt->pkvm_mappings); node; node = rb_next(node)) {
		struct pkvm_mapping *m = rb_entry(node, struct pkvm_mapping, node);

		if (m->gfn >= end)
			break;
		if (m->nr_pages == 1 || m->split || m->gfn < gfn)
			continue;
		n++;
		m->split = 1;
	}
	return n;
}

static bool raw_check(struct raw_ctx *c, struct split_check *sc)
{
	long ret = split_check(c->kvm, sc);

	if (ret)
		raw_fail(c, "EL2 check: error %ld at IPA 0x%llx", ret, sc->bad_ipa);
	else if (sc->pages != sc->rec_pages || sc->blocks != sc->rec_blocks)
		raw_fail(c, "EL2: %llu pages, %llu blocks; host: %llu pages, %llu blocks",
			 sc->pages, sc->blocks, sc->rec_pages, sc->rec_blocks);
	else if (sc->tables < sc->rec_split)
		raw_fail(c, "EL2: %llu last-level tables for %llu split blocks",
			 sc->tables, sc->rec_split);
	return !c->failed;
}

/*
 * A split with a cache of 0 to
 * RAW_MAX_GOOD good pages, then maybe a bad one. EL2 admits one page per
 * block of the range it covers less what the VM's split cache holds, as
 * many as the host's list offers: if that reaches the bad page, it fails
 * with -ENOMEM, splits nothing and keeps the good pages before it.
 */
static void raw_split(struct raw_ctx *c)
{
	struct kvm_hyp_memcache *mc = &c->kvm->arch.pkvm.split_mc;
	u64 gfn, nr, cap, want, consumed, expect_split;
	u64 done = ~0ULL, nr_split = ~0ULL, i;
	phys_addr_t ent[RAW_MAX_GOOD + 1];
	struct kvm_hyp_memcache saved = *mc;
	struct split_check *after = &c->after;
	unsigned int good, n;
	int bad;
	long ret;

	raw_pick_range(c, &gfn, &nr);
	cap = min_t(u64, nr, KVM_PKVM_SPLIT_MAX_BLOCKS * c->bp);

	good = raw_below(c, RAW_MAX_GOOD + 1);
	bad = raw_below(c, BAD_NR + 2);
	if (bad == BAD_DONATED && !c->donated)
		bad = BAD_HYP;
	if (bad == BAD_TWICE && !good)
		good = 1;
	if (bad == BAD_GUEST && !raw_pick_mapping(c))
		bad = BAD_MMIO;
	for (i = 0; i < good; i++)
		ent[i] = __pa(pop_hyp_memcache(&c->spare, phys_to_host_va));
	n = good;
	switch (bad) {
	case BAD_HYP:
		ent[n++] = hyp_mem_base;
		break;
	case BAD_HYP_SHARED:
		ent[n++] = __pa(c->hyp_shared);
		break;
	case BAD_GUEST:
		ent[n++] = PFN_PHYS(raw_pick_mapping(c)->pfn);
		break;
	case BAD_DONATED:
		ent[n++] = c->donated;
		break;
	case BAD_MMIO:
		ent[n++] = 0;
		break;
	case BAD_BEYOND:
		ent[n++] = memblock_end_of_DRAM();
		break;
	case BAD_TWICE:
		ent[n++] = ent[0];
		break;
	}
	/* Link the list through the good pages, which are the host's. */
	for (i = 0; i < good; i++)
		*(phys_addr_t *)__va(ent[i]) = i + 1 < n ? ent[i + 1] : 0;
	mc->head = n ? ent[0] : 0;
	mc->nr_pages = n;

	/* What EL2 admits: see __pkvm_host_split_guest(). */
	want = cap / c->bp;
	want -= min(want, c->sc.split_cache);
	want = min_t(u64, want, n);

	ret = split_hvc(c->kvm->arch.pkvm.handle, gfn, nr, &done, &nr_split);
	consumed = n - mc->nr_pages;

	if (consumed < n && mc->head != ent[consumed])
		raw_fail(c, "host's list left at 0x%llx, not at its page %llu (0x%llx)",
			 (u64)mc->head, consumed, (u64)ent[consumed]);
	/* Give back what EL2 did not take, and the host its own cache. */
	for (i = consumed; i < good; i++)
		push_hyp_memcache(&c->spare, __va(ent[i]), host_va_to_phys);
	*mc = saved;
	if (ret == -EOPNOTSUPP) {
		raw_fail(c, "the split hypercall is not supported");
		return;
	}
	/* The host marks what EL2 covered, as pkvm_split_run() does. */
	expect_split = done <= cap ? raw_mark_split(c, gfn, gfn + done) : 0;
	if (!raw_check(c, after))
		return;

	/* The admission reached the page EL2 must refuse. */
	if (want > good) {
		if (ret == -ENOMEM && !nr_split && !done && consumed == good &&
		    after->split_cache == c->sc.split_cache + good &&
		    after->tables == c->sc.tables)
			return;
		raw_fail(c, "bad page (%s) after %u: ret %ld, split %llu, done %llu, took %llu",
			 raw_bad_names[bad], good, ret, nr_split, done, consumed);
		return;
	}

	if (consumed != want || (ret && ret != -ENOMEM) || (!ret && done != cap) ||
	    (ret && (done >= cap || after->split_cache)) || done % c->bp) {
		raw_fail(c, "[0x%llx +0x%llx), %u pages: ret %ld, done 0x%llx, took %llu of %llu",
			 gfn, nr, n, ret, done, consumed, want);
		return;
	}
	if (nr_split == expect_split && after->tables == c->sc.tables + nr_split &&
	    after->split_cache <= c->sc.split_cache + want &&
	    after->split_cache + nr_split >= c->sc.split_cache + want)
		return;
	raw_fail(c, "[0x%llx +0x%llx): split %llu of %llu, took %llu",
		 gfn, done, nr_split, expect_split, want);
}

/*
 * A restore of a run of split blocks in a memslot that is not logging:
 * every block it restores is a split record, and gives one table back.
 */
static void raw_collapse(struct raw_ctx *c)
{
	struct kvm_hyp_memcache *mc = &c->kvm->arch.pkvm.split_mc;
	u64 done = ~0ULL, restored = ~0ULL, returned = ~0ULL;
	struct pkvm_mapping *m = raw_pick(c, PICK_SPLIT), *r;
	u64 gfn, run = 0, nr, cap, before = mc->nr_pages, bits = 0;
	struct split_check *after = &c->after;
	long ret;

	if (!m)
		return;
	gfn = m->gfn;
	for (r = m; r && r->split && r->gfn == gfn + run * c->bp &&
	     !raw_slot_logging(c, r->gfn); r = raw_next(r))
		run++;
	if (!run)
		return;
	nr = c->bp * (1 + raw_below(c, run));
	cap = min_t(u64, nr, KVM_PKVM_SPLIT_MAX_BLOCKS * c->bp);

	ret = collapse_hvc(mc, c->kvm->arch.pkvm.handle, gfn, nr, &done, &restored,
			   &returned);
	if (ret == -EOPNOTSUPP) {
		raw_fail(c, "the restore hypercall is not supported");
		return;
	}
	for (r = m; r && r->gfn < gfn + cap; r = raw_next(r)) {
		if (restored & BIT_ULL((r->gfn - gfn) / c->bp)) {
			bits |= BIT_ULL((r->gfn - gfn) / c->bp);
			r->split = 0;
		}
	}
	if (!raw_check(c, after))
		return;
	if (ret || done != cap || bits != restored || returned != hweight64(restored) ||
	    mc->nr_pages != before + returned || after->tables + returned != c->sc.tables)
		raw_fail(c, "[0x%llx +0x%llx), run of %llu: ret %ld, done 0x%llx, restored 0x%llx",
			 gfn, nr, run, ret, done, restored);
	else
		return;
	pr_err("pkvm_split_raw: records restored 0x%llx, %llu pages back, host cache %lu -> %lu\n",
	       bits, returned, (unsigned long)before, mc->nr_pages);
}

/* One bad argument at a time: the documented error, and nothing changes. */
static void raw_bad_args(struct raw_ctx *c)
{
	struct kvm_hyp_memcache *mc = &c->kvm->arch.pkvm.split_mc;
	pkvm_handle_t h = c->kvm->arch.pkvm.handle;
	u64 bp = c->bp, top = c->ipa_pages, gfn, nr;
	u64 done = ~0ULL, nr_split = ~0ULL, restored = ~0ULL;
	u64 returned = ~0ULL, before = mc->nr_pages;
	struct split_check *after = &c->after;
	bool collapse = raw_below(c, 2);
	long ret, want;
	int which;

	gfn = raw_below(c, top / bp) * bp;
	nr = bp;
	which = raw_below(c, 6);
	switch (which) {
	case 0:
		h = c->unused;
		want = -EINVAL;
		break;
	case 1:
		nr = 0;
		want = -EINVAL;
		break;
	case 2:
		gfn += 1 + raw_below(c, bp - 1);
		want = -EINVAL;
		break;
	case 3:
		nr += 1 + raw_below(c, bp - 1);
		want = -EINVAL;
		break;
	case 4:
		gfn = top + raw_below(c, 4) * bp;
		want = -ERANGE;
		break;
	default:
		gfn = top - bp;
		nr = raw_below(c, 2) ? 2 * bp : ALIGN_DOWN(U64_MAX, bp);
		want = -ERANGE;
		break;
	}

	if (collapse)
		ret = collapse_hvc(mc, h, gfn, nr, &done, &restored, &returned);
	else
		ret = split_hvc(h, gfn, nr, &done, &nr_split);
	if (!raw_check(c, after))
		return;
	if (ret == want && !done && (collapse ? !restored && !returned : !nr_split) &&
	    mc->nr_pages == before && after->tables == c->sc.tables &&
	    after->split_cache == c->sc.split_cache)
		return;
	raw_fail(c, "%s case %d: ret %ld, expected %ld, done 0x%llx",
		 collapse ? "restore" : "split", which, ret, want, done);
	pr_err("pkvm_split_raw: handle %u, gfn 0x%llx, nr 0x%llx\n", h, gfn, nr);
}

static void raw_nsh(struct raw_ctx *c)
{
	long level = KVM_PGTABLE_FIRST_LEVEL - 1 +
		     raw_below(c, KVM_PGTABLE_LAST_LEVEL - KVM_PGTABLE_FIRST_LEVEL + 3);
	bool unused = !raw_below(c, 4), outside = !raw_below(c, 4);
	u64 ipa = PFN_PHYS(raw_below(c, c->ipa_pages));
	long ret, want;

	if (outside)
		ipa = PFN_PHYS(c->ipa_pages) + PFN_PHYS(raw_below(c, c->ipa_pages));
	ret = nsh_hvc(unused ? c->unused : c->kvm->arch.pkvm.handle, ipa, level);
	/* The handle first, then the level, then the IPA. */
	if (unused)
		want = -EINVAL;
	else if (level < KVM_PGTABLE_FIRST_LEVEL || level > KVM_PGTABLE_LAST_LEVEL)
		want = -EINVAL;
	else
		want = outside ? -ERANGE : 0;
	if (ret != want)
		raw_fail(c, "IPA 0x%llx level %ld%s: ret %ld, expected %ld", ipa, level,
			 unused ? " (unused handle)" : "", ret, want);
}

static void raw_protected(struct raw_ctx *c)
{
	pkvm_handle_t h = c->pvm->arch.pkvm.handle;
	u64 done, nr_split, restored, returned;
	struct arm_smccc_1_2_regs res;
	long ret;

	ret = split_hvc(h, 0, c->bp, &done, &nr_split);
	if (ret != -EINVAL || nr_split)
		raw_fail(c, "split: ret %ld, split %llu", ret, nr_split);
	ret = collapse_hvc(&c->pvm->arch.pkvm.split_mc, h, 0, c->bp, &done, &restored,
			   &returned);
	if (ret != -EINVAL || restored || returned)
		raw_fail(c, "restore: ret %ld, restored 0x%llx", ret, restored);
	ret = check_hvc(h, 0, c->bp, U64_MAX, &res);
	if (ret != -EINVAL)
		raw_fail(c, "check: ret %ld", ret);
	ret = nsh_hvc(h, 0, KVM_PGTABLE_LAST_LEVEL);
	if (ret != -EINVAL)
		raw_fail(c, "nsh flush: ret %ld", ret);
}

/* The host's own operations, on a random part of a random record. */
static void raw_host_op(struct raw_ctx *c)
{
	struct kvm_pgtable *pgt = c->kvm->arch.mmu.pgt;
	struct pkvm_mapping *m = raw_pick_mapping(c);
	u64 gfn, nr;
	int ret = 0;

	if (!m)
		return;
	gfn = m->gfn;
	nr = m->nr_pages;
	if (m->split) {
		gfn += raw_below(c, nr);
		nr = 1 + raw_below(c, m->gfn + m->nr_pages - gfn);
	}
	switch (c->op) {
	case RAW_WRPROTECT:
		ret = pkvm_pgtable_stage2_wrprotect(pgt, PFN_PHYS(gfn), PFN_PHYS(nr));
		break;
	case RAW_YOUNG:
		pkvm_pgtable_stage2_test_clear_young(pgt, PFN_PHYS(gfn), PFN_PHYS(nr),
						     raw_below(c, 2));
		break;
	default:
		/* Records go whole: an unmap drops the records it touches. */
		ret = pkvm_pgtable_stage2_unmap(pgt, PFN_PHYS(m->gfn),
						PFN_PHYS(m->nr_pages));
		break;
	}
	if (ret)
		raw_fail(c, "[0x%llx +0x%llx): error %d", gfn, nr, ret);
}

static int run_raw(struct kvm *kvm, u64 seed, u64 steps)
{
	static const u8 weight[RAW_NR_OPS] = { 6, 3, 3, 1, 1, 2, 1, 1 };
	struct raw_ctx c = {
		.kvm = kvm, .seed = seed,
		.bp = kvm_granule_size(KVM_PGTABLE_LAST_LEVEL - 1) >> PAGE_SHIFT,
		.spare.flags = HYP_MEMCACHE_ACCOUNT_STAGE2,
	};
	u64 w, total = 0;
	int ret;

	prandom_seed_state(&c.rnd, seed);
	c.ipa_pages = BIT_ULL(kvm_phys_shift(&kvm->arch.mmu) - PAGE_SHIFT);
	for (w = 0; w < RAW_NR_OPS; w++)
		total += weight[w];

	c.hyp_shared = (void *)get_zeroed_page(GFP_KERNEL_ACCOUNT);
	if (!c.hyp_shared)
		return -ENOMEM;
	ret = kvm_share_hyp(c.hyp_shared, c.hyp_shared + PAGE_SIZE);
	if (ret)
		goto free_page;
	ret = topup_hyp_memcache(&c.spare, RAW_MAX_GOOD * steps);
	if (ret)
		goto free_spare;
	c.pvm = get_protected_vm(kvm);
	c.donated = c.pvm ? first_donated_page(c.pvm) : 0;
	c.unused = unused_handle();

	mutex_lock(&kvm->slots_lock);
	write_lock(&kvm->mmu_lock);
	raw_check(&c, &c.sc);
	c.after = c.sc;
	for (; c.step < steps && !c.failed; c.step++) {
		w = raw_below(&c, total);
		for (c.op = 0; w >= weight[c.op]; c.op++)
			w -= weight[c.op];
		switch (c.op) {
		case RAW_SPLIT:
			raw_split(&c);
			break;
		case RAW_COLLAPSE:
			raw_collapse(&c);
			break;
		case RAW_BAD_ARGS:
			raw_bad_args(&c);
			break;
		case RAW_NSH:
			raw_nsh(&c);
			break;
		case RAW_PROTECTED:
			if (c.pvm)
				raw_protected(&c);
			break;
		default:
			raw_host_op(&c);
			break;
		}
		if (!c.failed && raw_check(&c, &c.after))
			c.sc = c.after;
	}
	write_unlock(&kvm->mmu_lock);
	mutex_unlock(&kvm->slots_lock);

	ret = c.failed ? -EIO : 0;
	if (c.pvm)
		kvm_put_kvm(c.pvm);
free_spare:
	free_hyp_memcache(&c.spare);
	kvm_unshare_hyp(c.hyp_shared, c.hyp_shared + PAGE_SIZE);
free_page:
	free_page((unsigned long)c.hyp_shared);
	return ret;
}

static ssize_t pkvm_split_raw_write(struct file *file, const char __user *ubuf,
				    size_t count, loff_t *ppos)
{
	struct kvm *kvm = file->private_data;
	u64 seed, steps;
	char buf[64];
	int ret;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	if (sscanf(buf, "%llx %llu", &seed, &steps) != 2 || !steps ||
	    steps > RAW_MAX_STEPS)
		return -EINVAL;
	if (!pkvm_hyp_vm_is_created(kvm) || kvm_vm_is_protected(kvm))
		return -EOPNOTSUPP;

	ret = run_raw(kvm, seed, steps);
	return ret ?: count;
}

static const struct file_operations pkvm_split_raw_fops = {
	.owner	= THIS_MODULE,
	.open	= simple_open,
	.write	= pkvm_split_raw_write,
	.llseek	= noop_llseek,
};

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
	debugfs_create_file("pkvm_split_raw", 0200, kvm->debugfs_dentry, kvm,
			    &pkvm_split_raw_fops);
}
