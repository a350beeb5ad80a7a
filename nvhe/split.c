// SPDX-License-Identifier: GPL-2.0-only
/*
 * Eager splitting of a non-protected guest's stage-2 block mappings, on the
 * host's request, for dirty logging.
 *
 * The host owns neither the guest's stage-2 nor the memory its page-tables
 * live in, so it cannot split blocks itself: it asks EL2 to, one bounded
 * batch at a time, and donates the page-table pages through a memcache that
 * EL2 admits page by page with the usual host-to-hyp ownership transition,
 * as it does the vCPU's memcache (refill_memcache()).
 */

#include <asm/kvm_host.h>
#include <asm/kvm_hyp.h>
#include <asm/kvm_hypevents.h>
#include <asm/kvm_pgtable.h>
#include <asm/kvm_pkvm.h>

#include <nvhe/mem_protect.h>
#include <nvhe/mm.h>
#include <nvhe/pkvm.h>

/*
 * A range of guest frames a split or a restore of blocks may be asked for:
 * not empty, block-aligned and inside the VM's IPA space.
 */
int pkvm_check_block_range(struct pkvm_hyp_vm *vm, u64 gfn, u64 nr_pages)
{
	u64 block_pages = kvm_granule_size(KVM_PGTABLE_LAST_LEVEL - 1) >> PAGE_SHIFT;
	u64 ipa_pages = BIT_ULL(vm->pgt.ia_bits - PAGE_SHIFT);

	if (!nr_pages || !IS_ALIGNED(gfn | nr_pages, block_pages))
		return -EINVAL;

	if (gfn >= ipa_pages || nr_pages > ipa_pages - gfn)
		return -ERANGE;

	return 0;
}

/*
 * Split the block mappings of guest frames [gfn, gfn + nr_pages) of the
 * non-protected VM @vm (hyp-main.c resolved the host's handle). At most
 * KVM_PKVM_SPLIT_MAX_BLOCKS blocks' worth of IPA space is examined per call
 * (KVM_PKVM_SPLIT_MAX_DESCS descriptors written, or one block where a block
 * alone has more), and what it splits takes one TLB invalidation; *done
 * says how many pages from @gfn were covered: the host calls again from
 * there. What the call did beyond that (blocks split, pages admitted,
 * invalidations issued) is for the pkvm_host_split_range hyp event, not
 * for the host.
 */
int __pkvm_host_split_range(struct pkvm_hyp_vm *vm, u64 gfn, u64 nr_pages, u64 *done)
{
	u64 block_pages = kvm_granule_size(KVM_PGTABLE_LAST_LEVEL - 1) >> PAGE_SHIFT;
	struct kvm_hyp_memcache *host_mc, admitted = {};
	unsigned int split = 0, nr_admitted;
	u64 ipa, next, want, tlbi = 0;
	int ret;

	*done = 0;

	if (pkvm_hyp_vm_is_protected(vm))
		return -EPERM;

	if (READ_ONCE(vm->kvm.arch.pkvm.is_dying))
		return -EBUSY;

	ret = pkvm_check_block_range(vm, gfn, nr_pages);
	if (ret)
		return ret;

	/* Bound the walk, the allocations and the work done with IRQs off. */
	nr_pages = min_t(u64, nr_pages, KVM_PKVM_SPLIT_MAX_BLOCKS * block_pages);

	/*
	 * Page-table pages are admitted before taking the guest lock, as the
	 * ownership transition takes the host and hyp locks: one per block
	 * the range spans, less what the VM's split cache holds, and no more
	 * than the host's cache offers (a short cache splits what it can,
	 * then fails with -ENOMEM). Both counts are read without locks: they
	 * only size the admission, which vets every page.
	 */
	host_mc = &vm->host_kvm->arch.pkvm.split_mc;
	want = nr_pages / block_pages;
	want -= min_t(u64, want, READ_ONCE(vm->split_mc.nr_pages));
	want = min_t(u64, want, READ_ONCE(host_mc->nr_pages));
	ret = refill_memcache(&admitted, want, host_mc);
	nr_admitted = admitted.nr_pages;
	if (ret) {
		/* Nothing is split with a cache the host got wrong. */
		__pkvm_host_split_cache_add(vm, &admitted);
		goto out;
	}

	ipa = hyp_pfn_to_phys(gfn);
	ret = __pkvm_host_split_guest_blocks(vm, ipa, nr_pages << PAGE_SHIFT,
					     &admitted, KVM_PKVM_SPLIT_MAX_BLOCKS,
					     &next, &split, &tlbi);
	*done = (next - ipa) >> PAGE_SHIFT;
out:
	trace_pkvm_host_split_range(vm->kvm.arch.pkvm.handle, gfn, *done, split,
				    nr_admitted, tlbi, ret);
	return ret;
}

/*
 * Invalidate the stage-2 TLB entries of one IPA of a non-protected VM on
 * the calling CPU only. The host names the VM by its handle, never by a
 * host pointer, so it cannot aim the invalidation at a VMID it was not
 * given.
 */
int __pkvm_tlb_flush_vmid_ipa_nsh(struct pkvm_hyp_vm *vm, u64 ipa, s64 level)
{
	if (pkvm_hyp_vm_is_protected(vm))
		return -EPERM;

	if (level < KVM_PGTABLE_FIRST_LEVEL || level > KVM_PGTABLE_LAST_LEVEL)
		return -EINVAL;

	if (ipa >= BIT_ULL(vm->pgt.ia_bits))
		return -ERANGE;

	__kvm_tlb_flush_vmid_ipa_nsh(&vm->kvm.arch.mmu, ipa, level);
	return 0;
}
