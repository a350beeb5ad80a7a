// SPDX-License-Identifier: GPL-2.0-only
/*
 * hyp-expect - run a test and require that pKVM's EL2 did the work.
 *
 *   hyp-expect [split_blocks=N] [el2_faults=N] [el2_dirtied=SIZE] [wp_overlap=N] [totals]
 *              -- COMMAND [ARG...]
 *
 * A test such as dirty_log_test checks the dirty log, not where the work
 * was done: it passes as well if no block was ever split or every fault
 * went to the host. Under pKVM, EL2 emits hyp events (CONFIG_NVHE_EL2_TRACING)
 * for what it does; this runs COMMAND with them enabled, reads them from
 * /sys/kernel/tracing/remotes/hypervisor/trace_pipe while it runs, and,
 * once it exits, asks EL2 for a marker event (write_event) on every CPU,
 * pinned to each in turn, and reads until all of them have come: each
 * CPU's events reach trace_pipe in order, but not in timestamp order
 * across CPUs (the reader sees a CPU's buffer as of its last poll), so
 * only a marker per CPU makes sure every event emitted before is counted.
 * Then:
 *   split_blocks  blocks EL2 split (pkvm_host_split_guest's blocks);
 *   el2_faults    write faults EL2 resolved itself (pkvm_dirty_fault, ret 0)
 * must each be at least N, and
 *   el2_dirtied   those faults times the page size (one fault per page
 *                 dirtied), at least SIZE bytes (K, M, G suffixes): what a
 *                 test writes is a size, whatever the page size, so a
 *                 fraction of it says "most faults were resolved at EL2". Exit status: COMMAND's if it failed, 1 if an
 * expectation was missed or the events could not be read (lost events
 * included), else 0. It prints what it counted, and how many of the dirty
 * faults EL2 took waited (pkvm_dirty_fault's waited, not 0): under the
 * VM's lock (step one), they found it held; lock-free, their update of
 * the entry lost a race, and they went to the host.
 *
 * wp_overlap: also trace hyp_enter and pkvm_host_wrprotect_guest, and
 * count the faults resolved at EL2 on one CPU while another CPU was in a
 * write-protect call of the host's (KVM_CLEAR_DIRTY_LOG): between that
 * call's hyp_enter and its event, on the hypervisor's clock. EL2 runs a
 * host call to its end, so no other hyp_enter of that CPU comes between.
 * At least N such faults are expected. It also prints how many there
 * would be if faults did not care about those calls (each CPU's faults
 * spread evenly over the span of its faults, gaps of over 100 ms left
 * out): with the VM's lock taken by
 * both, only faults that got in before the call took the lock, or after
 * it let go of it and before its event, could count.
 *
 * totals: also trace pkvm_host_wrprotect_guest and pkvm_host_collapse_range
 * and print, on one line, what EL2's split, write-protect and collapse
 * calls did in all (make bench's hypercall and TLBI counts): split calls,
 * blocks split, pages admitted from the split cache, broadcast TLBIs, calls
 * that also write-protected, write-protect calls; collapse calls, blocks
 * restored, tables left split, pages given back, broadcast TLBIs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HYP	"/sys/kernel/tracing/remotes/hypervisor"
#define MARKER	4242424242UL
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define MAX_CPUS	64
/*
 * In protected nVHE (not hVHE), 7.3's hyp trace clock reads the virtual
 * counter, which at EL2 with HCR_EL2.E2H clear is offset by CNTVOFF_EL2:
 * events of a CPU whose vCPU is loaded (the faults) are stamped in the
 * guest's time, the host's calls on other CPUs in the host's, and where the
 * guest's count is below the clock's epoch the nanoseconds wrap (bits 59
 * and up set). Only the low 59 bits are kept, and no gap between two
 * faults of a CPU over 100 ms counts towards their span, but wp_overlap's
 * count is only meaningful there on a kernel whose hyp clock reads the
 * physical counter (bench/hypclock/).
 */
#define TS_NS_MASK	((1ULL << 59) - 1)
#define CLOCK_JUMP_US	100000ULL

static const char *const events[] = {
	"pkvm_host_split_guest", "pkvm_dirty_fault", "selftest",
};
static const char *const wp_events[] = {
	"hyp_enter", "pkvm_host_wrprotect_guest",
};
static const char *const totals_events[] = {
	"pkvm_host_wrprotect_guest", "pkvm_host_collapse_range",
};

/* wp_overlap: timestamps (us) in each CPU's order, which is time order. */
struct stamps {
	unsigned long long *ts;
	size_t nr, cap;
};
static bool wp_overlap;
static struct stamps faults_ts[MAX_CPUS], wp_start[MAX_CPUS], wp_end[MAX_CPUS];
static unsigned long long last_enter[MAX_CPUS];
static bool enter_seen[MAX_CPUS];
static unsigned long wp_unpaired;

static unsigned long split_blocks, el2_faults, el2_waited, lines;
static bool totals;
static unsigned long split_calls, split_admitted, split_tlbi, wp_calls;
static unsigned long collapse_calls, collapse_blocks, collapse_left, collapse_freed,
		     collapse_tlbi;
static unsigned long markers_seen;
static bool lost;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen = PTHREAD_COND_INITIALIZER;

static int write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n;

	if (fd < 0) {
		fprintf(stderr, "hyp-expect: open %s: %s\n", path, strerror(errno));
		return -1;
	}
	n = write(fd, val, strlen(val));
	close(fd);
	if (n != (ssize_t)strlen(val)) {
		fprintf(stderr, "hyp-expect: write %s to %s failed\n", val, path);
		return -1;
	}
	return 0;
}

static unsigned long field(const char *line, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(line, pat);
	return p ? strtoul(p + strlen(pat), NULL, 0) : 0;
}

static bool stamp_add(struct stamps *s, unsigned long long ts)
{
	if (s->nr == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 4096;
		unsigned long long *p = realloc(s->ts, cap * sizeof(*p));

		if (!p)
			return false;
		s->ts = p;
		s->cap = cap;
	}
	s->ts[s->nr++] = ts;
	return true;
}

/* "[CPU]\tSECONDS.MICROSECONDS: " opens every event line. */
static bool cpu_and_ts(const char *line, unsigned int *cpu,
		       unsigned long long *ts)
{
	unsigned long long sec, usec;

	if (sscanf(line, "[%u] %llu.%llu:", cpu, &sec, &usec) != 3 ||
	    *cpu >= MAX_CPUS)
		return false;
	*ts = (((sec * 1000000 + usec) * 1000) & TS_NS_MASK) / 1000;
	return true;
}

static void account(const char *line)
{
	const char *ev = strstr(line, ": ");
	unsigned long long ts = 0;
	unsigned int cpu = 0;
	bool ok;

	lines++;
	if (strstr(line, "LOST") || !ev) {
		lost = true;
		return;
	}
	if (wp_overlap && !cpu_and_ts(line, &cpu, &ts)) {
		fprintf(stderr, "hyp-expect: cannot read the CPU and time of '%s'\n", line);
		lost = true;
		return;
	}
	ev += 2;
	if (!strncmp(ev, "pkvm_host_split_guest ", 22)) {
		split_blocks += field(ev, "blocks");
		split_calls++;
		split_admitted += field(ev, "admitted");
		split_tlbi += field(ev, "tlbi");
	} else if (!strncmp(ev, "pkvm_host_collapse_range ", 25)) {
		collapse_calls++;
		collapse_blocks += __builtin_popcountl(field(ev, "restored"));
		collapse_left += field(ev, "left");
		collapse_freed += field(ev, "freed");
		collapse_tlbi += field(ev, "tlbi");
	} else if (!strncmp(ev, "pkvm_dirty_fault ", 17)) {
		ok = strstr(ev, " ret=0");
		el2_faults += ok;
		el2_waited += !!field(ev, "waited");
		if (wp_overlap && ok && !stamp_add(&faults_ts[cpu], ts))
			lost = true;
	} else if (!strncmp(ev, "selftest ", 9) && field(ev, "id") == MARKER) {
		markers_seen++;
	} else if (!strncmp(ev, "hyp_enter ", 10)) {
		/* A host call; a CPU's PSCI entry can come before its clock. */
		enter_seen[cpu] = strstr(ev, " reason=hvc ");
		last_enter[cpu] = ts;
	} else if (!strncmp(ev, "pkvm_host_wrprotect_guest ", 26)) {
		wp_calls++;
		if (!wp_overlap)
			return;
		/* Its call's hyp_enter came first, unless tracing began in it. */
		if (!enter_seen[cpu] || last_enter[cpu] > ts ||
		    ts - last_enter[cpu] > CLOCK_JUMP_US)
			wp_unpaired++;
		else if (!stamp_add(&wp_start[cpu], last_enter[cpu]) ||
			 !stamp_add(&wp_end[cpu], ts))
			lost = true;
		enter_seen[cpu] = false;
	}
}

/* How many of @s fall in [@lo, @hi]: @s is in time order. */
static size_t stamps_between(const struct stamps *s, unsigned long long lo,
			     unsigned long long hi)
{
	size_t a = 0, b = s->nr, first;

	while (a < b) {
		size_t m = (a + b) / 2;

		if (s->ts[m] < lo)
			a = m + 1;
		else
			b = m;
	}
	first = a;
	b = s->nr;
	while (a < b) {
		size_t m = (a + b) / 2;

		if (s->ts[m] <= hi)
			a = m + 1;
		else
			b = m;
	}
	return a - first;
}

/*
 * Faults resolved on a CPU during another CPU's write-protect calls, and
 * how many there would be if the faults were spread evenly over their span.
 */
static void overlap(unsigned long *calls, unsigned long *in, double *even)
{
	unsigned long long span[MAX_CPUS] = { 0 }, d;
	unsigned int a, b;
	size_t i;

	*calls = *in = 0;
	*even = 0;
	for (b = 0; b < MAX_CPUS; b++) {
		for (i = 1; i < faults_ts[b].nr; i++) {
			d = faults_ts[b].ts[i] - faults_ts[b].ts[i - 1];
			if (d <= CLOCK_JUMP_US)
				span[b] += d;
		}
	}
	for (a = 0; a < MAX_CPUS; a++) {
		*calls += wp_start[a].nr;
		for (i = 0; i < wp_start[a].nr; i++) {
			unsigned long long lo = wp_start[a].ts[i], hi = wp_end[a].ts[i];

			for (b = 0; b < MAX_CPUS; b++) {
				const struct stamps *f = &faults_ts[b];

				if (b == a || f->nr < 2)
					continue;
				*in += stamps_between(f, lo, hi);
				if (span[b])
					*even += (double)f->nr * (hi - lo) / span[b];
			}
		}
	}
}

static void *reader(void *arg)
{
	static char buf[16384];
	int fd = *(int *)arg;
	size_t len = 0;

	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		char *line = buf, *nl;

		if (n <= 0)
			return NULL;
		len += n;
		buf[len] = 0;
		pthread_mutex_lock(&lock);
		while ((nl = strchr(line, '\n'))) {
			*nl = 0;
			account(line);
			line = nl + 1;
		}
		if (markers_seen)
			pthread_cond_signal(&seen);
		pthread_mutex_unlock(&lock);
		len -= line - buf;
		memmove(buf, line, len);
		if (len == sizeof(buf) - 1)
			len = 0;	/* a line that long is not an event */
	}
}

static int setup(void)
{
	char path[256];
	unsigned int i;

	if (access(HYP, F_OK))
		mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL);
	if (access(HYP "/write_event", W_OK)) {
		fprintf(stderr, "hyp-expect: no %s (CONFIG_NVHE_EL2_TRACING)\n", HYP);
		return -1;
	}
	/*
	 * Off and empty, the buffer is unloaded: only then can it be resized.
	 * wp_overlap also traces every entry to EL2: 4 vCPUs on 2 CPUs lost
	 * events with 2 MiB per CPU.
	 */
	if (write_str(HYP "/tracing_on", "0") || write_str(HYP "/trace", "0") ||
	    write_str(HYP "/buffer_size_kb", wp_overlap ? "8192" : "2048") ||
	    write_str(HYP "/events/enable", "0"))
		return -1;
	for (i = 0; i < ARRAY_SIZE(events); i++) {
		snprintf(path, sizeof(path), HYP "/events/hypervisor/%s/enable", events[i]);
		if (write_str(path, "1"))
			return -1;
	}
	for (i = 0; wp_overlap && i < ARRAY_SIZE(wp_events); i++) {
		snprintf(path, sizeof(path), HYP "/events/hypervisor/%s/enable", wp_events[i]);
		if (write_str(path, "1"))
			return -1;
	}
	for (i = 0; totals && i < ARRAY_SIZE(totals_events); i++) {
		snprintf(path, sizeof(path), HYP "/events/hypervisor/%s/enable", totals_events[i]);
		if (write_str(path, "1"))
			return -1;
	}
	return write_str(HYP "/tracing_on", "1");
}

static void teardown(void)
{
	write_str(HYP "/tracing_on", "0");
	write_str(HYP "/trace", "0");
	write_str(HYP "/events/enable", "0");
}

/* A marker event from EL2 on every CPU this can run on; *@nr says how many. */
static int markers_write(unsigned long *nr)
{
	int cpu, ncpus = sysconf(_SC_NPROCESSORS_CONF);
	cpu_set_t old, one;
	char marker[32];

	*nr = 0;
	if (sched_getaffinity(0, sizeof(old), &old)) {
		perror("hyp-expect: sched_getaffinity");
		return -1;
	}
	snprintf(marker, sizeof(marker), "%lu", MARKER);
	for (cpu = 0; cpu < ncpus && cpu < CPU_SETSIZE; cpu++) {
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		/* An offline CPU runs no EL2 code that could emit an event. */
		if (sched_setaffinity(0, sizeof(one), &one))
			continue;
		if (write_str(HYP "/write_event", marker))
			return -1;
		++*nr;
	}
	if (sched_setaffinity(0, sizeof(old), &old) || !*nr) {
		fprintf(stderr, "hyp-expect: no CPU to write a marker event on\n");
		return -1;
	}
	return 0;
}

/* "58M": bytes, with an optional K, M or G; 0 if not a non-zero size. */
static unsigned long long size_arg(const char *arg)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(arg, &end, 0);
	if (errno || end == arg)
		return 0;
	switch (*end) {
	case 'G':
		n <<= 10;
		/* fall through */
	case 'M':
		n <<= 10;
		/* fall through */
	case 'K':
		n <<= 10;
		end++;
	}
	return *end ? 0 : n;
}

int main(int argc, char **argv)
{
	unsigned long want_split = 0, want_el2 = 0, want_wp = 0;
	unsigned long long want_bytes = 0, page = sysconf(_SC_PAGESIZE);
	unsigned long wp_pairs = 0, wp_in = 0;
	double wp_even = 0;
	struct timespec deadline;
	int i, fd, status, ret;
	unsigned long markers;
	pthread_t thr;
	pid_t pid;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strncmp(argv[i], "split_blocks=", 13))
			want_split = strtoul(argv[i] + 13, NULL, 0);
		else if (!strncmp(argv[i], "el2_faults=", 11))
			want_el2 = strtoul(argv[i] + 11, NULL, 0);
		else if (!strncmp(argv[i], "el2_dirtied=", 12) &&
			 size_arg(argv[i] + 12))
			want_bytes = size_arg(argv[i] + 12);
		else if (!strncmp(argv[i], "wp_overlap=", 11))
			want_wp = strtoul(argv[i] + 11, NULL, 0), wp_overlap = true;
		else if (!strcmp(argv[i], "totals"))
			totals = true;
		else
			break;
	}
	if (i >= argc - 1 || strcmp(argv[i], "--")) {
		fprintf(stderr, "usage: %s [split_blocks=N] [el2_faults=N] [el2_dirtied=SIZE[K|M|G]] [wp_overlap=N] [totals] -- COMMAND [ARG...]\n",
			argv[0]);
		return 1;
	}

	if (setup())
		return 1;
	fd = open(HYP "/trace_pipe", O_RDONLY);
	if (fd < 0 || pthread_create(&thr, NULL, reader, &fd)) {
		fprintf(stderr, "hyp-expect: cannot read %s/trace_pipe\n", HYP);
		teardown();
		return 1;
	}

	pid = fork();
	if (!pid) {
		execv(argv[i + 1], &argv[i + 1]);
		fprintf(stderr, "hyp-expect: exec %s: %s\n", argv[i + 1], strerror(errno));
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		teardown();
		return 1;
	}

	ret = markers_write(&markers);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 30;
	pthread_mutex_lock(&lock);
	while (!ret && markers_seen < markers &&
	       pthread_cond_timedwait(&seen, &lock, &deadline) != ETIMEDOUT)
		;
	printf("hyp-expect: %lu blocks split at EL2, %lu write faults resolved at EL2 (%lu events%s)\n",
	       split_blocks, el2_faults, lines, lost ? ", some LOST" : "");
	printf("hyp-expect: %lu of the faults EL2 took waited (lock held, or exchange lost)\n",
	       el2_waited);
	if (wp_overlap) {
		overlap(&wp_pairs, &wp_in, &wp_even);
		printf("hyp-expect: %lu of the faults resolved at EL2 came during another CPU's write-protect call (%lu calls; %.1f if spread evenly)\n",
		       wp_in, wp_pairs, wp_even);
		printf("hyp-expect: %lu write-protect calls not counted (no hyp_enter before, or a clock jump)\n",
		       wp_unpaired);
	}
	if (totals)
		printf("hyp-expect: totals split_calls=%lu split_blocks=%lu split_admitted=%lu split_tlbi=%lu wp_calls=%lu collapse_calls=%lu collapse_blocks=%lu collapse_left=%lu collapse_freed=%lu collapse_tlbi=%lu\n",
		       split_calls, split_blocks, split_admitted, split_tlbi, wp_calls,
		       collapse_calls, collapse_blocks, collapse_left, collapse_freed,
		       collapse_tlbi);
	if (ret || markers_seen < markers) {
		printf("hyp-expect: %lu of EL2's %lu marker events came\n",
		       markers_seen, markers);
		ret = 1;
	} else if (lost) {
		ret = 1;
	} else if (split_blocks < want_split || el2_faults < want_el2) {
		printf("hyp-expect: expected at least %lu blocks split and %lu faults resolved at EL2\n",
		       want_split, want_el2);
		ret = 1;
	} else if (el2_faults * page < want_bytes) {
		printf("hyp-expect: expected the faults resolved at EL2 to cover at least %llu MiB (%llu pages of %llu bytes), they cover %llu MiB\n",
		       want_bytes >> 20, want_bytes / page, page, (el2_faults * page) >> 20);
		ret = 1;
	} else if (wp_overlap && (wp_in < want_wp || !wp_pairs)) {
		printf("hyp-expect: expected at least %lu faults during a write-protect call, of at least one call\n",
		       want_wp);
		ret = 1;
	}
	pthread_mutex_unlock(&lock);
	teardown();

	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	return ret;
}
