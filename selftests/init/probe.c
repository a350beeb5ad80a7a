// SPDX-License-Identifier: GPL-2.0
/*
 * The harness's own probe (scripts/check-harness.sh): a test program that
 * misbehaves on purpose, so that the harness can be shown to count each
 * kind of misbehaviour as a failure.
 *
 *   probe exit N [TEXT] print TEXT on one line (the reason a failing
 *                       test gives), then exit with status N (4 is
 *                       kselftest's skip)
 *   probe sleep S       sleep S seconds, then exit 0 (a hung test)
 *   probe say TEXT...   print TEXT on one line, then exit 0 (a line the
 *                       serial-log check must catch)
 *   probe kmsg TEXT...  write TEXT to /dev/kmsg, as the kernel would log it
 *
 * Run as init (rdinit=), it exits at once: the kernel then panics
 * ("Attempted to kill init"), which a boot must report as a failure too.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char *argv[])
{
	int i, fd;

	if (getpid() == 1)
		return 0;
	if (argc < 3) {
		fprintf(stderr, "usage: probe exit N [TEXT...] | sleep S | say TEXT... | kmsg TEXT...\n");
		return 2;
	}
	if (!strcmp(argv[1], "exit")) {
		for (i = 3; i < argc; i++)
			printf("%s%s", argv[i], i + 1 < argc ? " " : "\n");
		return atoi(argv[2]);
	}
	if (!strcmp(argv[1], "sleep")) {
		sleep(atoi(argv[2]));
		return 0;
	}
	if (!strcmp(argv[1], "say") || !strcmp(argv[1], "kmsg")) {
		FILE *f = stdout;

		if (!strcmp(argv[1], "kmsg")) {
			fd = open("/dev/kmsg", O_WRONLY);
			f = fd < 0 ? NULL : fdopen(fd, "w");
			if (!f) {
				perror("probe: /dev/kmsg");
				return 1;
			}
		}
		for (i = 2; i < argc; i++)
			fprintf(f, "%s%s", argv[i], i + 1 < argc ? " " : "\n");
		fclose(f);
		return 0;
	}
	fprintf(stderr, "probe: unknown command '%s'\n", argv[1]);
	return 2;
}
