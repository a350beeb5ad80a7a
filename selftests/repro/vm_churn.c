// SPDX-License-Identifier: GPL-2.0-only
/*
 * vm_churn: a minimal reproducer for the non-protected incidents of
 * bench/incidents/README.md (a KVM preempt notifier that seems skipped:
 * VHE "KVM_BUG_ON(SYSREGS_ON_CPU)" in kvm_vcpu_load_debug() via
 * kvm_sched_in(), nVHE mark_page_dirty_in_slot() with no running vCPU).
 *
 * It creates and frees one VM after another, each with two vCPUs (or -v)
 * whose threads are pinned to one CPU, so that they preempt each other
 * while they run, and the creating thread is pinned to another CPU. With
 * no other VM open, every create enables the kernel's preempt_notifier_key
 * and every free disables it: both static branches (sched_out in
 * prepare_task_switch(), sched_in in finish_task_switch()) are patched by
 * the creating CPU just before and just after the vCPU threads run on the
 * other one. Each guest loops on an MMIO write (an exit to this program)
 * and a write to RAM; with -l the slot logs dirty pages and the creating
 * thread fetches the log while the vCPUs run, so that writes fault again.
 *
 * Counts: KVM_RUN failures (the VHE KVM_BUG_ON makes every later KVM_RUN
 * of the VM fail with EIO), unexpected exits, and whether the kernel was
 * tainted by a WARN during the run. Exit status 0 only when every VM ran
 * every exit and the kernel stayed untainted by WARN.
 *
 * Built with the project's init by scripts/mk-initramfs.sh; run by
 * scripts/incident-repro.sh. Raw KVM ioctls only, no selftest library, so
 * it can be built and run on any arm64 host as is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MEM_GPA		0x80000000ULL
#define MMIO_GPA	0x10000000ULL
#define DATA_PAGES	16
#define MAX_VCPUS	8
#define TAINT_WARN	(1UL << 9)

/*
 * The guest: an MMIO write (exit to us), then a write to the next of
 * DATA_PAGES pages, forever. x0 = MMIO address, x1 = value, x3 = data
 * base, x4 = stride (the host page size), x5 = offset, x6 = offset mask.
 * It runs with its MMU off, from the first page of the slot.
 */
static const uint32_t guest_code[] = {
	0xf9000001,	/* 1: str x1, [x0]     */
	0xf8256861,	/*    str x1, [x3, x5] */
	0x8b0400a5,	/*    add x5, x5, x4   */
	0x8a0600a5,	/*    and x5, x5, x6   */
	0x17fffffc,	/*    b   1b           */
};

struct vcpu {
	pthread_t thread;
	int fd;
	struct kvm_run *run;
	int cpu;
	long exits_wanted;
	long exits;
	int err;		/* errno of a failed KVM_RUN, or 0 */
	unsigned int bad_exit;	/* unexpected exit reason + 1, or 0 */
};

static int kvm_fd;
static long run_size;
static long page;
static void *mem;
static size_t mem_size;
static int vcpus_running;	/* atomic builtins only */

static void die(const char *what)
{
	printf("# vm_churn: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

static void set_reg(int fd, uint64_t id, uint64_t val)
{
	struct kvm_one_reg reg = { .id = id, .addr = (uintptr_t)&val };

	if (ioctl(fd, KVM_SET_ONE_REG, &reg))
		die("KVM_SET_ONE_REG");
}

#define CORE_REG(x)	(KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | \
			 (offsetof(struct kvm_regs, x) / sizeof(__u32)))

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;

	pin(v->cpu);
	while (v->exits < v->exits_wanted) {
		if (ioctl(v->fd, KVM_RUN, 0)) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			v->err = errno;
			break;
		}
		if (v->run->exit_reason != KVM_EXIT_MMIO ||
		    v->run->mmio.phys_addr != MMIO_GPA || !v->run->mmio.is_write) {
			v->bad_exit = v->run->exit_reason + 1;
			break;
		}
		v->exits++;
	}
	__atomic_sub_fetch(&vcpus_running, 1, __ATOMIC_RELEASE);
	return NULL;
}

static unsigned long taint_flags(void)
{
	unsigned long t = 0;
	FILE *f = fopen("/proc/sys/kernel/tainted", "r");

	if (f) {
		if (fscanf(f, "%lu", &t) != 1)
			t = 0;
		fclose(f);
	}
	return t;
}

static void print_usage(const char *argv0)
{
	printf("usage: %s [-n VMs] [-e exits per vCPU] [-v vCPUs] [-c vCPU CPU] [-t seconds] [-l]\n",
	       argv0);
	exit(2);
}

static long num(const char *s, long min, long max, const char *argv0)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || v < min || v > max)
		print_usage(argv0);
	return v;
}

int main(int argc, char **argv)
{
	long nr_vms = 2000, exits = 50, secs = 0, i, done = 0, gets = 0;
	long failed_vms = 0, run_errs = 0, bad_exits = 0;
	struct kvm_vcpu_init init;
	struct vcpu vcpus[MAX_VCPUS];
	int nr_vcpus = 2, vcpu_cpu = 0, main_cpu, logging = 0, opt, j;
	unsigned long taint0;
	struct timespec t0, t1;
	double elapsed;

	while ((opt = getopt(argc, argv, "n:e:v:c:t:l")) != -1) {
		switch (opt) {
		case 'n':
			nr_vms = num(optarg, 1, 100000000, argv[0]);
			break;
		case 'e':
			exits = num(optarg, 1, 100000000, argv[0]);
			break;
		case 'v':
			nr_vcpus = num(optarg, 1, MAX_VCPUS, argv[0]);
			break;
		case 'c':
			vcpu_cpu = num(optarg, 0, CPU_SETSIZE - 1, argv[0]);
			break;
		case 't':
			secs = num(optarg, 1, 1000000, argv[0]);
			break;
		case 'l':
			logging = 1;
			break;
		default:
			print_usage(argv[0]);
		}
	}
	if (optind != argc)
		print_usage(argv[0]);

	main_cpu = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? (vcpu_cpu ? 0 : 1) : 0;
	pin(main_cpu);
	page = sysconf(_SC_PAGESIZE);
	mem_size = page * (1 + DATA_PAGES);
	mem = mmap(NULL, mem_size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	memcpy(mem, guest_code, sizeof(guest_code));

	kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm_fd < 0)
		die("/dev/kvm");
	run_size = ioctl(kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size <= 0)
		die("KVM_GET_VCPU_MMAP_SIZE");

	printf("# vm_churn: %ld VMs, %d vCPUs each on CPU %d, %ld MMIO exits per vCPU, creator on CPU %d, dirty log %s%s\n",
	       nr_vms, nr_vcpus, vcpu_cpu, exits, main_cpu, logging ? "on" : "off",
	       secs ? ", time-limited" : "");
	fflush(stdout);
	taint0 = taint_flags();
	clock_gettime(CLOCK_MONOTONIC, &t0);

	for (i = 0; i < nr_vms; i++) {
		struct kvm_userspace_memory_region region = {
			.slot = 0,
			.flags = logging ? KVM_MEM_LOG_DIRTY_PAGES : 0,
			.guest_phys_addr = MEM_GPA,
			.memory_size = mem_size,
			.userspace_addr = (uintptr_t)mem,
		};
		unsigned long bitmap[(DATA_PAGES + 1 + 63) / 64 + 1];
		struct kvm_dirty_log log = { .slot = 0, .dirty_bitmap = bitmap };
		int vm, bad = 0;

		if (secs) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			if (t1.tv_sec - t0.tv_sec >= secs)
				break;
		}
		vm = ioctl(kvm_fd, KVM_CREATE_VM, 0);
		if (vm < 0)
			die("KVM_CREATE_VM");
		if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region))
			die("KVM_SET_USER_MEMORY_REGION");
		if (ioctl(vm, KVM_ARM_PREFERRED_TARGET, &init))
			die("KVM_ARM_PREFERRED_TARGET");

		__atomic_store_n(&vcpus_running, nr_vcpus, __ATOMIC_RELAXED);
		for (j = 0; j < nr_vcpus; j++) {
			struct vcpu *v = &vcpus[j];

			memset(v, 0, sizeof(*v));
			v->cpu = vcpu_cpu;
			v->exits_wanted = exits;
			v->fd = ioctl(vm, KVM_CREATE_VCPU, j);
			if (v->fd < 0)
				die("KVM_CREATE_VCPU");
			if (ioctl(v->fd, KVM_ARM_VCPU_INIT, &init))
				die("KVM_ARM_VCPU_INIT");
			v->run = mmap(NULL, run_size, PROT_READ | PROT_WRITE,
				      MAP_SHARED, v->fd, 0);
			if (v->run == MAP_FAILED)
				die("mmap kvm_run");
			set_reg(v->fd, CORE_REG(regs.pc), MEM_GPA);
			set_reg(v->fd, CORE_REG(regs.regs[0]), MMIO_GPA);
			set_reg(v->fd, CORE_REG(regs.regs[1]), i);
			set_reg(v->fd, CORE_REG(regs.regs[3]), MEM_GPA + page);
			set_reg(v->fd, CORE_REG(regs.regs[4]), page);
			set_reg(v->fd, CORE_REG(regs.regs[5]), (j * page) % (DATA_PAGES * page));
			set_reg(v->fd, CORE_REG(regs.regs[6]), DATA_PAGES * page - 1);
		}
		for (j = 0; j < nr_vcpus; j++)
			if (pthread_create(&vcpus[j].thread, NULL, vcpu_thread, &vcpus[j]))
				die("pthread_create");
		/*
		 * Fetching the log write-protects the pages again: more faults.
		 * Every 200 us, not in a tight loop that would starve the vCPUs
		 * of the MMU lock.
		 */
		while (logging && __atomic_load_n(&vcpus_running, __ATOMIC_ACQUIRE)) {
			memset(bitmap, 0, sizeof(bitmap));
			if (ioctl(vm, KVM_GET_DIRTY_LOG, &log))
				die("KVM_GET_DIRTY_LOG");
			gets++;
			nanosleep(&(struct timespec){ .tv_nsec = 200000 }, NULL);
		}
		for (j = 0; j < nr_vcpus; j++) {
			struct vcpu *v = &vcpus[j];

			pthread_join(v->thread, NULL);
			if (v->err) {
				run_errs++;
				bad = 1;
				printf("# vm_churn: VM %ld vCPU %d: KVM_RUN failed after %ld exits: %s\n",
				       i, j, v->exits, strerror(v->err));
			} else if (v->bad_exit) {
				bad_exits++;
				bad = 1;
				printf("# vm_churn: VM %ld vCPU %d: exit reason %u after %ld exits\n",
				       i, j, v->bad_exit - 1, v->exits);
			}
			munmap(v->run, run_size);
			close(v->fd);
		}
		close(vm);
		failed_vms += bad;
		done++;
		if (done % 500 == 0) {
			printf("# vm_churn: %ld VMs done, %ld failed\n", done, failed_vms);
			fflush(stdout);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	elapsed = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;

	printf("# vm_churn: %ld VMs in %.1f s (%.1f ms each): %ld failed (%ld KVM_RUN errors, %ld bad exits), %ld dirty-log fetches, WARN taint %s\n",
	       done, elapsed, done ? elapsed * 1000 / done : 0.0, failed_vms,
	       run_errs, bad_exits, gets,
	       (taint_flags() & TAINT_WARN) && !(taint0 & TAINT_WARN) ? "set during the run" :
	       (taint0 & TAINT_WARN) ? "already set before the run" : "clear");
	return failed_vms || ((taint_flags() & TAINT_WARN) && !(taint0 & TAINT_WARN));
}
