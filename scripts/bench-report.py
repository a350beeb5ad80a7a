#!/usr/bin/env python3
"""Turn the raw serial logs of `make bench` into results.csv, results.md and
speedup.png. Usage: bench-report.py <results dir> (with raw/<mode>.log)."""
import csv
import os
import re
import statistics
import sys

MODES = ["protected", "protected-nvhe", "nvhe", "vhe"]
WORKLOADS = ["w100", "w10", "stride"]
NUM = r"([0-9]+\.[0-9]+)s"


def parse_log(path):
    """Yield one dict per dirty_log_perf_test run in a serial log."""
    text = open(path, errors="replace").read()
    for m in re.finditer(r"# start (b_(\S+))\n(.*?)\n(ok|not ok) \d+ \1", text, re.S):
        name, body, status = m.group(1), m.group(3), m.group(4)
        split, work, vcpus, mp, rep = m.group(2).split("_")
        run = {"cell": (split, work, int(vcpus), mp), "rep": rep, "ok": status == "ok"}

        def grab(pattern, conv=float):
            g = re.search(pattern, body)
            return conv(g.group(1)) if g else None

        run["it2"] = grab(r"Iteration 2 dirty memory time: " + NUM)
        run["clear2"] = grab(r"Iteration 2 clear dirty log time: " + NUM)
        run["enable"] = grab(r"Enabling dirty logging time: " + NUM)
        run["faults2"] = grab(r"Iteration 2 stage-2 faults: (\d+)", int)
        s = re.search(r"pKVM split: hypercalls (\d+) blocks (\d+) tlbi (\d+) "
                      r"pages_donated (\d+) max_cycles (\d+) wrprotect_hypercalls (\d+)", body)
        if s:
            for k, v in zip(["hcalls", "blocks", "tlbi", "donated", "max_cycles", "wp_hcalls"],
                            map(int, s.groups())):
                run[k] = v
        yield run


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def fmt(st, unit="s", digits=3):
    if not st:
        return "–"
    med, lo, hi = st
    if unit == "s":
        return f"{med:.{digits}f} [{lo:.{digits}f}–{hi:.{digits}f}]"
    return f"{med:.0f} [{lo:.0f}–{hi:.0f}]"


def main(outdir):
    runs = {}
    for mode in MODES:
        path = os.path.join(outdir, "raw", f"{mode}.log")
        if os.path.exists(path):
            runs[mode] = list(parse_log(path))

    with open(os.path.join(outdir, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "split", "workload", "vcpus", "dirty_log", "rep", "ok",
                    "it2_dirty_s", "it2_clear_s", "enable_s", "it2_stage2_faults",
                    "split_hcalls", "blocks_split", "split_tlbi", "pages_donated",
                    "max_split_cycles", "wrprotect_hcalls"])
        for mode, rs in runs.items():
            for r in rs:
                w.writerow([mode, *r["cell"], r["rep"], r["ok"], r["it2"], r["clear2"],
                            r["enable"], r["faults2"], r.get("hcalls"), r.get("blocks"),
                            r.get("tlbi"), r.get("donated"), r.get("max_cycles"),
                            r.get("wp_hcalls")])

    def cell_runs(mode, split, work, v, mp):
        return [r for r in runs.get(mode, []) if r["cell"] == (split, work, v, mp)]

    lines = []
    out = lines.append
    out("# Dirty-logging benchmark (`make bench`)\n")
    out(open(os.path.join(outdir, "README.txt")).read().replace("\n", "  \n"))
    out("Times are under QEMU TCG emulation: compare ratios within this run, "
        "not absolute values with hardware. Each cell: median [min–max] over "
        "its repetitions; `it2` is the seed's \"Iteration 2 dirty memory time\"; "
        "faults are stage-2 memory faults of iteration 2 (vCPU stat "
        "`stage2_mem_faults`, exact under emulation).\n")
    failed = [(m, r["cell"], r["rep"]) for m, rs in runs.items() for r in rs if not r["ok"]]
    if failed:
        out(f"**{len(failed)} runs failed**: {failed[:10]}\n")

    vcpus = sorted({r["cell"][2] for rs in runs.values() for r in rs})
    speedups = {}
    for mp, mp_name in (("mp", "manual-protect + initially-set"), ("nomp", "no manual-protect (-g)")):
        out(f"\n## Dirty logging: {mp_name}\n")
        out("| mode | workload | vCPUs | it2 no split (s) | it2 split (s) | speed-up | "
            "faults no split | faults split | fault ratio | enable split (s) | clear it2 split (s) |")
        out("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for mode in MODES:
            if mode not in runs:
                continue
            for work in WORKLOADS:
                for v in vcpus:
                    a = cell_runs(mode, "0", work, v, mp)
                    b = cell_runs(mode, "2M", work, v, mp)
                    ta, tb = stats([r["it2"] for r in a]), stats([r["it2"] for r in b])
                    fa, fb = stats([r["faults2"] for r in a]), stats([r["faults2"] for r in b])
                    sp = ta[0] / tb[0] if ta and tb and tb[0] else None
                    fr = fa[0] / fb[0] if fa and fb and fb[0] else None
                    speedups[(mode, work, v, mp)] = sp
                    if fr:
                        ratio = f"{fr:.1f}x"
                    elif fa and fb and not fb[0]:
                        ratio = "all gone"
                    else:
                        ratio = "–"
                    out(f"| {mode} | {work} | {v} | {fmt(ta)} | {fmt(tb)} | "
                        f"{f'{sp:.2f}x' if sp else '–'} | {fmt(fa, '')} | {fmt(fb, '')} | "
                        f"{ratio} | {fmt(stats([r['enable'] for r in b]), 's', 4)} | "
                        f"{fmt(stats([r['clear2'] for r in b]), 's', 4)} |")

    out("\n## pKVM with eager split vs nvhe with eager split (it2 medians)\n")
    out("| workload | vCPUs | dirty log | protected / nvhe | protected-nvhe / nvhe |")
    out("| --- | --- | --- | --- | --- |")
    for mp in ("mp", "nomp"):
        for work in WORKLOADS:
            for v in vcpus:
                ref = stats([r["it2"] for r in cell_runs("nvhe", "2M", work, v, mp)])
                row = f"| {work} | {v} | {mp} |"
                for mode in ("protected", "protected-nvhe"):
                    st = stats([r["it2"] for r in cell_runs(mode, "2M", work, v, mp)])
                    row += f" {st[0] / ref[0]:.2f}x |" if st and ref else " – |"
                out(row)

    out("\n## pKVM split counters (runs with eager split on)\n")
    out("| mode | dirty log | blocks split / run | split hypercalls per block | "
        "broadcast TLBIs per block | pages donated per block | longest split call (cycles) | "
        "hypercalls per CLEAR word |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in ("protected", "protected-nvhe"):
        for mp in ("mp", "nomp"):
            rs = [r for r in runs.get(mode, []) if r["cell"][0] == "2M" and r["cell"][3] == mp
                  and r.get("blocks")]
            if not rs:
                continue
            blocks = sum(r["blocks"] for r in rs)
            hc = sum(r["hcalls"] for r in rs)
            tl = sum(r["tlbi"] for r in rs)
            dn = sum(r["donated"] for r in rs)
            mc = max(r["max_cycles"] for r in rs)
            per_word = "–"
            if mp == "mp":
                # 3 iterations, each clearing every 64-page word of the slot.
                words = sum(3 * (r["blocks"] * 512) / 64 for r in rs)
                per_word = f"{(hc + sum(r['wp_hcalls'] for r in rs)) / words:.2f}"
            out(f"| {mode} | {mp} | {blocks / len(rs):.0f} | {hc / blocks:.3f} | {tl / blocks:.3f} | "
                f"{dn / blocks:.2f} | {mc} | {per_word} |")
    out("\nHypercalls per CLEAR word counts split and write-protect hypercalls over "
        "all three iterations' KVM_CLEAR_DIRTY_LOG calls, divided by the 64-page "
        "words cleared (every word of the slot, each iteration).")
    open(os.path.join(outdir, "results.md"), "w").write("\n".join(lines) + "\n")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench-report: no matplotlib, no chart", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, mp in zip(axes, ("mp", "nomp")):
        width = 0.8 / len(MODES)
        for i, mode in enumerate(MODES):
            ys = [speedups.get((mode, w, vcpus[0] if vcpus else 1, mp)) or 0 for w in WORKLOADS]
            ax.bar([x + i * width for x in range(len(WORKLOADS))], ys, width, label=mode)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(WORKLOADS))])
        ax.set_xticklabels(["-w 100", "-w 10", "stride 2M"])
        ax.axhline(1, color="grey", lw=0.8)
        ax.set_title(f"{'manual-protect' if mp == 'mp' else 'no manual-protect'}, "
                     f"{vcpus[0] if vcpus else 1} vCPU")
        ax.set_ylabel("speed-up of iteration 2 (no split / split)")
    axes[0].legend()
    fig.suptitle("Eager split speed-up by workload and host mode (QEMU TCG, ratios within one run)")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "speedup.png"), dpi=100)


if __name__ == "__main__":
    main(sys.argv[1])
