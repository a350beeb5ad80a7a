// SPDX-License-Identifier: GPL-2.0-only
/*
 * Guest writes to pages write-protected for dirty logging, resolved at EL2.
 *
 * Under pKVM, EL2 owns a non-protected guest's stage-2. When it
 * write-protects a page for dirty logging (__pkvm_host_wrprotect_guest), a
 * page that was writable keeps a mark in a software bit of its entry:
 * PKVM_DIRTY_LOG_MARK. A later guest write to that page takes a stage-2
 * permission fault, which EL2 sees first: it records the page's frame in the
 * vCPU's dirty buffer, makes the page writable again, clears the mark,
 * invalidates the TLB entry on this CPU only and re-enters the guest,
 * without a trip to the host. How the update is serialised with the other
 * writers of the VM's stage-2 is __pkvm_guest_relax_marked()'s business.
 *
 * The dirty buffer is a host page, shared with EL2 and pinned for the vCPU's
 * life. EL2 keeps its own count of what it wrote: the host can read and
 * scribble over the page, never make EL2 write outside it. The count (and
 * that of spurious faults) reaches the host on every exit of the vCPU, and
 * the host drains the buffer into the memslot's dirty log before it runs
 * the vCPU again. A full buffer sends the fault to the host, which resolves
 * it the usual way. What EL2 did with each fault is the pkvm_dirty_fault
 * hyp event; nothing is measured here otherwise.
 *
 * EL2 only ever restores a write permission it removed itself: the mark is
 * set on leaves that were writable (blocks too, but this path only takes
 * last-level pages), never on a page the host mapped read-only, and only
 * for non-protected VMs. The host can turn the path off per vCPU (no
 * buffer), and tells EL2 on each entry of the vCPU whether a memslot of
 * the VM logs dirty pages: only then is the path taken, so that a write
 * after logging stops reaches the host, which maps blocks again. EL2 reads
 * nothing of the host's on the fault itself. Either answer is safe: a
 * stale "no" sends faults to the host, a stale "yes" logs frames the host
 * then has no log to put in.
 */

#include <asm/kvm_emulate.h>
#include <asm/kvm_hyp.h>
#include <asm/kvm_hypevents.h>
#include <asm/kvm_mmu.h>
#include <asm/kvm_pkvm.h>

#include <nvhe/mem_protect.h>
#include <nvhe/memory.h>
#include <nvhe/pkvm.h>

int pkvm_vcpu_init_dirty_buf(struct pkvm_hyp_vcpu *hyp_vcpu,
			     struct kvm_vcpu *host_vcpu)
{
	struct pkvm_dirty_buf *buf = READ_ONCE(host_vcpu->arch.pkvm_dirty_buf);

	hyp_vcpu->dirty_buf = NULL;
	if (!buf || pkvm_hyp_vcpu_is_protected(hyp_vcpu))
		return 0;

	buf = kern_hyp_va(buf);
	if (!IS_ALIGNED((unsigned long)buf, PAGE_SIZE))
		return -EINVAL;

	/* The host must own and share every byte of it, and keep sharing it. */
	if (hyp_pin_shared_mem(buf, buf + 1))
		return -EPERM;

	hyp_vcpu->dirty_buf = buf;
	return 0;
}

void pkvm_vcpu_unpin_dirty_buf(struct pkvm_hyp_vcpu *hyp_vcpu)
{
	struct pkvm_dirty_buf *buf = hyp_vcpu->dirty_buf;

	if (buf)
		hyp_unpin_shared_mem(buf, buf + 1);
	hyp_vcpu->dirty_buf = NULL;
}

/*
 * The host drained the buffer before this entry: start it afresh, and take
 * the host's word on whether the VM logs dirty pages.
 */
void pkvm_dirty_log_enter(struct pkvm_hyp_vcpu *hyp_vcpu)
{
	struct kvm_vcpu *host_vcpu = hyp_vcpu->host_vcpu;

	hyp_vcpu->dirty = (struct pkvm_dirty_log_state) {
		.logging = !!READ_ONCE(host_vcpu->arch.pkvm_dirty_logging),
	};
}

/* Report what this run did; the host drains gfn[0..nr) before the next. */
void pkvm_dirty_log_exit(struct pkvm_hyp_vcpu *hyp_vcpu)
{
	struct pkvm_dirty_buf *buf = hyp_vcpu->dirty_buf;
	struct pkvm_dirty_log_state *st = &hyp_vcpu->dirty;

	if (!buf)
		return;

	WRITE_ONCE(buf->nr, st->nr);
	WRITE_ONCE(buf->spurious, st->spurious);
}

/*
 * Called from the guest-exit path on a data abort of a non-protected guest,
 * after the fault information has been populated. Returns true if the fault
 * was resolved here and the guest can be re-entered, false to hand it to the
 * host unchanged.
 */
bool pkvm_handle_dirty_fault(struct kvm_vcpu *vcpu)
{
	struct pkvm_hyp_vcpu *hyp_vcpu = container_of(vcpu, struct pkvm_hyp_vcpu, vcpu);
	struct pkvm_dirty_buf *buf = hyp_vcpu->dirty_buf;
	struct pkvm_dirty_log_state *st = &hyp_vcpu->dirty;
	struct pkvm_hyp_vm *vm;
	phys_addr_t ipa;
	bool full, waited;
	s8 level;
	int ret;

	if (!buf || !st->logging || !kvm_vcpu_trap_is_permission_fault(vcpu) ||
	    !kvm_is_write_fault(vcpu))
		return false;

	ipa = kvm_vcpu_get_fault_ipa(vcpu);
	if (ipa == INVALID_GPA)
		return false;
	ipa = ALIGN_DOWN(ipa, PAGE_SIZE);

	/*
	 * Record the frame before the page can become writable: the slot is
	 * only kept (nr advanced) if the page is made writable below. With
	 * the buffer full, a marked page is left to the host.
	 */
	full = pkvm_dirty_log_full(st);
	if (!full)
		WRITE_ONCE(buf->gfn[st->nr], ipa >> PAGE_SHIFT);

	vm = pkvm_hyp_vcpu_to_hyp_vm(hyp_vcpu);
	ret = __pkvm_guest_relax_marked(vm, ipa, !full, &level, &waited);
	trace_pkvm_dirty_fault(ipa, waited, ret);
	switch (ret) {
	case 0:
		st->nr++;
		break;
	case -EALREADY:
		/* Writable already: a stale TLB entry on this CPU. */
		st->spurious++;
		break;
	default:
		/* Not EL2's to relax, or the buffer is full (-ENOSPC). */
		return false;
	}

	__kvm_tlb_flush_vmid_ipa_nsh(&vm->kvm.arch.mmu, ipa, level);

	return true;
}
