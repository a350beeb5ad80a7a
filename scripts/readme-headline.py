#!/usr/bin/env python3
"""readme-headline.py [RESULTS_DIR] [--readme README.md]: the README's
headline figures, copied row by row from a `make bench` report.

Takes the rows named in ROWS (by their first cell) from RESULTS_DIR's
results.md (default: the newest bench/results/*/ that has one) and writes
them, with the run and the kernel it measured, between "<!-- headline -->"
and "<!-- /headline -->" in the README. A row that is missing is an error:
nothing is written then.
"""
import glob
import os
import re
import sys

ROWS = [
    "protected split hypercalls per 2 MiB block (debug boots, hyp events)",
    "protected broadcast TLBIs per split 2 MiB block (counted at EL2) (debug boots, hyp events)",
    "protected host exits per dirtied page in iteration 2 (fast path)",
    "protected stage-2 faults per block to touch every block again after logging off (restored in place) (debug boots, hyp events)",
    "protected speed-up of the fast path over the host path, w100, 1 vCPU (report; expected > 1.5 at w100)",
]


def die(msg):
    sys.exit("readme-headline: " + msg)


def main(argv):
    readme = "README.md"
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--readme":
            if i + 1 >= len(argv):
                die("--readme needs a path")
            readme = argv[i + 1]
            i += 2
            continue
        args.append(argv[i])
        i += 1
    if len(args) > 1:
        die("usage: readme-headline.py [RESULTS_DIR] [--readme README.md]")
    if args:
        rdir = args[0]
    else:
        dirs = sorted(d for d in glob.glob("bench/results/*/")
                      if os.path.isfile(os.path.join(d, "results.md")))
        if not dirs:
            die("no bench/results/*/results.md")
        rdir = dirs[-1]
    res = os.path.join(rdir, "results.md")
    if not os.path.isfile(res):
        die(f"no {res}")
    rows = {}
    for line in open(res, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and line.startswith("|"):
            rows.setdefault(cells[0], cells)
    kernel = "unknown"
    info = os.path.join(rdir, "README.txt")
    if os.path.isfile(info):
        for line in open(info, encoding="utf-8"):
            if line.startswith("kernel:"):
                kernel = line.split(":", 1)[1].strip()
    out = ["| figure (QEMU TCG, 5 boots per mode) | value [range] | target | |",
           "| --- | --- | --- | --- |"]
    for name in ROWS:
        if name not in rows:
            die(f"{res} has no row '{name}'")
        c = rows[name]
        out.append(f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} |")
    run = os.path.basename(os.path.normpath(rdir))
    out.append("")
    out.append(f"From [`{rdir.rstrip('/')}/results.md`]({rdir.rstrip('/')}/results.md) "
               f"(run {run}; kernel {kernel}), by `scripts/readme-headline.py`.")
    text = open(readme, encoding="utf-8").read()
    pat = re.compile(r"(<!-- headline -->\n).*?(<!-- /headline -->)", re.S)
    if not pat.search(text):
        die(f"{readme} has no <!-- headline --> block")
    text = pat.sub(lambda m: m.group(1) + "\n".join(out) + "\n" + m.group(2), text)
    open(readme, "w", encoding="utf-8").write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
