#!/usr/bin/env python3
"""make bench-el2pc's report: EL2 instructions per dirtied page by hyp function.

Reads <out>/runs.list, <out>/<kernel>-<mode>.el2pc.gz (the plugin's mark and
el2pc lines) and <out>/<kernel>.nm.gz (the kernel's __kvm_nvhe_ symbols),
writes <out>/report.md.

A run's profile is its end marker's cumulative counts minus its start
marker's; a pair's, the -i 4 run's minus the -i 2 run's, over 2 x 8192 x
vCPUs dirtied pages. Addresses are hyp VAs: the kernel image is mapped at
EL2 at one page-aligned offset from its kernel VA, found as the offset that
puts the most TB start addresses exactly on a function's first instruction.
"""
import bisect
import collections
import gzip
import os
import re
import statistics
import sys

PAGES = 8192


def load_runs(out):
    runs = {}
    k = 0
    for line in open(os.path.join(out, "runs.list")):
        m = re.search(r"\br(\d+)_v(\d+)_(\d+)_i(\d+) ", line)
        if m:
            runs[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
            k += 1
    return runs


def load_profile(path):
    marks = {}      # tag -> insn.el2 total
    hist = collections.defaultdict(dict)  # tag -> addr -> count
    with gzip.open(path, "rt") as f:
        for line in f:
            p = line.split()
            if p[1] == "mark":
                tag = int(p[2], 16)
                kv = dict(x.split("=") for x in p[3:])
                marks[tag] = int(kv["insn.el2"])
            elif p[1] == "el2pc":
                hist[int(p[2], 16)][int(p[3], 16)] = int(p[4])
    return marks, hist


def load_syms(path):
    syms = []
    with gzip.open(path, "rt") as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[1] in "tTwW":
                syms.append((int(p[0], 16), p[2][len("__kvm_nvhe_"):]))
    syms.sort()
    return syms


def find_offset(addrs, syms):
    starts = {a for a, _ in syms}
    votes = collections.Counter()
    for a in addrs:
        for s in starts:
            d = (a - s) % (1 << 64)
            if d % 4096 == 0:
                votes[d] += 1
    (off, n), = votes.most_common(1)
    return off, n


def symbolize(addr, off, syms, keys):
    a = (addr - off) % (1 << 64)
    i = bisect.bisect_right(keys, a) - 1
    if i < 0:
        return "?"
    return syms[i][1]


def profile(out, kern, mode, runs):
    marks, hist = load_profile(os.path.join(out, f"{kern}-{mode}.el2pc.gz"))
    syms = load_syms(os.path.join(out, f"{kern}.nm.gz"))
    keys = [a for a, _ in syms]
    if not hist:
        sys.exit(f"el2pc-report: {kern} {mode}: no el2pc lines (was the plugin loaded with el2pc=on?)")
    last = max(hist)
    off, votes = find_offset(list(hist[last]), syms)

    def run(k):
        for tag in (2 * k, 2 * k + 1):
            if tag not in hist or tag not in marks:
                sys.exit(f"el2pc-report: {kern} {mode}: no marker {tag} (run {k} did not run "
                         f"or its marker printed nothing); see {kern}-{mode}.results")
        a, b = hist[2 * k], hist[2 * k + 1]
        d = collections.Counter()
        for addr, n in b.items():
            d[symbolize(addr, off, syms, keys)] += n - a.get(addr, 0)
        return d, marks[2 * k + 1] - marks[2 * k]

    byrep = collections.defaultdict(dict)
    for k, (v, rep, it) in runs.items():
        byrep[(v, rep)][it] = run(k)
    pairs = []
    for (v, rep), r in sorted(byrep.items()):
        (d4, t4), (d2, t2) = r[4], r[2]
        pages = 2 * PAGES * v
        per = {s: (d4[s] - d2.get(s, 0)) / pages for s in set(d4) | set(d2)}
        pairs.append((per, (t4 - t2) / pages))
    return pairs, off, votes, len(hist[last])


def main():
    out = sys.argv[1]
    runs = load_runs(out)
    files = sorted(f for f in os.listdir(out) if f.endswith(".el2pc.gz"))
    res = {}
    lines = ["# EL2 instructions per dirtied page, by hyp function", ""]
    lines += ["    " + l.rstrip() for l in open(os.path.join(out, "README.txt"))]
    lines += ["", "Per pair of runs: (-i 4 run − -i 2 run) / (2 × 8192 × vCPUs), "
              "by the function a TB starts in (a TB is counted whole: see "
              "scripts/elcount/README.md); the mean over pairs, and the range.", ""]
    for f in files:
        kern, mode = re.match(r"(.*)-(protected(?:-nvhe)?)\.el2pc\.gz$", f).groups()
        pairs, off, votes, naddr = profile(out, kern, mode, runs)
        res[(kern, mode)] = pairs
        lines.append(f"- {kern} {mode}: hyp VA offset 0x{off:x} ({votes} of {naddr} "
                     f"TB addresses start a function); {len(pairs)} pairs; "
                     f"insn.el2 per page {statistics.mean(t for _, t in pairs):.1f}, "
                     f"profile sum {statistics.mean(sum(p.values()) for p, _ in pairs):.1f}")
    lines.append("")
    kerns = sorted({k for k, _ in res})
    for mode in sorted({m for _, m in res}):
        have = [k for k in kerns if (k, mode) in res]
        mean = {k: collections.Counter() for k in have}
        rng = {k: {} for k in have}
        for k in have:
            pairs = res[(k, mode)]
            for s in set().union(*(p for p, _ in pairs)):
                vals = [p.get(s, 0.0) for p, _ in pairs]
                mean[k][s] = statistics.mean(vals)
                rng[k][s] = (min(vals), max(vals))
        allsyms = set().union(*(mean[k] for k in have))
        base = have[-1] if len(have) > 1 else None
        if base:
            def key(s):
                return (-round(abs(mean[have[0]][s] - mean[base][s]), 1), -mean[have[0]][s], s)
        else:
            def key(s):
                return (-mean[have[0]][s], s)
        lines.append(f"## {mode}")
        lines.append("")
        hdr = "| function | " + " | ".join(have)
        if base:
            hdr += f" | {have[0]} − {base}"
        lines.append(hdr + " |")
        lines.append("| --- " * (len(have) + 1 + (1 if base else 0)) + "|")
        tot = {k: sum(mean[k].values()) for k in have}
        for s in sorted(allsyms, key=key):
            if all(abs(mean[k][s]) < 0.5 for k in have):
                continue
            row = f"| {s} | " + " | ".join(
                f"{mean[k][s]:.1f} ({rng[k].get(s, (0, 0))[0]:.1f}–{rng[k].get(s, (0, 0))[1]:.1f})" for k in have)
            if base:
                row += f" | {mean[have[0]][s] - mean[base][s]:+.1f}"
            lines.append(row + " |")
        row = "| **all** | " + " | ".join(f"{tot[k]:.1f}" for k in have)
        if base:
            row += f" | {tot[have[0]] - tot[base]:+.1f}"
        lines.append(row + " |")
        lines.append("")
    open(os.path.join(out, "report.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
