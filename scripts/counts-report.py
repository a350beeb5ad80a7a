#!/usr/bin/env python3
"""counts-report.py DIR [--readme README.md]: the report of make bench-counts.

Reads DIR/plan.txt (every planned run) and DIR/raw/<kind>-<mode>.log and
.results (serial logs with the elcount plugin's marker lines; boot.sh's
PASS/FAIL lines), writes DIR/counts.csv (one row per run) and DIR/counts.md
(per dirtied page: exceptions by kind, instructions per EL, TLBIs; and the
fast/host time ratios under -icount and TCG), and with --readme replaces
the block between "<!-- counts -->" and "<!-- /counts -->" in README.md
with this run's tables (not the -icount rows), its run and its kernel.

The -icount rows are labelled unusable: their iteration times repeat to
the nanosecond across modes and kernels (0.170886611 s in both modes of
2026-12-02-1952; 0.171884469 s in 2026-12-02-1952 and 2026-12-03-0855),
so virtual-timer deadlines set them, not instructions.

A run counts only if boot.sh reported it PASS and, for the counts runs,
both of its markers are in the log; every other planned run is listed as
failed. Cost per dirtied page of a cell = (run -i 4 - run -i 2, paired by
repetition, within one boot) / (2 iterations x 8192 pages); the table
gives the median over the pairs and their range.
"""
import os
import re
import statistics
import sys

PAGES = 8192            # 32 MiB of 4 KiB pages, per vCPU
EXTRA_ITERS = 2         # -i 4 minus -i 2
MARK = re.compile(r"elcount: mark 0x([0-9a-f]+)((?: [a-z0-9.]+=\d+)+)")
START = re.compile(r"^# start (\S+)$")
ITER_TIME = re.compile(r"Iteration (\d+) dirty memory time: (\d+)\.(\d+)s")
FAULTS = re.compile(r"Iteration (\d+) faults resolved by the host: (\d+), at EL2: (\d+)")
HYP_FAULTS = re.compile(r"hyp-expect: \d+ blocks split at EL2, (\d+) write faults resolved at EL2")
# Before the fault path went lock-free: "found the VM's lock held"; after:
# "waited (tried again)", a lost compare-and-exchange.
HYP_WAITED = re.compile(r"hyp-expect: (\d+) of the faults (?:resolved at EL2|EL2 took) (?:found the VM's lock held|waited)")
# hyp-expect wp_overlap: faults resolved at EL2 while another CPU was in a
# write-protect call of KVM_CLEAR_DIRTY_LOG, and how many if spread evenly.
HYP_WP = re.compile(r"hyp-expect: (\d+) of the faults resolved at EL2 came during another CPU's "
                    r"write-protect call \((\d+) calls; ([0-9.]+) if spread evenly\)")

# (column, counter or derived, what it is)
ROWS = [
    ("guest→EL2", "trans.el1lo.el2", "exceptions from the guest to EL2 (faults, traps, IRQs)"),
    ("EL2→guest", "trans.el2.el1lo", "ERETs from EL2 into the guest"),
    ("EL2→host", "trans.el2.el1hi", "returns from EL2 to the host kernel (nVHE/pKVM: world switches and hypercall returns)"),
    ("host→EL2", "trans.el1hi.el2", "host kernel to EL2 (nVHE/pKVM: hypercalls, vCPU entries)"),
    ("VMM→kernel", "trans.el0.el1", "syscalls and faults of the VMM process (nVHE/pKVM host at EL1)"),
    ("VMM→EL2", "trans.el0.el2", "syscalls of the VMM process under VHE (host kernel at EL2)"),
    ("insn guest", "insn.el1.lo", "instructions of the guest"),
    ("insn host", "insn.el1.hi", "instructions of the host kernel at EL1 (nVHE/pKVM)"),
    ("insn VMM", "insn.el0.lo", "instructions of the VMM process"),
    ("insn EL2", "insn.el2", "instructions at EL2 (the hypervisor; under VHE also the host kernel)"),
    ("TLBI bcast", "tlbi.bcast", "broadcast TLB invalidations (IS/OS)"),
    ("TLBI local", "tlbi.local", "local TLB invalidations"),
    ("faults host", "faults.host", "write faults the host resolved (the test's vCPU stats)"),
    ("faults EL2", "faults.el2", "write faults EL2 resolved (the test's vCPU stats)"),
]


def load_plan(d):
    plan = []
    with open(os.path.join(d, "plan.txt")) as f:
        for line in f:
            w = line.split()
            if len(w) not in (6, 7):
                continue
            kind, mode, k = w[0], w[1], int(w[2])
            kv = dict(x.split("=", 1) for x in w[3:])
            # Plans before the 2-vCPU cells had no vcpus= (and other names).
            plan.append({"kind": kind, "mode": mode, "k": k, "fast": kv["fast"],
                         "rep": int(kv["rep"]), "iters": int(kv["iters"]),
                         "vcpus": int(kv.get("vcpus", 1)), "v": "vcpus" in kv})
    return plan


def parse_log(path):
    """Markers by tag, and per test name its output lines."""
    marks, out, cur = {}, {}, None
    if not os.path.exists(path):
        return marks, out
    with open(path, errors="replace") as f:
        for line in f:
            m = MARK.search(line)
            if m:
                marks[int(m.group(1), 16)] = {
                    k: int(v) for k, v in (x.split("=") for x in m.group(2).split())}
                line = line[:m.start()] + line[m.end():]
            s = START.match(line.strip())
            if s:
                cur = s.group(1)
                out[cur] = []
            elif cur:
                out[cur].append(line)
    return marks, out


def passed(path):
    ok = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) >= 3 and w[0] == "PASS":
                    ok.add(w[2])
    return ok


def run_name(r):
    f = "x" if r["fast"] == "-" else r["fast"]
    v = "_v%d" % r["vcpus"] if r["v"] else ""
    if r["kind"] == "counts":
        return "r%d_f%s%s_%d_i%d" % (r["k"], f, v, r["rep"], r["iters"])
    if r["kind"] == "lock":
        return "l%d_f%s%s_%d" % (r["k"], f, v, r["rep"])
    if r["kind"] == "clear":
        return "c%d_f%s%s_%d" % (r["k"], f, v, r["rep"])
    return "t%d_f%s%s_%d" % (r["k"], f, v, r["rep"])


def faults(lines):
    host = el2 = 0
    for line in lines:
        m = FAULTS.search(line)
        if m and int(m.group(1)) >= 2:
            host += int(m.group(2))
            el2 += int(m.group(3))
    return host, el2


def dirty_ns(lines):
    t = [int(m.group(2)) * 10**9 + int(m.group(3).ljust(9, "0")[:9])
         for line in lines for m in [ITER_TIME.search(line)] if m and int(m.group(1)) >= 2]
    return sum(t), len(t)


def rng(vals, fmt):
    if not vals:
        return "–"
    med = statistics.median(vals)
    if len(vals) == 1 or min(vals) == max(vals):
        return fmt % med
    return (fmt + " (" + fmt + "–" + fmt + ")") % (med, min(vals), max(vals))


def cell_label(mode, fast, vcpus=1):
    v = ", %d vCPUs" % vcpus if vcpus > 1 else ""
    if fast == "1":
        return mode + ", fast path" + v
    if fast == "0":
        return mode + ", host path" + v
    return mode + v


def main():
    args = sys.argv[1:]
    readme = None
    if "--readme" in args:
        i = args.index("--readme")
        readme = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit("usage: counts-report.py DIR [--readme README.md]")
    d = args[0]
    plan = load_plan(d)
    if not plan:
        sys.exit("counts-report: %s/plan.txt lists no run" % d)
    logs, oks = {}, {}
    rows, failed = [], []
    for r in plan:
        # The clear runs share the lock boots.
        key = ("lock" if r["kind"] == "clear" else r["kind"], r["mode"])
        if key not in logs:
            logs[key] = parse_log(os.path.join(d, "raw", "%s-%s.log" % key))
            oks[key] = passed(os.path.join(d, "raw", "%s-%s.results" % key))
        marks, out = logs[key]
        name = run_name(r)
        lines = out.get(name, [])
        if name not in oks[key]:
            failed.append("%s %s %s: not reported PASS" % (r["kind"], r["mode"], name))
            continue
        row = dict(r, name=name)
        row["faults.host"], row["faults.el2"] = faults(lines)
        if r["kind"] == "counts":
            a, b = marks.get(2 * r["k"]), marks.get(2 * r["k"] + 1)
            if not a or not b:
                failed.append("%s %s %s: a marker is missing" % (r["kind"], r["mode"], name))
                continue
            row.update({c: b[c] - a[c] for c in a})
        elif r["kind"] == "lock":
            text = "".join(lines)
            fm, wm = HYP_FAULTS.search(text), HYP_WAITED.search(text)
            if not fm or not wm or not int(fm.group(1)):
                failed.append("%s %s %s: no hyp-expect counts" % (r["kind"], r["mode"], name))
                continue
            row["el2_faults"], row["waited"] = int(fm.group(1)), int(wm.group(1))
        elif r["kind"] == "clear":
            text = "".join(lines)
            fm, om = HYP_FAULTS.search(text), HYP_WP.search(text)
            if not fm or not om or not int(om.group(2)):
                failed.append("%s %s %s: no hyp-expect write-protect overlap" % (r["kind"], r["mode"], name))
                continue
            row["el2_faults"], row["wp_in"] = int(fm.group(1)), int(om.group(1))
            row["wp_calls"], row["wp_even"] = int(om.group(2)), float(om.group(3))
        else:
            row["ns"], row["iters_timed"] = dirty_ns(lines)
            if row["iters_timed"] != r["iters"] - 1:
                failed.append("%s %s %s: %d dirty iterations timed" %
                              (r["kind"], r["mode"], name, row["iters_timed"]))
                continue
        rows.append(row)

    keys = sorted({k for r in rows for k in r if k.startswith(("insn.", "trans.", "tlbi."))})
    with open(os.path.join(d, "counts.csv"), "w") as f:
        cols = ["kind", "mode", "fast", "vcpus", "rep", "iters", "name", "faults.host", "faults.el2",
                "ns", "el2_faults", "waited", "wp_in", "wp_calls", "wp_even"] + keys
        f.write(",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(str(r.get(c, "")) for c in cols) + "\n")

    # Per dirtied page: -i 4 minus -i 2 of the same cell and repetition.
    cells = {}
    for r in rows:
        if r["kind"] != "counts":
            continue
        cells.setdefault((r["mode"], r["fast"], r["vcpus"]), {}).setdefault(r["rep"], {})[r["iters"]] = r
    per_page = {}
    for cell, reps in cells.items():
        for rep, runs in reps.items():
            if 2 in runs and 4 in runs:
                diff = {c: (runs[4].get(c, 0) - runs[2].get(c, 0)) / (EXTRA_ITERS * PAGES * cell[2])
                        for _, c, _ in ROWS}
                per_page.setdefault(cell, []).append(diff)
    order = []
    for mode in ("protected", "protected-nvhe", "nvhe", "vhe"):
        for fast in ("1", "0", "-"):
            for v in (1, 2):
                if (mode, fast, v) in per_page:
                    order.append((mode, fast, v))

    md = ["# bench-counts: what a dirtied page costs, in counts", ""]
    readme_txt = os.path.join(d, "README.txt")
    if os.path.exists(readme_txt):
        md += ["    " + line.rstrip() for line in open(readme_txt)] + [""]
    md += ["Per dirtied page: (run with -i 4 − run with -i 2, same cell, same boot, "
           "paired by repetition) / (%d × %d pages × vCPUs). Median over the pairs, their range "
           "in brackets. Everything the two runs share cancels; what differs is two "
           "dirty iterations: the guest's write faults, their resolution, and the get "
           "and clear of the log (KVM_GET_DIRTY_LOG, KVM_CLEAR_DIRTY_LOG), with timer "
           "ticks during them (host time, not instructions: the one source of noise)."
           % (EXTRA_ITERS, PAGES), ""]
    table = ["| per dirtied page | " + " | ".join(cell_label(*c) + " (%d)" % len(per_page[c]) for c in order) + " |",
             "| --- |" + " --- |" * len(order)]
    if not order:
        table = ["No counts runs (the elcount plugin's boots) in this run."]
    for label, c, _ in (ROWS if order else []):
        vals = [[p[c] for p in per_page[cell]] for cell in order]
        if all(abs(v) < 0.005 for vs in vals for v in vs):
            continue
        fmt = "%.0f" if c.startswith("insn.") else "%.2f"
        table.append("| " + label + " | " + " | ".join(rng(v, fmt) for v in vals) + " |")
    md += table + [""]
    if order:
        md += ["Rows: " + "; ".join("**%s**: %s" % (label, what) for label, _, what in ROWS) + ".", ""]

    # Time ratios, fast path / host path, paired by repetition within a boot.
    ratio_lines, icount_lines = [], []
    for kind, what in (("icount", "-icount shift=0,sleep=off (unusable: times repeat to the "
                                  "nanosecond across modes and kernels)"),
                       ("tcg", "TCG wall time")):
        for mode in ("protected", "protected-nvhe"):
          for v in (1, 2):
            pairs = {}
            for r in rows:
                if r["kind"] == kind and r["mode"] == mode and r["vcpus"] == v:
                    pairs.setdefault(r["rep"], {})[r["fast"]] = r
            ratios = [p["1"]["ns"] / p["0"]["ns"] for p in pairs.values()
                      if "1" in p and "0" in p and p["0"]["ns"]]
            fast_ns = [p["1"]["ns"] / ((p["1"]["iters_timed"]) * PAGES * v) for p in pairs.values() if "1" in p]
            host_ns = [p["0"]["ns"] / ((p["0"]["iters_timed"]) * PAGES * v) for p in pairs.values() if "0" in p]
            if ratios:
                ratio_lines.append("| %s | %d | %s | %s | %s | %s |" % (
                    mode, v, what, rng(fast_ns, "%.0f"), rng(host_ns, "%.0f"), rng(ratios, "%.3f")))
                if kind == "icount":
                    icount_lines.append(ratio_lines[-1])
    if ratio_lines:
        md += ["## Time per dirtied page, fast path against host path (same boot, paired)", "",
               "| mode | vCPUs | clock | fast path ns/page | host path ns/page | fast / host |",
               "| --- | --- | --- | --- | --- | --- |"] + ratio_lines + [""]
    # Scaling (issue #25 item 4): a fault's cost at 2 vCPUs against 1.
    def pairings(a, b):
        return [x / y for x in a for y in b if y]

    def verdict(ratios):
        if not ratios:
            return "–"
        return "met" if statistics.median(ratios) <= 1.0 else "missed"
    scale_head = ["| mode | measure | 1 vCPU | 2 vCPUs | 2 / 1 (every pairing) | target | verdict |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
    scale_lines = []
    for mode in ("protected", "protected-nvhe", "nvhe", "vhe"):
        for fast in ("1", "0", "-"):
            one, two = per_page.get((mode, fast, 1)), per_page.get((mode, fast, 2))
            if not one or not two:
                continue
            a, b = [p["insn.el2"] for p in one], [p["insn.el2"] for p in two]
            rs = pairings(b, a)
            scale_lines.append("| %s | EL2 instructions per dirtied page | %s | %s | %s | ≤ 1 | %s |" % (
                cell_label(mode, fast), rng(a, "%.0f"), rng(b, "%.0f"), rng(rs, "%.2f"), verdict(rs)))
        for fast in ("1", "0"):
            t = {v: [r["ns"] / (r["iters_timed"] * PAGES) for r in rows
                     if r["kind"] == "tcg" and r["mode"] == mode and r["fast"] == fast and r["vcpus"] == v]
                 for v in (1, 2)}
            if t[1] and t[2]:
                rs = pairings(t[2], t[1])
                scale_lines.append("| %s | vCPU-ns per dirtied page (TCG wall time × vCPUs / pages) | %s | %s | %s | report | reported |" % (
                    cell_label(mode, fast), rng(t[1], "%.0f"), rng(t[2], "%.0f"), rng(rs, "%.2f")))
        w = {v: [r["waited"] / r["el2_faults"] for r in rows
                 if r["kind"] == "lock" and r["mode"] == mode and r["vcpus"] == v]
             for v in (1, 2)}
        if w[1] or w[2]:
            tot = {v: (sum(r["waited"] for r in rows if r["kind"] == "lock" and r["mode"] == mode and r["vcpus"] == v),
                       sum(r["el2_faults"] for r in rows if r["kind"] == "lock" and r["mode"] == mode and r["vcpus"] == v))
                   for v in (1, 2)}
            scale_lines.append("| %s | faults resolved at EL2 that waited: the VM's lock held, or a lost compare-and-exchange since the fault path takes no lock (debug kernel, hyp events) | %s (%d of %d) | %s (%d of %d) | – | ≤ 0.005 at 2 vCPUs (issue #26) | %s |" % (
                cell_label(mode, "1"), rng([100 * x for x in w[1]], "%.2f%%"), tot[1][0], tot[1][1],
                rng([100 * x for x in w[2]], "%.2f%%"), tot[2][0], tot[2][1],
                "–" if not w[2] else ("met" if max(w[2]) <= 0.005 else "missed")))
        c = [r for r in rows if r["kind"] == "clear" and r["mode"] == mode]
        if c:
            scale_lines.append("| %s | faults resolved at EL2 during another CPU's write-protect call of KVM_CLEAR_DIRTY_LOG (dirty_log_migrate_perf_test, bitmap; in brackets: if spread evenly over time) | – | %s (%d of %d faults, %d calls) [%s] | – | > 0 in every run (issue #26) | %s |" % (
                cell_label(mode, "1"), rng([r["wp_in"] for r in c], "%d"), sum(r["wp_in"] for r in c),
                sum(r["el2_faults"] for r in c), sum(r["wp_calls"] for r in c),
                rng([r["wp_even"] for r in c], "%.0f"),
                "met" if min(r["wp_in"] for r in c) > 0 else "missed"))
    if scale_lines:
        md += ["## A fault at 2 vCPUs against 1", "",
               "With 2 vCPUs each writes its own 32 MiB; per dirtied page as above. Two "
               "host cores run the guest's 2 vCPUs and the VMM's main thread, so the time "
               "row overstates what 2 vCPUs cost; the instruction rows do not depend on it. "
               "Pairings: every 2-vCPU pair against every 1-vCPU pair of the cell.", ""] + \
            scale_head + scale_lines + [""]
    md += ["## Runs", "", "%d planned, %d counted, %d failed." % (len(plan), len(rows), len(failed))]
    md += ["- " + x for x in failed] + [""]
    with open(os.path.join(d, "counts.md"), "w") as f:
        f.write("\n".join(md))

    if readme:
        text = open(readme).read()
        a, b = "<!-- counts -->", "<!-- /counts -->"
        if a not in text or b not in text:
            sys.exit("counts-report: %s has no %s ... %s block" % (readme, a, b))
        rel = os.path.relpath(d, os.path.dirname(os.path.abspath(readme)))
        info = {}
        if os.path.exists(readme_txt):
            for line in open(readme_txt):
                if ":" in line:
                    k, v = line.split(":", 1)
                    info.setdefault(k.strip(), v.strip())
        ran = "kernel %s" % info.get("kernel", "unknown (no kernel: line in README.txt)")
        if "lock boots" in info:
            ran += "; lock boots: %s" % info["lock boots"].split(";")[0]
        block = [a, "From [`%s/counts.md`](%s/counts.md) (generated by "
                 "`scripts/counts-report.py`): run %s, %d of %d planned runs counted; %s."
                 % (os.path.normpath(d), rel, os.path.basename(os.path.normpath(d)), len(rows),
                    len(plan), ran),
                 ""] + table + [""]
        # The -icount rows stay in counts.md, labelled unusable, not here.
        usable = [x for x in ratio_lines if x not in icount_lines]
        if usable:
            block += ["| mode | vCPUs | clock | fast path ns/page | host path ns/page | fast / host |",
                      "| --- | --- | --- | --- | --- | --- |"] + usable + [""]
        if scale_lines:
            block += scale_head + scale_lines + [""]
        block += [b]
        pre, rest = text.split(a, 1)
        post = rest.split(b, 1)[1]
        with open(readme, "w") as f:
            f.write(pre + "\n".join(block) + post)
    print("counts-report: %d of %d runs counted, %d failed; %s/counts.md" %
          (len(rows), len(plan), len(failed), d))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
