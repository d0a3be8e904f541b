#!/usr/bin/env python3
"""Averages nvidia-smi samples per phase of a lab run (kernels/tuning/power_clocks.sh).

    python3 tools/power_phases.py smi.csv marks.txt

smi.csv: `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,enforced.power.limit,
temperature.gpu,clocks_event_reasons.active --format=csv,noheader,nounits -lms 20`.
marks.txt: lines `YYYY/MM/DD HH:MM:SS.mmm begin NAME` / `... end NAME`.
Per phase: the samples while the GPU was busy (power at least 60% of the phase's peak), their
median SM clock, mean and peak power, peak temperature, and every clock-event reason seen.
"""
import statistics
import sys
from datetime import datetime

REASONS = {
    0x1: "idle",
    0x2: "app-clocks",
    0x4: "sw-power-cap",
    0x8: "hw-slowdown",
    0x10: "sync-boost",
    0x20: "sw-thermal",
    0x40: "hw-thermal",
    0x80: "hw-power-brake",
    0x100: "display-clocks",
}


def when(text):
    return datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f")


def samples(path):
    out = []
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 6:
            continue
        try:
            out.append((when(f[0]), float(f[1]), float(f[2]), float(f[3]), float(f[4]), int(f[5], 16)))
        except ValueError:
            continue
    return out


def phases(path):
    begun, out = {}, []
    for line in open(path):
        date, time, what, name = line.rstrip("\n").split(" ", 3)
        t = when(date + " " + time)
        if what == "begin":
            begun[name] = t
        elif name in begun:
            out.append((name, begun.pop(name), t))
    return out


def main():
    s, ph = samples(sys.argv[1]), phases(sys.argv[2])
    print(f"{'phase':<28} {'s':>5} {'busy':>4} {'SM MHz':>7} {'W mean':>7} {'W peak':>7} {'limit':>6} {'C':>3}  reasons")
    for name, t0, t1 in ph:
        inside = [x for x in s if t0 <= x[0] <= t1]
        if not inside:
            print(f"{name:<28} (no samples)")
            continue
        peak = max(x[2] for x in inside)
        busy = [x for x in inside if x[2] >= 0.6 * peak] or inside
        seen = 0
        for x in busy:
            seen |= x[5]
        why = ",".join(v for k, v in REASONS.items() if seen & k) or "-"
        print(
            f"{name:<28} {(t1 - t0).total_seconds():5.1f} {len(busy):4d} "
            f"{statistics.median(x[1] for x in busy):7.0f} {statistics.mean(x[2] for x in busy):7.1f} "
            f"{peak:7.1f} {busy[0][3]:6.0f} {max(x[4] for x in busy):3.0f}  {why}"
        )


if __name__ == "__main__":
    main()
