#!/usr/bin/env python3
"""readme-headline.py [RESULTS_DIR] [--counts COUNTS_DIR] [--readme README.md]:
the README's headline figures, copied row by row from generated reports.

Takes the rows named in ROWS (by their first cell) from RESULTS_DIR's
results.md (default: the newest bench/results/*/ that has one), and the
returns from EL2 to the host per dirtied page (the elcount plugin's EL2→host
row, which counts every return, not only the faults the host resolved) from
COUNTS_DIR's counts.md (default: the newest bench/counts/*/ whose counts.md
has that row for protected's fast path), and writes them, each source with
its run, its run count and the kernel it measured, between
"<!-- headline -->" and "<!-- /headline -->" in the README. A row that is
missing is an error: nothing is written then.
"""
import glob
import os
import re
import sys

ROWS = [
    "protected split hypercalls per 2 MiB block (debug boots, hyp events)",
    "protected broadcast TLBIs per split 2 MiB block (counted at EL2) (debug boots, hyp events)",
    "protected host-resolved stage-2 faults per dirtied page in iteration 2 (fast path)",
    None,  # the returns to the host, from counts.md
    "protected stage-2 faults per block to touch every block again after logging off (restored in place) (debug boots, hyp events)",
    "protected speed-up of the fast path over the host path, iteration 2, w100, 1 vCPU (report; expected > 1.5 at w100)",
]
# counts.md: the row, and the columns of protected's fast and host paths.
COUNTS_ROW = "EL2→host"
COUNTS_COLS = ("protected, fast path (", "protected, host path (")


def die(msg):
    sys.exit("readme-headline: " + msg)


def table_rows(path):
    """Every markdown table row of @path, as lists of cells."""
    rows = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def returns_row(path):
    """(fast path, host path, pairs) of protected's EL2→host per dirtied
    page in @path (a counts.md), or None if it has no such row."""
    head = None
    for cells in table_rows(path):
        if cells and cells[0] == "per dirtied page":
            head = cells
        elif head and cells and cells[0] == COUNTS_ROW:
            idx = []
            for want in COUNTS_COLS:
                i = [k for k, c in enumerate(head) if c.startswith(want)]
                if not i:
                    return None
                idx.append(i[0])
            pairs = re.search(r"\((\d+)\)$", head[idx[0]])
            return cells[idx[0]], cells[idx[1]], pairs.group(1) if pairs else "?"
    return None


def kernel_of(d):
    info = os.path.join(d, "README.txt")
    if os.path.isfile(info):
        for line in open(info, encoding="utf-8"):
            if line.startswith("kernel:"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def newest(top, name, ok=None, what=""):
    """The newest run folder under top whose file name exists (and passes ok)."""
    dirs = sorted(d for d in glob.glob(top + "/*/")
                  if os.path.isfile(os.path.join(d, name)) and
                  (ok is None or ok(os.path.join(d, name))))
    if not dirs:
        die(f"no {top}/*/{name} {what}".rstrip())
    return dirs[-1]


def checked(d, name):
    path = os.path.join(d, name)
    if not os.path.isfile(path):
        die(f"no {path}")
    return path


def main(argv):
    readme = "README.md"
    cdir = None
    args = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--readme", "--counts"):
            if i + 1 >= len(argv):
                die(f"{argv[i]} needs a path")
            if argv[i] == "--readme":
                readme = argv[i + 1]
            else:
                cdir = argv[i + 1]
            i += 2
            continue
        args.append(argv[i])
        i += 1
    if len(args) > 1:
        die("usage: readme-headline.py [RESULTS_DIR] [--counts COUNTS_DIR] [--readme README.md]")
    rdir = args[0] if args else newest("bench/results", "results.md")
    res = checked(rdir, "results.md")
    rows = {}
    for cells in table_rows(res):
        if len(cells) >= 4:
            rows.setdefault(cells[0], cells)
    runs = re.search(r"^Runs: (.*?)\.?\s*$", open(res, encoding="utf-8").read(), re.M)
    if not runs:
        die(f"{res} has no Runs: line")
    runs = runs.group(1)
    m = re.match(r"(\d+) planned \(raw/\*\.list\), (\d+) ok, (\d+) failed \(.*?\); (.*)$", runs)
    if m:
        runs = f"{m.group(2)} of {m.group(1)} planned runs ok, {m.group(3)} failed; {m.group(4)}"
    if cdir is None:
        cdir = newest("bench/counts", "counts.md", returns_row, "with an EL2→host row for protected")
    cres = checked(cdir, "counts.md")
    ret = returns_row(cres)
    if not ret:
        die(f"{cres} has no {COUNTS_ROW} row with columns {COUNTS_COLS}")
    cruns = re.search(r"^(\d+) planned, (\d+) counted, (\d+) failed\.", open(cres, encoding="utf-8").read(), re.M)
    if not cruns:
        die(f"{cres} has no run count")
    out = ["| figure (QEMU TCG) | value [range] | target | |",
           "| --- | --- | --- | --- |"]
    for name in ROWS:
        if name is None:
            out.append(f"| protected returns from EL2 to the host per dirtied page, fast path "
                       f"(elcount plugin: world switches and hypercall returns, whatever the cause) | "
                       f"{ret[0]}; host path {ret[1]} | report | reported |")
            continue
        if name not in rows:
            die(f"{res} has no row '{name}'")
        c = rows[name]
        out.append(f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} |")
    run = os.path.basename(os.path.normpath(rdir))
    crun = os.path.basename(os.path.normpath(cdir))
    r, c = rdir.rstrip("/"), cdir.rstrip("/")
    out.append("")
    out.append(f"From [`{r}/results.md`]({r}/results.md) (run {run}: {runs}; "
               f"kernel {kernel_of(rdir)}) but the returns row, from "
               f"[`{c}/counts.md`]({c}/counts.md) (run {crun}: {cruns.group(2)} of "
               f"{cruns.group(1)} planned runs counted, {ret[2]} pairs per cell, median "
               f"(range); kernel {kernel_of(cdir)}); by `scripts/readme-headline.py`.")
    text = open(readme, encoding="utf-8").read()
    pat = re.compile(r"(<!-- headline -->\n).*?(<!-- /headline -->)", re.S)
    if not pat.search(text):
        die(f"{readme} has no <!-- headline --> block")
    text = pat.sub(lambda m: m.group(1) + "\n".join(out) + "\n" + m.group(2), text)
    open(readme, "w", encoding="utf-8").write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
