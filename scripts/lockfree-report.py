#!/usr/bin/env python3
"""lockfree-report.py DIR [--readme README.md]: the report of make bench-lockfree.

Reads DIR/<kernel>-<mode>/counts.csv (bench-counts' counts boots of the
kernels 'nodebug', whose EL2 fault path takes no lock, and 'nodebug-locked',
the same tree with the fault path under the VM's lock) and writes
DIR/results.md; with --readme, its tables between "<!-- lockfree -->" and
"<!-- /lockfree -->" in README.md.

Per dirtied page of a cell (kernel, mode, vCPUs) and repetition: (run -i 4 -
run -i 2) / (2 x 8192 pages x vCPUs), as bench-counts. Two comparisons:

 - the medians of EL2 instructions per dirtied page, and their ranges;
 - the same with the world switches to the host factored out. Each return
   from EL2 to the host (trans.el2.el1hi: vCPU exits for timer ticks and
   IPIs, hypercalls) costs a world switch and back, and under TCG their
   rate per page follows wall time, not the code under test. Per mode, one
   least-squares fit over every pair of both kernels:
       insn.el2 per page = a[kernel, vCPUs] + b * (EL2->host per page)
   a is the cost of a dirtied page with no exit to the host, b that of an
   exit, common to both kernels (the world switch is the same code). The
   differences of the a's are given with their standard errors.

Contention (issue #43), if DIR has contention-<kernel>-<mode>.log (the
boots of 'default-cntpct', lock-free, and 'default-cntpct-locked', with hyp
events): per run of dirty_log_migrate_perf_test -I (vCPUs writing
interleaved pages while the host clears the log), from hyp-expect: the
faults EL2 resolved, those that waited (the locked step: found the VM's
lock held; the lock-free step: lost the exchange and went to the host),
and those resolved while another CPU was in a write-protect call (with
how many if spread evenly over time). A run counts only if boot.sh
reported it PASS.

Verdicts (issue #26): at 1 vCPU, the lock-free kernel within the noise of
the locked one: their exit-free costs a differ by at most two standard
errors of the difference (the medians' ranges are shown too, but a range
of 4 pairs hides a shift of a few instructions); at 2 vCPUs against 1, each
kernel's exit-free cost a[2] <= a[1] within two standard errors.
"""
import csv
import math
import os
import re
import statistics
import sys

PAGES = 8192
KERNELS = ("nodebug-locked", "nodebug")
LABEL = {"nodebug-locked": "locked step (patch 18)", "nodebug": "lock-free step (el2-lockfree)"}
CKERNELS = ("default-cntpct-locked", "default-cntpct")
CLABEL = {"default-cntpct-locked": "locked", "default-cntpct": "lock-free"}
RESULT = re.compile(r"^(PASS|FAIL) \S+ (\S+)")
HOST = re.compile(r"Rounds: stage-2 faults resolved by the host: (\d+), at EL2: (\d+)")


def _counts_report():
    """bench-counts' report module: the serial log's line formats are its."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "counts_report", os.path.join(os.path.dirname(os.path.abspath(__file__)), "counts-report.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_CR = _counts_report()
START, HYP_FAULTS, HYP_WAITED, HYP_WP = _CR.START, _CR.HYP_FAULTS, _CR.HYP_WAITED, _CR.HYP_WP


def contention(d, k, mode):
    """Runs of one contention boot: {name: dict}, and the failed names."""
    log = os.path.join(d, "contention-%s-%s.log" % (k, mode))
    res = os.path.join(d, "contention-%s-%s.results" % (k, mode))
    lst = os.path.join(d, "contention-%s-%s.list" % (k, mode))
    if not os.path.exists(log):
        return None, []
    planned = [line.split()[1] for line in open(lst) if line.strip() and not line.startswith("#")]
    passed = set()
    for line in open(res):
        m = RESULT.match(line)
        if m and m.group(1) == "PASS":
            passed.add(m.group(2))
    runs, cur = {}, None
    for line in open(log, errors="replace"):
        line = line.rstrip()
        m = START.match(line)
        if m:
            cur = runs.setdefault(m.group(1), {})
            continue
        if cur is None:
            continue
        for key, rx in (("el2", HYP_FAULTS), ("waited", HYP_WAITED), ("wp", HYP_WP), ("host", HOST)):
            m = rx.search(line)
            if m:
                cur[key] = m.groups()
    ok, failed = {}, []
    for name in planned:
        r = runs.get(name, {})
        if name in passed and all(x in r for x in ("el2", "waited", "wp", "host")):
            ok[name] = {"vcpus": int(name.split("_")[1][1:]), "el2": int(r["el2"][0]),
                        "waited": int(r["waited"][0]), "wp": int(r["wp"][0]),
                        "calls": int(r["wp"][1]), "even": float(r["wp"][2]),
                        "host": int(r["host"][0])}
        else:
            failed.append(name)
    return ok, failed


def die(msg):
    sys.exit("lockfree-report: " + msg)


def pairs(path, mode):
    """(vcpus, insn.el2 per page, EL2->host per page) per repetition."""
    runs = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["kind"] == "counts" and r["mode"] == mode and r["fast"] == "1" and r["insn.el2"]:
                runs[(int(r["vcpus"]), r["rep"], r["iters"])] = r
    out = []
    for (v, rep, it), r in sorted(runs.items()):
        a = runs.get((v, rep, "2"))
        if it != "4" or a is None:
            continue
        n = 2 * PAGES * v
        out.append((v, (int(r["insn.el2"]) - int(a["insn.el2"])) / n,
                    (int(r["trans.el2.el1hi"]) - int(a["trans.el2.el1hi"])) / n))
    return out


def solve(m, y):
    """Least squares: coefficients and their covariance (normal equations)."""
    p = len(m[0])
    xtx = [[sum(row[i] * row[j] for row in m) for j in range(p)] for i in range(p)]
    xty = [sum(row[i] * t for row, t in zip(m, y)) for i in range(p)]
    # Gauss-Jordan inverse of X'X.
    aug = [xtx[i][:] + [float(i == j) for j in range(p)] for i in range(p)]
    for c in range(p):
        piv = max(range(c, p), key=lambda i: abs(aug[i][c]))
        if abs(aug[piv][c]) < 1e-12:
            return None, None
        aug[c], aug[piv] = aug[piv], aug[c]
        d = aug[c][c]
        aug[c] = [x / d for x in aug[c]]
        for i in range(p):
            if i != c and aug[i][c]:
                f = aug[i][c]
                aug[i] = [x - f * z for x, z in zip(aug[i], aug[c])]
    inv = [row[p:] for row in aug]
    coef = [sum(inv[i][j] * xty[j] for j in range(p)) for i in range(p)]
    dof = len(y) - p
    if dof <= 0:
        return coef, None
    rss = sum((t - sum(c * x for c, x in zip(coef, row))) ** 2 for row, t in zip(m, y))
    s2 = rss / dof
    return coef, [[s2 * x for x in row] for row in inv]


def rng(xs, fmt="%.0f"):
    if not xs:
        return "–"
    return (fmt % statistics.median(xs)) + " (" + (fmt % min(xs)) + "–" + (fmt % max(xs)) + ")"


def main():
    args = sys.argv[1:]
    readme = None
    if len(args) == 3 and args[1] == "--readme":
        readme = args[2]
    elif len(args) != 1:
        die("usage: lockfree-report.py DIR [--readme README.md]")
    d = args[0]
    modes = []
    data = {}
    for name in sorted(os.listdir(d)):
        for k in KERNELS:
            if name.startswith(k + "-") and name[len(k) + 1:] in ("protected", "protected-nvhe"):
                mode = name[len(k) + 1:]
                path = os.path.join(d, name, "counts.csv")
                if not os.path.exists(path):
                    die("no %s: that boot's bench-counts did not finish" % path)
                data[(k, mode)] = pairs(path, mode)
                if mode not in modes:
                    modes.append(mode)
    if not data:
        die("no <kernel>-<mode>/counts.csv in " + d)

    md = ["# bench-lockfree: the EL2 fault path without the VM's lock against the locked one", ""]
    for name in ("README.txt", "README-contention.txt"):
        about = os.path.join(d, name)
        if os.path.exists(about):
            md += ["    " + line.rstrip() for line in open(about)] + [""]
    md += ["Per dirtied page: (run -i 4 − run -i 2, same cell, same boot, paired by repetition) / "
           "(2 × 8192 pages × vCPUs), dirty_log_perf_test on 2 MiB hugetlb, eager split on, "
           "fast path on. One boot per kernel and mode, in a seeded order. \"Exit-free\": the fit "
           "insn.el2 = a[kernel, vCPUs] + b × (EL2→host per page) over both kernels' pairs of the "
           "mode (scripts/lockfree-report.py says why); ± one standard error.", ""]

    md += ["## EL2 instructions per dirtied page", "",
           "| mode | vCPUs | " + " | ".join(LABEL[k] for k in KERNELS) +
           " | EL2→host per page, locked | EL2→host per page, lock-free |",
           "| --- | --- | --- | --- | --- | --- |"]
    vcpus_all = sorted({v for rows in data.values() for v, _, _ in rows})
    for mode in modes:
        for v in vcpus_all:
            cells = [[y for vv, y, _ in data.get((k, mode), []) if vv == v] for k in KERNELS]
            exits = [[x for vv, _, x in data.get((k, mode), []) if vv == v] for k in KERNELS]
            md.append("| %s | %d | %s | %s | %s | %s |" % (mode, v, rng(cells[0]), rng(cells[1]),
                                                           rng(exits[0], "%.3f"), rng(exits[1], "%.3f")))
    md.append("")

    md += ["## With the exits to the host factored out", "",
           "| mode | vCPUs | a, locked | a, lock-free | lock-free − locked | b (per exit) | pairs |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    verdicts = []
    for mode in modes:
        cols = [(k, v) for k in KERNELS for v in vcpus_all if any(vv == v for vv, _, _ in data.get((k, mode), []))]
        m, y = [], []
        for k in KERNELS:
            for v, yy, x in data.get((k, mode), []):
                m.append([float((k, v) == c) for c in cols] + [x])
                y.append(yy)
        coef, cov = solve(m, y)
        if coef is None or cov is None:
            md.append("| %s | – | too few pairs for the fit | | | | %d |" % (mode, len(y)))
            continue
        a = {c: (coef[i], math.sqrt(cov[i][i])) for i, c in enumerate(cols)}
        b = (coef[-1], math.sqrt(cov[-1][-1]))

        def diff(c1, c2):
            i, j = cols.index(c1), cols.index(c2)
            return coef[i] - coef[j], math.sqrt(max(cov[i][i] + cov[j][j] - 2 * cov[i][j], 0))

        for v in vcpus_all:
            lk, lf = ("nodebug-locked", v), ("nodebug", v)
            if lk in a and lf in a:
                dv, ds = diff(lf, lk)
                md.append("| %s | %d | %.0f ± %.0f | %.0f ± %.0f | %+.1f ± %.1f | %.0f ± %.0f | %d |" % (
                    mode, v, a[lk][0], a[lk][1], a[lf][0], a[lf][1], dv, ds, b[0], b[1], len(y)))
        # Verdicts.
        one_lk = [yy for vv, yy, _ in data.get(("nodebug-locked", mode), []) if vv == 1]
        one_lf = [yy for vv, yy, _ in data.get(("nodebug", mode), []) if vv == 1]
        if one_lk and one_lf:
            med = statistics.median(one_lf)
            dv, ds = diff(("nodebug", 1), ("nodebug-locked", 1))
            ok = abs(dv) <= 2 * ds
            verdicts.append("| %s | 1-vCPU fast path, lock-free against locked, within the noise (exit-free "
                            "difference within two standard errors of 0) | %+.1f ± %.1f instructions per page "
                            "(%+.1f%%); medians %.0f against %.0f (%.0f–%.0f) | %s |" % (
                                mode, dv, ds, 100 * dv / a[("nodebug-locked", 1)][0], med,
                                statistics.median(one_lk), min(one_lk), max(one_lk),
                                "met" if ok else "missed"))
        for k in KERNELS:
            if (k, 1) in a and (k, 2) in a:
                dv, ds = diff((k, 2), (k, 1))
                ratio = a[(k, 2)][0] / a[(k, 1)][0]
                ok = dv <= 2 * ds
                verdicts.append("| %s | %s: exit-free EL2 instructions per page, 2 vCPUs against 1 "
                                "(≤ 1 within two standard errors) | %.0f / %.0f = %.3f (%+.1f ± %.1f) | %s |" % (
                                    mode, LABEL[k], a[(k, 2)][0], a[(k, 1)][0], ratio, dv, ds,
                                    "met" if ok else "missed"))
    md.append("")

    crows, cverdicts, cfailed, cruns = [], [], [], 0
    for mode in modes:
        got = {}
        for k in CKERNELS:
            ok, failed = contention(d, k, mode)
            if ok is None:
                continue
            got[k] = ok
            cfailed += ["%s %s %s" % (k, mode, f) for f in failed]
            cruns += len(ok)
        for v in sorted({r["vcpus"] for ok in got.values() for r in ok.values()}):
            for k in CKERNELS:
                rs = [r for r in got.get(k, {}).values() if r["vcpus"] == v]
                if not rs:
                    continue
                crows.append("| %s | %d | %s | %d | %s | %s (%s) | %s (%s) [%s] | %s |" % (
                    mode, v, CLABEL[k], len(rs), rng([r["el2"] for r in rs]),
                    rng([r["waited"] for r in rs]),
                    rng([100.0 * r["waited"] / max(r["el2"], 1) for r in rs], "%.2f%%"),
                    rng([r["wp"] for r in rs]),
                    rng([100.0 * r["wp"] / max(r["el2"], 1) for r in rs], "%.1f%%"),
                    rng([r["even"] for r in rs]),
                    rng([r["host"] for r in rs])))
            lk = [r for r in got.get("default-cntpct-locked", {}).values() if r["vcpus"] == v]
            lf = [r for r in got.get("default-cntpct", {}).values() if r["vcpus"] == v]
            if lk:
                n = sum(1 for r in lk if r["waited"])
                cverdicts.append("| %s | locked step, %d vCPU%s: faults that found the VM's lock held "
                                 "(> 0 in every run: contention can be seen) | %d of %d runs; %s of the "
                                 "faults | %s |" % (mode, v, "s" if v > 1 else "", n, len(lk),
                                                    rng([100.0 * r["waited"] / max(r["el2"], 1) for r in lk], "%.2f%%"),
                                                    "met" if n == len(lk) else "missed"))
            if lk and lf:
                a = statistics.median([r["wp"] / max(r["el2"], 1) for r in lk])
                b = statistics.median([r["wp"] / max(r["el2"], 1) for r in lf])
                cverdicts.append("| %s | %d vCPU%s: share of faults resolved during another CPU's "
                                 "write-protect call, lock-free against locked (higher: the fault "
                                 "does not wait for the write-protect) | %.1f%% against %.1f%% | %s |" % (
                                     mode, v, "s" if v > 1 else "", 100 * b, 100 * a,
                                     "met" if b > a else "missed"))
    if crows:
        md += ["## Contention: faults while the host clears the log", "",
               "dirty_log_migrate_perf_test -I (vCPUs write interleaved pages, so they fault on one "
               "last-level table, while the host runs KVM_GET_DIRTY_LOG + KVM_CLEAR_DIRTY_LOG with "
               "the vCPUs in KVM_RUN), kernels with hyp events (NVHE_EL2_DEBUG=y: not the production "
               "config), one boot per kernel and mode. Median (range) over the runs. \"Waited\": "
               "locked step, the fault found the VM's lock held; lock-free step, it lost the "
               "exchange and went to the host. In brackets: the faults expected during write-protect "
               "calls if spread evenly over time.", "",
               "| mode | vCPUs | step | runs | faults at EL2 | waited | during another CPU's "
               "write-protect call | host-resolved (rounds) |",
               "| --- | --- | --- | --- | --- | --- | --- | --- |"] + crows + [""]
        if cfailed:
            md += ["Failed or incomplete runs (not counted): " + ", ".join(cfailed), ""]
    tables_end = len(md)
    verdicts += cverdicts
    if verdicts:
        md += ["## Verdicts", "", "| mode | measure | value | verdict |", "| --- | --- | --- | --- |"]
        md += verdicts
        md.append("")
    n = sum(len(v) for v in data.values())
    md += ["## Pairs", "", "%d pairs in %d boots%s." % (
        n, len(data), "; %d contention runs" % cruns if crows else ""), ""]
    with open(os.path.join(d, "results.md"), "w") as f:
        f.write("\n".join(md))
    print("lockfree-report: wrote %s" % os.path.join(d, "results.md"))
    if readme:
        text = open(readme).read()
        a, b = "<!-- lockfree -->", "<!-- /lockfree -->"
        if a not in text or b not in text:
            die("%s has no %s ... %s block" % (readme, a, b))
        src = os.path.relpath(os.path.join(d, "results.md"), os.path.dirname(os.path.abspath(readme)))
        first = md.index("## EL2 instructions per dirtied page")
        kern = ""
        about = os.path.join(d, "README.txt")
        if os.path.exists(about):
            kern = "; ".join(line.strip() for line in open(about)
                             if line.startswith(("kernels:", "contention kernels:")))
        block = ["From [`%s`](%s) (generated by `scripts/lockfree-report.py`; %d pairs in %d boots%s; %s):"
                 % (src, src, n, len(data), "; %d contention runs" % cruns if crows else "",
                    kern or "kernel not recorded"), ""]
        block += [line.replace("## ", "#### ") for line in md[first:-4]]
        text = text[:text.index(a) + len(a)] + "\n" + "\n".join(block).rstrip() + "\n" + text[text.index(b):]
        open(readme, "w").write(text)
        print("lockfree-report: updated " + readme)


if __name__ == "__main__":
    main()
