#!/usr/bin/env python3
"""Turn the raw serial logs of `make bench` into results.csv (one row per
run), results.md (every target with its measured value, range and met or
missed) and speedup.png.

Usage: bench-report.py <results dir> [--readme README.md]
With --readme, the README's section between "<!-- bench:begin -->" and
"<!-- bench:end -->" is replaced by the headline table of this run."""
import csv
import os
import re
import statistics
import sys

NUM = r"([0-9]+\.[0-9]+)s"
DIRTY_BUF_BYTES = 4096  # struct pkvm_dirty_buf, one per vCPU
DIRTY_BUF_FRAMES = 511  # PKVM_DIRTY_BUF_ENTRIES (510 before v4, 508 before v3)


def parse_log(path):
    """Yield one dict per dirty_log_perf_test run in a serial log."""
    label = os.path.basename(path)[:-4]
    m = re.match(r"(protected-nvhe|protected|nvhe|vhe)(-debug)?-b(\d+)$", label)
    if not m:
        return
    mode, debug, boot = m.group(1), bool(m.group(2)), int(m.group(3))
    text = open(path, errors="replace").read()
    for m in re.finditer(r"# start (b_(\S+))\n(.*?)\n(ok|not ok) \d+ \1", text, re.S):
        name, body, status = m.group(1), m.group(3), m.group(4)
        split, work, vcpus, mp, fast, *knobs = m.group(2).split("_")
        knobs = {k.rstrip("0123456789"): int(k.lstrip("abcdefghijklmnopqrstuvwxyz"))
                 for k in knobs}
        # split_wp: 1 = a cleared word of a whole block costs one hypercall
        # (split + write-protect), 0 = two (pkvm_split_wrprotect=N).
        # collapse: 1 = EL2 restores split blocks in place when logging
        # stops, 0 = collapsed on fault (pkvm_collapse=N). Empty for
        # runs from before the knob (they were 0).
        run = {"label": label, "name": name,
               "mode": mode, "el2_debug": int(debug), "boot": boot, "split": split,
               "fast": int(fast[1:]), "workload": work, "vcpus": int(vcpus),
               "dirty_log": mp, "ok": status == "ok",
               "split_wp": knobs.get("wp"), "collapse": knobs.get("c")}

        def grab(pattern, conv=float):
            g = re.search(pattern, body)
            return conv(g.group(1)) if g else None

        # Each dirty pass by its number (the pass after logging off is
        # "Logging off: iteration N", not matched here). Iteration 1 faults
        # the memory in; 2 and 3 are reported apart: without eager split
        # iteration 2 breaks the blocks and iteration 3 takes a fraction of
        # its faults, so they are not two samples of one quantity.
        run["dirty_by_it"] = {int(n): float(t) for n, t in
                              re.findall(r"^# Iteration (\d+) dirty memory time: " + NUM,
                                         body, re.M)}
        run["faults_by_it"] = {int(n): int(c) for n, c in
                               re.findall(r"^# Iteration (\d+) stage-2 faults: (\d+)", body, re.M)}
        run["it2_dirty_s"] = run["dirty_by_it"].get(2)
        run["it3_dirty_s"] = run["dirty_by_it"].get(3)
        # Every dirty pass after the first (results.csv only).
        run["dirty_s"] = [t for n, t in sorted(run["dirty_by_it"].items()) if n >= 2]
        run["enable_s"] = grab(r"Enabling dirty logging time: " + NUM)
        run["it1_clear_s"] = grab(r"Iteration 1 clear dirty log time: " + NUM)
        run["it2_clear_s"] = grab(r"Iteration 2 clear dirty log time: " + NUM)
        run["clear_total_s"] = grab(r"Clear dirty log over \d+ iterations took " + NUM)
        run["get_total_s"] = grab(r"Get dirty log over \d+ iterations took " + NUM)
        run["disable_s"] = grab(r"Disabling dirty logging time: " + NUM)
        run["it2_faults"] = grab(r"Iteration 2 stage-2 faults: (\d+)", int)
        run["it3_faults"] = grab(r"Iteration 3 stage-2 faults: (\d+)", int)
        run["iterations"] = grab(r"Test iterations: (\d+)", int)
        g = re.search(r"guest physical test memory: \[0x([0-9a-f]+), 0x([0-9a-f]+)\)", body)
        if g:
            run["mem_pages"] = (int(g.group(2), 16) - int(g.group(1), 16)) // 4096
        # -L: one more pass once logging is off (blocks collapsed on fault).
        g = re.search(r"Logging off: iteration (\d+) dirty memory time: " + NUM, body)
        if g:
            run["off_retouch_s"] = float(g.group(2))
            run["off_faults"] = grab(rf"Iteration {g.group(1)} stage-2 faults: (\d+)", int)
        # Until v3 the line also had the buffer-full count, EL2 time and lock
        # contention (statistics since moved to hyp events).
        f = re.search(r"Iteration 2 faults resolved by the host: (\d+), at EL2: (\d+)"
                      r"(?:, buffer full: (\d+), EL2 time: (\d+) ns(?:, VM lock taken: (\d+))?)?",
                      body)
        if f:
            for k, v in zip(["it2_host_faults", "it2_el2_faults", "it2_buf_full", "it2_el2_ns",
                             "it2_el2_contended"], f.groups()):
                if v is not None:
                    run[k] = int(v)
        s = re.search(r"pKVM split: hypercalls (\d+) blocks (\d+) tlbi (\d+) "
                      r"pages_donated (\d+) max_cycles (\d+) wrprotect_hypercalls (\d+)", body)
        if s:
            for k, v in zip(["split_hcalls", "blocks_split", "split_tlbi", "pages_donated",
                             "max_split_cycles", "wrprotect_hcalls"], map(int, s.groups())):
                run[k] = v
            # Since 2026-12-01 EL2 counts the split's TLBIs where it issues them.
            run["el2_tlbi"] = run["split_tlbi"]
        # Since v3 (no host statistics): the debug boots' hyp events,
        # summed by hyp-expect totals, the same quantities.
        t = re.search(r"hyp-expect: totals ((?:\w+=\d+ ?)+)", body)
        if t:
            tot = {k: int(v) for k, v in (kv.split("=") for kv in t.group(1).split())}
            for key, ev in (("split_hcalls", "split_calls"), ("blocks_split", "split_blocks"),
                            ("split_tlbi", "split_tlbi"), ("el2_tlbi", "split_tlbi"),
                            ("pages_donated", "split_admitted"), ("wrprotect_hcalls", "wp_calls"),
                            ("collapse_hcalls", "collapse_calls"),
                            ("collapse_blocks", "collapse_blocks"),
                            ("collapse_tlbi", "collapse_tlbi"),
                            ("collapse_skipped", "collapse_left"),
                            ("collapse_returned", "collapse_freed")):
                if ev in tot:
                    run[key] = tot[ev]
            run["hyp_events"] = 1
        w = re.search(r"hyp-expect: \d+ blocks split at EL2, (\d+) write faults resolved at EL2", body)
        if w:
            run["ev_el2_faults"] = int(w.group(1))
            run["ev_el2_waited"] = grab(r"hyp-expect: (\d+) of the faults (?:resolved at EL2|EL2 took) waited", int)
        c = re.search(r"pKVM collapse: hypercalls (\d+) blocks (\d+) tlbi (\d+) skipped (\d+)"
                      r"(?: returned (\d+))?", body)
        if c:
            for k, v in zip(["collapse_hcalls", "collapse_blocks", "collapse_tlbi",
                             "collapse_skipped", "collapse_returned"], c.groups()):
                if v is not None:
                    run[k] = int(v)
        m = re.search(r"SecPageTables: (\d+) kB before logging, (\d+) kB after logging off", body)
        if m:
            run["secpt_before_kb"], run["secpt_after_kb"] = map(int, m.groups())
        yield run


COLUMNS = ["mode", "split", "fast", "split_wp", "collapse", "workload", "vcpus", "dirty_log", "boot", "rep",
           "el2_debug", "ok", "it2_dirty_s", "it3_dirty_s", "dirty_s", "enable_s", "it1_clear_s", "it2_clear_s",
           "clear_total_s", "get_total_s", "disable_s", "it2_faults", "it3_faults", "it2_host_faults",
           "it2_el2_faults", "it2_buf_full", "it2_el2_ns", "it2_el2_contended", "split_hcalls",
           "blocks_split",
           "split_tlbi", "el2_tlbi", "pages_donated", "max_split_cycles", "wrprotect_hcalls",
           "iterations", "mem_pages", "off_retouch_s", "off_faults", "collapse_hcalls",
           "collapse_blocks", "collapse_tlbi", "collapse_skipped", "collapse_returned",
           "secpt_before_kb", "secpt_after_kb", "hyp_events", "ev_el2_faults", "ev_el2_waited"]


def spread3(per):
    """Median and per-boot range of ratios, 3 decimals."""
    return f"{med(per):.3f} [{min(per):.3f}–{max(per):.3f}]"


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def rng(values):
    values = [v for v in values if v is not None]
    return (min(values), max(values)) if values else None


class Report:
    def __init__(self, runs):
        self.runs = [r for r in runs if r["ok"]]
        self.failed = [r for r in runs if not r["ok"]]
        self.boots = sorted({r["boot"] for r in self.runs if not r["el2_debug"]})

    def sel(self, debug=0, split_wp=1, collapse=1, **kw):
        """Runs of the given cell; split_wp=0 selects the two-step cells
        and collapse=0 the collapse-on-fault ones, which every other figure
        leaves out."""
        return [r for r in self.runs if r["el2_debug"] == debug and
                (r["split_wp"] == 0) == (split_wp == 0) and
                (r["collapse"] == 0) == (collapse == 0) and
                all(r[k] == v for k, v in kw.items())]

    def counted(self, key, **kw):
        """Runs of the cell that carry the count @key, and where it comes
        from: the production boots if they have it (results from before
        v3, whose host kept statistics), else the debug boots' hyp events."""
        rs = [r for r in self.sel(**kw) if r.get(key)]
        if rs:
            return rs, ""
        return [r for r in self.sel(1, **kw) if r.get(key)], " (debug boots, hyp events)"

    def it(self, n=2, debug=0, boot=None, **kw):
        """Median dirty memory time of iteration @n (never pooled with
        another iteration) over the cell's runs, in one boot or in all."""
        rs = self.sel(debug, **kw)
        if boot is not None:
            rs = [r for r in rs if r["boot"] == boot]
        return med([r["dirty_by_it"].get(n) for r in rs])

    def ratio(self, a, b, n=2):
        """Pair a and b, and return (median, min, max, pairing) over the
        pairs of it(n, a)/it(n, b), iteration @n alone. Cells of one mode
        ran in the same boots: each boot is a pair. Cells of two modes ran
        in different boots, with no natural pairing: every boot of a
        against every boot of b."""
        ba = {bt: self.it(n, boot=bt, **a) for bt in self.boots}
        bb = {bt: self.it(n, boot=bt, **b) for bt in self.boots}
        ba = {k: v for k, v in ba.items() if v is not None}
        bb = {k: v for k, v in bb.items() if v}
        if a.get("mode") == b.get("mode"):
            per = [ba[bt] / bb[bt] for bt in sorted(set(ba) & set(bb))]
            how = f"{len(per)} boots"
        else:
            per = [x / y for x in ba.values() for y in bb.values()]
            how = f"{len(ba)}×{len(bb)} pairings"
        if not per:
            return None
        return med(per), min(per), max(per), how


def verdict(value, lo, hi, target, le):
    """Met only if the whole range clears the target."""
    if value is None:
        return "not measured"
    ok = hi <= target if le else lo >= target
    return "met" if ok else "missed"


def fmtr(r, unit="x"):
    if not r:
        return "–"
    v, lo, hi = r
    return f"{v:.2f}{unit} [{lo:.2f}–{hi:.2f}]"


MODE_NAME = {"protected": "hVHE", "protected-nvhe": "protected nVHE"}


def prose(rep, pkvm_modes, facts, targets, outdir):
    """The README's sentences on this run, every figure from it."""
    def rg(per, fmt="{:.2f}"):
        return f"{fmt.format(min(per))}–{fmt.format(max(per))}"

    para = []
    rs = [r for m in pkvm_modes for r in rep.sel(mode=m, fast=1, split="2M") if r.get("it2_faults")]
    if rs:
        per = [(r.get("it2_host_faults") or 0) / r["it2_faults"] for r in rs]
        host = sum(r.get("it2_host_faults") or 0 for r in rs)
        full = sum(r.get("it2_buf_full") or 0 for r in rs)
        worst = (f"at most 1 per {round(1 / max(per)):,} pages in any run" if max(per)
                 else "none in any run")
        why = (", all of them buffer-full exits" if host and full == host else
               f", {full} of {host} of them buffer-full exits" if host and
               any(r.get("it2_buf_full") is not None for r in rs) else "")
        para.append("What carries over as is: iteration 2's write faults go from every one "
                    "resolved by the host to **none** resolved by the host "
                    f"({med(per):.0f} host-resolved faults in the median run, {worst}{why}; "
                    "returns to the host for other causes, timer ticks and the log's "
                    "hypercalls, are counted by `make bench-counts`), and nothing of it "
                    "takes the host's `mmu_lock`.")
    w1 = [facts[(m, "words", 1)] for m in pkvm_modes if (m, "words", 1) in facts]
    w0 = [facts[(m, "words", 0)] for m in pkvm_modes if (m, "words", 0) in facts]
    c1 = [(m, facts[(m, "it1_clear_s")]) for m in pkvm_modes if (m, "it1_clear_s") in facts]
    if w1:
        allw1 = [x for p in w1 for x in p]
        s = (f"A `KVM_CLEAR_DIRTY_LOG` word costs {'exactly ' if min(allw1) == max(allw1) else ''}"
             f"{med(allw1):.3f} hypercalls")
        if w0:
            s += f" ({med([x for p in w0 for x in p]):.3f} on the two-step path)"
        if c1:
            s += ("; under TCG the clear's time does not show it beyond noise: iteration 1's "
                  "clear, one call over two steps, paired per boot, ranges " +
                  " and ".join(f"{rg(per)}x ({MODE_NAME[m]})" for m, per in c1))
        para.append(s + ".")
    off = [facts[(m, "disable_s")] for m in pkvm_modes if (m, "disable_s") in facts]
    ret = [facts[(m, "off_retouch_s")] for m in pkvm_modes if (m, "off_retouch_s") in facts]
    both = [(m, facts[(m, "both")]) for m in pkvm_modes if (m, "both") in facts]
    if off and ret and both:
        parts = []
        for m, per in both:
            above = sorted(x for x in per if x > 1)
            v = "met" if max(per) <= 1 else "**missed**"
            parts.append(f"{med(per):.2f}x {MODE_NAME[m]}, {v}" +
                         (f": {len(above)} boot{'s' if len(above) > 1 else ''} of {len(per)} "
                          f"above 1 ({', '.join(f'{x:.2f}' for x in above)})" if above else ""))
        para.append("Turning logging off then costs "
                    f"{min(med(p) for p in off):.1f} to {max(med(p) for p in off):.1f} times "
                    "more than collapsing on fault (medians; the restore runs there), the "
                    f"pass after it {min(med(p) for p in ret):.2f} to "
                    f"{max(med(p) for p in ret):.2f} of it, and the two together "
                    + "; ".join(parts) + ".")
    two = [t for t in targets if "vCPUs ≥ at" in t[0]]
    if two:
        missed = [t[0].split(" fast-path")[0] + " " + t[0].rsplit(", ", 1)[1]
                  for t in two if t[3] == "missed"]
        para.append("The 2-vCPU rows run three threads (two vCPUs and the test's main "
                    "thread) on 2 host cores" +
                    (f"; the \"2-vCPU gain at least the 1-vCPU gain\" target is missed in "
                     f"{len(missed)} of {len(two)} cells ({', '.join(missed)}), and these runs "
                     "do not show why." if missed else "."))
    took = re.search(r"took (\d+) min", open(os.path.join(outdir, "README.txt")).read())
    if took:
        incl = "kernel builds included" in open(os.path.join(outdir, "README.txt")).read()
        para.append(f"The run took {took.group(1)} min (its `README.txt`), " +
                    ("the kernel builds included." if incl else
                     "not counting the kernel builds, which it did before its clock started."))
    return "\n".join(para)


def main(outdir, readme=None):
    runs = []
    raw = os.path.join(outdir, "raw")
    for name in sorted(os.listdir(raw)):
        if name.endswith(".log"):
            runs.extend(parse_log(os.path.join(raw, name)))

    with open(os.path.join(outdir, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in runs:
            w.writerow([";".join(map(str, r[c])) if c == "dirty_s" else
                        r.get(c, 1 if c == "rep" else None) for c in COLUMNS])

    # The plan: bench.sh keeps each boot's list (raw/<label>.list). A
    # planned run with no "ok"/"not ok" line (the boot hung, crashed or
    # timed out) is a failed run, as is a boot that exited non-zero.
    planned = not_run = 0
    for name in sorted(os.listdir(raw)):
        if not name.endswith(".list"):
            continue
        label = name[:-5]
        m = re.match(r"(protected-nvhe|protected|nvhe|vhe)(-debug)?-b(\d+)$", label)
        if not m:
            continue
        seen = {r["name"] for r in runs if r["label"] == label}
        for line in open(os.path.join(raw, name)):
            f = line.split()
            if len(f) < 2 or f[0].startswith("#"):
                continue
            planned += 1
            if f[1] not in seen:
                not_run += 1
                split, work, vcpus, mp, fast, *knobs = f[1][2:].split("_")
                runs.append({"mode": m.group(1), "el2_debug": int(bool(m.group(2))),
                             "boot": int(m.group(3)), "split": split, "workload": work,
                             "vcpus": int(vcpus), "fast": int(fast[1:]), "ok": False,
                             "label": label, "name": f[1], "dirty_s": [],
                             "why": "no result line (not run: the boot hung or died)"})
    rep = Report(runs)
    vcpus = sorted({r["vcpus"] for r in rep.runs})
    pkvm_modes = [m for m in ("protected", "protected-nvhe") if rep.sel(mode=m)]
    lines = []
    out = lines.append
    out("# Dirty-logging benchmark (`make bench`)\n")
    out(open(os.path.join(outdir, "README.txt")).read().replace("\n", "  \n"))
    out("Under QEMU TCG emulation: compare ratios within this run, never absolute "
        "times with hardware. `it2` and `it3` are the seed's \"dirty memory time\" of "
        "iterations 2 and 3, reported apart (iteration 1 faults the memory in; without "
        "eager split iteration 2 breaks the blocks and iteration 3 takes far fewer "
        "faults, so the two are not samples of one quantity: see the faults columns), "
        "manual-protect, initially-set, 2 MiB hugetlb, guest mode 3, on the production "
        "kernel (EL2 debug checks off). Every time ratio is of one iteration, named in "
        "its row (iteration 2 unless it says 3). A boot's value of a cell is its run's "
        "time (the median if it has several). A time ratio is computed per pair and reported as the median "
        "[min–max] over the pairs: cells of one mode ran in the same boots, so each boot "
        "is a pair (\"5 boots\"); cells of two modes ran in different boots with no "
        "natural pairing, so every boot of one is paired with every boot of the other "
        "(\"5×5 pairings\"). A target is met only if the whole range clears it. 2-vCPU "
        "rows are oversubscribed: two vCPU threads and the test's main thread on a "
        "2-CPU L1 guest on 2 host cores.\n")
    kernel = "unknown (no kernel: line in README.txt)"
    for line in open(os.path.join(outdir, "README.txt")):
        if line.startswith("kernel:"):
            kernel = line.split(":", 1)[1].strip()
    debug_boots = {m: len({r["boot"] for r in runs if r["mode"] == m and r["el2_debug"]})
                   for m in ("protected", "protected-nvhe", "nvhe", "vhe")}
    boots_txt = (f"{len(rep.boots)} boots per mode of the production kernel" +
                 "".join(f", {n} debug boot{'s' if n > 1 else ''} of {m}"
                         for m, n in debug_boots.items() if n))
    if planned:
        runs_txt = (f"{len(rep.runs)} of {planned} planned runs ok, {len(rep.failed)} failed; "
                    f"{boots_txt}")
        out(f"Runs: {planned} planned (raw/*.list), {len(rep.runs)} ok, {len(rep.failed)} "
            f"failed ({not_run} of them with no result: not run); {boots_txt}.\n")
    else:
        runs_txt = (f"{len(rep.runs)} runs ok, {len(rep.failed)} failed (no recorded plan); "
                    f"{boots_txt}")
        out(f"Runs: {len(rep.runs)} ok, {len(rep.failed)} failed; {boots_txt} (this run "
            "predates the recorded plan: a run that left no result line is not counted).\n")
    if rep.failed:
        out("**Failed runs**: " + ", ".join(
            f"{r['mode']} b{r['boot']} {r['name']}" + (f" ({r['why']})" if r.get("why") else "")
            for r in rep.failed) + "\n")

    targets = []
    facts = {}  # what the README's sentences quote (prose() below)

    def target(name, value, lo, hi, how, goal, le=True, text=None):
        targets.append((name, text or f"{value:.3f} [{lo:.3f}–{hi:.3f}], {how}"
                        if value is not None else "–",
                        ("≤ " if le else "≥ ") + f"{goal}", verdict(value, lo, hi, goal, le)))

    # Iterations 2 and 3, apart, every cell.
    out("\n## Dirty memory time of iterations 2 and 3, apart (s)\n")
    out("Medians over the cell's runs; the range is over the boots' values. The "
        "host-resolved, EL2-resolved and buffer-full columns are iteration 2's.\n")
    out("| mode | fast | split | workload | vCPUs | it2 (s) | it2 range over boots | "
        "it2 faults | it3 (s) | it3 range over boots | it3 faults | "
        "host-resolved | EL2-resolved | buffer full | EL2 ns/fault |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for debug in (0, 1):
        for mode in ("protected", "protected-nvhe", "nvhe", "vhe"):
            for fast in (1, 0):
                for split in ("2M", "0"):
                    for work in ("w10", "w100"):
                        for v in vcpus:
                            rs = rep.sel(debug, mode=mode, fast=fast, split=split,
                                         workload=work, vcpus=v)
                            if not rs:
                                continue
                            cols = []
                            for n in (2, 3):
                                per_boot = [rep.it(n, debug, boot=b, mode=mode, fast=fast,
                                                   split=split, workload=work, vcpus=v)
                                            for b in sorted({r["boot"] for r in rs})]
                                t = med([r["dirty_by_it"].get(n) for r in rs])
                                f_ = med([r.get(f"it{n}_faults") for r in rs])
                                if t is None:
                                    cols += ["–", "–", "–"]
                                    continue
                                lo, hi = rng(per_boot)
                                cols += [f"{t:.3f}", f"{lo:.3f}–{hi:.3f}",
                                         "–" if f_ is None else f"{f_:.0f}"]
                            el2 = sum(r.get("it2_el2_faults") or 0 for r in rs)
                            ns = sum(r.get("it2_el2_ns") or 0 for r in rs)
                            out(f"| {mode}{' (debug EL2)' if debug else ''} | {fast} | {split} | "
                                f"{work} | {v} | " + " | ".join(cols) + " | "
                                f"{med([r.get('it2_host_faults') for r in rs]) or 0:.0f} | "
                                f"{med([r.get('it2_el2_faults') for r in rs]) or 0:.0f} | "
                                f"{med([r.get('it2_buf_full') for r in rs]) or 0:.0f} | "
                                f"{f'{ns / el2:.0f}' if el2 else '–'} |")

    # Targets of the EL2 fast dirty-fault path (issue: pKVM's fast page fault).
    chart = {}
    for mode in pkvm_modes:
        for work in ("w10", "w100"):
            for v in vcpus:
                cell = dict(split="2M", workload=work, vcpus=v)
                r = rep.ratio(dict(mode=mode, fast=1, **cell), dict(mode="nvhe", fast=0, **cell))
                if r:
                    target(f"{mode} fast path / nvhe, iteration 2, {work}, {v} vCPU", *r, 1.0)
                chart[(mode, work, v)] = r
                r = rep.ratio(dict(mode=mode, fast=1, **cell), dict(mode="vhe", fast=0, **cell))
                if r:
                    target(f"(stretch) {mode} fast path / vhe, iteration 2, {work}, {v} vCPU",
                           *r, 1.0)
                for n in (2, 3):
                    r = rep.ratio(dict(mode=mode, fast=0, **cell), dict(mode=mode, fast=1, **cell),
                                  n)
                    if r:
                        target(f"{mode} speed-up of the fast path over the host path, iteration "
                               f"{n}, {work}, {v} vCPU (report; expected > 1.5 at w100)",
                               *r, 1.5, le=False)
        for work in ("w10", "w100"):
            if len(vcpus) > 1:
                cell = dict(split="2M", workload=work)
                s1 = rep.ratio(dict(mode=mode, fast=0, vcpus=vcpus[0], **cell),
                               dict(mode=mode, fast=1, vcpus=vcpus[0], **cell))
                s2 = rep.ratio(dict(mode=mode, fast=0, vcpus=vcpus[-1], **cell),
                               dict(mode=mode, fast=1, vcpus=vcpus[-1], **cell))
                if s1 and s2:
                    # Per-boot ranges: compare the worst 2-vCPU boot with the best 1-vCPU one.
                    targets.append((f"{mode} fast-path speed-up at {vcpus[-1]} vCPUs ≥ at "
                                    f"{vcpus[0]}, iteration 2, {work}",
                                    f"{s2[0]:.2f}x [{s2[1]:.2f}–{s2[2]:.2f}] vs "
                                    f"{s1[0]:.2f}x [{s1[1]:.2f}–{s1[2]:.2f}], {s1[3]}",
                                    "≥ 1-vCPU speed-up",
                                    "met" if s2[1] >= s1[2] else "missed"))
        rs = rep.sel(mode=mode, fast=1, split="2M")
        per_page = [(r.get("it2_host_faults") or 0) / r["it2_faults"] for r in rs
                    if r.get("it2_faults")]
        if per_page:
            # Faults the host resolved (the test's vCPU stats), not every
            # return to the host: bench-counts' EL2→host row counts those.
            targets.append((f"{mode} host-resolved stage-2 faults per dirtied page in "
                            "iteration 2 (fast path)",
                            f"{med(per_page):.5f} [{min(per_page):.5f}–{max(per_page):.5f}]",
                            "≤ 1/256 = 0.00391",
                            "met" if max(per_page) <= 1 / 256 else "missed"))
        el2 = sum(r.get("it2_el2_faults") or 0 for r in rs)
        ns = sum(r.get("it2_el2_ns") or 0 for r in rs)
        if el2 and ns:
            # Until v3 only: the host's EL2 time statistic.
            per = [r["it2_el2_ns"] / r["it2_el2_faults"] for r in rs
                   if r.get("it2_el2_faults") and r.get("it2_el2_ns") is not None]
            targets.append((f"{mode} EL2 time per fault resolved at EL2 (price; under TCG)",
                            f"{ns / el2 / 1000:.2f} µs [{min(per) / 1000:.2f}–{max(per) / 1000:.2f}]",
                            "report", "reported"))
        # The VM lock instead of a lock-free update: how often it was in the way.
        for v in vcpus:
            rs = [r for r in rep.sel(mode=mode, fast=1, split="2M", vcpus=v)
                  if r.get("it2_el2_contended") is not None and r.get("it2_el2_faults")]
            if rs:
                per = [r["it2_el2_contended"] / r["it2_el2_faults"] for r in rs]
                tot = sum(r["it2_el2_contended"] for r in rs)
                targets.append((f"{mode} faults resolved at EL2 that found the VM lock taken, "
                                f"{v} vCPU, iteration 2 (price of the lock)",
                                f"{tot / sum(r['it2_el2_faults'] for r in rs):.5f} "
                                f"[{min(per):.5f}–{max(per):.5f}] ({tot} in all)",
                                "report", "reported"))
        # Since issue #26 the fault path takes no lock: how often its
        # compare-and-exchange lost a race and was tried again (the debug
        # boots' pkvm_dirty_fault events, whole runs).
        for v in vcpus:
            rs = [r for r in rep.sel(1, mode=mode, fast=1, split="2M", vcpus=v)
                  if r.get("ev_el2_faults") and r.get("ev_el2_waited") is not None]
            if rs:
                tot = sum(r["ev_el2_waited"] for r in rs)
                n = sum(r["ev_el2_faults"] for r in rs)
                share = tot / n
                targets.append((f"{mode} faults resolved at EL2 that waited (a lost "
                                f"compare-and-exchange tried again), {v} vCPU, whole runs "
                                "(debug boots, hyp events)",
                                f"{share:.5f} ({tot} of {n})",
                                "≤ 0.005" if v > 1 else "report",
                                ("met" if share <= 0.005 else "missed") if v > 1 else "reported"))
        # Hypercall economy of eager split under manual-protect (4K pages, 2 MiB blocks).
        rs, src = rep.counted("blocks_split", mode=mode, split="2M")
        if rs:
            per = [r["split_hcalls"] / r["blocks_split"] for r in rs]
            targets.append((f"{mode} split hypercalls per 2 MiB block{src}",
                            f"{med(per):.3f} [{min(per):.3f}–{max(per):.3f}]", "≤ 1/8 = 0.125",
                            "met" if max(per) <= 0.125 + 1e-9 else "missed"))
            per = [r["el2_tlbi"] / r["blocks_split"] for r in rs]
            targets.append((f"{mode} broadcast TLBIs per split 2 MiB block (counted at EL2){src}",
                            f"{med(per):.3f} [{min(per):.3f}–{max(per):.3f}]", "≤ 1/8 = 0.125",
                            "met" if max(per) <= 0.125 + 1e-9 else "missed"))
        # Every 64-page word of the slot is cleared once per iteration (at
        # most). Since v4 the split only splits: a clear splits its window
        # (one call per SPLIT_BATCH blocks, at most one per 64 words), then
        # write-protects each word (one call): at most 1 + 1/64 per word
        # (v3's one combined call, <= 1, was dropped with its switch).
        # split_wp=0: runs of a kernel with v3's switch off, if any.
        for wp, what, goal in ((1, " (write-protect, plus the window's split; words = pages/64 per clear)",
                                "≤ 1 + 1/64 = 1.016"),
                               (0, ", two-step path (kvm.pkvm_split_wrprotect=0), w10, 1 vCPU",
                                "report")):
            rs, src = rep.counted("wrprotect_hcalls", mode=mode, split="2M", split_wp=wp)
            rs = [r for r in rs if r.get("mem_pages") and r.get("iterations")]
            if not rs:
                continue
            per = [(r["wrprotect_hcalls"] + r["split_hcalls"]) /
                   (r["mem_pages"] / 64 * r["iterations"]) for r in rs]
            verdict_ = ("reported" if goal == "report" else
                        "met" if max(per) <= 1 + 1 / 64 + 1e-9 else "missed")
            facts[(mode, "words", wp)] = per
            targets.append((f"{mode} hypercalls per KVM_CLEAR_DIRTY_LOG word{what}{src}",
                            f"{med(per):.3f} [{min(per):.3f}–{max(per):.3f}]", goal, verdict_))
        # What the one call saves, in time.
        rs = [r for r in rep.sel(mode=mode, split="2M", split_wp=0) if r.get("mem_pages")]
        if rs:
            for key, what in (("it1_clear_s", "iteration 1 KVM_CLEAR_DIRTY_LOG (splits)"),
                              ("clear_total_s", "all KVM_CLEAR_DIRTY_LOG calls")):
                one = {r["boot"]: r[key] for r in rep.sel(mode=mode, split="2M", fast=1,
                                                          workload="w10", vcpus=1)
                       if r.get(key)}
                two = {r["boot"]: r[key] for r in rs if r.get(key)}
                boots = sorted(set(one) & set(two))
                if boots:
                    per = [one[b] / two[b] for b in boots]
                    facts[(mode, key)] = per
                    targets.append((f"{mode} {what} time, one call / two-step, w10, 1 vCPU",
                                    f"{med(per):.2f}x [{min(per):.2f}–{max(per):.2f}]",
                                    "report", "reported"))
    # Blocks restored in place at EL2 when logging stops (pkvm_collapse).
    for mode in pkvm_modes:
        rs, src = rep.counted("collapse_blocks", mode=mode, split="2M")
        if rs:
            per = [r["off_faults"] / r["collapse_blocks"] for r in rs
                   if r.get("off_faults") is not None]
            if per:
                targets.append((f"{mode} stage-2 faults per block to touch every block again "
                                f"after logging off (restored in place){src}",
                                spread3(per), "0",
                                "met" if max(per) == 0 else "missed"))
            for key, what in (("collapse_hcalls", "hypercalls"), ("collapse_tlbi",
                                                                  "broadcast TLBIs (counted at EL2)")):
                per = [r[key] / r["collapse_blocks"] for r in rs]
                targets.append((f"{mode} {what} per block restored in place{src}",
                                spread3(per), "≤ 1/8 = 0.125",
                                "met" if max(per) <= 0.125 + 1e-9 else "missed"))
            per = [r.get("collapse_skipped", 0) for r in rs]
            targets.append((f"{mode} split blocks EL2 left split at logging off{src}",
                            f"{med(per):.0f} [{min(per)}–{max(per)}]", "report", "reported"))
            per = [r["collapse_returned"] / r["collapse_blocks"] for r in rs
                   if r.get("collapse_returned") is not None]
            if per:
                targets.append((f"{mode} table pages given back to the host per block restored "
                                f"(counted at EL2){src}",
                                spread3(per), "1",
                                "met" if min(per) == max(per) == 1 else "missed"))
            else:
                targets.append((f"{mode} table pages given back to the host per block restored",
                                "not measured (results predate the count)", "1", "missed"))
        # SecPageTables: the production boots' own reading.
        per = [r["secpt_after_kb"] - r["secpt_before_kb"] for r in rep.sel(mode=mode, split="2M")
               if r.get("secpt_after_kb") is not None]
        if per:
            targets.append((f"{mode} SecPageTables after logging off − before logging on (kB)",
                            f"{med(per):.0f} [{min(per)}–{max(per)}]", "≤ 0 (baseline)",
                            "met" if max(per) <= 0 else "missed"))
        cell = dict(mode=mode, fast=1, split="2M", workload="w10", vcpus=1)
        for key, what in (("off_retouch_s", "re-touch after logging off"),
                          ("disable_s", "turning logging off (includes the restore)")):
            on = {r["boot"]: r[key] for r in rep.sel(**cell) if r.get(key) is not None}
            off = {r["boot"]: r[key] for r in rep.sel(collapse=0, **cell)
                   if r.get(key) is not None}
            boots = sorted(set(on) & set(off))
            if boots:
                per = [on[b] / off[b] for b in boots]
                facts[(mode, key)] = per
                targets.append((f"{mode} {what}, restored in place / collapsed on fault, "
                                "w10, 1 vCPU (time ratio)",
                                f"{med(per):.2f}x [{min(per):.2f}–{max(per):.2f}]",
                                "report", "reported"))
        both = {}
        for c in (1, 0):
            both[c] = {r["boot"]: r["disable_s"] + r["off_retouch_s"]
                       for r in rep.sel(collapse=c, **cell)
                       if r.get("disable_s") is not None and r.get("off_retouch_s") is not None}
        nv = {r["boot"]: r["disable_s"] + r["off_retouch_s"]
              for r in rep.sel(**dict(cell, mode="nvhe", fast=0))
              if r.get("disable_s") is not None and r.get("off_retouch_s") is not None}
        boots = sorted(set(both[1]) & set(both[0]))
        if boots:
            per = [both[1][b] / both[0][b] for b in boots]
            facts[(mode, "both")] = per
            targets.append((f"{mode} logging off + re-touch of every page, restored in place / "
                            "collapsed on fault, w10, 1 vCPU (time ratio)",
                            f"{med(per):.2f}x [{min(per):.2f}–{max(per):.2f}]", "≤ 1",
                            "met" if max(per) <= 1 else "missed"))
        if both[1] and nv:
            # Two modes, two sets of boots: every pairing.
            per = [x / y for x in both[1].values() for y in nv.values()]
            targets.append((f"{mode} logging off + re-touch of every page, restored in place / "
                            "nvhe's upstream collapse on fault, w10, 1 vCPU (time ratio)",
                            f"{med(per):.2f}x [{min(per):.2f}–{max(per):.2f}], "
                            f"{len(both[1])}×{len(nv)} pairings", "report", "reported"))
    targets.append(("memory per vCPU for the dirty buffer (price; the series' struct "
                    "pkvm_dirty_buf as bench-report.py knows it, not measured by this run)",
                    f"{DIRTY_BUF_BYTES} bytes ({DIRTY_BUF_FRAMES} frames)", "report", "reported"))
    for mode in ("protected", "protected-nvhe", "nvhe", "vhe"):
        for fast in (1, 0):
            a = dict(mode=mode, fast=fast, workload="w10", vcpus=1)
            for n in (2, 3):
                r = rep.ratio(dict(split="0", **a), dict(split="2M", **a), n)
                if r:
                    target(f"eager split speed-up, {mode}, fast={fast}, iteration {n}, w10, "
                           "1 vCPU", *r, 1.0, le=False)

    out("\n## Targets\n")
    out("| target | measured: median [range over the pairs, or over runs] | goal | verdict |")
    out("| --- | --- | --- | --- |")
    for t in targets:
        out("| " + " | ".join(t) + " |")

    # Whole-pass costs, split on.
    out("\n## Whole-pass costs, split on (medians, s)\n")
    out("| mode | fast | workload | vCPUs | enable logging | clear it1 | clear it2 | "
        "clear, all iterations | get, all iterations | disable logging |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in ("protected", "protected-nvhe", "nvhe", "vhe"):
        for fast in (1, 0):
            for work in ("w10", "w100"):
                for v in vcpus:
                    rs = rep.sel(mode=mode, fast=fast, split="2M", workload=work, vcpus=v)
                    if not rs:
                        continue
                    cols = [med([r.get(k) for r in rs]) for k in
                            ("enable_s", "it1_clear_s", "it2_clear_s", "clear_total_s",
                             "get_total_s", "disable_s")]
                    out(f"| {mode} | {fast} | {work} | {v} | " +
                        " | ".join("–" if c is None else f"{c:.4f}" for c in cols) + " |")
    # Logging off, then one more pass (-L): the blocks come back on fault.
    out("\n## After logging off: one more pass (medians, s)\n")
    out("Under pKVM, EL2 restores in place the blocks it split when logging stops "
        "(kvm.pkvm_collapse=1), so this pass takes no fault on them. Otherwise (nvhe, vhe, "
        "and blocks broken on fault) each block broken for logging is collapsed back on "
        "its first write fault (pKVM: the host unshares the split block at EL2 and shares "
        "it again as a block).\n")
    out("| mode | fast | split | workload | vCPUs | re-touch (s) | range over boots | "
        "faults | faults per 2 MiB block |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in ("protected", "protected-nvhe", "nvhe", "vhe"):
        for fast in (1, 0):
            for split in ("2M", "0"):
                for work in ("w10", "w100"):
                    for v in vcpus:
                        rs = [r for r in rep.sel(mode=mode, fast=fast, split=split,
                                                 workload=work, vcpus=v)
                              if r.get("off_retouch_s") is not None]
                        if not rs:
                            continue
                        per_boot = [med([r["off_retouch_s"] for r in rs if r["boot"] == b])
                                    for b in sorted({r["boot"] for r in rs})]
                        lo, hi = rng(per_boot)
                        fb = [r["off_faults"] / (r["mem_pages"] / 512) for r in rs
                              if r.get("off_faults") is not None and r.get("mem_pages")]
                        out(f"| {mode} | {fast} | {split} | {work} | {v} | "
                            f"{med([r['off_retouch_s'] for r in rs]):.3f} | {lo:.3f}–{hi:.3f} | "
                            f"{med([r.get('off_faults') for r in rs]) or 0:.0f} | "
                            f"{med(fb) if fb else 0:.2f} |")
    out("\nSplit TLBIs (`split_tlbi`, `el2_tlbi`) are counted by EL2 where it issues "
        "them and returned by each split call.")
    open(os.path.join(outdir, "results.md"), "w").write("\n".join(lines) + "\n")

    headline = ["| target | measured: median [range over the pairs, or over runs] | goal | verdict |",
                "| --- | --- | --- | --- |"]
    headline += ["| " + " | ".join(t) + " |" for t in targets]
    if readme:
        text = open(readme).read()
        begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
        if begin in text and end in text:
            src = os.path.relpath(outdir, os.path.dirname(os.path.abspath(readme)))
            body = (f"{begin}\nFrom [`{os.path.normpath(outdir)}/results.md`]({src}/results.md), generated by "
                    "`scripts/bench-report.py --readme` (do not edit by hand): run "
                    f"{os.path.basename(os.path.normpath(outdir))}, {runs_txt}; kernel "
                    f"{kernel}.\n\n" +
                    "\n".join(headline) + f"\n{end}")
            text = text[:text.index(begin)] + body + text[text.index(end) + len(end):]
        begin, end = "<!-- bench-prose:begin -->", "<!-- bench-prose:end -->"
        if begin in text and end in text:
            body = begin + "\n" + prose(rep, pkvm_modes, facts, targets, outdir) + "\n" + end
            text = text[:text.index(begin)] + body + text[text.index(end) + len(end):]
        open(readme, "w").write(text)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench-report: no matplotlib, no chart", file=sys.stderr)
        return
    series = [("nvhe", dict(mode="nvhe", fast=0)), ("vhe", dict(mode="vhe", fast=0))]
    for mode in pkvm_modes:
        series += [(f"{mode}, host path", dict(mode=mode, fast=0)),
                   (f"{mode}, EL2 fast path", dict(mode=mode, fast=1))]
    groups = [(w, v) for w in ("w10", "w100") for v in vcpus]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / max(1, len(series))
    for i, (name, sel) in enumerate(series):
        ys = [rep.it(2, split="2M", workload=w, vcpus=v, **sel) or 0 for w, v in groups]
        ax.bar([x + i * width for x in range(len(groups))], ys, width, label=name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(groups))])
    ax.set_xticklabels([f"-w {w[1:]}, {v} vCPU" for w, v in groups])
    ax.set_ylabel("iteration 2 dirty memory time (s, median)")
    ax.set_title("Eager split on, 2 MiB hugetlb: pKVM's EL2 fast dirty-fault path vs the host path "
                 "(QEMU TCG; compare within the run)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "speedup.png"), dpi=100)


if __name__ == "__main__":
    args = sys.argv[1:]
    readme = None
    if "--readme" in args:
        i = args.index("--readme")
        readme = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or not os.path.isdir(os.path.join(args[0], "raw")):
        sys.exit("usage: bench-report.py <results dir with raw/> [--readme README.md]")
    main(args[0], readme)
