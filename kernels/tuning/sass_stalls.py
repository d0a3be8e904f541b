#!/usr/bin/env python3
"""Summarise Nsight Compute's per-SASS-instruction warp-stall samples.

Input: the CSV of `ncu -i REPORT --page source --csv --print-source sass` (optionally xz-compressed),
taken with `--section SourceCounters` (attn_fwd_softmax_ilp.sh writes one). Prints the stall
reasons over the whole kernel, the instruction mix of the main loop (the execution count that
accounts for the most executed instructions: one trip of it) with its share of the samples, and
the instructions that carry the most samples of one reason.

    python3 kernels/tuning/sass_stalls.py docs/results/session63/r2-softmax-ilp-stalls/sass_i0.csv.xz
    python3 kernels/tuning/sass_stalls.py FILE --reason stall_wait --top 20
"""
import argparse
import collections
import csv
import io
import lzma

ALL = "Warp Stall Sampling (All Samples)"
EXEC = "Instructions Executed"


def opcode(source):
    words = source.split()
    if not words:
        return "?"
    return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu source-page CSV (.csv or .csv.xz)")
    ap.add_argument("--reason", default="stall_wait", help="the stall column to rank instructions by")
    ap.add_argument("--top", type=int, default=12, help="instructions to list")
    a = ap.parse_args()
    raw = lzma.open(a.csv, "rt") if a.csv.endswith(".xz") else open(a.csv)
    rows = list(csv.reader(io.StringIO(raw.read())))
    # The first row names the kernel; the second holds the column names.
    head, data = rows[1], [r for r in rows[2:] if len(r) == len(rows[1])]
    col = {name: i for i, name in enumerate(head)}

    def num(r, name):
        v = r[col[name]] if name in col else ""
        return int(v) if v.strip().isdigit() else 0

    total = sum(num(r, ALL) for r in data)
    print(f"kernel {rows[0][1] if len(rows[0]) > 1 else '?'}: {len(data)} instructions, {total} samples")
    reasons = [c for c in head if c.startswith("stall_") and "Not Issued" not in c]
    sums = sorted(((sum(num(r, c) for r in data), c) for c in reasons), reverse=True)
    print("stall reasons (share of samples): " + ", ".join(f"{c[6:]} {s / max(total, 1):.1%}" for s, c in sums if s))

    # The main loop: the execution count that accounts for the most executed instructions (a spin
    # wait runs more often but is two instructions long).
    weight = collections.Counter()
    for r in data:
        weight[num(r, EXEC)] += num(r, EXEC)
    hot = max(weight, key=weight.get)
    loop = [r for r in data if num(r, EXEC) == hot]
    mix = collections.Counter(opcode(r[col["Source"]]) for r in loop)
    share = sum(num(r, ALL) for r in loop) / max(total, 1)
    print(f"main loop (executed {hot} times): {len(loop)} instructions a trip, {share:.1%} of the samples")
    print("  " + ", ".join(f"{n} {op}" for op, n in mix.most_common(16)))

    print(f"top {a.top} by {a.reason}:")
    ranked = sorted(range(len(data)), key=lambda i: -num(data[i], a.reason))[: a.top]
    for i in sorted(ranked):
        r = data[i]
        print(f"  {i:5d} {num(r, a.reason):6d} (all {num(r, ALL):6d}) {r[col['Source']].strip()[:72]}")


if __name__ == "__main__":
    main()
