// SPDX-License-Identifier: GPL-2.0-only
/*
 * pkvm_split_abi_test - the pKVM split hypercalls against a hostile host.
 *
 * pKVM only (CONFIG_PKVM_SPLIT_ABI_TEST): the kernel's table of bad
 * arguments and bad memcaches for __pkvm_host_split_guest, the restore and
 * the nsh flush, read from debugfs once per VM (every case its documented
 * error, the guest's stage-2 unchanged after each); the same calls refused
 * for a VM being torn down and for a protected VM.
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

#include "delay.h"
#include "kvm_util.h"
#include "pkvm_split.h"
#include "processor.h"
#include "test_util.h"
#include "ucall.h"

/*
 * A VM being torn down: the kernel starts the teardown of an idle
 * non-protected VM with nothing mapped, as kvm_destroy_vm() would, and the
 * split must then refuse its handle with -EBUSY.
 */
static void test_abi_dying(bool required)
{
	struct raw_vm vm;
	char path[128];

	start_raw_vm(&vm, 0, false);
	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/pkvm_split_abi_dying",
		 getpid(), vm.vm_fd);
	if (!read_ktap(path, 3, "VM being torn down")) {
		TEST_ASSERT(!required, "%s: %s", path, strerror(errno));
		pr_info("VM being torn down: SKIP (no %s)\n", path);
	}
	stop_raw_vm(&vm);
}

/* The hostile-host table's cases (hypercalls/security.md lists them). */
#define ABI_CASES	77

static void test_abi_hostile(bool required)
{
	struct raw_vm pvm;
	char path[128];
	struct test_vm t;

	start_raw_vm(&pvm, KVM_VM_TYPE_ARM_PROTECTED, true);
	/* vCPU 1 is not run: the table creates it at EL2, after bad buffers. */
	create_test_vm_vcpus(&t, 0, 2);
	guest_write(&t, .seed = 1);

	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/pkvm_split_abi",
		 getpid(), t.vm->fd);
	/* With 64K pages no call can run out of pages part-way: one case less. */
	if (!read_ktap(path, getpagesize() == SZ_64K ? ABI_CASES - 2 : ABI_CASES,
		       "hostile-host ABI table")) {
		TEST_ASSERT(!required, "%s: %s", path, strerror(errno));
		pr_info("hostile-host ABI table: SKIP (no %s)\n", path);
		destroy_test_vm(&t);
		stop_raw_vm(&pvm);
		return;
	}
	stop_raw_vm(&pvm);

	/*
	 * The guest's data and the host's records survived it, and vCPU 1,
	 * created at EL2 after its bad dirty buffers were refused, logs
	 * every page it dirties, through its own buffer.
	 */
	check_memory(&t, "after the hostile-host table");
	t.vcpu = t.vcpus[1];
	guest_read(&t);
	vm_mem_region_set_flags(t.vm, DATA_SLOT, KVM_MEM_LOG_DIRTY_PAGES);
	check_write_pass(&t, 1, 0, 2, t.npages, "vCPU 1 after the hostile-host table");
	destroy_test_vm(&t);
}

/* Protected VMs keep refusing eager split. */
static void test_protected_vm_refuses(void)
{
	struct kvm_enable_cap cap = {
		.cap = KVM_CAP_ARM_EAGER_SPLIT_CHUNK_SIZE,
		.args[0] = block_size,
	};
	int kvm_fd, vm_fd, ret;

	/* The library refuses VM types on arm64: create it by hand. */
	kvm_fd = open_kvm_dev_path_or_exit();
	vm_fd = __kvm_ioctl(kvm_fd, KVM_CREATE_VM, (void *)KVM_VM_TYPE_ARM_PROTECTED);
	TEST_ASSERT(vm_fd >= 0, KVM_IOCTL_ERROR(KVM_CREATE_VM, vm_fd));

	ret = ioctl(vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_ARM_SUPPORTED_BLOCK_SIZES);
	TEST_ASSERT(ret == 0, "protected VM reports block sizes 0x%x", ret);
	ret = ioctl(vm_fd, KVM_ENABLE_CAP, &cap);
	TEST_ASSERT(ret == -1 && errno == EINVAL,
		    "protected VM accepted eager split: ret %d errno %d", ret, errno);

	close(vm_fd);
	close(kvm_fd);
}

int main(int argc, char *argv[])
{
	bool abi_required = false;
	u64 secpt;
	int opt;

	while ((opt = getopt(argc, argv, "a")) != -1) {
		switch (opt) {
		case 'a':
			abi_required = true;
			break;
		default:
			printf("usage: %s [-a]\n"
			       " -a: fail if the pKVM hostile-host ABI table is missing\n",
			       argv[0]);
			/* A bad option is a broken test line, not a skip. */
			exit(KSFT_FAIL);
		}
	}
	pkvm_split_setup();
	TEST_REQUIRE(pkvm);

	secpt = sec_pagetables_kb();
	test_abi_hostile(abi_required);
	check_no_leak(secpt, "the hostile-host table");
	test_abi_dying(abi_required);
	check_no_leak(secpt, "a VM torn down under the table");
	test_protected_vm_refuses();
	check_no_leak(secpt, "the protected VM");
	pr_info("PASS\n");
	return 0;
}
