// SPDX-License-Identifier: GPL-2.0-only
/*
 * elmark - execute the elcount plugin's marker (scripts/elcount/README.md).
 *
 *   elmark TAG
 *
 * Runs "hint #0x7e" with x0 = TAG (a number, 0x... for hex). On hardware,
 * and under QEMU without the plugin, the hint is a NOP; under the plugin it
 * prints every counter, tagged. scripts/bench-counts.sh brackets each
 * benchmark run with two of these in the test list.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char *argv[])
{
	unsigned long tag;
	char *end;

	if (argc != 2) {
		fprintf(stderr, "usage: elmark TAG\n");
		return 2;
	}
	errno = 0;
	tag = strtoul(argv[1], &end, 0);
	if (errno || end == argv[1] || *end) {
		fprintf(stderr, "elmark: '%s' is not a number\n", argv[1]);
		return 2;
	}
	asm volatile("mov x0, %0\n\thint #0x7e" : : "r"(tag) : "x0", "memory");
	return 0;
}
