#!/usr/bin/env python3
"""One line per run of a file of `cupy_bench --cupy-script tools/cupy_bench.py` outputs
(each headed `=== cupy_bench run N`), then medians and pass counts.

    python3 tools/cupy_bench_summary.py RUNS.txt
"""
import re
import statistics as st
import sys


def us(cell):
    m = re.match(r"\s*([\d.]+) (us|ms)", cell)
    if not m:
        return None
    return float(m.group(1)) * (1000.0 if m.group(2) == "ms" else 1.0)


def runs(text):
    for block in re.split(r"^=== cupy_bench run ", text, flags=re.M)[1:]:
        rows = {}
        for line in block.splitlines():
            cells = [c for c in line.split("|")]
            if len(cells) >= 4:
                rows[cells[0].strip()] = [c.strip() for c in cells[1:]]
        yield block.split()[0], rows


def main():
    text = open(sys.argv[1]).read()
    out = []
    print("run | ours us | CuPy us | ours/CuPy | bare us (/CuPy) | ours beyond bare | "
          "back-to-back ours / CuPy (ratio) | bare back-to-back")
    for name, r in runs(text):
        host = r.get("host time per call, 1 element (sync after each)")
        bare = r.get("floor: bare cuLaunchKernel, same kernel shape")
        b2b = r.get("per call, 1000 back-to-back calls, 1 element")
        b2b_bare = r.get("floor: bare cuLaunchKernel, back-to-back")
        if not (host and bare and b2b and b2b_bare):
            print(f"{name}: incomplete")
            continue
        ours, cupy, bare_us = us(host[0]), us(host[1]), us(bare[0])
        # The program's own ratio: the median of its per-pair ratios (see cupy_bench).
        ratio = float(host[2].rstrip("x"))
        bo, bc = us(b2b[0]), us(b2b[1])
        out.append((ratio, ours - bare_us, cupy, bo / bc))
        print(f"{name:>3} | {ours:7.2f} | {cupy:7.3f} | {ratio:.2f}x {'PASS' if ratio <= 0.5 else 'miss'} | "
              f"{bare_us:.2f} ({bare_us / cupy:.2f}x) | {ours - bare_us:.2f} | "
              f"{bo:.2f} / {bc:.3f} ({bo / bc:.2f}x) | {us(b2b_bare[0]):.2f}")
    if not out:
        return
    rs = [o[0] for o in out]
    print(f"\nsync after each: median ratio {st.median(rs):.2f}x; "
          f"{sum(r <= 0.5 for r in rs)} of {len(rs)} runs <= 0.5x; range {min(rs):.2f}-{max(rs):.2f}x")
    bs = [o[3] for o in out]
    print(f"back-to-back: median {st.median(bs):.2f}x; {sum(b <= 0.5 for b in bs)} of {len(bs)} runs <= 0.5x")
    beyond = [o[1] for o in out]
    print(f"our call beyond the bare launch: median {st.median(beyond):.2f} us "
          f"(range {min(beyond):.2f}-{max(beyond):.2f})")
    fast = [o for o in out if o[2] < 9.5]
    if fast:
        print(f"runs where CuPy's call was under 9.5 us (its fast phase): {len(fast)}, "
              f"ratios {', '.join(f'{o[0]:.2f}x' for o in fast)}")


if __name__ == "__main__":
    main()
