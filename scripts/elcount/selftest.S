/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Bare-metal self-test of the elcount plugin, run by
 * scripts/build-plugin.sh --check on
 *   qemu-system-aarch64 -M virt,virtualization=on -cpu max -kernel ...
 * which enters _start at EL2 with the MMUs off. Linked at 0x40200000.
 *
 * Path and the instructions counted at each step (a marker counts itself):
 *
 *   EL2      _start: 7 setup + 100 adds + mov + mark 0x1          109
 *   EL2      4 more, eret                                           5
 *   EL1 lo   200 adds + 3 + eret (to EL0)                         204
 *   EL0 lo   50 adds + svc                                         51
 *   EL1 lo   el1_vectors + 0x400: MMU on (TTBR0 = TTBR1 = one L1
 *            table, 1 GiB block at 0x40000000 in both halves),
 *            br to the upper alias                                  15
 *   EL1 hi   300 adds + hvc                                       301
 *   EL2      el2_vectors + 0x400: tlbi vmalls12e1is, tlbi
 *            vmalls12e1, dsb, mov, mark 0x2                          5
 *   EL2      ldr, smc (PSCI SYSTEM_OFF, QEMU powers the CPU off)     2
 *
 * mark 0x1: insn.el2 = 109, everything else 0.
 * mark 0x2: insn.el2 = 119, insn.el1.lo = 219, insn.el1.hi = 301,
 *           insn.el0.lo = 51, transitions 2->1, 1->0, 0->1, 1->2 once
 *           each, tlbi.bcast = 1, tlbi.local = 1.
 * exit:     as mark 0x2 with insn.el2 = 121; insn.all = 692.
 */
	.macro	adds n
	.rept	\n
	add	x2, x2, #1
	.endr
	.endm

	.text
	.globl	_start
_start:
	ldr	x1, =el2_vectors
	msr	vbar_el2, x1
	ldr	x1, =el1_vectors
	msr	vbar_el1, x1
	mov	x1, #(1 << 31)			/* HCR_EL2.RW: EL1 is AArch64 */
	msr	hcr_el2, x1
	isb
	adds	100
	mov	x0, #1
	hint	#0x7e				/* mark 0x1 */
	ldr	x1, =el1_entry
	msr	elr_el2, x1
	mov	x1, #0x3c5			/* EL1h, DAIF masked */
	msr	spsr_el2, x1
	eret

el1_entry:
	adds	200
	ldr	x1, =el0_entry
	msr	elr_el1, x1
	msr	spsr_el1, xzr			/* EL0t */
	eret

el0_entry:
	adds	50
	svc	#0

el1_high:					/* run from the TTBR1 alias */
	adds	300
	hvc	#0

	.ltorg

	.balign	0x800
el1_vectors:
	.rept	0x100
	b	.
	.endr
	/* + 0x400: synchronous from a lower EL (the svc from EL0) */
	mov	x1, #0xff			/* MAIR attr0: normal WB */
	msr	mair_el1, x1
	ldr	x1, =tcr
	msr	tcr_el1, x1
	ldr	x1, =pgtable
	msr	ttbr0_el1, x1
	msr	ttbr1_el1, x1
	isb
	mrs	x1, sctlr_el1
	orr	x1, x1, #1			/* SCTLR_EL1.M */
	msr	sctlr_el1, x1
	isb
	adr	x1, el1_high
	orr	x1, x1, #0xffffff8000000000	/* its TTBR1 alias */
	br	x1
	.ltorg
	.balign	0x800

el2_vectors:
	.rept	0x100
	b	.
	.endr
	/* + 0x400: synchronous from a lower EL (the hvc from EL1) */
	tlbi	vmalls12e1is			/* broadcast */
	tlbi	vmalls12e1			/* local */
	dsb	ish
	mov	x0, #2
	hint	#0x7e				/* mark 0x2 */
	ldr	x0, =0x84000008			/* PSCI SYSTEM_OFF */
	smc	#0
	b	.
	.ltorg

/*
 * TCR_EL1: T0SZ = T1SZ = 25 (39-bit VAs, 4K granule, walks start at
 * level 1), inner/outer WB, inner shareable, TG1 = 4K, IPS = 32 bits.
 */
	.set	tcr, 25 | (1 << 8) | (1 << 10) | (3 << 12) | (25 << 16) | (1 << 24) | (1 << 26) | (3 << 28) | (2 << 30)

	.balign	4096
pgtable:					/* level 1, used by both TTBRs */
	.quad	0
	/* [1]: 1 GiB block at PA 0x40000000: AF, inner shareable, attr0 */
	.quad	0x40000000 | (1 << 10) | (3 << 8) | 1
	.fill	510, 8, 0
