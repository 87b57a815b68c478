#!/usr/bin/env python3
"""Sums `ncu --csv --page raw --metrics gpu__time_duration.sum` rows per kernel name: total us, count,
share of the profiled range. Usage: ncu_sum.py FILE.csv"""
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 5]
hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[hdr]; kn = h.index("Kernel Name"); tc = h.index("gpu__time_duration.sum")
unit = rows[hdr + 1][tc] if hdr + 1 < len(rows) else ""
tot = collections.OrderedDict(); cnt = collections.Counter()
for r in rows[hdr + 1:]:
    try: v = float(r[tc].replace(",", ""))
    except ValueError: continue
    name = r[kn].split("(")[0][:70]
    tot[name] = tot.get(name, 0.0) + v; cnt[name] += 1
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit, 1e-3)
all_ = sum(tot.values()) * scale
print(f"total {all_:.1f} us over {sum(cnt.values())} kernels (unit {unit})")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{v*scale:10.1f} us {100*v*scale/all_:5.1f}% {cnt[k]:5d}x  {k}")
