#!/usr/bin/env python3
"""Turn the raw serial logs of `make bench-migrate` into results.csv (one
row per run) and results.md (every cell, the pairings, every planned run).

Usage: migrate-report.py <results dir> [--readme README.md]
With --readme, the README's section between "<!-- migrate:begin -->" and
"<!-- migrate:end -->" is replaced by this run's table, its run count and
its kernel.

Guest speed is computed from the rates the test prints in pages/s (a
round's over the rate before logging), not from the ratio it prints with
three decimals, which is 0.002 or 0.003 on the host path."""
import csv
import os
import re
import statistics
import sys

MODES = ("protected", "protected-nvhe", "nvhe", "vhe")
NAME = {"protected": "pKVM hVHE", "protected-nvhe": "pKVM nVHE", "nvhe": "nvhe", "vhe": "vhe"}
F = r"([0-9.]+)"


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def parse(path, label):
    m = re.match(r"(protected-nvhe|protected|nvhe|vhe)-b(\d+)$", label)
    mode, boot = m.group(1), int(m.group(2))
    text = open(path, errors="replace").read()
    for m in re.finditer(r"# start (g_(\w+?)_(\d+)_f(\w))\n(.*?)\n(ok|not ok) \d+ \1\b", text, re.S):
        name, log, vcpus, fast, body, status = m.groups()
        run = {"mode": mode, "boot": boot, "name": name, "log": log, "vcpus": int(vcpus),
               "fast": None if fast == "x" else int(fast), "ok": status == "ok"}

        def grab(pat, conv=float):
            g = re.search(pat, body)
            return conv(g.group(1)) if g else None
        run["base_rate"] = grab(r"Guest rate, logging off: " + F)
        run["enable_s"] = grab(r"Enable logging: " + F + "s")
        rounds = [tuple(map(float, g)) for g in re.findall(
            r"Round (\d+): (\d+) pages dirty, collect " + F + r"s \(re-protect " + F +
            r"s\), copy " + F + r"s, round " + F + r"s, guest rate " + F + r" pages/s \(" + F,
            body)]
        run["rounds"] = len(rounds)
        base = run["base_rate"]
        if rounds and base:
            r0, later = rounds[0], rounds[1:]
            # Exact: pages/s over pages/s (r[7] is the printed 3-decimal ratio).
            run["r0_speed"] = r0[6] / base
            run["r0_collect_s"] = r0[2]
            if later:
                run["speed"] = med([r[6] / base for r in later])
                run["collect_s"] = med([r[2] for r in later])
                run["reprotect_s"] = med([r[3] for r in later])
                run["dirty_per_round"] = med([r[1] for r in later])
        g = re.search(r"Blackout: " + F + r"s \(stop vCPUs " + F + r"s, collect " + F +
                      r"s, copy " + F + r"s\), (\d+) pages", body)
        if g:
            run["blackout_s"], run["stop_s"], run["final_collect_s"], run["final_copy_s"] = \
                map(float, g.groups()[:4])
            run["blackout_pages"] = int(g.group(5))
        g = re.search(r"Rounds: stage-2 faults resolved by the host: (\d+), at EL2: (\d+)", body)
        if g:
            run["host_faults"], run["el2_faults"] = map(int, g.groups())
        run["disable_s"] = grab(r"Disable logging: " + F + "s")
        after = grab(r"Guest rate, after logging off: " + F + " pages/s")
        run["after_speed"] = after / base if after is not None and base else None
        run["verified"] = "Destination matches the guest" in body
        run["pages"] = grab(r"Destination matches the guest: (\d+) pages", int)
        if run["ok"] and not run["verified"]:
            run["ok"], run["why"] = False, "no destination check line"
        yield run


COLUMNS = ["mode", "boot", "name", "log", "vcpus", "fast", "ok", "verified", "base_rate",
           "enable_s", "rounds", "r0_speed", "r0_collect_s", "speed", "collect_s", "reprotect_s",
           "dirty_per_round", "host_faults", "el2_faults", "blackout_s", "stop_s",
           "final_collect_s", "final_copy_s", "blackout_pages", "disable_s", "after_speed", "pages"]


def rng(v, fmt):
    v = [x for x in v if x is not None]
    if not v:
        return "–"
    return f"{fmt.format(med(v))} [{fmt.format(min(v))}–{fmt.format(max(v))}]"


def main(outdir, readme):
    raw = os.path.join(outdir, "raw")
    runs, planned = [], 0
    for name in sorted(os.listdir(raw)):
        if name.endswith(".log"):
            runs.extend(parse(os.path.join(raw, name), name[:-4]))
    for name in sorted(os.listdir(raw)):
        if not name.endswith(".list"):
            continue
        label = name[:-5]
        m = re.match(r"(protected-nvhe|protected|nvhe|vhe)-b(\d+)$", label)
        seen = {r["name"] for r in runs if r["mode"] == m.group(1) and r["boot"] == int(m.group(2))}
        for line in open(os.path.join(raw, name)):
            f = line.split()
            if len(f) < 2:
                continue
            planned += 1
            if f[1] not in seen:
                _, log, vcpus, fast = f[1].split("_")
                runs.append({"mode": m.group(1), "boot": int(m.group(2)), "name": f[1],
                             "log": log, "vcpus": int(vcpus),
                             "fast": None if fast == "fx" else int(fast[1:]), "ok": False,
                             "why": "no result line (not run: the boot hung or died)"})
    with open(os.path.join(outdir, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in runs:
            w.writerow([r.get(c) for c in COLUMNS])

    ok = [r for r in runs if r["ok"]]
    failed = [r for r in runs if not r["ok"]]

    def sel(**kw):
        return [r for r in ok if all(r.get(k) == v for k, v in kw.items())]

    kernel = "unknown (no kernel: line in README.txt)"
    for line in open(os.path.join(outdir, "README.txt")):
        if line.startswith("kernel:"):
            kernel = line.split(":", 1)[1].strip()
    lines = ["# Migration-shaped dirty logging (`make bench-migrate`)\n",
             open(os.path.join(outdir, "README.txt")).read().replace("\n", "  \n"),
             "Under QEMU TCG: compare within this run. The guest writes one word of each of "
             "its pages in turn, for the whole run; the host copies its memory in rounds "
             "(round 0 copies everything, rounds 1–4 what the log names, each at least 50 ms) "
             "while the vCPUs run, then stops them for the blackout and checks the copy word "
             "for word. *Guest speed* is the guest's pages written per second during a round "
             "over its rate before logging was turned on (1.0 = no slowdown), both as the "
             "test prints them in pages/s; rounds 1–4 give "
             "a run's value (their median), round 0 (the full copy, and with the bitmap the "
             "clear that splits the blocks) is apart. *Collect* is a round's "
             "KVM_GET_DIRTY_LOG + KVM_CLEAR_DIRTY_LOG (bitmap) or harvest + "
             "KVM_RESET_DIRTY_RINGS (ring) with the vCPUs in KVM_RUN. The *blackout* is "
             "stopping the vCPUs, the last collection and the last copy. Each cell is the "
             "median [min–max] over its runs (one per boot).\n",
             f"Runs: {planned} planned (raw/*.list), {len(ok)} ok (each with its destination "
             f"check), {len(failed)} failed.\n"]
    if failed:
        lines.append("**Failed runs**: " + ", ".join(
            f"{r['mode']} b{r['boot']} {r['name']}" + (f" ({r['why']})" if r.get("why") else "")
            for r in failed) + "\n")
    head = ["| mode | EL2 fast path | log | vCPUs | runs | guest speed, rounds 1–4 | "
            "guest speed, round 0 | collect (ms) | pages per round | faults per round "
            "(host / EL2) | blackout (ms) | logging off (ms) | guest speed after |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    table = []
    for mode in MODES:
        for fast in (1, 0, None):
            for log in ("bitmap", "ring"):
                for v in sorted({r["vcpus"] for r in ok}):
                    rs = sel(mode=mode, fast=fast, log=log, vcpus=v)
                    if not rs:
                        continue
                    nr = [r.get("rounds", 1) - 1 or 1 for r in rs]
                    fh = med([(r.get("host_faults") or 0) / n for r, n in zip(rs, nr)])
                    fe = med([(r.get("el2_faults") or 0) / n for r, n in zip(rs, nr)])
                    table.append(
                        f"| {NAME[mode]} | {'–' if fast is None else 'on' if fast else 'off'} | "
                        f"{log} | {v} | {len(rs)} | "
                        f"{rng([r.get('speed') for r in rs], '{:.3g}')} | "
                        f"{rng([r.get('r0_speed') for r in rs], '{:.3g}')} | "
                        f"{rng([r.get('collect_s') and r['collect_s'] * 1e3 for r in rs], '{:.1f}')} | "
                        f"{med([r.get('dirty_per_round') for r in rs]):.0f} | "
                        f"{fh:.0f} / {fe:.0f} | "
                        f"{rng([r.get('blackout_s') and r['blackout_s'] * 1e3 for r in rs], '{:.1f}')} | "
                        f"{rng([r.get('disable_s') and r['disable_s'] * 1e3 for r in rs], '{:.1f}')} | "
                        f"{rng([r.get('after_speed') for r in rs], '{:.2f}')} |")
    lines += ["\n## Every cell\n"] + head + table

    # Pairings: the fast path against the host path in the same boot, and
    # against nvhe (other boots: every pairing).
    pairs = ["| comparison | guest speed, rounds 1–4 (ratio) | blackout (ratio) | pairs | "
             "target | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    verdicts = []
    pair_speed, pair_black = [], []
    for mode in ("protected", "protected-nvhe"):
        for log in ("bitmap", "ring"):
            for v in sorted({r["vcpus"] for r in ok}):
                on = {r["boot"]: r for r in sel(mode=mode, fast=1, log=log, vcpus=v)}
                off = {r["boot"]: r for r in sel(mode=mode, fast=0, log=log, vcpus=v)}
                nv = sel(mode="nvhe", log=log, vcpus=v)
                both = sorted(set(on) & set(off))
                if both:
                    sp = [on[b]["speed"] / off[b]["speed"] for b in both
                          if on[b].get("speed") and off[b].get("speed")]
                    bl = [on[b]["blackout_s"] / off[b]["blackout_s"] for b in both
                          if on[b].get("blackout_s") and off[b].get("blackout_s")]
                    pair_speed.extend(sp)
                    pair_black.extend(bl)
                    if sp:
                        vd = "met" if min(sp) >= 1 else "missed"
                        verdicts.append(vd)
                        pairs.append(f"| {NAME[mode]}, {log}, {v} vCPU: fast path on / off | "
                                     f"{rng(sp, '{:.3g}')} | {rng(bl, '{:.3g}')} | "
                                     f"{len(sp)} boots | speed ≥ 1 | {vd} |")
                if on and nv:
                    sp = [a["speed"] / b["speed"] for a in on.values() for b in nv
                          if a.get("speed") and b.get("speed")]
                    bl = [a["blackout_s"] / b["blackout_s"] for a in on.values() for b in nv
                          if a.get("blackout_s") and b.get("blackout_s")]
                    if sp:
                        pairs.append(f"| {NAME[mode]}, {log}, {v} vCPU: fast path / nvhe | "
                                     f"{rng(sp, '{:.3g}')} | {rng(bl, '{:.3g}')} | "
                                     f"{len(on)}×{len(nv)} pairings | report | reported |")
    # What the pairs say, in one paragraph (the README quotes it).
    sp_all = [x for x in pair_speed if x]
    bl_all = [x for x in pair_black if x]
    frac_on = [r["dirty_per_round"] / r["pages"] for r in ok
               if r.get("fast") == 1 and r.get("dirty_per_round") is not None and r.get("pages")]
    frac_off = [r["dirty_per_round"] / r["pages"] for r in ok
                if r.get("fast") == 0 and r.get("dirty_per_round") is not None and r.get("pages")]
    summary = ""
    if sp_all and bl_all and frac_on and frac_off:
        summary = (f"Under pKVM the EL2 fast path made the guest {min(sp_all):.0f}x to "
                   f"{max(sp_all):.0f}x faster while its memory was tracked (per-boot pairs, "
                   f"every cell), with the vCPUs in `KVM_RUN` while the log was collected. "
                   f"A faster guest dirties more: with the fast path a round's log named "
                   f"{100 * med(frac_on):.0f}% of the guest's memory (median), without it "
                   f"{100 * med(frac_off):.0f}%, so the blackout, which copies what the last "
                   f"round left, was {min(bl_all):.0f}x to {max(bl_all):.0f}x longer with the "
                   f"fast path: with a guest that rewrites all its memory faster than a round, "
                   f"a VMM must throttle it (or copy after the stop) to converge. TCG weighs "
                   f"the host path's world switches far above an EL2 exception: the speed "
                   f"ratios are TCG's, not hardware's (`make bench-counts` gives the "
                   f"instruction counts).\n")
    lines += ["\n## Pairings\n",
              "The fast path on and off ran in the same boots: each boot is a pair. nvhe ran "
              "in other boots: every boot of one against every boot of the other. A ratio "
              "above 1 in guest speed, below 1 in blackout, favours the fast path.\n"] + pairs + \
        ["", summary]
    open(os.path.join(outdir, "results.md"), "w").write("\n".join(lines) + "\n")

    if readme:
        text = open(readme).read()
        begin, end = "<!-- migrate:begin -->", "<!-- migrate:end -->"
        if begin in text and end in text:
            src = os.path.relpath(outdir, os.path.dirname(os.path.abspath(readme)))
            body = (f"{begin}\nFrom [`{os.path.normpath(outdir)}/results.md`]({src}/results.md), generated by "
                    f"`scripts/migrate-report.py --readme` (do not edit by hand): run "
                    f"{os.path.basename(os.path.normpath(outdir))}, {len(ok)} of "
                    f"{planned} planned runs ok, each with its copy checked word for word; "
                    f"kernel {kernel}.\n\n" +
                    "\n".join(head + table) + "\n\n" + "\n".join(pairs) + "\n\n" + summary + f"{end}")
            text = text[:text.index(begin)] + body + text[text.index(end) + len(end):]
            open(readme, "w").write(text)


if __name__ == "__main__":
    args = sys.argv[1:]
    readme = None
    if "--readme" in args:
        i = args.index("--readme")
        readme = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or not os.path.isdir(os.path.join(args[0], "raw")):
        sys.exit("usage: migrate-report.py <results dir with raw/> [--readme README.md]")
    main(args[0], readme)
