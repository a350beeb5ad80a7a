#!/usr/bin/env bash
# seed-log-check.sh <serial log>: the memstress_seed_check run must have
# written about 10% of its pages in iteration 2 (exactly as many stage-2
# faults, with eager split on). Without the memstress seed fix vCPU 0's
# generator is stuck at 0 and writes every page.
set -euo pipefail
log=$1
block=$(sed -n '/# start memstress_seed_check/,/^\(not \)\?ok [0-9]* memstress_seed_check/p' "$log")
faults=$(echo "$block" | sed -n 's/^# Iteration 2 stage-2 faults: \([0-9]*\)$/\1/p' | head -1)
pages=$(( 32 * 1024 * 1024 / 4096 ))
[ -n "$faults" ] || { echo "seed-log-check: no iteration-2 fault count in $log"; exit 1; }
# 10% of 8192 pages is 819; allow 5%..20%.
if [ "$faults" -lt $(( pages / 20 )) ] || [ "$faults" -gt $(( pages / 5 )) ]; then
	echo "seed-log-check: -w 10 took $faults faults for $pages pages: the guest's random generator is not seeded"
	exit 1
fi
echo "seed-log-check: -w 10 took $faults faults for $pages pages (about 10%)"
