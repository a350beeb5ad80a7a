// SPDX-License-Identifier: GPL-2.0
/*
 * Minimal init for the pKVM split test initramfs.
 *
 * Mounts what the KVM selftests need, runs the tests listed in
 * /tests/<list>.list (the list is named by "pkvm.tests=<list>" on the kernel
 * command line), reports each as a KTAP result line on the console and
 * powers the machine off.
 *
 * A test's own output goes to the console with "# " in front of each line
 * (as the kselftest runner does), so that the KTAP lines of tests that print
 * their own ("ok 1 vm0") are never taken for init's. After each test,
 * vm/stat_refresh folds the per-CPU vmstat deltas in and the kernel reports
 * any counter that went negative (/proc/meminfo shows those as 0): such a
 * report fails the test that just ran.
 *
 * List format, one test per line, '#' for comments:
 *   <name> <timeout in seconds> [VAR=value...] <command> [args...]
 * Commands are looked up in /tests/bin; VAR=value words before the command
 * go to its environment, except /path=value words, whose value init writes
 * to that file (a module parameter, say) before it runs the command. Exit
 * status 4 (KSFT_SKIP) is a skip.
 *
 * Unless "pkvm.hold_vm=0" is on the command line, init keeps one idle VM
 * open while the tests run (see hold_idle_vm()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvm.h>

#define MAX_TESTS	128
#define MAX_ARGS	32
#define KSFT_SKIP	4

struct test {
	char name[64];
	int timeout;
	char *envp[MAX_ARGS + 1];
	char *argv[MAX_ARGS + 1];
};

static struct test tests[MAX_TESTS];

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static void do_mount(const char *src, const char *dst, const char *type,
		     const char *opts)
{
	mkdir(dst, 0755);
	if (mount(src, dst, type, 0, opts) && errno != EBUSY)
		say("# init: mount %s on %s failed: %s\n", type, dst, strerror(errno));
}

static void setup(void)
{
	int fd;

	do_mount("proc", "/proc", "proc", NULL);
	do_mount("sysfs", "/sys", "sysfs", NULL);
	do_mount("devtmpfs", "/dev", "devtmpfs", NULL);
	do_mount("debugfs", "/sys/kernel/debug", "debugfs", NULL);
	do_mount("hugetlbfs", "/dev/hugepages", "hugetlbfs", NULL);
	do_mount("tmpfs", "/tmp", "tmpfs", NULL);

	fd = open("/dev/console", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* The value of "<key>=" on the kernel command line into @buf, or @def. */
static void cmdline_value(const char *key, char *buf, size_t len, const char *def)
{
	char cmdline[4096] = "";
	char *p, *e;
	int fd;
	ssize_t n;

	snprintf(buf, len, "%s", def);
	fd = open("/proc/cmdline", O_RDONLY);
	if (fd < 0)
		return;
	n = read(fd, cmdline, sizeof(cmdline) - 1);
	close(fd);
	if (n <= 0)
		return;
	cmdline[n] = '\0';
	p = strstr(cmdline, key);
	if (!p)
		return;
	p += strlen(key);
	e = p + strcspn(p, "\n ");
	snprintf(buf, len, "%.*s", (int)(e - p), p);
}

/*
 * Keep one idle VM for the whole boot (unless "pkvm.hold_vm=0"), so that
 * the kernel's preempt_notifier_key stays enabled and is not patched
 * between two tests: KVM's sched_in/sched_out notifiers are two static
 * branches, enabled by the first VM and disabled with the last. Under QEMU
 * TCG with several vCPU threads, a notifier skipped right after such a
 * patch fits the non-protected incidents in bench/incidents/README.md (not
 * proven: see there). Returns the VM's fd, or -1.
 */
static int hold_idle_vm(void)
{
	char val[8];
	int kvm, vm;

	cmdline_value("pkvm.hold_vm=", val, sizeof(val), "1");
	if (!strcmp(val, "0"))
		return -1;
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return -1;
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	close(kvm);
	if (vm < 0)
		say("# init: cannot hold a VM open: %s\n", strerror(errno));
	else
		fcntl(vm, F_SETFD, FD_CLOEXEC);
	return vm;
}

static int load_tests(const char *path)
{
	char line[1024];
	int nr = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f) {
		say("# init: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f) && nr < MAX_TESTS) {
		struct test *t = &tests[nr];
		char *save, *tok;
		int argc = 0, envc = 0;

		line[strcspn(line, "\n")] = '\0';
		tok = strtok_r(line, " \t", &save);
		if (!tok || tok[0] == '#')
			continue;
		snprintf(t->name, sizeof(t->name), "%s", tok);
		tok = strtok_r(NULL, " \t", &save);
		t->timeout = tok ? atoi(tok) : 0;
		while ((tok = strtok_r(NULL, " \t", &save)) && argc < MAX_ARGS) {
			if (!argc && strchr(tok, '=') && envc < MAX_ARGS)
				t->envp[envc++] = strdup(tok);
			else
				t->argv[argc++] = strdup(tok);
		}
		t->envp[envc] = NULL;
		t->argv[argc] = NULL;
		if (!argc || t->timeout <= 0) {
			say("# init: malformed line for '%s'\n", t->name);
			continue;
		}
		nr++;
	}
	fclose(f);
	return nr;
}

/* Copy the test's output to the console, "# " before each line. */
struct relay {
	char buf[4096];
	size_t len;
};

static void relay_flush(struct relay *r, int all)
{
	char *nl;

	while ((nl = memchr(r->buf, '\n', r->len))) {
		size_t n = nl - r->buf + 1;

		say("# %.*s", (int)n, r->buf);
		memmove(r->buf, r->buf + n, r->len - n);
		r->len -= n;
	}
	if (r->len && (all || r->len == sizeof(r->buf))) {
		say("# %.*s\n", (int)r->len, r->buf);
		r->len = 0;
	}
}

/* Returns 0 once the pipe is closed, 1 while it may have more. */
static int relay_read(struct relay *r, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, 100) <= 0)
		return 1;
	n = read(fd, r->buf + r->len, sizeof(r->buf) - r->len);
	if (n <= 0)
		return n < 0 && errno == EINTR;
	r->len += n;
	relay_flush(r, 0);
	return 1;
}

/*
 * Fold the per-CPU vmstat deltas in; the kernel logs "vmstat_refresh: <item>
 * <value>" for any counter below zero. Returns 1 and the first such line in
 * @why if one is new: a counter that went negative, or further negative,
 * since the last check. (One that stays negative fails the boot's serial-log
 * check, not every later test.)
 */
static int vmstat_negative(char *why, size_t len)
{
	static char reported[1024];
	char rec[1024], now[1024] = "";
	int kmsg, fd, found = 0;
	ssize_t n;

	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg >= 0)
		lseek(kmsg, 0, SEEK_END);
	fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);
	if (fd < 0 || write(fd, "1", 1) != 1) {
		snprintf(why, len, "vm/stat_refresh: %s", strerror(errno));
		found = 1;
	}
	if (fd >= 0)
		close(fd);
	if (kmsg < 0)
		return found;
	while ((n = read(kmsg, rec, sizeof(rec) - 1)) > 0) {
		char *msg;

		rec[n] = '\0';
		msg = strstr(rec, "vmstat_refresh: ");
		if (!msg)
			continue;
		msg[strcspn(msg, "\n")] = '\0';
		if (!found && !strstr(reported, msg)) {
			snprintf(why, len, "%s", msg);
			found = 1;
		}
		if (strlen(now) + strlen(msg) + 2 < sizeof(now)) {
			strcat(now, msg);
			strcat(now, "\n");
		}
	}
	close(kmsg);
	memcpy(reported, now, sizeof(reported));
	/* Let the console print the kernel's own line before ours. */
	if (now[0])
		usleep(300 * 1000);
	return found;
}

/*
 * The pKVM switches a test may change: their values at boot, written back
 * before every test, so that a test that failed before restoring them
 * does not run the next ones in another configuration.
 */
static const char *const switches[] = {
	"/sys/module/kvm/parameters/pkvm_fast_dirty",
	"/sys/kernel/debug/kvm/pkvm_collapse",
	"/sys/kernel/debug/kvm/pkvm_dirty_buf_entries",
};
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif
static char switch_boot[ARRAY_SIZE(switches)][32];

static int read_switch(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY), n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static void save_switches(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(switches); i++)
		if (read_switch(switches[i], switch_boot[i], sizeof(switch_boot[i])))
			switch_boot[i][0] = '\0';
}

static void restore_switches(const char *after)
{
	char now[32];
	int fd;

	for (size_t i = 0; i < ARRAY_SIZE(switches); i++) {
		if (!switch_boot[i][0] || read_switch(switches[i], now, sizeof(now)) ||
		    !strcmp(now, switch_boot[i]))
			continue;
		fd = open(switches[i], O_WRONLY);
		if (fd < 0 || write(fd, switch_boot[i], strlen(switch_boot[i])) < 0)
			say("# init: cannot restore %s to %s\n", switches[i], switch_boot[i]);
		else
			say("# init: %s left at %s by %s: back to %s\n", switches[i], now,
			    after, switch_boot[i]);
		if (fd >= 0)
			close(fd);
	}
}

/* Write the value of each /path=value word to its file. */
static int write_settings(struct test *t, char *why, size_t len)
{
	for (char **e = t->envp; *e; e++) {
		char path[256], *eq = strchr(*e, '=');
		int fd, n = strlen(eq + 1);

		if ((*e)[0] != '/')
			continue;
		snprintf(path, sizeof(path), "%.*s", (int)(eq - *e), *e);
		fd = open(path, O_WRONLY);
		if (fd < 0 || write(fd, eq + 1, n) != n) {
			snprintf(why, len, "cannot write %.16s to %.80s: %.20s", eq + 1, path,
				 strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
		say("# init: %s=%s\n", path, eq + 1);
	}
	return 0;
}

/* Run one test; returns a KTAP result suffix in @why (empty when it passed). */
static int run_test(struct test *t, char *why, size_t len)
{
	time_t start = time(NULL);
	struct relay out = { .len = 0 };
	int status, ret, fds[2], open_pipe = 1, neg;
	char vmwhy[128];
	pid_t pid;

	if (write_settings(t, why, len))
		return -1;
	if (pipe(fds)) {
		snprintf(why, len, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, len, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		for (char **e = t->envp; *e; e++)
			if ((*e)[0] != '/')
				putenv(*e);
		execv(t->argv[0], t->argv);
		fprintf(stderr, "init: exec %s: %s\n", t->argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[1]);

	for (;;) {
		if (open_pipe)
			open_pipe = relay_read(&out, fds[0]);
		else
			usleep(100 * 1000);
		ret = waitpid(pid, &status, WNOHANG);
		if (ret == pid)
			break;
		if (time(NULL) - start > t->timeout) {
			kill(-pid, SIGKILL);
			waitpid(pid, &status, 0);
			while (open_pipe)
				open_pipe = relay_read(&out, fds[0]);
			relay_flush(&out, 1);
			close(fds[0]);
			snprintf(why, len, "timeout after %ds", t->timeout);
			return -1;
		}
	}
	/*
	 * Children the test left behind (a killed VMM's, say) must not run
	 * into the next test and shift its baselines: kill its process group.
	 */
	kill(-pid, SIGKILL);
	/* The test's children may hold the pipe: read what is there, briefly. */
	for (int i = 0; open_pipe && i < 20; i++)
		open_pipe = relay_read(&out, fds[0]);
	relay_flush(&out, 1);
	close(fds[0]);

	say("# %s: %lds\n", t->name, (long)(time(NULL) - start));
	neg = vmstat_negative(vmwhy, sizeof(vmwhy));
	if (neg)
		say("# init: after %s: %s\n", t->name, vmwhy);
	if (WIFSIGNALED(status)) {
		snprintf(why, len, "killed by signal %d", WTERMSIG(status));
		return -1;
	}
	if (WEXITSTATUS(status) == KSFT_SKIP) {
		snprintf(why, len, "SKIP");
		return 1;
	}
	if (WEXITSTATUS(status)) {
		snprintf(why, len, "exit status %d", WEXITSTATUS(status));
		return -1;
	}
	if (neg) {
		snprintf(why, len, "%s", vmwhy);
		return -1;
	}
	why[0] = '\0';
	return 0;
}

int main(void)
{
	char list[64], path[128], why[256], val[8];
	int i, nr, ret, held, passed = 0, failed = 0, skipped = 0, miscount;

	setup();
	cmdline_value("pkvm.tests=", list, sizeof(list), "default");
	/* check-harness only: report one test passed more than ran. */
	cmdline_value("pkvm.harness_miscount=", val, sizeof(val), "0");
	miscount = atoi(val);
	held = hold_idle_vm();
	say("# init: %s\n", held >= 0 ? "holding one idle VM open for the boot" :
			     "no VM held open");
	snprintf(path, sizeof(path), "/tests/%s.list", list);
	if (chdir("/tests/bin"))
		say("# init: no /tests/bin\n");

	save_switches();
	nr = load_tests(path);
	say("KTAP version 1\n");
	if (nr < 0) {
		say("1..1\nnot ok 1 load-test-list # cannot read %s\n", path);
		failed++;
		goto out;
	}
	say("1..%d\n", nr);
	for (i = 0; i < nr; i++) {
		struct timespec t0, t1;

		if (i)
			restore_switches(tests[i - 1].name);
		say("# start %s\n", tests[i].name);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = run_test(&tests[i], why, sizeof(why));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		say("# time %s %ld s\n", tests[i].name, (long)(t1.tv_sec - t0.tv_sec));
		if (ret > 0) {
			say("ok %d %s # SKIP\n", i + 1, tests[i].name);
			skipped++;
		} else if (ret) {
			say("not ok %d %s # %s\n", i + 1, tests[i].name, why);
			failed++;
		} else {
			say("ok %d %s\n", i + 1, tests[i].name);
			passed++;
		}
	}
out:
	/* Cross-checked by boot.sh against the result lines it read. */
	say("# init: %d passed, %d failed, %d skipped\n", passed + miscount, failed, skipped);
	say("# pkvm-init: done\n");
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
