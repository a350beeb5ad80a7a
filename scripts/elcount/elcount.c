// SPDX-License-Identifier: GPL-2.0
/*
 * elcount: a QEMU TCG plugin that gives hardware-independent counts for an
 * AArch64 guest, per vCPU, summed over vCPUs when printed:
 *
 *   - instructions executed at EL0..EL3, EL0 and EL1 split by the half of
 *     the address space the code runs from (lo: PC bit 63 clear, TTBR0;
 *     hi: PC bit 63 set, TTBR1), counted as whole translation blocks;
 *   - EL transitions, a change of EL between two consecutive TBs of a vCPU,
 *     those between EL1 and EL2 also by the EL1 half (in a KVM selftest on
 *     an nVHE or pKVM host: lo is the guest, hi the host kernel);
 *   - TLBI instructions executed, broadcast (the *IS and *OS forms) or local;
 *   - snapshots: executing "hint #0x7e" prints every counter.
 *
 * Build: scripts/build-plugin.sh. Run:
 *   qemu-system-aarch64 ... -plugin build/plugin/libelcount.so[,vcpu=on] \
 *	-d plugin -D elcount.log
 *
 * Output, one item a line, every line prefixed "elcount: ". The counter
 * keys, in this order:
 *
 *   insn.el0.lo insn.el0.hi insn.el1.lo insn.el1.hi insn.el2 insn.el3
 *   trans.elF.elT   for F != T, F major (trans.el0.el1 ... trans.el3.el2)
 *   tlbi.bcast tlbi.local
 *   trans.el1lo.el2 trans.el1hi.el2 trans.el2.el1lo trans.el2.el1hi
 *
 * A marker prints, at the moment the marker executes (the rest of its TB
 * not counted yet):
 *
 *   elcount: mark <x0 in hex> <key>=<value> ... (every key, in order)
 *
 * At exit (totals over the vCPUs):
 *
 *   elcount: vcpus <n>
 *   elcount: marks <markers executed>
 *   elcount: errors <TBs whose EL could not be read; counted as EL of the
 *                    previous TB>
 *   elcount: <key> <value>            every key, in order
 *   elcount: insn.all <sum of the insn.* counters>
 *   elcount: matrix el<F> <to el0> <to el1> <to el2> <to el3>
 *                                     the transitions again, one row per F
 *
 * With vcpu=on the exit lines are repeated per vCPU as
 * "elcount: vcpu <index> <key> <value>" before the totals.
 *
 * With el2pc=on every marker also prints the instructions run at EL2 so far
 * by the start address of their TB (all vCPUs, since QEMU started), one
 * line per address that ran any, after the marker's line:
 *
 *   elcount: el2pc <x0 in hex> <TB start address in hex> <instructions>
 *
 * (scripts/el2pc-report.py maps the addresses to the hyp object's symbols).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>
#include <qemu/qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define NR_EL		4
#define HINT_MARK	0xd5032fdfu	/* hint #0x7e: 0xd503201f | 0x7e << 5 */

enum { HALF_LO, HALF_HI, NR_HALF };
enum { TLBI_BCAST, TLBI_LOCAL, NR_TLBI };

struct vcpu {
	uint64_t insn[NR_EL][NR_HALF];
	uint64_t trans[NR_EL][NR_EL];
	uint64_t tlbi[NR_TLBI];
	/* [0]: EL1 -> EL2 by the half left; [1]: EL2 -> EL1 by the half entered */
	uint64_t trans12[2][NR_HALF];
	uint64_t marks;
	uint64_t errors;
	/* EL + 1 of the last TB this vCPU ran; 0 before the first */
	unsigned int cur;
	/* the half of the last TB this vCPU ran */
	unsigned int half;
	struct qemu_plugin_register *cpsr;
	struct qemu_plugin_register *x0;
	GByteArray *buf;
};

static struct qemu_plugin_scoreboard *sb;
static bool per_vcpu;
static bool el2pc;

/*
 * el2pc=on: instructions run at EL2 by TB start address. One entry per
 * address, made at translation; a TB's exec callback gets a tbrec, one per
 * (address, size, half) (so retranslations reuse it), and adds its size to
 * the entry when it runs at EL2. Entries are never freed.
 */
#define PC_VARIANTS	4
struct pcent {
	uint64_t vaddr;
	uint64_t count;		/* atomic: vCPUs run concurrently (MTTCG) */
	struct tbrec *rec[PC_VARIANTS];
};

struct tbrec {
	uintptr_t packed;	/* pack(n, half) */
	struct pcent *e;
};

static GHashTable *pcs;		/* vaddr -> struct pcent */
static GMutex pcs_lock;

static struct vcpu *vcpu_get(unsigned int idx)
{
	return qemu_plugin_scoreboard_find(sb, idx);
}

/*
 * TLBI is a SYS instruction (L = 0, op0 = 1):
 *   1101 0101 0000 1 op1:3 CRn:4 CRm:4 op2:3 Rt:5
 * with CRn = 8, or CRn = 9 for the nXS forms (FEAT_XS), and op1 = 0 (EL1),
 * 4 (EL2) or 6 (EL3). CRm gives the shareability:
 *   0  IPAS2*IS, RIPAS2*IS (op1 = 4)         broadcast (IS)
 *   1  *OS                                   broadcast (OS)
 *   2  R*IS (range)                          broadcast (IS)
 *   3  *IS                                   broadcast (IS)
 *   4  op2 = 0, 3, 4, 7: [R]IPAS2[L]E1OS, RPAOS, RPALOS  broadcast (OS)
 *      op2 = 1, 2, 5, 6: [R]IPAS2[L]E1                   local
 *   5  R*OS (range)                          broadcast (OS)
 *   6  R* (range)                            local
 *   7  the plain forms (VMALLE1, VAE2, ALLE1, PAALL, ...)  local
 * Encodings no TLBI uses (CRm 8..15, another op1) are not counted.
 */
static int tlbi_kind(uint32_t op)
{
	unsigned int op1 = (op >> 16) & 7;
	unsigned int crn = (op >> 12) & 0xf;
	unsigned int crm = (op >> 8) & 0xf;
	unsigned int op2 = (op >> 5) & 7;

	if ((op & 0xfff80000u) != 0xd5080000u || (crn != 8 && crn != 9))
		return -1;
	if (op1 != 0 && op1 != 4 && op1 != 6)
		return -1;

	switch (crm) {
	case 0:
	case 1:
	case 2:
	case 3:
	case 5:
		return TLBI_BCAST;
	case 4:
		return (op2 & 3) == 0 || (op2 & 3) == 3 ? TLBI_BCAST : TLBI_LOCAL;
	case 6:
	case 7:
		return TLBI_LOCAL;
	}
	return -1;
}

static bool read_reg(struct vcpu *v, struct qemu_plugin_register *reg,
		     uint64_t *val)
{
	uint32_t v32;
	uint64_t v64;
	int n;

	if (!reg)
		return false;
	g_byte_array_set_size(v->buf, 0);
	n = qemu_plugin_read_register(reg, v->buf);
	/* target byte order: AArch64 system emulation is little-endian */
	if (n == 4 && v->buf->len >= 4) {
		memcpy(&v32, v->buf->data, 4);
		*val = GUINT32_FROM_LE(v32);
		return true;
	}
	if (n == 8 && v->buf->len >= 8) {
		memcpy(&v64, v->buf->data, 8);
		*val = GUINT64_FROM_LE(v64);
		return true;
	}
	return false;
}

/* udata of both callbacks: (instruction count << 1) | half */
static void *pack(size_t n, unsigned int half)
{
	return (void *)(((uintptr_t)n << 1) | half);
}

static void tb_exec(unsigned int idx, void *udata)
{
	struct vcpu *v = vcpu_get(idx);
	uintptr_t d = (uintptr_t)udata;
	uint64_t cpsr;
	unsigned int el;

	if (read_reg(v, v->cpsr, &cpsr)) {
		/* PSTATE.M[3:2] (AArch64 state: M[4] = 0) */
		el = (cpsr >> 2) & 3;
	} else {
		v->errors++;
		el = v->cur ? v->cur - 1 : 1;
	}
	if (v->cur && v->cur != el + 1) {
		v->trans[v->cur - 1][el]++;
		if (v->cur == 2 && el == 2)
			v->trans12[0][v->half]++;
		else if (v->cur == 3 && el == 1)
			v->trans12[1][d & 1]++;
	}
	v->cur = el + 1;
	v->half = d & 1;
	v->insn[el][d & 1] += d >> 1;
}

static void tb_exec_pc(unsigned int idx, void *udata)
{
	struct tbrec *r = udata;

	tb_exec(idx, (void *)r->packed);
	if (vcpu_get(idx)->cur == 3)
		__atomic_fetch_add(&r->e->count, r->packed >> 1,
				   __ATOMIC_RELAXED);
}

static struct tbrec *tbrec_get(uint64_t vaddr, uintptr_t packed)
{
	struct pcent *e;
	struct tbrec *r = NULL;
	int i;

	g_mutex_lock(&pcs_lock);
	e = g_hash_table_lookup(pcs, &vaddr);
	if (!e) {
		e = g_new0(struct pcent, 1);
		e->vaddr = vaddr;
		g_hash_table_insert(pcs, &e->vaddr, e);
	}
	for (i = 0; i < PC_VARIANTS && e->rec[i]; i++) {
		if (e->rec[i]->packed == packed) {
			r = e->rec[i];
			break;
		}
	}
	if (!r) {
		r = g_new(struct tbrec, 1);
		r->packed = packed;
		r->e = e;
		if (i < PC_VARIANTS)
			e->rec[i] = r;
	}
	g_mutex_unlock(&pcs_lock);
	return r;
}

static void print_pcs(uint64_t x0)
{
	GHashTableIter it;
	gpointer key, val;
	GString *out = g_string_new(NULL);

	g_mutex_lock(&pcs_lock);
	g_hash_table_iter_init(&it, pcs);
	while (g_hash_table_iter_next(&it, &key, &val)) {
		struct pcent *e = val;
		uint64_t n = __atomic_load_n(&e->count, __ATOMIC_RELAXED);

		if (n)
			g_string_append_printf(out, "elcount: el2pc 0x%" PRIx64
					       " 0x%" PRIx64 " %" PRIu64 "\n",
					       x0, e->vaddr, n);
	}
	g_mutex_unlock(&pcs_lock);
	qemu_plugin_outs(out->str);
	g_string_free(out, TRUE);
}

static void sum_vcpus(struct vcpu *s)
{
	int n = qemu_plugin_num_vcpus();
	int i, a, b;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < n; i++) {
		struct vcpu *v = vcpu_get(i);

		for (a = 0; a < NR_EL; a++) {
			for (b = 0; b < NR_HALF; b++)
				s->insn[a][b] += v->insn[a][b];
			for (b = 0; b < NR_EL; b++)
				s->trans[a][b] += v->trans[a][b];
		}
		for (a = 0; a < NR_TLBI; a++)
			s->tlbi[a] += v->tlbi[a];
		for (a = 0; a < 2; a++)
			for (b = 0; b < NR_HALF; b++)
				s->trans12[a][b] += v->trans12[a][b];
		s->marks += v->marks;
		s->errors += v->errors;
	}
}

struct fmt {
	const char *sep;	/* before a key */
	const char *eq;		/* between key and value */
	const char *end;	/* after a value */
};

static void put(GString *out, const struct fmt *f, const char *key,
		uint64_t val)
{
	g_string_append_printf(out, "%s%s%s%" PRIu64 "%s", f->sep, key, f->eq,
			       val, f->end);
}

/* Append every counter of @s, in the order the header comment gives. */
static void put_counters(GString *out, const struct fmt *f,
			 const struct vcpu *s)
{
	char key[32];
	int a, b;

	put(out, f, "insn.el0.lo", s->insn[0][HALF_LO]);
	put(out, f, "insn.el0.hi", s->insn[0][HALF_HI]);
	put(out, f, "insn.el1.lo", s->insn[1][HALF_LO]);
	put(out, f, "insn.el1.hi", s->insn[1][HALF_HI]);
	put(out, f, "insn.el2", s->insn[2][HALF_LO] + s->insn[2][HALF_HI]);
	put(out, f, "insn.el3", s->insn[3][HALF_LO] + s->insn[3][HALF_HI]);
	for (a = 0; a < NR_EL; a++) {
		for (b = 0; b < NR_EL; b++) {
			if (a == b)
				continue;
			snprintf(key, sizeof(key), "trans.el%d.el%d", a, b);
			put(out, f, key, s->trans[a][b]);
		}
	}
	put(out, f, "tlbi.bcast", s->tlbi[TLBI_BCAST]);
	put(out, f, "tlbi.local", s->tlbi[TLBI_LOCAL]);
	put(out, f, "trans.el1lo.el2", s->trans12[0][HALF_LO]);
	put(out, f, "trans.el1hi.el2", s->trans12[0][HALF_HI]);
	put(out, f, "trans.el2.el1lo", s->trans12[1][HALF_LO]);
	put(out, f, "trans.el2.el1hi", s->trans12[1][HALF_HI]);
}

static void mark_exec(unsigned int idx, void *udata)
{
	struct vcpu *v = vcpu_get(idx);
	uintptr_t d = (uintptr_t)udata;
	const struct fmt mark_fmt = { " ", "=", "" };
	struct vcpu s;
	uint64_t x0 = 0;
	GString *out;

	v->marks++;
	if (!read_reg(v, v->x0, &x0))
		v->errors++;
	sum_vcpus(&s);
	/*
	 * The TB's callback counted the whole TB when it began: take back the
	 * instructions after the marker, so that a snapshot covers everything
	 * up to and including the marker.
	 */
	if (v->cur)
		s.insn[v->cur - 1][d & 1] -= d >> 1;

	out = g_string_new(NULL);
	g_string_append_printf(out, "elcount: mark 0x%" PRIx64, x0);
	put_counters(out, &mark_fmt, &s);
	g_string_append_c(out, '\n');
	qemu_plugin_outs(out->str);
	g_string_free(out, TRUE);
	if (el2pc)
		print_pcs(x0);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	unsigned int half = qemu_plugin_tb_vaddr(tb) >> 63;
	qemu_plugin_u64 tlbi[NR_TLBI] = {
		qemu_plugin_scoreboard_u64_in_struct(sb, struct vcpu, tlbi[TLBI_BCAST]),
		qemu_plugin_scoreboard_u64_in_struct(sb, struct vcpu, tlbi[TLBI_LOCAL]),
	};
	size_t i;

	if (el2pc)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec_pc,
						     QEMU_PLUGIN_CB_R_REGS,
						     tbrec_get(qemu_plugin_tb_vaddr(tb),
							       (uintptr_t)pack(n, half)));
	else
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec,
						     QEMU_PLUGIN_CB_R_REGS,
						     pack(n, half));

	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint32_t op;
		int kind;

		if (qemu_plugin_insn_size(insn) != 4 ||
		    qemu_plugin_insn_data(insn, &op, sizeof(op)) != sizeof(op))
			continue;
		/* A64 instructions are little-endian whatever SCTLR.EE says */
		op = GUINT32_FROM_LE(op);

		if (op == HINT_MARK) {
			qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_exec,
							       QEMU_PLUGIN_CB_R_REGS,
							       pack(n - i - 1, half));
			continue;
		}
		kind = tlbi_kind(op);
		if (kind >= 0)
			qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
				insn, QEMU_PLUGIN_INLINE_ADD_U64, tlbi[kind], 1);
	}
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int idx)
{
	struct vcpu *v = vcpu_get(idx);
	GArray *regs = qemu_plugin_get_registers();
	guint i;

	for (i = 0; i < regs->len; i++) {
		qemu_plugin_reg_descriptor *r =
			&g_array_index(regs, qemu_plugin_reg_descriptor, i);

		if (!v->cpsr && !strcmp(r->name, "cpsr"))
			v->cpsr = r->handle;
		else if (!v->x0 && !strcmp(r->name, "x0"))
			v->x0 = r->handle;
	}
	g_array_free(regs, TRUE);
	if (!v->buf)
		v->buf = g_byte_array_sized_new(8);
	if (!v->cpsr || !v->x0) {
		char msg[96];

		snprintf(msg, sizeof(msg),
			 "elcount: vcpu %u has no cpsr/x0 register (not AArch64?)\n",
			 idx);
		qemu_plugin_outs(msg);
	}
}

static void print_totals(GString *out, const char *prefix,
			 const struct vcpu *s)
{
	const struct fmt f = { prefix, " ", "\n" };
	uint64_t all = 0;
	int a, b;

	for (a = 0; a < NR_EL; a++)
		for (b = 0; b < NR_HALF; b++)
			all += s->insn[a][b];

	put(out, &f, "marks", s->marks);
	put(out, &f, "errors", s->errors);
	put_counters(out, &f, s);
	put(out, &f, "insn.all", all);
	for (a = 0; a < NR_EL; a++)
		g_string_append_printf(out, "%smatrix el%d %" PRIu64 " %" PRIu64
				       " %" PRIu64 " %" PRIu64 "\n", prefix, a,
				       s->trans[a][0], s->trans[a][1],
				       s->trans[a][2], s->trans[a][3]);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
	int n = qemu_plugin_num_vcpus();
	GString *out = g_string_new(NULL);
	struct vcpu s;
	int i;

	if (per_vcpu) {
		for (i = 0; i < n; i++) {
			char prefix[32];

			snprintf(prefix, sizeof(prefix), "elcount: vcpu %d ", i);
			print_totals(out, prefix, vcpu_get(i));
		}
	}
	sum_vcpus(&s);
	g_string_append_printf(out, "elcount: vcpus %d\n", n);
	print_totals(out, "elcount: ", &s);
	qemu_plugin_outs(out->str);
	g_string_free(out, TRUE);
	/*
	 * The scoreboard is not freed: at exit other vCPU threads may still
	 * run a callback.
	 */
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info,
					   int argc, char **argv)
{
	int i;

	if (strcmp(info->target_name, "aarch64")) {
		fprintf(stderr, "elcount: target %s is not aarch64\n",
			info->target_name);
		return -1;
	}
	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "vcpu=", 5) &&
		    qemu_plugin_bool_parse("vcpu", argv[i] + 5, &per_vcpu))
			continue;
		if (!strncmp(argv[i], "el2pc=", 6) &&
		    qemu_plugin_bool_parse("el2pc", argv[i] + 6, &el2pc))
			continue;
		fprintf(stderr, "elcount: unknown argument '%s' (vcpu=on|off, el2pc=on|off)\n",
			argv[i]);
		return -1;
	}

	if (el2pc)
		pcs = g_hash_table_new(g_int64_hash, g_int64_equal);
	sb = qemu_plugin_scoreboard_new(sizeof(struct vcpu));
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
